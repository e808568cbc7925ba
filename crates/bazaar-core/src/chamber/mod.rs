//! The chamber's attack presses, as the live registry records them. A press of
//! "try to break it" runs its attack in a scratch registry the binary starts and
//! deletes; the live registry keeps only this: one `refusal.recorded` naming the
//! attack and the code it was refused with there. Only the registry itself
//! records one (the chamber's press route, after the scratch run's verdict);
//! it moves no money and touches no member. Uses the kernel only.

use crate::kernel::batch::{refuse, Batch, KernelEvent};
use crate::kernel::keys::Keys;
use crate::kernel::model::MemberKind;
use crate::kernel::refusal::{Code, Refusal};
use crate::kernel::request::Caller;
use serde::Serialize;

/// The longest attack name or refusal code a record holds.
pub const ATTACK_TEXT_MAX: usize = 64;

#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
pub enum Op {
    /// An attack of the binary's catalogue was refused with `code` (HTTP
    /// `status`; 0 when the refusal was not an HTTP answer) in a scratch registry.
    RecordAttackRefusal { attack: String, code: String, status: u16 },
}

/// Where the recorded refusal was met: always a scratch registry, never this one.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum MetIn {
    Scratch,
}

/// `refusal.recorded` for an attack press: `op` names the command as the
/// kernel's own refusal records do; `attack` and `code` what was refused, and how.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct AttackRefused {
    pub op: &'static str,
    pub attack: String,
    pub code: String,
    pub status: u16,
    pub met_in: MetIn,
}

crate::event_bodies!(AttackRefused => KernelEvent::RefusalRecorded);

/// What recording a press answers.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PressRecorded {
    pub attack: String,
    pub code: String,
}

crate::receipt_set! {
    /// Every success answer of a chamber command.
    #[derive(Clone, Debug, PartialEq, Eq, Serialize)]
    #[serde(untagged)]
    pub enum Receipt {
        PressRecorded(PressRecorded),
    }
}

/// The command's stable name (also the recorded event's `op`).
const RECORD_ATTACK_REFUSAL: &str = "record_attack_refusal";

impl Op {
    /// Recording a refusal moves nothing.
    pub fn moves_money(&self) -> bool {
        match self {
            Op::RecordAttackRefusal { .. } => false,
        }
    }

    pub fn name(&self) -> &'static str {
        match self {
            Op::RecordAttackRefusal { .. } => RECORD_ATTACK_REFUSAL,
        }
    }

    /// No rows besides the caller's.
    pub fn keys(&self, _keys: &mut Keys) {}

    pub(crate) fn apply(&self, batch: &mut Batch<'_>, caller: &Caller<'_>) -> Result<Receipt, Refusal> {
        match self {
            Op::RecordAttackRefusal { attack, code, status } => {
                if caller.actor.kind != MemberKind::Registry {
                    return refuse(Code::NotPermitted, "Only the registry records an attack press's refusal.");
                }
                for (what, text) in [("attack", attack), ("code", code)] {
                    let plain =
                        text.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'_');
                    if text.is_empty() || text.len() > ATTACK_TEXT_MAX || !plain {
                        return refuse(
                            Code::InvalidRequest,
                            format!("An attack's {what} is 1 to {ATTACK_TEXT_MAX} of a-z, 0-9, `-` and `_`."),
                        );
                    }
                }
                let body = AttackRefused {
                    op: RECORD_ATTACK_REFUSAL,
                    attack: attack.clone(),
                    code: code.clone(),
                    status: *status,
                    met_in: MetIn::Scratch,
                };
                batch.emit(caller, &body);
                Ok(Receipt::PressRecorded(PressRecorded { attack: attack.clone(), code: code.clone() }))
            }
        }
    }
}

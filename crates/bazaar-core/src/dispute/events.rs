//! Disputes' and stake's event bodies: one type per kind this capability
//! writes, each serialising to exactly the stored body (the kernel adds
//! `authored_handle`). The parts reputation reads (`DisputeFiled`,
//! `DisputeExecuted`, `StakeLocked`, `StakeWithdrawn`) are their own types,
//! flattened into the full bodies.

use super::phases::{Decision, Evidence, Frozen, Phase, ReasonCode, Ruling, Side, StakeView, Subject};
use super::DisputeEvent;
use bazaar_types::{Amount, DisputeId, MemberId, Timestamp, TransferId};
use serde::{Deserialize, Serialize};

/// `desk.created`: the registry's dispute desk enrolled, an agent of the operator.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeskCreated {
    #[serde(flatten)]
    pub member: crate::identity::events::Enrolled,
}

crate::event_bodies!(
    DeskCreated => DisputeEvent::DeskCreated,
    DisputeFiledBody => DisputeEvent::DisputeFiled,
    EvidenceAdded => DisputeEvent::DisputeEvidence,
    DisputeRuled => DisputeEvent::DisputeRuled,
    DisputeAppealed => DisputeEvent::DisputeAppealed,
    RulingOpened => DisputeEvent::DisputeRulingOpened,
    ArbiterReplaced => DisputeEvent::DisputeArbiterReplaced,
    DisputeExecutedBody => DisputeEvent::DisputeExecuted,
    StakeLockedBody => DisputeEvent::StakeLocked,
    StakeUnlockRequested => DisputeEvent::StakeUnlockRequested,
    StakeWithdrawnBody => DisputeEvent::StakeWithdrawn,
);

fn is_false(flag: &bool) -> bool {
    !flag
}

/// The part of `dispute.filed` reputation reads: a claim against a respondent (a mark on its record at once).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct DisputeFiled {
    pub dispute: DisputeId,
    pub subject: Subject,
    pub claimant: MemberId,
    pub respondent: MemberId,
}

/// Who a final ruling went to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Winner {
    Claimant,
    Split,
    Respondent,
}

impl Winner {
    pub fn as_str(self) -> &'static str {
        match self {
            Winner::Claimant => "claimant",
            Winner::Split => "split",
            Winner::Respondent => "respondent",
        }
    }
}

/// The part of `dispute.executed` reputation reads: the outcome it is computed from.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct DisputeExecuted {
    pub dispute: DisputeId,
    pub subject: Subject,
    pub claimant: MemberId,
    pub respondent: MemberId,
    pub winner: Winner,
    pub refunded_minor: Amount,
    pub released_minor: Amount,
    pub slashed_minor: Amount,
}

/// The part of `stake.locked` reputation reads.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct StakeLocked {
    pub member: MemberId,
    pub locked_minor: Amount,
}

/// The part of `stake.withdrawn` reputation reads.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct StakeWithdrawn {
    pub member: MemberId,
    pub withdrawn_minor: Amount,
}

/// `dispute.filed`, as stored: the claim, what it froze, and the respondent's deadline.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct DisputeFiledBody {
    #[serde(flatten)]
    pub filed: DisputeFiled,
    pub reason: ReasonCode,
    pub claimed_minor: Amount,
    pub frozen: Frozen,
    pub answer_by_ms: Timestamp,
}

/// `dispute.evidence`: one item added, and the phase it left the dispute in.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct EvidenceAdded {
    pub dispute: DisputeId,
    pub evidence: Evidence,
    pub phase: Phase,
}

/// `dispute.ruled`: an arbiter's ruling, or the default ruling against a silent respondent.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct DisputeRuled {
    pub dispute: DisputeId,
    pub ruling: Ruling,
    /// Stored (as `true`) only on a default ruling.
    #[serde(rename = "default", default, skip_serializing_if = "is_false")]
    pub by_default: bool,
}

/// `dispute.appealed`: who appealed, the bond held, and the new arbiter.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct DisputeAppealed {
    pub dispute: DisputeId,
    pub side: Side,
    pub bond_minor: Amount,
    pub arbiter: Option<MemberId>,
}

/// `dispute.ruling_opened`: evidence closed; the arbiter named rules.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RulingOpened {
    pub dispute: DisputeId,
    pub arbiter: Option<MemberId>,
}

/// `dispute.arbiter_replaced`: the arbiter missed its deadline.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ArbiterReplaced {
    pub dispute: DisputeId,
    pub missed: Option<MemberId>,
    pub arbiter: Option<MemberId>,
}

/// The appeal bond at execution: returned to the appellant, or forfeited to the other side.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct BondOutcome {
    pub by: MemberId,
    pub bond_minor: Amount,
    pub returned: bool,
    pub forfeited_to: Option<MemberId>,
}

/// How an execution moved money beyond what reputation reads: shared by
/// `dispute.executed`, the execution receipt and the dispute's stored outcome.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Execution {
    pub decision: Decision,
    /// A default ruling (no arbiter ruled).
    #[serde(rename = "default")]
    pub by_default: bool,
    pub rounds: u8,
    pub shortfall_minor: Amount,
    pub slash_to_claimant_minor: Amount,
    pub slash_to_insurance_minor: Amount,
    /// `null` when nobody appealed.
    pub bond: Option<BondOutcome>,
    pub transfers: Vec<TransferId>,
    pub executed_at_ms: Timestamp,
}

/// `dispute.executed`, as stored: the outcome and how it was executed.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct DisputeExecutedBody {
    #[serde(flatten)]
    pub executed: DisputeExecuted,
    #[serde(flatten)]
    pub execution: Execution,
}

/// `stake.locked`, as stored: the lock, its transfer, and the stake after it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct StakeLockedBody {
    #[serde(flatten)]
    pub locked: StakeLocked,
    pub transfer: TransferId,
    pub stake: StakeView,
}

/// `stake.unlock_requested`: the cooldown started on part of the stake.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct StakeUnlockRequested {
    pub member: MemberId,
    pub unlock_minor: Amount,
    pub available_at_ms: Timestamp,
}

/// `stake.withdrawn`, as stored: the transfer only when something moved.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct StakeWithdrawnBody {
    #[serde(flatten)]
    pub withdrawn: StakeWithdrawn,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub transfer: Option<TransferId>,
}

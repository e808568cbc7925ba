//! What disputes and stake answer on success: one type per distinct answer.
//! Receipts are not event bodies even where they carry the same fields; they
//! share the nested parts (`DisputeExecuted`, `Execution`, `StakeLocked`, …).

use super::events::{DisputeExecuted, Execution, StakeLocked, StakeWithdrawn};
use super::phases::{Dispute, Evidence, Phase, StakeView};
use bazaar_types::{Amount, DisputeId, MemberId, Timestamp, TransferId};
use serde::{Deserialize, Serialize};

/// A final ruling executed, once; kept as the dispute's outcome and attached again to a second ask.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Executed {
    #[serde(flatten)]
    pub executed: DisputeExecuted,
    #[serde(flatten)]
    pub execution: Execution,
}

/// An item of evidence added, and the phase it left the dispute in.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct EvidenceAccepted {
    pub dispute: DisputeId,
    pub evidence: Evidence,
    pub phase: Phase,
}

/// The sweeper found nothing due on this dispute.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct NotAdvanced {
    pub dispute: DisputeId,
    pub phase: Phase,
    /// Always `false`: the answer says nothing moved.
    pub advanced: bool,
}

/// Stake locked: the lock, its transfer, and the stake after it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct Locked {
    #[serde(flatten)]
    pub locked: StakeLocked,
    pub transfer: TransferId,
    pub stake: StakeView,
}

/// The unlock cooldown started.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct UnlockRequested {
    pub member: MemberId,
    pub unlock_minor: Amount,
    pub available_at_ms: Timestamp,
}

/// Unlocked stake moved back to the balance (no transfer when nothing was left to move).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct Withdrawn {
    #[serde(flatten)]
    pub withdrawn: StakeWithdrawn,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub transfer: Option<TransferId>,
}

crate::receipt_set! {
    /// Every success answer of a dispute or stake command.
    #[derive(Clone, Debug, PartialEq, Serialize)]
    #[serde(untagged)]
    pub enum Receipt {
        /// The dispute as stored, after filing or an act that did not execute it.
        Dispute(Box<Dispute>),
        Executed(Box<Executed>),
        Evidence(EvidenceAccepted),
        NotAdvanced(NotAdvanced),
        Locked(Locked),
        UnlockRequested(UnlockRequested),
        Withdrawn(Withdrawn),
        /// The desk's enrolment, as identity answers it.
        Desk(crate::identity::receipts::Joined),
    }
}

impl From<Dispute> for Receipt {
    fn from(dispute: Dispute) -> Receipt {
        Receipt::Dispute(Box::new(dispute))
    }
}

impl From<Executed> for Receipt {
    fn from(executed: Executed) -> Receipt {
        Receipt::Executed(Box::new(executed))
    }
}

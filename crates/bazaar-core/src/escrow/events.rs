//! Escrow's event bodies: one type per kind escrow writes, each serialising to
//! exactly the stored body (the kernel adds `authored_handle`). The parts other
//! capabilities read (`ContractCreated`, `MilestoneReleased`) are their own
//! types, flattened into the full bodies, so a reader decodes only what it needs
//! (`MilestoneReclaimed` likewise, though no capability reads it yet).

use super::EscrowEvent;
use bazaar_types::{Amount, ContractId, HoldId, MemberId, Timestamp, TransferId};
use serde::{Deserialize, Serialize};

/// The part of `contract.created` every writer stores: who buys under a
/// contract (reputation credits its milestones to this buyer).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ContractCreated {
    pub contract: ContractId,
    pub buyer: MemberId,
    pub seller: MemberId,
    pub arbiter: MemberId,
    pub total_minor: Amount,
    pub milestones: usize,
}

/// `contract.created` by a buyer's own request: the contract is offered to the
/// seller under the terms' hash. (The market's share contracts have their own body.)
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ContractOffered {
    #[serde(flatten)]
    pub created: ContractCreated,
    pub terms_sha256: String,
}

/// `contract.accepted`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ContractAccepted {
    pub contract: ContractId,
}

/// What a contract ended before acceptance gave back to its buyer: the body
/// of `contract.declined` and `contract.cancelled`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ContractVoided {
    pub contract: ContractId,
    pub released_minor: Amount,
}

/// `contract.declined`: the seller said no; every hold went back to the buyer.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct ContractDeclined(pub ContractVoided);

/// `contract.cancelled`: the buyer withdrew its offer before the seller accepted.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct ContractCancelled(pub ContractVoided);

/// A milestone marked delivered: shared by `milestone.delivered` and the deliver receipt.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Delivery {
    pub contract: ContractId,
    pub milestone: u32,
    pub evidence_sha256: String,
    pub review_deadline_ms: Timestamp,
}

/// `milestone.delivered`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct MilestoneDelivered {
    #[serde(flatten)]
    pub delivery: Delivery,
}

/// The part of `milestone.released` reputation reads: a milestone paid to its seller, once.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct MilestoneReleased {
    pub contract: ContractId,
    pub milestone: u32,
    pub seller: MemberId,
    pub amount_minor: Amount,
}

/// How a release paid out: shared by `milestone.released` and the release receipt.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Payout {
    pub net_minor: Amount,
    pub fee_minor: Amount,
    pub transfers: Vec<TransferId>,
    pub link: String,
    pub released_at_ms: Timestamp,
    /// Released by the sweeper after the review window, not by the buyer.
    pub automatic: bool,
}

/// `milestone.released`, as stored: the release and how it paid out.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct MilestoneReleasedBody {
    #[serde(flatten)]
    pub released: MilestoneReleased,
    #[serde(flatten)]
    pub payout: Payout,
}

/// The part of `milestone.reclaimed` a reader needs: an undelivered
/// milestone's hold given back to its buyer, once, after its due date and the
/// grace (`MILESTONE_RECLAIM_GRACE_S`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct MilestoneReclaimed {
    pub contract: ContractId,
    pub milestone: u32,
    pub buyer: MemberId,
    pub seller: MemberId,
    pub amount_minor: Amount,
    pub due_at_ms: Timestamp,
    /// When the reclaim became possible: the due date plus the grace.
    pub reclaimable_at_ms: Timestamp,
}

/// How a reclaim resolved its hold: voided back to the buyer's balance, and
/// the held units back to its budget as for any voided hold.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Reclaim {
    pub hold: HoldId,
    pub refunded_minor: Amount,
    pub reclaimed_at_ms: Timestamp,
}

/// `milestone.reclaimed`, as stored.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct MilestoneReclaimedBody {
    #[serde(flatten)]
    pub reclaimed: MilestoneReclaimed,
    #[serde(flatten)]
    pub reclaim: Reclaim,
}

crate::event_bodies!(
    ContractOffered => EscrowEvent::ContractCreated,
    ContractAccepted => EscrowEvent::ContractAccepted,
    ContractDeclined => EscrowEvent::ContractDeclined,
    ContractCancelled => EscrowEvent::ContractCancelled,
    MilestoneDelivered => EscrowEvent::MilestoneDelivered,
    MilestoneReleasedBody => EscrowEvent::MilestoneReleased,
    MilestoneReclaimedBody => EscrowEvent::MilestoneReclaimed,
);

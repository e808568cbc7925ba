//! What escrow answers on success: one type per distinct answer. Receipts are
//! not event bodies even where they carry the same fields; they share the
//! nested parts (`Delivery`, `MilestoneReleased`, `Payout`) instead.

use super::contract::Contract;
use super::events::{Delivery, MilestoneReclaimed, MilestoneReleased, Payout, Reclaim};
use bazaar_types::{Amount, ContractId};
use serde::{Deserialize, Serialize};

/// A contract as the API shows it: the stored contract and what it still holds.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct ContractView {
    #[serde(flatten)]
    pub contract: Contract,
    pub held_minor: Amount,
}

/// A milestone marked delivered: the review window is open until the deadline.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct Delivered {
    #[serde(flatten)]
    pub delivery: Delivery,
}

/// A milestone released, once; kept on the milestone and attached again to a second ask.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Released {
    #[serde(flatten)]
    pub released: MilestoneReleased,
    #[serde(flatten)]
    pub payout: Payout,
}

/// An undelivered milestone reclaimed by its buyer after the due date and the grace.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct Reclaimed {
    #[serde(flatten)]
    pub reclaimed: MilestoneReclaimed,
    #[serde(flatten)]
    pub reclaim: Reclaim,
}

/// The sweeper's pass over one contract: every milestone it released.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct ReleasedDue {
    pub contract: ContractId,
    pub released: Vec<Released>,
}

crate::receipt_set! {
    /// Every success answer of an escrow command.
    #[derive(Clone, Debug, PartialEq, Eq, Serialize)]
    #[serde(untagged)]
    pub enum Receipt {
        Contract(ContractView),
        Delivered(Delivered),
        Released(Released),
        ReleasedDue(ReleasedDue),
        Reclaimed(Reclaimed),
    }
}

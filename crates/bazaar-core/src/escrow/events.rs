//! Escrow's event bodies that other capabilities read.

use bazaar_types::{Amount, ContractId, MemberId};
use serde::{Deserialize, Serialize};

/// `contract.created`: who buys under a contract (reputation credits its milestones to this buyer).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ContractCreated {
    pub contract: ContractId,
    pub buyer: MemberId,
    pub seller: MemberId,
    pub arbiter: MemberId,
    pub total_minor: Amount,
    pub milestones: usize,
}

/// `milestone.released`: a milestone paid to its seller, once.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct MilestoneReleased {
    pub contract: ContractId,
    pub milestone: u32,
    pub seller: MemberId,
    pub amount_minor: Amount,
}

//! Disputes' event bodies that other capabilities read.

use super::phases::Subject;
use bazaar_types::{Amount, DisputeId, MemberId};
use serde::{Deserialize, Serialize};

/// `dispute.filed`: a claim against a respondent (a mark on its record at once).
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

/// `dispute.executed`: the outcome reputation is computed from.
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

/// `stake.locked`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct StakeLocked {
    pub member: MemberId,
    pub locked_minor: Amount,
}

/// `stake.withdrawn`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct StakeWithdrawn {
    pub member: MemberId,
    pub withdrawn_minor: Amount,
}

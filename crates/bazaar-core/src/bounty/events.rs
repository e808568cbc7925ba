//! The bodies bounties write: one type per kind.

use super::BountyEvent;
use bazaar_types::{Amount, MemberId, Timestamp, TransferId};
use serde::{Deserialize, Serialize};

/// `bounty.funded`: a job's reward held on its poster's budget.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct BountyFunded {
    pub bounty: String,
    pub job: String,
    pub poster: MemberId,
    pub amount_minor: Amount,
    pub claim_until_ms: Timestamp,
}

/// How a bounty paid out, shared by `bounty.released` and the reward receipt:
/// gross, protocol fee and net apart, and the transfers that moved them.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RewardPaid {
    pub bounty: String,
    pub job: String,
    pub worker: MemberId,
    pub destination: MemberId,
    pub gross_minor: Amount,
    pub fee_minor: Amount,
    pub net_minor: Amount,
    pub transfers: Vec<TransferId>,
    pub link: String,
    /// The validator's signed verdict (a Nostr event id) that released it.
    pub verdict_event: String,
    pub result_event: Option<String>,
    pub released_at_ms: Timestamp,
}

/// `bounty.released`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct BountyReleased {
    #[serde(flatten)]
    pub paid: RewardPaid,
}

/// `bounty.withdrawn`: no accepted outcome within the claim window; the hold went back.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct BountyWithdrawn {
    pub bounty: String,
    pub job: String,
    pub poster: MemberId,
    pub refunded_minor: Amount,
}

crate::event_bodies!(
    BountyFunded => BountyEvent::BountyFunded,
    BountyReleased => BountyEvent::BountyReleased,
    BountyWithdrawn => BountyEvent::BountyWithdrawn,
);

//! Bounties: a job's reward on the labor market, held on its poster and paid once on the validator's verdict.

use serde::{Deserialize, Serialize};

/// A job's reward, held on its poster until a verdict releases it or the claim window closes.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Bounty {
    /// `bty_…`
    pub id: String,
    /// The job's Nostr event id.
    pub job: String,
    /// The job's author (x-only Nostr key): the only key whose verdict releases the reward.
    pub validator: String,
    pub poster: String,
    pub amount: u64,
    /// The hold on the poster's account.
    pub hold: String,
    /// `funded`, `released` or `withdrawn`.
    pub state: String,
    pub funded_at: i64,
    pub claim_until: i64,
    #[cfg_attr(feature = "openapi", schema(required = true))]
    pub resolved_at: Option<i64>,
    /// The worker paid, once released.
    #[cfg_attr(feature = "openapi", schema(required = true))]
    pub worker: Option<String>,
    pub refunded: u64,
}

/// Bounties naming a party, by id.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct BountyPage {
    pub bounties: Vec<Bounty>,
    #[cfg_attr(feature = "openapi", schema(required = true))]
    pub next_after: Option<String>,
}

/// A released reward: gross, protocol fee and net, and the transfers that paid it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Reward {
    /// `rwd_…`
    pub id: String,
    pub bounty: String,
    pub job: String,
    pub worker: String,
    /// The account paid: the worker or its owner.
    pub destination: String,
    pub gross_minor: u64,
    pub fee_minor: u64,
    pub net_minor: u64,
    pub transfers: Vec<String>,
    pub link: String,
    /// The validator's signed verdict (a Nostr event id) that released it.
    pub verdict_event: String,
    #[cfg_attr(feature = "openapi", schema(required = true))]
    pub result_event: Option<String>,
    pub released_at_ms: i64,
}

/// Sums over an agent's confirmed rewards.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct EarningsTotals {
    pub gross_minor: u64,
    pub fee_minor: u64,
    pub net_minor: u64,
}

/// An agent's earnings: only rewards the ledger confirmed, with their totals.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Earnings {
    pub agent: String,
    pub rewards: Vec<Reward>,
    pub totals: EarningsTotals,
    /// False when the agent has more rewards than one answer reads (`EARNINGS_RECORDS_MAX`).
    pub complete: bool,
}

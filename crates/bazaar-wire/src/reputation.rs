//! Reputation as published: a member's figures, stake, the imports that count
//! and their combination. The core's fold answers these types
//! (`bazaar_core::reputation` re-exports them), and a passport carries the
//! figures in its `credentialSubject`.

use serde::{Deserialize, Serialize};

/// The figures published for one member: the raw counts beside the score.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct Figures {
    pub formula: String,
    pub window_days: i64,
    /// The instant ages were measured from.
    pub computed_at_ms: i64,
    /// Work paid for by another owner within the window (calls and milestones).
    pub settled_count: u64,
    /// … of which stood in full.
    pub success_count: u64,
    /// … of which a dispute refunded some or all.
    pub failure_count: u64,
    /// Units paid for that work, as a decimal string.
    pub settled_volume_minor: String,
    /// Work paid for by an agent of the member's own owner: never counted.
    pub excluded_same_owner: u64,
    pub disputes_filed: u64,
    pub disputes_lost: u64,
    pub disputes_won: u64,
    pub disputes_split: u64,
    /// Disputes that ended with units back to the claimant.
    pub refunds: u64,
    pub distinct_buyer_owners: u64,
    /// The largest buyer owner's share of the volume.
    pub top_buyer_share_bps: u64,
    /// r: decayed successes after the per-owner weekly cap, in ppm of one job.
    pub weighted_success_ppm: u64,
    /// s: decayed failures (never capped), in ppm of one job.
    pub weighted_failure_ppm: u64,
    /// ⌊10 000 · (r + 1) / (r + s + 2)⌋ — the Beta expectation.
    pub score_bps: u64,
    /// Wilson 95 % lower bound over the undecayed, capped counts.
    pub score_lower_bound_bps: u64,
}

/// Stake: collateral a merchant locked. Published beside reputation, never in it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct StakeFigures {
    pub locked_minor: String,
    pub slashed_minor: String,
    pub slash_count: u64,
}

/// Reputation imported from a recognised registry, counted with its weight.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct Imported {
    pub registry: String,
    pub weight_bps: u64,
    pub weighted_success_ppm: u64,
    pub weighted_failure_ppm: u64,
    pub score_bps: u64,
    pub valid_until_ms: i64,
}

/// Local figures combined with imported ones: r_total = r_local + Σ wₖ·rₖ (same for s).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct Combined {
    pub weighted_success_ppm: u64,
    pub weighted_failure_ppm: u64,
    pub score_bps: u64,
}

/// The ledger position figures are computed as of.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct LedgerPosition {
    pub ledger_seq: u64,
    /// The hash of the event at `ledger_seq` (hex).
    pub ledger_head: String,
}

/// Everything published about one DID, computed from the ledger now.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Reputation {
    pub subject: String,
    /// This registry's figures (counts, volume, score; see docs for the formula).
    pub local: Figures,
    pub stake: StakeFigures,
    /// Peers' passports imported for this subject and still valid.
    pub imported: Vec<Imported>,
    /// Local and imported figures combined.
    pub combined: Combined,
    pub as_of: LedgerPosition,
}

//! Disputes' and stake's response bodies.

use serde::{Deserialize, Serialize};

/// What a dispute is about: a settled paid call, or one milestone of an escrowed contract.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(tag = "type", rename_all = "snake_case", deny_unknown_fields)]
pub enum DisputeSubject {
    /// The paid call the merchant settled for `order_id`.
    Call { merchant: String, order_id: String },
    /// Milestone `index` (from 0) of `contract`.
    Milestone { contract: String, index: u32 },
}

/// A dispute's whole record.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Dispute {
    pub id: String,
    pub subject: DisputeSubject,
    pub claimant: String,
    pub respondent: String,
    pub filed_by: String,
    /// `not_delivered`, `not_as_described`, `defective`, `unauthorized` or `other`.
    pub reason: String,
    pub note: String,
    /// The amount claimed, minor units.
    pub claimed: u64,
    /// What the claimant paid for the subject: the most a ruling can refund.
    pub at_risk: u64,
    /// What was frozen when it was filed, and from where.
    #[cfg_attr(feature = "openapi", schema(value_type = Object))]
    pub frozen: serde_json::Value,
    /// `filed`, `evidence`, `ruling`, `appealable` or `executed`.
    pub phase: String,
    /// When the current phase ends, Unix milliseconds.
    #[cfg_attr(feature = "openapi", schema(required = true))]
    pub deadline: Option<i64>,
    /// 1, or 2 after an appeal.
    pub round: u8,
    /// The arbiter assigned now.
    #[cfg_attr(feature = "openapi", schema(required = true))]
    pub arbiter: Option<String>,
    pub arbiters_used: Vec<String>,
    /// Whether the respondent answered.
    pub responded: bool,
    #[cfg_attr(feature = "openapi", schema(value_type = Vec<Object>))]
    pub evidence: Vec<serde_json::Value>,
    #[cfg_attr(feature = "openapi", schema(value_type = Vec<Object>))]
    pub rulings: Vec<serde_json::Value>,
    #[cfg_attr(feature = "openapi", schema(value_type = Option<Object>, required = true))]
    pub appeal: Option<serde_json::Value>,
    /// What execution moved; set once executed.
    #[cfg_attr(feature = "openapi", schema(value_type = Option<Object>, required = true))]
    pub outcome: Option<serde_json::Value>,
    /// Each phase entered, when and why.
    #[cfg_attr(feature = "openapi", schema(value_type = Vec<Object>))]
    pub timeline: Vec<serde_json::Value>,
    /// Unix milliseconds.
    pub filed_at: i64,
}

/// A page of disputes.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct DisputePage {
    pub disputes: Vec<Dispute>,
    /// Pass as `after` for the next page; null on an empty page.
    #[cfg_attr(feature = "openapi", schema(required = true))]
    pub next_after: Option<String>,
}

/// Evidence recorded on a dispute.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct EvidenceAdded {
    pub dispute: String,
    /// The evidence item as recorded (side, SHA-256, URL, signature, time).
    #[cfg_attr(feature = "openapi", schema(value_type = Object))]
    pub evidence: serde_json::Value,
    /// The phase after it (a respondent's first evidence is its answer).
    pub phase: String,
}

/// A member's stake: the stake account and the record beside it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Stake {
    pub member: String,
    pub balance_minor: i64,
    /// The part frozen by open disputes.
    pub frozen_minor: u64,
    pub open_disputes: u32,
    /// A pending unlock: `amount`, `requested_at`, `available_at`; null if none.
    #[cfg_attr(feature = "openapi", schema(value_type = Option<Object>, required = true))]
    pub unlock: Option<serde_json::Value>,
    /// The member's handle (`GET /v1/stake/{member}` only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub handle: Option<String>,
}

/// Units moved from the balance into the stake account.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct StakeLocked {
    pub member: String,
    pub locked_minor: u64,
    /// The transfer posted.
    pub transfer: String,
    /// The stake after it.
    pub stake: Stake,
}

/// The cooldown started on part of the stake.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct StakeUnlocking {
    pub member: String,
    pub unlock_minor: u64,
    /// When it can be withdrawn, Unix milliseconds.
    pub available_at_ms: i64,
}

/// Unlocked stake moved back to the balance.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct StakeWithdrawn {
    pub member: String,
    pub withdrawn_minor: u64,
    /// The transfer posted; absent when nothing was left to move.
    #[cfg_attr(feature = "openapi", schema(required = true))]
    pub transfer: Option<String>,
}

/// What executing a final ruling moved.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct DisputeOutcome {
    pub dispute: String,
    pub subject: DisputeSubject,
    pub claimant: String,
    pub respondent: String,
    /// `claimant`, `split` or `respondent`.
    pub winner: String,
    pub refunded_minor: u64,
    pub released_minor: u64,
    pub slashed_minor: u64,
    /// `refund_full`, `refund_partial` or `reject`.
    pub decision: String,
    /// True when the ruling was made by default (no arbiter ruled in time).
    pub default: bool,
    pub rounds: u8,
    /// What the respondent's stake could not cover.
    pub shortfall_minor: u64,
    pub slash_to_claimant_minor: u64,
    pub slash_to_insurance_minor: u64,
    /// The appeal bond's fate, when there was an appeal.
    #[cfg_attr(feature = "openapi", schema(value_type = Option<Object>, required = true))]
    pub bond: Option<serde_json::Value>,
    /// The transfer ids posted.
    pub transfers: Vec<String>,
    /// Unix milliseconds.
    pub executed_at_ms: i64,
}

/// A ruling's answer: the dispute, open to appeal, after a first ruling; the
/// execution outcome after a second (final) one.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(untagged)]
pub enum RulingAnswer {
    Ruled(Dispute),
    Executed(DisputeOutcome),
}

//! Escrow's response bodies: contracts, their milestones, deliveries and
//! release receipts.

use serde::{Deserialize, Serialize};

/// One milestone of a contract, with the hold that funds it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Milestone {
    pub index: u32,
    /// Units, minor.
    pub amount: u64,
    pub description: String,
    /// Unix milliseconds.
    pub due_at: i64,
    /// The hold on the buyer's budget.
    pub hold: String,
    /// `pending`, `delivered`, `released`, `disputed`, `resolved`, `voided` or `reclaimed`.
    pub state: String,
    #[cfg_attr(feature = "openapi", schema(required = true))]
    pub delivered_at: Option<i64>,
    #[cfg_attr(feature = "openapi", schema(required = true))]
    pub evidence_sha256: Option<String>,
    /// When a delivered milestone is released if the buyer stays silent.
    #[cfg_attr(feature = "openapi", schema(required = true))]
    pub review_deadline: Option<i64>,
    #[cfg_attr(feature = "openapi", schema(required = true))]
    pub released_at: Option<i64>,
    /// The release receipt (as `MilestoneReleased`), returned again to anyone who asks twice.
    #[cfg_attr(feature = "openapi", schema(value_type = Option<Object>, required = true))]
    pub release: Option<serde_json::Value>,
    /// The dispute that froze it.
    #[cfg_attr(feature = "openapi", schema(required = true))]
    pub dispute: Option<String>,
    /// When the buyer reclaimed it, Unix milliseconds; absent unless reclaimed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reclaimed_at: Option<i64>,
}

/// An escrowed contract and what it still holds.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Contract {
    pub id: String,
    pub buyer: String,
    pub seller: String,
    pub arbiter: String,
    /// Every milestone's amount together, minor units.
    pub total: u64,
    /// SHA-256 of the terms both sides agreed to.
    pub terms_sha256: String,
    pub review_window_s: u64,
    /// `offered`, `accepted`, `declined`, `cancelled` or `completed`.
    pub state: String,
    pub milestones: Vec<Milestone>,
    /// Unix milliseconds.
    pub created_at: i64,
    #[cfg_attr(feature = "openapi", schema(required = true))]
    pub accepted_at: Option<i64>,
    /// Paid to the seller so far, after fees.
    pub released_net: u64,
    pub fees: u64,
    pub refunded: u64,
    /// Still on hold for the milestones.
    pub held_minor: u64,
}

/// A page of contracts.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ContractPage {
    pub contracts: Vec<Contract>,
    /// Pass as `after` for the next page; null on an empty page.
    #[cfg_attr(feature = "openapi", schema(required = true))]
    pub next_after: Option<String>,
}

/// A milestone marked delivered; the buyer's review window runs.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct MilestoneDelivered {
    pub contract: String,
    pub milestone: u32,
    pub evidence_sha256: String,
    /// When it releases by itself if the buyer stays silent.
    pub review_deadline_ms: i64,
}

/// An undelivered milestone's hold given back to its buyer after the due date and the grace.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct MilestoneReclaimed {
    pub contract: String,
    pub milestone: u32,
    pub buyer: String,
    pub seller: String,
    pub amount_minor: u64,
    /// The milestone's due date, Unix milliseconds.
    pub due_at_ms: i64,
    /// The due date plus the grace: the first instant a reclaim was allowed.
    pub reclaimable_at_ms: i64,
    /// The milestone's hold, voided back to the buyer.
    pub hold: String,
    /// Back on the buyer's balance and budget.
    pub refunded_minor: u64,
    /// Unix milliseconds.
    pub reclaimed_at_ms: i64,
}

/// A milestone released to the seller, less the fee.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct MilestoneReleased {
    pub contract: String,
    pub milestone: u32,
    pub seller: String,
    pub amount_minor: u64,
    pub net_minor: u64,
    pub fee_minor: u64,
    /// The transfer ids posted.
    pub transfers: Vec<String>,
    pub link: String,
    /// Unix milliseconds.
    pub released_at_ms: i64,
    /// True when the review window ran out rather than the buyer releasing.
    pub automatic: bool,
}

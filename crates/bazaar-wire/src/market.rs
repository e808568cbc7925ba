//! The storefront's response bodies: listings, searches, requests for quote,
//! offers, allocations and orders.

use serde::{Deserialize, Serialize};

/// A product as its seller lists it (`PUT /v1/listings`): the body the SDKs send.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct ListingRequest {
    /// The seller's own stock-keeping unit: listing the same SKU again updates the listing.
    pub sku: String,
    pub title: String,
    #[serde(default)]
    pub description: String,
    #[serde(default)]
    pub tags: Vec<String>,
    pub list_price_minor: u64,
    pub floor_minor: u64,
    #[serde(default)]
    pub max_discount_bps: u32,
    pub capacity_per_day: u64,
    pub capacity_max: u64,
    #[serde(default)]
    pub lead_time_days: u32,
    #[serde(default)]
    pub notice_days: u32,
    /// BCP 47: the language the seller is told things in.
    pub language: String,
}

/// A product listed by a seller's agent, with the lowest price offers are checked against.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Listing {
    /// `lst_…`, derived from the seller and the SKU.
    pub id: String,
    pub seller: String,
    pub sku: String,
    pub title: String,
    pub description: String,
    pub tags: Vec<String>,
    /// `list_price`, `floor`, `max_discount_bps`, `capacity_per_day`, `capacity_max`, `lead_time_days`, `notice_days`.
    #[cfg_attr(feature = "openapi", schema(value_type = Object))]
    pub terms: serde_json::Value,
    /// BCP 47: the language the seller is told things in.
    pub language: String,
    /// Unix milliseconds.
    pub created_at: i64,
    pub updated_at: i64,
    pub lowest_price_minor: u64,
}

/// Listings matching a search, best first.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct SearchResults {
    /// The query as counted for demand (normalised).
    pub query: String,
    /// The words matched, each as a word prefix.
    pub terms: Vec<String>,
    pub listings: Vec<Listing>,
}

/// A search that found nothing the last time it ran.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct UnmetSearch {
    pub query: String,
    /// How often it was searched.
    pub count: u64,
    /// Unix milliseconds.
    pub last_at_ms: i64,
}

/// Unmet demand, most frequent first.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct UnmetSearches {
    pub unmet: Vec<UnmetSearch>,
}

/// A request for quote: what and how many, the sellers invited and every offer.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Rfq {
    pub id: String,
    pub buyer: String,
    pub item: String,
    /// `quantity`, `max_unit_price`, `deadline`.
    #[cfg_attr(feature = "openapi", schema(value_type = Object))]
    pub request: serde_json::Value,
    /// `[seller, listing]` pairs whose listings matched the item.
    #[cfg_attr(feature = "openapi", schema(value_type = Vec<Vec<String>>))]
    pub invited: Vec<serde_json::Value>,
    /// `open` or `closed`.
    pub state: String,
    /// Every offer, refused ones with their reason.
    #[cfg_attr(feature = "openapi", schema(value_type = Vec<Object>))]
    pub offers: Vec<serde_json::Value>,
    /// The allocation: as it stands when read, fixed once closed; null on a new request.
    #[cfg_attr(feature = "openapi", schema(value_type = Option<Object>, required = true))]
    pub allocation: Option<serde_json::Value>,
    /// The order placed from it, once ordered.
    #[cfg_attr(feature = "openapi", schema(required = true))]
    pub order: Option<String>,
    /// Unix milliseconds.
    pub created_at: i64,
}

/// Requests for quote naming the caller.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct RfqList {
    pub rfqs: Vec<Rfq>,
}

/// A valid offer (a refused one is answered 422 with the offer in `facts`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Offer {
    pub id: String,
    pub seller: String,
    pub listing: String,
    pub unit_price: u64,
    pub quantity: u64,
    /// 1 for the first proposal, 2 and 3 for revisions.
    pub attempt: u32,
    /// The event-ledger position it was made at: earlier wins ties.
    pub seq: u64,
    /// `valid`, `superseded` or `refused`.
    pub status: String,
    /// Why a refused offer was refused, with the numbers checked; null otherwise.
    #[cfg_attr(feature = "openapi", schema(value_type = Option<Object>, required = true))]
    pub refusal: Option<serde_json::Value>,
    /// Unix milliseconds.
    pub at: i64,
    /// Revisions the seller has left.
    pub attempts_left: u32,
}

/// A request's allocation: the cheapest valid offers first, and the unfilled remainder.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct RfqAllocation {
    pub rfq: String,
    /// The allocation (lines, units, remainder).
    #[cfg_attr(feature = "openapi", schema(value_type = Object))]
    pub allocation: serde_json::Value,
    /// `open` or `closed` (`GET …/allocation` only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state: Option<String>,
}

/// When an agent's storefront orders wait for its owner.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct OrderPolicy {
    pub agent: String,
    /// Orders with a total above this wait for the owner's approval (0: every order).
    pub approval_above_minor: u64,
}

/// An order: one authorization for a closed request's allocation, a share per maker.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Order {
    pub id: String,
    pub buyer: String,
    /// The person who may approve it.
    pub owner: String,
    pub rfq: String,
    pub item: String,
    /// Unix milliseconds.
    pub deadline: i64,
    /// The shares: seller, listing, units, price, hold, state, notification, proof and payment.
    #[cfg_attr(feature = "openapi", schema(value_type = Vec<Object>))]
    pub lines: Vec<serde_json::Value>,
    pub total: u64,
    pub paid_net: u64,
    pub fees: u64,
    pub released: u64,
    /// `awaiting_approval`, `authorized`, `completed` or `cancelled`.
    pub state: String,
    /// Whether a person must approve it, the policy, and the decision.
    #[cfg_attr(feature = "openapi", schema(value_type = Object))]
    pub approval: serde_json::Value,
    /// Unix milliseconds.
    pub created_at: i64,
    /// `/approve/<id>`, the page to hand a person, when the order waits for one (`POST /v1/orders` only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub approval_url: Option<String>,
}

/// Orders naming the caller.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct OrderList {
    pub orders: Vec<Order>,
}

/// A share paid on proof of shipment.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct SharePaid {
    pub order: String,
    pub share: u32,
    pub seller: String,
    pub tracking: String,
    pub receipt_sha256: String,
    /// `net_minor`, `fee_minor` and how it was paid (a release, for an escrowed share).
    #[cfg_attr(feature = "openapi", schema(value_type = Object))]
    pub payment: serde_json::Value,
    pub order_state: String,
    /// The maker's owner, when she proved on her agent's behalf; absent when the agent did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub proved_by: Option<String>,
}

/// A share cancelled before it shipped; its hold went back.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ShareCancelled {
    pub order: String,
    pub share: u32,
    pub released_minor: u64,
    pub order_state: String,
}

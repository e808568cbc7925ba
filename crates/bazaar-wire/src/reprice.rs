//! `POST /v1/reprice`: a month of a shop's orders (CSV) turned into a per-call
//! price list, a suggested escrow threshold and the margins before and after
//! the registry's fee.

use serde::{Deserialize, Serialize};

/// One SKU as a paid call: what it sold at, and the price to charge per call.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct PriceLine {
    pub sku: String,
    /// Units sold: each is one paid call at the suggested price.
    pub calls: u64,
    pub orders: u64,
    pub min_unit_minor: u64,
    pub max_unit_minor: u64,
    /// The median unit price the file shows: the suggested per-call price.
    pub price_minor: u64,
}

/// A month of orders as a per-call price list, an escrow threshold and the margins before and after the fee.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Repriced {
    pub orders: usize,
    pub customers: usize,
    pub price_list: Vec<PriceLine>,
    /// The 95th percentile of order amounts, at most the registry's threshold:
    /// orders above it ride escrow, the rest are paid per call.
    pub suggested_escrow_threshold_minor: u64,
    pub orders_above_threshold: usize,
    pub revenue_minor: u64,
    pub cost_minor: u64,
    /// Revenue less cost, as the file says it was.
    pub margin_before_minor: i64,
    /// The registry's protocol fee on every order (each order one settlement or release).
    pub fee_bps: u32,
    pub fees_minor: u64,
    pub margin_after_minor: i64,
    /// Margins as a share of revenue, in basis points.
    pub margin_before_bps: i64,
    pub margin_after_bps: i64,
}

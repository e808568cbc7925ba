//! The kernel's settings: the two ledger-wide money policies every capability
//! obeys. Each capability's own settings live with it and are composed at the
//! crate root (`apply.rs`).

use bazaar_types::limits::{ESCROW_THRESHOLD_MINOR, PROTOCOL_FEE_BPS};
use bazaar_types::Amount;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Config {
    /// The protocol fee on every payment, in basis points.
    pub fee_bps: u32,
    /// The largest amount a bare payment token may hold; above it, money rides escrow.
    pub escrow_threshold: Amount,
}

impl Config {
    /// The published defaults: `PROTOCOL_FEE_BPS` and `ESCROW_THRESHOLD_MINOR`.
    pub fn standard() -> Config {
        Config { fee_bps: PROTOCOL_FEE_BPS, escrow_threshold: Amount(ESCROW_THRESHOLD_MINOR) }
    }
}

//! Paid calls' event bodies that other capabilities read.

use bazaar_types::{Amount, MemberId, OrderId};
use serde::{Deserialize, Serialize};

/// `settlement.posted`: the part of a settlement reputation counts. The
/// stored body also carries the settlement's ids, fee, net and transfers.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SettlementPosted {
    pub buyer: MemberId,
    pub merchant: MemberId,
    pub order_id: OrderId,
    pub amount_minor: Amount,
    /// Set when this registry settled for a peer's merchant (the work counts there, not here).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub corridor: Option<MemberId>,
}

//! The market's event bodies: one type per kind it writes, each serialising to
//! exactly the stored body (the kernel adds `authored_handle`). The market also
//! writes escrow's `contract.created` and `contract.cancelled` for the
//! contracts its escrowed shares ride, and a `refusal.recorded` for a refused
//! offer; those bodies are typed here too, under escrow's and the kernel's kinds.

use super::order::{OrderPolicy, OrderState, Payment};
use super::rfq::OfferStatus;
use super::rules::Allocation;
use super::MarketEvent;
use crate::escrow::events::{ContractCreated, ContractVoided};
use crate::escrow::EscrowEvent;
use crate::kernel::batch::KernelEvent;
use bazaar_types::{Amount, ListingId, MarketOrderId, MemberId, RfqId, Timestamp};
use serde::{Deserialize, Serialize};

crate::event_bodies!(
    ListingCreated => MarketEvent::ListingCreated,
    ListingUpdated => MarketEvent::ListingUpdated,
    RfqOpened => MarketEvent::RfqOpened,
    RfqOffer => MarketEvent::RfqOffer,
    OfferRefused => KernelEvent::RefusalRecorded,
    RfqClosed => MarketEvent::RfqClosed,
    OrderPolicySet => MarketEvent::OrderPolicySet,
    OrderCreated => MarketEvent::OrderCreated,
    OrderApproved => MarketEvent::OrderApproved,
    OrderDeclined => MarketEvent::OrderDeclined,
    OrderSharePaid => MarketEvent::OrderSharePaid,
    OrderShareCancelled => MarketEvent::OrderShareCancelled,
    ShareContractCreated => EscrowEvent::ContractCreated,
    ShareContractCancelled => EscrowEvent::ContractCancelled,
);

/// A listing as written: shared by `listing.created` and `listing.updated`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ListingPut {
    pub listing: ListingId,
    pub seller: MemberId,
    pub sku: String,
    pub list_price_minor: Amount,
    pub lowest_price_minor: Amount,
}

/// `listing.created`: a SKU listed for the first time.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct ListingCreated(pub ListingPut);

/// `listing.updated`: the same SKU listed again.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct ListingUpdated(pub ListingPut);

/// `rfq.opened`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RfqOpened {
    pub rfq: RfqId,
    pub buyer: MemberId,
    pub item: String,
    pub quantity: u64,
    pub max_unit_price_minor: Amount,
    pub deadline_ms: Timestamp,
    /// How many sellers were invited.
    pub invited: usize,
}

/// The operation a proposal's event names (`"make_offer"`), as the kernel's refusal records do.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OfferOp {
    MakeOffer,
}

/// A proposal as recorded on the ledger, valid or refused.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct OfferMade {
    pub op: OfferOp,
    pub rfq: RfqId,
    pub offer: String,
    pub seller: MemberId,
    pub unit_price_minor: Amount,
    pub quantity: u64,
    pub attempt: u32,
    pub status: OfferStatus,
    /// The rule that refused it; `null` for a valid offer.
    pub code: Option<String>,
}

/// `rfq.offer`: a valid proposal.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct RfqOffer(pub OfferMade);

/// `refusal.recorded` for a refused proposal: it used an attempt, kept on the request.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct OfferRefused(pub OfferMade);

/// `rfq.closed`: the allocation, fixed.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RfqClosed {
    pub rfq: RfqId,
    pub allocation: Allocation,
}

/// `order.policy_set`: the policy as stored.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct OrderPolicySet(pub OrderPolicy);

/// `order.created`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct OrderCreated {
    pub order: MarketOrderId,
    pub buyer: MemberId,
    pub total_minor: Amount,
    pub shares: usize,
    pub approval_required: bool,
}

/// An owner's decision on an order: shared by `order.approved` and `order.declined`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct OrderDecision {
    pub order: MarketOrderId,
    pub by: MemberId,
    pub total_minor: Amount,
}

/// `order.approved`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct OrderApproved(pub OrderDecision);

/// `order.declined`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct OrderDeclined(pub OrderDecision);

/// A share paid on its proof of shipment: shared by `order.share_paid` and its receipt.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SharePayment {
    pub order: MarketOrderId,
    pub share: u32,
    pub seller: MemberId,
    pub tracking: String,
    pub receipt_sha256: String,
    pub payment: Payment,
    pub order_state: OrderState,
    /// The maker's owner, when she proved on her agent's behalf; absent when the agent did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub proved_by: Option<MemberId>,
}

/// `order.share_paid`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct OrderSharePaid {
    #[serde(flatten)]
    pub paid: SharePayment,
}

/// `order.share_cancelled`: the share's hold went back to the buyer.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct OrderShareCancelled {
    pub order: MarketOrderId,
    pub share: u32,
    pub released_minor: Amount,
    pub order_state: OrderState,
}

/// `contract.created` for an escrowed share: the contract and the order it belongs to.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ShareContractCreated {
    #[serde(flatten)]
    pub created: ContractCreated,
    pub order: MarketOrderId,
}

/// `contract.cancelled` for an escrowed share cancelled before it shipped.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct ShareContractCancelled(pub ContractVoided);

//! The storefront market: listings and search, requests for quote with offers
//! checked by plain rules, deterministic allocation, and orders under one
//! authorization (escrowed per share above the threshold), approved by a
//! person when the owner's policy says so, paid on proof of shipment.
//! Uses identity, pay and escrow.

pub mod events;
mod listing;
pub mod order;
pub mod receipts;
mod rfq;
mod rules;

pub use listing::*;
pub use rfq::*;
pub use rules::*;

use crate::escrow::milestone_hold;
use crate::kernel::batch::Batch;
use crate::kernel::keys::Keys;
use crate::kernel::model::DocKind;
use crate::kernel::refusal::Refusal;
use crate::kernel::request::Caller;
use bazaar_types::limits::ORDER_LINES_MAX;
use bazaar_types::{AccountId, Amount, ListingId, MarketOrderId, MemberId, RfqId};
pub use receipts::Receipt;

crate::event_kinds! {
    /// What the market writes on the event ledger.
    MarketEvent {
        ListingCreated => "listing.created",
        ListingUpdated => "listing.updated",
        RfqOpened => "rfq.opened",
        RfqOffer => "rfq.offer",
        RfqClosed => "rfq.closed",
        OrderPolicySet => "order.policy_set",
        OrderCreated => "order.created",
        OrderApproved => "order.approved",
        OrderDeclined => "order.declined",
        OrderSharePaid => "order.share_paid",
        OrderShareCancelled => "order.share_cancelled",
    }
}

#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
pub enum Op {
    /// A seller's agent (the actor) lists a product, or relists the same SKU.
    PutListing { spec: ListingSpec },
    /// A buyer's agent (the actor) opens a request for quote; the edge names the
    /// sellers whose listings matched. Its id derives from the required key.
    CreateRfq { item: String, request: Request, invited: Vec<(MemberId, ListingId)> },
    /// A seller's agent (the actor) proposes a price on a request with one of
    /// its listings; `committed` is what it already promised before the deadline.
    MakeOffer { rfq: RfqId, listing: ListingId, proposal: Proposal, committed: u64 },
    /// The buyer closes its request; the allocation is fixed.
    CloseRfq { rfq: RfqId },
    /// An owner (the actor) sets when its agent's orders need a person's approval.
    SetOrderPolicy { agent: MemberId, approval_above: Amount },
    /// The buyer's agent (the actor) orders a closed request's allocation. The
    /// edge names the listings and the share count so their rows load.
    CreateOrder {
        rfq: RfqId,
        listings: Vec<ListingId>,
        lines: u32,
        /// Each share's maker, in allocation order (for the escrowed contracts' rows).
        sellers: Vec<MemberId>,
        /// Wait for the owner's approval whatever its policy says.
        require_approval: bool,
    },
    /// The buyer's owner approves (or declines) an order waiting for it.
    DecideOrder { order: MarketOrderId, buyer: MemberId, lines: u32, sellers: Vec<MemberId>, approve: bool },
    /// A maker (the actor) proves shipment of her share and is paid for it.
    /// The maker — or the person who owns her agent, on its behalf — proves a share shipped.
    ProveShipment {
        share: order::ShareId,
        buyer: MemberId,
        /// The share's maker, read from the stored order by the edge (the core checks it).
        seller: MemberId,
        receipt_sha256: String,
        tracking: String,
        /// The receipt image itself (content type, bytes), stored by its hash with the payment.
        /// Forwarded in a cluster as base64url, not as JSON's array of numbers (4× smaller).
        #[serde(with = "receipt_b64")]
        receipt: Option<(String, Vec<u8>)>,
    },
    /// The buyer agent or its owner cancels a share before it ships.
    CancelShare { share: order::ShareId, buyer: MemberId, seller: MemberId },
}

/// `Option<(content type, bytes)>` with the bytes as one base64url string.
mod receipt_b64 {
    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    pub fn serialize<S: Serializer>(value: &Option<(String, Vec<u8>)>, s: S) -> Result<S::Ok, S::Error> {
        value.as_ref().map(|(kind, bytes)| (kind, crate::crypto::b64url(bytes))).serialize(s)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<(String, Vec<u8>)>, D::Error> {
        match Option::<(String, String)>::deserialize(d)? {
            None => Ok(None),
            Some((kind, text)) => {
                let bytes = crate::crypto::b64url_decode(&text).map_err(serde::de::Error::custom)?;
                Ok(Some((kind, bytes)))
            }
        }
    }
}

impl Op {
    /// The order of `rfq`'s allocation as it stands: its lines' listings and
    /// makers, in allocation order (the edge and the simulator both order so).
    pub fn order_for(rfq: &Rfq, require_approval: bool) -> Op {
        let allocation = rfq.current_allocation();
        let listings = allocation
            .lines
            .iter()
            .filter_map(|line| rfq.offers.iter().find(|o| o.id == line.offer_id).map(|o| o.listing.clone()))
            .collect();
        Op::CreateOrder {
            rfq: rfq.id.clone(),
            listings,
            lines: allocation.lines.len() as u32,
            sellers: allocation.lines.iter().map(|line| line.seller.clone()).collect(),
            require_approval,
        }
    }

    /// A stable name, used in idempotency scopes and metrics.
    /// Whether the command moves money: orders (one authorization), their
    /// decisions, proofs that pay a maker, cancellations that refund; listing,
    /// asking and offering move nothing.
    pub fn moves_money(&self) -> bool {
        match self {
            Op::PutListing { .. }
            | Op::CreateRfq { .. }
            | Op::MakeOffer { .. }
            | Op::CloseRfq { .. }
            | Op::SetOrderPolicy { .. } => false,
            Op::CreateOrder { .. } | Op::DecideOrder { .. } | Op::ProveShipment { .. } | Op::CancelShare { .. } => true,
        }
    }

    pub fn name(&self) -> &'static str {
        match self {
            Op::PutListing { .. } => "put_listing",
            Op::CreateRfq { .. } => "create_rfq",
            Op::MakeOffer { .. } => "make_offer",
            Op::CloseRfq { .. } => "close_rfq",
            Op::SetOrderPolicy { .. } => "set_order_policy",
            Op::CreateOrder { .. } => "create_order",
            Op::DecideOrder { .. } => "decide_order",
            Op::ProveShipment { .. } => "prove_shipment",
            Op::CancelShare { .. } => "cancel_share",
        }
    }

    /// The rows this command needs.
    pub fn keys(&self, keys: &mut Keys, caller: &Caller<'_>) {
        let me = &caller.actor.id;
        match self {
            Op::PutListing { spec } => keys.doc(DocKind::Listing, listing_id(me, &spec.sku)),
            Op::CreateRfq { .. } => {
                if let Some(idem) = caller.idem {
                    keys.doc(DocKind::Rfq, rfq_id(me, &idem.key));
                }
            }
            Op::MakeOffer { rfq, listing, .. } => {
                keys.doc(DocKind::Rfq, rfq.clone());
                keys.doc(DocKind::Listing, listing.clone());
            }
            Op::CloseRfq { rfq } => keys.doc(DocKind::Rfq, rfq.clone()),
            Op::SetOrderPolicy { agent, .. } => {
                keys.members.insert(agent.clone());
                keys.doc(DocKind::Policy, agent.to_string());
            }
            Op::CreateOrder { rfq, listings, lines, sellers, .. } => {
                keys.doc(DocKind::Rfq, rfq.clone());
                keys.doc(DocKind::Policy, me.to_string());
                for listing in listings.iter().take(ORDER_LINES_MAX) {
                    keys.doc(DocKind::Listing, listing.clone());
                }
                buyer_rows(keys, me);
                if let Some(idem) = caller.idem {
                    let id = order::order_id(me, &idem.key);
                    order_rows(keys, &id, me, *lines, sellers);
                    keys.doc(DocKind::Order, id);
                }
            }
            Op::DecideOrder { order, buyer, lines, sellers, .. } => {
                keys.doc(DocKind::Order, order.clone());
                buyer_rows(keys, buyer);
                order_rows(keys, order, buyer, *lines, sellers);
            }
            Op::ProveShipment { share, buyer, seller, receipt_sha256, .. } => {
                keys.doc(DocKind::Order, share.order.clone());
                keys.blobs.insert(receipt_sha256.to_ascii_lowercase());
                buyer_rows(keys, buyer);
                keys.members.insert(seller.clone());
                keys.accounts.insert(AccountId::fees());
                keys.holds.insert(share.hold());
                share_rows(keys, &share.order, buyer, seller, share.index);
            }
            Op::CancelShare { share, buyer, seller } => {
                keys.doc(DocKind::Order, share.order.clone());
                buyer_rows(keys, buyer);
                keys.holds.insert(share.hold());
                share_rows(keys, &share.order, buyer, seller, share.index);
            }
        }
    }

    pub(crate) fn apply(&self, batch: &mut Batch<'_>, caller: &Caller<'_>) -> Result<Receipt, Refusal> {
        match self {
            Op::PutListing { spec } => batch.put_listing(caller, spec).map(|view| Receipt::Listing(Box::new(view))),
            Op::CreateRfq { item, request, invited } => {
                batch.create_rfq(caller, item, request, invited).map(|rfq| Receipt::Rfq(Box::new(rfq)))
            }
            Op::MakeOffer { rfq, listing, proposal, committed } => batch
                .make_offer(caller, rfq, listing, proposal, *committed)
                .map(|offer| Receipt::Offer(Box::new(offer))),
            Op::CloseRfq { rfq } => batch.close_rfq(caller, rfq).map(Receipt::Closed),
            Op::SetOrderPolicy { agent, approval_above } => {
                batch.set_order_policy(caller, agent, *approval_above).map(Receipt::Policy)
            }
            Op::CreateOrder { rfq, require_approval, .. } => {
                batch.create_order(caller, rfq, *require_approval).map(|order| Receipt::Order(Box::new(order)))
            }
            Op::DecideOrder { order, buyer, approve, .. } => batch
                .order_for(order, buyer)
                .and_then(|_| batch.decide_order(caller, order, *approve))
                .map(|order| Receipt::Order(Box::new(order))),
            Op::ProveShipment { share, buyer, seller, receipt_sha256, tracking, receipt } => batch
                .order_for(&share.order, buyer)
                .and_then(|_| batch.prove_shipment(caller, share, seller, receipt_sha256, tracking, receipt.as_ref()))
                .map(|paid| Receipt::SharePaid(Box::new(paid))),
            Op::CancelShare { share, buyer, .. } => batch
                .order_for(&share.order, buyer)
                .and_then(|_| batch.cancel_share(caller, share))
                .map(Receipt::ShareCancelled),
        }
    }
}

/// The buyer agent's account and budget, which an order's holds count against.
fn buyer_rows(keys: &mut Keys, buyer: &MemberId) {
    keys.accounts.insert(AccountId::of_member(buyer));
    keys.budgets.insert(buyer.clone());
}

/// Every share's hold and, above the threshold, its escrowed contract.
fn order_rows(keys: &mut Keys, order: &str, buyer: &MemberId, lines: u32, sellers: &[MemberId]) {
    for index in 0..lines.min(ORDER_LINES_MAX as u32) {
        keys.holds.insert(order::line_hold(order, index));
    }
    for (index, seller) in sellers.iter().take(ORDER_LINES_MAX).enumerate() {
        share_rows(keys, order, buyer, seller, index as u32);
    }
}

/// The escrowed contract (and its milestone hold) a share rides above the threshold.
fn share_rows(keys: &mut Keys, order: &str, buyer: &MemberId, seller: &MemberId, index: u32) {
    let contract = order::share_contract(order, buyer, seller, index);
    keys.holds.insert(milestone_hold(&contract, 0));
    keys.doc(DocKind::Contract, contract);
    keys.accounts.insert(AccountId::of_member(seller));
    keys.doc(DocKind::Terms, seller.to_string());
}

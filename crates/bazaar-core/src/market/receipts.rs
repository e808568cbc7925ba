//! What the market answers on success: one type per distinct answer. Receipts
//! are not event bodies even where they carry the same fields; they share the
//! nested parts (`SharePayment`) instead.

use super::events::SharePayment;
use super::listing::Listing;
use super::order::{Order, OrderPolicy, OrderState};
use super::rfq::{Offer, Rfq};
use super::rules::{Allocation, Terms};
use bazaar_types::{Amount, ListingId, MarketOrderId, MemberId, RfqId, Timestamp};
use serde::Serialize;

/// A listing as the API shows it: without its search words, with the lowest price offers are checked against.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct ListingView {
    pub id: ListingId,
    pub seller: MemberId,
    pub sku: String,
    pub title: String,
    pub description: String,
    pub tags: Vec<String>,
    pub terms: Terms,
    pub language: String,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
    pub lowest_price_minor: Amount,
}

impl ListingView {
    pub fn of(listing: &Listing) -> ListingView {
        ListingView {
            id: listing.id.clone(),
            seller: listing.seller.clone(),
            sku: listing.sku.clone(),
            title: listing.title.clone(),
            description: listing.description.clone(),
            tags: listing.tags.clone(),
            terms: listing.terms.clone(),
            language: listing.language.clone(),
            created_at: listing.created_at,
            updated_at: listing.updated_at,
            lowest_price_minor: listing.terms.lowest_price(),
        }
    }
}

/// A proposal as recorded, and how many attempts its seller has left.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct OfferRecorded {
    #[serde(flatten)]
    pub offer: Offer,
    pub attempts_left: u32,
}

/// A closed request's allocation (the same answer when it was closed already).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct Closed {
    pub rfq: RfqId,
    pub allocation: Option<Allocation>,
}

/// A share paid on its proof of shipment.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct SharePaid {
    #[serde(flatten)]
    pub paid: SharePayment,
}

/// A share cancelled before it shipped.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct ShareCancelled {
    pub order: MarketOrderId,
    pub share: u32,
    pub released_minor: Amount,
    pub order_state: OrderState,
}

crate::receipt_set! {
    /// Every success answer of a market command.
    #[derive(Clone, Debug, PartialEq, Eq, Serialize)]
    #[serde(untagged)]
    pub enum Receipt {
        Listing(Box<ListingView>),
        Rfq(Box<Rfq>),
        Offer(Box<OfferRecorded>),
        Closed(Closed),
        Policy(OrderPolicy),
        Order(Box<Order>),
        SharePaid(Box<SharePaid>),
        ShareCancelled(ShareCancelled),
    }
}

//! Requests for quote and offers: a buyer's agent asks, invited sellers
//! propose, every proposal is checked by the rules (a refused one is recorded
//! as an attempt), and the buyer closes to fix the allocation.

use super::events::{OfferMade, OfferOp, OfferRefused, RfqClosed, RfqOffer, RfqOpened};
use super::listing::Listing;
use super::receipts::{Closed, OfferRecorded};
use super::rules::*;
use crate::kernel::batch::Batch;
use crate::kernel::docs::parties_with;
use crate::kernel::refusal::{Code, Refusal};
use crate::kernel::request::Caller;
use bazaar_types::limits::*;
use bazaar_types::{Amount, ListingId, MarketOrderId, MemberId, RfqId, Timestamp};
use serde::{Deserialize, Serialize};
use serde_json::json;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RfqState {
    /// Sellers may offer.
    Open,
    /// The buyer closed it; its allocation is fixed.
    Closed,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OfferStatus {
    /// Counts for allocation (until the same seller makes a newer valid offer).
    Valid,
    /// Replaced by the same seller's newer valid offer.
    Superseded,
    /// Refused by the checks; the reason and numbers are kept.
    Refused,
}

/// One proposal on a request, as recorded (refused ones too: each is an attempt).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Offer {
    pub id: String,
    pub seller: MemberId,
    pub listing: ListingId,
    pub unit_price: Amount,
    pub quantity: u64,
    /// 1 for the first proposal, 2 and 3 for revisions.
    pub attempt: u32,
    /// The event-ledger position it was made at: earlier wins ties.
    pub seq: u64,
    pub status: OfferStatus,
    #[serde(default)]
    pub refusal: Option<OfferRefusal>,
    pub at: Timestamp,
}

/// A request for quote: the buyer, what and how many, the cap and deadline,
/// the sellers invited (those whose listings matched), and every offer.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Rfq {
    pub id: RfqId,
    pub buyer: MemberId,
    pub item: String,
    pub request: Request,
    /// (seller, listing) pairs whose listings matched the item when it was opened.
    pub invited: Vec<(MemberId, ListingId)>,
    pub state: RfqState,
    pub offers: Vec<Offer>,
    #[serde(default)]
    pub allocation: Option<Allocation>,
    /// The order placed from it: a request is ordered once.
    #[serde(default)]
    pub order: Option<MarketOrderId>,
    pub created_at: Timestamp,
}

pub fn rfq_id(buyer: &MemberId, key: &str) -> RfqId {
    RfqId(format!("rfq_{}", &crate::crypto::sha256_hex(format!("{buyer}\n{key}").as_bytes())[..32]))
}

impl Rfq {
    /// Each seller's latest valid offer.
    pub fn valid_offers(&self) -> Vec<ValidOffer> {
        self.offers
            .iter()
            .filter(|o| o.status == OfferStatus::Valid)
            .map(|o| ValidOffer {
                offer_id: o.id.clone(),
                seller: o.seller.clone(),
                unit_price: o.unit_price,
                quantity: o.quantity,
                seq: o.seq,
            })
            .collect()
    }
    /// The allocation as it stands (fixed once closed).
    pub fn current_allocation(&self) -> Allocation {
        self.allocation.clone().unwrap_or_else(|| allocate(self.request.quantity, &self.valid_offers()))
    }
    pub fn attempts_of(&self, seller: &MemberId) -> u32 {
        self.offers.iter().filter(|o| &o.seller == seller).count() as u32
    }
}

crate::document!(Rfq, Rfq, version 1,
    id = |r| r.id.to_string(),
    parties = |r| parties_with(vec![r.buyer.clone()], r.invited.iter().map(|(seller, _)| seller.clone())),
);

/// The refusal code an offer check's code maps to.
pub fn offer_code(code: &str) -> Code {
    Code::ALL.iter().copied().find(|c| c.as_str() == code).unwrap_or(Code::InvalidRequest)
}

impl Batch<'_> {
    pub(crate) fn create_rfq(
        &mut self,
        command: &Caller<'_>,
        item: &str,
        request: &Request,
        invited: &[(MemberId, ListingId)],
    ) -> Result<Rfq, Refusal> {
        command.require_agent("Requests for quote are made by buyers' agents")?;
        let Some(idem) = &command.idem else {
            return Err(Refusal::new(Code::IdempotencyKeyRequired, "A request for quote needs an Idempotency-Key."));
        };
        if request.quantity == 0 || request.quantity > RFQ_QUANTITY_MAX || request.max_unit_price.0 == 0 {
            return Err(Refusal::new(
                Code::RfqInvalid,
                format!("`quantity` is 1–{RFQ_QUANTITY_MAX} and `max_unit_price_minor` at least 1."),
            ));
        }
        if request.deadline <= self.now {
            return Err(Refusal::new(Code::RfqInvalid, "The deadline must be in the future."));
        }
        if item.trim().is_empty() || item.chars().count() > LISTING_TITLE_LEN_MAX {
            return Err(Refusal::new(Code::RfqInvalid, format!("`item` is 1–{LISTING_TITLE_LEN_MAX} characters.")));
        }
        let id = rfq_id(&command.actor.id, &idem.key);
        if self.exists::<Rfq>(&id) {
            return Err(Refusal::new(Code::RfqInvalid, "This request already exists."));
        }
        let invited: Vec<(MemberId, ListingId)> =
            invited.iter().filter(|(seller, _)| seller != &command.actor.id).take(RFQ_SELLERS_MAX).cloned().collect();
        let rfq = Rfq {
            id: id.clone(),
            buyer: command.actor.id.clone(),
            item: item.to_string(),
            request: request.clone(),
            invited,
            state: RfqState::Open,
            offers: Vec::new(),
            allocation: None,
            order: None,
            created_at: self.now,
        };
        self.insert(&rfq);
        let opened = RfqOpened {
            rfq: id,
            buyer: rfq.buyer.clone(),
            item: rfq.item.clone(),
            quantity: request.quantity,
            max_unit_price_minor: request.max_unit_price,
            deadline_ms: request.deadline,
            invited: rfq.invited.len(),
        };
        self.emit(command, &opened);
        Ok(rfq)
    }

    /// Records a seller's proposal, valid or refused (a refused one still uses an
    /// attempt), and answers with the offer; the edge turns a refused one into
    /// problem+json with its code.
    pub(crate) fn make_offer(
        &mut self,
        command: &Caller<'_>,
        rfq: &RfqId,
        listing: &ListingId,
        proposal: &Proposal,
        committed: u64,
    ) -> Result<OfferRecorded, Refusal> {
        let Some(mut rfq) = self.load::<Rfq>(rfq) else {
            return Err(Refusal::new(Code::RfqNotFound, "No such request for quote."));
        };
        let seller = command.actor.id.clone();
        if !rfq.invited.iter().any(|(s, l)| s == &seller && l == listing) {
            return Err(Refusal::new(
                Code::NotParty,
                "Only a seller invited with that listing offers on this request.",
            )
            .with(json!({"listing": listing})));
        }
        if rfq.state != RfqState::Open {
            return Err(Refusal::new(Code::RfqClosed, "This request for quote is closed."));
        }
        let Some(listing_doc) = self.load::<Listing>(listing) else {
            return Err(Refusal::new(Code::ListingNotFound, "That listing no longer exists."));
        };
        let terms = listing_doc.terms;
        let attempts = rfq.attempts_of(&seller);
        let checked = check_offer(&terms, &rfq.request, proposal, attempts, committed, self.now);
        let offer = Offer {
            id: format!("{}_o{}", rfq.id, rfq.offers.len() + 1),
            seller: seller.clone(),
            listing: listing.clone(),
            unit_price: proposal.unit_price,
            quantity: proposal.quantity,
            attempt: attempts + 1,
            seq: self.snap.head.seq + 1,
            status: if checked.is_ok() { OfferStatus::Valid } else { OfferStatus::Refused },
            refusal: checked.err(),
            at: self.now,
        };
        if offer.refusal.as_ref().is_some_and(|r| r.code == "offer_revision_limit") {
            // Out of attempts: nothing is recorded, the seller is already out.
            let refusal = offer.refusal.clone().expect("checked");
            return Err(Refusal::new(offer_code(&refusal.code), refusal.detail).with(refusal.facts));
        }
        if offer.status == OfferStatus::Valid {
            for earlier in rfq.offers.iter_mut().filter(|o| o.seller == seller && o.status == OfferStatus::Valid) {
                earlier.status = OfferStatus::Superseded;
            }
        }
        rfq.offers.push(offer.clone());
        self.update(&rfq);
        // A refused proposal is a recorded refusal (it also uses an attempt, kept on the request).
        let made = OfferMade {
            op: OfferOp::MakeOffer,
            rfq: rfq.id.clone(),
            offer: offer.id.clone(),
            seller,
            unit_price_minor: offer.unit_price,
            quantity: offer.quantity,
            attempt: offer.attempt,
            status: offer.status,
            code: offer.refusal.as_ref().map(|r| r.code.clone()),
        };
        if offer.status == OfferStatus::Refused {
            self.emit(command, &OfferRefused(made));
        } else {
            self.emit(command, &RfqOffer(made));
        }
        let attempts_left = OFFER_ATTEMPTS_MAX.saturating_sub(offer.attempt);
        Ok(OfferRecorded { offer, attempts_left })
    }

    pub(crate) fn close_rfq(&mut self, command: &Caller<'_>, rfq: &RfqId) -> Result<Closed, Refusal> {
        let Some(mut rfq) = self.load::<Rfq>(rfq) else {
            return Err(Refusal::new(Code::RfqNotFound, "No such request for quote."));
        };
        if command.actor.id != rfq.buyer {
            return Err(Refusal::new(Code::NotParty, "Only the buyer closes its request for quote."));
        }
        if rfq.state == RfqState::Closed {
            return Ok(Closed { rfq: rfq.id, allocation: rfq.allocation });
        }
        let allocation = rfq.current_allocation();
        rfq.allocation = Some(allocation.clone());
        rfq.state = RfqState::Closed;
        self.update(&rfq);
        self.emit(command, &RfqClosed { rfq: rfq.id.clone(), allocation: allocation.clone() });
        Ok(Closed { rfq: rfq.id, allocation: Some(allocation) })
    }
}

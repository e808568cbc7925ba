//! The storefront market's rules, as plain code: a seller's lowest price, the
//! checks every offer must pass, and the deterministic allocation of a request
//! for quote across valid offers. No model decides any number here.
//!
//! The checks run in a fixed order and the first failure wins, so a refused
//! offer goes back to its seller's agent with one reason code and the numbers
//! involved:
//!
//! 1. `offer_revision_limit` — the seller already used her attempts on this request;
//! 2. `offer_deadline_passed` — the request's deadline has passed;
//! 3. `offer_notice_too_short` — the deadline leaves her less than the notice she needs;
//! 4. `offer_above_cap` — the unit price is above the buyer's cap;
//! 5. `offer_below_floor` — the unit price is below her lowest price;
//! 6. `offer_beyond_capacity` — she cannot make and ship that many by the deadline.
//!
//! Allocation fills the requested quantity cheapest valid offer first, each
//! seller up to the units she offered; ties go to the earlier offer, then to
//! the seller's DID. Pay-as-bid: each line is paid at its own offer's price.

use bazaar_types::limits::*;
use bazaar_types::{Amount, MemberId, Timestamp};
use serde::{Deserialize, Serialize};
use serde_json::json;

const DAY_MS: i64 = 86_400_000;

/// What a seller's listing commits her to, as far as offers are concerned.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Terms {
    pub list_price: Amount,
    /// She never sells below this, whatever the discount.
    pub floor: Amount,
    /// The most she will take off the list price, in basis points.
    pub max_discount_bps: u32,
    /// Units she can make per day…
    pub capacity_per_day: u64,
    /// …and at most in all, per request.
    pub capacity_max: u64,
    /// Days between making the last unit and its arrival.
    pub lead_time_days: u32,
    /// Days of notice she needs before a deadline.
    pub notice_days: u32,
}

impl Terms {
    /// Her lowest price: the higher of her floor and her list price less her maximum discount.
    pub fn lowest_price(&self) -> Amount {
        let discount = self.list_price.fee_bps(self.max_discount_bps.min(10_000));
        let discounted = self.list_price.checked_sub(discount).unwrap_or(Amount::ZERO);
        discounted.max(self.floor)
    }

    /// Units she can still make and ship between `now` and `deadline`, given
    /// `committed` units already promised to other orders in that span.
    pub fn deliverable(&self, now: Timestamp, deadline: Timestamp, committed: u64) -> u64 {
        let days_left = (deadline.ms() - now.ms()).max(0) / DAY_MS;
        let making_days = (days_left - self.lead_time_days as i64).max(0) as u64;
        self.capacity_per_day.saturating_mul(making_days).min(self.capacity_max).saturating_sub(committed)
    }
}

/// A buyer's request for quote.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Request {
    pub quantity: u64,
    pub max_unit_price: Amount,
    pub deadline: Timestamp,
}

/// One offer as a seller's agent proposes it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Proposal {
    pub unit_price: Amount,
    /// May be fewer than requested; never more.
    pub quantity: u64,
}

/// Why an offer was refused, with the numbers involved.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct OfferRefusal {
    pub code: String,
    pub detail: String,
    pub facts: serde_json::Value,
}

fn refused(code: &'static str, detail: impl Into<String>, facts: serde_json::Value) -> Result<(), OfferRefusal> {
    Err(OfferRefusal { code: code.to_string(), detail: detail.into(), facts })
}

/// Checks one proposal. `attempts_before` counts this seller's earlier
/// proposals on this request (valid or not); `committed` is what she has
/// already promised elsewhere before the deadline.
pub fn check_offer(
    terms: &Terms,
    request: &Request,
    proposal: &Proposal,
    attempts_before: u32,
    committed: u64,
    now: Timestamp,
) -> Result<(), OfferRefusal> {
    if attempts_before >= OFFER_ATTEMPTS_MAX {
        return refused(
            "offer_revision_limit",
            format!(
                "An offer may be revised at most {} times; this seller is out of this request.",
                OFFER_ATTEMPTS_MAX - 1
            ),
            json!({"attempts": attempts_before, "attempts_max": OFFER_ATTEMPTS_MAX}),
        );
    }
    if now >= request.deadline {
        return refused(
            "offer_deadline_passed",
            "The request's deadline has passed.",
            json!({"deadline_ms": request.deadline}),
        );
    }
    let notice_ms = terms.notice_days as i64 * DAY_MS;
    if request.deadline.ms() - now.ms() < notice_ms {
        return refused(
            "offer_notice_too_short",
            "The deadline leaves less notice than this seller needs.",
            json!({"notice_days": terms.notice_days, "days_left": (request.deadline.ms() - now.ms()) / DAY_MS}),
        );
    }
    if proposal.unit_price > request.max_unit_price {
        return refused(
            "offer_above_cap",
            "The unit price is above the buyer's cap.",
            json!({"unit_price_minor": proposal.unit_price, "max_unit_price_minor": request.max_unit_price}),
        );
    }
    let lowest = terms.lowest_price();
    if proposal.unit_price < lowest {
        return refused(
            "offer_below_floor",
            "The unit price is below this seller's lowest price (the higher of her floor and her list price less her maximum discount).",
            json!({"unit_price_minor": proposal.unit_price, "lowest_price_minor": lowest, "floor_minor": terms.floor,
                "list_price_minor": terms.list_price, "max_discount_bps": terms.max_discount_bps}),
        );
    }
    let deliverable = terms.deliverable(now, request.deadline, committed);
    if proposal.quantity == 0 || proposal.quantity > request.quantity || proposal.quantity > deliverable {
        return refused(
            "offer_beyond_capacity",
            "She cannot make and ship that many by the deadline (or offers more than requested, or none).",
            json!({"quantity": proposal.quantity, "requested": request.quantity, "deliverable": deliverable,
                "capacity_per_day": terms.capacity_per_day, "capacity_max": terms.capacity_max,
                "lead_time_days": terms.lead_time_days, "committed": committed}),
        );
    }
    Ok(())
}

/// A valid offer as allocation sees it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ValidOffer {
    pub offer_id: String,
    pub seller: MemberId,
    pub unit_price: Amount,
    pub quantity: u64,
    /// When it was made (a ledger sequence number): earlier wins ties; a revision is a new offer.
    pub seq: u64,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Line {
    pub offer_id: String,
    pub seller: MemberId,
    pub units: u64,
    pub unit_price: Amount,
    pub amount: Amount,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Allocation {
    pub lines: Vec<Line>,
    pub filled: u64,
    pub unfilled: u64,
    pub total: Amount,
}

/// Fills `quantity` from `offers`: cheapest first, then earliest, then by
/// seller DID; each offer up to its own quantity. One line per offer used.
pub fn allocate(quantity: u64, offers: &[ValidOffer]) -> Allocation {
    let quantity = quantity.min(RFQ_QUANTITY_MAX);
    let mut sorted: Vec<&ValidOffer> = offers.iter().collect();
    sorted.sort_by(|a, b| {
        (a.unit_price, a.seq, &a.seller, &a.offer_id).cmp(&(b.unit_price, b.seq, &b.seller, &b.offer_id))
    });
    let mut left = quantity;
    let mut lines = Vec::new();
    let mut total: u128 = 0;
    for offer in sorted {
        if left == 0 {
            break;
        }
        let units = offer.quantity.min(left);
        if units == 0 {
            continue;
        }
        left -= units;
        let amount = offer.unit_price.0 as u128 * units as u128;
        total += amount;
        lines.push(Line {
            offer_id: offer.offer_id.clone(),
            seller: offer.seller.clone(),
            units,
            unit_price: offer.unit_price,
            amount: Amount(amount.min(u64::MAX as u128) as u64),
        });
    }
    Allocation { lines, filled: quantity - left, unfilled: left, total: Amount(total.min(u64::MAX as u128) as u64) }
}

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

use crate::model::{DocKind, DocRow};
use crate::refusal::{Code, Refusal};
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

// ---- listings and search ----------------------------------------------------------

/// A product a seller's agent lists. Its id is derived from the seller and the
/// seller's own SKU, so listing the same SKU again updates it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Listing {
    pub id: String,
    pub seller: MemberId,
    pub sku: String,
    pub title: String,
    pub description: String,
    pub tags: Vec<String>,
    pub terms: Terms,
    /// BCP 47: the language the seller is told things in.
    pub language: String,
    /// The words search matches: lower-case terms of title, description and tags
    /// (see [`search_terms`]), written here so every store indexes the same words.
    pub search_text: String,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
}

pub fn listing_id(seller: &MemberId, sku: &str) -> String {
    format!("lst_{}", &crate::crypto::sha256_hex(format!("{seller}\n{sku}").as_bytes())[..32])
}

impl Listing {
    pub fn to_row(&self) -> DocRow {
        DocRow {
            kind: DocKind::Listing,
            id: self.id.clone(),
            body: serde_json::to_value(self).expect("listings serialize"),
            due_at: None,
            parties: vec![self.seller.clone()],
        }
    }
    pub fn from_row(row: &DocRow) -> Listing {
        serde_json::from_value(row.body.clone()).expect("stored listings parse")
    }
    /// As the API shows it, with the lowest price offers are checked against.
    pub fn view(&self) -> serde_json::Value {
        let mut view = serde_json::to_value(self).expect("listings serialize");
        view["lowest_price_minor"] = json!(self.terms.lowest_price());
        view.as_object_mut().expect("object").remove("search_text");
        view
    }
}

/// The lower-case alphanumeric words of `text`, in order, without repeats: at
/// most `max` of them, each cut to `SEARCH_TERM_LEN_MAX` characters, with a
/// trailing plural `s` dropped from words longer than three letters.
pub fn words(text: &str, max: usize) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for word in text.split(|c: char| !c.is_alphanumeric()) {
        if word.is_empty() {
            continue;
        }
        let mut word: String = word.to_lowercase().chars().take(SEARCH_TERM_LEN_MAX).collect();
        // A plain English plural folds to its singular ("covers" finds "cover"), on both sides.
        if word.chars().count() > 3 && word.ends_with('s') && !word.ends_with("ss") {
            word.pop();
        }
        if !out.contains(&word) {
            out.push(word);
        }
        if out.len() == max {
            break;
        }
    }
    out
}

/// The terms a query searches for (all must match, each as a word prefix).
pub fn search_terms(query: &str) -> Vec<String> {
    words(query, SEARCH_TERMS_MAX)
}

/// A query as recorded for demand: its terms, space-separated.
pub fn normalize_query(query: &str) -> String {
    search_terms(query).join(" ")
}

/// What a seller sends to list (or relist) a product.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ListingSpec {
    pub sku: String,
    pub title: String,
    pub description: String,
    pub tags: Vec<String>,
    pub terms: Terms,
    pub language: String,
}

fn invalid(detail: impl Into<String>) -> Refusal {
    Refusal::new(Code::ListingInvalid, detail)
}

/// A BCP 47 tag in its common shape: a 2–3 letter language, then subtags of 2–8 letters or digits.
pub fn valid_language(tag: &str) -> bool {
    let mut parts = tag.split('-');
    let first = parts.next().unwrap_or_default();
    tag.len() <= LANGUAGE_TAG_LEN_MAX
        && (2..=3).contains(&first.len())
        && first.chars().all(|c| c.is_ascii_alphabetic())
        && parts.all(|p| (2..=8).contains(&p.len()) && p.chars().all(|c| c.is_ascii_alphanumeric()))
}

impl ListingSpec {
    /// Shape checks, each refused with `listing_invalid` and what to fix.
    pub fn check(&self) -> Result<(), Refusal> {
        let sku_ok = !self.sku.is_empty()
            && self.sku.len() <= LISTING_SKU_LEN_MAX
            && self.sku.chars().all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c));
        if !sku_ok {
            return Err(invalid(format!(
                "`sku` is 1–{LISTING_SKU_LEN_MAX} characters of letters, digits, `-`, `_`, `.`."
            )));
        }
        if self.title.trim().is_empty() || self.title.chars().count() > LISTING_TITLE_LEN_MAX {
            return Err(invalid(format!("`title` is 1–{LISTING_TITLE_LEN_MAX} characters.")));
        }
        if self.description.chars().count() > LISTING_DESCRIPTION_LEN_MAX {
            return Err(invalid(format!("`description` is at most {LISTING_DESCRIPTION_LEN_MAX} characters.")));
        }
        let tag_ok = |t: &String| {
            !t.is_empty()
                && t.len() <= LISTING_TAG_LEN_MAX
                && t.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
        };
        if self.tags.len() > LISTING_TAGS_MAX || !self.tags.iter().all(tag_ok) {
            return Err(invalid(format!(
                "At most {LISTING_TAGS_MAX} `tags`, each 1–{LISTING_TAG_LEN_MAX} characters of `a-z`, `0-9`, `-`."
            )));
        }
        let t = &self.terms;
        if t.list_price.0 == 0 || t.list_price.0 > AMOUNT_MINOR_MAX || t.floor > t.list_price {
            return Err(invalid("`list_price_minor` is 1 or more, and `floor_minor` is at most the list price.")
                .with(json!({"list_price_minor": t.list_price, "floor_minor": t.floor})));
        }
        if t.max_discount_bps > 10_000 {
            return Err(invalid("`max_discount_bps` is at most 10000."));
        }
        if t.capacity_per_day == 0 || t.capacity_max == 0 || t.capacity_max > RFQ_QUANTITY_MAX {
            return Err(invalid(format!("`capacity_per_day` and `capacity_max` are 1–{RFQ_QUANTITY_MAX}.")));
        }
        if t.lead_time_days > LISTING_DAYS_MAX || t.notice_days > LISTING_DAYS_MAX {
            return Err(invalid(format!("`lead_time_days` and `notice_days` are at most {LISTING_DAYS_MAX}.")));
        }
        if !valid_language(&self.language) {
            return Err(invalid("`language` is a BCP 47 tag such as `en`, `es-MX` or `hi`."));
        }
        Ok(())
    }

    pub fn search_text(&self) -> String {
        let text = format!("{} {} {}", self.title, self.tags.join(" "), self.description);
        words(&text, usize::MAX).join(" ")
    }
}

/// One search as recorded for demand: the normalised query, how many listings it found, when.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SearchRecord {
    pub query: String,
    pub hits: u64,
    pub at: Timestamp,
}

impl crate::apply::Batch<'_> {
    pub(crate) fn put_listing(&mut self, command: &crate::command::Command, spec: &ListingSpec) -> crate::apply::Step {
        if command.actor.kind != crate::model::MemberKind::Agent {
            return Err(Refusal::new(Code::NotAnAgent, "Listings are made by sellers' agents."));
        }
        spec.check()?;
        let id = listing_id(&command.actor.id, &spec.sku);
        let existing = self.snap.docs.get(&(DocKind::Listing, id.clone())).map(Listing::from_row);
        let listing = Listing {
            id: id.clone(),
            seller: command.actor.id.clone(),
            sku: spec.sku.clone(),
            title: spec.title.clone(),
            description: spec.description.clone(),
            tags: spec.tags.clone(),
            terms: spec.terms.clone(),
            language: spec.language.clone(),
            search_text: spec.search_text(),
            created_at: existing.as_ref().map_or(self.now, |l| l.created_at),
            updated_at: self.now,
        };
        self.put_doc(listing.to_row(), existing.is_none());
        let view = listing.view();
        let kind = if existing.is_some() { "listing.updated" } else { "listing.created" };
        self.event(
            command,
            kind,
            json!({"listing": id, "seller": listing.seller, "sku": listing.sku,
            "list_price_minor": listing.terms.list_price, "lowest_price_minor": listing.terms.lowest_price()}),
        );
        Ok(view)
    }

    pub(crate) fn record_search(
        &mut self,
        command: &crate::command::Command,
        query: &str,
        hits: u64,
    ) -> crate::apply::Step {
        if command.actor.kind != crate::model::MemberKind::Registry {
            return Err(Refusal::new(Code::NotPermitted, "Searches are recorded by the registry."));
        }
        self.changes.record_searches.push(SearchRecord { query: query.to_string(), hits, at: self.now });
        Ok(json!({"query": query, "hits": hits}))
    }
}

// ---- requests for quote and offers -------------------------------------------------

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
    pub listing: String,
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
    pub id: String,
    pub buyer: MemberId,
    pub item: String,
    pub request: Request,
    /// (seller, listing) pairs whose listings matched the item when it was opened.
    pub invited: Vec<(MemberId, String)>,
    pub state: RfqState,
    pub offers: Vec<Offer>,
    #[serde(default)]
    pub allocation: Option<Allocation>,
    /// The order placed from it: a request is ordered once.
    #[serde(default)]
    pub order: Option<String>,
    pub created_at: Timestamp,
}

pub fn rfq_id(buyer: &MemberId, key: &str) -> String {
    format!("rfq_{}", &crate::crypto::sha256_hex(format!("{buyer}\n{key}").as_bytes())[..32])
}

impl Rfq {
    pub fn to_row(&self) -> DocRow {
        let mut parties = vec![self.buyer.clone()];
        for (seller, _) in &self.invited {
            if !parties.contains(seller) {
                parties.push(seller.clone());
            }
        }
        DocRow {
            kind: DocKind::Rfq,
            id: self.id.clone(),
            body: serde_json::to_value(self).expect("rfqs serialize"),
            due_at: None,
            parties,
        }
    }
    pub fn from_row(row: &DocRow) -> Rfq {
        serde_json::from_value(row.body.clone()).expect("stored rfqs parse")
    }
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

/// The refusal code an offer check's code maps to.
pub fn offer_code(code: &str) -> Code {
    Code::ALL.iter().copied().find(|c| c.as_str() == code).unwrap_or(Code::InvalidRequest)
}

impl crate::apply::Batch<'_> {
    pub(crate) fn create_rfq(
        &mut self,
        command: &crate::command::Command,
        item: &str,
        request: &Request,
        invited: &[(MemberId, String)],
    ) -> crate::apply::Step {
        if command.actor.kind != crate::model::MemberKind::Agent {
            return Err(Refusal::new(Code::NotAnAgent, "Requests for quote are made by buyers' agents."));
        }
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
        if self.snap.docs.contains_key(&(DocKind::Rfq, id.clone())) {
            return Err(Refusal::new(Code::RfqInvalid, "This request already exists."));
        }
        let invited: Vec<(MemberId, String)> =
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
        self.put_doc(rfq.to_row(), true);
        self.event(command, "rfq.opened", json!({"rfq": id, "buyer": rfq.buyer, "item": rfq.item,
            "quantity": request.quantity, "max_unit_price_minor": request.max_unit_price, "deadline_ms": request.deadline,
            "invited": rfq.invited.len()}));
        Ok(serde_json::to_value(&rfq).expect("rfqs serialize"))
    }

    /// Records a seller's proposal, valid or refused (a refused one still uses an
    /// attempt), and answers with the offer; the edge turns a refused one into
    /// problem+json with its code.
    pub(crate) fn make_offer(
        &mut self,
        command: &crate::command::Command,
        rfq: &str,
        listing: &str,
        proposal: &Proposal,
        committed: u64,
    ) -> crate::apply::Step {
        let Some(row) = self.snap.docs.get(&(DocKind::Rfq, rfq.to_string())) else {
            return Err(Refusal::new(Code::RfqNotFound, "No such request for quote."));
        };
        let mut rfq = Rfq::from_row(row);
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
        let Some(listing_row) = self.snap.docs.get(&(DocKind::Listing, listing.to_string())) else {
            return Err(Refusal::new(Code::ListingNotFound, "That listing no longer exists."));
        };
        let terms = Listing::from_row(listing_row).terms;
        let attempts = rfq.attempts_of(&seller);
        let checked = check_offer(&terms, &rfq.request, proposal, attempts, committed, self.now);
        let offer = Offer {
            id: format!("{}_o{}", rfq.id, rfq.offers.len() + 1),
            seller: seller.clone(),
            listing: listing.to_string(),
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
        self.put_doc(rfq.to_row(), false);
        // A refused proposal is a recorded refusal (it also uses an attempt, kept on the request).
        let kind = if offer.status == OfferStatus::Refused { "refusal.recorded" } else { "rfq.offer" };
        self.event(
            command,
            kind,
            json!({"op": "make_offer", "rfq": rfq.id, "offer": offer.id, "seller": seller,
            "unit_price_minor": offer.unit_price, "quantity": offer.quantity, "attempt": offer.attempt,
            "status": offer.status, "code": offer.refusal.as_ref().map(|r| r.code.clone())}),
        );
        let mut body = serde_json::to_value(&offer).expect("offers serialize");
        body["attempts_left"] = json!(OFFER_ATTEMPTS_MAX.saturating_sub(offer.attempt));
        Ok(body)
    }

    pub(crate) fn close_rfq(&mut self, command: &crate::command::Command, rfq: &str) -> crate::apply::Step {
        let Some(row) = self.snap.docs.get(&(DocKind::Rfq, rfq.to_string())) else {
            return Err(Refusal::new(Code::RfqNotFound, "No such request for quote."));
        };
        let mut rfq = Rfq::from_row(row);
        if command.actor.id != rfq.buyer {
            return Err(Refusal::new(Code::NotParty, "Only the buyer closes its request for quote."));
        }
        if rfq.state == RfqState::Closed {
            return Ok(json!({"rfq": rfq.id, "allocation": rfq.allocation}));
        }
        let allocation = rfq.current_allocation();
        rfq.allocation = Some(allocation.clone());
        rfq.state = RfqState::Closed;
        self.put_doc(rfq.to_row(), false);
        let body = json!({"rfq": rfq.id, "allocation": allocation});
        self.event(command, "rfq.closed", body.clone());
        Ok(body)
    }
}

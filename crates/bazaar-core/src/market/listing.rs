//! Storefront listings and search: a seller's product with its terms, the
//! core's own word list for search (case-folded, plural-folded), and what a
//! search is recorded as for unmet demand.

use super::events::{ListingCreated, ListingPut, ListingUpdated};
use super::receipts::ListingView;
use super::rules::Terms;
use crate::kernel::batch::Batch;
use crate::kernel::refusal::{Code, Refusal};
use crate::kernel::request::Caller;
use bazaar_types::limits::*;
use bazaar_types::{ListingId, MemberId, Timestamp};
use serde::{Deserialize, Serialize};
use serde_json::json;

/// A product a seller's agent lists. Its id is derived from the seller and the
/// seller's own SKU, so listing the same SKU again updates it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Listing {
    pub id: ListingId,
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

pub fn listing_id(seller: &MemberId, sku: &str) -> ListingId {
    ListingId(format!("lst_{}", &crate::crypto::sha256_hex(format!("{seller}\n{sku}").as_bytes())[..32]))
}

impl Listing {
    /// As the API shows it, with the lowest price offers are checked against.
    pub fn view(&self) -> ListingView {
        ListingView::of(self)
    }
}

crate::document!(Listing, Listing, version 1, id = |l| l.id.to_string(), parties = |l| vec![l.seller.clone()]);

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

impl Batch<'_> {
    pub(crate) fn put_listing(&mut self, command: &Caller<'_>, spec: &ListingSpec) -> Result<ListingView, Refusal> {
        command.require_agent("Listings are made by sellers' agents")?;
        spec.check()?;
        let id = listing_id(&command.actor.id, &spec.sku);
        let existing = self.load::<Listing>(&id);
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
        self.upsert(&listing);
        let put = ListingPut {
            listing: id,
            seller: listing.seller.clone(),
            sku: listing.sku.clone(),
            list_price_minor: listing.terms.list_price,
            lowest_price_minor: listing.terms.lowest_price(),
        };
        if existing.is_some() {
            self.emit(command, &ListingUpdated(put));
        } else {
            self.emit(command, &ListingCreated(put));
        }
        Ok(listing.view())
    }
}

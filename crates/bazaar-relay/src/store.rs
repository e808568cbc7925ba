//! The relay's store: what every engine must do, and its errors. An engine
//! writes a batch of events in one transaction, in order, each seeing the
//! ones before it (so a deletion and its target, or two versions of one
//! replaceable event, in one batch behave as if sent one by one).

use crate::event::{Encoded, Event, EventId};
use crate::filter::Filter;

/// What became of one event in a write.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Written {
    /// Stored now (and, for a replaceable or addressable event, the older version removed).
    Stored,
    /// Already stored: `OK true "duplicate: …"`.
    Duplicate,
    /// A replaceable or addressable event older than the stored version
    /// (or as old, with a higher id): refused.
    Superseded,
    /// Its author deleted it (NIP-09) before it arrived: refused.
    Deleted,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StoreError {
    #[error("the relay's store is unavailable: {0}")]
    Unavailable(String),
}

pub type Result<T> = std::result::Result<T, StoreError>;

pub fn unavailable(error: impl std::fmt::Display) -> StoreError {
    StoreError::Unavailable(error.to_string())
}

/// What a purge removed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Purged {
    pub expired: u64,
    pub past_retention: u64,
}

/// A relay engine. Reads may run beside the writer; writes come from one
/// writer at a time per process (the ingest thread).
pub trait EventStore: Send + Sync {
    /// Writes `events` in one durable transaction and says what became of each, in order.
    /// Ephemeral events never reach the store. `now` is unix seconds.
    fn write(&self, events: &[Encoded], now: u64) -> Result<Vec<Written>>;
    /// Stored, unexpired events matching any filter, newest first (ties:
    /// lowest id first), each filter bounded by its own limit; as stored JSON.
    fn query(&self, filters: &[Filter], now: u64) -> Result<Vec<String>>;
    /// Removes expired events and regular events created before `retention_start`
    /// (remembering the ids of job requests it removes, for [`EventStore::purged_at`]).
    fn purge(&self, now: u64, retention_start: u64) -> Result<Purged>;
    /// When a job request with this id was purged for age, if it was.
    fn purged_at(&self, id: &EventId) -> Result<Option<u64>>;
    /// The engine's connections and the memory each may hold as configured, if it is SQLite.
    fn memory(&self) -> Option<bazaar_types::SqliteMemory> {
        None
    }
}

/// Orders query results as NIP-01 asks and drops duplicates across filters:
/// newest first, ties by lowest id. Each engine answers per filter; this merges.
pub fn merge_newest_first(mut rows: Vec<(u64, EventId, String)>) -> Vec<String> {
    rows.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
    rows.dedup_by(|a, b| a.1 == b.1);
    rows.into_iter().map(|(_, _, json)| json).collect()
}

/// The single-letter tags an engine indexes: each (letter, first value) once.
pub fn indexed_tags(event: &Event) -> Vec<(&str, &str)> {
    let mut tags: Vec<(&str, &str)> = event
        .tags
        .iter()
        .filter(|tag| tag[0].len() == 1 && tag[0].as_bytes()[0].is_ascii_alphabetic())
        .filter_map(|tag| tag.get(1).map(|value| (tag[0].as_str(), value.as_str())))
        .collect();
    tags.sort_unstable();
    tags.dedup();
    tags
}

/// NIP-09: what a deletion event asks to delete, for its own author only.
pub struct DeletionTargets {
    pub ids: Vec<EventId>,
    /// `a` coordinates `(kind, d)` of the author's addressable (or replaceable) events.
    pub addresses: Vec<(u16, String)>,
}

pub fn deletion_targets(deletion: &Event) -> DeletionTargets {
    let ids = deletion.tag_values("e").filter_map(crate::event::Hex32::parse).collect();
    let author = deletion.pubkey.to_hex();
    let addresses = deletion
        .tag_values("a")
        .filter_map(|coordinate| {
            let mut parts = coordinate.splitn(3, ':');
            let kind = parts.next()?.parse::<u16>().ok()?;
            let pubkey = parts.next()?;
            let d = parts.next().unwrap_or("");
            (pubkey == author).then(|| (kind, d.to_string()))
        })
        .collect();
    DeletionTargets { ids, addresses }
}

/// Whether `candidate` replaces `stored` (newer, or as new with a lower id).
pub fn replaces(candidate: (u64, &EventId), stored: (u64, &EventId)) -> bool {
    candidate.0 > stored.0 || (candidate.0 == stored.0 && candidate.1 < stored.1)
}

/// Whether an event is a job request (NIP-90 request range), whose purge is remembered.
pub fn is_job_request(kind: u16) -> bool {
    (5_000..=5_999).contains(&kind)
}

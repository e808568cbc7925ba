//! The storage boundary: the [`Store`] trait every adapter implements, the
//! group-commit [`writer`] (the ledger's batch on the plane kit's `GroupWriter`), and the [`conformance`] suite that runs
//! unchanged against every adapter.
//!
//! Writes never go straight to an adapter: each command is queued to one
//! writer per process, which folds whatever is waiting (up to
//! `WRITE_BATCH_MAX`) into one transaction — load rows, run the core, write,
//! commit, then answer everyone. Reads go to the adapter directly.
//!
//! ## Map
//!
//! (What this crate holds, file by file; `ARCHITECTURE.md` keeps the one-line summary.)
//!
//! the `Store` trait (one `submit` for all writes, plus
//! reads), the `Engine` trait adapters implement (`begin`/`load`/`write`/
//! `commit`, and `prune_idempotency` between batches), the shared group-commit
//! `writer` (with `WriterStats`), `audit` (chain + balances over any store, with
//! progress), `packed` (stored event bodies and hashes, shared by both adapters), and `conformance` — the suite every adapter passes unchanged
//! (plus the engine-level `documents` and `blobs` cases). Tables: the ledger's
//! rows, `events`, `idempotency`, `docs` (+ `doc_parties`), `blobs`
//! (content-addressed uploads, migration 0007; older ledgers' `blob` documents
//! stay readable), and `searches` (written by `record_searches`, not the writer).

pub mod audit;
pub mod conformance;
pub mod packed;
pub mod writer;

use async_trait::async_trait;
use bazaar_core::apply::Applied;
use bazaar_core::chain::ChainHead;
use bazaar_core::command::{Command, Keys};
use bazaar_core::model::*;
use bazaar_core::state::{Changes, Snapshot};
use bazaar_types::{AccountId, MemberId, OrderId, Timestamp, TokenId};

#[derive(Debug, Clone, thiserror::Error, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[non_exhaustive]
pub enum StoreError {
    /// The write queue is full; the caller should retry shortly.
    #[error("the store is busy; retry shortly")]
    Busy,
    /// A uniqueness or check constraint refused a write: the second layer of
    /// exactly-once caught something the core let through (or a racing node).
    #[error("constraint violated: {0}")]
    Constraint(String),
    #[error("storage unavailable: {0}")]
    Unavailable(String),
    /// This node's writer may not commit: another node holds the ledger's
    /// sequencer lease at a later epoch (docs/design/sequencer.md). Given
    /// before anything is written, so the command provably did not run.
    #[error("this node is not the ledger's sequencer: {0}")]
    Fenced(String),
    /// A command under the same idempotency key is being applied now (on a
    /// cluster, the sequencer saw it arrive from another node): retry shortly.
    #[error("a request with this idempotency key is still being applied")]
    InFlight,
    #[error("stored data is corrupt: {0}")]
    Corrupt(String),
}

/// A token as the registry knows it, with its hold and any settlement.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TokenView {
    pub token: TokenRecord,
    pub hold: Hold,
    pub settlement: Option<Settlement>,
}

/// Searches for one normalised query, counted in memory by the server and
/// recorded together: `count` searches, the last of them at `last_at` finding
/// `hits_last` listings.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SearchCount {
    pub query: String,
    pub count: u64,
    pub hits_last: u64,
    pub first_at: Timestamp,
    pub last_at: Timestamp,
}

/// A fold of the event ledger written down at `seq` (whose event hash is
/// `head`), so a node takes it up there instead of folding from genesis: the
/// reputation fold is one (`Ledger::snapshot` in `bazaar_core::reputation`).
/// Derived state: never part of the ledger, its audit or its chain.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FoldSnapshot {
    pub name: String,
    pub seq: u64,
    pub head: String,
    pub body: Vec<u8>,
}

/// One in-memory structure that grows with use, as `/metrics` shows it
/// (`bazaar_cache_entries{cache=…}`): its entries now and its bound.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CacheGauge {
    pub cache: &'static str,
    pub entries: u64,
    /// The most it holds; `None` where only the ledger bounds it.
    pub entries_max: Option<u64>,
}

pub use bazaar_types::SqliteMemory;

/// Everything Bazaar stores. Ledger writes go through [`Store::submit`]; the
/// search tally is recorded by [`Store::record_searches`]; the rest are reads.
#[async_trait]
pub trait Store: Send + Sync + 'static {
    /// Applies one command through the group-commit writer; returns after commit.
    async fn submit(&self, command: Command) -> Result<Applied, StoreError>;
    /// This process's writer: batches, commands and time spent so far.
    fn writer_stats(&self) -> writer::WriterStats;
    /// The adapter's own in-memory caches, each a length read under its lock (no scan).
    fn caches(&self) -> Vec<CacheGauge> {
        Vec::new()
    }
    /// The adapter's SQLite connections and their configured memory, if it is SQLite.
    fn sqlite_memory(&self) -> Vec<SqliteMemory> {
        Vec::new()
    }
    /// The registry's signing key seed: stored on first call, returned ever after.
    async fn registry_key_seed(&self, candidate: [u8; 32]) -> Result<[u8; 32], StoreError>;
    /// Rotated registry signing keys, oldest first (the genesis key is
    /// `registry_key_seed`): each an opaque record the server wrote, seed included.
    async fn registry_keys(&self) -> Result<Vec<String>, StoreError>;
    /// Stores rotated key number `n` (1-based); `false` if that number is
    /// already taken (another node rotated first) — nothing is overwritten.
    async fn add_registry_key(&self, n: u32, record: String) -> Result<bool, StoreError>;
    async fn head(&self) -> Result<ChainHead, StoreError>;
    async fn member(&self, id: &MemberId) -> Result<Option<Member>, StoreError>;
    /// The member currently wearing `handle` (retired handles resolve to nobody).
    async fn member_by_handle(&self, handle: &str) -> Result<Option<Member>, StoreError>;
    /// The members `owner` owns (its agents), by id, at most `limit`.
    async fn agents_of(&self, owner: &MemberId, limit: usize) -> Result<Vec<Member>, StoreError>;
    async fn credential(&self, hash: &str) -> Result<Option<Credential>, StoreError>;
    /// The credential with this hash and the member holding it, in one read.
    /// The caller checks `revoked_at`.
    async fn authenticate(&self, hash: &str) -> Result<Option<(Credential, Member)>, StoreError>;
    /// Every credential the member was ever given, oldest first (revoked ones too).
    async fn credentials_of(&self, member: &MemberId) -> Result<Vec<Credential>, StoreError>;
    async fn account(&self, id: &AccountId) -> Result<Option<Account>, StoreError>;
    async fn budget(&self, agent: &MemberId) -> Result<Option<Budget>, StoreError>;
    async fn token(&self, jti: &TokenId) -> Result<Option<TokenView>, StoreError>;
    async fn settlement_by_order(&self, merchant: &MemberId, order: &OrderId)
        -> Result<Option<Settlement>, StoreError>;
    /// Pending holds whose tokens expired at or before `now`, oldest first.
    async fn expired_tokens(&self, now: Timestamp, limit: usize) -> Result<Vec<(TokenId, MemberId)>, StoreError>;
    /// Events with `seq > after`, in order.
    async fn events(&self, after: u64, limit: usize) -> Result<Vec<Event>, StoreError>;
    /// Transfers in commit order; `after` is the position returned with the last page.
    async fn transfers(&self, after: i64, limit: usize) -> Result<Vec<(i64, Transfer)>, StoreError>;
    /// Holds ordered by id, after `after` (exclusive).
    async fn holds(&self, after: &str, limit: usize) -> Result<Vec<Hold>, StoreError>;
    /// Accounts ordered by id, after `after` (exclusive).
    async fn accounts(&self, after: &str, limit: usize) -> Result<Vec<Account>, StoreError>;
    /// Deletes up to `limit` idempotency records created before `before`; returns how many.
    /// A key used again after its record is gone is a new request (Stripe semantics);
    /// the ledger's uniqueness constraints still stop a second settlement.
    async fn prune_idempotency(&self, before: Timestamp, limit: usize) -> Result<usize, StoreError>;
    async fn doc(&self, kind: DocKind, id: &str) -> Result<Option<DocRow>, StoreError>;
    /// An uploaded file by the lowercase hex SHA-256 of its bytes.
    async fn blob(&self, sha256: &str) -> Result<Option<Blob>, StoreError>;
    /// Documents of `kind` naming `party`, ordered by id, after `after` (exclusive).
    async fn docs_by_party(
        &self,
        kind: DocKind,
        party: &MemberId,
        after: &str,
        limit: usize,
    ) -> Result<Vec<DocRow>, StoreError>;
    /// Listings whose words match every term (each as a word prefix), best match first.
    async fn search_listings(&self, terms: &[String], limit: usize) -> Result<Vec<DocRow>, StoreError>;
    /// Adds tallied searches to the demand counts, in one transaction of its own
    /// that never goes through the writer, so counting searches cannot queue
    /// behind (or hold up) a ledger group commit. Counts add up; a query's last
    /// hits are those of its latest search, whatever order batches arrive in.
    /// `searches` names each query at most once.
    async fn record_searches(&self, searches: &[SearchCount]) -> Result<(), StoreError>;
    /// Recorded searches that found nothing the last time, most frequent first:
    /// (normalised query, times searched, last searched).
    async fn unmet_searches(&self, limit: usize) -> Result<Vec<(String, u64, Timestamp)>, StoreError>;
    /// The snapshot of the fold `name`, if one was written.
    async fn fold_snapshot(&self, name: &str) -> Result<Option<FoldSnapshot>, StoreError>;
    /// Writes a fold snapshot off the writer (as searches are), replacing the
    /// one under its name only if this one is at a later seq: nodes writing at
    /// once never move a snapshot back.
    async fn save_fold_snapshot(&self, snapshot: &FoldSnapshot) -> Result<(), StoreError>;
    /// Documents whose `due_at` is at or before `now`, earliest first: the sweeper's work list.
    async fn due_docs(&self, now: Timestamp, limit: usize) -> Result<Vec<(DocKind, String)>, StoreError>;
}

/// What an adapter does inside the writer's transaction. Synchronous: the
/// writer owns a thread and one connection.
pub trait Engine: Send + 'static {
    fn begin(&mut self) -> Result<(), StoreError>;
    /// Loads the chain head (locking it against other nodes) and the rows named by `keys`.
    fn load(&mut self, keys: &Keys) -> Result<Snapshot, StoreError>;
    fn write(&mut self, changes: &Changes) -> Result<(), StoreError>;
    fn commit(&mut self) -> Result<(), StoreError>;
    fn rollback(&mut self);
    /// Deletes up to `limit` idempotency records created before `before`, in a
    /// transaction of its own, on the writer's connection (so SQLite keeps one writer).
    fn prune_idempotency(&mut self, before: Timestamp, limit: usize) -> Result<usize, StoreError>;
}

/// A stored document this build cannot read is corrupt as far as the store's callers are concerned.
impl From<bazaar_core::kernel::docs::DocError> for StoreError {
    fn from(error: bazaar_core::kernel::docs::DocError) -> StoreError {
        StoreError::Corrupt(error.to_string())
    }
}

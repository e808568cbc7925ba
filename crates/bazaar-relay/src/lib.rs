//! The labor market's relay: Nostr events (NIP-01) with their own store,
//! writer and live feed, apart from the money writer, and the jobs read
//! model beside them. No HTTP here; the server owns the sockets.
//!
//! `event` is the event and its id and signature, `filter` and `message`
//! the protocol's other shapes, `kind` the kind table, `limits` every bound
//! (NIP-11 advertises them), `store` the engine trait, `sqlite` the embedded
//! engine, `ingest` the group-commit writer, `relay` admission and queries,
//! `session` one connection, `jobs` the NIP-90-shaped labor market, `collect` the
//! in-process ask/wait collector, `info` the
//! NIP-11 document, and `conformance` the cases every engine passes.
//!
//! ## Map
//!
//! (What this crate holds, file by file; `ARCHITECTURE.md` keeps the one-line summary.)
//!
//! the labor market's relay (issue 12), a plane of its own:
//! `event` (the NIP-01 event, its canonical id — serde_json's escapes are
//! `JSON.stringify`'s — BIP-340 checks via `secp256k1`, `Signer`), `filter`
//! and `message` (strict parsing; a frame is never a reason to drop a
//! socket), `kind` (NIP-01's table), `limits` (every bound; `info` builds
//! NIP-11 from them), `store` (`EventStore`: a batch written in order in one
//! transaction, each event `Stored`/`Duplicate`/`Superseded`/`Deleted`),
//! `sqlite` (its own file, WAL, FULL; a writer and at most `STORE_READERS_MAX` readers, no mmap,
//! `EventStore::memory` for `/metrics`), `ingest` (the plane kit's `GroupWriter` that
//! group-commits whatever is queued, tells live subscribers, then answers
//! `OK`), `relay` (admission: id, signature, time window, NIP-40, access,
//! NIP-70, the directed-job rule; queries; the live feed), `session` (one
//! connection: subscriptions, NIP-42, the publish budget), `jobs` (NIP-90
//! shapes: `JobRequest`, `directed`, `task` — the state derived from the
//! relay), `collect` (ask/wait in process), `labor` (the labor market, sans IO: `enrollment`,
//! `review`, `evidence`, `outcome`, `judge` — with contests' pairwise
//! judging and Bradley–Terry —, `grades`, `allowance` — the model-usage meter,
//! not money), and `conformance`
//! (the storage cases every engine runs). Depends on `bazaar-types`,
//! rusqlite, `secp256k1`, tokio's sync types — never on the core, a money
//! store or HTTP.
//!
//! ## Invariants (from ARCHITECTURE.md)
//!
//! Relay and market invariants, each with a test (`bazaar_relay::conformance`
//! on SQLite and PostgreSQL; `bazaar-server/tests/it/relay.rs` over a real socket;
//! `bazaar-cli/tests/it/relay.rs` with nostr-tools; `bazaar-cli/tests/it/labor.rs`):
//!
//! - `OK` is sent only after the event is durable, and live subscribers hear of
//!   it before its publisher's `OK`; an event's id is always recomputed from its
//!   parsed values and its signature checked before anything is stored.
//! - A replaceable or addressable key holds one version, the newest (ties:
//!   lowest id); a deleted id never comes back for its author; an expired event
//!   is never served.
//! - A directed job's feedback and results come only from the workers it names
//!   (the relay's write policy) and count only from them (the task state and
//!   the validator's collect).
//! - A worker's answer is saved before it is published, so a restart republishes
//!   the same event and never runs the task twice; a coordinator hands off once.
//! - One outcome per task, attested once; unassessed carries no quality (never
//!   0); grades are keyed by (workflow, configuration hash, rubric); the
//!   validator reads no stake or reputation; replay writes nothing.

pub mod collect;
pub mod conformance;
pub mod event;
pub mod filter;
pub mod info;
mod ingest;
pub mod jobs;
pub mod kind;
pub mod labor;
pub mod limits;
pub mod message;
pub mod relay;
pub mod session;
pub mod sqlite;
pub mod store;

pub use event::{Encoded, Event, EventId, Hex32, Invalid, PublicKey, Signer};
pub use filter::Filter;
pub use ingest::Live;
pub use relay::{Access, Ack, Relay, RelayConfig};
pub use session::Session;
pub use store::{EventStore, StoreError, Written};

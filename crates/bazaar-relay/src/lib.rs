//! The labor market's relay: Nostr events (NIP-01) with their own store,
//! writer and live feed, apart from the money writer, and the jobs read
//! model beside them. No HTTP here; the server owns the sockets.
//!
//! `event` is the event and its id and signature, `filter` and `message`
//! the protocol's other shapes, `kind` the kind table, `limits` every bound
//! (NIP-11 advertises them), `store` the engine trait, `sqlite` the embedded
//! engine, `ingest` the group-commit writer, `relay` admission and queries,
//! `session` one connection, `jobs` the NIP-90-shaped market, `collect` the
//! in-process ask/wait collector, `info` the
//! NIP-11 document, and `conformance` the cases every engine passes.

pub mod collect;
pub mod conformance;
pub mod event;
pub mod filter;
pub mod info;
mod ingest;
pub mod jobs;
pub mod kind;
pub mod limits;
pub mod market;
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

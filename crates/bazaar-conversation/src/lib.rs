//! The conversation plane: channels, memberships and messages with their own
//! store and sequencer, apart from the money writer. No HTTP, no async runtime.
//!
//! `model` holds the rows, `acts` what the plane does, written once over any
//! engine's `Rows`, `eligibility` the one predicate deciding delivery
//! and waking, `mentions` the `@handle` scanner, `store` the trait and its
//! errors, `sqlite` the embedded engine on its own database file,
//! `delivery` and `webhooks` the webhook endpoints and outbox (Standard
//! Webhooks signing in `webhooks::sign`), and `conformance` the cases every
//! engine must pass.
//!
//! ## Map
//!
//! (What this crate holds, file by file; `ARCHITECTURE.md` keeps the one-line summary.)
//!
//! the conversation plane (issue 11, first slice):
//! channels (`ChannelId`, DMs derived from the pair), membership stints,
//! messages with a per-channel `seq` and a server-wide `position` (the inbox
//! cursor). `eligibility` (`delivered_to`, `wakes`) is the one place that
//! decides delivery and waking; `compose` checks a body and resolves
//! `@handle` mentions through the narrow `Directory` trait; `engine` (what an
//! engine implements: `Engine` — transactions — and `Rows`, one trait per
//! family — `ChannelRows`, `PeopleRows`, `BodyRows`, `MeterRows`,
//! `OutboxRows` —; `Engine::write` takes an owned (`'static`) act so an
//! engine may run it on another thread); `acts` (the channel and message acts
//! written once: every engine is a `ConversationStore`, and with the other
//! families' acts a `PlaneStore`); `group_commit` (the embedded writer, on the plane kit's `GroupWriter`: every waiting
//! act in one transaction, a savepoint each);
//! `delivery` (webhook endpoints and outbox rows) and `webhooks` (the
//! outbox's acts: claim with a lease, one endpoint's oldest first, retry
//! schedule, 410, dead letters and replay; `sign` — Standard Webhooks v1
//! signatures and secrets, sans-IO); `sealing` (sealed channels, sans-IO:
//! the envelope — HPKE base mode wrapping a ChaCha20-Poly1305 content key
//! per member — the bytes a message signature covers, sealing-key
//! publication, and seal/open for clients; `docs/sealing.md` is its wire
//! format and `tests/sealing_interop.rs` checks it against npm `@hpke/core`
//! both ways); `store` (`ConversationStore`, `ConversationError`
//! with stable codes) and `sqlite`
//! (its own database file, WAL, the group-commit writer with `BEGIN
//! IMMEDIATE` as the sequencer, two read connections, cached statements, its
//! own `migrations/`), and `conformance` (the cases every engine runs, each on a
//! fresh database from a `Harness`; the outbox's in `conformance::webhooks`, sealing's in `conformance::sealing`; `people` — passkeys, ceremonies and
//! sessions, kept by the plane's store for the server's `people` — in `conformance::people`;
//! `bodies` — which of a member's processes answers each addressed event, a
//! lease with a TTL and one answer written per event — in `conformance::bodies`;
//! `meter` — events delivered per member, UTC day and transport — in `conformance::meter`;
//! record references and a record's room in `conformance::records`). Depends on `bazaar-types`, rusqlite
//! and the RustCrypto/`hpke` primitives only — never on the core, a store, the money writer or an async runtime.
//! Its HTTP face is `bazaar-server`'s `conversation` module.
//!
//! ## Invariants (from ARCHITECTURE.md)
//!
//! Conversation invariants, each with a test (`bazaar_conversation::conformance`,
//! run on SQLite and PostgreSQL; `bazaar-server/tests/it/conversation.rs` and
//! `webhooks.rs` over HTTP):
//!
//! - `seq` is gapless per channel and `position` gapless across the plane,
//!   both assigned in the writing transaction under the plane's one write lock.
//! - One predicate (`eligibility::delivered_to`, `wakes`) decides delivery and
//!   waking; the inbox, attention and every live stream use it, and attention
//!   is derived on read, never stored.
//! - A message and the webhook deliveries it owes commit in one transaction;
//!   each endpoint is sent its oldest owed delivery first; a delivery is
//!   delivered, retried, dead-lettered or replayed, never dropped.
//! - A channel is sealed or plaintext from birth and never converts; a sealed
//!   channel stores no plaintext body, and a sealed post is accepted only for
//!   exactly its current members under their current keys, signed by its
//!   author (`conformance::sealing`; `bazaar-server/tests/it/sealing.rs` scans the
//!   database files for the words).
//! - Live streams hold no per-connection queue: each reads from its own
//!   cursor, from memory only across a gap-free window with the member's
//!   stints unchanged since read, so a resume from any cursor neither loses
//!   nor repeats, and memory and store deliver the same.

pub mod acts;
pub mod bodies;
pub mod compose;
pub mod conformance;
pub mod delivery;
pub mod eligibility;
pub mod engine;
mod group_commit;
pub mod mentions;
pub mod meter;
pub mod model;
pub mod people;
pub mod sealing;
pub mod sqlite;
pub mod store;
pub mod webhooks;

pub use bodies::BodyStore;
pub use delivery::{Attempt, Delivery, DeliveryState, Due, Endpoint};
pub use meter::MeterStore;
pub use model::{
    Attention, Channel, ChannelId, ChannelKind, ChannelView, Membership, Message, MessageKind, Notice, RecordRef,
    ReplyTo, Role, SystemLine,
};
pub use people::PeopleStore;
pub use store::{
    Addressed, Change, ChangeKind, ConversationError, ConversationStore, Directory, HandleBook, HistoryRange,
    InboxPage, NewMessage, NewRoom,
};
pub use webhooks::WebhookStore;

/// The whole store an engine offers: conversations, their webhook outbox, people's passkeys and sessions, bodies' leases, and the meter.
pub trait PlaneStore: ConversationStore + WebhookStore + PeopleStore + BodyStore + MeterStore {}

impl<T: ConversationStore + WebhookStore + PeopleStore + BodyStore + MeterStore + ?Sized> PlaneStore for T {}

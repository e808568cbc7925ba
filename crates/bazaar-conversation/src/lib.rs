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

pub mod acts;
pub mod bodies;
pub mod compose;
pub mod conformance;
pub mod delivery;
pub mod eligibility;
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

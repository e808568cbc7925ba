//! What an engine implements, family by family: transactions ([`Engine`]) over the rows the acts read and
//! write ([`Rows`], one trait per family: [`ChannelRows`], [`PeopleRows`], [`BodyRows`], [`MeterRows`],
//! [`OutboxRows`]). Every `Engine` is then a `ConversationStore` (`acts`), a `PeopleStore`, a `BodyStore`,
//! a `MeterStore` and a `WebhookStore`. Below every family's acts, so none of them imports another.

use crate::delivery::{Delivery, DeliveryState, Endpoint};
use crate::model::{
    Answer, BodyLease, Ceremony, Channel, ChannelId, Membership, Message, Metered, PasskeyRecord, Session,
};
use crate::sealing::SealingKey;
use crate::store::{HistoryRange, Result};
use bazaar_types::{Entropy, MemberId, Timestamp};

/// An engine: transactions over [`Rows`], and the randomness room ids come from.
pub trait Engine {
    type Tx<'t>: Rows
    where
        Self: 't;
    fn entropy(&self) -> &dyn Entropy;
    /// One serialised write act at the engine's clock time, committed if `act`
    /// succeeds and undone if it fails. An engine may commit several acts in
    /// one transaction (group commit), each in a savepoint of its own, so
    /// `act` owns what it needs (`'static`) and may run on another thread.
    fn write<T: Send + 'static>(
        &self,
        act: impl FnOnce(&Self::Tx<'_>, Timestamp) -> Result<T> + Send + 'static,
    ) -> Result<T>;
    fn read<T>(&self, act: impl FnOnce(&Self::Tx<'_>) -> Result<T>) -> Result<T>;
    /// The engine's SQLite connections and their configured memory, if it is SQLite (for `/metrics`).
    fn memory(&self) -> Option<bazaar_types::SqliteMemory> {
        None
    }
}

/// The rows of one transaction, as an engine reads and writes them: one trait per family, the acts of
/// `acts` (channels and messages), `people`, `bodies`, `meter` and `webhooks` each read through theirs. An
/// engine implements each; together they are its `Rows`.
pub trait Rows: ChannelRows + PeopleRows + BodyRows + MeterRows + OutboxRows {}

impl<T: ChannelRows + PeopleRows + BodyRows + MeterRows + OutboxRows> Rows for T {}

/// Channels, stints, messages, counters and sealing keys.
pub trait ChannelRows {
    fn load_channel(&self, id: &ChannelId) -> Result<Channel>;
    /// The member's open stint in the channel, if any.
    fn current_stint(&self, channel: &ChannelId, member: &MemberId) -> Result<Option<Membership>>;
    /// The member's stints, in the order they were opened; only open ones if `only_current`.
    fn stints_of(&self, member: &MemberId, only_current: bool) -> Result<Vec<Membership>>;
    /// Mute and read mark of the member's latest stint in the channel, open or closed.
    fn previous_stint(&self, channel: &ChannelId, member: &MemberId) -> Result<Option<(bool, u64)>>;
    fn open_member_count(&self, channel: &ChannelId) -> Result<usize>;
    /// The channel's open stints, in the order they were opened.
    fn current_members(&self, channel: &ChannelId) -> Result<Vec<Membership>>;
    /// Public rooms ordered by id, after `after` (exclusive), at most `limit`.
    fn public_rooms(&self, after: Option<&ChannelId>, limit: usize) -> Result<Vec<Channel>>;
    fn last_position(&self) -> Result<u64>;
    fn last_seq(&self, channel: &ChannelId) -> Result<u64>;
    /// The channel's next `seq` and the next log position, taken for a message about to be written.
    fn next_numbers(&self, channel: &ChannelId) -> Result<(u64, u64)>;
    fn reply_author(&self, channel: &ChannelId, seq: u64) -> Result<MemberId>;
    /// A page of the channel's messages: `Latest` and `Before` newest first, `After` oldest first.
    fn channel_messages(&self, channel: &ChannelId, range: HistoryRange, limit: usize) -> Result<Vec<Message>>;
    /// Messages after `after_position` in channels the member ever joined, in position order, at most `scan`.
    fn inbox_candidates(&self, member: &MemberId, after_position: u64, scan: usize) -> Result<Vec<Message>>;
    /// The channel's messages after `seq`, in seq order.
    fn messages_after(&self, channel: &ChannelId, seq: u64, limit: usize) -> Result<Vec<Message>>;
    fn insert_channel(&self, channel: &Channel) -> Result<()>;
    fn insert_stint(&self, stint: &Membership) -> Result<()>;
    /// Writes the open stint's role, leave, mute and read mark.
    fn update_open_stint(&self, stint: &Membership) -> Result<()>;
    /// Writes a message; `idem_key` is the author's key for it, if any.
    fn insert_message(&self, message: &Message, idem_key: Option<&str>) -> Result<()>;
    fn load_message(&self, channel: &ChannelId, seq: u64) -> Result<Option<Message>>;
    /// The messages that change message `seq` (reactions, edits, deletions), in seq order.
    fn messages_referring(&self, channel: &ChannelId, seq: u64) -> Result<Vec<Message>>;
    /// The message the author posted under `key`, if any.
    fn message_by_idem(&self, author: &MemberId, key: &str) -> Result<Option<Message>>;
    fn counter(&self, name: &str) -> Result<u64>;
    fn set_counter(&self, name: &str, value: u64) -> Result<()>;
    fn sealing_key(&self, member: &MemberId) -> Result<Option<SealingKey>>;
    /// Writes the member's sealing key, replacing any earlier one.
    fn put_sealing_key(&self, key: &SealingKey) -> Result<()>;
}

/// People's passkeys, ceremonies and sessions, as an engine reads and writes them.
pub trait PeopleRows {
    fn insert_passkey(&self, passkey: &PasskeyRecord) -> Result<()>;
    fn load_passkey(&self, credential_id: &str) -> Result<Option<PasskeyRecord>>;
    fn passkeys_of(&self, member: &MemberId) -> Result<Vec<PasskeyRecord>>;
    /// Writes a passkey's stored state and when it was last used.
    fn update_passkey(&self, passkey: &PasskeyRecord) -> Result<()>;
    fn insert_ceremony(&self, ceremony: &Ceremony) -> Result<()>;
    /// Deletes the ceremony and returns it, if it exists.
    fn take_ceremony(&self, id: &str) -> Result<Option<Ceremony>>;
    fn insert_session(&self, session: &Session) -> Result<()>;
    fn load_session(&self, hash: &str) -> Result<Option<Session>>;
    /// Writes a session's revocation.
    fn update_session(&self, session: &Session) -> Result<()>;
}

/// Bodies' leases and the answers they were given, as an engine reads and writes them.
pub trait BodyRows {
    fn load_lease(&self, member: &MemberId) -> Result<Option<BodyLease>>;
    fn put_lease(&self, lease: &BodyLease) -> Result<()>;
    fn delete_lease(&self, member: &MemberId) -> Result<()>;
    fn load_answer(&self, member: &MemberId, position: u64) -> Result<Option<Answer>>;
    fn insert_answer(&self, answer: &Answer) -> Result<()>;
    /// The member's answers after `after_position`, oldest first, at most `limit`.
    fn answers_of(&self, member: &MemberId, after_position: u64, limit: usize) -> Result<Vec<Answer>>;
}

/// The meter's rows, as an engine reads and writes them.
pub trait MeterRows {
    /// Adds `count.events` to its (member, day, transport) total.
    fn add_meter(&self, count: &Metered) -> Result<()>;
    fn meter_of(&self, member: &MemberId, day: i64) -> Result<Vec<Metered>>;
}

/// The webhook outbox's rows (endpoints and deliveries), as an engine reads and writes them.
pub trait OutboxRows {
    /// One pending delivery of the message at `position` for every enabled
    /// endpoint of every current member of the channel: for a message being
    /// posted now, the SQL form of `delivered_to` (its position is past every
    /// open stint's start).
    fn enqueue_deliveries(&self, channel: &ChannelId, position: u64, now: Timestamp) -> Result<()>;
    fn insert_endpoint(&self, endpoint: &Endpoint) -> Result<()>;
    fn load_endpoint(&self, id: &str) -> Result<Option<Endpoint>>;
    fn endpoints_of(&self, member: &MemberId) -> Result<Vec<Endpoint>>;
    fn update_endpoint(&self, endpoint: &Endpoint) -> Result<()>;
    /// Deletes the endpoint and its deliveries.
    fn delete_endpoint(&self, id: &str) -> Result<()>;
    /// Pending deliveries due at `now` and not leased, each the oldest its
    /// (enabled) endpoint is owed, soonest first, at most `limit`.
    fn due_deliveries(&self, now: Timestamp, limit: usize) -> Result<Vec<Delivery>>;
    fn load_delivery(&self, id: u64) -> Result<Option<Delivery>>;
    /// Writes a delivery's state, attempts, schedule, lease and last answer.
    fn update_delivery(&self, delivery: &Delivery) -> Result<()>;
    fn message_at(&self, position: u64) -> Result<Message>;
    fn deliveries_of(&self, endpoint: &str, state: DeliveryState, limit: usize) -> Result<Vec<Delivery>>;
    /// Dead deliveries of the endpoint back to pending, due now, attempts reset; how many.
    fn requeue_dead(&self, endpoint: &str, now: Timestamp) -> Result<u64>;
}

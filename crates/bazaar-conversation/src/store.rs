//! The conversation store: the trait every engine implements, its requests,
//! its typed errors with stable codes, and the narrow identity view it needs.

use std::collections::HashMap;

use bazaar_types::MemberId;

use crate::model::{
    Attention, Channel, ChannelId, ChannelView, Membership, Message, Notice, RecordRef, Role, SystemLine,
};
use crate::sealing::{SealedBody, SealingKey};

/// The little the conversation plane needs to know about identity: handles
/// both ways. The registry's identity capability implements it; tests use a map.
pub trait Directory {
    fn member_by_handle(&self, handle: &str) -> Option<MemberId>;
    fn handle_of(&self, id: &MemberId) -> Option<String>;
}

/// A directory written down before a post: the handles the body mentions and
/// the author's, looked up by a caller whose identity store is asynchronous,
/// so the store's transaction never waits on another store.
#[derive(Clone, Debug, Default)]
pub struct HandleBook {
    by_handle: HashMap<String, MemberId>,
}

impl HandleBook {
    pub fn insert(&mut self, handle: impl Into<String>, member: MemberId) {
        self.by_handle.insert(handle.into(), member);
    }
}

impl Directory for HandleBook {
    fn member_by_handle(&self, handle: &str) -> Option<MemberId> {
        self.by_handle.get(handle).cloned()
    }
    fn handle_of(&self, id: &MemberId) -> Option<String> {
        self.by_handle.iter().find(|(_, member)| *member == id).map(|(handle, _)| handle.clone())
    }
}

/// A room to create; its creator becomes its owner and first member.
#[derive(Clone, Debug)]
pub struct NewRoom {
    pub owner: MemberId,
    pub name: String,
    /// Only an owner adds members to a private room; anyone joins a public one.
    pub private: bool,
    /// Ask for a sealed (private) room: sealed if the owner has a sealing key.
    pub sealed: bool,
}

/// A text message to post. The store assigns `seq`, `position` and `at`,
/// records the author's handle and resolves mentions and the reply's author.
#[derive(Clone, Debug)]
pub struct NewMessage {
    pub channel: ChannelId,
    pub authored_by: MemberId,
    pub on_behalf_of: Option<MemberId>,
    pub body: String,
    pub reply_to: Option<u64>,
    /// The author's key for this post: a retry with the same key returns the
    /// message first posted (the same body is required), never a second one.
    pub idem_key: Option<String>,
    /// The author is an agent: in rooms it keeps the etiquette limit
    /// (`AGENT_UNADDRESSED_POSTS_MAX` posts since it was last addressed).
    pub by_agent: bool,
    /// The sealed body, in a sealed channel (then `body` is empty).
    pub sealed: Option<SealedBody>,
    /// The author's signature, checked by the caller before the store sees it.
    pub signature: Option<String>,
    /// Handles the sender says a sealed body mentions (the store cannot read it).
    pub mentions: Vec<String>,
    /// Registry records the message points at.
    pub refs: Vec<RecordRef>,
}

impl NewMessage {
    /// A plain text post by `author`, nothing else set.
    pub fn text(channel: ChannelId, author: MemberId, body: impl Into<String>) -> NewMessage {
        NewMessage {
            channel,
            authored_by: author,
            on_behalf_of: None,
            body: body.into(),
            reply_to: None,
            idem_key: None,
            by_agent: false,
            sealed: None,
            signature: None,
            mentions: Vec::new(),
            refs: Vec::new(),
        }
    }
}

/// A change to a text message, posted as a message of its own.
#[derive(Clone, Debug)]
pub struct Change {
    pub channel: ChannelId,
    pub author: MemberId,
    /// The principal an agent speaks for, as on a post.
    pub on_behalf_of: Option<MemberId>,
    /// The `seq` of the text message it changes.
    pub target: u64,
    pub what: ChangeKind,
}

#[derive(Clone, Debug)]
pub enum ChangeKind {
    /// Any member reacts (or withdraws its reaction) with an emoji.
    React { emoji: String, removed: bool },
    /// Its author gives it new text.
    Edit { body: String },
    /// Its author gives it new text, sealed (in a sealed channel): the same
    /// envelope and signature rules as a sealed post.
    SealedEdit { sealed: SealedBody, signature: String, mentions: Vec<String> },
    /// Its author or an owner of the room withdraws it.
    Delete,
}

/// Which slice of a channel's history to read, by `seq`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HistoryRange {
    /// The newest messages.
    Latest,
    /// Messages older than this seq (paging backwards).
    Before(u64),
    /// Messages newer than this seq (catching up).
    After(u64),
}

/// One page of a member's inbox. `next_after` is the cursor to pass next: the
/// last log position this read looked at, which may be past the last message
/// returned when the read skipped messages not delivered to the member.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InboxPage {
    pub messages: Vec<Message>,
    pub next_after: u64,
}

/// Why the store refused. Each has a stable machine code (`code`) for the edge.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[non_exhaustive]
pub enum ConversationError {
    #[error("no channel {0}")]
    ChannelNotFound(ChannelId),
    #[error("{member} is not a member of {channel}")]
    NotMember { channel: ChannelId, member: MemberId },
    #[error("{member} is not a member of {channel} now: there is nobody to remove or change")]
    NotInChannel { channel: ChannelId, member: MemberId },
    #[error("{member} is already a member of {channel}")]
    AlreadyMember { channel: ChannelId, member: MemberId },
    #[error("only an owner of {0} may do this")]
    NotOwner(ChannelId),
    #[error("{0} is a private room: an owner must add members")]
    PrivateRoom(ChannelId),
    #[error("{0} is a direct message: nobody joins, leaves or is added")]
    DirectMessage(ChannelId),
    #[error("a direct message needs two different members")]
    DmWithSelf,
    #[error("{0} has as many members as a channel may hold")]
    ChannelFull(ChannelId),
    #[error("a room name is 1 to {max} bytes; this one is {len}")]
    NameInvalid { len: usize, max: usize },
    #[error("a message body may not be empty")]
    BodyEmpty,
    #[error("a message body is at most {max} bytes; this one is {len}")]
    BodyTooLong { len: usize, max: usize },
    #[error("a message may mention at most {max} members; this one mentions {count}")]
    TooManyMentions { count: usize, max: usize },
    #[error("no message {seq} in this channel to reply to")]
    ReplyNotFound { seq: u64 },
    #[error("no message {seq} in this channel to mark read")]
    SeqOutOfRange { seq: u64 },
    #[error("a page holds 1 to {max} messages; {asked} were asked for")]
    PageInvalid { asked: usize, max: usize },
    #[error("{0} would be left without an owner: make another member an owner first")]
    LastOwner(ChannelId),
    #[error("to leave a room, leave it; removal is for others")]
    RemoveSelf,
    #[error("no message {seq} in this channel")]
    MessageNotFound { seq: u64 },
    #[error("message {seq} is not a text message; only text is reacted to, edited or deleted")]
    TargetInvalid { seq: u64 },
    #[error("only the author of message {seq} may do this")]
    NotAuthor { seq: u64 },
    #[error("message {seq} was deleted")]
    MessageDeleted { seq: u64 },
    #[error("a reaction is 1 to {max} bytes with no spaces; this one is {len}")]
    ReactionInvalid { len: usize, max: usize },
    #[error("an agent may post {max} messages to a room without being addressed; wait to be mentioned or replied to")]
    EtiquetteLimit { max: usize },
    #[error("this idempotency key was used for a different post")]
    IdempotencyConflict,
    #[error("no webhook endpoint {0} of yours")]
    WebhookNotFound(String),
    #[error("a member may register at most {max} webhook endpoints")]
    TooManyWebhooks { max: usize },
    #[error("the webhook URL is refused: {0}")]
    WebhookUrlInvalid(String),
    #[error("no webhook delivery {0}")]
    DeliveryNotFound(u64),
    #[error("{0} is sealed: post a sealed body (docs/sealing.md), never plaintext")]
    SealedRequired(ChannelId),
    #[error("{0} is not sealed: post plaintext; a channel never converts")]
    NotSealed(ChannelId),
    #[error("a sealed post must be sealed for exactly the current members with their current keys: {0}")]
    SealedRecipients(String),
    #[error("the sealed body is malformed: {0}")]
    SealedInvalid(String),
    #[error("{0} has no sealing key; a sealed room admits only members who published one")]
    SealingKeyRequired(MemberId),
    #[error("a public room cannot be sealed; make it private")]
    SealedPublicRoom,
    #[error("a sealed post must carry its author's signature")]
    SignatureRequired,
    #[error("the signature does not verify against the author's key")]
    SignatureInvalid,
    #[error("a record reference is refused: {0}")]
    RefsInvalid(String),
    #[error("a body's name is 1 to {max} bytes of A-Z, a-z, 0-9, '-' and '_'")]
    BodyNameInvalid { max: usize },
    #[error("this passkey is registered already")]
    PasskeyExists,
    #[error("a person may register at most {max} passkeys")]
    TooManyPasskeys { max: usize },
    #[error("the conversation store is unavailable: {0}")]
    Unavailable(String),
}

impl ConversationError {
    /// The stable machine code the edge maps to problem+json.
    pub fn code(&self) -> &'static str {
        match self {
            ConversationError::ChannelNotFound(_) => "channel_not_found",
            ConversationError::NotMember { .. } => "not_member",
            ConversationError::NotInChannel { .. } => "member_not_in_channel",
            ConversationError::AlreadyMember { .. } => "already_member",
            ConversationError::NotOwner(_) => "not_owner",
            ConversationError::PrivateRoom(_) => "private_room",
            ConversationError::DirectMessage(_) => "direct_message",
            ConversationError::DmWithSelf => "dm_with_self",
            ConversationError::ChannelFull(_) => "channel_full",
            ConversationError::NameInvalid { .. } => "name_invalid",
            ConversationError::BodyEmpty => "body_empty",
            ConversationError::BodyTooLong { .. } => "body_too_long",
            ConversationError::TooManyMentions { .. } => "too_many_mentions",
            ConversationError::ReplyNotFound { .. } => "reply_not_found",
            ConversationError::SeqOutOfRange { .. } => "seq_out_of_range",
            ConversationError::PageInvalid { .. } => "page_invalid",
            ConversationError::LastOwner(_) => "last_owner",
            ConversationError::RemoveSelf => "remove_self",
            ConversationError::MessageNotFound { .. } => "message_not_found",
            ConversationError::TargetInvalid { .. } => "target_invalid",
            ConversationError::NotAuthor { .. } => "not_author",
            ConversationError::MessageDeleted { .. } => "message_deleted",
            ConversationError::ReactionInvalid { .. } => "reaction_invalid",
            ConversationError::IdempotencyConflict => "idempotency_conflict",
            ConversationError::EtiquetteLimit { .. } => "etiquette_limit",
            ConversationError::WebhookNotFound(_) => "webhook_not_found",
            ConversationError::TooManyWebhooks { .. } => "too_many_webhooks",
            ConversationError::WebhookUrlInvalid(_) => "webhook_url_invalid",
            ConversationError::DeliveryNotFound(_) => "delivery_not_found",
            ConversationError::SealedRequired(_) => "sealed_required",
            ConversationError::NotSealed(_) => "not_sealed",
            ConversationError::SealedRecipients(_) => "sealed_recipients",
            ConversationError::SealedInvalid(_) => "sealed_invalid",
            ConversationError::SealingKeyRequired(_) => "sealing_key_required",
            ConversationError::SealedPublicRoom => "sealed_public_room",
            ConversationError::SignatureRequired => "signature_required",
            ConversationError::SignatureInvalid => "signature_invalid",
            ConversationError::RefsInvalid(_) => "refs_invalid",
            ConversationError::BodyNameInvalid { .. } => "body_name_invalid",
            ConversationError::PasskeyExists => "passkey_exists",
            ConversationError::TooManyPasskeys { .. } => "too_many_passkeys",
            ConversationError::Unavailable(_) => "unavailable",
        }
    }
}

pub type Result<T> = std::result::Result<T, ConversationError>;

/// One registry notice for one member, written once under `key`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Addressed {
    pub to: MemberId,
    pub notice: Notice,
    pub body: String,
    pub key: String,
}

/// The conversation plane's store: its own database and its own sequencer,
/// never a command on the money writer. Every write is one transaction.
pub trait ConversationStore {
    /// The store's SQLite connections and their configured memory, if it is SQLite (for `/metrics`).
    fn sqlite_memory(&self) -> Option<bazaar_types::SqliteMemory>;
    fn create_room(&self, room: NewRoom) -> Result<Channel>;
    /// The DM of two members, created on first use; both are its members.
    fn open_dm(&self, one: &MemberId, two: &MemberId) -> Result<Channel>;
    /// Join a public room.
    fn join(&self, channel: &ChannelId, member: &MemberId) -> Result<Membership>;
    /// An owner adds a member to a room (the only way into a private one).
    fn add_member(&self, channel: &ChannelId, by: &MemberId, member: &MemberId) -> Result<Membership>;
    /// Leaves a room; the last owner of a room others are still in may not.
    fn leave(&self, channel: &ChannelId, member: &MemberId) -> Result<Membership>;
    /// An owner removes another member from a room.
    fn remove_member(&self, channel: &ChannelId, by: &MemberId, member: &MemberId) -> Result<Membership>;
    /// An owner makes a member an owner, or an owner a member (never the last owner).
    fn set_role(&self, channel: &ChannelId, by: &MemberId, member: &MemberId, role: Role) -> Result<Membership>;
    /// Posts registry notices, in order and in one transaction, each to its
    /// member in its DM with `from` (the registry), opening the DM if need be.
    /// Each `key` makes its notice once-only: a notice already written under it
    /// is returned, never a second one. The messages, in the notices' order.
    fn notify(&self, from: &MemberId, notices: Vec<Addressed>) -> Result<Vec<Message>>;
    /// The room of a registry record (a dispute's), private and owned by
    /// `by` (the registry), one per record; each of `members` not in it now is
    /// added (with a joined line). Named `name` when first opened.
    /// Returns the room and the members added now.
    fn record_room(
        &self,
        by: &MemberId,
        record: RecordRef,
        name: String,
        members: Vec<MemberId>,
    ) -> Result<(Channel, Vec<MemberId>)>;
    /// A line `by` (an owner of the channel) writes in it, once per `key` (a
    /// second write under the key returns the first).
    fn record_line(&self, by: &MemberId, channel: &ChannelId, line: SystemLine, key: String) -> Result<Message>;
    /// Writes that `member` was renamed in every channel it is in now, once
    /// per channel under `key` (the ledger event's); the lines written.
    fn renamed(&self, member: &MemberId, from: String, to: String, key: String) -> Result<Vec<Message>>;
    /// A number the plane keeps for its own bookkeeping (the notifier's
    /// ledger cursor), 0 if never set.
    fn counter(&self, name: &str) -> Result<u64>;
    fn set_counter(&self, name: &str, value: u64) -> Result<()>;
    /// Reacts to, edits or deletes a text message, as a message of its own.
    fn change(&self, directory: &dyn Directory, change: Change) -> Result<Message>;
    fn set_muted(&self, channel: &ChannelId, member: &MemberId, muted: bool) -> Result<Membership>;
    /// Posts a text message; the author's read mark moves to it (posting reads the channel).
    fn post(&self, directory: &dyn Directory, message: NewMessage) -> Result<Message>;
    /// A current member reads its channel's history, oldest first.
    fn history(
        &self,
        channel: &ChannelId,
        reader: &MemberId,
        range: HistoryRange,
        limit: usize,
    ) -> Result<Vec<Message>>;
    /// Everything delivered to the member after the cursor, in log order.
    fn inbox(&self, member: &MemberId, after_position: u64, limit: usize) -> Result<InboxPage>;
    /// The log's last committed position (every node's messages): what a
    /// node compares with the signals it heard.
    fn log_head(&self) -> Result<u64>;
    /// Move the member's read mark forward (never back) to `seq`.
    fn mark_read(&self, member: &MemberId, channel: &ChannelId, seq: u64) -> Result<Membership>;
    /// Unread and waking counts for each channel the member is in now,
    /// derived from messages and memberships (no stored counters).
    fn attention(&self, member: &MemberId) -> Result<Vec<Attention>>;
    /// A channel and its current members. A public room is open to anyone's
    /// reading (to decide whether to join); a private room or a DM only to its members.
    fn channel(&self, channel: &ChannelId, reader: &MemberId) -> Result<ChannelView>;
    /// Public rooms by id, after `after` (exclusive), at most `limit`.
    fn public_rooms(&self, after: Option<&ChannelId>, limit: usize) -> Result<Vec<Channel>>;
    /// Every stint of the member, current and past, for tests and audits.
    fn memberships_of(&self, member: &MemberId) -> Result<Vec<Membership>>;
    /// Publishes (or replaces) a member's sealing key; the caller has checked
    /// its signature by the member's identity key.
    fn publish_sealing_key(&self, key: SealingKey) -> Result<SealingKey>;
    fn sealing_key(&self, member: &MemberId) -> Result<Option<SealingKey>>;
    /// Every current member of the channel with its sealing key, if any: what
    /// a sender seals for. Only members read it.
    fn sealing_keys(&self, channel: &ChannelId, reader: &MemberId) -> Result<Vec<(MemberId, Option<SealingKey>)>>;
}

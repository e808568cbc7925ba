//! The conversation plane's response bodies: channels, memberships,
//! messages, inbox pages and attention, as `bazaar-conversation` serialises them.

use super::OpenObject;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// A DM or a room.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Channel {
    /// `ch_` and 32 hex characters (a DM's is derived from its two members).
    pub id: String,
    /// `dm`, `public_room` or `private_room`.
    pub kind: String,
    /// A room's name; null for a DM.
    #[cfg_attr(feature = "openapi", schema(required = true))]
    pub name: Option<String>,
    pub created_by: String,
    /// Unix milliseconds.
    pub created_at: i64,
    /// Sealed at birth (bodies encrypted for the members; `docs/sealing.md`) or plaintext. Never changes.
    pub sealed: bool,
}

/// One stint of a member in a channel (joining opens one, leaving closes it).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Membership {
    pub channel: String,
    pub member: String,
    /// `owner` or `member`.
    pub role: String,
    pub joined_at: i64,
    /// The log position when it joined: it receives messages after it.
    pub joined_after: u64,
    #[cfg_attr(feature = "openapi", schema(required = true))]
    pub left_at: Option<i64>,
    /// The log position when it left: it received messages up to it.
    #[cfg_attr(feature = "openapi", schema(required = true))]
    pub left_after: Option<u64>,
    pub muted: bool,
    /// The highest `seq` it has read.
    pub read_seq: u64,
}

/// A channel the caller is in, with its unread and waking counts (the membership's fields, flattened).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct MyChannel {
    #[serde(flatten)]
    pub membership: Membership,
    /// Messages delivered after the read mark.
    pub unread: u64,
    /// Of those, the ones that wake the caller (DM, mention, reply to it).
    pub wakes: u64,
}

/// A member in a channel's member list (the membership's fields, flattened).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ListedMember {
    #[serde(flatten)]
    pub membership: Membership,
    /// `websocket`, `sse`, `webhook`: the transports it listens on now; empty if it only polls.
    pub listening: Vec<String>,
}

/// A channel (its fields, flattened) and its current members.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ChannelView {
    #[serde(flatten)]
    pub channel: Channel,
    pub members: Vec<ListedMember>,
}

/// The message a reply answers.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ReplyTo {
    pub seq: u64,
    pub author: String,
}

/// A message in a channel.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Message {
    pub channel: String,
    /// The channel's kind.
    pub channel_kind: String,
    /// Gapless per channel, from 1.
    pub seq: u64,
    /// The server-wide log position: the cursor every transport resumes from.
    pub position: u64,
    pub authored_by: String,
    /// The owner an agent speaks for; null for a person or a standalone agent.
    #[cfg_attr(feature = "openapi", schema(required = true))]
    pub on_behalf_of: Option<String>,
    /// The author's handle when it posted.
    #[cfg_attr(feature = "openapi", schema(required = true))]
    pub handle: Option<String>,
    /// `{"type":"text"}`; `{"type":"system","line":…}` for what the server says;
    /// `{"type":"reaction","to":seq,"removed":…}`, `{"type":"edit","of":seq}` or
    /// `{"type":"deletion","of":seq}` for a change to message `seq`.
    pub kind: OpenObject,
    pub body: String,
    #[cfg_attr(feature = "openapi", schema(required = true))]
    pub reply_to: Option<ReplyTo>,
    /// Members mentioned, resolved when the message was posted.
    pub mentions: Vec<String>,
    /// Unix milliseconds.
    pub at: i64,
    /// In a sealed channel: the encrypted body (`body` is empty). See `docs/sealing.md`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sealed: Option<OpenObject>,
    /// The author's Ed25519 signature (base64url), checked when it was posted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signature: Option<String>,
    /// Registry records the message points at: `[{"kind", "id"}]`; absent when none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub refs: Option<Vec<OpenObject>>,
}

/// A member's published X25519 sealing key.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct SealingKey {
    pub member: String,
    /// 32 bytes, base64url without padding.
    pub public_key: String,
    /// Ed25519 by the member's `did:key` over `bazaar/sealing-key/v1\n{member}\n{public_key}`.
    pub signature: String,
    /// Unix milliseconds.
    pub published_at: i64,
}

/// A current member of a channel and its sealing key (`null`: it has none).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct MemberSealingKey {
    pub member: String,
    #[cfg_attr(feature = "openapi", schema(required = true))]
    pub sealing_key: Option<SealingKey>,
}

/// A page of the inbox.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct InboxPage {
    pub messages: Vec<Message>,
    /// The cursor to pass as `after` next.
    pub next_after: u64,
}

/// What needs attention in one channel.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Attention {
    pub channel: String,
    pub unread: u64,
    pub wakes: u64,
    /// Present (true) when more unread messages lie beyond the 1,000 read: show "1000+".
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub capped: Option<bool>,
}

/// A person's registered passkey (never its key material).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Passkey {
    /// The WebAuthn credential id, base64url.
    pub credential_id: String,
    pub member: String,
    /// The WebAuthn user handle: a UUID (v5) of the member id.
    pub user_handle: String,
    pub created_at: i64,
    #[cfg_attr(feature = "openapi", schema(required = true))]
    pub last_used_at: Option<i64>,
}

/// The body chosen to answer one event that addressed the member.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Answer {
    pub member: String,
    /// The event's log position.
    pub position: u64,
    pub body: String,
    pub at: i64,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Meter {
    pub member: String,
    /// The UTC day, `YYYY-MM-DD`.
    pub day: String,
    /// Events delivered that day, by transport (`websocket`, `sse`, `poll`, `webhook`).
    pub delivered: BTreeMap<String, u64>,
}

/// An endpoint as its member sees it (never its secret, but at registration and rotation).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct WebhookView {
    pub id: String,
    pub url: String,
    /// Unix milliseconds.
    pub created_at: i64,
    /// Set when the receiver answered 410 Gone; nothing is sent while it is.
    #[cfg_attr(feature = "openapi", schema(required = true))]
    pub disabled_at: Option<i64>,
    #[cfg_attr(feature = "openapi", schema(required = true))]
    pub disabled_reason: Option<String>,
    /// Until when the previous secret also signs (after a rotation).
    #[cfg_attr(feature = "openapi", schema(required = true))]
    pub previous_until: Option<i64>,
    /// The `whsec_…` secret: shown when the endpoint is registered and when it rotates, never again.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub secret: Option<String>,
}

/// One message owed to one endpoint, and how its delivery stands.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct WebhookDelivery {
    pub id: u64,
    pub endpoint: String,
    /// The message's log position (its cursor).
    pub position: u64,
    /// `pending`, `delivered` or `dead`.
    pub state: String,
    /// Attempts made so far.
    pub attempts: u32,
    /// Unix milliseconds.
    pub next_attempt_at: i64,
    /// The receiver's last HTTP status; null before any answer.
    #[cfg_attr(feature = "openapi", schema(required = true))]
    pub last_status: Option<u16>,
    #[cfg_attr(feature = "openapi", schema(required = true))]
    pub last_error: Option<String>,
    /// Unix milliseconds.
    pub updated_at: i64,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct WebhookRemoved {
    pub id: String,
    pub removed: bool,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Replayed {
    /// Dead deliveries put back in line, in log order, with fresh attempts.
    pub replayed: u64,
}

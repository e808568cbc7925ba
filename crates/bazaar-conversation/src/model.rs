//! The conversation plane's rows: channels, memberships and messages, as the store returns them.

use std::fmt;

use bazaar_types::{Entropy, MemberId, Timestamp};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

/// Hex characters after `ch_` in a channel id (128 bits, random or derived).
const CHANNEL_ID_HEX_LEN: usize = 32;

/// A channel: `ch_` and 32 hex characters, random for rooms, derived from the
/// pair for a direct message (so two members share exactly one DM).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct ChannelId(pub String);

impl ChannelId {
    /// A fresh room id from the injected randomness.
    pub fn random(entropy: &dyn Entropy) -> ChannelId {
        let mut bytes = [0u8; CHANNEL_ID_HEX_LEN / 2];
        entropy.fill(&mut bytes);
        ChannelId(format!("ch_{}", hex::encode(bytes)))
    }

    /// The direct-message channel of two members, the same whichever opens it.
    /// The room of a registry record (a dispute's): one per record, the
    /// same whoever opens it.
    pub fn of_record(record: &RecordRef) -> ChannelId {
        let mut hasher = Sha256::new();
        hasher.update(b"bazaar-record-room-v1\0");
        hasher.update(record.kind.as_bytes());
        hasher.update(b"\0");
        hasher.update(record.id.as_bytes());
        let digest = hex::encode(hasher.finalize());
        ChannelId(format!("ch_{}", &digest[..CHANNEL_ID_HEX_LEN]))
    }

    pub fn dm(one: &MemberId, two: &MemberId) -> ChannelId {
        let (low, high) = if one <= two { (one, two) } else { (two, one) };
        let mut hasher = Sha256::new();
        hasher.update(b"bazaar-dm-v1\0");
        hasher.update(low.as_str().as_bytes());
        hasher.update(b"\0");
        hasher.update(high.as_str().as_bytes());
        let digest = hex::encode(hasher.finalize());
        ChannelId(format!("ch_{}", &digest[..CHANNEL_ID_HEX_LEN]))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for ChannelId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ChannelKind {
    /// Two members, nobody else; every message wakes the other.
    Dm,
    /// Anyone may join.
    PublicRoom,
    /// Only an owner adds members.
    PrivateRoom,
}

impl ChannelKind {
    pub fn as_str(self) -> &'static str {
        match self {
            ChannelKind::Dm => "dm",
            ChannelKind::PublicRoom => "public_room",
            ChannelKind::PrivateRoom => "private_room",
        }
    }

    pub fn parse(text: &str) -> Option<ChannelKind> {
        match text {
            "dm" => Some(ChannelKind::Dm),
            "public_room" => Some(ChannelKind::PublicRoom),
            "private_room" => Some(ChannelKind::PrivateRoom),
            _ => None,
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    Owner,
    Member,
}

impl Role {
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Owner => "owner",
            Role::Member => "member",
        }
    }

    pub fn parse(text: &str) -> Option<Role> {
        match text {
            "owner" => Some(Role::Owner),
            "member" => Some(Role::Member),
            _ => None,
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Channel {
    pub id: ChannelId,
    pub kind: ChannelKind,
    /// A room's display name; a DM has none.
    pub name: Option<String>,
    pub created_by: MemberId,
    pub created_at: Timestamp,
    /// Sealed at birth (every message encrypted for its members; see
    /// `docs/sealing.md`) or plaintext; a channel never converts.
    #[serde(default)]
    pub sealed: bool,
}

/// A channel with the members it has now.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChannelView {
    #[serde(flatten)]
    pub channel: Channel,
    pub members: Vec<Membership>,
}

/// One stint of a member in a channel: joining opens one, leaving closes it,
/// joining again opens another. Which messages a stint receives is fixed by
/// log positions (exact), not by timestamps (two events may share a millisecond).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Membership {
    pub channel: ChannelId,
    pub member: MemberId,
    pub role: Role,
    pub joined_at: Timestamp,
    /// The last log position when the member joined: it receives messages after it.
    pub joined_after: u64,
    pub left_at: Option<Timestamp>,
    /// The last log position when the member left: it receives messages up to it.
    pub left_after: Option<u64>,
    pub muted: bool,
    /// The highest `seq` of the channel the member has read (0: none).
    pub read_seq: u64,
}

impl Membership {
    pub fn is_current(&self) -> bool {
        self.left_after.is_none()
    }
}

/// What the server itself says in a channel: membership changes, written in
/// the same transaction as the change, so every member's history and inbox
/// show who came and went and when.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "line", rename_all = "snake_case")]
pub enum SystemLine {
    Created {
        by: MemberId,
    },
    /// Joined a public room, or was added by an owner (`added_by`).
    Joined {
        member: MemberId,
        added_by: Option<MemberId>,
    },
    Left {
        member: MemberId,
    },
    Removed {
        member: MemberId,
        by: MemberId,
    },
    RoleChanged {
        member: MemberId,
        role: Role,
        by: MemberId,
    },
    /// Written at a channel's birth when sealing was possible to ask for: it
    /// is sealed, or it is plaintext because `lacking` have no sealing key.
    Sealing {
        sealed: bool,
        lacking: Vec<MemberId>,
    },
    /// The member took a new handle (mentions and earlier messages keep the
    /// member they named; only the name shown changes).
    Renamed {
        member: MemberId,
        from: String,
        to: String,
    },
    /// In a record's room: the record moved (a dispute's `event`, leaving it in `phase`).
    Phase {
        record: RecordRef,
        event: String,
        phase: String,
        deadline: Option<Timestamp>,
    },
}

impl SystemLine {
    /// The line in words, for clients that show only `body`.
    pub fn words(&self) -> String {
        match self {
            SystemLine::Created { by } => format!("{by} created the room"),
            SystemLine::Joined { member, added_by: None } => format!("{member} joined"),
            SystemLine::Joined { member, added_by: Some(by) } => format!("{by} added {member}"),
            SystemLine::Left { member } => format!("{member} left"),
            SystemLine::Removed { member, by } => format!("{by} removed {member}"),
            SystemLine::RoleChanged { member, role, by } => format!("{by} made {member} {}", role.as_str()),
            SystemLine::Sealing { sealed: true, .. } => {
                "sealed: messages here are encrypted for their members; the registry cannot read them".to_string()
            }
            SystemLine::Renamed { member, from, to } => format!("{member} is now @{to} (was @{from})"),
            SystemLine::Phase { record, event, phase, .. } => {
                format!("{} {}: {event}; now in its {phase} phase", record.kind, record.id)
            }
            SystemLine::Sealing { sealed: false, lacking } => {
                let names: Vec<&str> = lacking.iter().map(MemberId::as_str).collect();
                format!(
                    "not sealed: {} published no sealing key, so messages here are readable by the registry",
                    names.join(", ")
                )
            }
        }
    }
}

/// What a message is. Reactions, edits and deletions are messages of their
/// own pointing at the text they change, so history keeps what was said,
/// what it became and when.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum MessageKind {
    Text,
    System(SystemLine),
    /// A reaction (its `body` is the emoji) to message `to`, or its withdrawal.
    Reaction {
        to: u64,
        removed: bool,
    },
    /// New text (in `body`) for message `of`, by its author.
    Edit {
        of: u64,
    },
    /// Message `of` withdrawn, by its author or an owner of the room.
    Deletion {
        of: u64,
    },
    /// The registry telling a member about something on its ledger that
    /// concerns it (`body` says it in words, in the member's language where
    /// the ledger knows it).
    Notice(Notice),
}

/// A registry notification: typed, pointing at the ledger event and the
/// record it concerns, with the deadline the member must meet, if any.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Notice {
    /// The ledger event's kind (`dispute.filed`, `order.created`, …).
    pub event: String,
    /// The ledger event's `seq`: the notice is about exactly that entry.
    pub ledger_seq: u64,
    pub record: Option<RecordRef>,
    /// What the member must do by when (Unix ms), if anything.
    pub deadline: Option<Timestamp>,
    /// The BCP 47 language `body` is written in.
    pub language: String,
}

/// A typed reference to a registry record, resolved by its own routes for
/// those allowed to read it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RecordRef {
    /// `dispute`, `order`, `rfq`, `contract`, `token`.
    pub kind: String,
    pub id: String,
}

/// The kinds of record a message may point at.
pub const RECORD_KINDS: [&str; 8] = ["order", "share", "dispute", "contract", "job", "rfq", "token", "ledger"];

impl RecordRef {
    /// The route that resolves it, which decides who may read it. A share is
    /// read through its order (`order_id:share`); a ledger reference is an event `seq`.
    pub fn path(&self) -> String {
        match self.kind.as_str() {
            "order" => format!("/v1/orders/{}", self.id),
            "share" => format!("/v1/orders/{}", self.id.split(':').next().unwrap_or_default()),
            "dispute" => format!("/v1/disputes/{}", self.id),
            "contract" => format!("/v1/contracts/{}", self.id),
            "rfq" => format!("/v1/rfqs/{}", self.id),
            "token" => format!("/v1/tokens/{}", self.id),
            "ledger" => format!("/v1/events?after={}&limit=1", self.id.parse::<u64>().unwrap_or(1).saturating_sub(1)),
            _ => format!("/v1/jobs/{}", self.id),
        }
    }
}

impl MessageKind {
    /// The `seq` of the message this one changes, if it changes one.
    pub fn refers_to(&self) -> Option<u64> {
        match self {
            MessageKind::Reaction { to, .. } => Some(*to),
            MessageKind::Edit { of } | MessageKind::Deletion { of } => Some(*of),
            MessageKind::Text | MessageKind::System(_) | MessageKind::Notice(_) => None,
        }
    }
}

/// The message a reply answers, with its author resolved at send time (so
/// "a reply to a message of mine" needs no second read).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReplyTo {
    pub seq: u64,
    pub author: MemberId,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Message {
    pub channel: ChannelId,
    /// The channel's kind, fixed when it was created (a DM wakes on every message).
    pub channel_kind: ChannelKind,
    /// Gapless per channel, from 1, assigned by the store.
    pub seq: u64,
    /// One server-wide log position, from 1: the resumable inbox cursor.
    pub position: u64,
    pub authored_by: MemberId,
    /// The principal an agent speaks for, when it says so.
    pub on_behalf_of: Option<MemberId>,
    /// The author's handle when it posted; a later rename does not change it.
    pub handle: Option<String>,
    pub kind: MessageKind,
    pub body: String,
    pub reply_to: Option<ReplyTo>,
    /// Members mentioned by `@handle`, resolved when the message was posted.
    pub mentions: Vec<MemberId>,
    pub at: Timestamp,
    /// In a sealed channel, the encrypted body (`body` is then empty).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sealed: Option<SealedBody>,
    /// The author's Ed25519 signature over the message (`docs/sealing.md`),
    /// checked by the registry against the author's `did:key` when posted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signature: Option<String>,
    /// Registry records the message points at; each resolves by its own route
    /// for those allowed to read it (`RecordRef::path`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub refs: Vec<RecordRef>,
}

/// What needs a member's attention in one channel it is in now.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Attention {
    pub channel: ChannelId,
    /// Messages delivered to the member after its read mark.
    pub unread: u64,
    /// Of those, the ones that wake it (see the `wakes` predicate in `eligibility.rs`).
    pub wakes: u64,
    /// More lie beyond the `ATTENTION_SCAN_MAX` messages read: the figures
    /// are those of the oldest unread ones, and the true counts are higher.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub capped: bool,
}

/// A sealed message's content as it is stored and delivered.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SealedBody {
    pub v: u8,
    pub nonce: String,
    pub ciphertext: String,
    pub recipients: Vec<SealedFor>,
}

/// The content key wrapped for one member, under the key it had published.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SealedFor {
    pub member: MemberId,
    pub key: String,
    pub enc: String,
    pub wrapped: String,
}

/// A member's published X25519 sealing key, signed by its identity key.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SealingKey {
    pub member: MemberId,
    pub public_key: String,
    pub signature: String,
    pub published_at: Timestamp,
}

/// A registered passkey.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PasskeyRecord {
    /// The credential id, base64url.
    pub credential_id: String,
    pub member: MemberId,
    /// The WebAuthn user handle (a UUID derived from the member id).
    pub user_handle: String,
    /// The credential as the WebAuthn library serialises it (public key, counter).
    #[serde(skip_serializing)]
    pub passkey: String,
    pub created_at: Timestamp,
    pub last_used_at: Option<Timestamp>,
}

/// A registration or sign-in in progress: its challenge state, used once.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Ceremony {
    pub id: String,
    /// `register` or `sign_in`.
    pub kind: String,
    /// Who registers (none for a usernameless sign-in).
    pub member: Option<MemberId>,
    pub state: String,
    pub expires_at: Timestamp,
}

/// A signed-in browser session, known by the SHA-256 of its cookie value.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Session {
    pub hash: String,
    pub member: MemberId,
    pub created_at: Timestamp,
    pub expires_at: Timestamp,
    pub revoked_at: Option<Timestamp>,
}

impl Session {
    pub fn is_live(&self, now: Timestamp) -> bool {
        self.revoked_at.is_none() && now < self.expires_at
    }
}

/// The one body chosen to answer a member's event.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Answer {
    pub member: MemberId,
    /// The event's log position.
    pub position: u64,
    pub body: String,
    pub at: Timestamp,
}

/// Which of a member's bodies answers its addressed events, until when.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct BodyLease {
    pub member: MemberId,
    pub body: String,
    pub expires_at: Timestamp,
}

/// Events delivered to one member on one day by one transport.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Metered {
    pub member: MemberId,
    pub day: i64,
    /// `websocket`, `sse`, `poll` or `webhook`.
    pub transport: String,
    pub events: u64,
}

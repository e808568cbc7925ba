//! The embedded engine: SQLite in WAL mode on its own file, apart from the
//! ledger's. One connection behind a mutex is this process's sequencer, and
//! `BEGIN IMMEDIATE` makes each write the only one in flight across processes,
//! so `seq` and `position` are taken as "last + 1" without gaps or races.

use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bazaar_types::limits::{
    CHANNEL_MEMBERS_MAX, CHANNEL_NAME_BYTES_MAX, HISTORY_PAGE_MAX, INBOX_PAGE_MAX, INBOX_SCAN_MAX,
};
use bazaar_types::{Clock, Entropy, MemberId, Timestamp};
use rusqlite::{params, Connection, OptionalExtension, Row, Transaction, TransactionBehavior};

use crate::compose::{check_body, check_page, resolve_mentions};
use crate::eligibility::{delivered_to, wakes};
use crate::model::{Attention, Channel, ChannelId, ChannelKind, Membership, Message, MessageKind, ReplyTo, Role};
use crate::store::{
    ConversationError, ConversationStore, Directory, HistoryRange, InboxPage, NewMessage, NewRoom, Result,
};

const MIGRATIONS: &[(&str, &str)] = &[("0001_conversation", include_str!("../migrations/0001_conversation.sql"))];

/// How long a write waits for another process's write before giving up.
const BUSY_TIMEOUT_MS: u64 = 5_000;

const CHANNEL_COLUMNS: &str = "id, kind, name, created_by, created_at";
const MEMBERSHIP_COLUMNS: &str = "channel, member, role, joined_at, joined_after, left_at, left_after, muted, read_seq";
const MESSAGE_SELECT: &str = "SELECT m.channel, c.kind, m.seq, m.position, m.authored_by, m.on_behalf_of, m.handle, \
     m.kind, m.body, m.reply_seq, m.reply_author, m.mentions, m.at FROM messages m JOIN channels c ON c.id = m.channel";

fn unavailable(error: impl std::fmt::Display) -> ConversationError {
    ConversationError::Unavailable(error.to_string())
}

pub struct SqliteConversationStore {
    connection: Mutex<Connection>,
    clock: Arc<dyn Clock>,
    entropy: Arc<dyn Entropy>,
}

impl SqliteConversationStore {
    /// Open (or create) the conversation database at `path` and bring its schema up to date.
    pub fn open(path: &Path, clock: Arc<dyn Clock>, entropy: Arc<dyn Entropy>) -> Result<Self> {
        let mut connection = Connection::open(path).map_err(unavailable)?;
        connection.busy_timeout(Duration::from_millis(BUSY_TIMEOUT_MS)).map_err(unavailable)?;
        connection
            .execute_batch("PRAGMA journal_mode = WAL; PRAGMA synchronous = FULL; PRAGMA foreign_keys = ON;")
            .map_err(unavailable)?;
        migrate(&mut connection)?;
        Ok(SqliteConversationStore { connection: Mutex::new(connection), clock, entropy })
    }

    /// One write transaction, taken with the write lock up front.
    fn write<T>(&self, act: impl FnOnce(&Transaction<'_>, Timestamp) -> Result<T>) -> Result<T> {
        let mut connection = self.connection.lock().map_err(unavailable)?;
        let tx = connection.transaction_with_behavior(TransactionBehavior::Immediate).map_err(unavailable)?;
        let outcome = act(&tx, self.clock.now())?;
        tx.commit().map_err(unavailable)?;
        Ok(outcome)
    }

    /// One read transaction: every query in it sees the same snapshot.
    fn read<T>(&self, act: impl FnOnce(&Transaction<'_>) -> Result<T>) -> Result<T> {
        let mut connection = self.connection.lock().map_err(unavailable)?;
        let tx = connection.transaction().map_err(unavailable)?;
        let outcome = act(&tx)?;
        tx.commit().map_err(unavailable)?;
        Ok(outcome)
    }
}

fn migrate(connection: &mut Connection) -> Result<()> {
    connection
        .execute_batch(
            "CREATE TABLE IF NOT EXISTS schema_migrations (name TEXT PRIMARY KEY, applied_at INTEGER NOT NULL)",
        )
        .map_err(unavailable)?;
    for (name, sql) in MIGRATIONS {
        let tx = connection.transaction_with_behavior(TransactionBehavior::Immediate).map_err(unavailable)?;
        let applied: Option<String> = tx
            .query_row("SELECT name FROM schema_migrations WHERE name = ?1", [name], |r| r.get(0))
            .optional()
            .map_err(unavailable)?;
        if applied.is_none() {
            tx.execute_batch(sql).map_err(unavailable)?;
            tx.execute("INSERT INTO schema_migrations VALUES (?1, strftime('%s','now'))", [name])
                .map_err(unavailable)?;
        }
        tx.commit().map_err(unavailable)?;
    }
    Ok(())
}

// Rows.

fn corrupt(what: &str) -> rusqlite::Error {
    rusqlite::Error::InvalidColumnType(0, what.to_string(), rusqlite::types::Type::Text)
}

fn channel_from_row(row: &Row<'_>) -> rusqlite::Result<Channel> {
    let kind: String = row.get(1)?;
    Ok(Channel {
        id: ChannelId(row.get(0)?),
        kind: ChannelKind::parse(&kind).ok_or_else(|| corrupt("channels.kind"))?,
        name: row.get(2)?,
        created_by: MemberId(row.get(3)?),
        created_at: Timestamp(row.get(4)?),
    })
}

fn membership_from_row(row: &Row<'_>) -> rusqlite::Result<Membership> {
    let role: String = row.get(2)?;
    Ok(Membership {
        channel: ChannelId(row.get(0)?),
        member: MemberId(row.get(1)?),
        role: Role::parse(&role).ok_or_else(|| corrupt("memberships.role"))?,
        joined_at: Timestamp(row.get(3)?),
        joined_after: row.get(4)?,
        left_at: row.get::<_, Option<i64>>(5)?.map(Timestamp),
        left_after: row.get(6)?,
        muted: row.get(7)?,
        read_seq: row.get(8)?,
    })
}

fn message_from_row(row: &Row<'_>) -> rusqlite::Result<Message> {
    let channel_kind: String = row.get(1)?;
    let kind: String = row.get(7)?;
    let mentions: String = row.get(11)?;
    let reply_seq: Option<u64> = row.get(9)?;
    let reply_author: Option<String> = row.get(10)?;
    Ok(Message {
        channel: ChannelId(row.get(0)?),
        channel_kind: ChannelKind::parse(&channel_kind).ok_or_else(|| corrupt("channels.kind"))?,
        seq: row.get(2)?,
        position: row.get(3)?,
        authored_by: MemberId(row.get(4)?),
        on_behalf_of: row.get::<_, Option<String>>(5)?.map(MemberId),
        handle: row.get(6)?,
        kind: serde_json::from_str(&kind).map_err(|_| corrupt("messages.kind"))?,
        body: row.get(8)?,
        reply_to: reply_seq.zip(reply_author).map(|(seq, author)| ReplyTo { seq, author: MemberId(author) }),
        mentions: serde_json::from_str(&mentions).map_err(|_| corrupt("messages.mentions"))?,
        at: Timestamp(row.get(12)?),
    })
}

// Reads inside a transaction.

fn load_channel(tx: &Transaction<'_>, id: &ChannelId) -> Result<Channel> {
    let sql = format!("SELECT {CHANNEL_COLUMNS} FROM channels WHERE id = ?1");
    tx.query_row(&sql, [id.as_str()], channel_from_row)
        .optional()
        .map_err(unavailable)?
        .ok_or_else(|| ConversationError::ChannelNotFound(id.clone()))
}

fn current_stint(tx: &Transaction<'_>, channel: &ChannelId, member: &MemberId) -> Result<Option<Membership>> {
    let sql = format!(
        "SELECT {MEMBERSHIP_COLUMNS} FROM memberships WHERE channel = ?1 AND member = ?2 AND left_after IS NULL"
    );
    tx.query_row(&sql, [channel.as_str(), member.as_str()], membership_from_row).optional().map_err(unavailable)
}

fn require_stint(tx: &Transaction<'_>, channel: &ChannelId, member: &MemberId) -> Result<Membership> {
    current_stint(tx, channel, member)?
        .ok_or_else(|| ConversationError::NotMember { channel: channel.clone(), member: member.clone() })
}

fn stints_of(tx: &Transaction<'_>, member: &MemberId, only_current: bool) -> Result<Vec<Membership>> {
    let filter = if only_current { "AND left_after IS NULL" } else { "" };
    let sql = format!("SELECT {MEMBERSHIP_COLUMNS} FROM memberships WHERE member = ?1 {filter} ORDER BY stint");
    let mut statement = tx.prepare(&sql).map_err(unavailable)?;
    let rows = statement.query_map([member.as_str()], membership_from_row).map_err(unavailable)?;
    rows.collect::<rusqlite::Result<Vec<_>>>().map_err(unavailable)
}

fn last_position(tx: &Transaction<'_>) -> Result<u64> {
    tx.query_row("SELECT COALESCE(MAX(position), 0) FROM messages", [], |r| r.get(0)).map_err(unavailable)
}

fn last_seq(tx: &Transaction<'_>, channel: &ChannelId) -> Result<u64> {
    tx.query_row("SELECT COALESCE(MAX(seq), 0) FROM messages WHERE channel = ?1", [channel.as_str()], |r| r.get(0))
        .map_err(unavailable)
}

fn current_member_count(tx: &Transaction<'_>, channel: &ChannelId) -> Result<usize> {
    tx.query_row(
        "SELECT COUNT(*) FROM memberships WHERE channel = ?1 AND left_after IS NULL",
        [channel.as_str()],
        |r| r.get(0),
    )
    .map_err(unavailable)
}

fn query_messages(tx: &Transaction<'_>, clause: &str, args: impl rusqlite::Params) -> Result<Vec<Message>> {
    let sql = format!("{MESSAGE_SELECT} {clause}");
    let mut statement = tx.prepare(&sql).map_err(unavailable)?;
    let rows = statement.query_map(args, message_from_row).map_err(unavailable)?;
    rows.collect::<rusqlite::Result<Vec<_>>>().map_err(unavailable)
}

// Writes inside a transaction.

fn insert_channel(tx: &Transaction<'_>, channel: &Channel) -> Result<()> {
    tx.execute(
        "INSERT INTO channels (id, kind, name, created_by, created_at) VALUES (?1, ?2, ?3, ?4, ?5)",
        params![
            channel.id.as_str(),
            channel.kind.as_str(),
            channel.name,
            channel.created_by.as_str(),
            channel.created_at.0
        ],
    )
    .map_err(unavailable)?;
    Ok(())
}

/// Open a stint for a member who has none open. Its read mark and mute carry
/// over from the member's previous stint in the channel, if any.
fn open_stint(
    tx: &Transaction<'_>,
    channel: &ChannelId,
    member: &MemberId,
    role: Role,
    now: Timestamp,
) -> Result<Membership> {
    assert!(current_stint(tx, channel, member)?.is_none());
    if current_member_count(tx, channel)? >= CHANNEL_MEMBERS_MAX {
        return Err(ConversationError::ChannelFull(channel.clone()));
    }
    let previous: Option<(bool, u64)> = tx
        .query_row(
            "SELECT muted, read_seq FROM memberships WHERE channel = ?1 AND member = ?2 ORDER BY stint DESC LIMIT 1",
            [channel.as_str(), member.as_str()],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .optional()
        .map_err(unavailable)?;
    let (muted, read_seq) = previous.unwrap_or((false, 0));
    let membership = Membership {
        channel: channel.clone(),
        member: member.clone(),
        role,
        joined_at: now,
        joined_after: last_position(tx)?,
        left_at: None,
        left_after: None,
        muted,
        read_seq,
    };
    tx.execute(
        "INSERT INTO memberships (channel, member, role, joined_at, joined_after, muted, read_seq)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
        params![channel.as_str(), member.as_str(), role.as_str(), now.0, membership.joined_after, muted, read_seq],
    )
    .map_err(unavailable)?;
    Ok(membership)
}

fn insert_message(tx: &Transaction<'_>, message: &Message) -> Result<()> {
    let kind = serde_json::to_string(&message.kind).map_err(unavailable)?;
    let mentions = serde_json::to_string(&message.mentions).map_err(unavailable)?;
    tx.execute(
        "INSERT INTO messages (position, channel, seq, authored_by, on_behalf_of, handle, kind, body,
                               reply_seq, reply_author, mentions, at)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12)",
        params![
            message.position,
            message.channel.as_str(),
            message.seq,
            message.authored_by.as_str(),
            message.on_behalf_of.as_ref().map(MemberId::as_str),
            message.handle,
            kind,
            message.body,
            message.reply_to.as_ref().map(|r| r.seq),
            message.reply_to.as_ref().map(|r| r.author.as_str()),
            mentions,
            message.at.0
        ],
    )
    .map_err(unavailable)?;
    Ok(())
}

fn reply_author(tx: &Transaction<'_>, channel: &ChannelId, seq: u64) -> Result<MemberId> {
    tx.query_row(
        "SELECT authored_by FROM messages WHERE channel = ?1 AND seq = ?2",
        params![channel.as_str(), seq],
        |r| r.get::<_, String>(0),
    )
    .optional()
    .map_err(unavailable)?
    .map(MemberId)
    .ok_or(ConversationError::ReplyNotFound { seq })
}

// The acts.

impl SqliteConversationStore {
    /// Join or add: the checks both share once the caller's right to do it is settled.
    fn enter(&self, channel: &ChannelId, by: Option<&MemberId>, member: &MemberId) -> Result<Membership> {
        self.write(|tx, now| {
            let found = load_channel(tx, channel)?;
            match (found.kind, by) {
                (ChannelKind::Dm, _) => return Err(ConversationError::DirectMessage(channel.clone())),
                (ChannelKind::PrivateRoom, None) => return Err(ConversationError::PrivateRoom(channel.clone())),
                (_, Some(by)) => {
                    let adder = require_stint(tx, channel, by)?;
                    if adder.role != Role::Owner {
                        return Err(ConversationError::NotOwner(channel.clone()));
                    }
                }
                (ChannelKind::PublicRoom, None) => {}
            }
            if current_stint(tx, channel, member)?.is_some() {
                return Err(ConversationError::AlreadyMember { channel: channel.clone(), member: member.clone() });
            }
            open_stint(tx, channel, member, Role::Member, now)
        })
    }

    fn inbox_scan(tx: &Transaction<'_>, member: &MemberId, after_position: u64, limit: usize) -> Result<InboxPage> {
        let stints = stints_of(tx, member, false)?;
        let sql = format!(
            "{MESSAGE_SELECT} WHERE m.position > ?1
               AND m.channel IN (SELECT channel FROM memberships WHERE member = ?2)
             ORDER BY m.position LIMIT ?3"
        );
        let mut statement = tx.prepare(&sql).map_err(unavailable)?;
        let rows = statement
            .query_map(params![after_position, member.as_str(), INBOX_SCAN_MAX as u64], message_from_row)
            .map_err(unavailable)?;
        let mut page = InboxPage { messages: Vec::new(), next_after: after_position };
        for row in rows {
            let message = row.map_err(unavailable)?;
            assert!(message.position > page.next_after);
            page.next_after = message.position;
            if stints.iter().any(|stint| delivered_to(stint, &message)) {
                page.messages.push(message);
                if page.messages.len() == limit {
                    break;
                }
            }
        }
        Ok(page)
    }
}

impl ConversationStore for SqliteConversationStore {
    fn create_room(&self, room: NewRoom) -> Result<Channel> {
        if room.name.trim().is_empty() || room.name.len() > CHANNEL_NAME_BYTES_MAX {
            return Err(ConversationError::NameInvalid { len: room.name.len(), max: CHANNEL_NAME_BYTES_MAX });
        }
        let id = ChannelId::random(self.entropy.as_ref());
        self.write(|tx, now| {
            let kind = if room.private { ChannelKind::PrivateRoom } else { ChannelKind::PublicRoom };
            let channel = Channel { id, kind, name: Some(room.name), created_by: room.owner, created_at: now };
            insert_channel(tx, &channel)?;
            open_stint(tx, &channel.id, &channel.created_by, Role::Owner, now)?;
            Ok(channel)
        })
    }

    fn open_dm(&self, one: &MemberId, two: &MemberId) -> Result<Channel> {
        if one == two {
            return Err(ConversationError::DmWithSelf);
        }
        let id = ChannelId::dm(one, two);
        self.write(|tx, now| {
            match load_channel(tx, &id) {
                Ok(existing) => return Ok(existing),
                Err(ConversationError::ChannelNotFound(_)) => {}
                Err(other) => return Err(other),
            }
            let channel = Channel { id, kind: ChannelKind::Dm, name: None, created_by: one.clone(), created_at: now };
            insert_channel(tx, &channel)?;
            open_stint(tx, &channel.id, one, Role::Member, now)?;
            open_stint(tx, &channel.id, two, Role::Member, now)?;
            Ok(channel)
        })
    }

    fn join(&self, channel: &ChannelId, member: &MemberId) -> Result<Membership> {
        self.enter(channel, None, member)
    }

    fn add_member(&self, channel: &ChannelId, by: &MemberId, member: &MemberId) -> Result<Membership> {
        self.enter(channel, Some(by), member)
    }

    fn leave(&self, channel: &ChannelId, member: &MemberId) -> Result<Membership> {
        self.write(|tx, now| {
            if load_channel(tx, channel)?.kind == ChannelKind::Dm {
                return Err(ConversationError::DirectMessage(channel.clone()));
            }
            let mut stint = require_stint(tx, channel, member)?;
            stint.left_at = Some(now);
            stint.left_after = Some(last_position(tx)?);
            tx.execute(
                "UPDATE memberships SET left_at = ?1, left_after = ?2
                 WHERE channel = ?3 AND member = ?4 AND left_after IS NULL",
                params![now.0, stint.left_after, channel.as_str(), member.as_str()],
            )
            .map_err(unavailable)?;
            Ok(stint)
        })
    }

    fn set_muted(&self, channel: &ChannelId, member: &MemberId, muted: bool) -> Result<Membership> {
        self.write(|tx, _now| {
            load_channel(tx, channel)?;
            let mut stint = require_stint(tx, channel, member)?;
            stint.muted = muted;
            tx.execute(
                "UPDATE memberships SET muted = ?1 WHERE channel = ?2 AND member = ?3 AND left_after IS NULL",
                params![muted, channel.as_str(), member.as_str()],
            )
            .map_err(unavailable)?;
            Ok(stint)
        })
    }

    fn post(&self, directory: &dyn Directory, new: NewMessage) -> Result<Message> {
        check_body(&new.body)?;
        let mentions = resolve_mentions(directory, &new.body)?;
        let handle = directory.handle_of(&new.authored_by);
        self.write(|tx, now| {
            let channel = load_channel(tx, &new.channel)?;
            require_stint(tx, &channel.id, &new.authored_by)?;
            let reply_to = match new.reply_to {
                Some(seq) => Some(ReplyTo { seq, author: reply_author(tx, &channel.id, seq)? }),
                None => None,
            };
            let message = Message {
                seq: last_seq(tx, &channel.id)? + 1,
                position: last_position(tx)? + 1,
                channel: channel.id,
                channel_kind: channel.kind,
                authored_by: new.authored_by,
                on_behalf_of: new.on_behalf_of,
                handle,
                kind: MessageKind::Text,
                body: new.body,
                reply_to,
                mentions,
                at: now,
            };
            insert_message(tx, &message)?;
            Ok(message)
        })
    }

    fn history(
        &self,
        channel: &ChannelId,
        reader: &MemberId,
        range: HistoryRange,
        limit: usize,
    ) -> Result<Vec<Message>> {
        check_page(limit, HISTORY_PAGE_MAX)?;
        self.read(|tx| {
            load_channel(tx, channel)?;
            require_stint(tx, channel, reader)?;
            let (id, limit) = (channel.as_str(), limit as u64);
            let mut page = match range {
                HistoryRange::Latest => {
                    query_messages(tx, "WHERE m.channel = ?1 ORDER BY m.seq DESC LIMIT ?2", params![id, limit])?
                }
                HistoryRange::Before(seq) => query_messages(
                    tx,
                    "WHERE m.channel = ?1 AND m.seq < ?2 ORDER BY m.seq DESC LIMIT ?3",
                    params![id, seq, limit],
                )?,
                HistoryRange::After(seq) => {
                    return query_messages(
                        tx,
                        "WHERE m.channel = ?1 AND m.seq > ?2 ORDER BY m.seq LIMIT ?3",
                        params![id, seq, limit],
                    )
                }
            };
            page.reverse();
            Ok(page)
        })
    }

    fn inbox(&self, member: &MemberId, after_position: u64, limit: usize) -> Result<InboxPage> {
        check_page(limit, INBOX_PAGE_MAX)?;
        self.read(|tx| Self::inbox_scan(tx, member, after_position, limit))
    }

    fn mark_read(&self, member: &MemberId, channel: &ChannelId, seq: u64) -> Result<Membership> {
        self.write(|tx, _now| {
            load_channel(tx, channel)?;
            let mut stint = require_stint(tx, channel, member)?;
            if seq > last_seq(tx, channel)? {
                return Err(ConversationError::SeqOutOfRange { seq });
            }
            stint.read_seq = stint.read_seq.max(seq);
            tx.execute(
                "UPDATE memberships SET read_seq = ?1 WHERE channel = ?2 AND member = ?3 AND left_after IS NULL",
                params![stint.read_seq, channel.as_str(), member.as_str()],
            )
            .map_err(unavailable)?;
            Ok(stint)
        })
    }

    fn attention(&self, member: &MemberId) -> Result<Vec<Attention>> {
        self.read(|tx| {
            let mut found = Vec::new();
            for stint in stints_of(tx, member, true)? {
                let unread_candidates = query_messages(
                    tx,
                    "WHERE m.channel = ?1 AND m.seq > ?2 ORDER BY m.seq",
                    params![stint.channel.as_str(), stint.read_seq],
                )?;
                let delivered = unread_candidates.iter().filter(|message| delivered_to(&stint, message));
                let unread = delivered.clone().count() as u64;
                let waking = delivered.filter(|message| wakes(&stint, message, member)).count() as u64;
                if unread > 0 {
                    found.push(Attention { channel: stint.channel.clone(), unread, wakes: waking });
                }
            }
            found.sort_by(|a, b| a.channel.cmp(&b.channel));
            Ok(found)
        })
    }

    fn memberships_of(&self, member: &MemberId) -> Result<Vec<Membership>> {
        self.read(|tx| stints_of(tx, member, false))
    }
}

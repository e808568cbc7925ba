//! The embedded engine: SQLite in WAL mode on its own file, apart from the
//! ledger's. One writer thread owns the write connection and is this
//! process's sequencer, committing waiting acts together (`group_commit`);
//! `BEGIN IMMEDIATE` makes each group the only write in flight across
//! processes, so `seq` and `position` are taken as "last + 1" without gaps
//! or races. Reads run on their own connections (`READERS`), never behind a write.

use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bazaar_types::limits::CONVERSATION_PAGE_CACHE_KIB;
use bazaar_types::{Clock, Entropy, MemberId, Timestamp};
use rusqlite::{params, Connection, OptionalExtension, Row, Transaction, TransactionBehavior};

use crate::delivery::{Delivery, DeliveryState, Endpoint};
use crate::engine::{BodyRows, ChannelRows, Engine, MeterRows, OutboxRows, PeopleRows};
use crate::group_commit::Writer;
use crate::model::Metered;
use crate::model::{Answer, BodyLease, Ceremony, PasskeyRecord, Session};
use crate::model::{Channel, ChannelId, ChannelKind, Membership, Message, ReplyTo, Role};
use crate::sealing::SealingKey;
use crate::store::{ConversationError, HistoryRange, Result};

const MIGRATIONS: &[(&str, &str)] = &[
    ("0001_conversation", include_str!("../migrations/0001_conversation.sql")),
    ("0002_webhooks", include_str!("../migrations/0002_webhooks.sql")),
    ("0003_changes", include_str!("../migrations/0003_changes.sql")),
    ("0004_counters", include_str!("../migrations/0004_counters.sql")),
    ("0005_sealing", include_str!("../migrations/0005_sealing.sql")),
    ("0006_people", include_str!("../migrations/0006_people.sql")),
    ("0007_bodies", include_str!("../migrations/0007_bodies.sql")),
    ("0008_meter", include_str!("../migrations/0008_meter.sql")),
    ("0009_refs", include_str!("../migrations/0009_refs.sql")),
];

/// How long a write waits for another process's write before giving up.
const BUSY_TIMEOUT_MS: u64 = 5_000;

const CHANNEL_COLUMNS: &str = "id, kind, name, created_by, created_at, sealed";
const MEMBERSHIP_COLUMNS: &str = "channel, member, role, joined_at, joined_after, left_at, left_after, muted, read_seq";
const MESSAGE_SELECT: &str = "SELECT m.channel, c.kind, m.seq, m.position, m.authored_by, m.on_behalf_of, m.handle, \
     m.kind, m.body, m.reply_seq, m.reply_author, m.mentions, m.at, m.sealed, m.signature, m.refs \
     FROM messages m JOIN channels c ON c.id = m.channel";

/// Statements each connection keeps compiled (every statement the engine runs fits).
const STATEMENT_CACHE: usize = 96;

/// `execute` and `query_row` through the connection's statement cache: the
/// engine runs the same few dozen statements over and over.
trait Cached {
    fn run<P: rusqlite::Params>(&self, sql: &str, params: P) -> rusqlite::Result<usize>;
    fn one<T, P: rusqlite::Params>(
        &self,
        sql: &str,
        params: P,
        row: impl FnOnce(&Row<'_>) -> rusqlite::Result<T>,
    ) -> rusqlite::Result<T>;
}

impl Cached for Connection {
    fn run<P: rusqlite::Params>(&self, sql: &str, params: P) -> rusqlite::Result<usize> {
        self.prepare_cached(sql)?.execute(params)
    }
    fn one<T, P: rusqlite::Params>(
        &self,
        sql: &str,
        params: P,
        row: impl FnOnce(&Row<'_>) -> rusqlite::Result<T>,
    ) -> rusqlite::Result<T> {
        self.prepare_cached(sql)?.query_row(params, row)
    }
}

fn unavailable(error: impl std::fmt::Display) -> ConversationError {
    ConversationError::Unavailable(error.to_string())
}

/// Read connections per store: reads (inbox, history, attention, every
/// live stream's catch-up) take whichever is free.
const READERS: usize = 2;

pub struct SqliteConversationStore {
    writer: Writer,
    readers: Vec<Mutex<Connection>>,
    entropy: Arc<dyn Entropy>,
    /// One connection's page cache as SQLite reports it at open, in bytes.
    cache_bytes: u64,
}

fn connect(path: &Path) -> Result<Connection> {
    let connection = Connection::open(path).map_err(unavailable)?;
    connection.busy_timeout(Duration::from_millis(BUSY_TIMEOUT_MS)).map_err(unavailable)?;
    connection.set_prepared_statement_cache_capacity(STATEMENT_CACHE);
    connection
        .execute_batch(&format!(
            "PRAGMA journal_mode = WAL; PRAGMA synchronous = FULL; PRAGMA foreign_keys = ON;
             PRAGMA cache_size = -{CONVERSATION_PAGE_CACHE_KIB}; PRAGMA mmap_size = 0;"
        ))
        .map_err(unavailable)?;
    Ok(connection)
}

/// A connection's page cache as SQLite reports it, in bytes (`cache_size` is KiB when negative, pages when
/// positive).
fn cache_bytes(connection: &Connection) -> Result<u64> {
    let cache: i64 = connection.query_row("PRAGMA cache_size", [], |r| r.get(0)).map_err(unavailable)?;
    let page: i64 = connection.query_row("PRAGMA page_size", [], |r| r.get(0)).map_err(unavailable)?;
    Ok(bazaar_types::SqliteMemory::cache_bytes(cache, page))
}

impl SqliteConversationStore {
    /// Open (or create) the conversation database at `path` and bring its schema up to date.
    pub fn open(path: &Path, clock: Arc<dyn Clock>, entropy: Arc<dyn Entropy>) -> Result<Self> {
        let created = !path.exists();
        let mut connection = connect(path)?;
        migrate(&mut connection)?;
        if created {
            // See `bazaar_types::durable`: the new file's directory entry is not durable until this.
            bazaar_types::durable::sync_parent_dir(path).map_err(unavailable)?;
        }
        let readers = (0..READERS).map(|_| connect(path).map(Mutex::new)).collect::<Result<Vec<_>>>()?;
        let cache_bytes = cache_bytes(&connection)?;
        Ok(SqliteConversationStore { writer: Writer::start(connection, clock)?, readers, entropy, cache_bytes })
    }

    /// A free read connection, or the first one when all are busy.
    fn reader(&self) -> Result<std::sync::MutexGuard<'_, Connection>> {
        for reader in &self.readers {
            if let Ok(free) = reader.try_lock() {
                return Ok(free);
            }
        }
        self.readers[0].lock().map_err(unavailable)
    }
}

impl Engine for SqliteConversationStore {
    type Tx<'t> = Transaction<'t>;

    fn entropy(&self) -> &dyn Entropy {
        self.entropy.as_ref()
    }

    /// One act, run on the writer thread and committed with the acts waiting beside it.
    fn write<T: Send + 'static>(
        &self,
        act: impl FnOnce(&Transaction<'_>, Timestamp) -> Result<T> + Send + 'static,
    ) -> Result<T> {
        self.writer.submit(act)
    }

    /// One read transaction: every query in it sees the same snapshot.
    fn read<T>(&self, act: impl FnOnce(&Transaction<'_>) -> Result<T>) -> Result<T> {
        let mut connection = self.reader()?;
        let tx = connection.transaction().map_err(unavailable)?;
        let outcome = act(&tx)?;
        tx.commit().map_err(unavailable)?;
        Ok(outcome)
    }

    /// The writer and the readers, each with its page cache; nothing is mapped.
    fn memory(&self) -> Option<bazaar_types::SqliteMemory> {
        let connections = 1 + self.readers.len() as u64;
        Some(bazaar_types::SqliteMemory {
            db: "conversation",
            connections,
            cache_size_bytes: connections * self.cache_bytes,
            mmap_size_bytes: 0,
        })
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
            .one("SELECT name FROM schema_migrations WHERE name = ?1", [name], |r| r.get(0))
            .optional()
            .map_err(unavailable)?;
        if applied.is_none() {
            tx.execute_batch(sql).map_err(unavailable)?;
            tx.run("INSERT INTO schema_migrations VALUES (?1, strftime('%s','now'))", [name]).map_err(unavailable)?;
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
        sealed: row.get(5)?,
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
        sealed: match row.get::<_, Option<String>>(13)? {
            Some(text) => Some(serde_json::from_str(&text).map_err(|_| corrupt("messages.sealed"))?),
            None => None,
        },
        signature: row.get(14)?,
        refs: match row.get::<_, Option<String>>(15)? {
            Some(text) => serde_json::from_str(&text).map_err(|_| corrupt("messages.refs"))?,
            None => Vec::new(),
        },
    })
}

const PASSKEY_COLUMNS: &str = "credential_id, member, user_handle, passkey, created_at, last_used_at";

fn passkey_from_row(row: &Row<'_>) -> rusqlite::Result<PasskeyRecord> {
    Ok(PasskeyRecord {
        credential_id: row.get(0)?,
        member: MemberId(row.get(1)?),
        user_handle: row.get(2)?,
        passkey: row.get(3)?,
        created_at: Timestamp(row.get(4)?),
        last_used_at: row.get::<_, Option<i64>>(5)?.map(Timestamp),
    })
}

fn answer_from_row(row: &Row<'_>) -> rusqlite::Result<Answer> {
    Ok(Answer { member: MemberId(row.get(0)?), position: row.get(1)?, body: row.get(2)?, at: Timestamp(row.get(3)?) })
}

const ENDPOINT_COLUMNS: &str =
    "id, member, url, secret, previous_secret, previous_until, created_at, disabled_at, disabled_reason";
const DELIVERY_COLUMNS: &str =
    "d.id, d.endpoint, d.position, d.state, d.attempts, d.next_attempt_at, d.leased_until, d.last_status, d.last_error, d.updated_at";

fn endpoint_from_row(row: &Row<'_>) -> rusqlite::Result<Endpoint> {
    Ok(Endpoint {
        id: row.get(0)?,
        member: MemberId(row.get(1)?),
        url: row.get(2)?,
        secret: row.get(3)?,
        previous_secret: row.get(4)?,
        previous_until: row.get::<_, Option<i64>>(5)?.map(Timestamp),
        created_at: Timestamp(row.get(6)?),
        disabled_at: row.get::<_, Option<i64>>(7)?.map(Timestamp),
        disabled_reason: row.get(8)?,
    })
}

fn delivery_from_row(row: &Row<'_>) -> rusqlite::Result<Delivery> {
    let state: String = row.get(3)?;
    Ok(Delivery {
        id: row.get(0)?,
        endpoint: row.get(1)?,
        position: row.get(2)?,
        state: DeliveryState::parse(&state).ok_or_else(|| corrupt("webhook_deliveries.state"))?,
        attempts: row.get(4)?,
        next_attempt_at: Timestamp(row.get(5)?),
        leased_until: row.get::<_, Option<i64>>(6)?.map(Timestamp),
        last_status: row.get(7)?,
        last_error: row.get(8)?,
        updated_at: Timestamp(row.get(9)?),
    })
}

fn query_rows<T>(
    tx: &Transaction<'_>,
    sql: &str,
    args: impl rusqlite::Params,
    from_row: impl FnMut(&Row<'_>) -> rusqlite::Result<T>,
) -> Result<Vec<T>> {
    let mut statement = tx.prepare_cached(sql).map_err(unavailable)?;
    let rows = statement.query_map(args, from_row).map_err(unavailable)?;
    rows.collect::<rusqlite::Result<Vec<_>>>().map_err(unavailable)
}

// Reads inside a transaction.

fn load_channel(tx: &Transaction<'_>, id: &ChannelId) -> Result<Channel> {
    let sql = format!("SELECT {CHANNEL_COLUMNS} FROM channels WHERE id = ?1");
    tx.one(&sql, [id.as_str()], channel_from_row)
        .optional()
        .map_err(unavailable)?
        .ok_or_else(|| ConversationError::ChannelNotFound(id.clone()))
}

fn current_stint(tx: &Transaction<'_>, channel: &ChannelId, member: &MemberId) -> Result<Option<Membership>> {
    let sql = format!(
        "SELECT {MEMBERSHIP_COLUMNS} FROM memberships WHERE channel = ?1 AND member = ?2 AND left_after IS NULL"
    );
    tx.one(&sql, [channel.as_str(), member.as_str()], membership_from_row).optional().map_err(unavailable)
}

fn stints_of(tx: &Transaction<'_>, member: &MemberId, only_current: bool) -> Result<Vec<Membership>> {
    let filter = if only_current { "AND left_after IS NULL" } else { "" };
    let sql = format!("SELECT {MEMBERSHIP_COLUMNS} FROM memberships WHERE member = ?1 {filter} ORDER BY stint");
    let mut statement = tx.prepare_cached(&sql).map_err(unavailable)?;
    let rows = statement.query_map([member.as_str()], membership_from_row).map_err(unavailable)?;
    rows.collect::<rusqlite::Result<Vec<_>>>().map_err(unavailable)
}

fn last_position(tx: &Transaction<'_>) -> Result<u64> {
    tx.one("SELECT COALESCE(MAX(position), 0) FROM messages", [], |r| r.get(0)).map_err(unavailable)
}

fn last_seq(tx: &Transaction<'_>, channel: &ChannelId) -> Result<u64> {
    tx.one("SELECT COALESCE(MAX(seq), 0) FROM messages WHERE channel = ?1", [channel.as_str()], |r| r.get(0))
        .map_err(unavailable)
}

fn current_member_count(tx: &Transaction<'_>, channel: &ChannelId) -> Result<usize> {
    tx.one("SELECT COUNT(*) FROM memberships WHERE channel = ?1 AND left_after IS NULL", [channel.as_str()], |r| {
        r.get(0)
    })
    .map_err(unavailable)
}

fn query_messages(tx: &Transaction<'_>, clause: &str, args: impl rusqlite::Params) -> Result<Vec<Message>> {
    let sql = format!("{MESSAGE_SELECT} {clause}");
    let mut statement = tx.prepare_cached(&sql).map_err(unavailable)?;
    let rows = statement.query_map(args, message_from_row).map_err(unavailable)?;
    rows.collect::<rusqlite::Result<Vec<_>>>().map_err(unavailable)
}

// Writes inside a transaction.

fn insert_channel(tx: &Transaction<'_>, channel: &Channel) -> Result<()> {
    tx.run(
        "INSERT INTO channels (id, kind, name, created_by, created_at, sealed) VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
        params![
            channel.id.as_str(),
            channel.kind.as_str(),
            channel.name,
            channel.created_by.as_str(),
            channel.created_at.0,
            channel.sealed
        ],
    )
    .map_err(unavailable)?;
    Ok(())
}

fn insert_message(tx: &Transaction<'_>, message: &Message, idem_key: Option<&str>) -> Result<()> {
    let kind = serde_json::to_string(&message.kind).map_err(unavailable)?;
    let mentions = serde_json::to_string(&message.mentions).map_err(unavailable)?;
    let sealed = message.sealed.as_ref().map(serde_json::to_string).transpose().map_err(unavailable)?;
    let refs =
        (!message.refs.is_empty()).then(|| serde_json::to_string(&message.refs)).transpose().map_err(unavailable)?;
    tx.run(
        "INSERT INTO messages (position, channel, seq, authored_by, on_behalf_of, handle, kind, body,
                               reply_seq, reply_author, mentions, at, ref_seq, idem_key, sealed, signature, refs)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17)",
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
            message.at.0,
            message.kind.refers_to(),
            idem_key,
            sealed,
            message.signature,
            refs
        ],
    )
    .map_err(unavailable)?;
    Ok(())
}

fn reply_author(tx: &Transaction<'_>, channel: &ChannelId, seq: u64) -> Result<MemberId> {
    tx.one(
        "SELECT authored_by FROM messages WHERE channel = ?1 AND seq = ?2",
        params![channel.as_str(), big(seq)],
        |r| r.get::<_, String>(0),
    )
    .optional()
    .map_err(unavailable)?
    .map(MemberId)
    .ok_or(ConversationError::ReplyNotFound { seq })
}

// The rows, for the acts written once in `acts`.

impl ChannelRows for Transaction<'_> {
    fn load_channel(&self, id: &ChannelId) -> Result<Channel> {
        load_channel(self, id)
    }

    fn current_stint(&self, channel: &ChannelId, member: &MemberId) -> Result<Option<Membership>> {
        current_stint(self, channel, member)
    }

    fn stints_of(&self, member: &MemberId, only_current: bool) -> Result<Vec<Membership>> {
        stints_of(self, member, only_current)
    }

    fn previous_stint(&self, channel: &ChannelId, member: &MemberId) -> Result<Option<(bool, u64)>> {
        self.one(
            "SELECT muted, read_seq FROM memberships WHERE channel = ?1 AND member = ?2 ORDER BY stint DESC LIMIT 1",
            [channel.as_str(), member.as_str()],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .optional()
        .map_err(unavailable)
    }

    fn open_member_count(&self, channel: &ChannelId) -> Result<usize> {
        current_member_count(self, channel)
    }

    fn current_members(&self, channel: &ChannelId) -> Result<Vec<Membership>> {
        let sql = format!(
            "SELECT {MEMBERSHIP_COLUMNS} FROM memberships WHERE channel = ?1 AND left_after IS NULL ORDER BY stint"
        );
        let mut statement = self.prepare_cached(&sql).map_err(unavailable)?;
        let rows = statement.query_map([channel.as_str()], membership_from_row).map_err(unavailable)?;
        rows.collect::<rusqlite::Result<Vec<_>>>().map_err(unavailable)
    }

    fn public_rooms(&self, after: Option<&ChannelId>, limit: usize) -> Result<Vec<Channel>> {
        let sql = format!(
            "SELECT {CHANNEL_COLUMNS} FROM channels WHERE kind = 'public_room' AND id > ?1 ORDER BY id LIMIT ?2"
        );
        let mut statement = self.prepare_cached(&sql).map_err(unavailable)?;
        let after = after.map(ChannelId::as_str).unwrap_or("");
        let rows = statement.query_map(params![after, limit as u64], channel_from_row).map_err(unavailable)?;
        rows.collect::<rusqlite::Result<Vec<_>>>().map_err(unavailable)
    }

    fn last_position(&self) -> Result<u64> {
        last_position(self)
    }

    fn last_seq(&self, channel: &ChannelId) -> Result<u64> {
        last_seq(self, channel)
    }

    /// One past the last of each: the immediate transaction holds the write lock, so nobody else takes them.
    fn next_numbers(&self, channel: &ChannelId) -> Result<(u64, u64)> {
        Ok((last_seq(self, channel)? + 1, last_position(self)? + 1))
    }

    fn reply_author(&self, channel: &ChannelId, seq: u64) -> Result<MemberId> {
        reply_author(self, channel, seq)
    }

    fn channel_messages(&self, channel: &ChannelId, range: HistoryRange, limit: usize) -> Result<Vec<Message>> {
        let (id, limit) = (channel.as_str(), limit as u64);
        match range {
            HistoryRange::Latest => {
                query_messages(self, "WHERE m.channel = ?1 ORDER BY m.seq DESC LIMIT ?2", params![id, limit])
            }
            HistoryRange::Before(seq) => query_messages(
                self,
                "WHERE m.channel = ?1 AND m.seq < ?2 ORDER BY m.seq DESC LIMIT ?3",
                params![id, big(seq), limit],
            ),
            HistoryRange::After(seq) => query_messages(
                self,
                "WHERE m.channel = ?1 AND m.seq > ?2 ORDER BY m.seq LIMIT ?3",
                params![id, big(seq), limit],
            ),
        }
    }

    fn inbox_candidates(&self, member: &MemberId, after_position: u64, scan: usize) -> Result<Vec<Message>> {
        query_messages(
            self,
            "WHERE m.position > ?1 AND m.channel IN (SELECT channel FROM memberships WHERE member = ?2)
             ORDER BY m.position LIMIT ?3",
            params![big(after_position), member.as_str(), scan as u64],
        )
    }

    fn messages_after(&self, channel: &ChannelId, seq: u64, limit: usize) -> Result<Vec<Message>> {
        let clause = "WHERE m.channel = ?1 AND m.seq > ?2 ORDER BY m.seq LIMIT ?3";
        query_messages(self, clause, params![channel.as_str(), big(seq), limit as u64])
    }

    fn insert_channel(&self, channel: &Channel) -> Result<()> {
        insert_channel(self, channel)
    }

    fn insert_stint(&self, stint: &Membership) -> Result<()> {
        self.run(
            "INSERT INTO memberships (channel, member, role, joined_at, joined_after, muted, read_seq)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
            params![
                stint.channel.as_str(),
                stint.member.as_str(),
                stint.role.as_str(),
                stint.joined_at.0,
                stint.joined_after,
                stint.muted,
                stint.read_seq
            ],
        )
        .map_err(unavailable)?;
        Ok(())
    }

    fn update_open_stint(&self, stint: &Membership) -> Result<()> {
        self.run(
            "UPDATE memberships SET left_at = ?1, left_after = ?2, muted = ?3, read_seq = ?4, role = ?7
             WHERE channel = ?5 AND member = ?6 AND left_after IS NULL",
            params![
                stint.left_at.map(|t| t.0),
                stint.left_after,
                stint.muted,
                stint.read_seq,
                stint.channel.as_str(),
                stint.member.as_str(),
                stint.role.as_str()
            ],
        )
        .map_err(unavailable)?;
        Ok(())
    }

    fn insert_message(&self, message: &Message, idem_key: Option<&str>) -> Result<()> {
        insert_message(self, message, idem_key)
    }

    fn load_message(&self, channel: &ChannelId, seq: u64) -> Result<Option<Message>> {
        let found = query_messages(self, "WHERE m.channel = ?1 AND m.seq = ?2", params![channel.as_str(), big(seq)])?;
        Ok(found.into_iter().next())
    }

    fn messages_referring(&self, channel: &ChannelId, seq: u64) -> Result<Vec<Message>> {
        query_messages(
            self,
            "WHERE m.channel = ?1 AND m.ref_seq = ?2 ORDER BY m.seq",
            params![channel.as_str(), big(seq)],
        )
    }

    fn counter(&self, name: &str) -> Result<u64> {
        let found: Option<u64> = self
            .one("SELECT value FROM plane_counters WHERE name = ?1", [name], |r| r.get(0))
            .optional()
            .map_err(unavailable)?;
        Ok(found.unwrap_or(0))
    }

    fn set_counter(&self, name: &str, value: u64) -> Result<()> {
        self.run(
            "INSERT INTO plane_counters (name, value) VALUES (?1, ?2)
             ON CONFLICT (name) DO UPDATE SET value = excluded.value",
            params![name, value],
        )
        .map_err(unavailable)?;
        Ok(())
    }

    fn sealing_key(&self, member: &MemberId) -> Result<Option<SealingKey>> {
        self.one(
            "SELECT member, public_key, signature, published_at FROM sealing_keys WHERE member = ?1",
            [member.as_str()],
            |r| {
                Ok(SealingKey {
                    member: MemberId(r.get(0)?),
                    public_key: r.get(1)?,
                    signature: r.get(2)?,
                    published_at: Timestamp(r.get(3)?),
                })
            },
        )
        .optional()
        .map_err(unavailable)
    }

    fn put_sealing_key(&self, key: &SealingKey) -> Result<()> {
        self.run(
            "INSERT INTO sealing_keys (member, public_key, signature, published_at) VALUES (?1, ?2, ?3, ?4)
             ON CONFLICT (member) DO UPDATE SET public_key = excluded.public_key,
                 signature = excluded.signature, published_at = excluded.published_at",
            params![key.member.as_str(), key.public_key, key.signature, key.published_at.0],
        )
        .map_err(unavailable)?;
        Ok(())
    }

    fn message_by_idem(&self, author: &MemberId, key: &str) -> Result<Option<Message>> {
        let found =
            query_messages(self, "WHERE m.authored_by = ?1 AND m.idem_key = ?2", params![author.as_str(), key])?;
        Ok(found.into_iter().next())
    }
}

impl PeopleRows for Transaction<'_> {
    fn insert_passkey(&self, p: &PasskeyRecord) -> Result<()> {
        self.run(
            "INSERT INTO passkeys (credential_id, member, user_handle, passkey, created_at, last_used_at)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
            params![
                p.credential_id,
                p.member.as_str(),
                p.user_handle,
                p.passkey,
                p.created_at.0,
                p.last_used_at.map(|t| t.0)
            ],
        )
        .map_err(unavailable)?;
        Ok(())
    }

    fn load_passkey(&self, credential_id: &str) -> Result<Option<PasskeyRecord>> {
        let sql = format!("SELECT {PASSKEY_COLUMNS} FROM passkeys WHERE credential_id = ?1");
        self.one(&sql, [credential_id], passkey_from_row).optional().map_err(unavailable)
    }

    fn passkeys_of(&self, member: &MemberId) -> Result<Vec<PasskeyRecord>> {
        let sql =
            format!("SELECT {PASSKEY_COLUMNS} FROM passkeys WHERE member = ?1 ORDER BY created_at, credential_id");
        let mut statement = self.prepare_cached(&sql).map_err(unavailable)?;
        let rows = statement.query_map([member.as_str()], passkey_from_row).map_err(unavailable)?;
        rows.collect::<rusqlite::Result<Vec<_>>>().map_err(unavailable)
    }

    fn update_passkey(&self, p: &PasskeyRecord) -> Result<()> {
        self.run(
            "UPDATE passkeys SET passkey = ?2, last_used_at = ?3 WHERE credential_id = ?1",
            params![p.credential_id, p.passkey, p.last_used_at.map(|t| t.0)],
        )
        .map_err(unavailable)?;
        Ok(())
    }

    fn insert_ceremony(&self, c: &Ceremony) -> Result<()> {
        self.run(
            "INSERT INTO ceremonies (id, kind, member, state, expires_at) VALUES (?1, ?2, ?3, ?4, ?5)",
            params![c.id, c.kind, c.member.as_ref().map(MemberId::as_str), c.state, c.expires_at.0],
        )
        .map_err(unavailable)?;
        Ok(())
    }

    fn take_ceremony(&self, id: &str) -> Result<Option<Ceremony>> {
        let found = self
            .one("DELETE FROM ceremonies WHERE id = ?1 RETURNING id, kind, member, state, expires_at", [id], |r| {
                Ok(Ceremony {
                    id: r.get(0)?,
                    kind: r.get(1)?,
                    member: r.get::<_, Option<String>>(2)?.map(MemberId),
                    state: r.get(3)?,
                    expires_at: Timestamp(r.get(4)?),
                })
            })
            .optional()
            .map_err(unavailable)?;
        Ok(found)
    }

    fn insert_session(&self, s: &Session) -> Result<()> {
        self.run(
            "INSERT INTO sessions (hash, member, created_at, expires_at, revoked_at) VALUES (?1, ?2, ?3, ?4, ?5)",
            params![s.hash, s.member.as_str(), s.created_at.0, s.expires_at.0, s.revoked_at.map(|t| t.0)],
        )
        .map_err(unavailable)?;
        Ok(())
    }

    fn load_session(&self, hash: &str) -> Result<Option<Session>> {
        self.one("SELECT hash, member, created_at, expires_at, revoked_at FROM sessions WHERE hash = ?1", [hash], |r| {
            Ok(Session {
                hash: r.get(0)?,
                member: MemberId(r.get(1)?),
                created_at: Timestamp(r.get(2)?),
                expires_at: Timestamp(r.get(3)?),
                revoked_at: r.get::<_, Option<i64>>(4)?.map(Timestamp),
            })
        })
        .optional()
        .map_err(unavailable)
    }

    fn update_session(&self, s: &Session) -> Result<()> {
        self.run("UPDATE sessions SET revoked_at = ?2 WHERE hash = ?1", params![s.hash, s.revoked_at.map(|t| t.0)])
            .map_err(unavailable)?;
        Ok(())
    }
}

impl BodyRows for Transaction<'_> {
    fn load_lease(&self, member: &MemberId) -> Result<Option<BodyLease>> {
        self.one("SELECT member, body, expires_at FROM body_leases WHERE member = ?1", [member.as_str()], |r| {
            Ok(BodyLease { member: MemberId(r.get(0)?), body: r.get(1)?, expires_at: Timestamp(r.get(2)?) })
        })
        .optional()
        .map_err(unavailable)
    }

    fn put_lease(&self, lease: &BodyLease) -> Result<()> {
        self.run(
            "INSERT INTO body_leases (member, body, expires_at) VALUES (?1, ?2, ?3)
             ON CONFLICT (member) DO UPDATE SET body = excluded.body, expires_at = excluded.expires_at",
            params![lease.member.as_str(), lease.body, lease.expires_at.0],
        )
        .map_err(unavailable)?;
        Ok(())
    }

    fn delete_lease(&self, member: &MemberId) -> Result<()> {
        self.run("DELETE FROM body_leases WHERE member = ?1", [member.as_str()]).map_err(unavailable)?;
        Ok(())
    }

    fn load_answer(&self, member: &MemberId, position: u64) -> Result<Option<Answer>> {
        let sql = "SELECT member, position, body, at FROM answers WHERE member = ?1 AND position = ?2";
        self.one(sql, params![member.as_str(), big(position)], answer_from_row).optional().map_err(unavailable)
    }

    fn insert_answer(&self, answer: &Answer) -> Result<()> {
        self.run(
            "INSERT INTO answers (member, position, body, at) VALUES (?1, ?2, ?3, ?4)",
            params![answer.member.as_str(), answer.position, answer.body, answer.at.0],
        )
        .map_err(unavailable)?;
        Ok(())
    }

    fn answers_of(&self, member: &MemberId, after_position: u64, limit: usize) -> Result<Vec<Answer>> {
        let sql = "SELECT member, position, body, at FROM answers WHERE member = ?1 AND position > ?2
                   ORDER BY position LIMIT ?3";
        let mut statement = self.prepare_cached(sql).map_err(unavailable)?;
        let rows = statement
            .query_map(params![member.as_str(), big(after_position), limit as u64], answer_from_row)
            .map_err(unavailable)?;
        rows.collect::<rusqlite::Result<Vec<_>>>().map_err(unavailable)
    }
}

impl MeterRows for Transaction<'_> {
    fn add_meter(&self, count: &Metered) -> Result<()> {
        self.run(
            "INSERT INTO meter (member, day, transport, events) VALUES (?1, ?2, ?3, ?4)
             ON CONFLICT (member, day, transport) DO UPDATE SET events = events + excluded.events",
            params![count.member.as_str(), count.day, count.transport, count.events],
        )
        .map_err(unavailable)?;
        Ok(())
    }

    fn meter_of(&self, member: &MemberId, day: i64) -> Result<Vec<Metered>> {
        let sql = "SELECT member, day, transport, events FROM meter WHERE member = ?1 AND day = ?2 ORDER BY transport";
        let mut statement = self.prepare_cached(sql).map_err(unavailable)?;
        let rows = statement
            .query_map(params![member.as_str(), day], |r| {
                Ok(Metered { member: MemberId(r.get(0)?), day: r.get(1)?, transport: r.get(2)?, events: r.get(3)? })
            })
            .map_err(unavailable)?;
        rows.collect::<rusqlite::Result<Vec<_>>>().map_err(unavailable)
    }
}

impl OutboxRows for Transaction<'_> {
    fn enqueue_deliveries(&self, channel: &ChannelId, position: u64, now: Timestamp) -> Result<()> {
        self.run(
            "INSERT INTO webhook_deliveries (endpoint, position, state, attempts, next_attempt_at, updated_at)
             SELECT e.id, ?2, 'pending', 0, ?3, ?3 FROM webhook_endpoints e
             JOIN memberships m ON m.member = e.member AND m.channel = ?1 AND m.left_after IS NULL
             WHERE e.disabled_at IS NULL",
            params![channel.as_str(), big(position), now.0],
        )
        .map_err(unavailable)?;
        Ok(())
    }

    fn insert_endpoint(&self, endpoint: &Endpoint) -> Result<()> {
        let sql =
            format!("INSERT INTO webhook_endpoints ({ENDPOINT_COLUMNS}) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)");
        self.run(
            &sql,
            params![
                endpoint.id,
                endpoint.member.as_str(),
                endpoint.url,
                endpoint.secret,
                endpoint.previous_secret,
                endpoint.previous_until.map(|t| t.0),
                endpoint.created_at.0,
                endpoint.disabled_at.map(|t| t.0),
                endpoint.disabled_reason
            ],
        )
        .map_err(unavailable)?;
        Ok(())
    }

    fn load_endpoint(&self, id: &str) -> Result<Option<Endpoint>> {
        let sql = format!("SELECT {ENDPOINT_COLUMNS} FROM webhook_endpoints WHERE id = ?1");
        self.one(&sql, [id], endpoint_from_row).optional().map_err(unavailable)
    }

    fn endpoints_of(&self, member: &MemberId) -> Result<Vec<Endpoint>> {
        let sql = format!("SELECT {ENDPOINT_COLUMNS} FROM webhook_endpoints WHERE member = ?1 ORDER BY created_at, id");
        query_rows(self, &sql, [member.as_str()], endpoint_from_row)
    }

    fn update_endpoint(&self, endpoint: &Endpoint) -> Result<()> {
        self.run(
            "UPDATE webhook_endpoints SET secret = ?2, previous_secret = ?3, previous_until = ?4,
                    disabled_at = ?5, disabled_reason = ?6 WHERE id = ?1",
            params![
                endpoint.id,
                endpoint.secret,
                endpoint.previous_secret,
                endpoint.previous_until.map(|t| t.0),
                endpoint.disabled_at.map(|t| t.0),
                endpoint.disabled_reason
            ],
        )
        .map_err(unavailable)?;
        Ok(())
    }

    fn delete_endpoint(&self, id: &str) -> Result<()> {
        self.run("DELETE FROM webhook_deliveries WHERE endpoint = ?1", [id]).map_err(unavailable)?;
        self.run("DELETE FROM webhook_endpoints WHERE id = ?1", [id]).map_err(unavailable)?;
        Ok(())
    }

    fn due_deliveries(&self, now: Timestamp, limit: usize) -> Result<Vec<Delivery>> {
        let sql = format!(
            "SELECT {DELIVERY_COLUMNS} FROM webhook_deliveries d JOIN webhook_endpoints e ON e.id = d.endpoint
             WHERE e.disabled_at IS NULL AND d.state = 'pending'
               AND d.position = (SELECT MIN(x.position) FROM webhook_deliveries x
                                 WHERE x.endpoint = d.endpoint AND x.state = 'pending')
               AND d.next_attempt_at <= ?1 AND (d.leased_until IS NULL OR d.leased_until <= ?1)
             ORDER BY d.next_attempt_at, d.id LIMIT ?2"
        );
        query_rows(self, &sql, params![now.0, limit as u64], delivery_from_row)
    }

    fn load_delivery(&self, id: u64) -> Result<Option<Delivery>> {
        let sql = format!("SELECT {DELIVERY_COLUMNS} FROM webhook_deliveries d WHERE d.id = ?1");
        self.one(&sql, [id], delivery_from_row).optional().map_err(unavailable)
    }

    fn update_delivery(&self, delivery: &Delivery) -> Result<()> {
        self.run(
            "UPDATE webhook_deliveries SET state = ?2, attempts = ?3, next_attempt_at = ?4, leased_until = ?5,
                    last_status = ?6, last_error = ?7, updated_at = ?8 WHERE id = ?1",
            params![
                delivery.id,
                delivery.state.as_str(),
                delivery.attempts,
                delivery.next_attempt_at.0,
                delivery.leased_until.map(|t| t.0),
                delivery.last_status,
                delivery.last_error,
                delivery.updated_at.0
            ],
        )
        .map_err(unavailable)?;
        Ok(())
    }

    fn message_at(&self, position: u64) -> Result<Message> {
        let found = query_messages(self, "WHERE m.position = ?1", params![big(position)])?;
        found.into_iter().next().ok_or_else(|| unavailable(format!("no message at position {position}")))
    }

    fn deliveries_of(&self, endpoint: &str, state: DeliveryState, limit: usize) -> Result<Vec<Delivery>> {
        let sql = format!(
            "SELECT {DELIVERY_COLUMNS} FROM webhook_deliveries d WHERE d.endpoint = ?1 AND d.state = ?2
             ORDER BY d.position LIMIT ?3"
        );
        query_rows(self, &sql, params![endpoint, state.as_str(), limit as u64], delivery_from_row)
    }

    fn requeue_dead(&self, endpoint: &str, now: Timestamp) -> Result<u64> {
        let changed = self
            .run(
                "UPDATE webhook_deliveries SET state = 'pending', attempts = 0, next_attempt_at = ?2,
                        leased_until = NULL, updated_at = ?2 WHERE endpoint = ?1 AND state = 'dead'",
                params![endpoint, now.0],
            )
            .map_err(unavailable)?;
        Ok(changed as u64)
    }
}

/// A position or `seq` as SQLite stores it: one past `i64::MAX` reads as the
/// largest (nothing lies after it), never as a refused bind.
fn big(value: u64) -> i64 {
    i64::try_from(value).unwrap_or(i64::MAX)
}

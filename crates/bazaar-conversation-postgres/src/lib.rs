//! The conversation plane on PostgreSQL: [`PostgresConversationStore`]
//! implements the blocking `ConversationStore` over one connection driven by a
//! private current-thread Tokio runtime, so `bazaar-conversation` itself stays
//! runtime-free. It owns its `migrations/`, applied under an advisory lock.
//!
//! Sequencing: every write transaction first locks the one row of
//! `conversation_head` (`SELECT … FOR UPDATE`). Conversation writes therefore
//! run one at a time across connections and nodes, as `BEGIN IMMEDIATE` makes
//! them on SQLite, and a post takes the next position from that row and the
//! next `seq` from its channel's `last_seq` row, bumping both in its own
//! transaction: a rollback returns both numbers, so neither has a gap, and a
//! position commits only after every lower one, so an inbox cursor never
//! skips a message that commits later. A row lock, not an advisory lock, so
//! the lock and the counter it guards are one thing. Joins and leaves take the
//! same lock because they read the last position to bound a stint.
//! This caps conversation writes at one transaction at a time per database;
//! the group-commit writer (batching posts into one transaction) is next.

mod rows;
pub mod testing;
mod tx;

use std::sync::{Arc, Mutex};

use bazaar_conversation::compose::{check_body, check_page, resolve_mentions};
use bazaar_conversation::eligibility::{delivered_to, wakes};
use bazaar_conversation::model::{
    Attention, Channel, ChannelId, ChannelKind, Membership, Message, MessageKind, ReplyTo, Role,
};
use bazaar_conversation::{
    ConversationError, ConversationStore, Directory, HistoryRange, InboxPage, NewMessage, NewRoom,
};
use bazaar_types::limits::{CHANNEL_NAME_BYTES_MAX, HISTORY_PAGE_MAX, INBOX_PAGE_MAX, INBOX_SCAN_MAX};
use bazaar_types::{Clock, Entropy, MemberId, Timestamp};
use tokio::runtime::Runtime;
use tokio_postgres::{Client, IsolationLevel, NoTls};

use rows::*;
use tx::{big, unavailable, Result, Tx};

/// Migrations, in order. Never edit a landed one; add a new file.
const MIGRATIONS: &[(&str, &str)] = &[("0001_conversation", include_str!("../migrations/0001_conversation.sql"))];

/// The advisory lock key taken while migrating ("bazaar" then 0xC0, the plane's own).
const MIGRATION_LOCK_KEY: i64 = 0x6261_7a61_6172_00c0;
/// `application_name` of the store's connection.
const APPLICATION_NAME: &str = "bazaar-conversation";

pub struct PostgresConversationStore {
    /// Drives the connection; only ever entered with `client` locked.
    runtime: Runtime,
    client: Mutex<Client>,
    clock: Arc<dyn Clock>,
    entropy: Arc<dyn Entropy>,
}

impl PostgresConversationStore {
    /// Connect to the database at `url` and bring its conversation schema up to date.
    pub fn connect(url: &str, clock: Arc<dyn Clock>, entropy: Arc<dyn Entropy>) -> Result<Self> {
        let mut config: tokio_postgres::Config = url.parse().map_err(unavailable)?;
        config.application_name(APPLICATION_NAME);
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().map_err(unavailable)?;
        let (client, connection) = runtime.block_on(config.connect(NoTls)).map_err(unavailable)?;
        // A broken connection surfaces as an error on the next statement.
        runtime.spawn(async move {
            let _ = connection.await;
        });
        let store = PostgresConversationStore { runtime, client: Mutex::new(client), clock, entropy };
        store.migrate()?;
        Ok(store)
    }

    fn migrate(&self) -> Result<()> {
        let mut client = self.client.lock().map_err(unavailable)?;
        let inner = self.runtime.block_on(client.transaction()).map_err(unavailable)?;
        let tx = Tx { runtime: &self.runtime, inner };
        // Transaction-scoped: two stores starting together apply each file once.
        tx.execute("SELECT pg_advisory_xact_lock($1)", &[&MIGRATION_LOCK_KEY])?;
        tx.execute(
            "CREATE TABLE IF NOT EXISTS conversation_migrations (name TEXT PRIMARY KEY, applied_at BIGINT NOT NULL)",
            &[],
        )?;
        for (name, sql) in MIGRATIONS {
            if tx.query_opt("SELECT 1 FROM conversation_migrations WHERE name = $1", &[name])?.is_some() {
                continue;
            }
            tx.runtime.block_on(tx.inner.batch_execute(sql)).map_err(unavailable)?;
            tx.execute("INSERT INTO conversation_migrations VALUES ($1, extract(epoch FROM now())::bigint)", &[name])?;
        }
        tx.commit()
    }

    /// One write transaction, holding the sequencer's row lock from its start.
    fn write<T>(&self, act: impl FnOnce(&Tx<'_>, Timestamp) -> Result<T>) -> Result<T> {
        let mut client = self.client.lock().map_err(unavailable)?;
        let inner = self.runtime.block_on(client.transaction()).map_err(unavailable)?;
        let tx = Tx { runtime: &self.runtime, inner };
        let outcome = tx
            .query_one("SELECT last_position FROM conversation_head FOR UPDATE", &[])
            .and_then(|_| act(&tx, self.clock.now()));
        match outcome {
            Ok(value) => tx.commit().map(|()| value),
            Err(error) => {
                tx.rollback();
                Err(error)
            }
        }
    }

    /// One read-only transaction: every query in it sees the same snapshot.
    fn read<T>(&self, act: impl FnOnce(&Tx<'_>) -> Result<T>) -> Result<T> {
        let mut client = self.client.lock().map_err(unavailable)?;
        let begin = client.build_transaction().isolation_level(IsolationLevel::RepeatableRead).read_only(true);
        let inner = self.runtime.block_on(begin.start()).map_err(unavailable)?;
        let tx = Tx { runtime: &self.runtime, inner };
        match act(&tx) {
            Ok(value) => tx.commit().map(|()| value),
            Err(error) => {
                tx.rollback();
                Err(error)
            }
        }
    }
}

// The acts.

impl PostgresConversationStore {
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

    fn inbox_scan(tx: &Tx<'_>, member: &MemberId, after_position: u64, limit: usize) -> Result<InboxPage> {
        let stints = stints_of(tx, member, false)?;
        let scan = big(INBOX_SCAN_MAX as u64);
        let rows = query_messages(
            tx,
            "WHERE m.position > $1 AND m.channel IN (SELECT channel FROM memberships WHERE member = $2)
             ORDER BY m.position LIMIT $3",
            &[&big(after_position), &member.as_str(), &scan],
        )?;
        let mut page = InboxPage { messages: Vec::new(), next_after: after_position };
        for message in rows {
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

impl ConversationStore for PostgresConversationStore {
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
                "UPDATE memberships SET left_at = $1, left_after = $2
                 WHERE channel = $3 AND member = $4 AND left_after IS NULL",
                &[&now.0, &stint.left_after.map(big), &channel.as_str(), &member.as_str()],
            )?;
            Ok(stint)
        })
    }

    fn set_muted(&self, channel: &ChannelId, member: &MemberId, muted: bool) -> Result<Membership> {
        self.write(|tx, _now| {
            load_channel(tx, channel)?;
            let mut stint = require_stint(tx, channel, member)?;
            stint.muted = muted;
            tx.execute(
                "UPDATE memberships SET muted = $1 WHERE channel = $2 AND member = $3 AND left_after IS NULL",
                &[&muted, &channel.as_str(), &member.as_str()],
            )?;
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
            let (seq, position) = next_numbers(tx, &channel.id)?;
            let message = Message {
                seq,
                position,
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
            let (id, limit) = (channel.as_str(), big(limit as u64));
            let mut page = match range {
                HistoryRange::Latest => {
                    query_messages(tx, "WHERE m.channel = $1 ORDER BY m.seq DESC LIMIT $2", &[&id, &limit])?
                }
                HistoryRange::Before(seq) => query_messages(
                    tx,
                    "WHERE m.channel = $1 AND m.seq < $2 ORDER BY m.seq DESC LIMIT $3",
                    &[&id, &big(seq), &limit],
                )?,
                HistoryRange::After(seq) => {
                    return query_messages(
                        tx,
                        "WHERE m.channel = $1 AND m.seq > $2 ORDER BY m.seq LIMIT $3",
                        &[&id, &big(seq), &limit],
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
                "UPDATE memberships SET read_seq = $1 WHERE channel = $2 AND member = $3 AND left_after IS NULL",
                &[&big(stint.read_seq), &channel.as_str(), &member.as_str()],
            )?;
            Ok(stint)
        })
    }

    fn attention(&self, member: &MemberId) -> Result<Vec<Attention>> {
        self.read(|tx| {
            let mut found = Vec::new();
            for stint in stints_of(tx, member, true)? {
                let unread_candidates = query_messages(
                    tx,
                    "WHERE m.channel = $1 AND m.seq > $2 ORDER BY m.seq",
                    &[&stint.channel.as_str(), &big(stint.read_seq)],
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

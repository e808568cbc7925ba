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
//!
//! ## Map
//!
//! (What this crate holds, file by file; `ARCHITECTURE.md` keeps the one-line summary.)
//!
//! `PostgresConversationStore`, the plane on
//! PostgreSQL (its `Rows` and `Engine` only): blocking API over a private current-thread runtime, its own
//! `migrations/`, every write locking the one `conversation_head` row as the
//! sequencer. Runs the shared conformance suite in a throwaway database.

mod outbox;
mod rows;
mod tx;

use std::sync::{Arc, Mutex};

use bazaar_conversation::delivery::{Delivery, DeliveryState, Endpoint};
use bazaar_conversation::engine::{BodyRows, ChannelRows, Engine, MeterRows, OutboxRows, PeopleRows};
use bazaar_conversation::model::Metered;
use bazaar_conversation::model::{Answer, BodyLease, Ceremony, PasskeyRecord, Session};
use bazaar_conversation::model::{Channel, ChannelId, Membership, Message};
use bazaar_conversation::sealing::SealingKey;
use bazaar_conversation::HistoryRange;
use bazaar_types::{Clock, Entropy, MemberId, Timestamp};
use tokio::runtime::Runtime;
use tokio_postgres::{Client, IsolationLevel};

use rows::*;
pub use tx::Tx;
use tx::{big, unavailable, Result};

/// Migrations, in order. Never edit a landed one; add a new file.
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
        let mut database = bazaar_pg::Database::from_url(url).map_err(unavailable)?;
        database.config_mut().application_name(APPLICATION_NAME);
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().map_err(unavailable)?;
        let (client, connection) = runtime.block_on(database.connect()).map_err(unavailable)?;
        // A broken connection surfaces as an error on the next statement.
        runtime.spawn(connection);
        let store = PostgresConversationStore { runtime, client: Mutex::new(client), clock, entropy };
        store.migrate()?;
        Ok(store)
    }

    fn migrate(&self) -> Result<()> {
        let mut client = self.client.lock().map_err(unavailable)?;
        let plan =
            bazaar_pg::Migrations { table: "conversation_migrations", lock_key: MIGRATION_LOCK_KEY, files: MIGRATIONS };
        self.runtime.block_on(plan.run(&mut client)).map(|_| ()).map_err(unavailable)
    }
}

impl Engine for PostgresConversationStore {
    type Tx<'t> = Tx<'t>;

    fn entropy(&self) -> &dyn Entropy {
        self.entropy.as_ref()
    }

    /// One write transaction, holding the sequencer's row lock from its start.
    fn write<T: Send + 'static>(
        &self,
        act: impl FnOnce(&Tx<'_>, Timestamp) -> Result<T> + Send + 'static,
    ) -> Result<T> {
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

// The rows, for the acts written once in `bazaar_conversation::acts`.

const PASSKEY_COLUMNS: &str = "credential_id, member, user_handle, passkey, created_at, last_used_at";

fn passkey_from_row(row: &tokio_postgres::Row) -> Result<PasskeyRecord> {
    Ok(PasskeyRecord {
        credential_id: tx::col(row, 0)?,
        member: MemberId(tx::col(row, 1)?),
        user_handle: tx::col(row, 2)?,
        passkey: tx::col(row, 3)?,
        created_at: Timestamp(tx::col(row, 4)?),
        last_used_at: tx::col::<Option<i64>>(row, 5)?.map(Timestamp),
    })
}

fn answer_from_row(row: &tokio_postgres::Row) -> Result<Answer> {
    Ok(Answer {
        member: MemberId(tx::col(row, 0)?),
        position: tx::count(row, 1)?,
        body: tx::col(row, 2)?,
        at: Timestamp(tx::col(row, 3)?),
    })
}

impl ChannelRows for Tx<'_> {
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
        previous_stint(self, channel, member)
    }

    fn open_member_count(&self, channel: &ChannelId) -> Result<usize> {
        open_member_count(self, channel)
    }

    fn current_members(&self, channel: &ChannelId) -> Result<Vec<Membership>> {
        current_members(self, channel)
    }

    fn public_rooms(&self, after: Option<&ChannelId>, limit: usize) -> Result<Vec<Channel>> {
        public_rooms(self, after, limit)
    }

    fn last_position(&self) -> Result<u64> {
        last_position(self)
    }

    fn last_seq(&self, channel: &ChannelId) -> Result<u64> {
        last_seq(self, channel)
    }

    fn next_numbers(&self, channel: &ChannelId) -> Result<(u64, u64)> {
        next_numbers(self, channel)
    }

    fn reply_author(&self, channel: &ChannelId, seq: u64) -> Result<MemberId> {
        reply_author(self, channel, seq)
    }

    fn channel_messages(&self, channel: &ChannelId, range: HistoryRange, limit: usize) -> Result<Vec<Message>> {
        let (id, limit) = (channel.as_str(), big(limit as u64));
        match range {
            HistoryRange::Latest => {
                query_messages(self, "WHERE m.channel = $1 ORDER BY m.seq DESC LIMIT $2", &[&id, &limit])
            }
            HistoryRange::Before(seq) => query_messages(
                self,
                "WHERE m.channel = $1 AND m.seq < $2 ORDER BY m.seq DESC LIMIT $3",
                &[&id, &big(seq), &limit],
            ),
            HistoryRange::After(seq) => query_messages(
                self,
                "WHERE m.channel = $1 AND m.seq > $2 ORDER BY m.seq LIMIT $3",
                &[&id, &big(seq), &limit],
            ),
        }
    }

    fn inbox_candidates(&self, member: &MemberId, after_position: u64, scan: usize) -> Result<Vec<Message>> {
        query_messages(
            self,
            "WHERE m.position > $1 AND m.channel IN (SELECT channel FROM memberships WHERE member = $2)
             ORDER BY m.position LIMIT $3",
            &[&big(after_position), &member.as_str(), &big(scan as u64)],
        )
    }

    fn messages_after(&self, channel: &ChannelId, seq: u64, limit: usize) -> Result<Vec<Message>> {
        let clause = "WHERE m.channel = $1 AND m.seq > $2 ORDER BY m.seq LIMIT $3";
        query_messages(self, clause, &[&channel.as_str(), &big(seq), &big(limit as u64)])
    }

    fn insert_channel(&self, channel: &Channel) -> Result<()> {
        insert_channel(self, channel)
    }

    fn insert_stint(&self, stint: &Membership) -> Result<()> {
        insert_stint(self, stint)
    }

    fn update_open_stint(&self, stint: &Membership) -> Result<()> {
        self.execute(
            "UPDATE memberships SET left_at = $1, left_after = $2, muted = $3, read_seq = $4, role = $7
             WHERE channel = $5 AND member = $6 AND left_after IS NULL",
            &[
                &stint.left_at.map(|t| t.0),
                &stint.left_after.map(big),
                &stint.muted,
                &big(stint.read_seq),
                &stint.channel.as_str(),
                &stint.member.as_str(),
                &stint.role.as_str(),
            ],
        )?;
        Ok(())
    }

    fn insert_message(&self, message: &Message, idem_key: Option<&str>) -> Result<()> {
        insert_message(self, message, idem_key)
    }

    fn load_message(&self, channel: &ChannelId, seq: u64) -> Result<Option<Message>> {
        let found = query_messages(self, "WHERE m.channel = $1 AND m.seq = $2", &[&channel.as_str(), &big(seq)])?;
        Ok(found.into_iter().next())
    }

    fn messages_referring(&self, channel: &ChannelId, seq: u64) -> Result<Vec<Message>> {
        query_messages(self, "WHERE m.channel = $1 AND m.ref_seq = $2 ORDER BY m.seq", &[&channel.as_str(), &big(seq)])
    }

    fn counter(&self, name: &str) -> Result<u64> {
        match self.query_opt("SELECT value FROM plane_counters WHERE name = $1", &[&name])? {
            Some(row) => tx::count(&row, 0),
            None => Ok(0),
        }
    }

    fn set_counter(&self, name: &str, value: u64) -> Result<()> {
        self.execute(
            "INSERT INTO plane_counters (name, value) VALUES ($1, $2)
             ON CONFLICT (name) DO UPDATE SET value = excluded.value",
            &[&name, &big(value)],
        )?;
        Ok(())
    }

    fn sealing_key(&self, member: &MemberId) -> Result<Option<SealingKey>> {
        let sql = "SELECT member, public_key, signature, published_at FROM sealing_keys WHERE member = $1";
        match self.query_opt(sql, &[&member.as_str()])? {
            Some(row) => Ok(Some(SealingKey {
                member: MemberId(tx::col(&row, 0)?),
                public_key: tx::col(&row, 1)?,
                signature: tx::col(&row, 2)?,
                published_at: Timestamp(tx::col(&row, 3)?),
            })),
            None => Ok(None),
        }
    }

    fn put_sealing_key(&self, key: &SealingKey) -> Result<()> {
        self.execute(
            "INSERT INTO sealing_keys (member, public_key, signature, published_at) VALUES ($1, $2, $3, $4)
             ON CONFLICT (member) DO UPDATE SET public_key = excluded.public_key,
                 signature = excluded.signature, published_at = excluded.published_at",
            &[&key.member.as_str(), &key.public_key, &key.signature, &key.published_at.0],
        )?;
        Ok(())
    }

    fn message_by_idem(&self, author: &MemberId, key: &str) -> Result<Option<Message>> {
        let found = query_messages(self, "WHERE m.authored_by = $1 AND m.idem_key = $2", &[&author.as_str(), &key])?;
        Ok(found.into_iter().next())
    }
}

impl PeopleRows for Tx<'_> {
    fn insert_passkey(&self, p: &PasskeyRecord) -> Result<()> {
        self.execute(
            "INSERT INTO passkeys (credential_id, member, user_handle, passkey, created_at, last_used_at)
             VALUES ($1, $2, $3, $4, $5, $6)",
            &[
                &p.credential_id,
                &p.member.as_str(),
                &p.user_handle,
                &p.passkey,
                &p.created_at.0,
                &p.last_used_at.map(|t| t.0),
            ],
        )?;
        Ok(())
    }

    fn load_passkey(&self, credential_id: &str) -> Result<Option<PasskeyRecord>> {
        let sql = format!("SELECT {PASSKEY_COLUMNS} FROM passkeys WHERE credential_id = $1");
        self.query_opt(&sql, &[&credential_id])?.map(|row| passkey_from_row(&row)).transpose()
    }

    fn passkeys_of(&self, member: &MemberId) -> Result<Vec<PasskeyRecord>> {
        let sql =
            format!("SELECT {PASSKEY_COLUMNS} FROM passkeys WHERE member = $1 ORDER BY created_at, credential_id");
        self.query(&sql, &[&member.as_str()])?.iter().map(passkey_from_row).collect()
    }

    fn update_passkey(&self, p: &PasskeyRecord) -> Result<()> {
        self.execute(
            "UPDATE passkeys SET passkey = $2, last_used_at = $3 WHERE credential_id = $1",
            &[&p.credential_id, &p.passkey, &p.last_used_at.map(|t| t.0)],
        )?;
        Ok(())
    }

    fn insert_ceremony(&self, c: &Ceremony) -> Result<()> {
        self.execute(
            "INSERT INTO ceremonies (id, kind, member, state, expires_at) VALUES ($1, $2, $3, $4, $5)",
            &[&c.id, &c.kind, &c.member.as_ref().map(MemberId::as_str), &c.state, &c.expires_at.0],
        )?;
        Ok(())
    }

    fn take_ceremony(&self, id: &str) -> Result<Option<Ceremony>> {
        let sql = "DELETE FROM ceremonies WHERE id = $1 RETURNING id, kind, member, state, expires_at";
        match self.query_opt(sql, &[&id])? {
            Some(row) => Ok(Some(Ceremony {
                id: tx::col(&row, 0)?,
                kind: tx::col(&row, 1)?,
                member: tx::col::<Option<String>>(&row, 2)?.map(MemberId),
                state: tx::col(&row, 3)?,
                expires_at: Timestamp(tx::col(&row, 4)?),
            })),
            None => Ok(None),
        }
    }

    fn insert_session(&self, s: &Session) -> Result<()> {
        self.execute(
            "INSERT INTO sessions (hash, member, created_at, expires_at, revoked_at) VALUES ($1, $2, $3, $4, $5)",
            &[&s.hash, &s.member.as_str(), &s.created_at.0, &s.expires_at.0, &s.revoked_at.map(|t| t.0)],
        )?;
        Ok(())
    }

    fn load_session(&self, hash: &str) -> Result<Option<Session>> {
        let sql = "SELECT hash, member, created_at, expires_at, revoked_at FROM sessions WHERE hash = $1";
        match self.query_opt(sql, &[&hash])? {
            Some(row) => Ok(Some(Session {
                hash: tx::col(&row, 0)?,
                member: MemberId(tx::col(&row, 1)?),
                created_at: Timestamp(tx::col(&row, 2)?),
                expires_at: Timestamp(tx::col(&row, 3)?),
                revoked_at: tx::col::<Option<i64>>(&row, 4)?.map(Timestamp),
            })),
            None => Ok(None),
        }
    }

    fn update_session(&self, s: &Session) -> Result<()> {
        self.execute("UPDATE sessions SET revoked_at = $2 WHERE hash = $1", &[&s.hash, &s.revoked_at.map(|t| t.0)])?;
        Ok(())
    }
}

impl BodyRows for Tx<'_> {
    fn load_lease(&self, member: &MemberId) -> Result<Option<BodyLease>> {
        let sql = "SELECT member, body, expires_at FROM body_leases WHERE member = $1";
        match self.query_opt(sql, &[&member.as_str()])? {
            Some(row) => Ok(Some(BodyLease {
                member: MemberId(tx::col(&row, 0)?),
                body: tx::col(&row, 1)?,
                expires_at: Timestamp(tx::col(&row, 2)?),
            })),
            None => Ok(None),
        }
    }

    fn put_lease(&self, lease: &BodyLease) -> Result<()> {
        self.execute(
            "INSERT INTO body_leases (member, body, expires_at) VALUES ($1, $2, $3)
             ON CONFLICT (member) DO UPDATE SET body = excluded.body, expires_at = excluded.expires_at",
            &[&lease.member.as_str(), &lease.body, &lease.expires_at.0],
        )?;
        Ok(())
    }

    fn delete_lease(&self, member: &MemberId) -> Result<()> {
        self.execute("DELETE FROM body_leases WHERE member = $1", &[&member.as_str()])?;
        Ok(())
    }

    fn load_answer(&self, member: &MemberId, position: u64) -> Result<Option<Answer>> {
        let sql = "SELECT member, position, body, at FROM answers WHERE member = $1 AND position = $2";
        self.query_opt(sql, &[&member.as_str(), &big(position)])?.map(|row| answer_from_row(&row)).transpose()
    }

    fn insert_answer(&self, answer: &Answer) -> Result<()> {
        self.execute(
            "INSERT INTO answers (member, position, body, at) VALUES ($1, $2, $3, $4)",
            &[&answer.member.as_str(), &big(answer.position), &answer.body, &answer.at.0],
        )?;
        Ok(())
    }

    fn answers_of(&self, member: &MemberId, after_position: u64, limit: usize) -> Result<Vec<Answer>> {
        let sql = "SELECT member, position, body, at FROM answers WHERE member = $1 AND position > $2
                   ORDER BY position LIMIT $3";
        let rows = self.query(sql, &[&member.as_str(), &big(after_position), &(limit as i64)])?;
        rows.iter().map(answer_from_row).collect()
    }
}

impl MeterRows for Tx<'_> {
    fn add_meter(&self, count: &Metered) -> Result<()> {
        self.execute(
            "INSERT INTO meter (member, day, transport, events) VALUES ($1, $2, $3, $4)
             ON CONFLICT (member, day, transport) DO UPDATE SET events = meter.events + excluded.events",
            &[&count.member.as_str(), &count.day, &count.transport, &big(count.events)],
        )?;
        Ok(())
    }

    fn meter_of(&self, member: &MemberId, day: i64) -> Result<Vec<Metered>> {
        let sql = "SELECT member, day, transport, events FROM meter WHERE member = $1 AND day = $2 ORDER BY transport";
        let rows = self.query(sql, &[&member.as_str(), &day])?;
        rows.iter()
            .map(|row| {
                Ok(Metered {
                    member: MemberId(tx::col(row, 0)?),
                    day: tx::col(row, 1)?,
                    transport: tx::col(row, 2)?,
                    events: tx::count(row, 3)?,
                })
            })
            .collect()
    }
}

impl OutboxRows for Tx<'_> {
    fn enqueue_deliveries(&self, channel: &ChannelId, position: u64, now: Timestamp) -> Result<()> {
        outbox::enqueue_deliveries(self, channel, position, now)
    }

    fn insert_endpoint(&self, endpoint: &Endpoint) -> Result<()> {
        outbox::insert_endpoint(self, endpoint)
    }

    fn load_endpoint(&self, id: &str) -> Result<Option<Endpoint>> {
        outbox::load_endpoint(self, id)
    }

    fn endpoints_of(&self, member: &MemberId) -> Result<Vec<Endpoint>> {
        outbox::endpoints_of(self, member)
    }

    fn update_endpoint(&self, endpoint: &Endpoint) -> Result<()> {
        outbox::update_endpoint(self, endpoint)
    }

    fn delete_endpoint(&self, id: &str) -> Result<()> {
        outbox::delete_endpoint(self, id)
    }

    fn due_deliveries(&self, now: Timestamp, limit: usize) -> Result<Vec<Delivery>> {
        outbox::due_deliveries(self, now, limit)
    }

    fn load_delivery(&self, id: u64) -> Result<Option<Delivery>> {
        outbox::load_delivery(self, id)
    }

    fn update_delivery(&self, delivery: &Delivery) -> Result<()> {
        outbox::update_delivery(self, delivery)
    }

    fn message_at(&self, position: u64) -> Result<Message> {
        let found = query_messages(self, "WHERE m.position = $1", &[&big(position)])?;
        found.into_iter().next().ok_or_else(|| unavailable(format!("no message at position {position}")))
    }

    fn deliveries_of(&self, endpoint: &str, state: DeliveryState, limit: usize) -> Result<Vec<Delivery>> {
        outbox::deliveries_of(self, endpoint, state, limit)
    }

    fn requeue_dead(&self, endpoint: &str, now: Timestamp) -> Result<u64> {
        outbox::requeue_dead(self, endpoint, now)
    }
}

//! The relay's event store on PostgreSQL: [`PostgresEventStore`] implements
//! the blocking [`EventStore`] the embedded SQLite engine
//! (`bazaar_relay::sqlite`) implements, with the same tables, the same rules
//! and the same conformance cases, so a relay can keep its events in the
//! deployment's PostgreSQL instead of its own file. Each connection is driven
//! by a private current-thread Tokio runtime, so `bazaar-relay` stays
//! runtime-free. The crate owns its `migrations/`, applied under an advisory
//! lock and recorded in `relay_migrations`.
//!
//! Sequencing: one writer connection per process, behind a mutex; a `write`
//! call is one transaction for its whole batch, events taken in order, each
//! seeing the ones before it; a purge takes the same connection, one chunk
//! per transaction. Reads use their own small pool of connections, so a
//! query never waits on the writer. Across nodes sharing the database, a
//! batch first takes advisory locks on the ids and addresses it touches (a
//! large batch, or a purge chunk, one lock that excludes every other writer;
//! see `write`), so a deletion racing its target or two versions of one
//! replaceable event settle as if one came first; and PostgreSQL's unique
//! index on `id` is the last word when two nodes write the same event: the
//! second insert does nothing and answers `Duplicate`, not an error.
//!
//! ## Map
//!
//! (What this crate holds, file by file; `ARCHITECTURE.md` keeps the one-line summary.)
//!
//! `PostgresEventStore`: the same schema and rules
//! on PostgreSQL (its own `migrations/`), one writer connection per process,
//! advisory locks on the ids and addresses a batch touches so nodes sharing
//! the database settle races as if one came first; runs the conformance suite.

mod connection;
mod read;
mod write;

use std::sync::{Mutex, MutexGuard};

use bazaar_pg::Database;
use bazaar_relay::store::{merge_newest_first, unavailable, EventStore, Purged, Result, StoreError, Written};
use bazaar_relay::{Encoded, EventId, Filter};

use connection::{col, unsigned, Connection};
use write::{Doomed, Statements, PURGE_CHUNK};

/// Migrations, in order. Never edit a landed one; add a new file.
const MIGRATIONS: &[(&str, &str)] = &[("0001_relay", include_str!("../migrations/0001_relay.sql"))];

/// The advisory lock key taken while migrating ("bazaar" then 0xD0, the relay's own).
const MIGRATION_LOCK_KEY: i64 = 0x6261_7a61_6172_00d0;
/// `application_name` of the store's connections.
const APPLICATION_NAME: &str = "bazaar-relay";
/// Idle read connections kept for the next query; more may be open at once.
const READERS_KEPT: usize = 4;

/// The writer's connection and its prepared statements.
struct Writer {
    connection: Connection,
    statements: Statements,
}

impl Writer {
    fn open(database: &Database) -> Result<Writer> {
        let connection = Connection::open(database)?;
        let statements = Statements::prepare(&connection)?;
        Ok(Writer { connection, statements })
    }
}

pub struct PostgresEventStore {
    database: Database,
    writer: Mutex<Writer>,
    readers: Mutex<Vec<Connection>>,
}

impl PostgresEventStore {
    /// Connect to the database at `url` and bring its relay schema up to date.
    pub fn connect(url: &str) -> std::result::Result<PostgresEventStore, StoreError> {
        let mut database = Database::from_url(url).map_err(unavailable)?;
        database.config_mut().application_name(APPLICATION_NAME);
        let mut connection = Connection::open(&database)?;
        migrate(&mut connection)?;
        let statements = Statements::prepare(&connection)?;
        let writer = Writer { connection, statements };
        Ok(PostgresEventStore { database, writer: Mutex::new(writer), readers: Mutex::new(Vec::new()) })
    }

    /// The writer, reconnected first if its connection broke.
    fn writer(&self) -> Result<MutexGuard<'_, Writer>> {
        let mut writer = self.writer.lock().map_err(unavailable)?;
        if writer.connection.is_closed() {
            *writer = Writer::open(&self.database)?;
        }
        Ok(writer)
    }

    /// Runs `act` on a pooled read connection (opened when none is idle).
    fn read<T>(&self, act: impl FnOnce(&Connection) -> Result<T>) -> Result<T> {
        let pooled = self.readers.lock().map_err(unavailable)?.pop();
        let connection = match pooled {
            Some(connection) if !connection.is_closed() => connection,
            _ => Connection::open(&self.database)?,
        };
        let outcome = act(&connection);
        let mut readers = self.readers.lock().map_err(unavailable)?;
        if readers.len() < READERS_KEPT && !connection.is_closed() {
            readers.push(connection);
        }
        outcome
    }
}

/// Applies the migrations not yet recorded, through the runner every PostgreSQL plane shares: one
/// transaction holding the relay's migration lock, so two stores starting together apply each file once.
fn migrate(connection: &mut Connection) -> Result<()> {
    let plan = bazaar_pg::Migrations { table: "relay_migrations", lock_key: MIGRATION_LOCK_KEY, files: MIGRATIONS };
    connection.migrate(&plan)
}

impl EventStore for PostgresEventStore {
    fn write(&self, events: &[Encoded], _now: u64) -> Result<Vec<Written>> {
        let mut writer = self.writer()?;
        let Writer { connection, statements } = &mut *writer;
        let tx = connection.transaction()?;
        let written = write::write_batch(&tx, statements, events);
        tx.finish(written)
    }

    fn query(&self, filters: &[Filter], now: u64) -> Result<Vec<String>> {
        self.read(|connection| {
            let mut rows = Vec::new();
            for filter in filters {
                rows.extend(read::run_filter(connection, filter, now)?);
            }
            Ok(merge_newest_first(rows))
        })
    }

    fn purge(&self, now: u64, retention_start: u64) -> Result<Purged> {
        let mut purged = Purged::default();
        loop {
            let mut writer = self.writer()?;
            let tx = writer.connection.transaction()?;
            let chunk = write::lock_writers(&tx).and_then(|()| {
                let expired = write::purge_chunk(&tx, Doomed::Expired, now, now)?;
                let old = write::purge_chunk(&tx, Doomed::PastRetention, retention_start, now)?;
                Ok((expired, old))
            });
            let (expired, old) = tx.finish(chunk)?;
            purged.expired += expired;
            purged.past_retention += old;
            if expired < PURGE_CHUNK && old < PURGE_CHUNK {
                return Ok(purged);
            }
        }
    }

    fn purged_at(&self, id: &EventId) -> Result<Option<u64>> {
        self.read(|connection| {
            let row = connection.query_opt("SELECT purged_at FROM relay_purged_jobs WHERE id = $1", &[&&id.0[..]])?;
            row.map(|row| col::<i64>(&row, 0).map(unsigned)).transpose()
        })
    }
}

#[cfg(test)]
mod tests {
    use crate::connection::{big, unsigned};

    #[test]
    fn bounds_saturate_and_come_back() {
        assert_eq!(big(u64::MAX), i64::MAX);
        assert_eq!(big(1_700_000_000), 1_700_000_000);
        assert_eq!(unsigned(-1), 0);
        assert_eq!(unsigned(1_700_000_000), 1_700_000_000);
    }
}

//! The embedded engine: the relay's own SQLite file (WAL, `synchronous =
//! FULL`), one write connection and at most `STORE_READERS_MAX` readers.
//! Apart from the ledger's file, so an event never waits on the money writer.

use std::path::{Path, PathBuf};
use std::sync::{Condvar, Mutex};

use rusqlite::types::Value as Sql;
use rusqlite::{params, params_from_iter, Connection, OptionalExtension, Transaction, TransactionBehavior};

use crate::event::{Encoded, Event, EventId, Hex32};
use crate::filter::Filter;
use crate::kind::{class, Class, DELETION};
use crate::limits::{MMAP_BYTES_MAX, READER_PAGE_CACHE_KIB, STORE_READERS_MAX, WRITER_PAGE_CACHE_KIB};
use crate::store::{
    deletion_targets, indexed_tags, is_job_request, merge_newest_first, replaces, unavailable, EventStore, Purged,
    Result, Written,
};

/// Rows one purge transaction removes at most, so the writer is never held long.
const PURGE_CHUNK: i64 = 5_000;

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS relay_events (
    seq INTEGER PRIMARY KEY,
    id BLOB NOT NULL UNIQUE,
    pubkey BLOB NOT NULL,
    created_at INTEGER NOT NULL,
    kind INTEGER NOT NULL,
    -- NULL for regular events, '' for replaceable ones, the d tag for addressable ones.
    d_tag TEXT,
    expires_at INTEGER,
    json TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS relay_events_time ON relay_events (created_at DESC, id);
CREATE INDEX IF NOT EXISTS relay_events_author ON relay_events (pubkey, kind, created_at DESC);
CREATE INDEX IF NOT EXISTS relay_events_kind ON relay_events (kind, created_at DESC);
CREATE TABLE IF NOT EXISTS relay_tags (
    name TEXT NOT NULL,
    value TEXT NOT NULL,
    created_at INTEGER NOT NULL,
    event_seq INTEGER NOT NULL,
    PRIMARY KEY (name, value, created_at, event_seq)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS relay_tags_event ON relay_tags (event_seq);
CREATE TABLE IF NOT EXISTS relay_deleted (
    id BLOB NOT NULL,
    pubkey BLOB NOT NULL,
    PRIMARY KEY (id, pubkey)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS relay_deleted_addresses (
    kind INTEGER NOT NULL,
    pubkey BLOB NOT NULL,
    d_tag TEXT NOT NULL,
    until INTEGER NOT NULL,
    PRIMARY KEY (kind, pubkey, d_tag)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS relay_purged_jobs (
    id BLOB PRIMARY KEY,
    purged_at INTEGER NOT NULL
) WITHOUT ROWID;
";

pub struct SqliteEventStore {
    path: PathBuf,
    writer: Mutex<Connection>,
    readers: Mutex<Readers>,
    /// Signalled when a reader comes back (or failed to open), for a read waiting on the bound.
    returned: Condvar,
    /// The page cache the connections are configured for, read back from SQLite at open, in bytes.
    writer_cache_bytes: u64,
}

/// The read connections: those idle now, and how many are open (idle or in use).
#[derive(Default)]
struct Readers {
    idle: Vec<Connection>,
    open: usize,
}

fn open_connection(path: &Path, cache_kib: u64) -> Result<Connection> {
    let connection = Connection::open(path).map_err(unavailable)?;
    connection
        .execute_batch(&format!(
            "PRAGMA journal_mode = WAL; PRAGMA synchronous = FULL; PRAGMA busy_timeout = 5000;
             PRAGMA temp_store = MEMORY; PRAGMA cache_size = -{cache_kib}; PRAGMA mmap_size = {MMAP_BYTES_MAX};"
        ))
        .map_err(unavailable)?;
    Ok(connection)
}

/// A connection's page cache as SQLite reports it, in bytes (`cache_size` is KiB when negative, pages when
/// positive), and what it may map.
fn configured(connection: &Connection) -> Result<(u64, u64)> {
    let cache: i64 = connection.query_row("PRAGMA cache_size", [], |r| r.get(0)).map_err(unavailable)?;
    let page: i64 = connection.query_row("PRAGMA page_size", [], |r| r.get(0)).map_err(unavailable)?;
    let cache_bytes = bazaar_types::SqliteMemory::cache_bytes(cache, page);
    let mmap: Option<i64> =
        connection.query_row("PRAGMA mmap_size", [], |r| r.get(0)).optional().map_err(unavailable)?;
    Ok((cache_bytes, mmap.unwrap_or(0).max(0) as u64))
}

impl SqliteEventStore {
    pub fn open(path: &Path) -> Result<SqliteEventStore> {
        let created = !path.exists();
        let writer = open_connection(path, WRITER_PAGE_CACHE_KIB)?;
        writer.execute_batch(SCHEMA).map_err(unavailable)?;
        if created {
            // See `bazaar_types::durable`: the new file's directory entry is not durable until this.
            bazaar_types::durable::sync_parent_dir(path).map_err(unavailable)?;
        }
        let (writer_cache_bytes, _) = configured(&writer)?;
        Ok(SqliteEventStore {
            path: path.to_path_buf(),
            writer: Mutex::new(writer),
            readers: Mutex::default(),
            returned: Condvar::new(),
            writer_cache_bytes,
        })
    }

    /// Runs `act` on a read connection: an idle one, a new one while fewer than `STORE_READERS_MAX` are
    /// open, else the next one given back.
    fn read<T>(&self, act: impl FnOnce(&Connection) -> Result<T>) -> Result<T> {
        let connection = {
            let mut readers = self.readers.lock().map_err(unavailable)?;
            loop {
                if let Some(connection) = readers.idle.pop() {
                    break Some(connection);
                }
                if readers.open < STORE_READERS_MAX {
                    readers.open += 1;
                    break None;
                }
                readers = self.returned.wait(readers).map_err(unavailable)?;
            }
        };
        let connection = match connection {
            Some(connection) => connection,
            None => open_connection(&self.path, READER_PAGE_CACHE_KIB).inspect_err(|_| {
                if let Ok(mut readers) = self.readers.lock() {
                    readers.open -= 1;
                }
                self.returned.notify_one();
            })?,
        };
        let outcome = act(&connection);
        self.readers.lock().map_err(unavailable)?.idle.push(connection);
        self.returned.notify_one();
        outcome
    }
}

fn d_column(event: &Event) -> Option<String> {
    match class(event.kind) {
        Class::Replaceable => Some(String::new()),
        Class::Addressable => Some(event.d_tag().to_string()),
        Class::Regular | Class::Ephemeral => None,
    }
}

fn write_one(tx: &Transaction<'_>, Encoded { event, json }: &Encoded) -> rusqlite::Result<Written> {
    let id = &event.id.0[..];
    let pubkey = &event.pubkey.0[..];
    if tx.query_row("SELECT 1 FROM relay_events WHERE id = ?1", [id], |_| Ok(())).optional()?.is_some() {
        return Ok(Written::Duplicate);
    }
    let deleted = "SELECT 1 FROM relay_deleted WHERE id = ?1 AND pubkey = ?2";
    if tx.query_row(deleted, [id, pubkey], |_| Ok(())).optional()?.is_some() {
        return Ok(Written::Deleted);
    }
    let d_tag = d_column(event);
    if let Some(d) = &d_tag {
        let covered = tx
            .query_row(
                "SELECT 1 FROM relay_deleted_addresses WHERE kind = ?1 AND pubkey = ?2 AND d_tag = ?3 AND until >= ?4",
                params![event.kind, pubkey, d, event.created_at as i64],
                |_| Ok(()),
            )
            .optional()?;
        if covered.is_some() {
            return Ok(Written::Deleted);
        }
        let current: Option<(i64, Vec<u8>, i64)> = tx
            .query_row(
                "SELECT seq, id, created_at FROM relay_events WHERE pubkey = ?1 AND kind = ?2 AND d_tag = ?3",
                params![pubkey, event.kind, d],
                |row| Ok((row.get(0)?, row.get(1)?, row.get(2)?)),
            )
            .optional()?;
        if let Some((seq, stored_id, stored_at)) = current {
            let stored_id = Hex32(stored_id.try_into().unwrap_or([0; 32]));
            if !replaces((event.created_at, &event.id), (stored_at as u64, &stored_id)) {
                return Ok(Written::Superseded);
            }
            remove(tx, seq)?;
        }
    }
    if event.kind == DELETION {
        apply_deletion(tx, event)?;
    }
    tx.execute(
        "INSERT INTO relay_events (id, pubkey, created_at, kind, d_tag, expires_at, json) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
        params![
            id,
            pubkey,
            event.created_at as i64,
            event.kind,
            d_tag,
            event.expires_at().map(|at| at.min(i64::MAX as u64) as i64),
            json
        ],
    )?;
    let seq = tx.last_insert_rowid();
    let mut insert_tag = tx.prepare_cached("INSERT OR IGNORE INTO relay_tags VALUES (?1, ?2, ?3, ?4)")?;
    for (name, value) in indexed_tags(event) {
        insert_tag.execute(params![name, value, event.created_at as i64, seq])?;
    }
    Ok(Written::Stored)
}

fn remove(tx: &Transaction<'_>, seq: i64) -> rusqlite::Result<()> {
    tx.execute("DELETE FROM relay_tags WHERE event_seq = ?1", [seq])?;
    tx.execute("DELETE FROM relay_events WHERE seq = ?1", [seq])?;
    Ok(())
}

/// NIP-09: removes the author's own targets (never a deletion) and remembers
/// them, so a target that arrives later, or again, is refused.
fn apply_deletion(tx: &Transaction<'_>, deletion: &Event) -> rusqlite::Result<()> {
    let targets = deletion_targets(deletion);
    let pubkey = &deletion.pubkey.0[..];
    for id in &targets.ids {
        let seq: Option<i64> = tx
            .query_row(
                "SELECT seq FROM relay_events WHERE id = ?1 AND pubkey = ?2 AND kind != ?3",
                params![&id.0[..], pubkey, DELETION],
                |row| row.get(0),
            )
            .optional()?;
        if let Some(seq) = seq {
            remove(tx, seq)?;
        }
        tx.execute("INSERT OR IGNORE INTO relay_deleted VALUES (?1, ?2)", [&id.0[..], pubkey])?;
    }
    for (kind, d) in &targets.addresses {
        let until = deletion.created_at as i64;
        let seqs: Vec<i64> = tx
            .prepare(
                "SELECT seq FROM relay_events WHERE pubkey = ?1 AND kind = ?2 AND d_tag = ?3 AND created_at <= ?4",
            )?
            .query_map(params![pubkey, kind, d, until], |row| row.get(0))?
            .collect::<rusqlite::Result<_>>()?;
        for seq in seqs {
            remove(tx, seq)?;
        }
        tx.execute(
            "INSERT INTO relay_deleted_addresses VALUES (?1, ?2, ?3, ?4)
             ON CONFLICT (kind, pubkey, d_tag) DO UPDATE SET until = max(until, excluded.until)",
            params![kind, pubkey, d, until],
        )?;
    }
    Ok(())
}

/// One filter as SQL: the statement and its parameters. With a one-value tag
/// filter the query is driven from the tag index (already in time order),
/// else from the events table.
fn select(filter: &Filter, now: u64, limit: usize) -> (String, Vec<Sql>) {
    let mut sql = String::new();
    let mut values: Vec<Sql> = Vec::new();
    let mut bind = |values: &mut Vec<Sql>, value: Sql| {
        values.push(value);
        format!("?{}", values.len())
    };
    let list = |values: &mut Vec<Sql>, items: Vec<Sql>, bind: &mut dyn FnMut(&mut Vec<Sql>, Sql) -> String| {
        items.into_iter().map(|item| bind(values, item)).collect::<Vec<_>>().join(",")
    };
    let time_column;
    // Driven from the tag index only for one value: with several, an event
    // carrying two of them would fill two of the limit's places.
    let driving_tag = filter.tags.first().filter(|(_, values)| values.len() == 1);
    if let Some((letter, tag_values)) = driving_tag {
        let name = bind(&mut values, Sql::Text(letter.to_string()));
        let items = list(&mut values, tag_values.iter().cloned().map(Sql::Text).collect(), &mut bind);
        sql.push_str(&format!(
            "SELECT e.created_at, e.id, e.json FROM relay_tags t JOIN relay_events e ON e.seq = t.event_seq \
             WHERE t.name = {name} AND t.value IN ({items})"
        ));
        time_column = "t.created_at";
    } else {
        sql.push_str("SELECT e.created_at, e.id, e.json FROM relay_events e WHERE 1 = 1");
        time_column = "e.created_at";
    }
    let now_param = bind(&mut values, Sql::Integer(now as i64));
    sql.push_str(&format!(" AND (e.expires_at IS NULL OR e.expires_at > {now_param})"));
    if let Some(ids) = &filter.ids {
        let items = list(&mut values, ids.iter().map(|id| Sql::Blob(id.0.to_vec())).collect(), &mut bind);
        sql.push_str(&format!(" AND e.id IN ({items})"));
    }
    if let Some(authors) = &filter.authors {
        let items = list(&mut values, authors.iter().map(|key| Sql::Blob(key.0.to_vec())).collect(), &mut bind);
        sql.push_str(&format!(" AND e.pubkey IN ({items})"));
    }
    if let Some(kinds) = &filter.kinds {
        let items = list(&mut values, kinds.iter().map(|kind| Sql::Integer(i64::from(*kind))).collect(), &mut bind);
        sql.push_str(&format!(" AND e.kind IN ({items})"));
    }
    if let Some(since) = filter.since {
        let since = bind(&mut values, Sql::Integer(since.min(i64::MAX as u64) as i64));
        sql.push_str(&format!(" AND {time_column} >= {since}"));
    }
    if let Some(until) = filter.until {
        let until = bind(&mut values, Sql::Integer(until.min(i64::MAX as u64) as i64));
        sql.push_str(&format!(" AND {time_column} <= {until}"));
    }
    for (letter, tag_values) in filter.tags.iter().skip(usize::from(driving_tag.is_some())) {
        let name = bind(&mut values, Sql::Text(letter.to_string()));
        let items = list(&mut values, tag_values.iter().cloned().map(Sql::Text).collect(), &mut bind);
        sql.push_str(&format!(
            " AND EXISTS (SELECT 1 FROM relay_tags x WHERE x.event_seq = e.seq AND x.name = {name} AND x.value IN ({items}))"
        ));
    }
    let limit = bind(&mut values, Sql::Integer(limit as i64));
    sql.push_str(&format!(" ORDER BY {time_column} DESC, e.id LIMIT {limit}"));
    (sql, values)
}

fn run_filter(connection: &Connection, filter: &Filter, now: u64) -> Result<Vec<(u64, EventId, String)>> {
    if filter.is_empty_set() || filter.limit() == 0 {
        return Ok(Vec::new());
    }
    let (sql, values) = select(filter, now, filter.limit());
    let mut statement = connection.prepare_cached(&sql).map_err(unavailable)?;
    let rows = statement
        .query_map(params_from_iter(values), |row| {
            let id: Vec<u8> = row.get(1)?;
            Ok((row.get::<_, i64>(0)? as u64, Hex32(id.try_into().unwrap_or([0; 32])), row.get(2)?))
        })
        .map_err(unavailable)?;
    rows.collect::<rusqlite::Result<Vec<_>>>().map_err(unavailable)
}

impl EventStore for SqliteEventStore {
    fn write(&self, events: &[Encoded], _now: u64) -> Result<Vec<Written>> {
        let mut connection = self.writer.lock().map_err(unavailable)?;
        let tx = connection.transaction_with_behavior(TransactionBehavior::Immediate).map_err(unavailable)?;
        let written = events.iter().map(|event| write_one(&tx, event)).collect::<rusqlite::Result<Vec<_>>>();
        let written = written.map_err(unavailable)?;
        tx.commit().map_err(unavailable)?;
        Ok(written)
    }

    fn query(&self, filters: &[Filter], now: u64) -> Result<Vec<String>> {
        self.read(|connection| {
            let mut rows = Vec::new();
            for filter in filters {
                rows.extend(run_filter(connection, filter, now)?);
            }
            Ok(merge_newest_first(rows))
        })
    }

    fn purge(&self, now: u64, retention_start: u64) -> Result<Purged> {
        let mut purged = Purged::default();
        loop {
            let mut connection = self.writer.lock().map_err(unavailable)?;
            let tx = connection.transaction_with_behavior(TransactionBehavior::Immediate).map_err(unavailable)?;
            let expired = purge_chunk(&tx, "expires_at IS NOT NULL AND expires_at <= ?1", now, now)?;
            let old = purge_chunk(&tx, "d_tag IS NULL AND created_at < ?1", retention_start, now)?;
            tx.commit().map_err(unavailable)?;
            purged.expired += expired;
            purged.past_retention += old;
            if expired < PURGE_CHUNK as u64 && old < PURGE_CHUNK as u64 {
                return Ok(purged);
            }
        }
    }

    fn memory(&self) -> Option<bazaar_types::SqliteMemory> {
        let open = self.readers.lock().ok()?.open;
        Some(bazaar_types::SqliteMemory {
            db: "relay",
            connections: 1 + open as u64,
            cache_size_bytes: self.writer_cache_bytes + STORE_READERS_MAX as u64 * READER_PAGE_CACHE_KIB * 1024,
            mmap_size_bytes: MMAP_BYTES_MAX,
        })
    }

    fn purged_at(&self, id: &EventId) -> Result<Option<u64>> {
        self.read(|connection| {
            connection
                .query_row("SELECT purged_at FROM relay_purged_jobs WHERE id = ?1", [&id.0[..]], |row| {
                    row.get::<_, i64>(0)
                })
                .optional()
                .map(|at| at.map(|at| at as u64))
                .map_err(unavailable)
        })
    }
}

/// Removes up to [`PURGE_CHUNK`] events matching `condition` (on `?1`),
/// remembering job requests' ids; says how many went.
fn purge_chunk(tx: &Transaction<'_>, condition: &str, bound: u64, now: u64) -> Result<u64> {
    let sql = format!("SELECT seq, id, kind FROM relay_events WHERE {condition} LIMIT {PURGE_CHUNK}");
    let rows: Vec<(i64, Vec<u8>, u16)> = tx
        .prepare(&sql)
        .and_then(|mut s| s.query_map([bound as i64], |row| Ok((row.get(0)?, row.get(1)?, row.get(2)?)))?.collect())
        .map_err(unavailable)?;
    for (seq, id, kind) in &rows {
        if is_job_request(*kind) && condition.contains("created_at") {
            tx.execute("INSERT OR IGNORE INTO relay_purged_jobs VALUES (?1, ?2)", params![id, now as i64])
                .map_err(unavailable)?;
        }
        remove(tx, *seq).map_err(unavailable)?;
    }
    Ok(rows.len() as u64)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::limits::PAGE_CACHE_KIB_TOTAL;

    /// Reads running at once never open more than `STORE_READERS_MAX` connections: the rest wait for one to
    /// come back, and every read is answered. No connection maps the file, and each has its own page cache.
    #[test]
    fn the_readers_are_bounded_and_map_nothing() {
        let dir = std::env::temp_dir().join(format!("bazaar-relay-readers-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let store = SqliteEventStore::open(&dir.join("relay.db")).unwrap();
        let at_once = STORE_READERS_MAX * 3;
        let (busiest, running) = (std::sync::atomic::AtomicUsize::new(0), std::sync::atomic::AtomicUsize::new(0));
        let answered = std::thread::scope(|scope| {
            let reads: Vec<_> = (0..at_once)
                .map(|_| {
                    scope.spawn(|| {
                        store
                            .read(|c| {
                                let now = running.fetch_add(1, std::sync::atomic::Ordering::SeqCst) + 1;
                                busiest.fetch_max(now, std::sync::atomic::Ordering::SeqCst);
                                std::thread::sleep(std::time::Duration::from_millis(20));
                                running.fetch_sub(1, std::sync::atomic::Ordering::SeqCst);
                                let (cache, mmap) = configured(c)?;
                                assert_eq!((cache, mmap), (READER_PAGE_CACHE_KIB * 1024, 0));
                                c.query_row("SELECT 1", [], |r| r.get::<_, i64>(0)).map_err(unavailable)
                            })
                            .unwrap()
                    })
                })
                .collect();
            reads.into_iter().map(|read| read.join().unwrap()).sum::<i64>()
        });
        assert_eq!(answered, at_once as i64, "every read was answered");
        assert_eq!(busiest.into_inner(), STORE_READERS_MAX, "reads ran side by side, at most the bound at once");
        let memory = store.memory().unwrap();
        assert_eq!(memory.connections, 1 + STORE_READERS_MAX as u64, "the writer and the bound");
        assert_eq!(memory.cache_size_bytes, PAGE_CACHE_KIB_TOTAL * 1024);
        assert_eq!(memory.mmap_size_bytes, 0);
        assert_eq!(store.readers.lock().unwrap().idle.len(), STORE_READERS_MAX);
        std::fs::remove_dir_all(&dir).ok();
    }
}

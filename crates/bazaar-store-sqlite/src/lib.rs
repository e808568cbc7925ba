//! Embedded SQLite adapter: WAL with `synchronous = FULL` (a commit is on disk
//! before it is acknowledged), one writer thread that group-commits batches,
//! and a small pool of read connections.
//!
//! ## Map
//!
//! (What this crate holds, file by file; `ARCHITECTURE.md` keeps the one-line summary.)
//!
//! WAL, `synchronous = FULL`, one writer connection on
//! its own thread, four read connections used on the calling thread, a
//! background checkpointer thread (`PASSIVE`, every 100 ms), and an exact
//! cache of authenticated credentials (the writer forgets every credential and
//! member a batch touched, after commit and before it answers); `migrations/`.

mod rows;

use async_trait::async_trait;
use bazaar_core::apply::{Applied, Config};
use bazaar_core::chain::ChainHead;
use bazaar_core::command::{Command, Keys};
use bazaar_core::model::*;
use bazaar_core::state::{Changes, Snapshot};
use bazaar_store::writer::Writer;
use bazaar_store::{Engine, FoldSnapshot, SearchCount, Store, StoreError, TokenView};
use bazaar_types::{AccountId, Clock, MemberId, OrderId, Timestamp, TokenId};
use rows::*;
use rusqlite::{params, Connection, OptionalExtension};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

/// Migrations, in order. Never edit a landed one; add a new file.
const MIGRATIONS: &[(&str, &str)] = &[
    ("0001_foundation", include_str!("../migrations/0001_foundation.sql")),
    ("0002_idempotency_created_at", include_str!("../migrations/0002_idempotency_created_at.sql")),
    ("0003_holds_resolve_once", include_str!("../migrations/0003_holds_resolve_once.sql")),
    ("0004_events_hash_not_unique", include_str!("../migrations/0004_events_hash_not_unique.sql")),
    ("0005_documents", include_str!("../migrations/0005_documents.sql")),
    ("0006_market", include_str!("../migrations/0006_market.sql")),
    ("0007_blobs", include_str!("../migrations/0007_blobs.sql")),
    ("0008_credential_scopes", include_str!("../migrations/0008_credential_scopes.sql")),
    ("0009_members_by_owner", include_str!("../migrations/0009_members_by_owner.sql")),
    ("0010_settle_keys_name_the_token", include_str!("../migrations/0010_settle_keys_name_the_token.sql")),
    ("0011_fold_snapshots", include_str!("../migrations/0011_fold_snapshots.sql")),
    ("0012_compact_ledger_rows", include_str!("../migrations/0012_compact_ledger_rows.sql")),
    ("0013_receipt_tags", include_str!("../migrations/0013_receipt_tags.sql")),
];
/// Read connections kept open.
const READERS_MAX: usize = 4;
/// How long a connection waits on a lock before giving up.
const BUSY_TIMEOUT_MS: u64 = 5_000;
/// The writer's page cache, in KiB (`PRAGMA cache_size` = its negation): the
/// B-tree pages every batch touches.
const WRITER_PAGE_CACHE_KIB: u64 = 32 * 1024;
/// Each reader's page cache, in KiB: a read touches a few indexed rows, and the
/// kernel's page cache holds the file behind it.
const READER_PAGE_CACHE_KIB: u64 = 8 * 1024;
/// The checkpointer's and the search tally's page caches, in KiB.
const SIDE_PAGE_CACHE_KIB: u64 = 2 * 1024;
/// No connection memory-maps the database (`PRAGMA mmap_size = 0`): a mapped
/// page counts in the process's resident set once per mapping, so seven maps of
/// a growing file grew RSS without bound in the 20-minute soak; reads go
/// through the page caches above and the kernel's own cache instead.
const MMAP_BYTES_MAX: u64 = 0;
/// Connections one store keeps open: the writer, the readers, the checkpointer and the search tally's.
const CONNECTIONS: usize = READERS_MAX + 3;
/// The most page cache the ledger's connections hold together, in KiB (68 MiB).
pub const PAGE_CACHE_KIB_TOTAL: u64 =
    WRITER_PAGE_CACHE_KIB + READERS_MAX as u64 * READER_PAGE_CACHE_KIB + 2 * SIDE_PAGE_CACHE_KIB;

pub struct SqliteStore {
    /// Dropping it stops the checkpointer thread.
    _checkpointer: std::sync::mpsc::Sender<()>,
    writer: Writer,
    readers: Arc<Vec<Mutex<Connection>>>,
    next_reader: std::sync::atomic::AtomicUsize,
    auth: Arc<Mutex<AuthCache>>,
    /// The search tally's own connection: its writes take SQLite's one write
    /// lock briefly (waiting up to `BUSY_TIMEOUT_MS`) but never queue in the writer.
    searches: Arc<Mutex<Connection>>,
    /// `PRAGMA cache_size` summed over the connections and `mmap_size`, as SQLite reports them, in bytes.
    configured: (u64, u64),
}

fn unavailable(error: rusqlite::Error) -> StoreError {
    match &error {
        rusqlite::Error::SqliteFailure(e, _) if e.code == rusqlite::ErrorCode::ConstraintViolation => {
            StoreError::Constraint(error.to_string())
        }
        _ => StoreError::Unavailable(error.to_string()),
    }
}

fn open(path: &Path) -> Result<Connection, StoreError> {
    open_via(path, None, SIDE_PAGE_CACHE_KIB)
}

/// Opens a connection to `path` through the SQLite VFS named `vfs` (the
/// platform's default when `None`), with the same pragmas either way and a
/// page cache of `cache_kib`.
fn open_via(path: &Path, vfs: Option<&str>, cache_kib: u64) -> Result<Connection, StoreError> {
    let conn = match vfs {
        None => Connection::open(path),
        Some(vfs) => Connection::open_with_flags_and_vfs(path, rusqlite::OpenFlags::default(), vfs),
    }
    .map_err(unavailable)?;
    conn.busy_timeout(std::time::Duration::from_millis(BUSY_TIMEOUT_MS)).map_err(unavailable)?;
    conn.execute_batch(&format!(
        "PRAGMA journal_mode = WAL; PRAGMA synchronous = FULL; PRAGMA foreign_keys = ON;
         PRAGMA temp_store = MEMORY; PRAGMA cache_size = -{cache_kib}; PRAGMA mmap_size = {MMAP_BYTES_MAX};"
    ))
    .map_err(unavailable)?;
    Ok(conn)
}

fn migrate(conn: &mut Connection) -> Result<(), StoreError> {
    conn.execute_batch(
        "CREATE TABLE IF NOT EXISTS schema_migrations (name TEXT PRIMARY KEY, applied_at INTEGER NOT NULL)",
    )
    .map_err(unavailable)?;
    for (name, sql) in MIGRATIONS {
        let tx = conn.transaction().map_err(unavailable)?;
        let done: Option<String> = tx
            .query_row("SELECT name FROM schema_migrations WHERE name = ?1", [name], |r| r.get(0))
            .optional()
            .map_err(unavailable)?;
        if done.is_none() {
            tx.execute_batch(sql).map_err(unavailable)?;
            tx.execute("INSERT INTO schema_migrations VALUES (?1, strftime('%s','now'))", [name])
                .map_err(unavailable)?;
        }
        tx.commit().map_err(unavailable)?;
    }
    Ok(())
}

/// A connection's page cache and mmap bounds as SQLite reports them, in bytes:
/// `cache_size` is KiB when negative, pages when positive.
fn configured_memory(conn: &Connection) -> rusqlite::Result<(u64, u64)> {
    let cache: i64 = conn.query_row("PRAGMA cache_size", [], |r| r.get(0))?;
    let page: i64 = conn.query_row("PRAGMA page_size", [], |r| r.get(0))?;
    // A VFS without memory mapping (the power-loss test's simulated disk) answers no row: nothing is mapped.
    let mmap: i64 = conn.query_row("PRAGMA mmap_size", [], |r| r.get(0)).optional()?.unwrap_or(0);
    Ok((bazaar_types::SqliteMemory::cache_bytes(cache, page), mmap.max(0) as u64))
}

/// Adds a batch of tallied searches in one `BEGIN IMMEDIATE` transaction.
fn record_searches(conn: &mut Connection, searches: &[SearchCount]) -> rusqlite::Result<()> {
    let tx = conn.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
    {
        let mut upsert = tx.prepare_cached(
            "INSERT INTO searches VALUES (?1, ?2, ?3, ?4, ?5) ON CONFLICT (query) DO UPDATE \
             SET count = count + excluded.count, \
             hits_last = CASE WHEN excluded.last_at >= last_at THEN excluded.hits_last ELSE hits_last END, \
             last_at = max(last_at, excluded.last_at)",
        )?;
        for s in searches {
            let (count, hits) = (s.count.min(i64::MAX as u64) as i64, s.hits_last.min(i64::MAX as u64) as i64);
            upsert.execute(params![s.query, count, hits, s.first_at.0, s.last_at.0])?;
        }
    }
    tx.commit()
}

/// How often the background checkpointer copies the WAL into the database.
const CHECKPOINT_INTERVAL_MS: u64 = 100;
/// The writer checkpoints by itself only if the WAL grows past this many pages
/// (4 KiB each): a backstop in case the background checkpointer falls behind.
const WAL_AUTOCHECKPOINT_PAGES: u32 = 16_384;

/// Copies WAL frames into the database file off the writer's thread, so the
/// writer's commits stay short. PASSIVE never blocks the writer or readers;
/// once the WAL is fully copied the next write starts it again from the top,
/// reusing its disk space instead of growing the file.
fn spawn_checkpointer(conn: Connection) -> std::sync::mpsc::Sender<()> {
    let (stop, stopped) = std::sync::mpsc::channel::<()>();
    let interval = std::time::Duration::from_millis(CHECKPOINT_INTERVAL_MS);
    std::thread::Builder::new()
        .name("bazaar-checkpoint".into())
        .spawn(move || {
            while let Err(std::sync::mpsc::RecvTimeoutError::Timeout) = stopped.recv_timeout(interval) {
                if let Err(error) = conn.execute_batch("PRAGMA wal_checkpoint(PASSIVE)") {
                    tracing::warn!(%error, "WAL checkpoint failed; will retry");
                }
            }
        })
        .expect("spawn checkpointer thread");
    stop
}

impl SqliteStore {
    /// Opens (creating and migrating) the database file `path`.
    pub fn open(path: impl Into<PathBuf>, config: Config, clock: Arc<dyn Clock>) -> Result<SqliteStore, StoreError> {
        SqliteStore::open_store(path.into(), None, config, clock)
    }

    /// Opens `path` as [`SqliteStore::open`] does, but every connection
    /// (writer, readers, checkpointer, search tally) goes through the SQLite
    /// VFS registered as `vfs`. For tests that put the store on a simulated
    /// disk (the power-loss test); the pragmas are the same as in production.
    pub fn open_with_vfs(
        path: impl Into<PathBuf>,
        vfs: &str,
        config: Config,
        clock: Arc<dyn Clock>,
    ) -> Result<SqliteStore, StoreError> {
        SqliteStore::open_store(path.into(), Some(vfs), config, clock)
    }

    fn open_store(
        path: PathBuf,
        vfs: Option<&str>,
        config: Config,
        clock: Arc<dyn Clock>,
    ) -> Result<SqliteStore, StoreError> {
        let open = |path: &Path, cache_kib| open_via(path, vfs, cache_kib);
        let created = !path.exists();
        let mut conn = open(&path, WRITER_PAGE_CACHE_KIB)?;
        migrate(&mut conn)?;
        if created && vfs.is_none() {
            // SQLite syncs the directory when it creates a WAL, not when it
            // creates the database file: until this, a power cut could lose
            // the new file itself, and every commit acknowledged in it.
            bazaar_types::durable::sync_parent_dir(&path).map_err(|e| StoreError::Unavailable(e.to_string()))?;
        }
        conn.execute_batch(&format!("PRAGMA wal_autocheckpoint = {WAL_AUTOCHECKPOINT_PAGES}")).map_err(unavailable)?;
        // What SQLite reports for each connection, summed: the page caches together, the largest map.
        let mut configured = (0, 0);
        let mut count = |conn: &Connection| -> Result<(), StoreError> {
            let (cache, mmap) = configured_memory(conn).map_err(unavailable)?;
            configured = (configured.0 + cache, configured.1.max(mmap));
            Ok(())
        };
        count(&conn)?;
        let readers = (0..READERS_MAX)
            .map(|_| open(&path, READER_PAGE_CACHE_KIB).and_then(|c| count(&c).map(|()| Mutex::new(c))))
            .collect::<Result<Vec<_>, _>>()?;
        let (checkpointer, searches) = (open(&path, SIDE_PAGE_CACHE_KIB)?, open(&path, SIDE_PAGE_CACHE_KIB)?);
        count(&checkpointer)?;
        count(&searches)?;
        let auth = Arc::new(Mutex::new(AuthCache::default()));
        let engine = SqliteEngine { conn, auth: auth.clone(), touched: Default::default(), names: Names::default() };
        let writer = Writer::spawn(engine, config, clock);
        let checkpointer = spawn_checkpointer(checkpointer);
        let searches = Arc::new(Mutex::new(searches));
        Ok(SqliteStore {
            searches,
            writer,
            readers: Arc::new(readers),
            next_reader: Default::default(),
            _checkpointer: checkpointer,
            auth,
            configured,
        })
    }

    /// Runs a read on a free reader connection, on the calling thread. A read
    /// of a few indexed rows takes microseconds on a warm page cache, less
    /// than a hop to a blocking thread would cost; WAL readers never wait on
    /// the writer. There are more readers than runtime workers, so a free one
    /// is the rule; otherwise the call waits briefly for one.
    async fn read<T>(&self, f: impl FnOnce(&Connection) -> rusqlite::Result<T>) -> Result<T, StoreError> {
        let start = self.next_reader.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        for offset in 0..READERS_MAX {
            if let Ok(conn) = self.readers[(start + offset) % READERS_MAX].try_lock() {
                return f(&conn).map_err(unavailable);
            }
        }
        let conn =
            self.readers[start % READERS_MAX].lock().map_err(|_| StoreError::Unavailable("reader poisoned".into()))?;
        f(&conn).map_err(unavailable)
    }
}

#[async_trait]
impl Store for SqliteStore {
    async fn submit(&self, command: Command) -> Result<Applied, StoreError> {
        self.writer.submit(command).await
    }

    fn writer_stats(&self) -> bazaar_store::writer::WriterStats {
        self.writer.stats()
    }

    fn caches(&self) -> Vec<bazaar_store::CacheGauge> {
        let entries = self.auth.lock().unwrap_or_else(|p| p.into_inner()).entries.len();
        let credentials = bazaar_store::CacheGauge {
            cache: "credentials",
            entries: entries as u64,
            entries_max: Some(AUTH_CACHE_MAX as u64),
        };
        vec![credentials]
    }

    fn sqlite_memory(&self) -> Vec<bazaar_store::SqliteMemory> {
        let (cache_size_bytes, mmap_size_bytes) = self.configured;
        vec![bazaar_store::SqliteMemory {
            db: "ledger",
            connections: CONNECTIONS as u64,
            cache_size_bytes,
            mmap_size_bytes,
        }]
    }

    async fn registry_key_seed(&self, candidate: [u8; 32]) -> Result<[u8; 32], StoreError> {
        let stored = self
            .read(move |c| {
                c.execute("INSERT OR IGNORE INTO meta VALUES ('registry_key_seed', ?1)", [hex::encode(candidate)])?;
                c.query_row("SELECT value FROM meta WHERE key = 'registry_key_seed'", [], |r| r.get::<_, String>(0))
            })
            .await?;
        hex::decode(&stored)
            .ok()
            .and_then(|bytes| <[u8; 32]>::try_from(bytes).ok())
            .ok_or_else(|| StoreError::Corrupt("registry key seed".into()))
    }

    async fn registry_keys(&self) -> Result<Vec<String>, StoreError> {
        self.read(|c| {
            let mut statement = c.prepare("SELECT value FROM meta WHERE key LIKE 'registry_key.%' ORDER BY key")?;
            let rows = statement.query_map([], |r| r.get::<_, String>(0))?;
            rows.collect()
        })
        .await
    }

    async fn add_registry_key(&self, n: u32, record: String) -> Result<bool, StoreError> {
        let key = format!("registry_key.{n:06}");
        self.read(move |c| c.execute("INSERT OR IGNORE INTO meta VALUES (?1, ?2)", [key, record]).map(|n| n == 1)).await
    }

    async fn head(&self) -> Result<ChainHead, StoreError> {
        self.read(|c| {
            c.query_row("SELECT seq, hash FROM chain_head", [], |r| {
                Ok(ChainHead { seq: r.get::<_, i64>(0)? as u64, hash: r.get(1)? })
            })
        })
        .await
    }

    async fn member(&self, id: &MemberId) -> Result<Option<Member>, StoreError> {
        let id = id.0.clone();
        self.read(move |c| {
            c.prepare_cached(&format!("{MEMBER_SELECT} WHERE id = ?1"))?.query_row([id], member_row).optional()
        })
        .await
    }

    async fn member_by_handle(&self, handle: &str) -> Result<Option<Member>, StoreError> {
        let handle = handle.to_string();
        self.read(move |c| {
            c.prepare_cached(&format!("{MEMBER_SELECT} WHERE handle = ?1"))?.query_row([handle], member_row).optional()
        })
        .await
    }

    async fn agents_of(&self, owner: &MemberId, limit: usize) -> Result<Vec<Member>, StoreError> {
        let owner = owner.as_str().to_string();
        self.read(move |c| {
            let mut statement = c.prepare_cached(&format!("{MEMBER_SELECT} WHERE owner = ?1 ORDER BY id LIMIT ?2"))?;
            let rows = statement.query_map(rusqlite::params![owner, limit as i64], member_row)?;
            rows.collect::<Result<Vec<_>, _>>()
        })
        .await
    }

    async fn credential(&self, hash: &str) -> Result<Option<Credential>, StoreError> {
        let hash = hash.to_string();
        self.read(move |c| {
            c.prepare_cached(&format!("{CREDENTIAL_SELECT} WHERE hash = ?1"))?
                .query_row([hash], credential_row)
                .optional()
        })
        .await
    }

    async fn account(&self, id: &AccountId) -> Result<Option<Account>, StoreError> {
        let id = id.0.clone();
        self.read(move |c| {
            c.prepare_cached(&format!("{ACCOUNT_SELECT} WHERE id = ?1"))?.query_row([id], account_row).optional()
        })
        .await
    }

    async fn budget(&self, agent: &MemberId) -> Result<Option<Budget>, StoreError> {
        let agent = agent.0.clone();
        self.read(move |c| {
            c.prepare_cached(&format!("{BUDGET_SELECT} WHERE agent = ?1"))?.query_row([agent], budget_row).optional()
        })
        .await
    }

    async fn token(&self, jti: &TokenId) -> Result<Option<TokenView>, StoreError> {
        let jti = jti.0.clone();
        self.read(move |c| {
            let Some(token) =
                c.prepare_cached(&format!("{TOKEN_SELECT} WHERE jti = ?1"))?.query_row([&jti], token_row).optional()?
            else {
                return Ok(None);
            };
            let hold =
                c.prepare_cached(&format!("{HOLD_SELECT} WHERE id = ?1"))?.query_row([&token.hold.0], hold_row)?;
            let settlement = c
                .prepare_cached(&format!("{SETTLEMENT_SELECT} WHERE jti = ?1"))?
                .query_row([&jti], settlement_row)
                .optional()?;
            Ok(Some(TokenView { token, hold, settlement }))
        })
        .await
    }

    async fn settlement_by_order(
        &self,
        merchant: &MemberId,
        order: &OrderId,
    ) -> Result<Option<Settlement>, StoreError> {
        let (merchant, order) = (merchant.0.clone(), order.0.clone());
        self.read(move |c| {
            c.query_row(
                &format!("{SETTLEMENT_SELECT} WHERE merchant = ?1 AND order_id = ?2"),
                [merchant, order],
                settlement_row,
            )
            .optional()
        })
        .await
    }

    async fn expired_tokens(&self, now: Timestamp, limit: usize) -> Result<Vec<(TokenId, MemberId)>, StoreError> {
        self.read(move |c| {
            let mut stmt = c.prepare_cached(
                // A token's hold is `hold_` and its id (migration 0012), so the token is found by that id.
                "SELECT t.jti, t.buyer FROM holds h JOIN tokens t ON t.jti = substr(h.id, 6) AND t.hold = h.id
                 WHERE h.state = 'pending' AND h.expires_at <= ?1 ORDER BY h.expires_at LIMIT ?2",
            )?;
            let rows =
                stmt.query_map(params![now.0, limit as i64], |r| Ok((TokenId(r.get(0)?), MemberId(r.get(1)?))))?;
            rows.collect()
        })
        .await
    }

    async fn events(&self, after: u64, limit: usize) -> Result<Vec<Event>, StoreError> {
        self.read(move |c| {
            let mut stmt = c.prepare_cached(&format!("{EVENT_SELECT} WHERE seq > ?1 ORDER BY seq LIMIT ?2"))?;
            let rows = stmt.query_map(params![after as i64, limit as i64], event_row)?;
            rows.collect()
        })
        .await
    }

    async fn transfers(&self, after: i64, limit: usize) -> Result<Vec<(i64, Transfer)>, StoreError> {
        self.read(move |c| {
            let mut stmt = c.prepare_cached(&format!("{TRANSFER_SELECT} WHERE pos > ?1 ORDER BY pos LIMIT ?2"))?;
            let rows = stmt.query_map(params![after, limit as i64], |r| Ok((r.get(0)?, transfer_row(r)?)))?;
            rows.collect()
        })
        .await
    }

    async fn holds(&self, after: &str, limit: usize) -> Result<Vec<Hold>, StoreError> {
        let after = after.to_string();
        self.read(move |c| {
            let mut stmt = c.prepare_cached(&format!("{HOLD_SELECT} WHERE id > ?1 ORDER BY id LIMIT ?2"))?;
            let rows = stmt.query_map(params![after, limit as i64], hold_row)?;
            rows.collect()
        })
        .await
    }

    async fn accounts(&self, after: &str, limit: usize) -> Result<Vec<Account>, StoreError> {
        let after = after.to_string();
        self.read(move |c| {
            let mut stmt = c.prepare_cached(&format!("{ACCOUNT_SELECT} WHERE id > ?1 ORDER BY id LIMIT ?2"))?;
            let rows = stmt.query_map(params![after, limit as i64], account_row)?;
            rows.collect()
        })
        .await
    }

    async fn prune_idempotency(&self, before: Timestamp, limit: usize) -> Result<usize, StoreError> {
        self.writer.prune_idempotency(before, limit).await
    }

    async fn doc(&self, kind: DocKind, id: &str) -> Result<Option<DocRow>, StoreError> {
        let id = id.to_string();
        self.read(move |c| {
            c.prepare_cached(&format!("{DOC_SELECT} WHERE kind = ?1 AND id = ?2"))?
                .query_row([kind.as_str(), id.as_str()], doc_row)
                .optional()
        })
        .await
    }

    async fn blob(&self, sha256: &str) -> Result<Option<Blob>, StoreError> {
        let sha256 = sha256.to_string();
        self.read(move |c| {
            let sql = "SELECT sha256, content_type, bytes, parties, created_at FROM blobs WHERE sha256 = ?1";
            c.prepare_cached(sql)?.query_row([sha256], blob_row).optional()
        })
        .await
    }

    async fn docs_by_party(
        &self,
        kind: DocKind,
        party: &MemberId,
        after: &str,
        limit: usize,
    ) -> Result<Vec<DocRow>, StoreError> {
        let (party, after) = (party.0.clone(), after.to_string());
        self.read(move |c| {
            let mut stmt = c.prepare_cached(
                "SELECT d.kind, d.id, d.body, d.due_at, d.parties FROM doc_parties p
                 JOIN docs d ON d.kind = p.kind AND d.id = p.id
                 WHERE p.kind = ?1 AND p.party = ?2 AND p.id > ?3 ORDER BY p.id LIMIT ?4",
            )?;
            let rows = stmt.query_map(params![kind.as_str(), party, after, limit as i64], doc_row)?;
            rows.collect()
        })
        .await
    }

    async fn search_listings(&self, terms: &[String], limit: usize) -> Result<Vec<DocRow>, StoreError> {
        if terms.is_empty() {
            return Ok(Vec::new());
        }
        // Each term quoted (so nothing in it is FTS5 syntax) and matched as a prefix; all must match.
        let query: Vec<String> = terms.iter().map(|t| format!("\"{}\"*", t.replace('"', ""))).collect();
        let query = query.join(" ");
        self.read(move |c| {
            let mut stmt = c.prepare_cached(
                "SELECT d.kind, d.id, d.body, d.due_at, d.parties FROM listing_fts f
                 JOIN docs d ON d.rowid = f.rowid
                 WHERE listing_fts MATCH ?1 ORDER BY f.rank, d.id LIMIT ?2",
            )?;
            let rows = stmt.query_map(params![query, limit as i64], doc_row)?;
            rows.collect()
        })
        .await
    }

    async fn record_searches(&self, searches: &[SearchCount]) -> Result<(), StoreError> {
        let (conn, searches) = (self.searches.clone(), searches.to_vec());
        // Off the async workers: waiting for the write lock may take up to the busy timeout.
        tokio::task::spawn_blocking(move || {
            let mut conn = conn.lock().unwrap_or_else(|p| p.into_inner());
            record_searches(&mut conn, &searches).map_err(unavailable)
        })
        .await
        .map_err(|e| StoreError::Unavailable(format!("search recorder: {e}")))?
    }

    async fn unmet_searches(&self, limit: usize) -> Result<Vec<(String, u64, Timestamp)>, StoreError> {
        self.read(move |c| {
            let mut stmt = c.prepare_cached(
                "SELECT query, count, last_at FROM searches WHERE hits_last = 0 ORDER BY count DESC, query LIMIT ?1",
            )?;
            let rows = stmt.query_map(params![limit as i64], |r| {
                Ok((r.get::<_, String>(0)?, r.get::<_, i64>(1)? as u64, Timestamp(r.get(2)?)))
            })?;
            rows.collect()
        })
        .await
    }

    async fn fold_snapshot(&self, name: &str) -> Result<Option<FoldSnapshot>, StoreError> {
        let name = name.to_string();
        self.read(move |c| {
            let mut stmt = c.prepare_cached("SELECT seq, head, body FROM fold_snapshots WHERE name = ?1")?;
            stmt.query_row(params![name], |r| {
                Ok(FoldSnapshot {
                    name: name.clone(),
                    seq: r.get::<_, i64>(0)? as u64,
                    head: r.get(1)?,
                    body: r.get(2)?,
                })
            })
            .optional()
        })
        .await
    }

    async fn save_fold_snapshot(&self, snapshot: &FoldSnapshot) -> Result<(), StoreError> {
        let (conn, snapshot) = (self.searches.clone(), snapshot.clone());
        // The searches connection: a write of its own, off the writer and off the async workers.
        tokio::task::spawn_blocking(move || {
            let conn = conn.lock().unwrap_or_else(|p| p.into_inner());
            conn.execute(
                "INSERT INTO fold_snapshots VALUES (?1, ?2, ?3, ?4) ON CONFLICT (name) DO UPDATE \
                 SET seq = excluded.seq, head = excluded.head, body = excluded.body WHERE excluded.seq > seq",
                params![snapshot.name, snapshot.seq.min(i64::MAX as u64) as i64, snapshot.head, snapshot.body],
            )
            .map(drop)
            .map_err(unavailable)
        })
        .await
        .map_err(|e| StoreError::Unavailable(format!("fold snapshot writer: {e}")))?
    }

    async fn due_docs(&self, now: Timestamp, limit: usize) -> Result<Vec<(DocKind, String)>, StoreError> {
        self.read(move |c| {
            let mut stmt =
                c.prepare_cached("SELECT kind, id FROM docs WHERE due_at <= ?1 ORDER BY due_at, kind, id LIMIT ?2")?;
            let rows = stmt.query_map(params![now.0, limit as i64], doc_key_row)?;
            rows.collect()
        })
        .await
    }

    async fn credentials_of(&self, member: &MemberId) -> Result<Vec<Credential>, StoreError> {
        self.credentials_of_member(member).await
    }

    async fn authenticate(&self, hash: &str) -> Result<Option<(Credential, Member)>, StoreError> {
        let generation = {
            let cache = self.auth.lock().unwrap_or_else(|p| p.into_inner());
            if let Some(hit) = cache.entries.get(hash) {
                return Ok(Some(hit.clone()));
            }
            cache.generation
        };
        let found = self.authenticate_uncached(hash).await?;
        if let Some(row) = &found {
            let mut cache = self.auth.lock().unwrap_or_else(|p| p.into_inner());
            if cache.generation == generation {
                if cache.entries.len() >= AUTH_CACHE_MAX {
                    let victim = cache.entries.keys().next().cloned();
                    victim.map(|key| cache.entries.remove(&key));
                }
                cache.entries.insert(hash.to_string(), row.clone());
            }
        }
        Ok(found)
    }
}

impl SqliteStore {
    async fn credentials_of_member(&self, member: &MemberId) -> Result<Vec<Credential>, StoreError> {
        let member = member.0.clone();
        self.read(move |c| {
            let sql = format!("{} WHERE member = ?1 ORDER BY created_at, hash", rows::CREDENTIAL_SELECT);
            let mut statement = c.prepare_cached(&sql)?;
            let found = statement.query_map([member], rows::credential_row)?.collect::<rusqlite::Result<Vec<_>>>();
            found
        })
        .await
    }

    async fn authenticate_uncached(&self, hash: &str) -> Result<Option<(Credential, Member)>, StoreError> {
        let hash = hash.to_string();
        self.read(move |c| {
            c.prepare_cached(
                "SELECT c.hash, c.member, c.created_at, c.revoked_at, m.id, m.kind, m.owner, m.handle, m.created_at, c.scopes
                 FROM credentials c JOIN members m ON m.id = c.member WHERE c.hash = ?1",
            )?
            .query_row([hash], credential_and_member_row)
            .optional()
        })
        .await
    }
}

/// Credentials remembered by the embedded store's `authenticate`.
const AUTH_CACHE_MAX: usize = 4096;

/// Credentials and their members, remembered between requests. Exact, because
/// one process owns the file and its writer forgets every credential and
/// member a batch touched, after commit and before anyone is answered.
#[derive(Default)]
struct AuthCache {
    entries: std::collections::HashMap<String, (Credential, Member)>,
    /// Bumped by every batch that touched credentials or members: a read that
    /// raced such a batch does not store what it read.
    generation: u64,
}

impl AuthCache {
    fn forget(&mut self, hashes: &[String], members: &[MemberId]) {
        self.entries.retain(|hash, (_, member)| !hashes.contains(hash) && !members.contains(&member.id));
        self.generation += 1;
    }
}

/// The SQLite side of the group-commit writer: one connection, one batch per
/// `BEGIN IMMEDIATE` transaction.
pub struct SqliteEngine {
    conn: Connection,
    auth: Arc<Mutex<AuthCache>>,
    /// Credentials and members the open transaction changes.
    touched: (Vec<String>, Vec<MemberId>),
    /// The numbers of the names the compact rows refer to.
    names: Names,
}

impl SqliteEngine {
    /// An engine on a connection of its own to `path` (created and migrated
    /// if need be), for tests and tools that drive batches directly. Its
    /// credential cache is its own: a [`SqliteStore`] open on the same file
    /// does not see credentials or members it changes until restarted.
    pub fn connect(path: impl AsRef<Path>) -> Result<SqliteEngine, StoreError> {
        let mut conn = open(path.as_ref())?;
        migrate(&mut conn)?;
        Ok(SqliteEngine { conn, auth: Default::default(), touched: Default::default(), names: Names::default() })
    }
}

impl Engine for SqliteEngine {
    fn begin(&mut self) -> Result<(), StoreError> {
        self.conn.execute_batch("BEGIN IMMEDIATE").map_err(unavailable)
    }

    fn load(&mut self, keys: &Keys) -> Result<Snapshot, StoreError> {
        load_snapshot(&self.conn, keys).map_err(unavailable)
    }

    fn write(&mut self, changes: &Changes) -> Result<(), StoreError> {
        self.touched.0.extend(changes.upsert_credentials.iter().map(|c| c.hash.clone()));
        let members = changes.insert_members.iter().chain(&changes.update_members);
        self.touched.1.extend(members.map(|m| m.id.clone()));
        write_changes(&self.conn, &mut self.names, changes).map_err(unavailable)
    }

    fn commit(&mut self) -> Result<(), StoreError> {
        let committed = self.conn.execute_batch("COMMIT").map_err(unavailable);
        match committed {
            Ok(()) => self.names.committed(),
            Err(_) => self.names.rolled_back(),
        }
        let (hashes, members) = std::mem::take(&mut self.touched);
        if !hashes.is_empty() || !members.is_empty() {
            self.auth.lock().unwrap_or_else(|p| p.into_inner()).forget(&hashes, &members);
        }
        committed
    }

    fn rollback(&mut self) {
        self.touched = Default::default();
        self.names.rolled_back();
        let _ = self.conn.execute_batch("ROLLBACK");
    }

    fn prune_idempotency(&mut self, before: Timestamp, limit: usize) -> Result<usize, StoreError> {
        self.conn
            .prepare_cached(
                "DELETE FROM idempotency WHERE rowid IN (SELECT rowid FROM idempotency WHERE created_at < ?1 LIMIT ?2)",
            )
            .and_then(|mut statement| statement.execute(params![before.0, limit as i64]))
            .map_err(unavailable)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A database made by an earlier release upgrades in place and keeps its rows.
    #[test]
    fn migrations_upgrade_a_database_in_place() {
        let dir = std::env::temp_dir().join(format!("bazaar-upgrade-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let mut conn = open(&dir.join("u.db")).unwrap();
        conn.execute_batch("CREATE TABLE schema_migrations (name TEXT PRIMARY KEY, applied_at INTEGER NOT NULL)")
            .unwrap();
        for (name, sql) in &MIGRATIONS[..3] {
            conn.execute_batch(sql).unwrap();
            conn.execute("INSERT INTO schema_migrations VALUES (?1, 0)", [name]).unwrap();
        }
        let event = format!(
            "INSERT INTO events VALUES (?1, '{}', '{}', 'k', '{{}}', 'a', 'a', 0)",
            "0".repeat(64),
            "ab".repeat(32)
        );
        let event = event.as_str();
        conn.execute(event, [1]).unwrap();
        assert!(conn.execute(event, [2]).is_err(), "before 0004 the hash was unique");
        migrate(&mut conn).unwrap();
        conn.execute(event, [2]).unwrap();
        let count: i64 = conn.query_row("SELECT count(*) FROM events", [], |r| r.get(0)).unwrap();
        assert_eq!(count, 2, "rows survive the rebuild");
        assert!(conn.execute("DELETE FROM events", []).is_err(), "the append-only guard is back");
        let doc = "INSERT INTO docs VALUES ('contract', 'c1', '{}', NULL, '[]')";
        conn.execute(doc, []).unwrap();
        assert!(conn.execute(doc, []).is_err(), "0005 made documents unique by (kind, id)");
        migrate(&mut conn).unwrap();
        std::fs::remove_dir_all(&dir).ok();
    }

    /// Every ledger table as its rows read, in order, one line per row.
    fn ledger_rows(conn: &Connection) -> Vec<String> {
        let mut out = Vec::new();
        for (table, order) in
            [("events", "seq"), ("transfers", "pos"), ("tokens", "jti"), ("settlements", "id"), ("holds", "id")]
        {
            let mut stmt = conn.prepare(&format!("SELECT * FROM {table} ORDER BY {order}")).unwrap();
            let columns = stmt.column_count();
            let rows = stmt
                .query_map([], |r| {
                    let cells: Vec<String> = (0..columns)
                        .map(|i| match r.get_ref(i).unwrap() {
                            rusqlite::types::ValueRef::Blob(b) => format!("packed {}", packed_text(b)),
                            rusqlite::types::ValueRef::Text(t) => String::from_utf8(t.to_vec()).unwrap(),
                            rusqlite::types::ValueRef::Integer(n) => n.to_string(),
                            rusqlite::types::ValueRef::Null => "NULL".into(),
                            rusqlite::types::ValueRef::Real(x) => x.to_string(),
                        })
                        .collect();
                    Ok(format!("{table}: {}", cells.join(" | ")))
                })
                .unwrap();
            out.extend(rows.map(|r| r.unwrap()));
        }
        out
    }

    fn packed_text(b: &[u8]) -> String {
        bazaar_store::packed::unpack_text(b).unwrap()
    }

    /// A database at migration 0011 holding a few rows of every ledger table, the way earlier releases wrote them.
    fn before_compact(name: &str) -> (std::path::PathBuf, Connection, impl Fn(u8) -> String, &'static str) {
        let dir = std::env::temp_dir().join(format!("bazaar-compact-{name}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let conn = open(&dir.join("c.db")).unwrap();
        conn.execute_batch("CREATE TABLE schema_migrations (name TEXT PRIMARY KEY, applied_at INTEGER NOT NULL)")
            .unwrap();
        let before_compact = MIGRATIONS.iter().position(|(name, _)| *name == "0012_compact_ledger_rows").unwrap();
        for (name, sql) in &MIGRATIONS[..before_compact] {
            conn.execute_batch(sql).unwrap();
            conn.execute("INSERT INTO schema_migrations VALUES (?1, 0)", [name]).unwrap();
        }
        let (alice, shop) = ("did:key:z6MkAlice", "did:key:z6MkShop");
        let h = |n: u8| format!("{n:02x}").repeat(32);
        conn.execute_batch(&format!(
            "INSERT INTO events VALUES (1, '{g}', '{h1}', 'token.issued', '{{\"jti\":\"tok_1\"}}', '{alice}', '{alice}', 5);
             INSERT INTO events VALUES (2, '{h1}', '{h2}', 'settlement.posted', '{{\"a\":1}}', '{shop}', '{alice}', 6);
             INSERT INTO transfers (id, debit, credit, amount, kind, hold, link, authored_by, on_behalf_of, at)
               VALUES ('tr_1', 'acct:{alice}', 'acct:{shop}', 99, 'payment', 'hold_tok_1', 'lnk_2', '{shop}', '{alice}', 6);
             INSERT INTO transfers (id, debit, credit, amount, kind, hold, link, authored_by, on_behalf_of, at)
               VALUES ('tr_2', 'acct:{alice}', 'sys:fees', 1, 'fee', NULL, 'lnk_2', '{shop}', '{alice}', 6);
             INSERT INTO tokens VALUES ('tok_1', '{alice}', '{shop}', 100, 'o-1', '/r', 'hold_tok_1', 5, 900);
             INSERT INTO tokens VALUES ('tok_2', '{alice}', '{shop}', 100, 'o-2', '/r', 'hold_tok_2', 5, 900);
             INSERT INTO settlements VALUES ('stl_tok_1', 'tok_1', '{alice}', '{shop}', 'o-1', 100, 1, 99, 6);
             INSERT INTO holds VALUES ('hold_tok_1', 'acct:{alice}', 100, 5, 900, 'posted', 100, 6);
             INSERT INTO hold_resolutions VALUES ('hold_tok_1', 'posted', 100, 6);
             INSERT INTO holds VALUES ('hold_tok_2', 'acct:{alice}', 100, 5, 900, 'pending', 0, NULL);",
            g = h(0),
            h1 = h(1),
            h2 = h(2)
        ))
        .unwrap();
        (dir, conn, h, shop)
    }

    /// Migration 0012 moves the ledger's rows into their compact tables: every row reads back through the old
    /// table names exactly as before, and rows written afterwards go through the same names.
    #[test]
    fn compact_rows_read_back_as_the_rows_written_before() {
        let (dir, mut conn, h, shop) = before_compact("read");
        let before = ledger_rows(&conn);
        migrate(&mut conn).unwrap();
        assert_eq!(ledger_rows(&conn), before, "every row reads back as it was");
        let names: i64 = conn.query_row("SELECT count(*) FROM names", [], |r| r.get(0)).unwrap();
        assert_eq!(names, 7, "two kinds, two members, two member accounts and the fee account, each once");

        // New rows go through the same names, packed bodies included, and read back the same way.
        let body = bazaar_store::packed::pack_body(r#"{"b":2}"#);
        conn.execute(
            "INSERT INTO events VALUES (3, ?1, ?2, 'settlement.posted', ?3, ?4, ?4, 7)",
            params![h(2), h(3), body, shop],
        )
        .unwrap();
        conn.execute(
            "INSERT INTO transfers (id, debit, credit, amount, kind, hold, link, authored_by, on_behalf_of, at)
             VALUES ('tr_3', 'acct:new', 'sys:fees', 1, 'fee', NULL, 'lnk_3', 'did:key:z6MkNew', 'did:key:z6MkNew', 7)",
            [],
        )
        .unwrap();
        let after = ledger_rows(&conn);
        let third =
            format!("events: 3 | {} | {} | settlement.posted | packed {{\"b\":2}} | {shop} | {shop} | 7", h(2), h(3));
        assert!(after.contains(&third), "{after:#?}");
        let pos: i64 = conn.query_row("SELECT pos FROM transfers WHERE id = 'tr_3'", [], |r| r.get(0)).unwrap();
        assert_eq!(pos, 3, "positions go on from the migrated rows");
        std::fs::remove_dir_all(&dir).ok();
    }

    /// After migration 0012 the database still refuses what it refused (a hold resolved twice, a transfer changed,
    /// an event deleted), stores no id it can derive, and refuses a token whose hold it could not derive.
    #[test]
    fn compact_rows_refuse_what_the_old_rows_refused() {
        let (dir, mut conn, _, shop) = before_compact("refuse");
        migrate(&mut conn).unwrap();
        assert!(
            conn.execute("INSERT INTO events VALUES (4, 'p', 'q', 'k', '{}', 'a', 'a', 0)", []).is_err(),
            "hashes are 32 bytes"
        );
        let stored: i64 =
            conn.query_row("SELECT count(*) FROM settlement_rows WHERE id IS NOT NULL", [], |r| r.get(0)).unwrap();
        assert_eq!(stored, 0, "a settlement id that is `stl_` and its token's is not stored");
        conn.execute("INSERT INTO settlements VALUES ('s-other', 'tok_2', 'a', 'b', 'o-9', 1, 0, 1, 7)", []).unwrap();
        let other: String = conn.query_row("SELECT id FROM settlements WHERE jti = 'tok_2'", [], |r| r.get(0)).unwrap();
        assert_eq!(other, "s-other", "any other settlement id is kept");
        let odd_hold = "INSERT INTO tokens VALUES ('tok_3', 'a', 'b', 1, 'o-3', '/r', 'hold_elsewhere', 5, 9)";
        assert!(conn.execute(odd_hold, []).is_err(), "a token's hold is `hold_` and its id, or it is refused");
        let holds: Vec<String> = conn
            .prepare("SELECT hold FROM tokens ORDER BY jti")
            .unwrap()
            .query_map([], |r| r.get(0))
            .unwrap()
            .map(|r| r.unwrap())
            .collect();
        assert_eq!(holds, ["hold_tok_1", "hold_tok_2"]);
        assert!(conn.execute("DELETE FROM event_rows", []).is_err(), "events are append-only");
        assert!(conn.execute("UPDATE transfer_rows SET amount = 5", []).is_err(), "transfers are immutable");
        assert!(
            conn.execute("UPDATE hold_rows SET state = 'voided' WHERE id = 'hold_tok_1'", []).is_err(),
            "resolved once"
        );
        conn.execute("UPDATE hold_rows SET state = 'voided', resolved_at = 8 WHERE id = 'hold_tok_2'", []).unwrap();
        let settled: String = conn
            .query_row("SELECT id FROM settlements WHERE merchant = ?1 AND order_id = 'o-1'", [shop], |r| r.get(0))
            .unwrap();
        assert_eq!(settled, "stl_tok_1");
        std::fs::remove_dir_all(&dir).ok();
    }

    /// The writer's name numbers: a name first stored by a batch that rolled back is stored again by the next
    /// batch that needs it, not referred to by the number it briefly had.
    #[test]
    fn a_name_from_a_rolled_back_batch_is_not_remembered() {
        use bazaar_core::model::{Transfer, TransferKind};
        use bazaar_types::{Amount, TransferId};
        let dir = std::env::temp_dir().join(format!("bazaar-names-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let mut engine = SqliteEngine::connect(dir.join("n.db")).unwrap();
        let transfer = |id: &str, debit: &str| Changes {
            insert_transfers: vec![Transfer {
                id: TransferId(id.into()),
                debit: AccountId(debit.into()),
                credit: AccountId("acct:b".into()),
                amount: Amount(5),
                kind: TransferKind::Funding,
                hold: None,
                link: "l".into(),
                authored_by: MemberId("did:key:zA".into()),
                on_behalf_of: MemberId("did:key:zA".into()),
                at: Timestamp(1),
            }],
            ..Changes::default()
        };
        engine.begin().unwrap();
        engine.write(&transfer("t1", "acct:gone")).unwrap();
        engine.rollback();
        // Another name takes the number `acct:gone` had inside the rolled-back batch.
        engine.begin().unwrap();
        engine.write(&transfer("t2", "acct:other")).unwrap();
        engine.write(&transfer("t3", "acct:gone")).unwrap();
        engine.commit().unwrap();
        let debits: Vec<(String, String)> = engine
            .conn
            .prepare("SELECT id, debit FROM transfers ORDER BY pos")
            .unwrap()
            .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
            .unwrap()
            .map(|r| r.unwrap())
            .collect();
        let expected = [("t2", "acct:other"), ("t3", "acct:gone")].map(|(a, b)| (a.to_string(), b.to_string()));
        assert_eq!(debits, expected);
        std::fs::remove_dir_all(&dir).ok();
    }
}

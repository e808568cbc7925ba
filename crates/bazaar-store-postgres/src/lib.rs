//! PostgreSQL adapter: [`PostgresStore`] runs migrations under an advisory
//! lock, hands writes to the shared group-commit writer with a PostgreSQL
//! [`Engine`](bazaar_store::Engine) (one transaction per batch, serialised
//! across nodes by a row lock on `chain_head`), and answers reads from a small
//! round-robin pool of connections. Every connection goes through
//! `bazaar-pg`, so TLS is whatever the URL's `sslmode` asks for.
//!
//! Durability is the server's: `synchronous_commit` is left at its default,
//! so a batch is acknowledged only after its commit is flushed.
//!
//! ## Map
//!
//! (What this crate holds, file by file; `ARCHITECTURE.md` keeps the one-line summary.)
//!
//! the same on PostgreSQL: two round trips per
//! batch (BEGIN + head lock + loads; writes via `unnest` + COMMIT); a trigger
//! refuses any update of a resolved hold; `migrations/`; `sequencer` — the
//! ledger's sequencer lease (`ledger_sequencer`, migration 0012) and the
//! `Fence` the engine checks against `chain_head.epoch` under the head's row
//! lock before every batch (`connect_sequenced`; docs/design/sequencer.md).

/// Declares a struct of prepared statements and an `async fn prepare` that
/// prepares them all in one pipelined round trip.
macro_rules! statements {
    ($name:ident { $($field:ident = $sql:expr;)* }) => {
        pub(crate) struct $name {
            $(pub(crate) $field: tokio_postgres::Statement,)*
        }

        impl $name {
            pub(crate) async fn prepare(
                client: &tokio_postgres::Client,
            ) -> Result<$name, tokio_postgres::Error> {
                $(let $field: String = ($sql).into();)*
                let ($($field,)*) = futures::try_join!($(client.prepare(&$field),)*)?;
                Ok($name { $($field,)* })
            }
        }
    };
}
pub(crate) use statements;

mod engine;
mod migrate;
mod rows;
pub mod sequencer;

use async_trait::async_trait;
use bazaar_core::apply::{Applied, Config};
use bazaar_core::chain::ChainHead;
use bazaar_core::command::Command;
use bazaar_core::model::*;
use bazaar_pg::Database;
use bazaar_store::writer::Writer;
use bazaar_store::{FoldSnapshot, SearchCount, Store, StoreError, TokenView};
use bazaar_types::{AccountId, Clock, MemberId, OrderId, Timestamp, TokenId};
use rows::{bound, ACCOUNT_COLUMNS, BUDGET_COLUMNS, CREDENTIAL_COLUMNS, EVENT_COLUMNS};
use rows::{CREDENTIAL_WIDTH, DOC_COLUMNS, TOKEN_WIDTH, TRANSFER_COLUMNS};
use rows::{HOLD_COLUMNS, HOLD_WIDTH, MEMBER_COLUMNS, SETTLEMENT_COLUMNS, TOKEN_COLUMNS};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio_postgres::types::ToSql;
use tokio_postgres::Client;

pub use engine::{settlements_by_order_sql, PgEngine, IDLE_IN_TRANSACTION_MS, LOCK_TIMEOUT_MS};
pub use sequencer::{Fence, SequencerLease, Standing};

/// Read connections kept open, used round-robin.
pub const READERS_MAX: usize = 4;
/// The sweeper's query for tokens whose hold expired while pending (`$1` now, `$2` a limit). A token's hold is
/// `hold_` and its id (migration 0013), so each expired hold's token is found by that id. `holds.id` sorts as "C"
/// and `tokens.jti` by the default collation: the id is compared in the latter, or the token key's index cannot
/// serve the join and every sweep hashes the whole token table.
pub const EXPIRED_TOKENS_SQL: &str = "SELECT t.jti, t.buyer FROM holds h \
    JOIN tokens t ON t.jti = substr(h.id, 6) COLLATE \"default\" AND t.hold = h.id \
    WHERE h.state = 'pending' AND h.expires_at <= $1 ORDER BY h.expires_at, h.id LIMIT $2";
/// How long opening one connection may take before the store gives up.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// `application_name` of the read connections.
const READER_APPLICATION_NAME: &str = "bazaar-reader";
/// `meta` key of the registry's signing key seed.
const SEED_KEY: &str = "registry_key_seed";

/// Maps a driver error: SQLSTATE class 23 (integrity constraint violation)
/// is [`StoreError::Constraint`], anything else [`StoreError::Unavailable`].
/// The text carries the SQLSTATE and the server's message, never SQL.
pub(crate) fn pg_error(error: tokio_postgres::Error) -> StoreError {
    if let Some(db) = error.as_db_error() {
        let code = db.code().code();
        let text = format!("[{code}] {}", db.message());
        return if code.starts_with("23") { StoreError::Constraint(text) } else { StoreError::Unavailable(text) };
    }
    match std::error::Error::source(&error) {
        Some(source) => StoreError::Unavailable(format!("{error}: {source}")),
        None => StoreError::Unavailable(error.to_string()),
    }
}

/// A database URL that could not be used, or a connection that could not be
/// opened (the text says the `sslmode` and why).
pub(crate) fn database_error(error: bazaar_pg::Error) -> StoreError {
    StoreError::Unavailable(error.to_string())
}

/// Opens one connection to `database` (TLS as its URL said) and drives it
/// on the current runtime.
pub(crate) async fn connect_client(database: &Database, application_name: &str) -> Result<Client, StoreError> {
    let mut database = database.clone();
    let config = database.config_mut();
    config.application_name(application_name);
    if config.get_connect_timeout().is_none() {
        config.connect_timeout(CONNECT_TIMEOUT);
    }
    let (client, connection) = database.connect().await.map_err(database_error)?;
    tokio::spawn(connection);
    Ok(client)
}

statements! {
    ReadStatements {
        seed_insert = "INSERT INTO meta (key, value) VALUES ($1, $2) ON CONFLICT (key) DO NOTHING";
        seed_select = "SELECT value FROM meta WHERE key = $1";
        head = "SELECT seq, hash FROM chain_head WHERE id = 1";
        member = format!("SELECT {MEMBER_COLUMNS} FROM members WHERE id = $1");
        member_by_handle = format!("SELECT {MEMBER_COLUMNS} FROM members WHERE handle = $1 LIMIT 1");
        agents_of = format!("SELECT {MEMBER_COLUMNS} FROM members WHERE owner = $1 ORDER BY id LIMIT $2");
        credential = format!("SELECT {CREDENTIAL_COLUMNS} FROM credentials WHERE hash = $1");
        authenticate = format!(
            "SELECT {}, {} FROM credentials c JOIN members m ON m.id = c.member WHERE c.hash = $1",
            prefixed("c", CREDENTIAL_COLUMNS),
            prefixed("m", MEMBER_COLUMNS)
        );
        account = format!("SELECT {ACCOUNT_COLUMNS} FROM accounts WHERE id = $1");
        budget = format!("SELECT {BUDGET_COLUMNS} FROM budgets WHERE agent = $1");
        token = format!(
            "SELECT {}, {}, {} FROM tokens t LEFT JOIN holds h ON h.id = t.hold \
             LEFT JOIN settlements s ON s.jti = t.jti WHERE t.jti = $1",
            prefixed("t", TOKEN_COLUMNS),
            prefixed("h", HOLD_COLUMNS),
            prefixed("s", SETTLEMENT_COLUMNS)
        );
        settlement_by_order = format!(
            "SELECT {SETTLEMENT_COLUMNS} FROM settlements WHERE merchant = $1 AND order_id = $2"
        );
        expired_tokens = EXPIRED_TOKENS_SQL;
        events = format!("SELECT {EVENT_COLUMNS} FROM events WHERE seq > $1 ORDER BY seq LIMIT $2");
        transfers = format!(
            "SELECT {TRANSFER_COLUMNS} FROM transfers WHERE pos > $1 ORDER BY pos LIMIT $2"
        );
        holds = format!("SELECT {HOLD_COLUMNS} FROM holds WHERE id > $1 ORDER BY id LIMIT $2");
        accounts = format!("SELECT {ACCOUNT_COLUMNS} FROM accounts WHERE id > $1 ORDER BY id LIMIT $2");
        doc = format!("SELECT {DOC_COLUMNS} FROM docs WHERE kind = $1 AND id = $2");
        docs_by_party = format!(
            "SELECT {} FROM doc_parties p JOIN docs d ON d.kind = p.kind AND d.id = p.id \
             WHERE p.kind = $1 AND p.party = $2 AND p.id > $3 ORDER BY p.id LIMIT $4",
            prefixed("d", DOC_COLUMNS)
        );
        due_docs = "SELECT kind, id FROM docs WHERE due_at <= $1 ORDER BY due_at, kind, id LIMIT $2";
        record_searches = "INSERT INTO searches (query, count, hits_last, first_at, last_at) \
            SELECT * FROM unnest($1::text[], $2::bigint[], $3::bigint[], $4::bigint[], $5::bigint[]) \
            ON CONFLICT (query) DO UPDATE SET count = searches.count + EXCLUDED.count, \
            hits_last = CASE WHEN EXCLUDED.last_at >= searches.last_at \
                THEN EXCLUDED.hits_last ELSE searches.hits_last END, \
            last_at = GREATEST(searches.last_at, EXCLUDED.last_at)";
    }
}

/// A search batch as the five arrays `record_searches` unnests.
type SearchColumns<'a> = (Vec<&'a str>, Vec<i64>, Vec<i64>, Vec<i64>, Vec<i64>);

fn search_columns(searches: &[SearchCount]) -> SearchColumns<'_> {
    let clamp = |n: u64| n.min(i64::MAX as u64) as i64;
    (
        searches.iter().map(|s| s.query.as_str()).collect(),
        searches.iter().map(|s| clamp(s.count)).collect(),
        searches.iter().map(|s| clamp(s.hits_last)).collect(),
        searches.iter().map(|s| s.first_at.0).collect(),
        searches.iter().map(|s| s.last_at.0).collect(),
    )
}

/// `a, b` as `t.a, t.b`, for joins.
fn prefixed(table: &str, columns: &str) -> String {
    columns.split(", ").map(|c| format!("{table}.{c}")).collect::<Vec<_>>().join(", ")
}

/// One read connection and its prepared statements.
struct Reader {
    client: Client,
    st: ReadStatements,
}

impl Reader {
    async fn open(database: &Database) -> Result<Reader, StoreError> {
        let client = connect_client(database, READER_APPLICATION_NAME).await?;
        let st = ReadStatements::prepare(&client).await.map_err(pg_error)?;
        Ok(Reader { client, st })
    }
}

/// The PostgreSQL [`Store`]. Several nodes may share one database.
pub struct PostgresStore {
    writer: Writer,
    database: Database,
    readers: Vec<Mutex<Arc<Reader>>>,
    next_reader: AtomicUsize,
}

impl PostgresStore {
    /// Connects to `url`, migrates the schema, starts the writer and opens
    /// [`READERS_MAX`] read connections. Must be called inside a Tokio runtime,
    /// which then drives the read connections.
    pub async fn connect(url: &str, config: Config, clock: Arc<dyn Clock>) -> Result<PostgresStore, StoreError> {
        PostgresStore::open(url, config, clock, None).await
    }

    /// As [`PostgresStore::connect`], for a node of a cluster: its writer
    /// commits only while this node holds the ledger's sequencer lease
    /// (returned, not yet taken: call [`SequencerLease::hold`]).
    pub async fn connect_sequenced(
        url: &str,
        config: Config,
        clock: Arc<dyn Clock>,
        node: &str,
    ) -> Result<(PostgresStore, SequencerLease), StoreError> {
        let fence = Fence::default();
        let store = PostgresStore::open(url, config, clock, Some(fence.clone())).await?;
        let lease = SequencerLease::open(store.database.clone(), node, fence).await?;
        Ok((store, lease))
    }

    async fn open(
        url: &str,
        config: Config,
        clock: Arc<dyn Clock>,
        fence: Option<Fence>,
    ) -> Result<PostgresStore, StoreError> {
        let database = Database::from_url(url).map_err(database_error)?;
        migrate::run(&database).await?;
        let engine_database = database.clone();
        // The engine blocks on its own runtime, which must not start inside async code.
        let engine = tokio::task::spawn_blocking(move || {
            PgEngine::open(engine_database).map(|engine| match fence {
                Some(fence) => engine.fenced(fence),
                None => engine,
            })
        })
        .await
        .map_err(|e| StoreError::Unavailable(format!("writer start: {e}")))??;
        let writer = Writer::spawn(engine, config, clock);
        let mut readers = Vec::with_capacity(READERS_MAX);
        for _ in 0..READERS_MAX {
            readers.push(Mutex::new(Arc::new(Reader::open(&database).await?)));
        }
        Ok(PostgresStore { writer, database, readers, next_reader: AtomicUsize::new(0) })
    }

    /// The next read connection, reopened first if it was lost.
    async fn reader(&self) -> Result<Arc<Reader>, StoreError> {
        let index = self.next_reader.fetch_add(1, Ordering::Relaxed) % self.readers.len();
        let slot = &self.readers[index];
        let current = slot.lock().unwrap_or_else(|p| p.into_inner()).clone();
        if !current.client.is_closed() {
            return Ok(current);
        }
        let fresh = Arc::new(Reader::open(&self.database).await?);
        *slot.lock().unwrap_or_else(|p| p.into_inner()) = fresh.clone();
        tracing::info!("reader reconnected to PostgreSQL");
        Ok(fresh)
    }
}

#[async_trait]
impl Store for PostgresStore {
    async fn submit(&self, command: Command) -> Result<Applied, StoreError> {
        self.writer.submit(command).await
    }

    fn writer_stats(&self) -> bazaar_store::writer::WriterStats {
        self.writer.stats()
    }

    async fn registry_key_seed(&self, candidate: [u8; 32]) -> Result<[u8; 32], StoreError> {
        let r = self.reader().await?;
        let encoded = hex::encode(candidate);
        r.client.execute(&r.st.seed_insert, &[&SEED_KEY, &encoded]).await.map_err(pg_error)?;
        let row = r.client.query_one(&r.st.seed_select, &[&SEED_KEY]).await.map_err(pg_error)?;
        rows::seed_decode(rows::get(&row, 0)?)
    }

    async fn registry_keys(&self) -> Result<Vec<String>, StoreError> {
        let r = self.reader().await?;
        let sql = "SELECT value FROM meta WHERE key LIKE 'registry_key.%' ORDER BY key";
        let rows = r.client.query(sql, &[]).await.map_err(pg_error)?;
        rows.iter().map(|row| rows::get::<String>(row, 0)).collect()
    }

    async fn add_registry_key(&self, n: u32, record: String) -> Result<bool, StoreError> {
        let r = self.reader().await?;
        let key = format!("registry_key.{n:06}");
        let sql = "INSERT INTO meta VALUES ($1, $2) ON CONFLICT (key) DO NOTHING";
        Ok(r.client.execute(sql, &[&key, &record]).await.map_err(pg_error)? == 1)
    }

    async fn head(&self) -> Result<ChainHead, StoreError> {
        let r = self.reader().await?;
        let row = r.client.query_one(&r.st.head, &[]).await.map_err(pg_error)?;
        Ok(ChainHead {
            seq: u64::try_from(rows::get::<i64>(&row, 0)?)
                .map_err(|_| StoreError::Corrupt("negative chain head".into()))?,
            hash: rows::get(&row, 1)?,
        })
    }

    async fn member(&self, id: &MemberId) -> Result<Option<Member>, StoreError> {
        let r = self.reader().await?;
        let row = r.client.query_opt(&r.st.member, &[&id.0]).await;
        rows::optional(row.map_err(pg_error)?, rows::member)
    }

    async fn member_by_handle(&self, handle: &str) -> Result<Option<Member>, StoreError> {
        let r = self.reader().await?;
        let row = r.client.query_opt(&r.st.member_by_handle, &[&handle]).await;
        rows::optional(row.map_err(pg_error)?, rows::member)
    }

    async fn agents_of(&self, owner: &MemberId, limit: usize) -> Result<Vec<Member>, StoreError> {
        let r = self.reader().await?;
        let rows = r.client.query(&r.st.agents_of, &[&owner.as_str(), &(limit as i64)]).await.map_err(pg_error)?;
        rows.iter().map(|row| rows::member(row, 0)).collect()
    }

    async fn credential(&self, hash: &str) -> Result<Option<Credential>, StoreError> {
        let r = self.reader().await?;
        let row = r.client.query_opt(&r.st.credential, &[&hash]).await;
        rows::optional(row.map_err(pg_error)?, rows::credential)
    }

    async fn account(&self, id: &AccountId) -> Result<Option<Account>, StoreError> {
        let r = self.reader().await?;
        let row = r.client.query_opt(&r.st.account, &[&id.0]).await;
        rows::optional(row.map_err(pg_error)?, rows::account)
    }

    async fn budget(&self, agent: &MemberId) -> Result<Option<Budget>, StoreError> {
        let r = self.reader().await?;
        let row = r.client.query_opt(&r.st.budget, &[&agent.0]).await;
        rows::optional(row.map_err(pg_error)?, rows::budget)
    }

    async fn token(&self, jti: &TokenId) -> Result<Option<TokenView>, StoreError> {
        let r = self.reader().await?;
        let row = r.client.query_opt(&r.st.token, &[&jti.0]).await;
        let Some(row) = row.map_err(pg_error)? else {
            return Ok(None);
        };
        let token = rows::token(&row, 0)?;
        if rows::get::<Option<&str>>(&row, TOKEN_WIDTH)?.is_none() {
            return Err(StoreError::Corrupt(format!("token {} has no hold", jti.0)));
        }
        let hold = rows::hold(&row, TOKEN_WIDTH)?;
        let settled = TOKEN_WIDTH + HOLD_WIDTH;
        let settlement = match rows::get::<Option<&str>>(&row, settled)? {
            Some(_) => Some(rows::settlement(&row, settled)?),
            None => None,
        };
        Ok(Some(TokenView { token, hold, settlement }))
    }

    async fn settlement_by_order(
        &self,
        merchant: &MemberId,
        order: &OrderId,
    ) -> Result<Option<Settlement>, StoreError> {
        let r = self.reader().await?;
        let row = r.client.query_opt(&r.st.settlement_by_order, &[&merchant.0, &order.0]).await;
        rows::optional(row.map_err(pg_error)?, rows::settlement)
    }

    async fn expired_tokens(&self, now: Timestamp, limit: usize) -> Result<Vec<(TokenId, MemberId)>, StoreError> {
        let r = self.reader().await?;
        let found = r.client.query(&r.st.expired_tokens, &[&now.0, &bound(limit)]).await.map_err(pg_error)?;
        found.iter().map(|row| Ok((TokenId(rows::get(row, 0)?), MemberId(rows::get(row, 1)?)))).collect()
    }

    async fn events(&self, after: u64, limit: usize) -> Result<Vec<Event>, StoreError> {
        let r = self.reader().await?;
        let found = r.client.query(&r.st.events, &[&bound(after), &bound(limit)]).await.map_err(pg_error)?;
        rows::all(&found, rows::event)
    }

    async fn transfers(&self, after: i64, limit: usize) -> Result<Vec<(i64, Transfer)>, StoreError> {
        let r = self.reader().await?;
        let found = r.client.query(&r.st.transfers, &[&after, &bound(limit)]).await.map_err(pg_error)?;
        rows::all(&found, rows::transfer)
    }

    async fn holds(&self, after: &str, limit: usize) -> Result<Vec<Hold>, StoreError> {
        let r = self.reader().await?;
        let found = r.client.query(&r.st.holds, &[&after, &bound(limit)]).await.map_err(pg_error)?;
        rows::all(&found, rows::hold)
    }

    async fn accounts(&self, after: &str, limit: usize) -> Result<Vec<Account>, StoreError> {
        let r = self.reader().await?;
        let found = r.client.query(&r.st.accounts, &[&after, &bound(limit)]).await.map_err(pg_error)?;
        rows::all(&found, rows::account)
    }

    async fn prune_idempotency(&self, before: Timestamp, limit: usize) -> Result<usize, StoreError> {
        self.writer.prune_idempotency(before, limit).await
    }

    async fn doc(&self, kind: DocKind, id: &str) -> Result<Option<DocRow>, StoreError> {
        let r = self.reader().await?;
        let row = r.client.query_opt(&r.st.doc, &[&kind.as_str(), &id]).await;
        rows::optional(row.map_err(pg_error)?, rows::doc)
    }

    async fn blob(&self, sha256: &str) -> Result<Option<Blob>, StoreError> {
        let r = self.reader().await?;
        let sql = "SELECT sha256, content_type, bytes, parties, created_at FROM blobs WHERE sha256 = $1";
        let row = r.client.query_opt(sql, &[&sha256]).await;
        rows::optional(row.map_err(pg_error)?, rows::blob)
    }

    async fn docs_by_party(
        &self,
        kind: DocKind,
        party: &MemberId,
        after: &str,
        limit: usize,
    ) -> Result<Vec<DocRow>, StoreError> {
        let r = self.reader().await?;
        let params: [&(dyn ToSql + Sync); 4] = [&kind.as_str(), &party.0, &after, &bound(limit)];
        let found = r.client.query(&r.st.docs_by_party, &params).await.map_err(pg_error)?;
        rows::all(&found, rows::doc)
    }

    async fn search_listings(&self, terms: &[String], limit: usize) -> Result<Vec<DocRow>, StoreError> {
        if terms.is_empty() {
            return Ok(Vec::new());
        }
        // Terms are alphanumeric words (see `bazaar_core::market::words`): no tsquery syntax in them.
        let query: Vec<String> = terms.iter().map(|t| format!("{t}:*")).collect();
        let query = query.join(" & ");
        let sql = format!(
            "SELECT {} FROM listing_search s JOIN docs d ON d.kind = 'listing' AND d.id = s.id \
             WHERE s.tsv @@ to_tsquery('simple', $1) \
             ORDER BY ts_rank(s.tsv, to_tsquery('simple', $1)) DESC, d.id LIMIT $2",
            prefixed("d", DOC_COLUMNS)
        );
        let r = self.reader().await?;
        let found = r.client.query(sql.as_str(), &[&query, &bound(limit)]).await.map_err(pg_error)?;
        rows::all(&found, rows::doc)
    }

    async fn record_searches(&self, searches: &[SearchCount]) -> Result<(), StoreError> {
        if searches.is_empty() {
            return Ok(());
        }
        let r = self.reader().await?;
        // One statement, so one transaction, on a read connection: never the writer's.
        let (queries, counts, hits, first, last) = search_columns(searches);
        let params: [&(dyn ToSql + Sync); 5] = [&queries, &counts, &hits, &first, &last];
        r.client.execute(&r.st.record_searches, &params).await.map_err(pg_error)?;
        Ok(())
    }

    async fn fold_snapshot(&self, name: &str) -> Result<Option<FoldSnapshot>, StoreError> {
        let r = self.reader().await?;
        let sql = "SELECT seq, head, body FROM fold_snapshots WHERE name = $1";
        let Some(row) = r.client.query_opt(sql, &[&name]).await.map_err(pg_error)? else { return Ok(None) };
        let seq: i64 = rows::get(&row, 0)?;
        Ok(Some(FoldSnapshot {
            name: name.to_string(),
            seq: seq.max(0) as u64,
            head: rows::get(&row, 1)?,
            body: rows::get(&row, 2)?,
        }))
    }

    async fn save_fold_snapshot(&self, snapshot: &FoldSnapshot) -> Result<(), StoreError> {
        let r = self.reader().await?;
        // One statement on a read connection, never the writer's; the later seq wins whichever node writes last.
        let sql = "INSERT INTO fold_snapshots (name, seq, head, body) VALUES ($1, $2, $3, $4) ON CONFLICT (name) \
            DO UPDATE SET seq = EXCLUDED.seq, head = EXCLUDED.head, body = EXCLUDED.body \
            WHERE EXCLUDED.seq > fold_snapshots.seq";
        let seq = snapshot.seq.min(i64::MAX as u64) as i64;
        let params: [&(dyn ToSql + Sync); 4] = [&snapshot.name, &seq, &snapshot.head, &snapshot.body];
        r.client.execute(sql, &params).await.map_err(pg_error)?;
        Ok(())
    }

    async fn unmet_searches(&self, limit: usize) -> Result<Vec<(String, u64, Timestamp)>, StoreError> {
        let r = self.reader().await?;
        let sql = "SELECT query, count, last_at FROM searches WHERE hits_last = 0 ORDER BY count DESC, query LIMIT $1";
        let found = r.client.query(sql, &[&bound(limit)]).await.map_err(pg_error)?;
        found
            .iter()
            .map(|row| {
                let count: i64 = rows::get(row, 1)?;
                Ok((rows::get::<String>(row, 0)?, count.max(0) as u64, Timestamp(rows::get(row, 2)?)))
            })
            .collect()
    }

    async fn due_docs(&self, now: Timestamp, limit: usize) -> Result<Vec<(DocKind, String)>, StoreError> {
        let r = self.reader().await?;
        let found = r.client.query(&r.st.due_docs, &[&now.0, &bound(limit)]).await.map_err(pg_error)?;
        rows::all(&found, rows::doc_key)
    }

    async fn credentials_of(&self, member: &MemberId) -> Result<Vec<Credential>, StoreError> {
        let r = self.reader().await?;
        let sql = format!("SELECT {CREDENTIAL_COLUMNS} FROM credentials WHERE member = $1 ORDER BY created_at, hash");
        let found = r.client.query(&sql, &[&member.0]).await.map_err(pg_error)?;
        found.iter().map(|row| rows::credential(row, 0)).collect()
    }

    async fn authenticate(&self, hash: &str) -> Result<Option<(Credential, Member)>, StoreError> {
        let r = self.reader().await?;
        let row = r.client.query_opt(&r.st.authenticate, &[&hash]).await.map_err(pg_error)?;
        match row {
            Some(row) => Ok(Some((rows::credential(&row, 0)?, rows::member(&row, CREDENTIAL_WIDTH)?))),
            None => Ok(None),
        }
    }
}

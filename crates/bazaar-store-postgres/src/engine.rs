//! The writer's [`Engine`]: one connection driven by its own single-threaded
//! runtime on the shared writer thread, with every statement prepared once.
//!
//! A batch costs three round trips, each a pipeline of statements sent
//! together and answered in order:
//! 1. `BEGIN`, the `chain_head` row lock (`FOR UPDATE`, which serialises
//!    batches across every node sharing the database), and one `= ANY($1)`
//!    query per table named in the batch's keys;
//! 2. one set-based (`unnest`) statement per kind of change;
//! 3. `COMMIT`.
//!
//! Under READ COMMITTED each statement of the first pipeline takes its
//! snapshot when it starts, so the loads queued behind the lock see whatever
//! the previous holder of the lock committed.

use crate::rows::{self, int, ACCOUNT_COLUMNS, BUDGET_COLUMNS, CREDENTIAL_COLUMNS};
use crate::rows::{DOC_COLUMNS, SETTLEMENT_COLUMNS, TOKEN_COLUMNS};
use crate::rows::{HANDLE_COLUMNS, HOLD_COLUMNS, IDEM_COLUMNS, INVITE_COLUMNS, MEMBER_COLUMNS};
use crate::{connect_client, database_error, pg_error};
use bazaar_core::chain::ChainHead;
use bazaar_core::command::Keys;
use bazaar_core::state::{Changes, Snapshot};
use bazaar_pg::Database;
use bazaar_store::{packed, Engine, StoreError};
use bazaar_types::Timestamp;
use futures::future::join_all;
use std::collections::BTreeSet;
use tokio_postgres::types::ToSql;
use tokio_postgres::{Client, Row, Statement};

/// `application_name` of the writer's connection, as `pg_stat_activity` shows it.
const WRITER_APPLICATION_NAME: &str = "bazaar-writer";
/// Explicit, so a server-wide default of REPEATABLE READ cannot break the
/// lock-then-load order described above.
const BEGIN_SQL: &str = "BEGIN ISOLATION LEVEL READ COMMITTED";

crate::statements! {
    WriteStatements {
        head = "SELECT seq, hash, epoch FROM chain_head WHERE id = 1 FOR UPDATE";
        load_members = format!("SELECT {MEMBER_COLUMNS} FROM members WHERE id = ANY($1::text[])");
        load_handles = format!("SELECT {HANDLE_COLUMNS} FROM handles WHERE handle = ANY($1::text[])");
        load_credentials =
            format!("SELECT {CREDENTIAL_COLUMNS} FROM credentials WHERE hash = ANY($1::text[])");
        load_invites =
            format!("SELECT {INVITE_COLUMNS} FROM invites WHERE code_hash = ANY($1::text[])");
        load_accounts = format!("SELECT {ACCOUNT_COLUMNS} FROM accounts WHERE id = ANY($1::text[])");
        load_budgets = format!("SELECT {BUDGET_COLUMNS} FROM budgets WHERE agent = ANY($1::text[])");
        load_holds = format!("SELECT {HOLD_COLUMNS} FROM holds WHERE id = ANY($1::text[])");
        load_tokens = format!("SELECT {TOKEN_COLUMNS} FROM tokens WHERE jti = ANY($1::text[])");
        load_settlements_by_token =
            format!("SELECT {SETTLEMENT_COLUMNS} FROM settlements WHERE jti = ANY($1::text[])");
        // One lookup per pair, each through the view's `names` join and then the (merchant, order_id) index.
        // `OFFSET 0` keeps the planner from flattening it into one join: without statistics (a fresh table, or
        // one autovacuum has not analysed yet) it planned that as a walk of every settlement (migration 0013).
        load_settlements_by_order = settlements_by_order_sql();
        load_idem = format!(
            "SELECT {IDEM_COLUMNS} FROM idempotency WHERE (scope, key) IN \
             (SELECT * FROM unnest($1::text[], $2::text[]))"
        );
        load_docs = format!(
            "SELECT {DOC_COLUMNS} FROM docs WHERE (kind, id) IN \
             (SELECT * FROM unnest($1::text[], $2::text[]))"
        );
        load_blobs = "SELECT sha256 FROM blobs WHERE sha256 = ANY($1::text[])";
        insert_blobs = "INSERT INTO blobs (sha256, content_type, size, bytes, parties, created_at) \
            SELECT * FROM unnest($1::text[], $2::text[], $3::bigint[], $4::bytea[], $5::text[], $6::bigint[])";
        insert_members = "INSERT INTO members (id, kind, owner, handle, created_at) \
            SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::bigint[])";
        update_members = "UPDATE members AS m SET handle = u.handle \
            FROM unnest($1::text[], $2::text[]) AS u(id, handle) WHERE m.id = u.id";
        retire_handles = "UPDATE handles SET retired = TRUE WHERE handle = ANY($1::text[])";
        insert_handles = "INSERT INTO handles (handle, member, retired, since) \
            SELECT * FROM unnest($1::text[], $2::text[], $3::boolean[], $4::bigint[])";
        upsert_credentials = "INSERT INTO credentials (hash, member, created_at, revoked_at, scopes) \
            SELECT * FROM unnest($1::text[], $2::text[], $3::bigint[], $4::bigint[], $5::text[]) \
            ON CONFLICT (hash) DO UPDATE SET revoked_at = excluded.revoked_at";
        upsert_invites = "INSERT INTO invites (code_hash, owner, expires_at, used_by, used_at) \
            SELECT * FROM unnest($1::text[], $2::text[], $3::bigint[], $4::text[], $5::bigint[]) \
            ON CONFLICT (code_hash) DO UPDATE SET used_by = excluded.used_by, used_at = excluded.used_at";
        upsert_accounts = "INSERT INTO accounts \
            (id, allow_negative, debits_posted, credits_posted, debits_pending) \
            SELECT * FROM unnest($1::text[], $2::boolean[], $3::bigint[], $4::bigint[], $5::bigint[]) \
            ON CONFLICT (id) DO UPDATE SET debits_posted = excluded.debits_posted, \
            credits_posted = excluded.credits_posted, debits_pending = excluded.debits_pending";
        upsert_budgets = "INSERT INTO budgets \
            (agent, per_call_max, per_day_max, total_max, spent_total, day, spent_day) \
            SELECT * FROM unnest($1::text[], $2::bigint[], $3::bigint[], $4::bigint[], \
            $5::bigint[], $6::bigint[], $7::bigint[]) \
            ON CONFLICT (agent) DO UPDATE SET per_call_max = excluded.per_call_max, \
            per_day_max = excluded.per_day_max, total_max = excluded.total_max, \
            spent_total = excluded.spent_total, day = excluded.day, spent_day = excluded.spent_day";
        // Names first, then the compact rows that refer to them by number (migration 0013). Only names not
        // there yet are inserted, so the identity is not spent on conflicts; a name missing from `names` makes
        // its row's number NULL, which the column refuses.
        insert_names = "INSERT INTO names (name) SELECT DISTINCT u.name FROM unnest($1::text[]) AS u(name) \
            WHERE NOT EXISTS (SELECT 1 FROM names WHERE names.name = u.name) ON CONFLICT (name) DO NOTHING";
        insert_holds = format!("INSERT INTO hold_rows \
            (id, account, amount, created_at, expires_at, state, posted_amount, resolved_at) \
            SELECT u.id, {account}, u.amount, u.created_at, u.expires_at, u.state, u.posted_amount, u.resolved_at \
            FROM unnest($1::text[], $2::text[], $3::bigint[], $4::bigint[], $5::bigint[], \
            $6::text[], $7::bigint[], $8::bigint[]) \
            AS u(id, account, amount, created_at, expires_at, state, posted_amount, resolved_at)",
            account = name_n("u.account"));
        resolve_holds = "UPDATE hold_rows AS h \
            SET state = u.state, posted_amount = u.posted_amount, resolved_at = u.at \
            FROM unnest($1::text[], $2::text[], $3::bigint[], $4::bigint[]) \
            AS u(id, state, posted_amount, at) WHERE h.id = u.id RETURNING h.id";
        // A token's hold is `hold_` and its id, and is not stored; one named otherwise gets a NULL id (refused).
        insert_tokens = format!("INSERT INTO token_rows \
            (jti, buyer, merchant, max_amount, order_id, resource, issued_at, expires_at) \
            SELECT CASE WHEN u.hold = 'hold_' || u.jti THEN u.jti END, {buyer}, {merchant}, u.max_amount, \
            u.order_id, u.resource, u.issued_at, u.expires_at \
            FROM unnest($1::text[], $2::text[], $3::text[], $4::bigint[], $5::text[], \
            $6::text[], $7::text[], $8::bigint[], $9::bigint[]) \
            AS u(jti, buyer, merchant, max_amount, order_id, resource, hold, issued_at, expires_at)",
            buyer = name_n("u.buyer"), merchant = name_n("u.merchant"));
        insert_settlements = format!("INSERT INTO settlement_rows \
            (id, jti, buyer, merchant, order_id, amount, fee, net, settled_at) \
            SELECT NULLIF(u.id, 'stl_' || u.jti), u.jti, {buyer}, {merchant}, u.order_id, u.amount, u.fee, u.net, u.settled_at \
            FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], \
            $6::bigint[], $7::bigint[], $8::bigint[], $9::bigint[]) \
            AS u(id, jti, buyer, merchant, order_id, amount, fee, net, settled_at)",
            buyer = name_n("u.buyer"), merchant = name_n("u.merchant"));
        // ORDER BY the array position so `pos` follows the batch's order.
        insert_transfers = format!("INSERT INTO transfer_rows \
            (id, debit, credit, amount, kind, hold, link, authored_by, on_behalf_of, at) \
            SELECT t.id, {debit}, {credit}, t.amount, t.kind, t.hold, t.link, {authored_by}, {on_behalf_of}, t.at \
            FROM unnest($1::text[], $2::text[], $3::text[], $4::bigint[], $5::text[], $6::text[], \
            $7::text[], $8::text[], $9::text[], $10::bigint[]) WITH ORDINALITY \
            AS t(id, debit, credit, amount, kind, hold, link, authored_by, on_behalf_of, at, ord) \
            ORDER BY t.ord",
            debit = name_n("t.debit"), credit = name_n("t.credit"),
            authored_by = name_n("t.authored_by"), on_behalf_of = name_n("t.on_behalf_of"));
        insert_idem = "INSERT INTO idempotency (scope, key, fingerprint, outcome, created_at, receipt_tag) \
            SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::bigint[], $6::text[])";
        // `prev_hash` is not stored: the `events` view reads it from the event before (migration 0013).
        insert_events = format!("INSERT INTO event_rows \
            (seq, hash, kind, body, authored_by, on_behalf_of, at) \
            SELECT u.seq, decode(u.hash, 'hex'), {kind}, u.body, {authored_by}, \
            {on_behalf_of}, u.at \
            FROM unnest($1::bigint[], $2::text[], $3::text[], $4::bytea[], $5::text[], $6::text[], $7::bigint[]) \
            AS u(seq, hash, kind, body, authored_by, on_behalf_of, at)",
            kind = name_n("u.kind"), authored_by = name_n("u.authored_by"), on_behalf_of = name_n("u.on_behalf_of"));
        insert_docs = "INSERT INTO docs (kind, id, body, due_at, parties) \
            SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::bigint[], $5::text[])";
        insert_doc_parties = "INSERT INTO doc_parties (kind, party, id) \
            SELECT * FROM unnest($1::text[], $2::text[], $3::text[])";
        update_docs = "UPDATE docs AS d SET body = u.body, due_at = u.due_at \
            FROM unnest($1::text[], $2::text[], $3::text[], $4::bigint[]) AS u(kind, id, body, due_at) \
            WHERE d.kind = u.kind AND d.id = u.id RETURNING d.id";
        set_head = "UPDATE chain_head SET seq = $1, hash = $2 WHERE id = 1";
    }
}

/// The batch load of settlements by (merchant, order id) pairs (`$1`, `$2`): see `load_settlements_by_order`.
pub fn settlements_by_order_sql() -> String {
    format!(
        "SELECT s.* FROM unnest($1::text[], $2::text[]) AS u(merchant, order_id) \
         CROSS JOIN LATERAL (SELECT {SETTLEMENT_COLUMNS} FROM settlements \
         WHERE merchant = u.merchant AND order_id = u.order_id OFFSET 0) AS s"
    )
}

/// The number `names` gives the name in `column` (NULL, which every compact row's column refuses, if it has none).
fn name_n(column: &str) -> String {
    format!("(SELECT n FROM names WHERE name = {column})")
}

/// One bound parameter; array parameters borrow from the batch's changes.
type Param<'a> = Box<dyn ToSql + Sync + 'a>;

fn param<'a, T: ToSql + Sync + 'a>(value: T) -> Param<'a> {
    Box::new(value)
}

/// One statement of a pipeline with its parameters.
struct Job<'a> {
    statement: &'a Statement,
    params: Vec<Param<'a>>,
    /// How many rows the statement must return, if that is checked, and what
    /// the rows are (holds being resolved, documents being updated: fewer
    /// rows means one was missing).
    expect_rows: Option<(usize, &'static str)>,
}

impl<'a> Job<'a> {
    fn new(statement: &'a Statement, params: Vec<Param<'a>>) -> Job<'a> {
        Job { statement, params, expect_rows: None }
    }
}

/// Which snapshot map a load query fills.
#[derive(Clone, Copy)]
enum Table {
    Members,
    Handles,
    Credentials,
    Invites,
    Accounts,
    Budgets,
    Holds,
    Tokens,
    SettlementsByToken,
    SettlementsByOrder,
    Idem,
    Docs,
    Blobs,
}

struct Connection {
    client: Client,
    statements: WriteStatements,
}

impl Connection {
    async fn open(database: &Database) -> Result<Connection, StoreError> {
        let client = connect_client(database, WRITER_APPLICATION_NAME).await?;
        // The batch loads take arrays whose sizes vary; a generic plan made
        // while tables were small scans them whole. Plan each with its values.
        // A node that stalls inside a transaction is cut off, so it cannot
        // hold the chain head lock (and every other node) for long; a batch
        // that waits too long for that lock fails and is retried by its client.
        let settings = format!(
            "SET plan_cache_mode = force_custom_plan; SET lock_timeout = '{LOCK_TIMEOUT_MS}ms'; \
             SET idle_in_transaction_session_timeout = '{IDLE_IN_TRANSACTION_MS}ms'"
        );
        client.batch_execute(&settings).await.map_err(pg_error)?;
        let statements = WriteStatements::prepare(&client).await.map_err(pg_error)?;
        Ok(Connection { client, statements })
    }
}

/// Longest the writer waits for a lock (the chain head, held by another node's batch).
pub const LOCK_TIMEOUT_MS: u64 = 4_000;
/// A writer session idle inside a transaction this long is ended by PostgreSQL: a
/// sequencer stopped inside a batch (a pause, `SIGSTOP`) holds the chain head's
/// lock, and so delays its successor's takeover, for at most this long. A batch
/// spends milliseconds between its statements.
pub const IDLE_IN_TRANSACTION_MS: u64 = 5_000;
const _: () = assert!(LOCK_TIMEOUT_MS < IDLE_IN_TRANSACTION_MS);

/// The PostgreSQL side of the group-commit writer.
pub struct PgEngine {
    runtime: tokio::runtime::Runtime,
    database: Database,
    connection: Option<Connection>,
    /// `begin` was called but `BEGIN` is not sent yet: it rides with the loads.
    begin_pending: bool,
    /// `write` already sent `COMMIT` at the end of its pipeline; the server
    /// committed, or (after a failed statement) rolled back.
    ended_in_write: bool,
    /// Set when this node runs as one of a cluster: a batch commits only at
    /// the epoch the fence holds (docs/design/sequencer.md).
    fence: Option<crate::sequencer::Fence>,
}

impl PgEngine {
    /// Connects to `url` (already migrated) and prepares. Call from a thread
    /// that is not running async code: the engine blocks on its own runtime.
    pub fn connect(url: &str) -> Result<PgEngine, StoreError> {
        PgEngine::open(Database::from_url(url).map_err(database_error)?)
    }

    pub(crate) fn open(database: Database) -> Result<PgEngine, StoreError> {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| StoreError::Unavailable(format!("writer runtime: {e}")))?;
        let connection = runtime.block_on(Connection::open(&database))?;
        Ok(PgEngine {
            runtime,
            database,
            connection: Some(connection),
            begin_pending: false,
            ended_in_write: false,
            fence: None,
        })
    }

    /// From now on a batch commits only while `fence` holds the epoch `chain_head` carries.
    pub(crate) fn fenced(mut self, fence: crate::sequencer::Fence) -> PgEngine {
        self.fence = Some(fence);
        self
    }

    /// A setting of the writer's session (`SHOW name`), for diagnostics and tests.
    pub fn session_setting(&mut self, name: &str) -> Result<String, StoreError> {
        let client = &live(&self.connection)?.client;
        let row = self.runtime.block_on(client.query_one(&format!("SHOW {name}"), &[])).map_err(pg_error)?;
        Ok(row.get(0))
    }

    /// Runs one statement outside the pipeline helpers (COMMIT, ROLLBACK).
    fn simple(&mut self, sql: &str) -> Result<(), StoreError> {
        let client = &live(&self.connection)?.client;
        self.runtime.block_on(client.batch_execute(sql)).map_err(pg_error)
    }
}

fn live(connection: &Option<Connection>) -> Result<&Connection, StoreError> {
    connection.as_ref().ok_or_else(|| StoreError::Unavailable("writer connection closed".into()))
}

/// Sends `jobs` as one pipeline, after `BEGIN` if it is still pending and,
/// with `commit`, followed by `COMMIT`, and returns each statement's rows, or
/// the first failure in order. If a statement fails, the transaction is
/// aborted and the server answers that `COMMIT` by rolling back, so nothing
/// of the batch is kept. Each statement's `expect_rows` is checked against the
/// rows it returned.
fn pipeline(
    runtime: &tokio::runtime::Runtime,
    client: &Client,
    begin_pending: &mut bool,
    jobs: &[Job<'_>],
    commit: bool,
) -> Result<Vec<Vec<Row>>, StoreError> {
    let send_begin = std::mem::take(begin_pending);
    let params = refs(jobs);
    let (begun, results, committed) = runtime.block_on(async {
        let begin = async {
            if send_begin {
                client.batch_execute(BEGIN_SQL).await
            } else {
                Ok(())
            }
        };
        let statements = join_all(jobs.iter().zip(&params).map(|(job, params)| client.query(job.statement, params)));
        let end = async {
            if commit {
                client.batch_execute("COMMIT").await
            } else {
                Ok(())
            }
        };
        futures::join!(begin, statements, end)
    });
    begun.map_err(pg_error)?;
    // Later statements of an aborted transaction only report that it is
    // aborted, so the first failure in order is the one that matters.
    let results = results.into_iter().collect::<Result<Vec<_>, _>>().map_err(pg_error)?;
    committed.map_err(pg_error)?;
    for (job, rows) in jobs.iter().zip(&results) {
        if let Some((expected, what)) = job.expect_rows {
            if rows.len() != expected {
                return Err(StoreError::Constraint(format!("only {} of {expected} {what}", rows.len())));
            }
        }
    }
    Ok(results)
}

/// Borrows each job's parameters the way the client wants them.
fn refs<'j>(jobs: &'j [Job<'_>]) -> Vec<Vec<&'j (dyn ToSql + Sync)>> {
    jobs.iter().map(|job| job.params.iter().map(|p| p.as_ref() as &(dyn ToSql + Sync)).collect()).collect()
}

fn strs<'a, T: 'a>(rows: impl IntoIterator<Item = &'a T>, f: impl Fn(&'a T) -> &'a str) -> Param<'a> {
    param(rows.into_iter().map(f).collect::<Vec<&str>>())
}

fn opt_strs<'a, T: 'a>(rows: &'a [T], f: impl Fn(&'a T) -> Option<&'a str>) -> Param<'a> {
    param(rows.iter().map(f).collect::<Vec<Option<&str>>>())
}

fn ints<'a, T>(rows: &[T], f: impl Fn(&T) -> i64) -> Param<'a> {
    param(rows.iter().map(f).collect::<Vec<i64>>())
}

fn opt_ints<'a, T>(rows: &[T], f: impl Fn(&T) -> Option<i64>) -> Param<'a> {
    param(rows.iter().map(f).collect::<Vec<Option<i64>>>())
}

/// Amounts as BIGINT; one out of range refuses the batch as a constraint.
fn amounts<'a, T>(rows: &[T], f: impl Fn(&T) -> u64) -> Result<Param<'a>, StoreError> {
    Ok(param(rows.iter().map(|row| int(f(row))).collect::<Result<Vec<i64>, _>>()?))
}

fn bools<'a, T>(rows: &[T], f: impl Fn(&T) -> bool) -> Param<'a> {
    param(rows.iter().map(f).collect::<Vec<bool>>())
}

impl Engine for PgEngine {
    fn begin(&mut self) -> Result<(), StoreError> {
        let closed = self.connection.as_ref().is_none_or(|c| c.client.is_closed());
        if closed {
            self.connection = None;
            let fresh = self.runtime.block_on(Connection::open(&self.database))?;
            self.connection = Some(fresh);
            tracing::info!("writer reconnected to PostgreSQL");
        }
        self.begin_pending = true;
        Ok(())
    }

    fn load(&mut self, keys: &Keys) -> Result<Snapshot, StoreError> {
        let connection = live(&self.connection)?;
        let st = &connection.statements;
        let mut jobs = vec![Job::new(&st.head, Vec::new())];
        let mut tables = Vec::new();
        let candidates = load_candidates(st, keys);
        for (table, statement, params, empty) in candidates {
            if !empty {
                tables.push(table);
                jobs.push(Job::new(statement, params));
            }
        }
        let results = pipeline(&self.runtime, &connection.client, &mut self.begin_pending, &jobs, false)?;
        let mut results = results.into_iter();
        let head_rows = results.next().unwrap_or_default();
        let head_row = head_rows.first().ok_or_else(|| StoreError::Corrupt("chain head row missing".into()))?;
        if let Some(fence) = &self.fence {
            // Under the row lock this batch holds until COMMIT: the epoch cannot move before then.
            fence.check(rows::get::<i64>(head_row, 2)?)?;
        }
        let mut snapshot = Snapshot::empty(ChainHead {
            seq: u64::try_from(rows::get::<i64>(head_row, 0)?)
                .map_err(|_| StoreError::Corrupt("negative chain head".into()))?,
            hash: rows::get(head_row, 1)?,
        });
        for (table, rows) in tables.into_iter().zip(results) {
            fill(&mut snapshot, table, &rows)?;
        }
        Ok(snapshot)
    }

    fn write(&mut self, c: &Changes) -> Result<(), StoreError> {
        let connection = live(&self.connection)?;
        let st = &connection.statements;
        // One `doc_parties` row per distinct party of each new document.
        let doc_parties: Vec<(&str, &str, &str)> = c
            .insert_docs
            .iter()
            .flat_map(|d| {
                let parties: BTreeSet<&str> = d.parties.iter().map(|p| p.0.as_str()).collect();
                parties.into_iter().map(|party| (d.kind.as_str(), party, d.id.as_str()))
            })
            .collect();
        let mut jobs = Vec::new();
        let names = new_names(c);
        if !names.is_empty() {
            jobs.push(Job::new(&st.insert_names, vec![param(names)]));
        }
        member_jobs(st, c, &mut jobs)?;
        balance_jobs(st, c, &mut jobs)?;
        hold_jobs(st, c, &mut jobs)?;
        payment_jobs(st, c, &mut jobs)?;
        doc_jobs(st, c, &doc_parties, &mut jobs)?;
        record_jobs(st, c, &mut jobs)?;
        if jobs.is_empty() {
            return Ok(());
        }
        // COMMIT rides in the same round trip as the writes. Any failure above
        // aborts the transaction, and the server then answers COMMIT with a rollback.
        self.ended_in_write = true;
        pipeline(&self.runtime, &connection.client, &mut self.begin_pending, &jobs, true)?;
        Ok(())
    }

    fn commit(&mut self) -> Result<(), StoreError> {
        if std::mem::take(&mut self.ended_in_write) {
            return Ok(()); // `write` committed already.
        }
        if std::mem::take(&mut self.begin_pending) {
            return Ok(()); // Nothing was sent: there is no transaction to end.
        }
        self.simple("COMMIT")
    }

    fn prune_idempotency(&mut self, before: Timestamp, limit: usize) -> Result<usize, StoreError> {
        let connection = live(&self.connection)?;
        let sql = "DELETE FROM idempotency WHERE ctid IN (SELECT ctid FROM idempotency WHERE created_at < $1 LIMIT $2)";
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        let deleted = self.runtime.block_on(connection.client.execute(sql, &[&before.0, &limit])).map_err(pg_error)?;
        Ok(deleted as usize)
    }

    fn rollback(&mut self) {
        if std::mem::take(&mut self.begin_pending) {
            return;
        }
        if std::mem::take(&mut self.ended_in_write) {
            return; // The pipelined COMMIT met an aborted transaction and rolled it back.
        }
        if let Err(error) = self.simple("ROLLBACK") {
            tracing::warn!(%error, "writer rollback failed");
        }
    }
}

/// Every name the batch's compact rows refer to, once each.
fn new_names(c: &Changes) -> Vec<&str> {
    let mut names = BTreeSet::new();
    names.extend(c.insert_holds.iter().map(|h| h.account.0.as_str()));
    for t in &c.insert_tokens {
        names.extend([t.buyer.0.as_str(), t.merchant.0.as_str()]);
    }
    for s in &c.insert_settlements {
        names.extend([s.buyer.0.as_str(), s.merchant.0.as_str()]);
    }
    for t in &c.insert_transfers {
        names.extend([t.debit.0.as_str(), t.credit.0.as_str(), t.authored_by.0.as_str(), t.on_behalf_of.0.as_str()]);
    }
    for e in &c.insert_events {
        names.extend([e.kind.as_str(), e.authored_by.0.as_str(), e.on_behalf_of.0.as_str()]);
    }
    names.into_iter().collect()
}

fn fill(snapshot: &mut Snapshot, table: Table, found: &[Row]) -> Result<(), StoreError> {
    let s = snapshot;
    for r in found {
        match table {
            Table::Members => {
                let row = rows::member(r, 0)?;
                s.members.insert(row.id.clone(), row);
            }
            Table::Handles => {
                let row = rows::handle(r, 0)?;
                s.handles.insert(row.handle.clone(), row);
            }
            Table::Credentials => {
                let row = rows::credential(r, 0)?;
                s.credentials.insert(row.hash.clone(), row);
            }
            Table::Invites => {
                let row = rows::invite(r, 0)?;
                s.invites.insert(row.code_hash.clone(), row);
            }
            Table::Accounts => {
                let row = rows::account(r, 0)?;
                s.accounts.insert(row.id.clone(), row);
            }
            Table::Budgets => {
                let row = rows::budget(r, 0)?;
                s.budgets.insert(row.agent.clone(), row);
            }
            Table::Holds => {
                let row = rows::hold(r, 0)?;
                s.holds.insert(row.id.clone(), row);
            }
            Table::Tokens => {
                let row = rows::token(r, 0)?;
                s.tokens.insert(row.jti.clone(), row);
            }
            Table::SettlementsByToken => {
                let row = rows::settlement(r, 0)?;
                s.settlements_by_token.insert(row.jti.clone(), row);
            }
            Table::SettlementsByOrder => {
                let row = rows::settlement(r, 0)?;
                let key = (row.merchant.clone(), row.order_id.clone());
                s.settlements_by_order.insert(key, row);
            }
            Table::Idem => {
                let row = rows::idem(r, 0)?;
                s.idem.insert((row.scope.clone(), row.key.clone()), row);
            }
            Table::Docs => {
                let row = rows::doc(r, 0)?;
                s.docs.insert((row.kind, row.id.clone()), row);
            }
            Table::Blobs => {
                s.blobs.insert(rows::get(r, 0)?);
            }
        }
    }
    Ok(())
}

/// The writes of members, handles, credentials and invites.
fn member_jobs<'a>(st: &'a WriteStatements, c: &'a Changes, jobs: &mut Vec<Job<'a>>) -> Result<(), StoreError> {
    if !c.insert_members.is_empty() {
        let m = &c.insert_members;
        jobs.push(Job::new(
            &st.insert_members,
            vec![
                strs(m, |m| m.id.0.as_str()),
                strs(m, |m| m.kind.as_str()),
                opt_strs(m, |m| m.owner.as_ref().map(|o| o.0.as_str())),
                strs(m, |m| m.handle.as_str()),
                ints(m, |m| m.created_at.0),
            ],
        ));
    }
    if !c.update_members.is_empty() {
        let m = &c.update_members;
        jobs.push(Job::new(&st.update_members, vec![strs(m, |m| m.id.0.as_str()), strs(m, |m| m.handle.as_str())]));
    }
    if !c.retire_handles.is_empty() {
        jobs.push(Job::new(&st.retire_handles, vec![strs(&c.retire_handles, String::as_str)]));
    }
    if !c.insert_handles.is_empty() {
        let h = &c.insert_handles;
        jobs.push(Job::new(
            &st.insert_handles,
            vec![
                strs(h, |h| h.handle.as_str()),
                strs(h, |h| h.member.0.as_str()),
                bools(h, |h| h.retired),
                ints(h, |h| h.since.0),
            ],
        ));
    }
    if !c.upsert_credentials.is_empty() {
        let x = &c.upsert_credentials;
        jobs.push(Job::new(
            &st.upsert_credentials,
            vec![
                strs(x, |x| x.hash.as_str()),
                strs(x, |x| x.member.0.as_str()),
                ints(x, |x| x.created_at.0),
                opt_ints(x, |x| x.revoked_at.map(|t| t.0)),
                opt_strs(x, |x| x.scopes.as_deref()),
            ],
        ));
    }
    if !c.upsert_invites.is_empty() {
        let x = &c.upsert_invites;
        jobs.push(Job::new(
            &st.upsert_invites,
            vec![
                strs(x, |x| x.code_hash.as_str()),
                strs(x, |x| x.owner.0.as_str()),
                ints(x, |x| x.expires_at.0),
                opt_strs(x, |x| x.used_by.as_ref().map(|m| m.0.as_str())),
                opt_ints(x, |x| x.used_at.map(|t| t.0)),
            ],
        ));
    }
    Ok(())
}

/// The writes of accounts and budgets.
fn balance_jobs<'a>(st: &'a WriteStatements, c: &'a Changes, jobs: &mut Vec<Job<'a>>) -> Result<(), StoreError> {
    if !c.upsert_accounts.is_empty() {
        let a = &c.upsert_accounts;
        jobs.push(Job::new(
            &st.upsert_accounts,
            vec![
                strs(a, |a| a.id.0.as_str()),
                bools(a, |a| a.allow_negative),
                amounts(a, |a| a.debits_posted)?,
                amounts(a, |a| a.credits_posted)?,
                amounts(a, |a| a.debits_pending)?,
            ],
        ));
    }
    if !c.upsert_budgets.is_empty() {
        let b = &c.upsert_budgets;
        jobs.push(Job::new(
            &st.upsert_budgets,
            vec![
                strs(b, |b| b.agent.0.as_str()),
                amounts(b, |b| b.per_call_max.0)?,
                amounts(b, |b| b.per_day_max.0)?,
                amounts(b, |b| b.total_max.0)?,
                amounts(b, |b| b.spent_total.0)?,
                ints(b, |b| b.day),
                amounts(b, |b| b.spent_day.0)?,
            ],
        ));
    }
    Ok(())
}

/// The writes of new and resolving holds.
fn hold_jobs<'a>(st: &'a WriteStatements, c: &'a Changes, jobs: &mut Vec<Job<'a>>) -> Result<(), StoreError> {
    if !c.insert_holds.is_empty() {
        let h = &c.insert_holds;
        jobs.push(Job::new(
            &st.insert_holds,
            vec![
                strs(h, |h| h.id.0.as_str()),
                strs(h, |h| h.account.0.as_str()),
                amounts(h, |h| h.amount.0)?,
                ints(h, |h| h.created_at.0),
                ints(h, |h| h.expires_at.0),
                strs(h, |h| h.state.as_str()),
                amounts(h, |h| h.posted_amount.0)?,
                opt_ints(h, |h| h.resolved_at.map(|t| t.0)),
            ],
        ));
    }
    if !c.resolve_holds.is_empty() {
        let h = &c.resolve_holds;
        let at = h
            .iter()
            .map(|h| {
                h.resolved_at
                    .map(|t| t.0)
                    .ok_or_else(|| StoreError::Constraint(format!("resolved hold {} has no time", h.id)))
            })
            .collect::<Result<Vec<i64>, _>>()?;
        let params = || -> Result<Vec<Param<'_>>, StoreError> {
            Ok(vec![
                strs(h, |h| h.id.0.as_str()),
                strs(h, |h| h.state.as_str()),
                amounts(h, |h| h.posted_amount.0)?,
                param(at.clone()),
            ])
        };
        let expect_rows = Some((h.len(), "holds being resolved were pending"));
        jobs.push(Job { expect_rows, ..Job::new(&st.resolve_holds, params()?) });
    }
    Ok(())
}

/// The writes of tokens, settlements and transfers.
fn payment_jobs<'a>(st: &'a WriteStatements, c: &'a Changes, jobs: &mut Vec<Job<'a>>) -> Result<(), StoreError> {
    if !c.insert_tokens.is_empty() {
        let t = &c.insert_tokens;
        jobs.push(Job::new(
            &st.insert_tokens,
            vec![
                strs(t, |t| t.jti.0.as_str()),
                strs(t, |t| t.buyer.0.as_str()),
                strs(t, |t| t.merchant.0.as_str()),
                amounts(t, |t| t.max_amount.0)?,
                strs(t, |t| t.order_id.0.as_str()),
                strs(t, |t| t.resource.as_str()),
                strs(t, |t| t.hold.0.as_str()),
                ints(t, |t| t.issued_at.0),
                ints(t, |t| t.expires_at.0),
            ],
        ));
    }
    if !c.insert_settlements.is_empty() {
        let s = &c.insert_settlements;
        jobs.push(Job::new(
            &st.insert_settlements,
            vec![
                strs(s, |s| s.id.as_str()),
                strs(s, |s| s.jti.0.as_str()),
                strs(s, |s| s.buyer.0.as_str()),
                strs(s, |s| s.merchant.0.as_str()),
                strs(s, |s| s.order_id.0.as_str()),
                amounts(s, |s| s.amount.0)?,
                amounts(s, |s| s.fee.0)?,
                amounts(s, |s| s.net.0)?,
                ints(s, |s| s.settled_at.0),
            ],
        ));
    }
    if !c.insert_transfers.is_empty() {
        let t = &c.insert_transfers;
        jobs.push(Job::new(
            &st.insert_transfers,
            vec![
                strs(t, |t| t.id.0.as_str()),
                strs(t, |t| t.debit.0.as_str()),
                strs(t, |t| t.credit.0.as_str()),
                amounts(t, |t| t.amount.0)?,
                strs(t, |t| t.kind.as_str()),
                opt_strs(t, |t| t.hold.as_ref().map(|h| h.0.as_str())),
                strs(t, |t| t.link.as_str()),
                strs(t, |t| t.authored_by.0.as_str()),
                strs(t, |t| t.on_behalf_of.0.as_str()),
                ints(t, |t| t.at.0),
            ],
        ));
    }
    Ok(())
}

/// The writes of idempotency records, blobs, events and the chain head.
fn record_jobs<'a>(st: &'a WriteStatements, c: &'a Changes, jobs: &mut Vec<Job<'a>>) -> Result<(), StoreError> {
    if !c.insert_idem.is_empty() {
        let r = &c.insert_idem;
        jobs.push(Job::new(
            &st.insert_idem,
            vec![
                strs(r, |r| r.scope.as_str()),
                strs(r, |r| r.key.as_str()),
                strs(r, |r| r.fingerprint.as_str()),
                strs(r, |r| r.outcome.as_str()),
                ints(r, |r| r.created_at.0),
                strs(r, |r| r.tag.as_str()),
            ],
        ));
    }
    if !c.insert_blobs.is_empty() {
        let b = &c.insert_blobs;
        let parties = b.iter().map(|b| serde_json::to_string(&b.parties)).collect::<Result<Vec<String>, _>>();
        jobs.push(Job::new(
            &st.insert_blobs,
            vec![
                strs(b, |b| b.sha256.as_str()),
                strs(b, |b| b.content_type.as_str()),
                ints(b, |b| b.bytes.len() as i64),
                param(b.iter().map(|b| b.bytes.as_slice()).collect::<Vec<&[u8]>>()),
                param(parties.map_err(|e| StoreError::Corrupt(e.to_string()))?),
                ints(b, |b| b.created_at.0),
            ],
        ));
    }
    if let Some(last) = c.insert_events.last() {
        let e = &c.insert_events;
        jobs.push(Job::new(
            &st.insert_events,
            vec![
                amounts(e, |e| e.seq)?,
                strs(e, |e| e.hash.as_str()),
                strs(e, |e| e.kind.as_str()),
                param(e.iter().map(|e| packed::pack_body(&e.body.to_string())).collect::<Vec<Vec<u8>>>()),
                strs(e, |e| e.authored_by.0.as_str()),
                strs(e, |e| e.on_behalf_of.0.as_str()),
                ints(e, |e| e.at.0),
            ],
        ));
        jobs.push(Job::new(&st.set_head, vec![param(int(last.seq)?), param(last.hash.as_str())]));
    }
    Ok(())
}

/// Each table a batch may read, its statement and parameters, and whether the keys name none of it.
fn load_candidates<'a>(st: &'a WriteStatements, keys: &'a Keys) -> Vec<(Table, &'a Statement, Vec<Param<'a>>, bool)> {
    vec![
        (Table::Members, &st.load_members, vec![strs(&keys.members, |m| m.0.as_str())], keys.members.is_empty()),
        (Table::Handles, &st.load_handles, vec![strs(&keys.handles, String::as_str)], keys.handles.is_empty()),
        (
            Table::Credentials,
            &st.load_credentials,
            vec![strs(&keys.credentials, String::as_str)],
            keys.credentials.is_empty(),
        ),
        (Table::Invites, &st.load_invites, vec![strs(&keys.invites, String::as_str)], keys.invites.is_empty()),
        (Table::Accounts, &st.load_accounts, vec![strs(&keys.accounts, |a| a.0.as_str())], keys.accounts.is_empty()),
        (Table::Budgets, &st.load_budgets, vec![strs(&keys.budgets, |m| m.0.as_str())], keys.budgets.is_empty()),
        (Table::Holds, &st.load_holds, vec![strs(&keys.holds, |h| h.0.as_str())], keys.holds.is_empty()),
        (Table::Tokens, &st.load_tokens, vec![strs(&keys.tokens, |t| t.0.as_str())], keys.tokens.is_empty()),
        (
            Table::SettlementsByToken,
            &st.load_settlements_by_token,
            vec![strs(&keys.settlements_by_token, |t| t.0.as_str())],
            keys.settlements_by_token.is_empty(),
        ),
        (
            Table::SettlementsByOrder,
            &st.load_settlements_by_order,
            vec![
                strs(&keys.settlements_by_order, |(m, _)| m.0.as_str()),
                strs(&keys.settlements_by_order, |(_, o)| o.0.as_str()),
            ],
            keys.settlements_by_order.is_empty(),
        ),
        (
            Table::Idem,
            &st.load_idem,
            vec![strs(&keys.idem, |(scope, _)| scope.as_str()), strs(&keys.idem, |(_, key)| key.as_str())],
            keys.idem.is_empty(),
        ),
        (
            Table::Docs,
            &st.load_docs,
            vec![strs(&keys.docs, |(kind, _)| kind.as_str()), strs(&keys.docs, |(_, id)| id.as_str())],
            keys.docs.is_empty(),
        ),
        (Table::Blobs, &st.load_blobs, vec![strs(&keys.blobs, String::as_str)], keys.blobs.is_empty()),
    ]
}

/// The writes of new and changed documents, with their party index.
fn doc_jobs<'a>(
    st: &'a WriteStatements,
    c: &'a Changes,
    doc_parties: &'a [(&'a str, &'a str, &'a str)],
    jobs: &mut Vec<Job<'a>>,
) -> Result<(), StoreError> {
    if !c.insert_docs.is_empty() {
        let d = &c.insert_docs;
        jobs.push(Job::new(
            &st.insert_docs,
            vec![
                strs(d, |d| d.kind.as_str()),
                strs(d, |d| d.id.as_str()),
                param(d.iter().map(rows::doc_body).collect::<Result<Vec<String>, _>>()?),
                opt_ints(d, |d| d.due_at.map(|t| t.0)),
                param(d.iter().map(rows::doc_parties).collect::<Vec<String>>()),
            ],
        ));
    }
    if !doc_parties.is_empty() {
        let p = doc_parties;
        jobs.push(Job::new(
            &st.insert_doc_parties,
            vec![strs(p, |row| row.0), strs(p, |row| row.1), strs(p, |row| row.2)],
        ));
    }
    if !c.update_docs.is_empty() {
        let d = &c.update_docs;
        let params = vec![
            strs(d, |d| d.kind.as_str()),
            strs(d, |d| d.id.as_str()),
            param(d.iter().map(rows::doc_body).collect::<Result<Vec<String>, _>>()?),
            opt_ints(d, |d| d.due_at.map(|t| t.0)),
        ];
        let expect_rows = Some((d.len(), "documents being updated were stored"));
        jobs.push(Job { expect_rows, ..Job::new(&st.update_docs, params) });
    }
    Ok(())
}

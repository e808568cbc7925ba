//! The baseline peer: the same paid-call API as Bazaar (`POST /v1/tokens`,
//! `/v1/tokens/verify`, `/v1/settlements`, bearer credentials, problem+json,
//! `Idempotency-Key` defaulting to the order) built the plain way on
//! PostgreSQL: a pool of connections, `synchronous_commit = on`, and one
//! transaction per money-moving request.
//!
//! Settle: `INSERT` the idempotency row `ON CONFLICT DO NOTHING` (a hit
//! returns the stored response), lock the token, lock both accounts
//! `FOR UPDATE` in sorted id order, debit with `balance - amount >= 0`,
//! credit, insert the transfer, mark the token, store the response, `COMMIT`.
//! Token: insert the token row and reserve its amount on the buyer in one
//! transaction. Verify: read the token row. Every request first looks its
//! bearer credential up by hash, as Bazaar does.
//!
//! Batched, as Bazaar's `POST /v1/tokens/batch` and `/v1/settlements/batch`
//! (`{"items": [...]}` answered `{"results": [{status, replayed, body}]}`):
//! the same statements per item, all items of a batch in **one transaction and
//! one commit**, a refused item answered alone without failing the others (a
//! token whose hold is refused is deleted again before the next item). That is
//! the plain design given the same batching, so the batched ratio compares
//! like with like. Items are applied one after another on one connection.

use crate::drive::Party;
use crate::limits::BASELINE_TOKEN_TTL_MS;
use crate::metrics::Recorder;
use anyhow::{Context, Result};
use axum::extract::{MatchedPath, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::Router;
use base64::Engine as _;
use bytes::Bytes;
use rand::RngCore;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use sha2::{Digest, Sha256};
use std::sync::{Arc, Mutex};
use tokio::sync::{Semaphore, SemaphorePermit};
use tokio_postgres::{Client, NoTls, Statement};

/// The schema, applied (idempotently) when the peer starts.
pub const SCHEMA: &str = include_str!("baseline.sql");
/// `application_name` of the peer's connections.
const APPLICATION_NAME: &str = "bazaar-bench-baseline";
/// Bodies larger than this are refused, as Bazaar does.
const REQUEST_BODY_BYTES_MAX: usize = bazaar_types::limits::REQUEST_BODY_BYTES_MAX;
const ORDER_ID_LEN_MAX: usize = bazaar_types::limits::ORDER_ID_LEN_MAX;
const AMOUNT_MINOR_MAX: u64 = bazaar_types::limits::AMOUNT_MINOR_MAX;

/// Declares the prepared statements one pooled connection holds.
macro_rules! statements {
    ($($field:ident = $sql:expr;)*) => {
        struct Statements {
            $($field: Statement,)*
        }

        impl Statements {
            async fn prepare(client: &Client) -> Result<Statements, tokio_postgres::Error> {
                let ($($field,)*) = futures::try_join!($(client.prepare($sql),)*)?;
                Ok(Statements { $($field,)* })
            }
        }
    };
}

statements! {
    auth = "SELECT id, kind FROM members WHERE credential_hash = $1";
    member_kind = "SELECT kind FROM members WHERE id = $1";
    token_insert = "INSERT INTO tokens (id, buyer, merchant, max_amount, order_id, resource, issued_at_ms, expires_at_ms) \
        VALUES ($1, $2, $3, $4, $5, $6, $7, $8) ON CONFLICT (buyer, merchant, order_id) DO NOTHING RETURNING id";
    token_by_order = "SELECT id, max_amount, resource, expires_at_ms FROM tokens \
        WHERE buyer = $1 AND merchant = $2 AND order_id = $3";
    hold = "UPDATE accounts SET held = held + $2 WHERE id = $1 AND balance - held >= $2";
    token_read = "SELECT buyer, merchant, max_amount, order_id, state, expires_at_ms, resource FROM tokens WHERE id = $1";
    idem_claim = "INSERT INTO idempotency (scope, key, fingerprint, created_at_ms) VALUES ($1, $2, $3, $4) \
        ON CONFLICT (scope, key) DO NOTHING";
    idem_get = "SELECT fingerprint, status, response FROM idempotency WHERE scope = $1 AND key = $2";
    idem_done = "UPDATE idempotency SET status = $3, response = $4 WHERE scope = $1 AND key = $2";
    token_lock = "SELECT buyer, merchant, max_amount, order_id, state, expires_at_ms FROM tokens WHERE id = $1 FOR UPDATE";
    lock_accounts = "SELECT id FROM accounts WHERE id = ANY($1::text[]) ORDER BY id FOR UPDATE";
    debit = "UPDATE accounts SET balance = balance - $2, held = held - $3 WHERE id = $1 AND balance - $2 >= 0";
    credit = "UPDATE accounts SET balance = balance + $2 WHERE id = $1";
    transfer = "INSERT INTO transfers (debit, credit, amount, token, idem_scope, idem_key, created_at_ms) \
        VALUES ($1, $2, $3, $4, $5, $6, $7) RETURNING id";
    token_settled = "UPDATE tokens SET state = 'settled', settled_amount = $2 WHERE id = $1";
    token_unissue = "DELETE FROM tokens WHERE id = $1";
}

/// Items one batch carries at most (as Bazaar's `BATCH_ITEMS_MAX`).
const BATCH_ITEMS_MAX: usize = 1_000;
/// A batch body's byte limit (as Bazaar's `BATCH_BODY_BYTES_MAX`).
const BATCH_BODY_BYTES_MAX: usize = 1024 * 1024;

// ---- the harness's side: setup and the correctness gate ----------------------

/// Creates buyers (each funded with `fund`) and merchants directly in the
/// database; returns their ids and credentials.
pub async fn setup(client: &Client, buyers: usize, merchants: usize, fund: i64) -> Result<(Vec<Party>, Vec<Party>)> {
    let mut made = (Vec::new(), Vec::new());
    client.batch_execute("BEGIN").await?;
    for (kind, count, balance) in [("buyer", buyers, fund), ("merchant", merchants, 0)] {
        for i in 0..count {
            let party = Party { id: format!("{kind}-{i:04}"), credential: format!("bbc_{}", random_b64(32)) };
            client
                .execute(
                    "INSERT INTO members (id, kind, credential_hash) VALUES ($1, $2, $3)",
                    &[&party.id, &kind, &sha256_hex(party.credential.as_bytes())],
                )
                .await?;
            client.execute("INSERT INTO accounts (id, balance) VALUES ($1, $2)", &[&party.id, &balance]).await?;
            if kind == "buyer" { &mut made.0 } else { &mut made.1 }.push(party);
        }
    }
    client.batch_execute("COMMIT").await?;
    Ok(made)
}

/// What the gate reads from the baseline's database.
#[derive(Debug, Default, Serialize)]
pub struct Ledger {
    pub balance_sum: i64,
    pub overdrawn_accounts: i64,
    pub transfers: i64,
    pub keys_with_many_transfers: i64,
    pub orders_with_many_transfers: i64,
    pub held_sum: i64,
    pub pending_token_sum: i64,
}

pub async fn ledger(client: &Client) -> Result<Ledger> {
    let one = |sql: &'static str| async move {
        let row = client.query_one(sql, &[]).await.with_context(|| sql.to_string())?;
        anyhow::Ok(row.get::<_, i64>(0))
    };
    Ok(Ledger {
        balance_sum: one("SELECT COALESCE(sum(balance), 0)::bigint FROM accounts").await?,
        overdrawn_accounts: one("SELECT count(*) FROM accounts WHERE balance - held < 0 OR held < 0").await?,
        transfers: one("SELECT count(*) FROM transfers").await?,
        keys_with_many_transfers: one(
            "SELECT count(*) FROM (SELECT 1 FROM transfers GROUP BY idem_scope, idem_key HAVING count(*) > 1) d",
        )
        .await?,
        orders_with_many_transfers: one(
            "SELECT count(*) FROM (SELECT 1 FROM transfers x JOIN tokens t ON t.id = x.token \
             GROUP BY t.merchant, t.order_id HAVING count(*) > 1) d",
        )
        .await?,
        held_sum: one("SELECT COALESCE(sum(held), 0)::bigint FROM accounts").await?,
        pending_token_sum: one("SELECT COALESCE(sum(max_amount), 0)::bigint FROM tokens WHERE state = 'pending'")
            .await?,
    })
}

// ---- the peer: a small pool ---------------------------------------------------

struct Conn {
    client: Client,
    st: Statements,
}

impl Conn {
    async fn open(config: &tokio_postgres::Config) -> Result<Conn, tokio_postgres::Error> {
        let (client, connection) = config.connect(NoTls).await?;
        tokio::spawn(async move {
            if let Err(error) = connection.await {
                eprintln!("baseline: connection ended: {error}");
            }
        });
        let st = Statements::prepare(&client).await?;
        Ok(Conn { client, st })
    }
}

/// A fixed number of connections; a request waits for a free one.
struct Pool {
    idle: Mutex<Vec<Conn>>,
    permits: Semaphore,
    config: tokio_postgres::Config,
}

struct Pooled<'a> {
    conn: Option<Conn>,
    pool: &'a Pool,
    _permit: SemaphorePermit<'a>,
}

impl Pool {
    async fn open(config: tokio_postgres::Config, size: usize) -> Result<Pool, tokio_postgres::Error> {
        let mut idle = Vec::with_capacity(size);
        for _ in 0..size {
            idle.push(Conn::open(&config).await?);
        }
        Ok(Pool { idle: Mutex::new(idle), permits: Semaphore::new(size), config })
    }

    async fn get(&self) -> Result<Pooled<'_>, tokio_postgres::Error> {
        let permit = self.permits.acquire().await.expect("the pool's semaphore is never closed");
        let idle = self.idle.lock().unwrap_or_else(|p| p.into_inner()).pop();
        let conn = match idle {
            Some(conn) if !conn.client.is_closed() => conn,
            _ => Conn::open(&self.config).await?,
        };
        Ok(Pooled { conn: Some(conn), pool: self, _permit: permit })
    }
}

impl Drop for Pooled<'_> {
    fn drop(&mut self) {
        if let Some(conn) = self.conn.take().filter(|c| !c.client.is_closed()) {
            self.pool.idle.lock().unwrap_or_else(|p| p.into_inner()).push(conn);
        }
    }
}

impl Pooled<'_> {
    fn parts(&mut self) -> (&mut Client, &Statements) {
        let conn = self.conn.as_mut().expect("a pooled connection is present until dropped");
        (&mut conn.client, &conn.st)
    }
}

// ---- the peer: HTTP -------------------------------------------------------------

struct App {
    pool: Pool,
    metrics: Recorder,
}

/// Runs the peer on 127.0.0.1:`port` until SIGTERM or Ctrl-C. Prints
/// `listening on http://…` once it accepts connections.
pub async fn serve(url: &str, port: u16, pool_size: usize) -> Result<()> {
    let mut config: tokio_postgres::Config = url.parse().context("parsing --database-url")?;
    config.application_name(APPLICATION_NAME);
    config.options("-c synchronous_commit=on");
    let (client, connection) = config.connect(NoTls).await.context("connecting to PostgreSQL")?;
    let driver = tokio::spawn(connection);
    client.batch_execute(SCHEMA).await.context("applying the baseline schema")?;
    drop(client);
    let _ = driver.await;
    let pool = Pool::open(config, pool_size).await.context("opening the pool")?;
    let app = Arc::new(App { pool, metrics: Recorder::default() });
    let router = Router::new()
        .route("/healthz", get(|| async { "ok" }))
        .route("/metrics", get(render_metrics))
        .route("/v1/tokens", post(issue_token))
        .route("/v1/tokens/verify", post(verify_token))
        .route("/v1/settlements", post(settle))
        .layer(axum::extract::DefaultBodyLimit::max(REQUEST_BODY_BYTES_MAX))
        .route(
            "/v1/tokens/batch",
            post(issue_token_batch).layer(axum::extract::DefaultBodyLimit::max(BATCH_BODY_BYTES_MAX)),
        )
        .route(
            "/v1/settlements/batch",
            post(settle_batch).layer(axum::extract::DefaultBodyLimit::max(BATCH_BODY_BYTES_MAX)),
        )
        .layer(middleware::from_fn_with_state(app.clone(), observe))
        .with_state(app);
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", port)).await.context("binding")?;
    println!("listening on http://{}", listener.local_addr()?);
    axum::serve(listener, router).with_graceful_shutdown(shutdown_signal()).await?;
    Ok(())
}

async fn shutdown_signal() {
    let mut terminate = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()).ok();
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = async { match terminate.as_mut() { Some(t) => { t.recv().await; } None => std::future::pending().await } } => {}
    }
}

async fn observe(State(app): State<Arc<App>>, request: axum::extract::Request, next: Next) -> Response {
    let route = request.extensions().get::<MatchedPath>().map(|p| p.as_str().to_string());
    let started = std::time::Instant::now();
    let response = next.run(request).await;
    let route = route.unwrap_or_else(|| "unmatched".into());
    app.metrics.record(&route, response.status().as_u16(), started.elapsed().as_secs_f64());
    response
}

async fn render_metrics(State(app): State<Arc<App>>) -> String {
    app.metrics.render()
}

/// Why a request failed: a refusal (stored for idempotent replays) or the database.
enum Fail {
    Refuse(u16, Value),
    Db(tokio_postgres::Error),
}

impl From<tokio_postgres::Error> for Fail {
    fn from(error: tokio_postgres::Error) -> Fail {
        Fail::Db(error)
    }
}

impl IntoResponse for Fail {
    fn into_response(self) -> Response {
        match self {
            Fail::Refuse(status, body) => respond(status, body.to_string(), false),
            Fail::Db(error) => {
                let detail = match error.as_db_error() {
                    Some(db) => format!("[{}] {}", db.code().code(), db.message()),
                    None => error.to_string(),
                };
                let (status, body) = problem(503, "storage_unavailable", &detail);
                respond(status, body.to_string(), false)
            }
        }
    }
}

fn problem(status: u16, code: &str, detail: &str) -> (u16, Value) {
    (
        status,
        json!({"type": format!("https://bazaar.invalid/problems/{code}"), "title": code, "status": status, "code": code, "detail": detail}),
    )
}

fn refuse(status: u16, code: &str, detail: &str) -> Fail {
    let (status, body) = problem(status, code, detail);
    Fail::Refuse(status, body)
}

fn respond(status: u16, body: String, replayed: bool) -> Response {
    let content_type = if status >= 400 { "application/problem+json" } else { "application/json" };
    let status = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let mut response = (status, [(axum::http::header::CONTENT_TYPE, content_type)], body).into_response();
    if replayed {
        response.headers_mut().insert("idempotent-replayed", HeaderValue::from_static("true"));
    }
    response
}

fn bearer(headers: &HeaderMap) -> Result<&str, Fail> {
    headers
        .get(axum::http::header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .filter(|c| !c.is_empty() && c.len() <= 128)
        .ok_or_else(|| refuse(401, "unauthenticated", "Send `Authorization: Bearer <credential>`."))
}

fn parse<T: for<'de> Deserialize<'de>>(body: &Bytes) -> Result<T, Fail> {
    serde_json::from_slice(body).map_err(|e| refuse(400, "invalid_request", &e.to_string()))
}

struct Caller {
    id: String,
    kind: String,
}

async fn authenticate(client: &Client, st: &Statements, credential: &str) -> Result<Caller, Fail> {
    let row = client.query_opt(&st.auth, &[&sha256_hex(credential.as_bytes())]).await?;
    let row = row.ok_or_else(|| refuse(401, "unauthenticated", "Unknown credential."))?;
    Ok(Caller { id: row.get(0), kind: row.get(1) })
}

fn check_amount(value: u64, field: &str) -> Result<i64, Fail> {
    if value == 0 || value > AMOUNT_MINOR_MAX {
        return Err(refuse(422, "amount_invalid", &format!("`{field}` must be between 1 and {AMOUNT_MINOR_MAX}.")));
    }
    Ok(value as i64)
}

fn check_order(order_id: &str) -> Result<(), Fail> {
    if order_id.is_empty() || order_id.len() > ORDER_ID_LEN_MAX || order_id.chars().any(char::is_control) {
        return Err(refuse(422, "invalid_request", "`order_id` must be 1-128 printable characters."));
    }
    Ok(())
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct TokenRequest {
    merchant: String,
    max_amount_minor: u64,
    order_id: String,
    resource: String,
}

/// One transaction: the token row, then the hold on the buyer's account.
async fn issue_token(State(app): State<Arc<App>>, headers: HeaderMap, body: Bytes) -> Result<Response, Fail> {
    let (pool, headers, body) = (&app.pool, &headers, &body);
    let credential = bearer(headers)?;
    let request: TokenRequest = parse(body)?;
    let mut pooled = pool.get().await?;
    let (client, st) = pooled.parts();
    let buyer = authenticate(client, st, credential).await?;
    let tx = client.transaction().await?;
    let (status, body, replayed) = token_in(&tx, st, &buyer, &request, now_ms()).await?;
    tx.commit().await?;
    Ok(respond(status, body.to_string(), replayed))
}

/// One token inside `tx`: (status, body, replayed). A refusal leaves nothing written (the token row of a refused
/// hold is deleted again), so a batch's other items commit.
async fn token_in(
    tx: &tokio_postgres::Transaction<'_>,
    st: &Statements,
    buyer: &Caller,
    request: &TokenRequest,
    now: i64,
) -> Result<(u16, Value, bool), Fail> {
    let max = check_amount(request.max_amount_minor, "max_amount_minor")?;
    check_order(&request.order_id)?;
    if buyer.kind != "buyer" {
        return Err(refuse(403, "not_permitted", "Only buyers ask for payment tokens."));
    }
    let merchant = tx.query_opt(&st.member_kind, &[&request.merchant]).await?;
    if merchant.map(|row| row.get::<_, String>(0)).as_deref() != Some("merchant") {
        return Err(refuse(404, "member_not_found", "No such merchant."));
    }
    let id = format!("bt_{}", random_b64(18));
    let expires = now + BASELINE_TOKEN_TTL_MS;
    let params: [&(dyn tokio_postgres::types::ToSql + Sync); 8] =
        [&id, &buyer.id, &request.merchant, &max, &request.order_id, &request.resource, &now, &expires];
    if tx.query_opt(&st.token_insert, &params).await?.is_none() {
        // The same (buyer, merchant, order) asked again: the same token.
        let row = tx.query_one(&st.token_by_order, &[&buyer.id, &request.merchant, &request.order_id]).await?;
        let (id, max, resource, expires): (String, i64, String, i64) = (row.get(0), row.get(1), row.get(2), row.get(3));
        let body = token_body(&id, &buyer.id, &request.merchant, max, &request.order_id, &resource, expires);
        return Ok((201, body, true));
    }
    if tx.execute(&st.hold, &[&buyer.id, &max]).await? == 0 {
        tx.execute(&st.token_unissue, &[&id]).await?;
        return Err(refuse(409, "insufficient_funds", "The buyer's available balance does not cover the token."));
    }
    let body = token_body(&id, &buyer.id, &request.merchant, max, &request.order_id, &request.resource, expires);
    Ok((201, body, false))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Batch<T> {
    items: Vec<T>,
}

/// `{"results": [{status, replayed, body}]}`, as Bazaar answers a batch; each body is already JSON text (a stored
/// answer is written out as it is, not parsed again).
fn batch_answer(results: Vec<(u16, String, bool)>) -> Response {
    let items: Vec<String> = results
        .into_iter()
        .map(|(status, body, replayed)| format!(r#"{{"status":{status},"replayed":{replayed},"body":{body}}}"#))
        .collect();
    respond(200, format!(r#"{{"results":[{}]}}"#, items.join(",")), false)
}

fn batch_items<T: for<'de> Deserialize<'de>>(body: &Bytes) -> Result<Vec<T>, Fail> {
    let batch: Batch<T> = parse(body)?;
    if batch.items.is_empty() || batch.items.len() > BATCH_ITEMS_MAX {
        return Err(refuse(422, "invalid_request", &format!("A batch carries 1 to {BATCH_ITEMS_MAX} items.")));
    }
    Ok(batch.items)
}

/// Every item of the batch in one transaction: one commit for all.
async fn issue_token_batch(State(app): State<Arc<App>>, headers: HeaderMap, body: Bytes) -> Result<Response, Fail> {
    let (pool, headers, body) = (&app.pool, &headers, &body);
    let credential = bearer(headers)?;
    let items: Vec<TokenRequest> = batch_items(body)?;
    let mut pooled = pool.get().await?;
    let (client, st) = pooled.parts();
    let buyer = authenticate(client, st, credential).await?;
    let now = now_ms();
    let tx = client.transaction().await?;
    let mut results = Vec::with_capacity(items.len());
    for request in &items {
        results.push(match token_in(&tx, st, &buyer, request, now).await {
            Ok((status, body, replayed)) => (status, body.to_string(), replayed),
            Err(Fail::Refuse(status, body)) => (status, body.to_string(), false),
            Err(db) => return Err(db),
        });
    }
    tx.commit().await?;
    Ok(batch_answer(results))
}

fn token_body(id: &str, buyer: &str, merchant: &str, max: i64, order: &str, resource: &str, expires: i64) -> Value {
    json!({"jti": id, "token": id, "buyer": buyer, "merchant": merchant, "max_amount_minor": max,
        "order_id": order, "resource": resource, "expires_at_ms": expires})
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct VerifyRequest {
    token: String,
}

/// A read of the token row; only its buyer or merchant may ask.
async fn verify_token(State(app): State<Arc<App>>, headers: HeaderMap, body: Bytes) -> Result<Response, Fail> {
    let (pool, headers, body) = (&app.pool, &headers, &body);
    let credential = bearer(headers)?;
    let request: VerifyRequest = parse(body)?;
    let mut pooled = pool.get().await?;
    let (client, st) = pooled.parts();
    let caller = authenticate(client, st, credential).await?;
    let Some(row) = client.query_opt(&st.token_read, &[&request.token]).await? else {
        return Ok(respond(200, json!({"genuine": false, "reason": "unknown token"}).to_string(), false));
    };
    let (buyer, merchant): (String, String) = (row.get(0), row.get(1));
    if caller.id != buyer && caller.id != merchant {
        return Err(refuse(403, "not_audience", "Only the token's merchant or buyer may verify it."));
    }
    let expires: i64 = row.get(5);
    let state: String = row.get(4);
    let state = if state == "pending" && expires <= now_ms() { "expired".to_string() } else { state };
    let body = json!({"genuine": true, "state": state, "work_order": false, "claims": {
        "sub": buyer, "aud": merchant, "max": row.get::<_, i64>(2), "ord": row.get::<_, String>(3),
        "res": row.get::<_, String>(6), "exp_ms": expires}});
    Ok(respond(200, body.to_string(), false))
}

#[derive(Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
struct SettleRequest {
    token: String,
    amount_minor: u64,
    order_id: String,
}

/// One transaction per settlement; the idempotency row is claimed first and
/// carries the response, refusals included, for replays.
async fn settle(State(app): State<Arc<App>>, headers: HeaderMap, body: Bytes) -> Result<Response, Fail> {
    let (pool, headers, body) = (&app.pool, &headers, &body);
    let credential = bearer(headers)?;
    let request: SettleRequest = parse(body)?;
    let key = match headers.get("idempotency-key").map(|v| v.to_str()) {
        Some(Ok(key)) if !key.is_empty() && key.len() <= 255 => Some(key.to_string()),
        Some(_) => return Err(refuse(422, "idempotency_key_invalid", "`Idempotency-Key` must be printable ASCII.")),
        None => None,
    };
    let mut pooled = pool.get().await?;
    let (client, st) = pooled.parts();
    let merchant = authenticate(client, st, credential).await?;
    let tx = client.transaction().await?;
    let answer = settle_keyed(&tx, st, &merchant, &request, key, now_ms()).await;
    let (status, body, replayed) = match answer {
        Ok(answer) => answer,
        Err(fail) => {
            tx.rollback().await?;
            return Err(fail);
        }
    };
    if replayed {
        tx.rollback().await?;
    } else {
        tx.commit().await?;
    }
    Ok(respond(status, body, replayed))
}

/// One settlement inside `tx` under its idempotency key (default: the order): (status, body, replayed). A new
/// key's answer, refusal or not, is stored with it; a replay writes nothing.
async fn settle_keyed(
    tx: &tokio_postgres::Transaction<'_>,
    st: &Statements,
    merchant: &Caller,
    request: &SettleRequest,
    key: Option<String>,
    now: i64,
) -> Result<(u16, String, bool), Fail> {
    let amount = check_amount(request.amount_minor, "amount_minor")?;
    check_order(&request.order_id)?;
    let key = key.unwrap_or_else(|| format!("order:{}", request.order_id));
    let fingerprint = sha256_hex(serde_json::to_string(&request).unwrap_or_default().as_bytes());
    let scope = format!("{}:settle", merchant.id);
    if tx.execute(&st.idem_claim, &[&scope, &key, &fingerprint, &now]).await? == 0 {
        // Waited for (or found) the key's first request, committed: answer as it did.
        let row = tx.query_one(&st.idem_get, &[&scope, &key]).await?;
        if row.get::<_, String>(0) != fingerprint {
            return Err(refuse(422, "idempotency_key_reused", "This key was used with a different request."));
        }
        return match (row.get::<_, Option<i16>>(1), row.get::<_, Option<String>>(2)) {
            (Some(status), Some(response)) => Ok((status as u16, response, true)),
            _ => Err(refuse(409, "idempotency_in_flight", "A request with this key is still running.")),
        };
    }
    let (status, response) = match settle_in(tx, st, &merchant.id, request, amount, (&scope, &key), now).await {
        Ok(body) => (200, body),
        Err(Fail::Refuse(status, body)) => (status, body),
        Err(db) => return Err(db),
    };
    let response = response.to_string();
    tx.execute(&st.idem_done, &[&scope, &key, &(status as i16), &response]).await?;
    Ok((status, response, false))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct SettleItem {
    token: String,
    amount_minor: u64,
    order_id: String,
    #[serde(default)]
    idempotency_key: Option<String>,
}

/// Every item of the batch in one transaction: one commit for all.
async fn settle_batch(State(app): State<Arc<App>>, headers: HeaderMap, body: Bytes) -> Result<Response, Fail> {
    let (pool, headers, body) = (&app.pool, &headers, &body);
    let credential = bearer(headers)?;
    let items: Vec<SettleItem> = batch_items(body)?;
    let mut pooled = pool.get().await?;
    let (client, st) = pooled.parts();
    let merchant = authenticate(client, st, credential).await?;
    let now = now_ms();
    let tx = client.transaction().await?;
    let mut results = Vec::with_capacity(items.len());
    for item in items {
        let request = SettleRequest { token: item.token, amount_minor: item.amount_minor, order_id: item.order_id };
        let answer = match item.idempotency_key {
            // As the single call refuses a bad `Idempotency-Key`.
            Some(key) if key.is_empty() || key.len() > 255 => {
                Err(refuse(422, "idempotency_key_invalid", "`idempotency_key` must be 1-255 characters."))
            }
            key => settle_keyed(&tx, st, &merchant, &request, key, now).await,
        };
        results.push(match answer {
            Ok(answer) => answer,
            Err(Fail::Refuse(status, body)) => (status, body.to_string(), false),
            Err(db) => return Err(db),
        });
    }
    tx.commit().await?;
    Ok(batch_answer(results))
}

async fn settle_in(
    tx: &tokio_postgres::Transaction<'_>,
    st: &Statements,
    merchant: &str,
    request: &SettleRequest,
    amount: i64,
    (scope, key): (&str, &str),
    now: i64,
) -> Result<Value, Fail> {
    let Some(token) = tx.query_opt(&st.token_lock, &[&request.token]).await? else {
        return Err(refuse(404, "token_not_found", "This peer never issued this token."));
    };
    let (buyer, audience, max, order): (String, String, i64, String) =
        (token.get(0), token.get(1), token.get(2), token.get(3));
    if audience != merchant {
        return Err(refuse(403, "not_audience", "Only the token's merchant may settle it."));
    }
    if order != request.order_id {
        return Err(refuse(409, "order_mismatch", "The token was issued for a different order."));
    }
    if token.get::<_, String>(4) != "pending" {
        return Err(refuse(409, "token_settled", "This token was already settled."));
    }
    if token.get::<_, i64>(5) <= now {
        return Err(refuse(409, "token_expired", "The token expired."));
    }
    if amount > max {
        return Err(refuse(422, "amount_exceeds_token", "Settle between 1 and the token's maximum amount."));
    }
    let mut ids = [buyer.as_str(), merchant];
    ids.sort_unstable();
    tx.query(&st.lock_accounts, &[&&ids[..]]).await?;
    if tx.execute(&st.debit, &[&buyer, &amount, &max]).await? == 0 {
        return Err(refuse(409, "insufficient_funds", "The buyer's balance does not cover the amount."));
    }
    tx.execute(&st.credit, &[&merchant, &amount]).await?;
    let transfer: i64 =
        tx.query_one(&st.transfer, &[&buyer, &merchant, &amount, &request.token, &scope, &key, &now]).await?.get(0);
    tx.execute(&st.token_settled, &[&request.token, &amount]).await?;
    Ok(json!({"settlement_id": format!("stl_{transfer}"), "jti": request.token, "buyer": buyer, "merchant": merchant,
        "order_id": request.order_id, "amount_minor": amount, "transfer": transfer, "settled_at_ms": now}))
}

pub fn sha256_hex(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

/// The baseline peer's one source of randomness (credentials, token ids).
#[allow(clippy::disallowed_methods)] // reason: this is the bench's one source; nothing here is replayed by seed.
pub fn random_b64(bytes: usize) -> String {
    let mut buffer = vec![0u8; bytes];
    rand::thread_rng().fill_bytes(&mut buffer);
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(buffer)
}

/// The wall clock (the baseline peer's, and the stream watchers' for lag):
/// the one place in this crate the time of day is read.
#[allow(clippy::disallowed_methods)]
pub(crate) fn now_ms() -> i64 {
    let since = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
    since.as_millis() as i64
}

//! Paid routes for axum: read the buyer's token, verify it (a receipt check),
//! settle it exactly once, run the handler once per settlement, and keep the
//! handler's response as a **work receipt** keyed by the settlement.
//!
//! A retry or replay of an order that already has a receipt gets the stored
//! response and the handler does not run again — also after the merchant
//! process crashed between settling and answering, because receipts live in
//! an SQLite file (`synchronous = FULL`).
//!
//! Sharp edge: the receipt is written right after the handler returns. If the
//! process dies inside that window, the settlement exists without a receipt and
//! the next retry runs the handler again. Handlers whose effects must never
//! repeat should make them idempotent on the `Bazaar-Settlement` id the
//! middleware passes in the request extensions ([`Settled`]): that id is the
//! handler's own idempotency key, the same on every run for one order.
//!
//! Receipts are kept `WORK_RECEIPT_RETENTION_S` (30 days) and then pruned —
//! when the route opens and every `WORK_RECEIPT_PRUNE_EVERY` receipts stored.
//!
//! Errors name the party at fault: a route refuses to be made without a usable
//! merchant credential ([`merchant_credential_problem`]); if the registry
//! refuses the merchant's credential while it runs, the buyer is answered
//! `503 merchant_unauthenticated` (not `unauthenticated`, which would tell the
//! buyer to fix its own); a token smaller than the price is refused with the
//! route's price in `facts.price_minor`.

use crate::client::{Client, SdkError};
use crate::{PAYMENT_HEADER, SETTLEMENT_HEADER, WORK_RECEIPT_HEADER};
use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{HeaderValue, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use bazaar_types::limits::{WORK_RECEIPT_BYTES_MAX, WORK_RECEIPT_PRUNE_EVERY, WORK_RECEIPT_RETENTION_S};
use rusqlite::{params, Connection, OptionalExtension};
use serde_json::json;
use std::collections::HashMap;
use std::path::Path;
use std::sync::{Arc, Mutex};

/// Where a test or the demo may make the merchant "crash".
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FaultPoint {
    /// Settled, handler not yet run.
    AfterSettle,
    /// Handler ran and its receipt is stored; the answer is never sent.
    BeforeAnswer,
}

/// Decides, per order id, whether to crash at a point. For tests and the demo only.
pub type FaultHook = Arc<dyn Fn(FaultPoint, &str) -> bool + Send + Sync>;

/// Handed to the handler in request extensions.
#[derive(Clone, Debug)]
pub struct Settled {
    pub settlement_id: String,
    pub order_id: String,
    pub buyer: String,
    pub amount_minor: u64,
}

pub use crate::answer::MERCHANT_UNAUTHENTICATED;
/// The status it answers with: the merchant cannot take payments until it is fixed.
pub const MERCHANT_UNAUTHENTICATED_STATUS: StatusCode = StatusCode::SERVICE_UNAVAILABLE;
/// The code of a route that cannot be made with the credential it was given.
pub const MERCHANT_CREDENTIAL_INVALID: &str = "merchant_credential_invalid";
/// An invite's (or owner-issued) credential: it can only rotate, so a merchant cannot run on it.
pub const ENROLLMENT_CREDENTIAL_PREFIX: &str = "bzi_";
/// The placeholder wrappings a merchant credential may not have (`<…>`, `{…}`, `${…}`).
const PLACEHOLDER_WRAPS: [(&str, &str); 3] = [("<", ">"), ("{", "}"), ("${", "}")];

/// Why a merchant cannot run on `credential` (`clients/conformance/contract.json`, `merchant_credential`): none,
/// blank, with whitespace, an enrollment credential, or a placeholder (all capitals, digits and underscores such
/// as `MERCHANT_CREDENTIAL`, or wrapped in `<…>`, `{…}`, `${…}`). `None` when it may be used.
pub fn merchant_credential_problem(credential: Option<&str>) -> Option<String> {
    let Some(credential) = credential else { return Some("no credential was given".into()) };
    if credential.trim().is_empty() {
        return Some("the credential is blank".into());
    }
    if credential.chars().any(char::is_whitespace) {
        return Some(
            "the credential contains whitespace (a stray newline from a file or an unquoted variable?)".into(),
        );
    }
    if credential.starts_with(ENROLLMENT_CREDENTIAL_PREFIX) {
        return Some("this is an enrollment credential (bzi_…): rotate it first (POST /v1/credentials/rotate)".into());
    }
    let capitals = credential.starts_with(|c: char| c.is_ascii_uppercase())
        && credential.chars().all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_');
    let wrapped =
        PLACEHOLDER_WRAPS.iter().any(|(open, close)| credential.starts_with(open) && credential.ends_with(close));
    (capitals || wrapped).then(|| format!("`{credential}` is a placeholder, not a credential"))
}

/// Why a paid route could not be made.
#[derive(Debug, thiserror::Error)]
pub enum PaidRouteError {
    /// The merchant's credential cannot be used ([`MERCHANT_CREDENTIAL_INVALID`]); the reason.
    #[error(
        "merchant_credential_invalid: a merchant needs its own registry credential, and {0}. Enrol the merchant \
         agent (Client::redeem_invite) and pass the credential it got."
    )]
    Credential(String),
    /// The work-receipt store could not be opened.
    #[error("work receipts: {0}")]
    Receipts(#[from] rusqlite::Error),
}

impl PaidRouteError {
    /// The stable code: [`MERCHANT_CREDENTIAL_INVALID`], or `work_receipts_unavailable`.
    pub fn code(&self) -> &'static str {
        match self {
            PaidRouteError::Credential(_) => MERCHANT_CREDENTIAL_INVALID,
            PaidRouteError::Receipts(_) => "work_receipts_unavailable",
        }
    }
}

/// One paid route's settings and its work-receipt store.
pub struct PaidRoute {
    client: Client,
    price_minor: u64,
    receipts: Arc<Mutex<Connection>>,
    /// One lock per settlement so concurrent retries run the handler once.
    running: Mutex<HashMap<String, Arc<tokio::sync::Mutex<()>>>>,
    fault: Option<FaultHook>,
    /// Receipts stored since the route opened (a prune every `WORK_RECEIPT_PRUNE_EVERY`).
    kept: std::sync::atomic::AtomicU64,
}

impl PaidRoute {
    /// `client` carries the merchant's credential; receipts persist in `receipts_path`. Refuses a credential a
    /// merchant cannot run on ([`merchant_credential_problem`]): every buyer would be refused for its mistake.
    pub fn new(client: Client, price_minor: u64, receipts_path: &Path) -> Result<PaidRoute, PaidRouteError> {
        if let Some(problem) = merchant_credential_problem(client.credential()) {
            return Err(PaidRouteError::Credential(problem));
        }
        let conn = Connection::open(receipts_path)?;
        conn.execute_batch(
            "PRAGMA journal_mode = WAL; PRAGMA synchronous = FULL;
             CREATE TABLE IF NOT EXISTS work_receipts (settlement_id TEXT PRIMARY KEY, order_id TEXT NOT NULL,
               status INTEGER NOT NULL, content_type TEXT, body BLOB NOT NULL, created_at INTEGER NOT NULL);
             CREATE INDEX IF NOT EXISTS work_receipts_created ON work_receipts (created_at);",
        )?;
        prune(&conn, WORK_RECEIPT_RETENTION_S)?;
        Ok(PaidRoute {
            // Concurrent requests' settlements leave together in batches (`coalesce`): same answers, fewer calls.
            client: client.coalescing(),
            price_minor,
            receipts: Arc::new(Mutex::new(conn)),
            running: Default::default(),
            fault: None,
            kept: Default::default(),
        })
    }

    /// Deletes the receipts stored more than `older_than_s` seconds ago; returns how many.
    pub fn prune_receipts(&self, older_than_s: u64) -> Result<usize, rusqlite::Error> {
        prune(&self.receipts.lock().expect("receipts mutex"), older_than_s)
    }

    pub fn with_fault(mut self, fault: FaultHook) -> PaidRoute {
        self.fault = Some(fault);
        self
    }

    fn crash(&self, point: FaultPoint, order: &str) -> bool {
        self.fault.as_ref().is_some_and(|f| f(point, order))
    }

    async fn receipt(&self, settlement_id: &str) -> Option<Response> {
        let receipts = self.receipts.clone();
        let id = settlement_id.to_string();
        let row = tokio::task::spawn_blocking(move || {
            let conn = receipts.lock().expect("receipts mutex");
            conn.query_row("SELECT status, content_type, body FROM work_receipts WHERE settlement_id = ?1", [id], |r| {
                Ok((r.get::<_, u16>(0)?, r.get::<_, Option<String>>(1)?, r.get::<_, Vec<u8>>(2)?))
            })
            .optional()
        })
        .await
        .ok()?
        .ok()??;
        let (status, content_type, body) = row;
        let mut response = Response::new(Body::from(body));
        *response.status_mut() = StatusCode::from_u16(status).unwrap_or(StatusCode::OK);
        if let Some(value) = content_type.and_then(|c| HeaderValue::from_str(&c).ok()) {
            response.headers_mut().insert(axum::http::header::CONTENT_TYPE, value);
        }
        response.headers_mut().insert(WORK_RECEIPT_HEADER, HeaderValue::from_static("replayed"));
        Some(response)
    }

    async fn keep(
        &self,
        settled: &Settled,
        status: u16,
        content_type: Option<String>,
        body: Vec<u8>,
    ) -> Result<(), String> {
        let receipts = self.receipts.clone();
        let (id, order) = (settled.settlement_id.clone(), settled.order_id.clone());
        let prune_now = self.kept.fetch_add(1, std::sync::atomic::Ordering::Relaxed) % WORK_RECEIPT_PRUNE_EVERY
            == WORK_RECEIPT_PRUNE_EVERY - 1;
        tokio::task::spawn_blocking(move || {
            let conn = receipts.lock().expect("receipts mutex");
            conn.execute(
                "INSERT OR IGNORE INTO work_receipts VALUES (?1, ?2, ?3, ?4, ?5, strftime('%s','now'))",
                params![id, order, status, content_type, body],
            )
            .map_err(|e| e.to_string())?;
            if prune_now {
                prune(&conn, WORK_RECEIPT_RETENTION_S).map_err(|e| e.to_string())?;
            }
            Ok(())
        })
        .await
        .map_err(|e| e.to_string())?
    }

    fn lock_for(&self, settlement_id: &str) -> Arc<tokio::sync::Mutex<()>> {
        let mut running = self.running.lock().expect("running mutex");
        running.retain(|_, lock| Arc::strong_count(lock) > 1);
        running.entry(settlement_id.to_string()).or_default().clone()
    }
}

/// Deletes receipts stored more than `older_than_s` seconds ago.
fn prune(conn: &Connection, older_than_s: u64) -> Result<usize, rusqlite::Error> {
    let cutoff = i64::try_from(older_than_s).unwrap_or(i64::MAX);
    conn.execute("DELETE FROM work_receipts WHERE created_at < CAST(strftime('%s','now') AS INTEGER) - ?1", [cutoff])
}

fn payment_problem(status: StatusCode, code: &str, detail: &str) -> Response {
    payment_problem_with(status, code, detail, serde_json::Map::new())
}

/// A problem+json answer carrying `facts` (left out when empty).
fn payment_problem_with(
    status: StatusCode,
    code: &str,
    detail: &str,
    facts: serde_json::Map<String, serde_json::Value>,
) -> Response {
    let mut body = json!({"type": format!("https://bazaar.dev/problems/{code}"), "title": code.replace('_', " "),
        "status": status.as_u16(), "code": code, "detail": detail});
    if !facts.is_empty() {
        body["facts"] = serde_json::Value::Object(facts);
    }
    let mut response = (status, axum::Json(body)).into_response();
    response
        .headers_mut()
        .insert(axum::http::header::CONTENT_TYPE, HeaderValue::from_static("application/problem+json"));
    response
}

/// Reads the order id from the claims without trusting them (a token without
/// an id is malformed); the registry checks the signature on settle.
fn order_of(token: &str) -> Option<String> {
    Some(crate::token::claims_unverified(token)?.ord)
}

/// The middleware. Use with `axum::middleware::from_fn_with_state(Arc<PaidRoute>, paid)`.
pub async fn paid(State(route): State<Arc<PaidRoute>>, mut request: Request, next: Next) -> Response {
    let Some(token) = request.headers().get(PAYMENT_HEADER).and_then(|v| v.to_str().ok()).map(str::to_string) else {
        let detail = format!(
            "This route costs {} minor units: send a registry token in the `Bazaar-Payment` header.",
            route.price_minor
        );
        let mut facts = serde_json::Map::new();
        facts.insert("price_minor".into(), json!(route.price_minor));
        return payment_problem_with(StatusCode::PAYMENT_REQUIRED, "payment_required", &detail, facts);
    };
    let Some(order_id) = order_of(&token) else {
        return payment_problem(
            StatusCode::PAYMENT_REQUIRED,
            "token_malformed",
            "The payment token is not an apt_ token.",
        );
    };
    // Verify is a receipt check: it tells us genuineness and state, never "do the work".
    if let Err(error) = route.client.verify(&token).await {
        return settle_failure(error, route.price_minor);
    }
    // The registry keys a settle by its token (`token:<jti>`): a refused earlier token for this order never blocks
    // this one, and one settlement per order stays the registry's uniqueness.
    let settlement: bazaar_wire::pay::Settlement =
        match route.client.settle(&token, route.price_minor, &order_id, None).await {
            Ok(answer) => answer.body.settlement,
            // The order was paid before (by this token under another key, or another token):
            // answer from the original settlement's work receipt (the refusal's facts are that settlement).
            Err(SdkError::Problem { code, body, .. }) if code == "token_settled" || code == "order_already_settled" => {
                match crate::answer::typed(body["facts"].clone()) {
                    Ok(original) => original,
                    Err(error) => return settle_failure(error, route.price_minor),
                }
            }
            Err(error) => return settle_failure(error, route.price_minor),
        };
    let settled = Settled {
        settlement_id: settlement.settlement_id,
        order_id: order_id.clone(),
        buyer: settlement.buyer,
        amount_minor: settlement.amount_minor,
    };
    let lock = route.lock_for(&settled.settlement_id);
    let _running = lock.lock().await;
    if let Some(stored) = route.receipt(&settled.settlement_id).await {
        return with_settlement(stored, &settled.settlement_id);
    }
    if route.crash(FaultPoint::AfterSettle, &order_id) {
        return payment_problem(StatusCode::SERVICE_UNAVAILABLE, "merchant_crashed", "Simulated crash after settle.");
    }
    request.extensions_mut().insert(settled.clone());
    let response = next.run(request).await;
    let (parts, body) = response.into_parts();
    let Ok(bytes) = axum::body::to_bytes(body, WORK_RECEIPT_BYTES_MAX).await else {
        return payment_problem(
            StatusCode::INTERNAL_SERVER_ERROR,
            "work_receipt_too_large",
            "The paid response exceeded the work-receipt limit.",
        );
    };
    let content_type =
        parts.headers.get(axum::http::header::CONTENT_TYPE).and_then(|v| v.to_str().ok()).map(str::to_string);
    if let Err(error) = route.keep(&settled, parts.status.as_u16(), content_type, bytes.to_vec()).await {
        tracing::error!(%error, settlement = %settled.settlement_id, "work receipt not stored");
    }
    if route.crash(FaultPoint::BeforeAnswer, &order_id) {
        return payment_problem(
            StatusCode::SERVICE_UNAVAILABLE,
            "merchant_crashed",
            "Simulated crash before answering.",
        );
    }
    with_settlement(Response::from_parts(parts, Body::from(bytes)), &settled.settlement_id)
}

fn with_settlement(mut response: Response, settlement_id: &str) -> Response {
    if let Ok(value) = HeaderValue::from_str(settlement_id) {
        response.headers_mut().insert(SETTLEMENT_HEADER, value);
    }
    response
}

/// The buyer's answer when verify or settle did not succeed, naming the party at fault.
fn settle_failure(error: SdkError, price_minor: u64) -> Response {
    match error {
        SdkError::Problem { status, code, .. } if status == 401 || code == "rotation_required" => {
            // The registry refused the merchant's own credential: nothing the buyer sent is wrong.
            let detail = format!(
                "The registry refused this merchant's own credential ({code}): the merchant must fix its \
                 configuration. Your token was not settled; void it to release its hold (Bazaar's clients do)."
            );
            payment_problem(MERCHANT_UNAUTHENTICATED_STATUS, MERCHANT_UNAUTHENTICATED, &detail)
        }
        SdkError::Problem { status, code, mut detail, body } => {
            let status = if status >= 500 || status == 409 {
                StatusCode::SERVICE_UNAVAILABLE
            } else {
                StatusCode::PAYMENT_REQUIRED
            };
            let mut facts = body["facts"].as_object().cloned().unwrap_or_default();
            if code == "amount_exceeds_token" {
                facts.insert("price_minor".into(), json!(price_minor));
                let allowed = facts.get("max_amount_minor").cloned().unwrap_or_default();
                detail = format!(
                    "This costs {price_minor} minor units; the token allows at most {allowed}. Pay with a token for \
                     {price_minor}."
                );
            }
            payment_problem_with(status, &code, &detail, facts)
        }
        error @ (SdkError::Transport(_) | SdkError::Batch(_)) => payment_problem(
            StatusCode::SERVICE_UNAVAILABLE,
            "registry_unreachable",
            &format!("The registry could not be reached: {error}"),
        ),
        error @ SdkError::Answer { .. } => payment_problem(
            StatusCode::SERVICE_UNAVAILABLE,
            "registry_unreadable",
            &format!("The registry's answer could not be read: {error}"),
        ),
    }
}

// ---- x402 v2 --------------------------------------------------------------------------

/// x402 v2 headers (base64 JSON).
pub const PAYMENT_REQUIRED: &str = "payment-required";
pub const PAYMENT_SIGNATURE: &str = "payment-signature";
pub const PAYMENT_RESPONSE: &str = "payment-response";

/// A paid route that speaks x402 v2 on top of a [`PaidRoute`]: no payment →
/// `402` with `PAYMENT-REQUIRED`; a `PAYMENT-SIGNATURE` carrying a registry
/// token (scheme `apt`) → settled exactly once and run once per settlement
/// (with work receipts), answered with `PAYMENT-RESPONSE`.
pub struct X402Route {
    route: Arc<PaidRoute>,
    network: String,
    pay_to: String,
    registry: String,
    description: String,
}

fn b64_json(value: &serde_json::Value) -> String {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD.encode(value.to_string())
}

impl X402Route {
    /// Reads the merchant's DID and the registry's x402 network from the registry.
    pub async fn new(route: Arc<PaidRoute>, description: &str) -> Result<X402Route, SdkError> {
        let me = route.client.me().await?;
        let card = route.client.well_known().await?;
        Ok(X402Route {
            pay_to: me.member.id,
            network: card.x402.network,
            registry: card.did,
            route,
            description: description.to_string(),
        })
    }

    fn requirements(&self, resource: &str, order_id: &str) -> serde_json::Value {
        json!({"scheme": "apt", "network": self.network, "amount": self.route.price_minor.to_string(), "asset": "BNU",
            "payTo": self.pay_to, "maxTimeoutSeconds": bazaar_types::limits::TOKEN_TTL_S_MAX,
            "extra": {"registry": self.registry, "resource": resource, "orderId": order_id}})
    }

    fn payment_required(&self, resource: &str, error: &str) -> Response {
        let order_id = format!("x402-{}", uuid_like());
        let required = json!({"x402Version": 2, "error": error,
            "resource": {"url": resource, "description": self.description, "mimeType": "application/json"},
            "accepts": [self.requirements(resource, &order_id)]});
        let mut response = (StatusCode::PAYMENT_REQUIRED, axum::Json(json!({}))).into_response();
        if let Ok(value) = HeaderValue::from_str(&b64_json(&required)) {
            response.headers_mut().insert(PAYMENT_REQUIRED, value);
        }
        response
    }
}

/// 16 random bytes as hex, for order ids in `PAYMENT-REQUIRED` offers.
fn uuid_like() -> String {
    let mut bytes = [0u8; 16];
    crate::random_bytes(&mut bytes);
    hex::encode(bytes)
}

/// The resource URL a request names (scheme, host and path).
fn resource_of(request: &Request) -> String {
    let host = request.headers().get(axum::http::header::HOST).and_then(|v| v.to_str().ok()).unwrap_or("localhost");
    format!("http://{host}{}", request.uri().path())
}

/// The x402 middleware. Use with `axum::middleware::from_fn_with_state(Arc<X402Route>, x402_paid)`.
pub async fn x402_paid(State(x): State<Arc<X402Route>>, mut request: Request, next: Next) -> Response {
    use base64::Engine;
    let resource = resource_of(&request);
    let Some(signature) = request.headers().get(PAYMENT_SIGNATURE).and_then(|v| v.to_str().ok()).map(str::to_string)
    else {
        return x.payment_required(&resource, "Payment required");
    };
    let payload: Option<serde_json::Value> = base64::engine::general_purpose::STANDARD
        .decode(signature.trim())
        .ok()
        .and_then(|bytes| serde_json::from_slice(&bytes).ok());
    let Some(payload) = payload else {
        return x.payment_required(&resource, "invalid_payload");
    };
    let accepted = &payload["accepted"];
    let offered = x.requirements(&resource, "");
    let same = ["scheme", "network", "amount", "asset", "payTo"].iter().all(|k| accepted[k] == offered[k]);
    if payload["x402Version"] != 2 || !same {
        return x.payment_required(&resource, "invalid_payment_requirements");
    }
    let Some(token) = payload["payload"]["token"].as_str().map(str::to_string) else {
        return x.payment_required(&resource, "invalid_payload");
    };
    // A token minted for another resource is refused before anything settles.
    let Some(claims) = crate::token::claims_unverified(&token) else {
        return x.payment_required(&resource, "invalid_payload");
    };
    if claims.res != resource {
        return x.payment_required(&resource, "wrong_resource");
    }
    let Ok(value) = HeaderValue::from_str(&token) else {
        return x.payment_required(&resource, "invalid_payload");
    };
    request.headers_mut().insert(PAYMENT_HEADER, value);
    let response = paid(State(x.route.clone()), request, next).await;
    if response.status().is_success() {
        let settlement = response.headers().get(SETTLEMENT_HEADER).and_then(|v| v.to_str().ok()).unwrap_or_default();
        let payer = &claims.sub;
        let settled = json!({"success": true, "transaction": settlement, "network": x.network,
            "payer": payer, "amount": x.route.price_minor.to_string()});
        let mut response = response;
        if let Ok(value) = HeaderValue::from_str(&b64_json(&settled)) {
            response.headers_mut().insert(PAYMENT_RESPONSE, value);
            response
                .headers_mut()
                .insert("access-control-expose-headers", HeaderValue::from_static("PAYMENT-RESPONSE"));
        }
        return response;
    }
    // A refusal from the registry (the token's code) becomes an x402 402 with that reason.
    let (parts, body) = response.into_parts();
    let bytes = axum::body::to_bytes(body, WORK_RECEIPT_BYTES_MAX).await.unwrap_or_default();
    let problem: serde_json::Value = serde_json::from_slice(&bytes).unwrap_or_default();
    if parts.status.is_server_error() {
        return Response::from_parts(parts, Body::from(bytes));
    }
    x.payment_required(&resource, problem["code"].as_str().unwrap_or("payment_refused"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_merchant_credential_that_cannot_work_is_refused_with_its_reason() {
        for refused in [
            None,
            Some(""),
            Some("   "),
            Some("MERCHANT_CREDENTIAL"),
            Some("<merchant credential>"),
            Some("${MERCHANT_CREDENTIAL}"),
            Some("{{credential}}"),
            Some("bzi_abc"),
            Some("bzc_abc\n"),
        ] {
            assert!(merchant_credential_problem(refused).is_some(), "{refused:?} is refused");
        }
        for accepted in ["bzc_Zm9vYmFy", "op-secret", "12345"] {
            assert_eq!(merchant_credential_problem(Some(accepted)), None, "{accepted} is accepted");
        }
        let error =
            PaidRoute::new(Client::new("http://127.0.0.1:9", Some("MERCHANT_CREDENTIAL".into())), 1, Path::new("x"));
        let message = error.err().expect("refused").to_string();
        assert!(message.starts_with("merchant_credential_invalid") && message.contains("placeholder"), "{message}");
    }

    #[test]
    fn receipts_past_their_retention_are_pruned_and_newer_ones_kept() {
        let dir = std::env::temp_dir().join(format!("bazaar-receipts-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("receipts.db");
        let route = PaidRoute::new(Client::new("http://127.0.0.1:9", Some("bzc_test".into())), 1, &path).unwrap();
        let day = 86_400_i64;
        {
            let conn = route.receipts.lock().unwrap();
            for (id, age_days) in [("old", 31), ("recent", 29), ("new", 0)] {
                conn.execute(
                    "INSERT INTO work_receipts VALUES (?1, 'o', 200, NULL, x'00', CAST(strftime('%s','now') AS INTEGER) - ?2)",
                    params![id, age_days * day],
                )
                .unwrap();
            }
        }
        assert_eq!(route.prune_receipts(WORK_RECEIPT_RETENTION_S).unwrap(), 1);
        let left: Vec<String> = {
            let conn = route.receipts.lock().unwrap();
            let mut statement = conn.prepare("SELECT settlement_id FROM work_receipts ORDER BY settlement_id").unwrap();
            statement.query_map([], |r| r.get(0)).unwrap().map(Result::unwrap).collect()
        };
        assert_eq!(left, ["new", "recent"]);
        drop(route);
        // Opening the route prunes too.
        {
            let conn = Connection::open(&path).unwrap();
            conn.execute(
                "UPDATE work_receipts SET created_at = created_at - ?1 WHERE settlement_id = 'recent'",
                [2 * day],
            )
            .unwrap();
        }
        let reopened = PaidRoute::new(Client::new("http://127.0.0.1:9", Some("bzc_test".into())), 1, &path).unwrap();
        let count: i64 = reopened
            .receipts
            .lock()
            .unwrap()
            .query_row("SELECT COUNT(*) FROM work_receipts", [], |r| r.get(0))
            .unwrap();
        assert_eq!(count, 1, "only the new receipt is left");
        std::fs::remove_dir_all(&dir).ok();
    }
}

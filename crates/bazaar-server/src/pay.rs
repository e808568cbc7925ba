//! Paying over HTTP: minting units, funding agents and their budgets, tokens
//! (issue, verify, void), settlements and the event ledger; and the sweeper's
//! share of it, releasing the holds of expired tokens.

use crate::auth::{ApiJson, ApiQuery, Auth};
use crate::exec::{self, execute, idem_for, resolve_id, KeyRule};
use crate::federation;
use crate::problem::Problem;
use crate::state::AppState;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;
use axum::Json;
use bazaar_core::command::Op;
use bazaar_core::model::{Member, MemberKind, TokenState};
use bazaar_core::pay;
use bazaar_core::refusal::{Code, Refusal};
use bazaar_core::token::{self, TokenClaims};
use bazaar_core::validate;
use bazaar_store::StoreError;
use bazaar_types::limits::*;
use bazaar_types::{MemberId, OrderId, Timestamp, TokenId};
use bazaar_wire::pay as schema;
use serde::{Deserialize, Serialize};
use serde_json::json;
use std::sync::Arc;
use utoipa::ToSchema;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

pub use crate::exec::{BATCH_BODY_BYTES_MAX, BATCH_ITEMS_MAX};

/// Paying's routes, each with its OpenAPI entry.
pub fn routes() -> OpenApiRouter<Arc<AppState>> {
    OpenApiRouter::new()
        .routes(routes!(mint))
        .routes(routes!(fund))
        .routes(routes!(set_budget))
        .routes(routes!(issue_token))
        .routes(exec::batch_limited(routes!(issue_tokens)))
        .routes(exec::batch_limited(routes!(settle_batch)))
        .routes(routes!(verify_token))
        .routes(routes!(void_token))
        .routes(routes!(settle))
        .routes(routes!(events))
}

/// The sweeper's share: voids the holds of tokens that expired by `now`.
/// Returns how many it released.
pub async fn due(state: &Arc<AppState>, now: Timestamp) -> Result<usize, StoreError> {
    let due = state.store.expired_tokens(now, SWEEP_BATCH_MAX).await?;
    // Submitted together, so the writer folds them into one transaction.
    let expiries =
        due.into_iter().map(|(jti, buyer)| exec::as_registry(state, Op::Pay(pay::Op::ExpireHold { jti, buyer })));
    let mut released = 0;
    for applied in futures::future::join_all(expiries).await {
        if applied?.outcome.is_ok() {
            released += 1;
        }
    }
    if released > 0 {
        state.metrics.add("bazaar_holds_expired_total", String::new(), released as f64);
    }
    Ok(released)
}

/// A token id that sorts by issue time: `tok_` + 12 hex digits of the issue
/// millisecond + random base64url. Tokens, holds, settlements and transfers are
/// keyed by it, so new rows land at the right edge of their B-trees instead of
/// dirtying a random page each.
fn new_token_id(state: &AppState, now: bazaar_types::Timestamp) -> TokenId {
    TokenId(format!("tok_{:012x}{}", now.ms().max(0), state.random_b64(TOKEN_ID_RANDOM_BYTES)))
}

#[derive(Deserialize, Serialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct MintRequest {
    /// Owner DID or handle.
    pub owner: String,
    pub amount_minor: u64,
}

/// Operator only: issues units into an owner's account (purchase-only; there is no withdrawal).
#[utoipa::path(post, path = "/v1/mint", request_body = MintRequest, params(("Idempotency-Key" = String, Header, description = "Required")), security(("credential" = []), ("session" = [])), responses((status = 200, description = "Minted", body = schema::Minted)))]
async fn mint(
    State(state): State<Arc<AppState>>,
    auth: Auth,
    headers: HeaderMap,
    ApiJson(body): ApiJson<MintRequest>,
) -> Result<Response, Problem> {
    let amount = validate::amount(body.amount_minor, "amount_minor")?;
    let idem = idem_for(&auth.member, "mint", &headers, KeyRule::Required, &body)?;
    let owner = resolve_id(&state, &body.owner).await?;
    Ok(execute(&state, auth.member, idem, Op::Pay(pay::Op::Mint { owner, amount }), StatusCode::OK).await)
}

#[derive(Deserialize, Serialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct FundRequest {
    /// 1 to `AMOUNT_MINOR_MAX` minor units.
    #[schema(minimum = 1, maximum = 1_000_000_000_000_u64)]
    pub amount_minor: u64,
}

/// Owner only: moves units from the owner's account into its agent's budget account.
#[utoipa::path(post, path = "/v1/agents/{agent}/fund", request_body = FundRequest, params(("agent" = String, Path, description = "DID or handle"), ("Idempotency-Key" = String, Header, description = "Required")), security(("credential" = []), ("session" = [])), responses((status = 200, description = "Funded", body = schema::Funded)))]
async fn fund(
    State(state): State<Arc<AppState>>,
    auth: Auth,
    headers: HeaderMap,
    Path(who): Path<String>,
    ApiJson(body): ApiJson<FundRequest>,
) -> Result<Response, Problem> {
    let amount = validate::amount(body.amount_minor, "amount_minor")?;
    let agent = resolve_id(&state, &who).await?;
    let request = json!({"agent": agent, "amount_minor": amount});
    let idem = idem_for(&auth.member, "fund", &headers, KeyRule::Required, &request)?;
    Ok(execute(&state, auth.member, idem, Op::Pay(pay::Op::Fund { agent, amount }), StatusCode::OK).await)
}

#[derive(Deserialize, Serialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct BudgetRequest {
    pub per_call_max_minor: u64,
    pub per_day_max_minor: u64,
    pub total_max_minor: u64,
}

/// Owner only: sets an agent's ceilings. An agent can never set its own.
#[utoipa::path(put, path = "/v1/agents/{agent}/budget", request_body = BudgetRequest, security(("credential" = []), ("session" = [])), responses((status = 200, description = "Budget", body = schema::Budget)))]
async fn set_budget(
    State(state): State<Arc<AppState>>,
    auth: Auth,
    Path(who): Path<String>,
    ApiJson(body): ApiJson<BudgetRequest>,
) -> Result<Response, Problem> {
    let op = Op::Pay(pay::Op::SetBudget {
        agent: resolve_id(&state, &who).await?,
        per_call_max: validate::ceiling(body.per_call_max_minor, "per_call_max_minor")?,
        per_day_max: validate::ceiling(body.per_day_max_minor, "per_day_max_minor")?,
        total_max: validate::ceiling(body.total_max_minor, "total_max_minor")?,
    });
    Ok(execute(&state, auth.member, None, op, StatusCode::OK).await)
}

#[derive(Deserialize, Serialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct TokenRequest {
    /// Merchant DID or handle.
    pub merchant: String,
    pub max_amount_minor: u64,
    pub order_id: String,
    pub resource: String,
    /// Shorter than the default 900 s if you like.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttl_s: Option<u64>,
    /// For a merchant on a peer registry: that registry's DID. `merchant` must then be a DID.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub registry: Option<String>,
}

/// Agent only: places a hold on its budget and returns a registry-signed `apt_` token.
/// Without `Idempotency-Key`, the key is the (merchant, order): asking twice for one order returns the same token.
#[utoipa::path(post, path = "/v1/tokens", request_body = TokenRequest, params(("Idempotency-Key" = Option<String>, Header, description = "Optional: without it the registry derives the key from the request, so a retry is still answered once")), security(("credential" = []), ("session" = [])), responses((status = 201, description = "Token issued", body = schema::TokenIssued)))]
async fn issue_token(
    State(state): State<Arc<AppState>>,
    auth: Auth,
    headers: HeaderMap,
    ApiJson(body): ApiJson<TokenRequest>,
) -> Result<Response, Problem> {
    issue_checked(&state, auth.member, &headers, body).await
}

/// One token, as `POST /v1/tokens` answers it.
async fn issue_checked(
    state: &Arc<AppState>,
    actor: Member,
    headers: &HeaderMap,
    body: TokenRequest,
) -> Result<Response, Problem> {
    let max = validate::amount(body.max_amount_minor, "max_amount_minor")?;
    validate::order_id(&body.order_id)?;
    validate::resource(&body.resource)?;
    let ttl_s = body.ttl_s.unwrap_or(TOKEN_TTL_S_MAX);
    if !(TOKEN_TTL_S_MIN..=TOKEN_TTL_S_MAX).contains(&ttl_s) {
        return Err(Problem::invalid(format!(
            "`ttl_s` must be between {TOKEN_TTL_S_MIN} and {TOKEN_TTL_S_MAX} seconds."
        )));
    }
    let via = match &body.registry {
        Some(registry) if registry != state.registry.as_str() => {
            if !body.merchant.starts_with("did:") {
                return Err(Problem::invalid("A merchant on a peer registry is named by its DID."));
            }
            Some(MemberId(registry.clone()))
        }
        _ => None,
    };
    let merchant =
        if via.is_some() { MemberId(body.merchant.clone()) } else { resolve_id(state, &body.merchant).await? };
    let mut request = json!({"merchant": merchant, "max_amount_minor": max, "order_id": body.order_id, "resource": body.resource, "ttl_s": ttl_s});
    if let Some(via) = &via {
        request["registry"] = json!(via);
    }
    let rule = KeyRule::DefaultTo(format!("order:{merchant}:{}", body.order_id));
    let idem = idem_for(&actor, "issue_token", headers, rule, &request)?;
    let now = state.now();
    let claims = TokenClaims {
        v: 1,
        iss: state.registry.clone(),
        jti: new_token_id(state, now),
        sub: actor.id.clone(),
        aud: merchant,
        max,
        ord: OrderId(body.order_id),
        res: body.resource,
        iat_ms: now,
        exp_ms: now.plus_s(ttl_s),
        via,
    };
    let encoded = token::encode(&claims, &state.signing_key());
    state.remember_token(&encoded, &claims);
    Ok(execute(state, actor, idem, Op::issue_token(claims, encoded), StatusCode::CREATED).await)
}

/// One item of a token batch: a `POST /v1/tokens` body, and the `Idempotency-Key` it would carry.
#[derive(Deserialize, Serialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct TokenBatchItem {
    pub merchant: String,
    pub max_amount_minor: u64,
    pub order_id: String,
    pub resource: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttl_s: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub registry: Option<String>,
    /// As the single call's `Idempotency-Key` header; absent: derived from (merchant, order).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub idempotency_key: Option<String>,
}

#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct TokenBatch {
    /// 1 to 1,000 items (`BATCH_ITEMS_MAX`).
    pub items: Vec<TokenBatchItem>,
}

impl exec::BatchItem for TokenBatchItem {
    type Request = TokenRequest;

    fn touches(&self) -> Vec<String> {
        let order = format!("order:{}:{}", self.merchant, self.order_id);
        self.idempotency_key.iter().map(|key| format!("key:{key}")).chain([order]).collect()
    }

    fn split(self) -> (Option<String>, TokenRequest) {
        let request = TokenRequest {
            merchant: self.merchant,
            max_amount_minor: self.max_amount_minor,
            order_id: self.order_id,
            resource: self.resource,
            ttl_s: self.ttl_s,
            registry: self.registry,
        };
        (self.idempotency_key, request)
    }
}

/// Agent only: many tokens in one call, each exactly as `POST /v1/tokens` would issue (or refuse, or replay) it,
/// answered in order as `{status, replayed, body}`; a refused item never fails the others. Items on the same
/// (merchant, order) or with the same idempotency key run one after another in the batch's order, so a duplicate
/// is a replay of the first; the rest run concurrently.
#[utoipa::path(post, path = "/v1/tokens/batch", request_body = TokenBatch, security(("credential" = []), ("session" = [])), responses((status = 200, description = "One answer per item, in order", body = schema::BatchAnswers)))]
async fn issue_tokens(
    State(state): State<Arc<AppState>>,
    auth: Auth,
    ApiJson(batch): ApiJson<TokenBatch>,
) -> Result<Json<serde_json::Value>, Problem> {
    let actor = auth.member;
    exec::answer_batch(batch.items, |headers, request| {
        let (state, actor) = (state.clone(), actor.clone());
        async move { issue_checked(&state, actor, &headers, request).await }
    })
    .await
}

#[derive(Deserialize, Serialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct VerifyRequest {
    pub token: String,
}

/// A receipt check, never a work order: says whether the token is genuine and
/// its state. A settled token still verifies as genuine (state `settled`), so a
/// merchant must never do paid work because verify said "genuine".
#[utoipa::path(post, path = "/v1/tokens/verify", request_body = VerifyRequest, security(("credential" = []), ("session" = [])), responses((status = 200, description = "Genuineness and state", body = schema::TokenCheck)))]
async fn verify_token(
    State(state): State<Arc<AppState>>,
    auth: Auth,
    ApiJson(body): ApiJson<VerifyRequest>,
) -> Result<Json<schema::TokenCheck>, Problem> {
    let not_genuine = |reason: String| schema::TokenCheck::NotGenuine(schema::NotGenuine { genuine: false, reason });
    let claims = match state.decode_token(&body.token) {
        Ok(claims) => claims,
        Err(error) => {
            if let Some(claims) = token::peek(&body.token).ok().filter(|c| c.iss != state.registry) {
                return Ok(Json(federation::verify_foreign(&state, &auth.member, &body.token, claims).await?));
            }
            return Ok(Json(not_genuine(error.to_string())));
        }
    };
    if auth.member.id != claims.aud && auth.member.id != claims.sub {
        return Err(
            Refusal::new(Code::NotAudience, "Only the token's merchant (audience) or buyer may verify it.").into()
        );
    }
    let Some(view) = state.store.token(&claims.jti).await? else {
        return Ok(Json(not_genuine("signed by this registry but unknown to it".into())));
    };
    let token_state = TokenState::of(&view.hold, state.now());
    Ok(Json(schema::TokenCheck::Local(schema::LocalTokenCheck {
        genuine: true,
        state: crate::exec::wire(&token_state)?,
        work_order: false,
        claims: crate::exec::wire(&claims)?,
        settlement: view
            .settlement
            .as_ref()
            .map(|s| crate::exec::wire(&bazaar_core::pay::settlement_view(s)))
            .transpose()?,
    })))
}

#[derive(Deserialize, Serialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct SettleRequest {
    pub token: String,
    pub amount_minor: u64,
    pub order_id: String,
}

/// Merchant only: settles a token exactly once. Without `Idempotency-Key` the key
/// names the token (`token:<jti>`, scoped to the merchant), so a retry returns the
/// original receipt with `Idempotent-Replayed: true`, and a refused token never
/// blocks another token for the same order; an order is paid once by the
/// ledger's uniqueness on (merchant, order).
#[utoipa::path(post, path = "/v1/settlements", request_body = SettleRequest, params(("Idempotency-Key" = Option<String>, Header, description = "Defaults to token:<the token's jti>")), security(("credential" = []), ("session" = [])), responses((status = 200, description = "Settlement receipt", body = schema::SettlementReceipt)))]
async fn settle(
    State(state): State<Arc<AppState>>,
    auth: Auth,
    headers: HeaderMap,
    ApiJson(body): ApiJson<SettleRequest>,
) -> Result<Response, Problem> {
    settle_checked(&state, auth.member, &headers, body).await
}

/// One settlement, as `POST /v1/settlements` answers it.
async fn settle_checked(
    state: &Arc<AppState>,
    actor: Member,
    headers: &HeaderMap,
    body: SettleRequest,
) -> Result<Response, Problem> {
    let amount = validate::amount(body.amount_minor, "amount_minor")?;
    validate::order_id(&body.order_id)?;
    let decoded = state.decode_token(&body.token);
    if decoded.is_err() {
        if let Some(claims) = token::peek(&body.token).ok().filter(|c| c.iss != state.registry) {
            // A peer registry's token: settled through that registry, exactly once on each side.
            return federation::settle_foreign(state, actor, &body.token, claims, amount, &body.order_id).await;
        }
    }
    let claims = decoded.map_err(|error| match error {
        token::TokenError::Malformed => {
            Refusal::new(Code::TokenMalformed, "`token` is not an apt_ token from this registry.")
        }
        token::TokenError::BadSignature => Refusal::new(
            Code::TokenSignatureInvalid,
            "The token's signature does not verify against this registry's key: it was forged or altered.",
        ),
    })?;
    let idem = idem_for(&actor, "settle", headers, KeyRule::DefaultTo(pay::settle_key(&claims.jti)), &body)?;
    let op = Op::Pay(pay::Op::Settle { claims, amount, order_id: OrderId(body.order_id) });
    Ok(execute(state, actor, idem, op, StatusCode::OK).await)
}

/// One item of a settlement batch: a `POST /v1/settlements` body, and the `Idempotency-Key` it would carry.
#[derive(Deserialize, Serialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct SettleBatchItem {
    pub token: String,
    pub amount_minor: u64,
    pub order_id: String,
    /// As the single call's `Idempotency-Key` header; absent: `token:<jti>`, naming the token.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub idempotency_key: Option<String>,
}

impl exec::BatchItem for SettleBatchItem {
    type Request = SettleRequest;

    fn touches(&self) -> Vec<String> {
        let order = format!("order:{}", self.order_id);
        self.idempotency_key.iter().map(|key| format!("key:{key}")).chain([order]).collect()
    }

    fn split(self) -> (Option<String>, SettleRequest) {
        (
            self.idempotency_key,
            SettleRequest { token: self.token, amount_minor: self.amount_minor, order_id: self.order_id },
        )
    }
}

#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct SettleBatch {
    /// 1 to 1,000 items (`BATCH_ITEMS_MAX`).
    pub items: Vec<SettleBatchItem>,
}

/// Merchant only: many settlements in one call, each exactly as `POST /v1/settlements` would settle (or refuse,
/// or replay) it — both uniqueness layers, sticky refusals — answered in order as `{status, replayed, body}`; a
/// refused item never fails the others. Items on the same order or with the same idempotency key run one after
/// another in the batch's order, so a duplicate is a replay of the first; the rest run concurrently.
#[utoipa::path(post, path = "/v1/settlements/batch", request_body = SettleBatch, security(("credential" = []), ("session" = [])), responses((status = 200, description = "One answer per item, in order", body = schema::BatchAnswers)))]
async fn settle_batch(
    State(state): State<Arc<AppState>>,
    auth: Auth,
    ApiJson(batch): ApiJson<SettleBatch>,
) -> Result<Json<serde_json::Value>, Problem> {
    let actor = auth.member;
    exec::answer_batch(batch.items, |headers, request| {
        let (state, actor) = (state.clone(), actor.clone());
        async move { settle_checked(&state, actor, &headers, request).await }
    })
    .await
}

/// Buyer (or its owner): voids an unsettled token and releases its hold.
#[utoipa::path(post, path = "/v1/tokens/{jti}/void", security(("credential" = []), ("session" = [])), responses((status = 200, description = "Voided", body = schema::Voided)))]
async fn void_token(
    State(state): State<Arc<AppState>>,
    auth: Auth,
    Path(jti): Path<String>,
) -> Result<Response, Problem> {
    let view = state
        .store
        .token(&TokenId(jti.clone()))
        .await?
        .ok_or_else(|| Refusal::new(Code::TokenNotFound, "No such token."))?;
    let op = Op::Pay(pay::Op::VoidToken { jti: TokenId(jti), buyer: view.token.buyer });
    Ok(execute(&state, auth.member, None, op, StatusCode::OK).await)
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EventsQuery {
    #[serde(default)]
    pub after: u64,
    pub limit: Option<usize>,
}

/// Operator only: the hash-chained event ledger, a page at a time.
#[utoipa::path(get, path = "/v1/events", params(("after" = Option<u64>, Query), ("limit" = Option<usize>, Query)), security(("credential" = []), ("session" = [])), responses((status = 200, description = "Events", body = schema::EventPage)))]
async fn events(
    State(state): State<Arc<AppState>>,
    auth: Auth,
    ApiQuery(query): ApiQuery<EventsQuery>,
) -> Result<Json<serde_json::Value>, Problem> {
    if auth.member.kind != MemberKind::Operator {
        return Err(Refusal::new(Code::NotPermitted, "Only the operator reads the whole event ledger.").into());
    }
    let limit = query.limit.unwrap_or(PAGE_LIMIT_MAX).clamp(1, PAGE_LIMIT_MAX);
    let page = state.store.events(query.after, limit).await?;
    Ok(Json(json!({"events": page, "next_after": page.last().map(|e| e.seq)})))
}

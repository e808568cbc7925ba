//! Routes: each handler parses, authenticates, builds one core command (or a
//! read), and answers. Idempotency is applied in [`execute`], once for all.

use crate::auth::{ApiJson, Auth};
use crate::escrow_routes as escrow;
use crate::federation_routes as fed;
use crate::market_routes as market;
use crate::problem::Problem;
use crate::{new_secret_credential, random_b64, AppState, NETWORK_UNIT};
use axum::extract::{MatchedPath, Path, Query, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post, put};
use axum::{Json, Router};
use bazaar_core::command::{Command, Idem, Op};
use bazaar_core::crypto::{did_key, invite_proof_message, parse_public_key, sha256_hex, verify};
use bazaar_core::model::{Member, MemberKind, TokenState};
use bazaar_core::refusal::{Code, Refusal};
use bazaar_core::token::{self, TokenClaims};
use bazaar_core::validate;
use bazaar_types::limits::*;
use bazaar_types::{AccountId, MemberId, OrderId, TokenId};
use serde::{Deserialize, Serialize};
use serde_json::json;
use std::sync::Arc;
use utoipa::{OpenApi, ToSchema};

pub const IDEMPOTENCY_KEY: &str = "idempotency-key";
pub const IDEMPOTENT_REPLAYED: &str = "idempotent-replayed";

/// Every route, with the storefront's MCP server nested at `/mcp`.
pub fn router(state: Arc<AppState>) -> Router {
    let api = api_router(state.clone());
    let mcp = crate::mcp::service(api.clone());
    api.nest_service("/mcp", mcp)
}

/// The REST API (and the pages): everything but `/mcp`, whose tools call it.
pub fn api_router(state: Arc<AppState>) -> Router {
    Router::new()
        .route("/healthz", get(healthz))
        .route("/metrics", get(metrics))
        .route("/openapi.json", get(openapi))
        .route("/.well-known/bazaar", get(well_known))
        .route("/.well-known/bazaar-keys", get(fed::key_history))
        .route("/.well-known/bazaar-recognition", get(fed::recognition))
        .route("/v1/reputation/{member}", get(fed::get_reputation))
        .route("/v1/reputation/import", post(fed::import_passport))
        .route("/v1/passports", post(fed::post_passport))
        .route("/v1/passports/verify", post(fed::verify_passport_route))
        .route("/v1/registry/keys/rotate", post(fed::rotate_key))
        .route("/v1/federation/peers", post(fed::add_peer).get(fed::list_peers))
        .route("/v1/federation/guests", post(fed::join_guest))
        .route("/v1/listings", put(market::put_listing))
        .route("/v1/listings/{id}", get(market::get_listing))
        .route("/v1/search", get(market::search))
        .route("/v1/searches/unmet", get(market::unmet))
        .route("/v1/rfqs", post(market::create_rfq).get(market::list_rfqs))
        .route("/v1/rfqs/{id}", get(market::get_rfq))
        .route("/v1/rfqs/{id}/offers", post(market::make_offer))
        .route("/v1/rfqs/{id}/allocation", get(market::allocation))
        .route("/v1/rfqs/{id}/close", post(market::close_rfq))
        .route("/v1/agents/{agent}/order-policy", put(market::set_order_policy))
        .route("/v1/orders", post(market::create_order).get(market::list_orders))
        .route("/v1/orders/{id}", get(market::get_order))
        .route("/v1/orders/{id}/approve", post(market::approve_order))
        .route("/v1/orders/{id}/decline", post(market::decline_order))
        .route(
            "/v1/orders/{id}/shares/{share}/proof",
            post(market::prove_shipment).layer(axum::extract::DefaultBodyLimit::max(RECEIPT_IMAGE_BYTES_MAX)),
        )
        .route("/v1/orders/{id}/shares/{share}/cancel", post(market::cancel_share))
        .route("/v1/blobs/{sha256}", get(market::get_blob))
        .route("/approve/{id}", get(market::approval_page))
        .route("/x402/supported", get(crate::x402_routes::supported))
        .route("/x402/verify", post(crate::x402_routes::verify))
        .route("/x402/settle", post(crate::x402_routes::settle))
        .route(fed::FEDERATION_SETTLE_PATH, post(fed::federation_settle))
        .route("/passport/verify", get(passport_verify))
        .route("/v1/owners", post(create_owner))
        .route("/v1/invites", post(issue_invite))
        .route("/v1/agents", post(redeem_invite))
        .route("/v1/agents/{agent}/budget", put(set_budget))
        .route("/v1/agents/{agent}/fund", post(fund))
        .route("/v1/credentials/rotate", post(rotate_credential))
        .route("/v1/credentials/revoke", post(revoke_credential))
        .route("/v1/members/{member}", get(get_member))
        .route("/v1/members/{member}/handle", put(rename))
        .route("/v1/me", get(me))
        .route("/v1/mint", post(mint))
        .route("/v1/tokens", post(issue_token))
        .route("/v1/tokens/verify", post(verify_token))
        .route("/v1/tokens/{jti}/void", post(void_token))
        .route("/v1/settlements", post(settle))
        .route("/v1/events", get(events))
        .route("/v1/contracts", post(escrow::create_contract).get(escrow::list_contracts))
        .route("/v1/contracts/{id}", get(escrow::get_contract))
        .route("/v1/contracts/{id}/accept", post(escrow::accept_contract))
        .route("/v1/contracts/{id}/decline", post(escrow::decline_contract))
        .route("/v1/contracts/{id}/cancel", post(escrow::cancel_contract))
        .route("/v1/contracts/{id}/milestones/{index}/deliver", post(escrow::deliver_milestone))
        .route("/v1/contracts/{id}/milestones/{index}/release", post(escrow::release_milestone))
        .route("/v1/disputes", post(escrow::file_dispute).get(escrow::list_disputes))
        .route("/v1/disputes/{id}", get(escrow::get_dispute))
        .route("/v1/disputes/{id}/evidence", post(escrow::add_evidence))
        .route("/v1/disputes/{id}/ruling", post(escrow::rule))
        .route("/v1/disputes/{id}/appeal", post(escrow::appeal))
        .route("/v1/disputes/{id}/execute", post(escrow::execute_dispute))
        .route("/v1/stake", post(escrow::stake_lock))
        .route("/v1/stake/unlock", post(escrow::stake_unlock))
        .route("/v1/stake/withdraw", post(escrow::stake_withdraw))
        .route("/v1/stake/{member}", get(escrow::get_stake))
        .fallback(not_found)
        .layer(axum::extract::DefaultBodyLimit::max(REQUEST_BODY_BYTES_MAX))
        .layer(middleware::from_fn_with_state(state.clone(), observe))
        .layer(middleware::from_fn_with_state(state.clone(), admit))
        .with_state(state)
}

/// Bounds the requests in flight: past the limit, answer 503 now rather than queue.
async fn admit(State(state): State<Arc<AppState>>, request: axum::extract::Request, next: Next) -> Response {
    let Ok(_permit) = state.requests.try_acquire() else {
        let mut problem = Problem::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "overloaded",
            "The registry is working on as many requests as it takes at once; retry shortly.",
        );
        problem.retry_after = true;
        return problem.into_response();
    };
    next.run(request).await
}

async fn observe(State(state): State<Arc<AppState>>, request: axum::extract::Request, next: Next) -> Response {
    let route =
        request.extensions().get::<MatchedPath>().map(|p| p.as_str().to_string()).unwrap_or_else(|| "unmatched".into());
    let started = std::time::Instant::now();
    let response = next.run(request).await;
    let status = response.status().as_u16();
    tracing::debug!(%route, status, elapsed_us = started.elapsed().as_micros() as u64, "request");
    state.metrics.add("bazaar_http_requests_total", format!("route=\"{route}\",status=\"{status}\""), 1.0);
    state.metrics.add("bazaar_http_request_seconds_sum", format!("route=\"{route}\""), started.elapsed().as_secs_f64());
    response
}

async fn not_found() -> Problem {
    Problem::new(StatusCode::NOT_FOUND, "route_not_found", "No such route; see /openapi.json for the API.")
}

// ---- idempotency and execution ---------------------------------------------

/// How a request's idempotency key is found.
pub(crate) enum KeyRule {
    /// Money-moving: the caller must send `Idempotency-Key`.
    Required,
    /// Money-moving with a natural key (the order) used when the caller sends none.
    DefaultTo(String),
}

pub(crate) fn idem_for(
    actor: &Member,
    op_name: &str,
    headers: &HeaderMap,
    rule: KeyRule,
    request: &impl Serialize,
) -> Result<Option<Idem>, Problem> {
    let sent = headers.get(IDEMPOTENCY_KEY).map(|v| v.to_str().map(str::to_string));
    let key = match (sent, rule) {
        (Some(Err(_)), _) => {
            return Err(Refusal::new(Code::IdempotencyKeyInvalid, "`Idempotency-Key` must be printable ASCII.").into())
        }
        (Some(Ok(key)), _) => key,
        (None, KeyRule::DefaultTo(key)) => key,
        (None, KeyRule::Required) => {
            return Err(Refusal::new(
                Code::IdempotencyKeyRequired,
                "This request moves money: send an `Idempotency-Key` header (a UUID is fine) and reuse it on retries.",
            )
            .into())
        }
    };
    validate::idempotency_key(&key)?;
    let body =
        serde_json::to_string(&serde_json::to_value(request).expect("requests serialize")).expect("values serialize");
    Ok(Some(Idem {
        scope: format!("{}:{op_name}", actor.id),
        key,
        fingerprint: sha256_hex(format!("{op_name}\n{body}").as_bytes()),
    }))
}

/// Submits one command and answers: refusals as problem+json, replays marked.
pub(crate) async fn execute(
    state: &Arc<AppState>,
    actor: Member,
    idem: Option<Idem>,
    op: Op,
    success: StatusCode,
) -> Response {
    let _guard = match &idem {
        Some(idem) => match state.claim(&idem.scope, &idem.key) {
            Some(guard) => Some(guard),
            None => {
                return Problem::from(Refusal::new(
                    Code::IdempotencyInFlight,
                    "A request with this Idempotency-Key is still running; retry after the delay in Retry-After.",
                ))
                .into_response()
            }
        },
        None => None,
    };
    let op_name = op.name();
    let applied = match state.store.submit(Command { actor, idem, op }).await {
        Ok(applied) => applied,
        Err(error) => return Problem::from(error).into_response(),
    };
    if applied.replayed {
        state.metrics.add("bazaar_idempotent_replays_total", format!("op=\"{op_name}\""), 1.0);
    }
    let mut response = match applied.outcome {
        Ok(body) => {
            if op_name == "settle" {
                state.metrics.add("bazaar_settlements_total", String::new(), 1.0);
            }
            (success, Json(body)).into_response()
        }
        Err(refusal) => {
            state.metrics.add("bazaar_refusals_total", format!("code=\"{}\"", refusal.code.as_str()), 1.0);
            Problem::from(refusal).into_response()
        }
    };
    if applied.replayed {
        response.headers_mut().insert(IDEMPOTENT_REPLAYED, HeaderValue::from_static("true"));
    }
    response
}

/// A token id that sorts by issue time: `tok_` + 12 hex digits of the issue
/// millisecond + random base64url. Tokens, holds, settlements and transfers are
/// keyed by it, so new rows land at the right edge of their B-trees instead of
/// dirtying a random page each.
fn new_token_id(now: bazaar_types::Timestamp) -> TokenId {
    TokenId(format!("tok_{:012x}{}", now.ms().max(0), random_b64(TOKEN_ID_RANDOM_BYTES)))
}

/// The id behind a DID or handle. A DID is taken as given: every command that
/// names a member loads it and refuses `member_not_found` itself, so only
/// handles cost a read here.
pub(crate) async fn resolve_id(state: &AppState, who: &str) -> Result<MemberId, Problem> {
    if who.starts_with("did:") {
        return Ok(MemberId(who.into()));
    }
    Ok(resolve(state, who).await?.id)
}

pub(crate) async fn resolve(state: &AppState, who: &str) -> Result<Member, Problem> {
    let found = if who.starts_with("did:") {
        state.store.member(&MemberId(who.into())).await?
    } else {
        state.store.member_by_handle(who).await?
    };
    found.ok_or_else(|| {
        Refusal::new(
            Code::MemberNotFound,
            format!("No member `{who}` on this registry; use a DID or a current handle."),
        )
        .into()
    })
}

// ---- registry ----------------------------------------------------------------

async fn healthz(State(state): State<Arc<AppState>>) -> Result<Json<serde_json::Value>, Problem> {
    if !state.store.writer_stats().running {
        return Err(Problem::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "writer_stopped",
            "The ledger writer has stopped; writes fail until the registry restarts. See the logs.",
        ));
    }
    let head = state.store.head().await?;
    Ok(Json(json!({"status": "ok", "event_seq": head.seq})))
}

async fn metrics(State(state): State<Arc<AppState>>) -> impl IntoResponse {
    let writer = state.store.writer_stats();
    let mut text = state.metrics.render();
    for (name, help, value) in [
        ("bazaar_writer_batches_total", "Transactions the group-commit writer ran.", writer.batches as f64),
        ("bazaar_writer_commands_total", "Commands applied inside those transactions.", writer.commands as f64),
        (
            "bazaar_writer_busy_seconds_total",
            "Seconds the writer spent inside transactions.",
            writer.busy_us as f64 / 1e6,
        ),
    ] {
        text.push_str(&format!("# HELP {name} {help}\n# TYPE {name} counter\n{name} {value}\n"));
    }
    ([(axum::http::header::CONTENT_TYPE, "text/plain; version=0.0.4")], text)
}

async fn openapi() -> Json<utoipa::openapi::OpenApi> {
    Json(ApiDoc::openapi())
}

/// The registry's public card: identity, fee, thresholds and limits.
#[utoipa::path(get, path = "/.well-known/bazaar", responses((status = 200, description = "Registry card")))]
async fn well_known(State(state): State<Arc<AppState>>) -> Json<serde_json::Value> {
    let key = state.signing_key().verifying_key();
    Json(crate::federation_routes::card(
        &state,
        json!({
            "did": state.registry,
            "public_key": bazaar_core::crypto::b64url(key.as_bytes()),
            "public_key_hex": hex::encode(key.as_bytes()),
            "network_unit": NETWORK_UNIT,
            "fee_bps": state.config.fee_bps,
            "escrow_threshold_minor": state.config.escrow_threshold,
            "dispute_windows_s": state.config.windows,
            "dispute_desk": bazaar_core::model::DESK_ID,
        "x402": {"scheme": crate::x402_routes::SCHEME, "network": crate::x402_routes::network(&state),
            "asset": NETWORK_UNIT, "facilitator": "/x402"},
            "token_ttl_s": TOKEN_TTL_S_MAX,
            "token_format": "apt_<base64url(claims)>.<base64url(ed25519(\"bazaar-apt-v1.\" + base64url(claims)))>",
            "limits": {
                "amount_minor_max": AMOUNT_MINOR_MAX,
                "token_ttl_s_min": TOKEN_TTL_S_MIN,
                "token_ttl_s_max": TOKEN_TTL_S_MAX,
                "invite_ttl_s": INVITE_TTL_S,
                "idempotency_key_len_max": IDEMPOTENCY_KEY_LEN_MAX,
                "idempotency_retention_s": IDEMPOTENCY_RETENTION_S,
                "request_body_bytes_max": REQUEST_BODY_BYTES_MAX,
                "order_id_len_max": ORDER_ID_LEN_MAX,
                "resource_len_max": RESOURCE_LEN_MAX,
                "page_limit_max": PAGE_LIMIT_MAX,
            },
        }),
    ))
}

/// The passport verifier: a page that checks a pasted passport in the browser against this registry's keys.
#[utoipa::path(get, path = "/passport/verify", responses((status = 200, description = "Passport verifier page (HTML); verifying happens in the browser and sends nothing", content_type = "text/html")))]
async fn passport_verify(State(state): State<Arc<AppState>>) -> impl IntoResponse {
    use crate::passport_page::{passport_page, CONTENT_SECURITY_POLICY};
    use axum::http::header;
    let keys = serde_json::to_string(&state.key_history()).expect("keys serialize");
    let page = passport_page(&keys);
    (
        [
            (header::CONTENT_TYPE, "text/html; charset=utf-8"),
            (header::CONTENT_SECURITY_POLICY, CONTENT_SECURITY_POLICY),
            (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
            (header::REFERRER_POLICY, "no-referrer"),
        ],
        page,
    )
}

// ---- members -----------------------------------------------------------------

#[derive(Deserialize, Serialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateOwnerRequest {
    /// Ed25519 public key, 64 hex chars or base64url.
    pub public_key: String,
    pub handle: String,
}

/// Operator only: registers a person (owner) and shows its credential once.
#[utoipa::path(post, path = "/v1/owners", request_body = CreateOwnerRequest, responses((status = 201, description = "Owner created; `credential` is shown once")))]
async fn create_owner(
    State(state): State<Arc<AppState>>,
    auth: Auth,
    ApiJson(body): ApiJson<CreateOwnerRequest>,
) -> Result<Response, Problem> {
    let public = parse_public_key(&body.public_key).map_err(|_| {
        Refusal::new(Code::PublicKeyInvalid, "`public_key` must be an Ed25519 key: 64 hex chars or base64url.")
    })?;
    validate::handle(&body.handle)?;
    let credential = new_secret_credential();
    let id = MemberId(did_key(&public));
    let op = Op::CreateOwner { id, handle: body.handle, credential_hash: sha256_hex(credential.as_bytes()) };
    Ok(with_credential(execute(&state, auth.member, None, op, StatusCode::CREATED).await, &credential).await)
}

/// Adds the one-time credential to a successful creation's body.
async fn with_credential(response: Response, credential: &str) -> Response {
    if !response.status().is_success() {
        return response;
    }
    let (parts, body) = response.into_parts();
    let bytes = axum::body::to_bytes(body, REQUEST_BODY_BYTES_MAX).await.unwrap_or_default();
    let mut value: serde_json::Value = serde_json::from_slice(&bytes).unwrap_or(json!({}));
    value["credential"] = json!(credential);
    let mut response = (parts.status, Json(value)).into_response();
    *response.headers_mut() = parts.headers;
    response
}

/// Owner only: draws a single-use invite code for one agent.
#[utoipa::path(post, path = "/v1/invites", responses((status = 201, description = "`invite_code` is shown once and dies after one use or at `expires_at_ms`")))]
async fn issue_invite(State(state): State<Arc<AppState>>, auth: Auth) -> Response {
    let code = format!("inv_{}", random_b64(INVITE_RANDOM_BYTES));
    let expires_at = state.now().plus_s(INVITE_TTL_S);
    let op = Op::IssueInvite { code_hash: sha256_hex(code.as_bytes()), expires_at };
    let response = execute(&state, auth.member, None, op, StatusCode::CREATED).await;
    if !response.status().is_success() {
        return response;
    }
    (StatusCode::CREATED, Json(json!({"invite_code": code, "expires_at_ms": expires_at}))).into_response()
}

#[derive(Deserialize, Serialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct RedeemInviteRequest {
    pub invite_code: String,
    /// The agent's own Ed25519 public key (hex or base64url); its DID is derived from it.
    pub public_key: String,
    pub handle: String,
    /// base64url Ed25519 signature over `bazaar-invite-v1\n<invite_code>\n<handle>`.
    pub proof: String,
}

/// An agent's first act: trade an invite code for its identity and a fresh credential.
#[utoipa::path(post, path = "/v1/agents", request_body = RedeemInviteRequest, responses((status = 201, description = "Agent enrolled; `credential` is shown once")))]
async fn redeem_invite(
    State(state): State<Arc<AppState>>,
    ApiJson(body): ApiJson<RedeemInviteRequest>,
) -> Result<Response, Problem> {
    let public = parse_public_key(&body.public_key).map_err(|_| {
        Refusal::new(Code::PublicKeyInvalid, "`public_key` must be an Ed25519 key: 64 hex chars or base64url.")
    })?;
    validate::handle(&body.handle)?;
    if body.invite_code.len() > INVITE_CODE_LEN_MAX {
        return Err(Refusal::new(Code::InviteNotFound, "No such invite code.").into());
    }
    verify(&public, &invite_proof_message(&body.invite_code, &body.handle), &body.proof).map_err(|_| {
        Refusal::new(
            Code::ProofInvalid,
            "`proof` must be your key's signature over `bazaar-invite-v1\\n<invite_code>\\n<handle>`.",
        )
    })?;
    let id = MemberId(did_key(&public));
    let credential = new_secret_credential();
    let actor = Member {
        id: id.clone(),
        kind: MemberKind::Agent,
        owner: None,
        handle: body.handle.clone(),
        created_at: state.now(),
    };
    let op = Op::RedeemInvite {
        code_hash: sha256_hex(body.invite_code.as_bytes()),
        agent: id,
        handle: body.handle,
        credential_hash: sha256_hex(credential.as_bytes()),
    };
    Ok(with_credential(execute(&state, actor, None, op, StatusCode::CREATED).await, &credential).await)
}

/// Replaces the caller's credential; the old one stops working at once.
#[utoipa::path(post, path = "/v1/credentials/rotate", responses((status = 200, description = "New `credential`, shown once")))]
async fn rotate_credential(State(state): State<Arc<AppState>>, auth: Auth) -> Response {
    let credential = new_secret_credential();
    let op = Op::RotateCredential { old_hash: auth.credential_hash, new_hash: sha256_hex(credential.as_bytes()) };
    with_credential(execute(&state, auth.member, None, op, StatusCode::OK).await, &credential).await
}

/// Revokes the credential this request is made with.
#[utoipa::path(post, path = "/v1/credentials/revoke", responses((status = 200, description = "Revoked")))]
async fn revoke_credential(State(state): State<Arc<AppState>>, auth: Auth) -> Response {
    let op = Op::RevokeCredential { member: auth.member.id.clone(), hash: auth.credential_hash };
    execute(&state, auth.member, None, op, StatusCode::OK).await
}

/// A member by DID or current handle.
#[utoipa::path(get, path = "/v1/members/{member}", params(("member" = String, Path, description = "DID or handle")), responses((status = 200, description = "Member")))]
async fn get_member(
    State(state): State<Arc<AppState>>,
    _auth: Auth,
    Path(who): Path<String>,
) -> Result<Json<Member>, Problem> {
    Ok(Json(resolve(&state, &who).await?))
}

#[derive(Deserialize, Serialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct RenameRequest {
    pub handle: String,
}

/// Renames a member (itself, or an agent of the caller). The old handle is reserved forever.
#[utoipa::path(put, path = "/v1/members/{member}/handle", request_body = RenameRequest, responses((status = 200, description = "Renamed")))]
async fn rename(
    State(state): State<Arc<AppState>>,
    auth: Auth,
    Path(who): Path<String>,
    ApiJson(body): ApiJson<RenameRequest>,
) -> Result<Response, Problem> {
    let target = resolve_id(&state, &who).await?;
    validate::handle(&body.handle)?;
    Ok(execute(&state, auth.member, None, Op::Rename { member: target, handle: body.handle }, StatusCode::OK).await)
}

/// The caller, its account and (for agents) its budget.
#[utoipa::path(get, path = "/v1/me", responses((status = 200, description = "Caller")))]
async fn me(State(state): State<Arc<AppState>>, auth: Auth) -> Result<Json<serde_json::Value>, Problem> {
    let account = state.store.account(&AccountId::of_member(&auth.member.id)).await?;
    let budget = state.store.budget(&auth.member.id).await?;
    Ok(Json(json!({
        "member": auth.member,
        "balance_minor": account.as_ref().map(|a| a.balance() as i64),
        "available_minor": account.as_ref().map(|a| a.available() as i64),
        "held_minor": account.as_ref().map(|a| a.debits_pending),
        "budget": budget.map(|b| bazaar_core::apply::budget_view(&b, state.now())),
    })))
}

// ---- money -------------------------------------------------------------------

#[derive(Deserialize, Serialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct MintRequest {
    /// Owner DID or handle.
    pub owner: String,
    pub amount_minor: u64,
}

/// Operator only: issues units into an owner's account (purchase-only; there is no withdrawal).
#[utoipa::path(post, path = "/v1/mint", request_body = MintRequest, params(("Idempotency-Key" = String, Header, description = "Required")), responses((status = 200, description = "Minted")))]
async fn mint(
    State(state): State<Arc<AppState>>,
    auth: Auth,
    headers: HeaderMap,
    ApiJson(body): ApiJson<MintRequest>,
) -> Result<Response, Problem> {
    let amount = validate::amount(body.amount_minor, "amount_minor")?;
    let idem = idem_for(&auth.member, "mint", &headers, KeyRule::Required, &body)?;
    let owner = resolve_id(&state, &body.owner).await?;
    Ok(execute(&state, auth.member, idem, Op::Mint { owner, amount }, StatusCode::OK).await)
}

#[derive(Deserialize, Serialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct FundRequest {
    pub amount_minor: u64,
}

/// Owner only: moves units from the owner's account into its agent's budget account.
#[utoipa::path(post, path = "/v1/agents/{agent}/fund", request_body = FundRequest, params(("agent" = String, Path, description = "DID or handle"), ("Idempotency-Key" = String, Header, description = "Required")), responses((status = 200, description = "Funded")))]
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
    Ok(execute(&state, auth.member, idem, Op::Fund { agent, amount }, StatusCode::OK).await)
}

#[derive(Deserialize, Serialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct BudgetRequest {
    pub per_call_max_minor: u64,
    pub per_day_max_minor: u64,
    pub total_max_minor: u64,
}

/// Owner only: sets an agent's ceilings. An agent can never set its own.
#[utoipa::path(put, path = "/v1/agents/{agent}/budget", request_body = BudgetRequest, responses((status = 200, description = "Budget")))]
async fn set_budget(
    State(state): State<Arc<AppState>>,
    auth: Auth,
    Path(who): Path<String>,
    ApiJson(body): ApiJson<BudgetRequest>,
) -> Result<Response, Problem> {
    let op = Op::SetBudget {
        agent: resolve_id(&state, &who).await?,
        per_call_max: validate::ceiling(body.per_call_max_minor, "per_call_max_minor")?,
        per_day_max: validate::ceiling(body.per_day_max_minor, "per_day_max_minor")?,
        total_max: validate::ceiling(body.total_max_minor, "total_max_minor")?,
    };
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
#[utoipa::path(post, path = "/v1/tokens", request_body = TokenRequest, responses((status = 201, description = "Token issued")))]
async fn issue_token(
    State(state): State<Arc<AppState>>,
    auth: Auth,
    headers: HeaderMap,
    ApiJson(body): ApiJson<TokenRequest>,
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
        if via.is_some() { MemberId(body.merchant.clone()) } else { resolve_id(&state, &body.merchant).await? };
    let mut request = json!({"merchant": merchant, "max_amount_minor": max, "order_id": body.order_id, "resource": body.resource, "ttl_s": ttl_s});
    if let Some(via) = &via {
        request["registry"] = json!(via);
    }
    let rule = KeyRule::DefaultTo(format!("order:{merchant}:{}", body.order_id));
    let idem = idem_for(&auth.member, "issue_token", &headers, rule, &request)?;
    let now = state.now();
    let claims = TokenClaims {
        v: 1,
        iss: state.registry.clone(),
        jti: new_token_id(now),
        sub: auth.member.id.clone(),
        aud: merchant,
        max,
        ord: OrderId(body.order_id),
        res: body.resource,
        iat_ms: now,
        exp_ms: now.plus_s(ttl_s),
        via,
    };
    let encoded = token::encode(&claims, &state.signing_key());
    Ok(execute(&state, auth.member, idem, Op::IssueToken { claims, token: encoded }, StatusCode::CREATED).await)
}

#[derive(Deserialize, Serialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct VerifyRequest {
    pub token: String,
}

/// A receipt check, never a work order: says whether the token is genuine and
/// its state. A settled token still verifies as genuine (state `settled`), so a
/// merchant must never do paid work because verify said "genuine".
#[utoipa::path(post, path = "/v1/tokens/verify", request_body = VerifyRequest, responses((status = 200, description = "Genuineness and state")))]
async fn verify_token(
    State(state): State<Arc<AppState>>,
    auth: Auth,
    ApiJson(body): ApiJson<VerifyRequest>,
) -> Result<Json<serde_json::Value>, Problem> {
    let claims = match state.decode_token(&body.token) {
        Ok(claims) => claims,
        Err(error) => {
            if let Some(claims) = token::peek(&body.token).ok().filter(|c| c.iss != state.registry) {
                return Ok(Json(fed::verify_foreign(&state, &auth.member, &body.token, claims).await?));
            }
            return Ok(Json(json!({"genuine": false, "reason": error.to_string()})));
        }
    };
    if auth.member.id != claims.aud && auth.member.id != claims.sub {
        return Err(
            Refusal::new(Code::NotAudience, "Only the token's merchant (audience) or buyer may verify it.").into()
        );
    }
    let Some(view) = state.store.token(&claims.jti).await? else {
        return Ok(Json(json!({"genuine": false, "reason": "signed by this registry but unknown to it"})));
    };
    let token_state = TokenState::of(&view.hold, state.now());
    Ok(Json(json!({
        "genuine": true,
        "state": token_state,
        "work_order": false,
        "claims": claims,
        "settlement": view.settlement.as_ref().map(bazaar_core::apply::settlement_view),
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
/// is derived from (merchant, order), so a retry returns the original receipt
/// with `Idempotent-Replayed: true`.
#[utoipa::path(post, path = "/v1/settlements", request_body = SettleRequest, params(("Idempotency-Key" = Option<String>, Header, description = "Defaults to order:<order_id>")), responses((status = 200, description = "Settlement receipt"), (status = 409, description = "In flight, or token/order already settled"), (status = 422, description = "Same key, different body")))]
async fn settle(
    State(state): State<Arc<AppState>>,
    auth: Auth,
    headers: HeaderMap,
    ApiJson(body): ApiJson<SettleRequest>,
) -> Result<Response, Problem> {
    let amount = validate::amount(body.amount_minor, "amount_minor")?;
    validate::order_id(&body.order_id)?;
    let decoded = state.decode_token(&body.token);
    if decoded.is_err() {
        if let Some(claims) = token::peek(&body.token).ok().filter(|c| c.iss != state.registry) {
            // A peer registry's token: settled through that registry, exactly once on each side.
            return fed::settle_foreign(&state, auth.member, &body.token, claims, amount, &body.order_id).await;
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
    let idem =
        idem_for(&auth.member, "settle", &headers, KeyRule::DefaultTo(format!("order:{}", body.order_id)), &body)?;
    let op = Op::Settle { claims, amount, order_id: OrderId(body.order_id) };
    Ok(execute(&state, auth.member, idem, op, StatusCode::OK).await)
}

/// Buyer (or its owner): voids an unsettled token and releases its hold.
#[utoipa::path(post, path = "/v1/tokens/{jti}/void", responses((status = 200, description = "Voided")))]
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
    let op = Op::VoidToken { jti: TokenId(jti), buyer: view.token.buyer };
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
#[utoipa::path(get, path = "/v1/events", params(("after" = Option<u64>, Query), ("limit" = Option<usize>, Query)), responses((status = 200, description = "Events")))]
async fn events(
    State(state): State<Arc<AppState>>,
    auth: Auth,
    Query(query): Query<EventsQuery>,
) -> Result<Json<serde_json::Value>, Problem> {
    if auth.member.kind != MemberKind::Operator {
        return Err(Refusal::new(Code::NotPermitted, "Only the operator reads the whole event ledger.").into());
    }
    let limit = query.limit.unwrap_or(PAGE_LIMIT_MAX).clamp(1, PAGE_LIMIT_MAX);
    let page = state.store.events(query.after, limit).await?;
    Ok(Json(json!({"events": page, "next_after": page.last().map(|e| e.seq)})))
}

#[derive(OpenApi)]
#[openapi(
    info(
        title = "Bazaar registry API",
        description = "Identities, a double-entry ledger, paid calls settled exactly once, escrowed contracts, disputes and stake. Errors are RFC 9457 problem+json with a stable `code`."
    ),
    paths(
        well_known,
        passport_verify,
        create_owner,
        issue_invite,
        redeem_invite,
        rotate_credential,
        revoke_credential,
        get_member,
        rename,
        me,
        mint,
        fund,
        set_budget,
        issue_token,
        verify_token,
        settle,
        void_token,
        events,
        escrow::create_contract,
        escrow::list_contracts,
        escrow::get_contract,
        escrow::accept_contract,
        escrow::decline_contract,
        escrow::cancel_contract,
        escrow::deliver_milestone,
        escrow::release_milestone,
        escrow::file_dispute,
        escrow::list_disputes,
        escrow::get_dispute,
        escrow::add_evidence,
        escrow::rule,
        escrow::appeal,
        escrow::execute_dispute,
        escrow::stake_lock,
        escrow::stake_unlock,
        escrow::stake_withdraw,
        escrow::get_stake,
        fed::get_reputation,
        fed::import_passport,
        fed::post_passport,
        fed::verify_passport_route,
        fed::key_history,
        fed::rotate_key,
        fed::recognition,
        fed::add_peer,
        fed::list_peers,
        fed::join_guest,
        market::put_listing,
        market::get_listing,
        market::search,
        market::unmet,
        market::create_rfq,
        market::list_rfqs,
        market::get_rfq,
        market::make_offer,
        market::allocation,
        market::close_rfq,
        market::set_order_policy,
        market::create_order,
        market::get_order,
        market::list_orders,
        market::approve_order,
        market::decline_order,
        market::prove_shipment,
        market::cancel_share,
        market::get_blob,
        market::approval_page,
        crate::x402_routes::supported,
        crate::x402_routes::verify,
        crate::x402_routes::settle
    ),
    components(schemas(
        CreateOwnerRequest,
        RedeemInviteRequest,
        RenameRequest,
        MintRequest,
        FundRequest,
        BudgetRequest,
        TokenRequest,
        VerifyRequest,
        SettleRequest,
        escrow::ContractRequest,
        escrow::MilestoneRequest,
        escrow::DeliverRequest,
        escrow::DisputeRequest,
        escrow::EvidenceRequest,
        escrow::RulingRequest,
        escrow::StakeRequest,
        fed::PassportRequest,
        fed::VerifyPassportRequest,
        fed::ImportRequest,
        fed::AddPeerRequest,
        fed::GuestRequest,
        market::ListingRequest,
        market::RfqRequest,
        market::OfferRequest,
        market::OrderPolicyRequest,
        market::OrderRequest
    ))
)]
pub struct ApiDoc;

#[cfg(test)]
mod tests {
    use super::*;
    use bazaar_types::{ManualClock, Timestamp};
    use tower::ServiceExt;

    #[tokio::test]
    async fn requests_past_the_limit_are_shed_with_503() {
        let dir = std::env::temp_dir().join(format!("bazaar-shed-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let clock = Arc::new(ManualClock::new(Timestamp(0)));
        let config = bazaar_core::apply::Config::standard();
        let store =
            Arc::new(bazaar_store_sqlite::SqliteStore::open(dir.join("s.db"), config.clone(), clock.clone()).unwrap());
        let state = crate::boot(store, clock, config, Some("op".into())).await.unwrap().state;
        let app = router(state.clone());
        let get = || axum::http::Request::get("/healthz").body(axum::body::Body::empty()).unwrap();
        assert_eq!(app.clone().oneshot(get()).await.unwrap().status(), StatusCode::OK);
        let busy = state.requests.try_acquire_many(HTTP_REQUESTS_IN_FLIGHT_MAX as u32).unwrap();
        let shed = app.clone().oneshot(get()).await.unwrap();
        assert_eq!(shed.status(), StatusCode::SERVICE_UNAVAILABLE);
        assert!(shed.headers().contains_key("retry-after"));
        let body = axum::body::to_bytes(shed.into_body(), 4096).await.unwrap();
        assert_eq!(serde_json::from_slice::<serde_json::Value>(&body).unwrap()["code"], "overloaded");
        drop(busy);
        assert_eq!(app.oneshot(get()).await.unwrap().status(), StatusCode::OK);
        std::fs::remove_dir_all(&dir).ok();
    }
}

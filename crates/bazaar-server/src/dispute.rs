//! Disputes and stake over HTTP: filing, evidence, rulings, appeals and
//! execution, and a merchant's stake (lock, unlock, withdraw, read). The
//! sweeper's share is advancing disputes whose deadline passed (default
//! rulings, arbiter replacement, execution after the appeal window).

use crate::auth::{ApiJson, ApiQuery, Auth};
use crate::escrow::{load_contract, may_read, PartyQuery};
use crate::exec::{self, count_advanced, due_ids, execute, idem_for, load_doc, resolve, resolve_id, KeyRule};
use crate::problem::Problem;
use crate::state::AppState;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;
use axum::Json;
use bazaar_core::command::{Idem, Op};
use bazaar_core::dispute;
use bazaar_core::dispute::{dispute_id_for, stake_view, Decision, Dispute, DisputeAct, ReasonCode, Stake, Subject};
use bazaar_core::kernel::docs::decode;
use bazaar_core::model::{DocKind, Member};
use bazaar_core::refusal::{Code, Refusal};
use bazaar_core::validate;
use bazaar_store::StoreError;
use bazaar_types::{AccountId, Amount, OrderId, Timestamp};
use bazaar_wire::dispute as schema;
use serde::{Deserialize, Serialize};
use serde_json::json;
use std::sync::Arc;
use utoipa::ToSchema;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

/// Disputes' and stake's routes, each with its OpenAPI entry.
pub fn routes() -> OpenApiRouter<Arc<AppState>> {
    OpenApiRouter::new()
        .routes(routes!(file_dispute, list_disputes))
        .routes(routes!(get_dispute))
        .routes(routes!(add_evidence))
        .routes(routes!(rule))
        .routes(routes!(appeal))
        .routes(routes!(execute_dispute))
        .routes(routes!(stake_lock))
        .routes(routes!(stake_unlock))
        .routes(routes!(stake_withdraw))
        .routes(routes!(get_stake))
}

/// The sweeper's share: advances disputes whose deadline passed. Returns how many advanced.
pub async fn due(state: &Arc<AppState>, now: Timestamp) -> Result<usize, StoreError> {
    let mut advances = Vec::new();
    for id in due_ids(state, DocKind::Dispute, now).await? {
        let Some(row) = state.store.doc(DocKind::Dispute, &id).await? else { continue };
        let d = decode::<Dispute>(&row)?;
        let op = Op::Dispute(dispute::Op::DisputeAct {
            dispute: bazaar_types::DisputeId(id),
            subject: d.subject,
            claimant: d.claimant,
            respondent: d.respondent,
            act: DisputeAct::Advance,
        });
        advances.push(exec::as_registry(state, op));
    }
    // Submitted together, so the writer folds them into one transaction.
    count_advanced(state, futures::future::join_all(advances).await)
}

// ---- disputes --------------------------------------------------------------------

#[derive(Deserialize, Serialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct DisputeRequest {
    pub subject: SubjectRequest,
    /// not_delivered, not_as_described, defective, unauthorized or other.
    #[schema(value_type = String)]
    pub reason: ReasonCode,
    pub claimed_minor: u64,
    #[serde(default)]
    pub note: String,
}

pub use bazaar_wire::dispute::DisputeSubject as SubjectRequest;

/// Buyer (or its owner): disputes a settled paid call or a milestone within
/// the claim window. The claimed amount is frozen at once.
#[utoipa::path(post, path = "/v1/disputes", request_body = DisputeRequest, params(("Idempotency-Key" = Option<String>, Header, description = "Optional: without it the registry derives the key from the request, so a retry is still answered once")), security(("credential" = []), ("session" = [])), responses((status = 201, description = "The dispute, with what was frozen and from where", body = schema::Dispute)))]
pub async fn file_dispute(
    State(state): State<Arc<AppState>>,
    auth: Auth,
    headers: HeaderMap,
    ApiJson(body): ApiJson<DisputeRequest>,
) -> Result<Response, Problem> {
    let claimed = validate::amount(body.claimed_minor, "claimed_minor")?;
    let (subject, claimant, respondent) = match body.subject.clone() {
        SubjectRequest::Call { merchant, order_id } => {
            validate::order_id(&order_id)?;
            let merchant = resolve_id(&state, &merchant).await?;
            let order_id = OrderId(order_id);
            let settled = state.store.settlement_by_order(&merchant, &order_id).await?;
            // An unpaid order has no buyer: the core refuses it, naming the caller as claimant.
            let claimant = settled.map(|s| s.buyer).unwrap_or_else(|| auth.member.id.clone());
            (Subject::Call { merchant: merchant.clone(), order_id }, claimant, merchant)
        }
        SubjectRequest::Milestone { contract, index } => {
            let c = load_contract(&state, &contract).await?;
            (Subject::Milestone { contract: bazaar_types::ContractId(contract), index }, c.buyer, c.seller)
        }
    };
    let key = format!("file:{}", dispute_id_for(&subject));
    let idem = idem_for(&auth.member, "file_dispute", &headers, KeyRule::DefaultTo(key), &body)?;
    let op = Op::Dispute(dispute::Op::FileDispute {
        subject,
        claimant,
        respondent,
        reason: body.reason,
        claimed,
        note: body.note,
    });
    Ok(execute(&state, auth.member, idem, op, StatusCode::CREATED).await)
}

async fn load_dispute(state: &AppState, id: &str) -> Result<Dispute, Problem> {
    load_doc(state, id, || Refusal::new(Code::DisputeNotFound, format!("No dispute {id} on this registry."))).await
}

/// A dispute's whole record: phase, deadline, what was frozen, evidence,
/// rulings, the appeal, the outcome and the timeline. Parties, their owners,
/// the assigned arbiter and the operator.
#[utoipa::path(get, path = "/v1/disputes/{id}", security(("credential" = []), ("session" = [])), responses((status = 200, description = "The dispute and its timeline", body = schema::Dispute)))]
pub async fn get_dispute(
    State(state): State<Arc<AppState>>,
    auth: Auth,
    Path(id): Path<String>,
) -> Result<Json<Dispute>, Problem> {
    let dispute = load_dispute(&state, &id).await?;
    let mut readers = vec![&dispute.claimant, &dispute.respondent];
    readers.extend(dispute.arbiters_used.iter());
    may_read(&state, &auth.member, &readers).await?;
    Ok(Json(dispute))
}

/// Disputes naming a party (claimant or respondent), by id.
#[utoipa::path(get, path = "/v1/disputes", params(("party" = Option<String>, Query), ("after" = Option<String>, Query), ("limit" = Option<usize>, Query)), security(("credential" = []), ("session" = [])), responses((status = 200, description = "Disputes", body = schema::DisputePage)))]
pub async fn list_disputes(
    State(state): State<Arc<AppState>>,
    auth: Auth,
    ApiQuery(query): ApiQuery<PartyQuery>,
) -> Result<Json<serde_json::Value>, Problem> {
    let page: Vec<Dispute> = crate::escrow::list_decoded(&state, &auth, query).await?;
    let next = page.last().map(|d| d.id.to_string());
    Ok(Json(json!({"disputes": page, "next_after": next})))
}

async fn dispute_act(
    state: Arc<AppState>,
    actor: Member,
    idem: Option<Idem>,
    id: String,
    act: DisputeAct,
) -> Result<Response, Problem> {
    let dispute = load_dispute(&state, &id).await?;
    let op = Op::Dispute(dispute::Op::DisputeAct {
        dispute: bazaar_types::DisputeId(id),
        subject: dispute.subject,
        claimant: dispute.claimant,
        respondent: dispute.respondent,
        act,
    });
    Ok(execute(&state, actor, idem, op, StatusCode::OK).await)
}

#[derive(Deserialize, Serialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct EvidenceRequest {
    /// SHA-256 of the evidence content, 64 lowercase hex.
    pub sha256: String,
    pub url: Option<String>,
    /// Ed25519 by the caller's did:key over `bazaar-evidence-v1.<dispute>.<sha256>`, base64url.
    pub signature: String,
}

/// A party (or its owner) adds signed evidence while the evidence phase is
/// open. The respondent's first evidence is its answer.
#[utoipa::path(post, path = "/v1/disputes/{id}/evidence", request_body = EvidenceRequest, params(("Idempotency-Key" = Option<String>, Header, description = "Optional: without it the registry derives the key from the request, so a retry is still answered once")), security(("credential" = []), ("session" = [])), responses((status = 200, description = "Recorded on the event ledger", body = schema::EvidenceAdded)))]
pub async fn add_evidence(
    State(state): State<Arc<AppState>>,
    auth: Auth,
    headers: HeaderMap,
    Path(id): Path<String>,
    ApiJson(body): ApiJson<EvidenceRequest>,
) -> Result<Response, Problem> {
    let key = format!("evidence:{id}:{}", body.sha256);
    let idem = idem_for(&auth.member, "dispute_evidence", &headers, KeyRule::DefaultTo(key), &body)?;
    let act = DisputeAct::Evidence { sha256: body.sha256, url: body.url, signature: body.signature };
    dispute_act(state, auth.member, idem, id, act).await
}

#[derive(Deserialize, Serialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct RulingRequest {
    /// refund_full, refund_partial or reject.
    #[schema(value_type = String)]
    pub decision: Decision,
    /// For refund_partial: between 1 and the claim less 1.
    #[serde(default)]
    pub refund_minor: u64,
    /// Stake to take from the respondent (bounded by what it has at execution).
    #[serde(default)]
    pub slash_minor: u64,
    pub reasons: String,
}

/// The assigned arbiter rules. A first ruling opens the appeal window; a
/// second (after an appeal) is final and executes at once.
#[utoipa::path(post, path = "/v1/disputes/{id}/ruling", request_body = RulingRequest, params(("Idempotency-Key" = Option<String>, Header, description = "Optional: without it the registry derives the key from the request, so a retry is still answered once")), security(("credential" = []), ("session" = [])), responses((status = 200, description = "The dispute after the ruling, or the execution outcome", body = schema::RulingAnswer)))]
pub async fn rule(
    State(state): State<Arc<AppState>>,
    auth: Auth,
    headers: HeaderMap,
    Path(id): Path<String>,
    ApiJson(body): ApiJson<RulingRequest>,
) -> Result<Response, Problem> {
    let idem = idem_for(&auth.member, "dispute_rule", &headers, KeyRule::DefaultTo(format!("rule:{id}")), &body)?;
    let act = DisputeAct::Rule {
        decision: body.decision,
        refund: Amount(body.refund_minor),
        slash: Amount(body.slash_minor),
        reasons: body.reasons,
    };
    dispute_act(state, auth.member, idem, id, act).await
}

/// The side a first ruling went against appeals once, within the window,
/// posting a bond (a hold) that it gets back only if the second ruling favours it.
#[utoipa::path(post, path = "/v1/disputes/{id}/appeal", params(("Idempotency-Key" = Option<String>, Header, description = "Optional: without it the registry derives the key from the request, so a retry is still answered once")), security(("credential" = []), ("session" = [])), responses((status = 200, description = "Appealed; a new arbiter is assigned", body = schema::Dispute)))]
pub async fn appeal(
    State(state): State<Arc<AppState>>,
    auth: Auth,
    headers: HeaderMap,
    Path(id): Path<String>,
) -> Result<Response, Problem> {
    let idem = idem_for(&auth.member, "dispute_appeal", &headers, KeyRule::DefaultTo(format!("appeal:{id}")), &id)?;
    dispute_act(state, auth.member, idem, id, DisputeAct::Appeal).await
}

/// Anyone may ask for a final ruling to be executed once the appeal window
/// passed (the sweeper does it anyway). Runs once; a second call is refused
/// `dispute_executed` with the outcome attached.
#[utoipa::path(post, path = "/v1/disputes/{id}/execute", params(("Idempotency-Key" = Option<String>, Header, description = "Optional: without it the registry derives the key from the request, so a retry is still answered once")), security(("credential" = []), ("session" = [])), responses((status = 200, description = "The outcome", body = schema::DisputeOutcome)))]
pub async fn execute_dispute(
    State(state): State<Arc<AppState>>,
    auth: Auth,
    headers: HeaderMap,
    Path(id): Path<String>,
) -> Result<Response, Problem> {
    let idem = idem_for(&auth.member, "dispute_execute", &headers, KeyRule::DefaultTo(format!("execute:{id}")), &id)?;
    dispute_act(state, auth.member, idem, id, DisputeAct::Execute).await
}

// ---- stake -------------------------------------------------------------------------

#[derive(Deserialize, Serialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct StakeRequest {
    pub amount_minor: u64,
}

/// Merchant agent: moves units from its balance into its stake account.
/// Requires `Idempotency-Key`.
#[utoipa::path(post, path = "/v1/stake", request_body = StakeRequest, params(("Idempotency-Key" = String, Header, description = "Required: reuse it on every retry of this request")), security(("credential" = []), ("session" = [])), responses((status = 200, description = "Locked", body = schema::StakeLocked)))]
pub async fn stake_lock(
    State(state): State<Arc<AppState>>,
    auth: Auth,
    headers: HeaderMap,
    ApiJson(body): ApiJson<StakeRequest>,
) -> Result<Response, Problem> {
    stake_move(state, auth, headers, body, "stake_lock", |amount| dispute::Op::StakeLock { amount }).await
}

/// Starts the cooldown on part of the caller's stake (refused while a dispute
/// is open against it). The units stay slashable until withdrawn.
#[utoipa::path(post, path = "/v1/stake/unlock", request_body = StakeRequest, params(("Idempotency-Key" = String, Header, description = "Required: reuse it on every retry of this request")), security(("credential" = []), ("session" = [])), responses((status = 200, description = "Cooldown started", body = schema::StakeUnlocking)))]
pub async fn stake_unlock(
    State(state): State<Arc<AppState>>,
    auth: Auth,
    headers: HeaderMap,
    ApiJson(body): ApiJson<StakeRequest>,
) -> Result<Response, Problem> {
    stake_move(state, auth, headers, body, "stake_unlock", |amount| dispute::Op::StakeUnlock { amount }).await
}

/// Locking and unlocking stake alike: a checked amount, a required
/// `Idempotency-Key` scoped to `op_name`, and one command.
async fn stake_move(
    state: Arc<AppState>,
    auth: Auth,
    headers: HeaderMap,
    body: StakeRequest,
    op_name: &str,
    op: fn(Amount) -> dispute::Op,
) -> Result<Response, Problem> {
    let amount = validate::amount(body.amount_minor, "amount_minor")?;
    let idem = idem_for(&auth.member, op_name, &headers, KeyRule::Required, &body)?;
    Ok(execute(&state, auth.member, idem, Op::Dispute(op(amount)), StatusCode::OK).await)
}

/// Moves unlocked stake back to the balance, after the cooldown and only with
/// no open dispute. Requires `Idempotency-Key`.
#[utoipa::path(post, path = "/v1/stake/withdraw", params(("Idempotency-Key" = String, Header, description = "Required: reuse it on every retry of this request")), security(("credential" = []), ("session" = [])), responses((status = 200, description = "Withdrawn", body = schema::StakeWithdrawn)))]
pub async fn stake_withdraw(
    State(state): State<Arc<AppState>>,
    auth: Auth,
    headers: HeaderMap,
) -> Result<Response, Problem> {
    let idem = idem_for(&auth.member, "stake_withdraw", &headers, KeyRule::Required, &"withdraw")?;
    Ok(execute(&state, auth.member, idem, Op::Dispute(dispute::Op::StakeWithdraw), StatusCode::OK).await)
}

/// A member's stake: balance, frozen part, open disputes, pending unlock. Any member may read it.
#[utoipa::path(get, path = "/v1/stake/{member}", security(("credential" = []), ("session" = [])), responses((status = 200, description = "Stake record", body = schema::Stake)))]
pub async fn get_stake(
    State(state): State<Arc<AppState>>,
    _auth: Auth,
    Path(member): Path<String>,
) -> Result<Json<schema::Stake>, Problem> {
    let member = resolve(&state, &member).await?;
    let account = state.store.account(&AccountId::stake_of(&member.id)).await?;
    let row = state.store.doc(DocKind::Stake, member.id.as_str()).await?;
    let stake = row.map(|r| decode::<Stake>(&r)).transpose()?.unwrap_or_else(|| Stake::empty(&member.id));
    let view: schema::Stake = crate::exec::wire(&stake_view(&member.id, account.as_ref(), &stake))?;
    Ok(Json(schema::Stake { handle: Some(member.handle), ..view }))
}

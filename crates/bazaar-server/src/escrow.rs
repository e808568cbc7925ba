//! Routes for escrowed contracts, disputes and stake. Each handler reads the
//! stored document first (to name the rows the command needs), then submits
//! one command through [`crate::routes::execute`] like every other write.

use crate::auth::{ApiJson, Auth};
use crate::problem::Problem;
use crate::routes::{execute, idem_for, resolve, resolve_id, KeyRule};
use crate::AppState;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;
use axum::Json;
use bazaar_core::command::{Idem, Op};
use bazaar_core::dispute::{dispute_id_for, stake_view, Decision, Dispute, DisputeAct, ReasonCode, Stake, Subject};
use bazaar_core::escrow::{Contract, ContractAct, MilestoneSpec};
use bazaar_core::model::{DocKind, Member, MemberKind, DESK_ID};
use bazaar_core::refusal::{Code, Refusal};
use bazaar_core::validate;
use bazaar_types::limits::{PAGE_LIMIT_MAX, REVIEW_WINDOW_S};
use bazaar_types::{AccountId, Amount, MemberId, OrderId, Timestamp};
use serde::{Deserialize, Serialize};
use serde_json::json;
use std::sync::Arc;
use utoipa::ToSchema;

// ---- contracts -----------------------------------------------------------------

#[derive(Deserialize, Serialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct MilestoneRequest {
    pub amount_minor: u64,
    pub description: String,
    pub due_at_ms: i64,
}

#[derive(Deserialize, Serialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ContractRequest {
    /// The seller agent: DID or handle.
    pub seller: String,
    /// DID or handle; the registry's dispute desk when absent.
    pub arbiter: Option<String>,
    pub milestones: Vec<MilestoneRequest>,
    /// SHA-256 (64 lowercase hex) of the terms both sides agree to.
    pub terms_sha256: String,
    /// Seconds the buyer has to review a delivery before it is released automatically.
    pub review_window_s: Option<u64>,
}

/// Buyer agent: opens and funds an escrowed contract (a hold per milestone on
/// its own budget). `Idempotency-Key` is required; the contract id is derived
/// from the three parties and that key, so a retry lands on the same contract.
#[utoipa::path(post, path = "/v1/contracts", request_body = ContractRequest, responses((status = 201, description = "The contract, funded and offered to the seller")))]
pub async fn create_contract(
    State(state): State<Arc<AppState>>,
    auth: Auth,
    headers: HeaderMap,
    ApiJson(body): ApiJson<ContractRequest>,
) -> Result<Response, Problem> {
    let seller = resolve_id(&state, &body.seller).await?;
    let arbiter = match &body.arbiter {
        Some(who) => resolve_id(&state, who).await?,
        None => MemberId(DESK_ID.into()),
    };
    if body.milestones.len() > bazaar_types::limits::CONTRACT_MILESTONES_MAX {
        return Err(Refusal::new(Code::MilestonesInvalid, "A contract has 1 to 16 milestones.").into());
    }
    let milestones = body
        .milestones
        .iter()
        .map(|m| {
            Ok(MilestoneSpec {
                amount: validate::amount(m.amount_minor, "amount_minor")?,
                description: m.description.clone(),
                due_at: Timestamp(m.due_at_ms),
            })
        })
        .collect::<Result<Vec<_>, Refusal>>()?;
    let idem = idem_for(&auth.member, "create_contract", &headers, KeyRule::Required, &body)?;
    let op = Op::CreateContract {
        seller,
        arbiter,
        milestones,
        terms_hash: body.terms_sha256,
        review_window_s: body.review_window_s.unwrap_or(REVIEW_WINDOW_S),
    };
    Ok(execute(&state, auth.member, idem, op, StatusCode::CREATED).await)
}

async fn load_contract(state: &AppState, id: &str) -> Result<Contract, Problem> {
    let row = state.store.doc(DocKind::Contract, id).await?;
    row.map(|r| Contract::from_row(&r))
        .ok_or_else(|| Refusal::new(Code::ContractNotFound, format!("No contract {id} on this registry.")).into())
}

/// Parties (and their owners) and the operator may read a document.
async fn may_read(state: &AppState, actor: &Member, parties: &[&MemberId]) -> Result<(), Problem> {
    if actor.kind == MemberKind::Operator || parties.contains(&&actor.id) {
        return Ok(());
    }
    for party in parties {
        if let Some(member) = state.store.member(party).await? {
            if member.owner.as_ref() == Some(&actor.id) {
                return Ok(());
            }
        }
    }
    Err(Refusal::new(Code::NotParty, "Only the parties (or their owners) and the operator read this.").into())
}

/// A contract, with what it still holds. Parties, their owners and the operator.
#[utoipa::path(get, path = "/v1/contracts/{id}", responses((status = 200, description = "The contract")))]
pub async fn get_contract(
    State(state): State<Arc<AppState>>,
    auth: Auth,
    Path(id): Path<String>,
) -> Result<Json<serde_json::Value>, Problem> {
    let contract = load_contract(&state, &id).await?;
    may_read(&state, &auth.member, &[&contract.buyer, &contract.seller, &contract.arbiter]).await?;
    Ok(Json(contract.view()))
}

async fn contract_act(
    state: Arc<AppState>,
    auth: Auth,
    headers: HeaderMap,
    id: String,
    act: ContractAct,
    default_key: String,
) -> Result<Response, Problem> {
    let contract = load_contract(&state, &id).await?;
    let idem = idem_for(&auth.member, act.name(), &headers, KeyRule::DefaultTo(default_key), &act)?;
    let op = Op::ContractAct {
        contract: id,
        buyer: contract.buyer,
        seller: contract.seller,
        milestones: contract.milestones.len() as u32,
        act,
    };
    Ok(execute(&state, auth.member, idem, op, StatusCode::OK).await)
}

/// Seller: accepts the contract; from now on milestones can be delivered.
#[utoipa::path(post, path = "/v1/contracts/{id}/accept", responses((status = 200, description = "Accepted")))]
pub async fn accept_contract(
    State(state): State<Arc<AppState>>,
    auth: Auth,
    headers: HeaderMap,
    Path(id): Path<String>,
) -> Result<Response, Problem> {
    let key = format!("accept:{id}");
    contract_act(state, auth, headers, id, ContractAct::Accept, key).await
}

/// Seller: declines; every milestone hold goes back to the buyer.
#[utoipa::path(post, path = "/v1/contracts/{id}/decline", responses((status = 200, description = "Declined")))]
pub async fn decline_contract(
    State(state): State<Arc<AppState>>,
    auth: Auth,
    headers: HeaderMap,
    Path(id): Path<String>,
) -> Result<Response, Problem> {
    let key = format!("decline:{id}");
    contract_act(state, auth, headers, id, ContractAct::Decline, key).await
}

/// Buyer: cancels before the seller accepted; every hold goes back.
#[utoipa::path(post, path = "/v1/contracts/{id}/cancel", responses((status = 200, description = "Cancelled")))]
pub async fn cancel_contract(
    State(state): State<Arc<AppState>>,
    auth: Auth,
    headers: HeaderMap,
    Path(id): Path<String>,
) -> Result<Response, Problem> {
    let key = format!("cancel:{id}");
    contract_act(state, auth, headers, id, ContractAct::Cancel, key).await
}

#[derive(Deserialize, Serialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct DeliverRequest {
    pub evidence_sha256: String,
}

/// Seller: marks a milestone delivered; the buyer's review window starts.
#[utoipa::path(post, path = "/v1/contracts/{id}/milestones/{index}/deliver", request_body = DeliverRequest, responses((status = 200, description = "Delivered; `review_deadline_ms` says when it releases by itself")))]
pub async fn deliver_milestone(
    State(state): State<Arc<AppState>>,
    auth: Auth,
    headers: HeaderMap,
    Path((id, index)): Path<(String, u32)>,
    ApiJson(body): ApiJson<DeliverRequest>,
) -> Result<Response, Problem> {
    let key = format!("deliver:{id}:{index}");
    let act = ContractAct::Deliver { milestone: index, evidence_sha256: body.evidence_sha256 };
    contract_act(state, auth, headers, id, act, key).await
}

/// Buyer: accepts a delivered milestone and releases it to the seller, less the
/// fee. Releases once: a retry with the same key replays the receipt; any
/// other second release is refused `milestone_already_released` with it attached.
#[utoipa::path(post, path = "/v1/contracts/{id}/milestones/{index}/release", responses((status = 200, description = "Release receipt"), (status = 409, description = "Already released, or disputed")))]
pub async fn release_milestone(
    State(state): State<Arc<AppState>>,
    auth: Auth,
    headers: HeaderMap,
    Path((id, index)): Path<(String, u32)>,
) -> Result<Response, Problem> {
    let key = format!("release:{id}:{index}");
    contract_act(state, auth, headers, id, ContractAct::Release { milestone: index }, key).await
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PartyQuery {
    /// DID or handle; defaults to the caller.
    pub party: Option<String>,
    #[serde(default)]
    pub after: String,
    pub limit: Option<usize>,
}

async fn list_docs(
    state: &AppState,
    auth: &Auth,
    kind: DocKind,
    query: PartyQuery,
) -> Result<Vec<serde_json::Value>, Problem> {
    let party = match &query.party {
        Some(who) => resolve(state, who).await?,
        None => auth.member.clone(),
    };
    let allowed = auth.member.kind == MemberKind::Operator
        || party.id == auth.member.id
        || party.owner.as_ref() == Some(&auth.member.id);
    if !allowed {
        return Err(Refusal::new(
            Code::NotPermitted,
            "List your own (or your agents') records; the operator lists anyone's.",
        )
        .into());
    }
    let limit = query.limit.unwrap_or(PAGE_LIMIT_MAX).clamp(1, PAGE_LIMIT_MAX);
    let rows = state.store.docs_by_party(kind, &party.id, &query.after, limit).await?;
    Ok(rows.iter().map(|r| r.body.clone()).collect())
}

/// Contracts naming a party (buyer, seller or arbiter), by id.
#[utoipa::path(get, path = "/v1/contracts", params(("party" = Option<String>, Query), ("after" = Option<String>, Query), ("limit" = Option<usize>, Query)), responses((status = 200, description = "Contracts")))]
pub async fn list_contracts(
    State(state): State<Arc<AppState>>,
    auth: Auth,
    Query(query): Query<PartyQuery>,
) -> Result<Json<serde_json::Value>, Problem> {
    let page = list_docs(&state, &auth, DocKind::Contract, query).await?;
    let next = page.last().map(|c| c["id"].clone());
    Ok(Json(json!({"contracts": page, "next_after": next})))
}

// ---- disputes --------------------------------------------------------------------

#[derive(Deserialize, Serialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct DisputeRequest {
    /// `{"type":"call","merchant":…,"order_id":…}` or `{"type":"milestone","contract":…,"index":…}`.
    #[schema(value_type = Object)]
    pub subject: SubjectRequest,
    /// not_delivered, not_as_described, defective, unauthorized or other.
    #[schema(value_type = String)]
    pub reason: ReasonCode,
    pub claimed_minor: u64,
    #[serde(default)]
    pub note: String,
}

#[derive(Deserialize, Serialize, Clone)]
#[serde(tag = "type", rename_all = "snake_case", deny_unknown_fields)]
pub enum SubjectRequest {
    Call { merchant: String, order_id: String },
    Milestone { contract: String, index: u32 },
}

/// Buyer (or its owner): disputes a settled paid call or a milestone within
/// the claim window. The claimed amount is frozen at once.
#[utoipa::path(post, path = "/v1/disputes", request_body = DisputeRequest, responses((status = 201, description = "The dispute, with what was frozen and from where")))]
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
            (Subject::Milestone { contract, index }, c.buyer, c.seller)
        }
    };
    let key = format!("file:{}", dispute_id_for(&subject));
    let idem = idem_for(&auth.member, "file_dispute", &headers, KeyRule::DefaultTo(key), &body)?;
    let op = Op::FileDispute { subject, claimant, respondent, reason: body.reason, claimed, note: body.note };
    Ok(execute(&state, auth.member, idem, op, StatusCode::CREATED).await)
}

async fn load_dispute(state: &AppState, id: &str) -> Result<Dispute, Problem> {
    let row = state.store.doc(DocKind::Dispute, id).await?;
    row.map(|r| Dispute::from_row(&r))
        .ok_or_else(|| Refusal::new(Code::DisputeNotFound, format!("No dispute {id} on this registry.")).into())
}

/// A dispute's whole record: phase, deadline, what was frozen, evidence,
/// rulings, the appeal, the outcome and the timeline. Parties, their owners,
/// the assigned arbiter and the operator.
#[utoipa::path(get, path = "/v1/disputes/{id}", responses((status = 200, description = "The dispute and its timeline")))]
pub async fn get_dispute(
    State(state): State<Arc<AppState>>,
    auth: Auth,
    Path(id): Path<String>,
) -> Result<Json<serde_json::Value>, Problem> {
    let dispute = load_dispute(&state, &id).await?;
    let mut readers = vec![&dispute.claimant, &dispute.respondent];
    readers.extend(dispute.arbiters_used.iter());
    may_read(&state, &auth.member, &readers).await?;
    Ok(Json(dispute.view()))
}

/// Disputes naming a party (claimant or respondent), by id.
#[utoipa::path(get, path = "/v1/disputes", params(("party" = Option<String>, Query), ("after" = Option<String>, Query), ("limit" = Option<usize>, Query)), responses((status = 200, description = "Disputes")))]
pub async fn list_disputes(
    State(state): State<Arc<AppState>>,
    auth: Auth,
    Query(query): Query<PartyQuery>,
) -> Result<Json<serde_json::Value>, Problem> {
    let page = list_docs(&state, &auth, DocKind::Dispute, query).await?;
    let next = page.last().map(|d| d["id"].clone());
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
    let op = Op::DisputeAct {
        dispute: id,
        subject: dispute.subject,
        claimant: dispute.claimant,
        respondent: dispute.respondent,
        act,
    };
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
#[utoipa::path(post, path = "/v1/disputes/{id}/evidence", request_body = EvidenceRequest, responses((status = 200, description = "Recorded on the event ledger")))]
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
#[utoipa::path(post, path = "/v1/disputes/{id}/ruling", request_body = RulingRequest, responses((status = 200, description = "The dispute after the ruling, or the execution outcome")))]
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
#[utoipa::path(post, path = "/v1/disputes/{id}/appeal", responses((status = 200, description = "Appealed; a new arbiter is assigned")))]
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
#[utoipa::path(post, path = "/v1/disputes/{id}/execute", responses((status = 200, description = "The outcome"), (status = 409, description = "Already executed, or not final yet")))]
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
#[utoipa::path(post, path = "/v1/stake", request_body = StakeRequest, responses((status = 200, description = "Locked")))]
pub async fn stake_lock(
    State(state): State<Arc<AppState>>,
    auth: Auth,
    headers: HeaderMap,
    ApiJson(body): ApiJson<StakeRequest>,
) -> Result<Response, Problem> {
    let amount = validate::amount(body.amount_minor, "amount_minor")?;
    let idem = idem_for(&auth.member, "stake_lock", &headers, KeyRule::Required, &body)?;
    Ok(execute(&state, auth.member, idem, Op::StakeLock { amount }, StatusCode::OK).await)
}

/// Starts the cooldown on part of the caller's stake (refused while a dispute
/// is open against it). The units stay slashable until withdrawn.
#[utoipa::path(post, path = "/v1/stake/unlock", request_body = StakeRequest, responses((status = 200, description = "Cooldown started")))]
pub async fn stake_unlock(
    State(state): State<Arc<AppState>>,
    auth: Auth,
    headers: HeaderMap,
    ApiJson(body): ApiJson<StakeRequest>,
) -> Result<Response, Problem> {
    let amount = validate::amount(body.amount_minor, "amount_minor")?;
    let idem = idem_for(&auth.member, "stake_unlock", &headers, KeyRule::Required, &body)?;
    Ok(execute(&state, auth.member, idem, Op::StakeUnlock { amount }, StatusCode::OK).await)
}

/// Moves unlocked stake back to the balance, after the cooldown and only with
/// no open dispute. Requires `Idempotency-Key`.
#[utoipa::path(post, path = "/v1/stake/withdraw", responses((status = 200, description = "Withdrawn")))]
pub async fn stake_withdraw(
    State(state): State<Arc<AppState>>,
    auth: Auth,
    headers: HeaderMap,
) -> Result<Response, Problem> {
    let idem = idem_for(&auth.member, "stake_withdraw", &headers, KeyRule::Required, &"withdraw")?;
    Ok(execute(&state, auth.member, idem, Op::StakeWithdraw, StatusCode::OK).await)
}

/// A member's stake: balance, frozen part, open disputes, pending unlock. Any member may read it.
#[utoipa::path(get, path = "/v1/stake/{member}", responses((status = 200, description = "Stake record")))]
pub async fn get_stake(
    State(state): State<Arc<AppState>>,
    _auth: Auth,
    Path(member): Path<String>,
) -> Result<Json<serde_json::Value>, Problem> {
    let member = resolve(&state, &member).await?;
    let account = state.store.account(&AccountId::stake_of(&member.id)).await?;
    let row = state.store.doc(DocKind::Stake, member.id.as_str()).await?;
    let mut view = stake_view(&member.id, account.as_ref(), &Stake::from_row(&member.id, row.as_ref()));
    view["handle"] = json!(member.handle);
    Ok(Json(view))
}

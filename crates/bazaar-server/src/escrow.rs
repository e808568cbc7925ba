//! Escrowed contracts over HTTP. Each handler reads the stored contract first
//! (to name the rows the command needs), then submits one command through
//! [`crate::exec::execute`] like every other write; the sweeper's share is
//! advancing contracts whose deadline passed (auto-release after review).

use crate::auth::{ApiJson, ApiQuery, Auth};
use crate::exec::{self, count_advanced, due_ids, execute, idem_for, load_doc, resolve, resolve_id, KeyRule};
use crate::problem::Problem;
use crate::state::AppState;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;
use axum::Json;
use bazaar_core::command::Op;
use bazaar_core::escrow;
use bazaar_core::escrow::{Contract, ContractAct, MilestoneSpec};
use bazaar_core::kernel::docs::decode;
use bazaar_core::model::{DocKind, Member, MemberKind, DESK_ID};
use bazaar_core::refusal::{Code, Refusal};
use bazaar_core::validate;
use bazaar_store::StoreError;
use bazaar_types::limits::{PAGE_LIMIT_MAX, REVIEW_WINDOW_S};
use bazaar_types::{MemberId, Timestamp};
use bazaar_wire::escrow as schema;
use serde::{Deserialize, Serialize};
use serde_json::json;
use std::sync::Arc;
use utoipa::ToSchema;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

/// Escrow's routes, each with its OpenAPI entry.
pub fn routes() -> OpenApiRouter<Arc<AppState>> {
    OpenApiRouter::new()
        .routes(routes!(create_contract, list_contracts))
        .routes(routes!(get_contract))
        .routes(routes!(accept_contract))
        .routes(routes!(decline_contract))
        .routes(routes!(cancel_contract))
        .routes(routes!(deliver_milestone))
        .routes(routes!(release_milestone))
        .routes(routes!(reclaim_milestone))
}

/// The sweeper's share: advances contracts whose deadline passed (a delivered
/// milestone the buyer did not review is released). Returns how many advanced.
pub async fn due(state: &Arc<AppState>, now: Timestamp) -> Result<usize, StoreError> {
    let mut advances = Vec::new();
    for id in due_ids(state, DocKind::Contract, now).await? {
        let Some(row) = state.store.doc(DocKind::Contract, &id).await? else { continue };
        let c = decode::<Contract>(&row)?;
        let milestones = c.milestones.len() as u32;
        let act = ContractAct::Advance;
        let op = Op::Escrow(escrow::Op::ContractAct {
            contract: bazaar_types::ContractId(id),
            buyer: c.buyer,
            seller: c.seller,
            milestones,
            act,
        });
        advances.push(exec::as_registry(state, op));
    }
    // Submitted together, so the writer folds them into one transaction.
    count_advanced(state, futures::future::join_all(advances).await)
}

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
#[utoipa::path(post, path = "/v1/contracts", request_body = ContractRequest, params(("Idempotency-Key" = String, Header, description = "Required: reuse it on every retry of this request")), security(("credential" = []), ("session" = [])), responses((status = 201, description = "The contract, funded and offered to the seller", body = schema::Contract)))]
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
    let op = Op::Escrow(escrow::Op::CreateContract {
        seller,
        arbiter,
        milestones,
        terms_hash: body.terms_sha256,
        review_window_s: body.review_window_s.unwrap_or(REVIEW_WINDOW_S),
    });
    Ok(execute(&state, auth.member, idem, op, StatusCode::CREATED).await)
}

pub(crate) async fn load_contract(state: &AppState, id: &str) -> Result<Contract, Problem> {
    load_doc(state, id, || Refusal::new(Code::ContractNotFound, format!("No contract {id} on this registry."))).await
}

/// Parties (and their owners) and the operator may read a document.
pub(crate) async fn may_read(state: &AppState, actor: &Member, parties: &[&MemberId]) -> Result<(), Problem> {
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
#[utoipa::path(get, path = "/v1/contracts/{id}", security(("credential" = []), ("session" = [])), responses((status = 200, description = "The contract", body = schema::Contract)))]
pub async fn get_contract(
    State(state): State<Arc<AppState>>,
    auth: Auth,
    Path(id): Path<String>,
) -> Result<Json<escrow::receipts::ContractView>, Problem> {
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
    let op = Op::Escrow(escrow::Op::ContractAct {
        contract: bazaar_types::ContractId(id),
        buyer: contract.buyer,
        seller: contract.seller,
        milestones: contract.milestones.len() as u32,
        act,
    });
    Ok(execute(&state, auth.member, idem, op, StatusCode::OK).await)
}

/// Seller: accepts the contract; from now on milestones can be delivered.
#[utoipa::path(post, path = "/v1/contracts/{id}/accept", params(("Idempotency-Key" = Option<String>, Header, description = "Optional: without it the registry derives the key from the request, so a retry is still answered once")), security(("credential" = []), ("session" = [])), responses((status = 200, description = "Accepted: the contract", body = schema::Contract)))]
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
#[utoipa::path(post, path = "/v1/contracts/{id}/decline", params(("Idempotency-Key" = Option<String>, Header, description = "Optional: without it the registry derives the key from the request, so a retry is still answered once")), security(("credential" = []), ("session" = [])), responses((status = 200, description = "Declined: the contract", body = schema::Contract)))]
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
#[utoipa::path(post, path = "/v1/contracts/{id}/cancel", params(("Idempotency-Key" = Option<String>, Header, description = "Optional: without it the registry derives the key from the request, so a retry is still answered once")), security(("credential" = []), ("session" = [])), responses((status = 200, description = "Cancelled: the contract", body = schema::Contract)))]
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
#[utoipa::path(post, path = "/v1/contracts/{id}/milestones/{index}/deliver", request_body = DeliverRequest, params(("Idempotency-Key" = Option<String>, Header, description = "Optional: without it the registry derives the key from the request, so a retry is still answered once")), security(("credential" = []), ("session" = [])), responses((status = 200, description = "Delivered; `review_deadline_ms` says when it releases by itself", body = schema::MilestoneDelivered)))]
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
#[utoipa::path(post, path = "/v1/contracts/{id}/milestones/{index}/release", params(("Idempotency-Key" = Option<String>, Header, description = "Optional: without it the registry derives the key from the request, so a retry is still answered once")), security(("credential" = []), ("session" = [])), responses((status = 200, description = "Release receipt", body = schema::MilestoneReleased)))]
pub async fn release_milestone(
    State(state): State<Arc<AppState>>,
    auth: Auth,
    headers: HeaderMap,
    Path((id, index)): Path<(String, u32)>,
) -> Result<Response, Problem> {
    let key = format!("release:{id}:{index}");
    contract_act(state, auth, headers, id, ContractAct::Release { milestone: index }, key).await
}

/// Buyer: takes back the hold of a milestone the seller never delivered, once
/// its due date plus the registry's grace (`MILESTONE_RECLAIM_GRACE_S`) has
/// passed. Reclaims once: a retry with the same key replays the receipt; too
/// early is `reclaim_too_early` with `reclaimable_at_ms` in `facts`; a
/// delivered, disputed, released or already reclaimed milestone is refused.
#[utoipa::path(post, path = "/v1/contracts/{id}/milestones/{index}/reclaim", params(("Idempotency-Key" = Option<String>, Header, description = "Optional: without it the registry derives the key from the request, so a retry is still answered once")), security(("credential" = []), ("session" = [])), responses((status = 200, description = "Reclaim receipt: the hold went back to the buyer", body = schema::MilestoneReclaimed)))]
pub async fn reclaim_milestone(
    State(state): State<Arc<AppState>>,
    auth: Auth,
    headers: HeaderMap,
    Path((id, index)): Path<(String, u32)>,
) -> Result<Response, Problem> {
    // The key is derived, so a refusal (`reclaim_too_early`) is not kept under it: asked again once the time
    // comes, the reclaim runs.
    let key = format!("reclaim:{id}:{index}");
    contract_act(state, auth, headers, id, ContractAct::Reclaim { milestone: index }, key).await
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

/// A page of `T` documents naming a party, each decoded as `GET` of one serves it (no stored `version`).
pub(crate) async fn list_decoded<T: bazaar_core::kernel::docs::Document>(
    state: &AppState,
    auth: &Auth,
    query: PartyQuery,
) -> Result<Vec<T>, Problem> {
    let rows = list_rows(state, auth, T::KIND, query).await?;
    Ok(rows.iter().map(decode::<T>).collect::<Result<_, _>>()?)
}

async fn list_rows(
    state: &AppState,
    auth: &Auth,
    kind: DocKind,
    query: PartyQuery,
) -> Result<Vec<bazaar_core::model::DocRow>, Problem> {
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
    Ok(rows)
}

/// Contracts naming a party (buyer, seller or arbiter), by id.
#[utoipa::path(get, path = "/v1/contracts", params(("party" = Option<String>, Query), ("after" = Option<String>, Query), ("limit" = Option<usize>, Query)), security(("credential" = []), ("session" = [])), responses((status = 200, description = "Contracts", body = schema::ContractPage)))]
pub async fn list_contracts(
    State(state): State<Arc<AppState>>,
    auth: Auth,
    ApiQuery(query): ApiQuery<PartyQuery>,
) -> Result<Json<serde_json::Value>, Problem> {
    let page: Vec<Contract> = list_decoded(&state, &auth, query).await?;
    let next = page.last().map(|c| c.id.to_string());
    let views: Vec<_> = page.iter().map(Contract::view).collect();
    Ok(Json(json!({"contracts": views, "next_after": next})))
}

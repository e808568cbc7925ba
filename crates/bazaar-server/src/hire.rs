//! Service payments and guest hires over HTTP.
//!
//! Service payments: an owner authorizes one of its agents to pay a
//! specialist exactly (task, specialist, pay-to, amount; zero is sponsorship),
//! the hiring agent pays once against it from its own budget, and the owner
//! may revoke an unpaid authorization. The authorization is the registry's
//! record of whether a payment happened: a hiring agent whose answer was lost
//! reads it here instead of paying again.
//!
//! Guest hires: the hirer agrees a fixed-price hire of another owner's
//! specialist from the specialist's signed offer, which opens (or reuses)
//! their guest conversation — a DM of the conversation plane, granting no
//! room or workspace access — and locks the terms; it accepts and pays only
//! with a response this edge verified (the specialist's signed result to the
//! exact task, its Nostr key bound to its DID by its enrollment).
//!
//! Priority leases: prepaid queue priority at a worker for the payer's own
//! task identity (its enrollment proves the key is the payer's), active only
//! once the worker published its receipt; every read says its status.

use crate::auth::{ApiJson, ApiQuery, Auth};
use crate::escrow::{list_decoded, may_read, PartyQuery};
use crate::exec::{execute, execute_shaped, idem_for, load_doc, resolve_account, resolve_id, KeyRule};
use crate::problem::Problem;
use crate::state::AppState;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;
use axum::Json;
use bazaar_core::command::Op;
use bazaar_core::hire::{self, ServiceAuthorization, Terms};
use bazaar_core::refusal::{Code, Refusal};
use bazaar_core::validate;
use bazaar_types::{Amount, MemberId};
use serde::{Deserialize, Serialize};
use serde_json::json;
use std::sync::Arc;
use utoipa::ToSchema;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

pub fn routes() -> OpenApiRouter<Arc<AppState>> {
    OpenApiRouter::new()
        .routes(routes!(authorize, list_authorizations))
        .routes(routes!(get_authorization))
        .routes(routes!(pay))
        .routes(routes!(revoke))
        .routes(routes!(agree_hire, list_hires))
        .routes(routes!(get_hire))
        .routes(routes!(accept_hire))
        .routes(routes!(buy_lease, list_leases))
        .routes(routes!(get_lease))
        .routes(routes!(receipt_lease))
}

#[derive(Deserialize, Serialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct TermsRequest {
    /// The task (the job request's event id, 64 hex) the specialist is paid for.
    pub task: String,
    /// The specialist agent: DID or handle.
    pub specialist: String,
    /// The account paid: the specialist's owner or one of its agents (DID or handle).
    pub pay_to: String,
    /// Gross, before the protocol fee; `0` records sponsorship (nothing is paid).
    pub amount_minor: u64,
}

async fn terms(state: &AppState, body: &TermsRequest) -> Result<Terms, Problem> {
    let amount_minor =
        if body.amount_minor == 0 { Amount::ZERO } else { validate::amount(body.amount_minor, "amount_minor")? };
    Ok(Terms {
        task: body.task.clone(),
        specialist: resolve_id(state, &body.specialist).await?,
        pay_to: resolve_account(state, &body.pay_to).await?,
        amount_minor,
    })
}

#[derive(Deserialize, Serialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct AuthorizeRequest {
    /// The owner's agent that will pay: DID or handle.
    pub agent: String,
    /// The task (the job request's event id, 64 hex).
    pub task: String,
    /// The specialist agent: DID or handle.
    pub specialist: String,
    /// The specialist's owner or one of its agents (DID or handle).
    pub pay_to: String,
    /// Gross, before the protocol fee; `0` records sponsorship.
    pub amount_minor: u64,
}

/// Owner: authorizes one of its agents to pay a specialist exactly these
/// terms for one task (one authorization per agent and task, `sva_…`).
/// Moves nothing. An amount of zero records the specialist's work as sponsored.
#[utoipa::path(post, path = "/v1/service-authorizations", request_body = AuthorizeRequest, params(("Idempotency-Key" = Option<String>, Header, description = "Optional: without it the registry derives the key from the request, so a retry is still answered once")), security(("credential" = []), ("session" = [])), responses((status = 201, description = "The authorization", body = bazaar_wire::hire::ServiceAuthorization)))]
pub async fn authorize(
    State(state): State<Arc<AppState>>,
    auth: Auth,
    headers: HeaderMap,
    ApiJson(body): ApiJson<AuthorizeRequest>,
) -> Result<Response, Problem> {
    let agent = resolve_id(&state, &body.agent).await?;
    let asked = TermsRequest {
        task: body.task.clone(),
        specialist: body.specialist.clone(),
        pay_to: body.pay_to.clone(),
        amount_minor: body.amount_minor,
    };
    let terms = terms(&state, &asked).await?;
    // Other terms for the same task are a new request (answered
    // `authorization_exists`), not a conflict on one key.
    let asked = serde_json::to_string(&terms).expect("terms serialize");
    let key = format!("authorize:{agent}:{}:{}", terms.task, &bazaar_core::crypto::sha256_hex(asked.as_bytes())[..16]);
    let idem = idem_for(&auth.member, "service_authorize", &headers, KeyRule::DefaultTo(key), &body)?;
    let op = Op::Hire(hire::Op::Authorize { agent, terms });
    Ok(execute(&state, auth.member, idem, op, StatusCode::CREATED).await)
}

async fn load(state: &AppState, id: &str) -> Result<ServiceAuthorization, Problem> {
    load_doc(state, id, || {
        Refusal::new(Code::AuthorizationNotFound, format!("No service authorization {id} on this registry."))
    })
    .await
}

/// An authorization, with its payment once made: the owner, the hiring
/// agent, the specialist, the payee (and their owners) and the operator.
#[utoipa::path(get, path = "/v1/service-authorizations/{id}", security(("credential" = []), ("session" = [])), responses((status = 200, description = "The authorization", body = bazaar_wire::hire::ServiceAuthorization)))]
pub async fn get_authorization(
    State(state): State<Arc<AppState>>,
    auth: Auth,
    Path(id): Path<String>,
) -> Result<Json<ServiceAuthorization>, Problem> {
    let found = load(&state, &id).await?;
    let parties = [&found.owner, &found.agent, &found.terms.specialist, &found.terms.pay_to];
    may_read(&state, &auth.member, &parties).await?;
    Ok(Json(found))
}

/// Authorizations naming a party (owner, hiring agent, specialist or payee), by id.
#[utoipa::path(get, path = "/v1/service-authorizations", params(("party" = Option<String>, Query), ("after" = Option<String>, Query), ("limit" = Option<usize>, Query)), security(("credential" = []), ("session" = [])), responses((status = 200, description = "Authorizations", body = bazaar_wire::hire::AuthorizationPage)))]
pub async fn list_authorizations(
    State(state): State<Arc<AppState>>,
    auth: Auth,
    ApiQuery(query): ApiQuery<PartyQuery>,
) -> Result<Json<serde_json::Value>, Problem> {
    let page: Vec<ServiceAuthorization> = list_decoded(&state, &auth, query).await?;
    let next = page.last().map(|a| a.id.clone());
    Ok(Json(json!({"authorizations": page, "next_after": next})))
}

/// Hiring agent: pays against its authorization, from its own account and
/// budget. The terms must match exactly (`authorization_mismatch`, nothing
/// moved); it pays once (`authorization_used`, the payment attached); gross,
/// fee and net come back apart. `Idempotency-Key` is required: send a new one
/// per attempt and the same one on a retry of that attempt.
#[utoipa::path(post, path = "/v1/service-authorizations/{id}/pay", request_body = TermsRequest, params(("Idempotency-Key" = String, Header, description = "Required: reuse it on every retry of this request")), security(("credential" = []), ("session" = [])), responses((status = 200, description = "The payment: gross, fee, net, transfers", body = bazaar_wire::hire::ServicePayment)))]
pub async fn pay(
    State(state): State<Arc<AppState>>,
    auth: Auth,
    headers: HeaderMap,
    Path(id): Path<String>,
    ApiJson(body): ApiJson<TermsRequest>,
) -> Result<Response, Problem> {
    let found = load(&state, &id).await?;
    let terms = terms(&state, &body).await?;
    let idem = idem_for(&auth.member, "service_pay", &headers, KeyRule::Required, &body)?;
    let op = Op::Hire(hire::Op::Pay { authorization: id, owner: found.owner, terms });
    Ok(execute(&state, auth.member, idem, op, StatusCode::OK).await)
}

/// Owner: revokes an authorization that has not paid.
#[utoipa::path(post, path = "/v1/service-authorizations/{id}/revoke", params(("Idempotency-Key" = Option<String>, Header, description = "Optional: without it the registry derives the key from the request, so a retry is still answered once")), security(("credential" = []), ("session" = [])), responses((status = 200, description = "The authorization, revoked", body = bazaar_wire::hire::ServiceAuthorization)))]
pub async fn revoke(
    State(state): State<Arc<AppState>>,
    auth: Auth,
    headers: HeaderMap,
    Path(id): Path<String>,
) -> Result<Response, Problem> {
    let found = load(&state, &id).await?;
    let agent: MemberId = found.agent;
    let idem = idem_for(&auth.member, "service_revoke", &headers, KeyRule::DefaultTo(format!("revoke:{id}")), &id)?;
    let op = Op::Hire(hire::Op::Revoke { authorization: id, agent });
    Ok(execute(&state, auth.member, idem, op, StatusCode::OK).await)
}

#[derive(Deserialize, Serialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct AgreeRequest {
    /// The specialist agent (DID or handle).
    pub specialist: String,
    /// The task (the job request's event id, 64 hex).
    pub task: String,
    pub price_minor: u64,
    /// Where the price goes: the specialist, its owner or one of its owner's agents.
    pub pay_to: String,
    /// The specialist's did:key signature (base64url) over
    /// `bazaar-hire-offer-v1\n<specialist DID>\n<task>\n<pay_to DID>\n<price_minor>`.
    pub offer_signature: String,
    /// Fund an escrowed contract now, with the dispute desk as arbiter (pay-to must be the specialist).
    #[serde(default)]
    pub escrow: bool,
}

/// Hirer agent: agrees a fixed-price guest hire from the specialist's signed
/// offer. Price, paying account (the hirer's own) and pay-to are locked for
/// this one task; a later offer cannot change them (`hire_exists`, the locked
/// terms attached). Opens the guest conversation (their DM). With `escrow`,
/// the price is held now in a contract the specialist accepts.
#[utoipa::path(post, path = "/v1/hires", request_body = AgreeRequest, params(("Idempotency-Key" = Option<String>, Header, description = "Optional: without it the registry derives the key from the request, so a retry is still answered once")), security(("credential" = []), ("session" = [])), responses((status = 201, description = "The hire, terms locked", body = bazaar_wire::hire::Hire)))]
pub async fn agree_hire(
    State(state): State<Arc<AppState>>,
    auth: Auth,
    headers: HeaderMap,
    ApiJson(body): ApiJson<AgreeRequest>,
) -> Result<Response, Problem> {
    let specialist = resolve_id(&state, &body.specialist).await?;
    let pay_to = resolve_account(&state, &body.pay_to).await?;
    let price = validate::amount(body.price_minor, "price_minor")?;
    let conversation = match state.plane() {
        Ok(plane) => {
            let (me, other) = (auth.member.id.clone(), specialist.clone());
            let channel = plane.call(move |store| store.open_dm(&me, &other)).await?;
            plane.memberships_changed([&auth.member.id, &specialist]);
            Some(channel.id.to_string())
        }
        Err(_) => None,
    };
    let asked = serde_json::to_string(&body).expect("requests serialize");
    let key = format!("hire:{}:{}", body.task, &bazaar_core::crypto::sha256_hex(asked.as_bytes())[..16]);
    let idem = idem_for(&auth.member, "hire_agree", &headers, KeyRule::DefaultTo(key), &body)?;
    let offer = hire::Offer {
        specialist,
        task: body.task,
        price,
        pay_to,
        signature: body.offer_signature,
        conversation,
        escrow: body.escrow,
    };
    Ok(execute(&state, auth.member, idem, Op::Hire(hire::Op::Agree { offer }), StatusCode::CREATED).await)
}

async fn load_hire(state: &AppState, id: &str) -> Result<hire::Hire, Problem> {
    load_doc(state, id, || Refusal::new(Code::HireNotFound, format!("No hire {id} on this registry."))).await
}

/// A hire with its locked terms, acceptance and payment: the hirer, the
/// specialist, the payee (and their owners) and the operator.
#[utoipa::path(get, path = "/v1/hires/{id}", security(("credential" = []), ("session" = [])), responses((status = 200, description = "The hire", body = bazaar_wire::hire::Hire)))]
pub async fn get_hire(
    State(state): State<Arc<AppState>>,
    auth: Auth,
    Path(id): Path<String>,
) -> Result<Json<hire::Hire>, Problem> {
    let found = load_hire(&state, &id).await?;
    may_read(&state, &auth.member, &[&found.hirer, &found.terms.specialist, &found.terms.pay_to]).await?;
    Ok(Json(found))
}

/// Hires naming a party (hirer, specialist or payee), by id.
#[utoipa::path(get, path = "/v1/hires", params(("party" = Option<String>, Query), ("after" = Option<String>, Query), ("limit" = Option<usize>, Query)), security(("credential" = []), ("session" = [])), responses((status = 200, description = "Hires", body = bazaar_wire::hire::HirePage)))]
pub async fn list_hires(
    State(state): State<Arc<AppState>>,
    auth: Auth,
    ApiQuery(query): ApiQuery<PartyQuery>,
) -> Result<Json<serde_json::Value>, Problem> {
    let page: Vec<hire::Hire> = list_decoded(&state, &auth, query).await?;
    let next = page.last().map(|h| h.id.clone());
    Ok(Json(json!({"hires": page, "next_after": next})))
}

#[derive(Deserialize, Serialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct AcceptRequest {
    /// The specialist's result to the task (kind 6905, its first `e` tag the task).
    #[schema(value_type = bazaar_wire::nostr::SignedEvent)]
    pub result: serde_json::Value,
    /// The specialist's enrollment (kind 30950), binding the result's key to its DID.
    #[schema(value_type = bazaar_wire::nostr::SignedEvent)]
    pub enrollment: serde_json::Value,
}

/// The response the two records prove: who answered which task.
fn verified_response(body: &AcceptRequest) -> Result<hire::VerifiedResponse, Problem> {
    let invalid = |detail: &str| -> Problem { Refusal::new(Code::ResponseNotVerified, detail.to_string()).into() };
    let result =
        bazaar_relay::Event::parse(&body.result.to_string()).map_err(|_| invalid("`result` is not a Nostr event"))?;
    result.verify().map_err(|_| invalid("`result`'s id or signature does not verify"))?;
    if result.kind != bazaar_relay::jobs::JOB_RESULT || result.tag("status") == Some("error") {
        return Err(invalid("`result` is not a successful job result (kind 6905)"));
    }
    let task = result.tag("e").ok_or_else(|| invalid("`result` names no task"))?.to_string();
    let enrollment = bazaar_relay::Event::parse(&body.enrollment.to_string())
        .map_err(|_| invalid("`enrollment` is not a Nostr event"))?;
    let binding = bazaar_relay::labor::enrollment::verify_enrollment(&enrollment, &bazaar_core::crypto::did_signed)
        .map_err(|e| invalid(&format!("`enrollment` does not hold: {e}")))?;
    if binding.nostr != result.pubkey {
        return Err(invalid("the result was not signed by the key the enrollment binds"));
    }
    Ok(hire::VerifiedResponse { task, author: MemberId(binding.did), result_event: result.id.to_hex() })
}

/// Hirer agent: "accept result and pay". Needs a verified successful
/// response from the hired specialist to the exact task
/// (`response_not_verified` otherwise); records acceptance — not a grade —
/// and pays the locked price once, from the hirer's budget to the locked
/// pay-to, or by releasing the escrowed milestone (which the specialist must
/// have marked delivered). A second ask is refused `hire_paid`, the payment attached.
#[utoipa::path(post, path = "/v1/hires/{id}/accept", request_body = AcceptRequest, params(("Idempotency-Key" = Option<String>, Header, description = "Optional: without it the registry derives the key from the request, so a retry is still answered once")), security(("credential" = []), ("session" = [])), responses((status = 200, description = "The payment", body = bazaar_wire::hire::HirePayment)))]
pub async fn accept_hire(
    State(state): State<Arc<AppState>>,
    auth: Auth,
    headers: HeaderMap,
    Path(id): Path<String>,
    ApiJson(body): ApiJson<AcceptRequest>,
) -> Result<Response, Problem> {
    let found = load_hire(&state, &id).await?;
    // The hirer first: anyone else learns only that the hire is not theirs,
    // not whether a result would verify or the milestone is delivered.
    found.may_accept(&auth.member.id)?;
    let response = verified_response(&body)?;
    // Checked here first so an early ask is not recorded under the derived
    // key (a refusal is sticky under its key; this one passes with delivery).
    if let Some(contract) = &found.contract {
        let contract = crate::escrow::load_contract(&state, contract).await?;
        if contract.milestones.first().is_some_and(|m| m.state == bazaar_core::escrow::MilestoneState::Pending) {
            return Err(Refusal::new(
                Code::MilestoneState,
                "The specialist has not accepted the escrowed contract and marked its milestone delivered yet.",
            )
            .into());
        }
    }
    let key = format!("accept:{id}:{}", response.result_event);
    let idem = idem_for(&auth.member, "hire_accept", &headers, KeyRule::DefaultTo(key), &body)?;
    let op = Op::Hire(hire::Op::Accept {
        hire: id,
        specialist: found.terms.specialist,
        pay_to: found.terms.pay_to,
        contract: found.contract,
        response,
    });
    Ok(execute(&state, auth.member, idem, op, StatusCode::OK).await)
}

#[derive(Deserialize, Serialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct LeaseRequest {
    /// The worker agent whose queue (DID or handle).
    pub worker: String,
    /// The worker, its owner or one of its owner's agents (DID or handle).
    pub pay_to: String,
    /// Prepaid in full now.
    pub price_minor: u64,
    /// The period, from now: 60 s to 30 days. Nothing renews it.
    pub period_s: u64,
    /// The enrollment (kind 30950) of the task identity that gets priority:
    /// it must bind that Nostr key to the paying agent's own DID.
    #[schema(value_type = bazaar_wire::nostr::SignedEvent)]
    pub identity: serde_json::Value,
}

/// A lease with how it reads now: `active`, `ended`, or `recovery` (paid,
/// no receipt from the worker: never shown as priority).
pub(crate) fn lease_view(lease: &hire::Lease, now: bazaar_types::Timestamp) -> serde_json::Value {
    let mut view = serde_json::to_value(lease).expect("leases serialize");
    view["status"] = json!(lease.status(now));
    view
}

/// A lease command's answer with its status at the command's own time (the
/// receipt's, or the purchase's: a lease just bought has no receipt yet).
fn shape_lease(receipt: serde_json::Value) -> serde_json::Value {
    match serde_json::from_value::<hire::Lease>(receipt.clone()) {
        Ok(lease) => lease_view(&lease, lease.receipt_at.unwrap_or(lease.starts_at)),
        Err(_) => receipt,
    }
}

/// Payer agent: buys queue priority at a worker for its own task identity,
/// for a stated period, prepaid now from its own budget. No renewal and no
/// delivery guarantee. An identity bound to anyone but the payer is refused
/// `lease_identity_mismatch`. `Idempotency-Key` is required.
#[utoipa::path(post, path = "/v1/leases", request_body = LeaseRequest, params(("Idempotency-Key" = String, Header, description = "Required: reuse it on every retry of this request")), security(("credential" = []), ("session" = [])), responses((status = 201, description = "The lease, paid; `recovery` until the worker publishes its receipt", body = bazaar_wire::hire::Lease)))]
pub async fn buy_lease(
    State(state): State<Arc<AppState>>,
    auth: Auth,
    headers: HeaderMap,
    ApiJson(body): ApiJson<LeaseRequest>,
) -> Result<Response, Problem> {
    let mismatch = |detail: String| -> Problem { Refusal::new(Code::LeaseIdentityMismatch, detail).into() };
    let enrollment = bazaar_relay::Event::parse(&body.identity.to_string())
        .map_err(|_| mismatch("`identity` is not an enrollment event".into()))?;
    let binding = bazaar_relay::labor::enrollment::verify_enrollment(&enrollment, &bazaar_core::crypto::did_signed)
        .map_err(|e| mismatch(format!("`identity` does not hold: {e}")))?;
    let order = hire::LeaseOrder {
        worker: resolve_id(&state, &body.worker).await?,
        pay_to: resolve_account(&state, &body.pay_to).await?,
        price: validate::amount(body.price_minor, "price_minor")?,
        period_s: body.period_s,
        identity: binding.nostr.to_hex(),
        identity_of: MemberId(binding.did),
    };
    let idem = idem_for(&auth.member, "lease_buy", &headers, KeyRule::Required, &body)?;
    let op = Op::Hire(hire::Op::BuyLease { order });
    Ok(execute_shaped(&state, auth.member, idem, op, StatusCode::CREATED, shape_lease).await)
}

async fn load_lease(state: &AppState, id: &str) -> Result<hire::Lease, Problem> {
    load_doc(state, id, || Refusal::new(Code::LeaseNotFound, format!("No lease {id} on this registry."))).await
}

/// A lease and its status now: the payer, the worker, the payee (and their owners) and the operator.
#[utoipa::path(get, path = "/v1/leases/{id}", security(("credential" = []), ("session" = [])), responses((status = 200, description = "The lease", body = bazaar_wire::hire::Lease)))]
pub async fn get_lease(
    State(state): State<Arc<AppState>>,
    auth: Auth,
    Path(id): Path<String>,
) -> Result<Json<serde_json::Value>, Problem> {
    let lease = load_lease(&state, &id).await?;
    may_read(&state, &auth.member, &[&lease.payer, &lease.worker, &lease.pay_to]).await?;
    Ok(Json(lease_view(&lease, state.now())))
}

/// Leases naming a party (payer, worker or payee), by id, each with its status now.
#[utoipa::path(get, path = "/v1/leases", params(("party" = Option<String>, Query), ("after" = Option<String>, Query), ("limit" = Option<usize>, Query)), security(("credential" = []), ("session" = [])), responses((status = 200, description = "Leases", body = bazaar_wire::hire::LeasePage)))]
pub async fn list_leases(
    State(state): State<Arc<AppState>>,
    auth: Auth,
    ApiQuery(query): ApiQuery<PartyQuery>,
) -> Result<Json<serde_json::Value>, Problem> {
    let page: Vec<hire::Lease> = list_decoded(&state, &auth, query).await?;
    let now = state.now();
    let leases: Vec<serde_json::Value> = page.iter().map(|lease| lease_view(lease, now)).collect();
    let next = leases.last().map(|l| l["id"].clone());
    Ok(Json(json!({"leases": leases, "next_after": next})))
}

/// Worker (or its owner): publishes the lease's receipt; from now the lease
/// is priority until its period ends. Repeating it changes nothing.
#[utoipa::path(post, path = "/v1/leases/{id}/receipt", params(("Idempotency-Key" = Option<String>, Header, description = "Optional: without it the registry derives the key from the request, so a retry is still answered once")), security(("credential" = []), ("session" = [])), responses((status = 200, description = "The lease", body = bazaar_wire::hire::Lease)))]
pub async fn receipt_lease(
    State(state): State<Arc<AppState>>,
    auth: Auth,
    headers: HeaderMap,
    Path(id): Path<String>,
) -> Result<Response, Problem> {
    let lease = load_lease(&state, &id).await?;
    let idem = idem_for(&auth.member, "lease_receipt", &headers, KeyRule::DefaultTo(format!("receipt:{id}")), &id)?;
    let op = Op::Hire(hire::Op::ReceiptLease { lease: id, worker: lease.worker });
    Ok(execute_shaped(&state, auth.member, idem, op, StatusCode::OK, shape_lease).await)
}

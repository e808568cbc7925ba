//! Service payments over HTTP: an owner authorizes one of its agents to pay a
//! specialist exactly (task, specialist, pay-to, amount; zero is sponsorship),
//! the hiring agent pays once against it from its own budget, and the owner
//! may revoke an unpaid authorization. The authorization is the registry's
//! record of whether a payment happened: a hiring agent whose answer was lost
//! reads it here instead of paying again.

use crate::auth::{ApiJson, ApiQuery, Auth};
use crate::escrow::{list_docs, may_read, PartyQuery};
use crate::exec::{execute, idem_for, load_doc, resolve_id, KeyRule};
use crate::problem::{errors, Problem};
use crate::schemas::OpenObject;
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
        pay_to: resolve_id(state, body.pay_to.strip_prefix("acct:").unwrap_or(&body.pay_to)).await?,
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
#[utoipa::path(post, path = "/v1/service-authorizations", request_body = AuthorizeRequest, responses((status = 201, description = "The authorization", body = OpenObject), errors::Unauthenticated, errors::BodyRefused, errors::Forbidden, errors::NotFound, errors::Conflict, errors::Unprocessable, errors::Unavailable))]
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
#[utoipa::path(get, path = "/v1/service-authorizations/{id}", responses((status = 200, description = "The authorization", body = OpenObject), errors::Unauthenticated, errors::Forbidden, errors::NotFound, errors::Unavailable))]
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
#[utoipa::path(get, path = "/v1/service-authorizations", params(("party" = Option<String>, Query), ("after" = Option<String>, Query), ("limit" = Option<usize>, Query)), responses((status = 200, description = "Authorizations", body = OpenObject), errors::Unauthenticated, errors::Forbidden, errors::NotFound, errors::Unavailable))]
pub async fn list_authorizations(
    State(state): State<Arc<AppState>>,
    auth: Auth,
    ApiQuery(query): ApiQuery<PartyQuery>,
) -> Result<Json<serde_json::Value>, Problem> {
    let page = list_docs(&state, &auth, bazaar_core::model::DocKind::ServiceAuthorization, query).await?;
    let next = page.last().map(|a| a["id"].clone());
    Ok(Json(json!({"authorizations": page, "next_after": next})))
}

/// Hiring agent: pays against its authorization, from its own account and
/// budget. The terms must match exactly (`authorization_mismatch`, nothing
/// moved); it pays once (`authorization_used`, the payment attached); gross,
/// fee and net come back apart. `Idempotency-Key` is required: send a new one
/// per attempt and the same one on a retry of that attempt.
#[utoipa::path(post, path = "/v1/service-authorizations/{id}/pay", request_body = TermsRequest, responses((status = 200, description = "The payment: gross, fee, net, transfers", body = OpenObject), errors::Unauthenticated, errors::BodyRefused, errors::Forbidden, errors::NotFound, errors::Conflict, errors::Gone, errors::Unprocessable, errors::Unavailable))]
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
#[utoipa::path(post, path = "/v1/service-authorizations/{id}/revoke", responses((status = 200, description = "The authorization, revoked", body = OpenObject), errors::Unauthenticated, errors::Forbidden, errors::NotFound, errors::Conflict, errors::Gone, errors::Unavailable))]
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

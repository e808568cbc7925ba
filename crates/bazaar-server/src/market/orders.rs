//! Orders over HTTP: one authorization for a closed request's allocation, a
//! person's approval when the owner's policy asks (on the `/approve/{id}`
//! page), payment of each maker's share on proof of shipment, cancellation,
//! and the stored receipt images.

use super::rfq::rfq_for;
use crate::auth::{ApiJson, ApiQuery, Auth};
use crate::exec::{execute, execute_shaped, idem_for, resolve_id, KeyRule};
use crate::problem::Problem;
use crate::state::AppState;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use bazaar_core::command::Op;
use bazaar_core::kernel::docs::decode;
use bazaar_core::market;
use bazaar_core::market::order::ShareId;
use bazaar_core::model::DocKind;
use bazaar_core::refusal::{Code, Refusal};
use bazaar_types::limits::{PAGE_LIMIT_MAX, RECEIPT_IMAGE_BYTES_MAX};
use bazaar_types::Amount;
use bazaar_wire::market as schema;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use std::sync::Arc;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

/// Orders' routes, each with its OpenAPI entry.
pub fn routes() -> OpenApiRouter<Arc<AppState>> {
    // A receipt image is larger than any JSON body: this route alone takes up to its own limit.
    let (schemas, paths, proof) = routes!(prove_shipment);
    let proof = proof.layer(axum::extract::DefaultBodyLimit::max(RECEIPT_IMAGE_BYTES_MAX));
    OpenApiRouter::new()
        .routes(routes!(set_order_policy))
        .routes(routes!(create_order, list_orders))
        .routes(routes!(get_order))
        .routes(routes!(approve_order))
        .routes(routes!(decline_order))
        .routes((schemas, paths, proof))
        .routes(routes!(cancel_share))
        .routes(routes!(get_blob))
        .routes(routes!(approval_page))
}

#[derive(Deserialize, Serialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct OrderPolicyRequest {
    /// Orders with a total above this wait for the owner's approval on a link (0: every order).
    pub approval_above_minor: u64,
}

/// Owner: when its agent's storefront orders need a person's approval.
#[utoipa::path(put, path = "/v1/agents/{agent}/order-policy", request_body = OrderPolicyRequest, security(("credential" = []), ("session" = [])), responses((status = 200, description = "The policy", body = schema::OrderPolicy)))]
pub async fn set_order_policy(
    State(state): State<Arc<AppState>>,
    auth: Auth,
    Path(agent): Path<String>,
    ApiJson(body): ApiJson<OrderPolicyRequest>,
) -> Result<Response, Problem> {
    let agent = resolve_id(&state, &agent).await?;
    let op = Op::Market(market::Op::SetOrderPolicy { agent, approval_above: Amount(body.approval_above_minor) });
    Ok(execute(&state, auth.member, None, op, StatusCode::OK).await)
}

#[derive(Deserialize, Serialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct OrderRequest {
    /// A closed request for quote of the caller's: its allocation is ordered.
    pub rfq: String,
    /// Wait for the owner's approval whatever the policy says (the MCP tool always sets it).
    #[serde(default)]
    pub require_approval: bool,
}

/// Buyer's agent (Idempotency-Key required): turns a closed request's
/// allocation into an order under one authorization — or, when the owner's
/// policy asks, an order waiting for the owner's approval at `approval_url`.
/// An agent never approves: it can only hand the link to a person.
#[utoipa::path(post, path = "/v1/orders", request_body = OrderRequest, params(("Idempotency-Key" = String, Header, description = "Required: reuse it on every retry of this request")), security(("credential" = []), ("session" = [])), responses((status = 201, description = "The order; `approval_url` when it waits for a person", body = schema::Order)))]
pub async fn create_order(
    State(state): State<Arc<AppState>>,
    auth: Auth,
    headers: axum::http::HeaderMap,
    ApiJson(body): ApiJson<OrderRequest>,
) -> Result<Response, Problem> {
    let idem = idem_for(&auth.member, "create_order", &headers, KeyRule::Required, &body)?;
    let rfq = rfq_for(&state, &auth.member, &body.rfq).await?;
    let op = Op::Market(market::Op::order_for(&rfq, body.require_approval));
    Ok(execute_shaped(&state, auth.member, idem, op, StatusCode::CREATED, with_approval_url).await)
}

/// The order receipt, with `approval_url` when the order waits for a person.
fn with_approval_url(mut order: Value) -> Value {
    if order["state"] == "awaiting_approval" {
        order["approval_url"] = json!(format!("/approve/{}", order["id"].as_str().unwrap_or_default()));
    }
    order
}

async fn order_for(
    state: &AppState,
    caller: &bazaar_core::model::Member,
    id: &str,
) -> Result<bazaar_core::order::Order, Problem> {
    let row = state
        .store
        .doc(DocKind::Order, id)
        .await?
        .ok_or_else(|| Refusal::new(Code::OrderNotFound, "No such order."))?;
    let order = decode::<bazaar_core::order::Order>(&row)?;
    let mut allowed = caller.kind == bazaar_core::model::MemberKind::Operator || row.parties.contains(&caller.id);
    // A maker's owner (the person on her phone) sees the orders her agent has a share in.
    for line in order.lines.iter().take(bazaar_types::limits::ORDER_LINES_MAX) {
        if allowed {
            break;
        }
        let maker = state.store.member(&line.seller).await?;
        allowed = maker.is_some_and(|m| m.owner.as_ref() == Some(&caller.id));
    }
    if !allowed {
        return Err(Refusal::new(
            Code::NotParty,
            "Only the buyer, its owner, the order's makers and their owners see it.",
        )
        .into());
    }
    Ok(order)
}

/// The buyer, its owner, a maker in it, or the operator: the order, each share's
/// state, notification, proof (tracking) and payment.
#[utoipa::path(get, path = "/v1/orders/{id}", security(("credential" = []), ("session" = [])), responses((status = 200, description = "The order", body = schema::Order)))]
pub async fn get_order(
    State(state): State<Arc<AppState>>,
    auth: Auth,
    Path(id): Path<String>,
) -> Result<Json<Value>, Problem> {
    let order = order_for(&state, &auth.member, &id).await?;
    Ok(Json(serde_json::to_value(order).expect("orders serialize")))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OrdersQuery {
    /// An agent of the caller's (handle or DID): its orders instead of the caller's own.
    pub agent: Option<String>,
}

/// Orders naming the caller — or, with `?agent=`, naming one of the caller's
/// agents (a maker's owner reads her agent's shares here): makers read their
/// notifications here.
#[utoipa::path(get, path = "/v1/orders", params(("agent" = Option<String>, Query, description = "One of the caller's agents")), security(("credential" = []), ("session" = [])), responses((status = 200, description = "Orders naming the caller or its agent", body = schema::OrderList)))]
pub async fn list_orders(
    State(state): State<Arc<AppState>>,
    auth: Auth,
    ApiQuery(query): ApiQuery<OrdersQuery>,
) -> Result<Json<Value>, Problem> {
    let party = match query.agent {
        None => auth.member.id.clone(),
        Some(agent) => {
            let agent = crate::exec::resolve(&state, &agent).await?;
            if agent.id != auth.member.id && agent.owner.as_ref() != Some(&auth.member.id) {
                return Err(
                    Refusal::new(Code::NotOwner, "Only the agent or its owner lists the agent's orders.").into()
                );
            }
            agent.id
        }
    };
    let rows = state.store.docs_by_party(DocKind::Order, &party, "", PAGE_LIMIT_MAX).await?;
    let orders = rows.iter().map(decode::<bazaar_core::order::Order>).collect::<Result<Vec<_>, _>>()?;
    Ok(Json(json!({ "orders": orders })))
}

async fn decide(state: Arc<AppState>, auth: Auth, id: String, approve: bool) -> Result<Response, Problem> {
    let order = order_for(&state, &auth.member, &id).await?;
    let sellers = order.lines.iter().map(|line| line.seller.clone()).collect();
    let op = Op::Market(market::Op::DecideOrder {
        order: bazaar_types::MarketOrderId(id),
        buyer: order.buyer,
        lines: order.lines.len() as u32,
        sellers,
        approve,
    });
    let response = execute(&state, auth.member, None, op, StatusCode::OK).await;
    Ok(log_fallbacks(response).await)
}

/// Logs each maker notification that fell back to English.
async fn log_fallbacks(response: Response) -> Response {
    let (parts, body) = response.into_parts();
    let bytes = axum::body::to_bytes(body, usize::MAX).await.unwrap_or_default();
    if let Ok(json) = serde_json::from_slice::<Value>(&bytes) {
        for line in json["lines"].as_array().into_iter().flatten() {
            if line["notification"]["fallback"] == true {
                tracing::warn!(order = %json["id"], language = %line["language"], "no translation for a maker's language; told her in English");
            }
        }
    }
    Response::from_parts(parts, axum::body::Body::from(bytes))
}

/// The buyer's owner (a person, never an agent): approves an order waiting for it.
#[utoipa::path(post, path = "/v1/orders/{id}/approve", security(("credential" = []), ("session" = [])), responses((status = 200, description = "Authorized; makers told", body = schema::Order)))]
pub async fn approve_order(
    State(state): State<Arc<AppState>>,
    auth: Auth,
    Path(id): Path<String>,
) -> Result<Response, Problem> {
    decide(state, auth, id, true).await
}

/// The buyer's owner: declines an order waiting for approval.
#[utoipa::path(post, path = "/v1/orders/{id}/decline", security(("credential" = []), ("session" = [])), responses((status = 200, description = "Declined", body = schema::Order)))]
pub async fn decline_order(
    State(state): State<Arc<AppState>>,
    auth: Auth,
    Path(id): Path<String>,
) -> Result<Response, Problem> {
    decide(state, auth, id, false).await
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProofQuery {
    pub tracking: String,
}

/// The share's maker: the courier receipt's image as the body (JPEG, PNG or
/// WebP, at most `RECEIPT_IMAGE_BYTES_MAX`), `?tracking=`. The image is stored
/// by its SHA-256 and the maker is paid her share in the same transaction.
#[utoipa::path(post, path = "/v1/orders/{id}/shares/{share}/proof", params(("tracking" = String, Query)), request_body(content = Vec<u8>, description = "The courier receipt's image", content_type = "image/jpeg"), security(("credential" = []), ("session" = [])), responses((status = 200, description = "Paid on proof", body = schema::SharePaid)))]
pub async fn prove_shipment(
    State(state): State<Arc<AppState>>,
    auth: Auth,
    Path((id, share)): Path<(String, u32)>,
    ApiQuery(query): ApiQuery<ProofQuery>,
    headers: axum::http::HeaderMap,
    body: axum::body::Bytes,
) -> Result<Response, Problem> {
    let order = order_for(&state, &auth.member, &id).await?;
    let content_type =
        headers.get(axum::http::header::CONTENT_TYPE).and_then(|v| v.to_str().ok()).unwrap_or_default().to_string();
    if body.is_empty() {
        return Err(Problem::invalid("Send the courier receipt's image as the request body."));
    }
    let receipt_sha256 = bazaar_core::crypto::sha256_hex(&body);
    let seller = order
        .lines
        .get(share as usize)
        .map(|line| line.seller.clone())
        .ok_or_else(|| Refusal::new(Code::OrderInvalid, "No such share in this order."))?;
    let op = Op::Market(market::Op::ProveShipment {
        share: ShareId { order: bazaar_types::MarketOrderId(id), index: share },
        buyer: order.buyer,
        seller,
        receipt_sha256,
        tracking: query.tracking,
        receipt: Some((content_type, body.to_vec())),
    });
    Ok(execute(&state, auth.member, None, op, StatusCode::OK).await)
}

/// The buyer agent or its owner: cancels a share before it ships; its hold is released.
#[utoipa::path(post, path = "/v1/orders/{id}/shares/{share}/cancel", security(("credential" = []), ("session" = [])), responses((status = 200, description = "Released", body = schema::ShareCancelled)))]
pub async fn cancel_share(
    State(state): State<Arc<AppState>>,
    auth: Auth,
    Path((id, share)): Path<(String, u32)>,
) -> Result<Response, Problem> {
    let order = order_for(&state, &auth.member, &id).await?;
    let seller = order
        .lines
        .get(share as usize)
        .map(|line| line.seller.clone())
        .ok_or_else(|| Refusal::new(Code::OrderInvalid, "No such share in this order."))?;
    let op = Op::Market(market::Op::CancelShare {
        share: ShareId { order: bazaar_types::MarketOrderId(id), index: share },
        buyer: order.buyer,
        seller,
    });
    Ok(execute(&state, auth.member, None, op, StatusCode::OK).await)
}

/// A stored receipt image, to the order's buyer, owner and maker, and the operator.
#[utoipa::path(get, path = "/v1/blobs/{sha256}", security(("credential" = []), ("session" = [])), responses((status = 200, description = "The image, with the content type it was uploaded with", content(("image/jpeg"), ("image/png"), ("image/webp")))))]
pub async fn get_blob(
    State(state): State<Arc<AppState>>,
    auth: Auth,
    Path(sha256): Path<String>,
) -> Result<Response, Problem> {
    let sha256 = sha256.to_ascii_lowercase();
    let may_read = |parties: &[bazaar_types::MemberId]| {
        parties.contains(&auth.member.id) || auth.member.kind == bazaar_core::model::MemberKind::Operator
    };
    let missing = || Problem::from(Refusal::new(Code::OrderNotFound, "No such file for you."));
    let (content_type, bytes) = match state.store.blob(&sha256).await? {
        Some(blob) if may_read(&blob.parties) => (blob.content_type, blob.bytes),
        Some(_) => return Err(missing()),
        // Files uploaded before the blob table are documents with a base64 body.
        None => {
            use base64::Engine;
            let row = state.store.doc(DocKind::Blob, &sha256).await?.filter(|row| may_read(&row.parties));
            let row = row.ok_or_else(missing)?;
            let bytes = base64::engine::general_purpose::STANDARD
                .decode(row.body["base64"].as_str().unwrap_or_default())
                .map_err(|_| {
                    Problem::new(StatusCode::INTERNAL_SERVER_ERROR, "internal", "stored file does not decode")
                })?;
            (row.body["content_type"].as_str().unwrap_or("application/octet-stream").to_string(), bytes)
        }
    };
    Ok(([(axum::http::header::CONTENT_TYPE, content_type)], bytes).into_response())
}

/// The approval link: a page where the buyer's owner, signed in with a
/// passkey or its own credential, sees the order and approves or declines it.
#[utoipa::path(get, path = "/approve/{id}", responses((status = 200, description = "Approval page (HTML)", body = String, content_type = "text/html")))]
pub async fn approval_page(Path(_id): Path<String>) -> Response {
    crate::page::html_static(include_str!("../../assets/approve.html"))
}

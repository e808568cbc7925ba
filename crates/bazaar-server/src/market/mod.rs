//! The storefront over HTTP: sellers' agents list products; members search
//! them (every search is counted, and searches that find nothing are listed as
//! unmet demand, most frequent first).

use crate::auth::{ApiJson, Auth};
use crate::problem::Problem;
use crate::routes::execute;
use crate::AppState;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use bazaar_core::command::{Command, Op};
use bazaar_core::market::{
    normalize_query, offer_code, search_terms, Listing, ListingSpec, Proposal, Request, Rfq, Terms,
};
use bazaar_core::model::DocKind;
use bazaar_core::refusal::{Code, Refusal};
use bazaar_types::limits::{PAGE_LIMIT_MAX, SEARCH_QUERY_LEN_MAX, SEARCH_RESULTS_MAX};
use bazaar_types::Amount;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use std::sync::Arc;

#[derive(Deserialize, Serialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ListingRequest {
    /// The seller's own stock-keeping unit: listing the same SKU again updates the listing.
    pub sku: String,
    pub title: String,
    #[serde(default)]
    pub description: String,
    #[serde(default)]
    pub tags: Vec<String>,
    pub list_price_minor: u64,
    pub floor_minor: u64,
    #[serde(default)]
    pub max_discount_bps: u32,
    pub capacity_per_day: u64,
    pub capacity_max: u64,
    #[serde(default)]
    pub lead_time_days: u32,
    #[serde(default)]
    pub notice_days: u32,
    /// BCP 47: the language the seller is told things in.
    pub language: String,
}

/// Seller's agent: lists a product under its own SKU, or relists it (same SKU, new terms).
#[utoipa::path(put, path = "/v1/listings", request_body = ListingRequest, responses((status = 200, description = "The listing, with its lowest price"), (status = 400, description = "listing_invalid")))]
pub async fn put_listing(
    State(state): State<Arc<AppState>>,
    auth: Auth,
    ApiJson(body): ApiJson<ListingRequest>,
) -> Result<Response, Problem> {
    let spec = ListingSpec {
        sku: body.sku,
        title: body.title,
        description: body.description,
        tags: body.tags,
        terms: Terms {
            list_price: Amount(body.list_price_minor),
            floor: Amount(body.floor_minor),
            max_discount_bps: body.max_discount_bps,
            capacity_per_day: body.capacity_per_day,
            capacity_max: body.capacity_max,
            lead_time_days: body.lead_time_days,
            notice_days: body.notice_days,
        },
        language: body.language,
    };
    spec.check()?;
    Ok(execute(&state, auth.member, None, Op::PutListing { spec }, StatusCode::OK).await)
}

/// Public: one listing by id.
#[utoipa::path(get, path = "/v1/listings/{id}", responses((status = 200, description = "The listing"), (status = 404, description = "listing_not_found")))]
pub async fn get_listing(State(state): State<Arc<AppState>>, Path(id): Path<String>) -> Result<Json<Value>, Problem> {
    let row = state
        .store
        .doc(DocKind::Listing, &id)
        .await?
        .ok_or_else(|| Refusal::new(Code::ListingNotFound, "No listing with that id."))?;
    Ok(Json(Listing::from_row(&row).view()))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SearchQuery {
    pub q: String,
    pub limit: Option<usize>,
}

/// Any member: full-text search over listings (every word must match, as a
/// word prefix; plurals fold). The search is counted for demand.
#[utoipa::path(get, path = "/v1/search", params(("q" = String, Query), ("limit" = Option<usize>, Query)), responses((status = 200, description = "Matching listings, best first")))]
pub async fn search(
    State(state): State<Arc<AppState>>,
    _auth: Auth,
    Query(query): Query<SearchQuery>,
) -> Result<Json<Value>, Problem> {
    if query.q.len() > SEARCH_QUERY_LEN_MAX {
        return Err(Problem::invalid(format!("`q` is at most {SEARCH_QUERY_LEN_MAX} bytes.")));
    }
    let terms = search_terms(&query.q);
    if terms.is_empty() {
        return Err(Problem::invalid("`q` needs at least one word of letters or digits."));
    }
    let limit = query.limit.unwrap_or(SEARCH_RESULTS_MAX).clamp(1, SEARCH_RESULTS_MAX);
    let rows = state.store.search_listings(&terms, limit).await?;
    let listings: Vec<Value> = rows.iter().map(|row| Listing::from_row(row).view()).collect();
    let normalized = normalize_query(&query.q);
    let op = Op::RecordSearch { query: normalized.clone(), hits: listings.len() as u64 };
    let applied = state.store.submit(Command { actor: state.registry_actor(), idem: None, op }).await?;
    applied.outcome.map_err(Problem::from)?;
    Ok(Json(json!({"query": normalized, "terms": terms, "listings": listings})))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UnmetQuery {
    pub limit: Option<usize>,
}

/// Any member: searches that found nothing the last time they ran, most frequent first.
#[utoipa::path(get, path = "/v1/searches/unmet", params(("limit" = Option<usize>, Query)), responses((status = 200, description = "Unmet demand")))]
pub async fn unmet(
    State(state): State<Arc<AppState>>,
    _auth: Auth,
    Query(query): Query<UnmetQuery>,
) -> Result<Json<Value>, Problem> {
    let limit = query.limit.unwrap_or(PAGE_LIMIT_MAX).clamp(1, PAGE_LIMIT_MAX);
    let rows = state.store.unmet_searches(limit).await?;
    let unmet: Vec<Value> = rows
        .into_iter()
        .map(|(query, count, last)| json!({"query": query, "count": count, "last_at_ms": last}))
        .collect();
    Ok(Json(json!({"unmet": unmet})))
}

// ---- requests for quote and offers -------------------------------------------------

#[derive(Deserialize, Serialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct RfqRequest {
    /// What is wanted, in words; sellers whose listings match are invited.
    pub item: String,
    pub quantity: u64,
    pub max_unit_price_minor: u64,
    pub deadline_ms: i64,
}

/// Buyer's agent: opens a request for quote (Idempotency-Key required). Sellers
/// whose listings match `item` are invited; they find it by polling `GET /v1/rfqs`.
#[utoipa::path(post, path = "/v1/rfqs", request_body = RfqRequest, responses((status = 201, description = "The request, with the sellers invited")))]
pub async fn create_rfq(
    State(state): State<Arc<AppState>>,
    auth: Auth,
    headers: axum::http::HeaderMap,
    ApiJson(body): ApiJson<RfqRequest>,
) -> Result<Response, Problem> {
    let idem = crate::routes::idem_for(&auth.member, "create_rfq", &headers, crate::routes::KeyRule::Required, &body)?;
    let terms = search_terms(&body.item);
    let rows = state.store.search_listings(&terms, bazaar_types::limits::RFQ_SELLERS_MAX).await?;
    let invited: Vec<(bazaar_types::MemberId, String)> =
        rows.iter().map(Listing::from_row).map(|listing| (listing.seller, listing.id)).collect();
    let request = Request {
        quantity: body.quantity,
        max_unit_price: Amount(body.max_unit_price_minor),
        deadline: bazaar_types::Timestamp(body.deadline_ms),
    };
    let op = Op::CreateRfq { item: body.item, request, invited };
    Ok(execute(&state, auth.member, idem, op, StatusCode::CREATED).await)
}

async fn rfq_for(state: &AppState, caller: &bazaar_core::model::Member, id: &str) -> Result<Rfq, Problem> {
    let row = state
        .store
        .doc(DocKind::Rfq, id)
        .await?
        .ok_or_else(|| Refusal::new(Code::RfqNotFound, "No such request for quote."))?;
    let rfq = Rfq::from_row(&row);
    let allowed = caller.kind == bazaar_core::model::MemberKind::Operator
        || rfq.buyer == caller.id
        || rfq.invited.iter().any(|(seller, _)| seller == &caller.id);
    if !allowed {
        return Err(
            Refusal::new(Code::NotParty, "Only the buyer and the invited sellers see a request for quote.").into()
        );
    }
    Ok(rfq)
}

fn rfq_view(rfq: &Rfq) -> Value {
    let mut view = serde_json::to_value(rfq).expect("rfqs serialize");
    view["allocation"] = serde_json::to_value(rfq.current_allocation()).expect("allocations serialize");
    view
}

/// The buyer or an invited seller: the request, every offer (refused ones with their reason) and the allocation.
#[utoipa::path(get, path = "/v1/rfqs/{id}", responses((status = 200, description = "The request for quote")))]
pub async fn get_rfq(
    State(state): State<Arc<AppState>>,
    auth: Auth,
    Path(id): Path<String>,
) -> Result<Json<Value>, Problem> {
    Ok(Json(rfq_view(&rfq_for(&state, &auth.member, &id).await?)))
}

/// Requests for quote naming the caller (as buyer or invited seller): how sellers' agents poll.
#[utoipa::path(get, path = "/v1/rfqs", responses((status = 200, description = "Requests naming the caller")))]
pub async fn list_rfqs(State(state): State<Arc<AppState>>, auth: Auth) -> Result<Json<Value>, Problem> {
    let rows = state.store.docs_by_party(DocKind::Rfq, &auth.member.id, "", PAGE_LIMIT_MAX).await?;
    let rfqs: Vec<Value> = rows.iter().map(|row| rfq_view(&Rfq::from_row(row))).collect();
    Ok(Json(json!({"rfqs": rfqs})))
}

#[derive(Deserialize, Serialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct OfferRequest {
    /// The seller's listing the offer is for (one the request invited).
    pub listing: String,
    pub unit_price_minor: u64,
    pub quantity: u64,
}

/// An invited seller's agent: proposes a price. Code checks it; a refused
/// offer is answered 422 with its code and the numbers, uses one of the
/// seller's three attempts, and may be revised.
#[utoipa::path(post, path = "/v1/rfqs/{id}/offers", request_body = OfferRequest, responses((status = 201, description = "A valid offer"), (status = 422, description = "Refused: offer_below_floor, offer_above_cap, offer_beyond_capacity, offer_notice_too_short, offer_deadline_passed, offer_revision_limit")))]
pub async fn make_offer(
    State(state): State<Arc<AppState>>,
    auth: Auth,
    Path(id): Path<String>,
    ApiJson(body): ApiJson<OfferRequest>,
) -> Result<Response, Problem> {
    let proposal = Proposal { unit_price: Amount(body.unit_price_minor), quantity: body.quantity };
    let committed = committed_units(&state, &auth.member.id).await?;
    let op = Op::MakeOffer { rfq: id, listing: body.listing, proposal, committed };
    let applied = state.store.submit(Command { actor: auth.member, idem: None, op }).await?;
    let offer = applied.outcome.map_err(Problem::from)?;
    if offer["status"] == "refused" {
        let refusal = &offer["refusal"];
        let code = refusal["code"].as_str().unwrap_or_default();
        let mut facts = refusal["facts"].clone();
        facts["offer"] = offer.clone();
        let refusal = Refusal::new(offer_code(code), refusal["detail"].as_str().unwrap_or_default()).with(facts);
        return Err(refusal.into());
    }
    Ok((StatusCode::CREATED, Json(offer)).into_response())
}

/// Units a seller has promised and not yet shipped: her shares in orders
/// waiting for approval or authorized. Counted against every new offer's
/// capacity, whatever its deadline (the conservative reading).
async fn committed_units(state: &AppState, seller: &bazaar_types::MemberId) -> Result<u64, Problem> {
    use bazaar_core::order::{LineState, Order};
    let rows = state.store.docs_by_party(DocKind::Order, seller, "", PAGE_LIMIT_MAX).await?;
    Ok(rows
        .iter()
        .map(Order::from_row)
        .flat_map(|order| order.lines.into_iter())
        .filter(|line| &line.seller == seller)
        .filter(|line| matches!(line.state, LineState::AwaitingApproval | LineState::Authorized))
        .map(|line| line.units)
        .sum())
}

/// The buyer or an invited seller: the allocation as it stands (fixed once closed).
#[utoipa::path(get, path = "/v1/rfqs/{id}/allocation", responses((status = 200, description = "Cheapest valid offer first; the unfilled remainder")))]
pub async fn allocation(
    State(state): State<Arc<AppState>>,
    auth: Auth,
    Path(id): Path<String>,
) -> Result<Json<Value>, Problem> {
    let rfq = rfq_for(&state, &auth.member, &id).await?;
    Ok(Json(json!({"rfq": rfq.id, "state": rfq.state, "allocation": rfq.current_allocation()})))
}

/// The buyer: closes the request; its allocation is fixed.
#[utoipa::path(post, path = "/v1/rfqs/{id}/close", responses((status = 200, description = "The fixed allocation")))]
pub async fn close_rfq(
    State(state): State<Arc<AppState>>,
    auth: Auth,
    Path(id): Path<String>,
) -> Result<Response, Problem> {
    Ok(execute(&state, auth.member, None, Op::CloseRfq { rfq: id }, StatusCode::OK).await)
}

// ---- orders: one authorization, a person's approval, pay on proof -----------------------

#[derive(Deserialize, Serialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct OrderPolicyRequest {
    /// Orders with a total above this wait for the owner's approval on a link (0: every order).
    pub approval_above_minor: u64,
}

/// Owner: when its agent's storefront orders need a person's approval.
#[utoipa::path(put, path = "/v1/agents/{agent}/order-policy", request_body = OrderPolicyRequest, responses((status = 200, description = "The policy")))]
pub async fn set_order_policy(
    State(state): State<Arc<AppState>>,
    auth: Auth,
    Path(agent): Path<String>,
    ApiJson(body): ApiJson<OrderPolicyRequest>,
) -> Result<Response, Problem> {
    let agent = crate::routes::resolve_id(&state, &agent).await?;
    let op = Op::SetOrderPolicy { agent, approval_above: Amount(body.approval_above_minor) };
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
#[utoipa::path(post, path = "/v1/orders", request_body = OrderRequest, responses((status = 201, description = "The order; `approval_url` when it waits for a person")))]
pub async fn create_order(
    State(state): State<Arc<AppState>>,
    auth: Auth,
    headers: axum::http::HeaderMap,
    ApiJson(body): ApiJson<OrderRequest>,
) -> Result<Response, Problem> {
    let idem =
        crate::routes::idem_for(&auth.member, "create_order", &headers, crate::routes::KeyRule::Required, &body)?;
    let rfq = rfq_for(&state, &auth.member, &body.rfq).await?;
    let allocation = rfq.current_allocation();
    let listings: Vec<String> = allocation
        .lines
        .iter()
        .filter_map(|line| rfq.offers.iter().find(|o| o.id == line.offer_id).map(|o| o.listing.clone()))
        .collect();
    let op = Op::CreateOrder {
        rfq: rfq.id.clone(),
        listings,
        lines: allocation.lines.len() as u32,
        sellers: allocation.lines.iter().map(|line| line.seller.clone()).collect(),
        require_approval: body.require_approval,
    };
    let response = execute(&state, auth.member, idem, op, StatusCode::CREATED).await;
    Ok(with_approval_url(response).await)
}

/// Adds `approval_url` to an order body that waits for approval.
async fn with_approval_url(response: Response) -> Response {
    let (parts, body) = response.into_parts();
    let bytes = axum::body::to_bytes(body, usize::MAX).await.unwrap_or_default();
    let mut json: Value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
    if json["state"] == "awaiting_approval" {
        json["approval_url"] = json!(format!("/approve/{}", json["id"].as_str().unwrap_or_default()));
    }
    let bytes = serde_json::to_vec(&json).unwrap_or_else(|_| bytes.to_vec());
    let mut response = Response::from_parts(parts, axum::body::Body::from(bytes));
    response.headers_mut().remove(axum::http::header::CONTENT_LENGTH);
    response
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
    let order = bazaar_core::order::Order::from_row(&row);
    let allowed = caller.kind == bazaar_core::model::MemberKind::Operator || row.parties.contains(&caller.id);
    if !allowed {
        return Err(Refusal::new(Code::NotParty, "Only the buyer, its owner and the order's makers see it.").into());
    }
    Ok(order)
}

/// The buyer, its owner, a maker in it, or the operator: the order, each share's
/// state, notification, proof (tracking) and payment.
#[utoipa::path(get, path = "/v1/orders/{id}", responses((status = 200, description = "The order")))]
pub async fn get_order(
    State(state): State<Arc<AppState>>,
    auth: Auth,
    Path(id): Path<String>,
) -> Result<Json<Value>, Problem> {
    let order = order_for(&state, &auth.member, &id).await?;
    Ok(Json(serde_json::to_value(order).expect("orders serialize")))
}

/// Orders naming the caller: makers read their notifications here.
#[utoipa::path(get, path = "/v1/orders", responses((status = 200, description = "Orders naming the caller")))]
pub async fn list_orders(State(state): State<Arc<AppState>>, auth: Auth) -> Result<Json<Value>, Problem> {
    let rows = state.store.docs_by_party(DocKind::Order, &auth.member.id, "", PAGE_LIMIT_MAX).await?;
    Ok(Json(json!({"orders": rows.iter().map(|r| r.body.clone()).collect::<Vec<_>>()})))
}

async fn decide(state: Arc<AppState>, auth: Auth, id: String, approve: bool) -> Result<Response, Problem> {
    let order = order_for(&state, &auth.member, &id).await?;
    let sellers = order.lines.iter().map(|line| line.seller.clone()).collect();
    let op = Op::DecideOrder { order: id, buyer: order.buyer, lines: order.lines.len() as u32, sellers, approve };
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
#[utoipa::path(post, path = "/v1/orders/{id}/approve", responses((status = 200, description = "Authorized; makers told"), (status = 403, description = "approval_by_person / not_owner")))]
pub async fn approve_order(
    State(state): State<Arc<AppState>>,
    auth: Auth,
    Path(id): Path<String>,
) -> Result<Response, Problem> {
    decide(state, auth, id, true).await
}

/// The buyer's owner: declines an order waiting for approval.
#[utoipa::path(post, path = "/v1/orders/{id}/decline", responses((status = 200, description = "Declined")))]
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
#[utoipa::path(post, path = "/v1/orders/{id}/shares/{share}/proof", params(("tracking" = String, Query)), request_body(content = Vec<u8>, description = "The courier receipt's image", content_type = "image/jpeg"), responses((status = 200, description = "Paid on proof"), (status = 409, description = "share_paid")))]
pub async fn prove_shipment(
    State(state): State<Arc<AppState>>,
    auth: Auth,
    Path((id, share)): Path<(String, u32)>,
    Query(query): Query<ProofQuery>,
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
    let op = Op::ProveShipment {
        order: id,
        buyer: order.buyer,
        line: share,
        receipt_sha256,
        tracking: query.tracking,
        receipt: Some((content_type, body.to_vec())),
    };
    Ok(execute(&state, auth.member, None, op, StatusCode::OK).await)
}

/// The buyer agent or its owner: cancels a share before it ships; its hold is released.
#[utoipa::path(post, path = "/v1/orders/{id}/shares/{share}/cancel", responses((status = 200, description = "Released")))]
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
    let op = Op::CancelShare { order: id, buyer: order.buyer, seller, line: share };
    Ok(execute(&state, auth.member, None, op, StatusCode::OK).await)
}

/// A stored receipt image, to the order's buyer, owner and maker.
#[utoipa::path(get, path = "/v1/blobs/{sha256}", responses((status = 200, description = "The image")))]
pub async fn get_blob(
    State(state): State<Arc<AppState>>,
    auth: Auth,
    Path(sha256): Path<String>,
) -> Result<Response, Problem> {
    use base64::Engine;
    let row = state
        .store
        .doc(DocKind::Blob, &sha256.to_ascii_lowercase())
        .await?
        .filter(|row| {
            row.parties.contains(&auth.member.id) || auth.member.kind == bazaar_core::model::MemberKind::Operator
        })
        .ok_or_else(|| Refusal::new(Code::OrderNotFound, "No such file for you."))?;
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(row.body["base64"].as_str().unwrap_or_default())
        .map_err(|_| Problem::new(StatusCode::INTERNAL_SERVER_ERROR, "internal", "stored file does not decode"))?;
    let content_type = row.body["content_type"].as_str().unwrap_or("application/octet-stream").to_string();
    Ok(([(axum::http::header::CONTENT_TYPE, content_type)], bytes).into_response())
}

/// The approval link: a page where the buyer's owner, signed in with its own
/// credential, sees the order and approves or declines it.
#[utoipa::path(get, path = "/approve/{id}", responses((status = 200, description = "Approval page (HTML)", content_type = "text/html")))]
pub async fn approval_page(Path(_id): Path<String>) -> impl IntoResponse {
    use axum::http::header;
    (
        [
            (header::CONTENT_TYPE, "text/html; charset=utf-8"),
            (
                header::CONTENT_SECURITY_POLICY,
                "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; connect-src 'self'",
            ),
            (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
            (header::REFERRER_POLICY, "no-referrer"),
        ],
        include_str!("../assets/approve.html"),
    )
}

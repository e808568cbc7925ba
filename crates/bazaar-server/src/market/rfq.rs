//! Requests for quote over HTTP: a buyer's agent asks the sellers whose
//! listings match; invited sellers offer (code checks each offer against the
//! listing's terms and the seller's committed capacity); the cheapest valid
//! offers make the allocation.

use crate::auth::{ApiJson, Auth};
use crate::exec::{self, execute, idem_for, load_doc, KeyRule};
use crate::problem::Problem;
use crate::state::AppState;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use bazaar_core::command::Op;
use bazaar_core::kernel::docs::decode;
use bazaar_core::market;
use bazaar_core::market::{offer_code, search_terms, Listing, Proposal, Request, Rfq};
use bazaar_core::model::DocKind;
use bazaar_core::refusal::{Code, Refusal};
use bazaar_types::limits::PAGE_LIMIT_MAX;
use bazaar_types::Amount;
use bazaar_wire::market as schema;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use std::sync::Arc;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

/// Requests' and offers' routes, each with its OpenAPI entry.
pub fn routes() -> OpenApiRouter<Arc<AppState>> {
    OpenApiRouter::new()
        .routes(routes!(create_rfq, list_rfqs))
        .routes(routes!(get_rfq))
        .routes(routes!(make_offer))
        .routes(routes!(allocation))
        .routes(routes!(close_rfq))
}

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
#[utoipa::path(post, path = "/v1/rfqs", request_body = RfqRequest, params(("Idempotency-Key" = String, Header, description = "Required: reuse it on every retry of this request")), security(("credential" = []), ("session" = [])), responses((status = 201, description = "The request, with the sellers invited", body = schema::Rfq)))]
pub async fn create_rfq(
    State(state): State<Arc<AppState>>,
    auth: Auth,
    headers: axum::http::HeaderMap,
    ApiJson(body): ApiJson<RfqRequest>,
) -> Result<Response, Problem> {
    let idem = idem_for(&auth.member, "create_rfq", &headers, KeyRule::Required, &body)?;
    let terms = search_terms(&body.item);
    let rows = state.store.search_listings(&terms, bazaar_types::limits::RFQ_SELLERS_MAX).await?;
    let invited: Vec<(bazaar_types::MemberId, bazaar_types::ListingId)> =
        rows.iter().map(|row| decode::<Listing>(row).map(|l| (l.seller, l.id))).collect::<Result<_, _>>()?;
    let request = Request {
        quantity: body.quantity,
        max_unit_price: Amount(body.max_unit_price_minor),
        deadline: bazaar_types::Timestamp(body.deadline_ms),
    };
    let op = Op::Market(market::Op::CreateRfq { item: body.item, request, invited });
    Ok(execute(&state, auth.member, idem, op, StatusCode::CREATED).await)
}

pub(crate) async fn rfq_for(state: &AppState, caller: &bazaar_core::model::Member, id: &str) -> Result<Rfq, Problem> {
    let rfq: Rfq = load_doc(state, id, || Refusal::new(Code::RfqNotFound, "No such request for quote.")).await?;
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

/// The buyer, an invited seller or the operator: the request, every offer (refused ones with their reason) and the allocation.
#[utoipa::path(get, path = "/v1/rfqs/{id}", security(("credential" = []), ("session" = [])), responses((status = 200, description = "The request for quote", body = schema::Rfq)))]
pub async fn get_rfq(
    State(state): State<Arc<AppState>>,
    auth: Auth,
    Path(id): Path<String>,
) -> Result<Json<Value>, Problem> {
    Ok(Json(rfq_view(&rfq_for(&state, &auth.member, &id).await?)))
}

/// Requests for quote naming the caller (as buyer or invited seller): how sellers' agents poll.
#[utoipa::path(get, path = "/v1/rfqs", security(("credential" = []), ("session" = [])), responses((status = 200, description = "Requests naming the caller", body = schema::RfqList)))]
pub async fn list_rfqs(State(state): State<Arc<AppState>>, auth: Auth) -> Result<Json<Value>, Problem> {
    let rows = state.store.docs_by_party(DocKind::Rfq, &auth.member.id, "", PAGE_LIMIT_MAX).await?;
    let rfqs: Vec<Value> = rows.iter().map(|row| decode::<Rfq>(row).map(|r| rfq_view(&r))).collect::<Result<_, _>>()?;
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
#[utoipa::path(post, path = "/v1/rfqs/{id}/offers", request_body = OfferRequest, security(("credential" = []), ("session" = [])), responses((status = 201, description = "A valid offer", body = schema::Offer)))]
pub async fn make_offer(
    State(state): State<Arc<AppState>>,
    auth: Auth,
    Path(id): Path<String>,
    ApiJson(body): ApiJson<OfferRequest>,
) -> Result<Response, Problem> {
    let proposal = Proposal { unit_price: Amount(body.unit_price_minor), quantity: body.quantity };
    let committed = committed_units(&state, &auth.member.id).await?;
    let op = Op::Market(market::Op::MakeOffer {
        rfq: bazaar_types::RfqId(id),
        listing: bazaar_types::ListingId(body.listing),
        proposal,
        committed,
    });
    let offer = exec::receipt(&state, auth.member, op).await?.to_json();
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
    let orders = rows.iter().map(decode::<Order>).collect::<Result<Vec<_>, _>>()?;
    Ok(orders
        .into_iter()
        .flat_map(|order| order.lines.into_iter())
        .filter(|line| &line.seller == seller)
        .filter(|line| matches!(line.state, LineState::AwaitingApproval | LineState::Authorized))
        .map(|line| line.units)
        .sum())
}

/// The buyer, an invited seller or the operator: the allocation as it stands (fixed once closed).
#[utoipa::path(get, path = "/v1/rfqs/{id}/allocation", security(("credential" = []), ("session" = [])), responses((status = 200, description = "Cheapest valid offer first; the unfilled remainder", body = schema::RfqAllocation)))]
pub async fn allocation(
    State(state): State<Arc<AppState>>,
    auth: Auth,
    Path(id): Path<String>,
) -> Result<Json<Value>, Problem> {
    let rfq = rfq_for(&state, &auth.member, &id).await?;
    Ok(Json(json!({"rfq": rfq.id, "state": rfq.state, "allocation": rfq.current_allocation()})))
}

/// The buyer: closes the request; its allocation is fixed.
#[utoipa::path(post, path = "/v1/rfqs/{id}/close", security(("credential" = []), ("session" = [])), responses((status = 200, description = "The fixed allocation", body = schema::RfqAllocation)))]
pub async fn close_rfq(
    State(state): State<Arc<AppState>>,
    auth: Auth,
    Path(id): Path<String>,
) -> Result<Response, Problem> {
    Ok(execute(
        &state,
        auth.member,
        None,
        Op::Market(market::Op::CloseRfq { rfq: bazaar_types::RfqId(id) }),
        StatusCode::OK,
    )
    .await)
}

//! The storefront over HTTP: sellers' agents list products and members
//! search them ([`rfq`]: requests for quote and offers; [`orders`]: orders,
//! approval, proof of shipment and receipt images). Every search is counted
//! for demand in the server's [`crate::search_tally`] (flushed in batches, off
//! the money writer); searches that found nothing are listed as unmet demand,
//! most frequent first.

pub mod orders;
pub mod rfq;

use crate::auth::{ApiJson, ApiQuery, Auth};
use crate::exec::{execute, load_doc};
use crate::problem::Problem;
use crate::state::AppState;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::Response;
use axum::Json;
use bazaar_core::command::Op;
use bazaar_core::kernel::docs::decode;
use bazaar_core::market;
use bazaar_core::market::{normalize_query, search_terms, Listing, ListingSpec, Terms};
use bazaar_core::refusal::{Code, Refusal};
use bazaar_store::StoreError;
use bazaar_types::limits::{PAGE_LIMIT_MAX, SEARCH_QUERY_LEN_MAX, SEARCH_RESULTS_MAX};
use bazaar_types::Amount;
use bazaar_wire::market as schema;
use serde::Deserialize;
use serde_json::{json, Value};
use std::sync::Arc;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

/// The storefront's routes, each with its OpenAPI entry.
pub fn routes() -> OpenApiRouter<Arc<AppState>> {
    OpenApiRouter::new()
        .routes(routes!(put_listing))
        .routes(routes!(get_listing))
        .routes(routes!(search))
        .routes(routes!(unmet))
        .merge(rfq::routes())
        .merge(orders::routes())
}

/// Writes the search tally to the store; the background flusher and a graceful
/// shutdown call it. Returns how many queries it wrote.
pub async fn flush_searches(state: &AppState) -> Result<usize, StoreError> {
    state.searches.flush(state.store.as_ref()).await
}

pub use bazaar_wire::market::ListingRequest;

/// Seller's agent: lists a product under its own SKU, or relists it (same SKU, new terms).
#[utoipa::path(put, path = "/v1/listings", request_body = ListingRequest, security(("credential" = []), ("session" = [])), responses((status = 200, description = "The listing, with its lowest price", body = schema::Listing)))]
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
    Ok(execute(&state, auth.member, None, Op::Market(market::Op::PutListing { spec }), StatusCode::OK).await)
}

/// Public: one listing by id.
#[utoipa::path(get, path = "/v1/listings/{id}", responses((status = 200, description = "The listing", body = schema::Listing)))]
pub async fn get_listing(
    State(state): State<Arc<AppState>>,
    Path(id): Path<String>,
) -> Result<Json<market::receipts::ListingView>, Problem> {
    let listing: Listing =
        load_doc(&state, &id, || Refusal::new(Code::ListingNotFound, "No listing with that id.")).await?;
    Ok(Json(listing.view()))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SearchQuery {
    pub q: String,
    pub limit: Option<usize>,
}

/// Any member: full-text search over listings (every word must match, as a
/// word prefix; plurals fold). The search is counted for demand.
#[utoipa::path(get, path = "/v1/search", params(("q" = String, Query), ("limit" = Option<usize>, Query)), security(("credential" = []), ("session" = [])), responses((status = 200, description = "Matching listings, best first", body = schema::SearchResults)))]
pub async fn search(
    State(state): State<Arc<AppState>>,
    _auth: Auth,
    ApiQuery(query): ApiQuery<SearchQuery>,
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
    let listings: Vec<market::receipts::ListingView> =
        rows.iter().map(|row| decode::<Listing>(row).map(|l| l.view())).collect::<Result<_, _>>()?;
    let normalized = normalize_query(&query.q);
    // Counted in memory and flushed in batches: a search never waits on the money writer.
    if !state.searches.count(&normalized, listings.len() as u64, state.now()) {
        state.metrics.add("bazaar_searches_uncounted_total", String::new(), 1.0);
    }
    Ok(Json(json!({"query": normalized, "terms": terms, "listings": listings})))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UnmetQuery {
    pub limit: Option<usize>,
}

/// Any member: searches that found nothing the last time they ran, most frequent first.
#[utoipa::path(get, path = "/v1/searches/unmet", params(("limit" = Option<usize>, Query)), security(("credential" = []), ("session" = [])), responses((status = 200, description = "Unmet demand", body = schema::UnmetSearches)))]
pub async fn unmet(
    State(state): State<Arc<AppState>>,
    _auth: Auth,
    ApiQuery(query): ApiQuery<UnmetQuery>,
) -> Result<Json<Value>, Problem> {
    let limit = query.limit.unwrap_or(PAGE_LIMIT_MAX).clamp(1, PAGE_LIMIT_MAX);
    // This node's searches since the last flush count too; if the flush fails they wait for the next one.
    if let Err(error) = state.searches.flush(state.store.as_ref()).await {
        tracing::warn!(%error, "search tally flush failed; unmet demand may lag by one flush");
    }
    let rows = state.store.unmet_searches(limit).await?;
    let unmet: Vec<Value> = rows
        .into_iter()
        .map(|(query, count, last)| json!({"query": query, "count": count, "last_at_ms": last}))
        .collect();
    Ok(Json(json!({"unmet": unmet})))
}

//! The live chamber: what a person opens in a browser to watch the registry
//! work — built only on public API routes. `stream` is its live feed
//! (`GET /v1/stream`); the pages are static HTML shipped inside the binary,
//! their scripts inline (no framework, nothing loaded from elsewhere) and
//! allowed to call only this registry.

pub mod stream;

use crate::problem::errors;
use crate::state::AppState;
use axum::response::Response;
use std::sync::Arc;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

/// The live page: the flow of the latest paid call and the ledger as it grows.
pub const CHAMBER_HTML: &str = include_str!("chamber.html");
/// What Bazaar does not claim.
pub const CLAIMS_HTML: &str = include_str!("claims.html");

/// The chamber's routes, each with its OpenAPI entry.
pub fn routes() -> OpenApiRouter<Arc<AppState>> {
    stream::routes().routes(routes!(chamber)).routes(routes!(claims))
}

/// The live chamber (HTML): the latest paid call step by step and the event ledger as it grows, from `/v1/stream`.
#[utoipa::path(get, path = "/chamber", responses((status = 200, description = "The live chamber (HTML)", body = String, content_type = "text/html"), errors::Overloaded))]
async fn chamber() -> Response {
    crate::page::html(CHAMBER_HTML)
}

/// What Bazaar does not claim (HTML).
#[utoipa::path(get, path = "/chamber/claims", responses((status = 200, description = "What this does not claim (HTML)", body = String, content_type = "text/html"), errors::Overloaded))]
async fn claims() -> Response {
    crate::page::html(CLAIMS_HTML)
}

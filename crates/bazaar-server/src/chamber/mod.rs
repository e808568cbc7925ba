//! The live chamber: what a person opens in a browser to watch the registry
//! work — built only on public API routes. `stream` is its live feed
//! (`GET /v1/stream`).

pub mod stream;

use crate::state::AppState;
use std::sync::Arc;
use utoipa_axum::router::OpenApiRouter;

/// The chamber's routes, each with its OpenAPI entry.
pub fn routes() -> OpenApiRouter<Arc<AppState>> {
    stream::routes()
}

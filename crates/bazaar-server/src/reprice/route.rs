//! `POST /v1/reprice`: the chamber's "Discover" page sends the same CSV file
//! `bazaar reprice` reads and gets the same answer — computed here, kept
//! nowhere. Who may: anyone who may watch the chamber.

use super::{reprice, REPRICE_BYTES_MAX};
use crate::chamber::stream::MaybeAuth;
use crate::problem::Problem;
use crate::state::AppState;
use axum::extract::State;
use axum::http::StatusCode;
use axum::Json;
use serde_json::json;
use std::sync::Arc;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

pub fn routes() -> OpenApiRouter<Arc<AppState>> {
    // A month of orders is larger than any JSON body: this route alone takes up to its own limit.
    let (schemas, paths, route) = routes!(reprice_orders);
    OpenApiRouter::new().routes((schemas, paths, route.layer(axum::extract::DefaultBodyLimit::max(REPRICE_BYTES_MAX))))
}

/// A month of real orders (the CSV `bazaar reprice` reads, as the body) turned into a per-call price list, a
/// suggested escrow threshold and the margin before and after this registry's fee. The first malformed row is
/// `422 reprice_row_invalid` with its line; nothing is kept either way.
#[utoipa::path(post, path = "/v1/reprice", request_body(content = String, description = "The orders file (CSV)", content_type = "text/csv"), security((), ("credential" = []), ("session" = [])), responses((status = 200, description = "The price list, threshold and margins", body = bazaar_wire::reprice::Repriced)))]
async fn reprice_orders(
    State(state): State<Arc<AppState>>,
    auth: MaybeAuth,
    body: String,
) -> Result<Json<bazaar_wire::reprice::Repriced>, Problem> {
    if auth.0.is_none() && !state.public_stream() {
        return Err(Problem::new(
            StatusCode::UNAUTHORIZED,
            "stream_not_public",
            "Sign in, or ask the operator to open the chamber to the public.",
        ));
    }
    let fee_bps = state.config.fee_bps;
    match reprice(&body, fee_bps) {
        Ok(repriced) => Ok(Json(repriced)),
        Err(error) => {
            let mut problem = Problem::new(
                StatusCode::UNPROCESSABLE_ENTITY,
                "reprice_row_invalid",
                format!("{error}; nothing was imported."),
            );
            problem.facts = json!({"line": error.line, "problem": error.problem});
            Err(problem)
        }
    }
}

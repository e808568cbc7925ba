//! The task read model as REST: `GET /v1/jobs/{task_id}` answers what the
//! relay shows about a task (`ask`), and with `wait_s` follows it until it is
//! answered or the wait ends (`wait`). Both read only; neither posts, rents
//! or pays, and neither needs the asker's key. The MCP tools `bazaar_ask`
//! and `bazaar_wait` are these routes.

use crate::auth::ApiQuery;
use crate::problem::Problem;
use crate::state::AppState;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use bazaar_relay::collect::{self, TaskLookup, WAIT_S_MAX};
use bazaar_relay::Hex32;
use serde::Deserialize;
use std::sync::Arc;
use std::time::Duration;
use utoipa::ToSchema;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

pub fn routes() -> OpenApiRouter<Arc<AppState>> {
    OpenApiRouter::new().routes(routes!(task))
}

#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct TaskQuery {
    /// Follow the task for up to this many seconds (at most 120) until it is answered.
    pub wait_s: Option<u64>,
}

/// A task's state as the relay shows it: `pending`, `claimed` (with the latest
/// progress time: a claim does not prove the worker still runs) or `answered`,
/// the count of successful answers (failures and declines are not work), the
/// answers and feedback from named workers, and how many events from others were ignored.
#[utoipa::path(get, path = "/v1/jobs/{task_id}", params(("task_id" = String, Path, pattern = "^[0-9a-f]{64}$", description = "The job request's event id (64 hex)"), ("wait_s" = Option<u64>, Query, maximum = 120, description = "Seconds to wait for an answer, at most `WAIT_S_MAX` (120)")),
    responses((status = 200, description = "The task", body = bazaar_wire::jobs::Task)))]
async fn task(
    State(state): State<Arc<AppState>>,
    Path(task_id): Path<String>,
    ApiQuery(query): ApiQuery<TaskQuery>,
) -> Result<Response, Problem> {
    let relay = state.relay()?.clone();
    let task = Hex32::parse(&task_id).ok_or_else(|| {
        Problem::new(StatusCode::BAD_REQUEST, "task_id_invalid", "A task id is 64 lowercase hex characters.")
    })?;
    let wait_s = query.wait_s.unwrap_or(0);
    if wait_s > WAIT_S_MAX {
        return Err(Problem::new(StatusCode::BAD_REQUEST, "wait_too_long", format!("wait_s is at most {WAIT_S_MAX}.")));
    }
    let found = if wait_s == 0 {
        collect::ask(&relay, task).await
    } else {
        collect::wait(&relay, task, Duration::from_secs(wait_s)).await
    };
    let unavailable = |e: bazaar_relay::StoreError| {
        Problem::retry_later(StatusCode::SERVICE_UNAVAILABLE, "store_unavailable", e.to_string())
    };
    match found.map_err(unavailable)? {
        TaskLookup::Task { view } => Ok(Json(view).into_response()),
        TaskLookup::PastRetention { purged_at, retention_days } => Err(Problem::new(
            StatusCode::GONE,
            "task_past_retention",
            format!(
                "This task's history passed the relay's {retention_days}-day retention and was removed at {purged_at} (unix seconds); it can no longer be read."
            ),
        )),
        TaskLookup::NotFound { retention_days } => Err(Problem::new(
            StatusCode::NOT_FOUND,
            "task_not_found",
            format!("No job request with this id is on this relay. The relay keeps job history for {retention_days} days."),
        )),
    }
}

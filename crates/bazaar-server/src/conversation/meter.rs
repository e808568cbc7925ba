//! The meter over HTTP: `GET /v1/meter?day=YYYY-MM-DD` — events delivered to
//! the caller that UTC day, by transport. Deliveries are counted in memory as
//! they leave (`Plane::count`) and added to the plane's store every
//! `METER_FLUSH_S` by one task per node; a read adds what is not flushed yet.

use crate::auth::{ApiQuery, Auth};
use crate::plane::METERED;
use crate::problem::Problem;
use crate::state::AppState;
use axum::extract::State;
use axum::response::{IntoResponse, Response};
use axum::Json;
use bazaar_conversation::meter::day_of;
use bazaar_core::vc::{ms_from_rfc3339, rfc3339_from_ms};
use bazaar_types::limits::METER_FLUSH_S;
use serde::Deserialize;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;
use utoipa::ToSchema;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

/// Milliseconds in a UTC day.
const DAY_MS: i64 = 86_400_000;

pub fn routes() -> OpenApiRouter<Arc<AppState>> {
    OpenApiRouter::new().routes(routes!(meter))
}

#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct MeterQuery {
    /// A UTC day, `YYYY-MM-DD`; today if absent.
    pub day: Option<String>,
}

pub use bazaar_wire::conversation::Meter;

/// Events delivered to the caller on a UTC day, by transport.
#[utoipa::path(get, path = "/v1/meter", params(("day" = Option<String>, Query)), security(("credential" = []), ("session" = [])), responses((status = 200, description = "The day's meter", body = Meter)))]
async fn meter(
    State(state): State<Arc<AppState>>,
    auth: Auth,
    ApiQuery(query): ApiQuery<MeterQuery>,
) -> Result<Response, Problem> {
    let day = match &query.day {
        None => day_of(state.now()),
        Some(text) => {
            let parsed = (text.len() == 10).then(|| ms_from_rfc3339(&format!("{text}T00:00:00Z"))).flatten();
            day_of(bazaar_types::Timestamp(parsed.ok_or_else(|| Problem::invalid("`day` is a UTC date, YYYY-MM-DD."))?))
        }
    };
    let plane = state.plane()?.clone();
    let member = auth.member.id.clone();
    let stored = plane.call(move |store| store.meter(&member, day)).await?;
    let mut delivered: BTreeMap<String, u64> = METERED.iter().map(|t| (t.to_string(), 0)).collect();
    for row in stored {
        *delivered.entry(row.transport).or_default() += row.events;
    }
    for (transport, events) in plane.unflushed(&auth.member.id, day) {
        *delivered.entry(transport.to_string()).or_default() += events;
    }
    let day_text = rfc3339_from_ms(day * DAY_MS)[..10].to_string();
    Ok(Json(Meter { member: auth.member.id.to_string(), day: day_text, delivered }).into_response())
}

/// Adds what the node counted to the store now.
pub async fn flush_once(state: &AppState) -> Result<(), Problem> {
    let plane = state.plane()?;
    let counts = plane.take_counts();
    let kept = counts.clone();
    let written = plane.call(move |store| store.add_to_meter(counts)).await;
    if written.is_err() {
        plane.recount(kept);
    }
    written
}

/// The node's meter task: a flush every `METER_FLUSH_S`.
pub fn spawn_meter(state: Arc<AppState>) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(Duration::from_secs(METER_FLUSH_S));
        loop {
            tick.tick().await;
            if let Err(problem) = flush_once(&state).await {
                tracing::warn!(code = %problem.code, "meter flush failed; the counts wait for the next one");
            }
        }
    })
}

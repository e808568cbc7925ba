//! The ledger's past as the chamber shows it, under the live stream's rules
//! of who sees what (`super::stream::viewer_of`): a page opened after the
//! story still has something to show.
//!
//! - `GET /v1/stream/history?before=&limit=` pages back through the events
//!   before a `seq` (the feed's "earlier events"), with the head's `seq` so a
//!   page can say how many events exist.
//! - `GET /v1/stream/latest` is the latest completed paid call, contract and
//!   dispute in the last [`crate::live::LATEST_SCAN_MAX`] events, each as the
//!   events that tell it (the chamber's three story panels), found at most once
//!   per [`crate::live::LATEST_REFRESH_MS`] on a node however many pages ask.
//! - `GET /v1/stream/viewer` says who this browser watches as, without a
//!   refusal: pages ask it before calling routes an anonymous visitor may not.

use super::stream::{viewer_of, MaybeAuth};
use crate::live::{project, Viewer};
use crate::problem::Problem;
use crate::state::AppState;
use axum::extract::State;
use axum::Json;
use bazaar_core::model::{Event, MemberKind};
use serde_json::{json, Value};
use std::sync::Arc;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

/// Events one history page holds at most (and by default).
pub const HISTORY_PAGE_MAX: u64 = 200;

pub fn routes() -> OpenApiRouter<Arc<AppState>> {
    OpenApiRouter::new().routes(routes!(history)).routes(routes!(latest)).routes(routes!(viewer))
}

#[derive(serde::Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct HistoryQuery {
    /// The events before this `seq` (absent: up to the head).
    pub before: Option<u64>,
    /// How many, at most 200 (absent: 200).
    pub limit: Option<u64>,
}

/// The events before `before`, newest last, as this viewer may see them (`events`), and the head's `seq`
/// (`head_seq`: how many events the ledger holds). The same viewers as `/v1/stream`.
#[utoipa::path(get, path = "/v1/stream/history", params(("before" = Option<u64>, Query), ("limit" = Option<u64>, Query)), security((), ("credential" = []), ("session" = [])), responses((status = 200, description = "`{head_seq, events}`: a page of the past, each event as this viewer may see it", body = bazaar_wire::stream::StreamHistory)))]
pub async fn history(
    State(state): State<Arc<AppState>>,
    MaybeAuth(auth): MaybeAuth,
    crate::auth::ApiQuery(query): crate::auth::ApiQuery<HistoryQuery>,
) -> Result<Json<Value>, Problem> {
    let viewer = viewer_of(&state, auth.as_ref())?;
    let head = state.store.head().await?.seq;
    let before = query.before.unwrap_or(head + 1).min(head + 1);
    let limit = query.limit.unwrap_or(HISTORY_PAGE_MAX).clamp(1, HISTORY_PAGE_MAX);
    let after = before.saturating_sub(1).saturating_sub(limit);
    let wanted = before.saturating_sub(1) - after;
    let events = if wanted == 0 { Vec::new() } else { state.store.events(after, wanted as usize).await? };
    let events: Vec<Value> = events.iter().filter(|e| e.seq < before).map(|e| project(e, &viewer)).collect();
    Ok(Json(json!({"head_seq": head, "events": events})))
}

/// One flow as this viewer may see it: its events, when it completed and the `seq` that completed it.
fn flow(events: &Option<Vec<Event>>, viewer: &Viewer) -> Value {
    let Some(events) = events else { return Value::Null };
    let Some(last) = events.iter().max_by_key(|e| e.seq) else { return Value::Null };
    json!({
        "completed_seq": last.seq,
        "completed_at_ms": last.at,
        "events": events.iter().map(|e| project(e, viewer)).collect::<Vec<_>>(),
    })
}

/// The latest completed paid call (its token and settlement), contract (created, every milestone released or
/// resolved by a dispute) and dispute (filed to executed) in the last 20,000 events, each `null` when there is
/// none, every event as this viewer may see it. The same viewers as `/v1/stream`.
#[utoipa::path(get, path = "/v1/stream/latest", security((), ("credential" = []), ("session" = [])), responses((status = 200, description = "`{head_seq, scanned_from_seq, paid_call, contract, dispute}`; each flow `{completed_seq, completed_at_ms, events}` or null", body = bazaar_wire::stream::StreamLatest)))]
pub async fn latest(State(state): State<Arc<AppState>>, MaybeAuth(auth): MaybeAuth) -> Result<Json<Value>, Problem> {
    let viewer = viewer_of(&state, auth.as_ref())?;
    let found = state.stream_hub().latest(state.store.as_ref()).await?;
    Ok(Json(json!({
        "head_seq": found.head,
        "scanned_from_seq": found.scanned_from,
        "paid_call": flow(&found.paid_call, &viewer),
        "contract": flow(&found.contract, &viewer),
        "dispute": flow(&found.dispute, &viewer),
    })))
}

/// Who this browser watches the stream as — `public`, `member` (with its handle) or `operator` — and whether the
/// stream is open to it; never a refusal for an anonymous visitor, so a page can ask before it calls what needs a
/// sign-in. A credential that is presented and refused is still refused.
#[utoipa::path(get, path = "/v1/stream/viewer", security((), ("credential" = []), ("session" = [])), responses((status = 200, description = "`{viewer, handle, stream_open}`", body = bazaar_wire::stream::StreamViewer)))]
pub async fn viewer(State(state): State<Arc<AppState>>, MaybeAuth(auth): MaybeAuth) -> Json<Value> {
    let (viewer, handle) = match &auth {
        Some(auth) if auth.member.kind == MemberKind::Operator => ("operator", Some(auth.member.handle.clone())),
        Some(auth) => ("member", Some(auth.member.handle.clone())),
        None => ("public", None),
    };
    let open = auth.is_some() || state.public_stream();
    Json(json!({"viewer": viewer, "handle": handle, "stream_open": open}))
}

//! The labor market's relay over HTTP: the NIP-01 WebSocket and the NIP-11
//! document at `/relay` (and at `/` on the relay's own port, when the
//! operator gives `--relay-port`), and the task read model as REST
//! (`GET /v1/jobs/{task_id}`, with `wait_s` to follow it). The relay engine
//! itself is `bazaar-relay`; this module only carries frames. A browser asking
//! `/relay` for HTML gets the relay's page instead (`page`), which reads the
//! same socket and verifies every event itself.

pub mod jobs;
pub mod page;
mod socket;

use crate::state::AppState;
use axum::extract::ws::rejection::WebSocketUpgradeRejection;
use axum::extract::ws::WebSocketUpgrade;
use axum::extract::State;
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use std::sync::Arc;

/// Where the relay is served on the registry's port.
pub const RELAY_PATH: &str = "/relay";

/// The relay's socket and information document, to merge into the registry's router.
pub fn socket_routes(state: Arc<AppState>) -> Router {
    Router::new().route(RELAY_PATH, get(endpoint).options(preflight)).merge(page::routes()).with_state(state)
}

/// The relay alone, for its own port: served at `/` and at `/relay`.
pub fn standalone_router(state: Arc<AppState>) -> Router {
    Router::new()
        .route("/", get(endpoint).options(preflight))
        .route(RELAY_PATH, get(endpoint).options(preflight))
        .merge(page::routes())
        .with_state(state)
}

/// NIP-11 asks for CORS on the information document.
fn cors(headers: &mut HeaderMap) {
    headers.insert(header::ACCESS_CONTROL_ALLOW_ORIGIN, HeaderValue::from_static("*"));
    headers.insert(header::ACCESS_CONTROL_ALLOW_HEADERS, HeaderValue::from_static("*"));
    headers.insert(header::ACCESS_CONTROL_ALLOW_METHODS, HeaderValue::from_static("GET, OPTIONS"));
}

async fn preflight() -> Response {
    let mut response = StatusCode::NO_CONTENT.into_response();
    cors(response.headers_mut());
    response
}

/// A WebSocket upgrade becomes a relay connection; `Accept: application/nostr+json`
/// gets the NIP-11 document; a browser (`Accept: text/html`) the relay's page;
/// anything else a short text saying what this is.
async fn endpoint(
    State(state): State<Arc<AppState>>,
    headers: HeaderMap,
    upgrade: Result<WebSocketUpgrade, WebSocketUpgradeRejection>,
) -> Response {
    let relay = match state.relay() {
        Ok(relay) => relay.clone(),
        Err(problem) => return problem.into_response(),
    };
    if let Ok(upgrade) = upgrade {
        return socket::upgrade(&state, relay, upgrade);
    }
    let wants_info = headers
        .get(header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|accept| accept.contains("application/nostr+json"));
    if !wants_info && page::wants_page(&headers) {
        return page::page();
    }
    let mut response = if wants_info {
        let document = bazaar_relay::info::document(&relay.config, env!("CARGO_PKG_VERSION"));
        let mut response = axum::Json(document).into_response();
        response.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static("application/nostr+json"));
        response
    } else {
        let text = "This is a Nostr relay (NIP-01): connect with a WebSocket client, or ask with \
                    `Accept: application/nostr+json` for its information document (NIP-11).\n";
        ([(header::CONTENT_TYPE, "text/plain; charset=utf-8")], text).into_response()
    };
    cors(response.headers_mut());
    response
}

/// Purges expired events and history past retention, then sleeps; one task per node.
pub fn spawn_purger(state: Arc<AppState>) {
    tokio::spawn(async move {
        let mut every = tokio::time::interval(std::time::Duration::from_secs(PURGE_EVERY_S));
        let lease_ttl = std::time::Duration::from_secs(PURGE_EVERY_S * 5 / 2);
        loop {
            every.tick().await;
            if !crate::fanout::runs_here(&state, crate::cluster::RELAY_PURGER_LEASE, lease_ttl).await {
                continue;
            }
            let Ok(relay) = state.relay() else { return };
            match relay.purge().await {
                Ok(purged) if purged.expired + purged.past_retention > 0 => {
                    tracing::info!(expired = purged.expired, past_retention = purged.past_retention, "relay purged");
                }
                Ok(_) => {}
                Err(error) => tracing::warn!(%error, "relay purge failed; trying again next round"),
            }
        }
    });
}

/// How often the relay's purger runs, in seconds.
pub const PURGE_EVERY_S: u64 = 300;

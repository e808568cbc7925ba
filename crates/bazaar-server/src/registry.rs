//! The registry-wide routes no capability owns: the front page at `/`
//! (`crate::front`), `/healthz`, `/metrics`, the signed registry card at
//! `/.well-known/bazaar` and the in-browser passport verifier page at `/passport/verify`.

mod memory;

use crate::federation;
use crate::problem::Problem;
use crate::state::AppState;
use crate::x402;
use crate::NETWORK_UNIT;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::IntoResponse;
use axum::Json;
use bazaar_types::limits::*;
use bazaar_wire::registry as schema;
use serde_json::json;
use std::sync::Arc;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

/// The registry-wide routes, each with its OpenAPI entry.
pub fn routes() -> OpenApiRouter<Arc<AppState>> {
    OpenApiRouter::new()
        .routes(routes!(healthz))
        .routes(routes!(metrics))
        .routes(routes!(well_known))
        .routes(routes!(passport_verify))
        .routes(routes!(compromises))
        .merge(crate::front::routes())
}

/// Liveness: the ledger writer runs and the store answers.
#[utoipa::path(get, path = "/healthz", responses((status = 200, description = "Liveness", body = schema::Health)))]
async fn healthz(State(state): State<Arc<AppState>>) -> Result<Json<serde_json::Value>, Problem> {
    if !state.store.writer_stats().running {
        return Err(Problem::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "writer_stopped",
            "The ledger writer has stopped; writes fail until the registry restarts. See the logs.",
        ));
    }
    let head = state.store.head().await?;
    Ok(Json(json!({"status": "ok", "event_seq": head.seq})))
}

/// Prometheus text format: request counts and latency, the writer's batches, refusals, replays.
#[utoipa::path(get, path = "/metrics", responses((status = 200, description = "Prometheus text exposition", body = String, content_type = "text/plain")))]
async fn metrics(State(state): State<Arc<AppState>>) -> impl IntoResponse {
    let writer = state.store.writer_stats();
    let mut text = state.metrics.render();
    for (name, help, value) in [
        ("bazaar_writer_batches_total", "Transactions the group-commit writer ran.", writer.batches as f64),
        ("bazaar_writer_commands_total", "Commands applied inside those transactions.", writer.commands as f64),
        (
            "bazaar_writer_busy_seconds_total",
            "Seconds the writer spent inside transactions.",
            writer.busy_us as f64 / 1e6,
        ),
        (
            "bazaar_writer_fenced_batches_total",
            "Batches the store refused: this node was not the ledger's sequencer at their epoch.",
            writer.fenced as f64,
        ),
        ("bazaar_ledger_forwarded_total", "Commands sent to another node's ledger sequencer.", writer.forwarded as f64),
    ] {
        text.push_str(&format!("# HELP {name} {help}\n# TYPE {name} counter\n{name} {value}\n"));
    }
    if let Some(leading) = writer.sequencer {
        let name = "bazaar_ledger_sequencer";
        text.push_str(&format!(
            "# HELP {name} 1 while this node is the ledger's sequencer (a cluster has one).\n# TYPE {name} gauge\n{name} {}\n",
            u8::from(leading)
        ));
    }
    text.push_str(&memory::render(&state));
    ([(axum::http::header::CONTENT_TYPE, "text/plain; version=0.0.4")], text)
}

/// The registry's public card: identity, fee, thresholds and limits.
#[utoipa::path(get, path = "/.well-known/bazaar", responses((status = 200, description = "Registry card: identity, keys, fee, thresholds and limits, signed (eddsa-jcs-2022)", body = bazaar_wire::registry::RegistryCard)))]
async fn well_known(State(state): State<Arc<AppState>>) -> Json<serde_json::Value> {
    let key = state.signing_key().verifying_key();
    Json(federation::card(
        &state,
        json!({
            "did": state.registry,
            "public_key": bazaar_core::crypto::b64url(key.as_bytes()),
            "public_key_hex": hex::encode(key.as_bytes()),
            "network_unit": NETWORK_UNIT,
            "fee_bps": state.config.fee_bps,
            "escrow_threshold_minor": state.config.escrow_threshold,
            "dispute_windows_s": state.config.windows,
            "dispute_desk": bazaar_core::model::DESK_ID,
        "x402": {"scheme": x402::SCHEME, "network": x402::network(&state),
            "asset": NETWORK_UNIT, "facilitator": "/x402"},
            "token_ttl_s": TOKEN_TTL_S_MAX,
            "token_format": "apt_<base64url(claims)>.<base64url(ed25519(\"bazaar-apt-v1.\" + base64url(claims)))>",
            "limits": {
                "amount_minor_max": AMOUNT_MINOR_MAX,
                "token_ttl_s_min": TOKEN_TTL_S_MIN,
                "token_ttl_s_max": TOKEN_TTL_S_MAX,
                "invite_ttl_s": INVITE_TTL_S,
                "idempotency_key_len_max": IDEMPOTENCY_KEY_LEN_MAX,
                "idempotency_retention_s": IDEMPOTENCY_RETENTION_S,
                "request_body_bytes_max": REQUEST_BODY_BYTES_MAX,
                "order_id_len_max": ORDER_ID_LEN_MAX,
                "resource_len_max": RESOURCE_LEN_MAX,
                "page_limit_max": PAGE_LIMIT_MAX,
            },
        }),
    ))
}

/// The compromise ledger: every place privacy here is weaker than end-to-end, and the test that shows it.
#[utoipa::path(get, path = "/compromises", responses((status = 200, description = "The compromise ledger (HTML), the same text as docs/compromises.md", body = String, content_type = "text/html")))]
async fn compromises() -> impl IntoResponse {
    crate::page::html_filled(crate::page::NO_SCRIPTS, &crate::compromises_page::compromises_page())
}

/// The passport verifier: a page that checks a pasted passport in the browser against this registry's keys.
#[utoipa::path(get, path = "/passport/verify", responses((status = 200, description = "Passport verifier page (HTML); verifying happens in the browser and sends nothing", body = String, content_type = "text/html")))]
async fn passport_verify(State(state): State<Arc<AppState>>) -> impl IntoResponse {
    let keys = serde_json::to_string(&state.key_history()).expect("keys serialize");
    crate::page::html_filled(crate::passport_page::PASSPORT_VERIFY_HTML, &crate::passport_page::passport_page(&keys))
}

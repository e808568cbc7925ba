//! Webhooks, exactly Standard Webhooks v1: members register endpoints (no
//! custom headers, ever: the receiver checks the signature), the sender claims
//! due deliveries from the plane's outbox and posts each signed, and the
//! routes list, rotate, remove and replay. Targets are checked against SSRF
//! when registered and again, after DNS, before every attempt.
//!
//! Each attempt is `POST <url>` with the JSON body
//! `{"type":"message.created","timestamp":…,"data":<message>}` and the headers
//! `webhook-id` (the same on every attempt), `webhook-timestamp` (this
//! attempt's Unix seconds) and `webhook-signature` (`v1,<base64>`, and a second
//! one under the previous secret while a rotation's overlap lasts). A 2xx is
//! delivered; 410 disables the endpoint; anything else (redirects included,
//! which are never followed) is retried on the schedule in
//! `bazaar_conversation::webhooks::sign`, then dead-lettered.

use crate::auth::{ApiJson, ApiQuery, Auth};
use crate::plane::Plane;
use crate::problem::Problem;
use crate::state::AppState;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use bazaar_conversation::webhooks::sign::signature_header;
use bazaar_conversation::{Attempt, ConversationError, DeliveryState, Due};
use bazaar_types::limits::{
    WEBHOOK_ATTEMPT_TIMEOUT_MS, WEBHOOK_CLAIM_MAX, WEBHOOK_ERROR_BYTES_MAX, WEBHOOK_LEASE_MS,
    WEBHOOK_ROTATION_OVERLAP_MS, WEBHOOK_TICK_MS,
};
use serde::{Deserialize, Serialize};
use serde_json::json;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;
use utoipa::ToSchema;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

/// The event type every message delivery carries.
pub const MESSAGE_EVENT_TYPE: &str = "message.created";

pub fn routes() -> OpenApiRouter<Arc<AppState>> {
    OpenApiRouter::new()
        .routes(routes!(add_webhook, list_webhooks))
        .routes(routes!(remove_webhook))
        .routes(routes!(rotate_secret))
        .routes(routes!(list_deliveries))
        .routes(routes!(replay_dead))
}

// Target checks.

fn refused(reason: impl Into<String>) -> Problem {
    crate::plane::problem(ConversationError::WebhookUrlInvalid(reason.into()))
}

pub use bazaar_types::net::is_private_address;

/// A URL a webhook may be registered at: http(s), a host, no credentials, no
/// fragment; an address literal or `localhost` in a private range is refused
/// unless `allow_private`.
pub fn check_target(url: &str, allow_private: bool) -> Result<reqwest::Url, Problem> {
    let parsed = reqwest::Url::parse(url).map_err(|error| refused(format!("not a URL ({error})")))?;
    if !matches!(parsed.scheme(), "https" | "http") {
        return Err(refused("the scheme must be https (or http)"));
    }
    if !parsed.username().is_empty() || parsed.password().is_some() {
        return Err(refused("credentials in the URL are not allowed; the receiver checks the signature"));
    }
    if parsed.fragment().is_some() {
        return Err(refused("a fragment is never sent; remove it"));
    }
    let host = parsed.host().ok_or_else(|| refused("the URL has no host"))?;
    if !allow_private {
        let private = match host {
            url::Host::Ipv4(v4) => is_private_address(IpAddr::V4(v4)),
            url::Host::Ipv6(v6) => is_private_address(IpAddr::V6(v6)),
            url::Host::Domain(name) => name == "localhost" || name.ends_with(".localhost"),
        };
        if private {
            return Err(refused("loopback, private and reserved addresses are refused"));
        }
    }
    Ok(parsed)
}

/// Resolves the target and checks every address it names, so a name that
/// points inside (at registration or since) is refused before any byte is
/// sent; the attempt then connects to the address checked here.
async fn vetted_address(url: &reqwest::Url, allow_private: bool) -> Result<Option<SocketAddr>, String> {
    let host = url.host_str().ok_or("no host")?;
    let port = url.port_or_known_default().ok_or("no port")?;
    if url.host().is_some_and(|h| !matches!(h, url::Host::Domain(_))) {
        return Ok(None);
    }
    let addresses: Vec<SocketAddr> =
        tokio::net::lookup_host((host, port)).await.map_err(|error| format!("DNS: {error}"))?.collect();
    if addresses.is_empty() {
        return Err("DNS: no address".into());
    }
    if !allow_private && addresses.iter().any(|a| is_private_address(a.ip())) {
        return Err("the name resolves to a private address; refused".into());
    }
    Ok(addresses.first().copied())
}

// Sending.

/// Sends every due delivery once (at most `WEBHOOK_CLAIM_MAX`, one per
/// endpoint, concurrently) and records each outcome; how many were attempted.
pub async fn deliver_once(state: &Arc<AppState>) -> Result<usize, Problem> {
    let plane = state.plane()?.clone();
    let due = plane.call(|store| store.claim_deliveries(WEBHOOK_LEASE_MS, WEBHOOK_CLAIM_MAX)).await?;
    let attempted = due.len();
    let attempts = due.into_iter().map(|due| {
        let (state, plane) = (state.clone(), plane.clone());
        async move {
            let id = due.delivery.id;
            let attempt = attempt(&state, &plane, due).await;
            if let Err(problem) = plane.call(move |store| store.finish_delivery(id, attempt)).await {
                tracing::warn!(delivery = id, code = %problem.code, "could not record a webhook attempt; its lease will lapse and it is retried");
            }
        }
    });
    futures::future::join_all(attempts).await;
    Ok(attempted)
}

/// One signed POST of one delivery.
async fn attempt(state: &AppState, plane: &Plane, due: Due) -> Attempt {
    let failed = |status: Option<u16>, error: String| Attempt::Failed { status, error };
    let Ok(url) = check_target(&due.endpoint.url, plane.private_webhooks_allowed()) else {
        return failed(None, "the target is refused".into());
    };
    let pinned = match vetted_address(&url, plane.private_webhooks_allowed()).await {
        Ok(pinned) => pinned,
        Err(error) => return failed(None, error),
    };
    let now = state.now();
    let body = json!({
        "type": MESSAGE_EVENT_TYPE,
        "timestamp": bazaar_core::vc::rfc3339_from_ms(due.message.at.0),
        "data": due.message,
    })
    .to_string();
    let id = due.delivery.webhook_id();
    let timestamp = now.0.div_euclid(1000);
    let Some(signature) = signature_header(&due.endpoint.secrets_at(now), &id, timestamp, body.as_bytes()) else {
        return failed(None, "the endpoint's secret is unreadable".into());
    };
    let mut client = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .timeout(Duration::from_millis(WEBHOOK_ATTEMPT_TIMEOUT_MS));
    if let (Some(address), Some(host)) = (pinned, url.host_str()) {
        client = client.resolve(host, address);
    }
    let Ok(client) = client.build() else {
        return failed(None, "could not build an HTTP client".into());
    };
    let sent = client
        .post(url)
        .header("content-type", "application/json")
        .header("webhook-id", id)
        .header("webhook-timestamp", timestamp.to_string())
        .header("webhook-signature", signature)
        .body(body)
        .send()
        .await;
    match sent {
        Ok(response) if response.status().is_success() => {
            plane.count(&due.endpoint.member, "webhook", 1);
            Attempt::Delivered { status: response.status().as_u16() }
        }
        Ok(response) if response.status() == StatusCode::GONE => Attempt::Gone,
        Ok(response) => {
            let status = response.status().as_u16();
            let text = response.text().await.unwrap_or_default();
            failed(Some(status), text.chars().take(WEBHOOK_ERROR_BYTES_MAX).collect())
        }
        Err(error) => failed(None, error.to_string().chars().take(WEBHOOK_ERROR_BYTES_MAX).collect()),
    }
}

/// The node's sender: a pass whenever the log advances, and every
/// `WEBHOOK_TICK_MS` for retries coming due.
pub fn spawn_sender(state: Arc<AppState>) -> Option<tokio::task::JoinHandle<()>> {
    let mut log = state.plane().ok()?.watch_log();
    Some(tokio::spawn(async move {
        loop {
            if let Err(problem) = deliver_once(&state).await {
                tracing::warn!(code = %problem.code, "webhook pass failed; retrying on the next tick");
            }
            let tick = tokio::time::sleep(Duration::from_millis(WEBHOOK_TICK_MS));
            tokio::select! {
                changed = log.changed() => if changed.is_err() { return },
                _ = tick => {}
            }
        }
    }))
}

// Routes.

#[derive(Deserialize, Serialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct AddWebhookRequest {
    /// Where deliveries are POSTed. No custom headers are stored: the receiver checks the signature.
    pub url: String,
}

pub use bazaar_wire::conversation::WebhookView;

fn view(endpoint: bazaar_conversation::Endpoint, show_secret: bool) -> WebhookView {
    WebhookView {
        secret: show_secret.then(|| endpoint.secret.clone()),
        id: endpoint.id,
        url: endpoint.url,
        created_at: endpoint.created_at.0,
        disabled_at: endpoint.disabled_at.map(|t| t.0),
        disabled_reason: endpoint.disabled_reason,
        previous_until: endpoint.previous_until.map(|t| t.0),
    }
}

/// Registers a webhook endpoint for the caller; its secret is shown once.
#[utoipa::path(post, path = "/v1/webhooks", request_body = AddWebhookRequest, security(("credential" = []), ("session" = [])), responses((status = 201, description = "The endpoint, with its `whsec_` secret", body = WebhookView)))]
async fn add_webhook(
    State(state): State<Arc<AppState>>,
    auth: Auth,
    ApiJson(body): ApiJson<AddWebhookRequest>,
) -> Result<Response, Problem> {
    let plane = state.plane()?;
    let url = check_target(&body.url, plane.private_webhooks_allowed())?;
    let member = auth.member.id;
    let endpoint = plane.call(move |store| store.add_webhook(&member, url.as_str())).await?;
    Ok((StatusCode::CREATED, Json(view(endpoint, true))).into_response())
}

/// The caller's webhook endpoints (without their secrets).
#[utoipa::path(get, path = "/v1/webhooks", security(("credential" = []), ("session" = [])), responses((status = 200, description = "Endpoints", body = [WebhookView])))]
async fn list_webhooks(State(state): State<Arc<AppState>>, auth: Auth) -> Result<Response, Problem> {
    let member = auth.member.id;
    let endpoints = state.plane()?.call(move |store| store.webhooks(&member)).await?;
    Ok(Json(endpoints.into_iter().map(|e| view(e, false)).collect::<Vec<_>>()).into_response())
}

/// Removes an endpoint and everything still owed to it.
#[utoipa::path(delete, path = "/v1/webhooks/{id}", params(("id" = String, Path)), security(("credential" = []), ("session" = [])), responses((status = 200, description = "Removed", body = WebhookRemoved)))]
async fn remove_webhook(
    State(state): State<Arc<AppState>>,
    auth: Auth,
    Path(id): Path<String>,
) -> Result<Response, Problem> {
    let (member, removed) = (auth.member.id, id.clone());
    state.plane()?.call(move |store| store.remove_webhook(&member, &removed)).await?;
    Ok(Json(WebhookRemoved { id, removed: true }).into_response())
}

pub use bazaar_wire::conversation::WebhookRemoved;

/// Draws a new secret. For `WEBHOOK_ROTATION_OVERLAP_MS` (24 h) every
/// delivery carries two signatures, the new secret's and the old one's, so
/// the receiver can switch at its own pace.
#[utoipa::path(post, path = "/v1/webhooks/{id}/rotate", params(("id" = String, Path)), security(("credential" = []), ("session" = [])), responses((status = 200, description = "The endpoint with its new secret", body = WebhookView)))]
async fn rotate_secret(
    State(state): State<Arc<AppState>>,
    auth: Auth,
    Path(id): Path<String>,
) -> Result<Response, Problem> {
    let member = auth.member.id;
    let endpoint = state
        .plane()?
        .call(move |store| store.rotate_webhook_secret(&member, &id, WEBHOOK_ROTATION_OVERLAP_MS))
        .await?;
    Ok(Json(view(endpoint, true)).into_response())
}

#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct DeliveriesQuery {
    /// `pending`, `delivered` or `dead` (the dead-letter list); default `dead`.
    pub state: Option<String>,
    pub limit: Option<usize>,
}

/// An endpoint's deliveries in one state, oldest first: by default its dead letters.
#[utoipa::path(get, path = "/v1/webhooks/{id}/deliveries", params(("id" = String, Path), ("state" = Option<String>, Query), ("limit" = Option<usize>, Query)), security(("credential" = []), ("session" = [])), responses((status = 200, description = "Deliveries", body = [bazaar_wire::conversation::WebhookDelivery])))]
async fn list_deliveries(
    State(state): State<Arc<AppState>>,
    auth: Auth,
    Path(id): Path<String>,
    ApiQuery(query): ApiQuery<DeliveriesQuery>,
) -> Result<Response, Problem> {
    let wanted = query.state.as_deref().unwrap_or("dead");
    let wanted =
        DeliveryState::parse(wanted).ok_or_else(|| Problem::invalid("`state` is `pending`, `delivered` or `dead`."))?;
    let (member, limit) = (auth.member.id, query.limit.unwrap_or(super::rest::PAGE_DEFAULT));
    let found = state.plane()?.call(move |store| store.deliveries(&member, &id, wanted, limit)).await?;
    Ok(Json(found).into_response())
}

pub use bazaar_wire::conversation::Replayed;

/// Puts the endpoint's dead letters back in line, oldest first.
#[utoipa::path(post, path = "/v1/webhooks/{id}/replay", params(("id" = String, Path)), security(("credential" = []), ("session" = [])), responses((status = 200, description = "How many were put back", body = Replayed)))]
async fn replay_dead(
    State(state): State<Arc<AppState>>,
    auth: Auth,
    Path(id): Path<String>,
) -> Result<Response, Problem> {
    let member = auth.member.id;
    let replayed = state.plane()?.call(move |store| store.replay_dead(&member, &id)).await?;
    Ok(Json(Replayed { replayed }).into_response())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn targets_inside_are_refused_unless_allowed() {
        for url in [
            "http://127.0.0.1/hook",
            "http://10.1.2.3/",
            "http://192.168.0.1/",
            "http://172.16.5.4/",
            "http://169.254.169.254/latest/meta-data",
            "http://100.64.0.1/",
            "http://0.0.0.0/",
            "http://[::1]/",
            "http://[fd00::1]/",
            "http://[fe80::1]/",
            "http://[::ffff:127.0.0.1]/",
            "http://localhost:8080/",
            "http://api.localhost/",
        ] {
            assert_eq!(check_target(url, false).unwrap_err().code, "webhook_url_invalid", "{url}");
            assert!(check_target(url, true).is_ok(), "{url} with private targets allowed");
        }
        for url in ["ftp://example.com/", "https://user:pw@example.com/", "https://example.com/#x", "not a url"] {
            assert_eq!(check_target(url, true).unwrap_err().code, "webhook_url_invalid", "{url}");
        }
        for url in ["https://example.com/hooks/bazaar", "http://93.184.216.34:8080/", "https://[2606:4700::1]/"] {
            assert!(check_target(url, false).is_ok(), "{url}");
        }
    }
}

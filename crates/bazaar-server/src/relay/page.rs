//! The relay's page: a browser asking `GET /relay` for HTML gets a static client that shows the
//! job board, a task's state and its evidence chain, and checks pasted events. Its script
//! (`/relay/client.js`, with the verifier `/relay/verify.mjs`) reads only this relay's WebSocket
//! and verifies every event in the browser (SHA-256 ids, BIP-340 signatures) before it counts it.
//! All three files are compiled in; the page loads nothing from anywhere else.

use axum::http::{header, HeaderMap, HeaderValue};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;

pub const PAGE_HTML: &str = include_str!("page.html");
pub const CLIENT_JS: &str = include_str!("client.js");
pub const VERIFY_JS: &str = include_str!("verify.mjs");

/// Where the page's script is served.
pub const CLIENT_JS_PATH: &str = "/relay/client.js";
/// Where the script's event verifier is served (an ES module; `tests/relay/verify_vectors.mjs` imports the same file).
pub const VERIFY_JS_PATH: &str = "/relay/verify.mjs";

/// Scripts only from this origin (no inline script, no `eval`), the page's own inline style, and
/// connections only back to this origin (the relay's WebSocket).
pub const CONTENT_SECURITY_POLICY: &str = "default-src 'none'; script-src 'self'; style-src 'unsafe-inline'; \
     connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

/// The page's two scripts; the page itself is `/relay`, answered by the relay's endpoint.
pub fn routes<S: Clone + Send + Sync + 'static>() -> Router<S> {
    Router::new()
        .route(CLIENT_JS_PATH, get(|| async { script(CLIENT_JS) }))
        .route(VERIFY_JS_PATH, get(|| async { script(VERIFY_JS) }))
}

/// A browser navigating to the relay (`Accept` naming `text/html`) rather than a Nostr client.
pub fn wants_page(headers: &HeaderMap) -> bool {
    headers
        .get(header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|accept| accept.split(',').any(|item| item.trim().starts_with("text/html")))
}

pub fn page() -> Response {
    let mut response = PAGE_HTML.into_response();
    let headers = response.headers_mut();
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static("text/html; charset=utf-8"));
    headers.insert(header::CONTENT_SECURITY_POLICY, HeaderValue::from_static(CONTENT_SECURITY_POLICY));
    common_headers(headers);
    // The same URL answers WebSocket clients and NIP-11 readers too.
    headers.insert(header::VARY, HeaderValue::from_static("Accept"));
    response
}

fn script(body: &'static str) -> Response {
    let mut response = body.into_response();
    let headers = response.headers_mut();
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static("text/javascript; charset=utf-8"));
    common_headers(headers);
    response
}

fn common_headers(headers: &mut HeaderMap) {
    headers.insert(header::X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    headers.insert(header::REFERRER_POLICY, HeaderValue::from_static("no-referrer"));
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_browser_gets_the_page_and_a_nostr_client_does_not() {
        let accept = |value: &'static str| {
            let mut headers = HeaderMap::new();
            headers.insert(header::ACCEPT, HeaderValue::from_static(value));
            headers
        };
        assert!(wants_page(&accept("text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8")));
        assert!(!wants_page(&accept("application/nostr+json")));
        assert!(!wants_page(&accept("*/*")));
        assert!(!wants_page(&HeaderMap::new()));
    }

    #[test]
    fn the_page_loads_only_its_own_scripts() {
        assert!(PAGE_HTML.contains(&format!(r#"<script type="module" src="{CLIENT_JS_PATH}"></script>"#)));
        assert_eq!(PAGE_HTML.matches("<script").count(), 1, "no inline script: the policy forbids it");
        assert!(CLIENT_JS.contains(r#"from "./verify.mjs""#), "client.js imports the verifier beside it");
        for text in [PAGE_HTML, CLIENT_JS, VERIFY_JS] {
            assert!(!text.contains("http://") && !text.contains("https://"), "nothing is fetched from elsewhere");
            assert!(
                !text.contains("innerHTML") && !text.contains("onclick="),
                "no markup from data, no inline handlers"
            );
        }
    }
}

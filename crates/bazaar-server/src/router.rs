//! The router: merges each capability's `routes()` (every route registered
//! together with its OpenAPI entry by `utoipa-axum`, so neither exists without
//! the other), serves the resulting description at `/openapi.json`, nests the
//! storefront's MCP server at `/mcp`, and wraps it all in admission control,
//! request metrics, the body limit and the problem+json fallback.

use crate::problem::{Problem, ProblemDetails};
use crate::state::AppState;
use crate::{conversation, dispute, escrow, federation, identity, market, pay, registry, x402};
use axum::extract::{MatchedPath, State};
use axum::http::StatusCode;
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::{Json, Router};
use bazaar_types::limits::REQUEST_BODY_BYTES_MAX;
use bazaar_wire::OpenObject;
use std::sync::{Arc, OnceLock};
use utoipa::openapi::path::{Operation, PathItem};
use utoipa::OpenApi;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

/// Routes served on purpose without an entry in `/openapi.json`, each with the
/// reason. Every other served path must have one (a test holds the two lists
/// together).
pub const UNDESCRIBED_ROUTES: &[(&str, &str)] = &[
    ("/mcp", "the storefront's MCP server: JSON-RPC over streamable HTTP, described by its own `tools/list`"),
    (
        conversation::stream::INBOX_SOCKET_PATH,
        "the inbox as a WebSocket (101 Switching Protocols): OpenAPI cannot state a socket's frames; specified in \
         docs/conversation.md",
    ),
    (
        crate::relay::RELAY_PATH,
        "the labor market's Nostr relay: a NIP-01 WebSocket, and its NIP-11 document for \
         `Accept: application/nostr+json`; specified by the NIPs and docs/relay.md",
    ),
    (
        crate::relay::page::CLIENT_JS_PATH,
        "the script of the relay's page (`/relay` asked for text/html): static JavaScript, not an API",
    ),
    (
        crate::relay::page::VERIFY_JS_PATH,
        "the relay page's event verifier (NIP-01 ids, BIP-340 signatures): a static ES module, not an API",
    ),
    (
        federation::FEDERATION_SETTLE_PATH,
        "server-to-server between registries, authenticated by `Bazaar-Registry-Signature`, not a member API; \
         specified in docs/federation.md",
    ),
    (
        federation::FEDERATION_NET_PATH,
        "server-to-server: a peer presents a netting statement it signed, authenticated by \
         `Bazaar-Registry-Signature`, not a member API; specified in docs/federation.md",
    ),
];

#[derive(OpenApi)]
#[openapi(
    info(
        title = "Bazaar registry API",
        description = "Identities, a double-entry ledger, paid calls settled exactly once, escrowed contracts, disputes and stake. Errors are RFC 9457 problem+json with a stable `code`."
    ),
    // The error-response sets refer to it by name, so it is registered here
    // rather than left to whichever route happens to name it as a body.
    components(schemas(ProblemDetails)),
    modifiers(&SecuritySchemes)
)]
struct ApiDoc;

/// The two ways a caller authenticates, named by every route behind them
/// (`security(("credential" = []), ("session" = []))`): a bearer credential,
/// or a person's passkey session cookie (which also needs the registry's own
/// `Origin` on a write).
struct SecuritySchemes;

impl utoipa::Modify for SecuritySchemes {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        use utoipa::openapi::security::{ApiKey, ApiKeyValue, HttpAuthScheme, HttpBuilder, SecurityScheme};
        let components = openapi.components.get_or_insert_with(Default::default);
        let bearer = HttpBuilder::new()
            .scheme(HttpAuthScheme::Bearer)
            .description(Some(
                "An agent's, owner's or operator's credential (`bzc_…`). A credential without the `pay` scope cannot \
                 move money; an enrollment credential (`bzi_…`) may only rotate itself.",
            ))
            .build();
        components.add_security_scheme(CREDENTIAL_SCHEME, SecurityScheme::Http(bearer));
        let cookie = ApiKeyValue::with_description(
            crate::auth::SESSION_COOKIE,
            "A person signed in with a passkey (`POST /v1/passkeys/sign-in/finish` sets it; SameSite=Strict). A write \
             on a session must carry this registry's `Origin`.",
        );
        components.add_security_scheme(SESSION_SCHEME, SecurityScheme::ApiKey(ApiKey::Cookie(cookie)));
    }
}

/// The security scheme of `Authorization: Bearer <credential>`.
pub const CREDENTIAL_SCHEME: &str = "credential";
/// The security scheme of the passkey session cookie.
pub const SESSION_SCHEME: &str = "session";

/// Every route, with the storefront's MCP server nested at `/mcp`.
pub fn router(state: Arc<AppState>) -> Router {
    let api = api_router(state.clone());
    let mcp = crate::mcp::service(api.clone());
    api.nest_service("/mcp", mcp).merge(crate::relay::socket_routes(state))
}

/// The REST API (and the pages): everything but `/mcp`, whose tools call it.
pub fn api_router(state: Arc<AppState>) -> Router {
    let (api, _description) = capabilities().split_for_parts();
    api.fallback(not_found)
        .layer(axum::extract::DefaultBodyLimit::max(REQUEST_BODY_BYTES_MAX))
        .layer(middleware::from_fn(problem_rejections))
        .layer(middleware::from_fn(crate::auth::scope_spending))
        .layer(middleware::from_fn_with_state(state.clone(), crate::edge::limit))
        .layer(middleware::from_fn_with_state(state.clone(), observe))
        .layer(middleware::from_fn_with_state(state.clone(), admit))
        .with_state(state)
}

/// One line per capability; each `routes()` carries its OpenAPI entries, tagged
/// with the capability's name.
fn capabilities() -> OpenApiRouter<Arc<AppState>> {
    OpenApiRouter::with_openapi(ApiDoc::openapi())
        .routes(routes!(openapi))
        .merge(tagged("registry", registry::routes()))
        .merge(tagged("identity", identity::routes()))
        .merge(tagged("pay", pay::routes()))
        .merge(tagged("ledger", crate::ledger::routes()))
        .merge(tagged("pay", crate::terms::routes()))
        .merge(tagged("chamber", crate::reprice::route::routes()))
        .merge(tagged("escrow", escrow::routes()))
        .merge(tagged("dispute", dispute::routes()))
        .merge(tagged("federation", federation::routes()))
        .merge(tagged("market", market::routes()))
        .merge(tagged("bounty", crate::bounty::routes()))
        .merge(tagged("hire", crate::hire::routes()))
        .merge(tagged("spending", crate::spending::routes()))
        .merge(tagged("chamber", crate::chamber::routes()))
        .merge(tagged("x402", x402::routes()))
        .merge(tagged("conversation", conversation::routes()))
        .merge(tagged("people", crate::people::routes()))
        .merge(tagged("jobs", crate::relay::jobs::routes()))
}

/// Tags every operation of `router` with its capability. Its error responses are written afterwards, from
/// the codes it can answer ([`crate::refusals::declare`]).
fn tagged(tag: &str, mut router: OpenApiRouter<Arc<AppState>>) -> OpenApiRouter<Arc<AppState>> {
    for item in router.get_openapi_mut().paths.paths.values_mut() {
        for operation in operations(item) {
            operation.tags = Some(vec![tag.to_string()]);
        }
    }
    router
}

fn operations(item: &mut PathItem) -> impl Iterator<Item = &mut Operation> {
    let PathItem { get, put, post, delete, options, head, patch, trace, .. } = item;
    [get, put, post, delete, options, head, patch, trace].into_iter().filter_map(Option::as_mut)
}

/// The API description, built once from the same routers that serve.
pub fn api_description() -> &'static utoipa::openapi::OpenApi {
    static DESCRIPTION: OnceLock<utoipa::openapi::OpenApi> = OnceLock::new();
    DESCRIPTION.get_or_init(|| {
        let mut description = capabilities().split_for_parts().1;
        crate::refusals::declare(&mut description);
        description
    })
}

/// This API's OpenAPI 3.1 description.
#[utoipa::path(get, path = "/openapi.json", tag = "registry", responses((status = 200, description = "OpenAPI 3.1 document", body = OpenObject)))]
async fn openapi() -> Json<utoipa::openapi::OpenApi> {
    Json(api_description().clone())
}

/// Bounds the requests in flight: past the limit, answer 503 now rather than queue.
async fn admit(State(state): State<Arc<AppState>>, request: axum::extract::Request, next: Next) -> Response {
    let Ok(_permit) = state.requests.try_acquire() else {
        let problem = Problem::retry_later(
            StatusCode::SERVICE_UNAVAILABLE,
            "overloaded",
            "The registry is working on as many requests as it takes at once; retry shortly.",
        );
        return problem.into_response();
    };
    next.run(request).await
}

async fn observe(State(state): State<Arc<AppState>>, request: axum::extract::Request, next: Next) -> Response {
    let route =
        request.extensions().get::<MatchedPath>().map(|p| p.as_str().to_string()).unwrap_or_else(|| "unmatched".into());
    let started = std::time::Instant::now();
    let response = next.run(request).await;
    let status = response.status().as_u16();
    tracing::debug!(%route, status, elapsed_us = started.elapsed().as_micros() as u64, "request");
    state.metrics.add("bazaar_http_requests_total", format!("route=\"{route}\",status=\"{status}\""), 1.0);
    state.metrics.add("bazaar_http_request_seconds_sum", format!("route=\"{route}\""), started.elapsed().as_secs_f64());
    response
}

/// The bytes of a plain-text rejection read to restate it (axum's are one line).
const REJECTION_TEXT_BYTES_MAX: usize = 4 * 1024;

/// Restates as problem+json the plain-text refusals axum's own extractors and
/// router answer with (a path segment that does not parse, a method the route
/// does not take, …), so every error this API sends has a stable `code`.
async fn problem_rejections(request: axum::extract::Request, next: Next) -> Response {
    let response = next.run(request).await;
    let status = response.status();
    // axum's rejections are text/plain; its 405 has no body (nor type) at all.
    let plain = response
        .headers()
        .get(axum::http::header::CONTENT_TYPE)
        .map(|v| v.to_str().is_ok_and(|v| v.starts_with("text/plain")))
        .unwrap_or(true);
    if !(status.is_client_error() || status.is_server_error()) || !plain {
        return response;
    }
    let allow = response.headers().get(axum::http::header::ALLOW).cloned();
    let text = axum::body::to_bytes(response.into_body(), REJECTION_TEXT_BYTES_MAX).await.unwrap_or_default();
    let text = String::from_utf8_lossy(&text);
    let code = match status {
        StatusCode::METHOD_NOT_ALLOWED => "method_not_allowed",
        StatusCode::PAYLOAD_TOO_LARGE => "body_too_large",
        StatusCode::NOT_FOUND => "route_not_found",
        status if status.is_server_error() => "internal",
        _ => "invalid_request",
    };
    let detail = match text.trim() {
        "" if status == StatusCode::METHOD_NOT_ALLOWED => {
            "This route does not take that method; see `Allow`.".to_string()
        }
        "" => format!("The request was refused ({status})."),
        text => format!("The request was refused: {text}"),
    };
    let mut answer = Problem::new(status, code, detail).into_response();
    if let Some(allow) = allow {
        answer.headers_mut().insert(axum::http::header::ALLOW, allow);
    }
    answer
}

async fn not_found() -> Problem {
    Problem::new(StatusCode::NOT_FOUND, "route_not_found", "No such route; see /openapi.json for the API.")
}

#[cfg(test)]
mod tests {
    use super::*;
    use bazaar_types::limits::HTTP_REQUESTS_IN_FLIGHT_MAX;
    use bazaar_types::{ManualClock, Timestamp};
    use std::collections::BTreeSet;
    use tower::ServiceExt;
    use utoipa::ToSchema;

    async fn state(tag: &str) -> (Arc<AppState>, std::path::PathBuf) {
        let dir = std::env::temp_dir().join(format!("bazaar-{tag}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let clock = Arc::new(ManualClock::new(Timestamp(0)));
        let config = bazaar_core::apply::Config::standard();
        let store =
            Arc::new(bazaar_store_sqlite::SqliteStore::open(dir.join("s.db"), config.clone(), clock.clone()).unwrap());
        (crate::boot(store, clock, config, Some("op".into())).await.unwrap().state, dir)
    }

    #[tokio::test]
    async fn requests_past_the_limit_are_shed_with_503() {
        let (state, dir) = state("shed").await;
        let app = router(state.clone());
        let get = || axum::http::Request::get("/healthz").body(axum::body::Body::empty()).unwrap();
        assert_eq!(app.clone().oneshot(get()).await.unwrap().status(), StatusCode::OK);
        let busy = state.requests.try_acquire_many(HTTP_REQUESTS_IN_FLIGHT_MAX as u32).unwrap();
        let shed = app.clone().oneshot(get()).await.unwrap();
        assert_eq!(shed.status(), StatusCode::SERVICE_UNAVAILABLE);
        assert!(shed.headers().contains_key("retry-after"));
        let body = axum::body::to_bytes(shed.into_body(), 4096).await.unwrap();
        assert_eq!(serde_json::from_slice::<serde_json::Value>(&body).unwrap()["code"], "overloaded");
        drop(busy);
        assert_eq!(app.oneshot(get()).await.unwrap().status(), StatusCode::OK);
        std::fs::remove_dir_all(&dir).ok();
    }

    /// The paths the served router matches. axum has no route listing, so
    /// this reads them from its `Debug` output (the path router comes before
    /// the fallback router there); the assertions below fail loudly if that
    /// format changes.
    fn served_paths(router: &Router) -> BTreeSet<String> {
        let debug = format!("{router:?}");
        let routes = debug.split("fallback_router").next().unwrap_or_default();
        let paths: BTreeSet<String> = routes
            .split('"')
            .skip(1)
            .step_by(2)
            .filter(|p| p.starts_with('/') && !p.contains("__private__axum"))
            // `nest_service("/mcp", …)` also routes "/mcp/": the same nest.
            .map(|p| if p.len() > 1 { p.trim_end_matches('/') } else { p })
            .map(str::to_string)
            .collect();
        assert!(paths.contains("/healthz") && paths.contains("/mcp"), "axum's Debug format changed: {paths:?}");
        paths
    }

    /// The served document, as a client reads it.
    async fn served_document(app: &Router) -> serde_json::Value {
        let request = axum::http::Request::get("/openapi.json").body(axum::body::Body::empty()).unwrap();
        let response = app.clone().oneshot(request).await.unwrap();
        assert_eq!(response.status(), StatusCode::OK);
        serde_json::from_slice(&axum::body::to_bytes(response.into_body(), usize::MAX).await.unwrap()).unwrap()
    }

    /// Whether an OpenAPI schema object says something (a reference, a type or
    /// a choice of schemas) rather than being the empty "anything" schema.
    fn says_something(schema: &serde_json::Value) -> bool {
        ["$ref", "type", "oneOf", "anyOf", "allOf"].iter().any(|key| schema.get(key).is_some())
    }

    /// Every operation describes its bodies: at least one 2xx response with
    /// content (a JSON schema, or the non-JSON media type it serves), and every
    /// 4xx/5xx response is problem+json referring to the problem schema. A route
    /// added with only a description fails here.
    #[tokio::test]
    async fn every_operation_describes_its_response_bodies() {
        let (state, dir) = state("bodies").await;
        let document = served_document(&router(state)).await;
        let problem_ref = format!("#/components/schemas/{}", ProblemDetails::name());
        assert!(document["components"]["schemas"][ProblemDetails::name().as_ref()].is_object(), "no problem schema");
        for (path, item) in document["paths"].as_object().unwrap() {
            for (method, operation) in item.as_object().unwrap() {
                let at = format!("{method} {path}");
                let responses = operation["responses"].as_object().unwrap();
                let successes: Vec<_> = responses.iter().filter(|(status, _)| status.starts_with('2')).collect();
                assert!(!successes.is_empty(), "{at}: no 2xx response");
                let described = |(_, response): &(&String, &serde_json::Value)| {
                    response["content"].as_object().is_some_and(|content| {
                        !content.is_empty()
                            && content
                                .iter()
                                .all(|(media, entry)| !media.contains("json") || says_something(&entry["schema"]))
                    })
                };
                assert!(successes.iter().any(described), "{at}: no 2xx response with a body schema or content type");
                for (status, response) in responses.iter().filter(|(status, _)| status.starts_with(['4', '5'])) {
                    let content = response["content"].as_object().filter(|content| !content.is_empty());
                    let content = content.unwrap_or_else(|| panic!("{at} {status}: an error without a body"));
                    for (media, entry) in content.iter().filter(|(media, _)| media.contains("json")) {
                        assert_eq!(media, crate::problem::PROBLEM_CONTENT_TYPE, "{at} {status}");
                        assert_eq!(
                            entry["schema"]["$ref"],
                            problem_ref.as_str(),
                            "{at} {status}: not the problem schema"
                        );
                    }
                }
            }
        }
        std::fs::remove_dir_all(&dir).ok();
    }

    #[tokio::test]
    async fn every_served_route_has_an_openapi_entry_and_every_entry_is_served() {
        let (state, dir) = state("described").await;
        let app = router(state);
        let served = served_paths(&app);
        let undescribed: BTreeSet<String> = UNDESCRIBED_ROUTES.iter().map(|(path, _)| path.to_string()).collect();
        let served_described: BTreeSet<String> = served.difference(&undescribed).cloned().collect();
        let document = serde_json::to_value(api_description()).unwrap();
        let described: BTreeSet<String> = document["paths"].as_object().unwrap().keys().cloned().collect();
        assert_eq!(served_described, described, "served paths (less UNDESCRIBED_ROUTES) and OpenAPI paths differ");
        assert!(undescribed.is_subset(&served), "UNDESCRIBED_ROUTES names a path that is not served");
        assert!(undescribed.is_disjoint(&described), "an undescribed route is described after all");
        // Each described method is routed: no 405, no fallback 404.
        for (path, item) in document["paths"].as_object().unwrap() {
            for method in item.as_object().unwrap().keys() {
                let uri = path.replace(['{', '}'], "");
                let request = axum::http::Request::builder()
                    .method(method.to_uppercase().as_str())
                    .uri(uri)
                    .body(axum::body::Body::empty())
                    .unwrap();
                let response = app.clone().oneshot(request).await.unwrap();
                assert_ne!(response.status(), StatusCode::METHOD_NOT_ALLOWED, "{method} {path}");
                let body = axum::body::to_bytes(response.into_body(), usize::MAX).await.unwrap();
                let code = serde_json::from_slice::<serde_json::Value>(&body).map(|v| v["code"].clone());
                assert_ne!(code.ok(), Some(serde_json::json!("route_not_found")), "{method} {path}");
            }
        }
        std::fs::remove_dir_all(&dir).ok();
    }

    // ---- the refusal codes each operation lists (crate::refusals) ----

    /// Every code a route lists is one of the API's codes, and each route in the table is described.
    #[test]
    fn every_listed_code_is_a_known_code_of_a_described_route() {
        let document = serde_json::to_value(api_description()).unwrap();
        for (operation, codes) in crate::refusals::ROUTE_CODES {
            let (method, path) = operation.split_once(' ').unwrap();
            assert!(
                document["paths"][path][method].is_object(),
                "crate::refusals::ROUTE_CODES names {operation}, which is not described"
            );
            for code in *codes {
                assert!(
                    crate::refusals::catalogue().contains_key(code),
                    "{operation} lists {code}, which no table declares"
                );
            }
        }
        let keys: std::collections::BTreeSet<&str> = crate::refusals::ROUTE_CODES.iter().map(|(op, _)| *op).collect();
        assert_eq!(
            keys.len(),
            crate::refusals::ROUTE_CODES.len(),
            "an operation is in crate::refusals::ROUTE_CODES twice"
        );
    }

    /// Every error response of every operation lists its codes, each answered with that status; no
    /// operation declares an error status it has no code for.
    #[test]
    fn every_error_response_lists_the_codes_it_is_answered_with() {
        let document = serde_json::to_value(api_description()).unwrap();
        let mut operations = 0;
        for (path, item) in document["paths"].as_object().unwrap() {
            for (method, operation) in item.as_object().unwrap() {
                operations += 1;
                for (status, response) in operation["responses"].as_object().unwrap() {
                    if !status.starts_with(['4', '5']) {
                        continue;
                    }
                    let codes = response[crate::refusals::CODES_EXTENSION].as_array();
                    let codes = codes.filter(|codes| !codes.is_empty());
                    let codes = codes
                        .unwrap_or_else(|| panic!("{method} {path} {status}: no {}", crate::refusals::CODES_EXTENSION));
                    for code in codes {
                        let code = code.as_str().unwrap();
                        let statuses = &crate::refusals::catalogue()[code];
                        assert!(statuses.contains(&status.parse().unwrap()), "{method} {path}: {code} under {status}");
                        assert!(response["description"].as_str().unwrap().contains(&format!("`{code}`")));
                    }
                }
                // Every operation at least can be shed or rate-limited.
                assert!(operation["responses"]["429"][crate::refusals::CODES_EXTENSION].is_array(), "{method} {path}");
            }
        }
        assert!(operations > 100, "only {operations} operations described");
    }

    /// A route's attribute states its success answers only: every error response is built from the codes the
    /// operation can answer (`refusals::declare`), so nothing a route's author lists can disagree with them.
    #[test]
    fn a_route_attribute_states_only_its_success_answers() {
        let mut raw = capabilities().split_for_parts().1;
        let mut operations = 0;
        for (path, item) in raw.paths.paths.iter_mut() {
            for (method, operation) in crate::refusals::operations(item) {
                operations += 1;
                let errors: Vec<&String> =
                    operation.responses.responses.keys().filter(|s| s.starts_with(['4', '5'])).collect();
                assert!(errors.is_empty(), "{method} {path} states {errors:?} itself");
            }
        }
        assert!(operations > 100, "only {operations} operations read");
    }

    /// An operation that can answer the idempotency rules declares the `Idempotency-Key` header (so a generated
    /// client knows it may send one), and one that declares it lists those rules; a required key is the one
    /// whose absence is refused.
    #[test]
    fn an_operation_that_reads_a_key_declares_the_header() {
        let document = serde_json::to_value(api_description()).unwrap();
        let (mut keyed, mut wrong) = (0, Vec::new());
        for (path, item) in document["paths"].as_object().unwrap() {
            for (method, operation) in item.as_object().unwrap() {
                let header = operation["parameters"].as_array().into_iter().flatten().find(|p| {
                    p["in"] == "header" && p["name"].as_str() == Some(crate::refusals::IDEMPOTENCY_KEY_HEADER)
                });
                let codes: BTreeSet<String> = operation["responses"]
                    .as_object()
                    .unwrap()
                    .values()
                    .filter_map(|r| r[crate::refusals::CODES_EXTENSION].as_array())
                    .flatten()
                    .filter_map(|c| c.as_str().map(str::to_string))
                    .collect();
                let reads_key = codes.contains("idempotency_key_invalid");
                if header.is_some() != reads_key {
                    wrong.push(format!(
                        "{method} {path}: header declared {}, key codes listed {reads_key}",
                        header.is_some()
                    ));
                }
                if let Some(header) = header {
                    keyed += 1;
                    let required = header["required"] == true;
                    if required != codes.contains("idempotency_key_required") {
                        wrong.push(format!(
                            "{method} {path}: key required {required}, its absence refused {}",
                            !required
                        ));
                    }
                }
            }
        }
        assert!(wrong.is_empty(), "{}", wrong.join("\n"));
        assert!(keyed >= 30, "only {keyed} operations take a key");
    }

    /// A settle names the token's codes, under their statuses, beside the edge's.
    #[test]
    fn a_route_s_own_codes_sit_under_their_statuses() {
        let document = serde_json::to_value(api_description()).unwrap();
        let responses = &document["paths"]["/v1/settlements"]["post"]["responses"];
        let listed = |status: &str| -> Vec<String> {
            serde_json::from_value(responses[status][crate::refusals::CODES_EXTENSION].clone()).unwrap_or_default()
        };
        assert!(listed("410").contains(&"token_expired".to_string()), "{responses}");
        assert!(listed("409").contains(&"token_settled".to_string()), "{responses}");
        assert!(listed("422").contains(&"idempotency_conflict".to_string()), "{responses}");
        assert!(listed("401").contains(&"unauthenticated".to_string()), "{responses}");
        assert!(!listed("409").contains(&"token_expired".to_string()));
    }
}

//! The wire contract checked at the edge: every JSON body a route answers
//! must read strictly into the type its `/openapi.json` entry names for that
//! status (`bazaar_wire::strict`). Tests and `bazaar serve` with
//! `BAZAAR_CHECK_CONTRACT=1` wrap the router in [`checked`]; a body that does
//! not fit is answered as a 500 `contract_misfit` naming the route, the type
//! and the first difference, so the test that met it fails and says why.
//! Production leaves it off: it buffers and re-reads every answer.

use crate::problem::Problem;
use crate::router::api_description;
use axum::extract::MatchedPath;
use axum::http::{header, StatusCode};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::Router;
use serde_json::Value;

/// The environment variable that turns the check on for `bazaar serve`.
pub const CHECK_CONTRACT_ENV: &str = "BAZAAR_CHECK_CONTRACT";

/// The most of one answer the check buffers; a larger JSON answer is itself a misfit (no route serves one).
pub const CHECKED_BODY_BYTES_MAX: usize = 64 * 1024 * 1024;

/// `router`, with every JSON answer checked against its route's contract type.
pub fn checked(router: Router) -> Router {
    router.layer(middleware::from_fn(check))
}

/// With this set to `1`, a misfit is written to standard error and the answer goes out unchanged: for
/// surveying a whole test run's misfits at once rather than failing at the first.
pub const REPORT_ONLY_ENV: &str = "BAZAAR_CONTRACT_REPORT_ONLY";

/// Read once: the check runs on every answer.
fn report_only() -> bool {
    static REPORT_ONLY: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *REPORT_ONLY.get_or_init(|| std::env::var(REPORT_ONLY_ENV).is_ok_and(|value| value == "1"))
}

/// Whether `bazaar serve` should check its answers (`BAZAAR_CHECK_CONTRACT=1`).
pub fn check_requested() -> bool {
    std::env::var(CHECK_CONTRACT_ENV).is_ok_and(|value| value == "1")
}

async fn check(request: axum::extract::Request, next: Next) -> Response {
    let method = request.method().as_str().to_ascii_lowercase();
    let route = request.extensions().get::<MatchedPath>().map(|path| path.as_str().to_string());
    let response = next.run(request).await;
    let Some(route) = route else { return response };
    let is_json =
        response.headers().get(header::CONTENT_TYPE).and_then(|value| value.to_str().ok()).is_some_and(|value| {
            value.starts_with("application/json") || value.starts_with("application/problem+json")
        });
    if !is_json {
        return response;
    }
    let (parts, body) = response.into_parts();
    let (bytes, why) = match axum::body::to_bytes(body, CHECKED_BODY_BYTES_MAX).await {
        Err(error) => (Default::default(), Some(format!("unreadable body: {error}"))),
        Ok(bytes) => {
            let why = match serde_json::from_slice::<Value>(&bytes) {
                Ok(body) => misfit(&method, &route, parts.status.as_u16(), &body),
                Err(error) => Some(format!("not JSON: {error}")),
            };
            (bytes, why)
        }
    };
    let Some(why) = why else { return Response::from_parts(parts, axum::body::Body::from(bytes)) };
    let detail =
        format!("{} {route} answered {} with a body outside its contract: {why}", method.to_uppercase(), parts.status);
    tracing::error!(%detail, "contract misfit");
    // Also on standard error: a test's output shows it, whatever the test asserted about the answer.
    if report_only() {
        eprintln!("contract misfit (reported only): {detail}");
        return Response::from_parts(parts, axum::body::Body::from(bytes));
    }
    eprintln!("contract misfit: {detail}");
    Problem::new(StatusCode::INTERNAL_SERVER_ERROR, "contract_misfit", detail).into_response()
}

/// Why `body`, answered by `method route` with `status`, does not fit the type its API entry names;
/// `None` when it fits. A route outside the description (the MCP service, pages) is not checked.
pub fn misfit(method: &str, route: &str, status: u16, body: &Value) -> Option<String> {
    static DOCUMENT: std::sync::OnceLock<Value> = std::sync::OnceLock::new();
    let document =
        DOCUMENT.get_or_init(|| serde_json::to_value(api_description()).expect("the description serialises"));
    let operation = document["paths"][route].get(method)?;
    let responses = &operation["responses"];
    if status >= 400 {
        record(method, route, status, body);
    }
    let Some(declared) = responses.get(status.to_string()).or_else(|| responses.get("default")) else {
        return Some(format!("status {status} is not among the statuses its entry declares"));
    };
    if status >= 400 {
        if let Some(why) = undeclared_code(declared, status, body) {
            return Some(why);
        }
    }
    let content = declared["content"].as_object();
    let Some(schema) = content.and_then(|content| content.values().find_map(|media| media.get("schema"))) else {
        return Some(format!("its entry declares no body for status {status}"));
    };
    fits(schema, body, "$")
}

/// Why a problem's code is not one its response lists in `x-codes` ([`crate::refusals`]); the check's own
/// `contract_misfit` is not listed anywhere and is let through.
fn undeclared_code(declared: &Value, status: u16, body: &Value) -> Option<String> {
    let code = body["code"].as_str()?;
    let listed = declared[crate::refusals::CODES_EXTENSION].as_array();
    if code == "contract_misfit" || listed.is_some_and(|codes| codes.iter().any(|c| c == code)) {
        return None;
    }
    Some(format!(
        "code `{code}` is not among the codes its entry lists for status {status} (add it to refusals::ROUTE_CODES)"
    ))
}

/// With this set to a file, every problem an answer carries is appended to it as `method route status code`:
/// for surveying which codes a run's routes answered (`docs/testing.md`).
pub const RECORD_ENV: &str = "BAZAAR_CONTRACT_RECORD";

fn record(method: &str, route: &str, status: u16, body: &Value) {
    static RECORD: std::sync::OnceLock<Option<std::sync::Mutex<std::fs::File>>> = std::sync::OnceLock::new();
    let file = RECORD.get_or_init(|| {
        let path = std::env::var_os(RECORD_ENV)?;
        std::fs::OpenOptions::new().create(true).append(true).open(path).ok().map(std::sync::Mutex::new)
    });
    let (Some(file), Some(code)) = (file, body["code"].as_str()) else { return };
    use std::io::Write;
    let mut file = file.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    let _ = writeln!(file, "{method} {route} {status} {code}");
}

/// Why `body` does not fit `schema`: a `$ref` must name a contract type, which reads it strictly; an
/// array's items are each checked; a choice fits when one of its schemas does.
fn fits(schema: &Value, body: &Value, at: &str) -> Option<String> {
    if let Some(reference) = schema["$ref"].as_str() {
        let name = reference.trim_start_matches("#/components/schemas/");
        return match bazaar_wire::check(name, body) {
            Some(why) => why.map(|why| format!("at {at}: {why}")),
            None => Some(format!("at {at}: `{name}` is not a type of the wire contract (bazaar-wire)")),
        };
    }
    if let Some(choices) = schema["oneOf"].as_array().or_else(|| schema["anyOf"].as_array()) {
        let misfits: Vec<String> = choices.iter().filter_map(|choice| fits(choice, body, at)).collect();
        return (misfits.len() == choices.len()).then(|| misfits.join("; and "));
    }
    if schema["type"] == "array" || schema["type"].as_array().is_some_and(|types| types.contains(&"array".into())) {
        let Some(items) = body.as_array() else { return Some(format!("at {at}: an array is declared")) };
        return items.iter().enumerate().find_map(|(i, item)| fits(&schema["items"], item, &format!("{at}[{i}]")));
    }
    Some(format!("at {at}: the declared schema names no contract type ({schema})"))
}

/// Every schema a response in `document` names (through arrays and choices), with where it is named.
pub fn response_schemas(document: &Value) -> Vec<(String, String)> {
    fn named(schema: &Value, at: &str, out: &mut Vec<(String, String)>) {
        if let Some(reference) = schema["$ref"].as_str() {
            out.push((reference.trim_start_matches("#/components/schemas/").to_string(), at.to_string()));
        }
        for choice in ["oneOf", "anyOf", "allOf"].iter().filter_map(|key| schema[*key].as_array()).flatten() {
            named(choice, at, out);
        }
        if schema.get("items").is_some() {
            named(&schema["items"], at, out);
        }
    }
    let mut out = Vec::new();
    for (path, item) in document["paths"].as_object().into_iter().flatten() {
        for (method, operation) in item.as_object().into_iter().flatten() {
            for (status, response) in operation["responses"].as_object().into_iter().flatten() {
                for media in response["content"].as_object().into_iter().flatten().map(|(_, media)| media) {
                    named(&media["schema"], &format!("{method} {path} {status}"), &mut out);
                }
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_answer_the_description_names_is_a_type_of_the_wire_contract() {
        let document = serde_json::to_value(api_description()).unwrap();
        let outside: std::collections::BTreeSet<String> = response_schemas(&document)
            .into_iter()
            .filter(|(name, _)| !bazaar_wire::NAMES.contains(&name.as_str()))
            .map(|(name, at)| format!("{name} ({at})"))
            .collect();
        assert!(
            outside.is_empty(),
            "answers outside the wire contract:\n{}",
            outside.into_iter().collect::<Vec<_>>().join("\n")
        );
    }

    #[test]
    fn a_body_outside_its_type_or_an_undeclared_status_is_a_misfit() {
        let settlement = serde_json::json!({"settlement_id": "stl_1", "jti": "tok_1", "buyer": "b", "merchant": "m",
            "order_id": "o", "amount_minor": 1, "fee_minor": 0, "net_minor": 1, "settled_at_ms": 1});
        assert_eq!(misfit("post", "/v1/settlements", 200, &settlement), None);
        let mut extra = settlement.clone();
        extra["surprise"] = 1.into();
        let why = misfit("post", "/v1/settlements", 200, &extra).unwrap();
        assert!(why.contains("$.surprise is served but not in the type"), "{why}");
        let why = misfit("post", "/v1/settlements", 418, &settlement).unwrap();
        assert!(why.contains("status 418 is not among the statuses"), "{why}");
        assert_eq!(misfit("get", "/not/described", 200, &settlement), None);
    }

    /// What a router behind `checked` answers when its settle route answers what `answer` makes.
    async fn through_check<A: axum::response::IntoResponse + Send + 'static>(
        answer: impl FnOnce() -> A + Clone + Send + Sync + 'static,
    ) -> (StatusCode, Value) {
        use tower::ServiceExt;
        let route = axum::routing::post(move || async move { answer() });
        let router = checked(Router::new().route("/v1/settlements", route));
        let request = axum::http::Request::post("/v1/settlements").body(axum::body::Body::empty()).unwrap();
        let response = router.oneshot(request).await.unwrap();
        let status = response.status();
        let bytes = axum::body::to_bytes(response.into_body(), CHECKED_BODY_BYTES_MAX).await.unwrap();
        (status, serde_json::from_slice(&bytes).unwrap())
    }

    /// A settle route answering `body` with 200.
    async fn answer_through_check(body: Value) -> (StatusCode, Value) {
        through_check(move || axum::Json(body)).await
    }

    #[tokio::test]
    async fn a_checked_router_turns_a_misfit_into_a_contract_misfit_and_lets_a_fit_through() {
        let fits = serde_json::json!({"settlement_id": "stl_1", "jti": "tok_1", "buyer": "b", "merchant": "m",
            "order_id": "o", "amount_minor": 1, "fee_minor": 0, "net_minor": 1, "settled_at_ms": 1});
        assert_eq!(answer_through_check(fits.clone()).await, (StatusCode::OK, fits.clone()));
        let mut extra = fits;
        extra["surprise"] = true.into();
        let (status, problem) = answer_through_check(extra).await;
        assert_eq!(status, StatusCode::INTERNAL_SERVER_ERROR);
        assert_eq!(problem["code"], "contract_misfit");
        let detail = problem["detail"].as_str().unwrap();
        assert!(detail.contains("POST /v1/settlements") && detail.contains("$.surprise"), "{detail}");
    }

    /// A settle route answering the problem `code` with `status`.
    async fn refuse_through_check(status: StatusCode, code: &'static str) -> (StatusCode, Value) {
        through_check(move || Problem::new(status, code, "refused")).await
    }

    #[tokio::test]
    async fn a_refusal_whose_code_its_entry_does_not_list_is_a_contract_misfit() {
        let (status, problem) = refuse_through_check(StatusCode::GONE, "token_expired").await;
        assert_eq!((status, problem["code"].as_str()), (StatusCode::GONE, Some("token_expired")));
        // A conversation plane's code, under a status settle does answer: not one settle lists.
        let (status, problem) = refuse_through_check(StatusCode::CONFLICT, "channel_full").await;
        assert_eq!(status, StatusCode::INTERNAL_SERVER_ERROR);
        assert_eq!(problem["code"], "contract_misfit");
        let detail = problem["detail"].as_str().unwrap();
        assert!(detail.contains("`channel_full` is not among the codes") && detail.contains("409"), "{detail}");
    }
}

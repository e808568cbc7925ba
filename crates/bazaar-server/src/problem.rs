//! RFC 9457 problem+json: the one shape every failure takes, with a stable
//! `code`; and how the API description says so ([`ProblemDetails`] and the
//! error-response sets each route lists under `responses(...)`).

use axum::extract::rejection::JsonRejection;
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use bazaar_core::refusal::{Class, Code, Refusal};
use bazaar_store::StoreError;
use bazaar_types::limits::RETRY_AFTER_S;
use std::collections::BTreeMap;
use utoipa::openapi::{ContentBuilder, Ref, RefOr, ResponseBuilder};
use utoipa::ToSchema;

pub const PROBLEM_BASE: &str = "https://bazaar.dev/problems/";

#[derive(Debug)]
pub struct Problem {
    pub status: StatusCode,
    pub code: String,
    pub detail: String,
    pub facts: serde_json::Value,
    pub retry_after: bool,
}

impl Problem {
    pub fn new(status: StatusCode, code: &str, detail: impl Into<String>) -> Problem {
        Problem { status, code: code.into(), detail: detail.into(), facts: serde_json::Value::Null, retry_after: false }
    }

    /// A refusal that clears with time: answered with `Retry-After`.
    pub fn retry_later(status: StatusCode, code: &str, detail: impl Into<String>) -> Problem {
        Problem { retry_after: true, ..Problem::new(status, code, detail) }
    }

    pub fn unauthenticated() -> Problem {
        Problem::new(
            StatusCode::UNAUTHORIZED,
            Code::Unauthenticated.as_str(),
            "Send `Authorization: Bearer <credential>` with a live credential; revoked or unknown credentials are refused.",
        )
    }

    pub fn invalid(detail: impl Into<String>) -> Problem {
        Problem::new(StatusCode::BAD_REQUEST, Code::InvalidRequest.as_str(), detail)
    }
}

pub fn status_of(code: Code) -> StatusCode {
    match code.class() {
        Class::Invalid => StatusCode::BAD_REQUEST,
        Class::Unauthenticated => StatusCode::UNAUTHORIZED,
        Class::Forbidden => StatusCode::FORBIDDEN,
        Class::NotFound => StatusCode::NOT_FOUND,
        Class::Conflict => StatusCode::CONFLICT,
        Class::Unprocessable => StatusCode::UNPROCESSABLE_ENTITY,
        Class::Gone => StatusCode::GONE,
        Class::Unavailable => StatusCode::SERVICE_UNAVAILABLE,
        Class::TooMany => StatusCode::TOO_MANY_REQUESTS,
    }
}

impl From<Refusal> for Problem {
    fn from(refusal: Refusal) -> Problem {
        let mut problem = Problem::new(status_of(refusal.code), refusal.code.as_str(), refusal.detail);
        problem.facts = refusal.facts;
        problem.retry_after =
            matches!(refusal.code, Code::IdempotencyInFlight | Code::RelayPending | Code::PeerUnreachable);
        problem
    }
}

impl From<bazaar_core::kernel::docs::DocError> for Problem {
    fn from(error: bazaar_core::kernel::docs::DocError) -> Problem {
        StoreError::from(error).into()
    }
}

impl From<StoreError> for Problem {
    fn from(error: StoreError) -> Problem {
        if error == StoreError::InFlight {
            // The cluster's sequencer saw the key in flight: the same answer a node gives for its own.
            return Problem::from(Refusal::new(
                Code::IdempotencyInFlight,
                "A request with this Idempotency-Key is still running; retry after the delay in Retry-After.",
            ));
        }
        let (status, code, detail) = match &error {
            StoreError::Busy => (
                StatusCode::SERVICE_UNAVAILABLE,
                "store_busy",
                "The registry is at capacity; retry with the same Idempotency-Key shortly.",
            ),
            StoreError::Constraint(_) => (
                StatusCode::CONFLICT,
                "write_conflict",
                "A concurrent write collided with this one; retry with the same Idempotency-Key.",
            ),
            StoreError::Unavailable(_) | StoreError::Fenced(_) => (
                StatusCode::SERVICE_UNAVAILABLE,
                "store_unavailable",
                "Storage is unavailable; retry with the same Idempotency-Key shortly.",
            ),
            _ => (
                StatusCode::INTERNAL_SERVER_ERROR,
                "internal",
                "The registry hit an internal error; the operator has been told.",
            ),
        };
        tracing::warn!(%error, code, "store error");
        let mut problem = Problem::new(status, code, detail);
        problem.retry_after = status != StatusCode::INTERNAL_SERVER_ERROR;
        problem
    }
}

impl From<JsonRejection> for Problem {
    fn from(rejection: JsonRejection) -> Problem {
        let status = match &rejection {
            JsonRejection::MissingJsonContentType(_) => StatusCode::UNSUPPORTED_MEDIA_TYPE,
            JsonRejection::BytesRejection(_) => StatusCode::PAYLOAD_TOO_LARGE,
            _ => StatusCode::BAD_REQUEST,
        };
        let code =
            if status == StatusCode::PAYLOAD_TOO_LARGE { "body_too_large" } else { Code::InvalidRequest.as_str() };
        Problem::new(
            status,
            code,
            format!("The JSON body was refused: {}. Unknown fields are refused too.", rejection.body_text()),
        )
    }
}

impl IntoResponse for Problem {
    fn into_response(self) -> Response {
        let body = ProblemDetails {
            type_: format!("{PROBLEM_BASE}{}", self.code),
            title: self.code.replace('_', " "),
            status: self.status.as_u16(),
            detail: self.detail,
            facts: (!self.facts.is_null()).then_some(self.facts),
            code: self.code,
        };
        let mut response = (self.status, axum::Json(body)).into_response();
        let headers = response.headers_mut();
        headers.insert(header::CONTENT_TYPE, HeaderValue::from_static("application/problem+json"));
        if self.retry_after {
            headers.insert(header::RETRY_AFTER, HeaderValue::from(RETRY_AFTER_S));
        }
        response
    }
}

pub use bazaar_wire::ProblemDetails;

/// The media type every error response has.
pub const PROBLEM_CONTENT_TYPE: &str = "application/problem+json";

/// One error response: `description`, with a [`ProblemDetails`] body.
fn problem_response(description: &str) -> RefOr<utoipa::openapi::Response> {
    let content = ContentBuilder::new().schema(Some(Ref::from_schema_name(ProblemDetails::name()))).build();
    ResponseBuilder::new().description(description).content(PROBLEM_CONTENT_TYPE, content).build().into()
}

/// Declares error-response sets: each a type a route lists in its
/// `#[utoipa::path(responses(...))]`, answering the given statuses with
/// [`ProblemDetails`]. One set per cause (not per route), so a route's list
/// reads as the reasons it can fail.
macro_rules! problem_responses {
    ($($(#[$doc:meta])* $name:ident { $($status:literal => $description:literal),+ $(,)? })*) => {$(
        $(#[$doc])*
        pub struct $name;
        impl utoipa::IntoResponses for $name {
            fn responses() -> BTreeMap<String, RefOr<utoipa::openapi::Response>> {
                [$(($status, $description)),+]
                    .into_iter()
                    .map(|(status, description)| (status.to_string(), problem_response(description)))
                    .collect()
            }
        }
    )*};
}

/// The error-response sets, listed by name in each route's `responses(...)`
/// (`errors::Conflict`, …). They say what a route's author expected; the served description's error
/// responses are rebuilt from the codes each operation can answer (`crate::refusals::declare`), so a set
/// decides nothing there; taking them off the routes is still to do.
pub mod errors {
    use super::{problem_response, BTreeMap, RefOr};

    problem_responses! {
        /// Admission control turns every route away when too many requests are in flight.
        Overloaded {
            "503" => "`overloaded` (too many requests in flight) or `store_busy`/`store_unavailable`; retry after `Retry-After`",
        }
        /// A route that reads or writes the store: busy, unavailable or failed storage.
        Unavailable {
            "500" => "`internal`: the registry hit an internal error",
            "503" => "`overloaded` (too many requests in flight) or `store_busy`/`store_unavailable`; retry after `Retry-After`",
        }
        /// A route behind `Authorization: Bearer <credential>`.
        Unauthenticated {
            "401" => "`unauthenticated`: no live credential (or, where a signature authenticates, `proof_invalid`/`request_stale`)",
        }
        /// A route with a JSON request body: the body extractor's refusals.
        BodyRefused {
            "400" => "`invalid_request` or a field's or header's own code (`amount_invalid`, `idempotency_key_required`, …): the request is malformed",
            "413" => "`body_too_large`",
            "415" => "`invalid_request`: send `Content-Type: application/json`",
        }
        /// A route whose parameters or headers are checked (no JSON body).
        Invalid {
            "400" => "`invalid_request` or a field's own code (`idempotency_key_required`, `amount_invalid`, …): the request is malformed",
        }
        /// A route that checks who may act.
        Forbidden {
            "403" => "`not_permitted`, `not_owner`, `not_party`, `not_audience`, …: the caller may not do this",
        }
        /// A route that names a member or a document.
        NotFound {
            "404" => "`member_not_found`, `*_not_found`: no such member or document",
        }
        /// A write: a state that forbids it, a duplicate, a request still in flight or a write collision.
        Conflict {
            "409" => "a state conflict (`token_settled`, `contract_state`, …), `idempotency_in_flight` or `write_conflict`; the original is in `facts` where there is one",
        }
        /// A write that can find its subject expired or its window closed.
        Gone {
            "410" => "`token_expired`, `token_voided`, `invite_used`, `claim_window_closed`, …: too late",
        }
        /// A write refused by a rule (funds, budget, terms), or an `Idempotency-Key` reused with another body.
        Unprocessable {
            "422" => "refused by a rule (`insufficient_funds`, `budget_*_exceeded`, `offer_below_floor`, …) or `idempotency_conflict`",
        }
        /// Every route: the edge's per-credential and per-address rates (`rate_limited`), and a route's own
        /// per-subject rate (`passport_limit`, …); the router adds this to every route.
        TooMany {
            "429" => "`rate_limited` (this credential's or address's requests per second) or a route's own rate (`passport_limit`, …): too many for now; retry after `Retry-After`",
        }
    }
}

//! RFC 9457 problem+json: the one shape every failure takes, with a stable
//! `code`, and its schema in the API description ([`ProblemDetails`]; each
//! operation's error responses are built from the codes it can answer, in
//! the `refusals` module).

use axum::extract::rejection::JsonRejection;
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use bazaar_core::refusal::{Class, Code, Refusal};
use bazaar_store::StoreError;
use bazaar_types::limits::RETRY_AFTER_S;

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

//! A page the registry serves as it is written: HTML whose inline script may
//! call only this registry (`connect-src 'self'`), never be sniffed, and
//! never send a referrer.

use axum::http::header;
use axum::response::{IntoResponse, Response};

pub fn html(body: &'static str) -> Response {
    (
        [
            (header::CONTENT_TYPE, "text/html; charset=utf-8"),
            (
                header::CONTENT_SECURITY_POLICY,
                "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; connect-src 'self'",
            ),
            (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
            (header::REFERRER_POLICY, "no-referrer"),
        ],
        body,
    )
        .into_response()
}

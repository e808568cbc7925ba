//! Bearer-credential authentication and the JSON extractor that turns body
//! rejections into problem+json.

use crate::problem::Problem;
use crate::AppState;
use axum::extract::{FromRequest, FromRequestParts, Request};
use axum::http::request::Parts;
use axum::Json;
use bazaar_core::crypto::sha256_hex;
use bazaar_core::model::Member;
use std::sync::Arc;

/// The authenticated caller and the hash of the credential it used.
pub struct Auth {
    pub member: Member,
    pub credential_hash: String,
}

/// Credentials are at most this long; anything longer is refused unread.
const CREDENTIAL_LEN_MAX: usize = 128;

impl FromRequestParts<Arc<AppState>> for Auth {
    type Rejection = Problem;

    async fn from_request_parts(parts: &mut Parts, state: &Arc<AppState>) -> Result<Self, Problem> {
        let header = parts.headers.get(axum::http::header::AUTHORIZATION).and_then(|v| v.to_str().ok());
        let credential = header.and_then(|h| h.strip_prefix("Bearer ")).ok_or_else(Problem::unauthenticated)?;
        if credential.len() > CREDENTIAL_LEN_MAX {
            return Err(Problem::unauthenticated());
        }
        let hash = sha256_hex(credential.as_bytes());
        let (stored, member) = state.store.authenticate(&hash).await?.ok_or_else(Problem::unauthenticated)?;
        if stored.revoked_at.is_some() {
            return Err(Problem::unauthenticated());
        }
        Ok(Auth { member, credential_hash: hash })
    }
}

/// `Query<T>` whose rejections are problem+json (`invalid_request`).
pub struct ApiQuery<T>(pub T);

impl<S, T> FromRequestParts<S> for ApiQuery<T>
where
    T: serde::de::DeserializeOwned,
    S: Send + Sync,
{
    type Rejection = Problem;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Problem> {
        axum::extract::Query::<T>::from_request_parts(parts, state)
            .await
            .map(|axum::extract::Query(value)| ApiQuery(value))
            .map_err(|rejection| Problem::invalid(format!("The query string was refused: {}.", rejection.body_text())))
    }
}

/// `Json<T>` whose rejections are problem+json.
pub struct ApiJson<T>(pub T);

impl<S, T> FromRequest<S> for ApiJson<T>
where
    Json<T>: FromRequest<S, Rejection = axum::extract::rejection::JsonRejection>,
    S: Send + Sync,
{
    type Rejection = Problem;

    async fn from_request(request: Request, state: &S) -> Result<Self, Problem> {
        Json::<T>::from_request(request, state).await.map(|Json(value)| ApiJson(value)).map_err(Problem::from)
    }
}

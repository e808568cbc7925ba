//! Bearer-credential authentication and the JSON extractor that turns body
//! rejections into problem+json.

use crate::problem::Problem;
use crate::AppState;
use axum::extract::{FromRequest, FromRequestParts, Request};
use axum::http::request::Parts;
use axum::http::{header, HeaderMap, Method, StatusCode};
use axum::Json;
use bazaar_core::crypto::sha256_hex;
use bazaar_core::model::Member;
use std::sync::Arc;

/// The authenticated caller and the hash of the credential it used (or of
/// its browser session's cookie, when `session`).
pub struct Auth {
    pub member: Member,
    pub credential_hash: String,
    /// Signed in with a passkey in a browser, not with a bearer credential.
    pub session: bool,
    /// Whether the credential may move money (it has the `pay` scope, or no scopes at all).
    pub may_spend: bool,
    /// Whether the credential may speak in rooms and DMs (it has the `talk` scope, or no scopes at all).
    pub may_talk: bool,
}

/// An [`Auth`] whose credential may talk: the extractor of every route that
/// speaks in the conversation plane (posting, reacting, editing, deleting,
/// opening rooms and DMs, joining, managing members, publishing a sealing
/// key). A credential issued without the `talk` scope is refused 403
/// `credential_cannot_talk`; reading, muting, read marks and leaving need no
/// scope.
pub struct Talker(pub Auth);

impl FromRequestParts<Arc<AppState>> for Talker {
    type Rejection = Problem;

    async fn from_request_parts(parts: &mut Parts, state: &Arc<AppState>) -> Result<Self, Problem> {
        let auth = Auth::from_request_parts(parts, state).await?;
        if !auth.may_talk {
            return Err(Problem::new(
                StatusCode::FORBIDDEN,
                "credential_cannot_talk",
                "This credential was issued without the `talk` scope: it may read rooms but not speak in them. Use a credential that may talk.",
            ));
        }
        Ok(Talker(auth))
    }
}

tokio::task_local! {
    /// Whether the request being served authenticated with a credential that may
    /// move money: `None` until an `Auth` is extracted. Set per request by
    /// [`scope_spending`]; read by `exec` before any money-moving command.
    static MAY_SPEND: std::cell::Cell<Option<bool>>;
}

/// Middleware: a fresh spending cell for each request (a nested request, as the
/// MCP tools make, gets its own).
pub async fn scope_spending(request: axum::extract::Request, next: axum::middleware::Next) -> axum::response::Response {
    MAY_SPEND.scope(std::cell::Cell::new(None), next.run(request)).await
}

fn note_spending(may_spend: bool) {
    let _ = MAY_SPEND.try_with(|cell| cell.set(Some(may_spend)));
}

/// False only when this request authenticated with a credential that may not move money.
pub fn may_spend_here() -> bool {
    MAY_SPEND.try_with(std::cell::Cell::get).ok().flatten() != Some(false)
}

/// The one route an enrollment credential may call.
pub const ROTATE_PATH: &str = "/v1/credentials/rotate";

/// Credentials are at most this long; anything longer is refused unread.
const CREDENTIAL_LEN_MAX: usize = 128;

impl FromRequestParts<Arc<AppState>> for Auth {
    type Rejection = Problem;

    async fn from_request_parts(parts: &mut Parts, state: &Arc<AppState>) -> Result<Self, Problem> {
        let header = parts.headers.get(axum::http::header::AUTHORIZATION);
        if header.is_none() {
            if let Some(token) = session_cookie(&parts.headers) {
                return session(parts, state, &token).await;
            }
        }
        let header = header.and_then(|v| v.to_str().ok());
        let credential = header.and_then(|h| h.strip_prefix("Bearer ")).ok_or_else(Problem::unauthenticated)?;
        if credential.len() > CREDENTIAL_LEN_MAX {
            return Err(Problem::unauthenticated());
        }
        let hash = sha256_hex(credential.as_bytes());
        let (stored, member) = state.store.authenticate(&hash).await?.ok_or_else(Problem::unauthenticated)?;
        if stored.revoked_at.is_some() {
            return Err(Problem::unauthenticated());
        }
        let rotating = parts.method == Method::POST && parts.uri.path() == ROTATE_PATH;
        if credential.starts_with(crate::entropy::ENROLLMENT_CREDENTIAL_PREFIX) && !rotating {
            return Err(Problem::new(
                StatusCode::FORBIDDEN,
                "rotation_required",
                format!(
                    "This credential was handed to you by an invite or your owner: rotate it first (POST {ROTATE_PATH}); it does nothing else."
                ),
            ));
        }
        let (may_spend, may_talk) = (stored.may_spend(), stored.may_talk());
        note_spending(may_spend);
        Ok(Auth { member, credential_hash: hash, session: false, may_spend, may_talk })
    }
}

/// A browser signed in with a passkey: its session cookie stands in for the
/// owner's credential. A state-changing request on a session must carry the
/// registry's own `Origin` (`origin_refused` otherwise), besides the cookie
/// being SameSite=Strict.
async fn session(parts: &Parts, state: &Arc<AppState>, token: &str) -> Result<Auth, Problem> {
    if token.len() > CREDENTIAL_LEN_MAX {
        return Err(Problem::unauthenticated());
    }
    let hash = sha256_hex(token.as_bytes());
    let (now, lookup) = (state.now(), hash.clone());
    let plane = state.plane().map_err(|_| Problem::unauthenticated())?;
    let live = plane.call(move |store| store.session(&lookup, now)).await?.ok_or_else(Problem::unauthenticated)?;
    let safe = matches!(parts.method, Method::GET | Method::HEAD | Method::OPTIONS);
    if !safe {
        let origin = state.relying_party()?.origin.clone();
        let sent = parts.headers.get(axum::http::header::ORIGIN).and_then(|v| v.to_str().ok());
        if sent != Some(origin.as_str()) {
            return Err(Problem::new(
                StatusCode::FORBIDDEN,
                "origin_refused",
                format!("A signed-in browser may change things only from this registry's own pages ({origin})."),
            ));
        }
    }
    let member = state.store.member(&live.member).await?.ok_or_else(Problem::unauthenticated)?;
    // A person signed in with a passkey: an owner, with everything an owner may do.
    note_spending(true);
    Ok(Auth { member, credential_hash: hash, session: true, may_spend: true, may_talk: true })
}

/// The session cookie's name.
pub const SESSION_COOKIE: &str = "bazaar_session";

/// The session cookie a browser sent, if any.
pub fn session_cookie(headers: &HeaderMap) -> Option<String> {
    headers.get_all(header::COOKIE).iter().filter_map(|value| value.to_str().ok()).find_map(|cookies| {
        cookies.split(';').find_map(|pair| {
            let (name, value) = pair.trim().split_once('=')?;
            (name == SESSION_COOKIE && !value.is_empty()).then(|| value.to_string())
        })
    })
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

//! People sign in with passkeys: WebAuthn registration (resident key
//! required, the member's id behind the user handle) and usernameless
//! sign-in with `webauthn-rs`, and the browser session a sign-in opens — an
//! HttpOnly, SameSite=Strict cookie (Secure when the registry's public URL is
//! https), a fresh one on every sign-in, revocable on the server. A session
//! stands in for the owner's bearer credential in the browser: `auth::Auth`
//! accepts it, and refuses it on a state-changing request whose `Origin` is
//! not the registry's own. The ceremonies' state and the sessions live in the
//! conversation plane's store (`bazaar_conversation::people`); the pages are
//! `/account` (register a passkey, sign in and out) and `/approve/{id}`.

use crate::auth::{session_cookie, ApiJson, Auth, SESSION_COOKIE};
use crate::problem::Problem;
use crate::relying_party::RelyingParty;
use crate::state::AppState;
use axum::extract::State;
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use bazaar_conversation::people::{Ceremony, PasskeyRecord};
use bazaar_core::crypto::sha256_hex;
use bazaar_core::model::MemberKind;
use bazaar_types::limits::{PASSKEY_CEREMONY_TTL_S, SESSION_TTL_S};
use bazaar_types::MemberId;
use serde::Deserialize;
use std::sync::Arc;
use utoipa::ToSchema;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;
use webauthn_rs::prelude::{
    DiscoverableAuthentication, Passkey, PasskeyRegistration, PublicKeyCredential, RegisterPublicKeyCredential,
};

/// Random bytes in a session cookie and a ceremony id.
const SESSION_RANDOM_BYTES: usize = 32;
const CEREMONY_RANDOM_BYTES: usize = 16;

pub fn routes() -> OpenApiRouter<Arc<AppState>> {
    OpenApiRouter::new()
        .routes(routes!(register_start))
        .routes(routes!(register_finish))
        .routes(routes!(list_passkeys))
        .routes(routes!(sign_in_start))
        .routes(routes!(sign_in_finish))
        .routes(routes!(sign_out))
        .routes(routes!(account_page))
}

/// The WebAuthn user handle of a member: a UUID (v5) of its id.
fn user_handle(member: &MemberId) -> uuid::Uuid {
    uuid::Uuid::new_v5(&uuid::Uuid::NAMESPACE_URL, member.as_str().as_bytes())
}

fn refused(code: &str, detail: impl Into<String>) -> Problem {
    Problem::new(StatusCode::BAD_REQUEST, code, detail.into())
}

fn internal(detail: impl std::fmt::Display) -> Problem {
    Problem::new(StatusCode::INTERNAL_SERVER_ERROR, "internal", detail.to_string())
}

pub use bazaar_wire::identity::CeremonyStarted;

async fn begin(
    state: &AppState,
    kind: &str,
    member: Option<MemberId>,
    ceremony_state: String,
    options: serde_json::Value,
) -> Result<Json<CeremonyStarted>, Problem> {
    let id = format!("wac_{}", state.random_b64(CEREMONY_RANDOM_BYTES));
    let ceremony = Ceremony {
        id: id.clone(),
        kind: kind.into(),
        member,
        state: ceremony_state,
        expires_at: state.now().plus_s(PASSKEY_CEREMONY_TTL_S),
    };
    state.plane()?.call(move |store| store.begin_ceremony(ceremony)).await?;
    Ok(Json(CeremonyStarted { ceremony: id, options }))
}

/// The ceremony `id` of `kind`, used up; `ceremony_invalid` if unknown, expired or of another kind.
async fn finish(state: &AppState, id: String, kind: &'static str) -> Result<Ceremony, Problem> {
    let found = state.plane()?.call(move |store| store.take_ceremony(&id)).await?;
    found.filter(|ceremony| ceremony.kind == kind).ok_or_else(|| {
        Problem::new(
            StatusCode::NOT_FOUND,
            "ceremony_invalid",
            format!("No such {kind} in progress: start again (it lasts {PASSKEY_CEREMONY_TTL_S} s and is used once)."),
        )
    })
}

/// Starts registering a passkey for the caller (a person: agents use
/// credentials). The authenticator must keep a resident (discoverable) key,
/// so sign-in needs no username.
#[utoipa::path(post, path = "/v1/passkeys/register/start", security(("credential" = []), ("session" = [])), responses((status = 200, description = "The ceremony and its WebAuthn options", body = CeremonyStarted)))]
async fn register_start(State(state): State<Arc<AppState>>, auth: Auth) -> Result<Response, Problem> {
    if auth.member.kind != MemberKind::Owner {
        return Err(Problem::new(
            StatusCode::FORBIDDEN,
            "passkeys_for_people",
            "Passkeys are for people (owners); an agent signs in with its credential.",
        ));
    }
    let party = state.relying_party()?;
    let member = auth.member.id.clone();
    let asked = member.clone();
    let existing = state.plane()?.call(move |store| store.passkeys_of(&asked)).await?;
    let exclude: Vec<_> = existing
        .iter()
        .filter_map(|record| serde_json::from_str::<Passkey>(&record.passkey).ok())
        .map(|passkey| passkey.cred_id().clone())
        .collect();
    let (mut options, registration) = party
        .webauthn
        .start_passkey_registration(user_handle(&member), member.as_str(), &auth.member.handle, Some(exclude))
        .map_err(internal)?;
    if let Some(selection) = options.public_key.authenticator_selection.as_mut() {
        selection.resident_key = Some(webauthn_rs_proto::ResidentKeyRequirement::Required);
        selection.require_resident_key = true;
    }
    let ceremony_state = serde_json::to_string(&registration).map_err(internal)?;
    let options = serde_json::to_value(&options).map_err(internal)?;
    Ok(begin(&state, "register", Some(member), ceremony_state, options).await?.into_response())
}

#[derive(Deserialize, ToSchema)]
pub struct FinishRequest {
    pub ceremony: String,
    /// The browser's `credential.toJSON()`.
    #[schema(value_type = Object)]
    pub credential: serde_json::Value,
}

/// Finishes registering: the passkey is kept for the caller.
#[utoipa::path(post, path = "/v1/passkeys/register/finish", request_body = FinishRequest, security(("credential" = []), ("session" = [])), responses((status = 201, description = "The passkey", body = bazaar_wire::conversation::Passkey)))]
async fn register_finish(
    State(state): State<Arc<AppState>>,
    auth: Auth,
    ApiJson(body): ApiJson<FinishRequest>,
) -> Result<Response, Problem> {
    let party = state.relying_party()?;
    let ceremony = finish(&state, body.ceremony, "register").await?;
    if ceremony.member.as_ref() != Some(&auth.member.id) {
        return Err(refused("ceremony_invalid", "This registration was started by someone else."));
    }
    let registration: PasskeyRegistration = serde_json::from_str(&ceremony.state).map_err(internal)?;
    let credential: RegisterPublicKeyCredential = serde_json::from_value(body.credential).map_err(|error| {
        refused("passkey_invalid", format!("The credential is not a WebAuthn registration: {error}"))
    })?;
    let passkey = party
        .webauthn
        .finish_passkey_registration(&credential, &registration)
        .map_err(|error| refused("passkey_invalid", format!("The registration did not verify: {error}")))?;
    let record = PasskeyRecord {
        credential_id: bazaar_core::crypto::b64url(passkey.cred_id().as_ref()),
        member: auth.member.id.clone(),
        user_handle: user_handle(&auth.member.id).to_string(),
        passkey: serde_json::to_string(&passkey).map_err(internal)?,
        created_at: state.now(),
        last_used_at: None,
    };
    let kept = state.plane()?.call(move |store| store.add_passkey(record)).await?;
    Ok((StatusCode::CREATED, Json(kept)).into_response())
}

/// The caller's passkeys (ids and dates; never the keys' state).
#[utoipa::path(get, path = "/v1/passkeys", security(("credential" = []), ("session" = [])), responses((status = 200, description = "Passkeys", body = [bazaar_wire::conversation::Passkey])))]
async fn list_passkeys(State(state): State<Arc<AppState>>, auth: Auth) -> Result<Response, Problem> {
    let member = auth.member.id;
    let found = state.plane()?.call(move |store| store.passkeys_of(&member)).await?;
    Ok(Json(found).into_response())
}

/// Starts a usernameless sign-in: the browser offers the passkeys it holds for this registry.
#[utoipa::path(post, path = "/v1/passkeys/sign-in/start", responses((status = 200, description = "The ceremony and its WebAuthn options", body = CeremonyStarted)))]
async fn sign_in_start(State(state): State<Arc<AppState>>) -> Result<Response, Problem> {
    let party = state.relying_party()?;
    let (options, authentication) = party.webauthn.start_discoverable_authentication().map_err(internal)?;
    let ceremony_state = serde_json::to_string(&authentication).map_err(internal)?;
    let options = serde_json::to_value(&options).map_err(internal)?;
    Ok(begin(&state, "sign_in", None, ceremony_state, options).await?.into_response())
}

fn cookie(party: &RelyingParty, value: &str, max_age_s: u64) -> String {
    let secure = if party.secure { "; Secure" } else { "" };
    format!("{SESSION_COOKIE}={value}; HttpOnly; SameSite=Strict; Path=/; Max-Age={max_age_s}{secure}")
}

/// Finishes a sign-in: checks the passkey's signature, opens a fresh session
/// (revoking the one this browser held, if any) and sets its cookie.
#[utoipa::path(post, path = "/v1/passkeys/sign-in/finish", request_body = FinishRequest, responses((status = 200, description = "Signed in: the member, and a `bazaar_session` cookie", body = bazaar_wire::identity::Member)))]
async fn sign_in_finish(
    State(state): State<Arc<AppState>>,
    headers: HeaderMap,
    ApiJson(body): ApiJson<FinishRequest>,
) -> Result<Response, Problem> {
    let party = state.relying_party()?;
    let ceremony = finish(&state, body.ceremony, "sign_in").await?;
    let authentication: DiscoverableAuthentication = serde_json::from_str(&ceremony.state).map_err(internal)?;
    let credential: PublicKeyCredential = serde_json::from_value(body.credential)
        .map_err(|error| refused("passkey_invalid", format!("The credential is not a WebAuthn assertion: {error}")))?;
    let not_known = || refused("passkey_unknown", "This passkey is not registered here.");
    let (handle, _) = party.webauthn.identify_discoverable_authentication(&credential).map_err(|_| not_known())?;
    let credential_id = credential.id.clone();
    let found = state.plane()?.call(move |store| store.passkey(&credential_id)).await?.ok_or_else(not_known)?;
    // The library checks the credential, not whose it is: the handle must be its owner's.
    if found.user_handle != handle.to_string() || found.user_handle != user_handle(&found.member).to_string() {
        return Err(not_known());
    }
    let mut passkey: Passkey = serde_json::from_str(&found.passkey).map_err(internal)?;
    let result = party
        .webauthn
        .finish_discoverable_authentication_v2(&credential, authentication, &passkey)
        .map_err(|error| refused("passkey_invalid", format!("The sign-in did not verify: {error}")))?;
    passkey.update_credential(&result);
    let updated = serde_json::to_string(&passkey).map_err(internal)?;
    let member = state.store.member(&found.member).await?.ok_or_else(not_known)?;
    let token = format!("bzs_{}", state.random_b64(SESSION_RANDOM_BYTES));
    let replacing = session_cookie(&headers).map(|old| sha256_hex(old.as_bytes()));
    let (hash, id, used) = (sha256_hex(token.as_bytes()), member.id.clone(), found.credential_id.clone());
    state
        .plane()?
        .call(move |store| {
            store.passkey_used(&used, updated)?;
            store.open_session(hash, &id, replacing)
        })
        .await?;
    Ok(([(header::SET_COOKIE, cookie(&party, &token, SESSION_TTL_S))], Json(member)).into_response())
}

pub use bazaar_wire::identity::SignedOut;

/// Signs this browser out: its session is revoked on the server and the cookie cleared.
#[utoipa::path(post, path = "/v1/sessions/sign-out", responses((status = 200, description = "Signed out; the cookie is cleared", body = SignedOut)))]
async fn sign_out(State(state): State<Arc<AppState>>, headers: HeaderMap) -> Result<Response, Problem> {
    let party = state.relying_party()?;
    if let Some(token) = session_cookie(&headers) {
        let hash = sha256_hex(token.as_bytes());
        state.plane()?.call(move |store| store.revoke_session(&hash)).await?;
    }
    let cleared = cookie(&party, "", 0);
    Ok(([(header::SET_COOKIE, cleared)], Json(SignedOut { signed_out: true })).into_response())
}

/// The page where a person registers a passkey (with its credential, once)
/// and signs in and out with it.
#[utoipa::path(get, path = "/account", responses((status = 200, description = "Passkeys and sign-in page (HTML)", body = String, content_type = "text/html")))]
async fn account_page() -> Response {
    crate::page::html_static(include_str!("../assets/account.html"))
}

#[cfg(test)]
mod tests {
    use super::cookie;
    use crate::relying_party::relying_party_for;

    #[test]
    fn the_session_cookie_is_secure_exactly_when_the_registry_is_https() {
        let public = relying_party_for("https://market.example").unwrap();
        assert_eq!(
            cookie(&public, "bzs_x", 60),
            "bazaar_session=bzs_x; HttpOnly; SameSite=Strict; Path=/; Max-Age=60; Secure"
        );
        let local = relying_party_for("http://127.0.0.1:7878").unwrap();
        assert_eq!(cookie(&local, "", 0), "bazaar_session=; HttpOnly; SameSite=Strict; Path=/; Max-Age=0");
    }
}

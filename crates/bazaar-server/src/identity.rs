//! Identity over HTTP: owners (people), invites, agents, credentials, members
//! and their handles, and `/v1/me`.

use crate::auth::{ApiJson, Auth};
use crate::exec::{execute, resolve, resolve_id};
use crate::problem::Problem;
use crate::state::AppState;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use bazaar_core::command::Op;
use bazaar_core::crypto::{did_key, invite_proof_message, parse_public_key, sha256_hex, verify};
use bazaar_core::identity;
use bazaar_core::model::{Member, MemberKind, CREDENTIAL_SCOPES};
use bazaar_core::refusal::{Code, Refusal};
use bazaar_core::validate;
use bazaar_types::limits::*;
use bazaar_types::{AccountId, MemberId};
use bazaar_wire::identity as schema;
use serde::{Deserialize, Serialize};
use serde_json::json;
use std::sync::Arc;
use utoipa::ToSchema;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

/// Identity's routes, each with its OpenAPI entry.
pub fn routes() -> OpenApiRouter<Arc<AppState>> {
    OpenApiRouter::new()
        .routes(routes!(create_owner))
        .routes(routes!(issue_invite))
        .routes(routes!(redeem_invite))
        .routes(routes!(rotate_credential))
        .routes(routes!(revoke_credential))
        .routes(routes!(agent_credentials, issue_credential))
        .routes(routes!(reissue_credential))
        .routes(routes!(revoke_agent_credential))
        .routes(routes!(get_member))
        .routes(routes!(rename))
        .routes(routes!(me))
}

#[derive(Deserialize, Serialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateOwnerRequest {
    /// Ed25519 public key, 64 hex chars or base64url.
    pub public_key: String,
    pub handle: String,
}

/// Operator only: registers a person (owner) and shows its credential once.
#[utoipa::path(post, path = "/v1/owners", request_body = CreateOwnerRequest, security(("credential" = []), ("session" = [])), responses((status = 201, description = "Owner created; `credential` is shown once", body = schema::Enrolled)))]
async fn create_owner(
    State(state): State<Arc<AppState>>,
    auth: Auth,
    ApiJson(body): ApiJson<CreateOwnerRequest>,
) -> Result<Response, Problem> {
    let public = member_key(&body.public_key)?;
    validate::handle(&body.handle)?;
    let credential = state.new_secret_credential();
    let id = MemberId(did_key(&public));
    let op = Op::Identity(identity::Op::CreateOwner {
        id,
        handle: body.handle,
        credential_hash: sha256_hex(credential.as_bytes()),
    });
    Ok(with_credential(execute(&state, auth.member, None, op, StatusCode::CREATED).await, &credential).await)
}

/// The Ed25519 key a new member names itself by (its DID is derived from it).
fn member_key(text: &str) -> Result<ed25519_dalek::VerifyingKey, Refusal> {
    parse_public_key(text).map_err(|_| {
        Refusal::new(Code::PublicKeyInvalid, "`public_key` must be an Ed25519 key: 64 hex chars or base64url.")
    })
}

/// Adds the one-time credential to a successful creation's body.
async fn with_credential(response: Response, credential: &str) -> Response {
    if !response.status().is_success() {
        return response;
    }
    let (parts, body) = response.into_parts();
    let bytes = axum::body::to_bytes(body, REQUEST_BODY_BYTES_MAX).await.unwrap_or_default();
    let mut value: serde_json::Value = serde_json::from_slice(&bytes).unwrap_or(json!({}));
    value["credential"] = json!(credential);
    let mut response = (parts.status, Json(value)).into_response();
    *response.headers_mut() = parts.headers;
    response
}

/// Owner only: draws a single-use invite code for one agent.
#[utoipa::path(post, path = "/v1/invites", security(("credential" = []), ("session" = [])), responses((status = 201, description = "`invite_code` is shown once and dies after one use or at `expires_at_ms`", body = schema::Invite)))]
async fn issue_invite(State(state): State<Arc<AppState>>, auth: Auth) -> Response {
    let code = format!("inv_{}", state.random_b64(INVITE_RANDOM_BYTES));
    let expires_at = state.now().plus_s(INVITE_TTL_S);
    let op = Op::Identity(identity::Op::IssueInvite { code_hash: sha256_hex(code.as_bytes()), expires_at });
    let response = execute(&state, auth.member, None, op, StatusCode::CREATED).await;
    if !response.status().is_success() {
        return response;
    }
    (StatusCode::CREATED, Json(json!({"invite_code": code, "expires_at_ms": expires_at}))).into_response()
}

#[derive(Deserialize, Serialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct RedeemInviteRequest {
    pub invite_code: String,
    /// The agent's own Ed25519 public key (hex or base64url); its DID is derived from it.
    #[schema(pattern = "^([0-9a-fA-F]{64}|[A-Za-z0-9_-]{43})$")]
    pub public_key: String,
    pub handle: String,
    /// base64url Ed25519 signature over `bazaar-invite-v1\n<invite_code>\n<handle>`.
    pub proof: String,
}

/// An agent's first act: trade an invite code for its identity and a fresh credential.
#[utoipa::path(post, path = "/v1/agents", request_body = RedeemInviteRequest, responses((status = 201, description = "Agent enrolled; `credential` is shown once", body = schema::Enrolled)))]
async fn redeem_invite(
    State(state): State<Arc<AppState>>,
    ApiJson(body): ApiJson<RedeemInviteRequest>,
) -> Result<Response, Problem> {
    let public = member_key(&body.public_key)?;
    validate::handle(&body.handle)?;
    if body.invite_code.len() > INVITE_CODE_LEN_MAX {
        return Err(Refusal::new(Code::InviteNotFound, "No such invite code.").into());
    }
    verify(&public, &invite_proof_message(&body.invite_code, &body.handle), &body.proof).map_err(|_| {
        Refusal::new(
            Code::ProofInvalid,
            "`proof` must be your key's signature over `bazaar-invite-v1\\n<invite_code>\\n<handle>`.",
        )
    })?;
    let id = MemberId(did_key(&public));
    let credential = state.new_enrollment_credential();
    let actor = Member {
        id: id.clone(),
        kind: MemberKind::Agent,
        owner: None,
        handle: body.handle.clone(),
        created_at: state.now(),
    };
    let op = Op::Identity(identity::Op::RedeemInvite {
        code_hash: sha256_hex(body.invite_code.as_bytes()),
        agent: id,
        handle: body.handle,
        credential_hash: sha256_hex(credential.as_bytes()),
    });
    Ok(with_credential(execute(&state, actor, None, op, StatusCode::CREATED).await, &credential).await)
}

/// A browser session stands in for a credential but is not one: it cannot
/// rotate or revoke the credential (sign out ends the session).
fn session_is_not_a_credential() -> Response {
    Problem::new(
        StatusCode::FORBIDDEN,
        "session_not_credential",
        "A passkey session cannot rotate or revoke a credential: send the credential itself, or sign out.",
    )
    .into_response()
}

/// Replaces the caller's credential; the old one stops working at once.
#[utoipa::path(post, path = "/v1/credentials/rotate", security(("credential" = []), ("session" = [])), responses((status = 200, description = "New `credential`, shown once", body = schema::Rotated)))]
async fn rotate_credential(State(state): State<Arc<AppState>>, auth: Auth) -> Response {
    if auth.session {
        return session_is_not_a_credential();
    }
    let credential = state.new_secret_credential();
    let op = Op::Identity(identity::Op::RotateCredential {
        old_hash: auth.credential_hash,
        new_hash: sha256_hex(credential.as_bytes()),
    });
    with_credential(execute(&state, auth.member, None, op, StatusCode::OK).await, &credential).await
}

/// Revokes the credential this request is made with.
#[utoipa::path(post, path = "/v1/credentials/revoke", security(("credential" = []), ("session" = [])), responses((status = 200, description = "Revoked", body = schema::Revoked)))]
async fn revoke_credential(State(state): State<Arc<AppState>>, auth: Auth) -> Response {
    if auth.session {
        return session_is_not_a_credential();
    }
    let op =
        Op::Identity(identity::Op::RevokeCredential { member: auth.member.id.clone(), hash: auth.credential_hash });
    execute(&state, auth.member, None, op, StatusCode::OK).await
}

/// Hex characters of a credential's SHA-256 that name it in listings (never the credential).
const CREDENTIAL_ID_HEX: usize = 16;

pub use bazaar_wire::identity::CredentialListed;

#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct IssueCredentialRequest {
    /// Scopes from `jobs`, `pay`, `read`, `talk`; leave out `pay` for a credential that cannot move money.
    #[schema(value_type = Vec<bazaar_wire::identity::Scope>)]
    pub scopes: Vec<String>,
}

/// Scopes as stored: known ones only, sorted, each once, comma-joined.
fn canonical_scopes(scopes: &[String]) -> Result<String, Problem> {
    let mut canonical: Vec<&str> = Vec::new();
    for scope in scopes {
        let Some(known) = CREDENTIAL_SCOPES.iter().find(|known| **known == scope.as_str()) else {
            return Err(Problem::new(
                StatusCode::BAD_REQUEST,
                "scope_unknown",
                format!("Unknown scope {scope:?}; the scopes are {}.", CREDENTIAL_SCOPES.join(", ")),
            ));
        };
        canonical.push(known);
    }
    canonical.sort_unstable();
    canonical.dedup();
    if canonical.is_empty() {
        return Err(Problem::new(StatusCode::BAD_REQUEST, "scope_unknown", "Give at least one scope."));
    }
    Ok(canonical.join(","))
}

/// Owner: gives its agent one more credential, limited to `scopes` (shown
/// once; it must be rotated first, and rotation keeps its scopes). Without
/// `pay` it can never move money — the credential to hand a job run.
#[utoipa::path(post, path = "/v1/agents/{agent}/credentials", params(("agent" = String, Path, description = "DID or handle")), request_body = IssueCredentialRequest, security(("credential" = []), ("session" = [])), responses((status = 200, description = "The new `credential`, shown once; it must be rotated first", body = schema::Rotated)))]
async fn issue_credential(
    State(state): State<Arc<AppState>>,
    auth: Auth,
    Path(agent): Path<String>,
    ApiJson(request): ApiJson<IssueCredentialRequest>,
) -> Result<Response, Problem> {
    let scopes = canonical_scopes(&request.scopes)?;
    let target = answerable(&state, &auth, &agent).await?;
    let credential = state.new_enrollment_credential();
    let op = Op::Identity(identity::Op::ReissueCredential {
        agent: target.id,
        revoke: Vec::new(),
        new_hash: sha256_hex(credential.as_bytes()),
        scopes: Some(scopes),
    });
    Ok(with_credential(execute(&state, auth.member, None, op, StatusCode::OK).await, &credential).await)
}

/// The agent (DID or handle) whose credentials the caller answers for: itself, or an agent it owns.
async fn answerable(state: &AppState, auth: &Auth, agent: &str) -> Result<Member, Problem> {
    let target = resolve(state, agent).await?;
    if target.id != auth.member.id && target.owner.as_ref() != Some(&auth.member.id) {
        return Err(Refusal::new(Code::NotOwner, "Only the member itself or its owner may see its credentials.").into());
    }
    Ok(target)
}

/// Every credential a member was given, live and revoked, oldest first:
/// for the member itself or its owner.
#[utoipa::path(get, path = "/v1/agents/{agent}/credentials", params(("agent" = String, Path, description = "DID or handle")), security(("credential" = []), ("session" = [])), responses((status = 200, description = "Credentials", body = [CredentialListed])))]
async fn agent_credentials(
    State(state): State<Arc<AppState>>,
    auth: Auth,
    Path(agent): Path<String>,
) -> Result<Response, Problem> {
    let target = answerable(&state, &auth, &agent).await?;
    let listed: Vec<CredentialListed> = state
        .store
        .credentials_of(&target.id)
        .await?
        .into_iter()
        .map(|c| CredentialListed {
            id: c.hash[..CREDENTIAL_ID_HEX].to_string(),
            created_at: c.created_at.0,
            revoked_at: c.revoked_at.map(|t| t.0),
            scopes: c.scopes.map(|s| s.split(',').map(str::to_string).collect()),
        })
        .collect();
    Ok(Json(listed).into_response())
}

/// Owner: gives its agent a new credential (shown once) and revokes every
/// live one it had. The agent must rotate the new one before anything else.
#[utoipa::path(post, path = "/v1/agents/{agent}/credentials/reissue", params(("agent" = String, Path, description = "DID or handle")), security(("credential" = []), ("session" = [])), responses((status = 200, description = "The new `credential`, shown once; it must be rotated first", body = schema::Rotated)))]
async fn reissue_credential(
    State(state): State<Arc<AppState>>,
    auth: Auth,
    Path(agent): Path<String>,
) -> Result<Response, Problem> {
    let target = answerable(&state, &auth, &agent).await?;
    let live: Vec<String> = state
        .store
        .credentials_of(&target.id)
        .await?
        .into_iter()
        .filter(|c| c.revoked_at.is_none())
        .map(|c| c.hash)
        .collect();
    let credential = state.new_enrollment_credential();
    let op = Op::Identity(identity::Op::ReissueCredential {
        agent: target.id,
        revoke: live,
        new_hash: sha256_hex(credential.as_bytes()),
        scopes: None,
    });
    Ok(with_credential(execute(&state, auth.member, None, op, StatusCode::OK).await, &credential).await)
}

/// The member itself or its owner revokes one credential, named by its listed `id`.
#[utoipa::path(post, path = "/v1/agents/{agent}/credentials/{id}/revoke", params(("agent" = String, Path, description = "DID or handle"), ("id" = String, Path)), security(("credential" = []), ("session" = [])), responses((status = 200, description = "Revoked", body = schema::Revoked)))]
async fn revoke_agent_credential(
    State(state): State<Arc<AppState>>,
    auth: Auth,
    Path((agent, id)): Path<(String, String)>,
) -> Result<Response, Problem> {
    let target = answerable(&state, &auth, &agent).await?;
    let found = state
        .store
        .credentials_of(&target.id)
        .await?
        .into_iter()
        .find(|c| c.hash.starts_with(&id) && id.len() == CREDENTIAL_ID_HEX);
    let Some(credential) = found else {
        return Err(Problem::new(
            StatusCode::NOT_FOUND,
            "credential_not_found",
            format!("{} has no credential {id}.", target.id),
        ));
    };
    let op = Op::Identity(identity::Op::RevokeCredential { member: target.id, hash: credential.hash });
    Ok(execute(&state, auth.member, None, op, StatusCode::OK).await)
}

/// A member by DID or current handle.
#[utoipa::path(get, path = "/v1/members/{member}", params(("member" = String, Path, description = "DID or handle")), security(("credential" = []), ("session" = [])), responses((status = 200, description = "Member", body = schema::Member)))]
async fn get_member(
    State(state): State<Arc<AppState>>,
    _auth: Auth,
    Path(who): Path<String>,
) -> Result<Json<Member>, Problem> {
    Ok(Json(resolve(&state, &who).await?))
}

#[derive(Deserialize, Serialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct RenameRequest {
    pub handle: String,
}

/// Renames a member (itself, or an agent of the caller). The old handle is reserved forever.
#[utoipa::path(put, path = "/v1/members/{member}/handle", request_body = RenameRequest, security(("credential" = []), ("session" = [])), responses((status = 200, description = "Renamed", body = schema::Renamed)))]
async fn rename(
    State(state): State<Arc<AppState>>,
    auth: Auth,
    Path(who): Path<String>,
    ApiJson(body): ApiJson<RenameRequest>,
) -> Result<Response, Problem> {
    let target = resolve_id(&state, &who).await?;
    validate::handle(&body.handle)?;
    Ok(execute(
        &state,
        auth.member,
        None,
        Op::Identity(identity::Op::Rename { member: target, handle: body.handle }),
        StatusCode::OK,
    )
    .await)
}

/// The caller, its account and (for agents) its budget.
#[utoipa::path(get, path = "/v1/me", security(("credential" = []), ("session" = [])), responses((status = 200, description = "Caller", body = schema::Me)))]
async fn me(State(state): State<Arc<AppState>>, auth: Auth) -> Result<Json<schema::Me>, Problem> {
    let purse = purse_of(&state, &auth.member.id).await?;
    Ok(Json(schema::Me {
        member: crate::exec::wire(&auth.member)?,
        balance_minor: purse.balance_minor,
        available_minor: purse.available_minor,
        held_minor: purse.held_minor,
        budget: purse.budget,
    }))
}

/// A member's money as `/v1/me` and an owner's list of agents show it: null figures without an account, no
/// budget without one set.
pub(crate) struct Purse {
    pub balance_minor: Option<i64>,
    pub available_minor: Option<i64>,
    pub held_minor: Option<u64>,
    pub budget: Option<bazaar_wire::pay::Budget>,
}

pub(crate) async fn purse_of(state: &AppState, member: &bazaar_types::MemberId) -> Result<Purse, Problem> {
    let account = state.store.account(&AccountId::of_member(member)).await?;
    let budget = state.store.budget(member).await?;
    Ok(Purse {
        balance_minor: account.as_ref().map(|a| a.balance() as i64),
        available_minor: account.as_ref().map(|a| a.available() as i64),
        held_minor: account.as_ref().map(|a| a.debits_pending),
        budget: budget.map(|b| crate::exec::wire(&bazaar_core::pay::budget_view(&b, state.now()))).transpose()?,
    })
}

//! Sealing keys over HTTP and the signature check every signed post passes.
//! The registry stores each member's X25519 sealing key, signed by the
//! member's identity key, and checks message signatures against the author's
//! `did:key`; it never sees a secret key or a sealed body's plaintext
//! (`docs/sealing.md`).

use crate::auth::{ApiJson, Auth, Talker};
use crate::problem::Problem;
use crate::state::AppState;
use axum::extract::{Path, State};
use axum::response::{IntoResponse, Response};
use axum::Json;
use bazaar_conversation::sealing::{sealing_key_message, signing_bytes, verify_signature, Content, SealingKey};
use bazaar_conversation::{ChannelId, ConversationError};
use bazaar_core::crypto::public_key_from_did;
use bazaar_types::{MemberId, Timestamp};
use bazaar_wire::conversation as schema;
use serde::{Deserialize, Serialize};
use std::sync::Arc;
use utoipa::ToSchema;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

pub fn routes() -> OpenApiRouter<Arc<AppState>> {
    OpenApiRouter::new().routes(routes!(publish_key)).routes(routes!(member_key)).routes(routes!(channel_keys))
}

/// `signature` by `author`'s `did:key` over `message`, or `signature_invalid`
/// (also when the author has no `did:key` to check it with).
pub fn check_signature(author: &MemberId, message: &[u8], signature: &str) -> Result<(), Problem> {
    let valid = public_key_from_did(author.as_str()).is_ok_and(|key| verify_signature(&key, message, signature));
    if valid {
        Ok(())
    } else {
        Err(crate::plane::problem(ConversationError::SignatureInvalid))
    }
}

/// A post's signature, when it carries one, checked before the store sees it.
pub fn check_post_signature(
    channel: &ChannelId,
    author: &MemberId,
    content: &Content<'_>,
    signature: Option<&str>,
) -> Result<(), Problem> {
    match signature {
        Some(signature) => check_signature(author, &signing_bytes(channel, author, content), signature),
        None => Ok(()),
    }
}

#[derive(Deserialize, Serialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct PublishKeyRequest {
    /// The X25519 public key, 32 bytes as base64url without padding.
    pub public_key: String,
    /// Ed25519 by the caller's identity key over `bazaar/sealing-key/v1\n{did}\n{public_key}`, base64url.
    pub signature: String,
}

/// Publishes (or replaces) the caller's sealing key. DMs opened after it are
/// sealed when the other member has one too; channels already open never convert.
#[utoipa::path(put, path = "/v1/sealing-key", request_body = PublishKeyRequest, security(("credential" = []), ("session" = [])), responses((status = 200, description = "The published key", body = schema::SealingKey)))]
async fn publish_key(
    State(state): State<Arc<AppState>>,
    Talker(auth): Talker,
    ApiJson(body): ApiJson<PublishKeyRequest>,
) -> Result<Response, Problem> {
    let member = auth.member.id;
    check_signature(&member, &sealing_key_message(&member, &body.public_key), &body.signature)?;
    let key = SealingKey { member, public_key: body.public_key, signature: body.signature, published_at: Timestamp(0) };
    let published = state.plane()?.call(move |store| store.publish_sealing_key(key)).await?;
    Ok(Json(published).into_response())
}

/// A member's published sealing key, with the signature anyone can check
/// against the member's `did:key`.
#[utoipa::path(get, path = "/v1/members/{member}/sealing-key", params(("member" = String, Path, description = "A DID")), security(("credential" = []), ("session" = [])), responses((status = 200, description = "The key", body = schema::SealingKey)))]
async fn member_key(
    State(state): State<Arc<AppState>>,
    _auth: Auth,
    Path(member): Path<String>,
) -> Result<Response, Problem> {
    let who = MemberId(member);
    let asked = who.clone();
    let found = state.plane()?.call(move |store| store.sealing_key(&asked)).await?;
    match found {
        Some(key) => Ok(Json(key).into_response()),
        None => Err(Problem::new(
            axum::http::StatusCode::NOT_FOUND,
            "sealing_key_not_found",
            format!("{who} has published no sealing key."),
        )),
    }
}

/// One current member of a channel and its sealing key (`null`: none).
#[derive(Serialize)]
struct MemberKey {
    member: MemberId,
    sealing_key: Option<SealingKey>,
}

/// Every current member of the channel with its sealing key: what a sender
/// seals a post for. Members only.
#[utoipa::path(get, path = "/v1/channels/{channel}/sealing-keys", params(("channel" = String, Path)), security(("credential" = []), ("session" = [])), responses((status = 200, description = "Members and their keys", body = [schema::MemberSealingKey])))]
async fn channel_keys(
    State(state): State<Arc<AppState>>,
    auth: Auth,
    Path(channel): Path<String>,
) -> Result<Response, Problem> {
    let (me, channel) = (auth.member.id, ChannelId(channel));
    let keys = state.plane()?.call(move |store| store.sealing_keys(&channel, &me)).await?;
    let keys: Vec<MemberKey> =
        keys.into_iter().map(|(member, sealing_key)| MemberKey { member, sealing_key }).collect();
    Ok(Json(keys).into_response())
}

//! This registry as peers see it and the peers it recognises: the key history
//! and key rotation, the signed registry card and recognition list, adding and
//! listing peers, and guests (a peer's agents joining here).

use super::peer_client::{fetch_json, verify_card};
use crate::auth::{ApiJson, Auth};
use crate::exec::{self, execute};
use crate::problem::Problem;
use crate::state::AppState;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use bazaar_core::command::Op;
use bazaar_core::crypto::{public_key_from_did, sha256_hex, verify};
use bazaar_core::federation;
use bazaar_core::federation::{Peer, Terms, BAZAAR_CONTEXT, PASSPORT_TYPE, VC_CONTEXT};
use bazaar_core::kernel::docs::decode;
use bazaar_core::model::{DocKind, MemberKind};
use bazaar_core::refusal::{Code, Refusal};
use bazaar_core::vc;
use bazaar_types::limits::*;
use bazaar_types::MemberId;
use bazaar_wire::federation as schema;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use std::sync::Arc;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

/// Keys', the card's, peers' and guests' routes, each with its OpenAPI entry.
pub fn routes() -> OpenApiRouter<Arc<AppState>> {
    OpenApiRouter::new()
        .routes(routes!(key_history))
        .routes(routes!(recognition))
        .routes(routes!(rotate_key))
        .routes(routes!(add_peer, list_peers))
        .routes(routes!(join_guest))
}

/// The peer registry `did`, if this registry recognises it.
pub async fn peer_of(state: &AppState, did: &str) -> Result<Option<Peer>, Problem> {
    Ok(state.store.doc(DocKind::Peer, did).await?.map(|row| decode::<Peer>(&row)).transpose()?)
}

pub async fn peers(state: &AppState) -> Result<Vec<Peer>, Problem> {
    let operator = MemberId(bazaar_core::model::OPERATOR_ID.into());
    let rows = state.store.docs_by_party(DocKind::Peer, &operator, "", FEDERATION_PEERS_MAX).await?;
    Ok(rows.iter().map(decode::<Peer>).collect::<Result<_, _>>()?)
}

/// Public: every key this registry signed with, each handed over by its predecessor.
#[utoipa::path(get, path = "/.well-known/bazaar-keys", responses((status = 200, description = "Key history", body = schema::KeyHistory)))]
pub async fn key_history(State(state): State<Arc<AppState>>) -> Json<Value> {
    Json(json!({"registry": state.registry, "keys": state.key_history()}))
}

/// Operator only: rotate to a fresh signing key.
#[utoipa::path(post, path = "/v1/registry/keys/rotate", security(("credential" = []), ("session" = [])), responses((status = 201, description = "The new key's entry", body = schema::KeyRotated)))]
pub async fn rotate_key(State(state): State<Arc<AppState>>, auth: Auth) -> Result<Response, Problem> {
    if auth.member.kind != MemberKind::Operator {
        return Err(Refusal::new(Code::NotPermitted, "Only the operator rotates the registry's key.").into());
    }
    let entry = match state.rotate_key().await {
        Ok(entry) => entry,
        Err(bazaar_store::StoreError::Constraint(detail)) => {
            return Err(Refusal::new(Code::KeyHistoryFull, detail).into());
        }
        Err(error) => return Err(error.into()),
    };
    Ok((StatusCode::CREATED, Json(json!({"entry": entry, "keys": state.key_history()}))).into_response())
}

/// Signs `unsigned` with the current key (eddsa-jcs-2022), issuer = that key's DID.
fn sign_document(state: &AppState, mut unsigned: Value) -> Value {
    let key = state.signing_key();
    let now = vc::rfc3339_from_ms(state.now().ms());
    unsigned["issuer"] = json!(bazaar_core::crypto::did_key(&key.verifying_key()));
    let method = vc::did_key_verification_method(&key.verifying_key());
    vc::sign_eddsa_jcs_2022(&unsigned, &key, &method, &now).expect("registry documents are in the canonical subset")
}

/// The registry card's body (before signing): identity, keys, fees, limits.
pub fn card(state: &AppState, facts: Value) -> Value {
    let now = state.now();
    let mut card = json!({
        "@context": [VC_CONTEXT, BAZAAR_CONTEXT],
        "type": ["BazaarRegistryCard"],
        "id": state.registry,
        "did": state.registry,
        "url": state.public_url.read().expect("url lock").clone(),
        "keys": state.key_history(),
        "recognition": "/.well-known/bazaar-recognition",
        "passport_verifier": "/passport/verify",
        "validFrom": vc::rfc3339_from_ms(now.ms()),
        "validUntil": vc::rfc3339_from_ms(now.plus_s(PASSPORT_VALIDITY_S).ms()),
    });
    if let (Some(card), Value::Object(facts)) = (card.as_object_mut(), facts) {
        for (k, v) in facts {
            card.entry(k).or_insert(v);
        }
    }
    sign_document(state, card)
}

/// Public: the signed list of registries this one recognises, with weights and corridor terms.
#[utoipa::path(get, path = "/.well-known/bazaar-recognition", responses((status = 200, description = "Signed recognition list (a verifiable credential)", body = schema::RecognitionList)))]
pub async fn recognition(State(state): State<Arc<AppState>>) -> Result<Json<Value>, Problem> {
    let now = state.now();
    let recognised: Vec<Value> = peers(&state)
        .await?
        .iter()
        .map(|p| {
            json!({"id": p.did, "url": p.url, "weightBps": p.weight_bps, "acceptedTypes": [PASSPORT_TYPE],
                "terms": {"feeBps": p.terms.fee_bps, "perCallMaxMinor": p.terms.per_call_max_minor.0.to_string(),
                    "outstandingMaxMinor": p.terms.outstanding_max_minor.0.to_string()}})
        })
        .collect();
    let list = json!({
        "@context": [VC_CONTEXT, BAZAAR_CONTEXT],
        "type": ["VerifiableCredential", "RecognitionList"],
        "validFrom": vc::rfc3339_from_ms(now.ms()),
        "validUntil": vc::rfc3339_from_ms(now.plus_s(PASSPORT_VALIDITY_S).ms()),
        "credentialSubject": {"id": state.registry, "recognised": recognised},
    });
    Ok(Json(sign_document(&state, list)))
}

#[derive(Deserialize, Serialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct AddPeerRequest {
    pub url: String,
    pub did: String,
    pub weight_bps: u32,
    #[serde(default)]
    pub fee_bps: u32,
    pub per_call_max_minor: u64,
    pub outstanding_max_minor: u64,
}

/// Operator only: recognise a peer registry by URL and DID. Its card is fetched
/// and checked against the DID before anything is stored.
#[utoipa::path(post, path = "/v1/federation/peers", request_body = AddPeerRequest, security(("credential" = []), ("session" = [])), responses((status = 201, description = "Peer recognised", body = schema::PeerAdded)))]
pub async fn add_peer(
    State(state): State<Arc<AppState>>,
    auth: Auth,
    ApiJson(body): ApiJson<AddPeerRequest>,
) -> Result<Response, Problem> {
    if auth.member.kind != MemberKind::Operator {
        return Err(Refusal::new(Code::NotPermitted, "Only the operator adds peer registries.").into());
    }
    if body.url.len() > PEER_URL_LEN_MAX || !(body.url.starts_with("http://") || body.url.starts_with("https://")) {
        return Err(Refusal::new(
            Code::PeerInvalid,
            format!("`url` is an http(s) URL of at most {PEER_URL_LEN_MAX} bytes."),
        )
        .into());
    }
    if body.did == state.registry.as_str() {
        return Err(Refusal::new(Code::PeerInvalid, "A registry does not add itself as a peer.").into());
    }
    let per_call = bazaar_core::validate::amount(body.per_call_max_minor, "per_call_max_minor")?;
    let outstanding = bazaar_core::validate::amount(body.outstanding_max_minor, "outstanding_max_minor")?;
    if peers(&state).await?.len() >= FEDERATION_PEERS_MAX && peer_of(&state, &body.did).await?.is_none() {
        return Err(Refusal::new(Code::PeerInvalid, format!("At most {FEDERATION_PEERS_MAX} peers.")).into());
    }
    let url = body.url.trim_end_matches('/').to_string();
    let card = fetch_json(&state, &format!("{url}/.well-known/bazaar")).await?;
    let keys = verify_card(&card, &body.did, state.now().ms())?;
    let peer = Peer {
        did: MemberId(body.did.clone()),
        url,
        handle: format!("peer-{}", &sha256_hex(body.did.as_bytes())[..12]),
        weight_bps: body.weight_bps,
        terms: Terms { fee_bps: body.fee_bps, per_call_max_minor: per_call, outstanding_max_minor: outstanding },
        keys,
        added_at: state.now(),
    };
    Ok(execute(&state, auth.member, None, Op::Federation(federation::Op::AddPeer { peer }), StatusCode::CREATED).await)
}

/// Public: the peers this registry recognises.
#[utoipa::path(get, path = "/v1/federation/peers", responses((status = 200, description = "Peers", body = schema::PeerList)))]
pub async fn list_peers(State(state): State<Arc<AppState>>) -> Result<Json<Value>, Problem> {
    Ok(Json(json!({"peers": peers(&state).await?})))
}

#[derive(Deserialize, Serialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct GuestRequest {
    /// The agent's did:key (its home registry's member id).
    #[schema(pattern = "^did:key:z[1-9A-HJ-NP-Za-km-z]+$")]
    pub did: String,
    /// The agent's home registry: a peer this registry recognises.
    pub home: String,
    pub presented_at_ms: i64,
    /// base64url Ed25519 signature by `did` over
    /// `bazaar-guest-v1\n<this registry's DID>\n<did>\n<home>\n<presented_at_ms>`.
    pub signature: String,
}

/// Public (the DID's signature is the authentication): an agent of a
/// recognised peer registry joins as a guest, with no invite and no owner
/// here, and gets a bearer credential. It is funded only through the
/// corridor (a token from its home registry addressed to itself here), and
/// may then open escrowed contracts like any agent. Asking again with a fresh
/// signature issues another credential.
#[utoipa::path(post, path = "/v1/federation/guests", request_body = GuestRequest, responses((status = 201, description = "Guest enrolled; its credential", body = schema::GuestEnrolled)))]
pub async fn join_guest(
    State(state): State<Arc<AppState>>,
    ApiJson(body): ApiJson<GuestRequest>,
) -> Result<Response, Problem> {
    let key = public_key_from_did(&body.did)
        .map_err(|_| Refusal::new(Code::PublicKeyInvalid, "`did` must be a did:key for an Ed25519 key."))?;
    let now = state.now().ms();
    super::check_presented_at(now, body.presented_at_ms)?;
    let message =
        bazaar_core::federation::guest_message(state.registry.as_str(), &body.did, &body.home, body.presented_at_ms);
    verify(&key, &message, &body.signature)
        .map_err(|_| Refusal::new(Code::ProofInvalid, "The signature does not verify with the DID's key."))?;
    let credential = state.new_secret_credential();
    let op = Op::Federation(federation::Op::EnrollGuest {
        agent: MemberId(body.did.clone()),
        handle: bazaar_core::federation::guest_handle(&body.did),
        credential_hash: sha256_hex(credential.as_bytes()),
        home: MemberId(body.home.clone()),
    });
    let mut receipt = exec::receipt(&state, state.registry_actor(), op).await?.to_json();
    receipt["credential"] = json!(credential);
    Ok((StatusCode::CREATED, Json(receipt)).into_response())
}

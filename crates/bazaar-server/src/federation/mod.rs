//! Reputation, trust passports, the key history, the signed registry card and
//! recognition list, peers, imported passports, and cross-registry settlement
//! (the merchant's side relays to the buyer's registry over signed
//! server-to-server requests; see `bazaar_core::federation`).

use crate::auth::{ApiJson, Auth};
use crate::problem::Problem;
use crate::routes::{execute, resolve};
use crate::{AppState, NETWORK_UNIT};
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use bazaar_core::command::{Command, Idem, Op};
use bazaar_core::crypto::{public_key_from_did, sha256_hex, sign, verify};
use bazaar_core::federation::{
    key_valid_at, presentation_message, s2s_message, verify_history, verify_passport, ImportRecord, KeyEntry, Peer,
    Relay, RelayResult, RelayState, Terms, BAZAAR_CONTEXT, PASSPORT_TYPE, VC_CONTEXT,
};
use bazaar_core::model::{DocKind, Member, MemberKind};
use bazaar_core::refusal::{Code, Refusal};
use bazaar_core::reputation::{combine, Imported, IssuedFigures, Ledger};
use bazaar_core::token::{self, TokenClaims};
use bazaar_core::vc;
use bazaar_types::limits::*;
use bazaar_types::{Amount, MemberId, OrderId, Timestamp};
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use std::sync::Arc;

/// The header a registry signs server-to-server requests and responses with:
/// `registry=<did>,key=<key did>,ts=<ms>,sig=<base64url>`.
pub const S2S_HEADER: &str = "bazaar-registry-signature";
pub const FEDERATION_SETTLE_PATH: &str = "/v1/federation/settle";

// ---- reputation ---------------------------------------------------------------

/// The reputation fold, caught up to the ledger's head.
pub async fn caught_up(state: &AppState) -> Result<tokio::sync::MutexGuard<'_, Ledger>, Problem> {
    let mut ledger = state.reputation.lock().await;
    loop {
        let page = state.store.events(ledger.seq, REPUTATION_EVENTS_PAGE_MAX).await?;
        for event in &page {
            ledger.observe(event);
        }
        if page.len() < REPUTATION_EVENTS_PAGE_MAX {
            return Ok(ledger);
        }
    }
}

async fn imports_of(state: &AppState, subject: &MemberId) -> Result<Vec<Imported>, Problem> {
    let rows = state.store.docs_by_party(DocKind::Import, subject, "", IMPORTED_PASSPORTS_MAX).await?;
    let now = state.now().ms();
    Ok(rows
        .iter()
        .filter_map(|row| serde_json::from_value::<ImportRecord>(row.body.clone()).ok())
        .map(|record| record.imported)
        .filter(|imported| imported.valid_until_ms > now)
        .collect())
}

/// Everything published about one DID: local figures, stake, imports, combined.
pub async fn reputation_of(state: &AppState, subject: &MemberId) -> Result<Value, Problem> {
    let imported = imports_of(state, subject).await?;
    let ledger = caught_up(state).await?;
    let local = ledger.figures(subject, state.now());
    let combined = combine(&local, &imported);
    Ok(json!({"subject": subject, "local": local, "stake": ledger.stake(subject), "imported": imported,
        "combined": combined, "as_of": {"ledger_seq": ledger.seq, "ledger_head": ledger.head}}))
}

/// Public: the reputation of a DID or handle, computed from the ledger now.
#[utoipa::path(get, path = "/v1/reputation/{member}", responses((status = 200, description = "Figures, stake, imports")))]
pub async fn get_reputation(
    State(state): State<Arc<AppState>>,
    Path(member): Path<String>,
) -> Result<Json<Value>, Problem> {
    let subject = if member.starts_with("did:") { MemberId(member) } else { resolve(&state, &member).await?.id };
    Ok(Json(reputation_of(&state, &subject).await?))
}

// ---- passports ----------------------------------------------------------------

#[derive(Deserialize, Serialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct PassportRequest {
    /// DID or handle; defaults to the caller.
    #[serde(default)]
    pub subject: Option<String>,
}

/// A fresh passport for `subject`, signed with the current key and recorded on the ledger.
pub async fn issue_passport(state: &Arc<AppState>, subject: &MemberId) -> Result<Value, Problem> {
    let now = state.now();
    let (figures, stake, seq, head) = {
        let ledger = caught_up(state).await?;
        let issued = ledger.passports_on(subject, now);
        if issued >= PASSPORTS_PER_SUBJECT_DAY_MAX {
            return Err(Refusal::new(
                Code::PassportLimit,
                format!("At most {PASSPORTS_PER_SUBJECT_DAY_MAX} passports per subject per UTC day; a passport stays valid for 24 h."),
            )
            .with(json!({"issued_today": issued}))
            .into());
        }
        (ledger.figures(subject, now), ledger.stake(subject), ledger.seq, ledger.head.clone())
    };
    let until = now.plus_s(PASSPORT_VALIDITY_S);
    let id = format!("urn:bazaar:passport:{}", crate::random_b64(16));
    let key = state.signing_key();
    let key_did = bazaar_core::crypto::did_key(&key.verifying_key());
    let mut credential_subject = serde_json::to_value(&figures).expect("figures serialize");
    credential_subject["id"] = json!(subject);
    credential_subject["registry"] = json!(state.registry);
    credential_subject["window"] = json!(format!("P{REPUTATION_WINDOW_DAYS}D"));
    credential_subject["asOf"] = json!({"ledgerSeq": seq, "ledgerHead": format!("sha256:{head}")});
    credential_subject["stake"] = serde_json::to_value(&stake).expect("stake serializes");
    credential_subject["networkUnit"] = json!(NETWORK_UNIT);
    let unsigned = json!({
        "@context": [VC_CONTEXT, BAZAAR_CONTEXT],
        "id": id,
        "type": ["VerifiableCredential", PASSPORT_TYPE],
        "issuer": key_did,
        "validFrom": vc::rfc3339_from_ms(now.ms()),
        "validUntil": vc::rfc3339_from_ms(until.ms()),
        "credentialSubject": credential_subject,
    });
    let method = vc::did_key_verification_method(&key.verifying_key());
    let passport = vc::sign_eddsa_jcs_2022(&unsigned, &key, &method, &vc::rfc3339_from_ms(now.ms()))
        .map_err(|e| Problem::new(StatusCode::INTERNAL_SERVER_ERROR, "internal", e.to_string()))?;
    let issued = IssuedFigures { subject: subject.clone(), as_of_seq: seq, figures };
    let op = Op::RecordPassport { issued, credential_id: id, valid_until_ms: until.ms() };
    let applied = state.store.submit(Command { actor: state.registry_actor(), idem: None, op }).await?;
    applied.outcome.map_err(Problem::from)?;
    Ok(passport)
}

/// A passport for the caller, an agent the caller owns, or (for the operator) anyone.
#[utoipa::path(post, path = "/v1/passports", request_body = PassportRequest, responses((status = 201, description = "A signed TrustPassport (VC 2.0, eddsa-jcs-2022)")))]
pub async fn post_passport(
    State(state): State<Arc<AppState>>,
    auth: Auth,
    ApiJson(body): ApiJson<PassportRequest>,
) -> Result<Response, Problem> {
    let subject = match &body.subject {
        None => auth.member.clone(),
        Some(who) => resolve(&state, who).await?,
    };
    let allowed = subject.id == auth.member.id
        || subject.owner.as_ref() == Some(&auth.member.id)
        || auth.member.kind == MemberKind::Operator;
    if !allowed {
        return Err(Refusal::new(Code::NotPermitted, "Ask for your own passport, or one for an agent you own.").into());
    }
    let passport = issue_passport(&state, &subject.id).await?;
    Ok((StatusCode::CREATED, Json(passport)).into_response())
}

/// [`verify_passport`] against this registry and its peers. A passport signed
/// by a key a peer rotated to after this registry last read its card names its
/// registry in `credentialSubject.registry`; that one peer (if recognised) is
/// refreshed once and the passport checked again.
async fn verify_known(state: &AppState, passport: &Value) -> Result<bazaar_core::federation::PassportInfo, Problem> {
    let now = state.now().ms();
    match verify_passport(passport, now, &known_registries(state).await?) {
        Err(refusal) if refusal.code == Code::PassportIssuerUnknown => {
            let named = passport["credentialSubject"]["registry"].as_str().unwrap_or_default();
            let Some(peer) = peer_of(state, named).await? else { return Err(refusal.into()) };
            if refresh_peer(state, &peer).await.is_none() {
                return Err(refusal.into());
            }
            Ok(verify_passport(passport, now, &known_registries(state).await?)?)
        }
        other => Ok(other?),
    }
}

/// The registries whose passports this one accepts: itself and every peer.
async fn known_registries(state: &AppState) -> Result<Vec<(String, Vec<KeyEntry>)>, Problem> {
    let mut registries = vec![(state.registry.to_string(), state.key_history())];
    for peer in peers(state).await? {
        registries.push((peer.did.to_string(), peer.keys));
    }
    Ok(registries)
}

/// The peer registry `did`, if this registry recognises it.
pub async fn peer_of(state: &AppState, did: &str) -> Result<Option<Peer>, Problem> {
    Ok(state.store.doc(DocKind::Peer, did).await?.map(|row| Peer::from_row(&row)))
}

pub async fn peers(state: &AppState) -> Result<Vec<Peer>, Problem> {
    let operator = MemberId(bazaar_core::model::OPERATOR_ID.into());
    let rows = state.store.docs_by_party(DocKind::Peer, &operator, "", FEDERATION_PEERS_MAX).await?;
    Ok(rows.iter().map(Peer::from_row).collect())
}

#[derive(Deserialize, Serialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct VerifyPassportRequest {
    #[schema(value_type = Object)]
    pub passport: Value,
}

fn passport_size(passport: &Value) -> Result<(), Problem> {
    if serde_json::to_vec(passport).map(|b| b.len()).unwrap_or(usize::MAX) > PASSPORT_BYTES_MAX {
        return Err(Refusal::new(
            Code::PassportMalformed,
            format!("A passport is at most {PASSPORT_BYTES_MAX} bytes."),
        )
        .into());
    }
    Ok(())
}

/// Public: checks a passport issued by this registry (any key in its history) or a recognised peer.
#[utoipa::path(post, path = "/v1/passports/verify", request_body = VerifyPassportRequest, responses((status = 200, description = "Valid: issuer, subject and figures"), (status = 422, description = "Refused with the reason code")))]
pub async fn verify_passport_route(
    State(state): State<Arc<AppState>>,
    ApiJson(body): ApiJson<VerifyPassportRequest>,
) -> Result<Json<Value>, Problem> {
    passport_size(&body.passport)?;
    let info = verify_known(&state, &body.passport).await?;
    Ok(Json(json!({"valid": true, "registry": info.registry, "key": info.key, "subject": info.subject,
        "credential_id": info.id, "valid_until_ms": info.valid_until_ms, "as_of_seq": info.as_of_seq,
        "figures": info.figures, "local": info.registry == state.registry.as_str()})))
}

#[derive(Deserialize, Serialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ImportRequest {
    #[schema(value_type = Object)]
    pub passport: Value,
    /// Milliseconds; within `FEDERATION_SKEW_S_MAX` of this registry's clock.
    pub presented_at_ms: i64,
    /// base64url Ed25519 signature by the passport subject's did:key over
    /// `bazaar-passport-presentation-v1\n<this registry's DID>\n<credential id>\n<presented_at_ms>`.
    pub signature: String,
}

/// Public (the subject's signature is the authentication): imports a peer's
/// passport so its figures count here at the peer's weight.
#[utoipa::path(post, path = "/v1/reputation/import", request_body = ImportRequest, responses((status = 201, description = "Imported"), (status = 403, description = "Unrecognised issuer or subject mismatch")))]
pub async fn import_passport(
    State(state): State<Arc<AppState>>,
    ApiJson(body): ApiJson<ImportRequest>,
) -> Result<Response, Problem> {
    passport_size(&body.passport)?;
    let now = state.now().ms();
    // Checked in this order: the proof and window, then that the subject itself
    // presents it, then that its issuer is a recognised peer.
    let info = verify_known(&state, &body.passport).await?;
    let subject_key = public_key_from_did(info.subject.as_str()).map_err(|_| {
        Refusal::new(Code::PassportSubjectMismatch, "The passport's subject is not a did:key that can sign.")
    })?;
    if (now - body.presented_at_ms).unsigned_abs() > FEDERATION_SKEW_S_MAX * 1000 {
        return Err(Refusal::new(Code::RequestStale, "`presented_at_ms` is too far from this registry's clock.")
            .with(json!({"now_ms": now, "skew_s_max": FEDERATION_SKEW_S_MAX}))
            .into());
    }
    let message = presentation_message(state.registry.as_str(), &info.id, body.presented_at_ms);
    if verify(&subject_key, &message, &body.signature).is_err() {
        return Err(Refusal::new(
            Code::PassportSubjectMismatch,
            "The presentation is not signed by the passport's subject: only the agent the passport names may present it.",
        )
        .with(json!({"subject": info.subject}))
        .into());
    }
    if info.registry == state.registry.as_str() {
        return Err(Refusal::new(
            Code::InvalidRequest,
            "This registry's own passports need no import: their figures are already local.",
        )
        .into());
    }
    let imported = Imported {
        registry: info.registry.clone(),
        weight_bps: 0,
        weighted_success_ppm: info.figures.weighted_success_ppm,
        weighted_failure_ppm: info.figures.weighted_failure_ppm,
        score_bps: info.figures.score_bps,
        valid_until_ms: info.valid_until_ms,
    };
    let record =
        ImportRecord { subject: info.subject.clone(), imported, credential_id: info.id, imported_at: Timestamp(now) };
    Ok(execute(&state, state.registry_actor(), None, Op::ImportPassport { record }, StatusCode::CREATED).await)
}

// ---- keys, card, recognition list ---------------------------------------------

/// Public: every key this registry signed with, each handed over by its predecessor.
#[utoipa::path(get, path = "/.well-known/bazaar-keys", responses((status = 200, description = "Key history")))]
pub async fn key_history(State(state): State<Arc<AppState>>) -> Json<Value> {
    Json(json!({"registry": state.registry, "keys": state.key_history()}))
}

/// Operator only: rotate to a fresh signing key.
#[utoipa::path(post, path = "/v1/registry/keys/rotate", responses((status = 201, description = "The new key's entry")))]
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
#[utoipa::path(get, path = "/.well-known/bazaar-recognition", responses((status = 200, description = "Signed recognition list")))]
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

/// Checks a peer's signed card: proof, its DID, and its key history; returns the history.
pub fn verify_card(card: &Value, did: &str, now_ms: i64) -> Result<Vec<KeyEntry>, Refusal> {
    let invalid = |detail: String| Refusal::new(Code::PeerInvalid, detail);
    let verified = vc::verify_eddsa_jcs_2022(card).map_err(|e| invalid(format!("the card's signature: {e}")))?;
    vc::check_validity(card, now_ms).map_err(|e| invalid(format!("the card: {e}")))?;
    if card["id"].as_str() != Some(did) {
        return Err(invalid(format!("the card at that URL is for {}, not {did}", card["id"])));
    }
    let keys: Vec<KeyEntry> =
        serde_json::from_value(card["keys"].clone()).map_err(|e| invalid(format!("the card's keys: {e}")))?;
    verify_history(did, &keys).map_err(invalid)?;
    if keys.last().map(|k| k.did.as_str()) != Some(verified.issuer_did.as_str()) {
        return Err(invalid("the card is not signed by the registry's current key".into()));
    }
    Ok(keys)
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
#[utoipa::path(post, path = "/v1/federation/peers", request_body = AddPeerRequest, responses((status = 201, description = "Peer recognised"), (status = 422, description = "The card does not check out")))]
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
    Ok(execute(&state, auth.member, None, Op::AddPeer { peer }, StatusCode::CREATED).await)
}

/// Public: the peers this registry recognises.
#[utoipa::path(get, path = "/v1/federation/peers", responses((status = 200, description = "Peers")))]
pub async fn list_peers(State(state): State<Arc<AppState>>) -> Result<Json<Value>, Problem> {
    Ok(Json(json!({"peers": peers(&state).await?})))
}

async fn fetch_json(state: &AppState, url: &str) -> Result<Value, Problem> {
    let unreachable = |e: String| Refusal::new(Code::PeerUnreachable, format!("{url}: {e}"));
    let response = state.http.get(url).send().await.map_err(|e| unreachable(e.to_string()))?;
    if !response.status().is_success() {
        return Err(unreachable(format!("answered {}", response.status())).into());
    }
    Ok(response.json::<Value>().await.map_err(|e| unreachable(e.to_string()))?)
}

/// Fetches a peer's card again after it may have rotated its key; stores the
/// longer history (it may only grow) and returns the updated peer.
pub async fn refresh_peer(state: &AppState, peer: &Peer) -> Option<Peer> {
    let card = fetch_json(state, &format!("{}/.well-known/bazaar", peer.url)).await.ok()?;
    let keys = verify_card(&card, peer.did.as_str(), state.now().ms()).ok()?;
    if keys.len() <= peer.keys.len() {
        return None;
    }
    if keys[..peer.keys.len()].iter().map(|k| &k.did).ne(peer.keys.iter().map(|k| &k.did)) {
        tracing::warn!(peer = %peer.did, "a peer's key history does not extend the stored one; ignored (re-add the peer to accept it)");
        return None;
    }
    let operator = state.store.member(&MemberId(bazaar_core::model::OPERATOR_ID.into())).await.ok()??;
    let updated = Peer { keys, ..peer.clone() };
    let op = Op::AddPeer { peer: updated.clone() };
    let applied = state.store.submit(Command { actor: operator, idem: None, op }).await.ok()?;
    applied.outcome.ok()?;
    tracing::info!(peer = %peer.did, keys = updated.keys.len(), "a peer rotated its key; its history was refreshed");
    Some(updated)
}

// ---- server-to-server signatures ----------------------------------------------

fn s2s_header(state: &AppState, method: &str, path: &str, body: &[u8]) -> String {
    let key = state.signing_key();
    let key_did = bazaar_core::crypto::did_key(&key.verifying_key());
    let ts = state.now().ms();
    let sig = sign(&key, &s2s_message(state.registry.as_str(), method, path, ts, body));
    format!("registry={},key={key_did},ts={ts},sig={sig}", state.registry)
}

struct S2sSignature {
    registry: String,
    key: String,
    ts: i64,
    sig: String,
}

fn parse_s2s(value: &str) -> Option<S2sSignature> {
    let mut parts = std::collections::HashMap::new();
    for part in value.split(',') {
        let (k, v) = part.split_once('=')?;
        parts.insert(k.trim(), v.trim());
    }
    Some(S2sSignature {
        registry: parts.get("registry")?.to_string(),
        key: parts.get("key")?.to_string(),
        ts: parts.get("ts")?.parse().ok()?,
        sig: parts.get("sig")?.to_string(),
    })
}

/// Checks a signature from `keys` (a peer's history) over a request or response.
fn check_s2s(
    header: Option<&HeaderValue>,
    keys: &[KeyEntry],
    method: &str,
    path: &str,
    body: &[u8],
) -> Result<String, Refusal> {
    let bad = |detail: &str| Refusal::new(Code::RequestSignatureInvalid, detail.to_string());
    let sig = header
        .and_then(|v| v.to_str().ok())
        .and_then(parse_s2s)
        .ok_or_else(|| bad("missing or malformed Bazaar-Registry-Signature"))?;
    let entry = key_valid_at(keys, &sig.key, sig.ts)
        .ok_or_else(|| bad("signed by a key the registry did not hold at that time"))?;
    let public = public_key_from_did(&entry.did).map_err(|_| bad("bad key"))?;
    verify(&public, &s2s_message(&sig.registry, method, path, sig.ts, body), &sig.sig)
        .map_err(|_| bad("the signature does not verify"))?;
    Ok(sig.registry)
}

/// The peer registry (as a member) behind a signed request.
async fn s2s_peer(state: &AppState, headers: &HeaderMap, path: &str, body: &[u8]) -> Result<(Member, Peer), Problem> {
    let header = headers.get(S2S_HEADER);
    let sig = header.and_then(|v| v.to_str().ok()).and_then(parse_s2s).ok_or_else(|| {
        Refusal::new(Code::RequestSignatureInvalid, "Send Bazaar-Registry-Signature: registry=…,key=…,ts=…,sig=…")
    })?;
    let peer = peer_of(state, &sig.registry).await?.ok_or_else(|| {
        Refusal::new(Code::PeerUnknown, "This registry does not recognise the calling registry.")
            .with(json!({"registry": sig.registry}))
    })?;
    if (state.now().ms() - sig.ts).unsigned_abs() > FEDERATION_SKEW_S_MAX * 1000 {
        return Err(
            Refusal::new(Code::RequestStale, "The request's timestamp is too far from this registry's clock.").into()
        );
    }
    let registry = match check_s2s(header, &peer.keys, "POST", path, body) {
        Ok(registry) => registry,
        Err(refusal) => match refresh_peer(state, &peer).await {
            Some(fresh) => check_s2s(header, &fresh.keys, "POST", path, body)?,
            None => return Err(refusal.into()),
        },
    };
    if registry != peer.did.as_str() {
        return Err(Refusal::new(Code::RequestSignatureInvalid, "The signature names another registry.").into());
    }
    let member = state
        .store
        .member(&peer.did)
        .await?
        .ok_or_else(|| Refusal::new(Code::PeerUnknown, "No member for the peer."))?;
    Ok((member, peer))
}

// ---- guests ------------------------------------------------------------------------

#[derive(Deserialize, Serialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct GuestRequest {
    /// The agent's did:key (its home registry's member id).
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
#[utoipa::path(post, path = "/v1/federation/guests", request_body = GuestRequest, responses((status = 201, description = "Guest enrolled; its credential")))]
pub async fn join_guest(
    State(state): State<Arc<AppState>>,
    ApiJson(body): ApiJson<GuestRequest>,
) -> Result<Response, Problem> {
    let key = public_key_from_did(&body.did)
        .map_err(|_| Refusal::new(Code::PublicKeyInvalid, "`did` must be a did:key for an Ed25519 key."))?;
    let now = state.now().ms();
    if (now - body.presented_at_ms).unsigned_abs() > FEDERATION_SKEW_S_MAX * 1000 {
        return Err(Refusal::new(Code::RequestStale, "`presented_at_ms` is too far from this registry's clock.")
            .with(json!({"now_ms": now, "skew_s_max": FEDERATION_SKEW_S_MAX}))
            .into());
    }
    let message =
        bazaar_core::federation::guest_message(state.registry.as_str(), &body.did, &body.home, body.presented_at_ms);
    verify(&key, &message, &body.signature)
        .map_err(|_| Refusal::new(Code::ProofInvalid, "The signature does not verify with the DID's key."))?;
    let credential = crate::new_secret_credential();
    let op = Op::EnrollGuest {
        agent: MemberId(body.did.clone()),
        handle: bazaar_core::federation::guest_handle(&body.did),
        credential_hash: sha256_hex(credential.as_bytes()),
        home: MemberId(body.home.clone()),
    };
    let applied = state.store.submit(Command { actor: state.registry_actor(), idem: None, op }).await?;
    let mut receipt = applied.outcome.map_err(Problem::from)?;
    receipt["credential"] = json!(credential);
    Ok((StatusCode::CREATED, Json(receipt)).into_response())
}

// ---- cross-registry settlement: the buyer's registry --------------------------

#[derive(Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct RelayedSettleRequest {
    pub token: String,
    pub amount_minor: u64,
    pub order_id: String,
}

/// Server-to-server: a peer relays the settlement of a token this registry
/// issued. Idempotent by token id; the response is signed.
pub async fn federation_settle(
    State(state): State<Arc<AppState>>,
    headers: HeaderMap,
    body: Bytes,
) -> Result<Response, Problem> {
    let (member, _peer) = s2s_peer(&state, &headers, FEDERATION_SETTLE_PATH, &body).await?;
    let request: RelayedSettleRequest =
        serde_json::from_slice(&body).map_err(|e| Problem::invalid(format!("request body: {e}")))?;
    let amount = bazaar_core::validate::amount(request.amount_minor, "amount_minor")?;
    let claims = state.decode_token(&request.token).map_err(|error| match error {
        token::TokenError::Malformed => Refusal::new(Code::TokenMalformed, "`token` is not an apt_ token."),
        token::TokenError::BadSignature => Refusal::new(
            Code::TokenSignatureInvalid,
            "The token's signature does not verify against this registry's keys.",
        ),
    })?;
    let idem = Idem {
        scope: format!("{}:settle_relayed", member.id),
        key: claims.jti.to_string(),
        fingerprint: sha256_hex(&body),
    };
    let op = Op::SettleRelayed { claims, amount, order_id: OrderId(request.order_id) };
    let response = execute(&state, member, Some(idem), op, StatusCode::OK).await;
    let (mut parts, inner) = response.into_parts();
    let bytes = axum::body::to_bytes(inner, REQUEST_BODY_BYTES_MAX).await.unwrap_or_default();
    let signature = s2s_header(&state, "RESPONSE", FEDERATION_SETTLE_PATH, &bytes);
    parts.headers.insert(S2S_HEADER, HeaderValue::from_str(&signature).expect("ascii header"));
    Ok(Response::from_parts(parts, axum::body::Body::from(bytes)))
}

// ---- cross-registry settlement: the merchant's registry -----------------------

/// A merchant settles a token a peer registry issued: open (or find) the relay, then call the issuer.
pub async fn settle_foreign(
    state: &Arc<AppState>,
    merchant: Member,
    text: &str,
    claims: TokenClaims,
    amount: Amount,
    order_id: &str,
) -> Result<Response, Problem> {
    let peer = peer_of(state, claims.iss.as_str()).await?.ok_or_else(|| {
        Refusal::new(Code::PeerUnknown, "This token was issued by a registry this one does not recognise.")
            .with(json!({"issuer": claims.iss}))
    })?;
    if claims.via.as_ref() != Some(&state.registry) {
        return Err(
            Refusal::new(Code::PeerUnknown, "This token was not issued for settlement through this registry.").into()
        );
    }
    let verified = match crate::keyring::decode_token_with(text, &peer.keys) {
        Ok(claims) => Ok(claims),
        Err(_) => match refresh_peer(state, &peer).await {
            Some(fresh) => crate::keyring::decode_token_with(text, &fresh.keys),
            None => Err(token::TokenError::BadSignature),
        },
    }
    .map_err(|_| {
        Refusal::new(Code::TokenSignatureInvalid, "The token's signature does not verify against its issuer's keys.")
    })?;
    if verified != claims {
        return Err(Refusal::new(Code::TokenSignatureInvalid, "The token changed after signing.").into());
    }
    if claims.ord.as_str() != order_id {
        return Err(Refusal::new(Code::OrderMismatch, "The token was issued for a different order id.")
            .with(json!({"token_order_id": claims.ord, "order_id": order_id}))
            .into());
    }
    let op = Op::RelayOpen { claims: claims.clone(), token: text.to_string(), amount };
    let applied = state.store.submit(Command { actor: merchant, idem: None, op }).await?;
    let view = applied.outcome.map_err(Problem::from)?;
    let row = state.store.doc(DocKind::Relay, claims.jti.as_str()).await?.ok_or_else(|| {
        Problem::new(StatusCode::INTERNAL_SERVER_ERROR, "internal", format!("relay vanished: {view}"))
    })?;
    let relay = Relay::from_row(&row);
    let outcome = match relay.state {
        RelayState::Pending => relay_attempt(state, &relay).await,
        RelayState::Settled => settled_view(state, &relay).await,
        RelayState::Failed => {
            Err(Refusal::new(Code::RelayFailed, "The buyer's registry refused this settlement.").with(relay.view()))
        }
    };
    match outcome {
        Ok(body) => Ok((StatusCode::OK, Json(body)).into_response()),
        Err(refusal) => Err(refusal.into()),
    }
}

/// Verify (a receipt check, never a work order) of a peer's token at the
/// merchant's registry: genuine if a recognised issuer's key signed it for
/// settlement here; its state is the relay's, or `unsettled` if none was opened
/// (only the issuer knows whether it is still open).
pub async fn verify_foreign(
    state: &AppState,
    caller: &Member,
    text: &str,
    claims: TokenClaims,
) -> Result<Value, Problem> {
    if caller.id != claims.aud {
        return Err(Refusal::new(Code::NotAudience, "Only the token's merchant (audience) verifies it here.").into());
    }
    let Some(peer) = peer_of(state, claims.iss.as_str()).await? else {
        return Ok(json!({"genuine": false, "reason": "issued by a registry this one does not recognise"}));
    };
    if claims.via.as_ref() != Some(&state.registry) {
        return Ok(json!({"genuine": false, "reason": "not issued for settlement through this registry"}));
    }
    if crate::keyring::decode_token_with(text, &peer.keys).is_err() {
        return Ok(json!({"genuine": false, "reason": "the signature does not verify against the issuer's keys"}));
    }
    let relay = state.store.doc(DocKind::Relay, claims.jti.as_str()).await?.map(|r| Relay::from_row(&r));
    let token_state = match &relay {
        Some(relay) if relay.state == RelayState::Settled => "settled",
        Some(relay) if relay.state == RelayState::Failed => "refused",
        Some(_) => "settling",
        None => "unsettled",
    };
    Ok(json!({"genuine": true, "state": token_state, "work_order": false, "issuer": claims.iss, "claims": claims,
        "relay": relay.map(|r| r.view())}))
}

async fn settled_view(state: &AppState, relay: &Relay) -> Result<Value, Refusal> {
    let settlement = state
        .store
        .settlement_by_order(&relay.merchant, &relay.order_id)
        .await
        .map_err(|e| Refusal::new(Code::RelayPending, e.to_string()))?
        .ok_or_else(|| Refusal::new(Code::RelayPending, "settled relay without settlement"))?;
    let mut body = bazaar_core::apply::settlement_view(&settlement);
    body["via"] = json!(relay.issuer);
    body["issuer_receipt"] = relay.receipt.clone().unwrap_or(Value::Null);
    Ok(body)
}

/// One call to the issuing registry for a pending relay, and its answer recorded.
pub async fn relay_attempt(state: &Arc<AppState>, relay: &Relay) -> Result<Value, Refusal> {
    let peer = match peer_of(state, relay.issuer.as_str()).await {
        Ok(Some(peer)) => peer,
        _ => return Err(Refusal::new(Code::PeerUnknown, "The issuing registry is no longer recognised.")),
    };
    let body = serde_json::to_vec(&RelayedSettleRequest {
        token: relay.token.clone(),
        amount_minor: relay.amount.0,
        order_id: relay.order_id.to_string(),
    })
    .expect("requests serialize");
    let result = call_issuer(state, &peer, body).await;
    if let RelayResult::Unreachable = &result {
        tracing::warn!(jti = %relay.jti, issuer = %relay.issuer, "relayed settlement: issuer did not answer; will retry");
    }
    let op = Op::RelayFinish {
        jti: relay.jti.clone(),
        merchant: relay.merchant.clone(),
        issuer: relay.issuer.clone(),
        result,
    };
    let applied = state
        .store
        .submit(Command { actor: state.registry_actor(), idem: None, op })
        .await
        .map_err(|e| Refusal::new(Code::RelayPending, format!("storage: {e}")))?;
    applied.outcome?;
    // Answer by the relay's state now: this attempt's result, or an earlier one's.
    let row = state.store.doc(DocKind::Relay, relay.jti.as_str()).await.ok().flatten();
    match row.map(|r| Relay::from_row(&r)) {
        Some(done) if done.state == RelayState::Settled => settled_view(state, &done).await,
        Some(done) if done.state == RelayState::Failed => {
            let why = done.failure.as_ref().map(|f| format!("{}: {}", f.code.as_str(), f.detail)).unwrap_or_default();
            Err(Refusal::new(Code::RelayFailed, format!("The buyer's registry refused this settlement ({why}).")).with(done.view()))
        }
        Some(pending) => Err(Refusal::new(
            Code::RelayPending,
            "The buyer's registry did not answer; the settlement is pending and this registry retries it. Retry the same request later.",
        )
        .with(pending.view())),
        None => Err(Refusal::new(Code::RelayPending, "relay missing")),
    }
}

async fn call_issuer(state: &AppState, peer: &Peer, body: Vec<u8>) -> RelayResult {
    let signature = s2s_header(state, "POST", FEDERATION_SETTLE_PATH, &body);
    let sent = state
        .http
        .post(format!("{}{FEDERATION_SETTLE_PATH}", peer.url))
        .header(S2S_HEADER, signature)
        .header("content-type", "application/json")
        .body(body)
        .send()
        .await;
    let Ok(response) = sent else { return RelayResult::Unreachable };
    let status = response.status();
    let header = response.headers().get(S2S_HEADER).cloned();
    let Ok(bytes) = response.bytes().await else { return RelayResult::Unreachable };
    if status.is_server_error() || status == StatusCode::CONFLICT && is_in_flight(&bytes) {
        return RelayResult::Unreachable;
    }
    let signed = check_s2s(header.as_ref(), &peer.keys, "RESPONSE", FEDERATION_SETTLE_PATH, &bytes).is_ok()
        || match refresh_peer(state, peer).await {
            Some(fresh) => check_s2s(header.as_ref(), &fresh.keys, "RESPONSE", FEDERATION_SETTLE_PATH, &bytes).is_ok(),
            None => false,
        };
    if !signed {
        tracing::warn!(peer = %peer.did, %status, "a peer's answer is not signed by its keys; treated as no answer");
        return RelayResult::Unreachable;
    }
    let Ok(json) = serde_json::from_slice::<Value>(&bytes) else { return RelayResult::Unreachable };
    if status.is_success() {
        return RelayResult::Settled(json);
    }
    let code = json["code"].as_str().unwrap_or_default();
    let code = Code::ALL.iter().copied().find(|c| c.as_str() == code).unwrap_or(Code::RelayFailed);
    let detail = json["detail"].as_str().unwrap_or("refused").to_string();
    RelayResult::Refused(Refusal::new(code, detail).with(json.get("facts").cloned().unwrap_or(Value::Null)))
}

fn is_in_flight(bytes: &[u8]) -> bool {
    serde_json::from_slice::<Value>(bytes).is_ok_and(|v| v["code"] == Code::IdempotencyInFlight.as_str())
}

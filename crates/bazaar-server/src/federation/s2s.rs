//! Server-to-server signatures: the `Bazaar-Registry-Signature` header a
//! registry signs its requests to peers (and its answers) with, and the check
//! of a peer's signature against that peer's key history.

use crate::state::AppState;
use axum::http::HeaderValue;
use bazaar_core::crypto::{public_key_from_did, sign, verify};
use bazaar_core::federation::{key_valid_at, s2s_message, KeyEntry};
use bazaar_core::refusal::{Code, Refusal};

/// The header a registry signs server-to-server requests and responses with:
/// `registry=<did>,key=<key did>,ts=<ms>,sig=<base64url>`.
pub const S2S_HEADER: &str = "bazaar-registry-signature";

pub const FEDERATION_SETTLE_PATH: &str = "/v1/federation/settle";
/// Where a peer presents a netting statement it signed (see `netting`).
pub const FEDERATION_NET_PATH: &str = "/v1/federation/net";

pub(crate) fn s2s_header(state: &AppState, method: &str, path: &str, body: &[u8]) -> String {
    let key = state.signing_key();
    let key_did = bazaar_core::crypto::did_key(&key.verifying_key());
    let ts = state.now().ms();
    let sig = sign(&key, &s2s_message(state.registry.as_str(), method, path, ts, body));
    format!("registry={},key={key_did},ts={ts},sig={sig}", state.registry)
}

pub(crate) struct S2sSignature {
    pub registry: String,
    pub key: String,
    pub ts: i64,
    pub sig: String,
}

pub(crate) fn parse_s2s(value: &str) -> Option<S2sSignature> {
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
pub(crate) fn check_s2s(
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

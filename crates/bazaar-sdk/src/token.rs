//! Offline genuineness check of an `apt_` payment token with the registry's
//! public key (from `/.well-known/bazaar`), without calling the registry.
//!
//! This proves the registry issued the token and shows its claims. It cannot
//! tell whether the token is still open, settled, expired or voided — only the
//! registry knows that, and even "open" is never a work order: settle first.

use base64::Engine;
use ed25519_dalek::{Signature, Verifier, VerifyingKey};

/// Signed prefix; see `docs/integrators.md` for the format.
const SIGNING_DOMAIN: &str = "bazaar-apt-v1.";

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum OfflineError {
    #[error("the registry public key must be 32 bytes, base64url or hex")]
    BadKey,
    #[error("not an apt_ token")]
    Malformed,
    #[error("the signature does not verify: forged or altered")]
    BadSignature,
}

fn b64(text: &str) -> Option<Vec<u8>> {
    base64::engine::general_purpose::URL_SAFE_NO_PAD.decode(text).ok()
}

/// Verifies `token` against `registry_public_key` (base64url or 64 hex chars)
/// and returns its claims.
pub fn verify_offline(token: &str, registry_public_key: &str) -> Result<bazaar_wire::pay::TokenClaims, OfflineError> {
    let key_bytes =
        if registry_public_key.len() == 64 { hex::decode(registry_public_key).ok() } else { b64(registry_public_key) };
    let key: [u8; 32] = key_bytes.and_then(|b| b.try_into().ok()).ok_or(OfflineError::BadKey)?;
    let key = VerifyingKey::from_bytes(&key).map_err(|_| OfflineError::BadKey)?;
    let (payload, signature) =
        token.strip_prefix("apt_").and_then(|t| t.split_once('.')).ok_or(OfflineError::Malformed)?;
    let signature: [u8; 64] = b64(signature).and_then(|b| b.try_into().ok()).ok_or(OfflineError::Malformed)?;
    key.verify(format!("{SIGNING_DOMAIN}{payload}").as_bytes(), &Signature::from_bytes(&signature))
        .map_err(|_| OfflineError::BadSignature)?;
    claims_unverified(token).ok_or(OfflineError::Malformed)
}

/// A token's claims, read WITHOUT checking the signature: for routing (which
/// order a request is about) before the registry checks it. Never trust them.
pub fn claims_unverified(token: &str) -> Option<bazaar_wire::pay::TokenClaims> {
    let payload = token.strip_prefix("apt_")?.split_once('.')?.0;
    serde_json::from_slice(&b64(payload)?).ok()
}

//! Keys, `did:key` identifiers and hashing. Ed25519 only.

use base64::Engine;
use ed25519_dalek::{Signature, Signer, SigningKey, Verifier, VerifyingKey};
use sha2::{Digest, Sha256};

/// Multicodec prefix for an Ed25519 public key (0xed, varint-encoded).
const ED25519_MULTICODEC: [u8; 2] = [0xed, 0x01];

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum KeyError {
    #[error("not a did:key for an Ed25519 public key")]
    BadDid,
    #[error("public key must be 32 bytes of hex or base64url")]
    BadPublicKey,
    #[error("signature does not verify")]
    BadSignature,
}

pub fn sha256_hex(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

/// `did:key:z…` for an Ed25519 public key (multibase base58btc of multicodec + key).
pub fn did_key(public: &VerifyingKey) -> String {
    let mut bytes = Vec::with_capacity(34);
    bytes.extend_from_slice(&ED25519_MULTICODEC);
    bytes.extend_from_slice(public.as_bytes());
    format!("did:key:z{}", bs58::encode(bytes).into_string())
}

pub fn public_key_from_did(did: &str) -> Result<VerifyingKey, KeyError> {
    let encoded = did.strip_prefix("did:key:z").ok_or(KeyError::BadDid)?;
    let bytes = bs58::decode(encoded).into_vec().map_err(|_| KeyError::BadDid)?;
    if bytes.len() != 34 || bytes[..2] != ED25519_MULTICODEC {
        return Err(KeyError::BadDid);
    }
    let raw: [u8; 32] = bytes[2..].try_into().map_err(|_| KeyError::BadDid)?;
    VerifyingKey::from_bytes(&raw).map_err(|_| KeyError::BadDid)
}

/// Parses a public key given as 64 hex chars or unpadded base64url.
pub fn parse_public_key(text: &str) -> Result<VerifyingKey, KeyError> {
    let bytes = if text.len() == 64 {
        hex::decode(text).map_err(|_| KeyError::BadPublicKey)?
    } else {
        b64url_decode(text).map_err(|_| KeyError::BadPublicKey)?
    };
    let raw: [u8; 32] = bytes.try_into().map_err(|_| KeyError::BadPublicKey)?;
    VerifyingKey::from_bytes(&raw).map_err(|_| KeyError::BadPublicKey)
}

pub fn b64url(bytes: &[u8]) -> String {
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
}

pub fn b64url_decode(text: &str) -> Result<Vec<u8>, base64::DecodeError> {
    base64::engine::general_purpose::URL_SAFE_NO_PAD.decode(text)
}

pub fn sign(key: &SigningKey, message: &[u8]) -> String {
    b64url(&key.sign(message).to_bytes())
}

pub fn verify(public: &VerifyingKey, message: &[u8], signature_b64url: &str) -> Result<(), KeyError> {
    let bytes = b64url_decode(signature_b64url).map_err(|_| KeyError::BadSignature)?;
    let raw: [u8; 64] = bytes.try_into().map_err(|_| KeyError::BadSignature)?;
    public.verify(message, &Signature::from_bytes(&raw)).map_err(|_| KeyError::BadSignature)
}

/// Whether the `did:key` `did` signed `message` (signature base64url, unpadded).
pub fn did_signed(did: &str, message: &[u8], signature_b64url: &str) -> bool {
    public_key_from_did(did).is_ok_and(|key| verify(&key, message, signature_b64url).is_ok())
}

/// The message an agent signs to prove it holds the key it registers with an invite.
pub fn invite_proof_message(invite_code: &str, handle: &str) -> Vec<u8> {
    format!("bazaar-invite-v1\n{invite_code}\n{handle}").into_bytes()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn did_key_round_trips() {
        let key = SigningKey::from_bytes(&[7u8; 32]);
        let did = did_key(&key.verifying_key());
        assert!(did.starts_with("did:key:z6Mk"), "{did}");
        assert_eq!(public_key_from_did(&did).unwrap(), key.verifying_key());
    }

    #[test]
    fn did_key_matches_the_w3c_test_vector() {
        // From the did:key spec: a published Ed25519 example key.
        let did = "did:key:z6MkiTBz1ymuepAQ4HEHYSF1H8quG5GLVVQR3djdX3mDooWp";
        assert!(public_key_from_did(did).is_ok());
        assert_eq!(did_key(&public_key_from_did(did).unwrap()), did);
    }

    #[test]
    fn bad_dids_are_refused() {
        assert_eq!(public_key_from_did("did:web:x"), Err(KeyError::BadDid));
        assert_eq!(public_key_from_did("did:key:z111"), Err(KeyError::BadDid));
    }

    #[test]
    fn signatures_verify_and_tampering_fails() {
        let key = SigningKey::from_bytes(&[9u8; 32]);
        let sig = sign(&key, b"hello");
        assert!(verify(&key.verifying_key(), b"hello", &sig).is_ok());
        assert!(verify(&key.verifying_key(), b"hellp", &sig).is_err());
    }
}

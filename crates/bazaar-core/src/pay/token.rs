//! Payment tokens: registry-signed attestations a merchant can check offline.
//!
//! Format: `apt_` + base64url(claims JSON) + `.` + base64url(Ed25519 signature)
//! where the signature covers the ASCII bytes `bazaar-apt-v1.` + base64url(claims JSON).
//! Claims: `v` (1), `iss` (registry DID), `jti`, `sub` (buyer DID), `aud` (merchant
//! DID), `max` (minor units), `ord` (order id), `res` (resource), `iat_ms`, `exp_ms`.
//! A genuine signature says the registry issued the token; only the registry
//! knows whether it is still open, settled, expired or voided.

use crate::crypto::{b64url, b64url_decode, sign, verify};
use bazaar_types::limits::TOKEN_LEN_MAX;
use bazaar_types::{Amount, MemberId, OrderId, Timestamp, TokenId};
use ed25519_dalek::{SigningKey, VerifyingKey};
use serde::{Deserialize, Serialize};

pub const TOKEN_PREFIX: &str = "apt_";
const SIGNING_DOMAIN: &str = "bazaar-apt-v1.";

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TokenClaims {
    pub v: u8,
    pub iss: MemberId,
    pub jti: TokenId,
    pub sub: MemberId,
    pub aud: MemberId,
    pub max: Amount,
    pub ord: OrderId,
    pub res: String,
    pub iat_ms: Timestamp,
    pub exp_ms: Timestamp,
    /// Cross-registry tokens only: the peer registry the merchant settles
    /// through. Absent on local tokens, whose bytes are unchanged by it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub via: Option<MemberId>,
}

#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum TokenError {
    #[error("token is not of the form apt_<claims>.<signature>")]
    Malformed,
    #[error("token signature does not verify against the registry key")]
    BadSignature,
}

pub fn encode(claims: &TokenClaims, key: &SigningKey) -> String {
    let payload = b64url(&serde_json::to_vec(claims).expect("claims serialize"));
    let signature = sign(key, format!("{SIGNING_DOMAIN}{payload}").as_bytes());
    format!("{TOKEN_PREFIX}{payload}.{signature}")
}

/// Reads the claims without checking the signature: only to learn which
/// registry (and which of its keys) to check the signature with.
pub fn peek(token: &str) -> Result<TokenClaims, TokenError> {
    if token.len() > TOKEN_LEN_MAX {
        return Err(TokenError::Malformed);
    }
    let body = token.strip_prefix(TOKEN_PREFIX).ok_or(TokenError::Malformed)?;
    let (payload, _) = body.split_once('.').ok_or(TokenError::Malformed)?;
    let bytes = b64url_decode(payload).map_err(|_| TokenError::Malformed)?;
    let claims: TokenClaims = serde_json::from_slice(&bytes).map_err(|_| TokenError::Malformed)?;
    if claims.v != 1 {
        return Err(TokenError::Malformed);
    }
    Ok(claims)
}

/// Checks only the signature of a token already read with [`peek`].
pub fn check_signature(token: &str, registry_key: &VerifyingKey) -> Result<(), TokenError> {
    let body = token.strip_prefix(TOKEN_PREFIX).ok_or(TokenError::Malformed)?;
    let (payload, signature) = body.split_once('.').ok_or(TokenError::Malformed)?;
    verify(registry_key, format!("{SIGNING_DOMAIN}{payload}").as_bytes(), signature)
        .map_err(|_| TokenError::BadSignature)
}

/// Checks shape and signature; says nothing about the token's state.
pub fn decode(token: &str, registry_key: &VerifyingKey) -> Result<TokenClaims, TokenError> {
    if token.len() > TOKEN_LEN_MAX {
        return Err(TokenError::Malformed);
    }
    let body = token.strip_prefix(TOKEN_PREFIX).ok_or(TokenError::Malformed)?;
    let (payload, signature) = body.split_once('.').ok_or(TokenError::Malformed)?;
    let bytes = b64url_decode(payload).map_err(|_| TokenError::Malformed)?;
    let claims: TokenClaims = serde_json::from_slice(&bytes).map_err(|_| TokenError::Malformed)?;
    if claims.v != 1 {
        return Err(TokenError::Malformed);
    }
    verify(registry_key, format!("{SIGNING_DOMAIN}{payload}").as_bytes(), signature)
        .map_err(|_| TokenError::BadSignature)?;
    Ok(claims)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn claims() -> TokenClaims {
        TokenClaims {
            v: 1,
            iss: "did:key:zReg".into(),
            jti: "tok_1".into(),
            sub: "did:key:zBuyer".into(),
            aud: "did:key:zMerchant".into(),
            max: Amount(250),
            ord: "order-1".into(),
            res: "https://shop/restock".into(),
            iat_ms: Timestamp(1),
            exp_ms: Timestamp(900_001),
            via: None,
        }
    }

    proptest::proptest! {
        /// Untrusted input never panics the decoder, and only the registry's
        /// signature over the exact bytes decodes.
        #[test]
        fn decode_is_total_on_arbitrary_input(text in ".{0,600}", flip in 0usize..600) {
            let key = SigningKey::from_bytes(&[1u8; 32]);
            let _ = decode(&text, &key.verifying_key());
            let _ = decode(&format!("apt_{text}"), &key.verifying_key());
            let token = encode(&claims(), &key);
            let mut bytes = token.clone().into_bytes();
            let at = 4 + flip % (bytes.len() - 4);
            bytes[at] = if bytes[at] == b'A' { b'B' } else { b'A' };
            let altered = String::from_utf8(bytes).unwrap();
            proptest::prop_assert!(altered == token || decode(&altered, &key.verifying_key()).is_err());
        }

        #[test]
        fn key_parsers_are_total(text in ".{0,200}") {
            let _ = crate::crypto::parse_public_key(&text);
            let _ = crate::crypto::public_key_from_did(&text);
            let _ = crate::crypto::public_key_from_did(&format!("did:key:z{text}"));
        }
    }

    #[test]
    fn round_trip() {
        let key = SigningKey::from_bytes(&[1u8; 32]);
        let token = encode(&claims(), &key);
        assert!(token.starts_with("apt_"));
        assert_eq!(decode(&token, &key.verifying_key()), Ok(claims()));
    }

    #[test]
    fn altered_or_forged_tokens_fail() {
        let key = SigningKey::from_bytes(&[1u8; 32]);
        let other = SigningKey::from_bytes(&[2u8; 32]);
        let token = encode(&claims(), &key);
        assert_eq!(decode(&encode(&claims(), &other), &key.verifying_key()), Err(TokenError::BadSignature));
        let mut raised = claims();
        raised.max = Amount(25_000);
        let payload = b64url(&serde_json::to_vec(&raised).unwrap());
        let signature = token.split_once('.').unwrap().1;
        let altered = format!("apt_{payload}.{signature}");
        assert_eq!(decode(&altered, &key.verifying_key()), Err(TokenError::BadSignature));
        assert_eq!(decode("apt_nope", &key.verifying_key()), Err(TokenError::Malformed));
        assert_eq!(decode("xyz", &key.verifying_key()), Err(TokenError::Malformed));
    }
}

//! Verifiable credentials (W3C VC 2.0) secured with a Data Integrity proof of the
//! `eddsa-jcs-2022` cryptosuite: sign, verify, and check the validity window.
//!
//! This is what a passport is made of. The proof signs
//! `SHA-256(JCS(proof options)) ‖ SHA-256(JCS(credential without proof))` with Ed25519,
//! where JCS is RFC 8785 canonical JSON, so no JSON-LD processing is needed and a
//! browser can check the same bytes with WebCrypto. Keys are `did:key` (Ed25519), the
//! proof's verification method is `did:key:z6Mk…#z6Mk…`.
//!
//! Canonical JSON agrees across languages only on a subset of JSON, so this module
//! signs and accepts only that subset: integers within ±(2^53 − 1) (no fractions or
//! exponents; money is a decimal string) and ASCII object keys (`serde_json` and JCS
//! would otherwise order keys differently: UTF-8 bytes against UTF-16 units).
//!
//! Nothing here reads a clock: times are passed in as milliseconds since the epoch.

use crate::crypto::{did_key, public_key_from_did};
use bazaar_types::limits::{PASSPORT_DEPTH_MAX, PASSPORT_INTEGER_MAX};
use ed25519_dalek::{Signature, Signer, SigningKey, VerifyingKey};
use serde_json::{Map, Value};
use sha2::{Digest, Sha256};

pub const PROOF_TYPE: &str = "DataIntegrityProof";
pub const CRYPTOSUITE: &str = "eddsa-jcs-2022";
pub const PROOF_PURPOSE: &str = "assertionMethod";

/// A JSON object's members.
type Fields = Map<String, Value>;

/// Why a credential was refused. Each variant has a stable machine [`code`](VcError::code).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum VcError {
    #[error("the credential is not well-formed: {0}")]
    Malformed(String),
    #[error("the proof must be a DataIntegrityProof of cryptosuite eddsa-jcs-2022")]
    Cryptosuite,
    #[error("the proof's purpose must be assertionMethod")]
    ProofPurpose,
    #[error("the credential's @context must start with the proof's @context, in order")]
    Context,
    #[error("the verification method must be did:key:z6Mk…#z6Mk… naming one Ed25519 key")]
    VerificationMethod,
    #[error("the signature does not verify: the credential changed after signing, or another key signed it")]
    ProofInvalid,
    #[error("the issuer is not the DID whose key signed the credential")]
    IssuerMismatch,
    #[error("the credential is not valid before {valid_from}")]
    NotYetValid { valid_from: String },
    #[error("the credential expired at {valid_until}")]
    Expired { valid_until: String },
}

impl VcError {
    /// Stable snake_case code: codes are added, never renamed.
    pub fn code(&self) -> &'static str {
        match self {
            VcError::Malformed(_) => "passport_malformed",
            VcError::Cryptosuite => "passport_cryptosuite",
            VcError::ProofPurpose => "passport_proof_purpose",
            VcError::Context => "passport_context",
            VcError::VerificationMethod => "passport_verification_method",
            VcError::ProofInvalid => "passport_proof_invalid",
            VcError::IssuerMismatch => "passport_issuer_mismatch",
            VcError::NotYetValid { .. } => "passport_not_yet_valid",
            VcError::Expired { .. } => "passport_expired",
        }
    }
}

fn malformed(what: impl Into<String>) -> VcError {
    VcError::Malformed(what.into())
}

/// What a verified proof tells: who signed, and when the proof says it was made.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verified {
    /// The `did:key` of the signing key: the part of `verificationMethod` before `#`.
    pub issuer_did: String,
    /// The proof's `created`, as written.
    pub created: String,
}

/// The verification method for an Ed25519 key: `did:key:z6Mk…#z6Mk…`, the DID and its key again as fragment.
pub fn did_key_verification_method(key: &VerifyingKey) -> String {
    let did = did_key(key);
    let fragment = &did["did:key:".len()..];
    format!("{did}#{fragment}")
}

/// Signs `document` (a credential without a proof) and returns it with a `proof`.
///
/// `verification_method` must be `did:key:z…#z…` naming `key`'s public key (the only
/// form [`verify_eddsa_jcs_2022`] accepts; see [`did_key_verification_method`]), and
/// `created` an RFC 3339 UTC time
/// `YYYY-MM-DDTHH:MM:SSZ`.
pub fn sign_eddsa_jcs_2022(
    document: &Value,
    key: &SigningKey,
    verification_method: &str,
    created: &str,
) -> Result<Value, VcError> {
    let Value::Object(fields) = document else { return Err(malformed("a credential is a JSON object")) };
    if fields.contains_key("proof") {
        return Err(malformed("the credential already has a proof; proof sets are not supported"));
    }
    check_canonical_subset(document)?;
    if ms_from_rfc3339(created).is_none() {
        return Err(malformed("created must be YYYY-MM-DDTHH:MM:SSZ"));
    }
    if key_from_verification_method(verification_method)? != key.verifying_key() {
        return Err(VcError::VerificationMethod);
    }
    let context = fields.get("@context").ok_or_else(|| malformed("the credential has no @context"))?;
    let mut proof = Map::new();
    proof.insert("type".into(), PROOF_TYPE.into());
    proof.insert("cryptosuite".into(), CRYPTOSUITE.into());
    proof.insert("created".into(), created.into());
    proof.insert("verificationMethod".into(), verification_method.into());
    proof.insert("proofPurpose".into(), PROOF_PURPOSE.into());
    proof.insert("@context".into(), context.clone());
    let signature = key.sign(&hash_parts(&proof, fields)?);
    proof.insert("proofValue".into(), format!("z{}", bs58::encode(signature.to_bytes()).into_string()).into());
    let mut signed = fields.clone();
    signed.insert("proof".into(), Value::Object(proof));
    Ok(Value::Object(signed))
}

/// Checks the proof of a signed credential: its shape, cryptosuite, purpose and
/// `@context` prefix, the `did:key` verification method, and the Ed25519 signature
/// (`verify_strict`). Says nothing about the issuer or the validity window; most
/// callers want [`verify_eddsa_jcs_2022`].
pub fn verify_proof(document: &Value) -> Result<Verified, VcError> {
    let (fields, proof) = split_proof(document)?;
    check_canonical_subset(document)?;
    if proof.get("type") != Some(&Value::from(PROOF_TYPE))
        || proof.get("cryptosuite") != Some(&Value::from(CRYPTOSUITE))
    {
        return Err(VcError::Cryptosuite);
    }
    if proof.get("proofPurpose") != Some(&Value::from(PROOF_PURPOSE)) {
        return Err(VcError::ProofPurpose);
    }
    let created = proof.get("created").and_then(Value::as_str).ok_or_else(|| malformed("proof.created"))?;
    check_context_prefix(fields, proof)?;
    let method = proof.get("verificationMethod").and_then(Value::as_str).ok_or(VcError::VerificationMethod)?;
    let public = key_from_verification_method(method)?;
    let signature = decode_proof_value(proof)?;
    let mut config = proof.clone();
    config.remove("proofValue");
    let hash = hash_parts(&config, fields)?;
    public.verify_strict(&hash, &signature).map_err(|_| VcError::ProofInvalid)?;
    let issuer_did = method.split_once('#').map_or(method, |(did, _)| did).to_string();
    Ok(Verified { issuer_did, created: created.to_string() })
}

/// [`verify_proof`], then checks that the credential's `issuer` (a string, or an
/// object with `id`) is the DID whose key signed it. Does not check the validity
/// window: see [`check_validity`].
pub fn verify_eddsa_jcs_2022(document: &Value) -> Result<Verified, VcError> {
    let verified = verify_proof(document)?;
    let issuer = match document.get("issuer") {
        Some(Value::String(id)) => id.as_str(),
        Some(Value::Object(issuer)) => {
            issuer.get("id").and_then(Value::as_str).ok_or_else(|| malformed("issuer.id"))?
        }
        _ => return Err(malformed("issuer must be a DID or an object with an id")),
    };
    if issuer != verified.issuer_did {
        return Err(VcError::IssuerMismatch);
    }
    Ok(verified)
}

/// `validFrom <= now < validUntil`. Both must be present (a passport always has a
/// window) and written `YYYY-MM-DDTHH:MM:SSZ`.
pub fn check_validity(document: &Value, now_ms: i64) -> Result<(), VcError> {
    let bound = |name: &str| -> Result<(String, i64), VcError> {
        let text = document.get(name).and_then(Value::as_str).ok_or_else(|| malformed(format!("{name} is missing")))?;
        let ms = ms_from_rfc3339(text).ok_or_else(|| malformed(format!("{name} must be YYYY-MM-DDTHH:MM:SSZ")))?;
        Ok((text.to_string(), ms))
    };
    let (valid_from, from_ms) = bound("validFrom")?;
    let (valid_until, until_ms) = bound("validUntil")?;
    if now_ms < from_ms {
        return Err(VcError::NotYetValid { valid_from });
    }
    if now_ms >= until_ms {
        return Err(VcError::Expired { valid_until });
    }
    Ok(())
}

/// The 64 bytes a signed credential's proof signs:
/// `SHA-256(JCS(proof without proofValue)) ‖ SHA-256(JCS(credential without proof))`.
pub fn hash_data(document: &Value) -> Result<[u8; 64], VcError> {
    let (fields, proof) = split_proof(document)?;
    check_canonical_subset(document)?;
    let mut config = proof.clone();
    config.remove("proofValue");
    hash_parts(&config, fields)
}

/// RFC 8785 canonical bytes of a value in the subset this module accepts.
pub fn jcs(value: &Value) -> Result<Vec<u8>, VcError> {
    check_canonical_subset(value)?;
    serde_json_canonicalizer::to_vec(value).map_err(|error| malformed(format!("canonical JSON: {error}")))
}

/// Hashes the proof configuration and the credential; `fields` may still hold its
/// `proof`, which is left out.
fn hash_parts(proof_config: &Fields, fields: &Fields) -> Result<[u8; 64], VcError> {
    let mut unsecured = fields.clone();
    unsecured.remove("proof");
    let config_bytes = serde_json_canonicalizer::to_vec(proof_config).map_err(|e| malformed(e.to_string()))?;
    let document_bytes = serde_json_canonicalizer::to_vec(&unsecured).map_err(|e| malformed(e.to_string()))?;
    let mut hash = [0u8; 64];
    hash[..32].copy_from_slice(&Sha256::digest(config_bytes));
    hash[32..].copy_from_slice(&Sha256::digest(document_bytes));
    Ok(hash)
}

/// The credential's members (still holding `proof`) and its one proof's members.
fn split_proof(document: &Value) -> Result<(&Fields, &Fields), VcError> {
    let Value::Object(fields) = document else { return Err(malformed("a credential is a JSON object")) };
    match fields.get("proof") {
        Some(Value::Object(proof)) => Ok((fields, proof)),
        Some(_) => Err(malformed("proof must be one object; proof sets are not supported")),
        None => Err(malformed("the credential has no proof")),
    }
}

/// The document's `@context` must start with the proof's, in order (when the proof has one).
fn check_context_prefix(fields: &Fields, proof: &Fields) -> Result<(), VcError> {
    let Some(proof_context) = proof.get("@context") else { return Ok(()) };
    let as_list = |context: &Value| match context {
        Value::Array(items) => Some(items.clone()),
        Value::String(_) => Some(vec![context.clone()]),
        _ => None,
    };
    let prefix = as_list(proof_context).ok_or(VcError::Context)?;
    let context = fields.get("@context").and_then(as_list).ok_or(VcError::Context)?;
    if prefix.is_empty() || !context.starts_with(&prefix) {
        return Err(VcError::Context);
    }
    Ok(())
}

/// `did:key:z6Mk…#z6Mk…` with the fragment naming the same key as the DID.
fn key_from_verification_method(method: &str) -> Result<VerifyingKey, VcError> {
    let (did, fragment) = method.split_once('#').ok_or(VcError::VerificationMethod)?;
    if did.strip_prefix("did:key:") != Some(fragment) {
        return Err(VcError::VerificationMethod);
    }
    let key = public_key_from_did(did).map_err(|_| VcError::VerificationMethod)?;
    // A DID that decodes but is not in canonical form (leading zeros, say) would name one key two ways.
    if did_key(&key) != did {
        return Err(VcError::VerificationMethod);
    }
    Ok(key)
}

fn decode_proof_value(proof: &Fields) -> Result<Signature, VcError> {
    let text = proof.get("proofValue").and_then(Value::as_str).ok_or_else(|| malformed("proof.proofValue"))?;
    let encoded = text.strip_prefix('z').ok_or_else(|| malformed("proofValue must be base58btc (a 'z' prefix)"))?;
    let bytes = bs58::decode(encoded).into_vec().map_err(|_| malformed("proofValue is not base58btc"))?;
    let raw: [u8; 64] = bytes.try_into().map_err(|_| malformed("proofValue must hold 64 bytes"))?;
    Ok(Signature::from_bytes(&raw))
}

/// Refuses what JCS implementations do not agree on: numbers that are not safe
/// integers, non-ASCII object keys, and nesting past `PASSPORT_DEPTH_MAX`.
fn check_canonical_subset(value: &Value) -> Result<(), VcError> {
    check_subset_at(value, 0)
}

fn check_subset_at(value: &Value, depth: usize) -> Result<(), VcError> {
    if depth > PASSPORT_DEPTH_MAX {
        return Err(malformed(format!("nested deeper than {PASSPORT_DEPTH_MAX}")));
    }
    match value {
        Value::Number(number) => match number.as_i64() {
            Some(n) if n.unsigned_abs() <= PASSPORT_INTEGER_MAX => Ok(()),
            _ => Err(malformed(format!("{number} is not an integer within ±(2^53 − 1); write it as a string"))),
        },
        Value::Array(items) => items.iter().try_for_each(|item| check_subset_at(item, depth + 1)),
        Value::Object(fields) => fields.iter().try_for_each(|(key, item)| {
            if !key.is_ascii() {
                return Err(malformed(format!("object key {key:?} is not ASCII")));
            }
            check_subset_at(item, depth + 1)
        }),
        Value::Null | Value::Bool(_) | Value::String(_) => Ok(()),
    }
}

// ---- RFC 3339 UTC times, to the second ------------------------------------------

const MS_PER_DAY: i64 = 86_400_000;
/// 0000-01-01T00:00:00Z and 9999-12-31T23:59:59Z: the range a four-digit year can write.
const RFC3339_MS_MIN: i64 = -62_167_219_200_000;
const RFC3339_MS_MAX: i64 = 253_402_300_799_000;

/// `YYYY-MM-DDTHH:MM:SSZ` for a time in ms since the epoch, rounded down to the second
/// and held within years 0000..=9999.
pub fn rfc3339_from_ms(ms: i64) -> String {
    let ms = ms.clamp(RFC3339_MS_MIN, RFC3339_MS_MAX);
    let (year, month, day) = civil_from_days(ms.div_euclid(MS_PER_DAY));
    let second_of_day = ms.rem_euclid(MS_PER_DAY) / 1000;
    let (hour, minute, second) = (second_of_day / 3600, second_of_day / 60 % 60, second_of_day % 60);
    format!("{year:04}-{month:02}-{day:02}T{hour:02}:{minute:02}:{second:02}Z")
}

/// Parses exactly `YYYY-MM-DDTHH:MM:SSZ` (UTC, no fraction, no offset, no leap second).
pub fn ms_from_rfc3339(text: &str) -> Option<i64> {
    let bytes = text.as_bytes();
    let shape_ok = bytes.len() == 20
        && bytes.iter().enumerate().all(|(i, &b)| match i {
            4 | 7 => b == b'-',
            10 => b == b'T',
            13 | 16 => b == b':',
            19 => b == b'Z',
            _ => b.is_ascii_digit(),
        });
    if !shape_ok {
        return None;
    }
    let field = |from: usize, to: usize| text[from..to].parse::<i64>().ok();
    let (year, month, day) = (field(0, 4)?, field(5, 7)?, field(8, 10)?);
    let (hour, minute, second) = (field(11, 13)?, field(14, 16)?, field(17, 19)?);
    let date_ok = (1..=12).contains(&month) && (1..=days_in_month(year, month)).contains(&day);
    if !date_ok || hour > 23 || minute > 59 || second > 59 {
        return None;
    }
    let days = days_from_civil(year, month, day);
    Some(days * MS_PER_DAY + ((hour * 60 + minute) * 60 + second) * 1000)
}

fn days_in_month(year: i64, month: i64) -> i64 {
    let leap = (year % 4 == 0 && year % 100 != 0) || year % 400 == 0;
    match month {
        2 if leap => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

/// Days since 1970-01-01 of a proleptic Gregorian date (eras of 400 years from March 1st).
fn days_from_civil(year: i64, month: i64, day: i64) -> i64 {
    let year = if month <= 2 { year - 1 } else { year };
    let era = year.div_euclid(400);
    let year_of_era = year - era * 400;
    let day_of_year = (153 * ((month + 9) % 12) + 2) / 5 + day - 1;
    let day_of_era = year_of_era * 365 + year_of_era / 4 - year_of_era / 100 + day_of_year;
    era * 146_097 + day_of_era - 719_468
}

/// The inverse of [`days_from_civil`].
fn civil_from_days(days: i64) -> (i64, i64, i64) {
    let days = days + 719_468;
    let era = days.div_euclid(146_097);
    let day_of_era = days - era * 146_097;
    let year_of_era = (day_of_era - day_of_era / 1460 + day_of_era / 36_524 - day_of_era / 146_096) / 365;
    let day_of_year = day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
    let shifted_month = (5 * day_of_year + 2) / 153;
    let day = day_of_year - (153 * shifted_month + 2) / 5 + 1;
    let month = if shifted_month < 10 { shifted_month + 3 } else { shifted_month - 9 };
    let year = year_of_era + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn times_format_and_parse_at_known_points() {
        for (ms, text) in [
            (0, "1970-01-01T00:00:00Z"),
            (1_700_000_000_000, "2023-11-14T22:13:20Z"),
            (1_709_164_800_000, "2024-02-29T00:00:00Z"),
            (951_782_400_000, "2000-02-29T00:00:00Z"),
            (-1, "1969-12-31T23:59:59Z"),
            (RFC3339_MS_MIN, "0000-01-01T00:00:00Z"),
            (RFC3339_MS_MAX, "9999-12-31T23:59:59Z"),
        ] {
            assert_eq!(rfc3339_from_ms(ms), text);
            assert_eq!(ms_from_rfc3339(text), Some(ms.div_euclid(1000) * 1000), "{text}");
        }
        assert_eq!(rfc3339_from_ms(1_700_000_000_999), "2023-11-14T22:13:20Z", "rounds down to the second");
        assert_eq!(rfc3339_from_ms(i64::MAX), "9999-12-31T23:59:59Z");
        assert_eq!(rfc3339_from_ms(i64::MIN), "0000-01-01T00:00:00Z");
    }

    #[test]
    fn times_outside_the_one_shape_are_refused() {
        for text in [
            "2023-02-29T00:00:00Z",
            "1900-02-29T00:00:00Z",
            "2023-04-31T00:00:00Z",
            "2023-13-01T00:00:00Z",
            "2023-00-01T00:00:00Z",
            "2023-01-00T00:00:00Z",
            "2023-01-01T24:00:00Z",
            "2023-01-01T00:60:00Z",
            "2023-01-01T00:00:60Z",
            "2023-01-01T00:00:00.000Z",
            "2023-01-01T00:00:00+00:00",
            "2023-01-01t00:00:00z",
            "2023-01-01 00:00:00Z",
            "+023-01-01T00:00:00Z",
            "２023-01-01T00:00:00Z",
            "",
        ] {
            assert_eq!(ms_from_rfc3339(text), None, "{text}");
        }
    }

    proptest! {
        #[test]
        fn times_round_trip(seconds in RFC3339_MS_MIN / 1000..=RFC3339_MS_MAX / 1000) {
            let text = rfc3339_from_ms(seconds * 1000);
            prop_assert_eq!(ms_from_rfc3339(&text), Some(seconds * 1000));
        }

        #[test]
        fn parsing_never_panics(text in "\\PC{0,24}") {
            let _ = ms_from_rfc3339(&text);
        }
    }

    #[test]
    fn only_safe_integers_and_ascii_keys_are_canonical() {
        let check = |text: &str| check_canonical_subset(&serde_json::from_str(text).unwrap()).map_err(|e| e.code());
        assert_eq!(check(r#"{"a":[9007199254740991,-9007199254740991,0],"b":{"c":"été"}}"#), Ok(()));
        for refused in [
            "9007199254740992",
            "-9007199254740992",
            "18446744073709551615",
            "1.5",
            "1.0",
            "1e2",
            r#"{"é":1}"#,
            r#"[{"a":{"ü":true}}]"#,
        ] {
            assert_eq!(check(refused), Err("passport_malformed"), "{refused}");
        }
        let mut deep = Value::Null;
        for _ in 0..=PASSPORT_DEPTH_MAX {
            deep = Value::Array(vec![deep]);
        }
        assert_eq!(check_canonical_subset(&deep).map_err(|e| e.code()), Err("passport_malformed"));
    }

    #[test]
    fn codes_are_stable_snake_case() {
        let all = [
            VcError::Malformed(String::new()),
            VcError::Cryptosuite,
            VcError::ProofPurpose,
            VcError::Context,
            VcError::VerificationMethod,
            VcError::ProofInvalid,
            VcError::IssuerMismatch,
            VcError::NotYetValid { valid_from: String::new() },
            VcError::Expired { valid_until: String::new() },
        ];
        let codes: Vec<&str> = all.iter().map(VcError::code).collect();
        for code in &codes {
            assert!(code.starts_with("passport_") && code.bytes().all(|b| b.is_ascii_lowercase() || b == b'_'));
        }
        let mut unique = codes.clone();
        unique.sort();
        unique.dedup();
        assert_eq!(unique.len(), codes.len());
    }
}

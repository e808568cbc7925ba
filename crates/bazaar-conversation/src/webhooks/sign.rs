//! Standard Webhooks v1 (symmetric): `whsec_` secrets, the signed content
//! `{id}.{timestamp}.{body}`, `v1,<base64 HMAC-SHA256>` signatures, and the
//! retry schedule, and the receiver's check (`verify`). Sans-IO: no clock, no network.

use base64::engine::general_purpose::STANDARD;
use base64::Engine as _;
use bazaar_types::Entropy;
use hmac::{Hmac, Mac};
use sha2::Sha256;

/// The prefix of a Standard Webhooks symmetric secret.
pub const SECRET_PREFIX: &str = "whsec_";
/// Random bytes in a secret we draw (the spec asks 24 to 64).
pub const SECRET_BYTES: usize = 32;

/// Seconds to wait before each retry: the n-th entry after the n-th failed
/// attempt (the first attempt is immediate). Eight attempts over about 28
/// hours, then the delivery is dead-lettered (the schedule Svix publishes).
pub const RETRY_SCHEDULE_S: [u64; 7] = [5, 5 * 60, 30 * 60, 2 * 3600, 5 * 3600, 10 * 3600, 10 * 3600];
/// Attempts a delivery gets before it is dead-lettered.
pub const ATTEMPTS_MAX: u32 = RETRY_SCHEDULE_S.len() as u32 + 1;

/// A fresh `whsec_…` secret from the injected randomness.
pub fn new_secret(entropy: &dyn Entropy) -> String {
    let mut bytes = [0u8; SECRET_BYTES];
    entropy.fill(&mut bytes);
    format!("{SECRET_PREFIX}{}", STANDARD.encode(bytes))
}

/// The key bytes of a `whsec_` secret, or `None` if it is not one.
pub fn secret_key(secret: &str) -> Option<Vec<u8>> {
    let key = STANDARD.decode(secret.strip_prefix(SECRET_PREFIX)?).ok()?;
    (!key.is_empty()).then_some(key)
}

/// The HMAC-SHA256 of the signed content `{id}.{timestamp}.{body}` under `key`.
fn content_mac(key: &[u8], id: &str, timestamp_s: i64, body: &[u8]) -> Option<Hmac<Sha256>> {
    let mut mac = Hmac::<Sha256>::new_from_slice(key).ok()?;
    mac.update(id.as_bytes());
    mac.update(b".");
    mac.update(timestamp_s.to_string().as_bytes());
    mac.update(b".");
    mac.update(body);
    Some(mac)
}

/// `v1,<base64>`: the signature of one delivery attempt under one secret.
pub fn sign(secret: &str, id: &str, timestamp_s: i64, body: &[u8]) -> Option<String> {
    let mac = content_mac(&secret_key(secret)?, id, timestamp_s, body)?;
    Some(format!("v1,{}", STANDARD.encode(mac.finalize().into_bytes())))
}

/// The `webhook-signature` header: one signature per secret, space-separated
/// (during a rotation's overlap, the new secret's and the old one's).
pub fn signature_header(secrets: &[&str], id: &str, timestamp_s: i64, body: &[u8]) -> Option<String> {
    let signatures: Option<Vec<String>> = secrets.iter().map(|secret| sign(secret, id, timestamp_s, body)).collect();
    Some(signatures?.join(" "))
}

/// How far a delivery's `webhook-timestamp` may be from the receiver's clock,
/// either way, before it is refused as a replay (the spec's five minutes).
pub const TOLERANCE_S: i64 = 5 * 60;

/// Why a receiver refuses a delivery.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum Refused {
    #[error("webhook-timestamp is more than {TOLERANCE_S} s from now: a replay or a skewed clock")]
    OutsideTolerance,
    #[error("no v1 signature in webhook-signature matches the body under any of the secrets")]
    SignatureInvalid,
}

impl Refused {
    pub fn code(&self) -> &'static str {
        match self {
            Refused::OutsideTolerance => "webhook_timestamp_outside_tolerance",
            Refused::SignatureInvalid => "webhook_signature_invalid",
        }
    }
}

/// The receiver's check, for receivers written in Rust (anything else: the
/// Standard Webhooks libraries, which check the same): the timestamp within
/// `TOLERANCE_S` of `now_s`, then any `v1,` signature in the header matching
/// the body under any of `secrets` (during a rotation the receiver holds both),
/// compared in constant time.
pub fn verify(
    secrets: &[&str],
    id: &str,
    timestamp_s: i64,
    signature_header: &str,
    body: &[u8],
    now_s: i64,
) -> Result<(), Refused> {
    // `abs_diff`: the timestamp is the sender's, any i64, and must not overflow the check.
    if now_s.abs_diff(timestamp_s) > TOLERANCE_S.unsigned_abs() {
        return Err(Refused::OutsideTolerance);
    }
    for secret in secrets {
        let Some(key) = secret_key(secret) else { continue };
        for offered in signature_header.split(' ') {
            let Some(encoded) = offered.strip_prefix("v1,") else { continue };
            let Ok(offered) = STANDARD.decode(encoded) else { continue };
            let Some(mac) = content_mac(&key, id, timestamp_s, body) else { continue };
            if mac.verify_slice(&offered).is_ok() {
                return Ok(());
            }
        }
    }
    Err(Refused::SignatureInvalid)
}

/// When the next attempt is due after `attempts` failed ones, or `None` when
/// the delivery has had all its attempts.
pub fn retry_delay_s(attempts: u32) -> Option<u64> {
    let index = usize::try_from(attempts.checked_sub(1)?).ok()?;
    RETRY_SCHEDULE_S.get(index).copied()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The known-answer vectors of the Standard Webhooks reference libraries.
    #[test]
    fn signs_the_reference_vectors() {
        let cases = [
            (
                "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw",
                "msg_p5jXN8AQM9LWM0D4loKWxJek",
                1_614_265_330,
                r#"{"test": 2432232314}"#,
                "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=",
            ),
            (
                "whsec_C2FVsBQIhrscChlQIMV+b5sSYspob7oD",
                "msg_27UH4WbU6Z5A5EzD8u03UvzRbpk",
                1_649_367_553,
                r#"{"email":"test@example.com","username":"test_user"}"#,
                "v1,tZ1I4/hDygAJgO5TYxiSd6Sd0kDW6hPenDe+bTa3Kkw=",
            ),
        ];
        for (secret, id, timestamp, body, expected) in cases {
            assert_eq!(sign(secret, id, timestamp, body.as_bytes()).as_deref(), Some(expected));
        }
        let both = signature_header(&[cases[0].0, cases[1].0], "m", 1, b"{}").unwrap();
        assert_eq!(both.split(' ').count(), 2);
        assert_eq!(sign("not-a-secret", "m", 1, b"{}"), None);
        assert_eq!(sign("whsec_", "m", 1, b"{}"), None);
    }

    /// A receiver accepts a genuine delivery, and refuses one replayed
    /// outside the tolerance, a forged signature, and a tampered body.
    #[test]
    fn a_receiver_refuses_replays_forgeries_and_tampering() {
        let (secret, id, at, body) = (
            "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw",
            "msg_p5jXN8AQM9LWM0D4loKWxJek",
            1_614_265_330,
            r#"{"test": 2432232314}"#,
        );
        let genuine = "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=";
        assert_eq!(verify(&[secret], id, at, genuine, body.as_bytes(), at), Ok(()));
        assert_eq!(verify(&[secret], id, at, genuine, body.as_bytes(), at + TOLERANCE_S), Ok(()));
        let late = verify(&[secret], id, at, genuine, body.as_bytes(), at + TOLERANCE_S + 1);
        assert_eq!(late.map_err(|r| r.code()), Err("webhook_timestamp_outside_tolerance"));
        assert_eq!(
            verify(&[secret], id, at, genuine, body.as_bytes(), at - TOLERANCE_S - 1),
            Err(Refused::OutsideTolerance)
        );
        let forged = sign("whsec_C2FVsBQIhrscChlQIMV+b5sSYspob7oD", id, at, body.as_bytes()).unwrap();
        assert_eq!(verify(&[secret], id, at, &forged, body.as_bytes(), at), Err(Refused::SignatureInvalid));
        assert_eq!(verify(&[secret], id, at, genuine, br#"{"test": 1}"#, at), Err(Refused::SignatureInvalid));
        assert_eq!(verify(&[secret], "msg_other", at, genuine, body.as_bytes(), at), Err(Refused::SignatureInvalid));
        // During a rotation: either secret, and a header carrying both signatures.
        let both = format!("{forged} {genuine}");
        assert_eq!(
            verify(&["whsec_C2FVsBQIhrscChlQIMV+b5sSYspob7oD", secret], id, at, &both, body.as_bytes(), at),
            Ok(())
        );
        assert_eq!(verify(&[secret], id, at, "v1,not-base64!", body.as_bytes(), at), Err(Refused::SignatureInvalid));
    }

    #[test]
    fn the_schedule_ends_after_the_last_attempt() {
        assert_eq!(retry_delay_s(1), Some(5));
        assert_eq!(retry_delay_s(ATTEMPTS_MAX - 1), Some(10 * 3600));
        assert_eq!(retry_delay_s(ATTEMPTS_MAX), None);
        assert_eq!(retry_delay_s(0), None);
        let secret = new_secret(&bazaar_types::SeededEntropy::new(1));
        assert_eq!(secret_key(&secret).map(|key| key.len()), Some(SECRET_BYTES));
    }
}

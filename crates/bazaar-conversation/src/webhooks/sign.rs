//! Standard Webhooks v1 (symmetric): `whsec_` secrets, the signed content
//! `{id}.{timestamp}.{body}`, `v1,<base64 HMAC-SHA256>` signatures, and the
//! retry schedule. Sans-IO: no clock, no network.

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

/// `v1,<base64>`: the signature of one delivery attempt under one secret.
pub fn sign(secret: &str, id: &str, timestamp_s: i64, body: &[u8]) -> Option<String> {
    let mut mac = Hmac::<Sha256>::new_from_slice(&secret_key(secret)?).ok()?;
    mac.update(id.as_bytes());
    mac.update(b".");
    mac.update(timestamp_s.to_string().as_bytes());
    mac.update(b".");
    mac.update(body);
    Some(format!("v1,{}", STANDARD.encode(mac.finalize().into_bytes())))
}

/// The `webhook-signature` header: one signature per secret, space-separated
/// (during a rotation's overlap, the new secret's and the old one's).
pub fn signature_header(secrets: &[&str], id: &str, timestamp_s: i64, body: &[u8]) -> Option<String> {
    let signatures: Option<Vec<String>> = secrets.iter().map(|secret| sign(secret, id, timestamp_s, body)).collect();
    Some(signatures?.join(" "))
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

//! The server's one source of real randomness: the operating system's, behind
//! the injected [`bazaar_types::Entropy`] so tests can seed their own. The
//! ambient `rand` generators are banned everywhere else by `clippy.toml`.

use bazaar_types::Entropy;

/// The operating system's randomness (`getrandom` through `rand::rngs::OsRng`).
#[derive(Clone, Copy, Debug, Default)]
pub struct OsEntropy;

impl Entropy for OsEntropy {
    #[allow(clippy::disallowed_types)] // reason: this is the one injected source.
    fn fill(&self, bytes: &mut [u8]) {
        use rand::RngCore;
        rand::rngs::OsRng.fill_bytes(bytes);
    }
}

/// `bytes` random bytes from `entropy`, base64url without padding.
pub fn random_b64(entropy: &dyn Entropy, bytes: usize) -> String {
    let mut buffer = vec![0u8; bytes];
    entropy.fill(&mut buffer);
    bazaar_core::crypto::b64url(&buffer)
}

/// A fresh bearer credential: `bzc_` and `CREDENTIAL_RANDOM_BYTES` random bytes.
pub fn new_secret_credential(entropy: &dyn Entropy) -> String {
    format!("bzc_{}", random_b64(entropy, bazaar_types::limits::CREDENTIAL_RANDOM_BYTES))
}

/// What an enrollment credential starts with: one issued by an invite or
/// reissued by an owner, which someone else has seen. It does nothing but
/// rotate (`auth`); the rotation gives the agent a credential only it holds.
pub const ENROLLMENT_CREDENTIAL_PREFIX: &str = "bzi_";

/// A credential that must be rotated before any other act. The prefix is
/// part of what is hashed, so it cannot be changed without making another credential.
pub fn new_enrollment_credential(entropy: &dyn Entropy) -> String {
    format!("{ENROLLMENT_CREDENTIAL_PREFIX}{}", random_b64(entropy, bazaar_types::limits::CREDENTIAL_RANDOM_BYTES))
}

#[cfg(test)]
mod tests {
    use super::*;
    use bazaar_types::SeededEntropy;

    #[test]
    fn a_seeded_source_repeats_and_the_os_source_does_not() {
        let (a, b) = (SeededEntropy::new(7), SeededEntropy::new(7));
        assert_eq!(new_secret_credential(&a), new_secret_credential(&b), "same seed, same credential");
        assert_ne!(random_b64(&a, 16), random_b64(&SeededEntropy::new(8), 16));
        assert_eq!(random_b64(&a, 13).len(), 18, "13 bytes are 18 base64url characters");
        assert_ne!(random_b64(&OsEntropy, 16), random_b64(&OsEntropy, 16));
    }
}

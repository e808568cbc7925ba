//! A worker's enrollment: a record binding its Nostr key to its Bazaar DID,
//! signed by both keys. The Nostr key signs the event; the DID's Ed25519 key
//! signs the binding statement carried in a tag. Either signature alone
//! proves nothing: a worker cannot claim someone else's DID, and a DID
//! holder cannot claim someone else's Nostr key. Enrollment grants no
//! summon permission: who may hire a worker is its owner's list, not this.

use crate::event::{Event, PublicKey, Signer};

/// Addressable kind of the enrollment record (one per worker key).
pub const ENROLLMENT: u16 = 30_950;
/// Its `d` tag.
pub const ENROLLMENT_D: &str = "bazaar-worker";

/// The exact bytes the DID's key signs.
pub fn binding_statement(nostr: &PublicKey, did: &str, created_at: u64) -> String {
    format!("bazaar-worker-binding/v1\nnostr:{nostr}\ndid:{did}\ncreated_at:{created_at}")
}

/// The enrollment event, given the DID's signature (base64url) over [`binding_statement`].
pub fn enrollment_event(worker: &Signer, did: &str, created_at: u64, did_signature: &str) -> Event {
    let tags = vec![
        vec!["d".into(), ENROLLMENT_D.into()],
        vec!["bazaar-did".into(), did.into()],
        vec!["bazaar-sig".into(), did_signature.into()],
    ];
    worker.sign(created_at, ENROLLMENT, tags, "")
}

/// Why an enrollment is not valid.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EnrollmentInvalid {
    #[error("not an enrollment record (kind {ENROLLMENT}, d {ENROLLMENT_D})")]
    NotEnrollment,
    #[error("the Nostr signature or id does not verify")]
    NostrSignature,
    #[error("the record names no DID or carries no DID signature")]
    Missing,
    #[error("the DID's key did not sign this binding")]
    DidSignature,
}

/// A checked binding: this Nostr key belongs to this DID.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Binding {
    pub nostr: PublicKey,
    pub did: String,
    pub created_at: u64,
}

/// Checks both signatures. `verify_did(did, message, signature_b64url)` is the
/// identity seam: the relay crate knows no DID method; the caller does.
pub fn verify_enrollment(
    event: &Event,
    verify_did: &dyn Fn(&str, &[u8], &str) -> bool,
) -> Result<Binding, EnrollmentInvalid> {
    if event.kind != ENROLLMENT || event.tag("d") != Some(ENROLLMENT_D) {
        return Err(EnrollmentInvalid::NotEnrollment);
    }
    event.verify().map_err(|_| EnrollmentInvalid::NostrSignature)?;
    let (Some(did), Some(signature)) = (event.tag("bazaar-did"), event.tag("bazaar-sig")) else {
        return Err(EnrollmentInvalid::Missing);
    };
    let statement = binding_statement(&event.pubkey, did, event.created_at);
    if !verify_did(did, statement.as_bytes(), signature) {
        return Err(EnrollmentInvalid::DidSignature);
    }
    Ok(Binding { nostr: event.pubkey, did: did.to_string(), created_at: event.created_at })
}

#[cfg(test)]
mod tests {
    use super::*;
    use base64::Engine;
    use ed25519_dalek::{Signer as _, SigningKey, Verifier, VerifyingKey};

    const B64: base64::engine::GeneralPurpose = base64::engine::general_purpose::URL_SAFE_NO_PAD;

    /// A toy DID method for the test: `did:test:<hex public key>`.
    fn verify(did: &str, message: &[u8], signature: &str) -> bool {
        let Some(key) = did.strip_prefix("did:test:").and_then(|h| hex::decode(h).ok()) else { return false };
        let Ok(key) = VerifyingKey::from_bytes(&key.try_into().unwrap_or([0; 32])) else { return false };
        let Ok(sig) = B64.decode(signature) else { return false };
        let Ok(sig) = ed25519_dalek::Signature::from_slice(&sig) else { return false };
        key.verify(message, &sig).is_ok()
    }

    #[test]
    fn both_keys_must_sign_the_binding() {
        let worker = Signer::generate(&bazaar_types::SeededEntropy::new(1));
        let identity = SigningKey::from_bytes(&[9; 32]);
        let did = format!("did:test:{}", hex::encode(identity.verifying_key().as_bytes()));
        let signature =
            B64.encode(identity.sign(binding_statement(&worker.public_key(), &did, 100).as_bytes()).to_bytes());
        let record = enrollment_event(&worker, &did, 100, &signature);
        let binding = verify_enrollment(&record, &verify).unwrap();
        assert_eq!((binding.nostr, binding.did.as_str()), (worker.public_key(), did.as_str()));

        // Another Nostr key presenting the same DID signature: the DID never signed that key.
        let thief = Signer::generate(&bazaar_types::SeededEntropy::new(2));
        let stolen = enrollment_event(&thief, &did, 100, &signature);
        assert_eq!(verify_enrollment(&stolen, &verify), Err(EnrollmentInvalid::DidSignature));
        // Another DID claimed with a signature by a key that is not its own.
        let other = SigningKey::from_bytes(&[8; 32]);
        let other_did = format!("did:test:{}", hex::encode(other.verifying_key().as_bytes()));
        let claimed = enrollment_event(&worker, &other_did, 100, &signature);
        assert_eq!(verify_enrollment(&claimed, &verify), Err(EnrollmentInvalid::DidSignature));
        // The Nostr signature broken.
        let mut altered = record.clone();
        altered.created_at += 1;
        assert_eq!(verify_enrollment(&altered, &verify), Err(EnrollmentInvalid::NostrSignature));
    }
}

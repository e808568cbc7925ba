//! The identity seam for the market: a worker's enrollment is checked with
//! Bazaar's own DID method (`did:key`, Ed25519), and signed with the agent's key file.

use base64::Engine;
use bazaar_relay::market::enrollment::{binding_statement, enrollment_event, verify_enrollment, Binding};
use bazaar_relay::{Event, Signer};
use ed25519_dalek::{Signer as _, Verifier};

const B64: base64::engine::GeneralPurpose = base64::engine::general_purpose::URL_SAFE_NO_PAD;

/// The enrollment record for `worker`, signed by both keys.
pub fn enroll(worker: &Signer, identity: &ed25519_dalek::SigningKey, created_at: u64) -> Event {
    let did = bazaar_core::crypto::did_key(&identity.verifying_key());
    let statement = binding_statement(&worker.public_key(), &did, created_at);
    let signature = B64.encode(identity.sign(statement.as_bytes()).to_bytes());
    enrollment_event(worker, &did, created_at, &signature)
}

/// `did:key` verification of the DID's signature over the binding.
pub fn verify_did(did: &str, message: &[u8], signature: &str) -> bool {
    let Ok(key) = bazaar_core::crypto::public_key_from_did(did) else { return false };
    let Ok(bytes) = B64.decode(signature) else { return false };
    let Ok(signature) = ed25519_dalek::Signature::from_slice(&bytes) else { return false };
    key.verify(message, &signature).is_ok()
}

/// Checks an enrollment record with `did:key`.
pub fn check(event: &Event) -> Result<Binding, bazaar_relay::market::enrollment::EnrollmentInvalid> {
    verify_enrollment(event, &verify_did)
}

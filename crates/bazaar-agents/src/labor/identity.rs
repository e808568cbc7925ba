//! The identity seam for the market: a worker's enrollment is checked with
//! Bazaar's own DID method (`did:key`, Ed25519), and signed with the agent's key file.

use base64::Engine;
use bazaar_relay::labor::enrollment::{binding_statement, enrollment_event, verify_enrollment, Binding};
use bazaar_relay::{Event, Signer};
use ed25519_dalek::Signer as _;

const B64: base64::engine::GeneralPurpose = base64::engine::general_purpose::URL_SAFE_NO_PAD;

/// The enrollment record for `worker`, signed by both keys.
pub fn enroll(worker: &Signer, identity: &ed25519_dalek::SigningKey, created_at: u64) -> Event {
    let did = bazaar_core::crypto::did_key(&identity.verifying_key());
    let statement = binding_statement(&worker.public_key(), &did, created_at);
    let signature = B64.encode(identity.sign(statement.as_bytes()).to_bytes());
    enrollment_event(worker, &did, created_at, &signature)
}

/// Checks an enrollment record with `did:key`.
pub fn check(event: &Event) -> Result<Binding, bazaar_relay::labor::enrollment::EnrollmentInvalid> {
    verify_enrollment(event, &bazaar_core::crypto::did_signed)
}

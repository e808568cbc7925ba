//! Rust SDK for a Bazaar registry: a typed HTTP [`client::Client`] for owners,
//! buyers and merchants, and [`paid`], the axum middleware that turns a route
//! into a paid route that settles exactly once and runs its work once.
//!
//! Verify is a receipt check, never a work order: a settled token still
//! verifies as genuine. Only a settlement (and the middleware's work receipt)
//! decides whether work runs.

pub mod answer;
pub mod client;
pub mod coalesce;
pub mod paid;
pub mod storefront;
pub mod token;

pub use client::{hire_offer_statement, Client, Purchase, SdkError};

/// The request header a buyer puts its payment token in.
pub const PAYMENT_HEADER: &str = "bazaar-payment";
/// The response header carrying the settlement id a paid response belongs to.
pub const SETTLEMENT_HEADER: &str = "bazaar-settlement";
/// Set to `replayed` when a paid route answers from its work receipt.
pub const WORK_RECEIPT_HEADER: &str = "bazaar-work-receipt";

/// A new Ed25519 key for an owner or agent.
pub fn generate_key() -> ed25519_dalek::SigningKey {
    let mut seed = [0u8; 32];
    random_bytes(&mut seed);
    ed25519_dalek::SigningKey::from_bytes(&seed)
}

/// The SDK's one source of randomness (keys, offer ids): the operating system's.
/// The ambient `rand` generators are banned elsewhere by `clippy.toml`.
#[allow(clippy::disallowed_types)] // reason: this is the SDK's one source.
pub(crate) fn random_bytes(bytes: &mut [u8]) {
    use rand::RngCore;
    rand::rngs::OsRng.fill_bytes(bytes);
}

/// The `did:key` of a signing key.
pub fn did_of(key: &ed25519_dalek::SigningKey) -> String {
    let mut bytes = vec![0xed, 0x01];
    bytes.extend_from_slice(key.verifying_key().as_bytes());
    format!("did:key:z{}", bs58::encode(bytes).into_string())
}

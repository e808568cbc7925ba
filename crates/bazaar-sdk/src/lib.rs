//! Rust SDK for a Bazaar registry: a typed HTTP [`client::Client`] for owners,
//! buyers and merchants, and [`paid`], the axum middleware that turns a route
//! into a paid route that settles exactly once and runs its work once.
//!
//! Verify is a receipt check, never a work order: a settled token still
//! verifies as genuine. Only a settlement (and the middleware's work receipt)
//! decides whether work runs.
//!
//! ## Map
//!
//! (What this crate holds, file by file; `ARCHITECTURE.md` keeps the one-line summary.)
//!
//! `Client` (typed calls, `pay`, retries) and `paid` (axum
//! middleware: verify, settle, run once, keep a work receipt; `x402_paid`
//! speaks x402 v2 on top of it). `clients/python` and `clients/typescript` are the
//! Python and TypeScript SDKs (buyer client and merchant middleware with the
//! same settle-then-work-once semantics; the TypeScript one carries the buyer
//! scheme for `@x402/fetch`), held to one wire contract by
//! `clients/conformance` (`contract.json`, `scenario.json`) and
//! `crates/bazaar-cli/tests/it/sdk_conformance.rs`. Depends on HTTP, `bazaar-types` and, for the
//! work receipts, rusqlite (a SQLite file per paid route, WAL) — never on the
//! core or a store.

pub mod answer;
pub mod client;
pub mod clock;
pub mod coalesce;
pub mod paid;
pub mod storefront;
pub mod token;

pub use answer::{Answer, Body};
/// The wire contract the calls answer with (`bazaar-wire`): the same types the registry serves.
pub use bazaar_wire as wire;
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

/// What a key file's mode is: readable and writable by its owner only.
pub const KEY_FILE_MODE: u32 = 0o600;

/// Writes `key`'s 32-byte seed as 64 hex characters to a new file, mode 0600 — the file `bazaar keygen --out`
/// writes and the Python and TypeScript SDKs read. An existing file is never overwritten (it may hold another
/// identity).
pub fn save_key(key: &ed25519_dalek::SigningKey, path: &std::path::Path) -> std::io::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let mut file = std::fs::OpenOptions::new().write(true).create_new(true).mode(KEY_FILE_MODE).open(path)?;
    file.write_all(hex::encode(key.to_bytes()).as_bytes())
}

/// Reads a key file written by [`save_key`] (or `bazaar keygen`, or the other SDKs).
pub fn load_key(path: &std::path::Path) -> std::io::Result<ed25519_dalek::SigningKey> {
    let text = std::fs::read_to_string(path)?;
    let seed: [u8; 32] = hex::decode(text.trim()).ok().and_then(|b| b.try_into().ok()).ok_or_else(|| {
        std::io::Error::new(std::io::ErrorKind::InvalidData, "a key file holds a 32-byte seed as 64 hex characters")
    })?;
    Ok(ed25519_dalek::SigningKey::from_bytes(&seed))
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

//! Signed Nostr events as the API carries them (NIP-01): a job, a result, a
//! verdict, an enrollment or a review presented to the registry. The registry
//! checks each one's id and signature itself; this type states only the shape.

use serde::{Deserialize, Serialize};

/// A NIP-01 event: every member fixed, so it reads and writes back as signed.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct SignedEvent {
    /// 64 lowercase hex: the SHA-256 of the serialized event.
    pub id: String,
    /// 64 lowercase hex: the author's x-only public key.
    pub pubkey: String,
    /// Unix seconds.
    pub created_at: u64,
    pub kind: u16,
    pub tags: Vec<Vec<String>>,
    pub content: String,
    /// 128 lowercase hex: the Schnorr signature over `id`.
    pub sig: String,
}

//! The registry-wide and x402 facilitator response bodies.

pub use crate::proof::DataIntegrityProof;
use serde::{Deserialize, Serialize};

/// The ledger writer runs and the store answers.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Health {
    /// `ok`.
    pub status: String,
    /// The event ledger's head.
    pub event_seq: u64,
}

/// What the facilitator verifies and settles (x402 v2 `/supported`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct X402Supported {
    /// One kind: `x402Version` 2, scheme `apt`, this registry's network, and `extra` (registry, asset).
    #[cfg_attr(feature = "openapi", schema(value_type = Vec<Object>))]
    pub kinds: Vec<serde_json::Value>,
    /// Empty.
    #[cfg_attr(feature = "openapi", schema(value_type = Vec<Object>))]
    pub extensions: Vec<serde_json::Value>,
    /// Empty.
    #[cfg_attr(feature = "openapi", schema(value_type = Object))]
    pub signers: serde_json::Value,
}

/// Would the payment settle? Business failures are `isValid: false` with a reason, as x402 answers.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct X402Verified {
    pub is_valid: bool,
    /// The buyer's DID, when valid.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub payer: Option<String>,
    /// An x402 reason code, when not valid.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub invalid_reason: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub invalid_message: Option<String>,
}

/// A payment settled (exactly once per order), or why not: `success: false` with a reason.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct X402Settled {
    pub success: bool,
    /// The settlement id; empty when not settled.
    pub transaction: String,
    pub network: String,
    /// The buyer's DID, when settled.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub payer: Option<String>,
    /// The amount as a decimal string, when settled.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub amount: Option<String>,
    /// An x402 reason code, when not settled.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error_reason: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error_message: Option<String>,
}

/// The registry's public card (`GET /.well-known/bazaar`): its identity, key history, fee, thresholds and
/// limits, signed by its current key (eddsa-jcs-2022). Verify the signature over the JSON as served; this type
/// is for reading it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct RegistryCard {
    #[serde(rename = "@context")]
    pub context: Vec<String>,
    #[serde(rename = "type")]
    pub type_: Vec<String>,
    /// The registry's DID (also `did`).
    pub id: String,
    pub did: String,
    /// The public URL the operator configured; null where none is.
    #[cfg_attr(feature = "openapi", schema(required = true))]
    pub url: Option<String>,
    pub keys: Vec<crate::federation::KeyEntry>,
    /// Where the signed recognition list is.
    pub recognition: String,
    /// Where the passport verifier page is.
    pub passport_verifier: String,
    #[serde(rename = "validFrom")]
    pub valid_from: String,
    #[serde(rename = "validUntil")]
    pub valid_until: String,
    /// The current key, base64url and hex.
    pub public_key: String,
    pub public_key_hex: String,
    pub network_unit: String,
    pub fee_bps: u32,
    /// Above this a purchase rides escrow rather than a paid call.
    pub escrow_threshold_minor: u64,
    pub dispute_windows_s: DisputeWindows,
    pub dispute_desk: String,
    pub x402: X402Terms,
    pub token_ttl_s: u64,
    pub token_format: String,
    pub limits: CardLimits,
    /// The DID of the key that signed the card.
    pub issuer: String,
    pub proof: DataIntegrityProof,
}

/// The dispute phases' windows, in seconds.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct DisputeWindows {
    pub claim_s: u64,
    pub answer_s: u64,
    pub evidence_s: u64,
    pub ruling_s: u64,
    pub appeal_s: u64,
    pub stake_cooldown_s: u64,
}

/// How to pay this registry's merchants over x402.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct X402Terms {
    pub scheme: String,
    pub network: String,
    pub asset: String,
    /// The facilitator's path on this registry.
    pub facilitator: String,
}

/// The limits a client must stay within.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct CardLimits {
    pub amount_minor_max: u64,
    pub token_ttl_s_min: u64,
    pub token_ttl_s_max: u64,
    pub invite_ttl_s: u64,
    pub idempotency_key_len_max: u64,
    pub idempotency_retention_s: u64,
    pub request_body_bytes_max: u64,
    pub order_id_len_max: u64,
    pub resource_len_max: u64,
    pub page_limit_max: u64,
}

//! The registry-wide and x402 facilitator response bodies.

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

//! The registry-wide and x402 facilitator response bodies.

use utoipa::ToSchema;

/// The ledger writer runs and the store answers.
#[derive(ToSchema)]
pub struct Health {
    /// `ok`.
    pub status: String,
    /// The event ledger's head.
    pub event_seq: u64,
}

/// What the facilitator verifies and settles (x402 v2 `/supported`).
#[derive(ToSchema)]
pub struct X402Supported {
    /// One kind: `x402Version` 2, scheme `apt`, this registry's network, and `extra` (registry, asset).
    #[schema(value_type = Vec<Object>)]
    pub kinds: Vec<serde_json::Value>,
    /// Empty.
    #[schema(value_type = Vec<Object>)]
    pub extensions: Vec<serde_json::Value>,
    /// Empty.
    #[schema(value_type = Object)]
    pub signers: serde_json::Value,
}

/// Would the payment settle? Business failures are `isValid: false` with a reason, as x402 answers.
#[derive(ToSchema)]
#[schema(rename_all = "camelCase")]
pub struct X402Verified {
    pub is_valid: bool,
    /// The buyer's DID, when valid.
    pub payer: Option<String>,
    /// An x402 reason code, when not valid.
    pub invalid_reason: Option<String>,
    pub invalid_message: Option<String>,
}

/// A payment settled (exactly once per order), or why not: `success: false` with a reason.
#[derive(ToSchema)]
#[schema(rename_all = "camelCase")]
pub struct X402Settled {
    pub success: bool,
    /// The settlement id; empty when not settled.
    pub transaction: String,
    pub network: String,
    /// The buyer's DID, when settled.
    pub payer: Option<String>,
    /// The amount as a decimal string, when settled.
    pub amount: Option<String>,
    /// An x402 reason code, when not settled.
    pub error_reason: Option<String>,
    pub error_message: Option<String>,
}

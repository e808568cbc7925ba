//! The live stream's reads: the ledger's events as one viewer may see them
//! (`/v1/stream/history`, `/v1/stream/latest`), and who the viewer is
//! (`/v1/stream/viewer`). The operator sees every event whole, a member its
//! own; everyone else sees the public share of each body.

use serde::{Deserialize, Serialize};

/// One ledger event as a viewer may see it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct StreamEvent {
    pub seq: u64,
    /// What happened, e.g. `settlement.posted`.
    pub kind: String,
    /// Unix milliseconds.
    pub at_ms: i64,
    pub hash: String,
    /// The previous event's hash: only on an event seen whole (the public read it from the event before).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prev_hash: Option<String>,
    /// The author's handle, where the event names one.
    #[cfg_attr(feature = "openapi", schema(required = true))]
    pub by: Option<String>,
    /// `whole`, or `public`: only the allowlisted identifiers, amounts, times, counts and flags.
    pub detail: String,
    /// The event's body, or its public share; its members depend on `kind`.
    #[cfg_attr(feature = "openapi", schema(value_type = Object))]
    pub body: serde_json::Value,
}

/// A page of the past, newest last.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct StreamHistory {
    /// How many events the ledger holds.
    pub head_seq: u64,
    pub events: Vec<StreamEvent>,
}

/// One completed flow: its events, and the event that completed it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct StreamFlow {
    pub completed_seq: u64,
    /// Unix milliseconds.
    pub completed_at_ms: i64,
    pub events: Vec<StreamEvent>,
}

/// The latest completed paid call, contract and dispute in the events scanned, each null when there is none.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct StreamLatest {
    pub head_seq: u64,
    pub scanned_from_seq: u64,
    #[cfg_attr(feature = "openapi", schema(required = true))]
    pub paid_call: Option<StreamFlow>,
    #[cfg_attr(feature = "openapi", schema(required = true))]
    pub contract: Option<StreamFlow>,
    #[cfg_attr(feature = "openapi", schema(required = true))]
    pub dispute: Option<StreamFlow>,
}

/// Who this browser watches the stream as, and whether the stream is open to it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct StreamViewer {
    /// `public`, `member` or `operator`.
    pub viewer: String,
    /// The member's handle; null for the public.
    #[cfg_attr(feature = "openapi", schema(required = true))]
    pub handle: Option<String>,
    pub stream_open: bool,
}

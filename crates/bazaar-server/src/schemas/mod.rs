//! The response bodies as the API description states them. The core's
//! receipts are typed per capability but know no HTTP or OpenAPI, so these
//! types mirror what each route returns, for `/openapi.json` only: nothing
//! serialises them. Each file follows a capability; a field that is free-form
//! JSON in the core says so (`Object`) rather than invent members.
//!
//! Amounts are integers in minor units (`*_minor`, or the core's bare names
//! such as `total`); instants are Unix milliseconds (`*_ms`, `*_at`); members
//! are DIDs.

pub mod conversation;
pub mod dispute;
pub mod escrow;
pub mod federation;
pub mod identity;
pub mod market;
pub mod pay;
pub mod registry;

use utoipa::ToSchema;

/// A JSON object whose members the route does not fix (a signed document, an
/// outcome whose shape depends on what happened): see the route's description.
#[derive(ToSchema)]
#[schema(value_type = Object)]
pub struct OpenObject(pub serde_json::Value);

/// One Server-Sent Event as a client reads it off an event stream: `data` is
/// JSON text (the route says of what), `id` the position to resume after with
/// `Last-Event-ID`, `event` absent for `message` or `error` for the stream's
/// last word before it closes.
#[derive(utoipa::ToSchema)]
pub struct SseEvent {
    pub data: String,
    pub event: Option<String>,
    pub id: Option<String>,
    /// Milliseconds the client should wait before reconnecting.
    pub retry: Option<u64>,
}

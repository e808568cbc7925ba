//! The HTTP edge of a Bazaar registry: the only crate that knows HTTP.
//!
//! It authenticates callers, turns JSON requests into core commands, applies
//! idempotency-key semantics (scope, fingerprint, in-flight detection,
//! `Idempotent-Replayed`), maps refusals to problem+json, and serves the API
//! description at `/openapi.json`. It is organised like the core, by
//! capability: [`identity`], [`pay`], [`escrow`], [`dispute`], [`federation`],
//! [`market`] and [`x402`] each own their routes (with their OpenAPI entries)
//! and their share of the sweeper's work; [`registry`] holds the
//! registry-wide routes, and [`conversation`] the conversation plane's
//! (rooms, DMs, the inbox and its live transports). Beneath them sit
//! [`state`] (the shared [`AppState`]), [`exec`] (the handlers' toolbox),
//! [`auth`], [`problem`], [`keyring`], [`metrics`], [`search_tally`],
//! [`plane`] (the conversation store as the server holds it) and [`schemas`]
//! (the response bodies as `/openapi.json` states them); above them, [`router`]
//! merges the capabilities' routes and [`sweeper`] asks each for due work.

pub mod auth;
pub mod bounty;
pub mod chamber;
pub mod closing;
pub mod cluster;
pub mod compromises_page;
pub mod conversation;
pub mod dispute;
pub mod edge;
pub mod entropy;
pub mod escrow;
pub mod exec;
pub mod fanout;
pub mod federation;
pub mod front;
pub mod hire;
pub mod identity;
pub mod keyring;
pub mod ledger;
pub mod live;
pub mod market;
pub mod mcp;
pub mod metrics;
pub mod page;
pub mod passport_page;
pub mod pay;
pub mod people;
pub mod plane;
pub mod problem;
pub mod registry;
pub mod relay;
pub mod relying_party;
pub mod reprice;
pub mod reputation_fold;
pub mod router;
pub mod schemas;
pub mod search_tally;
pub mod spending;
pub mod state;
pub mod sweeper;
pub mod terms;
pub mod x402;

pub use bazaar_core::model::{DESK_ID, OPERATOR_ID};
pub use entropy::{new_secret_credential, random_b64, OsEntropy};
pub use router::router;
pub use state::{boot, boot_with_entropy, AppState, Booted, VERIFIED_TOKENS_MAX};
pub use sweeper::{shutdown, spawn_sweeper, sweep_once};

/// The network unit's name, as published in the registry card.
pub const NETWORK_UNIT: &str = "BNU";

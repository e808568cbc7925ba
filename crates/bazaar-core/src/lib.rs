//! Sans-IO domain core of Bazaar: identity, the double-entry ledger, budgets,
//! payment tokens, idempotency, the hash-chained event ledger, escrowed
//! contracts, disputes, stake, and verifiable credentials (passports).
//!
//! Nothing here performs I/O, reads a clock or draws randomness. A storage
//! adapter loads a [`state::Snapshot`] for a batch of [`command::Command`]s,
//! calls [`apply::apply_batch`], and writes the returned [`state::Changes`] in
//! one transaction. Every outcome is a value: a receipt or a [`refusal::Refusal`]
//! with a stable code.

pub mod apply;
pub mod audit;
pub mod chain;
pub mod command;
pub mod crypto;
pub mod dispute;
pub mod escrow;
pub mod federation;
pub mod market;
pub mod model;
pub mod order;
pub mod refusal;
pub mod reputation;
pub mod state;
pub mod token;
pub mod validate;
pub mod vc;

pub use bazaar_types as types;

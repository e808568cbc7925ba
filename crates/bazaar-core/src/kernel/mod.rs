//! The money kernel: what every capability shares and nothing more. The batch
//! and its context ([`batch::Batch`]), the rows a batch reads and writes
//! ([`state`], [`model`], [`keys`]), the ledger primitives (accounts, holds,
//! transfers, linked legs, spending ceilings: [`ledger`]), the hash-chained
//! event ledger ([`chain`]), idempotency ([`request`]), refusals with stable
//! codes ([`refusal`]) and the kernel's own settings ([`config`]).
//!
//! The kernel imports no capability; capabilities (identity, pay, escrow,
//! dispute, federation, market, reputation) sit beside it and use it, and the
//! composer (`command.rs`, `apply.rs` at the crate root) sits on top. Checked by the tidy
//! test in `bazaar-cli/tests/it/tidy.rs`.

pub mod batch;
pub mod chain;
pub mod config;
pub mod docs;
pub mod keys;
pub mod ledger;
pub mod model;
pub mod refusal;
pub mod request;
pub mod state;

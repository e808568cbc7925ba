//! Sans-IO domain core of Bazaar, organised by capability around a small money
//! kernel.
//!
//! - [`kernel`]: the batch, snapshot and changes, ledger primitives, the event
//!   chain, idempotency, refusals. It names no capability.
//! - Capabilities, lowest first: [`identity`], [`pay`], [`escrow`],
//!   [`dispute`] (with stake), [`reputation`] (a read model over events),
//!   [`federation`], [`market`] (beside dispute, above escrow) and [`bounty`]
//!   (the labor market's rewards, on identity and pay) and [`hire`] (owners'
//!   exact authorizations to pay specialists and guest hires, on escrow), and
//!   [`chamber`] (the refusal an attack press met in a scratch registry, on the
//!   kernel alone). Each owns
//!   its `Op` sub-enum, row keys, apply functions and event kinds; a
//!   capability uses only lower ones.
//! - The composer on top: [`command`] (`Command`, `Op`, keys, dispatch) and
//!   [`apply`] (`Config`, `apply_batch`).
//! - Support modules every layer may use: [`crypto`], [`vc`], [`validate`],
//!   and [`audit`] (chain and balance recomputation).
//!
//! Nothing here performs I/O, reads a clock or draws randomness. A storage
//! adapter loads a [`state::Snapshot`] for a batch of [`command::Command`]s,
//! calls [`apply::apply_batch`], and writes the returned [`state::Changes`] in
//! one transaction. Every outcome is a value: a receipt or a [`refusal::Refusal`]
//! with a stable code.

pub mod kernel;

pub mod bounty;
pub mod chamber;
pub mod dispute;
pub mod escrow;
pub mod federation;
pub mod hire;
pub mod identity;
pub mod market;
pub mod pay;
pub mod reputation;

pub mod apply;
pub mod command;

pub mod audit;
pub mod crypto;
pub mod validate;
pub mod vc;

// The kernel's storage-facing modules, at the paths adapters and the edge use.
pub use kernel::{chain, model, refusal, state};
pub use market::order;
pub use pay::token;

pub use bazaar_types as types;

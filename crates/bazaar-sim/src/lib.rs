//! A seeded, deterministic fault simulator over Bazaar's money flows, in the
//! manner of TigerBeetle's VOPR: one generator from the seed drives clients
//! (paid calls, escrow, disputes with appeals, stake, the storefront's orders,
//! service payments, guest hires and leases, bounties, settlements relayed to
//! a peer registry), the sweepers' due work
//! and every fault, against the real core, the real group-commit writer and a
//! real SQLite file behind a fault-injecting engine; an auditor checks the
//! ledger after every step. A seed replays bit for bit.
//!
//! ## Map
//!
//! (What this crate holds, file by file; `ARCHITECTURE.md` keeps the one-line summary.)
//!
//! the seeded, deterministic fault simulator (VOPR-style):
//! the real core and group-commit writer on SQLite behind a fault-injecting
//! `Engine`, two registries joined by a corridor, workloads of paid calls,
//! escrow, disputes and appeals, stake, the storefront, hiring (service
//! payments, guest hires direct and escrowed, leases), bounties and relayed
//! settlements, faults (failed and lost commits, crashes, duplicates and
//! reordering, clock jumps, a peer down or late, a store unavailable) and an
//! auditor after every step; `--seed N` replays a run. Its README says what it
//! covers and what it does not.

pub mod auditor;
pub mod bounties;
pub mod cast;
pub mod fault;
pub mod flows;
pub mod hiring;
pub mod market;
pub mod options;
pub mod registry;
pub mod relay;
pub mod report;
pub mod rng;
pub mod sim;

pub use fault::Plant;
pub use options::{Faults, Options};
pub use report::{Failure, Report};
pub use sim::Sim;

/// Runs one seed in a fresh file under `dir`.
pub fn run(opts: Options, dir: &std::path::Path) -> Result<Report, Failure> {
    Sim::new(opts, dir)?.run()
}

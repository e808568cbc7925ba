//! The plane kit: what every plane's store is built from, so the ledger, the conversation plane and the
//! relay do not each hand-build their own: the conformance skeleton their suites run on
//! ([`conformance::run`]: named cases, each on a store of its own, every failure named) and the sequenced
//! writer ([`writer::GroupWriter`]):
//! one thread, a bounded queue, each group of queued items written in one transaction, every item answered
//! only after its group's commit, and the writer stopped (never half-written) when a write panics on a
//! failed invariant. A plane supplies only its [`writer::GroupWrite`]: how one group becomes one
//! transaction.
//!
//! The kit knows no SQL, no HTTP and no async runtime: replies are `futures` oneshots that an async caller
//! awaits and a synchronous one blocks on.

pub mod conformance;
pub mod writer;

//! The server's integration tests, built as one test binary (one link, not one per file). Run one
//! family with `cargo test -p bazaar-server --test it authz::`. The fuzz targets (`tests/fuzz.rs`) stay a
//! binary of their own: they run in release builds by hand.

mod api;
mod authz;
mod batch;
mod chamber;
mod cluster_seam;
#[path = "../common/mod.rs"]
mod common;
mod conversation;
mod corridors;
mod credentials;
mod escrow_budgets;
mod front;
mod people;
mod relay;
mod sealing;
mod stream;
mod webhooks;

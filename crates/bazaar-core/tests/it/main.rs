//! The core's integration tests, built as one test binary (one link, not one per file). Run one
//! family with `cargo test -p bazaar-core --test it model::`. The fuzz targets (`tests/fuzz.rs`) stay a
//! binary of their own: they run in release builds by hand.

mod chamber;
mod common;
mod documents;
mod escrow_model;
mod events;
mod federation_model;
mod market;
mod model;
mod reputation;
mod vc;

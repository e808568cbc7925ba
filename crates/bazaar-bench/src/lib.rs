//! Benchmark harness for Bazaar: drives complete paid calls (token → verify →
//! settle) against the embedded registry, the registry on PostgreSQL and a
//! plain-PostgreSQL baseline peer, side by side, and gates every run on
//! correctness (conservation, exactly one transfer per order and key); and
//! (`talk`) measures the conversation plane: fanout, ingest, idle sockets;
//! (`attention`) the attention query over a million messages on both engines;
//! (`relay`) the labor market's Nostr relay beside the peer nostr-rs-relay;
//! (`stream`) what the live stream's watchers cost the paid calls, and their lag;
//! (`soak`) whether the server's memory plateaus under sustained load.
//!
//! ## Map
//!
//! (What this crate holds, file by file; `ARCHITECTURE.md` keeps the one-line summary.)
//!
//! the benchmark harness and the plain-PostgreSQL baseline
//! peer (`run`), and the conversation plane's (`talk`: fanout beside a bare
//! tokio-tungstenite server, ingest over HTTP and at the writer, settle beside
//! messages, memory per idle socket; `attention`: the attention query over a
//! million messages on SQLite and PostgreSQL, filled in bulk); see `BENCHMARKS.md`.

pub mod attention;
pub mod baseline;
pub mod drive;
pub mod gate;
pub mod limits;
pub mod metrics;
pub mod procfs;
pub mod relay;
pub mod report;
pub mod servers;
pub mod setup;
pub mod soak;
pub mod stream;
pub mod talk;
pub mod talk_cmd;

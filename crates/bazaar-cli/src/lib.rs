//! Library side of the `bazaar` binary: process plumbing and the demo story,
//! shared by `main.rs` and the integration tests.

pub mod attack;
pub mod demo;
pub mod runtime;

/// Where the embedded store lives and which database to use instead.
#[derive(clap::Args, Clone)]
pub struct StoreArgs {
    /// Data directory for the embedded SQLite store (and the operator credential file).
    #[arg(long, env = "BAZAAR_DATA_DIR", default_value = "./bazaar-data")]
    pub data_dir: std::path::PathBuf,
    /// Use PostgreSQL instead of the embedded store, e.g. postgres://postgres@127.0.0.1/bazaar
    #[arg(long, env = "BAZAAR_DATABASE_URL")]
    pub database_url: Option<String>,
}

//! Throwaway PostgreSQL databases for the conversation plane's tests: the shared helpers
//! of `bazaar-postgres-testing`, re-exported where this engine's tests (and
//! its dependants') have always found them.

pub use bazaar_postgres_testing::*;

//! bazaar-pg's tests: reading URLs, the one migration runner, and connecting with each `sslmode` to a
//! throwaway PostgreSQL with TLS and to the suite's plain one.

mod connect;
mod migrations;
mod parse;
mod server;

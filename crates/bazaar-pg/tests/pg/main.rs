//! bazaar-pg's tests: reading URLs, and connecting with each `sslmode` to a
//! throwaway PostgreSQL with TLS and to the suite's plain one.

mod connect;
mod parse;
mod server;

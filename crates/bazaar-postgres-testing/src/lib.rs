//! Helpers for tests that need a throwaway PostgreSQL database: where the
//! test server is, a database created for one test and dropped after it, a
//! fresh schema per case, and a URL that puts a connection in one schema.
//! One copy for every PostgreSQL engine (the ledger's, the conversation
//! plane's, the relay's), so no plane depends on another's crate for its
//! tests. Not for production: these panic on failure, and only tests (and the
//! benchmark harness) depend on this crate (`tidy.rs` checks it).
//!
//! ## Map
//!
//! (What this crate holds, file by file; `ARCHITECTURE.md` keeps the one-line summary.)
//!
//! throwaway PostgreSQL databases and schemas
//! for the three PostgreSQL engines' tests and every test that needs a
//! database, so no plane depends on another's crate to test.

use std::sync::atomic::{AtomicU64, Ordering};

use tokio_postgres::NoTls;

/// Where the test server is unless `BAZAAR_TEST_DATABASE_URL` says otherwise.
pub const DEFAULT_TEST_URL: &str = "postgres://postgres@127.0.0.1:5432/postgres";

static NEXT_DATABASE: AtomicU64 = AtomicU64::new(0);

/// The admin URL tests connect to, from `BAZAAR_TEST_DATABASE_URL` or the default.
pub fn admin_url() -> String {
    std::env::var("BAZAAR_TEST_DATABASE_URL").unwrap_or_else(|_| DEFAULT_TEST_URL.to_string())
}

/// `url` pointed at database `name` (URL or key=value form).
pub fn with_database(url: &str, name: &str) -> String {
    let Some(scheme_end) = url.find("://") else {
        return format!("{url} dbname={name}");
    };
    let rest = &url[scheme_end + 3..];
    let query = rest.find('?').map(|i| &rest[i..]).unwrap_or("");
    let authority_end = rest.find(['/', '?']).unwrap_or(rest.len());
    format!("{}{}/{name}{query}", &url[..scheme_end + 3], &rest[..authority_end])
}

/// `url` with `schema` as the connection's search path, so unqualified
/// tables (the store's and its migrations') live in that schema.
pub fn with_schema(url: &str, schema: &str) -> String {
    let joiner = if url.contains('?') { '&' } else { '?' };
    format!("{url}{joiner}options=-c%20search_path%3D{schema}")
}

/// Run `sql` (one or more statements) on the database at `url`.
pub fn execute(url: &str, sql: &str) {
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    runtime.block_on(async {
        let (client, connection) = tokio_postgres::connect(url, NoTls)
            .await
            .unwrap_or_else(|e| panic!("PostgreSQL must be reachable at {url}: {e}"));
        tokio::spawn(connection);
        client.batch_execute(sql).await.unwrap_or_else(|e| panic!("{sql}: {e}"));
    });
}

/// A database of its own for one test, dropped (even by panic) when this is.
pub struct ThrowawayDatabase {
    pub name: String,
    pub url: String,
    next_schema: AtomicU64,
}

impl ThrowawayDatabase {
    /// Create `{prefix}_{pid}_{n}` on the admin server. Commits are not
    /// waited for on disk: a test database needs no durability, only speed.
    pub fn create(prefix: &str) -> ThrowawayDatabase {
        let n = NEXT_DATABASE.fetch_add(1, Ordering::SeqCst);
        let name = format!("{prefix}_{}_{n}", std::process::id());
        let admin = admin_url();
        execute(&admin, &format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)"));
        execute(&admin, &format!("CREATE DATABASE {name}"));
        execute(&admin, &format!("ALTER DATABASE {name} SET synchronous_commit = off"));
        ThrowawayDatabase { url: with_database(&admin, &name), name, next_schema: AtomicU64::new(0) }
    }

    /// A new, empty schema `case_{n}` in this database, and the URL of a
    /// connection whose search path is that schema: a fresh store for one case.
    pub fn fresh_schema(&self) -> String {
        let schema = format!("case_{}", self.next_schema.fetch_add(1, Ordering::SeqCst));
        execute(&self.url, &format!("CREATE SCHEMA {schema}"));
        with_schema(&self.url, &schema)
    }
}

impl Drop for ThrowawayDatabase {
    fn drop(&mut self) {
        let sql = format!("DROP DATABASE IF EXISTS {} WITH (FORCE)", self.name);
        // Not `execute`: a panic while unwinding would abort the test binary.
        let dropped = std::panic::catch_unwind(|| execute(&admin_url(), &sql));
        if dropped.is_err() {
            eprintln!("could not drop database {}", self.name);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn database_and_schema_urls_are_rewritten() {
        assert_eq!(with_database("postgres://u@h:5432/postgres", "x"), "postgres://u@h:5432/x");
        assert_eq!(with_database("postgres://u@h/postgres?sslmode=disable", "x"), "postgres://u@h/x?sslmode=disable");
        assert_eq!(with_database("postgres://u@h", "x"), "postgres://u@h/x");
        assert_eq!(with_schema("postgres://u@h/x", "s"), "postgres://u@h/x?options=-c%20search_path%3Ds");
        assert_eq!(with_schema("postgres://u@h/x?a=b", "s"), "postgres://u@h/x?a=b&options=-c%20search_path%3Ds");
        assert_eq!(with_database("host=h user=u", "x"), "host=h user=u dbname=x");
    }
}

//! Connecting with each `sslmode`: to a throwaway server with TLS (one per
//! test, its certificate made by the test), to one with TLS off, and to the
//! suite's server (`BAZAAR_TEST_DATABASE_URL`, whatever its TLS).

use crate::server::{Authority, Server};
use bazaar_pg::Database;
use std::sync::Arc;

/// Whether the session `url` opens is encrypted, as the server sees it.
async fn ssl_in_use(url: &str) -> Result<bool, bazaar_pg::Error> {
    let (client, connection) = Database::from_url(url)?.connect().await?;
    tokio::spawn(connection);
    let row = client.query_one("SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()", &[]).await.unwrap();
    Ok(row.get(0))
}

/// The error connecting to `url` gives; panics if it connects.
async fn refusal(url: &str) -> String {
    match ssl_in_use(url).await {
        Ok(ssl) => panic!("{url} connected (ssl = {ssl}) but should have been refused"),
        Err(error) => error.to_string(),
    }
}

fn assert_mentions(text: &str, parts: &[&str]) {
    for part in parts {
        assert!(text.contains(part), "{text:?} does not mention {part:?}");
    }
}

#[tokio::test]
async fn each_mode_connects_to_a_tls_server_as_it_promises() {
    let server = Server::start_tls();
    let ca = format!("sslrootcert={}", server.ca_file.display());
    // An authority the server's certificate does not come from.
    let other_ca = server.ca_file.with_file_name("other-ca.pem");
    std::fs::write(&other_ca, Authority::new("some other CA").cert.pem()).unwrap();
    let other = format!("sslrootcert={}", other_ca.display());
    // A name the certificate does not carry, reached at the server's address.
    let wrong_host = "not-in-cert.invalid";

    let encrypted = [
        server.url("127.0.0.1", "sslmode=require"),
        server.url("127.0.0.1", "sslmode=prefer"),
        server.url("localhost", &format!("sslmode=verify-full&{ca}")),
        server.url("127.0.0.1", &format!("sslmode=verify-full&{ca}")),
        server.url("127.0.0.1", &format!("sslmode=require&{ca}")),
        // verify-ca checks the chain, not the name.
        server.url(wrong_host, &format!("hostaddr=127.0.0.1&sslmode=verify-ca&{ca}")),
    ];
    for url in encrypted {
        assert!(ssl_in_use(&url).await.unwrap_or_else(|e| panic!("{url}: {e}")), "{url} is not encrypted");
    }

    let unknown_issuer = ["sslmode=", "invalid peer certificate", "UnknownIssuer"];
    for url in [
        server.url("localhost", &format!("sslmode=verify-full&{other}")),
        server.url("localhost", &format!("sslmode=verify-ca&{other}")),
        server.url("localhost", &format!("sslmode=require&{other}")),
        // Without sslrootcert, the webpki roots: no public authority signed this one.
        server.url("localhost", "sslmode=verify-full"),
    ] {
        assert_mentions(&refusal(&url).await, &unknown_issuer);
    }
    let url = server.url(wrong_host, &format!("hostaddr=127.0.0.1&sslmode=verify-full&{ca}"));
    assert_mentions(&refusal(&url).await, &["sslmode=verify-full", "certificate not valid for name", wrong_host]);
}

#[tokio::test(flavor = "multi_thread")]
async fn the_ledger_store_connects_with_the_mode_its_url_asks_for() {
    let server = Server::start_tls();
    let url = server.url("127.0.0.1", "sslmode=require");
    let clock = Arc::new(bazaar_types::ManualClock::new(bazaar_types::Timestamp(1_767_225_600_000)));
    let config = bazaar_core::apply::Config::standard();
    let store = bazaar_store_postgres::PostgresStore::connect(&url, config, clock).await.unwrap();
    let (client, connection) = Database::from_url(&url).unwrap().connect().await.unwrap();
    tokio::spawn(connection);
    let sessions = "SELECT a.application_name, s.ssl FROM pg_stat_activity a JOIN pg_stat_ssl s USING (pid) \
                    WHERE a.application_name LIKE 'bazaar-%' ORDER BY 1";
    let rows = client.query(sessions, &[]).await.unwrap();
    let seen: Vec<(String, bool)> = rows.iter().map(|r| (r.get(0), r.get(1))).collect();
    let readers = seen.iter().filter(|(name, _)| name == "bazaar-reader").count();
    assert_eq!(readers, bazaar_store_postgres::READERS_MAX, "{seen:?}");
    assert!(seen.iter().any(|(name, _)| name == "bazaar-writer"), "{seen:?}");
    assert!(seen.iter().all(|(_, ssl)| *ssl), "a store session is not encrypted: {seen:?}");
    drop(store);
}

#[tokio::test]
async fn a_server_without_tls_is_refused_only_where_tls_is_required() {
    let server = Server::start_plain();
    for url in [
        server.url("127.0.0.1", ""),
        server.url("127.0.0.1", "sslmode=disable"),
        server.url("127.0.0.1", "sslmode=prefer"),
    ] {
        assert!(!ssl_in_use(&url).await.unwrap_or_else(|e| panic!("{url}: {e}")), "{url}: the server has TLS off");
    }
    for mode in ["require", "verify-ca", "verify-full"] {
        let text = refusal(&server.url("127.0.0.1", &format!("sslmode={mode}"))).await;
        assert_mentions(&text, &[&format!("sslmode={mode}"), "server does not support TLS"]);
    }
}

#[tokio::test]
async fn without_sslmode_the_suite_server_is_reached_in_plain_text() {
    // Absent means disable, not libpq's prefer: no TLS even where the server
    // offers it (Debian's cluster has ssl=on with its snakeoil certificate).
    let admin = bazaar_postgres_testing::admin_url();
    let with = |param: &str| match (admin.contains("://"), admin.contains('?')) {
        (true, true) => format!("{admin}&{param}"),
        (true, false) => format!("{admin}?{param}"),
        (false, _) => format!("{admin} {param}"),
    };
    for url in [admin.clone(), with("sslmode=disable")] {
        let ssl = ssl_in_use(&url).await.unwrap_or_else(|e| panic!("PostgreSQL must be reachable at {url}: {e}"));
        assert!(!ssl, "{url} was encrypted though it did not ask for TLS");
    }
}

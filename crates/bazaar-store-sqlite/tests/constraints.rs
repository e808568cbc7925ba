//! The second layer of exactly-once on SQLite: even with the core bypassed
//! (raw SQL on the file), a token settles once, an order is paid once, a hold
//! resolves once, no account overdraws, and transfers and events are immutable.

use rusqlite::{params, Connection};

fn refused(conn: &Connection, sql: &str) -> bool {
    match conn.execute(sql, []) {
        Err(rusqlite::Error::SqliteFailure(e, _)) => e.code == rusqlite::ErrorCode::ConstraintViolation,
        other => panic!("expected a constraint violation for {sql}, got {other:?}"),
    }
}

#[test]
fn the_database_refuses_what_the_core_would() {
    let dir = std::env::temp_dir().join(format!("bazaar-constraints-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("c.db");
    let runtime = tokio::runtime::Runtime::new().unwrap();
    // Open through the adapter so the schema is exactly what it migrates.
    let store = runtime.block_on(async {
        let clock = std::sync::Arc::new(bazaar_types::ManualClock::new(bazaar_types::Timestamp(0)));
        bazaar_store_sqlite::SqliteStore::open(&path, bazaar_store::conformance::test_config(), clock).unwrap()
    });
    let conn = Connection::open(&path).unwrap();
    conn.execute("INSERT INTO settlements VALUES ('s1', 'tok-1', 'b', 'shop', 'order-1', 100, 1, 99, 0)", params![])
        .unwrap();
    assert!(refused(&conn, "INSERT INTO settlements VALUES ('s2', 'tok-1', 'b', 'shop', 'order-2', 100, 1, 99, 0)"));
    assert!(refused(&conn, "INSERT INTO settlements VALUES ('s3', 'tok-2', 'b', 'shop', 'order-1', 100, 1, 99, 0)"));
    // Holds are read through the `holds` view and resolved in `hold_rows` (migration 0012).
    conn.execute("INSERT INTO holds VALUES ('h2', 'acct:b', 100, 0, 1, 'pending', 0, NULL)", []).unwrap();
    assert!(refused(&conn, "INSERT INTO holds VALUES ('h2', 'acct:b', 100, 0, 1, 'pending', 0, NULL)"));
    conn.execute("UPDATE hold_rows SET state = 'posted', posted_amount = 100 WHERE id = 'h2'", []).unwrap();
    assert!(refused(&conn, "UPDATE hold_rows SET state = 'voided' WHERE id = 'h2'"), "a hold resolves once");
    assert!(refused(&conn, "INSERT INTO accounts VALUES ('acct:x', 0, 10, 5, 0)"), "no overdraft");
    conn.execute("INSERT INTO accounts VALUES ('sys:issuance-test', 1, 10, 5, 0)", []).unwrap();
    conn.execute("INSERT INTO transfers (id, debit, credit, amount, kind, hold, link, authored_by, on_behalf_of, at) VALUES ('t1', 'a', 'b', 5, 'payment', NULL, 'l', 'x', 'x', 0)", []).unwrap();
    assert!(conn.execute("UPDATE transfers SET amount = 6 WHERE id = 't1'", []).is_err(), "transfers are immutable");
    assert!(conn.execute("DELETE FROM transfers", []).is_err(), "transfers are immutable");
    assert!(conn.execute("UPDATE transfer_rows SET amount = 6", []).is_err(), "transfers are immutable");
    assert!(conn.execute("DELETE FROM transfer_rows", []).is_err(), "transfers are immutable");
    assert!(refused(&conn, "INSERT INTO transfers (id, debit, credit, amount, kind, hold, link, authored_by, on_behalf_of, at) VALUES ('t1', 'a', 'b', 5, 'payment', NULL, 'l', 'x', 'x', 0)"));
    drop(store);
    std::fs::remove_dir_all(&dir).ok();
}

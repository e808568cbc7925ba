//! `bazaar audit` passes on an honest store and exits non-zero when a cached
//! balance or an event has been tampered with.

use std::process::Command;

fn audit(dir: &std::path::Path) -> (i32, String) {
    let output =
        Command::new(env!("CARGO_BIN_EXE_bazaar")).args(["audit", "--json", "--data-dir"]).arg(dir).output().unwrap();
    (output.status.code().unwrap_or(-1), String::from_utf8_lossy(&output.stdout).to_string())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn audit_catches_tampering() {
    let dir = std::env::temp_dir().join(format!("bazaar-audit-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    bazaar_cli::demo::story(&dir, 5, &|_| {}).await.unwrap();
    let db = dir.join(bazaar_cli::runtime::SQLITE_FILE);
    let (code, report) = audit(&dir);
    assert_eq!(code, 0, "{report}");
    assert!(report.contains("\"ok\":true"), "{report}");

    // A cached balance that no longer matches its transfers.
    let conn = rusqlite::Connection::open(&db).unwrap();
    conn.execute(
        "UPDATE accounts SET credits_posted = credits_posted + 1 WHERE id LIKE 'acct:%' AND credits_posted > 0",
        [],
    )
    .unwrap();
    let (code, report) = audit(&dir);
    assert_eq!(code, 1, "{report}");
    assert!(report.contains("transfers sum to"), "{report}");
    conn.execute(
        "UPDATE accounts SET credits_posted = credits_posted - 1 WHERE id LIKE 'acct:%' AND credits_posted > 0",
        [],
    )
    .unwrap();
    assert_eq!(audit(&dir).0, 0);

    // The event ledger refuses edits; an attacker who drops the guard still breaks the chain.
    // (`events` is a view over the compact `event_rows`, migration 0012: the rows are where an edit would go.)
    assert!(conn.execute("UPDATE events SET body = '{}' WHERE seq = 3", []).is_err(), "events are append-only");
    assert!(conn.execute("UPDATE event_rows SET body = '{}' WHERE seq = 3", []).is_err(), "events are append-only");
    conn.execute_batch(
        "DROP TRIGGER events_no_update; UPDATE event_rows SET body = '{\"forged\":true}' WHERE seq = 3;",
    )
    .unwrap();
    let (code, report) = audit(&dir);
    assert_eq!(code, 1, "{report}");
    assert!(report.contains("event chain"), "{report}");
    std::fs::remove_dir_all(&dir).ok();
}

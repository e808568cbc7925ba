//! Runs the shared conformance suite against the SQLite adapter.

use bazaar_store::Store;
use bazaar_store_sqlite::SqliteStore;
use std::sync::Arc;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_passes_the_conformance_suite() {
    let dir = std::env::temp_dir().join(format!("bazaar-conf-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let counter = std::sync::atomic::AtomicU64::new(0);
    let dir2 = dir.clone();
    bazaar_store::conformance::run_all(move |config, clock| {
        let n = counter.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        let path = dir2.join(format!("case-{n}.db"));
        Box::pin(async move { Arc::new(SqliteStore::open(path, config, clock).unwrap()) as Arc<dyn Store> })
    })
    .await;
    std::fs::remove_dir_all(&dir).ok();
}

/// The settle-key migration over records the previous build wrote (see
/// `conformance::settle_keys_migrate`): the reopen forgets that 0010 ran, so
/// it runs again over them as an upgrade would.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_migrates_settle_keys_to_name_the_token() {
    let dir = std::env::temp_dir().join(format!("bazaar-settle-keys-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("bazaar.db");
    let clock = Arc::new(bazaar_types::ManualClock::new(bazaar_store::conformance::EPOCH));
    let config = bazaar_store::conformance::test_config();
    let store = Arc::new(SqliteStore::open(&path, config.clone(), clock.clone()).unwrap()) as Arc<dyn Store>;
    let key = ed25519_dalek::SigningKey::from_bytes(&[42u8; 32]);
    let fixture = bazaar_store::conformance::Fixture::new(store, clock.clone(), key).await;
    let reopened = path.clone();
    bazaar_store::conformance::settle_keys_migrate(fixture, move |store| {
        Box::pin(async move {
            drop(store);
            let conn = rusqlite::Connection::open(&reopened).unwrap();
            let forgot = conn
                .execute("DELETE FROM schema_migrations WHERE name = '0010_settle_keys_name_the_token'", [])
                .unwrap();
            assert_eq!(forgot, 1, "0010 had run on the fresh store");
            drop(conn);
            Arc::new(SqliteStore::open(&reopened, config, clock).unwrap()) as Arc<dyn Store>
        })
    })
    .await;
    std::fs::remove_dir_all(&dir).ok();
}

/// A paid call's lasting footprint on SQLite (pages in use: the file's pages less its free list) stays under
/// `PAID_CALL_STORED_BYTES_MAX` once the idempotency window is pruned.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_paid_call_leaves_a_bounded_footprint() {
    use bazaar_store::conformance::{self, PAID_CALL_STORED_BYTES_GOAL, PAID_CALL_STORED_BYTES_MAX};
    let dir = std::env::temp_dir().join(format!("bazaar-footprint-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("bazaar.db");
    let clock = Arc::new(bazaar_types::ManualClock::new(conformance::EPOCH));
    let config = conformance::test_config();
    let store = Arc::new(SqliteStore::open(&path, config, clock.clone()).unwrap()) as Arc<dyn Store>;
    let key = ed25519_dalek::SigningKey::from_bytes(&[42u8; 32]);
    let fixture = conformance::Fixture::new(store, clock, key).await;
    let measured = path.clone();
    let per_call = conformance::paid_call_footprint(fixture, move || {
        let path = measured.clone();
        Box::pin(async move {
            let conn = rusqlite::Connection::open(&path).unwrap();
            let pragma =
                |name: &str| conn.query_row(&format!("PRAGMA {name}"), [], |row| row.get::<_, i64>(0)).unwrap();
            ((pragma("page_count") - pragma("freelist_count")) * pragma("page_size")) as u64
        })
    })
    .await;
    eprintln!("sqlite: {per_call:.0} bytes per paid call after the window (goal {PAID_CALL_STORED_BYTES_GOAL})");
    assert!(per_call <= PAID_CALL_STORED_BYTES_MAX, "{per_call:.0} bytes per paid call");
    assert!(per_call > 0.0, "the calls left their records");
    std::fs::remove_dir_all(&dir).ok();
}

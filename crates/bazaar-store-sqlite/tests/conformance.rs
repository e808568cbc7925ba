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

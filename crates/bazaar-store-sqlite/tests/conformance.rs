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

//! State-machine documents and blobs on SQLite: the shared engine-level case, driven
//! through a writer engine of its own on the store's file.

use bazaar_store::conformance::{blobs, documents, test_config, EPOCH};
use bazaar_store_sqlite::{SqliteEngine, SqliteStore};
use bazaar_types::ManualClock;
use std::sync::Arc;

#[test]
fn documents_are_stored_listed_and_inserted_once() {
    let dir = std::env::temp_dir().join(format!("bazaar-docs-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("docs.db");
    let _ = std::fs::remove_file(&path);
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let store = runtime.block_on(async { SqliteStore::open(&path, test_config(), Arc::new(ManualClock::new(EPOCH))) });
    let store = store.unwrap();
    let mut engine = SqliteEngine::connect(&path).unwrap();
    documents(&mut engine, &store, &runtime);
    blobs(&mut engine, &store, &runtime);
    drop(engine);
    drop(store);
    std::fs::remove_dir_all(&dir).ok();
}

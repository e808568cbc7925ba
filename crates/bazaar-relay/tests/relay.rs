//! The relay crate's integration tests: the storage conformance suite on
//! the embedded engine (PostgreSQL runs the same cases in its own crate).

use bazaar_relay::conformance::{self, Harness};
use bazaar_relay::sqlite::SqliteEventStore;
use bazaar_relay::EventStore;
use std::sync::atomic::{AtomicU64, Ordering};

static NEXT: AtomicU64 = AtomicU64::new(0);

struct Sqlite {
    dir: std::path::PathBuf,
}

impl Harness for Sqlite {
    fn fresh(&self) -> Box<dyn EventStore> {
        let n = NEXT.fetch_add(1, Ordering::SeqCst);
        Box::new(SqliteEventStore::open(&self.dir.join(format!("relay-{n}.db"))).unwrap())
    }
}

#[test]
fn sqlite_conformance() {
    let dir = std::env::temp_dir().join(format!("bazaar-relay-conformance-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    conformance::run_all(&Sqlite { dir: dir.clone() });
    std::fs::remove_dir_all(&dir).ok();
}

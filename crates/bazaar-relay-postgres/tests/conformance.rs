//! The relay's storage conformance suite on PostgreSQL (the same cases the
//! SQLite engine passes), each case in a fresh schema of one throwaway
//! database dropped at the end; and the writer's own sequencing: two threads
//! sharing one store both commit. Fails (never skips) when PostgreSQL is
//! unreachable: it is at `BAZAAR_TEST_DATABASE_URL`, or the local default.

use std::sync::{Arc, Barrier};
use std::thread;

use bazaar_postgres_testing::ThrowawayDatabase;
use bazaar_relay::conformance::{self, Harness, T0};
use bazaar_relay::{Encoded, EventStore, Filter, Signer, Written};
use bazaar_relay_postgres::PostgresEventStore;
use bazaar_types::SeededEntropy;

/// Each case's store is a new schema in the test's throwaway database.
struct Postgres {
    database: ThrowawayDatabase,
}

impl Harness for Postgres {
    fn fresh(&self) -> Box<dyn EventStore> {
        Box::new(PostgresEventStore::connect(&self.database.fresh_schema()).expect("connect"))
    }
}

#[test]
fn conformance_suite_passes_on_postgres() {
    conformance::run_all(&Postgres { database: ThrowawayDatabase::create("relay_conformance") });
}

#[test]
fn two_threads_writing_batches_to_one_store_both_commit() {
    let database = ThrowawayDatabase::create("relay_two_writers");
    let store = Arc::new(PostgresEventStore::connect(&database.fresh_schema()).expect("connect"));
    let start = Arc::new(Barrier::new(2));
    let writers: Vec<_> = (0..2u64)
        .map(|n| {
            let (store, start) = (Arc::clone(&store), Arc::clone(&start));
            thread::spawn(move || {
                let author = Signer::generate(&SeededEntropy::new(n + 1));
                let batch: Vec<_> = (0..50).map(|i| author.sign(T0 + i, 1, vec![], format!("{n}:{i}"))).collect();
                start.wait();
                store.write(&Encoded::all(&batch), T0).expect("write")
            })
        })
        .collect();
    for writer in writers {
        assert_eq!(writer.join().unwrap(), vec![Written::Stored; 50]);
    }
    let all = store.query(&[Filter { limit: Some(1_000), ..Filter::default() }], T0).unwrap();
    assert_eq!(all.len(), 100, "no write lost");
}

//! The conversation plane's conformance suite and model test on PostgreSQL,
//! each test in a throwaway database dropped at its end, each case in a fresh
//! schema of it. Two stores on one schema are two connections: the two
//! writers of the gapless test. Fails (never skips) when PostgreSQL is unreachable.

use std::cell::Cell;
use std::sync::Arc;

use bazaar_conversation::conformance::{self, BoxedStore, Harness, Step};
use bazaar_conversation_postgres::PostgresConversationStore;
use bazaar_postgres_testing::{execute, with_schema, ThrowawayDatabase};
use bazaar_types::{Clock, SeededEntropy};
use proptest::prelude::*;
use proptest::test_runner::{Config, TestRunner};

/// Each case's database is a new schema in the test's throwaway database.
struct Postgres {
    database: ThrowawayDatabase,
    next_schema: Cell<u64>,
}

impl Postgres {
    fn new(prefix: &str) -> Postgres {
        Postgres { database: ThrowawayDatabase::create(prefix), next_schema: Cell::new(0) }
    }
}

impl Harness for Postgres {
    /// The URL of a connection whose search path is the case's schema.
    type Database = String;

    fn fresh(&self) -> String {
        let n = self.next_schema.get();
        self.next_schema.set(n + 1);
        let schema = format!("case_{n}");
        execute(&self.database.url, &format!("CREATE SCHEMA {schema}"));
        with_schema(&self.database.url, &schema)
    }

    fn open_at(&self, url: &String, clock: Arc<dyn Clock>) -> BoxedStore {
        Box::new(PostgresConversationStore::connect(url, clock, Arc::new(SeededEntropy::new(7))).unwrap())
    }
}

#[test]
fn conformance_suite_passes_on_postgres() {
    conformance::run_all(&Postgres::new("conversation_conformance"));
}

/// The same strategy as the SQLite test's.
fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        1 => (0..3usize, 0..2usize).prop_map(|(who, room)| Step::Join { who, room }),
        1 => (0..3usize, 0..2usize).prop_map(|(who, room)| Step::Leave { who, room }),
        1 => (0..3usize, 0..3usize, any::<bool>()).prop_map(|(who, channel, muted)| Step::Mute { who, channel, muted }),
        4 => (0..3usize, 0..3usize, proptest::option::of(0..3usize), proptest::option::of(1..4u64))
            .prop_map(|(who, channel, mention, reply_to)| Step::Post { who, channel, mention, reply_to }),
        1 => (0..3usize, 0..3usize, 0..6u64).prop_map(|(who, channel, seq)| Step::Read { who, channel, seq }),
    ]
}

#[test]
fn attention_equals_the_unread_eligible_messages_on_postgres() {
    let harness = Postgres::new("conversation_model");
    let mut runner = TestRunner::new(Config { cases: 12, ..Config::default() });
    let outcome = runner.run(&proptest::collection::vec(step(), 1..40), |steps| {
        conformance::run_steps(&harness, &steps);
        Ok(())
    });
    if let Err(failure) = outcome {
        panic!("{failure}");
    }
}

//! What the PostgreSQL engine adds to the shared cases: two nodes (two stores
//! on one database) racing on one event, one replaceable address, or a
//! deletion and its target settle without an error as if one went first
//! (no second copy, no deleted event left), a batch too large to lock key by
//! key included; a tag value the TEXT type would
//! refuse (NUL) is stored and found; an event meeting several values of a tag
//! filter counts once against the limit; and connecting again migrates nothing.

use std::sync::{Arc, Barrier};
use std::thread;

use bazaar_postgres_testing::{execute, ThrowawayDatabase};
use bazaar_relay::conformance::T0;
use bazaar_relay::event::tag;
use bazaar_relay::kind::DELETION;
use bazaar_relay::{Encoded, Event, EventStore, Filter, Signer, Written};
use bazaar_relay_postgres::PostgresEventStore;
use bazaar_types::SeededEntropy;

fn signer(seed: u64) -> Signer {
    Signer::generate(&SeededEntropy::new(seed))
}

/// Two stores ("nodes") on one schema each write their batch at once; their outcomes.
fn race(url: &str, batches: [Vec<Event>; 2]) -> [Vec<Written>; 2] {
    let nodes = [PostgresEventStore::connect(url).unwrap(), PostgresEventStore::connect(url).unwrap()];
    let start = Arc::new(Barrier::new(2));
    thread::scope(|scope| {
        let runs: Vec<_> = nodes
            .iter()
            .zip(batches)
            .map(|(node, batch)| {
                let start = Arc::clone(&start);
                scope.spawn(move || {
                    start.wait();
                    node.write(&Encoded::all(&batch), T0).expect("a race is no error")
                })
            })
            .collect();
        let mut outcomes = runs.into_iter().map(|run| run.join().unwrap());
        [outcomes.next().unwrap(), outcomes.next().unwrap()]
    })
}

#[test]
fn two_nodes_writing_one_event_store_it_once_and_the_other_hears_duplicate() {
    let database = ThrowawayDatabase::create("relay_same_event");
    for round in 0..20 {
        let url = database.fresh_schema();
        let event = signer(1).sign(T0 + round, 1, vec![tag(&["t", "race"])], "one event, two nodes");
        let mut outcomes = race(&url, [vec![event.clone()], vec![event.clone()]]).concat();
        outcomes.sort_by_key(|written| *written != Written::Stored);
        assert_eq!(outcomes, vec![Written::Stored, Written::Duplicate], "round {round}");
        let store = PostgresEventStore::connect(&url).unwrap();
        assert_eq!(store.query(&[Filter::default()], T0).unwrap(), vec![event.to_json()]);
    }
}

#[test]
fn two_nodes_racing_versions_of_a_replaceable_event_keep_only_the_newest() {
    let database = ThrowawayDatabase::create("relay_replaceable_race");
    let author = signer(1);
    for round in 0..20 {
        let url = database.fresh_schema();
        let older = author.sign(T0, 10_002, vec![], format!("older {round}"));
        let newer = author.sign(T0 + 1, 10_002, vec![], format!("newer {round}"));
        let [first, second] = race(&url, [vec![older.clone()], vec![newer.clone()]]);
        assert_eq!(second, vec![Written::Stored], "the newer version is always taken");
        assert!(matches!(first[..], [Written::Stored | Written::Superseded]));
        let store = PostgresEventStore::connect(&url).unwrap();
        let kept = store.query(&[Filter { kinds: Some(vec![10_002]), ..Filter::default() }], T0).unwrap();
        assert_eq!(kept, vec![newer.to_json()], "round {round}: one version, the newest");
    }
}

#[test]
fn a_batch_past_the_key_limit_runs_alone_and_still_settles_a_race() {
    let database = ThrowawayDatabase::create("relay_large_batch_race");
    let (author, filler) = (signer(1), signer(2));
    for round in 0..5 {
        let url = database.fresh_schema();
        // 600 events: more keys than the engine locks one by one (512); the
        // contested one first, so its transaction stays open long after it.
        let mut large = vec![author.sign(T0, 10_002, vec![], format!("older {round}"))];
        large.extend((0..599).map(|n| filler.sign(T0 + n, 1, vec![], format!("{round}:{n}"))));
        let newer = author.sign(T0 + 1, 10_002, vec![], format!("newer {round}"));
        let [first, second] = race(&url, [large, vec![newer.clone()]]);
        assert_eq!(second, vec![Written::Stored]);
        assert!(first[1..].iter().all(|written| *written == Written::Stored));
        let store = PostgresEventStore::connect(&url).unwrap();
        let kept = store.query(&[Filter { kinds: Some(vec![10_002]), ..Filter::default() }], T0).unwrap();
        assert_eq!(kept, vec![newer.to_json()], "round {round}");
    }
}

#[test]
fn a_deletion_racing_its_target_on_another_node_always_wins() {
    let database = ThrowawayDatabase::create("relay_deletion_race");
    let author = signer(1);
    for round in 0..20 {
        let url = database.fresh_schema();
        let note = author.sign(T0 + round, 1, vec![], "regret");
        let delete = author.sign(T0 + round + 1, DELETION, vec![tag(&["e", &note.id.to_hex()])], "");
        let [target, deletion] = race(&url, [vec![note.clone()], vec![delete.clone()]]);
        assert_eq!(deletion, vec![Written::Stored]);
        assert!(matches!(target[..], [Written::Stored | Written::Deleted]));
        let store = PostgresEventStore::connect(&url).unwrap();
        assert_eq!(store.query(&[Filter::default()], T0).unwrap(), vec![delete.to_json()], "round {round}");
    }
}

#[test]
fn a_tag_value_with_nul_is_stored_and_found() {
    let database = ThrowawayDatabase::create("relay_nul_tag");
    let store = PostgresEventStore::connect(&database.fresh_schema()).unwrap();
    let author = signer(1);
    let odd = author.sign(T0, 1, vec![tag(&["t", "a\0b"])], "nul in a tag value");
    let post = author.sign(T0, 30_023, vec![tag(&["d", "x\0y"])], "nul in a d tag");
    let plain = author.sign(T0, 1, vec![], "beside it in the batch");
    assert_eq!(store.write(&Encoded::all(&[odd.clone(), post.clone(), plain]), T0).unwrap(), vec![Written::Stored; 3]);
    let by_tag = Filter { tags: vec![('t', vec!["a\0b".into()])], ..Filter::default() };
    assert_eq!(store.query(&[by_tag], T0).unwrap(), vec![odd.to_json()]);
    let by_d = Filter { tags: vec![('d', vec!["x\0y".into()])], ..Filter::default() };
    assert_eq!(store.query(&[by_d], T0).unwrap(), vec![post.to_json()]);
}

#[test]
fn an_event_meeting_several_values_of_a_tag_filter_counts_once_against_the_limit() {
    let database = ThrowawayDatabase::create("relay_tag_distinct");
    let store = PostgresEventStore::connect(&database.fresh_schema()).unwrap();
    let author = signer(1);
    let both = author.sign(T0, 1, vec![tag(&["t", "audio"]), tag(&["t", "video"])], "both");
    let older = author.sign(T0 - 1, 1, vec![tag(&["t", "audio"])], "older");
    store.write(&Encoded::all(&[both.clone(), older.clone()]), T0).unwrap();
    let filter =
        Filter { tags: vec![('t', vec!["audio".into(), "video".into()])], limit: Some(2), ..Filter::default() };
    assert_eq!(store.query(&[filter], T0).unwrap(), vec![both.to_json(), older.to_json()]);
}

#[test]
fn connecting_again_keeps_the_events_and_applies_no_migration_twice() {
    let database = ThrowawayDatabase::create("relay_reconnect");
    let url = database.fresh_schema();
    let event = signer(1).sign(T0, 1, vec![], "kept");
    PostgresEventStore::connect(&url).unwrap().write(&Encoded::all(std::slice::from_ref(&event)), T0).unwrap();
    let again = PostgresEventStore::connect(&url).unwrap();
    assert_eq!(again.query(&[Filter::default()], T0).unwrap(), vec![event.to_json()]);
    // One row per migration: the second connect found them applied.
    execute(
        &url,
        "DO $$ BEGIN IF (SELECT count(*) FROM relay_migrations) <> 1 THEN RAISE 'migrated twice'; END IF; END $$",
    );
}

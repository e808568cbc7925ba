//! Bodies on every engine: the first claim on an event decides who answers
//! it, once; a live lease keeps the answers with its holder; a released or
//! lapsed lease passes to the next body that claims.

use std::sync::Arc;

use bazaar_types::limits::BODY_LEASE_TTL_S;
use bazaar_types::ManualClock;

use super::{member, Case, Harness, CASE_EPOCH};

pub fn cases<H: Harness>() -> Vec<(&'static str, Case<H>)> {
    vec![("exactly_one_body_answers_each_event_and_the_lease_fails_over", one_body_answers::<H>)]
}

fn one_body_answers<H: Harness>(harness: &H) {
    let db = harness.fresh();
    let clock = Arc::new(ManualClock::new(CASE_EPOCH));
    let store = harness.open_at(&db, clock.clone());
    let alice = member("alice");
    // The first claim takes the lease; the other body's claim on the same event agrees.
    let first = store.claim_answer(&alice, 10, "daemon").unwrap();
    assert_eq!(store.claim_answer(&alice, 10, "workbench").unwrap(), first);
    assert_eq!(first.body, "daemon");
    // While the lease is live, the holder answers even when the other claims first.
    assert_eq!(store.claim_answer(&alice, 11, "workbench").unwrap().body, "daemon");
    // Renewal is the holder's alone.
    assert!(!store.renew_lease(&alice, "workbench").unwrap());
    clock.advance_s(BODY_LEASE_TTL_S - 1);
    assert!(store.renew_lease(&alice, "daemon").unwrap());
    clock.advance_s(BODY_LEASE_TTL_S - 1);
    assert_eq!(store.claim_answer(&alice, 12, "workbench").unwrap().body, "daemon", "renewed, still held");
    // The holder goes away: the next claim passes the lease on.
    store.release_lease(&alice, "workbench").unwrap(); // not the holder: nothing happens
    assert_eq!(store.claim_answer(&alice, 13, "workbench").unwrap().body, "daemon");
    store.release_lease(&alice, "daemon").unwrap();
    assert_eq!(store.claim_answer(&alice, 14, "workbench").unwrap().body, "workbench");
    // A lapsed lease passes too.
    clock.advance_s(BODY_LEASE_TTL_S);
    assert_eq!(store.claim_answer(&alice, 15, "daemon").unwrap().body, "daemon");
    // Decided once: an earlier event keeps its answer whatever the lease says now.
    assert_eq!(store.claim_answer(&alice, 10, "workbench").unwrap().body, "daemon");
    assert_eq!(store.claim_answer(&alice, 14, "daemon").unwrap().body, "workbench");
    let recorded: Vec<(u64, String)> =
        store.answers(&alice, 0, 100).unwrap().into_iter().map(|a| (a.position, a.body)).collect();
    let expected = [(10, "daemon"), (11, "daemon"), (12, "daemon"), (13, "daemon"), (14, "workbench"), (15, "daemon")];
    assert_eq!(recorded, expected.map(|(p, b)| (p, b.to_string())).to_vec());
    // Another member's bodies are its own.
    assert_eq!(store.claim_answer(&member("bob"), 10, "workbench").unwrap().body, "workbench");
    assert_eq!(store.claim_answer(&alice, 16, "Bad Name").unwrap_err().code(), "body_name_invalid");
}

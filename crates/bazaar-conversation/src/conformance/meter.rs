//! The meter on every engine: counts add up per member, UTC day and transport.

use bazaar_types::Timestamp;

use super::{member, Case, Harness};
use crate::meter::{day_of, Metered};

pub fn cases<H: Harness>() -> Vec<(&'static str, Case<H>)> {
    vec![("the_meter_adds_up_per_member_day_and_transport", adds_up::<H>)]
}

fn count(who: &str, day: i64, transport: &str, events: u64) -> Metered {
    Metered { member: member(who), day, transport: transport.into(), events }
}

fn adds_up<H: Harness>(harness: &H) {
    let db = harness.fresh();
    let store = harness.open(&db);
    // 2023-11-14T22:13:20Z and the next UTC day.
    let today = day_of(Timestamp(1_700_000_000_000));
    assert_eq!(today, 19_675);
    store.add_to_meter(vec![count("alice", today, "websocket", 3), count("alice", today, "poll", 2)]).unwrap();
    store.add_to_meter(vec![count("alice", today, "websocket", 4), count("bob", today, "websocket", 9)]).unwrap();
    store.add_to_meter(vec![count("alice", today + 1, "webhook", 1)]).unwrap();
    store.add_to_meter(Vec::new()).unwrap();
    let alice: Vec<(String, u64)> =
        store.meter(&member("alice"), today).unwrap().into_iter().map(|m| (m.transport, m.events)).collect();
    assert_eq!(alice, vec![("poll".to_string(), 2), ("websocket".to_string(), 7)]);
    assert_eq!(store.meter(&member("alice"), today + 1).unwrap()[0].events, 1);
    assert!(store.meter(&member("carol"), today).unwrap().is_empty());
    assert_eq!(day_of(Timestamp(-1)), -1, "before 1970 is the day before");
}

//! The webhook outbox's cases: a post owes exactly its current members'
//! endpoints a delivery; each endpoint receives in log order; failures retry
//! on the schedule and end on the dead-letter list, which replays; a 410
//! disables; a lapsed lease (a sender that died mid-attempt) gives the
//! delivery back; a rotation signs with both secrets for its overlap.

use std::sync::Arc;

use bazaar_types::limits::{WEBHOOK_ENDPOINTS_PER_MEMBER_MAX, WEBHOOK_LEASE_MS};
use bazaar_types::{Clock, ManualClock, Timestamp};

use super::{member, room, say, Case, Harness, MapDirectory, CASE_EPOCH};
use crate::webhooks::sign::{ATTEMPTS_MAX, RETRY_SCHEDULE_S};
use crate::{Attempt, DeliveryState, Due};

pub fn cases<H: Harness>() -> Vec<(&'static str, Case<H>)> {
    vec![
        ("a_post_owes_each_current_members_endpoints_one_delivery", a_post_owes_current_members::<H>),
        ("each_endpoint_receives_in_order_retried_then_dead_lettered", in_order_retried_then_dead::<H>),
        ("a_410_disables_the_endpoint", a_410_disables::<H>),
        ("a_lapsed_lease_gives_the_delivery_back", a_lapsed_lease_gives_it_back::<H>),
        ("a_rotation_signs_with_both_secrets_for_its_overlap", rotation_overlap::<H>),
        ("webhook_limits_and_ownership_carry_their_codes", webhook_limits::<H>),
    ]
}

/// Claims and delivers everything due now; the kinds of what was delivered.
fn drain(store: &dyn crate::PlaneStore) -> Vec<crate::MessageKind> {
    let mut kinds = Vec::new();
    loop {
        let due = store.claim_deliveries(WEBHOOK_LEASE_MS, 10).unwrap();
        if due.is_empty() {
            return kinds;
        }
        for each in due {
            store.finish_delivery(each.delivery.id, Attempt::Delivered { status: 200 }).unwrap();
            kinds.push(each.message.kind);
        }
    }
}

fn positions(due: &[Due]) -> Vec<u64> {
    due.iter().map(|d| d.message.position).collect()
}

fn a_post_owes_current_members<H: Harness>(harness: &H) {
    let db = harness.fresh();
    let store = harness.open(&db);
    let dir = MapDirectory::with(&["alice", "bob", "carol"]);
    let red = room(store.as_ref(), "alice", false);
    store.join(&red, &member("bob")).unwrap();
    store.join(&red, &member("carol")).unwrap();
    let bob_one = store.add_webhook(&member("bob"), "https://bob.example/one").unwrap();
    let bob_two = store.add_webhook(&member("bob"), "https://bob.example/two").unwrap();
    store.add_webhook(&member("carol"), "https://carol.example/").unwrap();
    assert!(bob_one.secret.starts_with("whsec_") && bob_one.secret != bob_two.secret);
    store.leave(&red, &member("carol")).unwrap();
    // Carol's leave line is owed to everyone in the room when it was written, carol included.
    let owed = drain(store.as_ref());
    assert_eq!(owed.len(), 3);
    assert!(owed.iter().all(|kind| matches!(kind, crate::MessageKind::System(crate::SystemLine::Left { .. }))));
    let said = say(store.as_ref(), &dir, &red, "alice", "hello");
    let mut due = store.claim_deliveries(WEBHOOK_LEASE_MS, 10).unwrap();
    due.sort_by(|a, b| a.endpoint.url.cmp(&b.endpoint.url));
    let urls: Vec<&str> = due.iter().map(|d| d.endpoint.url.as_str()).collect();
    assert_eq!(urls, vec!["https://bob.example/one", "https://bob.example/two"], "carol left; alice has none");
    assert!(due.iter().all(|d| d.message == said && d.delivery.attempts == 0));
    assert_ne!(due[0].delivery.webhook_id(), due[1].delivery.webhook_id());
    assert!(!due[0].delivery.webhook_id().contains('.'));
    // Claimed deliveries are leased: a second claimer gets nothing.
    assert!(store.claim_deliveries(WEBHOOK_LEASE_MS, 10).unwrap().is_empty());
}

fn in_order_retried_then_dead<H: Harness>(harness: &H) {
    let db = harness.fresh();
    let clock = Arc::new(ManualClock::new(CASE_EPOCH));
    let store = harness.open_at(&db, clock.clone());
    let dir = MapDirectory::with(&["alice", "bob"]);
    let red = room(store.as_ref(), "alice", false);
    store.join(&red, &member("bob")).unwrap();
    let hook = store.add_webhook(&member("bob"), "https://bob.example/").unwrap();
    let first = say(store.as_ref(), &dir, &red, "alice", "one").position;
    let second = say(store.as_ref(), &dir, &red, "alice", "two").position;
    // Only the oldest is offered: the endpoint receives in log order.
    let due = store.claim_deliveries(WEBHOOK_LEASE_MS, 10).unwrap();
    assert_eq!(positions(&due), vec![first]);
    let failed = Attempt::Failed { status: Some(503), error: "busy".into() };
    let mut id = due[0].delivery.id;
    for attempt in 1..ATTEMPTS_MAX {
        let after = store.finish_delivery(id, failed.clone()).unwrap();
        assert_eq!((after.state, after.attempts), (DeliveryState::Pending, attempt));
        let wait = RETRY_SCHEDULE_S[attempt as usize - 1] as i64 * 1000;
        assert_eq!(after.next_attempt_at, Timestamp(clock.now().0 + wait));
        // Not before its time, and the second waits behind it.
        clock.advance_ms(wait - 1);
        assert!(store.claim_deliveries(WEBHOOK_LEASE_MS, 10).unwrap().is_empty(), "attempt {attempt}");
        clock.advance_ms(1);
        let due = store.claim_deliveries(WEBHOOK_LEASE_MS, 10).unwrap();
        assert_eq!(positions(&due), vec![first], "attempt {attempt}");
        id = due[0].delivery.id;
    }
    let dead = store.finish_delivery(id, failed).unwrap();
    assert_eq!((dead.state, dead.attempts, dead.last_status), (DeliveryState::Dead, ATTEMPTS_MAX, Some(503)));
    // The dead letter steps out of line; the next one goes.
    let due = store.claim_deliveries(WEBHOOK_LEASE_MS, 10).unwrap();
    assert_eq!(positions(&due), vec![second]);
    store.finish_delivery(due[0].delivery.id, Attempt::Delivered { status: 200 }).unwrap();
    let letters = store.deliveries(&member("bob"), &hook.id, DeliveryState::Dead, 10).unwrap();
    assert_eq!(letters.iter().map(|d| d.position).collect::<Vec<_>>(), vec![first]);
    // Replay puts it back with fresh attempts.
    assert_eq!(store.replay_dead(&member("bob"), &hook.id).unwrap(), 1);
    let due = store.claim_deliveries(WEBHOOK_LEASE_MS, 10).unwrap();
    assert_eq!(positions(&due), vec![first]);
    assert_eq!(due[0].delivery.attempts, 0);
    store.finish_delivery(due[0].delivery.id, Attempt::Delivered { status: 204 }).unwrap();
    let delivered = store.deliveries(&member("bob"), &hook.id, DeliveryState::Delivered, 10).unwrap();
    assert_eq!(delivered.iter().map(|d| d.position).collect::<Vec<_>>(), vec![first, second]);
    assert!(store.deliveries(&member("bob"), &hook.id, DeliveryState::Dead, 10).unwrap().is_empty());
}

fn a_410_disables<H: Harness>(harness: &H) {
    let db = harness.fresh();
    let store = harness.open(&db);
    let dir = MapDirectory::with(&["alice", "bob"]);
    let dm = store.open_dm(&member("alice"), &member("bob")).unwrap().id;
    let hook = store.add_webhook(&member("bob"), "https://bob.example/").unwrap();
    say(store.as_ref(), &dir, &dm, "alice", "one");
    let due = store.claim_deliveries(WEBHOOK_LEASE_MS, 10).unwrap();
    store.finish_delivery(due[0].delivery.id, Attempt::Gone).unwrap();
    let endpoint = store.webhooks(&member("bob")).unwrap().remove(0);
    assert_eq!(endpoint.id, hook.id);
    assert!(endpoint.disabled_at.is_some() && endpoint.disabled_reason.is_some());
    say(store.as_ref(), &dir, &dm, "alice", "two");
    assert!(store.claim_deliveries(WEBHOOK_LEASE_MS, 10).unwrap().is_empty(), "a disabled endpoint gets nothing");
}

fn a_lapsed_lease_gives_it_back<H: Harness>(harness: &H) {
    let db = harness.fresh();
    let clock = Arc::new(ManualClock::new(CASE_EPOCH));
    let store = harness.open_at(&db, clock.clone());
    let dir = MapDirectory::with(&["alice", "bob"]);
    let dm = store.open_dm(&member("alice"), &member("bob")).unwrap().id;
    store.add_webhook(&member("bob"), "https://bob.example/").unwrap();
    let said = say(store.as_ref(), &dir, &dm, "alice", "one");
    assert_eq!(positions(&store.claim_deliveries(WEBHOOK_LEASE_MS, 10).unwrap()), vec![said.position]);
    // The claimer dies without finishing; once the lease lapses another may try.
    clock.advance_ms(WEBHOOK_LEASE_MS - 1);
    assert!(store.claim_deliveries(WEBHOOK_LEASE_MS, 10).unwrap().is_empty());
    clock.advance_ms(1);
    assert_eq!(positions(&store.claim_deliveries(WEBHOOK_LEASE_MS, 10).unwrap()), vec![said.position]);
}

fn rotation_overlap<H: Harness>(harness: &H) {
    let db = harness.fresh();
    let clock = Arc::new(ManualClock::new(CASE_EPOCH));
    let store = harness.open_at(&db, clock.clone());
    let hook = store.add_webhook(&member("bob"), "https://bob.example/").unwrap();
    let rotated = store.rotate_webhook_secret(&member("bob"), &hook.id, 1_000).unwrap();
    assert_ne!(rotated.secret, hook.secret);
    let stored = store.webhooks(&member("bob")).unwrap().remove(0);
    assert_eq!(stored.secrets_at(clock.now()), vec![rotated.secret.as_str(), hook.secret.as_str()]);
    clock.advance_ms(1_000);
    assert_eq!(stored.secrets_at(clock.now()), vec![rotated.secret.as_str()]);
}

fn webhook_limits<H: Harness>(harness: &H) {
    let db = harness.fresh();
    let store = harness.open(&db);
    for n in 0..WEBHOOK_ENDPOINTS_PER_MEMBER_MAX {
        store.add_webhook(&member("bob"), &format!("https://bob.example/{n}")).unwrap();
    }
    let refused = store.add_webhook(&member("bob"), "https://bob.example/more").unwrap_err();
    assert_eq!(refused.code(), "too_many_webhooks");
    assert_eq!(store.add_webhook(&member("eve"), "").unwrap_err().code(), "webhook_url_invalid");
    let bobs = store.webhooks(&member("bob")).unwrap().remove(0);
    // Another member's endpoint does not exist for eve.
    assert_eq!(store.remove_webhook(&member("eve"), &bobs.id).unwrap_err().code(), "webhook_not_found");
    assert_eq!(store.replay_dead(&member("eve"), &bobs.id).unwrap_err().code(), "webhook_not_found");
    let page = store.deliveries(&member("bob"), &bobs.id, DeliveryState::Dead, 0).unwrap_err();
    assert_eq!(page.code(), "page_invalid");
    store.remove_webhook(&member("bob"), &bobs.id).unwrap();
    assert_eq!(store.webhooks(&member("bob")).unwrap().len(), WEBHOOK_ENDPOINTS_PER_MEMBER_MAX - 1);
}

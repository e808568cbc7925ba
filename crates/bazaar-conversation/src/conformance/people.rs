//! People's passkeys, ceremonies and sessions on every engine: a credential
//! registered once, a ceremony used at most once and never after it expires,
//! a session live until it expires or is revoked, and a sign-in that replaces
//! the browser's earlier session.

use std::sync::Arc;

use bazaar_types::limits::{PASSKEYS_PER_MEMBER_MAX, SESSION_TTL_S};
use bazaar_types::{ManualClock, Timestamp};

use super::{member, Case, Harness, CASE_EPOCH};
use crate::people::{Ceremony, PasskeyRecord};

pub fn cases<H: Harness>() -> Vec<(&'static str, Case<H>)> {
    vec![
        ("a_passkey_is_registered_once_and_its_use_recorded", passkeys::<H>),
        ("a_ceremony_is_used_once_and_never_after_it_expires", ceremonies::<H>),
        ("a_session_lives_until_it_expires_is_revoked_or_replaced", sessions::<H>),
    ]
}

fn passkey(id: &str, who: &str) -> PasskeyRecord {
    PasskeyRecord {
        credential_id: id.into(),
        member: member(who),
        user_handle: format!("handle-{who}"),
        passkey: format!("{{\"cred\":\"{id}\",\"counter\":0}}"),
        created_at: Timestamp(0),
        last_used_at: None,
    }
}

fn passkeys<H: Harness>(harness: &H) {
    let db = harness.fresh();
    let store = harness.open(&db);
    let kept = store.add_passkey(passkey("cred-1", "alice")).unwrap();
    assert_eq!(kept.created_at, CASE_EPOCH);
    assert_eq!(store.add_passkey(passkey("cred-1", "bob")).unwrap_err().code(), "passkey_exists");
    assert_eq!(store.passkey("cred-1").unwrap().unwrap().member, member("alice"));
    assert!(store.passkey("cred-9").unwrap().is_none());
    store.passkey_used("cred-1", "{\"counter\":1}".into()).unwrap();
    let used = store.passkey("cred-1").unwrap().unwrap();
    assert_eq!((used.passkey.as_str(), used.last_used_at), ("{\"counter\":1}", Some(CASE_EPOCH)));
    for n in 1..PASSKEYS_PER_MEMBER_MAX {
        store.add_passkey(passkey(&format!("more-{n}"), "alice")).unwrap();
    }
    assert_eq!(store.passkeys_of(&member("alice")).unwrap().len(), PASSKEYS_PER_MEMBER_MAX);
    assert_eq!(store.add_passkey(passkey("one-too-many", "alice")).unwrap_err().code(), "too_many_passkeys");
    assert!(store.passkeys_of(&member("bob")).unwrap().is_empty());
}

fn ceremonies<H: Harness>(harness: &H) {
    let db = harness.fresh();
    let clock = Arc::new(ManualClock::new(CASE_EPOCH));
    let store = harness.open_at(&db, clock.clone());
    let ceremony = |id: &str| Ceremony {
        id: id.into(),
        kind: "sign_in".into(),
        member: None,
        state: "{}".into(),
        expires_at: CASE_EPOCH.plus_s(300),
    };
    store.begin_ceremony(ceremony("c1")).unwrap();
    store.begin_ceremony(ceremony("c2")).unwrap();
    assert_eq!(store.take_ceremony("c1").unwrap(), Some(ceremony("c1")));
    assert_eq!(store.take_ceremony("c1").unwrap(), None, "used once");
    clock.advance_s(300);
    assert_eq!(store.take_ceremony("c2").unwrap(), None, "expired");
    assert_eq!(store.take_ceremony("never").unwrap(), None);
}

fn sessions<H: Harness>(harness: &H) {
    let db = harness.fresh();
    let clock = Arc::new(ManualClock::new(CASE_EPOCH));
    let store = harness.open_at(&db, clock.clone());
    let alice = member("alice");
    let first = store.open_session("hash-1".into(), &alice, None).unwrap();
    assert_eq!(first.expires_at, CASE_EPOCH.plus_s(SESSION_TTL_S));
    assert_eq!(store.session("hash-1", CASE_EPOCH).unwrap().map(|s| s.member), Some(alice.clone()));
    // Signing in again from the same browser replaces (revokes) its session.
    store.open_session("hash-2".into(), &alice, Some("hash-1".into())).unwrap();
    assert!(store.session("hash-1", CASE_EPOCH).unwrap().is_none());
    assert!(store.session("hash-2", CASE_EPOCH).unwrap().is_some());
    store.revoke_session("hash-2").unwrap();
    assert!(store.session("hash-2", CASE_EPOCH).unwrap().is_none(), "revoked on the server");
    store.open_session("hash-3".into(), &alice, None).unwrap();
    let end = CASE_EPOCH.plus_s(SESSION_TTL_S);
    assert!(store.session("hash-3", Timestamp(end.0 - 1)).unwrap().is_some());
    assert!(store.session("hash-3", end).unwrap().is_none(), "expired");
    assert!(store.session("nobody", CASE_EPOCH).unwrap().is_none());
}

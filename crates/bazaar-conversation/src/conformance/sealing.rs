//! Sealed channels on every engine: born sealed or plaintext and never
//! converted, a sealed post only for exactly the current members under their
//! current keys, and a sealed room admitting only members with a key.

use ed25519_dalek::SigningKey;

use super::{member, say, text, Case, Harness, MapDirectory};
use crate::sealing::{open, seal, SealedBody, SealingKey, SealingSecret};
use crate::{ChannelId, ConversationStore, HistoryRange, MessageKind, NewMessage, NewRoom, SystemLine};

pub fn cases<H: Harness>() -> Vec<(&'static str, Case<H>)> {
    vec![
        ("a_dm_is_sealed_at_birth_only_when_both_have_keys", a_dm_is_sealed_at_birth::<H>),
        ("a_sealed_post_is_for_exactly_the_current_members", a_sealed_post_is_for_the_members::<H>),
        ("a_sealed_room_admits_only_members_with_keys", a_sealed_room_admits_only_keyed_members::<H>),
        ("changes_in_a_sealed_channel_are_sealed", changes_in_a_sealed_channel_are_sealed::<H>),
        ("a_sealed_room_holds_at_most_the_sealed_member_cap", a_sealed_room_is_capped::<H>),
    ]
}

/// The test key of a person, from a seed derived from its name.
fn secret(name: &str) -> SealingSecret {
    let mut seed = [0u8; 32];
    seed[..name.len()].copy_from_slice(name.as_bytes());
    SealingSecret::derive(&SigningKey::from_bytes(&seed))
}

fn publish(store: &dyn ConversationStore, name: &str) -> String {
    let public_key = secret(name).public_key();
    let key = SealingKey {
        member: member(name),
        public_key: public_key.clone(),
        signature: "checked by the caller".into(),
        published_at: bazaar_types::Timestamp(0),
    };
    store.publish_sealing_key(key).unwrap();
    public_key
}

fn sealed_for(channel: &ChannelId, author: &str, words: &str, names: &[&str]) -> SealedBody {
    let to: Vec<_> = names.iter().map(|name| (member(name), secret(name).public_key())).collect();
    seal(channel, &member(author), words, &to).unwrap()
}

fn sealed_post(channel: &ChannelId, author: &str, sealed: SealedBody) -> NewMessage {
    let mut new = NewMessage::text(channel.clone(), member(author), "");
    new.sealed = Some(sealed);
    new.signature = Some("checked by the caller".into());
    new
}

fn birth_line(store: &dyn ConversationStore, channel: &ChannelId, reader: &str) -> MessageKind {
    store.history(channel, &member(reader), HistoryRange::After(0), 1).unwrap()[0].kind.clone()
}

fn a_dm_is_sealed_at_birth<H: Harness>(harness: &H) {
    let db = harness.fresh();
    let store = harness.open(&db);
    let store = store.as_ref();
    publish(store, "alice");
    publish(store, "bob");
    let sealed = store.open_dm(&member("alice"), &member("bob")).unwrap();
    assert!(sealed.sealed);
    let line = SystemLine::Sealing { sealed: true, lacking: Vec::new() };
    assert_eq!(birth_line(store, &sealed.id, "bob"), MessageKind::System(line));
    let plain = store.open_dm(&member("alice"), &member("carol")).unwrap();
    assert!(!plain.sealed);
    let line = SystemLine::Sealing { sealed: false, lacking: vec![member("carol")] };
    assert_eq!(birth_line(store, &plain.id, "alice"), MessageKind::System(line));
    // Carol publishing later does not convert it, in either direction.
    publish(store, "carol");
    assert!(!store.open_dm(&member("carol"), &member("alice")).unwrap().sealed);
    assert!(!store.channel(&plain.id, &member("alice")).unwrap().channel.sealed);
    let dir = MapDirectory::with(&["alice", "bob", "carol"]);
    let into_plain = sealed_post(&plain.id, "alice", sealed_for(&plain.id, "alice", "x", &["alice", "carol"]));
    assert_eq!(store.post(&dir, into_plain).unwrap_err().code(), "not_sealed");
    say(store, &dir, &plain.id, "alice", "plaintext is fine here");
    assert!(store.channel(&sealed.id, &member("alice")).unwrap().channel.sealed);
    let public = NewRoom { owner: member("alice"), name: "open".into(), private: false, sealed: true };
    assert_eq!(store.create_room(public).unwrap_err().code(), "sealed_public_room");
}

fn a_sealed_post_is_for_the_members<H: Harness>(harness: &H) {
    let db = harness.fresh();
    let store = harness.open(&db);
    let store = store.as_ref();
    let dir = MapDirectory::with(&["alice", "bob", "carol"]);
    publish(store, "alice");
    publish(store, "bob");
    let dm = store.open_dm(&member("alice"), &member("bob")).unwrap().id;
    assert_eq!(store.post(&dir, text(&dm, "alice", "in the clear")).unwrap_err().code(), "sealed_required");
    let missing_bob = sealed_post(&dm, "alice", sealed_for(&dm, "alice", "x", &["alice"]));
    assert_eq!(store.post(&dir, missing_bob).unwrap_err().code(), "sealed_recipients");
    let with_carol = sealed_post(&dm, "alice", sealed_for(&dm, "alice", "x", &["alice", "carol"]));
    assert_eq!(store.post(&dir, with_carol).unwrap_err().code(), "sealed_recipients");
    let mut unsigned = sealed_post(&dm, "alice", sealed_for(&dm, "alice", "x", &["alice", "bob"]));
    unsigned.signature = None;
    assert_eq!(store.post(&dir, unsigned).unwrap_err().code(), "signature_required");
    let mut with_body = sealed_post(&dm, "alice", sealed_for(&dm, "alice", "x", &["alice", "bob"]));
    with_body.body = "leaked".into();
    assert_eq!(store.post(&dir, with_body).unwrap_err().code(), "sealed_invalid");
    let mut good = sealed_post(&dm, "alice", sealed_for(&dm, "alice", "forty, final", &["bob", "alice"]));
    good.mentions = vec!["@bob".into()];
    good.idem_key = Some("offer".into());
    let posted = store.post(&dir, good.clone()).unwrap();
    assert_eq!(store.post(&dir, good.clone()).unwrap(), posted, "a keyed retry is the same sealed message");
    let mut resealed = good.clone();
    resealed.sealed = Some(sealed_for(&dm, "alice", "forty, final", &["bob", "alice"]));
    assert_eq!(store.post(&dir, resealed).unwrap(), posted, "sealed afresh on retry, still the first message");
    let mut as_plaintext = good;
    (as_plaintext.sealed, as_plaintext.body) = (None, "forty, final".into());
    assert_eq!(store.post(&dir, as_plaintext).unwrap_err().code(), "idempotency_conflict");
    assert_eq!((posted.body.as_str(), posted.mentions.clone()), ("", vec![member("bob")]));
    let stored = store.history(&dm, &member("bob"), HistoryRange::Latest, 1).unwrap().remove(0);
    let envelope = stored.sealed.expect("the envelope is kept");
    let opened = open(&dm, &member("alice"), &member("bob"), &secret("bob"), &envelope).unwrap();
    assert_eq!(opened, "forty, final");
    assert_eq!(store.attention(&member("bob")).unwrap()[0].wakes, 1, "a sealed DM post wakes like any");
    // A member that publishes a new key must be sealed for under it.
    let stale = sealed_for(&dm, "alice", "y", &["alice", "bob"]);
    let mut fresh_seed = [7u8; 32];
    fresh_seed[0] = 1;
    let new_key = SealingSecret::derive(&SigningKey::from_bytes(&fresh_seed)).public_key();
    let replaced = SealingKey {
        member: member("bob"),
        public_key: new_key.clone(),
        signature: "checked by the caller".into(),
        published_at: bazaar_types::Timestamp(0),
    };
    store.publish_sealing_key(replaced).unwrap();
    assert_eq!(store.sealing_key(&member("bob")).unwrap().unwrap().public_key, new_key);
    assert_eq!(store.post(&dir, sealed_post(&dm, "alice", stale)).unwrap_err().code(), "sealed_recipients");
}

fn changes_in_a_sealed_channel_are_sealed<H: Harness>(harness: &H) {
    let db = harness.fresh();
    let store = harness.open(&db);
    let store = store.as_ref();
    let dir = MapDirectory::with(&["alice", "bob"]);
    publish(store, "alice");
    publish(store, "bob");
    let dm = store.open_dm(&member("alice"), &member("bob")).unwrap().id;
    let posted =
        store.post(&dir, sealed_post(&dm, "alice", sealed_for(&dm, "alice", "forty", &["alice", "bob"]))).unwrap();
    // Reactions stay plain (visible metadata); edits are sealed like posts.
    let react = crate::Change {
        channel: dm.clone(),
        author: member("bob"),
        on_behalf_of: None,
        target: posted.seq,
        what: crate::ChangeKind::React { emoji: "👍".into(), removed: false },
    };
    store.change(&dir, react).unwrap();
    let edit = crate::Change {
        channel: dm.clone(),
        author: member("alice"),
        on_behalf_of: None,
        target: posted.seq,
        what: crate::ChangeKind::Edit { body: "forty-five".into() },
    };
    assert_eq!(store.change(&dir, edit).unwrap_err().code(), "sealed_required", "an edit is sealed too");
    let envelope = sealed_for(&dm, "alice", "forty-five", &["alice", "bob"]);
    let sealed_edit = crate::Change {
        channel: dm.clone(),
        author: member("alice"),
        on_behalf_of: None,
        target: posted.seq,
        what: crate::ChangeKind::SealedEdit {
            sealed: envelope,
            signature: "checked by the caller".into(),
            mentions: vec![],
        },
    };
    let edited = store.change(&dir, sealed_edit).unwrap();
    assert_eq!((edited.kind, edited.body.as_str()), (MessageKind::Edit { of: posted.seq }, ""));
    let opened = open(&dm, &member("alice"), &member("alice"), &secret("alice"), edited.sealed.as_ref().unwrap());
    assert_eq!(opened.unwrap(), "forty-five");
    let sealed_edit = |channel: &crate::ChannelId, for_whom: &[&str]| crate::Change {
        channel: channel.clone(),
        author: member("alice"),
        on_behalf_of: None,
        target: posted.seq,
        what: crate::ChangeKind::SealedEdit {
            sealed: sealed_for(channel, "alice", "fifty", for_whom),
            signature: "checked by the caller".into(),
            mentions: vec![],
        },
    };
    assert_eq!(store.change(&dir, sealed_edit(&dm, &["alice"])).unwrap_err().code(), "sealed_recipients");
    let plain = store.open_dm(&member("alice"), &member("carol")).unwrap().id;
    let said = super::say(store, &dir, &plain, "alice", "plain words");
    let mut into_plain = sealed_edit(&plain, &["alice"]);
    into_plain.target = said.seq;
    assert_eq!(store.change(&dir, into_plain).unwrap_err().code(), "not_sealed");
}

fn a_sealed_room_admits_only_keyed_members<H: Harness>(harness: &H) {
    let db = harness.fresh();
    let store = harness.open(&db);
    let store = store.as_ref();
    let dir = MapDirectory::with(&["alice", "bob", "carol"]);
    let keyless = NewRoom { owner: member("alice"), name: "desk".into(), private: true, sealed: true };
    let plain = store.create_room(keyless.clone()).unwrap();
    assert!(!plain.sealed, "born plaintext: its owner had no key");
    let line = SystemLine::Sealing { sealed: false, lacking: vec![member("alice")] };
    assert_eq!(birth_line(store, &plain.id, "alice"), MessageKind::System(line));
    let alice_key = publish(store, "alice");
    let room = store.create_room(keyless).unwrap();
    assert!(room.sealed);
    let (alice, bob, carol) = (member("alice"), member("bob"), member("carol"));
    assert_eq!(store.add_member(&room.id, &alice, &bob).unwrap_err().code(), "sealing_key_required");
    let bob_key = publish(store, "bob");
    store.add_member(&room.id, &alice, &bob).unwrap();
    let keys = store.sealing_keys(&room.id, &bob).unwrap();
    let listed: Vec<_> =
        keys.iter().map(|(who, key)| (who.clone(), key.as_ref().map(|k| k.public_key.clone()))).collect();
    assert_eq!(listed, vec![(alice.clone(), Some(alice_key)), (bob.clone(), Some(bob_key))]);
    assert_eq!(store.sealing_keys(&room.id, &carol).unwrap_err().code(), "not_member");
    let to_both = sealed_post(&room.id, "bob", sealed_for(&room.id, "bob", "hello desk", &["alice", "bob"]));
    store.post(&dir, to_both).unwrap();
    publish(store, "carol");
    store.add_member(&room.id, &alice, &carol).unwrap();
    let without_carol = sealed_post(&room.id, "bob", sealed_for(&room.id, "bob", "x", &["alice", "bob"]));
    assert_eq!(store.post(&dir, without_carol).unwrap_err().code(), "sealed_recipients");
    let to_all = sealed_for(&room.id, "bob", "welcome", &["alice", "bob", "carol"]);
    store.post(&dir, sealed_post(&room.id, "bob", to_all)).unwrap();
}

/// Every post carries the content key wrapped for each member, so a sealed
/// room stops at `SEALED_CHANNEL_MEMBERS_MAX`.
fn a_sealed_room_is_capped<H: Harness>(harness: &H) {
    use bazaar_types::limits::SEALED_CHANNEL_MEMBERS_MAX;
    let db = harness.fresh();
    let store = harness.open(&db);
    let store = store.as_ref();
    publish(store, "owner");
    let sealed = NewRoom { owner: member("owner"), name: "big desk".into(), private: true, sealed: true };
    let room = store.create_room(sealed).unwrap().id;
    for n in 1..SEALED_CHANNEL_MEMBERS_MAX {
        let name = format!("m{n}");
        publish(store, &name);
        store.add_member(&room, &member("owner"), &member(&name)).unwrap();
    }
    publish(store, "one-more");
    let refused = store.add_member(&room, &member("owner"), &member("one-more")).unwrap_err();
    assert_eq!(refused.code(), "channel_full");
}

//! Records in conversation on every engine: a message's references to
//! registry records are kept as sent and checked; a record's room is one per
//! record, private, owned by the registry, gains members as the record does,
//! and its lines are written once per key.

use super::{member, text, Case, Harness, MapDirectory};
use crate::{ChannelId, ChannelKind, HistoryRange, MessageKind, RecordRef, Role, SystemLine};

pub fn cases<H: Harness>() -> Vec<(&'static str, Case<H>)> {
    vec![
        ("a_message_carries_checked_record_references", references::<H>),
        ("a_record_has_one_room_whose_lines_are_written_once", record_room::<H>),
    ]
}

fn reference(kind: &str, id: &str) -> RecordRef {
    RecordRef { kind: kind.into(), id: id.into() }
}

fn references<H: Harness>(harness: &H) {
    let db = harness.fresh();
    let store = harness.open(&db);
    let dir = MapDirectory::with(&["alice", "bob"]);
    let dm = store.open_dm(&member("alice"), &member("bob")).unwrap().id;
    let mut new = text(&dm, "alice", "see the order and the ruling");
    new.refs = vec![reference("order", "ord_1"), reference("dispute", "dsp_9"), reference("ledger", "42")];
    let posted = store.post(&dir, new.clone()).unwrap();
    let stored = store.history(&dm, &member("bob"), HistoryRange::Latest, 1).unwrap().remove(0);
    assert_eq!((stored.refs.clone(), posted.refs), (new.refs.clone(), new.refs));
    assert_eq!(stored.refs[1].path(), "/v1/disputes/dsp_9");
    assert_eq!(stored.refs[2].path(), "/v1/events?after=41&limit=1");
    for refused in
        [vec![reference("invoice", "x")], vec![reference("ledger", "forty")], vec![reference("order", "a/b")]]
    {
        let mut bad = text(&dm, "alice", "bad");
        bad.refs = refused;
        assert_eq!(store.post(&dir, bad).unwrap_err().code(), "refs_invalid");
    }
    let mut many = text(&dm, "alice", "many");
    many.refs = (0..=bazaar_types::limits::MESSAGE_REFS_MAX).map(|n| reference("order", &format!("o{n}"))).collect();
    assert_eq!(store.post(&dir, many).unwrap_err().code(), "refs_invalid");
}

fn record_room<H: Harness>(harness: &H) {
    let db = harness.fresh();
    let store = harness.open(&db);
    let registry = member("registry");
    let dispute = reference("dispute", "dsp_1");
    let parties = vec![member("buyer"), member("shop")];
    let (room, added) = store.record_room(&registry, dispute.clone(), "dispute dsp_1".into(), parties.clone()).unwrap();
    assert_eq!(added, parties);
    assert_eq!((room.id.clone(), room.kind), (ChannelId::of_record(&dispute), ChannelKind::PrivateRoom));
    let again = store.record_room(&registry, dispute.clone(), "dispute dsp_1".into(), parties.clone()).unwrap();
    assert_eq!(again, (room.clone(), Vec::new()), "one room per record; nobody added twice");
    // The arbiter joins later; nobody is added twice.
    let mut with_arbiter = parties.clone();
    with_arbiter.push(member("arbiter"));
    let (_, added) = store.record_room(&registry, dispute.clone(), "dispute dsp_1".into(), with_arbiter).unwrap();
    assert_eq!(added, vec![member("arbiter")]);
    let view = store.channel(&room.id, &member("buyer")).unwrap();
    let mut roles: Vec<(String, Role)> = view.members.iter().map(|m| (m.member.to_string(), m.role)).collect();
    roles.sort_by(|a, b| a.0.cmp(&b.0));
    assert_eq!(roles.len(), 4);
    assert!(roles.contains(&(registry.to_string(), Role::Owner)));
    assert_eq!(store.channel(&room.id, &member("stranger")).unwrap_err().code(), "not_member");
    let line = SystemLine::Phase {
        record: dispute.clone(),
        event: "dispute.ruled".into(),
        phase: "appeal".into(),
        deadline: Some(bazaar_types::Timestamp(1)),
    };
    let first = store.record_line(&registry, &room.id, line.clone(), "phase:7".into()).unwrap();
    assert_eq!(store.record_line(&registry, &room.id, line.clone(), "phase:7".into()).unwrap(), first, "once per key");
    assert_eq!(first.kind, MessageKind::System(line.clone()));
    assert!(first.body.contains("appeal"), "{}", first.body);
    let joins = store
        .history(&room.id, &member("arbiter"), HistoryRange::After(0), 50)
        .unwrap()
        .into_iter()
        .filter(|m| matches!(m.kind, MessageKind::System(SystemLine::Joined { .. })))
        .count();
    assert_eq!(joins, 3, "a joined line per member the registry added");
    assert_eq!(
        store.record_line(&member("buyer"), &room.id, line.clone(), "k".into()).unwrap_err().code(),
        "not_owner"
    );
    assert_eq!(store.record_line(&member("stranger"), &room.id, line, "k2".into()).unwrap_err().code(), "not_member");
}

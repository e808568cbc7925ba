//! Cases for what changes a channel after the fact: system lines for joins,
//! adds, leaves, removals and role changes; the last-owner rule; reactions,
//! edits and deletions as messages of their own; and a keyed post retried.

use bazaar_types::limits::REACTION_BYTES_MAX;

use super::{member, room, room_with, say, text, whole_inbox, Case, Harness, MapDirectory};
use crate::{
    Addressed, Change, ChangeKind, ChannelId, ConversationStore, MessageKind, Notice, RecordRef, Role, SystemLine,
};

pub fn cases<H: Harness>() -> Vec<(&'static str, Case<H>)> {
    vec![
        ("a_rename_is_a_line_in_every_channel_once", a_rename_is_a_line_in_every_channel_once::<H>),
        ("membership_changes_write_lines_and_a_room_keeps_an_owner", lines_and_the_last_owner::<H>),
        ("reactions_edits_and_deletions_are_messages_of_their_own", changes_are_messages::<H>),
        ("a_post_retried_with_its_key_is_one_message", a_keyed_post_is_one_message::<H>),
        ("a_notice_is_written_once_and_wakes_its_member", a_notice_is_once_and_wakes::<H>),
        ("an_agent_waits_to_be_addressed_after_its_etiquette_limit", agent_etiquette::<H>),
        ("attention_reads_a_bounded_backlog_and_says_so", attention_is_capped::<H>),
    ]
}

fn lines_of(store: &dyn ConversationStore, channel: &ChannelId, reader: &str) -> Vec<SystemLine> {
    let history = store.history(channel, &member(reader), crate::HistoryRange::Latest, 50).unwrap();
    history
        .into_iter()
        .filter_map(|m| match m.kind {
            MessageKind::System(line) => Some(line),
            _ => None,
        })
        .collect()
}

fn lines_and_the_last_owner<H: Harness>(harness: &H) {
    let db = harness.fresh();
    let store = harness.open(&db);
    let store = store.as_ref();
    let (alice, bob, carol) = (member("alice"), member("bob"), member("carol"));
    let red = room(store, "alice", true);
    store.add_member(&red, &alice, &bob).unwrap();
    store.add_member(&red, &alice, &carol).unwrap();
    // The last owner of a room others are in stays until it makes another owner.
    assert_eq!(store.leave(&red, &alice).unwrap_err().code(), "last_owner");
    assert_eq!(store.set_role(&red, &alice, &alice, Role::Member).unwrap_err().code(), "last_owner");
    assert_eq!(store.set_role(&red, &bob, &carol, Role::Owner).unwrap_err().code(), "not_owner");
    assert_eq!(store.remove_member(&red, &bob, &carol).unwrap_err().code(), "not_owner");
    assert_eq!(store.remove_member(&red, &alice, &alice).unwrap_err().code(), "remove_self");
    assert_eq!(store.set_role(&red, &alice, &bob, Role::Owner).unwrap().role, Role::Owner);
    let removed = store.remove_member(&red, &bob, &carol).unwrap();
    assert!(!removed.is_current());
    // Acting on one who is no member is about the target (404), not a refusal of the owner.
    assert_eq!(store.remove_member(&red, &bob, &carol).unwrap_err().code(), "member_not_in_channel");
    assert_eq!(store.set_role(&red, &bob, &carol, Role::Owner).unwrap_err().code(), "member_not_in_channel");
    store.leave(&red, &alice).unwrap();
    // Bob, alone, may leave: the room empties.
    let expected = vec![
        SystemLine::Joined { member: bob.clone(), added_by: Some(alice.clone()) },
        SystemLine::Joined { member: carol.clone(), added_by: Some(alice.clone()) },
        SystemLine::RoleChanged { member: bob.clone(), role: Role::Owner, by: alice.clone() },
        SystemLine::Removed { member: carol.clone(), by: bob.clone() },
        SystemLine::Left { member: alice.clone() },
    ];
    assert_eq!(lines_of(store, &red, "bob"), expected);
    // Carol's inbox ends with her removal; nothing after it reaches her.
    let carols = whole_inbox(store, &carol, 0, 10);
    assert_eq!(carols.last().unwrap().kind, MessageKind::System(expected[3].clone()));
    store.leave(&red, &bob).unwrap();
    // Lines never count as unread and never wake.
    let blue = room(store, "alice", false);
    store.join(&blue, &bob).unwrap();
    assert!(store.attention(&alice).unwrap().is_empty(), "a join is not something said");
    // A DM has no owners, and one line: its birth, saying who has no sealing key.
    let dm = store.open_dm(&alice, &bob).unwrap().id;
    assert_eq!(store.remove_member(&dm, &alice, &bob).unwrap_err().code(), "direct_message");
    let lacking = vec![alice.clone(), bob.clone()];
    assert_eq!(lines_of(store, &dm, "alice"), vec![SystemLine::Sealing { sealed: false, lacking }]);
}

fn a_rename_is_a_line_in_every_channel_once<H: Harness>(harness: &H) {
    let db = harness.fresh();
    let store = harness.open(&db);
    let store = store.as_ref();
    let dir = MapDirectory::with(&["alice", "bob"]);
    let room = room_with(store, "bob", &["alice"]);
    let dm = store.open_dm(&member("alice"), &member("bob")).unwrap().id;
    let left = room_with(store, "bob", &["alice"]);
    store.leave(&left, &member("alice")).unwrap();
    let said = say(store, &dir, &room, "bob", "hi @alice");
    let lines = store.renamed(&member("alice"), "alice".into(), "ally".into(), "renamed:9".into()).unwrap();
    let mut channels: Vec<ChannelId> = lines.iter().map(|m| m.channel.clone()).collect();
    channels.sort();
    let mut expected = vec![room.clone(), dm];
    expected.sort();
    assert_eq!(channels, expected, "every channel alice is in now, not the one she left");
    let line = SystemLine::Renamed { member: member("alice"), from: "alice".into(), to: "ally".into() };
    assert!(lines.iter().all(|m| m.kind == MessageKind::System(line.clone())));
    assert!(store.renamed(&member("alice"), "alice".into(), "ally".into(), "renamed:9".into()).unwrap().is_empty());
    let history = store.history(&room, &member("bob"), crate::HistoryRange::Latest, 10).unwrap();
    let earlier = history.iter().find(|m| m.seq == said.seq).unwrap();
    assert_eq!(earlier.mentions, vec![member("alice")], "a mention keeps the member it named");
    assert!(store.attention(&member("bob")).unwrap().iter().all(|a| a.channel != room || a.unread == 0));
}

fn change(channel: &ChannelId, author: &str, target: u64, what: ChangeKind) -> Change {
    Change { channel: channel.clone(), author: member(author), on_behalf_of: None, target, what }
}

fn changes_are_messages<H: Harness>(harness: &H) {
    let db = harness.fresh();
    let store = harness.open(&db);
    let store = store.as_ref();
    let dir = MapDirectory::with(&["alice", "bob", "carol"]);
    let red = room_with(store, "alice", &["bob", "carol"]);
    let said = say(store, &dir, &red, "bob", "the price is 40");
    let thumbs = store
        .change(&dir, change(&red, "carol", said.seq, ChangeKind::React { emoji: "👍".into(), removed: false }))
        .unwrap();
    assert_eq!(
        (thumbs.kind.clone(), thumbs.body.as_str()),
        (MessageKind::Reaction { to: said.seq, removed: false }, "👍")
    );
    let edited = store
        .change(&dir, change(&red, "bob", said.seq, ChangeKind::Edit { body: "the price is 38, @alice".into() }))
        .unwrap();
    assert_eq!(edited.kind, MessageKind::Edit { of: said.seq });
    assert_eq!(edited.mentions, vec![member("alice")]);
    // Only the author edits; the author or an owner deletes.
    let refused = store.change(&dir, change(&red, "carol", said.seq, ChangeKind::Edit { body: "mine".into() }));
    assert_eq!(refused.unwrap_err().code(), "not_author");
    let refused = store.change(&dir, change(&red, "carol", said.seq, ChangeKind::Delete));
    assert_eq!(refused.unwrap_err().code(), "not_author");
    let deleted = store.change(&dir, change(&red, "alice", said.seq, ChangeKind::Delete)).unwrap();
    assert_eq!(deleted.kind, MessageKind::Deletion { of: said.seq });
    for what in [
        ChangeKind::Delete,
        ChangeKind::Edit { body: "again".into() },
        ChangeKind::React { emoji: "x".into(), removed: false },
    ] {
        let refused = store.change(&dir, change(&red, "bob", said.seq, what));
        assert_eq!(refused.unwrap_err().code(), "message_deleted");
    }
    // One who may not change it is told so, not that it is gone.
    let refused = store.change(&dir, change(&red, "carol", said.seq, ChangeKind::Delete));
    assert_eq!(refused.unwrap_err().code(), "not_author");
    // History keeps what was said and each change, in order.
    let history = store.history(&red, &member("carol"), crate::HistoryRange::After(said.seq - 1), 10).unwrap();
    let kinds: Vec<MessageKind> = history.iter().map(|m| m.kind.clone()).collect();
    assert_eq!(kinds[0], MessageKind::Text);
    assert_eq!(history[0].body, "the price is 40");
    assert_eq!(&kinds[1..], &[thumbs.kind, edited.kind, deleted.kind]);
    // Bad targets and tokens carry their codes.
    let line_seq = 1; // bob's join line
    let refused =
        store.change(&dir, change(&red, "bob", line_seq, ChangeKind::React { emoji: "x".into(), removed: false }));
    assert_eq!(refused.unwrap_err().code(), "target_invalid");
    let refused = store.change(&dir, change(&red, "bob", 999, ChangeKind::Delete));
    assert_eq!(refused.unwrap_err().code(), "message_not_found");
    let fresh = say(store, &dir, &red, "bob", "another");
    for emoji in ["", "two words", &"x".repeat(REACTION_BYTES_MAX + 1)] {
        let refused = store
            .change(&dir, change(&red, "carol", fresh.seq, ChangeKind::React { emoji: emoji.into(), removed: false }));
        assert_eq!(refused.unwrap_err().code(), "reaction_invalid", "{emoji:?}");
    }
    let refused = store.change(&dir, change(&red, "dave", fresh.seq, ChangeKind::Delete));
    assert_eq!(refused.unwrap_err().code(), "not_member");
    // Changes are delivered but never count as unread and never wake; carol's
    // own reaction marked what came before it read, so one text is left.
    let attention = store.attention(&member("carol")).unwrap();
    assert_eq!((attention[0].unread, attention[0].wakes), (1, 0), "only bob's second text");
}

fn a_keyed_post_is_one_message<H: Harness>(harness: &H) {
    let db = harness.fresh();
    let store = harness.open(&db);
    let store = store.as_ref();
    let dir = MapDirectory::with(&["alice", "bob"]);
    let dm = store.open_dm(&member("alice"), &member("bob")).unwrap().id;
    let mut first = text(&dm, "alice", "deal at 40");
    first.idem_key = Some("offer-1".into());
    let posted = store.post(&dir, first.clone()).unwrap();
    let again = store.post(&dir, first.clone()).unwrap();
    assert_eq!(again, posted, "the retry returns the first post");
    assert_eq!(whole_inbox(store, &member("bob"), 0, 10).len(), 2, "the DM's birth line and one post");
    let mut other = first.clone();
    other.body = "deal at 45".into();
    assert_eq!(store.post(&dir, other).unwrap_err().code(), "idempotency_conflict");
    // Keys are the author's own: bob may use the same key.
    let mut bobs = text(&dm, "bob", "deal at 40");
    bobs.idem_key = Some("offer-1".into());
    assert_ne!(store.post(&dir, bobs).unwrap().position, posted.position);
}

fn a_notice_is_once_and_wakes<H: Harness>(harness: &H) {
    let db = harness.fresh();
    let store = harness.open(&db);
    let store = store.as_ref();
    let (registry, shop) = (member("registry"), member("shop"));
    let notice = Notice {
        event: "dispute.filed".into(),
        ledger_seq: 42,
        record: Some(RecordRef { kind: "dispute".into(), id: "dsp_1".into() }),
        deadline: Some(bazaar_types::Timestamp(1_700_000_500_000)),
        language: "en".into(),
    };
    let body = "A dispute was filed against you; answer by then.".to_string();
    let addressed =
        |key: &str| Addressed { to: shop.clone(), notice: notice.clone(), body: body.clone(), key: key.into() };
    let first = store.notify(&registry, vec![addressed("notice:42:0")]).unwrap().remove(0);
    let again = store.notify(&registry, vec![addressed("notice:42:0")]).unwrap().remove(0);
    assert_eq!(first, again, "a notice written twice under its key is one message");
    assert_eq!(first.kind, MessageKind::Notice(notice.clone()));
    let inbox = whole_inbox(store, &shop, 0, 10);
    assert_eq!(inbox.len(), 2, "the DM's birth line (the registry has no sealing key), then the notice");
    assert_eq!(inbox[1], first);
    let attention = store.attention(&shop).unwrap();
    assert_eq!((attention[0].unread, attention[0].wakes), (1, 1), "a notice counts and wakes");
    assert_eq!(store.counter("notifier").unwrap(), 0);
    store.set_counter("notifier", 42).unwrap();
    store.set_counter("notifier", 43).unwrap();
    assert_eq!(store.counter("notifier").unwrap(), 43);
    // A batch: in order, in one write; a notice already written is returned, not written again.
    let batch =
        store.notify(&registry, vec![addressed("notice:43:0"), addressed("notice:42:0"), addressed("notice:44:0")]);
    let batch = batch.unwrap();
    assert_eq!(batch[1], first, "the notice written before is returned in its place");
    let inbox = whole_inbox(store, &shop, 0, 10);
    assert_eq!(inbox.len(), 4, "two new notices, after the first");
    assert_eq!((&inbox[2], &inbox[3]), (&batch[0], &batch[2]), "written in the batch's order");
    // A notice to the registry itself fails the whole batch: nothing of it is written.
    let to_self = Addressed { to: registry.clone(), ..addressed("notice:45:0") };
    assert!(store.notify(&registry, vec![addressed("notice:46:0"), to_self]).is_err());
    assert_eq!(whole_inbox(store, &shop, 0, 10).len(), 4, "a refused batch writes nothing");
}

fn agent_etiquette<H: Harness>(harness: &H) {
    use bazaar_types::limits::AGENT_UNADDRESSED_POSTS_MAX;
    let db = harness.fresh();
    let store = harness.open(&db);
    let store = store.as_ref();
    let dir = MapDirectory::with(&["alice", "bot"]);
    let red = room_with(store, "alice", &["bot"]);
    let by_bot = |body: &str| {
        let mut new = text(&red, "bot", body);
        new.by_agent = true;
        new
    };
    let mut last = None;
    for n in 0..AGENT_UNADDRESSED_POSTS_MAX {
        last = Some(store.post(&dir, by_bot(&format!("unasked {n}"))).unwrap());
    }
    assert_eq!(store.post(&dir, by_bot("one more")).unwrap_err().code(), "etiquette_limit");
    // A person chatting past it does not count as addressing it.
    say(store, &dir, &red, "alice", "talking to nobody in particular");
    assert_eq!(store.post(&dir, by_bot("still unasked")).unwrap_err().code(), "etiquette_limit");
    // A reply to one of its messages addresses it: it may speak again.
    let mut answer = text(&red, "alice", "go on");
    answer.reply_to = last.map(|m| m.seq);
    store.post(&dir, answer).unwrap();
    store.post(&dir, by_bot("thanks")).unwrap();
    // So does a mention; and a person, or an agent in a DM, is never limited.
    say(store, &dir, &red, "alice", "@bot again?");
    store.post(&dir, by_bot("yes")).unwrap();
    for n in 0..=AGENT_UNADDRESSED_POSTS_MAX {
        say(store, &dir, &red, "alice", &format!("person {n}"));
    }
    let dm = store.open_dm(&member("alice"), &member("bot")).unwrap().id;
    for n in 0..=AGENT_UNADDRESSED_POSTS_MAX {
        let mut new = text(&dm, "bot", &format!("dm {n}"));
        new.by_agent = true;
        store.post(&dir, new).unwrap();
    }
}

fn attention_is_capped<H: Harness>(harness: &H) {
    use bazaar_types::limits::ATTENTION_SCAN_MAX;
    let db = harness.fresh();
    let store = harness.open(&db);
    let store = store.as_ref();
    let dir = MapDirectory::with(&["alice", "bob"]);
    let dm = store.open_dm(&member("alice"), &member("bob")).unwrap().id;
    store.mark_read(&member("bob"), &dm, 1).unwrap(); // the birth line
    for n in 0..ATTENTION_SCAN_MAX {
        say(store, &dir, &dm, "alice", &format!("n{n}"));
    }
    let full = store.attention(&member("bob")).unwrap();
    assert_eq!(
        (full[0].unread, full[0].wakes, full[0].capped),
        (ATTENTION_SCAN_MAX as u64, ATTENTION_SCAN_MAX as u64, false)
    );
    say(store, &dir, &dm, "alice", "one more");
    let capped = store.attention(&member("bob")).unwrap();
    assert_eq!((capped[0].unread, capped[0].capped), (ATTENTION_SCAN_MAX as u64, true), "shown as 1000+");
    let last = store.history(&dm, &member("bob"), crate::HistoryRange::Latest, 1).unwrap()[0].seq;
    store.mark_read(&member("bob"), &dm, last - 1).unwrap();
    assert_eq!(
        store.attention(&member("bob")).unwrap()[0],
        crate::Attention { channel: dm, unread: 1, wakes: 1, capped: false }
    );
}

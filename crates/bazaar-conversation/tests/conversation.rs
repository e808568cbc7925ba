//! The conversation plane's features, end to end on the SQLite engine:
//! sequencing, the resumable inbox, membership stints, mentions, attention and limits.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use bazaar_conversation::eligibility::{delivered_to, wakes};
use bazaar_conversation::sqlite::SqliteConversationStore;
use bazaar_conversation::{
    Attention, ChannelId, ChannelKind, ConversationStore, Directory, HistoryRange, Membership, Message, MessageKind,
    NewMessage, NewRoom, ReplyTo, Role,
};
use bazaar_types::limits::{
    CHANNEL_MEMBERS_MAX, HISTORY_PAGE_MAX, INBOX_PAGE_MAX, MESSAGE_BODY_BYTES_MAX, MESSAGE_MENTIONS_MAX,
};
use bazaar_types::{ManualClock, MemberId, SeededEntropy, Timestamp};
use proptest::prelude::*;

static NEXT_DB: AtomicU64 = AtomicU64::new(0);

/// A database directory of its own, removed when the test ends.
struct TempDb(PathBuf);

impl TempDb {
    fn new() -> TempDb {
        let n = NEXT_DB.fetch_add(1, Ordering::SeqCst);
        let dir = std::env::temp_dir().join(format!("bazaar-conversation-{}-{n}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        TempDb(dir)
    }

    fn open(&self) -> SqliteConversationStore {
        let clock = Arc::new(ManualClock::new(Timestamp(1_700_000_000_000)));
        SqliteConversationStore::open(&self.0.join("conversation.sqlite"), clock, Arc::new(SeededEntropy::new(7)))
            .unwrap()
    }
}

impl Drop for TempDb {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Handles by member and back, renamable like the registry's identity.
#[derive(Default)]
struct MapDirectory(Mutex<HashMap<String, MemberId>>);

impl MapDirectory {
    fn with(names: &[&str]) -> MapDirectory {
        let directory = MapDirectory::default();
        for name in names {
            directory.set(name, &member(name));
        }
        directory
    }

    fn set(&self, handle: &str, id: &MemberId) {
        let mut map = self.0.lock().unwrap();
        map.retain(|_, held| held != id);
        map.insert(handle.to_string(), id.clone());
    }
}

impl Directory for MapDirectory {
    fn member_by_handle(&self, handle: &str) -> Option<MemberId> {
        self.0.lock().unwrap().get(handle).cloned()
    }
    fn handle_of(&self, id: &MemberId) -> Option<String> {
        self.0.lock().unwrap().iter().find(|(_, held)| *held == id).map(|(handle, _)| handle.clone())
    }
}

fn member(name: &str) -> MemberId {
    MemberId(format!("did:key:z{name}"))
}

fn room(store: &SqliteConversationStore, owner: &str, private: bool) -> ChannelId {
    store.create_room(NewRoom { owner: member(owner), name: format!("{owner}'s room"), private }).unwrap().id
}

fn text(channel: &ChannelId, author: &str, body: &str) -> NewMessage {
    NewMessage {
        channel: channel.clone(),
        authored_by: member(author),
        on_behalf_of: None,
        body: body.to_string(),
        reply_to: None,
    }
}

fn say(store: &SqliteConversationStore, dir: &MapDirectory, channel: &ChannelId, author: &str, body: &str) -> Message {
    store.post(dir, text(channel, author, body)).unwrap()
}

/// The whole inbox, read in pages of `page` from `after`.
fn whole_inbox(store: &SqliteConversationStore, who: &MemberId, after: u64, page: usize) -> Vec<Message> {
    let mut cursor = after;
    let mut all = Vec::new();
    loop {
        let got = store.inbox(who, cursor, page).unwrap();
        assert!(got.next_after >= cursor);
        if got.next_after == cursor {
            assert!(got.messages.is_empty());
            return all;
        }
        cursor = got.next_after;
        all.extend(got.messages);
    }
}

fn positions(messages: &[Message]) -> Vec<u64> {
    messages.iter().map(|m| m.position).collect()
}

#[test]
fn seq_is_gapless_per_channel_and_positions_increase_across_channels() {
    let db = TempDb::new();
    let store = db.open();
    let dir = MapDirectory::with(&["alice", "bob"]);
    let red = room(&store, "alice", false);
    let blue = room(&store, "bob", false);
    store.join(&red, &member("bob")).unwrap();
    let mut seen = Vec::new();
    for round in 0..5 {
        seen.push(say(&store, &dir, &red, "alice", &format!("red {round}")));
        seen.push(say(&store, &dir, &blue, "bob", &format!("blue {round}")));
        seen.push(say(&store, &dir, &red, "bob", &format!("red again {round}")));
    }
    assert_eq!(positions(&seen), (1..=15).collect::<Vec<_>>());
    let red_seqs: Vec<u64> = seen.iter().filter(|m| m.channel == red).map(|m| m.seq).collect();
    let blue_seqs: Vec<u64> = seen.iter().filter(|m| m.channel == blue).map(|m| m.seq).collect();
    assert_eq!(red_seqs, (1..=10).collect::<Vec<_>>());
    assert_eq!(blue_seqs, (1..=5).collect::<Vec<_>>());
    let history = store.history(&red, &member("bob"), HistoryRange::Latest, HISTORY_PAGE_MAX).unwrap();
    assert_eq!(history.iter().map(|m| m.seq).collect::<Vec<_>>(), (1..=10).collect::<Vec<_>>());
    let older = store.history(&red, &member("bob"), HistoryRange::Before(4), 2).unwrap();
    assert_eq!(older.iter().map(|m| m.seq).collect::<Vec<_>>(), vec![2, 3]);
    let newer = store.history(&red, &member("bob"), HistoryRange::After(8), 5).unwrap();
    assert_eq!(newer.iter().map(|m| m.seq).collect::<Vec<_>>(), vec![9, 10]);
}

#[test]
fn two_writers_posting_at_once_leave_no_gap_and_no_duplicate() {
    const POSTS_PER_THREAD: u64 = 40;
    let db = TempDb::new();
    let setup = db.open();
    let dir = MapDirectory::with(&["alice", "bob"]);
    let shared = room(&setup, "alice", false);
    setup.join(&shared, &member("bob")).unwrap();
    let own = [room(&setup, "alice", false), room(&setup, "bob", false)];
    // Two connections on one file: the sequencer must hold across them, not only inside one mutex.
    std::thread::scope(|scope| {
        for (index, author) in ["alice", "bob"].into_iter().enumerate() {
            let (dir, shared, own) = (&dir, &shared, &own[index]);
            let store = db.open();
            scope.spawn(move || {
                for n in 0..POSTS_PER_THREAD {
                    let channel = if n % 2 == 0 { shared } else { own };
                    store.post(dir, text(channel, author, &format!("{author} {n}"))).unwrap();
                }
            });
        }
    });
    let mut all = whole_inbox(&setup, &member("alice"), 0, 7);
    all.extend(whole_inbox(&setup, &member("bob"), 0, 7).into_iter().filter(|m| m.channel == own[1]));
    all.sort_by_key(|m| m.position);
    assert_eq!(positions(&all), (1..=2 * POSTS_PER_THREAD).collect::<Vec<_>>());
    for channel in [&shared, &own[0], &own[1]] {
        let seqs: Vec<u64> = all.iter().filter(|m| &m.channel == channel).map(|m| m.seq).collect();
        assert_eq!(seqs, (1..=seqs.len() as u64).collect::<Vec<_>>(), "gapless in {channel}");
    }
}

#[test]
fn inbox_resumes_from_any_cursor_with_no_gap_or_duplicate() {
    let db = TempDb::new();
    let store = db.open();
    let dir = MapDirectory::with(&["alice", "bob", "carol"]);
    let red = room(&store, "alice", false);
    let blue = room(&store, "carol", false);
    let dm = store.open_dm(&member("alice"), &member("bob")).unwrap().id;
    store.join(&red, &member("bob")).unwrap();
    for n in 0..12 {
        say(&store, &dir, &red, "alice", &format!("red {n}"));
        say(&store, &dir, &blue, "carol", &format!("blue {n}")); // bob is not in blue
        if n % 3 == 0 {
            say(&store, &dir, &dm, "alice", &format!("dm {n}"));
        }
    }
    let bob = member("bob");
    let everything = whole_inbox(&store, &bob, 0, INBOX_PAGE_MAX);
    assert_eq!(everything.len(), 12 + 4);
    assert!(everything.iter().all(|m| m.channel != blue));
    assert!(everything.windows(2).all(|pair| pair[0].position < pair[1].position));
    let last = everything.last().unwrap().position + 3;
    for cursor in 0..=last {
        let expected: Vec<u64> = positions(&everything).into_iter().filter(|p| *p > cursor).collect();
        for page in [1, 2, 5, INBOX_PAGE_MAX] {
            assert_eq!(positions(&whole_inbox(&store, &bob, cursor, page)), expected, "cursor {cursor} page {page}");
        }
    }
}

#[test]
fn a_member_who_left_receives_nothing_posted_after() {
    let db = TempDb::new();
    let store = db.open();
    let dir = MapDirectory::with(&["alice", "bob"]);
    let red = room(&store, "alice", false);
    let before = say(&store, &dir, &red, "alice", "before bob");
    store.join(&red, &member("bob")).unwrap();
    let during = say(&store, &dir, &red, "alice", "while bob is here");
    store.leave(&red, &member("bob")).unwrap();
    let gone = say(&store, &dir, &red, "alice", "@bob after bob left");
    store.join(&red, &member("bob")).unwrap();
    let back = say(&store, &dir, &red, "alice", "bob is back");
    let inbox = whole_inbox(&store, &member("bob"), 0, 10);
    assert_eq!(positions(&inbox), vec![during.position, back.position]);
    assert!(!positions(&inbox).contains(&before.position));
    assert!(!positions(&inbox).contains(&gone.position));
    let stints = store.memberships_of(&member("bob")).unwrap();
    assert_eq!(stints.len(), 2);
    assert!(!stints[0].is_current() && stints[1].is_current());
    let attention = store.attention(&member("bob")).unwrap();
    assert_eq!(attention, vec![Attention { channel: red, unread: 1, wakes: 0 }]);
}

#[test]
fn a_later_rename_does_not_change_a_resolved_mention_or_the_authors_handle() {
    let db = TempDb::new();
    let store = db.open();
    let dir = MapDirectory::with(&["alice", "bob", "carol"]);
    let red = room(&store, "alice", false);
    store.join(&red, &member("bob")).unwrap();
    store.join(&red, &member("carol")).unwrap();
    let sent = say(&store, &dir, &red, "alice", "ping @bob, not @nobody");
    assert_eq!(sent.mentions, vec![member("bob")]);
    assert_eq!(sent.handle.as_deref(), Some("alice"));
    dir.set("bobby", &member("bob"));
    dir.set("bob", &member("carol"));
    dir.set("alicia", &member("alice"));
    let read = store.history(&red, &member("carol"), HistoryRange::Latest, 1).unwrap();
    assert_eq!(read[0].mentions, vec![member("bob")]);
    assert_eq!(read[0].handle.as_deref(), Some("alice"));
    assert_eq!(store.attention(&member("bob")).unwrap()[0].wakes, 1);
    assert_eq!(store.attention(&member("carol")).unwrap()[0].wakes, 0);
}

fn stint(kind_muted: bool) -> Membership {
    Membership {
        channel: ChannelId("ch_x".into()),
        member: member("me"),
        role: Role::Member,
        joined_at: Timestamp(0),
        joined_after: 10,
        left_at: None,
        left_after: None,
        muted: kind_muted,
        read_seq: 0,
    }
}

fn message(kind: ChannelKind, author: &str, position: u64) -> Message {
    Message {
        channel: ChannelId("ch_x".into()),
        channel_kind: kind,
        seq: 1,
        position,
        authored_by: member(author),
        on_behalf_of: None,
        handle: None,
        kind: MessageKind::Text,
        body: "hello".into(),
        reply_to: None,
        mentions: Vec::new(),
        at: Timestamp(0),
    }
}

#[test]
fn who_is_woken_table() {
    use ChannelKind::{Dm, PublicRoom};
    let me = member("me");
    let mention = |mut m: Message| {
        m.mentions = vec![member("me")];
        m
    };
    let reply = |mut m: Message| {
        m.reply_to = Some(ReplyTo { seq: 1, author: member("me") });
        m
    };
    let system = |mut m: Message| {
        m.kind = MessageKind::System(bazaar_conversation::SystemLine::Joined { member: member("you") });
        m
    };
    // (what, muted, message, delivered, wakes)
    let table: Vec<(&str, bool, Message, bool, bool)> = vec![
        ("room chatter", false, message(PublicRoom, "you", 11), true, false),
        ("dm", false, message(Dm, "you", 11), true, true),
        ("my own dm", false, message(Dm, "me", 11), true, false),
        ("mention", false, mention(message(PublicRoom, "you", 11)), true, true),
        ("my own mention of me", false, mention(message(PublicRoom, "me", 11)), true, false),
        ("reply to me", false, reply(message(PublicRoom, "you", 11)), true, true),
        ("muted dm", true, message(Dm, "you", 11), true, false),
        ("muted reply", true, reply(message(PublicRoom, "you", 11)), true, false),
        ("muted mention", true, mention(message(PublicRoom, "you", 11)), true, true),
        ("presence", false, system(message(Dm, "you", 11)), true, false),
        ("before I joined", false, mention(message(Dm, "you", 10)), false, false),
    ];
    for (what, muted, msg, delivered, woken) in table {
        assert_eq!(delivered_to(&stint(muted), &msg), delivered, "{what}: delivered");
        assert_eq!(wakes(&stint(muted), &msg, &me), woken, "{what}: wakes");
    }
    let mut left = stint(false);
    left.left_after = Some(11);
    assert!(delivered_to(&left, &message(Dm, "you", 11)));
    assert!(!delivered_to(&left, &message(Dm, "you", 12)));
    assert!(!wakes(&left, &mention(message(Dm, "you", 12)), &me));
}

#[test]
fn limits_and_refusals_carry_their_codes() {
    let db = TempDb::new();
    let store = db.open();
    let names: Vec<String> = (0..=MESSAGE_MENTIONS_MAX).map(|n| format!("user-{n}")).collect();
    let mut handles: Vec<&str> = names.iter().map(String::as_str).collect();
    handles.extend(["alice", "bob"]);
    let dir = MapDirectory::with(&handles);
    let red = room(&store, "alice", false);
    let secret = room(&store, "alice", true);
    let dm = store.open_dm(&member("alice"), &member("bob")).unwrap().id;
    let code = |result: Result<Message, bazaar_conversation::ConversationError>| result.unwrap_err().code();
    let at_max = "x".repeat(MESSAGE_BODY_BYTES_MAX);
    assert!(store.post(&dir, text(&red, "alice", &at_max)).is_ok());
    assert_eq!(code(store.post(&dir, text(&red, "alice", &format!("{at_max}y")))), "body_too_long");
    assert_eq!(code(store.post(&dir, text(&red, "alice", "  "))), "body_empty");
    let all_mentions: String = names.iter().map(|n| format!("@{n} ")).collect();
    assert_eq!(code(store.post(&dir, text(&red, "alice", &all_mentions))), "too_many_mentions");
    let most: String = names[..MESSAGE_MENTIONS_MAX].iter().map(|n| format!("@{n} ")).collect();
    assert_eq!(store.post(&dir, text(&red, "alice", &most)).unwrap().mentions.len(), MESSAGE_MENTIONS_MAX);
    assert_eq!(code(store.post(&dir, text(&red, "bob", "hi"))), "not_member");
    assert_eq!(code(store.post(&dir, text(&ChannelId("ch_none".into()), "alice", "hi"))), "channel_not_found");
    let mut stray = text(&red, "alice", "re");
    stray.reply_to = Some(99);
    assert_eq!(code(store.post(&dir, stray)), "reply_not_found");
    let bob = member("bob");
    assert_eq!(store.join(&secret, &bob).unwrap_err().code(), "private_room");
    assert_eq!(store.join(&dm, &member("user-0")).unwrap_err().code(), "direct_message");
    assert_eq!(store.leave(&dm, &bob).unwrap_err().code(), "direct_message");
    store.add_member(&secret, &member("alice"), &bob).unwrap();
    assert_eq!(store.add_member(&secret, &bob, &member("user-0")).unwrap_err().code(), "not_owner");
    assert_eq!(store.join(&red, &member("alice")).unwrap_err().code(), "already_member");
    assert_eq!(store.open_dm(&bob, &bob).unwrap_err().code(), "dm_with_self");
    assert_eq!(store.mark_read(&member("alice"), &red, 99).unwrap_err().code(), "seq_out_of_range");
    assert_eq!(store.inbox(&bob, 0, 0).unwrap_err().code(), "page_invalid");
    assert_eq!(store.inbox(&bob, 0, INBOX_PAGE_MAX + 1).unwrap_err().code(), "page_invalid");
    let too_many = HISTORY_PAGE_MAX + 1;
    assert_eq!(
        store.history(&red, &member("alice"), HistoryRange::Latest, too_many).unwrap_err().code(),
        "page_invalid"
    );
    let long_name = NewRoom { owner: bob.clone(), name: "n".repeat(65), private: false };
    assert_eq!(store.create_room(long_name).unwrap_err().code(), "name_invalid");
}

#[test]
fn a_full_channel_refuses_one_more_member() {
    let db = TempDb::new();
    let store = db.open();
    let red = room(&store, "owner", false);
    for n in 1..CHANNEL_MEMBERS_MAX {
        store.join(&red, &member(&format!("m{n}"))).unwrap();
    }
    assert_eq!(store.join(&red, &member("one-too-many")).unwrap_err().code(), "channel_full");
    store.leave(&red, &member("m1")).unwrap();
    store.join(&red, &member("one-too-many")).unwrap();
}

const PEOPLE: [&str; 3] = ["ann", "ben", "cat"];

#[derive(Clone, Debug)]
enum Step {
    Join { who: usize, room: usize },
    Leave { who: usize, room: usize },
    Mute { who: usize, channel: usize, muted: bool },
    Post { who: usize, channel: usize, mention: Option<usize>, reply_to: Option<u64> },
    Read { who: usize, channel: usize, seq: u64 },
}

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

/// Who the test believes is in which channel, kept apart from the store.
struct World {
    store: SqliteConversationStore,
    dir: MapDirectory,
    channels: [ChannelId; 3],
    present: BTreeSet<(usize, usize)>,
    /// Each posted message's position and the people present when it was posted.
    posted: BTreeMap<u64, BTreeSet<usize>>,
}

impl World {
    fn new(db: &TempDb) -> World {
        let store = db.open();
        let dir = MapDirectory::with(&PEOPLE);
        let one = room(&store, "ann", false);
        let two = room(&store, "ben", false);
        let dm = store.open_dm(&member("ann"), &member("ben")).unwrap().id;
        let present = [(0, 0), (1, 1), (0, 2), (1, 2)].into_iter().collect();
        World { store, dir, channels: [one, two, dm], present, posted: BTreeMap::new() }
    }

    fn apply(&mut self, step: &Step) {
        match *step {
            Step::Join { who, room } => {
                if self.store.join(&self.channels[room], &member(PEOPLE[who])).is_ok() {
                    assert!(self.present.insert((who, room)));
                }
            }
            Step::Leave { who, room } => {
                let left = self.store.leave(&self.channels[room], &member(PEOPLE[who])).is_ok();
                assert_eq!(left, self.present.remove(&(who, room)));
            }
            Step::Mute { who, channel, muted } => {
                let done = self.store.set_muted(&self.channels[channel], &member(PEOPLE[who]), muted).is_ok();
                assert_eq!(done, self.present.contains(&(who, channel)));
            }
            Step::Post { who, channel, mention, reply_to } => self.post(who, channel, mention, reply_to),
            Step::Read { who, channel, seq } => {
                let _ = self.store.mark_read(&member(PEOPLE[who]), &self.channels[channel], seq);
            }
        }
    }

    fn post(&mut self, who: usize, channel: usize, mention: Option<usize>, reply_to: Option<u64>) {
        let body = match mention {
            Some(target) => format!("hey @{}", PEOPLE[target]),
            None => "hey".to_string(),
        };
        let mut new = text(&self.channels[channel], PEOPLE[who], &body);
        new.reply_to = reply_to;
        match self.store.post(&self.dir, new) {
            Ok(message) => {
                assert!(self.present.contains(&(who, channel)));
                let here = self.present.iter().filter(|(_, c)| *c == channel).map(|(p, _)| *p).collect();
                self.posted.insert(message.position, here);
            }
            Err(error) if self.present.contains(&(who, channel)) => assert_eq!(error.code(), "reply_not_found"),
            Err(error) => assert_eq!(error.code(), "not_member"),
        }
    }

    /// The inbox holds exactly what was posted while the person was present,
    /// and attention equals a naive count over the inbox with the same predicate.
    fn check(&self) {
        for (index, name) in PEOPLE.iter().enumerate() {
            let who = member(name);
            let inbox = whole_inbox(&self.store, &who, 0, 3);
            let expected: Vec<u64> =
                self.posted.iter().filter(|(_, here)| here.contains(&index)).map(|(position, _)| *position).collect();
            assert_eq!(positions(&inbox), expected, "{name}'s inbox");
            assert_eq!(self.store.attention(&who).unwrap(), naive_attention(&self.store, &who, &inbox), "{name}");
        }
    }
}

fn naive_attention(store: &SqliteConversationStore, who: &MemberId, inbox: &[Message]) -> Vec<Attention> {
    let mut found = Vec::new();
    for stint in store.memberships_of(who).unwrap().into_iter().filter(Membership::is_current) {
        let unread: Vec<&Message> = inbox
            .iter()
            .filter(|m| m.channel == stint.channel && m.seq > stint.read_seq && delivered_to(&stint, m))
            .collect();
        let waking = unread.iter().filter(|m| wakes(&stint, m, who)).count() as u64;
        if !unread.is_empty() {
            found.push(Attention { channel: stint.channel.clone(), unread: unread.len() as u64, wakes: waking });
        }
    }
    found.sort_by(|a, b| a.channel.cmp(&b.channel));
    found
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    #[test]
    fn attention_equals_the_unread_eligible_messages(steps in proptest::collection::vec(step(), 1..40)) {
        let db = TempDb::new();
        let mut world = World::new(&db);
        for step in &steps {
            world.apply(step);
            world.check();
        }
    }
}

/// The plane stays apart from the money side: no ledger, store or server crate
/// among its dependencies, and every source file says what it holds.
#[test]
fn tidy_the_plane_depends_on_no_money_crate_and_every_file_has_a_header() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let manifest = std::fs::read_to_string(root.join("Cargo.toml")).unwrap();
    for money in ["bazaar-core", "bazaar-store", "bazaar-server", "bazaar-sdk", "tokio"] {
        let named = manifest.lines().any(|line| line.split(['.', ' ', '=']).next() == Some(money));
        assert!(!named, "bazaar-conversation must not depend on {money}");
    }
    for dir in ["src", "tests"] {
        for entry in std::fs::read_dir(root.join(dir)).unwrap() {
            let path = entry.unwrap().path();
            if path.extension().is_some_and(|e| e == "rs") {
                let text = std::fs::read_to_string(&path).unwrap();
                assert!(text.starts_with("//!"), "{} must start with a //! line", path.display());
            }
        }
    }
}

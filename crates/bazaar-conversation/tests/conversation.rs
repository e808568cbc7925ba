//! The conversation plane's features on the SQLite engine: the shared
//! conformance suite (two connections on one file are its two writers), the
//! model test, and the sans-IO eligibility table and tidy checks.

use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use bazaar_conversation::conformance::{self, member, BoxedStore, Harness, Step};
use bazaar_conversation::eligibility::{delivered_to, wakes};
use bazaar_conversation::sqlite::SqliteConversationStore;
use bazaar_conversation::{ChannelId, ChannelKind, Membership, Message, MessageKind, ReplyTo, Role};
use bazaar_types::{Clock, SeededEntropy, Timestamp};
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
}

impl Drop for TempDb {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Each database is a fresh file; each store a new connection on it.
struct Sqlite;

impl Harness for Sqlite {
    type Database = TempDb;

    fn fresh(&self) -> TempDb {
        TempDb::new()
    }

    fn open_at(&self, database: &TempDb, clock: Arc<dyn Clock>) -> BoxedStore {
        let path = database.0.join("conversation.sqlite");
        Box::new(SqliteConversationStore::open(&path, clock, Arc::new(SeededEntropy::new(7))).unwrap())
    }
}

#[test]
fn conformance_suite_passes_on_sqlite() {
    conformance::run_all(&Sqlite);
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
        sealed: None,
        signature: None,
        refs: Vec::new(),
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
        m.kind = MessageKind::System(bazaar_conversation::SystemLine::Joined { member: member("you"), added_by: None });
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

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    #[test]
    fn attention_equals_the_unread_eligible_messages(steps in proptest::collection::vec(step(), 1..40)) {
        conformance::run_steps(&Sqlite, &steps);
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

//! The conformance suite: the cases every [`EventStore`] engine must pass,
//! run unchanged against SQLite and PostgreSQL. Each case gets a fresh,
//! empty store from the engine's [`Harness`]. They are NIP-01/09/40's storage
//! rules, including the ones real relays get wrong (newest-first order,
//! superseded replaceable versions, resubmitted deleted events).

use crate::event::{tag, Encoded, Event, Signer};
use crate::filter::Filter;
use crate::kind::DELETION;
use crate::store::{EventStore, Purged, Written};
use bazaar_types::SeededEntropy;

/// The instant (unix seconds) every case's events are around.
pub const T0: u64 = 1_700_000_000;

pub trait Harness {
    /// An empty store (its database is cleaned up when the box drops).
    fn fresh(&self) -> Box<dyn EventStore>;
}

pub type Case<H> = fn(&H);

pub fn cases<H: Harness>() -> Vec<(&'static str, Case<H>)> {
    vec![
        ("duplicates_are_reported_and_stored_once", duplicates::<H>),
        ("newest_first_with_ties_by_lowest_id_and_limits", newest_first::<H>),
        ("since_and_until_are_inclusive_and_tags_match_first_values", ranges_and_tags::<H>),
        ("replaceable_keeps_only_the_newest_and_refuses_older", replaceable::<H>),
        ("addressable_is_keyed_by_d_tag", addressable::<H>),
        ("deletion_by_id_removes_and_blocks_resubmission_for_its_author_only", deletion_by_id::<H>),
        ("deletion_by_address_is_bounded_by_its_created_at", deletion_by_address::<H>),
        ("a_batch_is_applied_in_order", batch_in_order::<H>),
        ("expired_events_are_never_served_and_purged", expiration::<H>),
        ("retention_purges_old_regular_events_and_remembers_jobs", retention::<H>),
        ("query_answers_by_id_author_kind_and_several_filters", by_id_author_kind::<H>),
    ]
}

/// Runs every case, naming the one that fails.
pub fn run_all<H: Harness>(harness: &H) {
    bazaar_plane::conformance::run("relay", cases::<H>(), |case| case(harness));
}

fn signer(seed: u64) -> Signer {
    Signer::generate(&SeededEntropy::new(seed))
}

fn write(store: &dyn EventStore, events: &[&Event]) -> Vec<Written> {
    let owned: Vec<Event> = events.iter().map(|e| (*e).clone()).collect();
    store.write(&Encoded::all(&owned), T0).expect("write")
}

fn query(store: &dyn EventStore, filters: Vec<Filter>) -> Vec<Event> {
    store.query(&filters, T0).expect("query").iter().map(|json| Event::parse(json).unwrap()).collect()
}

fn all(store: &dyn EventStore) -> Vec<Event> {
    query(store, vec![Filter::default()])
}

fn kinds(kinds: &[u16]) -> Filter {
    Filter { kinds: Some(kinds.to_vec()), ..Filter::default() }
}

fn duplicates<H: Harness>(harness: &H) {
    let store = harness.fresh();
    let event = signer(1).sign(T0, 1, vec![], "once");
    assert_eq!(write(store.as_ref(), &[&event, &event]), vec![Written::Stored, Written::Duplicate]);
    assert_eq!(write(store.as_ref(), &[&event]), vec![Written::Duplicate]);
    assert_eq!(all(store.as_ref()), vec![event]);
}

fn newest_first<H: Harness>(harness: &H) {
    let store = harness.fresh();
    let author = signer(1);
    let mut events: Vec<Event> = (0..6).map(|n| author.sign(T0 + n, 1, vec![], format!("n{n}"))).collect();
    // Three more at one instant: ties come lowest id first.
    events.extend((0..3).map(|n| author.sign(T0 + 10, 1, vec![], format!("tie{n}"))));
    let refs: Vec<&Event> = events.iter().rev().collect();
    write(store.as_ref(), &refs);
    let mut expected = events.clone();
    expected.sort_by(|a, b| b.created_at.cmp(&a.created_at).then(a.id.cmp(&b.id)));
    assert_eq!(all(store.as_ref()), expected);
    let limited = query(store.as_ref(), vec![Filter { limit: Some(4), ..Filter::default() }]);
    assert_eq!(limited, expected[..4].to_vec(), "limit keeps the newest, newest first");
    assert!(query(store.as_ref(), vec![Filter { limit: Some(0), ..Filter::default() }]).is_empty());
}

fn ranges_and_tags<H: Harness>(harness: &H) {
    let store = harness.fresh();
    let author = signer(1);
    let a = author.sign(T0 - 2, 1, vec![tag(&["t", "audio"]), tag(&["t", "video"])], "a");
    let b = author.sign(T0 - 1, 1, vec![tag(&["t", "video", "audio"])], "b");
    let c = author.sign(T0, 1, vec![tag(&["t", "audio"]), tag(&["p", &"e".repeat(64)])], "c");
    write(store.as_ref(), &[&a, &b, &c]);
    let range = Filter { since: Some(T0 - 1), until: Some(T0 - 1), ..Filter::default() };
    assert_eq!(query(store.as_ref(), vec![range]), vec![b.clone()], "both ends inclusive");
    let audio = Filter { tags: vec![('t', vec!["audio".into()])], ..Filter::default() };
    assert_eq!(query(store.as_ref(), vec![audio.clone()]), vec![c.clone(), a.clone()], "first values only: not b");
    let both = Filter { tags: vec![('t', vec!["audio".into()]), ('p', vec!["e".repeat(64)])], ..Filter::default() };
    assert_eq!(query(store.as_ref(), vec![both]), vec![c.clone()]);
    let since = Filter { since: Some(T0 - 1), ..audio };
    assert_eq!(query(store.as_ref(), vec![since]), vec![c.clone()]);
    // An event carrying two of the values asked for takes one place of the limit, not two.
    let either =
        Filter { tags: vec![('t', vec!["audio".into(), "video".into()])], limit: Some(2), ..Filter::default() };
    assert_eq!(query(store.as_ref(), vec![either]), vec![c, b.clone()]);
    let empty = Filter { ids: Some(vec![]), ..Filter::default() };
    assert!(query(store.as_ref(), vec![empty]).is_empty(), "an empty list matches nothing");
}

fn replaceable<H: Harness>(harness: &H) {
    let store = harness.fresh();
    let author = signer(1);
    let v1 = author.sign(T0, 10_002, vec![], "v1");
    let v2 = author.sign(T0 + 5, 10_002, vec![], "v2");
    assert_eq!(write(store.as_ref(), &[&v1, &v2]), vec![Written::Stored, Written::Stored]);
    assert_eq!(query(store.as_ref(), vec![kinds(&[10_002])]), vec![v2.clone()]);
    assert_eq!(write(store.as_ref(), &[&v1]), vec![Written::Superseded], "an older version is refused");
    // Same instant: the lower id wins, whichever arrives first.
    let tie = author.sign(T0 + 5, 10_002, vec![], "tie");
    let outcome = write(store.as_ref(), &[&tie]);
    let kept = if tie.id < v2.id { (Written::Stored, tie) } else { (Written::Superseded, v2) };
    assert_eq!(outcome, vec![kept.0]);
    assert_eq!(query(store.as_ref(), vec![kinds(&[10_002])]), vec![kept.1]);
    let other = signer(2).sign(T0, 10_002, vec![], "another author's own");
    assert_eq!(write(store.as_ref(), &[&other]), vec![Written::Stored]);
    assert_eq!(query(store.as_ref(), vec![kinds(&[10_002])]).len(), 2);
    let profile = author.sign(T0, 0, vec![], "kind 0 is replaceable");
    let newer = author.sign(T0 + 1, 0, vec![], "newer");
    write(store.as_ref(), &[&profile, &newer]);
    assert_eq!(query(store.as_ref(), vec![kinds(&[0])]), vec![newer]);
}

fn addressable<H: Harness>(harness: &H) {
    let store = harness.fresh();
    let author = signer(1);
    let a1 = author.sign(T0, 30_023, vec![tag(&["d", "a"])], "a1");
    let b1 = author.sign(T0, 30_023, vec![tag(&["d", "b"])], "b1");
    let a2 = author.sign(T0 + 1, 30_023, vec![tag(&["d", "a"])], "a2");
    let no_d = author.sign(T0, 30_023, vec![], "empty d");
    write(store.as_ref(), &[&a1, &b1, &a2, &no_d]);
    let mut kept = query(store.as_ref(), vec![kinds(&[30_023])]);
    kept.sort_by(|x, y| x.content.cmp(&y.content));
    assert_eq!(kept.iter().map(|e| e.content.as_str()).collect::<Vec<_>>(), vec!["a2", "b1", "empty d"]);
    assert_eq!(write(store.as_ref(), &[&a1]), vec![Written::Superseded]);
}

fn deletion_by_id<H: Harness>(harness: &H) {
    let store = harness.fresh();
    let (author, other) = (signer(1), signer(2));
    let note = author.sign(T0, 1, vec![], "regret");
    let theirs = other.sign(T0, 1, vec![], "not yours");
    write(store.as_ref(), &[&note, &theirs]);
    let delete = author.sign(
        T0 + 1,
        DELETION,
        vec![tag(&["e", &note.id.to_hex()]), tag(&["e", &theirs.id.to_hex()]), tag(&["k", "1"])],
        "",
    );
    assert_eq!(write(store.as_ref(), &[&delete]), vec![Written::Stored]);
    let left = all(store.as_ref());
    assert_eq!(left, vec![delete.clone(), theirs.clone()], "own target gone, another's kept, deletion kept");
    assert_eq!(write(store.as_ref(), &[&note]), vec![Written::Deleted], "a deleted id cannot come back");
    // Deleting a deletion does nothing.
    let undo = author.sign(T0 + 2, DELETION, vec![tag(&["e", &delete.id.to_hex()])], "");
    write(store.as_ref(), &[&undo]);
    assert!(all(store.as_ref()).contains(&delete));
    // A deletion that arrives before its target blocks it too.
    let later = author.sign(T0 + 3, 1, vec![], "not yet sent");
    let early = author.sign(T0 + 3, DELETION, vec![tag(&["e", &later.id.to_hex()])], "");
    write(store.as_ref(), &[&early]);
    assert_eq!(write(store.as_ref(), &[&later]), vec![Written::Deleted]);
}

fn deletion_by_address<H: Harness>(harness: &H) {
    let store = harness.fresh();
    let author = signer(1);
    let coordinate = format!("30023:{}:post", author.public_key());
    let v1 = author.sign(T0, 30_023, vec![tag(&["d", "post"])], "v1");
    write(store.as_ref(), &[&v1]);
    let delete = author.sign(T0 + 5, DELETION, vec![tag(&["a", &coordinate])], "");
    write(store.as_ref(), &[&delete]);
    assert!(query(store.as_ref(), vec![kinds(&[30_023])]).is_empty());
    let before = author.sign(T0 + 4, 30_023, vec![tag(&["d", "post"])], "older than the deletion");
    assert_eq!(write(store.as_ref(), &[&before]), vec![Written::Deleted]);
    let after = author.sign(T0 + 6, 30_023, vec![tag(&["d", "post"])], "newer than the deletion");
    assert_eq!(write(store.as_ref(), &[&after]), vec![Written::Stored]);
    // Another author cannot delete by naming this author's coordinate.
    let stranger = signer(2).sign(T0 + 9, DELETION, vec![tag(&["a", &coordinate])], "");
    write(store.as_ref(), &[&stranger]);
    assert_eq!(query(store.as_ref(), vec![kinds(&[30_023])]), vec![after]);
}

fn batch_in_order<H: Harness>(harness: &H) {
    let store = harness.fresh();
    let author = signer(1);
    let note = author.sign(T0, 1, vec![], "short-lived");
    let delete = author.sign(T0 + 1, DELETION, vec![tag(&["e", &note.id.to_hex()])], "");
    let v1 = author.sign(T0, 10_000, vec![], "v1");
    let v2 = author.sign(T0 + 1, 10_000, vec![], "v2");
    let outcomes = write(store.as_ref(), &[&note, &delete, &note, &v2, &v1]);
    let expected = [Written::Stored, Written::Stored, Written::Deleted, Written::Stored, Written::Superseded];
    assert_eq!(outcomes, expected, "the deletion applies before the resubmission, v2 before v1");
    assert_eq!(query(store.as_ref(), vec![kinds(&[1, 10_000])]), vec![v2]);
}

fn expiration<H: Harness>(harness: &H) {
    let store = harness.fresh();
    let author = signer(1);
    let gone = author.sign(T0 - 10, 1, vec![tag(&["expiration", &T0.to_string()])], "expired at T0");
    let live = author.sign(T0 - 10, 1, vec![tag(&["expiration", &(T0 + 60).to_string()])], "expires later");
    store.write(&Encoded::all(&[gone.clone(), live.clone()]), T0 - 20).unwrap();
    assert_eq!(all(store.as_ref()), vec![live.clone()], "expired events are never served");
    let purged = store.purge(T0 + 61, 0).unwrap();
    assert_eq!(purged, Purged { expired: 2, past_retention: 0 });
    assert!(store.query(&[Filter::default()], T0 - 20).unwrap().is_empty(), "purged from disk too");
}

fn retention<H: Harness>(harness: &H) {
    let store = harness.fresh();
    let author = signer(1);
    let old_job = author.sign(T0 - 100, 5_905, vec![], "old job");
    let old_note = author.sign(T0 - 100, 1, vec![], "old note");
    let profile = author.sign(T0 - 100, 0, vec![], "replaceable: kept");
    let recent = author.sign(T0, 5_905, vec![], "recent job");
    write(store.as_ref(), &[&old_job, &old_note, &profile, &recent]);
    let purged = store.purge(T0, T0 - 50).unwrap();
    assert_eq!(purged, Purged { expired: 0, past_retention: 2 });
    let mut left: Vec<String> = all(store.as_ref()).into_iter().map(|e| e.content).collect();
    left.sort();
    assert_eq!(left, vec!["recent job", "replaceable: kept"]);
    assert_eq!(store.purged_at(&old_job.id).unwrap(), Some(T0));
    assert_eq!(store.purged_at(&old_note.id).unwrap(), None, "only job requests are remembered");
    assert_eq!(store.purged_at(&recent.id).unwrap(), None);
}

fn by_id_author_kind<H: Harness>(harness: &H) {
    let store = harness.fresh();
    let (one, two) = (signer(1), signer(2));
    let a = one.sign(T0, 1, vec![], "a");
    let b = one.sign(T0 + 1, 7, vec![], "b");
    let c = two.sign(T0 + 2, 1, vec![], "c");
    write(store.as_ref(), &[&a, &b, &c]);
    let by_id = Filter { ids: Some(vec![b.id, c.id]), ..Filter::default() };
    assert_eq!(query(store.as_ref(), vec![by_id]), vec![c.clone(), b.clone()]);
    let by_author_kind = Filter { authors: Some(vec![one.public_key()]), kinds: Some(vec![1]), ..Filter::default() };
    assert_eq!(query(store.as_ref(), vec![by_author_kind]), vec![a.clone()]);
    // Two filters OR; an event matching both is answered once.
    let either = vec![kinds(&[1]), Filter { authors: Some(vec![two.public_key()]), ..Filter::default() }];
    assert_eq!(query(store.as_ref(), either), vec![c, a]);
}

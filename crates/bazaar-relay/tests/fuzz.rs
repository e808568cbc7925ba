//! Fuzzing the relay's parsers on the stable toolchain (see `fuzz/README.md`):
//! client messages (`EVENT`, `REQ`, `COUNT`, `CLOSE`, `AUTH`) through
//! `ClientMessage::parse`, event JSON through `Event::parse` and
//! `Event::verify` (id and BIP-340 signature), and filters through
//! `Filter::parse`. Each target replays `fuzz/corpus/<target>/`, then mutates
//! from it (bytes and JSON structure) and generates from scratch. Beyond
//! "never panics": only an event a seed's key signed verifies, a parsed event
//! and a parsed filter serialise and parse back to themselves, and what a
//! message parses to stays within the relay's limits.
//!
//! `cargo test -p bazaar-relay --test fuzz -- --nocapture` prints executions per
//! target; `BAZAAR_FUZZ_CASES=200000` runs longer; `-- --ignored write_corpus`
//! rewrites the seeds.

#[path = "../../../fuzz/harness.rs"]
mod harness;

use bazaar_relay::event::tag;
use bazaar_relay::limits::{QUERY_LIMIT_MAX, SUBSCRIPTION_ID_CHARS_MAX};
use bazaar_relay::message::{self, ClientMessage};
use bazaar_relay::{Event, Filter, Invalid, Signer};
use harness::{ensure, fuzz_json, valid_seeds, write_seed, Input};
use proptest::prelude::*;
use serde_json::{json, Value};

/// Generated cases per target in the bounded run (`cargo test`).
const MESSAGE_CASES: u32 = 3_000;
const EVENT_CASES: u32 = 3_000;
const FILTER_CASES: u32 = 3_000;

/// The secret key the event seeds are signed with.
const SIGNER_SECRET: &str = "0101010101010101010101010101010101010101010101010101010101010101";

const NOSTR_TOKENS: &[&str] = &[
    "\"EVENT\"",
    "\"REQ\"",
    "\"COUNT\"",
    "\"CLOSE\"",
    "\"AUTH\"",
    "\"#e\"",
    "\"#p\"",
    "\"#d\"",
    "\"kinds\"",
    "\"limit\"",
    "\"since\"",
    "\"until\"",
    "\"ids\"",
    "\"authors\"",
    "65535",
    "65536",
    "\"expiration\"",
];

fn signer() -> Signer {
    Signer::from_secret_hex(SIGNER_SECRET).unwrap()
}

/// The events the seeds signed, by id: the only ones that may verify.
fn signed_ids() -> Vec<String> {
    let mut ids = Vec::new();
    for seed in valid_seeds("nostr-event").iter() {
        ids.push(Event::parse(&String::from_utf8_lossy(seed)).unwrap().id.to_hex());
    }
    ids
}

/// What must hold of any event the relay read.
fn check_event(event: &Event) -> Result<(), String> {
    let again = Event::parse(&event.to_json()).map_err(|e| format!("a parsed event does not parse back: {e}"))?;
    ensure(again == *event, || "parse → serialise → parse changed the event".into())?;
    for name in ["e", "p", "d", "t", "expiration", ""] {
        let _ = event.tag_values(name).count();
        let _ = (event.tag(name), event.has_flag(name));
    }
    let _ = (event.expires_at(), event.d_tag());
    match event.verify() {
        Ok(()) => ensure(signed_ids().contains(&event.id.to_hex()), || "an event nobody signed verified".into()),
        Err(Invalid::Id | Invalid::Signature | Invalid::PublicKey) => Ok(()),
        Err(other) => Err(format!("verify answered a shape error after parse: {other}")),
    }
}

/// What must hold of any filter the relay read.
fn check_filter(filter: &Filter) -> Result<(), String> {
    ensure(Filter::parse(&filter.to_value()).as_ref() == Ok(filter), || "a filter does not round-trip".into())?;
    ensure(filter.limit() <= QUERY_LIMIT_MAX, || format!("limit {} is over the maximum", filter.limit()))?;
    for seed in valid_seeds("nostr-event").iter() {
        let _ = filter.matches(&Event::parse(&String::from_utf8_lossy(seed)).unwrap());
    }
    Ok(())
}

fn check_message(input: &Input) -> Result<(), String> {
    match ClientMessage::parse(&input.text()) {
        ClientMessage::Event(Ok(event)) | ClientMessage::Auth(Ok(event)) => check_event(&event),
        ClientMessage::Event(Err((id, invalid))) | ClientMessage::Auth(Err((id, invalid))) => {
            let reply = message::ok(id.as_deref().unwrap_or(""), false, &invalid.to_string());
            ensure(serde_json::from_str::<Value>(&reply).is_ok(), || "the OK reply is not JSON".into())
        }
        ClientMessage::Req { sub, filters } | ClientMessage::Count { query: sub, filters } => {
            ensure(!sub.is_empty() && sub.chars().count() <= SUBSCRIPTION_ID_CHARS_MAX, || format!("sub {sub:?}"))?;
            match filters {
                Ok(filters) => filters.iter().try_for_each(check_filter),
                Err(reason) => ensure(serde_json::from_str::<Value>(&message::closed(&sub, &reason)).is_ok(), || {
                    "the CLOSED reply is not JSON".into()
                }),
            }
        }
        ClientMessage::Close(sub) => {
            ensure(!sub.is_empty() && sub.chars().count() <= SUBSCRIPTION_ID_CHARS_MAX, || format!("sub {sub:?}"))
        }
        ClientMessage::Unreadable(notice) => {
            ensure(serde_json::from_str::<Value>(&message::notice(&notice)).is_ok(), || "NOTICE is not JSON".into())
        }
    }
}

#[test]
fn fuzz_nostr_message() {
    fuzz_json("nostr-message", MESSAGE_CASES, NOSTR_TOKENS, check_message);
}

#[test]
fn fuzz_nostr_event() {
    for seed in valid_seeds("nostr-event").iter() {
        Event::parse(&String::from_utf8_lossy(seed)).unwrap().verify().unwrap();
    }
    fuzz_json("nostr-event", EVENT_CASES, NOSTR_TOKENS, |input| match Event::parse(&input.text()) {
        Ok(event) => check_event(&event),
        Err(_) => Ok(()),
    });
}

#[test]
fn fuzz_nostr_filter() {
    fuzz_json("nostr-filter", FILTER_CASES, NOSTR_TOKENS, |input| {
        match serde_json::from_slice::<Value>(&input.0).map(|v| Filter::parse(&v)) {
            Ok(Ok(filter)) => check_filter(&filter),
            _ => Ok(()),
        }
    });
}

proptest! {
    #![proptest_config(ProptestConfig { failure_persistence: None, cases: harness::cases(FILTER_CASES), ..ProptestConfig::default() })]

    /// Filters built field by field, with the values each field must refuse.
    #[test]
    fn structured_filters_round_trip(
        key in prop_oneof![
            prop::sample::select(vec!["ids", "authors", "kinds", "#e", "#t", "since", "limit"]).prop_map(str::to_string),
            "#[a-zA-Z]{0,2}",
            "[a-z]{1,6}",
        ],
        value in prop_oneof![
            any::<i64>().prop_map(Value::from),
            any::<f64>().prop_map(Value::from),
            "[0-9a-fA-F]{0,70}".prop_map(|s| json!([s])),
            proptest::collection::vec(any::<u32>(), 0..4).prop_map(|v| json!(v)),
            Just(Value::Null),
        ],
    ) {
        let text = json!(["REQ", "fuzz", {key: value}]).to_string();
        prop_assert_eq!(check_message(&Input(text.into_bytes())), Ok(()));
    }
}

/// The valid seeds of every relay target, as this build makes them (`harness::write_seed`).
#[test]
fn committed_seeds_are_what_this_build_makes() {
    let signer = signer();
    let events = [
        signer.sign(1_700_000_000, 1, vec![], "hello"),
        signer.sign(1_700_000_001, 1, vec![tag(&["e", &"a".repeat(64)]), tag(&["t", "bazaar"])], "é✓ \"quoted\"\n"),
        signer.sign(1_700_000_002, 5905, vec![tag(&["p", &"b".repeat(64)]), tag(&["expiration", "1700000900"])], ""),
        signer.sign(1_700_000_003, 30_000, vec![tag(&["d", "listing-1"]), tag(&["price", "250", "BNU"])], "{}"),
    ];
    for (i, event) in events.iter().enumerate() {
        write_seed("nostr-event", &format!("seed-{i}.json"), event.to_json().as_bytes());
        let message = format!("[\"EVENT\",{}]", event.to_json());
        write_seed("nostr-message", &format!("seed-event-{i}"), message.as_bytes());
    }
    let auth = format!("[\"AUTH\",{}]", events[0].to_json());
    write_seed("nostr-message", "seed-auth", auth.as_bytes());
    let filters = [
        json!({"kinds": [1, 5905], "#t": ["x"], "since": 0, "until": u64::MAX, "limit": 0}),
        json!({"ids": [events[0].id.to_hex()], "authors": [signer.public_key().to_hex()]}),
        json!({"#e": ["a".repeat(64)], "#d": ["listing-1"], "limit": 10}),
        json!({}),
    ];
    for (i, filter) in filters.iter().enumerate() {
        write_seed("nostr-filter", &format!("seed-{i}.json"), filter.to_string().as_bytes());
        write_seed("nostr-message", &format!("seed-req-{i}"), json!(["REQ", "sub", filter]).to_string().as_bytes());
    }
    write_seed("nostr-message", "seed-count", json!(["COUNT", "q", filters[0], filters[1]]).to_string().as_bytes());
    write_seed("nostr-message", "seed-close", br#"["CLOSE","sub"]"#);
}

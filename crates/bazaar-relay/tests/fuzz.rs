//! Fuzzing the relay's parsers on the stable toolchain: proptest feeds raw
//! bytes, near-misses of real messages (mutated seeds from the committed
//! corpus in `tests/corpus/relay-messages.jsonl`) and structured filters to
//! `ClientMessage::parse`, `Event::parse` and `Filter::parse`. Each must
//! answer (a message, a refusal, a NOTICE) and never panic. Bounded: the
//! test command runs `FUZZ_CASES` cases per target; set `PROPTEST_CASES` for
//! a longer soak.

use bazaar_relay::message::ClientMessage;
use bazaar_relay::{Event, Filter};
use proptest::prelude::*;

/// Cases per target in the test command's bounded run.
const FUZZ_CASES: u32 = 2_000;

fn corpus() -> Vec<String> {
    include_str!("corpus/relay-messages.jsonl")
        .lines()
        .filter(|line| !line.is_empty())
        .map(|line| serde_json::from_str::<String>(line).expect("corpus lines are JSON strings"))
        .collect()
}

fn config() -> ProptestConfig {
    let cases = std::env::var("PROPTEST_CASES").ok().and_then(|n| n.parse().ok()).unwrap_or(FUZZ_CASES);
    ProptestConfig { cases, ..ProptestConfig::default() }
}

/// Every parser, on one input; whatever it answers, it answers.
fn parse_everything(text: &str) {
    let _ = ClientMessage::parse(text);
    let _ = Event::parse(text);
    if let Ok(value) = serde_json::from_str::<serde_json::Value>(text) {
        if let Ok(filter) = Filter::parse(&value) {
            // A parsed filter round-trips and its limit is bounded.
            assert_eq!(Filter::parse(&filter.to_value()), Ok(filter.clone()));
            assert!(filter.limit() <= bazaar_relay::limits::QUERY_LIMIT_MAX);
        }
    }
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn raw_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..512)) {
        parse_everything(&String::from_utf8_lossy(&bytes));
    }

    #[test]
    fn mutated_corpus_never_panics(
        seed in 0usize..64,
        cuts in proptest::collection::vec((0usize..400, any::<char>()), 0..6),
    ) {
        let corpus = corpus();
        let mut text: Vec<char> = corpus[seed % corpus.len()].chars().collect();
        for (at, ch) in cuts {
            let at = at % (text.len() + 1);
            if at < text.len() && ch.is_ascii_digit() {
                text.remove(at);
            } else {
                text.insert(at, ch);
            }
        }
        parse_everything(&text.into_iter().collect::<String>());
    }

    #[test]
    fn structured_filters_never_panic(
        key in prop_oneof![
            prop::sample::select(vec!["ids", "authors", "kinds", "#e", "#t", "since", "limit"]).prop_map(str::to_string),
            "#[a-zA-Z]{0,2}",
            "[a-z]{1,6}",
        ],
        value in prop_oneof![
            any::<i64>().prop_map(serde_json::Value::from),
            any::<f64>().prop_map(serde_json::Value::from),
            "[0-9a-fA-F]{0,70}".prop_map(|s| serde_json::json!([s])),
            proptest::collection::vec(any::<u32>(), 0..4).prop_map(|v| serde_json::json!(v)),
            Just(serde_json::Value::Null),
        ],
    ) {
        let text = serde_json::json!(["REQ", "fuzz", {key: value}]).to_string();
        parse_everything(&text);
    }
}

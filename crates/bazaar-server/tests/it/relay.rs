//! The relay's NIP-01 edge cases, each its own test against the running
//! relay over a real WebSocket: the behaviours real relays get wrong
//! (newest-first, `limit: 0`, superseded versions, resubmitted deletions,
//! dropping the socket on bad JSON), the OK/CLOSED prefixes, NIP-09, 11, 40,
//! 42 and 70, the directed-job rule, and retention.

use crate::common;

use bazaar_relay::event::tag;
use bazaar_relay::jobs::{request_tags, JOB_FEEDBACK, JOB_REQUEST, JOB_RESULT};
use bazaar_relay::limits::{RETENTION_S, SUBSCRIPTIONS_MAX};
use bazaar_relay::sqlite::SqliteEventStore;
use bazaar_relay::{Access, Event, Relay, RelayConfig, Signer};
use bazaar_types::{SeededEntropy, Timestamp};
use futures::{SinkExt, StreamExt};
use serde_json::{json, Value};
use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;
use tokio_tungstenite::tungstenite::Message;

/// The relay's clock in every test (unix seconds).
const T0: u64 = 1_790_000_000;

struct Harness {
    registry: common::Registry,
    ws: String,
}

async fn relay_with(access: Access) -> Harness {
    let registry = common::registry_at(Timestamp(T0 as i64 * 1000)).await;
    let store = Arc::new(SqliteEventStore::open(&registry.dir().join("relay.db")).unwrap());
    let ws = format!("{}/relay", registry.url.replace("http://", "ws://"));
    let config = RelayConfig { access, ..RelayConfig::public(ws.clone()) };
    let relay = Relay::start(store, registry.clock.clone(), config).unwrap();
    assert!(registry.state.attach_relay(Arc::new(relay)));
    Harness { registry, ws }
}

async fn relay() -> Harness {
    relay_with(Access::Public).await
}

type Socket = tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

struct Conn(Socket);

impl Conn {
    async fn open(h: &Harness) -> Conn {
        Conn(tokio_tungstenite::connect_async(h.ws.as_str()).await.unwrap().0)
    }

    async fn send(&mut self, text: &str) {
        self.0.send(Message::text(text)).await.unwrap();
    }

    /// The next text frame as JSON (5 s at most).
    async fn next(&mut self) -> Value {
        loop {
            let frame = tokio::time::timeout(Duration::from_secs(5), self.0.next()).await.expect("a frame in time");
            match frame.expect("socket open").unwrap() {
                Message::Text(text) => return serde_json::from_str(&text).unwrap(),
                Message::Close(close) => panic!("the relay closed the socket: {close:?}"),
                _ => {}
            }
        }
    }

    /// Nothing arrives within `ms`.
    async fn quiet(&mut self, ms: u64) {
        if let Ok(frame) = tokio::time::timeout(Duration::from_millis(ms), self.0.next()).await {
            panic!("expected silence, got {frame:?}");
        }
    }

    async fn publish(&mut self, event: &Event) -> (bool, String) {
        self.send(&json!(["EVENT", event]).to_string()).await;
        let ok = self.next().await;
        assert_eq!((ok[0].as_str(), ok[1].as_str()), (Some("OK"), Some(event.id.to_hex().as_str())), "{ok}");
        (ok[2].as_bool().unwrap(), ok[3].as_str().unwrap().to_string())
    }

    /// Opens `sub` and reads its stored events up to EOSE.
    async fn req(&mut self, sub: &str, filters: &[Value]) -> Vec<Event> {
        let mut message = vec![json!("REQ"), json!(sub)];
        message.extend(filters.iter().cloned());
        self.send(&Value::from(message).to_string()).await;
        let mut events = Vec::new();
        loop {
            let frame = self.next().await;
            match frame[0].as_str() {
                Some("EVENT") if frame[1] == sub => events.push(serde_json::from_value(frame[2].clone()).unwrap()),
                Some("EOSE") if frame[1] == sub => return events,
                _ => panic!("unexpected frame before EOSE: {frame}"),
            }
        }
    }
}

fn signer(seed: u64) -> Signer {
    Signer::generate(&SeededEntropy::new(seed))
}

fn contents(events: &[Event]) -> Vec<&str> {
    events.iter().map(|e| e.content.as_str()).collect()
}

#[tokio::test]
async fn ok_carries_the_standard_prefixes() {
    let h = relay().await;
    let mut c = Conn::open(&h).await;
    let event = signer(1).sign(T0, 1, vec![], "hello");
    assert_eq!(c.publish(&event).await, (true, String::new()));
    let (accepted, message) = c.publish(&event).await;
    assert!(accepted && message.starts_with("duplicate:"), "{message}");
    let mut altered = event.clone();
    altered.content = "hello!".into();
    let (accepted, message) = c.publish(&altered).await;
    assert!(!accepted && message.starts_with("invalid:"), "an altered event: {message}");
    let mut forged = signer(2).sign(T0, 1, vec![], "forged");
    forged.sig = event.sig;
    let (accepted, message) = c.publish(&forged).await;
    assert!(!accepted && message.starts_with("invalid:"), "a forged signature: {message}");
    let future = signer(1).sign(T0 + 3_600, 1, vec![], "from the future");
    let (accepted, message) = c.publish(&future).await;
    assert!(!accepted && message.starts_with("invalid:"), "{message}");
    let stale = signer(1).sign(T0 - RETENTION_S - 1, 1, vec![], "older than retention");
    let (accepted, message) = c.publish(&stale).await;
    assert!(!accepted && message.starts_with("invalid:") && message.contains("retention"), "{message}");
}

#[tokio::test]
async fn newest_first_and_limit_keeps_the_newest() {
    let h = relay().await;
    let mut c = Conn::open(&h).await;
    let author = signer(1);
    for n in [3u64, 1, 4, 0, 2] {
        c.publish(&author.sign(T0 - 10 + n, 1, vec![tag(&["t", "order"])], format!("n{n}"))).await;
    }
    let all = c.req("all", &[json!({"#t": ["order"]})]).await;
    assert_eq!(contents(&all), vec!["n4", "n3", "n2", "n1", "n0"]);
    let two = c.req("two", &[json!({"#t": ["order"], "limit": 2})]).await;
    assert_eq!(contents(&two), vec!["n4", "n3"]);
    let range = c.req("range", &[json!({"kinds": [1], "since": T0 - 9, "until": T0 - 8})]).await;
    assert_eq!(contents(&range), vec!["n2", "n1"], "since and until are inclusive");
    // The relay's store is on /metrics beside the ledger's: what it holds open, its page cache, no map.
    let metrics = reqwest::get(format!("{}/metrics", h.registry.url)).await.unwrap().text().await.unwrap();
    let value = |series: &str| {
        let line = metrics.lines().find(|l| l.starts_with(series)).unwrap_or_else(|| panic!("{series} in {metrics}"));
        line.rsplit(' ').next().unwrap().parse::<u64>().unwrap()
    };
    assert_eq!(value("bazaar_sqlite_connections{db=\"relay\"} "), 2, "the writer and the one reader used");
    let cache = bazaar_relay::limits::PAGE_CACHE_KIB_TOTAL * 1024;
    assert_eq!(value("bazaar_sqlite_cache_size_bytes{db=\"relay\"} "), cache);
    assert_eq!(value("bazaar_sqlite_mmap_size_bytes{db=\"relay\"} "), 0);
}

#[tokio::test]
async fn limit_zero_answers_eose_only_and_stays_live() {
    let h = relay().await;
    let mut c = Conn::open(&h).await;
    let author = signer(1);
    c.publish(&author.sign(T0, 1, vec![], "stored before")).await;
    assert!(c.req("z", &[json!({"kinds": [1], "limit": 0})]).await.is_empty());
    let mut other = Conn::open(&h).await;
    other.publish(&author.sign(T0, 1, vec![], "published after")).await;
    let live = c.next().await;
    assert_eq!((live[0].as_str(), live[1].as_str()), (Some("EVENT"), Some("z")));
    assert_eq!(live[2]["content"], "published after");
}

#[tokio::test]
async fn tag_filters_match_first_values_and_and_together() {
    let h = relay().await;
    let mut c = Conn::open(&h).await;
    let author = signer(1);
    let worker = "ab".repeat(32);
    c.publish(&author.sign(T0, 1, vec![tag(&["t", "audio"]), tag(&["p", &worker])], "both")).await;
    c.publish(&author.sign(T0, 1, vec![tag(&["t", "audio"])], "audio only")).await;
    c.publish(&author.sign(T0, 1, vec![tag(&["t", "other", "audio"])], "second value")).await;
    let audio = c.req("a", &[json!({"#t": ["audio"]})]).await;
    let mut found = contents(&audio);
    found.sort_unstable();
    assert_eq!(found, vec!["audio only", "both"]);
    assert_eq!(contents(&c.req("b", &[json!({"#t": ["audio"], "#p": [worker]})]).await), vec!["both"]);
}

#[tokio::test]
async fn replaceable_and_addressable_keep_the_newest_and_refuse_older() {
    let h = relay().await;
    let mut c = Conn::open(&h).await;
    let author = signer(1);
    let (old, new) = (author.sign(T0 - 5, 10_002, vec![], "old"), author.sign(T0, 10_002, vec![], "new"));
    assert!(c.publish(&new).await.0);
    let (accepted, message) = c.publish(&old).await;
    assert!(!accepted && message.starts_with("invalid:"), "{message}");
    assert_eq!(contents(&c.req("r", &[json!({"kinds": [10_002]})]).await), vec!["new"]);
    let (a1, a2) = (
        author.sign(T0 - 5, 30_000, vec![tag(&["d", "x"])], "x1"),
        author.sign(T0, 30_000, vec![tag(&["d", "x"])], "x2"),
    );
    assert!(c.publish(&a1).await.0 && c.publish(&a2).await.0);
    assert!(!c.publish(&a1).await.0, "the older addressable version is refused once a newer one is stored");
    assert_eq!(contents(&c.req("a", &[json!({"kinds": [30_000]})]).await), vec!["x2"]);
}

#[tokio::test]
async fn ephemeral_events_reach_live_subscribers_and_are_never_stored() {
    let h = relay().await;
    let mut listener = Conn::open(&h).await;
    assert!(listener.req("e", &[json!({"kinds": [20_001]})]).await.is_empty());
    let mut c = Conn::open(&h).await;
    assert!(c.publish(&signer(1).sign(T0, 20_001, vec![], "now only")).await.0);
    assert_eq!(listener.next().await[2]["content"], "now only");
    assert!(c.req("later", &[json!({"kinds": [20_001]})]).await.is_empty(), "never stored");
}

#[tokio::test]
async fn bad_json_gets_a_notice_and_the_socket_stays() {
    let h = relay().await;
    let mut c = Conn::open(&h).await;
    for garbage in ["{not json", "[]", "[\"NOPE\",1]", "[\"EVENT\"]", "\"REQ\""] {
        c.send(garbage).await;
        let notice = c.next().await;
        assert_eq!(notice[0], "NOTICE", "{garbage} → {notice}");
    }
    // An event whose id is readable but which is malformed gets OK false, not a NOTICE.
    let event = signer(1).sign(T0, 1, vec![], "x");
    let broken = json!(["EVENT", {"id": event.id.to_hex(), "pubkey": event.pubkey.to_hex(), "kind": "one"}]);
    c.send(&broken.to_string()).await;
    let ok = c.next().await;
    assert_eq!((ok[0].as_str(), ok[2].as_bool()), (Some("OK"), Some(false)));
    assert!(ok[3].as_str().unwrap().starts_with("invalid:"));
    // Binary frames and COUNT (not offered) are answered, and the socket stays.
    c.0.send(Message::binary(vec![1u8, 2, 3])).await.unwrap();
    assert_eq!(c.next().await[0], "NOTICE");
    c.send(&json!(["COUNT", "q", {"kinds": [1]}]).to_string()).await;
    let count = c.next().await;
    assert_eq!((count[0].as_str(), count[1].as_str()), (Some("CLOSED"), Some("q")));
    assert!(count[2].as_str().unwrap().starts_with("unsupported:"), "{count}");
    assert!(c.publish(&event).await.0, "the same socket still works");
}

#[tokio::test]
async fn closed_names_why_a_subscription_is_refused() {
    let h = relay().await;
    let mut c = Conn::open(&h).await;
    c.send(&json!(["REQ", "bad", {"search": "x"}]).to_string()).await;
    let closed = c.next().await;
    assert_eq!((closed[0].as_str(), closed[1].as_str()), (Some("CLOSED"), Some("bad")));
    assert!(closed[2].as_str().unwrap().starts_with("unsupported:"), "{closed}");
    c.send(&json!(["REQ", "hex", {"authors": ["ABC"]}]).to_string()).await;
    assert!(c.next().await[2].as_str().unwrap().starts_with("invalid:"));
    for n in 0..SUBSCRIPTIONS_MAX {
        c.req(&format!("s{n}"), &[json!({"limit": 0})]).await;
    }
    c.send(&json!(["REQ", "one-too-many", {"limit": 0}]).to_string()).await;
    let refused = c.next().await;
    assert_eq!(refused[0], "CLOSED");
    assert!(refused[2].as_str().unwrap().starts_with("rate-limited:"), "{refused}");
    // Re-using an id replaces that subscription rather than counting a new one.
    assert!(c.req("s0", &[json!({"limit": 0})]).await.is_empty());
}

#[tokio::test]
async fn a_deleted_event_is_gone_and_cannot_be_resubmitted() {
    let h = relay().await;
    let mut c = Conn::open(&h).await;
    let author = signer(1);
    let note = author.sign(T0 - 2, 1, vec![], "regret");
    c.publish(&note).await;
    let deletion = author.sign(T0 - 1, 5, vec![tag(&["e", &note.id.to_hex()]), tag(&["k", "1"])], "");
    assert!(c.publish(&deletion).await.0);
    assert!(c.req("gone", &[json!({"ids": [note.id.to_hex()]})]).await.is_empty());
    let (accepted, message) = c.publish(&note).await;
    assert!(!accepted && message.starts_with("blocked:"), "{message}");
    // Another author cannot delete it.
    let other = signer(2).sign(T0, 1, vec![], "mine");
    c.publish(&other).await;
    c.publish(&author.sign(T0, 5, vec![tag(&["e", &other.id.to_hex()])], "")).await;
    assert_eq!(c.req("kept", &[json!({"ids": [other.id.to_hex()]})]).await.len(), 1);
}

#[tokio::test]
async fn expired_events_are_refused_and_stop_being_served() {
    let h = relay().await;
    let mut c = Conn::open(&h).await;
    let author = signer(1);
    let expired = author.sign(T0 - 5, 1, vec![tag(&["expiration", &(T0 - 1).to_string()])], "already expired");
    let (accepted, message) = c.publish(&expired).await;
    assert!(!accepted && message.starts_with("invalid:"), "{message}");
    let lease = author.sign(T0, 1, vec![tag(&["expiration", &(T0 + 60).to_string()])], "a lease");
    assert!(c.publish(&lease).await.0);
    assert_eq!(c.req("before", &[json!({"kinds": [1]})]).await.len(), 1);
    h.registry.clock.advance_s(61);
    assert!(c.req("after", &[json!({"kinds": [1]})]).await.is_empty(), "expired: never served");
}

#[tokio::test]
async fn public_mode_never_asks_for_auth_and_protected_events_are_restricted() {
    let h = relay().await;
    let mut c = Conn::open(&h).await;
    c.quiet(300).await;
    let protected = signer(1).sign(T0, 1, vec![tag(&["-"])], "only by its authenticated author");
    let (accepted, message) = c.publish(&protected).await;
    assert!(!accepted && message.starts_with("restricted:"), "never auth-required in public mode: {message}");
}

#[tokio::test]
async fn private_mode_challenges_and_admits_only_authenticated_writers() {
    let writer = signer(1);
    let h = relay_with(Access::Private { writers: HashSet::from([writer.public_key()]) }).await;
    let mut c = Conn::open(&h).await;
    let challenge = c.next().await;
    assert_eq!(challenge[0], "AUTH");
    let challenge = challenge[1].as_str().unwrap().to_string();
    let note = writer.sign(T0, 1, vec![], "private note");
    let (accepted, message) = c.publish(&note).await;
    assert!(!accepted && message.starts_with("auth-required:"), "{message}");
    c.send(&json!(["REQ", "r", {}]).to_string()).await;
    assert!(c.next().await[2].as_str().unwrap().starts_with("auth-required:"));
    let auth = |who: &Signer, challenge: &str| {
        who.sign(T0, 22_242, vec![tag(&["relay", &h.ws]), tag(&["challenge", challenge])], "")
    };
    let wrong = auth(&writer, "not-the-challenge");
    c.send(&json!(["AUTH", wrong]).to_string()).await;
    assert_eq!(c.next().await[2], false);
    let stranger = signer(2);
    c.send(&json!(["AUTH", auth(&stranger, &challenge)]).to_string()).await;
    assert_eq!(c.next().await[2], true);
    let (accepted, message) = c.publish(&stranger.sign(T0, 1, vec![], "x")).await;
    assert!(!accepted && message.starts_with("restricted:"), "authenticated but not a writer: {message}");
    c.send(&json!(["AUTH", auth(&writer, &challenge)]).to_string()).await;
    assert_eq!(c.next().await[2], true);
    assert!(c.publish(&note).await.0);
    let protected = writer.sign(T0, 1, vec![tag(&["-"])], "protected, by its authenticated author");
    assert!(c.publish(&protected).await.0);
}

#[tokio::test]
async fn directed_jobs_take_answers_only_from_named_workers() {
    let h = relay().await;
    let mut c = Conn::open(&h).await;
    let (asker, named, stranger) = (signer(1), signer(2), signer(3));
    let job =
        asker.sign(T0, JOB_REQUEST, request_tags("brief-script-delivery/v1", false, &[named.public_key()], "x"), "");
    assert!(c.publish(&job).await.0);
    let on_job = |who: &Signer, kind: u16, status: Option<&str>| {
        let mut tags = vec![tag(&["e", &job.id.to_hex()]), tag(&["p", &asker.public_key().to_hex()])];
        if let Some(status) = status {
            tags.push(tag(&["status", status, "claim"]));
        }
        who.sign(T0, kind, tags, "answer")
    };
    for refused in [on_job(&stranger, JOB_RESULT, None), on_job(&stranger, JOB_FEEDBACK, Some("processing"))] {
        let (accepted, message) = c.publish(&refused).await;
        assert!(!accepted && message.starts_with("restricted:"), "{message}");
    }
    let (accepted, message) = c.publish(&on_job(&named, JOB_RESULT + 1, None)).await;
    assert!(!accepted && message.starts_with("invalid:"), "a result's kind is its request's plus 1000: {message}");
    assert!(c.publish(&on_job(&named, JOB_FEEDBACK, Some("processing"))).await.0);
    assert!(c.publish(&on_job(&named, JOB_RESULT, None)).await.0);
    let view: Value = h
        .registry
        .http
        .get(format!("{}/v1/jobs/{}", h.registry.url, job.id))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!((view["state"].as_str(), view["successful_answers"].as_u64()), (Some("answered"), Some(1)), "{view}");
}

#[tokio::test]
async fn wait_follows_a_task_until_answered_and_says_when_history_is_gone() {
    let h = relay().await;
    let mut c = Conn::open(&h).await;
    let (asker, worker) = (signer(1), signer(2));
    let job = asker.sign(T0, JOB_REQUEST, request_tags("w/v1", false, &[worker.public_key()], "x"), "");
    c.publish(&job).await;
    let url = format!("{}/v1/jobs/{}?wait_s=10", h.registry.url, job.id);
    let waiting = tokio::spawn({
        let http = h.registry.http.clone();
        async move { http.get(url).send().await.unwrap().json::<Value>().await.unwrap() }
    });
    tokio::time::sleep(Duration::from_millis(200)).await;
    let result = worker.sign(T0, JOB_RESULT, vec![tag(&["e", &job.id.to_hex()])], "done");
    c.publish(&result).await;
    let view =
        tokio::time::timeout(Duration::from_secs(5), waiting).await.expect("wait returns once answered").unwrap();
    assert_eq!(view["state"], "answered");
    // Past retention: the purge removes the job and remembers that it did.
    h.registry.clock.advance_s(RETENTION_S + 1);
    h.registry.state.relay().unwrap().purge().await.unwrap();
    let gone = h.registry.http.get(format!("{}/v1/jobs/{}", h.registry.url, job.id)).send().await.unwrap();
    assert_eq!(gone.status(), 410);
    let problem: Value = gone.json().await.unwrap();
    assert_eq!(problem["code"], "task_past_retention");
    assert!(problem["detail"].as_str().unwrap().contains("30-day retention"), "{problem}");
}

#[tokio::test]
async fn nip11_advertises_the_limits_it_enforces_with_cors() {
    let h = relay().await;
    let response = h
        .registry
        .http
        .get(format!("{}/relay", h.registry.url))
        .header("accept", "application/nostr+json")
        .send()
        .await
        .unwrap();
    assert_eq!(response.headers()["access-control-allow-origin"], "*");
    let document: Value = response.json().await.unwrap();
    let nips: Vec<u64> = document["supported_nips"].as_array().unwrap().iter().filter_map(Value::as_u64).collect();
    for nip in [1, 9, 11, 40, 42, 70] {
        assert!(nips.contains(&nip), "NIP-{nip} in {nips:?}");
    }
    let limits = &document["limitation"];
    assert_eq!(limits["max_subscriptions"], SUBSCRIPTIONS_MAX);
    assert_eq!(limits["auth_required"], false);
    let max = limits["max_message_length"].as_u64().unwrap() as usize;
    let mut c = Conn::open(&h).await;
    c.send(&format!("[\"REQ\",\"big\",{{\"#t\":[\"{}\"]}}]", "x".repeat(max))).await;
    assert_eq!(c.next().await[0], "NOTICE", "over max_message_length: a NOTICE, and the socket stays");
    assert!(c.req("after", &[json!({"limit": 0})]).await.is_empty());
}

/// A client that pipelines gets an `OK` for every event, none lost or
/// doubled, while the connection keeps reading (its events share commits).
#[tokio::test]
async fn pipelined_events_each_get_one_ok() {
    let h = relay().await;
    let mut c = Conn::open(&h).await;
    let author = signer(1);
    let events: Vec<Event> = (0..300).map(|n| author.sign(T0, 1, vec![tag(&["t", "pipe"])], format!("n{n}"))).collect();
    for event in &events {
        c.send(&json!(["EVENT", event]).to_string()).await;
    }
    let mut acked = HashSet::new();
    while acked.len() < events.len() {
        let ok = c.next().await;
        assert_eq!((ok[0].as_str(), ok[2].as_bool()), (Some("OK"), Some(true)), "{ok}");
        assert!(acked.insert(ok[1].as_str().unwrap().to_string()), "one OK per event");
    }
    assert_eq!(c.req("all", &[json!({"#t": ["pipe"], "limit": 1000})]).await.len(), 300);
}

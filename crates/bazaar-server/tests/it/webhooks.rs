//! Webhook deliveries end to end, each checked by PyPI `standardwebhooks`
//! (the official verifier) in a receiver process: signatures, one
//! `webhook-id` across retries, per-endpoint order while the receiver is down,
//! both signatures during a rotation's overlap and only the new one after,
//! the tolerance window refusing a stale delivery, 410 disabling, the
//! dead-letter list and its replay, and target checks.

use crate::common;

use bazaar_server::conversation::webhooks::deliver_once;
use bazaar_types::limits::WEBHOOK_ROTATION_OVERLAP_MS;
use bazaar_types::{Clock, Timestamp};
use common::{buyer_and_shop, person, registry, registry_at, Person, Registry};
use serde_json::{json, Value};
use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};

/// The receiver: `tests/webhooks/receiver.py` in the venv `scripts/test` makes.
struct Receiver {
    child: Child,
    url: String,
    http: reqwest::Client,
}

impl Receiver {
    fn start() -> Receiver {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/webhooks");
        let python = root.join(".venv/bin/python");
        assert!(
            python.exists(),
            "{} is missing: run ./scripts/test once (it installs standardwebhooks)",
            python.display()
        );
        let mut child = Command::new(python)
            .arg(root.join("receiver.py"))
            .stdout(Stdio::piped())
            .spawn()
            .expect("start the webhook receiver");
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).unwrap();
        let port = line.trim().strip_prefix("listening ").expect("the receiver says where it listens");
        Receiver { child, url: format!("http://127.0.0.1:{port}"), http: reqwest::Client::new() }
    }

    async fn control(&self, control: Value) {
        let response = self.http.post(format!("{}/_control", self.url)).json(&control).send().await.unwrap();
        assert_eq!(response.status(), 200);
    }

    /// Sets the receiver's clock to the registry's.
    async fn sync(&self, r: &Registry) {
        self.control(json!({"now": r.clock.now().0 / 1000})).await;
    }

    async fn log(&self) -> Vec<Value> {
        self.http.get(format!("{}/_log", self.url)).send().await.unwrap().json().await.unwrap()
    }
}

impl Drop for Receiver {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The wall clock, read once: the official verifier compares
/// `webhook-timestamp` with its own clock, which the receiver then follows.
#[allow(clippy::disallowed_methods)]
fn wall_now() -> Timestamp {
    let since = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap();
    Timestamp(since.as_millis() as i64)
}

async fn deliver(r: &Registry) -> usize {
    deliver_once(&r.state).await.unwrap()
}

async fn hook(r: &Registry, who: &Person, url: &str) -> Value {
    let (status, endpoint) = r.post(who, "/v1/webhooks", json!({ "url": url })).await;
    assert_eq!(status, 201, "{endpoint}");
    endpoint
}

fn positions(log: &[Value]) -> Vec<u64> {
    log.iter().map(|entry| entry["body"]["data"]["position"].as_u64().unwrap()).collect()
}

/// A registry on wall time whose webhooks may reach 127.0.0.1, a receiver,
/// alice, and bob with an endpoint at the receiver; and alice and bob's DM.
struct Stage {
    r: Registry,
    rx: Receiver,
    alice: Person,
    bob: Person,
    endpoint: String,
    secret: String,
    dm: String,
}

async fn stage(answers: Value) -> Stage {
    let r = registry_at(wall_now()).await;
    r.state.plane().unwrap().allow_private_webhooks(true);
    let rx = Receiver::start();
    let (alice, bob) = (person(&r, "alice").await, person(&r, "bob").await);
    // The DM (and its birth line) exists before the endpoint: the endpoint is owed only what follows.
    let (_, dm) = r.post(&alice, "/v1/dms", json!({"with": "bob"})).await;
    let dm = dm["id"].as_str().unwrap().to_string();
    let endpoint = hook(&r, &bob, &format!("{}/bob", rx.url)).await;
    let secret = endpoint["secret"].as_str().unwrap().to_string();
    assert!(secret.starts_with("whsec_"));
    rx.control(json!({"secrets": [secret], "answers": answers})).await;
    rx.sync(&r).await;
    Stage { endpoint: endpoint["id"].as_str().unwrap().to_string(), secret, dm, r, rx, alice, bob }
}

#[tokio::test]
async fn deliveries_verify_and_a_receiver_down_for_a_while_gets_everything_in_order() {
    let Stage { r, rx, alice, bob, dm, .. } = stage(json!([503, 500])).await;
    let (_, view) = r.get(&alice, &format!("/v1/channels/{dm}")).await;
    let members = view["members"].as_array().unwrap();
    let bob_listens = &members.iter().find(|m| m["member"] == bob.id.as_str()).unwrap()["listening"];
    assert_eq!(bob_listens, &json!(["webhook"]), "a member with a webhook is listening by it");
    let mut said = Vec::new();
    for text in ["one", "two", "three"] {
        said.push(r.say(&alice, &dm, text).await["position"].as_u64().unwrap());
    }
    // The receiver is down (503, then 500): the first message is retried on
    // the schedule and the others wait behind it.
    assert_eq!(deliver(&r).await, 1);
    assert_eq!(deliver(&r).await, 0, "the retry is not due yet");
    r.clock.advance_s(5);
    rx.sync(&r).await;
    assert_eq!(deliver(&r).await, 1);
    r.clock.advance_s(5 * 60);
    rx.sync(&r).await;
    for _ in 0..3 {
        assert_eq!(deliver(&r).await, 1);
    }
    assert_eq!(deliver(&r).await, 0);
    let log = rx.log().await;
    assert_eq!(positions(&log), vec![said[0], said[0], said[0], said[1], said[2]], "in log order, retries first");
    assert_eq!(log.iter().map(|e| e["status"].as_u64().unwrap()).collect::<Vec<_>>(), vec![503, 500, 200, 200, 200]);
    for entry in &log {
        assert_eq!(entry["verified"], json!([0]), "standardwebhooks refused: {entry}");
        assert_eq!(entry["body"]["type"], "message.created");
        assert_eq!(entry["path"], "/bob");
    }
    assert!(log[0]["id"] == log[1]["id"] && log[1]["id"] == log[2]["id"], "one webhook-id across retries");
    let (_, meter) = r.get(&bob, "/v1/meter").await;
    assert_eq!(meter["delivered"]["webhook"], 3, "the meter counts deliveries, not attempts: {meter}");
    assert_ne!(log[0]["timestamp"], log[2]["timestamp"], "each attempt is stamped anew");
    assert_ne!(log[2]["id"], log[3]["id"]);
    // Outside the tolerance window the official verifier refuses the delivery.
    rx.control(json!({"now": r.clock.now().0 / 1000 + 6 * 60})).await;
    r.say(&alice, &dm, "stale").await;
    assert_eq!(deliver(&r).await, 1);
    let stale = rx.log().await.pop().unwrap();
    assert_eq!(stale["verified"], json!([]));
    assert!(stale["errors"][0].as_str().unwrap().contains("too old"), "{stale}");
}

#[tokio::test]
async fn a_rotation_signs_with_both_secrets_then_the_new_and_410_disables() {
    let Stage { r, rx, alice, bob, endpoint, secret, dm } = stage(json!([])).await;
    let (status, rotated) = r.post(&bob, &format!("/v1/webhooks/{endpoint}/rotate"), json!({})).await;
    assert_eq!(status, 200, "{rotated}");
    let second = rotated["secret"].as_str().unwrap().to_string();
    assert_ne!(second, secret);
    rx.control(json!({"secrets": [secret, second]})).await;
    r.say(&alice, &dm, "during the overlap").await;
    assert_eq!(deliver(&r).await, 1);
    let during = rx.log().await.pop().unwrap();
    assert_eq!(during["verified"], json!([0, 1]), "each secret verifies alone: {during}");
    assert_eq!(during["signature"].as_str().unwrap().split(' ').count(), 2);
    r.clock.advance_s(WEBHOOK_ROTATION_OVERLAP_MS as u64 / 1000);
    rx.sync(&r).await;
    r.say(&alice, &dm, "after the overlap").await;
    assert_eq!(deliver(&r).await, 1);
    let after = rx.log().await.pop().unwrap();
    assert_eq!(after["verified"], json!([1]), "only the new secret signs after the overlap: {after}");
    // 410 disables the endpoint: nothing more is sent.
    rx.control(json!({"answers": [410]})).await;
    r.say(&alice, &dm, "gone?").await;
    assert_eq!(deliver(&r).await, 1);
    let (_, endpoints) = r.get(&bob, "/v1/webhooks").await;
    assert!(endpoints[0]["disabled_at"].is_i64(), "{endpoints}");
    assert!(endpoints[0].get("secret").is_none(), "a listed endpoint never shows its secret");
    r.say(&alice, &dm, "after 410").await;
    assert_eq!(deliver(&r).await, 0);
}

#[tokio::test]
async fn dead_letters_are_listed_and_replayed_in_order() {
    let attempts = bazaar_conversation::webhooks::sign::ATTEMPTS_MAX as usize;
    let Stage { r, rx, alice, bob, endpoint: id, dm, .. } = stage(json!(vec![503; attempts])).await;
    let first = r.say(&alice, &dm, "doomed").await["position"].as_u64().unwrap();
    let second = r.say(&alice, &dm, "next").await["position"].as_u64().unwrap();
    for delay in std::iter::once(0).chain(bazaar_conversation::webhooks::sign::RETRY_SCHEDULE_S) {
        r.clock.advance_s(delay);
        rx.sync(&r).await;
        assert_eq!(deliver(&r).await, 1);
    }
    // The first is dead; the second now goes.
    assert_eq!(deliver(&r).await, 1);
    let (status, dead) = r.get(&bob, &format!("/v1/webhooks/{id}/deliveries")).await;
    assert_eq!(status, 200, "{dead}");
    assert_eq!(
        dead.as_array().unwrap().iter().map(|d| d["position"].as_u64().unwrap()).collect::<Vec<_>>(),
        vec![first]
    );
    assert_eq!(dead[0]["attempts"].as_u64(), Some(attempts as u64));
    let (status, replayed) = r.post(&bob, &format!("/v1/webhooks/{id}/replay"), json!({})).await;
    assert_eq!((status, replayed["replayed"].as_u64()), (200, Some(1)));
    assert_eq!(deliver(&r).await, 1);
    let log = rx.log().await;
    assert_eq!(positions(&log[attempts..]), vec![second, first]);
    assert!(log.iter().all(|entry| entry["verified"] == json!([0])));
    let (_, dead) = r.get(&bob, &format!("/v1/webhooks/{id}/deliveries?state=dead")).await;
    assert_eq!(dead, json!([]));
    let (status, body) = r.get(&bob, &format!("/v1/webhooks/{id}/deliveries?state=lost")).await;
    assert_eq!((status, body["code"].as_str()), (400, Some("invalid_request")));
    let (status, body) = r.get(&alice, &format!("/v1/webhooks/{id}/deliveries")).await;
    assert_eq!((status, body["code"].as_str()), (404, Some("webhook_not_found")), "another member's endpoint");
}

#[tokio::test]
async fn webhook_targets_are_checked_and_no_headers_are_stored() {
    let r = registry().await;
    let carol = person(&r, "carol").await;
    for url in [
        "http://127.0.0.1:9/x",
        "http://169.254.169.254/",
        "http://localhost/",
        "ftp://example.com/",
        "https://u:p@example.com/",
    ] {
        let (status, body) = r.post(&carol, "/v1/webhooks", json!({ "url": url })).await;
        assert_eq!((status, body["code"].as_str()), (400, Some("webhook_url_invalid")), "{url}");
    }
    let (status, body) = r
        .post(&carol, "/v1/webhooks", json!({"url": "https://example.com/hook", "headers": {"x-api-key": "secret"}}))
        .await;
    assert_eq!((status, body["code"].as_str()), (400, Some("invalid_request")), "custom headers are refused");
    for n in 0..bazaar_types::limits::WEBHOOK_ENDPOINTS_PER_MEMBER_MAX {
        hook(&r, &carol, &format!("https://example.com/{n}")).await;
    }
    let (status, body) = r.post(&carol, "/v1/webhooks", json!({"url": "https://example.com/more"})).await;
    assert_eq!((status, body["code"].as_str()), (409, Some("too_many_webhooks")));
    let (status, body) = r.call(&carol, reqwest::Method::DELETE, "/v1/webhooks/ep_nope", None).await;
    assert_eq!((status, body["code"].as_str()), (404, Some("webhook_not_found")));
}

/// A registry notification travels like any message: a dispute filed against
/// a merchant reaches the merchant's webhook, verified, with the deadline.
#[tokio::test]
async fn a_dispute_filed_against_a_merchant_reaches_its_webhook_with_the_deadline() {
    use bazaar_server::conversation::notices::notify_once;
    let r = registry_at(wall_now()).await;
    r.state.plane().unwrap().allow_private_webhooks(true);
    let rx = Receiver::start();
    let (buyer, shop) = buyer_and_shop(&r, 10_000).await;
    let endpoint = hook(&r, &shop, &format!("{}/shop", rx.url)).await;
    rx.control(json!({"secrets": [endpoint["secret"]]})).await;
    rx.sync(&r).await;
    let (buyer_client, shop_client) =
        (r.operator.with_credential(&buyer.credential), r.operator.with_credential(&shop.credential));
    let token = buyer_client.issue_token("shop", 500, "order-1", "https://shop.example/work").await.unwrap();
    shop_client.settle(token.body.token.as_str(), 500, "order-1", None).await.unwrap();
    let subject = bazaar_sdk::wire::dispute::DisputeSubject::Call {
        merchant: "shop".to_string(),
        order_id: "order-1".to_string(),
    };
    let filed = buyer_client.file_dispute(subject, "not_delivered", 500, "nothing came back").await.unwrap();
    let dispute = filed.body.id.clone();
    let answer_by = filed.body.deadline.unwrap_or_default();

    let pass = notify_once(&r.state).await.unwrap();
    assert!(pass.notices_written >= 2, "{pass:?}");
    assert_eq!(notify_once(&r.state).await.unwrap().notices_written, 0, "each event is told once");
    while deliver(&r).await > 0 {}
    let log = rx.log().await;
    let told: Vec<&Value> = log.iter().filter(|e| e["body"]["data"]["kind"]["type"] == "notice").collect();
    let events: Vec<&str> = told.iter().map(|e| e["body"]["data"]["kind"]["event"].as_str().unwrap()).collect();
    assert_eq!(events, vec!["settlement.posted", "dispute.filed"], "in ledger order");
    let notice = &told[1]["body"]["data"];
    assert_eq!(told[1]["verified"], json!([0]), "standardwebhooks refused: {}", told[1]);
    assert_eq!(notice["kind"]["record"], json!({"kind": "dispute", "id": dispute}));
    assert_eq!(notice["authored_by"], r.state.registry.to_string());
    let deadline = notice["kind"]["deadline"].as_i64().expect("the answer deadline");
    assert!(deadline > r.clock.now().0, "the deadline is ahead: {notice}");
    if answer_by > 0 {
        assert_eq!(deadline, answer_by);
    }
    assert!(notice["body"].as_str().unwrap().contains("Answer"), "{notice}");
    // The buyer, not a party the registry tells about a claim it made, got no dispute notice.
    let (_, inbox) = r.get(&buyer, "/v1/inbox").await;
    let notices = inbox["messages"].as_array().unwrap().iter().filter(|m| m["kind"]["type"] == "notice");
    assert!(notices.clone().all(|m| m["kind"]["event"] != "dispute.filed"), "{inbox}");
    // The dispute has a room: both parties in it, the filing as its phase line.
    let room = bazaar_conversation::ChannelId::of_record(&bazaar_conversation::RecordRef {
        kind: "dispute".into(),
        id: dispute.clone(),
    });
    let (status, history) = r.get(&shop, &format!("/v1/channels/{room}/messages")).await;
    assert_eq!(status, 200, "{history}");
    let phase = history.as_array().unwrap().iter().find(|m| m["kind"]["line"] == "phase").expect("a phase line");
    assert_eq!(phase["kind"]["event"], "dispute.filed");
    assert_eq!(phase["kind"]["record"], json!({"kind": "dispute", "id": dispute}));
    // A party points at the dispute from the room; the reference resolves for a party, not for a stranger.
    let note = json!({"body": "see the claim", "refs": [{"kind": "dispute", "id": dispute}]});
    let (status, posted) = r.post(&buyer, &format!("/v1/channels/{room}/messages"), note).await;
    assert_eq!((status, &posted["refs"][0]["id"]), (201, &json!(dispute)), "{posted}");
    let path = format!("/v1/disputes/{dispute}");
    assert_eq!(r.get(&shop, &path).await.0, 200);
    let stranger = person(&r, "stranger").await;
    assert_ne!(r.get(&stranger, &path).await.0, 200);
    assert_eq!(r.get(&stranger, &format!("/v1/channels/{room}/messages")).await.0, 403);
    let (status, refused) = r
        .post(
            &buyer,
            &format!("/v1/channels/{room}/messages"),
            json!({"body": "x", "refs": [{"kind": "invoice", "id": "1"}]}),
        )
        .await;
    assert_eq!((status, refused["code"].as_str()), (400, Some("refs_invalid")));
}

//! The live event stream: closed to anonymous visitors unless the operator
//! opens it; the public sees amounts, handles, kinds and codes but never a
//! key or prose; members see their own events whole; `Last-Event-ID`
//! resumes with no gap and no repeat, then follows live.

use crate::common;

use common::{agent_of, person, registry, Registry};
use serde_json::{json, Value};
use std::time::Duration;

/// A minimal Server-Sent Events reader over a streaming response.
struct Sse {
    response: reqwest::Response,
    buffer: String,
}

impl Sse {
    async fn open(r: &Registry, credential: Option<&str>, last_event_id: Option<u64>) -> Result<Sse, (u16, Value)> {
        let mut request = r.http.get(format!("{}/v1/stream", r.url));
        if let Some(credential) = credential {
            request = request.bearer_auth(credential);
        }
        if let Some(id) = last_event_id {
            request = request.header("last-event-id", id.to_string());
        }
        let response = request.send().await.unwrap();
        if response.status() != 200 {
            let status = response.status().as_u16();
            return Err((status, response.json().await.unwrap_or(Value::Null)));
        }
        Ok(Sse { response, buffer: String::new() })
    }

    /// An anonymous watcher's stream with `query` (`after=0`, `summary=true`, …).
    async fn public(r: &Registry, query: &str) -> Sse {
        let response = r.http.get(format!("{}/v1/stream?{query}", r.url)).send().await.unwrap();
        assert_eq!(response.status(), 200, "the public stream is open");
        Sse { response, buffer: String::new() }
    }

    /// The next event: its id, its type and its data.
    async fn next(&mut self) -> (u64, String, Value) {
        loop {
            if let Some(end) = self.buffer.find("\n\n") {
                let block: String = self.buffer.drain(..end + 2).collect();
                let field =
                    |name: &str| block.lines().find_map(|l| l.strip_prefix(name).map(|v| v.trim_start().to_string()));
                if let Some(data) = field("data:") {
                    let id = field("id:").and_then(|i| i.parse().ok()).unwrap_or(0);
                    let data: Value = serde_json::from_str(&data).unwrap();
                    let kind = data["kind"].as_str().unwrap_or_default().to_string();
                    return (id, kind, data);
                }
                continue;
            }
            let chunk = tokio::time::timeout(Duration::from_secs(5), self.response.chunk())
                .await
                .expect("an event within 5 s")
                .unwrap()
                .expect("the stream stays open");
            self.buffer.push_str(&String::from_utf8_lossy(&chunk));
        }
    }

    /// Events until one of `kind` arrives; all of them.
    async fn until(&mut self, kind: &str) -> Vec<(u64, String, Value)> {
        let mut seen = Vec::new();
        loop {
            let event = self.next().await;
            let done = event.1 == kind;
            seen.push(event);
            if done {
                return seen;
            }
        }
    }
}

/// A paid call and a refused second settlement: the buyer's, the shop's and the refusal's events.
async fn paid_call(r: &Registry) -> (common::Person, common::Person) {
    let hotel = person(r, "hotel").await;
    let buyer = agent_of(r, &hotel, "concierge").await;
    let mill = person(r, "mill").await;
    let shop = agent_of(r, &mill, "linen-shop").await;
    let owner = r.operator.with_credential(&hotel.credential);
    r.operator.mint(&hotel.id, 1_000, "mint").await.unwrap();
    owner.fund("concierge", 1_000, "fund").await.unwrap();
    owner.set_budget("concierge", 500, 1_000, 1_000).await.unwrap();
    let buying = r.operator.with_credential(&buyer.credential);
    let token = buying.issue_token("linen-shop", 300, "o-1", "https://shop/linen").await.unwrap().body;
    let selling = r.operator.with_credential(&shop.credential);
    let token = token.token.as_str();
    selling.settle(token, 300, "o-1", Some("settle-1")).await.unwrap();
    assert!(selling.settle(token, 300, "o-1", Some("secret-ish-key")).await.is_err());
    (buyer, shop)
}

#[tokio::test]
async fn the_stream_is_closed_to_the_public_unless_the_operator_opens_it() {
    let r = registry().await;
    let (status, refused) = Sse::open(&r, None, None).await.err().expect("refused");
    assert_eq!((status, refused["code"].as_str()), (401, Some("stream_not_public")));
    assert!(Sse::open(&r, Some("operator-secret"), None).await.is_ok(), "the operator watches");
    r.state.set_public_stream(true);
    assert!(Sse::open(&r, None, None).await.is_ok(), "opened to the public");
}

#[tokio::test]
async fn the_public_sees_amounts_handles_and_codes_never_keys_and_members_see_their_own_whole() {
    let r = registry().await;
    r.state.set_public_stream(true);
    let mut public = Sse::open(&r, None, Some(0)).await.unwrap();
    let mut operator = Sse::open(&r, Some("operator-secret"), Some(0)).await.unwrap();
    let (buyer, _) = paid_call(&r).await;
    let mut member = Sse::open(&r, Some(&buyer.credential), Some(0)).await.unwrap();

    let seen = public.until("refusal.recorded").await;
    let settled = seen.iter().find(|e| e.1 == "settlement.posted").expect("the settlement").2.clone();
    assert_eq!(settled["detail"], "public");
    assert!(settled.get("prev_hash").is_none() && settled["body"].get("authored_handle").is_none(), "lean: {settled}");
    assert_eq!(settled["by"], "linen-shop");
    let text = settled["body"].to_string();
    assert!(settled["body"]["amount_minor"].is_u64() || text.contains("_minor"), "amounts: {settled}");
    assert!(!text.contains("apt_"), "never a token string: {settled}");
    let refusal = &seen.last().unwrap().2;
    assert_eq!(refusal["body"]["code"], "token_settled");
    assert!(refusal["body"].get("key").is_none(), "never an idempotency key: {refusal}");
    let whole = operator.until("refusal.recorded").await;
    assert_eq!(whole.last().unwrap().2["body"]["key"], "secret-ish-key", "the operator sees it whole");

    // The member sees its own events whole and the others as the public does.
    let mine = member.until("refusal.recorded").await;
    let issued = mine.iter().find(|e| e.1 == "token.issued").expect("its token").2.clone();
    assert_eq!(issued["detail"], "whole", "{issued}");
    let settlement = mine.iter().find(|e| e.1 == "settlement.posted").unwrap().2.clone();
    assert_eq!(settlement["detail"], "public", "the shop's settlement is not the buyer's event");
    let seqs: Vec<u64> = mine.iter().map(|e| e.0).collect();
    assert_eq!(seqs, (1..=seqs.len() as u64).collect::<Vec<_>>(), "every event once, in order");
}

#[tokio::test]
async fn last_event_id_resumes_without_gap_or_repeat_and_then_follows_live() {
    let r = registry().await;
    paid_call(&r).await;
    let head = r.operator.events(0, 500).await.unwrap().events.len() as u64;
    let mut resumed = Sse::open(&r, Some("operator-secret"), Some(3)).await.unwrap();
    let mut got = Vec::new();
    while got.last().copied().unwrap_or(3) < head {
        got.push(resumed.next().await.0);
    }
    assert_eq!(got, (4..=head).collect::<Vec<_>>(), "after 3, each once, in order");
    // `?recent=2` starts with the latest two.
    let recent =
        r.http.get(format!("{}/v1/stream?recent=2", r.url)).bearer_auth("operator-secret").send().await.unwrap();
    let mut recent = Sse { response: recent, buffer: String::new() };
    assert_eq!((recent.next().await.0, recent.next().await.0), (head - 1, head));
    // Then live: a new event arrives next, with the next seq.
    let hotel = person(&r, "late-owner").await;
    r.operator.mint(&hotel.id, 5, "late").await.unwrap();
    let (seq, kind, data) = resumed.next().await;
    assert_eq!(seq, head + 1, "{kind} {data}");
    assert_eq!(data["seq"], json!(seq));
}

/// `?summary=true`: one `summary` event per window — contiguous seq ranges, a count per kind that adds up to
/// every event, and the latest events whole for the operator (never more than the cap), then live.
#[tokio::test]
async fn a_summary_covers_every_event_in_contiguous_ranges_and_carries_the_latest() {
    let r = registry().await;
    paid_call(&r).await;
    let head = r.operator.events(0, 500).await.unwrap().events.len() as u64;
    let url = format!("{}/v1/stream?summary=true&after=0", r.url);
    let response = r.http.get(url).bearer_auth("operator-secret").send().await.unwrap();
    let mut sse = Sse { response, buffer: String::new() };
    let (mut covered, mut counted) = (0u64, 0u64);
    while covered < head {
        let (id, _, data) = sse.next().await;
        assert_eq!(data["from_seq"], json!(covered + 1), "contiguous: {data}");
        let to = data["to_seq"].as_u64().unwrap();
        assert_eq!(id, to, "the id is the last seq covered, so Last-Event-ID resumes after it");
        counted += data["counts"].as_object().unwrap().values().map(|n| n.as_u64().unwrap()).sum::<u64>();
        let latest = data["latest"].as_array().unwrap();
        assert!(!latest.is_empty() && latest.len() <= bazaar_server::chamber::stream::STREAM_SUMMARY_LATEST_MAX);
        assert_eq!(latest.last().unwrap()["seq"], json!(to), "{data}");
        assert_eq!(latest.last().unwrap()["detail"], "whole", "the operator's summary carries whole events");
        covered = to;
    }
    assert_eq!((covered, counted), (head, head), "every event counted once");
    let hotel = person(&r, "late-owner").await;
    r.operator.mint(&hotel.id, 5, "late").await.unwrap();
    let (_, _, live) = sse.next().await;
    assert_eq!(live["from_seq"], json!(head + 1), "then live: {live}");
}

/// Public summaries are built once per window for every public watcher: a watcher resuming from 0 catches up from
/// the store, one joining in the middle starts at the head; while events come both get contiguous ranges that count
/// every event once, the same shared window frames once they are level, public projections only; then live.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn public_summaries_are_contiguous_for_resumed_and_joining_watchers_and_level_ones_get_the_same_frame() {
    let r = registry().await;
    r.state.set_public_stream(true);
    paid_call(&r).await;
    let mut resumed = Sse::public(&r, "summary=true&after=0").await;
    let joined_at = r.operator.events(0, 500).await.unwrap().events.len() as u64;
    let mut joined = Sse::public(&r, "summary=true").await;
    // Events keep coming for a few windows.
    for n in 0..12 {
        let owner = person(&r, &format!("summary-owner-{n}")).await;
        r.operator.mint(&owner.id, 5, &format!("summary-mint-{n}")).await.unwrap();
        tokio::time::sleep(Duration::from_millis(60)).await;
    }
    let head = r.operator.events(0, 500).await.unwrap().events.len() as u64;
    let mut frames = Vec::new();
    for (sse, start) in [(&mut resumed, 0u64), (&mut joined, joined_at)] {
        let (mut covered, mut counted, mut seen) = (start, 0u64, Vec::new());
        while covered < head {
            let (id, _, data) = sse.next().await;
            assert_eq!(data["from_seq"], json!(covered + 1), "contiguous: {data}");
            let to = data["to_seq"].as_u64().unwrap();
            assert_eq!(id, to);
            counted += data["counts"].as_object().unwrap().values().map(|n| n.as_u64().unwrap()).sum::<u64>();
            for event in data["latest"].as_array().unwrap() {
                assert_eq!(event["detail"], "public", "{event}");
            }
            seen.push(data);
            covered = to;
        }
        assert_eq!(counted, head - start, "every event counted once");
        frames.push(seen);
    }
    let last_window = |seen: &Vec<Value>| seen.last().unwrap().clone();
    assert_eq!(last_window(&frames[0]), last_window(&frames[1]), "level watchers share the window");
    let late = person(&r, "late-public").await;
    r.operator.mint(&late.id, 5, "late-public").await.unwrap();
    let (_, _, a) = resumed.next().await;
    let (_, _, b) = joined.next().await;
    assert_eq!((a["from_seq"].clone(), &a), (json!(head + 1), &b), "then live, the same frame for both");
}

/// Public watchers of every event write the tailer's shared runs: one resuming from 0 catches up from the store,
/// one joining at the head starts there, and while events come in bursts both see every seq once, in order, as
/// the public may see it, then live.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn public_watchers_of_every_event_see_each_seq_once_from_shared_runs() {
    let r = registry().await;
    r.state.set_public_stream(true);
    paid_call(&r).await;
    let mut resumed = Sse::public(&r, "after=0").await;
    let joined_at = r.operator.events(0, 500).await.unwrap().events.len() as u64;
    let mut joined = Sse::public(&r, "").await;
    // Events come in bursts, several per tail and across several tails.
    for n in 0..12 {
        let owner = person(&r, &format!("run-owner-{n}")).await;
        r.operator.mint(&owner.id, 5, &format!("run-mint-{n}")).await.unwrap();
        if n % 3 == 0 {
            tokio::time::sleep(Duration::from_millis(150)).await;
        }
    }
    let head = r.operator.events(0, 500).await.unwrap().events.len() as u64;
    for (sse, start) in [(&mut resumed, 0u64), (&mut joined, joined_at)] {
        let mut seqs = Vec::new();
        while seqs.last().copied().unwrap_or(start) < head {
            let (id, _, data) = sse.next().await;
            assert_eq!((data["seq"].clone(), data["detail"].clone()), (json!(id), json!("public")), "{data}");
            assert!(data.get("prev_hash").is_none(), "lean public frames: {data}");
            seqs.push(id);
        }
        assert_eq!(seqs, (start + 1..=head).collect::<Vec<_>>(), "each seq once, in order");
    }
    let late = person(&r, "late-run").await;
    r.operator.mint(&late.id, 5, "late-run").await.unwrap();
    let (a, _, _) = resumed.next().await;
    let (b, _, _) = joined.next().await;
    assert_eq!((a, b), (head + 1, head + 1), "then live");
}

/// A merchant's terms on the public stream: its threshold is public, the pilot's invited list never is.
#[tokio::test]
async fn the_public_sees_a_merchants_threshold_never_its_invited_buyers() {
    let r = registry().await;
    r.state.set_public_stream(true);
    let mill = person(&r, "terms-mill").await;
    let shop = agent_of(&r, &mill, "terms-shop").await;
    let guest = person(&r, "terms-guest").await;
    let body = json!({"escrow_threshold_minor": 500, "invited_buyers": [guest.id.clone()]});
    let (status, set) = r.call(&shop, reqwest::Method::PUT, "/v1/agents/terms-shop/terms", Some(body)).await;
    assert_eq!(status, 200, "{set}");
    let mut public = Sse::open(&r, None, Some(0)).await.unwrap();
    let terms = public.until("terms.set").await.pop().unwrap().2;
    assert_eq!(
        (terms["detail"].as_str(), terms["body"]["escrow_threshold_minor"].as_u64()),
        (Some("public"), Some(500))
    );
    assert!(terms["body"].get("invited_buyers").is_none() && !terms.to_string().contains(&guest.id), "{terms}");
    let mut operator = Sse::open(&r, Some("operator-secret"), Some(0)).await.unwrap();
    let whole = operator.until("terms.set").await.pop().unwrap().2;
    assert_eq!(whole["body"]["invited_buyers"], json!([guest.id]), "the operator sees it whole");
}

/// `GET path` as an anonymous visitor: status and JSON.
async fn anonymous(r: &Registry, path: &str) -> (u16, Value) {
    let answer = r.http.get(format!("{}{path}", r.url)).send().await.unwrap();
    (answer.status().as_u16(), answer.json().await.unwrap_or(Value::Null))
}

/// The stream's past for a page opened after the flows: the latest completed paid call with its token, history
/// pages back before a `seq`, and who the browser watches as — all under the stream's rules of who sees what.
#[tokio::test]
async fn the_latest_paid_call_and_earlier_events_follow_the_streams_rules() {
    let r = registry().await;
    let (_, shop) = paid_call(&r).await;
    let (status, viewer) = anonymous(&r, "/v1/stream/viewer").await;
    assert_eq!((status, &viewer["viewer"], &viewer["stream_open"]), (200, &json!("public"), &json!(false)));
    assert_eq!(anonymous(&r, "/v1/stream/latest").await.1["code"], "stream_not_public");
    r.state.set_public_stream(true);

    let (status, latest) = anonymous(&r, "/v1/stream/latest").await;
    assert_eq!(status, 200, "{latest}");
    let kinds: Vec<&str> =
        latest["paid_call"]["events"].as_array().unwrap().iter().map(|e| e["kind"].as_str().unwrap()).collect();
    assert_eq!(kinds, ["token.issued", "settlement.posted"], "{latest}");
    let settled = &latest["paid_call"]["events"][1];
    assert_eq!((settled["detail"].as_str(), settled["body"]["amount_minor"].as_u64()), (Some("public"), Some(300)));
    assert_eq!(latest["paid_call"]["completed_seq"], settled["seq"]);
    assert!(latest["contract"].is_null() && latest["dispute"].is_null(), "none happened: {latest}");

    let (_, page) = anonymous(&r, "/v1/stream/history?before=3&limit=1").await;
    let seqs: Vec<u64> = page["events"].as_array().unwrap().iter().map(|e| e["seq"].as_u64().unwrap()).collect();
    assert_eq!(seqs, [2], "{page}");
    let (_, newest) = anonymous(&r, "/v1/stream/history").await;
    let events = newest["events"].as_array().unwrap();
    assert_eq!(events.last().unwrap()["seq"], newest["head_seq"], "up to the head, newest last");
    assert!(events.iter().all(|e| e["detail"] == "public" && e["body"].get("key").is_none()), "{newest}");

    let answer = r.http.get(format!("{}/v1/stream/viewer", r.url)).bearer_auth(&shop.credential).send().await.unwrap();
    let viewer: Value = answer.json().await.unwrap();
    assert_eq!((&viewer["viewer"], &viewer["handle"]), (&json!("member"), &json!("linen-shop")));
}

/// A storefront's counts, allocation and payments are public (amounts and counts the public sees elsewhere too);
/// an item's words and a tracking number are not.
#[test]
fn the_public_sees_a_storefronts_counts_and_allocation_never_its_words() {
    use bazaar_core::model::Event;
    let event = |kind: &str, body: Value| Event {
        seq: 1,
        kind: kind.into(),
        body,
        authored_by: "did:key:a".into(),
        on_behalf_of: "did:key:a".into(),
        at: bazaar_types::Timestamp(0),
        prev_hash: String::new(),
        hash: String::new(),
    };
    let public = |e: &Event| bazaar_server::live::project(e, &bazaar_server::live::Viewer::Public)["body"].clone();
    let opened = public(&event("rfq.opened", json!({"quantity": 40, "invited": 5, "item": "cushion covers"})));
    assert_eq!(opened, json!({"quantity": 40, "invited": 5}));
    let allocation = json!({"filled": 40, "unfilled": 0, "total": 107_700,
        "lines": [{"seller": "did:key:s", "units": 20, "unit_price": 2_600, "amount": 52_000, "offer_id": "o2"}]});
    let closed = public(&event("rfq.closed", json!({"allocation": allocation, "rfq": "rfq_1"})));
    assert_eq!(
        closed["allocation"]["lines"][0],
        json!({"seller": "did:key:s", "units": 20, "unit_price": 2_600, "amount": 52_000})
    );
    assert_eq!(closed["allocation"]["total"], 107_700);
    let paid = public(&event(
        "order.share_paid",
        json!({"tracking": "TRK1", "payment": {"net_minor": 51_480, "fee_minor": 520, "release": {"transfers": ["t"]}}}),
    ));
    assert_eq!(paid, json!({"payment": {"net_minor": 51_480, "fee_minor": 520}}));
    let ruled =
        public(&event("dispute.ruled", json!({"ruling": {"decision": "reject", "reasons": "prose", "round": 1}})));
    assert_eq!(ruled, json!({"ruling": {"decision": "reject", "round": 1}}));
}

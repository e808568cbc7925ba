//! The chamber's "try to break it" routes around a stand-in catalogue: no
//! catalogue attached is `404 attacks_unavailable`; an unknown attack is
//! `404`; one run at a time and at most `ATTACKS_PER_MINUTE_MAX` a minute
//! (`429 attack_rate_limited`); anonymous visitors only when the stream is public.
//! A run refused as the catalogue expects is recorded here as one
//! `refusal.recorded`; one that was not leaves nothing.

use crate::common;

use bazaar_server::chamber::attacks::{AttackRunner, ATTACKS_PER_MINUTE_MAX, ATTACKS_PER_VISITOR_PER_MINUTE};
use bazaar_wire::chamber::AttackVerdict;
use futures::future::BoxFuture;
use serde_json::{json, Value};
use std::sync::Arc;

/// Three attacks: `quick` answers at once, `slow` after half a second, both refused as expected;
/// `accepted` was let through.
struct StandIn;

impl AttackRunner for StandIn {
    fn catalogue(&self) -> Vec<(String, String)> {
        ["quick", "slow", "accepted"].into_iter().map(|name| (name.into(), "token_settled".into())).collect()
    }
    fn run(&self, name: String) -> BoxFuture<'static, Result<AttackVerdict, String>> {
        Box::pin(async move {
            if name == "slow" {
                tokio::time::sleep(std::time::Duration::from_millis(500)).await;
            }
            let refused = name != "accepted";
            let (status, code) = if refused { (409, "token_settled") } else { (200, "ACCEPTED") };
            Ok(AttackVerdict {
                name,
                tried: "a stand-in".into(),
                status,
                code: code.into(),
                refused_as_expected: refused,
                balances_unchanged: true,
                events_appended: Vec::new(),
                ledger_unchanged: true,
                recorded: false,
            })
        })
    }
}

/// The `refusal.recorded` events on the registry's ledger, as the operator reads them.
async fn refusals(r: &common::Registry) -> Vec<Value> {
    let page: Value = r
        .http
        .get(format!("{}/v1/events?after=0&limit=500", r.url))
        .bearer_auth("operator-secret")
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    page["events"].as_array().unwrap().iter().filter(|e| e["kind"] == "refusal.recorded").cloned().collect()
}

async fn post(r: &common::Registry, path: &str, credential: Option<&str>) -> (u16, Value) {
    post_from(r, path, credential, None).await
}

/// As a visitor its reverse proxy (on loopback, trusted) names in `X-Forwarded-For`: the proxy appends the
/// address it saw, after whatever the client itself claimed.
async fn post_from(r: &common::Registry, path: &str, credential: Option<&str>, visitor: Option<&str>) -> (u16, Value) {
    let mut request = r.http.post(format!("{}{path}", r.url));
    if let Some(visitor) = visitor {
        request = request.header("x-forwarded-for", format!("192.0.2.99, {visitor}"));
    }
    if let Some(credential) = credential {
        request = request.bearer_auth(credential);
    }
    let answer = request.send().await.unwrap();
    (answer.status().as_u16(), answer.json().await.unwrap_or(Value::Null))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn attacks_run_one_at_a_time_within_the_minute_cap_and_only_when_attached() {
    let r = common::registry().await;
    let op = Some("operator-secret");
    assert_eq!(post(&r, "/v1/chamber/attacks/quick", op).await.1["code"], "attacks_unavailable");
    assert!(r.state.attach_attacks(Arc::new(StandIn)));
    assert_eq!(post(&r, "/v1/chamber/attacks/quick", None).await.1["code"], "stream_not_public");
    let (status, unknown) = post(&r, "/v1/chamber/attacks/nothing", op).await;
    assert_eq!((status, unknown["code"].as_str()), (404, Some("attack_not_found")));

    // One at a time: a second run while `slow` runs is turned away.
    let slow = tokio::spawn({
        let (http, url) = (r.http.clone(), r.url.clone());
        async move { http.post(format!("{url}/v1/chamber/attacks/slow")).bearer_auth("operator-secret").send().await }
    });
    tokio::time::sleep(std::time::Duration::from_millis(150)).await;
    let (status, busy) = post(&r, "/v1/chamber/attacks/quick", op).await;
    assert_eq!((status, busy["code"].as_str()), (429, Some("attack_rate_limited")));
    assert_eq!(slow.await.unwrap().unwrap().status(), 200);

    // The refusal a run met is recorded here once; a run that was not refused as expected records nothing.
    assert_eq!(refusals(&r).await.len(), 1, "slow's refusal");
    let (status, accepted) = post(&r, "/v1/chamber/attacks/accepted", op).await;
    assert_eq!((status, &accepted["recorded"]), (200, &json!(false)), "{accepted}");
    let (status, quick) = post(&r, "/v1/chamber/attacks/quick", op).await;
    assert_eq!((status, &quick["recorded"]), (200, &json!(true)), "{quick}");
    let recorded = refusals(&r).await;
    assert_eq!(recorded.len(), 2, "{recorded:?}");
    let body = &recorded[1]["body"];
    assert_eq!(
        (&body["attack"], &body["code"], &body["status"]),
        (&json!("quick"), &json!("token_settled"), &json!(409))
    );
    assert_eq!(recorded[1]["authored_by"], recorded[1]["on_behalf_of"], "recorded by the registry itself");

    // At most ATTACKS_PER_VISITOR_PER_MINUTE per visitor: a sixth from the same address is turned away,
    // while another visitor still runs.
    r.state.set_public_stream(true);
    assert!(r.state.trust_proxies(vec!["127.0.0.1".parse().unwrap()]));
    for _ in 0..ATTACKS_PER_VISITOR_PER_MINUTE {
        let (status, verdict) = post_from(&r, "/v1/chamber/attacks/quick", None, Some("203.0.113.5")).await;
        assert_eq!((status, &verdict["name"]), (200, &json!("quick")));
    }
    let (status, mine) = post_from(&r, "/v1/chamber/attacks/quick", None, Some("203.0.113.5")).await;
    assert_eq!((status, mine["code"].as_str()), (429, Some("attack_rate_limited")), "{mine}");
    assert!(mine["detail"].as_str().unwrap().contains("You have run 5"), "{mine}");
    // At most ATTACKS_PER_MINUTE_MAX runs start in a minute, all visitors together (slow, accepted, quick
    // and 5 above so far).
    let mut started = 3 + ATTACKS_PER_VISITOR_PER_MINUTE;
    let mut visitor = 0;
    while started < ATTACKS_PER_MINUTE_MAX {
        visitor += 1;
        let address = format!("198.51.100.{visitor}");
        let (status, _) = post_from(&r, "/v1/chamber/attacks/quick", None, Some(&address)).await;
        assert_eq!(status, 200);
        started += 1;
    }
    let (status, limited) = post_from(&r, "/v1/chamber/attacks/quick", None, Some("192.0.2.77")).await;
    assert_eq!((status, limited["code"].as_str()), (429, Some("attack_rate_limited")));
    assert!(limited["detail"].as_str().unwrap().contains("at most 20 a minute"), "{limited}");
    let listed: Value = r.http.get(format!("{}/v1/chamber/attacks", r.url)).send().await.unwrap().json().await.unwrap();
    assert_eq!(listed["attacks"][1], json!({"name": "slow", "expect": "token_settled"}));
}

//! A relay whose buyer's registry stays silent past `RELAY_RETRY_WINDOW_S`: two registries in process on
//! manual clocks, B reaching A through a forwarder the test switches off. The relay sticks (the sweeper
//! stops, the merchant is told `relay_stuck`, the operator reads a recovery record nobody else may read),
//! and once A is back the operator's retry ends it — here refused, the token having expired meanwhile — with
//! nothing moved on B and the record saying how it ended.

mod common;

use bazaar_core::federation::RELAY_RETRY_WINDOW_S;
use common::{agent_of, person, Person};
use serde_json::json;
use tokio::net::{TcpListener, TcpStream};

/// A TCP forwarder to `target`: while off, it closes new connections at once and cuts the open ones.
struct Switch {
    url: String,
    on: tokio::sync::watch::Sender<bool>,
}

async fn switch_to(target: &str) -> Switch {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let target = target.trim_start_matches("http://").to_string();
    let (on, watch) = tokio::sync::watch::channel(true);
    tokio::spawn(async move {
        while let Ok((mut inbound, _)) = listener.accept().await {
            if !*watch.borrow() {
                continue;
            }
            let (target, mut watch) = (target.clone(), watch.clone());
            tokio::spawn(async move {
                let Ok(mut outbound) = TcpStream::connect(&target).await else { return };
                tokio::select! {
                    _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound) => {}
                    _ = watch.wait_for(|on| !*on) => {}
                }
            });
        }
    });
    Switch { url, on }
}

fn operator() -> Person {
    let id = bazaar_core::model::OPERATOR_ID.to_string();
    Person { credential: "operator-secret".into(), id, key: bazaar_sdk::generate_key() }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_relay_unanswered_for_a_day_sticks_for_the_operator_who_retries_it_once_the_peer_is_back() {
    let (a, b) = (common::registry().await, common::registry().await);
    for r in [&a, &b] {
        *r.state.public_url.write().unwrap() = Some(r.url.clone());
    }
    let to_a = switch_to(&a.url).await;
    let terms = (0, 1_000, 100_000);
    b.operator.add_peer(&to_a.url, a.state.registry.as_str(), 5_000, terms).await.unwrap();
    a.operator.add_peer(&b.url, b.state.registry.as_str(), 5_000, terms).await.unwrap();
    let owner = person(&a, "buyer-owner").await;
    let buyer = agent_of(&a, &owner, "buyer").await;
    a.operator.mint(&owner.id, 10_000, "mint-1").await.unwrap();
    let owner_client = a.operator.with_credential(&owner.credential);
    owner_client.fund("buyer", 10_000, "fund-1").await.unwrap();
    owner_client.set_budget("buyer", 1_000, 10_000, 10_000).await.unwrap();
    let shop = agent_of(&b, &person(&b, "shop-owner").await, "shop").await;
    let ask = json!({"merchant": shop.id, "registry": b.state.registry, "max_amount_minor": 500,
        "order_id": "stuck-1", "resource": "https://shop.b/x"});
    let (status, token) = a.post(&buyer, "/v1/tokens", ask).await;
    assert_eq!(status, 201, "{token}");
    let settle = json!({"token": token["token"], "amount_minor": 500, "order_id": "stuck-1"});

    to_a.on.send_replace(false);
    let (status, pending) = b.post(&shop, "/v1/settlements", settle.clone()).await;
    assert_eq!((status, pending["code"].as_str()), (503, Some("relay_pending")), "{pending}");
    for r in [&a, &b] {
        r.clock.advance_ms((RELAY_RETRY_WINDOW_S * 1000) as i64 + 1_000);
    }
    bazaar_server::sweep_once(&b.state).await.unwrap();
    let (status, stuck) = b.post(&shop, "/v1/settlements", settle.clone()).await;
    assert_eq!((status, stuck["code"].as_str()), (409, Some("relay_stuck")), "{stuck}");
    assert_eq!(stuck["facts"]["state"], "stuck", "{stuck}");
    let jti = stuck["facts"]["jti"].as_str().unwrap().to_string();
    let due = b.state.store.doc(bazaar_core::model::DocKind::Relay, &jti).await.unwrap().unwrap().due_at;
    assert_eq!(due, None, "the sweeper no longer retries it");

    let operator = operator();
    let (status, records) = b.get(&operator, "/v1/federation/recovery").await;
    assert_eq!(status, 200, "{records}");
    let record = &records["recovery"][0];
    assert_eq!((record["jti"].as_str(), record["state"].as_str()), (Some(jti.as_str()), Some("stuck")), "{records}");
    assert_eq!(record["amount"], 500);
    assert_eq!(b.get(&shop, "/v1/federation/recovery").await.0, 403, "operators only");
    let retry = format!("/v1/federation/relays/{jti}/retry");
    assert_eq!(b.post(&shop, &retry, json!(null)).await.0, 403, "operators only");

    to_a.on.send_replace(true);
    let (status, retried) = b.post(&operator, &retry, json!(null)).await;
    assert_eq!(status, 200, "{retried}");
    assert_eq!(retried["relay"]["state"], "failed", "A refused the expired token: {retried}");
    assert_eq!(retried["attempt"], "relay_failed");
    let (_, records) = b.get(&operator, "/v1/federation/recovery").await;
    assert_eq!(records["recovery"][0]["state"], "failed", "{records}");
    assert_eq!(records["recovery"][0]["retried"], 1);
    assert!(records["recovery"][0]["resolved_at"].is_i64(), "{records}");
    let (status, again) = b.post(&operator, &retry, json!(null)).await;
    assert_eq!((status, again["code"].as_str()), (409, Some("relay_not_stuck")), "{again}");
    let (status, failed) = b.post(&shop, "/v1/settlements", settle).await;
    assert_eq!((status, failed["code"].as_str()), (422, Some("relay_failed")), "{failed}");
    let account = bazaar_types::AccountId::of_member(&bazaar_types::MemberId(shop.id.clone()));
    let balance = b.state.store.account(&account).await.unwrap().map_or(0, |a| a.balance());
    assert_eq!(balance, 0, "nothing moved on B");
}

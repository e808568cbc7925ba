//! The corridor between two registries in process on manual clocks, each reaching the other through a
//! forwarder the test can switch off. A relay whose buyer's registry stays silent past
//! `RELAY_RETRY_WINDOW_S` sticks (the sweeper stops, the merchant is told `relay_stuck`, the operator reads a
//! recovery record nobody else may read), and once A is back the operator's retry ends it. A netting
//! statement moves both corridors by its amount once, signed by both registries.

use crate::common;

use bazaar_core::federation::RELAY_RETRY_WINDOW_S;
use common::{agent_of, person, Person, Registry};
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

/// A (the buyer's registry) and B (the merchant's), recognising each other through switches; a funded buyer
/// on A and a shop on B.
struct Corridor {
    a: Registry,
    b: Registry,
    to_a: Switch,
    to_b: Switch,
    buyer: Person,
    shop: Person,
}

async fn corridor() -> Corridor {
    let (a, b) = (common::registry().await, common::registry().await);
    for r in [&a, &b] {
        *r.state.public_url.write().unwrap() = Some(r.url.clone());
    }
    let (to_a, to_b) = (switch_to(&a.url).await, switch_to(&b.url).await);
    let terms = (0, 1_000, 100_000);
    b.operator.add_peer(&to_a.url, a.state.registry.as_str(), 5_000, terms).await.unwrap();
    a.operator.add_peer(&to_b.url, b.state.registry.as_str(), 5_000, terms).await.unwrap();
    let owner = person(&a, "buyer-owner").await;
    let buyer = agent_of(&a, &owner, "buyer").await;
    a.operator.mint(&owner.id, 10_000, "mint-1").await.unwrap();
    let owner_client = a.operator.with_credential(&owner.credential);
    owner_client.fund("buyer", 10_000, "fund-1").await.unwrap();
    owner_client.set_budget("buyer", 1_000, 10_000, 10_000).await.unwrap();
    let shop = agent_of(&b, &person(&b, "shop-owner").await, "shop").await;
    Corridor { a, b, to_a, to_b, buyer, shop }
}

impl Corridor {
    /// The buyer's token on A for `order` at the shop on B, and the shop's settle body for it.
    async fn order(&self, order: &str, amount: u64) -> serde_json::Value {
        let ask = json!({"merchant": self.shop.id, "registry": self.b.state.registry, "max_amount_minor": amount,
            "order_id": order, "resource": "https://shop.b/x"});
        let (status, token) = self.a.post(&self.buyer, "/v1/tokens", ask).await;
        assert_eq!(status, 201, "{token}");
        json!({"token": token["token"], "amount_minor": amount, "order_id": order})
    }

    /// `corridor:<other>` on `r`.
    async fn corridor_on(r: &Registry, other: &Registry) -> i128 {
        let account = bazaar_types::AccountId::corridor(&other.state.registry);
        r.state.store.account(&account).await.unwrap().map_or(0, |a| a.balance())
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_relay_unanswered_for_a_day_sticks_for_the_operator_who_retries_it_once_the_peer_is_back() {
    let c = corridor().await;
    let (a, b, shop) = (&c.a, &c.b, &c.shop);
    let settle = c.order("stuck-1", 500).await;

    c.to_a.on.send_replace(false);
    let (status, pending) = b.post(shop, "/v1/settlements", settle.clone()).await;
    assert_eq!((status, pending["code"].as_str()), (503, Some("relay_pending")), "{pending}");
    for r in [&a, &b] {
        r.clock.advance_ms((RELAY_RETRY_WINDOW_S * 1000) as i64 + 1_000);
    }
    bazaar_server::sweep_once(&b.state).await.unwrap();
    let (status, stuck) = b.post(shop, "/v1/settlements", settle.clone()).await;
    assert_eq!((status, stuck["code"].as_str()), (409, Some("relay_stuck")), "{stuck}");
    assert_eq!(stuck["facts"]["state"], "stuck", "{stuck}");
    let jti = stuck["facts"]["jti"].as_str().unwrap().to_string();
    let due = b.state.store.doc(bazaar_core::model::DocKind::Relay, &jti).await.unwrap().unwrap().due_at;
    assert_eq!(due, None, "the sweeper no longer retries it");
    let (status, verified) = b.post(shop, "/v1/tokens/verify", json!({"token": settle["token"]})).await;
    assert_eq!((status, verified["state"].as_str()), (200, Some("stuck")), "verify says so: {verified}");

    let operator = operator();
    let (status, records) = b.get(&operator, "/v1/federation/recovery").await;
    assert_eq!(status, 200, "{records}");
    let record = &records["recovery"][0];
    assert_eq!((record["jti"].as_str(), record["state"].as_str()), (Some(jti.as_str()), Some("stuck")), "{records}");
    assert_eq!(record["amount"], 500);
    assert_eq!(b.get(shop, "/v1/federation/recovery").await.0, 403, "operators only");
    let retry = format!("/v1/federation/relays/{jti}/retry");
    assert_eq!(b.post(shop, &retry, json!(null)).await.0, 403, "operators only");

    c.to_a.on.send_replace(true);
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
    let (status, failed) = b.post(shop, "/v1/settlements", settle).await;
    assert_eq!((status, failed["code"].as_str()), (422, Some("relay_failed")), "{failed}");
    let account = bazaar_types::AccountId::of_member(&bazaar_types::MemberId(shop.id.clone()));
    let balance = b.state.store.account(&account).await.unwrap().map_or(0, |a| a.balance());
    assert_eq!(balance, 0, "nothing moved on B");
    assert_eq!(Corridor::corridor_on(b, a).await, 0);
}

/// A's operator nets part of what A owes B for relayed calls: the statement is signed by both registries
/// (each signature checks against the signer's published key history), both hold it recorded, and both
/// corridors move by its amount once, still mirroring. With B unreachable the statement stays proposed and
/// nothing moves anywhere; the same request later records it. More than A owes, another payment under a
/// used id, and anyone but the operator are refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_netting_statement_signed_by_both_moves_both_corridors_once() {
    use bazaar_core::federation::{verify_statement, KeyEntry, Netting, RegistrySignature};
    let c = corridor().await;
    let (a, b) = (&c.a, &c.b);
    for order in ["net-1", "net-2"] {
        let settle = c.order(order, 500).await;
        let (status, settled) = b.post(&c.shop, "/v1/settlements", settle).await;
        assert_eq!(status, 200, "{settled}");
    }
    assert_eq!((Corridor::corridor_on(a, b).await, Corridor::corridor_on(b, a).await), (1_000, -1_000));
    let operator = operator();
    let net = |id: &str, amount: u64| json!({"peer": b.state.registry, "paid_by": "us", "amount_minor": amount, "reference": format!("wire {id}"), "id": id});
    let (status, sent) = a.post(&operator, "/v1/federation/netting", net("wire-1", 600)).await;
    assert_eq!(status, 200, "{sent}");
    assert_eq!(
        (sent["answered"].as_bool(), sent["netting"]["state"].as_str()),
        (Some(true), Some("recorded")),
        "{sent}"
    );
    assert_eq!((Corridor::corridor_on(a, b).await, Corridor::corridor_on(b, a).await), (400, -400));
    let (status, listed) = b.get(&operator, "/v1/federation/netting").await;
    assert_eq!(status, 200, "{listed}");
    let on_b: Netting = serde_json::from_value(listed["netting"][0].clone()).unwrap();
    let on_a: Netting = serde_json::from_value(sent["netting"].clone()).unwrap();
    assert_eq!(on_b.statement, on_a.statement, "one statement on both registries");
    assert_eq!(on_b.signatures, on_a.signatures, "with both signatures on both");
    let history = |r: &Registry| -> Vec<KeyEntry> { r.state.key_history() };
    let by = |who: &Registry| -> RegistrySignature {
        on_a.signatures.iter().find(|s| s.registry == who.state.registry).cloned().expect("signed by both")
    };
    verify_statement(&on_a.statement, &by(a), &history(a)).unwrap();
    verify_statement(&on_a.statement, &by(b), &history(b)).unwrap();
    assert!(verify_statement(&on_a.statement, &by(a), &history(b)).is_err(), "a signature checks only as its signer's");

    // B unreachable: proposed here, nothing moved anywhere; the same request later records it once.
    c.to_b.on.send_replace(false);
    let (status, unanswered) = a.post(&operator, "/v1/federation/netting", net("wire-2", 300)).await;
    assert_eq!(status, 200, "{unanswered}");
    assert_eq!(unanswered["answered"], false);
    assert_eq!(unanswered["netting"]["state"], "proposed");
    assert_eq!((Corridor::corridor_on(a, b).await, Corridor::corridor_on(b, a).await), (400, -400));
    c.to_b.on.send_replace(true);
    let (status, resent) = a.post(&operator, "/v1/federation/netting", net("wire-2", 300)).await;
    assert_eq!((status, resent["netting"]["state"].as_str()), (200, Some("recorded")), "{resent}");
    let (_, again) = a.post(&operator, "/v1/federation/netting", net("wire-2", 300)).await;
    assert_eq!(again["netting"], resent["netting"], "a third send answers the record");
    assert_eq!((Corridor::corridor_on(a, b).await, Corridor::corridor_on(b, a).await), (100, -100));

    let (status, too_much) = a.post(&operator, "/v1/federation/netting", net("wire-3", 101)).await;
    assert_eq!((status, too_much["code"].as_str()), (422, Some("netting_exceeds_corridor")), "{too_much}");
    let (status, reused) = a.post(&operator, "/v1/federation/netting", net("wire-1", 50)).await;
    assert_eq!((status, reused["code"].as_str()), (409, Some("netting_exists")), "{reused}");
    assert_eq!(a.post(&c.buyer, "/v1/federation/netting", net("wire-4", 1)).await.0, 403);
    assert_eq!(a.get(&c.buyer, "/v1/federation/netting").await.0, 403);
    assert_eq!((Corridor::corridor_on(a, b).await, Corridor::corridor_on(b, a).await), (100, -100));
}

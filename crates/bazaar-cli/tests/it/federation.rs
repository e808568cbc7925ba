//! Cross-registry payments between two real `bazaar serve` processes, each on
//! its own SQLite data: a buyer on registry A pays a merchant on registry B,
//! which relays the settlement to A. Replays charge nothing twice, a stranger
//! from A pays at B with no onboarding, and SIGKILL of either registry
//! mid-flow loses nothing: every order settles exactly once on each side and
//! the corridor balances mirror each other.
// reason: an end-to-end test reads as one story of requests and the checks after each.
#![allow(clippy::too_many_lines)]

use crate::common;

use bazaar_cli::wire_json;
use bazaar_sdk::{generate_key, Body, Client, SdkError};
use serde_json::{json, Value};
use std::collections::HashMap;
use std::path::PathBuf;
use std::process::{Child, Command};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const OPERATOR: &str = "federation-operator";
const PRICE: u64 = 100;
/// B's fee on relayed settlements, in basis points (5 %).
const FEE_BPS: u32 = 500;
const FEE: u64 = PRICE * FEE_BPS as u64 / 10_000;
const FUNDS: u64 = 1_000_000;
/// A worker gives up on one order after this long (servers restart well before).
const ORDER_DEADLINE_S: u64 = 40;

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

fn temp_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("bazaar-federation-{name}-{}", std::process::id()));
    std::fs::remove_dir_all(&dir).ok();
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// One `bazaar serve` process on its own data dir and loopback port.
struct Registry {
    dir: PathBuf,
    port: u16,
    child: Option<Child>,
    url: String,
    operator: Client,
    did: String,
}

impl Registry {
    async fn start(name: &str) -> Registry {
        let dir = temp_dir(name);
        let port = free_port();
        let url = format!("http://127.0.0.1:{port}");
        let operator = Client::new(&url, Some(OPERATOR.into()));
        let mut registry = Registry { dir, port, child: None, url, operator, did: String::new() };
        registry.spawn();
        registry.did = registry.operator.well_known().await.unwrap().did;
        registry
    }

    fn spawn(&mut self) {
        let args = ["--port", &self.port.to_string(), "--operator-credential", OPERATOR, "--data-dir"];
        let mut args: Vec<String> = args.map(String::from).to_vec();
        args.push(self.dir.display().to_string());
        self.child = Some(common::spawn_serve(&args));
    }

    /// SIGKILL (start again on the same data and port with [`Registry::spawn`]).
    fn kill(&mut self) {
        let mut child = self.child.take().unwrap();
        child.kill().expect("SIGKILL");
        child.wait().unwrap();
    }

    /// SIGTERM and wait for a graceful exit.
    fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let status = Command::new("kill").args(["-TERM", &child.id().to_string()]).status().unwrap();
            assert!(status.success());
            let deadline = Instant::now() + Duration::from_secs(10);
            while child.try_wait().unwrap().is_none() {
                if Instant::now() > deadline {
                    child.kill().ok();
                    child.wait().ok();
                    panic!("bazaar serve did not stop on SIGTERM");
                }
                std::thread::sleep(Duration::from_millis(20));
            }
        }
    }

    /// `bazaar audit --json` on the stopped registry's data: must pass; returns its report.
    fn audit(&self) -> Value {
        assert!(self.child.is_none(), "audit a stopped registry");
        let out = Command::new(env!("CARGO_BIN_EXE_bazaar"))
            .args(["--json", "audit", "--data-dir", &self.dir.display().to_string()])
            .output()
            .unwrap();
        let report: Value = serde_json::from_slice(&out.stdout)
            .unwrap_or_else(|_| panic!("audit printed no JSON: {}", String::from_utf8_lossy(&out.stdout)));
        assert!(out.status.success() && report["ok"] == true, "audit of {} failed: {report}", self.url);
        report
    }

    fn corridor(report: &Value, peer: &Registry) -> i64 {
        report["corridors"][format!("corridor:{}", peer.did)].as_i64().unwrap_or(0)
    }
}

impl Drop for Registry {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            child.kill().ok();
            child.wait().ok();
        }
        std::fs::remove_dir_all(&self.dir).ok();
    }
}

/// An owner and one agent on `registry`; the agent is funded and budgeted when `funds > 0`.
async fn agent(registry: &Registry, name: &str, funds: u64) -> (Client, String) {
    let operator = &registry.operator;
    let owner = operator.create_owner(&generate_key(), &format!("{name}-owner")).await.unwrap();
    let owner = operator.with_credential(owner.credential.as_str());
    let invite = owner.issue_invite().await.unwrap();
    let created = wire_json(&owner.redeem_invite(&invite, &generate_key(), name).await.unwrap());
    let agent = owner.with_credential(created["credential"].as_str().unwrap());
    let did = agent.me().await.unwrap().member.id;
    if funds > 0 {
        let owner_id = owner.me().await.unwrap().member.id;
        operator.mint(&owner_id, funds, &format!("{name}-mint")).await.unwrap();
        owner.fund(name, funds, &format!("{name}-fund")).await.unwrap();
        owner.set_budget(name, PRICE * 10, funds, funds).await.unwrap();
    }
    (agent, did)
}

/// Two registries that recognise each other, a funded buyer on A and a merchant on B.
struct World {
    a: Registry,
    b: Registry,
    buyer: Client,
    buyer_did: String,
    merchant: Client,
    merchant_did: String,
}

async fn world(name: &str) -> World {
    let a = Registry::start(&format!("{name}-a")).await;
    let b = Registry::start(&format!("{name}-b")).await;
    let (buyer, buyer_did) = agent(&a, "fed-buyer", FUNDS).await;
    let (merchant, merchant_did) = agent(&b, "fed-shop", 0).await;
    let terms = (FEE_BPS, PRICE * 10, FUNDS * 10);
    a.operator.add_peer(&b.url, &b.did, 5_000, terms).await.unwrap();
    b.operator.add_peer(&a.url, &a.did, 5_000, terms).await.unwrap();
    World { a, b, buyer, buyer_did, merchant, merchant_did }
}

/// Buyer on A: the order's token for the merchant on B (the same token on every ask).
async fn cross_token(w: &World, order: &str) -> Result<String, SdkError> {
    let body = json!({"merchant": w.merchant_did, "registry": w.b.did, "max_amount_minor": PRICE,
        "order_id": order, "resource": "https://shop.b/fed"});
    let answer = w.buyer.call::<Value>(reqwest::Method::POST, "/v1/tokens", Some(Body::json(body)), None).await?;
    Ok(answer.body["token"].as_str().unwrap().to_string())
}

/// Transport errors, 5xx (including `relay_pending`) and in-flight 409s are worth retrying.
fn retryable(error: &SdkError) -> bool {
    match error.status() {
        None => true,
        Some(status) => status >= 500 || error.code() == Some("idempotency_in_flight"),
    }
}

/// Issue (or re-get) the token on A and settle it at B until B acknowledges.
async fn pay_until_settled(w: &World, order: &str) -> Value {
    let deadline = Instant::now() + Duration::from_secs(ORDER_DEADLINE_S);
    loop {
        assert!(Instant::now() < deadline, "order {order} never settled");
        let attempt = async {
            let token = cross_token(w, order).await?;
            w.merchant.settle(&token, PRICE, order, None).await
        };
        match attempt.await {
            Ok(answer) => return wire_json(&answer.body),
            Err(error) if retryable(&error) => tokio::time::sleep(Duration::from_millis(50)).await,
            Err(error) => panic!("order {order} refused: {error}"),
        }
    }
}

async fn retry<T, F, Fut>(what: &str, call: F) -> T
where
    F: Fn() -> Fut,
    Fut: std::future::Future<Output = Result<T, SdkError>>,
{
    let deadline = Instant::now() + Duration::from_secs(ORDER_DEADLINE_S);
    loop {
        assert!(Instant::now() < deadline, "{what} never completed");
        match call().await {
            Ok(value) => return value,
            Err(error) if retryable(&error) => tokio::time::sleep(Duration::from_millis(50)).await,
            Err(error) => panic!("{what} refused: {error}"),
        }
    }
}

/// Every `settlement.posted` event's order id on a registry, in ledger order.
async fn settled_orders(operator: &Client) -> Vec<String> {
    let (mut orders, mut after) = (Vec::new(), 0);
    loop {
        let page = wire_json(&retry("events", || operator.events(after, 500)).await);
        let list = page["events"].as_array().unwrap().clone();
        let Some(last) = list.last() else { return orders };
        for event in list.iter().filter(|e| e["kind"] == "settlement.posted") {
            let body = if event["body"].is_object() { &event["body"] } else { event };
            orders.push(body["order_id"].as_str().unwrap_or_default().to_string());
        }
        after = last["seq"].as_u64().unwrap();
    }
}

async fn balance(client: &Client) -> i64 {
    retry("me", || client.me()).await.balance_minor.unwrap_or(0)
}

/// Both registries stopped and audited; corridors mirror each other at `n` payments.
fn stop_and_check_corridors(w: &mut World, n: u64) {
    w.a.stop();
    w.b.stop();
    let (report_a, report_b) = (w.a.audit(), w.b.audit());
    let a_owes_b = Registry::corridor(&report_a, &w.b);
    let b_owes_a = Registry::corridor(&report_b, &w.a);
    assert_eq!(a_owes_b, (n * PRICE) as i64, "A's corridor:B: {report_a}");
    assert_eq!(b_owes_a, -((n * PRICE) as i64), "B's corridor:A: {report_b}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cross_registry_pay_with_retries_is_exactly_once() {
    const N: u64 = 20;
    let mut w = world("once").await;
    // The buyer is a stranger to B: no member, no onboarding.
    let unknown = w.b.operator.member(&w.buyer_did).await.unwrap_err();
    assert_eq!(unknown.status(), Some(404), "{unknown}");

    for i in 0..N {
        let order = format!("once-{i}");
        let token = cross_token(&w, &order).await.unwrap();
        assert_eq!(cross_token(&w, &order).await.unwrap(), token, "one token per order");
        if i == 0 {
            // Verify at B, a receipt check: genuine (A's key signed it for settlement here), not yet settled.
            let verified = wire_json(&w.merchant.verify(&token).await.unwrap());
            assert_eq!((verified["genuine"].clone(), verified["state"].clone()), (json!(true), json!("unsettled")));
            assert_eq!(verified["work_order"], false);
        }
        let first = wire_json(&w.merchant.settle(&token, PRICE, &order, None).await.unwrap().body);
        if i == 0 {
            assert_eq!(wire_json(&w.merchant.verify(&token).await.unwrap())["state"], "settled");
            let mut forged = token.clone();
            forged.truncate(forged.len() - 4);
            forged.push_str("AAAA");
            assert_eq!(
                wire_json(&w.merchant.verify(&forged).await.unwrap())["genuine"],
                false,
                "a bad signature is not genuine"
            );
        }
        assert_eq!(first["amount_minor"], PRICE, "{first}");
        assert_eq!(first["fee_minor"], FEE, "{first}");
        assert_eq!(first["via"], w.a.did.as_str(), "{first}");
        for _ in 0..3 {
            let again = wire_json(&w.merchant.settle(&token, PRICE, &order, None).await.unwrap().body);
            assert_eq!(again["settlement_id"], first["settlement_id"], "{order}: replay answers the same settlement");
            assert_eq!(again["net_minor"], first["net_minor"]);
        }
    }

    assert_eq!(balance(&w.buyer).await, (FUNDS - N * PRICE) as i64, "the buyer paid once per order");
    assert_eq!(balance(&w.merchant).await, (N * (PRICE - FEE)) as i64, "the merchant was paid once per order");
    let on_a = settled_orders(&w.a.operator).await;
    let on_b = settled_orders(&w.b.operator).await;
    assert_eq!(on_a.len() as u64, N, "A settled each order once: {on_a:?}");
    assert_eq!(on_b.len() as u64, N, "B settled each order once: {on_b:?}");
    let unknown = w.b.operator.member(&w.buyer_did).await.unwrap_err();
    assert_eq!(unknown.status(), Some(404), "paying at B made the buyer no member of B");

    // A rotates its key: B learns the longer history from A's card on the first
    // signature it cannot check, and the next payment settles as before.
    let rotated = wire_json(&w.a.operator.rotate_key().await.unwrap());
    let order = "after-rotation";
    let token = cross_token(&w, order).await.unwrap();
    let settled = wire_json(&w.merchant.settle(&token, PRICE, order, None).await.unwrap().body);
    assert_eq!(settled["amount_minor"], PRICE, "{settled}");
    let peers = wire_json(&w.b.operator.peers().await.unwrap());
    let keys = peers["peers"][0]["keys"].as_array().unwrap();
    assert_eq!(keys.len(), 2, "B refreshed A's key history");
    assert_eq!(keys[1]["did"], rotated["entry"]["did"]);
    stop_and_check_corridors(&mut w, N + 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_9_of_either_registry_mid_flow_loses_nothing() {
    const WORKERS: usize = 4;
    const ORDERS: usize = 50;
    /// Orders the merchant settles once while A is down and never retries: B's sweeper finishes them.
    const PARKED: usize = 4;
    let mut w = world("kill").await;
    let mut parked = Vec::new();
    for p in 0..PARKED {
        let order = format!("parked-{p}");
        parked.push((cross_token(&w, &order).await.unwrap(), order));
    }
    let retries: Arc<Mutex<HashMap<String, usize>>> = Default::default();
    // Workers hold clients and DIDs only; the registries stay here to be killed.
    let (buyer, merchant, merchant_did, b_did) =
        (w.buyer.clone(), w.merchant.clone(), w.merchant_did.clone(), w.b.did.clone());
    let acknowledged: Arc<Mutex<HashMap<String, Value>>> = Default::default();
    let workers: Vec<_> = (0..WORKERS)
        .map(|k| {
            let (buyer, merchant, merchant_did, b_did, acknowledged, retries) = (
                buyer.clone(),
                merchant.clone(),
                merchant_did.clone(),
                b_did.clone(),
                acknowledged.clone(),
                retries.clone(),
            );
            tokio::spawn(async move {
                for n in 0..ORDERS {
                    let order = format!("kill-{k}-{n}");
                    let deadline = Instant::now() + Duration::from_secs(ORDER_DEADLINE_S);
                    let body = json!({"merchant": merchant_did, "registry": b_did, "max_amount_minor": PRICE,
                        "order_id": order, "resource": "https://shop.b/fed"});
                    let settled = loop {
                        assert!(Instant::now() < deadline, "order {order} never settled");
                        let attempt = async {
                            let issued = buyer
                                .call::<Value>(
                                    reqwest::Method::POST,
                                    "/v1/tokens",
                                    Some(Body::json(body.clone())),
                                    None,
                                )
                                .await?;
                            let token = issued.body["token"].as_str().unwrap().to_string();
                            merchant.settle(&token, PRICE, &order, None).await
                        };
                        match attempt.await {
                            Ok(answer) => break wire_json(&answer.body),
                            Err(error) if retryable(&error) => {
                                let code = error.code().unwrap_or("transport").to_string();
                                *retries.lock().unwrap().entry(code).or_default() += 1;
                                tokio::time::sleep(Duration::from_millis(50)).await
                            }
                            Err(error) => panic!("order {order} refused: {error}"),
                        }
                    };
                    acknowledged.lock().unwrap().insert(order, settled);
                }
            })
        })
        .collect();

    let mut at_kill = Vec::new();
    // Kill A a fifth of the way in and B past the half, while all workers are mid-order.
    for (victim, fraction) in [("A", 5), ("B", 2)] {
        let deadline = Instant::now() + Duration::from_secs(ORDER_DEADLINE_S);
        while acknowledged.lock().unwrap().len() < WORKERS * ORDERS / fraction {
            assert!(Instant::now() < deadline, "load stalled before killing {victim}");
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        let registry = if victim == "A" { &mut w.a } else { &mut w.b };
        let done = acknowledged.lock().unwrap().len();
        registry.kill();
        if victim == "A" {
            for (token, order) in &parked {
                let error = w.merchant.settle(token, PRICE, order, None).await.unwrap_err();
                assert_eq!(error.code(), Some("relay_pending"), "{order} while A is down: {error}");
            }
        }
        let registry = if victim == "A" { &mut w.a } else { &mut w.b };
        registry.spawn();
        eprintln!("SIGKILL registry {victim}: {done} of {} orders acknowledged", WORKERS * ORDERS);
        at_kill.push(done);
    }
    for worker in workers {
        worker.await.unwrap();
    }
    let acknowledged = acknowledged.lock().unwrap().clone();
    assert_eq!(acknowledged.len(), WORKERS * ORDERS);
    eprintln!("retries by cause: {:?}", retries.lock().unwrap());
    let total = (WORKERS * ORDERS + PARKED) as u64;
    assert!(at_kill[0] < total as usize && at_kill[1] < total as usize, "kills landed mid-flow: {at_kill:?}");

    // Let B's sweeper finish anything still pending: poll until both ledgers stop moving.
    let (operator_a, operator_b) = (w.a.operator.clone(), w.b.operator.clone());
    let mut last = (usize::MAX, usize::MAX);
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let now = (settled_orders(&operator_a).await.len(), settled_orders(&operator_b).await.len());
        if now == last && now.0 as u64 >= total && now.1 as u64 >= total {
            break;
        }
        assert!(Instant::now() < deadline, "ledgers never settled down: {now:?}");
        last = now;
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    // Exactly once on each side: every order appears once among A's and B's settlements.
    for (side, orders) in [("A", settled_orders(&operator_a).await), ("B", settled_orders(&operator_b).await)] {
        let mut counts: HashMap<&str, usize> = HashMap::new();
        for order in &orders {
            *counts.entry(order.as_str()).or_default() += 1;
        }
        assert_eq!(orders.len() as u64, total, "{side} settled {} times for {total} orders", orders.len());
        assert!(counts.values().all(|&c| c == 1), "{side} settled an order twice: {counts:?}");
        assert!(acknowledged.keys().all(|o| counts.contains_key(o.as_str())), "{side} lost an acknowledged order");
        assert!(parked.iter().all(|(_, o)| counts.contains_key(o.as_str())), "{side}: a parked relay never finished");
    }
    // The parked orders, settled by B's sweeper, answer a replay with their settlement.
    for (token, order) in &parked {
        let settled = wire_json(&w.merchant.settle(token, PRICE, order, None).await.unwrap().body);
        assert_eq!(settled["order_id"], order.as_str(), "{settled}");
    }
    // A replay after the dust settles answers the acknowledged settlement.
    for (order, first) in acknowledged.iter().take(4) {
        let again = pay_until_settled(&w, order).await;
        assert_eq!(again["settlement_id"], first["settlement_id"], "{order}");
    }
    assert_eq!(balance(&w.buyer).await, (FUNDS - total * PRICE) as i64, "no double charge on A");
    assert_eq!(balance(&w.merchant).await, (total * (PRICE - FEE)) as i64, "paid once on B");
    stop_and_check_corridors(&mut w, total);
}

/// A stranger's agent on A, never seen by B, joins B by its own signature (no
/// operator, no invite), funds its guest account through the corridor and
/// opens an escrowed order with B's merchant, released on delivery.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stranger_joins_b_and_places_an_escrowed_order_the_same_afternoon() {
    const FUNDING: u64 = 800;
    const MILESTONE: u64 = 500;
    let mut w = world("guest").await;
    let key = generate_key();
    let owner = w.a.operator.create_owner(&generate_key(), "stranger-owner").await.unwrap();
    let owner = w.a.operator.with_credential(owner.credential.as_str());
    let invite = owner.issue_invite().await.unwrap();
    let created = wire_json(&owner.redeem_invite(&invite, &key, "stranger").await.unwrap());
    let stranger = owner.with_credential(created["credential"].as_str().unwrap());
    let owner_id = owner.me().await.unwrap().member.id;
    w.a.operator.mint(&owner_id, FUNDS, "stranger-mint").await.unwrap();
    owner.fund("stranger", FUNDS, "stranger-fund").await.unwrap();
    owner.set_budget("stranger", PRICE * 10, FUNDS, FUNDS).await.unwrap();
    let did = bazaar_sdk::did_of(&key);
    assert_eq!(w.b.operator.member(&did).await.unwrap_err().status(), Some(404), "B has never seen it");

    // Zero manual onboarding: the agent's own signature, checked against a recognised home.
    let anonymous = Client::new(&w.b.url, None);
    let guest = anonymous.join_as_guest(&key, &w.a.did, &w.b.did).await.unwrap();
    assert_eq!(wire_json(&guest.me().await.unwrap())["member"]["id"], did.as_str());
    // Joining again with a fresh signature gives another credential to the same guest.
    let again = anonymous.join_as_guest(&key, &w.a.did, &w.b.did).await.unwrap();
    assert_ne!(again.credential(), guest.credential());
    assert_eq!(wire_json(&again.me().await.unwrap())["member"]["id"], did.as_str());
    assert_eq!(wire_json(&guest.me().await.unwrap())["member"]["id"], did.as_str(), "the first credential still works");
    // Another key cannot join under this DID.
    let impostor = anonymous
        .call::<Value>(
            reqwest::Method::POST,
            "/v1/federation/guests",
            Some(Body::json(json!({"did": did, "home": w.a.did,
            "presented_at_ms": bazaar_sdk::clock::now_ms(), "signature": "AAAA"}))),
            None,
        )
        .await
        .unwrap_err();
    assert_eq!(impostor.code(), Some("proof_invalid"));
    let Err(forged) = anonymous.join_as_guest(&key, "did:key:z6MkNotAPeerOfB", &w.b.did).await else {
        panic!("a guest of an unrecognised registry was let in");
    };
    assert_eq!(forged.code(), Some("peer_unknown"), "only agents of recognised registries join");

    // Funding: a token on A addressed to itself at B, settled by itself at B.
    let body = json!({"merchant": did, "registry": w.b.did, "max_amount_minor": FUNDING,
        "order_id": "guest-funding-1", "resource": "guest funding"});
    let token =
        stranger.call::<Value>(reqwest::Method::POST, "/v1/tokens", Some(Body::json(body)), None).await.unwrap();
    let token = token.body["token"].as_str().unwrap().to_string();
    guest.settle(&token, FUNDING, "guest-funding-1", None).await.unwrap();
    let funded = FUNDING - FUNDING * FEE_BPS as u64 / 10_000;
    assert_eq!(balance(&guest).await, funded as i64);

    // The escrowed order: held on the guest's budget at B, released on delivery.
    let due = bazaar_sdk::clock::now_ms() + 86_400_000;
    let milestones = [(MILESTONE, "translate the menu", due)];
    let created =
        guest.create_contract(&w.merchant_did, None, &milestones, "terms", None, "guest-order-1").await.unwrap();
    let contract = created.body.id.clone();
    w.merchant.contract_act(&contract, "accept").await.unwrap();
    w.merchant.deliver(&contract, 0, b"menu.txt").await.unwrap();
    guest.release(&contract, 0, None).await.unwrap();
    let shown = wire_json(&guest.contract(&contract).await.unwrap());
    assert_eq!(shown["state"], "completed", "{shown}");
    assert_eq!(balance(&guest).await, (funded - MILESTONE) as i64);
    assert_eq!(balance(&w.merchant).await, (MILESTONE - MILESTONE / 100) as i64, "net of B's 1 % protocol fee");
    assert_eq!(balance(&stranger).await, (FUNDS - FUNDING) as i64, "A debited the stranger once");

    // A paid call relayed from A: the buyer, now also a guest at B, can dispute it there.
    let body = json!({"merchant": w.merchant_did, "registry": w.b.did, "max_amount_minor": PRICE,
        "order_id": "call-1", "resource": "https://shop.b/fed"});
    let token =
        stranger.call::<Value>(reqwest::Method::POST, "/v1/tokens", Some(Body::json(body)), None).await.unwrap();
    w.merchant.settle(token.body["token"].as_str().unwrap(), PRICE, "call-1", None).await.unwrap();
    let subject = bazaar_sdk::wire::dispute::DisputeSubject::Call {
        merchant: w.merchant_did.to_string(),
        order_id: "call-1".to_string(),
    };
    let filed = guest.file_dispute(subject, "not_delivered", PRICE, "no menu came back").await.unwrap();
    assert_eq!(filed.body.phase, "filed", "{:?}", filed.body);
    assert_eq!(filed.body.claimant, did.as_str());

    w.a.stop();
    w.b.stop();
    let (report_a, report_b) = (w.a.audit(), w.b.audit());
    assert_eq!(Registry::corridor(&report_a, &w.b), (FUNDING + PRICE) as i64);
    assert_eq!(Registry::corridor(&report_b, &w.a), -((FUNDING + PRICE) as i64));
}

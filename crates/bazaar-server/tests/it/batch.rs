//! Batched money calls (`POST /v1/tokens/batch`, `POST /v1/settlements/batch`) are exactly their single calls.
//!
//! The model test sends one random workload two ways: to registry A as given — single calls and batches of
//! tokens and settlements, with duplicates inside a batch and across batches, explicit and derived keys, refused
//! amounts — and to registry B with every item as its own single call, in order. Every item must answer the
//! same (status, replayed, refusal code, amounts), and the balances must end the same.

use crate::common;

use common::{agent_of, person, registry, Registry};
use proptest::prelude::*;
use serde_json::{json, Value};
use std::collections::HashMap;

const FUNDS: u64 = 1_000_000;
const PER_CALL: u64 = 1_000;

#[derive(Clone, Debug)]
enum Item {
    Token { order: u8, amount: u64, key: Option<u8> },
    Settle { order: u8, amount: u64, key: Option<u8> },
}

#[derive(Clone, Debug)]
enum Step {
    Single(Item),
    Batch(Vec<Item>),
}

fn item() -> impl Strategy<Value = Item> {
    let key = proptest::option::weighted(0.3, 0u8..3);
    prop_oneof![
        (0u8..4, prop::sample::select(vec![100u64, 300, 5_000]), key.clone())
            .prop_map(|(order, amount, key)| Item::Token { order, amount, key }),
        (0u8..4, prop::sample::select(vec![100u64, 300, 400]), key).prop_map(|(order, amount, key)| Item::Settle {
            order,
            amount,
            key
        }),
    ]
}

fn steps() -> impl Strategy<Value = Vec<Step>> {
    let step = prop_oneof![item().prop_map(Step::Single), prop::collection::vec(item(), 1..7).prop_map(Step::Batch),];
    prop::collection::vec(step, 1..9)
}

/// A registry with a funded buyer and a merchant; the clients and the merchant's DID.
struct World {
    r: Registry,
    buyer: bazaar_sdk::Client,
    merchant: bazaar_sdk::Client,
    merchant_did: String,
    /// The first token each order was issued (what a settle of that order sends).
    tokens: HashMap<u8, String>,
}

async fn world() -> World {
    world_on(registry().await).await
}

async fn world_on(r: Registry) -> World {
    let hotel = person(&r, "batch-hotel").await;
    let buyer = agent_of(&r, &hotel, "batch-buyer").await;
    let mill = person(&r, "batch-mill").await;
    let shop = agent_of(&r, &mill, "batch-shop").await;
    let owner = r.operator.with_credential(&hotel.credential);
    r.operator.mint(&hotel.id, FUNDS, "mint").await.unwrap();
    owner.fund("batch-buyer", FUNDS, "fund").await.unwrap();
    owner.set_budget("batch-buyer", PER_CALL, FUNDS, FUNDS).await.unwrap();
    let (buyer, merchant) =
        (r.operator.with_credential(&buyer.credential), r.operator.with_credential(&shop.credential));
    World { buyer, merchant, merchant_did: shop.id, tokens: HashMap::new(), r }
}

impl World {
    /// The single call's body for `item` (with `idempotency_key` when it names one), and which endpoint.
    fn request(&self, item: &Item) -> (bool, Value) {
        match item {
            Item::Token { order, amount, key } => {
                let mut body = json!({"merchant": self.merchant_did, "max_amount_minor": amount,
                    "order_id": format!("b-{order}"), "resource": "https://shop/batch"});
                if let Some(key) = key {
                    body["idempotency_key"] = json!(format!("tk-{key}"));
                }
                (true, body)
            }
            Item::Settle { order, amount, key } => {
                let token = self.tokens.get(order).cloned().unwrap_or_else(|| "apt_missing.x".into());
                let mut body = json!({"token": token, "amount_minor": amount, "order_id": format!("b-{order}")});
                if let Some(key) = key {
                    body["idempotency_key"] = json!(format!("sk-{key}"));
                }
                (false, body)
            }
        }
    }

    fn remember(&mut self, items: &[Item], answers: &[Value]) {
        for (item, answer) in items.iter().zip(answers) {
            if let (Item::Token { order, .. }, 201) = (item, answer["status"].as_u64().unwrap_or(0)) {
                self.tokens.entry(*order).or_insert_with(|| answer["body"]["token"].as_str().unwrap().to_string());
            }
        }
    }

    /// One item as a single call; answered in the batch items' shape.
    async fn single(&self, is_token: bool, mut body: Value) -> Value {
        let key = body.as_object_mut().unwrap().remove("idempotency_key");
        let (client, path) = if is_token { (&self.buyer, "/v1/tokens") } else { (&self.merchant, "/v1/settlements") };
        let mut request =
            self.r.http.post(format!("{}{path}", self.r.url)).bearer_auth(client.credential().unwrap()).json(&body);
        if let Some(key) = key.as_ref().and_then(Value::as_str) {
            request = request.header("idempotency-key", key);
        }
        let response = request.send().await.unwrap();
        let status = response.status().as_u16();
        let replayed = response.headers().contains_key("idempotent-replayed");
        json!({"status": status, "replayed": replayed, "body": response.json::<Value>().await.unwrap()})
    }

    /// Items as batches by kind, in order: consecutive items of one kind go in one batch call.
    async fn batch(&self, requests: Vec<(bool, Value)>) -> Vec<Value> {
        let mut out = Vec::new();
        let mut at = 0;
        while at < requests.len() {
            let kind = requests[at].0;
            let run: Vec<Value> =
                requests[at..].iter().take_while(|(k, _)| *k == kind).map(|(_, b)| b.clone()).collect();
            at += run.len();
            let (client, path) =
                if kind { (&self.buyer, "/v1/tokens/batch") } else { (&self.merchant, "/v1/settlements/batch") };
            let answer = client
                .call::<Value>(reqwest::Method::POST, path, Some(bazaar_sdk::Body::json(json!({"items": run}))), None)
                .await
                .unwrap();
            out.extend(answer.body["results"].as_array().unwrap().iter().cloned());
        }
        out
    }
}

/// What must agree between a batch item and its single call (tokens and ids are drawn afresh per registry).
fn comparable(answer: &Value) -> Value {
    let body = &answer["body"];
    json!({"status": answer["status"], "replayed": answer["replayed"], "code": body["code"],
        "max": body["max_amount_minor"], "amount": body["amount_minor"], "order": body["order_id"]})
}

async fn run(steps: Vec<Step>) -> Result<(), TestCaseError> {
    run_on(world().await, steps).await
}

/// `steps` sent as given to `a`, and one by one to a fresh embedded registry.
async fn run_on(mut a: World, steps: Vec<Step>) -> Result<(), TestCaseError> {
    let mut b = world().await;
    for step in steps {
        let items = match step {
            Step::Single(item) => vec![item],
            Step::Batch(items) => items,
        };
        let batched = matches!(items.len(), 2..);
        let requests_a: Vec<(bool, Value)> = items.iter().map(|i| a.request(i)).collect();
        let answers_a = if batched {
            a.batch(requests_a).await
        } else {
            let (kind, body) = requests_a.into_iter().next().unwrap();
            vec![a.single(kind, body).await]
        };
        let requests_b: Vec<(bool, Value)> = items.iter().map(|i| b.request(i)).collect();
        let mut answers_b = Vec::new();
        for (kind, body) in requests_b {
            answers_b.push(b.single(kind, body).await);
        }
        for ((item, x), y) in items.iter().zip(&answers_a).zip(&answers_b) {
            prop_assert_eq!(comparable(x), comparable(y), "{:?}: batched {} single {}", item, x, y);
        }
        a.remember(&items, &answers_a);
        b.remember(&items, &answers_b);
    }
    for (who_a, who_b) in [(&a.buyer, &b.buyer), (&a.merchant, &b.merchant)] {
        let (x, y) = (who_a.me().await.unwrap(), who_b.me().await.unwrap());
        prop_assert_eq!(x.balance_minor, y.balance_minor);
        prop_assert_eq!(x.available_minor, y.available_minor);
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 40, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn any_mix_of_single_and_batched_calls_answers_exactly_as_single_calls(steps in steps()) {
        let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
        runtime.block_on(run(steps))?;
    }
}

/// A batch past the limit, or empty, is refused whole with nothing done; an item's malformed key is that item's
/// refusal only.
#[tokio::test]
async fn a_batch_is_bounded_and_a_bad_item_fails_only_itself() {
    let w = world().await;
    let too_many: Vec<Value> = (0..=bazaar_server::pay::BATCH_ITEMS_MAX)
        .map(|n| json!({"merchant": w.merchant_did, "max_amount_minor": 1, "order_id": format!("m-{n}"), "resource": "r"}))
        .collect();
    let batch = |items: Value| {
        let body = Some(bazaar_sdk::Body::json(json!({"items": items})));
        w.buyer.call::<Value>(reqwest::Method::POST, "/v1/tokens/batch", body, None)
    };
    for items in [vec![], too_many] {
        let refused = batch(json!(items)).await;
        assert_eq!(refused.unwrap_err().code(), Some("invalid_request"));
    }
    let items = json!([
        {"merchant": w.merchant_did, "max_amount_minor": 100, "order_id": "ok-1", "resource": "r"},
        {"merchant": w.merchant_did, "max_amount_minor": 100, "order_id": "bad-key", "resource": "r", "idempotency_key": "has space\u{7f}"},
        {"merchant": w.merchant_did, "max_amount_minor": 5_000, "order_id": "too-much", "resource": "r"},
        {"merchant": "nobody-here", "max_amount_minor": 100, "order_id": "no-merchant", "resource": "r"},
    ]);
    let answered = batch(items).await.unwrap();
    let results = answered.body["results"].as_array().unwrap();
    let seen: Vec<(u64, Option<&str>)> =
        results.iter().map(|r| (r["status"].as_u64().unwrap(), r["body"]["code"].as_str())).collect();
    assert_eq!(seen[0], (201, None), "{results:?}");
    assert_eq!(seen[1].1, Some("idempotency_key_invalid"), "{results:?}");
    assert_eq!(seen[2], (422, Some("budget_per_call_exceeded")), "{results:?}");
    assert_eq!(seen[3].0, 404, "{results:?}");
    // The one good token settles through a settlement batch, once; its duplicate in the same batch is a replay.
    let token = results[0]["body"]["token"].as_str().unwrap();
    let settle = json!({"token": token, "amount_minor": 100, "order_id": "ok-1"});
    let answered = w
        .merchant
        .call::<Value>(
            reqwest::Method::POST,
            "/v1/settlements/batch",
            Some(bazaar_sdk::Body::json(json!({"items": [settle.clone(), settle]}))),
            None,
        )
        .await
        .unwrap();
    let results = answered.body["results"].as_array().unwrap();
    assert_eq!((results[0]["status"].as_u64(), results[0]["replayed"].as_bool()), (Some(200), Some(false)));
    assert_eq!((results[1]["status"].as_u64(), results[1]["replayed"].as_bool()), (Some(200), Some(true)));
    assert_eq!(results[0]["body"]["settlement_id"], results[1]["body"]["settlement_id"]);
}

/// A coalescing client (what the merchant middleware uses) answers each concurrent call exactly as its single
/// call would — a token per order, one settlement per order, a duplicate replayed, a refusal refused — while
/// sending far fewer requests than calls.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_coalescing_client_answers_concurrent_calls_as_single_calls_in_fewer_requests() {
    const CALLS: usize = 200;
    let w = world().await;
    let (buyer, merchant) = (w.buyer.coalescing(), w.merchant.coalescing());
    let tokens = futures::future::join_all((0..CALLS).map(|i| {
        let (buyer, merchant) = (buyer.clone(), w.merchant_did.clone());
        async move { buyer.issue_token(&merchant, 100, &format!("c-{i}"), "https://shop/c").await }
    }))
    .await;
    let tokens: Vec<String> = tokens.into_iter().map(|t| t.unwrap().body.token.clone()).collect();
    // Every order settled once, each twice at the same moment, and one over its token's amount.
    let settles = futures::future::join_all((0..CALLS * 2).map(|n| {
        let (merchant, token) = (merchant.clone(), tokens[n % CALLS].clone());
        async move { (n % CALLS, merchant.settle(&token, 100, &format!("c-{}", n % CALLS), None).await) }
    }))
    .await;
    // Far fewer requests than calls went out.
    let metrics = w.r.http.get(format!("{}/metrics", w.r.url)).send().await.unwrap().text().await.unwrap();
    let (token_batches, settle_batches) =
        (requests(&metrics, "/v1/tokens/batch"), requests(&metrics, "/v1/settlements/batch"));
    eprintln!("{CALLS} tokens in {token_batches} requests, {} settles in {settle_batches} requests", CALLS * 2);
    assert!(token_batches >= 1.0 && token_batches <= (CALLS / 4) as f64, "{token_batches}");
    assert!(settle_batches >= 1.0 && settle_batches <= (CALLS / 2) as f64, "{settle_batches}");
    let mut ids: HashMap<usize, Vec<String>> = HashMap::new();
    let mut replays = 0;
    for (order, answer) in settles {
        let answer = match answer {
            Ok(answer) => answer,
            // As two concurrent single calls: the second may find the first still running; its retry replays.
            Err(e) if e.code() == Some("idempotency_in_flight") => {
                let retried = merchant.settle(&tokens[order], 100, &format!("c-{order}"), None).await.unwrap();
                assert!(retried.replayed, "order {order}: the retry replays");
                retried
            }
            Err(e) => panic!("order {order}: {e}"),
        };
        replays += usize::from(answer.replayed);
        ids.entry(order).or_default().push(answer.body.settlement.settlement_id.clone());
    }
    assert!(ids.values().all(|v| v.len() == 2 && v[0] == v[1]), "one settlement per order");
    assert_eq!(replays, CALLS, "every second settle of an order is a replay");
    let refused = merchant.settle(&tokens[0], 5_000, "c-0", None).await.unwrap_err();
    let single = w.merchant.settle(&tokens[0], 5_000, "c-0", None).await.unwrap_err();
    assert_eq!(refused.code(), single.code(), "a refusal is the single call's refusal");
    let balance = u64::try_from(w.buyer.me().await.unwrap().balance_minor.unwrap()).unwrap();
    assert_eq!(balance, FUNDS - CALLS as u64 * 100);
    let metrics = w.r.http.get(format!("{}/metrics", w.r.url)).send().await.unwrap().text().await.unwrap();
    assert_eq!(requests(&metrics, "/v1/settlements"), 1.0, "only the single refusal went alone");
}

/// Requests answered on `route`, from a `/metrics` text.
fn requests(metrics: &str, route: &str) -> f64 {
    metrics
        .lines()
        .filter(|l| l.starts_with("bazaar_http_requests_total") && l.contains(&format!("route=\"{route}\"")))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

/// Cases of the model test run with the batched side on PostgreSQL (each case a fresh schema).
const POSTGRES_CASES: u32 = 12;

proptest! {
    #![proptest_config(ProptestConfig { cases: POSTGRES_CASES, failure_persistence: None, ..ProptestConfig::default() })]

    /// The same model with the batched registry on PostgreSQL and the single calls on the embedded store: a
    /// batch on PostgreSQL answers exactly as single calls on SQLite.
    #[test]
    fn on_postgres_any_mix_of_single_and_batched_calls_answers_exactly_as_single_calls(steps in steps()) {
        // A database per case, dropped after it (the runtime, and so the store's connections, go first).
        let database = bazaar_postgres_testing::ThrowawayDatabase::create("bazaar_batch");
        let schema = database.fresh_schema();
        let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
        runtime.block_on(async {
            let a = world_on(common::registry_on_postgres(&schema).await).await;
            run_on(a, steps).await
        })?;
    }
}

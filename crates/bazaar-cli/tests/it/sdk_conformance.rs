//! One contract, three SDKs: the language-neutral scenario in `clients/conformance/scenario.json` run by each
//! SDK's driver — Rust (here, in-process, over `bazaar-sdk`), Python (`clients/python/conformance/driver.py`)
//! and TypeScript (`clients/typescript/conformance/driver.mjs`) — against a real `bazaar serve`, on the embedded
//! store and on PostgreSQL. Each driver serves its SDK's merchant middleware and reports what it observed;
//! every expectation lives once, in the scenario, and is checked here. The constants each SDK declares are
//! checked against `clients/conformance/contract.json`.

use crate::common;

use axum::routing::post;
use axum::{Extension, Json, Router};
use bazaar_cli::wire_json;
use bazaar_sdk::paid::{paid, FaultPoint, PaidRoute, Settled};
use bazaar_sdk::{generate_key, Body, Client, SdkError};
use serde_json::{json, Value};
use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

fn conformance_dir() -> PathBuf {
    common::repo_root().join("clients/conformance")
}

fn read_json(path: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

/// A fresh cast for one SDK's run on the registry at `url`: a funded buyer, a buyer with a small per-call
/// ceiling, a merchant and another merchant.
async fn world(url: &str, operator: &Client, sdk: &str, scenario: &Value, dir: &Path) -> Value {
    let funds = scenario["world"]["funds_minor"].as_u64().unwrap();
    let enroll = |role: &'static str| async move {
        let handle = format!("{sdk}-{}", role.replace('_', "-"));
        let owner = operator.create_owner(&generate_key(), &format!("{handle}-owner")).await.unwrap();
        let owner = operator.with_credential(owner.credential.as_str());
        let invite = owner.issue_invite().await.unwrap();
        let agent = operator.with_credential("").redeem_invite(&invite, &generate_key(), &handle).await.unwrap();
        (owner, handle, agent.credential.clone())
    };
    let mut parties = serde_json::Map::new();
    for role in ["buyer", "poor_buyer"] {
        let (owner, handle, credential) = enroll(role).await;
        let owner_id = wire_json(&owner.me().await.unwrap())["member"]["id"].as_str().unwrap().to_string();
        operator.mint(&owner_id, funds, &format!("{handle}-mint")).await.unwrap();
        owner.fund(&handle, funds, &format!("{handle}-fund")).await.unwrap();
        let per_call =
            if role == "poor_buyer" { scenario["world"]["poor_per_call_max_minor"].as_u64().unwrap() } else { funds };
        owner.set_budget(&handle, per_call, funds, funds).await.unwrap();
        parties.insert(role.into(), json!(credential));
    }
    for role in ["merchant", "other_merchant", "revocable"] {
        let (_, _, credential) = enroll(role).await;
        let did = wire_json(&operator.with_credential(credential.clone()).me().await.unwrap())["member"]["id"].clone();
        parties.insert(role.into(), json!(credential));
        parties.insert(format!("{role}_did"), did);
    }
    // For the SDK's own enrolment: an invite drawn by an owner, and what the Rust SDK makes of a fixed key.
    let inviter = wire_json(&operator.create_owner(&generate_key(), &format!("{sdk}-inviter")).await.unwrap());
    let invite = operator.with_credential(inviter["credential"].as_str().unwrap()).issue_invite().await.unwrap();
    parties.insert("invite".into(), json!(invite));
    parties.insert("invite_owner".into(), inviter["id"].clone());
    parties.insert("joiner_handle".into(), json!(format!("{sdk}-joiner")));
    parties.insert("key_vector".into(), key_vector());
    let threshold = wire_json(&operator.well_known().await.unwrap())["escrow_threshold_minor"].as_u64().unwrap();
    let mut world = Value::Object(parties);
    world["registry"] = json!(url);
    world["dead_node"] = json!(dead_node());
    world["price_minor"] = scenario["world"]["price_minor"].clone();
    world["escrow_price_minor"] = json!(threshold + 1);
    world["work_dir"] = json!(dir.display().to_string());
    world
}

/// A URL on this machine where nothing listens: a port bound and let go, so a connection to it is refused.
fn dead_node() -> String {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    drop(listener);
    format!("http://127.0.0.1:{port}")
}

/// A fixed key as the Rust SDK sees it — its public key, DID and invite proof — for the other SDKs to match.
fn key_vector() -> Value {
    use base64::Engine;
    use ed25519_dalek::Signer;
    let seed = [7u8; 32];
    let key = ed25519_dalek::SigningKey::from_bytes(&seed);
    let (invite_code, handle) = ("inv_vector", "vector-agent");
    let statement = format!("bazaar-invite-v1\n{invite_code}\n{handle}");
    let proof = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(key.sign(statement.as_bytes()).to_bytes());
    json!({"seed_hex": hex::encode(seed), "public_key_hex": hex::encode(key.verifying_key().as_bytes()),
        "did": bazaar_sdk::did_of(&key), "invite_code": invite_code, "handle": handle, "proof": proof})
}

/// What the contract says each SDK's constants are.
fn contract_constants(contract: &Value) -> Value {
    json!({
        "headers": contract["headers"],
        "retry_attempts_max": contract["retry"]["attempts_max"],
        "retry_base_ms": contract["retry"]["base_ms"],
        "token_renew_margin_ms": contract["token_renew_margin_ms"],
        "work_receipt_bytes_max": contract["work_receipt_bytes_max"],
        "work_receipt_retention_s": contract["work_receipt_retention_s"],
        "work_receipt_prune_every": contract["work_receipt_prune_every"],
        "escrow_due_s": contract["escrow"]["due_s"],
        "merchant_unauthenticated": contract["merchant_refusals"]["merchant_unauthenticated"],
        "merchant_credential_invalid": contract["merchant_credential"]["code"],
        "void_on_codes": contract["buyer"]["void_on_codes"],
        "coalesce_items_max": contract["coalesce"]["items_max"],
        "coalesce_in_flight_max": contract["coalesce"]["in_flight_max"],
    })
}

/// Every step observed as the scenario expects; the constants as the contract says.
fn check(report: &Value, scenario: &Value, contract: &Value) {
    let sdk = report["sdk"].as_str().unwrap_or("?");
    let steps = scenario["steps"].as_array().unwrap();
    let seen = report["steps"].as_array().unwrap_or_else(|| panic!("{sdk}: no steps reported: {report}"));
    assert_eq!(seen.len(), steps.len(), "{sdk}: every step reported: {report}");
    for (step, seen) in steps.iter().zip(seen) {
        let name = step["name"].as_str().unwrap();
        assert_eq!(seen["name"], name, "{sdk}: steps in order");
        let observed = &seen["observed"];
        if step["op"] == "constants" {
            let mut constants = observed.clone();
            constants.as_object_mut().unwrap().remove("work_runs");
            assert_eq!(constants, contract_constants(contract), "{sdk}: its constants are the contract's");
            continue;
        }
        for (key, expected) in step["expect"].as_object().unwrap() {
            assert_eq!(&observed[key], expected, "{sdk}: {name}: `{key}` in {observed}");
        }
    }
}

// ---- the Rust driver ---------------------------------------------------------------------------

struct Shop {
    url: String,
    runs: Arc<AtomicU64>,
    faults: Arc<Mutex<Vec<(String, FaultPoint)>>>,
    /// The price /work charges now, and its route per price (one made on first use).
    price: Arc<AtomicU64>,
    routes: Arc<Mutex<std::collections::HashMap<u64, Arc<PaidRoute>>>>,
    merchant: Client,
    receipts: PathBuf,
}

impl Shop {
    /// From now on /work charges `price` (the route at that price, made the first time it is asked for).
    fn charge(&self, price: u64) {
        let mut routes = self.routes.lock().unwrap();
        routes.entry(price).or_insert_with(|| {
            let receipts = self.receipts.with_extension(format!("{price}.db"));
            Arc::new(PaidRoute::new(self.merchant.clone(), price, &receipts).unwrap())
        });
        self.price.store(price, Ordering::SeqCst);
    }
}

/// The Rust middleware serving /work for `who` (a merchant in the world), counting its runs in `runs`.
async fn rust_shop(world: &Value, dir: &Path, who: &str, runs: Arc<AtomicU64>) -> Shop {
    let faults: Arc<Mutex<Vec<(String, FaultPoint)>>> = Arc::default();
    let fired: Arc<Mutex<HashSet<String>>> = Arc::default();
    let merchant = Client::new(world["registry"].as_str().unwrap(), world[who].as_str().map(str::to_string));
    let (armed, seen) = (faults.clone(), fired.clone());
    let hook = Arc::new(move |point: FaultPoint, order: &str| {
        let hit = armed.lock().unwrap().iter().any(|(o, p)| o == order && *p == point);
        hit && seen.lock().unwrap().insert(order.to_string())
    });
    let price = world["price_minor"].as_u64().unwrap();
    let receipts = dir.join(format!("rust-{who}-receipts.db"));
    let route = PaidRoute::new(merchant.clone(), price, &receipts).unwrap().with_fault(hook);
    let routes = Arc::new(Mutex::new(std::collections::HashMap::from([(price, Arc::new(route))])));
    let charging = Arc::new(AtomicU64::new(price));
    let (current, by_price) = (charging.clone(), routes.clone());
    let counter = runs.clone();
    let app = Router::new()
        .route(
            "/work",
            post(move |Extension(settled): Extension<Settled>| {
                let run = counter.fetch_add(1, Ordering::SeqCst) + 1;
                async move { Json(json!({"order": settled.order_id, "run": run, "settlement": settled.settlement_id})) }
            }),
        )
        .route_layer(axum::middleware::from_fn(
            move |request: axum::extract::Request, next: axum::middleware::Next| {
                let route = by_price.lock().unwrap()[&current.load(Ordering::SeqCst)].clone();
                paid(axum::extract::State(route), request, next)
            },
        ));
    let url = bazaar_stage::serve(app).await.unwrap();
    Shop { url: format!("{url}/work"), runs, faults, price: charging, routes, merchant, receipts }
}

fn refusal(error: SdkError) -> Value {
    json!({"status": error.status(), "code": error.code(), "price_minor": error.price_minor()})
}

/// The scenario's `pay` op: a paid call (its token's amount, merchant and shop, and the shop's price, as `args`
/// say, else the world's), with the buyer's holds and balance before and after.
async fn rust_pay(buyer: &Client, world: &Value, shops: (&Shop, &Shop), args: &Value) -> Value {
    let order = args["order"].as_str().unwrap_or_default();
    if let Some(point) = args["fault"].as_str() {
        let point = if point == "after_settle" { FaultPoint::AfterSettle } else { FaultPoint::BeforeAnswer };
        shops.0.faults.lock().unwrap().push((order.to_string(), point));
    }
    let shop = if args["shop"] == "revocable" { shops.1 } else { shops.0 };
    let merchant = world
        [args["to"].as_str().unwrap_or(if args["shop"] == "revocable" { "revocable_did" } else { "merchant_did" })]
    .as_str()
    .unwrap();
    let amount = args["amount"].as_u64().unwrap_or(world["price_minor"].as_u64().unwrap());
    shop.charge(args["price"].as_u64().unwrap_or(world["price_minor"].as_u64().unwrap()));
    let before = buyer.me().await.map(|me| wire_json(&me)).unwrap_or_default();
    let paid = buyer.pay(&shop.url, merchant, amount, order).await.and_then(|paid| paid.error_for_refusal());
    shop.charge(world["price_minor"].as_u64().unwrap());
    let mut observed = match paid {
        Ok(paid) => json!({"status": paid.status, "replayed": paid.replayed, "settled": paid.settlement.is_some(),
            "retried": paid.attempts > 1, "token": paid.token, "raised": false}),
        Err(error) => {
            let mut seen = refusal(error);
            seen["raised"] = json!(true);
            seen
        }
    };
    let after = buyer.me().await.map(|me| wire_json(&me)).unwrap_or_default();
    observed["held_released"] = json!(after["held_minor"] == before["held_minor"]);
    observed["charged_minor"] =
        json!(before["balance_minor"].as_i64().unwrap_or(0) - after["balance_minor"].as_i64().unwrap_or(0));
    observed
}

/// The scenario's `merchant_start` op: which credentials a paid route refuses to be made with, and the code.
fn rust_merchant_start(world: &Value, dir: &Path, args: &Value) -> Value {
    let mut code = Value::Null;
    let refused: Vec<bool> = args["credentials"]
        .as_array()
        .unwrap()
        .iter()
        .map(|given| {
            let credential = if given == "@merchant" { world["merchant"].as_str() } else { given.as_str() };
            let client = Client::new(world["registry"].as_str().unwrap(), credential.map(str::to_string));
            match PaidRoute::new(client, 1, &dir.join("rust-start-receipts.db")) {
                Ok(_) => false,
                Err(error) => {
                    if code.is_null() {
                        code = json!(error.code());
                    }
                    true
                }
            }
        })
        .collect();
    json!({"refused": refused, "code": code})
}

/// The scenario's `enrol` op: a key made here, saved and read back, an invite redeemed with it and rotated, and
/// the world's fixed key seen the same way.
async fn rust_enrol(world: &Value, dir: &Path) -> Result<Value, SdkError> {
    use std::os::unix::fs::PermissionsExt;
    let registry = world["registry"].as_str().unwrap();
    let key = generate_key();
    let file = dir.join("rust-joiner.key");
    bazaar_sdk::save_key(&key, &file).unwrap();
    let mode = format!("{:o}", std::fs::metadata(&file).unwrap().permissions().mode() & 0o777);
    let round_trips = bazaar_sdk::load_key(&file).map(|k| k.to_bytes() == key.to_bytes()).unwrap_or(false);
    let handle = world["joiner_handle"].as_str().unwrap();
    let joined =
        wire_json(&Client::new(registry, None).redeem_invite(world["invite"].as_str().unwrap(), &key, handle).await?);
    let credential = joined["credential"].as_str().unwrap().to_string();
    let me = wire_json(&Client::new(registry, Some(credential.clone())).me().await?);
    let vector = &world["key_vector"];
    let seed: [u8; 32] = hex::decode(vector["seed_hex"].as_str().unwrap()).unwrap().try_into().unwrap();
    let fixed = ed25519_dalek::SigningKey::from_bytes(&seed);
    let same = bazaar_sdk::did_of(&fixed) == vector["did"]
        && hex::encode(fixed.verifying_key().as_bytes()) == vector["public_key_hex"];
    Ok(json!({"enrolled_as_key": me["member"]["id"] == bazaar_sdk::did_of(&key), "kind": me["member"]["kind"],
        "owner_is_inviter": me["member"]["owner"] == world["invite_owner"],
        "credential_rotated": credential.starts_with("bzc_"), "key_file_mode": mode,
        "key_file_round_trips": round_trips, "same_key_proof_and_did_as_rust": same}))
}

const MONEY_ROUTES: [&str; 4] = ["/v1/tokens", "/v1/tokens/batch", "/v1/settlements", "/v1/settlements/batch"];

/// Requests the registry has answered on each money route, from its /metrics.
async fn requests_served(registry: &str) -> std::collections::HashMap<&'static str, u64> {
    let text = reqwest::get(format!("{registry}/metrics")).await.unwrap().text().await.unwrap();
    let mut counts: std::collections::HashMap<&'static str, u64> = MONEY_ROUTES.iter().map(|r| (*r, 0)).collect();
    for line in text.lines().filter_map(|line| line.strip_prefix("bazaar_http_requests_total{route=\"")) {
        let (route, rest) = line.split_once('"').unwrap_or_default();
        if let Some(count) = counts.get_mut(route) {
            *count += rest.rsplit(' ').next().and_then(|n| n.parse::<f64>().ok()).unwrap_or(0.0) as u64;
        }
    }
    counts
}

/// The scenario's `batch` op: tokens, settlements and replays all at once from coalescing clients.
async fn rust_batch(
    buyer: &Client,
    merchant: &Client,
    world: &Value,
    shop: &Shop,
    args: &Value,
) -> Result<Value, SdkError> {
    use futures::future::join_all;
    let registry = world["registry"].as_str().unwrap();
    let (price, merchant_did) = (world["price_minor"].as_u64().unwrap(), world["merchant_did"].as_str().unwrap());
    let prefix = args["prefix"].as_str().unwrap();
    let mut orders: Vec<String> = (1..=args["orders"].as_u64().unwrap()).map(|i| format!("{prefix}{i}")).collect();
    orders.push(format!("{prefix}over"));
    let before = requests_served(registry).await;
    let purse_before = wire_json(&buyer.me().await?);
    let (buying, selling) = (buyer.coalescing(), merchant.coalescing());
    let issued = join_all(orders.iter().map(|order| buying.issue_token(merchant_did, price, order, &shop.url))).await;
    let ok: Vec<_> = issued.iter().filter_map(|answer| answer.as_ref().ok()).collect();
    let tokens: Vec<String> =
        issued.iter().map(|answer| answer.as_ref().map(|a| a.body.token.clone()).unwrap_or_default()).collect();
    let last = orders.len() - 1;
    let settled = join_all(orders.iter().zip(&tokens).enumerate().map(|(at, (order, token))| {
        let amount = if at == last { price + 1 } else { price };
        selling.settle(token, amount, order, None)
    }))
    .await;
    let again =
        join_all(orders.iter().zip(&tokens).take(2).map(|(order, token)| selling.settle(token, price, order, None)))
            .await;
    if let Ok(extra) = &issued[last] {
        buyer.void(&extra.body.jti).await?;
    }
    let purse_after = wire_json(&buyer.me().await?);
    let after = requests_served(registry).await;
    let calls = (issued.len() + settled.len() + again.len()) as u64;
    let batches: u64 = MONEY_ROUTES.iter().filter(|r| r.ends_with("/batch")).map(|r| after[r] - before[r]).sum();
    let again_replayed = settled.iter().zip(&again).all(|(first, second)| match (first, second) {
        (Ok(first), Ok(second)) => {
            second.replayed && second.body.settlement.settlement_id == first.body.settlement.settlement_id
        }
        _ => false,
    });
    let single_calls: u64 = ["/v1/tokens", "/v1/settlements"].iter().map(|r| after[r] - before[r]).sum();
    Ok(json!({
        "issued": ok.len(),
        "distinct_tokens": ok.iter().map(|answer| answer.body.jti.clone()).collect::<HashSet<_>>().len(),
        "settled": settled[..last].iter().filter(|answer| answer.is_ok()).count(),
        "refused_code": settled[last].as_ref().err().and_then(SdkError::code),
        "again_replayed": again_replayed,
        "charged_minor": purse_before["balance_minor"].as_i64().unwrap_or(0) - purse_after["balance_minor"].as_i64().unwrap_or(0),
        "held_released": purse_after["held_minor"] == purse_before["held_minor"],
        "single_calls": single_calls,
        "batched": batches > 0 && batches < calls,
    }))
}

async fn raw(shop: &Shop, payment: Option<&str>) -> Value {
    let mut request = reqwest::Client::new().post(&shop.url);
    if let Some(payment) = payment {
        request = request.header(bazaar_sdk::PAYMENT_HEADER, payment);
    }
    let response = request.send().await.unwrap();
    let status = response.status().as_u16();
    let replayed = response.headers().get(bazaar_sdk::WORK_RECEIPT_HEADER).is_some();
    let body: Value = response.json().await.unwrap_or(Value::Null);
    let mut seen = json!({"status": status, "replayed": replayed});
    if status >= 400 {
        seen["code"] = body["code"].clone();
    }
    seen
}

/// Runs the scenario with the Rust SDK; the report in the drivers' shape.
#[allow(clippy::too_many_lines)] // reason: one arm per scenario op, read side by side with the other drivers.
async fn rust_driver(world: &Value, scenario: &Value) -> Value {
    let dir = PathBuf::from(world["work_dir"].as_str().unwrap());
    let registry = world["registry"].as_str().unwrap();
    let as_ = |who: &str| Client::new(registry, Some(world[who].as_str().unwrap_or("not-a-credential").to_string()));
    let (buyer, merchant) = (as_("buyer"), as_("merchant"));
    let shop = rust_shop(world, &dir, "merchant", Arc::default()).await;
    let revocable = rust_shop(world, &dir, "revocable", shop.runs.clone()).await;
    let merchant_did = world["merchant_did"].as_str().unwrap();
    let price = world["price_minor"].as_u64().unwrap();
    let escrow_price = world["escrow_price_minor"].as_u64().unwrap();
    let mut last_token = String::new();
    let mut contracts = std::collections::HashMap::<String, String>::new();
    let mut steps = Vec::new();
    for step in scenario["steps"].as_array().unwrap() {
        let args = &step["args"];
        let order = args["order"].as_str().unwrap_or_default();
        let result: Result<Value, SdkError> = async {
            Ok(match step["op"].as_str().unwrap() {
                "constants" => json!({
                    "headers": {"payment": bazaar_sdk::PAYMENT_HEADER, "settlement": bazaar_sdk::SETTLEMENT_HEADER,
                        "work_receipt": bazaar_sdk::WORK_RECEIPT_HEADER, "idempotency_key": "idempotency-key",
                        "idempotent_replayed": "idempotent-replayed",
                        "x402_payment_required": bazaar_sdk::paid::PAYMENT_REQUIRED,
                        "x402_payment_signature": bazaar_sdk::paid::PAYMENT_SIGNATURE,
                        "x402_payment_response": bazaar_sdk::paid::PAYMENT_RESPONSE},
                    "retry_attempts_max": bazaar_sdk::client::PAY_ATTEMPTS_MAX,
                    "retry_base_ms": bazaar_sdk::client::RETRY_BASE_MS,
                    "token_renew_margin_ms": bazaar_sdk::client::TOKEN_RENEW_MARGIN_MS,
                    "work_receipt_bytes_max": bazaar_types::limits::WORK_RECEIPT_BYTES_MAX,
                    "work_receipt_retention_s": bazaar_types::limits::WORK_RECEIPT_RETENTION_S,
                    "work_receipt_prune_every": bazaar_types::limits::WORK_RECEIPT_PRUNE_EVERY,
                    "escrow_due_s": bazaar_sdk::client::ESCROW_DUE_S,
                    "merchant_unauthenticated": [bazaar_sdk::paid::MERCHANT_UNAUTHENTICATED_STATUS.as_u16(),
                        bazaar_sdk::paid::MERCHANT_UNAUTHENTICATED],
                    "merchant_credential_invalid": bazaar_sdk::paid::MERCHANT_CREDENTIAL_INVALID,
                    "void_on_codes": bazaar_sdk::client::VOID_ON_CODES,
                    "coalesce_items_max": bazaar_sdk::coalesce::COALESCE_ITEMS_MAX,
                    "coalesce_in_flight_max": bazaar_sdk::coalesce::COALESCE_IN_FLIGHT_MAX,
                }),
                "pay" => {
                    let mut observed = rust_pay(&buyer, world, (&shop, &revocable), args).await;
                    if let Some(token) = observed.as_object_mut().and_then(|o| o.remove("token")) {
                        observed["same_token"] = json!(token == last_token.as_str());
                        last_token = token.as_str().unwrap_or_default().to_string();
                    }
                    observed
                }
                "merchant_start" => rust_merchant_start(world, &dir, args),
                "enrol" => rust_enrol(world, &dir).await?,
                "revoke_merchant" => {
                    as_("revocable").revoke_credential().await?;
                    json!({"status": 200})
                }
                "verify_last" => {
                    let verified = wire_json(&buyer.verify(&last_token).await?);
                    json!({"genuine": verified["genuine"], "state": verified["state"], "work_order": verified["work_order"]})
                }
                "settle_last" => {
                    let order = bazaar_sdk::token::claims_unverified(&last_token).map(|claims| claims.ord).unwrap_or_default();
                    merchant.settle(&last_token, price, &order, args["key"].as_str()).await?;
                    json!({"status": 200})
                }
                "replay_last" => raw(&shop, Some(&last_token)).await,
                "merchant_raw" => raw(&shop, args["payment"].as_str()).await,
                "merchant_tampered" => {
                    let issued = buyer.issue_token(merchant_did, price, order, &shop.url).await?;
                    let token = issued.body.token.clone();
                    let (body, signature) = token.rsplit_once('.').unwrap();
                    let first = if signature.starts_with('A') { "B" } else { "A" };
                    raw(&shop, Some(&format!("{body}.{first}{}", &signature[1..]))).await
                }
                "purchase" => match buyer.purchase(&shop.url, merchant_did, escrow_price, order).await? {
                    bazaar_sdk::client::Purchase::Escrowed(contract) => {
                        let id = contract.id.clone();
                        let same = contracts.get(order) == Some(&id);
                        contracts.entry(order.to_string()).or_insert(id);
                        json!({"escrowed": true, "state": contract.state, "same_contract": same})
                    }
                    bazaar_sdk::client::Purchase::Paid(_) => json!({"escrowed": false}),
                },
                "token" => {
                    let who = as_(args["as"].as_str().unwrap_or("buyer"));
                    let amount = if args["amount"] == "escrow" { escrow_price } else { args["amount"].as_u64().unwrap() };
                    who.issue_token(merchant_did, amount, order, &shop.url).await?;
                    json!({"status": 200})
                }
                "token_then_settle" => {
                    let issued = buyer.issue_token(merchant_did, args["amount"].as_u64().unwrap(), order, &shop.url).await?;
                    if args["void_first"] == true {
                        buyer.void(&issued.body.jti).await?;
                    }
                    let settler = as_(args["by"].as_str().unwrap_or("merchant"));
                    let token = issued.body.token.as_str();
                    let settle_order = args["settle_order"].as_str().unwrap_or(order);
                    settler.settle(token, args["settle"].as_u64().unwrap(), settle_order, None).await?;
                    json!({"status": 200})
                }
                "me" => {
                    as_(args["as"].as_str().unwrap()).me().await?;
                    json!({"status": 200})
                }
                "token_twice_with_key" => {
                    let key = args["key"].as_str();
                    for order in ["k-1", "k-2"] {
                        let body = json!({"merchant": merchant_did, "max_amount_minor": price, "order_id": order,
                            "resource": shop.url});
                        buyer.call::<Value>(reqwest::Method::POST, "/v1/tokens", Some(Body::json(body)), key).await?;
                    }
                    json!({"status": 200})
                }
                "expired_settle" => {
                    let ttl = args["ttl_s"].as_u64().unwrap();
                    let body = json!({"merchant": merchant_did, "max_amount_minor": price, "order_id": order,
                        "resource": shop.url, "ttl_s": ttl});
                    let issued = buyer.call::<Value>(reqwest::Method::POST, "/v1/tokens", Some(Body::json(body)), None).await?;
                    tokio::time::sleep(std::time::Duration::from_millis(ttl * 1000 + 1500)).await;
                    merchant.settle(issued.body["token"].as_str().unwrap(), price, order, None).await?;
                    json!({"status": 200})
                }
                "balance" => json!({"balance_minor": wire_json(&buyer.me().await?)["balance_minor"]}),
                "failover" => {
                    let nodes = vec![world["dead_node"].as_str().unwrap().to_string(), registry.to_string()];
                    let spread = Client::with_nodes(nodes, world["buyer"].as_str().map(str::to_string));
                    spread.me().await?;
                    let mut observed = rust_pay(&spread, world, (&shop, &revocable), args).await;
                    observed["read"] = json!(200);
                    observed["moved_on"] = json!(spread.base() == registry);
                    observed
                }
                "batch" => rust_batch(&buyer, &merchant, world, &shop, args).await?,
                other => json!({"unsupported_op": other}),
            })
        }
        .await;
        let mut observed = result.unwrap_or_else(refusal);
        observed["work_runs"] = json!(shop.runs.load(Ordering::SeqCst));
        steps.push(json!({"name": step["name"], "observed": observed}));
    }
    json!({"sdk": "rust", "steps": steps})
}

// ---- the other languages' drivers ---------------------------------------------------------------

/// An SDK's driver program: how to start it, and what to run if it is missing.
struct Driver {
    program: PathBuf,
    args: Vec<PathBuf>,
    fix: &'static str,
}

const TYPESCRIPT_FIX: &str = "run ./scripts/test once (it runs `npm ci` and builds clients/typescript)";
const PYTHON_FIX: &str = "run ./scripts/test once (it makes clients/python/.venv with the SDK installed)";

impl Driver {
    /// `clients/python/conformance/<script>` in the SDK's venv.
    fn python(script: &str) -> Driver {
        let root = common::repo_root();
        let script = root.join("clients/python/conformance").join(script);
        Driver { program: root.join("clients/python/.venv/bin/python"), args: vec![script], fix: PYTHON_FIX }
    }

    /// `clients/typescript/conformance/<script>` on Node (`bun: false`) or on Bun, against the built package.
    fn typescript(script: &str, bun: bool) -> Driver {
        let root = common::repo_root();
        let dist = root.join("clients/typescript/dist/index.js");
        assert!(dist.exists(), "{} is missing: {TYPESCRIPT_FIX}", dist.display());
        let script = root.join("clients/typescript/conformance").join(script);
        let (program, args) = match bun {
            true => (root.join("clients/typescript/node_modules/.bin/bun"), vec![script]),
            false => (PathBuf::from("/usr/bin/env"), vec!["node".into(), script]),
        };
        Driver { program, args, fix: TYPESCRIPT_FIX }
    }

    /// Runs the driver on `world` (written to a file it is given first) and then `more`; its one-line JSON report.
    async fn run(self, world: &Value, dir: &Path, more: &[PathBuf]) -> Value {
        assert!(self.program.exists(), "{} is missing: {}", self.program.display(), self.fix);
        let world_file = dir.join(format!("world-{}.json", world["sdk"].as_str().unwrap_or("x")));
        std::fs::write(&world_file, world.to_string()).unwrap();
        let mut command = Command::new(&self.program);
        command.args(&self.args).arg(&world_file).args(more);
        let output = tokio::task::spawn_blocking(move || command.output().unwrap()).await.unwrap();
        let stdout = String::from_utf8_lossy(&output.stdout).to_string();
        let stderr = String::from_utf8_lossy(&output.stderr).to_string();
        let line = stdout.lines().last().unwrap_or_default();
        serde_json::from_str(line)
            .unwrap_or_else(|_| panic!("{}: no report. stdout: {stdout}\nstderr: {stderr}", self.program.display()))
    }
}

/// Every SDK's run on `served`: Rust in-process, then Python, TypeScript on Node and the same package on Bun
/// (its receipts on bun:sqlite), each with a fresh cast.
async fn every_sdk(served: &Served, dir: &Path) {
    let scenario = read_json(&conformance_dir().join("scenario.json"));
    let contract = read_json(&conformance_dir().join("contract.json"));
    let rust_world = world(&served.url, &served.operator, "rust", &scenario, dir).await;
    check(&rust_driver(&rust_world, &scenario).await, &scenario, &contract);
    let drivers = [
        ("python", Driver::python("driver.py")),
        ("typescript", Driver::typescript("driver.mjs", false)),
        ("bun", Driver::typescript("driver.mjs", true)),
    ];
    for (sdk, driver) in drivers {
        let world = served.world(sdk, &scenario, dir).await;
        check(&driver.run(&world, dir, &[conformance_dir().join("scenario.json")]).await, &scenario, &contract);
    }
}

/// A real `bazaar serve` for these tests, with its operator.
struct Served {
    server: std::process::Child,
    url: String,
    operator: Client,
}

impl Served {
    /// On the embedded store in `dir/data`, or on PostgreSQL at `database_url` (its key in `dir/data`).
    fn start(dir: &Path, database_url: Option<&str>) -> Served {
        let port = common::free_port();
        let mut args: Vec<String> =
            ["--port", &port.to_string(), "--operator-credential", "sdk-op"].map(String::from).to_vec();
        if let Some(url) = database_url {
            args.extend(["--database-url".to_string(), url.to_string()]);
        }
        args.extend(["--data-dir".to_string(), dir.join("data").display().to_string()]);
        let url = format!("http://127.0.0.1:{port}");
        Served { server: common::spawn_serve(&args), operator: Client::new(&url, Some("sdk-op".into())), url }
    }

    /// A fresh cast named for `sdk`, with `sdk` in the world (drivers name their files after it).
    async fn world(&self, sdk: &str, scenario: &Value, dir: &Path) -> Value {
        let mut world = world(&self.url, &self.operator, sdk, scenario, dir).await;
        world["sdk"] = json!(sdk);
        world
    }

    fn stop(self) {
        drop(self);
    }
}

/// A failed assertion unwinds past `stop`: the server goes anyway, so it cannot hold the next run's database.
impl Drop for Served {
    fn drop(&mut self) {
        self.server.kill().ok();
        self.server.wait().ok();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_sdk_passes_the_scenario_against_bazaar_serve_on_the_embedded_store() {
    let dir = common::fresh_dir("bazaar-sdk-conformance");
    let served = Served::start(&dir, None);
    every_sdk(&served, &dir).await;
    served.stop();
    std::fs::remove_dir_all(&dir).ok();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_sdk_passes_the_scenario_against_bazaar_serve_on_postgres() {
    let database = common::ThrowawayDatabase::create("bazaar_sdk_conformance").await;
    let dir = common::fresh_dir("bazaar-sdk-conformance-pg");
    let served = Served::start(&dir, Some(&database.url));
    every_sdk(&served, &dir).await;
    served.stop();
    database.drop().await;
    std::fs::remove_dir_all(&dir).ok();
}

/// Settlements on the ledger for orders starting with `prefix`: how many, and how many distinct orders.
async fn settlements_of(operator: &Client, prefix: &str) -> (usize, usize) {
    let (mut after, mut total, mut orders) = (0u64, 0usize, HashSet::new());
    loop {
        let page = wire_json(&operator.events(after, 500).await.unwrap());
        let events = page["events"].as_array().unwrap().clone();
        for event in &events {
            let order = event["body"]["order_id"].as_str().unwrap_or_default();
            if event["kind"] == "settlement.posted" && order.starts_with(prefix) {
                total += 1;
                orders.insert(order.to_string());
            }
        }
        match page["next_after"].as_u64() {
            Some(next) if !events.is_empty() => after = next,
            _ => return (total, orders.len()),
        }
    }
}

/// Per language, the hundred paid calls with real crashes (`clients/python/conformance/hundred.py`,
/// `clients/typescript/conformance/hundred.mjs`): a buyer process killed mid-request whose order is re-sent five
/// times, a merchant process killed after settling and before answering (twice, started again by the buyer);
/// the merchant's work counter ends at exactly 100 and the ledger shows one settlement (one debit) per order.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hundred_paid_calls_with_crashes_are_charged_once_and_worked_once_in_python_and_typescript() {
    let dir = common::fresh_dir("bazaar-sdk-hundred");
    let served = Served::start(&dir, None);
    let scenario = read_json(&conformance_dir().join("scenario.json"));
    let (funds, price) =
        (scenario["world"]["funds_minor"].as_u64().unwrap(), scenario["world"]["price_minor"].as_u64().unwrap());
    let runs = [
        ("pyh", "py-hundred-", Driver::python("hundred.py")),
        ("tsh", "ts-hundred-", Driver::typescript("hundred.mjs", false)),
    ];
    for (tag, prefix, driver) in runs {
        let world = served.world(tag, &scenario, &dir).await;
        let report = driver.run(&world, &dir, &[]).await;
        assert_eq!(
            (report["work_runs"].as_u64(), report["distinct_work_orders"].as_u64()),
            (Some(100), Some(100)),
            "{report}"
        );
        assert!(report["merchant_starts"].as_u64().unwrap() >= 3, "killed twice and started again: {report}");
        assert_eq!(report["sends_of_crashed_order"], 6, "{report}");
        assert!(
            report["replayed_answers"].as_u64().unwrap() >= 5,
            "the re-sends were answered from the receipt: {report}"
        );
        assert_eq!(report["balance_minor"].as_u64(), Some(funds - 100 * price), "charged once per order: {report}");
        assert_eq!(
            settlements_of(&served.operator, prefix).await,
            (100, 100),
            "{tag}: one settlement per order on the ledger"
        );
    }
    served.stop();
    std::fs::remove_dir_all(&dir).ok();
}

/// The Python SDK's x402 route helper and MCP tool helper (`clients/python/conformance/helpers.py`) against a
/// real `bazaar serve`: an x402 offer, a paid call answered with `PAYMENT-RESPONSE`, the same signature answered
/// from the receipt (worked once), a token for another resource refused; a paid MCP tool called by the `mcp`
/// package's client over streamable HTTP twice with one token (worked once) and with a forged token (a tool error
/// with the refusal's code).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_python_x402_route_and_paid_mcp_tool_settle_once_and_work_once() {
    let dir = common::fresh_dir("bazaar-sdk-helpers");
    let served = Served::start(&dir, None);
    let scenario = read_json(&conformance_dir().join("scenario.json"));
    let world = served.world("pyx", &scenario, &dir).await;
    let report = Driver::python("helpers.py").run(&world, &dir, &[]).await;
    let x402 = &report["x402"];
    assert_eq!((x402["unpaid_status"].as_u64(), x402["offer_scheme"].as_str()), (Some(402), Some("apt")), "{report}");
    assert_eq!(x402["offer_network_is_bazaar"], true, "{report}");
    assert_eq!((x402["paid_status"].as_u64(), x402["payment_response"]["success"].as_bool()), (Some(200), Some(true)));
    assert!(x402["payment_response"]["transaction"].as_str().unwrap().starts_with("stl_"), "{report}");
    assert_eq!((x402["again_status"].as_u64(), x402["again_replayed"].as_bool()), (Some(200), Some(true)), "{report}");
    assert_eq!(
        (x402["wrong_resource_status"].as_u64(), x402["wrong_resource_error"].as_str()),
        (Some(402), Some("wrong_resource"))
    );
    assert_eq!(x402["work_runs"], 1, "{report}");
    let mcp = &report["mcp"];
    assert_eq!(mcp["parameters"], json!(["payment_token", "text"]), "{report}");
    assert_eq!((mcp["first"]["text"].as_str(), mcp["first"]["run"].as_u64()), (Some("SOUPE"), Some(1)), "{report}");
    assert_eq!(mcp["again"], mcp["first"], "the retry gets the stored result: {report}");
    assert_eq!(mcp["bad_is_error"], true, "{report}");
    assert!(mcp["bad_text"].as_str().unwrap().contains("token_signature_invalid"), "{report}");
    assert_eq!(mcp["work_runs"], 1, "{report}");
    served.stop();
    std::fs::remove_dir_all(&dir).ok();
}

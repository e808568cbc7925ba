//! x402 v2 interop with the unmodified npm packages (installed in
//! `tests/x402/node_modules` by `./scripts/test`): `@x402/fetch` 2.27 with
//! Bazaar's buyer scheme (the TypeScript SDK's, `clients/typescript`) pays a merchant route built
//! with the SDK's `x402_paid` middleware, and a replay of the paid request is
//! charged nothing more.
// reason: an end-to-end test reads as one story of requests and the checks after each.
#![allow(clippy::too_many_lines)]

use bazaar_cli::wire_json;
use bazaar_core::apply::Config;
use bazaar_sdk::paid::{x402_paid, PaidRoute, Settled, X402Route};
use bazaar_stage::{embedded_registry_with, enroll_pair, serve};
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

const PRICE: u64 = 250;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..").canonicalize().unwrap()
}

/// Runs a node script from `tests/x402` and parses its last line.
async fn node(script: &str, args: Vec<String>) -> Value {
    let dir = root().join("tests/x402");
    assert!(
        dir.join("node_modules/@x402/fetch").is_dir(),
        "tests/x402/node_modules is missing: run ./scripts/test once (it runs npm ci there)"
    );
    let script = dir.join(script);
    let output = tokio::task::spawn_blocking(move || {
        std::process::Command::new("node").arg(script).args(args).current_dir(dir).output().unwrap()
    })
    .await
    .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout).to_string();
    assert!(output.status.success(), "node failed: {stdout}\n{}", String::from_utf8_lossy(&output.stderr));
    serde_json::from_str(stdout.lines().last().unwrap()).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn x402_fetch_pays_an_sdk_route_once() {
    let dir = std::env::temp_dir().join(format!("bazaar-x402-{}", std::process::id()));
    std::fs::remove_dir_all(&dir).ok();
    std::fs::create_dir_all(&dir).unwrap();
    let local = embedded_registry_with(&dir, Some("x4-op".into()), Config::standard()).await.unwrap();
    let operator = bazaar_sdk::Client::new(&local.url, Some("x4-op".into()));
    let (owner, buyer) = enroll_pair(&operator, "x4-owner", "x4-buyer").await.unwrap();
    let (_, merchant) = enroll_pair(&operator, "x4-shop-owner", "x4-shop").await.unwrap();
    let owner_id = owner.me().await.unwrap().member.id;
    operator.mint(&owner_id, 10_000, "x4-mint").await.unwrap();
    owner.fund("x4-buyer", 10_000, "x4-fund").await.unwrap();
    owner.set_budget("x4-buyer", 1_000, 10_000, 10_000).await.unwrap();

    let runs = Arc::new(AtomicU64::new(0));
    let route = Arc::new(PaidRoute::new(merchant.clone(), PRICE, &dir.join("receipts.db")).unwrap());
    let x402 = Arc::new(X402Route::new(route, "a paid forecast").await.unwrap());
    let counter = runs.clone();
    let app = axum::Router::new()
        .route(
            "/forecast",
            axum::routing::get(move |axum::Extension(settled): axum::Extension<Settled>| {
                let counter = counter.clone();
                async move {
                    counter.fetch_add(1, Ordering::SeqCst);
                    axum::Json(json!({"forecast": "sunny", "settlement": settled.settlement_id}))
                }
            }),
        )
        .route_layer(axum::middleware::from_fn_with_state(x402, x402_paid));
    let shop = serve(app).await.unwrap();

    // Without payment: 402 and a PAYMENT-REQUIRED header (v2, scheme apt, our network, not "bazaar").
    let bare = reqwest::get(format!("{shop}/forecast")).await.unwrap();
    assert_eq!(bare.status().as_u16(), 402);
    let header = bare.headers().get("payment-required").unwrap().to_str().unwrap().to_string();
    use base64::Engine;
    let required: Value =
        serde_json::from_slice(&base64::engine::general_purpose::STANDARD.decode(header).unwrap()).unwrap();
    assert_eq!(required["x402Version"], 2);
    let offer = &required["accepts"][0];
    assert_eq!(
        (offer["scheme"].as_str(), offer["amount"].as_str(), offer["asset"].as_str()),
        (Some("apt"), Some("250"), Some("BNU"))
    );
    let network = offer["network"].as_str().unwrap();
    assert!(network.starts_with("bzr:") && !network.starts_with("bazaar"), "{network}");

    let before = buyer.me().await.unwrap().balance_minor.unwrap_or(0);
    let paid = node(
        "fetch_buyer.mjs",
        vec![format!("{shop}/forecast"), local.url.clone(), buyer.credential().unwrap().to_string()],
    )
    .await;
    assert_eq!(paid["status"], 200, "{paid}");
    assert_eq!(paid["paymentResponse"]["success"], true);
    let body: Value = serde_json::from_str(paid["body"].as_str().unwrap()).unwrap();
    assert_eq!(paid["paymentResponse"]["transaction"], body["settlement"]);
    assert_eq!(paid["replayStatus"], 200, "the replayed paid request is answered");
    assert_eq!(paid["replayBody"], paid["body"], "from the work receipt");
    assert_eq!(runs.load(Ordering::SeqCst), 1, "the work ran once");
    let after = buyer.me().await.unwrap().balance_minor.unwrap_or(0);
    assert_eq!(before - after, PRICE as i64, "charged once");

    // A token minted for another resource is refused by the route before anything settles.
    let token = buyer.issue_token("x4-shop", PRICE, "x4-other", "http://elsewhere/forecast").await.unwrap();
    assert_eq!(refusal(&shop, offer, &token.body.token).await, (402, json!("wrong_resource")));
    // A token whose claims do not read is an invalid payload, refused before anything settles.
    assert_eq!(refusal(&shop, offer, "apt_bm90LWNsYWltcw.c2ln").await, (402, json!("invalid_payload")));
    assert_eq!(runs.load(Ordering::SeqCst), 1, "no work for a refused payment");
    std::fs::remove_dir_all(&dir).ok();
}

/// The shop's answer to `token` presented under `offer` (x402 v2): its status and the `error` of its
/// `PAYMENT-REQUIRED` header.
async fn refusal(shop: &str, offer: &Value, token: &str) -> (u16, Value) {
    use base64::Engine;
    let payload = json!({"x402Version": 2, "accepted": offer, "payload": {"token": token}});
    let signature = base64::engine::general_purpose::STANDARD.encode(payload.to_string());
    let refused =
        reqwest::Client::new().get(format!("{shop}/forecast")).header("payment-signature", signature).send().await;
    let refused = refused.unwrap();
    let header = refused.headers().get("payment-required").unwrap().to_str().unwrap().to_string();
    let required: Value =
        serde_json::from_slice(&base64::engine::general_purpose::STANDARD.decode(header).unwrap()).unwrap();
    (refused.status().as_u16(), required["error"].clone())
}

/// `@x402/express` 2.27, unmodified, uses the Bazaar registry as its facilitator
/// (`/x402/supported`, `/x402/verify`, `/x402/settle`); `@x402/fetch` pays it;
/// a token minted for another merchant is refused with the facilitator's reason.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn x402_express_uses_the_bazaar_facilitator() {
    use std::io::{BufRead, BufReader};
    let dir = std::env::temp_dir().join(format!("bazaar-x402-express-{}", std::process::id()));
    std::fs::remove_dir_all(&dir).ok();
    std::fs::create_dir_all(&dir).unwrap();
    let local = embedded_registry_with(&dir, Some("xe-op".into()), Config::standard()).await.unwrap();
    let operator = bazaar_sdk::Client::new(&local.url, Some("xe-op".into()));
    let (owner, buyer) = enroll_pair(&operator, "xe-owner", "xe-buyer").await.unwrap();
    let (_, merchant) = enroll_pair(&operator, "xe-shop-owner", "xe-shop").await.unwrap();
    let owner_id = owner.me().await.unwrap().member.id;
    operator.mint(&owner_id, 10_000, "xe-mint").await.unwrap();
    owner.fund("xe-buyer", 10_000, "xe-fund").await.unwrap();
    owner.set_budget("xe-buyer", 1_000, 10_000, 10_000).await.unwrap();
    let merchant_did = merchant.me().await.unwrap().member.id;
    let card = wire_json(&operator.well_known().await.unwrap());
    let network = card["x402"]["network"].as_str().unwrap().to_string();
    let supported: Value = reqwest::get(format!("{}/x402/supported", local.url)).await.unwrap().json().await.unwrap();
    assert_eq!(supported["kinds"][0]["network"], network.as_str());

    let script = root().join("tests/x402/express_merchant.mjs");
    let mut child = std::process::Command::new("node")
        .arg(script)
        .args([&local.url, &merchant_did, merchant.credential().unwrap(), &network, &PRICE.to_string()])
        .current_dir(root().join("tests/x402"))
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::inherit())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let line = tokio::task::spawn_blocking(move || lines.next().unwrap().unwrap()).await.unwrap();
    let shop = line.strip_prefix("listening ").expect("the merchant prints its URL").to_string();

    let before = buyer.me().await.unwrap().balance_minor.unwrap_or(0);
    let paid = node(
        "fetch_buyer.mjs",
        vec![format!("{shop}/paid"), local.url.clone(), buyer.credential().unwrap().to_string()],
    )
    .await;
    assert_eq!(paid["status"], 200, "{paid}");
    assert_eq!(paid["body"], r#"{"forecast":"rain"}"#);
    assert_eq!(paid["paymentResponse"]["success"], true, "{paid}");
    let settlement = paid["paymentResponse"]["transaction"].as_str().unwrap().to_string();
    assert!(settlement.starts_with("stl_"), "{settlement}");
    let after = buyer.me().await.unwrap().balance_minor.unwrap_or(0);
    assert_eq!(before - after, PRICE as i64, "charged once");
    assert_eq!(wire_json(&merchant.me().await.unwrap())["balance_minor"], PRICE - PRICE / 100);

    // The facilitator refuses a token minted for another merchant.
    let other = buyer.issue_token("x4-nobody", PRICE, "o-other", &format!("{shop}/paid")).await.unwrap_err();
    assert_eq!(other.code(), Some("member_not_found"));
    let (_, rival) = enroll_pair(&operator, "xe-rival-owner", "xe-rival").await.unwrap();
    let token = buyer.issue_token("xe-rival", PRICE, "o-rival", &format!("{shop}/paid")).await.unwrap();
    let rival_did = rival.me().await.unwrap().member.id;
    let request = json!({"x402Version": 2,
        "paymentPayload": {"x402Version": 2, "resource": {"url": format!("{shop}/paid")}, "payload": {"token": token.body.token}},
        "paymentRequirements": {"scheme": "apt", "network": network, "amount": PRICE.to_string(), "asset": "BNU",
            "payTo": merchant_did, "maxTimeoutSeconds": 900}});
    let verdict = merchant
        .call::<Value>(reqwest::Method::POST, "/x402/verify", Some(bazaar_sdk::Body::json(request.clone())), None)
        .await
        .unwrap()
        .body;
    assert_eq!(
        (verdict["isValid"].as_bool(), verdict["invalidReason"].as_str()),
        (Some(false), Some("wrong_merchant"))
    );
    let settled = merchant
        .call::<Value>(reqwest::Method::POST, "/x402/settle", Some(bazaar_sdk::Body::json(request)), None)
        .await
        .unwrap()
        .body;
    assert_eq!(settled["success"], false);
    assert_ne!(rival_did, merchant_did);
    child.kill().ok();
    child.wait().ok();
    std::fs::remove_dir_all(&dir).ok();
}

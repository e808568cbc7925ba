//! Passkeys end to end in Debian's headless Chromium with a CDP virtual
//! authenticator (`tests/browser/passkey.mjs`): an owner registers a passkey
//! with its credential once, signs in without a username on the approval
//! page, approves its agent's order with the session alone; a request from
//! another origin is refused with the session; sign-out revokes it on the
//! server. Needs `/usr/bin/chromium` and `tests/browser/node_modules`
//! (`./scripts/test` installs both); without them this test fails.

use crate::common;

use bazaar_cli::wire_json;
use bazaar_core::apply::Config;
use bazaar_stage::{embedded_registry_with, enroll_pair};
use serde_json::{json, Value};
use std::path::Path;
use std::process::Command;

/// An order of `buyer` (the owner's agent) waiting for its owner's approval.
async fn order_awaiting_approval(
    operator: &bazaar_sdk::Client,
    owner: &bazaar_sdk::Client,
    buyer: &bazaar_sdk::Client,
    now_ms: i64,
) -> String {
    let (_, maker) = enroll_pair(operator, "amara-owner", "amara").await.unwrap();
    let listing = json!({"sku": "cc", "title": "Hand-embroidered cushion cover", "tags": ["cushion"],
        "list_price_minor": 3_000, "floor_minor": 2_500, "max_discount_bps": 2_000, "capacity_per_day": 2,
        "capacity_max": 20, "language": "en"});
    let listed = wire_json(&maker.put_listing(&serde_json::from_value(listing).unwrap()).await.unwrap());
    let owner_id = owner.me().await.unwrap().member.id;
    operator.mint(&owner_id, 100_000, "m").await.unwrap();
    owner.fund("hotel-agent", 100_000, "f").await.unwrap();
    owner.set_budget("hotel-agent", 100_000, 100_000, 100_000).await.unwrap();
    let rfq = json!({"item": "cushion covers", "quantity": 10, "max_unit_price_minor": 3_000,
        "deadline_ms": now_ms + 30 * 86_400_000_i64});
    let rfq = buyer
        .call::<Value>(reqwest::Method::POST, "/v1/rfqs", Some(bazaar_sdk::Body::json(rfq)), Some("rfq-1"))
        .await
        .unwrap()
        .body;
    let rfq = rfq["id"].as_str().unwrap().to_string();
    let offer = json!({"listing": listed["id"], "unit_price_minor": 2_600, "quantity": 10});
    maker
        .call::<Value>(
            reqwest::Method::POST,
            &format!("/v1/rfqs/{rfq}/offers"),
            Some(bazaar_sdk::Body::json(offer)),
            None,
        )
        .await
        .unwrap();
    buyer.call::<Value>(reqwest::Method::POST, &format!("/v1/rfqs/{rfq}/close"), None, None).await.unwrap();
    let body = json!({"rfq": rfq, "require_approval": true});
    let order = buyer
        .call::<Value>(reqwest::Method::POST, "/v1/orders", Some(bazaar_sdk::Body::json(body)), Some("order-1"))
        .await
        .unwrap()
        .body;
    assert_eq!(order["state"], "awaiting_approval", "{order}");
    order["id"].as_str().unwrap().to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_owner_registers_a_passkey_signs_in_without_a_username_and_approves() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let browser_dir = root.join("tests/browser");
    let fix = "run ./scripts/test once (it installs Debian's chromium and runs `npm ci` in tests/browser)";
    assert!(Path::new("/usr/bin/chromium").exists(), "/usr/bin/chromium is missing: {fix}");
    assert!(browser_dir.join("node_modules/playwright-core").is_dir(), "tests/browser/node_modules is missing: {fix}");
    let dir = common::fresh_dir("bazaar-passkey");
    let local = embedded_registry_with(&dir, Some("pk-op".into()), Config::standard()).await.unwrap();
    // WebAuthn needs a domain: the loopback address is served to the browser as localhost.
    *local.state.public_url.write().unwrap() = Some(local.url.clone());
    let base = local.url.replace("127.0.0.1", "localhost");
    let operator = local.operator();
    let (owner, buyer) = enroll_pair(&operator, "hotel", "hotel-agent").await.unwrap();
    let now_ms = bazaar_types::Clock::now(local.clock.as_ref()).ms();
    let order = order_awaiting_approval(&operator, &owner, &buyer, now_ms).await;
    let credential = owner.credential().unwrap().to_string();
    let script = browser_dir.join("passkey.mjs");
    let (arg_base, arg_order) = (base.clone(), order.clone());
    let output = tokio::task::spawn_blocking(move || {
        Command::new("node").arg(script).arg(arg_base).arg(credential).arg(arg_order).output().unwrap()
    })
    .await
    .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout).to_string();
    assert!(output.status.success(), "passkey.mjs failed: {stdout}\n{}", String::from_utf8_lossy(&output.stderr));
    let seen: Value = serde_json::from_str(stdout.trim()).unwrap();
    assert_eq!(seen["resident_credentials"], 1, "the passkey is a resident (discoverable) key: {seen}");
    assert_eq!(seen["signed_in"], "Signed in as hotel.");
    assert_eq!(seen["cookie"], json!({"http_only": true, "same_site": "Strict", "secure": false, "path": "/"}));
    assert_eq!(seen["foreign"], json!({"status": 403, "code": "origin_refused"}));
    assert_eq!((seen["me_signed_in"].as_u64(), seen["me_after_sign_out"].as_u64()), (Some(200), Some(401)));
    // The approval the session made is the owner's own.
    let status =
        owner.call::<Value>(reqwest::Method::GET, &format!("/v1/orders/{order}"), None, None).await.unwrap().body;
    let owner_id = wire_json(&owner.me().await.unwrap())["member"]["id"].clone();
    assert_eq!((&status["state"], &status["approval"]["approved"]), (&json!("authorized"), &json!(true)), "{status}");
    assert_eq!(status["approval"]["decided_by"], owner_id, "decided by the owner, signed in with its passkey");
    let passkeys = owner.call::<Value>(reqwest::Method::GET, "/v1/passkeys", None, None).await.unwrap().body;
    assert_eq!(passkeys.as_array().unwrap().len(), 1);
    assert!(passkeys[0]["last_used_at"].is_i64(), "the sign-in was recorded: {passkeys}");
    assert!(passkeys[0].get("passkey").is_none(), "the key's state never leaves the registry");
    // An agent has no passkeys: they are for people.
    let refused =
        buyer.call::<Value>(reqwest::Method::POST, "/v1/passkeys/register/start", None, None).await.unwrap_err();
    assert_eq!(refused.code(), Some("passkeys_for_people"));
    std::fs::remove_dir_all(&dir).ok();
}

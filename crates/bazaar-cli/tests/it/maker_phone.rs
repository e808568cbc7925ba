//! The maker's phone: the person who owns a seller agent proves her share on
//! its behalf, recorded as such. Over HTTP: her owner lists her agent's
//! orders (`?agent=`) and proves; another owner may do neither; the proof,
//! the payment event and the ledger say who sent it. In Debian's headless
//! Chromium at phone size (`tests/browser/maker.mjs`, a CDP virtual
//! authenticator): she signs in with her passkey, reads her share in Spanish,
//! sends her receipt from the camera input, and reads her payment. Needs what
//! `./scripts/test` installs.

use crate::common;

use bazaar_cli::wire_json;
use bazaar_core::apply::Config;
use bazaar_sdk::Client;
use bazaar_stage::{embedded_registry_with, enroll_pair, LocalRegistry};
use common::{available, refused};
use reqwest::Method;
use serde_json::{json, Value};

const UNITS: u64 = 2;
const PRICE: u64 = 2_500;

/// A registry with one authorized order: `maker` (listing in Spanish) has share 0; returns the
/// registry, the maker's owner, the maker agent, another owner, and the order id.
async fn one_order(dir: &std::path::Path) -> (LocalRegistry, Client, Client, Client, String) {
    let local = embedded_registry_with(dir, Some("mp-op".into()), Config::standard()).await.unwrap();
    // WebAuthn needs a domain: the loopback address is served to the browser as localhost.
    *local.state.public_url.write().unwrap() = Some(local.url.clone());
    let operator = local.operator();
    let (owner, maker) = enroll_pair(&operator, "amara-owner", "amara").await.unwrap();
    let (stranger, _) = enroll_pair(&operator, "lucia-owner", "lucia").await.unwrap();
    let listing = json!({"sku": "cc", "title": "Hand-embroidered cushion cover (funda de cojín)", "tags": ["cushion"],
        "list_price_minor": 3_000, "floor_minor": 2_000, "max_discount_bps": 2_000, "capacity_per_day": 4,
        "capacity_max": 20, "language": "es"});
    let listed = wire_json(&maker.put_listing(&serde_json::from_value(listing).unwrap()).await.unwrap());
    let (hotel, buyer) = enroll_pair(&operator, "mp-hotel", "mp-buyer").await.unwrap();
    let funding = common::Funding { mint: (50_000, "m"), fund: (50_000, "f"), budget: [50_000; 3] };
    common::fund_agent(&operator, &hotel, "mp-buyer", funding).await;
    let deadline = bazaar_types::Clock::now(local.clock.as_ref()).ms() + 10 * 86_400_000;
    let ask =
        json!({"item": "cushion covers", "quantity": UNITS, "max_unit_price_minor": 3_000, "deadline_ms": deadline});
    let rfq = buyer
        .call::<Value>(Method::POST, "/v1/rfqs", Some(bazaar_sdk::Body::json(ask)), Some("mp-rfq"))
        .await
        .unwrap()
        .body;
    let rfq = rfq["id"].as_str().unwrap().to_string();
    let offer = json!({"listing": listed["id"], "unit_price_minor": PRICE, "quantity": UNITS});
    maker
        .call::<Value>(Method::POST, &format!("/v1/rfqs/{rfq}/offers"), Some(bazaar_sdk::Body::json(offer)), None)
        .await
        .unwrap();
    buyer.call::<Value>(Method::POST, &format!("/v1/rfqs/{rfq}/close"), None, None).await.unwrap();
    let order = buyer
        .call::<Value>(Method::POST, "/v1/orders", Some(bazaar_sdk::Body::json(json!({"rfq": rfq}))), Some("mp-order"))
        .await
        .unwrap()
        .body;
    assert_eq!(order["state"], "authorized", "{order}");
    (local, owner, maker, stranger, order["id"].as_str().unwrap().to_string())
}

async fn id_of(client: &Client) -> String {
    client.me().await.unwrap().member.id
}

/// The share's proof and the `order.share_paid` event: both name the owner who sent it.
async fn assert_proved_by_owner(local: &LocalRegistry, owner: &Client, order: &str) {
    let owner_id = id_of(owner).await;
    let stored = owner.call::<Value>(Method::GET, &format!("/v1/orders/{order}"), None, None).await.unwrap().body;
    assert_eq!(stored["lines"][0]["state"], "paid", "{stored}");
    assert_eq!(stored["lines"][0]["proof"]["proved_by"], owner_id.as_str(), "recorded as sent by her owner: {stored}");
    let events = wire_json(&local.operator().events(0, 500).await.unwrap());
    let paid: Vec<&Value> =
        events["events"].as_array().unwrap().iter().filter(|e| e["kind"] == "order.share_paid").collect();
    assert_eq!(paid.len(), 1, "paid once");
    assert_eq!(
        (paid[0]["authored_by"].as_str(), paid[0]["body"]["proved_by"].as_str()),
        (Some(owner_id.as_str()), Some(owner_id.as_str()))
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_makers_owner_proves_her_share_on_its_behalf_and_nobody_else_can() {
    let dir = common::fresh_dir("bazaar-maker-owner");
    let (local, owner, maker, stranger, order) = one_order(&dir).await;
    let listed = owner.call::<Value>(Method::GET, "/v1/orders?agent=amara", None, None).await.unwrap().body;
    assert_eq!(listed["orders"].as_array().unwrap().len(), 1, "{listed}");
    let (code, _) = refused(stranger.call::<Value>(Method::GET, "/v1/orders?agent=amara", None, None).await);
    assert_eq!(code, "not_owner");
    let (code, _) = refused(stranger.call::<Value>(Method::GET, &format!("/v1/orders/{order}"), None, None).await);
    assert_eq!(code, "not_party");
    let (code, _) = refused(stranger.prove_shipment(&order, 0, "TRK-X", "image/png", b"not hers".to_vec()).await);
    assert_eq!(code, "not_party", "another maker's owner may not prove this share");
    let before = available(&maker).await;
    let paid =
        wire_json(&owner.prove_shipment(&order, 0, "TRK-1", "image/png", b"courier receipt".to_vec()).await.unwrap());
    let net = paid["payment"]["net_minor"].as_u64().unwrap();
    assert!(net > 0 && net < UNITS * PRICE, "paid net of the fee: {paid}");
    assert_eq!(available(&maker).await, before + net, "the agent is paid on its owner's proof");
    let (code, _) = refused(maker.prove_shipment(&order, 0, "TRK-1", "image/png", b"again".to_vec()).await);
    assert_eq!(code, "share_paid", "paid once, whoever sends the proof");
    assert_proved_by_owner(&local, &owner, &order).await;
    common::assert_store_audit_passes(&local).await;
    std::fs::remove_dir_all(&dir).ok();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_makers_phone_signs_in_with_her_passkey_and_is_paid_on_her_photo() {
    let dir = common::fresh_dir("bazaar-maker-phone");
    let (local, owner, maker, _, order) = one_order(&dir).await;
    let before = available(&maker).await;
    let base = local.url.replace("127.0.0.1", "localhost");
    let args = vec![
        base,
        owner.credential().unwrap().to_string(),
        "amara".into(),
        common::screenshot_dir().display().to_string(),
    ];
    let (report, exited_ok) = common::browser_driver("maker", args).await;
    assert_eq!(report["problems"], json!([]), "{report}");
    assert_eq!(report["lang"], "es", "her language: {report}");
    let held = report["held"].as_str().unwrap();
    assert!(held.contains("Nuevo pedido") && held.contains("Retenido para ti"), "{held}");
    assert_eq!(
        (report["capture"].as_str(), report["accept"].as_str()),
        (Some("environment"), Some("image/jpeg,image/png,image/webp"))
    );
    assert!(report["paid"].as_str().unwrap().starts_with("Pagado a ti"), "{report}");
    assert!(report["paid_note"].as_str().unwrap().contains("TRK-PHONE-1"), "{report}");
    assert_eq!(report["axe"], json!([]), "{report}");
    assert!(report["overflow_px"].as_i64().unwrap() <= 0, "{report}");
    assert!(exited_ok, "{report}");
    assert!(available(&maker).await > before, "paid on the photo");
    assert_proved_by_owner(&local, &owner, &order).await;
    std::fs::remove_dir_all(&dir).ok();
}

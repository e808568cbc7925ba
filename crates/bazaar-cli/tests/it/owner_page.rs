//! The owners' page: `GET /v1/me/agents` lists an owner's agents with their
//! money, ceilings and stake (and nobody else's); in Debian's headless
//! Chromium (`tests/browser/owner.mjs`) the owner signs in, reads its agent,
//! the order waiting for it and its agent's dispute with its timeline, and
//! approves the order on the page. Needs what `./scripts/test` installs.

use crate::common;

use bazaar_cli::wire_json;
use bazaar_core::apply::Config;
use bazaar_sdk::Body;
use bazaar_stage::{embedded_registry_with, enroll_pair};
use reqwest::Method;
use serde_json::{json, Value};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_owner_sees_its_agents_approves_here_and_follows_its_disputes() {
    let dir = common::fresh_dir("bazaar-owner-page");
    let local = embedded_registry_with(&dir, Some("ow-op".into()), Config::standard()).await.unwrap();
    let operator = local.operator();
    let (hotel, buyer) = enroll_pair(&operator, "ow-hotel", "ow-buyer").await.unwrap();
    let (other, _) = enroll_pair(&operator, "ow-other", "ow-other-agent").await.unwrap();
    let (_, maker) = enroll_pair(&operator, "ow-amara-home", "ow-amara").await.unwrap();
    let funding = common::Funding { mint: (60_000, "m"), fund: (50_000, "f"), budget: [20_000, 40_000, 50_000] };
    common::fund_agent(&operator, &hotel, "ow-buyer", funding).await;
    // A paid call, then a dispute on it by the owner's agent.
    let token = buyer.issue_token("ow-amara", 300, "ow-call-1", "https://shop/x").await.unwrap();
    maker.settle(token.body.token.as_str(), 300, "ow-call-1", None).await.unwrap();
    let subject = bazaar_sdk::wire::dispute::DisputeSubject::Call {
        merchant: "ow-amara".to_string(),
        order_id: "ow-call-1".to_string(),
    };
    buyer.file_dispute(subject, "not_as_described", 300, "never arrived").await.unwrap();
    // An order waiting for the owner.
    let listing = json!({"sku": "cc", "title": "Hand-embroidered cushion cover", "tags": ["cushion"],
        "list_price_minor": 3_000, "floor_minor": 2_000, "max_discount_bps": 2_000, "capacity_per_day": 4,
        "capacity_max": 20, "language": "en"});
    let listed = wire_json(&maker.put_listing(&serde_json::from_value(listing).unwrap()).await.unwrap());
    let deadline = bazaar_types::Clock::now(local.clock.as_ref()).ms() + 10 * 86_400_000;
    let ask = json!({"item": "cushion covers", "quantity": 2, "max_unit_price_minor": 3_000, "deadline_ms": deadline});
    let rfq = buyer.call::<Value>(Method::POST, "/v1/rfqs", Some(Body::json(ask)), Some("ow-rfq")).await.unwrap().body;
    let rfq = rfq["id"].as_str().unwrap().to_string();
    let offer = json!({"listing": listed["id"], "unit_price_minor": 2_500, "quantity": 2});
    maker.call::<Value>(Method::POST, &format!("/v1/rfqs/{rfq}/offers"), Some(Body::json(offer)), None).await.unwrap();
    buyer.call::<Value>(Method::POST, &format!("/v1/rfqs/{rfq}/close"), None, None).await.unwrap();
    let body = json!({"rfq": rfq, "require_approval": true});
    let order =
        buyer.call::<Value>(Method::POST, "/v1/orders", Some(Body::json(body)), Some("ow-order")).await.unwrap().body;
    let order_id = order["id"].as_str().unwrap().to_string();

    // The route: its own agents only.
    let mine = hotel.call::<Value>(Method::GET, "/v1/me/agents", None, None).await.unwrap().body;
    let agents = mine["agents"].as_array().unwrap();
    assert_eq!(agents.len(), 1, "{mine}");
    assert_eq!(agents[0]["handle"], "ow-buyer");
    assert_eq!(agents[0]["budget"]["per_call_max_minor"], 20_000, "{mine}");
    assert_eq!(agents[0]["balance_minor"], 50_000 - 300, "{mine}");
    let theirs = other.call::<Value>(Method::GET, "/v1/me/agents", None, None).await.unwrap().body;
    assert_eq!(theirs["agents"][0]["handle"], "ow-other-agent", "{theirs}");

    let credential = hotel.credential().unwrap().to_string();
    let args = vec![local.url.clone(), credential, common::screenshot_dir().display().to_string()];
    let (report, exited_ok) = common::browser_driver("owner", args).await;
    assert_eq!(report["problems"], json!([]), "{report}");
    let rows = report["agents"].as_array().unwrap();
    assert_eq!(rows.len(), 1, "{report}");
    assert_eq!(rows[0][0], "@ow-buyer");
    assert_eq!(rows[0][1], "49,700 units", "{report}");
    assert_eq!(rows[0][4], "20,000 units", "{report}");
    let approvals: Vec<&str> = report["approvals"].as_array().unwrap().iter().map(|v| v.as_str().unwrap()).collect();
    assert_eq!(approvals.len(), 1, "{report}");
    assert!(approvals[0].contains("5,000 units") && approvals[0].contains("cushion covers"), "{approvals:?}");
    assert_eq!(report["approval_links"][0], format!("#order-{order_id}"), "a shareable link: {report}");
    assert!(report["dispute_links"][0].as_str().unwrap().starts_with("#dispute-dsp_"), "{report}");
    let disputes = report["disputes"].as_array().unwrap();
    assert_eq!(disputes.len(), 1, "{report}");
    let dispute = disputes[0].as_str().unwrap();
    assert!(dispute.contains("not_as_described") && dispute.contains("filed"), "{dispute}");
    assert!(dispute.contains("@ow-buyer against @ow-amara"), "handles, not DIDs: {dispute}");
    assert!(report["approved"].as_str().unwrap().contains(&order_id), "{report}");
    assert!(report["after"].as_str().unwrap().contains("Nothing waits for you"), "{report}");
    assert_eq!(report["axe"], json!([]), "{report}");
    assert!(report["overflow_px"].as_i64().unwrap() <= 0, "{report}");
    assert!(exited_ok, "{report}");
    let decided: Value =
        hotel.call::<Value>(Method::GET, &format!("/v1/orders/{order_id}"), None, None).await.unwrap().body;
    assert_eq!(decided["state"], "authorized", "approved on the page: {decided}");
    common::assert_store_audit_passes(&local).await;
    std::fs::remove_dir_all(&dir).ok();
}

//! Per-merchant terms over HTTP on the embedded store (adoption's pilot
//! phase): a merchant's own escrow threshold — at most the registry's — and a
//! pilot's invited buyers, enforced on tokens, escrowed contracts and
//! storefront orders, shown on its card, opened later; refusals keep nothing.
// reason: an end-to-end test reads as one story of requests and the checks after each.
#![allow(clippy::too_many_lines)]

use crate::common;

use bazaar_cli::wire_json;
use bazaar_core::apply::Config;
use bazaar_sdk::Client;
use bazaar_stage::{embedded_registry_with, enroll_pair};
use common::{available, refused};
use reqwest::Method;
use serde_json::{json, Value};

async fn set_terms(client: &Client, merchant: &str, body: Value) -> Result<Value, bazaar_sdk::SdkError> {
    client
        .call::<Value>(Method::PUT, &format!("/v1/agents/{merchant}/terms"), Some(bazaar_sdk::Body::json(body)), None)
        .await
        .map(|a| a.body)
}

async fn did(client: &Client) -> String {
    client.me().await.unwrap().member.id
}

const FUNDS: u64 = 50_000;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pilot_takes_only_invited_buyers_and_its_own_threshold_until_it_opens() {
    let dir = common::fresh_dir("bazaar-terms");
    let (local, operator) = common::embedded_with_operator(&dir, "op").await;
    let (mill, shop) = enroll_pair(&operator, "terms-mill", "terms-shop").await.unwrap();
    let mut buyers = Vec::new();
    for name in ["terms-invited", "terms-stranger"] {
        let (owner, buyer) = enroll_pair(&operator, &format!("{name}-owner"), name).await.unwrap();
        let (mint_key, fund_key) = (format!("m-{name}"), format!("f-{name}"));
        let funding = common::Funding { mint: (FUNDS, &mint_key), fund: (FUNDS, &fund_key), budget: [FUNDS; 3] };
        common::fund_agent(&operator, &owner, name, funding).await;
        buyers.push((owner, buyer));
    }
    let (invited, stranger) = (&buyers[0].1, &buyers[1].1);
    let (stranger_owner, invited_id) = (&buyers[1].0, did(invited).await);

    // No terms yet: the registry's defaults on the card.
    let card = shop.call::<Value>(Method::GET, "/v1/agents/terms-shop/terms", None, None).await.unwrap().body;
    assert_eq!((card["own"].as_bool(), card["invited_buyers"].is_null()), (Some(false), true), "{card}");
    let registry = card["registry_escrow_threshold_minor"].as_u64().unwrap();
    assert_eq!(card["escrow_threshold_minor"], registry);

    // Only the merchant or its owner sets terms, and never looser than the registry's.
    let (code, _) = refused(set_terms(stranger_owner, "terms-shop", json!({"escrow_threshold_minor": 10})).await);
    assert_eq!(code, "not_owner");
    let (code, body) = refused(set_terms(&shop, "terms-shop", json!({"escrow_threshold_minor": registry + 1})).await);
    assert_eq!(
        (code.as_str(), body["facts"]["registry_escrow_threshold_minor"].as_u64()),
        ("terms_invalid", Some(registry)),
        "{body}"
    );
    let (code, _) = refused(set_terms(&shop, "terms-shop", json!({"invited_buyers": ["nobody-here"]})).await);
    assert_eq!(code, "member_not_found");
    let too_many: Vec<String> = (0..=bazaar_types::limits::TERMS_INVITED_MAX).map(|n| format!("b{n}")).collect();
    let (code, _) = refused(set_terms(&shop, "terms-shop", json!({"invited_buyers": too_many})).await);
    assert_eq!(code, "terms_invalid");

    // The pilot: its own threshold of 500 and one invited buyer, shown on its card.
    let set =
        set_terms(&shop, "terms-shop", json!({"escrow_threshold_minor": 500, "invited_buyers": ["terms-invited"]}))
            .await
            .unwrap();
    assert_eq!(
        (set["escrow_threshold_minor"].as_u64(), set["invited_buyers"][0].as_str()),
        (Some(500), Some(invited_id.as_str()))
    );
    let card = stranger.call::<Value>(Method::GET, "/v1/agents/terms-shop/terms", None, None).await.unwrap().body;
    assert_eq!((card["own"].as_bool(), card["escrow_threshold_minor"].as_u64()), (Some(true), Some(500)), "{card}");
    assert_eq!(card["invited_buyers"], json!([invited_id]), "{card}");

    // Tokens: the invited buyer within the merchant's threshold; above it, escrow; the stranger, nothing.
    invited.issue_token("terms-shop", 400, "pilot-1", "https://shop/pilot").await.unwrap();
    let (code, body) = refused(invited.issue_token("terms-shop", 600, "pilot-2", "https://shop/pilot").await);
    assert_eq!(
        (code.as_str(), body["facts"]["escrow_threshold_minor"].as_u64()),
        ("escrow_required", Some(500)),
        "{body}"
    );
    let before = available(stranger).await;
    let (code, body) = refused(stranger.issue_token("terms-shop", 100, "stranger-1", "https://shop/pilot").await);
    assert_eq!((code.as_str(), body["status"].as_u64()), ("buyer_not_invited", Some(403)), "{body}");
    // Contracts: the same list.
    let due = bazaar_types::Clock::now(local.clock.as_ref()).ms() + 86_400_000;
    let (code, _) =
        refused(stranger.create_contract("terms-shop", None, &[(900, "bulk", due)], "t", None, "c-s").await);
    assert_eq!(code, "buyer_not_invited");
    assert_eq!(available(stranger).await, before, "a refused stranger holds nothing");
    invited.create_contract("terms-shop", None, &[(900, "bulk", due)], "t", None, "c-i").await.unwrap();

    // The owner opens the pilot: the stranger is served, still under the merchant's own threshold.
    let opened =
        set_terms(&mill, "terms-shop", json!({"escrow_threshold_minor": 500, "invited_buyers": null})).await.unwrap();
    assert!(opened["invited_buyers"].is_null(), "{opened}");
    stranger.issue_token("terms-shop", 100, "stranger-2", "https://shop/pilot").await.unwrap();
    let (code, _) = refused(stranger.issue_token("terms-shop", 501, "stranger-3", "https://shop/pilot").await);
    assert_eq!(code, "escrow_required");
    // Absent fields are the registry's defaults again.
    let reset = set_terms(&shop, "terms-shop", json!({})).await.unwrap();
    assert_eq!(reset["escrow_threshold_minor"].as_u64(), Some(registry));
    stranger.issue_token("terms-shop", 501, "stranger-4", "https://shop/pilot").await.unwrap();
    common::assert_store_audit_passes(&local).await;
    std::fs::remove_dir_all(&dir).ok();
}

fn maker_listing() -> Value {
    json!({"sku": "cc", "title": "Hand-embroidered cushion cover", "description": "Cotton, made to order.",
        "tags": ["cushion", "textile"], "list_price_minor": 3_000, "floor_minor": 2_000, "max_discount_bps": 2000,
        "capacity_per_day": 2, "capacity_max": 20, "lead_time_days": 2, "notice_days": 1, "language": "en"})
}

/// Storefront orders: a share above its maker's own threshold rides its own escrowed contract while the
/// other maker's share is a plain hold; a maker's pilot refuses an uninvited buyer's order, holding nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn storefront_shares_follow_each_makers_terms() {
    let dir = common::fresh_dir("bazaar-terms-orders");
    let local = embedded_registry_with(&dir, Some("to-op".into()), Config::standard()).await.unwrap();
    let operator = Client::new(&local.url, Some("to-op".into()));
    let mut makers = Vec::new();
    for name in ["to-amara", "to-lucia"] {
        let (_, maker) = enroll_pair(&operator, &format!("{name}-owner"), name).await.unwrap();
        let listed = wire_json(&maker.put_listing(&serde_json::from_value(maker_listing()).unwrap()).await.unwrap());
        makers.push((maker, listed["id"].as_str().unwrap().to_string(), name));
    }
    let mut buyers = Vec::new();
    for name in ["to-hotel-buyer", "to-stranger"] {
        let (owner, buyer) = enroll_pair(&operator, &format!("{name}-owner"), name).await.unwrap();
        let (mint_key, fund_key) = (format!("m-{name}"), format!("f-{name}"));
        let funding = common::Funding { mint: (FUNDS, &mint_key), fund: (FUNDS, &fund_key), budget: [FUNDS; 3] };
        common::fund_agent(&operator, &owner, name, funding).await;
        buyers.push(buyer);
    }
    // Amara's own threshold is below her share (2 × 2,500); Lucia runs a pilot for the hotel's buyer only.
    set_terms(&makers[0].0, "to-amara", json!({"escrow_threshold_minor": 4_000})).await.unwrap();
    set_terms(&makers[1].0, "to-lucia", json!({"invited_buyers": ["to-hotel-buyer"]})).await.unwrap();
    let deadline = bazaar_types::Clock::now(local.clock.as_ref()).ms() + 10 * 86_400_000;
    let order_from = |buyer: Client, tag: &'static str| {
        let makers = makers.clone();
        async move {
            let ask = json!({"item": "embroidered cushion cover", "quantity": 4, "max_unit_price_minor": 3000, "deadline_ms": deadline});
            let rfq = buyer
                .call::<Value>(Method::POST, "/v1/rfqs", Some(bazaar_sdk::Body::json(ask)), Some(&format!("{tag}-rfq")))
                .await
                .unwrap()
                .body;
            let rfq = rfq["id"].as_str().unwrap().to_string();
            for (maker, listing, _) in &makers {
                let body = json!({"listing": listing, "unit_price_minor": 2_500, "quantity": 2});
                maker
                    .call::<Value>(
                        Method::POST,
                        &format!("/v1/rfqs/{rfq}/offers"),
                        Some(bazaar_sdk::Body::json(body)),
                        None,
                    )
                    .await
                    .unwrap();
            }
            buyer.call::<Value>(Method::POST, &format!("/v1/rfqs/{rfq}/close"), None, None).await.unwrap();
            buyer
                .call::<Value>(
                    Method::POST,
                    "/v1/orders",
                    Some(bazaar_sdk::Body::json(json!({"rfq": rfq}))),
                    Some(&format!("{tag}-order")),
                )
                .await
        }
    };
    let order = order_from(buyers[0].clone(), "hotel").await.unwrap().body;
    assert_eq!(order["state"], "authorized", "{order}");
    let amara = did(&makers[0].0).await;
    for line in order["lines"].as_array().unwrap() {
        let escrowed = line["contract"].is_string();
        assert_eq!(escrowed, line["seller"] == amara.as_str(), "only Amara's share rides escrow: {line}");
    }
    let before = available(&buyers[1]).await;
    let (code, body) = refused(order_from(buyers[1].clone(), "stranger").await);
    assert_eq!(code, "buyer_not_invited", "{body}");
    assert_eq!(available(&buyers[1]).await, before, "the refused order holds nothing");
    common::assert_store_audit_passes(&local).await;
    std::fs::remove_dir_all(&dir).ok();
}

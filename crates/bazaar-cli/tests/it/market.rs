//! The storefront over HTTP on the embedded store: sellers' agents list and
//! relist products, a bad listing is refused with `listing_invalid`, members
//! search (words as prefixes, plurals folded), and searches that find nothing
//! are listed as unmet demand, most frequent first.
// reason: an end-to-end test reads as one story of requests and the checks after each.
#![allow(clippy::too_many_lines)]

use crate::common;

use bazaar_cli::wire_json;
use bazaar_core::apply::Config;
use bazaar_stage::{embedded_registry_with, enroll_pair};
use serde_json::{json, Value};

fn listing(sku: &str, title: &str, tags: &[&str], language: &str) -> Value {
    json!({"sku": sku, "title": title, "description": "Made to order, by hand.", "tags": tags,
        "list_price_minor": 3200, "floor_minor": 2400, "max_discount_bps": 2000,
        "capacity_per_day": 2, "capacity_max": 20, "lead_time_days": 3, "notice_days": 7, "language": language})
}

fn skus(found: &bazaar_sdk::wire::market::SearchResults) -> Vec<String> {
    let mut skus: Vec<String> = found.listings.iter().map(|listing| listing.sku.clone()).collect();
    skus.sort();
    skus
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sellers_list_members_search_and_unmet_demand_is_counted() {
    let dir = common::fresh_dir("bazaar-market");
    let (local, operator) = common::embedded_with_operator(&dir, "mk-op").await;
    let (_, amara) = enroll_pair(&operator, "amara-owner", "amara").await.unwrap();
    let (_, lucia) = enroll_pair(&operator, "lucia-owner", "lucia").await.unwrap();
    let (_, buyer) = enroll_pair(&operator, "shop-owner", "shopper").await.unwrap();

    let listed = wire_json(
        &amara
            .put_listing(
                &serde_json::from_value(listing("cc-1", "Hand-embroidered cushion cover", &["cushion"], "hi")).unwrap(),
            )
            .await
            .unwrap(),
    );
    assert_eq!(listed["lowest_price_minor"], 2560, "max(floor 2400, 3200 less 20 %)");
    assert_eq!(listed["language"], "hi");
    lucia
        .put_listing(&serde_json::from_value(listing("tr-1", "Embroidered table runner", &["table"], "es-MX")).unwrap())
        .await
        .unwrap();
    let id = listed["id"].as_str().unwrap();
    assert_eq!(wire_json(&buyer.listing(id).await.unwrap())["sku"], "cc-1");

    let bad = lucia
        .put_listing(
            &serde_json::from_value(json!({"sku": "x", "title": "Floor above list", "list_price_minor": 100,
        "floor_minor": 200, "capacity_per_day": 1, "capacity_max": 1, "language": "es"}))
            .unwrap(),
        )
        .await
        .unwrap_err();
    assert_eq!((bad.status(), bad.code()), (Some(400), Some("listing_invalid")));
    let bad = lucia
        .put_listing(
            &serde_json::from_value(json!({"sku": "y", "title": "Bad language", "list_price_minor": 100,
        "floor_minor": 50, "capacity_per_day": 1, "capacity_max": 1, "language": "spanish!"}))
            .unwrap(),
        )
        .await
        .unwrap_err();
    assert_eq!(bad.code(), Some("listing_invalid"));

    assert_eq!(skus(&buyer.search("Cushion Covers").await.unwrap()), ["cc-1"]);
    assert_eq!(skus(&buyer.search("embroid").await.unwrap()), ["cc-1", "tr-1"]);
    for _ in 0..3 {
        assert!(skus(&buyer.search("lampshades").await.unwrap()).is_empty());
    }
    assert!(skus(&buyer.search("quilt").await.unwrap()).is_empty());
    let unmet = wire_json(&buyer.unmet_searches().await.unwrap());
    assert_eq!(unmet["unmet"][0]["query"], "lampshade");
    assert_eq!(unmet["unmet"][0]["count"], 3);
    assert_eq!(unmet["unmet"][1]["query"], "quilt");
    assert_eq!(unmet["unmet"].as_array().unwrap().len(), 2, "searches that found something are not unmet");

    // Relisting the SKU changes its terms and words; a maker now offers lampshades.
    amara
        .put_listing(&serde_json::from_value(listing("cc-1", "Hand-embroidered lampshade", &["lamp"], "hi")).unwrap())
        .await
        .unwrap();
    assert_eq!(skus(&buyer.search("lampshade").await.unwrap()), ["cc-1"]);
    let unmet = wire_json(&buyer.unmet_searches().await.unwrap());
    assert_eq!(unmet["unmet"][0]["query"], "quilt", "met now");
    let empty = buyer.search("!!!").await.unwrap_err();
    assert_eq!(empty.code(), Some("invalid_request"));
    let anonymous = bazaar_sdk::Client::new(&local.url, None).search("cushion").await.unwrap_err();
    assert_eq!(anonymous.status(), Some(401));
    common::assert_store_audit_passes(&local).await;
    std::fs::remove_dir_all(&dir).ok();
}

fn maker_listing(sku: &str, list: u64, floor: u64, per_day: u64, max: u64, notice: u32, language: &str) -> Value {
    json!({"sku": sku, "title": "Hand-embroidered cushion cover", "description": "Cotton, made to order.",
        "tags": ["cushion", "textile"], "list_price_minor": list, "floor_minor": floor, "max_discount_bps": 2000,
        "capacity_per_day": per_day, "capacity_max": max, "lead_time_days": 2, "notice_days": notice,
        "language": language})
}

/// A request for quote: invited makers, refused offers with their numbers and
/// revisions, a maker who cannot meet the notice, the attempt limit, and the
/// cheapest-first allocation across makers with the remainder reported.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_for_quote_is_checked_by_code_and_allocated_cheapest_first() {
    let dir = common::fresh_dir("bazaar-rfq");
    let (local, operator) = common::embedded_with_operator(&dir, "rfq-op").await;
    let mut makers = Vec::new();
    for (name, listing) in [
        ("amara", maker_listing("cc", 3_200, 2_400, 2, 20, 7, "hi")),
        ("lucia", maker_listing("cc", 3_000, 2_800, 1, 15, 5, "es")),
        ("chloe", maker_listing("cc", 2_900, 2_000, 3, 30, 45, "fr")),
    ] {
        let (_, maker) = enroll_pair(&operator, &format!("{name}-owner"), name).await.unwrap();
        let listed = wire_json(&maker.put_listing(&serde_json::from_value(listing).unwrap()).await.unwrap());
        makers.push((maker, listed["id"].as_str().unwrap().to_string()));
    }
    let (hotel, buyer) = enroll_pair(&operator, "hotel-owner", "hotel-buyer").await.unwrap();
    let funding = common::Funding {
        mint: (200_000, "hotel-mint"),
        fund: (150_000, "hotel-fund"),
        budget: [150_000, 150_000, 150_000],
    };
    common::fund_agent(&operator, &hotel, "hotel-buyer", funding).await;
    let deadline = bazaar_types::Clock::now(local.clock.as_ref()).ms() + 30 * 86_400_000;
    let ask = json!({"item": "embroidered cushion covers", "quantity": 40, "max_unit_price_minor": 3000, "deadline_ms": deadline});
    let no_key = buyer
        .call::<Value>(reqwest::Method::POST, "/v1/rfqs", Some(bazaar_sdk::Body::json(ask.clone())), None)
        .await
        .unwrap_err();
    assert_eq!(no_key.code(), Some("idempotency_key_required"));
    let rfq = buyer
        .call::<Value>(reqwest::Method::POST, "/v1/rfqs", Some(bazaar_sdk::Body::json(ask.clone())), Some("rfq-1"))
        .await
        .unwrap()
        .body;
    let again = buyer
        .call::<Value>(reqwest::Method::POST, "/v1/rfqs", Some(bazaar_sdk::Body::json(ask)), Some("rfq-1"))
        .await
        .unwrap();
    assert!(again.replayed, "a retried request for quote is the same request");
    let id = rfq["id"].as_str().unwrap().to_string();
    assert_eq!(rfq["invited"].as_array().unwrap().len(), 3, "every matching maker is invited");
    let polled = makers[0].0.call::<Value>(reqwest::Method::GET, "/v1/rfqs", None, None).await.unwrap().body;
    assert_eq!(polled["rfqs"][0]["id"], id.as_str(), "makers find it by polling");

    let offer = |n: usize, price: u64, quantity: u64| {
        let (maker, listing) = (makers[n].0.clone(), makers[n].1.clone());
        let path = format!("/v1/rfqs/{id}/offers");
        async move {
            let body = json!({"listing": listing, "unit_price_minor": price, "quantity": quantity});
            maker.call::<Value>(reqwest::Method::POST, &path, Some(bazaar_sdk::Body::json(body)), None).await
        }
    };
    // Amara: below her own lowest price (2560), then revised.
    let refused = offer(0, 2_500, 20).await.unwrap_err();
    assert_eq!((refused.status(), refused.code()), (Some(422), Some("offer_below_floor")));
    let SdkProblem { body, .. } = problem(refused);
    assert_eq!(body["facts"]["lowest_price_minor"], 2560);
    assert_eq!(body["facts"]["offer"]["attempts_left"], 2);
    offer(0, 2_600, 20).await.unwrap();
    // Lucia: above the buyer's cap, then beyond her capacity (1 a day, 28 making days, at most 15), then valid.
    assert_eq!(offer(1, 3_100, 15).await.unwrap_err().code(), Some("offer_above_cap"));
    assert_eq!(offer(1, 2_900, 16).await.unwrap_err().code(), Some("offer_beyond_capacity"));
    offer(1, 2_900, 15).await.unwrap();
    // A fourth proposal is refused outright.
    assert_eq!(offer(1, 2_850, 15).await.unwrap_err().code(), Some("offer_revision_limit"));
    // Chloe needs 45 days' notice; the deadline gives 30.
    assert_eq!(offer(2, 2_500, 20).await.unwrap_err().code(), Some("offer_notice_too_short"));
    // A stranger cannot offer.
    let stranger = buyer
        .call::<Value>(
            reqwest::Method::POST,
            &format!("/v1/rfqs/{id}/offers"),
            Some(bazaar_sdk::Body::json(json!({"listing": makers[0].1, "unit_price_minor": 2600, "quantity": 1}))),
            None,
        )
        .await
        .unwrap_err();
    assert_eq!(stranger.code(), Some("not_party"));

    let allocation =
        buyer.call::<Value>(reqwest::Method::GET, &format!("/v1/rfqs/{id}/allocation"), None, None).await.unwrap().body;
    let lines: Vec<(u64, u64)> = allocation["allocation"]["lines"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| (l["units"].as_u64().unwrap(), l["unit_price"].as_u64().unwrap()))
        .collect();
    assert_eq!(lines, [(20, 2_600), (15, 2_900)], "cheapest first, each maker up to her offer");
    assert_eq!(
        (allocation["allocation"]["filled"].as_u64(), allocation["allocation"]["unfilled"].as_u64()),
        (Some(35), Some(5))
    );
    let closed =
        buyer.call::<Value>(reqwest::Method::POST, &format!("/v1/rfqs/{id}/close"), None, None).await.unwrap().body;
    assert_eq!(closed["allocation"]["total"], 20 * 2_600 + 15 * 2_900);
    assert_eq!(offer(0, 2_560, 20).await.unwrap_err().code(), Some("rfq_closed"));

    // The order: the owner's policy asks for a person above 50 000; the agent cannot approve.
    let policy = json!({"approval_above_minor": 50_000});
    hotel
        .call::<Value>(
            reqwest::Method::PUT,
            "/v1/agents/hotel-buyer/order-policy",
            Some(bazaar_sdk::Body::json(policy)),
            None,
        )
        .await
        .unwrap();
    let order = buyer
        .call::<Value>(
            reqwest::Method::POST,
            "/v1/orders",
            Some(bazaar_sdk::Body::json(json!({"rfq": id}))),
            Some("order-1"),
        )
        .await
        .unwrap()
        .body;
    assert_eq!(order["state"], "awaiting_approval");
    let order_id = order["id"].as_str().unwrap().to_string();
    assert_eq!(order["approval_url"], format!("/approve/{order_id}"));
    assert_eq!(wire_json(&buyer.me().await.unwrap())["held_minor"], 0, "nothing is held before approval");
    let page = reqwest::get(format!("{}/approve/{order_id}", local.url)).await.unwrap();
    assert!(page.text().await.unwrap().contains("Only you, its owner, can approve it"));
    let path = |action: &str| format!("/v1/orders/{order_id}/{action}");
    let again = buyer
        .call::<Value>(
            reqwest::Method::POST,
            "/v1/orders",
            Some(bazaar_sdk::Body::json(json!({"rfq": id}))),
            Some("order-1-again"),
        )
        .await
        .unwrap_err();
    let SdkProblem { body, .. } = problem(again);
    assert_eq!(
        (body["code"].as_str(), body["facts"]["order"].as_str()),
        (Some("rfq_ordered"), Some(order_id.as_str()))
    );
    let by_agent = buyer.call::<Value>(reqwest::Method::POST, &path("approve"), None, None).await.unwrap_err();
    assert_eq!((by_agent.status(), by_agent.code()), (Some(403), Some("approval_by_person")));
    let approved = hotel.call::<Value>(reqwest::Method::POST, &path("approve"), None, None).await.unwrap().body;
    assert_eq!(approved["state"], "authorized");
    assert!(approved["lines"][0]["contract"].is_null(), "below the escrow threshold: plain holds");
    let total = 20 * 2_600 + 15 * 2_900;
    assert_eq!(wire_json(&buyer.me().await.unwrap())["held_minor"], total, "one authorization for the whole order");
    // Each maker is told in her language.
    let amara_sees = makers[0].0.call::<Value>(reqwest::Method::GET, "/v1/orders", None, None).await.unwrap().body;
    let note = &amara_sees["orders"][0]["lines"][0]["notification"];
    assert_eq!((note["language"].as_str(), note["fallback"].as_bool()), (Some("hi"), Some(false)));
    assert!(note["text"].as_str().unwrap().starts_with("नया ऑर्डर"), "{note}");
    let lucia_note = &approved["lines"][1]["notification"];
    assert!(lucia_note["text"].as_str().unwrap().starts_with("Nuevo pedido"), "{lucia_note}");
    // The same notices reach each maker's inbox (and so every transport), in her
    // language; the owner's inbox held the approval request first.
    bazaar_server::conversation::notices::notify_once(&local.state).await.unwrap();
    let inbox = |who: &bazaar_sdk::Client| {
        let who = who.clone();
        async move { who.call::<Value>(reqwest::Method::GET, "/v1/inbox", None, None).await.unwrap().body }
    };
    let notices = |page: &Value, event: &str| -> Vec<Value> {
        let messages = page["messages"].as_array().unwrap().iter();
        messages.filter(|m| m["kind"]["type"] == "notice" && m["kind"]["event"] == event).cloned().collect()
    };
    let lucia_inbox = notices(&inbox(&makers[1].0).await, "order.approved");
    assert_eq!(lucia_inbox.len(), 1, "one share notice for lucia");
    assert_eq!(lucia_inbox[0]["kind"]["language"], "es");
    assert_eq!(lucia_inbox[0]["body"], lucia_note["text"]);
    assert_eq!(lucia_inbox[0]["kind"]["record"], json!({"kind": "order", "id": order_id}));
    let amara_inbox = notices(&inbox(&makers[0].0).await, "order.approved");
    assert_eq!(amara_inbox[0]["kind"]["language"], "hi");
    let invited = notices(&inbox(&makers[2].0).await, "rfq.opened");
    assert_eq!(invited.len(), 1, "chloe was invited to quote: {invited:?}");
    assert_eq!(invited[0]["kind"]["deadline"], deadline);
    let asked = notices(&inbox(&hotel).await, "order.created");
    assert!(asked[0]["body"].as_str().unwrap().contains(&format!("/approve/{order_id}")), "{asked:?}");

    // Lucia's 15 promised units count against her capacity on a new request.
    let ask = json!({"item": "cushion cover", "quantity": 5, "max_unit_price_minor": 3000, "deadline_ms": deadline});
    let second = buyer
        .call::<Value>(reqwest::Method::POST, "/v1/rfqs", Some(bazaar_sdk::Body::json(ask)), Some("rfq-2"))
        .await
        .unwrap()
        .body;
    let body = json!({"listing": makers[1].1, "unit_price_minor": 2_900, "quantity": 1});
    let path2 = format!("/v1/rfqs/{}/offers", second["id"].as_str().unwrap());
    let full = makers[1]
        .0
        .call::<Value>(reqwest::Method::POST, &path2, Some(bazaar_sdk::Body::json(body)), None)
        .await
        .unwrap_err();
    let SdkProblem { body, .. } = problem(full);
    assert_eq!((body["code"].as_str(), body["facts"]["committed"].as_u64()), (Some("offer_beyond_capacity"), Some(15)));

    // Lucia proves shipment and is paid her share on that proof, once.
    let receipt = b"\x89PNG courier receipt".to_vec();
    // (status, body) of a proof: the SDK's own call, its problem+json answer read back.
    let prove = |n: usize, share: u32, tracking: &'static str| {
        let (maker, order_id, receipt) = (makers[n].0.clone(), order_id.clone(), receipt.clone());
        async move {
            match maker.prove_shipment(&order_id, share, tracking, "image/png", receipt).await {
                Ok(body) => (200, wire_json(&body)),
                Err(error) => (error.status().unwrap(), problem(error).body),
            }
        }
    };
    let (status, by_other) = prove(0, 1, "XX1").await;
    assert_eq!((status, by_other["code"].as_str()), (403, Some("not_party")), "proof for another maker's share");
    let (status, paid) = prove(1, 1, "ES123456789").await;
    assert_eq!(status, 200, "{paid}");
    assert_eq!(paid["payment"]["net_minor"], 15 * 2_900 - 15 * 29);
    let (status, twice) = prove(1, 1, "ES123456789").await;
    assert_eq!((status, twice["code"].as_str()), (409, Some("share_paid")), "a share is paid once");
    assert_eq!(wire_json(&makers[1].0.me().await.unwrap())["balance_minor"], 15 * 2_900 - 15 * 29);
    // The tracking shows on the order; the receipt is stored by its hash.
    let shown =
        buyer.call::<Value>(reqwest::Method::GET, &format!("/v1/orders/{order_id}"), None, None).await.unwrap().body;
    assert_eq!(shown["lines"][1]["proof"]["tracking"], "ES123456789");
    let sha = shown["lines"][1]["proof"]["receipt_sha256"].as_str().unwrap().to_string();
    let image = hotel
        .http()
        .get(format!("{}/v1/blobs/{sha}", local.url))
        .bearer_auth(hotel.credential().unwrap())
        .send()
        .await
        .unwrap();
    assert_eq!(image.bytes().await.unwrap().to_vec(), receipt);
    // Cancelling Amara's share before it ships releases its hold; the order is then complete.
    let cancelled = buyer
        .call::<Value>(reqwest::Method::POST, &format!("/v1/orders/{order_id}/shares/0/cancel"), None, None)
        .await
        .unwrap()
        .body;
    assert_eq!(
        (cancelled["released_minor"].as_u64(), cancelled["order_state"].as_str()),
        (Some(20 * 2_600), Some("completed"))
    );
    let me = wire_json(&buyer.me().await.unwrap());
    assert_eq!((me["held_minor"].as_i64(), me["balance_minor"].as_i64()), (Some(0), Some(150_000 - 15 * 2_900)));

    // An order the owner declines holds nothing and is cancelled; the agent cannot decline for it either.
    let ask = json!({"item": "cushion cover", "quantity": 2, "max_unit_price_minor": 3000, "deadline_ms": deadline});
    let third = buyer
        .call::<Value>(reqwest::Method::POST, "/v1/rfqs", Some(bazaar_sdk::Body::json(ask)), Some("rfq-3"))
        .await
        .unwrap()
        .body;
    let third = third["id"].as_str().unwrap().to_string();
    let body = json!({"listing": makers[0].1, "unit_price_minor": 2_600, "quantity": 2});
    makers[0]
        .0
        .call::<Value>(
            reqwest::Method::POST,
            &format!("/v1/rfqs/{third}/offers"),
            Some(bazaar_sdk::Body::json(body)),
            None,
        )
        .await
        .unwrap();
    buyer.call::<Value>(reqwest::Method::POST, &format!("/v1/rfqs/{third}/close"), None, None).await.unwrap();
    let small = json!({"rfq": third, "require_approval": true});
    let small = buyer
        .call::<Value>(reqwest::Method::POST, "/v1/orders", Some(bazaar_sdk::Body::json(small)), Some("order-3"))
        .await
        .unwrap()
        .body;
    assert_eq!(small["state"], "awaiting_approval", "asked to wait even under the policy's amount");
    let decline = format!("/v1/orders/{}/decline", small["id"].as_str().unwrap());
    let by_agent = buyer.call::<Value>(reqwest::Method::POST, &decline, None, None).await.unwrap_err();
    assert_eq!(by_agent.code(), Some("approval_by_person"));
    let declined = hotel.call::<Value>(reqwest::Method::POST, &decline, None, None).await.unwrap().body;
    assert_eq!(
        (declined["state"].as_str(), declined["lines"][0]["state"].as_str()),
        (Some("cancelled"), Some("cancelled"))
    );
    assert_eq!(wire_json(&buyer.me().await.unwrap())["held_minor"], 0, "nothing was held for the declined order");
    common::assert_store_audit_passes(&local).await;
    std::fs::remove_dir_all(&dir).ok();
}

struct SdkProblem {
    body: Value,
}

fn problem(error: bazaar_sdk::SdkError) -> SdkProblem {
    match error {
        bazaar_sdk::SdkError::Problem { body, .. } => SdkProblem { body },
        other => panic!("not a problem: {other}"),
    }
}

/// The whole cushion-cover story (the demo's storefront chapter) through REST on PostgreSQL.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cushion_cover_story_on_postgres() {
    let database = common::ThrowawayDatabase::create(&format!("bazaar_market_{}", std::process::id())).await;
    let local = database.registry().await;
    let report = bazaar_cli::demo::market::market_story(&local, &|line| eprintln!("{line}")).await.unwrap();
    assert_eq!(report.allocation["filled"], 40);
    assert_eq!(report.agent_approval_code, "approval_by_person");
    assert_eq!(report.order["state"], "completed");
    assert_eq!(report.paid.len(), 4);
    assert_eq!(report.unmet["unmet"][0]["query"], "linen napkin", "search and demand on PostgreSQL");
    // Above the escrow threshold each share rode an escrowed contract, released on its proof.
    assert!(report.order["total"].as_u64().unwrap() > bazaar_types::limits::ESCROW_THRESHOLD_MINOR);
    let operator = bazaar_sdk::Client::new(&local.url, Some(local.operator_credential.clone()));
    for line in report.order["lines"].as_array().unwrap() {
        let contract =
            wire_json(&operator.contract(line["contract"].as_str().expect("an escrowed share")).await.unwrap());
        assert_eq!(contract["state"], "completed", "{contract}");
        assert_eq!(contract["milestones"][0]["state"], "released");
        assert_eq!(contract["milestones"][0]["evidence_sha256"], line["proof"]["receipt_sha256"]);
        assert_eq!(contract["arbiter"], bazaar_core::model::DESK_ID);
    }
    common::assert_store_audit_passes(&local).await;
    drop(local);
    database.drop().await;
}

/// Above the escrow threshold (set low here) an order's shares ride escrowed
/// contracts: a share paid on proof is a released milestone the buyer may
/// still dispute; a share cancelled before shipment voids its contract; a
/// share whose milestone the buyer disputed through the contract routes is
/// settled there: its proof and its cancel are refused (`milestone_state`)
/// and nothing moves twice.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn orders_above_the_threshold_ride_escrow_and_stay_disputable() {
    let dir = common::fresh_dir("bazaar-order-escrow");
    let config = Config { escrow_threshold: bazaar_types::Amount(1_000), ..Config::standard() };
    let local = embedded_registry_with(&dir, Some("oe-op".into()), config).await.unwrap();
    let operator = bazaar_sdk::Client::new(&local.url, Some("oe-op".into()));
    let mut makers = Vec::new();
    for name in ["oe-amara", "oe-lucia", "oe-noor"] {
        let (_, maker) = enroll_pair(&operator, &format!("{name}-owner"), name).await.unwrap();
        let listed = wire_json(
            &maker
                .put_listing(&serde_json::from_value(maker_listing("cc", 3_000, 2_000, 2, 20, 1, "en")).unwrap())
                .await
                .unwrap(),
        );
        let did = maker.me().await.unwrap().member.id;
        makers.push((maker, listed["id"].as_str().unwrap().to_string(), did));
    }
    let (hotel, buyer) = enroll_pair(&operator, "oe-hotel", "oe-buyer").await.unwrap();
    let funding = common::Funding { mint: (100_000, "m"), fund: (100_000, "f"), budget: [100_000, 100_000, 100_000] };
    common::fund_agent(&operator, &hotel, "oe-buyer", funding).await;
    let deadline = bazaar_types::Clock::now(local.clock.as_ref()).ms() + 10 * 86_400_000;
    let ask = json!({"item": "embroidered cushion cover", "quantity": 6, "max_unit_price_minor": 3000, "deadline_ms": deadline});
    let rfq = buyer
        .call::<Value>(reqwest::Method::POST, "/v1/rfqs", Some(bazaar_sdk::Body::json(ask)), Some("oe-rfq"))
        .await
        .unwrap()
        .body;
    let rfq = rfq["id"].as_str().unwrap().to_string();
    for (maker, listing, _) in &makers {
        maker.make_offer(&rfq, listing, 2_500, 2).await.unwrap();
    }
    buyer.call::<Value>(reqwest::Method::POST, &format!("/v1/rfqs/{rfq}/close"), None, None).await.unwrap();
    let order = buyer
        .call::<Value>(
            reqwest::Method::POST,
            "/v1/orders",
            Some(bazaar_sdk::Body::json(json!({"rfq": rfq}))),
            Some("oe-order"),
        )
        .await
        .unwrap()
        .body;
    assert_eq!(order["state"], "authorized", "no policy: authorized at once");
    let order_id = order["id"].as_str().unwrap().to_string();
    let contract_of = |n: usize| order["lines"][n]["contract"].as_str().expect("an escrowed share").to_string();
    let maker_of = |n: usize| {
        let seller = order["lines"][n]["seller"].as_str().unwrap();
        makers.iter().find(|(_, _, did)| did == seller).unwrap().0.clone()
    };
    let first = maker_of(0);
    let held = wire_json(&buyer.contract(&contract_of(0)).await.unwrap());
    assert_eq!((held["state"].as_str(), held["held_minor"].as_u64()), (Some("accepted"), Some(5_000)));

    // Share 0 is proved and paid: its milestone is released, and the buyer may still dispute it.
    first.prove_shipment(&order_id, 0, "TRK0", "image/png", b"receipt zero".to_vec()).await.unwrap();
    let released = wire_json(&buyer.contract(&contract_of(0)).await.unwrap());
    assert_eq!(released["milestones"][0]["state"], "released");
    let subject =
        bazaar_sdk::wire::dispute::DisputeSubject::Milestone { contract: contract_of(0).to_string(), index: 0 };
    let filed = buyer.file_dispute(subject, "not_as_described", 5_000, "wrong colour").await.unwrap();
    assert_eq!(filed.body.phase, "filed");
    // Share 1 is cancelled before shipment: its contract is voided and the hold released.
    let cancelled = buyer
        .call::<Value>(reqwest::Method::POST, &format!("/v1/orders/{order_id}/shares/1/cancel"), None, None)
        .await
        .unwrap()
        .body;
    assert_eq!(cancelled["released_minor"], 5_000);
    let voided = wire_json(&buyer.contract(&contract_of(1)).await.unwrap());
    assert_eq!(
        (voided["state"].as_str(), voided["milestones"][0]["state"].as_str()),
        (Some("cancelled"), Some("voided"))
    );
    // Share 2's milestone is disputed while pending, through the contract routes: it is settled there now.
    let subject =
        bazaar_sdk::wire::dispute::DisputeSubject::Milestone { contract: contract_of(2).to_string(), index: 0 };
    buyer.file_dispute(subject, "not_delivered", 5_000, "nothing shipped").await.unwrap();
    let available = wire_json(&buyer.me().await.unwrap())["available_minor"].clone();
    let proof = maker_of(2).prove_shipment(&order_id, 2, "TRK2", "image/png", b"receipt two".to_vec()).await;
    assert_eq!(proof.unwrap_err().code(), Some("milestone_state"), "not paid past its dispute");
    let cancel =
        buyer.call::<Value>(reqwest::Method::POST, &format!("/v1/orders/{order_id}/shares/2/cancel"), None, None).await;
    assert_eq!(cancel.unwrap_err().code(), Some("milestone_state"), "not voided past its dispute");
    let disputed = wire_json(&buyer.contract(&contract_of(2)).await.unwrap());
    assert_eq!(
        (disputed["milestones"][0]["state"].as_str(), disputed["held_minor"].as_u64()),
        (Some("disputed"), Some(5_000)),
        "still held, once"
    );
    assert_eq!(wire_json(&buyer.me().await.unwrap())["available_minor"], available, "nothing moved");
    common::assert_store_audit_passes(&local).await;
    std::fs::remove_dir_all(&dir).ok();
}

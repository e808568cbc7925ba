//! The storefront over HTTP on the embedded store: sellers' agents list and
//! relist products, a bad listing is refused with `listing_invalid`, members
//! search (words as prefixes, plurals folded), and searches that find nothing
//! are listed as unmet demand, most frequent first.

use bazaar_cli::demo::{embedded_registry_with, enroll_pair};
use bazaar_core::apply::Config;
use serde_json::{json, Value};

fn listing(sku: &str, title: &str, tags: &[&str], language: &str) -> Value {
    json!({"sku": sku, "title": title, "description": "Made to order, by hand.", "tags": tags,
        "list_price_minor": 3200, "floor_minor": 2400, "max_discount_bps": 2000,
        "capacity_per_day": 2, "capacity_max": 20, "lead_time_days": 3, "notice_days": 7, "language": language})
}

fn skus(found: &Value) -> Vec<String> {
    let mut skus: Vec<String> =
        found["listings"].as_array().unwrap().iter().map(|l| l["sku"].as_str().unwrap().to_string()).collect();
    skus.sort();
    skus
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sellers_list_members_search_and_unmet_demand_is_counted() {
    let dir = std::env::temp_dir().join(format!("bazaar-market-{}", std::process::id()));
    std::fs::remove_dir_all(&dir).ok();
    std::fs::create_dir_all(&dir).unwrap();
    let local = embedded_registry_with(&dir, Some("mk-op".into()), Config::standard()).await.unwrap();
    let operator = bazaar_sdk::Client::new(&local.url, Some("mk-op".into()));
    let (_, amara) = enroll_pair(&operator, "amara-owner", "amara").await.unwrap();
    let (_, lucia) = enroll_pair(&operator, "lucia-owner", "lucia").await.unwrap();
    let (_, buyer) = enroll_pair(&operator, "shop-owner", "shopper").await.unwrap();

    let listed =
        amara.put_listing(listing("cc-1", "Hand-embroidered cushion cover", &["cushion"], "hi")).await.unwrap();
    assert_eq!(listed["lowest_price_minor"], 2560, "max(floor 2400, 3200 less 20 %)");
    assert_eq!(listed["language"], "hi");
    lucia.put_listing(listing("tr-1", "Embroidered table runner", &["table"], "es-MX")).await.unwrap();
    let id = listed["id"].as_str().unwrap();
    assert_eq!(buyer.listing(id).await.unwrap()["sku"], "cc-1");

    let bad = lucia
        .put_listing(json!({"sku": "x", "title": "Floor above list", "list_price_minor": 100,
        "floor_minor": 200, "capacity_per_day": 1, "capacity_max": 1, "language": "es"}))
        .await
        .unwrap_err();
    assert_eq!((bad.status(), bad.code()), (Some(400), Some("listing_invalid")));
    let bad = lucia
        .put_listing(json!({"sku": "y", "title": "Bad language", "list_price_minor": 100,
        "floor_minor": 50, "capacity_per_day": 1, "capacity_max": 1, "language": "spanish!"}))
        .await
        .unwrap_err();
    assert_eq!(bad.code(), Some("listing_invalid"));

    assert_eq!(skus(&buyer.search("Cushion Covers").await.unwrap()), ["cc-1"]);
    assert_eq!(skus(&buyer.search("embroid").await.unwrap()), ["cc-1", "tr-1"]);
    for _ in 0..3 {
        assert!(skus(&buyer.search("lampshades").await.unwrap()).is_empty());
    }
    assert!(skus(&buyer.search("quilt").await.unwrap()).is_empty());
    let unmet = buyer.unmet_searches().await.unwrap();
    assert_eq!(unmet["unmet"][0]["query"], "lampshade");
    assert_eq!(unmet["unmet"][0]["count"], 3);
    assert_eq!(unmet["unmet"][1]["query"], "quilt");
    assert_eq!(unmet["unmet"].as_array().unwrap().len(), 2, "searches that found something are not unmet");

    // Relisting the SKU changes its terms and words; a maker now offers lampshades.
    amara.put_listing(listing("cc-1", "Hand-embroidered lampshade", &["lamp"], "hi")).await.unwrap();
    assert_eq!(skus(&buyer.search("lampshade").await.unwrap()), ["cc-1"]);
    let unmet = buyer.unmet_searches().await.unwrap();
    assert_eq!(unmet["unmet"][0]["query"], "quilt", "met now");
    let empty = buyer.search("!!!").await.unwrap_err();
    assert_eq!(empty.code(), Some("invalid_request"));
    let anonymous = bazaar_sdk::Client::new(&local.url, None).search("cushion").await.unwrap_err();
    assert_eq!(anonymous.status(), Some(401));
    let report = bazaar_store::audit::audit(local.state.store.as_ref(), &|_| {}).await.unwrap();
    assert!(report.ok, "{:?}", report.problems);
    std::fs::remove_dir_all(&dir).ok();
}

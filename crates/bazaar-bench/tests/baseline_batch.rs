//! The baseline peer's batched routes: every item as its single call would answer it, a duplicate replayed, a
//! refused item failing alone and leaving nothing behind, and one transfer per order in the ledger the gate reads.
//! Needs PostgreSQL (`BAZAAR_TEST_DATABASE_URL`); fails, never skips, without it.

use bazaar_bench::{baseline, servers};
use serde_json::{json, Value};
use std::time::Duration;

/// The server's URL without its database (the env names `/postgres`).
fn server_url() -> String {
    let url = std::env::var("BAZAAR_TEST_DATABASE_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/postgres".into());
    match url.rfind('/') {
        Some(slash) if slash > url.find("://").map_or(0, |s| s + 2) => url[..slash].to_string(),
        _ => url,
    }
}

async fn post(http: &reqwest::Client, base: &str, path: &str, credential: &str, body: Value) -> Value {
    let response = http.post(format!("{base}{path}")).bearer_auth(credential).json(&body).send().await.unwrap();
    assert_eq!(response.status(), 200, "{path}");
    response.json().await.unwrap()
}

fn statuses(answer: &Value) -> Vec<(u64, bool)> {
    let results = answer["results"].as_array().expect("results");
    results.iter().map(|r| (r["status"].as_u64().unwrap(), r["replayed"].as_bool().unwrap())).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_answers_each_item_as_its_single_call_and_pays_each_order_once() {
    let base = server_url();
    let admin = servers::connect(&servers::database_url(&base, "postgres")).await.expect("PostgreSQL reachable");
    let name = format!("baseline_batch_test_{}", std::process::id());
    servers::create_database(&admin, &name).await.unwrap();
    let url = servers::database_url(&base, &name);
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let peer = tokio::spawn({
        let url = url.clone();
        async move { baseline::serve(&url, port, 2).await }
    });
    let http = reqwest::Client::new();
    let peer_url = format!("http://127.0.0.1:{port}");
    for _ in 0..100 {
        if http.get(format!("{peer_url}/healthz")).send().await.is_ok() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let client = servers::connect(&url).await.unwrap();
    let (buyers, merchants) = baseline::setup(&client, 1, 1, 1_000).await.unwrap();
    let (buyer, merchant) = (&buyers[0], &merchants[0]);

    let token = |order: &str, max: u64| json!({"merchant": merchant.id, "max_amount_minor": max, "order_id": order, "resource": "r"});
    let items = json!({"items": [token("a", 300), token("b", 300), token("a", 300), token("c", 900)]});
    let issued = post(&http, &peer_url, "/v1/tokens/batch", &buyer.credential, items).await;
    assert_eq!(statuses(&issued), [(201, false), (201, false), (201, true), (409, false)], "{issued}");
    let results = issued["results"].as_array().unwrap();
    assert_eq!(results[2]["body"]["token"], results[0]["body"]["token"], "the same order is the same token");
    assert_eq!(results[3]["body"]["code"], "insufficient_funds");

    let settle =
        |n: usize, order: &str| json!({"token": results[n]["body"]["token"], "amount_minor": 300, "order_id": order});
    let bogus = json!({"token": "bt_none", "amount_minor": 300, "order_id": "d"});
    let mut bad_key = settle(1, "b");
    bad_key["idempotency_key"] = json!("");
    let items = json!({"items": [settle(0, "a"), settle(1, "b"), settle(0, "a"), bogus, bad_key]});
    let settled = post(&http, &peer_url, "/v1/settlements/batch", &merchant.credential, items).await;
    let expected = [(200, false), (200, false), (200, true), (404, false), (422, false)];
    assert_eq!(statuses(&settled), expected, "{settled}");
    assert_eq!(settled["results"][4]["body"]["code"], "idempotency_key_invalid");
    let answers = settled["results"].as_array().unwrap();
    assert_eq!(answers[2]["body"], answers[0]["body"], "a replay answers as the first did");

    let empty = http.post(format!("{peer_url}/v1/tokens/batch")).bearer_auth(&buyer.credential);
    let empty = empty.json(&json!({"items": []})).send().await.unwrap();
    assert_eq!(empty.status(), 422, "a batch carries at least one item");

    let ledger = baseline::ledger(&client).await.unwrap();
    assert_eq!(ledger.transfers, 2, "two orders paid");
    assert_eq!((ledger.keys_with_many_transfers, ledger.orders_with_many_transfers), (0, 0), "each once");
    assert_eq!((ledger.balance_sum, ledger.held_sum, ledger.overdrawn_accounts), (1_000, 0, 0), "{ledger:?}");
    assert_eq!(ledger.pending_token_sum, 0, "the refused token left nothing behind");
    peer.abort();
    drop(client);
    servers::drop_database(&admin, &name).await.unwrap();
}

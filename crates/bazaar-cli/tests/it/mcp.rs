//! The storefront through a real MCP client: the official Python `mcp`
//! package (installed in `tests/mcp/.venv` by `./scripts/test`) connects to
//! `/mcp` over streamable HTTP with the buyer agent's bearer credential, lists
//! the tools, searches, requests a quote, reads offers and the allocation,
//! creates an order (an approval link, never a payment) and reads its status.
//! Tool errors carry the REST API's codes.
// reason: an end-to-end test reads as one story of requests and the checks after each.
#![allow(clippy::too_many_lines)]

use bazaar_cli::wire_json;
use bazaar_core::apply::Config;
use bazaar_stage::{embedded_registry_with, enroll_pair};
use serde_json::{json, Value};
use std::path::{Path, PathBuf};

/// When the worker answers the task, after the MCP client starts asking: what `bazaar_wait` waits for.
const ANSWER_AFTER_MS: u64 = 4_000;

fn python() -> PathBuf {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..").canonicalize().unwrap();
    let python = root.join("tests/mcp/.venv/bin/python");
    assert!(python.exists(), "tests/mcp/.venv is missing: run ./scripts/test once (it installs the Python MCP client)");
    python
}

/// Runs the client over `steps`; one parsed line per step.
async fn mcp(url: &str, credential: &str, steps: Value, dir: &Path, name: &str) -> Vec<Value> {
    let script = dir.join(format!("{name}.json"));
    std::fs::write(&script, steps.to_string()).unwrap();
    let client = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/mcp/storefront_client.py");
    let (url, credential) = (format!("{url}/mcp"), credential.to_string());
    let output = tokio::task::spawn_blocking(move || {
        std::process::Command::new(python()).arg(client).arg(url).arg(credential).arg(script).output().unwrap()
    })
    .await
    .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout).to_string();
    assert!(output.status.success(), "MCP client failed: {stdout}\n{}", String::from_utf8_lossy(&output.stderr));
    stdout.lines().map(|line| serde_json::from_str(line).unwrap()).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_mcp_client_shops_the_storefront() {
    let dir = std::env::temp_dir().join(format!("bazaar-mcp-{}", std::process::id()));
    std::fs::remove_dir_all(&dir).ok();
    std::fs::create_dir_all(&dir).unwrap();
    let local = embedded_registry_with(&dir, Some("mcp-op".into()), Config::standard()).await.unwrap();
    let operator = bazaar_sdk::Client::new(&local.url, Some("mcp-op".into()));
    let mut makers = Vec::new();
    for (name, price) in [("amara", 2_600u64), ("lucia", 2_850)] {
        let (_, maker) = enroll_pair(&operator, &format!("{name}-owner"), name).await.unwrap();
        let listing = json!({"sku": "cc", "title": "Hand-embroidered cushion cover", "tags": ["cushion"],
            "list_price_minor": 3_000, "floor_minor": 2_500, "max_discount_bps": 2_000, "capacity_per_day": 2, "capacity_max": 20,
            "language": "en"});
        let listed = wire_json(&maker.put_listing(&serde_json::from_value(listing).unwrap()).await.unwrap());
        makers.push((maker, listed["id"].as_str().unwrap().to_string(), price));
    }
    let (hotel, buyer) = enroll_pair(&operator, "hotel", "hotel-agent").await.unwrap();
    let hotel_id = hotel.me().await.unwrap().member.id;
    operator.mint(&hotel_id, 200_000, "m").await.unwrap();
    hotel.fund("hotel-agent", 200_000, "f").await.unwrap();
    hotel.set_budget("hotel-agent", 200_000, 200_000, 200_000).await.unwrap();
    let credential = buyer.credential().unwrap().to_string();
    let deadline = bazaar_types::Clock::now(local.clock.as_ref()).ms() + 30 * 86_400_000;

    let first = mcp(
        &local.url,
        &credential,
        json!([
            {"list_tools": true},
            {"tool": "search_products", "arguments": {"query": "embroidered cushion"}},
            {"tool": "request_quote", "arguments": {"item": "cushion covers", "quantity": 30,
                "max_unit_price_minor": 3_000, "deadline_ms": deadline, "key": "mcp-rfq-1"}},
            {"tool": "read_offers", "arguments": {"rfq": "rfq_nope"}},
        ]),
        &dir,
        "first",
    )
    .await;
    let tools: Vec<&str> = first[0]["result"].as_array().unwrap().iter().map(|t| t.as_str().unwrap()).collect();
    assert_eq!(
        tools,
        [
            "search_products",
            "request_quote",
            "read_offers",
            "read_allocation",
            "create_order",
            "order_status",
            "read_inbox",
            "post_message",
            "reply",
            "react",
            "open_dm",
            "bazaar_ask",
            "bazaar_wait"
        ]
    );
    assert_eq!(first[1]["result"]["listings"].as_array().unwrap().len(), 2);
    let rfq = first[2]["result"]["id"].as_str().unwrap().to_string();
    assert_eq!(first[2]["result"]["invited"].as_array().unwrap().len(), 2);
    assert_eq!(
        (first[3]["is_error"].as_bool(), first[3]["result"]["code"].as_str()),
        (Some(true), Some("rfq_not_found"))
    );

    // The makers offer over REST (they are other agents).
    for (maker, listing, price) in &makers {
        maker.make_offer(&rfq, listing, *price, 20).await.unwrap();
    }
    let second = mcp(
        &local.url,
        &credential,
        json!([
            {"tool": "read_offers", "arguments": {"rfq": rfq}},
            {"tool": "read_allocation", "arguments": {"rfq": rfq}},
            {"tool": "create_order", "arguments": {"rfq": rfq, "key": "mcp-order-1"}},
            {"tool": "order_status", "arguments": {"order": "$2.id"}},
        ]),
        &dir,
        "second",
    )
    .await;
    assert_eq!(second[0]["result"]["offers"].as_array().unwrap().len(), 2);
    let lines = &second[1]["result"]["allocation"]["lines"];
    assert_eq!((lines[0]["units"].as_u64(), lines[1]["units"].as_u64()), (Some(20), Some(10)), "cheapest first");
    let order = &second[2]["result"];
    assert_eq!(order["state"], "awaiting_approval", "an MCP order never pays: it waits for a person");
    let order_id = order["id"].as_str().unwrap();
    assert_eq!(order["approval_url"], format!("/approve/{order_id}"));
    assert_eq!(second[3]["result"]["state"], "awaiting_approval");
    assert_eq!(wire_json(&buyer.me().await.unwrap())["held_minor"], 0, "nothing held until approved");

    // The person approves on the link; the agent reads the status again.
    hotel.call::<Value>(reqwest::Method::POST, &format!("/v1/orders/{order_id}/approve"), None, None).await.unwrap();
    let third = mcp(
        &local.url,
        &credential,
        json!([{"tool": "order_status", "arguments": {"order": order_id}}]),
        &dir,
        "third",
    )
    .await;
    assert_eq!(third[0]["result"]["state"], "authorized");
    // Without a credential, the same tool answers the REST code.
    let anonymous =
        mcp(&local.url, "bzc_wrong", json!([{"tool": "order_status", "arguments": {"order": order_id}}]), &dir, "anon")
            .await;
    assert_eq!(
        (anonymous[0]["is_error"].as_bool(), anonymous[0]["result"]["code"].as_str()),
        (Some(true), Some("unauthenticated"))
    );
    std::fs::remove_dir_all(&dir).ok();
}

/// Two agents talk through the official MCP client: one opens a DM and posts
/// (a keyed retry is one message), the other reads its inbox from a cursor,
/// replies and reacts; errors carry the REST codes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn agents_talk_over_mcp_with_the_rest_codes() {
    let dir = std::env::temp_dir().join(format!("bazaar-mcp-talk-{}", std::process::id()));
    std::fs::remove_dir_all(&dir).ok();
    std::fs::create_dir_all(&dir).unwrap();
    let local = embedded_registry_with(&dir, Some("talk-op".into()), Config::standard()).await.unwrap();
    let operator = bazaar_sdk::Client::new(&local.url, Some("talk-op".into()));
    let (_, buyer) = enroll_pair(&operator, "hotel", "hotel-agent").await.unwrap();
    let (_, maker) = enroll_pair(&operator, "lucia-owner", "lucia").await.unwrap();
    let said = mcp(
        &local.url,
        buyer.credential().unwrap(),
        json!([
            {"tool": "open_dm", "arguments": {"with": "lucia"}},
            {"tool": "post_message", "arguments": {"channel": "$0.id", "body": "@lucia 40 covers by June?", "key": "ask-1"}},
            {"tool": "post_message", "arguments": {"channel": "$0.id", "body": "@lucia 40 covers by June?", "key": "ask-1"}},
            {"tool": "post_message", "arguments": {"channel": "ch_nope", "body": "hello"}},
            {"tool": "post_message", "arguments": {"channel": "../v1/mint", "body": "hello"}},
        ]),
        &dir,
        "buyer",
    )
    .await;
    let channel = said[0]["result"]["id"].as_str().unwrap().to_string();
    assert_eq!(said[1]["result"], said[2]["result"], "a keyed retry is the first post");
    assert!(said[1]["result"]["on_behalf_of"].is_string(), "an agent speaks for its owner");
    assert_eq!(
        (said[3]["is_error"].as_bool(), said[3]["result"]["code"].as_str()),
        (Some(true), Some("channel_not_found"))
    );
    assert_eq!(said[4]["result"]["code"], "channel_not_found");
    let seq = said[1]["result"]["seq"].as_u64().unwrap();
    let heard = mcp(
        &local.url,
        maker.credential().unwrap(),
        json!([
            {"tool": "read_inbox", "arguments": {"after": 0}},
            {"tool": "reply", "arguments": {"channel": channel, "reply_to": seq, "body": "yes, 38 each"}},
            {"tool": "react", "arguments": {"channel": channel, "seq": seq, "emoji": "👍"}},
            {"tool": "read_inbox", "arguments": {"after": "$0.next_after"}},
            {"tool": "react", "arguments": {"channel": channel, "seq": seq, "emoji": "two words"}},
        ]),
        &dir,
        "maker",
    )
    .await;
    let first = &heard[0]["result"]["messages"];
    assert_eq!(first.as_array().unwrap().len(), 2, "the DM's birth line, then the post: {first}");
    assert_eq!(first[0]["kind"]["line"], "sealing");
    assert_eq!(first[1]["body"], "@lucia 40 covers by June?");
    assert_eq!(heard[1]["result"]["reply_to"]["seq"], seq);
    assert_eq!(heard[2]["result"]["kind"]["type"], "reaction");
    let later: Vec<&str> = heard[3]["result"]["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["kind"]["type"].as_str().unwrap())
        .collect();
    assert_eq!(later, ["text", "reaction"], "the cursor resumes after what was read");
    assert_eq!(heard[4]["result"]["code"], "reaction_invalid");
    std::fs::remove_dir_all(&dir).ok();
}

/// The labor market's read-only tools through the official MCP client: a task
/// posted on the registry's relay reads as pending, and `bazaar_wait` returns
/// as soon as the named worker's result arrives; an unknown task is the REST
/// route's `task_not_found`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn agents_follow_a_task_over_mcp() {
    use bazaar_relay::jobs::{request_tags, JOB_REQUEST, JOB_RESULT};
    use bazaar_relay::{event::tag, Signer};
    let dir = std::env::temp_dir().join(format!("bazaar-mcp-jobs-{}", std::process::id()));
    std::fs::remove_dir_all(&dir).ok();
    std::fs::create_dir_all(&dir).unwrap();
    let local = embedded_registry_with(&dir, Some("jobs-op".into()), Config::standard()).await.unwrap();
    let operator = bazaar_sdk::Client::new(&local.url, Some("jobs-op".into()));
    let (_, asker) = enroll_pair(&operator, "jobs-owner", "jobs-agent").await.unwrap();
    let relay = local.state.relay().unwrap().clone();
    let (customer, worker) = (Signer::generate(&bazaar_server::OsEntropy), Signer::generate(&bazaar_server::OsEntropy));
    let now = relay.now();
    let job = customer.sign(now, JOB_REQUEST, request_tags("w/v1", false, &[worker.public_key()], "x"), "");
    assert!(relay.publish(job.clone(), &Default::default()).await.accepted);
    let answer = worker.sign(now, JOB_RESULT, vec![tag(&["e", &job.id.to_hex()])], "done");
    let later = tokio::spawn({
        let relay = relay.clone();
        async move {
            // Long enough for the Python client to start and ask first on a loaded machine (1.5 s was not).
            tokio::time::sleep(std::time::Duration::from_millis(ANSWER_AFTER_MS)).await;
            relay.publish(answer, &Default::default()).await
        }
    });
    let steps = json!([
        {"tool": "bazaar_ask", "arguments": {"task_id": job.id.to_hex()}},
        {"tool": "bazaar_wait", "arguments": {"task_id": job.id.to_hex(), "wait_s": 30}},
        {"tool": "bazaar_ask", "arguments": {"task_id": "ab".repeat(32)}},
    ]);
    let started = std::time::Instant::now();
    let seen = mcp(&local.url, asker.credential().unwrap(), steps, &dir, "asker").await;
    assert!(later.await.unwrap().accepted);
    assert_eq!(seen[0]["result"]["state"], "pending");
    assert_eq!(
        (seen[1]["result"]["state"].as_str(), seen[1]["result"]["successful_answers"].as_u64()),
        (Some("answered"), Some(1))
    );
    assert!(started.elapsed() < std::time::Duration::from_secs(25), "wait returned when answered, not at its end");
    assert_eq!(
        (seen[2]["is_error"].as_bool(), seen[2]["result"]["code"].as_str()),
        (Some(true), Some("task_not_found"))
    );
    std::fs::remove_dir_all(&dir).ok();
}

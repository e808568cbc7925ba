//! The chamber's run buttons: the scripted story and the AI buyer agent, each
//! against a live registry with a fresh cast, each ending at the order's
//! approval link (neither pays). The AI agent runs against a fixture
//! chat-completions server that answers with scripted tool calls: its calls
//! reach the storefront's MCP tools and end at the link; a model that asks
//! for a tool that does not exist stops the run cleanly with a clear error
//! and nothing ordered. Only the operator presses.
// reason: an end-to-end test reads as one story of requests and the checks after each.
#![allow(clippy::too_many_lines)]

use crate::common;

use axum::extract::State;
use axum::Json;
use bazaar_agents::buyer::ModelConfig;
use bazaar_cli::demo::runs::ChamberRuns;
use bazaar_cli::wire_json;
use bazaar_stage::LocalRegistry;
use serde_json::{json, Value};
use std::sync::{Arc, Mutex};

/// What the fixture model saw: every request body, and the bearer it was sent.
#[derive(Default)]
struct Seen {
    requests: Vec<Value>,
    bearer: Option<String>,
}

#[derive(Clone)]
struct Fixture {
    script: &'static str,
    deadline_ms: i64,
    seen: Arc<Mutex<Seen>>,
}

fn tool_call(n: usize, name: &str, arguments: Value) -> Value {
    json!({"choices": [{"index": 0, "finish_reason": "tool_calls", "message": {"role": "assistant", "content": null,
        "tool_calls": [{"id": format!("call_{n}"), "type": "function",
            "function": {"name": name, "arguments": arguments.to_string()}}]}}]})
}

/// The scripted model: the next tool call from how many tool answers it has read so far.
async fn chat(State(fixture): State<Fixture>, headers: axum::http::HeaderMap, Json(body): Json<Value>) -> Json<Value> {
    let bearer = headers.get("authorization").and_then(|v| v.to_str().ok()).map(str::to_string);
    let messages = body["messages"].as_array().cloned().unwrap_or_default();
    let answers: Vec<Value> = messages
        .iter()
        .filter(|m| m["role"] == "tool")
        .map(|m| serde_json::from_str(m["content"].as_str().unwrap_or("null")).unwrap_or(Value::Null))
        .collect();
    {
        let mut seen = fixture.seen.lock().unwrap();
        seen.requests.push(body);
        seen.bearer = bearer;
    }
    let rfq = answers.iter().find_map(|a| a["id"].as_str().filter(|id| id.starts_with("rfq_")).map(str::to_string));
    Json(match (fixture.script, answers.len()) {
        ("shop", 0) => tool_call(0, "search_products", json!({"query": "embroidered cushion"})),
        ("shop", 1) => tool_call(
            1,
            "request_quote",
            json!({"item": "hand-embroidered cushion covers", "quantity": 40, "max_unit_price_minor": 3000,
                "deadline_ms": fixture.deadline_ms, "key": "ai-ask-1"}),
        ),
        ("shop", 2) => tool_call(2, "read_offers", json!({"rfq": rfq})),
        ("shop", _) => tool_call(3, "create_order", json!({"rfq": rfq, "key": "ai-order-1"})),
        _ => tool_call(0, "pay_the_makers_now", json!({"amount_minor": 100000})),
    })
}

async fn fixture_model(script: &'static str, deadline_ms: i64) -> (String, Arc<Mutex<Seen>>) {
    let seen = Arc::new(Mutex::new(Seen::default()));
    let app = axum::Router::new().route("/v1/chat/completions", axum::routing::post(chat)).with_state(Fixture {
        script,
        deadline_ms,
        seen: seen.clone(),
    });
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/v1", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (url, seen)
}

async fn post(local: &LocalRegistry, path: &str, credential: Option<&str>, body: Value) -> (u16, Value) {
    let mut request = reqwest::Client::new().post(format!("{}{path}", local.url)).json(&body);
    if let Some(credential) = credential {
        request = request.bearer_auth(credential);
    }
    let answer = request.send().await.unwrap();
    (answer.status().as_u16(), answer.json().await.unwrap_or(Value::Null))
}

fn attach(local: &LocalRegistry, model: Option<ModelConfig>) {
    let runs = ChamberRuns::new(local.url.clone(), "op".into(), local.clock.clone(), model);
    assert!(local.state.attach_runs(Arc::new(runs)));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_story_runs_to_its_approval_link_for_the_operator_only_and_again() {
    let dir = common::fresh_dir("bazaar-runs-story");
    let (local, _operator) = common::embedded_with_operator(&dir, "op").await;
    let (status, body) = post(&local, "/v1/chamber/runs/story", Some("op"), json!(null)).await;
    assert_eq!((status, body["code"].as_str()), (404, Some("runs_unavailable")), "{body}");
    attach(&local, None);
    let listed: Value = reqwest::get(format!("{}/v1/chamber/runs", local.url)).await.unwrap().json().await.unwrap();
    assert_eq!((listed["story"].as_bool(), listed["agent_model"].is_null()), (Some(true), true), "{listed}");
    let (status, _) = post(&local, "/v1/chamber/runs/story", None, json!(null)).await;
    assert_eq!(status, 401);
    let (owner, _) = bazaar_stage::enroll_pair(&local.operator(), "runs-owner", "runs-agent").await.unwrap();
    let (status, body) = post(&local, "/v1/chamber/runs/story", owner.credential(), json!(null)).await;
    assert_eq!((status, body["code"].as_str()), (403, Some("not_permitted")), "{body}");

    for _ in 0..2 {
        let (status, run) = post(&local, "/v1/chamber/runs/story", Some("op"), json!(null)).await;
        assert_eq!(status, 200, "{run}");
        let link = run["approval_url"].as_str().unwrap();
        assert!(link.starts_with(&format!("{}/approve/ord_", local.url)), "{run}");
        let order = run["order"].as_str().unwrap();
        let hotel = bazaar_sdk::Client::new(&local.url, run["hotel_owner_credential"].as_str().map(str::to_string));
        let waiting =
            hotel.call::<Value>(reqwest::Method::GET, &format!("/v1/orders/{order}"), None, None).await.unwrap().body;
        assert_eq!(waiting["state"], "awaiting_approval", "nothing paid or held before a person approves: {waiting}");
        let refused: Vec<&Value> = run["proposals"].as_array().unwrap().iter().filter(|p| p[3] != "valid").collect();
        assert_eq!(refused.len(), 3, "the story's three refused offers: {run}");
        let approved = hotel
            .call::<Value>(reqwest::Method::POST, &format!("/v1/orders/{order}/approve"), None, None)
            .await
            .unwrap()
            .body;
        assert_eq!(approved["state"], "authorized", "{approved}");
    }
    let (status, body) = post(&local, "/v1/chamber/runs/agent", Some("op"), json!({})).await;
    assert_eq!((status, body["code"].as_str()), (404, Some("agent_model_unconfigured")), "{body}");
    common::assert_store_audit_passes(&local).await;
    std::fs::remove_dir_all(&dir).ok();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_ai_buyer_agent_chooses_the_mcp_tools_and_ends_at_the_approval_link() {
    let dir = common::fresh_dir("bazaar-runs-agent");
    let (local, _operator) = common::embedded_with_operator(&dir, "op").await;
    let deadline = bazaar_types::Clock::now(local.clock.as_ref()).ms() + 20 * 86_400_000;
    let (url, seen) = fixture_model("shop", deadline).await;
    attach(&local, Some(ModelConfig { url, model: "fixture-buyer".into(), key: Some("model-key".into()) }));
    let listed: Value = reqwest::get(format!("{}/v1/chamber/runs", local.url)).await.unwrap().json().await.unwrap();
    assert_eq!(listed["agent_model"], "fixture-buyer");
    let (status, _) = post(&local, "/v1/chamber/runs/agent", Some("op"), json!({"request": ""})).await;
    assert_eq!(status, 400, "an empty request is refused");
    let request = "Forty embroidered cushion covers for the lounge, 3000 each at most.";
    let (status, run) = post(&local, "/v1/chamber/runs/agent", Some("op"), json!({"request": request})).await;
    assert_eq!(status, 200, "{run}");
    let agent = &run["agent"];
    assert_eq!(agent["outcome"], "approval_link", "{run}");
    let tools: Vec<&str> = agent["steps"].as_array().unwrap().iter().map(|s| s["tool"].as_str().unwrap()).collect();
    assert_eq!(tools, ["search_products", "request_quote", "read_offers", "create_order"], "{run}");
    assert!(agent["steps"].as_array().unwrap().iter().all(|s| s["ok"] == true), "{run}");
    let link = agent["approval_url"].as_str().unwrap();
    assert!(link.starts_with(&format!("{}/approve/ord_", local.url)), "{run}");
    let order_id = link.rsplit('/').next().unwrap();
    let hotel = bazaar_sdk::Client::new(&local.url, run["hotel_owner_credential"].as_str().map(str::to_string));
    let order =
        hotel.call::<Value>(reqwest::Method::GET, &format!("/v1/orders/{order_id}"), None, None).await.unwrap().body;
    assert_eq!(order["state"], "awaiting_approval", "the agent cannot pay: {order}");
    assert!(order["total"].as_u64().unwrap() > 0 && order["lines"].as_array().unwrap().len() >= 2, "{order}");
    {
        let seen = seen.lock().unwrap();
        assert_eq!(seen.bearer.as_deref(), Some("Bearer model-key"), "the operator's key reaches the model");
        let first = &seen.requests[0];
        assert_eq!(first["model"], "fixture-buyer");
        assert_eq!(first["messages"][1]["content"], request, "the request in words");
        let offered: Vec<&str> =
            first["tools"].as_array().unwrap().iter().map(|t| t["function"]["name"].as_str().unwrap()).collect();
        assert_eq!(offered.len(), bazaar_agents::buyer::AGENT_TOOLS.len(), "{offered:?}");
        assert!(!offered.contains(&"post_message"), "shopping tools only: {offered:?}");
    }
    common::assert_store_audit_passes(&local).await;
    std::fs::remove_dir_all(&dir).ok();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_model_asking_for_a_tool_that_does_not_exist_stops_cleanly() {
    let dir = common::fresh_dir("bazaar-runs-rogue");
    let (local, operator) = common::embedded_with_operator(&dir, "op").await;
    let (url, seen) = fixture_model("rogue", 0).await;
    attach(&local, Some(ModelConfig { url, model: "rogue".into(), key: None }));
    let before = wire_json(&operator.events(0, 500).await.unwrap())["events"].as_array().unwrap().len();
    let (status, run) = post(&local, "/v1/chamber/runs/agent", Some("op"), json!({})).await;
    assert_eq!(status, 200, "{run}");
    let agent = &run["agent"];
    assert_eq!(
        (agent["outcome"].as_str(), agent["steps"].as_array().map(Vec::len)),
        (Some("stopped"), Some(0)),
        "{run}"
    );
    let error = agent["error"].as_str().unwrap();
    assert!(error.contains("does not exist") && error.contains("pay_the_makers_now"), "{error}");
    assert_eq!(seen.lock().unwrap().requests.len(), 1, "the run stops at once");
    assert!(seen.lock().unwrap().bearer.is_none(), "no key configured, none sent");
    let events = wire_json(&operator.events(0, 500).await.unwrap())["events"].as_array().unwrap().clone();
    let new_kinds: Vec<&str> = events[before..].iter().map(|e| e["kind"].as_str().unwrap()).collect();
    let asked = ["rfq.opened", "rfq.offer", "order.created"];
    assert!(!new_kinds.iter().any(|k| asked.contains(k)), "nothing asked or ordered: {new_kinds:?}");
    std::fs::remove_dir_all(&dir).ok();
}

/// The market story page in Debian's headless Chromium (`tests/browser/story.mjs`): the operator runs the
/// scripted story and every section fills from the live stream; a person approves on the link and the order
/// section says so; the AI button says no model is configured; axe finds nothing serious; it fits a phone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_story_page_fills_each_section_from_the_stream_and_is_approved_on_its_link() {
    let dir = common::fresh_dir("bazaar-story-page");
    let (local, _operator) = common::embedded_with_operator(&dir, "op").await;
    attach(&local, None);
    let args = vec![local.url.clone(), "op".into(), common::screenshot_dir().display().to_string()];
    let (report, exited_ok) = common::browser_driver("story", args).await;
    assert_eq!(report["problems"], json!([]), "{report}");
    for (section, filled) in report["sections"].as_object().unwrap() {
        let expected = !matches!(section.as_str(), "s-payments" | "s-agent");
        assert_eq!(filled.as_bool(), Some(expected), "{section}: {report}");
    }
    let request = report["request"].as_str().unwrap();
    assert!(request.contains("3,000 units") && request.contains("5 makers invited"), "{request}");
    let makers = report["makers"].as_array().unwrap();
    assert_eq!(makers.len(), 5, "every maker who offered, with her limits: {report}");
    assert!(makers.iter().any(|m| m[1] == "es-MX" && m[6] == "5 days"), "{report}");
    let offers: Vec<&str> = report["offers"].as_array().unwrap().iter().map(|v| v.as_str().unwrap()).collect();
    // The story's seven proposals: three refused by code (floor, notice, cap), four valid.
    assert_eq!(offers.len(), 7, "{offers:?}");
    assert_eq!(offers.iter().filter(|v| **v == "valid").count(), 4, "{offers:?}");
    for code in ["offer_below_floor", "offer_notice_too_short", "offer_above_cap"] {
        assert!(offers.contains(&code), "{code}: {offers:?}");
    }
    assert!(report["allocation"].as_str().unwrap().contains("filled 40"), "{report}");
    let order = report["order"].as_str().unwrap();
    assert!(order.contains("It waits for a person"), "{order}");
    assert!(report["link"].as_str().unwrap().starts_with(&format!("{}/approve/ord_", local.url)), "{report}");
    assert_eq!(report["phones"].as_array().unwrap().len(), 5, "{report}");
    assert_eq!(report["decision"]["state"], "authorized", "{report}");
    assert!(report["agent_note"].as_str().unwrap().contains("No model is configured"), "{report}");
    assert_eq!(report["agent_disabled"], true);
    assert_eq!(report["axe"], json!([]), "{report}");
    assert!(report["overflow_px"].as_i64().unwrap() <= 0, "{report}");
    assert!(exited_ok, "{report}");
    std::fs::remove_dir_all(&dir).ok();
}

/// The pilot's proof, live: a hundred paid calls with a buyer crash mid-retry and two merchant crashes, read back
/// through the public API — one settlement per order, the work run once per order, charged once, conserved.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_pilot_run_proves_a_hundred_calls_charged_once() {
    let dir = common::fresh_dir("bazaar-runs-pilot");
    let (local, _operator) = common::embedded_with_operator(&dir, "op").await;
    attach(&local, None);
    let (status, proof) = post(&local, "/v1/chamber/runs/pilot", Some("op"), json!(null)).await;
    assert_eq!(status, 200, "{proof}");
    let calls = bazaar_cli::demo::runs::PILOT_CALLS as u64;
    assert_eq!((proof["settlements"].as_u64(), proof["work_runs"].as_u64()), (Some(calls), Some(calls)), "{proof}");
    assert!(proof["requests_sent"].as_u64().unwrap() > calls, "the crash made re-sends: {proof}");
    assert!(proof["replayed_answers"].as_u64().unwrap() >= 1, "answered from work receipts: {proof}");
    let price = bazaar_cli::demo::restock::PRICE_MINOR as i64;
    assert_eq!(proof["buyer_paid_minor"].as_i64(), Some(price * calls as i64), "charged once per order: {proof}");
    assert_eq!(proof["balance_sum_minor"], "0", "{proof}");
    let (status, again) = post(&local, "/v1/chamber/runs/pilot", Some("op"), json!(null)).await;
    assert_eq!((status, again["settlements"].as_u64()), (200, Some(calls)), "a second pilot, a fresh cast: {again}");
    common::assert_store_audit_passes(&local).await;
    std::fs::remove_dir_all(&dir).ok();
}

/// The adoption page in Debian's headless Chromium (`tests/browser/adoption.mjs`): the production phase lists the
/// dispute filed on this registry from the ledger (still open), and the pilot's and the federation's proofs run from
/// the page.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_adoption_page_reads_disputes_from_the_ledger_and_runs_the_pilot() {
    let dir = common::fresh_dir("bazaar-adoption-page");
    let (local, operator) = common::embedded_with_operator(&dir, "op").await;
    attach(&local, None);
    let (owner, buyer) = bazaar_stage::enroll_pair(&operator, "ad-hotel", "ad-buyer").await.unwrap();
    let (_, shop) = bazaar_stage::enroll_pair(&operator, "ad-mill", "ad-shop").await.unwrap();
    let funding = common::Funding { mint: (5_000, "m"), fund: (5_000, "f"), budget: [1_000, 5_000, 5_000] };
    common::fund_agent(&operator, &owner, "ad-buyer", funding).await;
    let token = buyer.issue_token("ad-shop", 300, "ad-1", "https://shop/x").await.unwrap();
    shop.settle(token.body.token.as_str(), 300, "ad-1", None).await.unwrap();
    let subject = bazaar_sdk::wire::dispute::DisputeSubject::Call {
        merchant: "ad-shop".to_string(),
        order_id: "ad-1".to_string(),
    };
    buyer.file_dispute(subject, "not_as_described", 300, "never came").await.unwrap();
    let args = vec![local.url.clone(), "op".into(), common::screenshot_dir().display().to_string()];
    let (report, exited_ok) = common::browser_driver("adoption", args).await;
    assert_eq!(report["problems"], json!([]), "{report}");
    let disputes = report["disputes"].as_array().unwrap();
    assert_eq!(disputes.len(), 1, "{report}");
    assert_eq!((disputes[0][2].as_str(), disputes[0][3].as_str()), (Some("300 units"), Some("filed")), "{report}");
    assert_eq!(disputes[0][4], "still open");
    assert!(report["production"].as_str().unwrap().starts_with("1 dispute(s) filed; 0 executed"), "{report}");
    assert!(report["pilot"].as_str().unwrap().contains("100 settlements and 100 work runs"), "{report}");
    assert_eq!(report["pilot_proved"], true, "{report}");
    let federation = report["federation"].to_string();
    assert!(federation.contains("unknown here") && federation.contains("they mirror"), "{report}");
    assert_eq!(report["federation_proved"], true, "{report}");
    assert_eq!(report["axe"], json!([]), "{report}");
    assert!(exited_ok, "{report}");
    std::fs::remove_dir_all(&dir).ok();
}

/// The federation proof through the API: a stranger's agent from a peer registry (started beside this one on the
/// first run) pays here once, joins as a guest by its own signature and completes an escrowed order; a second run
/// reuses the peer with a fresh stranger; only the operator presses; this registry's audit passes after.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_federation_proof_brings_a_fresh_stranger_from_a_peer_each_run() {
    let dir = common::fresh_dir("bazaar-runs-federation");
    let (local, operator) = common::embedded_with_operator(&dir, "op").await;
    attach(&local, None);
    let (owner, _) = bazaar_stage::enroll_pair(&operator, "fed-runs-owner", "fed-runs-agent").await.unwrap();
    let (status, body) = post(&local, "/v1/chamber/runs/federation", owner.credential(), json!(null)).await;
    assert_eq!((status, body["code"].as_str()), (403, Some("not_permitted")), "{body}");
    let mut strangers = Vec::new();
    let mut peers = Vec::new();
    for _ in 0..2 {
        let (status, run) = post(&local, "/v1/chamber/runs/federation", Some("op"), json!(null)).await;
        assert_eq!(status, 200, "{run}");
        assert_eq!(run["unknown_here_before"], true, "{run}");
        assert_eq!((run["call"]["status"].as_u64(), run["call"]["retry_replayed"].as_bool()), (Some(200), Some(true)));
        assert_eq!(run["guest"]["joined_as"], run["stranger"], "{run}");
        assert_eq!(run["escrow"]["state"], "completed", "{run}");
        let paid = bazaar_cli::demo::stranger::STRANGER_CALL_MINOR + bazaar_cli::demo::stranger::STRANGER_FUNDING_MINOR;
        assert_eq!(run["stranger_on_peer_minor"].as_u64(), Some(run["stranger_funds_minor"].as_u64().unwrap() - paid));
        let corridors: (i128, i128) = (
            run["corridor_here_minor"].as_str().unwrap().parse().unwrap(),
            run["corridor_on_peer_minor"].as_str().unwrap().parse().unwrap(),
        );
        assert_eq!(corridors.0, -corridors.1, "the corridors mirror: {run}");
        assert_eq!(run["peer_audit_ok"], true, "{run}");
        let member = wire_json(&operator.member(run["stranger"].as_str().unwrap()).await.unwrap());
        assert_eq!(member["owner"], Value::Null, "a guest has no owner here: {member}");
        assert!(member["handle"].as_str().unwrap().starts_with("guest-"), "{member}");
        strangers.push(run["stranger"].clone());
        peers.push(run["peer"]["did"].clone());
    }
    assert_ne!(strangers[0], strangers[1], "a fresh stranger each run");
    assert_eq!(peers[0], peers[1], "the peer is started once");
    common::assert_store_audit_passes(&local).await;
    std::fs::remove_dir_all(&dir).ok();
}

//! The live chamber in Debian's headless Chromium: a registry with its stream
//! open to the public serves `/chamber`; `tests/browser/chamber.mjs` opens it,
//! makes one paid call through the public API and reads the flow and the feed
//! the page filled from the live stream, then opens an escrowed contract and
//! disputes the call and reads the escrow branch and the dispute's first
//! phase as they arrive; checks the keyboard, axe-core (no
//! serious or critical violations on /chamber and /chamber/claims), phone
//! width and dark mode. Screenshots go to `target/chamber-screenshots` (not
//! committed) for a reviewer.
//!
//! Needs `/usr/bin/chromium` and `tests/browser/node_modules`; `./scripts/test`
//! installs both. Without them this test fails; it never passes silently.

use crate::common;

use bazaar_stage::enroll_pair;
use serde_json::{json, Value};
use std::process::Command;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_chamber_shows_a_paid_call_from_the_live_stream_and_passes_axe() {
    let dir = common::fresh_dir("bazaar-chamber");
    let (local, operator) = common::embedded_with_operator(&dir, "op").await;
    local.state.set_public_stream(true);
    local.state.attach_attacks(std::sync::Arc::new(bazaar_attacks::ChamberAttacks));
    let (owner, buyer) = enroll_pair(&operator, "chamber-hotel", "chamber-buyer").await.unwrap();
    let (_, merchant) = enroll_pair(&operator, "chamber-mill", "chamber-shop").await.unwrap();
    let funding = common::Funding { mint: (5_000, "m"), fund: (5_000, "f"), budget: [1_000, 5_000, 5_000] };
    common::fund_agent(&operator, &owner, "chamber-buyer", funding).await;
    let cast =
        json!({"buyer": buyer.credential(), "merchant": merchant.credential(), "merchant_handle": "chamber-shop"});
    let cast_file = dir.join("cast.json");
    std::fs::write(&cast_file, cast.to_string()).unwrap();

    let page = reqwest::get(format!("{}/chamber", local.url)).await.unwrap();
    let policy = page.headers()["content-security-policy"].to_str().unwrap().to_string();
    assert!(policy.contains("connect-src 'self'") && policy.starts_with("default-src 'none'"), "{policy}");

    let args = vec![local.url.clone(), cast_file.display().to_string(), common::screenshot_dir().display().to_string()];
    let (report, exited_ok) = common::browser_driver("chamber", args).await;
    assert_eq!(report["problems"], json!([]), "{report}");
    assert!(report["status"].as_str().unwrap().starts_with("live"), "{report}");
    let steps = &report["steps"];
    for id in ["step-token", "step-settle", "step-ledger"] {
        assert_eq!(steps[id]["done"], true, "{id}: {report}");
    }
    let settle = steps["step-settle"]["text"].as_str().unwrap();
    assert!(settle.contains("300 units") && settle.contains("297 units") && settle.contains("once"), "{settle}");
    assert!(steps["step-token"]["text"].as_str().unwrap().contains("chamber-shop"), "{report}");
    assert_eq!(report["clock"], "settled before it expired");
    let feed: Vec<&str> = report["feed"].as_array().unwrap().iter().filter_map(Value::as_str).collect();
    assert!(feed.contains(&"token.issued") && feed.contains(&"settlement.posted"), "{feed:?}");
    assert!(report["link"].as_str().unwrap().starts_with("#event-"), "shareable links: {report}");
    let escrow = report["escrow"].as_str().unwrap();
    assert!(escrow.contains("400 units in 2 milestone(s)"), "the escrow branch: {escrow}");
    let dispute = report["dispute"].as_array().unwrap();
    let filed = dispute[0].as_str().unwrap();
    assert!(
        filed.starts_with("Filed") && filed.contains("not_as_described") && filed.contains("claimed 300 units"),
        "{filed}"
    );
    assert!(report["focus"].as_str().unwrap().starts_with("A "), "the keyboard reaches the navigation first: {report}");
    let axe = json!({"/chamber": [], "/chamber/claims": [], "/chamber/break": [], "/chamber/architecture": []});
    assert_eq!(report["axe"], axe, "{report}");
    let trace = report["trace"].as_array().unwrap();
    assert!(trace.iter().all(|step| step["done"] == true), "every step of the restock traced: {report}");
    let linked = |n: usize| trace[n]["links"][0].as_str().unwrap_or_default().starts_with("/chamber/ledger#seq-");
    assert!(linked(0) && linked(2), "the token and the settlement link to their events: {report}");
    assert!(trace[1]["text"].as_str().unwrap().contains("no event, by design"), "{report}");
    assert!(trace[4]["text"].as_str().unwrap().contains("settled calls"), "the merchant's reputation: {report}");
    let listed = report["attacks_listed"].as_u64().unwrap() as usize;
    assert_eq!(listed, bazaar_attacks::CATALOGUE.len(), "every attack is a button");
    for attack in report["attacks"].as_array().unwrap() {
        let said = attack["text"].as_str().unwrap();
        assert_eq!(attack["held"], true, "{said}");
        assert!(said.contains("refused: ") && said.contains("balances unchanged"), "{said}");
    }
    assert!(report["overflow_px"].as_i64().unwrap() <= 0, "readable at phone width: {report}");
    assert!(exited_ok, "{report}");
    std::fs::remove_dir_all(&dir).ok();
}

/// Kills the child when the test ends, however it ends.
struct Killed(std::process::Child);
impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// `bazaar demo --serve` announces the chamber first, with its stream open to
/// the public, and keeps serving it after the story.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn demo_serve_announces_the_chamber_and_opens_its_stream() {
    use std::io::{BufRead, BufReader};
    let mut child = Command::new(env!("CARGO_BIN_EXE_bazaar"))
        .args([
            "demo",
            "--serve",
            "--calls",
            "5",
            "--agent-model-url",
            "http://127.0.0.1:9/v1",
            "--agent-model",
            "demo-model",
        ])
        .env("BAZAAR_LOG", "warn")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let child = Killed(child);
    let first = lines.next().unwrap().unwrap();
    let url = first.strip_prefix("chamber on ").unwrap_or_else(|| panic!("the first line names the chamber: {first}"));
    let page = reqwest::get(url).await.unwrap();
    assert_eq!(page.status(), 200);
    assert!(page.text().await.unwrap().contains("the live chamber"));
    let base = url.trim_end_matches("/chamber");
    let stream = reqwest::get(format!("{base}/v1/stream?recent=5")).await.unwrap();
    assert_eq!(stream.status(), 200, "open to anonymous visitors on the demo");
    let runs: serde_json::Value = reqwest::get(format!("{base}/v1/chamber/runs")).await.unwrap().json().await.unwrap();
    assert_eq!((runs["story"].as_bool(), runs["agent_model"].as_str()), (Some(true), Some("demo-model")), "{runs}");
    // It stays up after the story: the narration ends with the chamber still open.
    let said: Vec<String> = tokio::task::spawn_blocking(move || {
        lines.map_while(Result::ok).take_while(|l| !l.contains("Ctrl-C")).collect()
    })
    .await
    .unwrap();
    assert!(said.iter().any(|l| l.contains("audit: passed")), "{said:?}");
    assert_eq!(reqwest::get(url).await.unwrap().status(), 200, "still serving after the story");
    drop(child);
}

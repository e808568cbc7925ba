//! The relay's page end to end in Debian's headless Chromium: an embedded registry serves the
//! relay at `/relay`; Rust signs a coordination job's whole evidence chain onto it (task, claim,
//! handoff, the specialist's result with its artifact hash, the coordinator's result, the
//! validator's verdict); `tests/browser/relay_page.mjs` opens `/relay` as a browser, reads the
//! board and the chain the page verified itself, and pastes events into "Check an event".
//! `tests/relay/verify_vectors.mjs` checks the page's verifier file against the BIP-340 vectors.
//!
//! Needs `/usr/bin/chromium`, `tests/browser/node_modules` and `tests/relay/node_modules`;
//! `./scripts/test` installs them. Without them these tests fail, they never pass silently.

use bazaar_relay::event::tag;
use bazaar_relay::jobs::{request_tags, JOB_FEEDBACK, JOB_REQUEST, JOB_RESULT};
use bazaar_relay::labor::evidence::coordinator_result_tags;
use bazaar_relay::labor::outcome::{verdict_event, Assessment, Subject};
use bazaar_relay::labor::BRIEF_SCRIPT_DELIVERY;
use bazaar_relay::{Event, Filter, Signer};
use bazaar_server::OsEntropy;
use bazaar_stage::{embedded_registry_with, LocalRegistry};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;

const CHROMIUM: &str = "/usr/bin/chromium";
const FIX: &str =
    "run ./scripts/test once (it installs Debian's chromium and runs `npm ci` in tests/browser and tests/relay)";
const SHA: &str = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08";

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..").canonicalize().unwrap()
}

/// Runs `node script args…` from the repository root; its last stdout line as JSON.
async fn node(script: &str, args: Vec<String>) -> Value {
    let node = Command::new("node").arg("--version").output();
    assert!(node.is_ok_and(|out| out.status.success()), "node is missing: {FIX}");
    let script = repo_root().join(script);
    let output = tokio::task::spawn_blocking(move || {
        Command::new("node").arg(script).args(args).current_dir(repo_root()).output().unwrap()
    })
    .await
    .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout).to_string();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "node failed: {stdout}\n{stderr}");
    serde_json::from_str(stdout.lines().last().unwrap_or_default()).unwrap_or_else(|e| panic!("{e}: {stdout}"))
}

async fn registry() -> (LocalRegistry, PathBuf) {
    let dir = std::env::temp_dir().join(format!("bazaar-relay-page-{}", std::process::id()));
    std::fs::remove_dir_all(&dir).ok();
    std::fs::create_dir_all(&dir).unwrap();
    let local = embedded_registry_with(&dir, Some("op".into()), bazaar_core::apply::Config::standard()).await.unwrap();
    (local, dir)
}

async fn publish(local: &LocalRegistry, event: &Event) {
    let ack = local.state.relay().unwrap().publish(event.clone(), &Default::default()).await;
    assert!(ack.accepted, "{}", ack.message);
}

/// What the page's test needs back from the relay's contents.
struct Published {
    job: Event,
    result: Event,
    /// Claimed, not answered; a result whose content was changed after signing names it too.
    claimed: Event,
    /// A job request whose signature was changed after signing.
    forged_job: Event,
}

/// The chain's events, published in order, then two forgeries written straight into the relay's
/// store (the relay itself refuses them): the page must not count what it cannot verify.
async fn publish_chain(local: &LocalRegistry) -> Published {
    let now = local.state.relay().unwrap().now();
    let signer = || Signer::generate(&OsEntropy);
    let (validator, coordinator, specialist) = (signer(), signer(), signer());
    let job_tags = request_tags(BRIEF_SCRIPT_DELIVERY, true, &[coordinator.public_key()], "a brief: “hello”");
    let job = validator.sign(now - 60, JOB_REQUEST, job_tags, "");
    let on = |job: &Event, status: &str| vec![tag(&["status", status, "claim"]), tag(&["e", &job.id.to_hex()])];
    let claim = coordinator.sign(now - 55, JOB_FEEDBACK, on(&job, "processing"), "");
    let mut handoff_tags = request_tags("speech-delivery/v1", false, &[specialist.public_key()], "the script");
    handoff_tags.push(tag(&["e", &job.id.to_hex(), "", "parent"]));
    let handoff = coordinator.sign(now - 50, JOB_REQUEST, handoff_tags, "");
    let artifact = tag(&["artifact", "http://127.0.0.1:9/artifact.txt", SHA]);
    let delivered = specialist.sign(now - 40, JOB_RESULT, vec![tag(&["e", &handoff.id.to_hex()]), artifact], "done");
    let result_tags = coordinator_result_tags(&job, &handoff, &delivered);
    let result = coordinator.sign(now - 30, JOB_RESULT, result_tags, "delivered");
    let subject = Subject {
        job: &job,
        result: Some(&result),
        worker: &coordinator.public_key(),
        workflow: BRIEF_SCRIPT_DELIVERY,
        config_hash: "config-1",
    };
    let grounds = "the artifact's bytes hash to the signed sha256 and say the approved script";
    let verdict = verdict_event(&validator, &subject, &Assessment::accepted(0.9, grounds), now - 20);
    let claimed_tags = request_tags("other/v1", false, &[specialist.public_key()], "x");
    let claimed = validator.sign(now - 10, JOB_REQUEST, claimed_tags, "");
    let working = specialist.sign(now - 5, JOB_FEEDBACK, on(&claimed, "processing"), "");
    for event in [&job, &claim, &handoff, &delivered, &result, &verdict, &claimed, &working] {
        publish(local, event).await;
    }
    let mut forged_answer = specialist.sign(now - 4, JOB_RESULT, vec![tag(&["e", &claimed.id.to_hex()])], "done");
    forged_answer.content = "forged".into();
    let mut forged_job = validator.sign(now - 3, JOB_REQUEST, request_tags("forged/v1", false, &[], "y"), "");
    forged_job.sig[0] ^= 1;
    let relay = local.state.relay().unwrap();
    let forged = [forged_answer, forged_job.clone()];
    relay.store().write(&bazaar_relay::Encoded::all(&forged), now).unwrap();
    let ids = Filter { ids: Some(forged.iter().map(|event| event.id).collect()), ..Filter::default() };
    assert_eq!(relay.query(vec![ids]).await.unwrap().len(), 2, "the relay serves both forgeries");
    Published { job, result, claimed, forged_job }
}

async fn check_responses(base: &str) {
    let http = reqwest::Client::new();
    let get = |path: &str, accept: &'static str| http.get(format!("{base}{path}")).header("accept", accept).send();
    let page = get("/relay", "text/html,application/xhtml+xml;q=0.9,*/*;q=0.8").await.unwrap();
    let header = |r: &reqwest::Response, name: &str| r.headers()[name].to_str().unwrap().to_string();
    assert_eq!(header(&page, "content-type"), "text/html; charset=utf-8");
    let policy = header(&page, "content-security-policy");
    assert!(policy.starts_with("default-src 'none'") && policy.contains("script-src 'self'"), "{policy}");
    assert!(!policy.contains("unsafe-eval") && !policy.contains("script-src 'unsafe-inline'"), "{policy}");
    assert!(page.text().await.unwrap().contains(r#"src="/relay/client.js""#));
    for script in ["/relay/client.js", "/relay/verify.mjs"] {
        let response = get(script, "*/*").await.unwrap();
        assert_eq!(response.status(), 200, "{script}");
        assert_eq!(header(&response, "content-type"), "text/javascript; charset=utf-8", "{script}");
    }
    let info = get("/relay", "application/nostr+json").await.unwrap();
    assert_eq!(header(&info, "content-type"), "application/nostr+json");
    let note = http.get(format!("{base}/relay")).send().await.unwrap();
    assert!(header(&note, "content-type").starts_with("text/plain"), "a client asking for nothing gets the note");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_relay_page_shows_and_verifies_a_tasks_evidence_chain() {
    assert!(Path::new(CHROMIUM).exists(), "{CHROMIUM} is missing: {FIX}");
    let browser_modules = repo_root().join("tests/browser/node_modules/playwright-core");
    assert!(browser_modules.is_dir(), "tests/browser/node_modules is missing: {FIX}");
    let (local, dir) = registry().await;
    check_responses(&local.url).await;
    let Published { job, result, claimed, forged_job } = publish_chain(&local).await;
    let file = dir.join("task.json");
    std::fs::write(&file, job.to_json()).unwrap();

    let report = node("tests/browser/relay_page.mjs", vec![local.url.clone(), file.display().to_string()]).await;
    eprintln!("{report:#}");
    assert_eq!(report["ok"], true, "{report:#}");
    assert_eq!(report["content_type"], "text/html; charset=utf-8");
    assert_eq!(report["board"][job.id.to_hex()], "answered", "{report:#}");
    assert_eq!(report["board"][claimed.id.to_hex()], "claimed", "a forged result counts for nothing: {report:#}");
    assert_eq!(report["board"][forged_job.id.to_hex()], "not counted", "{report:#}");
    assert_eq!(report["checked"][forged_job.id.to_hex()], "✗ invalid signature", "{report:#}");
    assert_eq!(report["checked"][job.id.to_hex()], "✓ id and signature", "{report:#}");
    assert_eq!(report["state"], "answered");
    assert_eq!(report["selected"], "true", "the selected row is marked");
    let chain = report["chain"].as_array().unwrap();
    let steps: Vec<&str> = chain.iter().map(|step| step["step"].as_str().unwrap()).collect();
    assert_eq!(steps, ["task", "handoff", "specialist-result", "result", "verdict"], "{report:#}");
    for step in chain {
        assert_eq!((step["id"].as_str(), step["sig"].as_str()), (Some("id ✓"), Some("signature ✓")), "{step}");
    }
    assert_eq!(chain[0]["event"], job.id.to_hex());
    assert_eq!(chain[3]["event"], result.id.to_hex());
    let text = |i: usize| chain[i]["text"].as_str().unwrap().to_string();
    assert!(text(2).contains(SHA), "the specialist's artifact hash is shown: {}", text(2));
    assert!(text(3).contains("Links ✓"), "{}", text(3));
    assert!(
        text(4).contains("Outcome: accepted, quality 0.9") && text(4).contains("say the approved script"),
        "{}",
        text(4)
    );
    let checks = &report["checks"];
    assert_eq!(checks["valid"], "valid");
    assert_eq!(checks["content_altered"], "invalid id");
    assert_eq!(checks["sig_altered"], "invalid signature");
    assert_eq!(checks["not_json"], "not JSON");
    std::fs::remove_dir_all(&dir).ok();
}

/// The page's verifier file itself, in Node: BIP-340 vectors 0–14 and events nostr-tools signed.
#[tokio::test]
async fn the_page_verifier_passes_the_bip340_vectors() {
    let modules = repo_root().join("tests/relay/node_modules/nostr-tools");
    assert!(modules.is_dir(), "tests/relay/node_modules is missing: {FIX}");
    let report = node("tests/relay/verify_vectors.mjs", Vec::new()).await;
    assert_eq!(report["ok"], true, "{report}");
    assert_eq!(report["vectors"], 15, "{report}");
    assert_eq!(report["events"], 6, "{report}");
}

//! The labor market end to end with npm `nostr-tools` as the only client
//! (`tests/relay/jobs.mjs`, its node_modules installed by `./scripts/test`):
//! a directed job, a non-named worker's result and claim refused
//! `restricted:`, claim / progress / result accepted, a live subscription,
//! `limit: 0`; then the registry restarts and a new asking process, without
//! the asker's key, reads the task back as answered (deduplicating by id),
//! and `bazaar jobs ask|wait` read the same task.

use crate::common;

use serde_json::Value;
use std::path::{Path, PathBuf};

fn node(phase: &str, url: &str, state: &Path) -> Value {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/relay");
    assert!(
        dir.join("node_modules/nostr-tools").is_dir(),
        "tests/relay/node_modules is missing: run ./scripts/test once (it runs npm ci there)"
    );
    let output = std::process::Command::new("node")
        .arg("jobs.mjs")
        .args([phase, url, state.to_str().unwrap()])
        .current_dir(dir)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout).to_string();
    assert!(output.status.success(), "node {phase} failed: {stdout}\n{}", String::from_utf8_lossy(&output.stderr));
    serde_json::from_str(stdout.lines().last().unwrap_or_default()).unwrap()
}

/// A `bazaar serve` process, killed when dropped (a failing test leaves no server behind).
struct Served(std::process::Child);

impl Served {
    fn kill(&mut self) -> std::io::Result<()> {
        self.0.kill()
    }
    fn wait(&mut self) -> std::io::Result<std::process::ExitStatus> {
        self.0.wait()
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn serve(store: &[String], port: u16) -> Served {
    let mut args = vec!["--port".into(), port.to_string()];
    args.extend_from_slice(store);
    Served(common::spawn_serve(&args))
}

#[test]
fn nostr_tools_runs_a_directed_job_on_the_embedded_relay() {
    let dir = common::fresh_dir("bazaar-relay-interop");
    directed_job_and_a_restarted_asker(&dir, &["--data-dir".into(), dir.display().to_string()]);
}

#[tokio::test(flavor = "multi_thread")]
async fn nostr_tools_runs_a_directed_job_on_the_postgres_relay() {
    let dir = common::fresh_dir("bazaar-relay-interop-pg");
    let database = common::ThrowawayDatabase::create(&format!("bazaar_relay_interop_{}", std::process::id())).await;
    let store = vec!["--database-url".into(), database.url.clone(), "--data-dir".into(), dir.display().to_string()];
    tokio::task::spawn_blocking(move || directed_job_and_a_restarted_asker(&dir, &store)).await.unwrap();
    database.drop().await;
}

fn directed_job_and_a_restarted_asker(dir: &Path, store: &[String]) {
    let port = common::free_port();
    let url = format!("ws://127.0.0.1:{port}/relay");
    let state = dir.join("asker-state.json");
    let mut server = serve(store, port);
    let posted = node("post", &url, &state);
    assert_eq!(posted["ok"], true);
    let messages = &posted["messages"];
    assert!(messages["duplicate"].as_str().unwrap().starts_with("duplicate:"), "{messages}");
    assert!(messages["tampered"].as_str().unwrap().starts_with("invalid:"), "{messages}");
    assert!(messages["unnamed_result"].as_str().unwrap().starts_with("restricted:"), "{messages}");
    assert!(messages["unnamed_claim"].as_str().unwrap().starts_with("restricted:"), "{messages}");
    let saved = std::fs::read_to_string(&state).unwrap();
    assert!(!saved.contains("asker_secret"), "the later phases must work without the asker's key: {saved}");

    // The registry restarts; the task is read back from its store.
    server.kill().unwrap();
    server.wait().unwrap();
    let mut server = serve(store, port);
    let waited = node("wait", &url, &state);
    assert_eq!((waited["state"].as_str(), waited["results"].as_u64()), (Some("answered"), Some(1)), "{waited}");
    let info = node("nip11", &url, &state);
    assert_eq!(info["access_control_allow_origin"], "*");

    // The CLI's ask and wait read the same task through the relay, with no key at all.
    let job = posted["job_id"].as_str().unwrap();
    let relay_env = [("BAZAAR_RELAY", url.as_str())];
    let asked = common::bazaar_json(&["jobs", "ask", "--task-id", job], &relay_env);
    assert_eq!((asked["state"].as_str(), asked["successful_answers"].as_u64()), (Some("answered"), Some(1)), "{asked}");
    assert_eq!(asked["answers"][0]["content"], "Line one.\nLine two.");
    let waited = common::bazaar_json(&["jobs", "wait", "--task-id", job, "--wait", "5"], &relay_env);
    assert_eq!(waited["state"], "answered");
    server.kill().unwrap();
    server.wait().unwrap();
}

/// The worker's agent `w-agent` (its key in `<dir>/agent.key`) enrolled at the
/// registry under `w-owner`, and a stranger owner `s-owner`; `w-owner`'s credential.
async fn registered_agent(registry: &str, dir: &Path) -> String {
    let operator_credential = std::fs::read_to_string(dir.join("operator-credential")).unwrap();
    let operator = bazaar_sdk::Client::new(registry, Some(operator_credential));
    let agent_key = bazaar_sdk::generate_key();
    std::fs::write(dir.join("agent.key"), hex::encode(agent_key.to_bytes())).unwrap();
    let (owner, _) = bazaar_stage::enroll_pair_with_key(&operator, "w-owner", "w-agent", &agent_key).await.unwrap();
    bazaar_stage::enroll_pair(&operator, "s-owner", "s-agent").await.unwrap();
    owner.credential().unwrap().to_string()
}

/// `bazaar worker enroll` publishes a record both keys signed (checked back
/// with did:key); `bazaar worker review` admits a manifest whose tools and
/// credentials are present and blocks one that misses a tool, exiting 1.
#[tokio::test(flavor = "multi_thread")]
async fn workers_enroll_and_are_reviewed_from_the_command_line() {
    let dir = common::fresh_dir("bazaar-worker-cli");
    let port = common::free_port();
    let url = format!("ws://127.0.0.1:{port}/relay");
    let mut server = serve(&["--data-dir".into(), dir.display().to_string()], port);
    let path = |name: &str| dir.join(name).display().to_string();
    let worker = common::bazaar_json(&["jobs", "key", "--out", &path("worker.key")], &[]);
    let registry = format!("http://127.0.0.1:{port}");
    let owner_credential = registered_agent(&registry, &dir).await;
    let env = [("BAZAAR_RELAY", url.as_str())];
    let with_registry = [
        ("BAZAAR_RELAY", url.as_str()),
        ("BAZAAR_REGISTRY", registry.as_str()),
        ("BAZAAR_CREDENTIAL", owner_credential.as_str()),
    ];
    let enrolled = common::bazaar_json(
        &["worker", "enroll", "--key-file", &path("worker.key"), "--identity-key", &path("agent.key")],
        &env,
    );
    assert_eq!(enrolled["nostr"], worker["public_key"]);
    assert!(enrolled["did"].as_str().unwrap().starts_with("did:key:z"));
    let record_id = bazaar_relay::Hex32::parse(enrolled["record"].as_str().unwrap()).unwrap();
    let mut client = bazaar_agents::relay_client::RelayClient::connect(&url).await.unwrap();
    let filter = bazaar_relay::Filter { ids: Some(vec![record_id]), ..Default::default() };
    let record = client.fetch(&[filter]).await.unwrap().pop().expect("the record is on the relay");
    let binding = bazaar_agents::labor::identity::check(&record).unwrap();
    assert_eq!(binding.did, enrolled["did"].as_str().unwrap());

    let manifest = |tool: &str, reward: &str| {
        let file = dir.join(format!("manifest-{tool}-{reward}.json"));
        let body = serde_json::json!({"runtime": "bazaar-worker/0.1", "model": "fixture", "tools": [tool],
            "credentials": ["PATH"], "reward_destination": reward, "reports_usage": true});
        std::fs::write(&file, body.to_string()).unwrap();
        file.display().to_string()
    };
    let review = |tool: &str, reward: &str, env: &[(&str, &str)]| {
        let output = std::process::Command::new(env!("CARGO_BIN_EXE_bazaar"))
            .args([
                "--json",
                "worker",
                "review",
                "--key-file",
                &path("worker.key"),
                "--manifest",
                &manifest(tool, reward),
            ])
            .env_remove("BAZAAR_REGISTRY")
            .env_remove("BAZAAR_CREDENTIAL")
            .envs(env.iter().copied())
            .output()
            .unwrap();
        (output.status.code(), serde_json::from_slice::<Value>(&output.stdout).unwrap_or(Value::Null))
    };
    let (code, admitted) = review("sh", "w-owner", &with_registry);
    assert_eq!((code, admitted["admitted"].as_bool()), (Some(0), Some(true)), "{admitted}");
    let (code, blocked) = review("no-such-tool-zq", "w-owner", &with_registry);
    assert_eq!(code, Some(1));
    assert_eq!(blocked["preflight"]["missing_tools"], serde_json::json!(["no-such-tool-zq"]));
    let (code, foreign) = review("sh", "s-owner", &with_registry);
    assert_eq!(code, Some(1), "another owner's account is no reward destination: {foreign}");
    assert!(foreign["preflight"]["problems"][0].as_str().unwrap().contains("not an account the worker's owner holds"));
    let (code, unchecked) = review("sh", "w-owner", &env);
    assert_eq!(code, Some(1), "a destination nobody checked admits nothing: {unchecked}");
    assert!(unchecked["preflight"]["problems"][0].as_str().unwrap().contains("not checked"));
    server.kill().unwrap();
    server.wait().unwrap();
}

/// `bazaar worker allowance` is the owner's view and reconciliation: a
/// pending attempt shows its cost as unknown, cannot be cleared until the
/// owner records it, then clears.
#[test]
fn the_owner_reconciles_an_unknown_cost_from_the_command_line() {
    use bazaar_agents::labor::worker::{AllowanceConfig, Meter};
    let dir = common::fresh_dir("bazaar-allowance-cli");
    let now = bazaar_sdk::clock::unix_now();
    let mut meter = Meter::open(&dir, &AllowanceConfig { asset: "USD".into(), daily: 5_000_000 }).unwrap();
    meter.state.reserve("job-1", now).unwrap();
    meter.state.usage("job-1", 250_000, now);
    meter.state.interrupted();
    meter.save().unwrap();
    let state_dir = dir.display().to_string();
    let shown = common::bazaar_json(&["worker", "allowance", "--state-dir", &state_dir], &[]);
    assert_eq!(
        (shown["pending"]["missing_cost"].as_str(), shown["spent_today"].as_str()),
        (Some("unknown"), Some("0.25"))
    );
    let refused = std::process::Command::new(env!("CARGO_BIN_EXE_bazaar"))
        .args(["worker", "allowance", "--state-dir", &state_dir, "clear"])
        .output()
        .unwrap();
    assert_eq!(refused.status.code(), Some(2), "an unknown cost is never cleared as zero");
    assert!(String::from_utf8_lossy(&refused.stderr).contains("record the missing cost"));
    let reconciled =
        common::bazaar_json(&["worker", "allowance", "--state-dir", &state_dir, "reconcile", "--cost", "0.05"], &[]);
    assert_eq!(
        (reconciled["pending"]["missing_cost"].as_str(), reconciled["spent_today"].as_str()),
        (Some("0.05"), Some("0.3"))
    );
    let cleared = common::bazaar_json(&["worker", "allowance", "--state-dir", &state_dir, "clear"], &[]);
    assert!(cleared["pending"].is_null());
    assert_eq!(cleared["remaining_today"], "4.7");
}

/// `bazaar worker run` as a process: a reviewed specialist with a daily
/// allowance takes a permitted coordinator's directed job, runs its engine,
/// hosts the artifact and answers; its allowance file records the usage.
#[tokio::test(flavor = "multi_thread")]
async fn a_worker_process_answers_a_directed_job() {
    use bazaar_relay::jobs::{request_tags, JOB_REQUEST};
    let dir = common::fresh_dir("bazaar-worker-run");
    let port = common::free_port();
    let url = format!("ws://127.0.0.1:{port}/relay");
    let _server = serve(&["--data-dir".into(), dir.display().to_string()], port);
    let path = |name: &str| dir.join(name).display().to_string();
    common::bazaar_json(&["jobs", "key", "--out", &path("worker.key")], &[]);
    let manifest = dir.join("manifest.json");
    let body = serde_json::json!({"runtime": "bazaar-worker/0.1", "model": "fixture", "tools": ["sh"],
        "credentials": [], "reward_destination": "acct:owner", "reports_usage": true});
    std::fs::write(&manifest, body.to_string()).unwrap();
    // A passed review, published directly (the CLI's review also checks the reward destination at a registry).
    let worker =
        bazaar_relay::Signer::from_secret_hex(&std::fs::read_to_string(dir.join("worker.key")).unwrap()).unwrap();
    let passed = bazaar_relay::labor::review::review_event(
        &worker,
        &serde_json::from_value(body).unwrap(),
        &Default::default(),
        bazaar_sdk::clock::unix_now(),
    );
    let mut client = bazaar_agents::relay_client::RelayClient::connect(&url).await.unwrap();
    assert!(client.publish(&passed).await.unwrap().0);
    let coordinator = bazaar_relay::Signer::generate(&bazaar_server::OsEntropy);
    let mut process = std::process::Command::new(env!("CARGO_BIN_EXE_bazaar"))
        .args(["worker", "run", "--relay", &url, "--key-file", &path("worker.key"), "--manifest"])
        .arg(&manifest)
        .args(["--accept-from", &coordinator.public_key().to_hex(), "--state-dir", &path("state")])
        .args(["--engine", "cat; echo 'usage: 0.002 USD' >&2", "--artifact-dir", &path("artifacts")])
        .args(["--artifact-url", "https://files.example/a", "--daily-allowance", "1.00"])
        .env("BAZAAR_LOG", "warn")
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let tags = request_tags("script-delivery/v1", false, &[worker.public_key()], "the text");
    let job = coordinator.sign(bazaar_sdk::clock::unix_now(), JOB_REQUEST, tags, "");
    assert!(client.publish(&job).await.unwrap().0);
    let view = bazaar_agents::relay_client::follow_task(&url, &job.id, 20).await.unwrap();
    process.kill().unwrap();
    process.wait().unwrap();
    assert_eq!(view.successful_answers, 1, "{view:?}");
    let sha = hex::encode(<sha2::Sha256 as sha2::Digest>::digest(b"the text"));
    assert_eq!(std::fs::read_to_string(dir.join("artifacts").join(format!("{sha}.txt"))).unwrap(), "the text");
    let meter = bazaar_agents::labor::worker::Meter::inspect(&dir.join("state")).unwrap();
    assert_eq!(meter.state.spent, 2_000, "the engine's reported usage, in millionths");
}

/// `--relay-port`: the relay also answers on its own port, at `/` and at
/// `/relay`, with the same store and the same NIP-11 document.
#[tokio::test(flavor = "multi_thread")]
async fn the_relay_answers_on_its_own_port_too() {
    let dir = common::fresh_dir("bazaar-relay-port");
    let (port, relay_port) = (common::free_port(), common::free_port());
    let _server =
        serve(&["--data-dir".into(), dir.display().to_string(), "--relay-port".into(), relay_port.to_string()], port);
    let note = bazaar_relay::Signer::generate(&bazaar_server::OsEntropy).sign(
        bazaar_sdk::clock::unix_now(),
        1,
        vec![],
        "own port",
    );
    let own = format!("ws://127.0.0.1:{relay_port}/");
    let mut client = bazaar_agents::relay_client::RelayClient::connect(&own).await.unwrap();
    assert!(client.publish(&note).await.unwrap().0);
    let by_id = bazaar_relay::Filter { ids: Some(vec![note.id]), ..Default::default() };
    for url in [format!("ws://127.0.0.1:{relay_port}/relay"), format!("ws://127.0.0.1:{port}/relay")] {
        let mut reader = bazaar_agents::relay_client::RelayClient::connect(&url).await.unwrap();
        assert_eq!(reader.fetch(std::slice::from_ref(&by_id)).await.unwrap(), vec![note.clone()], "{url}");
    }
    let info: Value = reqwest::Client::new()
        .get(format!("http://127.0.0.1:{relay_port}/"))
        .header("accept", "application/nostr+json")
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(info["name"], "Bazaar relay");
}

//! Shared by the CLI's end-to-end tests: `bazaar serve` as a process, the `bazaar audit` process, a fresh
//! directory per test, an embedded registry with its operator's client, a funded buyer agent, the store audit,
//! and a throwaway PostgreSQL database.
//!
//! Every test module of the one test binary (`tests/it/main.rs`) shares it.
#![allow(dead_code)]

pub mod markdown;

use bazaar_cli::wire_json;
use bazaar_core::apply::Config;
use bazaar_sdk::Client;
use bazaar_stage::{embedded_registry_with, local_registry, LocalRegistry};
use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;

/// Starts `bazaar serve <args>` (warn-level logs, no operator credential from
/// the environment) and returns once it announces itself on 127.0.0.1; the
/// rest of its stdout is drained in the background.
pub fn spawn_serve(args: &[String]) -> Child {
    spawn_serve_with(args, &[])
}

/// [`spawn_serve`] with `env` set for the server too.
pub fn spawn_serve_with(args: &[String], env: &[(&str, &str)]) -> Child {
    let mut child = Command::new(env!("CARGO_BIN_EXE_bazaar"))
        .arg("serve")
        .args(args)
        .envs(env.iter().copied())
        .env("BAZAAR_LOG", "warn")
        // Every JSON answer must fit the wire type its route's entry names (a misfit is a 500 `contract_misfit`).
        .env(bazaar_server::contract::CHECK_CONTRACT_ENV, "1")
        .env_remove("BAZAAR_OPERATOR_CREDENTIAL")
        .stdout(Stdio::piped())
        // A survey of misfits (`BAZAAR_CONTRACT_REPORT_ONLY=1`) reads them on standard error.
        .stderr(if std::env::var_os(bazaar_server::contract::REPORT_ONLY_ENV).is_some() {
            Stdio::inherit()
        } else {
            Stdio::null()
        })
        .spawn()
        .expect("start bazaar serve");
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let line = lines.next().expect("server prints a line").unwrap();
    assert!(line.starts_with("listening on http://127.0.0.1:"), "{line}");
    std::thread::spawn(move || for _ in lines {});
    child
}

/// Runs `bazaar --json <args>` with `env`, asserts it succeeded, and returns its JSON answer.
pub fn bazaar_json(args: &[&str], env: &[(&str, &str)]) -> serde_json::Value {
    let output =
        Command::new(env!("CARGO_BIN_EXE_bazaar")).arg("--json").args(args).envs(env.iter().copied()).output().unwrap();
    let text = String::from_utf8_lossy(&output.stdout).to_string();
    assert!(output.status.success(), "bazaar {args:?} failed: {text} {}", String::from_utf8_lossy(&output.stderr));
    serde_json::from_str(text.trim()).unwrap_or_else(|_| panic!("not JSON: {text}"))
}

/// A port the OS just handed out on 127.0.0.1 (and took back), for a `serve` process to bind.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// Runs `bazaar audit <args>` on a stopped registry's store and asserts it passes.
pub fn assert_cli_audit_passes(args: &[String]) {
    let audit = Command::new(env!("CARGO_BIN_EXE_bazaar")).arg("audit").args(args).output().unwrap();
    assert!(audit.status.success(), "audit failed: {}", String::from_utf8_lossy(&audit.stdout));
}

/// `<temp>/<name>-<pid>`, emptied and created: a test's own directory, clean even after a crashed earlier run.
pub fn fresh_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("{name}-{}", std::process::id()));
    std::fs::remove_dir_all(&dir).ok();
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// An embedded registry in `dir` on the standard settings, created with `operator_credential`, and a client
/// holding that credential.
pub async fn embedded_with_operator(dir: &std::path::Path, operator_credential: &str) -> (LocalRegistry, Client) {
    let local = embedded_registry_with(dir, Some(operator_credential.into()), Config::standard()).await.unwrap();
    let operator = Client::new(&local.url, Some(operator_credential.into()));
    (local, operator)
}

/// What a buyer's owner is minted, what it moves to the agent, and the agent's ceilings, each under its
/// idempotency key.
pub struct Funding<'a> {
    pub mint: (u64, &'a str),
    pub fund: (u64, &'a str),
    /// Per call, per day, in total.
    pub budget: [u64; 3],
}

/// The operator mints to `owner`, which funds its agent `agent` and sets the agent's budget.
pub async fn fund_agent(operator: &Client, owner: &Client, agent: &str, funding: Funding<'_>) {
    let owner_id = owner.me().await.unwrap().member.id;
    operator.mint(&owner_id, funding.mint.0, funding.mint.1).await.unwrap();
    owner.fund(agent, funding.fund.0, funding.fund.1).await.unwrap();
    let [per_call, per_day, total] = funding.budget;
    owner.set_budget(agent, per_call, per_day, total).await.unwrap();
}

/// Audits the registry's store in place and asserts it passes; returns the report for further checks.
pub async fn assert_store_audit_passes(local: &LocalRegistry) -> bazaar_core::audit::AuditReport {
    let report = bazaar_store::audit::audit(local.state.store.as_ref(), &|_| {}).await.unwrap();
    assert!(report.ok, "{:?}", report.problems);
    report
}

/// A database created (dropped first if a crashed run left it) on the test PostgreSQL server; `drop` removes it.
pub struct ThrowawayDatabase {
    admin: tokio_postgres::Client,
    pub name: String,
    /// Where the database is.
    pub url: String,
}

impl ThrowawayDatabase {
    pub async fn create(name: &str) -> ThrowawayDatabase {
        let admin_url = bazaar_postgres_testing::admin_url();
        let (admin, connection) = tokio_postgres::connect(&admin_url, tokio_postgres::NoTls)
            .await
            .expect("PostgreSQL must be running for this test");
        tokio::spawn(connection);
        admin.batch_execute(&format!("DROP DATABASE IF EXISTS {name}")).await.unwrap();
        admin.batch_execute(&format!("CREATE DATABASE {name}")).await.unwrap();
        let url = bazaar_postgres_testing::with_database(&admin_url, name);
        ThrowawayDatabase { admin, name: name.to_string(), url }
    }

    /// A registry on this database on the standard settings, served on 127.0.0.1.
    pub async fn registry(&self) -> LocalRegistry {
        let offset = Arc::new(bazaar_stage::OffsetClock::default());
        let store =
            bazaar_store_postgres::PostgresStore::connect(&self.url, Config::standard(), offset.clone()).await.unwrap();
        local_registry(Arc::new(store), offset, Config::standard(), None).await.unwrap()
    }

    /// Drops the database, closing whatever connections are still open on it.
    pub async fn drop(self) {
        self.admin.batch_execute(&format!("DROP DATABASE IF EXISTS {} WITH (FORCE)", self.name)).await.ok();
    }
}

/// How long [`retry`] keeps asking a busy registry before the test fails.
pub const RETRY_DEADLINE_S: u64 = 60;
/// The pause before [`retry`] asks again.
pub const RETRY_PAUSE_MS: u64 = 50;

/// Retries `call` while the registry answers 503 or 409 (busy, restarting, a duplicate in flight) or cannot
/// be reached; any other refusal fails the test, as does still being refused after [`RETRY_DEADLINE_S`].
pub async fn retry<T, F, Fut>(what: &str, call: F) -> T
where
    F: Fn() -> Fut,
    Fut: std::future::Future<Output = Result<T, bazaar_sdk::SdkError>>,
{
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(RETRY_DEADLINE_S);
    loop {
        assert!(std::time::Instant::now() < deadline, "{what} never completed");
        match call().await {
            Ok(value) => return value,
            Err(error) if error.status().is_none_or(|s| s >= 500 || s == 409) => {
                tokio::time::sleep(std::time::Duration::from_millis(RETRY_PAUSE_MS)).await;
            }
            Err(error) => panic!("{what} refused: {error}"),
        }
    }
}

/// How many `kind` events the registry's ledger holds, read a page at a time as the operator.
pub async fn count_events(operator: &bazaar_sdk::Client, kind: &str) -> usize {
    let (mut count, mut after) = (0, 0);
    loop {
        let page = wire_json(&retry("events", || operator.events(after, 500)).await);
        let list = page["events"].as_array().unwrap().clone();
        let Some(last) = list.last() else { return count };
        count += list.iter().filter(|e| e["kind"] == kind).count();
        after = last["seq"].as_u64().unwrap();
    }
}

/// What `client` may spend now (its `available_minor`).
pub async fn available(client: &Client) -> u64 {
    wire_json(&client.me().await.unwrap())["available_minor"].as_u64().unwrap()
}

/// The refusal `result` must be: its code and its problem+json body.
pub fn refused<T: std::fmt::Debug>(result: Result<T, bazaar_sdk::SdkError>) -> (String, serde_json::Value) {
    match result {
        Err(bazaar_sdk::SdkError::Problem { code, body, .. }) => (code, body),
        other => panic!("expected a refusal, got {other:?}"),
    }
}

/// A Nostr event as a request body carries it.
pub fn event_json(event: &bazaar_relay::Event) -> bazaar_sdk::wire::nostr::SignedEvent {
    event.into()
}

/// The repository's root.
pub fn repo_root() -> PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..").canonicalize().unwrap()
}

/// Where browser tests write their screenshots (not committed), created.
pub fn screenshot_dir() -> PathBuf {
    let shots = repo_root().join("target/chamber-screenshots");
    std::fs::create_dir_all(&shots).unwrap();
    shots
}

/// Runs the browser driver `tests/browser/{name}.mjs` with `args` in Debian's headless Chromium and returns
/// its one-line JSON report and whether it exited 0. Fails (never passes silently) when what `./scripts/test`
/// installs is missing, or with the driver's output when it printed no report.
pub async fn browser_driver(name: &str, args: Vec<String>) -> (serde_json::Value, bool) {
    let browser_dir = repo_root().join("tests/browser");
    let fix = "run ./scripts/test once (it installs Debian's chromium and runs `npm ci` in tests/browser)";
    assert!(std::path::Path::new("/usr/bin/chromium").exists(), "/usr/bin/chromium is missing: {fix}");
    for package in ["playwright-core", "axe-core"] {
        let installed = browser_dir.join("node_modules").join(package).is_dir();
        assert!(installed, "tests/browser/node_modules/{package} is missing: {fix}");
    }
    let script = browser_dir.join(format!("{name}.mjs"));
    let output = tokio::task::spawn_blocking(move || Command::new("node").arg(script).args(args).output().unwrap())
        .await
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout).to_string();
    let stderr = String::from_utf8_lossy(&output.stderr);
    let report = serde_json::from_str(stdout.trim()).unwrap_or_else(|_| panic!("{stdout}\n{stderr}"));
    (report, output.status.success())
}

//! `bazaar serve` as a process, driven by the `bazaar` CLI: the registry keeps
//! its identity across restarts, writes the operator credential 0600, shuts
//! down cleanly on SIGTERM (keeping the searches it counted), and the
//! member/money commands work end to end.
// reason: an end-to-end test reads as one story of requests and the checks after each.
#![allow(clippy::too_many_lines)]

use crate::common;

use serde_json::Value;
use std::io::{BufRead, BufReader};
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::{Child, Command, Stdio};

use common::bazaar_json as bazaar;

fn serve(dir: &Path, port: u16) -> Child {
    common::spawn_serve(&["--port".into(), port.to_string(), "--data-dir".into(), dir.display().to_string()])
}

/// `BAZAAR_REGISTRY` and `BAZAAR_CREDENTIAL` for `member` (an answer carrying its `credential`) at `registry`.
fn as_member<'a>(registry: &'a str, member: &'a Value) -> [(&'static str, &'a str); 2] {
    [("BAZAAR_REGISTRY", registry), ("BAZAAR_CREDENTIAL", member["credential"].as_str().unwrap())]
}

/// A fresh key and an owner `handle` created with it by the operator; returns (the key, the owner).
fn create_owner(handle: &str, operator: &[(&str, &str)]) -> (Value, Value) {
    let key = bazaar(&["keygen"], &[]);
    let owner = bazaar(&["owner", "--handle", handle, "--public-key", key["public_key"].as_str().unwrap()], operator);
    (key, owner)
}

/// `bazaar enroll` of agent `handle` at `registry` through `invite`, with the key in `key_file`.
fn enroll(registry: &str, invite: &Value, handle: &str, key_file: &Path) -> Value {
    let invite = invite["invite_code"].as_str().unwrap();
    let args = ["enroll", "--invite", invite, "--handle", handle, "--key-file", key_file.to_str().unwrap()];
    bazaar(&args, &[("BAZAAR_REGISTRY", registry)])
}

/// `bazaar passport issue` for the member `env` speaks for, written to `out`.
fn issue_passport(out: &Path, env: [(&str, &str); 2]) {
    let issued = Command::new(env!("CARGO_BIN_EXE_bazaar"))
        .args(["passport", "issue", "--out", out.to_str().unwrap()])
        .envs(env)
        .output()
        .unwrap();
    assert!(issued.status.success());
}

/// Writes the registry's key history (`bazaar keys show` as `operator`) to `file`.
fn save_key_history(file: &Path, operator: &[(&str, &str)]) {
    std::fs::write(file, serde_json::to_vec(&bazaar(&["keys", "show"], operator)).unwrap()).unwrap();
}

/// `bazaar passport verify` offline, against the key history in `keys`.
fn verify_passport(passport: &Path, keys: &Path) -> Value {
    bazaar(&["passport", "verify", passport.to_str().unwrap(), "--keys", keys.to_str().unwrap()], &[])
}

/// `bazaar passport import` at `registry`, proving possession with the subject's key in `key_file`.
fn import_passport(passport: &Path, key_file: &Path, registry: &str) -> Value {
    bazaar(
        &["passport", "import", passport.to_str().unwrap(), "--key", key_file.to_str().unwrap()],
        &[("BAZAAR_REGISTRY", registry)],
    )
}

/// `bazaar audit` of a stopped registry's data directory passes.
fn audit(dir: &Path) {
    common::assert_cli_audit_passes(&["--data-dir".into(), dir.display().to_string()]);
}

fn stop(mut child: Child) {
    let status = Command::new("kill").args(["-TERM", &child.id().to_string()]).status().unwrap();
    assert!(status.success());
    let exit = child.wait().unwrap();
    assert!(exit.success(), "serve exits 0 on SIGTERM, got {exit:?}");
}

#[test]
fn the_cli_runs_a_registry_end_to_end() {
    let dir = common::fresh_dir("bazaar-serve");
    let port = common::free_port();
    let registry = format!("http://127.0.0.1:{port}");
    let server = serve(&dir, port);
    let credential_file = dir.join("operator-credential");
    let mode = std::fs::metadata(&credential_file).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600, "the operator credential is private");
    let card: Value = reqwest::blocking::get(format!("{registry}/.well-known/bazaar")).unwrap().json().unwrap();
    let operator =
        [("BAZAAR_REGISTRY", registry.as_str()), ("BAZAAR_CREDENTIAL_FILE", credential_file.to_str().unwrap())];

    let (owner_key, owner) = create_owner("cli-owner", &operator);
    assert_eq!(owner["id"], owner_key["did"]);
    let as_owner = as_member(&registry, &owner);
    let invite = bazaar(&["invite"], &as_owner);
    let key_file = dir.join("agent.key");
    let agent_key = bazaar(&["keygen", "--out", key_file.to_str().unwrap()], &[]);
    assert_eq!(std::fs::metadata(&key_file).unwrap().permissions().mode() & 0o777, 0o600);
    // A second keygen to the same file is refused: a key drawn anew never replaces one.
    let kept = std::fs::read_to_string(&key_file).unwrap();
    for again in [&["keygen", "--out"][..], &["jobs", "key", "--out"][..]] {
        let refused = Command::new(env!("CARGO_BIN_EXE_bazaar")).args(again).arg(&key_file).output().unwrap();
        assert_eq!(refused.status.code(), Some(2), "{again:?} over an existing key");
        assert!(String::from_utf8_lossy(&refused.stderr).contains("already exists"), "{refused:?}");
    }
    assert_eq!(std::fs::read_to_string(&key_file).unwrap(), kept, "the first key is kept");
    let agent = enroll(&registry, &invite, "cli-agent", &key_file);
    assert_eq!(agent["id"], agent_key["did"]);
    assert_eq!(agent["owner"], owner["id"]);
    bazaar(&["mint", "cli-owner", "5000", "--key", "m1"], &operator);
    let replayed = bazaar(&["mint", "cli-owner", "5000", "--key", "m1"], &operator);
    assert_eq!(replayed["amount_minor"], 5000);
    bazaar(&["fund", "cli-agent", "3000", "--key", "f1"], &as_owner);
    bazaar(&["budget", "cli-agent", "--per-call", "100", "--per-day", "1000", "--total", "3000"], &as_owner);
    let as_agent = as_member(&registry, &agent);
    let me = bazaar(&["me"], &as_agent);
    assert_eq!(me["balance_minor"], 3000);
    assert_eq!(me["budget"]["per_call_max_minor"], 100);
    let owner_me = bazaar(&["me"], &as_owner);
    assert_eq!(owner_me["balance_minor"], 2000, "minted once under one key, 3000 moved to the agent");

    // The owner renames its agent; a token is issued and voided; the agent rotates.
    let renamed = bazaar(&["rename", "cli-agent", "cli-buyer"], &as_owner);
    assert_eq!((renamed["from"].as_str(), renamed["to"].as_str()), (Some("cli-agent"), Some("cli-buyer")));
    let shop_key = dir.join("shop.key");
    bazaar(&["keygen", "--out", shop_key.to_str().unwrap()], &[]);
    let shop_invite = bazaar(&["invite"], &as_owner);
    enroll(&registry, &shop_invite, "cli-shop", &shop_key);
    let token: Value = reqwest::blocking::Client::new()
        .post(format!("{registry}/v1/tokens"))
        .bearer_auth(agent["credential"].as_str().unwrap())
        .json(&serde_json::json!({"merchant": "cli-shop", "max_amount_minor": 50, "order_id": "o-1", "resource": "r"}))
        .send()
        .unwrap()
        .json()
        .unwrap();
    assert_eq!(bazaar(&["me"], &as_agent)["available_minor"], 2950);
    let voided = bazaar(&["void", token["jti"].as_str().unwrap()], &as_agent);
    assert_eq!(voided["released_minor"], 50);
    assert_eq!(bazaar(&["me"], &as_agent)["available_minor"], 3000);
    let rotated = bazaar(&["rotate"], &as_agent);
    let old = Command::new(env!("CARGO_BIN_EXE_bazaar")).args(["--json", "me"]).envs(as_agent).output().unwrap();
    assert!(!old.status.success(), "the rotated-away credential is dead");
    let as_agent = as_member(&registry, &rotated);
    assert_eq!(bazaar(&["me"], &as_agent)["member"]["handle"], "cli-buyer");
    let events = bazaar(&["events", "--limit", "100"], &operator);
    let kinds: Vec<&str> = events["events"].as_array().unwrap().iter().map(|e| e["kind"].as_str().unwrap()).collect();
    let expected = [
        "registry.created",
        "owner.created",
        "agent.enrolled",
        "transfer.minted",
        "member.renamed",
        "token.issued",
        "hold.voided",
        "credential.rotated",
    ];
    for kind in expected {
        assert!(kinds.contains(&kind), "{kind} missing from {kinds:?}");
    }
    stop(server);

    // Restarted on the same data: the same registry, same members.
    let server = serve(&dir, port);
    let again: Value = reqwest::blocking::get(format!("{registry}/.well-known/bazaar")).unwrap().json().unwrap();
    assert_eq!(again["did"], card["did"], "the registry keeps its key");
    assert_eq!(bazaar(&["me"], &as_agent)["balance_minor"], 3000);
    let void = Command::new(env!("CARGO_BIN_EXE_bazaar"))
        .args(["--json", "void", "tok_nope"])
        .envs(as_agent)
        .output()
        .unwrap();
    assert!(!void.status.success(), "voiding an unknown token is refused");
    stop(server);
    audit(&dir);
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn serve_logs_structured_json() {
    let dir = common::fresh_dir("bazaar-logs");
    let port = common::free_port();
    let mut child = Command::new(env!("CARGO_BIN_EXE_bazaar"))
        .args(["serve", "--port", &port.to_string(), "--data-dir"])
        .arg(&dir)
        .env("BAZAAR_LOG", "info")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
    let listening = lines
        .by_ref()
        .take(20)
        .map(|l| serde_json::from_str::<Value>(&l.unwrap()).expect("every log line is JSON"))
        .find(|l| l["fields"]["message"] == "bazaar registry listening")
        .expect("a listening line");
    assert_eq!(listening["level"], "INFO");
    assert!(listening["fields"]["did"].as_str().unwrap().starts_with("did:key:z"));
    assert!(listening["fields"]["address"].as_str().unwrap().starts_with("127.0.0.1:"));
    stop(child);
    std::fs::remove_dir_all(&dir).ok();
}

/// The federation, key and passport commands as processes against two `serve` processes.
#[test]
fn the_cli_federates_two_registries_and_carries_a_passport() {
    let dir = common::fresh_dir("bazaar-serve-fed");
    let (dir_a, dir_b) = (dir.join("a"), dir.join("b"));
    std::fs::create_dir_all(&dir_a).unwrap();
    std::fs::create_dir_all(&dir_b).unwrap();
    let (port_a, port_b) = (common::free_port(), common::free_port());
    let (server_a, server_b) = (serve(&dir_a, port_a), serve(&dir_b, port_b));
    let (url_a, url_b) = (format!("http://127.0.0.1:{port_a}"), format!("http://127.0.0.1:{port_b}"));
    let cred = |d: &std::path::Path| d.join("operator-credential").to_str().unwrap().to_string();
    let (cred_a, cred_b) = (cred(&dir_a), cred(&dir_b));
    let op_a = [("BAZAAR_REGISTRY", url_a.as_str()), ("BAZAAR_CREDENTIAL_FILE", cred_a.as_str())];
    let op_b = [("BAZAAR_REGISTRY", url_b.as_str()), ("BAZAAR_CREDENTIAL_FILE", cred_b.as_str())];
    let did_b = bazaar(&["keys", "show"], &op_b)["registry"].as_str().unwrap().to_string();
    let did_a = bazaar(&["keys", "show"], &op_a)["registry"].as_str().unwrap().to_string();

    // A recognises B.
    let added = bazaar(&["federation", "add", &url_b, &did_b, "--weight-bps", "4000"], &op_a);
    assert_eq!(added["peer"], did_b.as_str());
    let listed = bazaar(&["federation", "list"], &op_a);
    assert_eq!(listed["peers"][0]["weight_bps"], 4000);
    // The signed recognition list names B with its weight and corridor terms.
    let list: Value =
        reqwest::blocking::get(format!("{url_a}/.well-known/bazaar-recognition")).unwrap().json().unwrap();
    bazaar_core::vc::verify_eddsa_jcs_2022(&list).expect("the recognition list is signed by A's key");
    let recognised = &list["credentialSubject"]["recognised"][0];
    assert_eq!((recognised["id"].as_str(), recognised["weightBps"].as_u64()), (Some(did_b.as_str()), Some(4000)));
    assert!(recognised["terms"]["perCallMaxMinor"].is_string());
    let mut forged = list.clone();
    forged["credentialSubject"]["recognised"][0]["weightBps"] = serde_json::json!(10_000);
    assert!(bazaar_core::vc::verify_eddsa_jcs_2022(&forged).is_err(), "a raised weight breaks the signature");
    let wrong = Command::new(env!("CARGO_BIN_EXE_bazaar"))
        .args(["--json", "federation", "add", &url_b, &did_a])
        .envs(op_a)
        .output()
        .unwrap();
    assert!(!wrong.status.success(), "a card that names another DID is refused");

    // An agent on B with a key file gets a passport, verifies it offline, and presents it at A.
    let (_, owner) = create_owner("b-owner", &op_b);
    let as_owner = as_member(&url_b, &owner);
    let invite = bazaar(&["invite"], &as_owner);
    let key_file = dir.join("agent.key");
    bazaar(&["keygen", "--out", key_file.to_str().unwrap()], &[]);
    let agent = enroll(&url_b, &invite, "b-agent", &key_file);
    let as_agent = as_member(&url_b, &agent);
    let reputation = bazaar(&["reputation", "b-agent"], &as_agent);
    assert_eq!(reputation["local"]["scoreBps"], 5000, "no work yet");
    let passport_file = dir.join("passport.json");
    issue_passport(&passport_file, as_agent);
    let keys_file = dir.join("keys-b.json");
    save_key_history(&keys_file, &op_b);
    let verdict = verify_passport(&passport_file, &keys_file);
    assert_eq!(verdict["valid"], true);
    assert_eq!(verdict["registry"], did_b.as_str());
    // B rotates; the passport still verifies against the longer history.
    let rotated = bazaar(&["keys", "rotate"], &op_b);
    assert_eq!(rotated["keys"].as_array().unwrap().len(), 2);
    save_key_history(&keys_file, &op_b);
    let verdict = verify_passport(&passport_file, &keys_file);
    assert_eq!(verdict["valid"], true, "{verdict}");
    let imported = import_passport(&passport_file, &key_file, &url_a);
    assert_eq!(imported["imported"]["weightBps"], 4000);
    let at_a = bazaar(&["reputation", agent["id"].as_str().unwrap()], &[("BAZAAR_REGISTRY", url_a.as_str())]);
    assert_eq!(at_a["imported"][0]["registry"], did_b.as_str());
    // A passport signed by B's new key: A learns B's longer history from B's card and accepts it.
    issue_passport(&passport_file, as_agent);
    let reimported = import_passport(&passport_file, &key_file, &url_a);
    assert_eq!(reimported["imported"]["registry"], did_b.as_str());
    let peers = bazaar(&["federation", "list"], &op_a);
    assert_eq!(peers["peers"][0]["keys"].as_array().unwrap().len(), 2, "A refreshed B's key history");
    stop(server_a);
    stop(server_b);
    for d in [&dir_a, &dir_b] {
        audit(d);
    }
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn searches_counted_before_a_sigterm_survive_the_restart() {
    let dir = common::fresh_dir("bazaar-serve-searches");
    let port = common::free_port();
    let registry = format!("http://127.0.0.1:{port}");
    let server = serve(&dir, port);
    let credential = std::fs::read_to_string(dir.join("operator-credential")).unwrap();
    let http = reqwest::blocking::Client::new();
    let get = |path: &str| -> Value {
        let response = http.get(format!("{registry}{path}")).bearer_auth(credential.trim()).send().unwrap();
        assert_eq!(response.status(), 200, "{path}");
        response.json().unwrap()
    };
    for _ in 0..2 {
        get("/v1/search?q=teapots");
    }
    // Stopped at once: the tally may not have reached its interval flush; the graceful shutdown writes it.
    stop(server);
    let server = serve(&dir, port);
    let unmet = get("/v1/searches/unmet");
    assert_eq!(unmet["unmet"][0]["query"], "teapot");
    assert_eq!(unmet["unmet"][0]["count"], 2);
    stop(server);
    std::fs::remove_dir_all(&dir).ok();
}

/// A WebSocket open when the registry gets SIGTERM is closed with 1001 (going away) and a reason, not cut:
/// the relay's socket and the inbox socket alike; the process still exits 0.
#[tokio::test]
async fn open_websockets_are_closed_going_away_on_sigterm() {
    use futures::StreamExt;
    use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
    use tokio_tungstenite::tungstenite::{client::IntoClientRequest, Message};
    let dir = common::fresh_dir("bazaar-serve-ws-stop");
    let port = common::free_port();
    let server = serve(&dir, port);
    let credential = std::fs::read_to_string(dir.join("operator-credential")).unwrap();
    let (mut relay, _) = tokio_tungstenite::connect_async(format!("ws://127.0.0.1:{port}/relay")).await.unwrap();
    let mut request = format!("ws://127.0.0.1:{port}/v1/inbox/ws").into_client_request().unwrap();
    request.headers_mut().insert("authorization", format!("Bearer {}", credential.trim()).parse().unwrap());
    let (mut inbox, _) = tokio_tungstenite::connect_async(request).await.unwrap();
    let stopped = tokio::task::spawn_blocking(move || stop(server));
    for (name, socket) in [("relay", &mut relay), ("inbox", &mut inbox)] {
        let close = tokio::time::timeout(std::time::Duration::from_secs(10), async {
            while let Some(frame) = socket.next().await {
                if let Ok(Message::Close(frame)) = frame {
                    return frame;
                }
            }
            None
        })
        .await
        .unwrap_or_else(|_| panic!("{name}: a close frame in time"));
        let close = close.unwrap_or_else(|| panic!("{name}: closed with a frame, not cut"));
        assert_eq!(close.code, CloseCode::Away, "{name}: {close:?}");
        assert!(close.reason.contains("stopping"), "{name}: {close:?}");
    }
    stopped.await.unwrap();
    std::fs::remove_dir_all(&dir).ok();
}

/// Secrets at rest: a new data directory is 0700 and every database file and secret in it 0600; stdout says
/// where the operator credential is; a registry whose `bazaar.db` was made world-readable refuses to start
/// (naming the file and the fix) unless `--allow-insecure-permissions`, which warns and serves.
#[test]
fn the_data_directory_is_private_and_an_exposed_one_refuses_to_start() {
    let parent = common::fresh_dir("bazaar-serve-modes");
    let dir = parent.join("data");
    let port = common::free_port();
    let mut child = Command::new(env!("CARGO_BIN_EXE_bazaar"))
        .args(["serve", "--port", &port.to_string(), "--data-dir", dir.to_str().unwrap()])
        .env("BAZAAR_LOG", "warn")
        .env_remove("BAZAAR_OPERATOR_CREDENTIAL")
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let said: Vec<String> = lines.by_ref().take(3).map(Result::unwrap).collect();
    std::thread::spawn(move || for _ in lines {});
    let credential_file = dir.join("operator-credential");
    assert_eq!(said[2], format!("operator credential in {}", credential_file.display()), "{said:?}");
    let mode = |path: &Path| std::fs::metadata(path).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(&dir), 0o700, "the data directory");
    let mut files: Vec<_> = std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().path()).collect();
    files.sort();
    let names: Vec<String> = files.iter().map(|f| f.file_name().unwrap().to_string_lossy().into_owned()).collect();
    for expected in ["bazaar.db", "bazaar.db-wal", "conversation.db", "relay.db", "operator-credential"] {
        assert!(names.iter().any(|n| n == expected), "{expected} in {names:?}");
    }
    for file in &files {
        assert_eq!(mode(file), 0o600, "{}", file.display());
    }
    stop(child);

    std::fs::set_permissions(dir.join("bazaar.db"), std::fs::Permissions::from_mode(0o644)).unwrap();
    let refused = Command::new(env!("CARGO_BIN_EXE_bazaar"))
        .args(["serve", "--port", &port.to_string(), "--data-dir", dir.to_str().unwrap()])
        .env("BAZAAR_LOG", "warn")
        .output()
        .unwrap();
    assert!(!refused.status.success(), "an exposed ledger must not be served");
    let told = String::from_utf8_lossy(&refused.stderr);
    assert!(told.contains("bazaar.db (mode 644)") && told.contains("chmod 600"), "{told}");
    assert!(String::from_utf8_lossy(&refused.stdout).is_empty(), "nothing was served");

    let warned = common::spawn_serve(&[
        "--port".into(),
        port.to_string(),
        "--data-dir".into(),
        dir.display().to_string(),
        "--allow-insecure-permissions".into(),
    ]);
    // A later start (no credential given) still has the chamber's attacks: a press needs no credential.
    let credential = std::fs::read_to_string(&credential_file).unwrap();
    let catalogue = reqwest::blocking::Client::new()
        .get(format!("http://127.0.0.1:{port}/v1/chamber/attacks"))
        .bearer_auth(credential.trim())
        .send()
        .unwrap();
    assert_eq!(catalogue.status(), 200, "the attack catalogue is attached on every start");
    stop(warned);
    std::fs::set_permissions(dir.join("bazaar.db"), std::fs::Permissions::from_mode(0o600)).unwrap();
    audit(&dir);
    std::fs::remove_dir_all(&parent).ok();
}

/// `bazaar merchant` refuses to start without a real credential (none, or the docs' placeholder) and says
/// why, instead of serving a route whose every buyer would be refused for the merchant's fault.
#[test]
fn a_merchant_without_a_credential_refuses_to_start() {
    let dir = common::fresh_dir("bazaar-merchant-refuses");
    for credential in [None, Some("MERCHANT_CREDENTIAL")] {
        let mut command = Command::new(env!("CARGO_BIN_EXE_bazaar"));
        command.current_dir(&dir).args(["merchant", "--port", "0"]).env_remove("BAZAAR_CREDENTIAL");
        if let Some(credential) = credential {
            command.args(["--credential", credential]);
        }
        let refused = command.output().unwrap();
        assert_eq!(refused.status.code(), Some(2), "{credential:?}: {refused:?}");
        let told = String::from_utf8_lossy(&refused.stderr);
        assert!(told.contains("merchant_credential_invalid"), "{credential:?}: {told}");
        assert!(String::from_utf8_lossy(&refused.stdout).is_empty(), "it never said it listens");
        assert!(!dir.join("work-receipts.db").exists(), "nothing was written");
    }
    std::fs::remove_dir_all(&dir).ok();
}

/// `BAZAAR_CONTRACT_RECORD` (docs/testing.md): the served process appends every problem it answers as
/// `method route status code`, the route as its entry names it.
#[test]
fn a_recording_server_writes_each_problem_it_answers() {
    let dir = common::fresh_dir("bazaar-serve-record");
    let record = dir.join("problems.txt");
    let port = common::free_port();
    let args = ["--port".into(), port.to_string(), "--data-dir".into(), dir.join("data").display().to_string()];
    let mut server =
        common::spawn_serve_with(&args, &[(bazaar_server::contract::RECORD_ENV, record.to_str().unwrap())]);
    let registry = format!("http://127.0.0.1:{port}");
    let http = reqwest::blocking::Client::new();
    assert_eq!(http.get(format!("{registry}/v1/me")).send().unwrap().status(), 401);
    let refused = http.get(format!("{registry}/v1/members/nobody-here")).bearer_auth("bzc_unknown").send().unwrap();
    assert_eq!(refused.status(), 401);
    assert_eq!(http.get(format!("{registry}/healthz")).send().unwrap().status(), 200, "a success is not recorded");
    server.kill().ok();
    server.wait().ok();
    let lines: Vec<String> = std::fs::read_to_string(&record).unwrap().lines().map(str::to_string).collect();
    assert_eq!(
        lines,
        ["get /v1/me 401 unauthenticated", "get /v1/members/{member} 401 unauthenticated"],
        "one line per problem, in order"
    );
    std::fs::remove_dir_all(&dir).ok();
}

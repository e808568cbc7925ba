//! The refusal rails: every attack in the catalogue, run through the public
//! API against a live registry, must be refused with its code and leave
//! balances and the event ledger unchanged (but for the refusal itself).
//! One test per attack, each against its own registry whose dispute windows
//! are short enough for the attacks that must outwait a phase. Then the forms
//! that name no registry: chamber presses and `bazaar attack` run each attack in
//! a scratch registry and delete it, and the live registry keeps one refusal
//! record per press; `bazaar attack --registry` on a registry with default
//! settings skips, with the reason, what those settings cannot meet.

use crate::common;

use bazaar_attacks::{ensure_all_held, run, CATALOGUE};
use bazaar_cli::wire_json;
use bazaar_core::apply::Config;
use bazaar_core::dispute::Windows;
use bazaar_stage::{embedded_registry_with, LocalRegistry};

/// Seconds of each dispute phase the attacks outwait.
const SHORT_WINDOW_S: u64 = 2;

async fn registry(name: &str) -> (LocalRegistry, std::path::PathBuf) {
    let dir = common::fresh_dir(&format!("bazaar-attack-{name}"));
    let windows = Windows {
        answer_s: SHORT_WINDOW_S,
        evidence_s: SHORT_WINDOW_S,
        appeal_s: SHORT_WINDOW_S,
        ..Windows::standard()
    };
    let config = Config { windows, ..Config::standard() };
    let local = embedded_registry_with(&dir, Some("attack-op".into()), config).await.unwrap();
    // The webhook attacks capture a genuine delivery on a loopback receiver.
    local.state.plane().unwrap().allow_private_webhooks(true);
    bazaar_server::conversation::webhooks::spawn_sender(local.state.clone());
    (local, dir)
}

async fn holds(name: &str) {
    let attack = CATALOGUE.iter().find(|a| a.name == name).expect("in the catalogue");
    let (local, dir) = registry(name).await;
    let verdicts = run(&local.url, "attack-op", &[name.to_string()], &|line| eprintln!("{line}")).await.unwrap();
    let verdict = &verdicts[0];
    assert_eq!((verdict.status, verdict.code.as_str()), (attack.expect_status(), attack.expect.as_str()), "{name}");
    assert!(verdict.balances_unchanged, "{name}: balances changed");
    assert!(verdict.ledger_unchanged, "{name}: ledger changed: {:?}", verdict.events_appended);
    ensure_all_held(&verdicts).unwrap();
    common::assert_store_audit_passes(&local).await;
    std::fs::remove_dir_all(&dir).ok();
}

macro_rules! attack_tests {
    ($($test:ident => $name:literal,)*) => {
        $(
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $test() {
                holds($name).await;
            }
        )*

        #[test]
        fn every_attack_in_the_catalogue_has_a_test() {
            let tested = [$($name),*];
            for attack in CATALOGUE {
                assert!(tested.contains(&attack.name), "no test for {}", attack.name);
            }
            assert_eq!(tested.len(), CATALOGUE.len());
        }
    };
}

attack_tests! {
    private_room_read => "private-room-read",
    agent_etiquette => "agent-etiquette",
    sealed_plaintext_post => "sealed-plaintext-post",
    forged_message_signature => "forged-message-signature",
    webhook_replay => "webhook-replay",
    webhook_forged_signature => "webhook-forged-signature",
    spend_with_non_paying_credential => "spend-with-non-paying-credential",
    payment_without_exact_authorization => "payment-without-exact-authorization",
    second_payment_while_uncertain => "second-payment-while-uncertain",
    changed_terms_after_agreement => "changed-terms-after-agreement",
    accept_and_pay_without_verified_response => "accept-and-pay-without-verified-response",
    lease_for_another_identity => "lease-for-another-identity",
    relay_unnamed_worker_result => "relay-unnamed-worker-result",
    relay_forged_event => "relay-forged-event",
    relay_resubmitted_deleted_event => "relay-resubmitted-deleted-event",
    relay_older_replaceable_event => "relay-older-replaceable-event",
    evidence_off_allowlist => "evidence-off-allowlist",
    evidence_redirect_to_private_address => "evidence-redirect-to-private-address",
    second_settlement => "second-settlement",
    replayed_token => "replayed-token",
    expired_token => "expired-token",
    over_ceiling => "over-ceiling",
    other_merchant => "other-merchant",
    forged_token => "forged-token",
    invite_reuse => "invite-reuse",
    double_release => "double-release",
    release_disputed => "release-disputed",
    dispute_unpaid => "dispute-unpaid",
    dispute_foreign => "dispute-foreign",
    evidence_stranger => "evidence-stranger",
    party_rules => "party-rules",
    second_execution => "second-execution",
    stake_withdraw => "stake-withdraw",
    late_appeal => "late-appeal",
    tampered_passport => "tampered-passport",
    unrecognised_issuer => "unrecognised-issuer",
    passport_other_agent => "passport-other-agent",
    replayed_relay => "replayed-relay",
    self_dealing => "self-dealing",
    tiny_buys => "tiny-buys",
    offer_below_floor => "offer-below-floor",
    offer_above_cap => "offer-above-cap",
    offer_beyond_capacity => "offer-beyond-capacity",
    fourth_revision => "fourth-revision",
    agent_self_approval => "agent-self-approval",
    proof_for_another => "proof-for-another",
    share_captured_twice => "share-captured-twice",
    x402_other_merchant => "x402-other-merchant",
    x402_other_resource => "x402-other-resource",
}

/// The binary runs the same catalogue by name, exits 0 when it holds, and
/// refuses an unknown name.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_binary_runs_named_attacks() {
    let (local, dir) = registry("binary").await;
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_bazaar"))
        .args([
            "attack",
            "--json",
            "--registry",
            &local.url,
            "--credential",
            "attack-op",
            "over-ceiling",
            "double-release",
        ])
        .output()
        .unwrap();
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let verdicts: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(verdicts.as_array().unwrap().len(), 2);
    let unknown = std::process::Command::new(env!("CARGO_BIN_EXE_bazaar"))
        .args(["attack", "--registry", &local.url, "--credential", "attack-op", "no-such-attack"])
        .output()
        .unwrap();
    assert!(!unknown.status.success());
    std::fs::remove_dir_all(&dir).ok();
}

/// On a registry with the standard dispute windows (days), an attack that must outwait a phase is skipped with
/// the reason, and the run goes on with the rest, which hold.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_attack_the_windows_are_too_long_for_is_skipped_and_the_rest_still_run() {
    let dir = common::fresh_dir("bazaar-attack-standard-windows");
    let local = embedded_registry_with(&dir, Some("attack-op".into()), Config::standard()).await.unwrap();
    let first = CATALOGUE[0].name;
    let names = ["late-appeal".to_string(), first.to_string()];
    let verdicts = run(&local.url, "attack-op", &names, &|line| eprintln!("{line}")).await.unwrap();
    assert_eq!(verdicts.len(), 2);
    let reason = verdicts[0].skipped.as_deref().expect("late-appeal skipped");
    assert!(reason.contains("--appeal-window-s") && reason.contains("phase"), "{reason}");
    assert!(!verdicts[0].held(), "a skipped attack is not counted as held");
    assert!(verdicts[1].skipped.is_none() && verdicts[1].held(), "{first} still ran and held: {:?}", verdicts[1]);
    assert!(ensure_all_held(&verdicts).is_err());
    common::assert_store_audit_passes(&local).await;
    std::fs::remove_dir_all(&dir).ok();
}

/// Presses in the many-presses test, and the attacks they cycle through (money, membership, the
/// conversation plane, a webhook receiver: refusals with and without a kernel code).
const PRESSES: usize = 50;
const PRESSED: &[&str] = &["over-ceiling", "forged-token", "invite-reuse", "private-room-read", "webhook-replay"];

/// What the live registry holds as the API shows it to its operator: every account's balance and how many
/// members were ever created.
async fn holdings(operator: &bazaar_sdk::Client) -> (serde_json::Value, usize) {
    let accounts =
        operator.call::<serde_json::Value>(reqwest::Method::GET, "/v1/accounts", None, None).await.unwrap().body;
    assert!(accounts["next_after"].is_null(), "one page holds this registry's accounts");
    let mut members = 0;
    for kind in ["registry.created", "owner.created", "agent.enrolled"] {
        members += common::count_events(operator, kind).await;
    }
    (accounts["accounts"].clone(), members)
}

/// This process's threads that belong to a scratch registry (its own thread and its runtime's workers).
fn scratch_threads() -> Vec<String> {
    let tasks = std::fs::read_dir("/proc/self/task").unwrap().flatten();
    let names = tasks.filter_map(|task| std::fs::read_to_string(task.path().join("comm")).ok());
    names.map(|name| name.trim().to_string()).filter(|name| name.starts_with("bazaar-scratch")).collect()
}

async fn head(local: &LocalRegistry) -> u64 {
    let health: serde_json::Value = reqwest::get(format!("{}/healthz", local.url)).await.unwrap().json().await.unwrap();
    health["event_seq"].as_u64().unwrap()
}

/// 50 presses of "try to break it" on a live registry: each is refused as expected in a scratch registry
/// that is gone afterwards, and the live registry's event ledger grows by exactly 50 `refusal.recorded`
/// (each naming its attack and code) while its balances and members stay as they were.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fifty_presses_leave_fifty_refusal_records_and_nothing_else() {
    use bazaar_server::chamber::attacks::AttackLimits;
    let dir = common::fresh_dir("bazaar-attack-presses");
    let (local, operator) = common::embedded_with_operator(&dir, "attack-op").await;
    // The standard limits (20 a minute, 5 per visitor) would hold this test for minutes.
    assert!(local.state.limit_attacks(AttackLimits { per_minute: PRESSES, per_visitor_per_minute: PRESSES }));
    assert!(local.state.attach_attacks(std::sync::Arc::new(bazaar_attacks::ChamberAttacks)));
    let (owner, _) = bazaar_stage::enroll_pair(&operator, "press-owner", "press-agent").await.unwrap();
    let funding =
        common::Funding { mint: (5_000, "press-mint"), fund: (2_000, "press-fund"), budget: [500, 2_000, 2_000] };
    common::fund_agent(&operator, &owner, "press-agent", funding).await;

    let before = holdings(&operator).await;
    let refusals_before = common::count_events(&operator, "refusal.recorded").await;
    let head_before = head(&local).await;
    let started = std::time::Instant::now();
    let http = reqwest::Client::new();
    for press in 0..PRESSES {
        let name = PRESSED[press % PRESSED.len()];
        let answer = http
            .post(format!("{}/v1/chamber/attacks/{name}", local.url))
            .bearer_auth("attack-op")
            .send()
            .await
            .unwrap();
        let status = answer.status().as_u16();
        let verdict: serde_json::Value = answer.json().await.unwrap();
        assert_eq!(status, 200, "press {press} ({name}): {verdict}");
        assert_eq!(verdict["refused_as_expected"], true, "press {press} ({name}): {verdict}");
        assert_eq!(verdict["recorded"], true, "press {press} ({name}): {verdict}");
    }
    eprintln!("{PRESSES} presses in {:.1} s", started.elapsed().as_secs_f64());

    assert_eq!(head(&local).await, head_before + PRESSES as u64, "the ledger grew by one event a press");
    assert_eq!(common::count_events(&operator, "refusal.recorded").await, refusals_before + PRESSES);
    let page = wire_json(&operator.events(head_before, PRESSES).await.unwrap());
    let events = page["events"].as_array().unwrap();
    assert_eq!(events.len(), PRESSES);
    for (press, event) in events.iter().enumerate() {
        let name = PRESSED[press % PRESSED.len()];
        let expect = CATALOGUE.iter().find(|a| a.name == name).unwrap().expect.as_str();
        assert_eq!(event["kind"], "refusal.recorded", "{event}");
        let body = &event["body"];
        assert_eq!((body["attack"].as_str(), body["code"].as_str()), (Some(name), Some(expect)), "{event}");
        assert_eq!(body["met_in"], "scratch", "{event}");
    }
    assert_eq!(holdings(&operator).await, before, "balances and members are as they were");
    // An anonymous visitor of a public chamber sees which attack each press was, and its code.
    local.state.set_public_stream(true);
    let public: serde_json::Value = http
        .get(format!("{}/v1/stream/history?limit={PRESSES}", local.url))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let seen: Vec<(&str, &str)> = public["events"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|e| Some((e["body"]["attack"].as_str()?, e["body"]["code"].as_str()?)))
        .collect();
    assert_eq!(seen.len(), PRESSES, "each press's attack and code are public: {public}");
    let left = bazaar_attacks::scratch::scratch_dirs_of(std::process::id());
    assert!(left.is_empty(), "scratch registries left behind: {left:?}");
    let threads = scratch_threads();
    assert!(threads.is_empty(), "scratch registries' threads still running: {threads:?}");
    common::assert_store_audit_passes(&local).await;
    std::fs::remove_dir_all(&dir).ok();
}

/// `bazaar attack --all --registry URL` against `bazaar serve` on its default settings (dispute windows of
/// days, webhooks to loopback refused): it says first what it will leave behind, skips what those settings
/// cannot meet with the reason, runs the rest, and exits 0 because every attack that ran was refused.
#[test]
fn attack_all_against_a_default_registry_skips_what_its_settings_cannot_meet_and_exits_0() {
    let dir = common::fresh_dir("bazaar-attack-default-serve");
    let port = common::free_port();
    let data = dir.join("data");
    let mut serve = common::spawn_serve(&[
        "--port".into(),
        port.to_string(),
        "--data-dir".into(),
        data.display().to_string(),
        "--operator-credential".into(),
        "attack-op".into(),
    ]);
    let url = format!("http://127.0.0.1:{port}");
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_bazaar"))
        .args(["attack", "--all", "--registry", &url, "--credential", "attack-op"])
        .env_remove("BAZAAR_CREDENTIAL_FILE")
        .output()
        .unwrap();
    serve.kill().ok();
    serve.wait().ok();
    let stdout = String::from_utf8_lossy(&output.stdout).to_string();
    assert!(output.status.success(), "{stdout}\n{}", String::from_utf8_lossy(&output.stderr));
    let notice = stdout.lines().next().unwrap_or_default();
    assert!(notice.starts_with(&format!("against {url}:")) && notice.contains("kept there"), "{notice}");
    assert!(notice.contains(&format!("{} attacks", CATALOGUE.len())), "{notice}");
    let skipped: Vec<&str> = stdout.lines().filter(|l| l.starts_with("  skipped ")).collect();
    for (name, reason) in [
        ("webhook-replay", "--allow-private-webhooks"),
        ("webhook-forged-signature", "--allow-private-webhooks"),
        ("second-execution", "--answer-window-s"),
        ("late-appeal", "--appeal-window-s"),
    ] {
        let line = skipped.iter().find(|l| l.starts_with(&format!("  skipped {name}:")));
        assert!(line.is_some_and(|l| l.contains(reason)), "{name} skipped for {reason}: {skipped:?}\n{stdout}");
    }
    let ran = CATALOGUE.len() - skipped.len();
    assert!(stdout.contains(&format!("{ran} of {ran} attacks run refused")), "{stdout}");
    std::fs::remove_dir_all(&dir).ok();
}

/// `bazaar attack --all` with no registry runs every attack in the catalogue in a scratch registry — none
/// skipped, each held — and leaves no scratch directory behind.
#[test]
fn attack_all_without_a_registry_runs_the_whole_catalogue_in_a_scratch_registry() {
    let child = std::process::Command::new(env!("CARGO_BIN_EXE_bazaar"))
        .args(["--json", "attack", "--all"])
        .env_remove("BAZAAR_REGISTRY")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id();
    let output = child.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "{stdout}\n{}", String::from_utf8_lossy(&output.stderr));
    let verdicts: serde_json::Value = serde_json::from_str(stdout.trim()).unwrap();
    let verdicts = verdicts.as_array().unwrap();
    let names: Vec<&str> = verdicts.iter().map(|v| v["name"].as_str().unwrap()).collect();
    let catalogue: Vec<&str> = CATALOGUE.iter().map(|a| a.name).collect();
    assert_eq!(names, catalogue, "every attack ran, in catalogue order");
    for verdict in verdicts {
        assert!(verdict.get("skipped").is_none(), "none skipped: {verdict}");
        for held in ["refused_as_expected", "balances_unchanged", "ledger_unchanged"] {
            assert_eq!(verdict[held], true, "{held}: {verdict}");
        }
    }
    let left = bazaar_attacks::scratch::scratch_dirs_of(pid);
    assert!(left.is_empty(), "scratch registries left behind: {left:?}");
}

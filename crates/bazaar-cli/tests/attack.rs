//! The refusal rails: every attack in the catalogue, run through the public
//! API against a live registry, must be refused with its code and leave
//! balances and the event ledger unchanged (but for the refusal itself).
//! One test per attack, each against its own registry whose dispute windows
//! are short enough for the attacks that must outwait a phase.

mod common;

use bazaar_cli::attack::{ensure_all_held, run, CATALOGUE};
use bazaar_cli::story::{embedded_registry_with, LocalRegistry};
use bazaar_core::apply::Config;
use bazaar_core::dispute::Windows;

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

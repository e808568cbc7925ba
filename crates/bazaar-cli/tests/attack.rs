//! The refusal rails: every attack in the catalogue, run through the public
//! API against a live registry, must be refused with its code and leave
//! balances and the event ledger unchanged (but for the refusal itself).

use bazaar_cli::attack::{ensure_all_held, run, CATALOGUE};
use bazaar_cli::demo::embedded_registry;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_attack_is_refused_and_changes_nothing() {
    let dir = std::env::temp_dir().join(format!("bazaar-attack-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let local = embedded_registry(&dir, Some("attack-op".into())).await.unwrap();
    let url = local.url.clone();

    let verdicts = run(&url, "attack-op", &[], &|line| eprintln!("{line}")).await.unwrap();
    assert_eq!(verdicts.len(), CATALOGUE.len());
    for (verdict, attack) in verdicts.iter().zip(CATALOGUE) {
        assert_eq!(
            (verdict.status, verdict.code.as_str()),
            (attack.expect_status(), attack.expect.as_str()),
            "{}",
            verdict.name
        );
        assert!(verdict.balances_unchanged, "{}: balances changed", verdict.name);
        assert!(verdict.ledger_unchanged, "{}: ledger changed: {:?}", verdict.name, verdict.events_appended);
    }
    ensure_all_held(&verdicts).unwrap();
    let report = bazaar_store::audit::audit(local.state.store.as_ref(), &|_| {}).await.unwrap();
    assert!(report.ok, "{:?}", report.problems);

    // The binary runs the same catalogue by name and exits 0 when it holds.
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_bazaar"))
        .args(["attack", "--json", "--registry", &url, "--credential", "attack-op", "over-ceiling", "forged-token"])
        .output()
        .unwrap();
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let verdicts: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(verdicts.as_array().unwrap().len(), 2);
    let unknown = std::process::Command::new(env!("CARGO_BIN_EXE_bazaar"))
        .args(["attack", "--registry", &url, "--credential", "attack-op", "no-such-attack"])
        .output()
        .unwrap();
    assert!(!unknown.status.success());
    std::fs::remove_dir_all(&dir).ok();
}

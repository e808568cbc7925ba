//! The escrowed order end to end through HTTP, on the embedded store and on
//! PostgreSQL: three milestones (one released by the buyer, one released by
//! the review window, one disputed through all four phases with an appeal and
//! a slash), then `audit`. And the threshold: a purchase above it opens a
//! contract instead of a bare token, from the SDK and from `bazaar pay`.

use crate::common;

use bazaar_cli::demo::escrow::{escrow_story, EscrowReport, MILESTONES_MINOR, REFUND_MINOR, SLASH_MINOR, STAKE_MINOR};
use bazaar_cli::wire_json;
use bazaar_core::apply::Config;
use bazaar_stage::{embedded_registry_with, enroll_pair, LocalRegistry};

fn check(report: &EscrowReport) {
    let total: u64 = MILESTONES_MINOR.iter().sum();
    let fee = |amount: u64| amount / 100;
    let paid_to_mill = [MILESTONES_MINOR[0], MILESTONES_MINOR[1], MILESTONES_MINOR[2] - REFUND_MINOR];
    assert_eq!(report.bare_token_code, "escrow_required");
    assert!(report.auto_released, "the silent buyer's milestone released after the review window");
    assert_eq!(report.total_minor, total);
    assert_eq!(report.refunded_minor, REFUND_MINOR);
    assert_eq!(report.fees_minor, paid_to_mill.iter().map(|a| fee(*a)).sum::<u64>());
    assert_eq!(report.released_net_minor, paid_to_mill.iter().map(|a| a - fee(*a)).sum::<u64>());
    assert_eq!(report.held_minor, 0);
    assert_eq!(report.frozen["escrow"], MILESTONES_MINOR[2], "filing froze the disputed milestone");
    assert_eq!(report.phases, ["filed", "evidence", "ruling", "appealable", "ruling", "executed"]);
    assert_eq!(report.outcome["refunded_minor"], REFUND_MINOR);
    assert_eq!(report.outcome["slashed_minor"], SLASH_MINOR);
    assert_eq!(report.outcome["slash_to_insurance_minor"], SLASH_MINOR);
    assert_eq!(report.outcome["bond"]["returned"], true, "the appeal won, so its bond came back");
    assert_eq!(report.stake_after_minor, (STAKE_MINOR - SLASH_MINOR) as i64);
    assert_eq!(report.insurance_minor, SLASH_MINOR as i128);
    assert_eq!(report.second_execution_code, "dispute_executed");
}

async fn story_and_audit(local: &LocalRegistry) {
    let report = escrow_story(local, &|line| eprintln!("{line}")).await.unwrap();
    check(&report);
    let audit = common::assert_store_audit_passes(local).await;
    assert_eq!(audit.balance_sum_minor, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn escrowed_order_with_dispute_appeal_and_slash_on_sqlite() {
    let dir = common::fresh_dir("bazaar-escrow");
    let local = embedded_registry_with(&dir, None, Config::standard()).await.unwrap();
    story_and_audit(&local).await;
    std::fs::remove_dir_all(&dir).ok();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn escrowed_order_with_dispute_appeal_and_slash_on_postgres() {
    let database = common::ThrowawayDatabase::create(&format!("bazaar_escrow_{}", std::process::id())).await;
    let local = database.registry().await;
    story_and_audit(&local).await;
    drop(local);
    database.drop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_purchase_above_the_threshold_opens_a_contract() {
    let dir = common::fresh_dir("bazaar-threshold");
    let (local, operator) = common::embedded_with_operator(&dir, "op").await;
    let (owner, buyer) = enroll_pair(&operator, "big-owner", "big-buyer").await.unwrap();
    let (_, shop) = enroll_pair(&operator, "shop-owner", "big-shop").await.unwrap();
    let funding =
        common::Funding { mint: (1_000_000, "m"), fund: (1_000_000, "f"), budget: [500_000, 1_000_000, 1_000_000] };
    common::fund_agent(&operator, &owner, "big-buyer", funding).await;
    let price = bazaar_types::limits::ESCROW_THRESHOLD_MINOR + 1;
    let bought = buyer.purchase("https://big-shop/crate", "big-shop", price, "crate-1").await.unwrap();
    let bazaar_sdk::Purchase::Escrowed(contract) = bought else { panic!("above the threshold, a contract") };
    assert_eq!(contract.total, price);
    assert_eq!(contract.held_minor, price);
    assert_eq!(contract.state, "offered");
    // A retried purchase finds the same contract (its key is derived from the order).
    let again = buyer.purchase("https://big-shop/crate", "big-shop", price, "crate-1").await.unwrap();
    let bazaar_sdk::Purchase::Escrowed(same) = again else { panic!("a contract again") };
    assert_eq!(same.id, contract.id);
    assert_eq!(wire_json(&buyer.me().await.unwrap())["available_minor"], 1_000_000 - price, "held once");

    // `bazaar pay` does the same.
    let credential = buyer.credential().unwrap().to_string();
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_bazaar"))
        .args(["pay", "--json", "--registry", &local.url, "--credential", &credential])
        .args(["https://big-shop/crate", "--merchant", "big-shop", "--max", &price.to_string(), "--order", "crate-2"])
        .output()
        .unwrap();
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let printed: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(printed["total"], price);
    assert!(printed["id"].as_str().unwrap().starts_with("ctr_"));
    assert_eq!(wire_json(&buyer.me().await.unwrap())["available_minor"], 1_000_000 - 2 * price);

    // `bazaar contract reclaim` sends the buyer's reclaim: before the due date and the grace, the registry's
    // refusal names when it becomes possible, and the milestone stays held.
    let id = contract.id.as_str();
    shop.contract_act(id, "accept").await.unwrap();
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_bazaar"))
        .args(["contract", "--registry", &local.url, "--credential", &credential, "reclaim", id, "0"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success(), "too early: {}", String::from_utf8_lossy(&output.stdout));
    assert!(
        stderr.contains("reclaim_too_early") && stderr.contains("facts: ") && stderr.contains("reclaimable_at_ms=")
    );
    // With --json: the problem's code and its facts, as the storefront commands print a refusal.
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_bazaar"))
        .args(["--json", "contract", "--registry", &local.url, "--credential", &credential, "reclaim", id, "0"])
        .output()
        .unwrap();
    assert!(!output.status.success());
    let printed: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!((printed["status"].as_u64(), printed["code"].as_str()), (Some(409), Some("reclaim_too_early")));
    assert!(printed["facts"]["reclaimable_at_ms"].as_i64().unwrap() > printed["facts"]["now_ms"].as_i64().unwrap());
    assert_eq!(wire_json(&buyer.contract(id).await.unwrap())["held_minor"], price, "nothing moved");
    std::fs::remove_dir_all(&dir).ok();
}

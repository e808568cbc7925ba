//! The hundred-paid-calls story through HTTP and the SDK middleware: the work
//! counter reaches exactly 100 despite a buyer re-sending one order five times
//! and the merchant crashing once after settling and once before answering.

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hundred_paid_calls_settle_and_work_exactly_once() {
    let dir = std::env::temp_dir().join(format!("bazaar-story-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let report = bazaar_cli::demo::story(&dir, 100, &|line| eprintln!("{line}")).await.unwrap();
    std::fs::remove_dir_all(&dir).ok();
    assert_eq!(report.settlements, 100, "one settlement per order");
    assert_eq!(report.work_runs, 100, "the work ran once per order");
    assert!(report.requests_sent > 100, "retries happened: {}", report.requests_sent);
    assert!(report.replayed_answers >= 1, "a retry was answered from a work receipt");
    assert_eq!(report.buyer_debited_minor, 100 * 250, "one debit per order");
    assert_eq!(report.merchant_received_minor + report.fees_minor, 100 * 250);
    assert_eq!(report.over_ceiling_code, "budget_per_call_exceeded");
    assert_eq!(report.consumed_token_verify["genuine"], true);
    assert_eq!(report.consumed_token_verify["state"], "settled");
    assert!(report.audit_ok);
    assert_eq!(report.balance_sum_minor, 0);
}

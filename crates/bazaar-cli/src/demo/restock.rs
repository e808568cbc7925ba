//! The restock chapter of `bazaar demo`: an owner funds a procurement agent; the
//! agent makes paid calls to a wholesaler storefront built on the SDK's
//! paid-route middleware; one order is re-sent five times (some concurrently)
//! as if the buyer crashed mid-retry; the merchant "crashes" once after
//! settling and once before answering; one request above the per-call ceiling
//! is refused. Its report proves one debit per order, the work run once per
//! order, conservation, and a passing audit.

use anyhow::{ensure, Context, Result};
use axum::routing::post;
use axum::{Extension, Json, Router};
use bazaar_sdk::client::PaidResponse;
use bazaar_sdk::paid::{paid, FaultPoint, PaidRoute, Settled};
use bazaar_sdk::wire::chamber::PilotProof;
use bazaar_sdk::Client;
use bazaar_stage::{audit_word, enroll_pair, member_id, refusal_code, serve, LocalRegistry};
use bazaar_store::Store;
use serde::Serialize;
use serde_json::json;
use std::collections::HashSet;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

/// Price of one restock call, in minor units.
pub const PRICE_MINOR: u64 = 250;
/// The order the buyer re-sends after its simulated crash.
const CRASHY_BUYER_ORDER: u32 = 50;
/// Times the crashed buyer re-sends that order (3 at once, then 2 in turn).
const RESENDS: usize = 5;
/// Orders on which the merchant "crashes" once: after settle, and before answering.
const MERCHANT_CRASH_AFTER_SETTLE: u32 = 42;
const MERCHANT_CRASH_BEFORE_ANSWER: u32 = 77;

/// What the restock chapter measured; the demo's report carries it flattened.
#[derive(Debug, Serialize)]
pub struct RestockReport {
    pub calls: u32,
    pub settlements: u64,
    pub work_runs: u64,
    pub buyer_debited_minor: i128,
    pub merchant_received_minor: i128,
    pub fees_minor: i128,
    pub requests_sent: u64,
    pub replayed_answers: u64,
    pub over_ceiling_code: String,
    pub consumed_token_verify: serde_json::Value,
    pub audit_ok: bool,
    pub balance_sum_minor: i128,
}

/// The chapter's report, and the two agents the federation chapter meets again.
pub struct Restocked {
    pub report: RestockReport,
    pub buyer: Client,
    pub merchant: Client,
}

/// Requests the buyer sent and how many were answered from a work receipt.
#[derive(Default)]
struct Tally {
    requests_sent: u64,
    replayed_answers: u64,
}

impl Tally {
    fn count(&mut self, paid: &PaidResponse) {
        self.requests_sent += paid.attempts as u64;
        self.replayed_answers += paid.replayed as u64;
    }
}

/// Runs `calls` paid restock calls on `local` (receipts kept in `dir`); `say` narrates.
pub async fn restock_story(
    local: &LocalRegistry,
    dir: &Path,
    calls: u32,
    say: &(dyn Fn(String) + Sync),
) -> Result<Restocked> {
    let (buyer, merchant) = cast(&local.operator(), "", say).await?;
    let work_runs = Arc::new(AtomicU64::new(0));
    let crashed = Arc::new(Mutex::new(HashSet::new()));
    let route =
        PaidRoute::new(merchant.clone(), PRICE_MINOR, &dir.join("work-receipts.db"))?.with_fault(fault_once(crashed));
    let shop_url = serve(storefront(Arc::new(route), work_runs.clone())).await?;
    say(format!(
        "storefront `wholesaler` on {shop_url}/restock, {PRICE_MINOR} per call, behind the paid-route middleware"
    ));
    let tally = pay_orders(&buyer, &shop_url, "wholesaler", calls, &work_runs, say).await?;

    let over = buyer.issue_token("wholesaler", 5_000, "order-too-big", "restock").await;
    let over_ceiling_code = refusal_code(over);
    say(format!("an order of 5000 against the 1000 per-call ceiling was refused: {over_ceiling_code}"));
    let last = buyer
        .issue_token("wholesaler", PRICE_MINOR, &format!("order-{calls:04}"), &format!("{shop_url}/restock"))
        .await?;
    let consumed_token_verify = merchant.verify(last.body.token.as_str()).await?;
    say(format!(
        "verify of a consumed token still says genuine={} state={} — verify is a receipt check, never a work order",
        consumed_token_verify.genuine(),
        consumed_token_verify.state().unwrap_or("none")
    ));
    let mut report = summary(local.state.store.as_ref(), calls, &work_runs, tally).await?;
    report.over_ceiling_code = over_ceiling_code;
    report.consumed_token_verify = serde_json::to_value(&consumed_token_verify)?;
    narrate_summary(&report, say);
    Ok(Restocked { report, buyer, merchant })
}

/// The restaurant and its procurement agent (funded, with ceilings), and the wholesaler.
/// Every handle and key ends in `suffix`, so a chamber run repeats the story on one registry.
async fn cast(operator: &Client, suffix: &str, say: &(dyn Fn(String) + Sync)) -> Result<(Client, Client)> {
    let agent = format!("procurement{suffix}");
    let (owner, buyer) = enroll_pair(operator, &format!("restaurant{suffix}"), &agent).await?;
    let (_, merchant) = enroll_pair(operator, &format!("wholesale-co{suffix}"), &format!("wholesaler{suffix}")).await?;
    operator.mint(&member_id(&owner).await?, 1_000_000, &format!("demo-mint{suffix}")).await?;
    owner.fund(&agent, 60_000, &format!("demo-fund{suffix}")).await?;
    owner.set_budget(&agent, 1_000, 60_000, 60_000).await?;
    say("owner `restaurant` funded agent `procurement` with 60000; ceilings: 1000 per call, 60000 per day, 60000 in total".into());
    Ok((buyer, merchant))
}

/// Pays orders 1..=calls, re-sending the crashy buyer's order; every one must succeed.
async fn pay_orders(
    buyer: &Client,
    shop_url: &str,
    merchant: &str,
    calls: u32,
    work_runs: &AtomicU64,
    say: &(dyn Fn(String) + Sync),
) -> Result<Tally> {
    let mut tally = Tally::default();
    let url = format!("{shop_url}/restock");
    for i in 1..=calls {
        let order = format!("order-{i:04}");
        if i == CRASHY_BUYER_ORDER {
            say(format!("  {order}: the buyer crashes mid-retry and re-sends the order {RESENDS} times (3 at once, then 2 in turn)"));
            resend(buyer, &url, merchant, &order, &mut tally).await?;
        } else {
            let paid = buyer.pay(&url, merchant, PRICE_MINOR, &order).await?;
            ensure!(paid.status == 200, "{order} failed: {} {}", paid.status, paid.body);
            tally.count(&paid);
            report_crash(i, &order, &paid, say);
        }
        if i % 10 == 0 {
            say(format!("  {i}/{calls} paid calls settled; work ran {} times", work_runs.load(Ordering::SeqCst)));
        }
    }
    Ok(tally)
}

/// The crashed buyer's re-sends: three at once, then the rest one at a time.
async fn resend(buyer: &Client, url: &str, merchant: &str, order: &str, tally: &mut Tally) -> Result<()> {
    let mut sends: Vec<_> = (0..3)
        .map(|_| {
            let (b, u, m, o) = (buyer.clone(), url.to_string(), merchant.to_string(), order.to_string());
            tokio::spawn(async move { b.pay(&u, &m, PRICE_MINOR, &o).await })
        })
        .collect();
    for _ in 3..RESENDS {
        for send in sends.drain(..) {
            tally.count(&send.await??);
        }
        tally.count(&buyer.pay(url, merchant, PRICE_MINOR, order).await?);
    }
    Ok(())
}

fn report_crash(i: u32, order: &str, paid: &PaidResponse, say: &(dyn Fn(String) + Sync)) {
    if i == MERCHANT_CRASH_AFTER_SETTLE || i == MERCHANT_CRASH_BEFORE_ANSWER {
        say(format!(
            "  {order}: the merchant crashed {} — the buyer retried {} time(s) and got {}",
            if i == MERCHANT_CRASH_AFTER_SETTLE {
                "after settling, before the work"
            } else {
                "after the work, before answering"
            },
            paid.attempts - 1,
            if paid.replayed { "the stored work receipt" } else { "the work, run once" }
        ));
    }
}

/// Reads the ledger back: settlements, who paid whom, and the audit. The
/// refusal and verify fields are left for the caller to fill.
async fn summary(store: &dyn Store, calls: u32, work_runs: &AtomicU64, tally: Tally) -> Result<RestockReport> {
    let audit = bazaar_store::audit::audit(store, &|_| {}).await?;
    let mut settlements = 0;
    let mut after = 0;
    loop {
        let page = store.events(after, bazaar_types::limits::PAGE_LIMIT_MAX).await?;
        let Some(last) = page.last() else { break };
        after = last.seq;
        settlements += page.iter().filter(|e| e.kind == "settlement.posted").count() as u64;
    }
    let balance = |id: bazaar_types::AccountId| async move {
        store.account(&id).await.ok().flatten().map(|a| a.balance()).unwrap_or(0)
    };
    let buyer = store.member_by_handle("procurement").await?.context("buyer")?;
    let merchant = store.member_by_handle("wholesaler").await?.context("merchant")?;
    Ok(RestockReport {
        calls,
        settlements,
        work_runs: work_runs.load(Ordering::SeqCst),
        buyer_debited_minor: 60_000 - balance(bazaar_types::AccountId::of_member(&buyer.id)).await,
        merchant_received_minor: balance(bazaar_types::AccountId::of_member(&merchant.id)).await,
        fees_minor: balance(bazaar_types::AccountId::fees()).await,
        requests_sent: tally.requests_sent,
        replayed_answers: tally.replayed_answers,
        over_ceiling_code: String::new(),
        consumed_token_verify: serde_json::Value::Null,
        audit_ok: audit.ok,
        balance_sum_minor: audit.balance_sum_minor,
    })
}

fn narrate_summary(report: &RestockReport, say: &(dyn Fn(String) + Sync)) {
    say(format!(
        "\nsummary: {} orders, {} requests sent, {} answered from work receipts",
        report.calls, report.requests_sent, report.replayed_answers
    ));
    say(format!("  settlements: {} (one debit per order)   work runs: {}", report.settlements, report.work_runs));
    say(format!(
        "  buyer paid {}; merchant received {}; protocol fees {}",
        report.buyer_debited_minor, report.merchant_received_minor, report.fees_minor
    ));
    say(format!("  Σ balances = {} (conserved)   audit: {}", report.balance_sum_minor, audit_word(report.audit_ok)));
}

/// The wholesaler's storefront: one paid route whose work is counted.
pub fn storefront(route: Arc<PaidRoute>, work_runs: Arc<AtomicU64>) -> Router {
    Router::new()
        .route("/restock", post(move |Extension(settled): Extension<Settled>| {
            let work_runs = work_runs.clone();
            async move {
                let run = work_runs.fetch_add(1, Ordering::SeqCst) + 1;
                Json(json!({"order": settled.order_id, "settlement": settled.settlement_id, "picked": 12, "work_run": run}))
            }
        }))
        .route_layer(axum::middleware::from_fn_with_state(route, paid))
}

/// Crashes the merchant once per (point, order) on the story's chosen orders.
fn fault_once(crashed: Arc<Mutex<HashSet<String>>>) -> bazaar_sdk::paid::FaultHook {
    Arc::new(move |point, order| {
        let target = match point {
            FaultPoint::AfterSettle => format!("order-{MERCHANT_CRASH_AFTER_SETTLE:04}"),
            FaultPoint::BeforeAnswer => format!("order-{MERCHANT_CRASH_BEFORE_ANSWER:04}"),
        };
        order == target && crashed.lock().expect("fault mutex").insert(format!("{point:?}{order}"))
    })
}

/// The pilot phase, live in the chamber: the same paid calls — the buyer's crash mid-retry, the merchant's two
/// crashes — with a fresh cast (handles end in `suffix`) against the registry `operator` speaks to, the proof
/// read back through the public API: one settlement per order, the work run once per order, what the buyer
/// paid, and every balance summing to zero. Work receipts live in `dir`.
pub async fn pilot(operator: &Client, dir: &Path, calls: u32, suffix: &str) -> Result<PilotProof> {
    let (buyer, merchant) = cast(operator, suffix, &|_| {}).await?;
    let merchant_handle = format!("wholesaler{suffix}");
    let work_runs = Arc::new(AtomicU64::new(0));
    let crashed = Arc::new(Mutex::new(HashSet::new()));
    std::fs::create_dir_all(dir)?;
    let route =
        PaidRoute::new(merchant.clone(), PRICE_MINOR, &dir.join("work-receipts.db"))?.with_fault(fault_once(crashed));
    let shop_url = serve(storefront(Arc::new(route), work_runs.clone())).await?;
    let tally = pay_orders(&buyer, &shop_url, &merchant_handle, calls, &work_runs, &|_| {}).await?;
    // Settlements: the payments credited to the merchant's own account (its history, not the whole ledger).
    let history = format!("/v1/accounts/acct:{}/transfers", member_id(&merchant).await?);
    let (mut settlements, mut after) = (0u64, 0i64);
    loop {
        let page = merchant
            .call::<serde_json::Value>(reqwest::Method::GET, &format!("{history}?after={after}"), None, None)
            .await?
            .body;
        settlements += page["transfers"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|t| t["kind"] == "payment" && t["direction"] == "credit")
            .count() as u64;
        match page["next_after"].as_i64() {
            Some(next) => after = next,
            None => break,
        }
    }
    let (mut balance_sum, mut cursor) = (0i128, String::new());
    loop {
        let path = format!("/v1/accounts?after={cursor}&limit={}", bazaar_types::limits::PAGE_LIMIT_MAX);
        let page = operator.call::<serde_json::Value>(reqwest::Method::GET, &path, None, None).await?.body;
        for account in page["accounts"].as_array().into_iter().flatten() {
            balance_sum += account["balance"].as_str().and_then(|b| b.parse::<i128>().ok()).unwrap_or_default();
        }
        match page["next_after"].as_str() {
            Some(next) => cursor = next.to_string(),
            None => break,
        }
    }
    let available = |me: bazaar_sdk::wire::identity::Me| me.balance_minor.unwrap_or_default();
    Ok(PilotProof {
        run: "pilot".into(),
        cast: suffix.to_string(),
        calls,
        settlements,
        work_runs: work_runs.load(Ordering::SeqCst),
        requests_sent: tally.requests_sent,
        replayed_answers: tally.replayed_answers,
        buyer_paid_minor: 60_000 - available(buyer.me().await?),
        merchant_received_minor: available(merchant.me().await?),
        balance_sum_minor: balance_sum.to_string(),
    })
}

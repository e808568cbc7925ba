//! `bazaar demo`: the restock story on a fresh embedded registry, narrated.
//!
//! An owner funds a procurement agent; the agent makes paid calls to a
//! wholesaler storefront built on the SDK's paid-route middleware; one order is
//! re-sent five times (some concurrently) as if the buyer crashed mid-retry;
//! the merchant "crashes" once after settling and once before answering; one
//! request above the per-call ceiling is refused. The summary proves one debit
//! per order, the work run once per order, conservation, and a passing audit.
//! Then the escrow chapter ([`crate::demo_escrow`]) runs on the same registry,
//! then the passport and cross-registry chapter ([`crate::demo_federation`]),
//! then the storefront chapter ([`crate::demo_market`]).

use crate::runtime::registry_config;
use anyhow::{ensure, Context, Result};
use axum::routing::post;
use axum::{Extension, Json, Router};
use bazaar_sdk::paid::{paid, FaultPoint, PaidRoute, Settled};
use bazaar_sdk::{generate_key, Client};
use bazaar_store::Store;
use bazaar_types::Clock;
use serde::Serialize;
use serde_json::json;
use std::collections::HashSet;
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
const CALLS_MAX: u32 = 10_000;

/// What the story measured; the test and the summary read it.
#[derive(Debug, Serialize)]
pub struct StoryReport {
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
    /// The escrow chapter, run after the paid calls on the same registry.
    pub escrow: Option<crate::demo_escrow::EscrowReport>,
    /// The passport and cross-registry chapter.
    pub federation: Option<crate::demo_federation::FederationReport>,
    /// The storefront chapter (forty cushion covers).
    pub market: Option<crate::demo_market::MarketReport>,
}

pub async fn run(calls: u32, json_output: bool) -> Result<i32> {
    let dir = std::env::temp_dir().join(format!("bazaar-demo-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let say = |line: String| {
        if !json_output {
            println!("{line}");
        }
    };
    let report = story(&dir, calls.min(CALLS_MAX), &say).await;
    std::fs::remove_dir_all(&dir).ok();
    let report = report?;
    if json_output {
        println!("{}", serde_json::to_string(&report)?);
    }
    let escrow_ok = report.escrow.as_ref().is_some_and(|e| e.second_execution_code == "dispute_executed");
    let federation_ok = report.federation.as_ref().is_some_and(|f| {
        f.audits_ok && f.cross_status == 200 && f.corridor_on_a == -f.corridor_on_b && f.corridor_on_a > 0
    });
    let market_ok = report.market.as_ref().is_some_and(|m| m.order["state"] == "completed" && !m.paid.is_empty());
    let ok = report.audit_ok
        && escrow_ok
        && federation_ok
        && market_ok
        && report.settlements == report.calls as u64
        && report.work_runs == report.calls as u64;
    Ok(if ok { 0 } else { 1 })
}

/// Runs the whole story in `dir` and reports; `say` narrates.
pub async fn story(dir: &std::path::Path, calls: u32, say: &dyn Fn(String)) -> Result<StoryReport> {
    let local = embedded_registry(dir, None).await?;
    let (state, registry_url, operator_credential) = (local.state, local.url, local.operator_credential);
    let (desk_credential, clock) = (local.desk_credential, local.clock);
    let store = state.store.clone();
    say(format!("registry {} on {registry_url} (embedded SQLite, WAL, synchronous=FULL)", state.registry));

    let operator = Client::new(&registry_url, Some(operator_credential));
    let (owner, buyer) = enroll_pair(&operator, "restaurant", "procurement").await?;
    let (_, merchant) = enroll_pair(&operator, "wholesale-co", "wholesaler").await?;
    let owner_id = owner.me().await?["member"]["id"].as_str().unwrap_or_default().to_string();
    operator.mint(&owner_id, 1_000_000, "demo-mint").await?;
    owner.fund("procurement", 60_000, "demo-fund").await?;
    owner.set_budget("procurement", 1_000, 60_000, 60_000).await?;
    say("owner `restaurant` funded agent `procurement` with 60000; ceilings: 1000 per call, 60000 per day, 60000 in total".into());

    let work_runs = Arc::new(AtomicU64::new(0));
    let crashed = Arc::new(Mutex::new(HashSet::new()));
    let route =
        PaidRoute::new(merchant.clone(), PRICE_MINOR, &dir.join("work-receipts.db"))?.with_fault(fault_once(crashed));
    let storefront = storefront(Arc::new(route), work_runs.clone());
    let shop_url = serve(storefront).await?;
    say(format!(
        "storefront `wholesaler` on {shop_url}/restock, {PRICE_MINOR} per call, behind the paid-route middleware"
    ));

    let mut requests_sent = 0u64;
    let mut replayed_answers = 0u64;
    for i in 1..=calls {
        let order = format!("order-{i:04}");
        let url = format!("{shop_url}/restock");
        if i == CRASHY_BUYER_ORDER {
            say(format!("  {order}: the buyer crashes mid-retry and re-sends the order {RESENDS} times (3 at once, then 2 in turn)"));
            let mut sends: Vec<_> = (0..3)
                .map(|_| {
                    let (b, u, o) = (buyer.clone(), url.clone(), order.clone());
                    tokio::spawn(async move { b.pay(&u, "wholesaler", PRICE_MINOR, &o).await })
                })
                .collect();
            for _ in 3..RESENDS {
                for send in sends.drain(..) {
                    let paid = send.await??;
                    requests_sent += paid.attempts as u64;
                    replayed_answers += paid.replayed as u64;
                }
                let paid = buyer.pay(&url, "wholesaler", PRICE_MINOR, &order).await?;
                requests_sent += paid.attempts as u64;
                replayed_answers += paid.replayed as u64;
            }
        } else {
            let paid = buyer.pay(&url, "wholesaler", PRICE_MINOR, &order).await?;
            ensure!(paid.status == 200, "{order} failed: {} {}", paid.status, paid.body);
            requests_sent += paid.attempts as u64;
            replayed_answers += paid.replayed as u64;
            report_crash(i, &order, &paid, say);
        }
        if i % 10 == 0 {
            say(format!("  {i}/{calls} paid calls settled; work ran {} times", work_runs.load(Ordering::SeqCst)));
        }
    }
    let mut report = after_calls(
        &buyer,
        &merchant,
        &shop_url,
        calls,
        say,
        store.clone(),
        &work_runs,
        requests_sent,
        replayed_answers,
    )
    .await?;
    let local = LocalRegistry {
        state,
        url: registry_url,
        operator_credential: operator.credential().unwrap_or_default().to_string(),
        desk_credential,
        clock,
    };
    report.escrow = Some(crate::demo_escrow::escrow_story(&local, say).await?);
    report.federation = Some(crate::demo_federation::federation_story(&local, &merchant, &buyer, dir, say).await?);
    report.market = Some(crate::demo_market::market_story(&local, say).await?);
    let audit = bazaar_store::audit::audit(store.as_ref(), &|_| {}).await?;
    report.audit_ok = audit.ok;
    report.balance_sum_minor = audit.balance_sum_minor;
    say(format!(
        "\nafter all four stories, on registry A: Σ balances = {} (conserved)   audit: {}",
        audit.balance_sum_minor,
        if audit.ok { "passed" } else { "FAILED" }
    ));
    Ok(report)
}

fn report_crash(i: u32, order: &str, paid: &bazaar_sdk::client::PaidResponse, say: &dyn Fn(String)) {
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

#[allow(clippy::too_many_arguments)]
async fn after_calls(
    buyer: &Client,
    merchant: &Client,
    shop_url: &str,
    calls: u32,
    say: &dyn Fn(String),
    store: Arc<dyn Store>,
    work_runs: &AtomicU64,
    requests_sent: u64,
    replayed_answers: u64,
) -> Result<StoryReport> {
    let over = buyer.issue_token("wholesaler", 5_000, "order-too-big", "restock").await;
    let over_ceiling_code = over.err().and_then(|e| e.code().map(str::to_string)).unwrap_or_else(|| "ACCEPTED".into());
    say(format!("an order of 5000 against the 1000 per-call ceiling was refused: {over_ceiling_code}"));

    let last = buyer
        .issue_token("wholesaler", PRICE_MINOR, &format!("order-{calls:04}"), &format!("{shop_url}/restock"))
        .await?;
    let consumed_token_verify = merchant.verify(last.body["token"].as_str().unwrap_or_default()).await?;
    say(format!(
        "verify of a consumed token still says genuine={} state={} — verify is a receipt check, never a work order",
        consumed_token_verify["genuine"], consumed_token_verify["state"]
    ));

    let report = summary(
        store.as_ref(),
        calls,
        work_runs,
        requests_sent,
        replayed_answers,
        over_ceiling_code,
        consumed_token_verify,
    )
    .await?;
    say(format!(
        "\nsummary: {} orders, {} requests sent, {} answered from work receipts",
        report.calls, report.requests_sent, report.replayed_answers
    ));
    say(format!("  settlements: {} (one debit per order)   work runs: {}", report.settlements, report.work_runs));
    say(format!(
        "  buyer paid {}; merchant received {}; protocol fees {}",
        report.buyer_debited_minor, report.merchant_received_minor, report.fees_minor
    ));
    say(format!(
        "  Σ balances = {} (conserved)   audit: {}",
        report.balance_sum_minor,
        if report.audit_ok { "passed" } else { "FAILED" }
    ));
    Ok(report)
}

#[allow(clippy::too_many_arguments)]
async fn summary(
    store: &dyn Store,
    calls: u32,
    work_runs: &AtomicU64,
    requests_sent: u64,
    replayed_answers: u64,
    over_ceiling_code: String,
    consumed_token_verify: serde_json::Value,
) -> Result<StoryReport> {
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
    Ok(StoryReport {
        calls,
        settlements,
        work_runs: work_runs.load(Ordering::SeqCst),
        buyer_debited_minor: 60_000 - balance(bazaar_types::AccountId::of_member(&buyer.id)).await,
        merchant_received_minor: balance(bazaar_types::AccountId::of_member(&merchant.id)).await,
        fees_minor: balance(bazaar_types::AccountId::fees()).await,
        requests_sent,
        replayed_answers,
        over_ceiling_code,
        consumed_token_verify,
        audit_ok: audit.ok,
        balance_sum_minor: audit.balance_sum_minor,
        escrow: None,
        federation: None,
        market: None,
    })
}

/// A registry on an embedded store in `dir`, served on 127.0.0.1 with its sweeper running.
pub struct LocalRegistry {
    pub state: Arc<bazaar_server::AppState>,
    pub url: String,
    pub operator_credential: String,
    /// The dispute desk's credential, when this start created the registry.
    pub desk_credential: Option<String>,
    /// The registry's clock: the wall clock plus whatever the caller advanced.
    pub clock: Arc<crate::runtime::OffsetClock>,
}

/// Opens (or creates) an embedded registry in `dir` and serves it. A fresh one
/// takes `operator_credential`, or draws one.
pub async fn embedded_registry(dir: &std::path::Path, operator_credential: Option<String>) -> Result<LocalRegistry> {
    embedded_registry_with(dir, operator_credential, registry_config()).await
}

/// [`embedded_registry`] with the registry's settings (short dispute windows in tests).
pub async fn embedded_registry_with(
    dir: &std::path::Path,
    operator_credential: Option<String>,
    config: bazaar_core::apply::Config,
) -> Result<LocalRegistry> {
    embedded_on_clock(dir, Arc::new(crate::runtime::OffsetClock::default()), operator_credential, config).await
}

/// A second embedded registry in `dir` (created) on the same clock as `peer`,
/// so signed requests and validity windows agree between the two (the stories
/// move their clock ahead).
pub async fn peer_registry(
    peer: &LocalRegistry,
    dir: &std::path::Path,
    operator_credential: Option<String>,
) -> Result<LocalRegistry> {
    std::fs::create_dir_all(dir)?;
    embedded_on_clock(dir, peer.clock.clone(), operator_credential, bazaar_core::apply::Config::standard()).await
}

async fn embedded_on_clock(
    dir: &std::path::Path,
    offset: Arc<crate::runtime::OffsetClock>,
    operator_credential: Option<String>,
    config: bazaar_core::apply::Config,
) -> Result<LocalRegistry> {
    let path = dir.join(crate::runtime::SQLITE_FILE);
    let store: Arc<dyn Store> = Arc::new(bazaar_store_sqlite::SqliteStore::open(path, config.clone(), offset.clone())?);
    local_registry(store, offset, config, operator_credential).await
}

/// Serves a registry on `store` (whose writer reads `clock`) on 127.0.0.1, with its sweeper.
pub async fn local_registry(
    store: Arc<dyn Store>,
    offset: Arc<crate::runtime::OffsetClock>,
    config: bazaar_core::apply::Config,
    operator_credential: Option<String>,
) -> Result<LocalRegistry> {
    let clock: Arc<dyn Clock> = offset.clone();
    let booted = bazaar_server::boot(store, clock, config, operator_credential.clone()).await?;
    let desk_credential = booted.desk_credential.clone();
    let operator_credential = booted.operator_credential.or(operator_credential).context("an operator credential")?;
    bazaar_server::spawn_sweeper(booted.state.clone());
    let url = serve(bazaar_server::router(booted.state.clone())).await?;
    *booted.state.public_url.write().expect("url lock") = Some(url.clone());
    Ok(LocalRegistry { state: booted.state, url, operator_credential, desk_credential, clock: offset })
}

/// Creates an owner and one agent enrolled through an invite; returns their clients.
pub async fn enroll_pair(operator: &Client, owner_handle: &str, agent_handle: &str) -> Result<(Client, Client)> {
    enroll_pair_with_key(operator, owner_handle, agent_handle, &generate_key()).await
}

/// [`enroll_pair`] with the agent's key chosen by the caller (to sign evidence later).
pub async fn enroll_pair_with_key(
    operator: &Client,
    owner_handle: &str,
    agent_handle: &str,
    agent_key: &ed25519_dalek::SigningKey,
) -> Result<(Client, Client)> {
    let owner_key = generate_key();
    let created = operator.create_owner(&owner_key, owner_handle).await?;
    let owner = operator.with_credential(created["credential"].as_str().unwrap_or_default());
    let invite = owner.issue_invite().await?;
    let enrolled = operator.with_credential("").redeem_invite(&invite, agent_key, agent_handle).await?;
    Ok((owner, operator.with_credential(enrolled["credential"].as_str().unwrap_or_default())))
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

/// Serves `router` on 127.0.0.1 and an OS-chosen port; returns its base URL.
pub async fn serve(router: Router) -> Result<String> {
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", 0)).await?;
    let address = listener.local_addr()?;
    tokio::spawn(async move { axum::serve(listener, router).await });
    Ok(format!("http://{address}"))
}

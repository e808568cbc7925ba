//! `bazaar demo`: five chapters on one fresh embedded registry, narrated — the
//! restock story ([`restock`]), the escrowed order with a dispute
//! ([`escrow`]), passports and a second registry ([`federation`]), and the
//! storefront ([`market`]), the labor market ([`labor`]) — then a final audit. The chapters share only
//! [`bazaar_stage`]; this module is the one place that knows their order.

pub mod agents;
pub mod escrow;
pub mod federation;
pub mod labor;
pub mod market;
pub mod restock;
pub mod runs;
pub mod stranger;

use anyhow::Result;
use bazaar_stage::{audit_word, embedded_registry, LocalRegistry};
use serde::Serialize;

/// `bazaar demo --calls` is clamped to this many paid calls.
const CALLS_MAX: u32 = 10_000;
/// `bazaar demo --serve` waits this long (by default) for the first viewer of the chamber before telling the story.
pub const VIEWER_WAIT_S: u64 = 300;

/// What the story measured; the tests and `--json` read it.
#[derive(Debug, Serialize)]
pub struct StoryReport {
    /// The restock chapter's figures; `audit_ok` and `balance_sum_minor` are
    /// replaced by the final audit, after all four chapters.
    #[serde(flatten)]
    pub restock: restock::RestockReport,
    /// The escrow chapter, run after the paid calls on the same registry.
    pub escrow: Option<escrow::EscrowReport>,
    /// The passport and cross-registry chapter.
    pub federation: Option<federation::FederationReport>,
    /// The storefront chapter (forty cushion covers).
    pub market: Option<market::MarketReport>,
    /// The labor market chapter (a brief through a coordinator and a specialist, judged).
    pub labor: Option<labor::LaborReport>,
}

/// Runs the story in a temporary directory; exits 0 when every chapter proved its point.
pub async fn run(calls: u32, json_output: bool) -> Result<i32> {
    run_with(calls, json_output, false, None, 0).await
}

/// [`run`]; with `serve`, the registry's live chamber is announced before the
/// story (its stream open to the public, so a browser watches it happen) and
/// kept serving after it until Ctrl-C.
/// `model`: the AI buyer agent's model for the chamber's run button (served only). `viewer_wait_s`: served, how
/// long the story waits for the chamber's first viewer, so whoever opens the printed URL sees it happen (0: not).
pub async fn run_with(
    calls: u32,
    json_output: bool,
    serve: bool,
    model: Option<bazaar_agents::buyer::ModelConfig>,
    viewer_wait_s: u64,
) -> Result<i32> {
    let dir = std::env::temp_dir().join(format!("bazaar-demo-{}", std::process::id()));
    bazaar_stage::data_dir::create(&dir)?;
    let say = |line: String| {
        if !json_output {
            println!("{line}");
        }
    };
    let report = async {
        let local = embedded_registry(&dir, None).await?;
        if serve {
            local.state.set_public_stream(true);
            local.state.attach_attacks(std::sync::Arc::new(bazaar_attacks::ChamberAttacks));
            local.state.attach_runs(std::sync::Arc::new(runs::ChamberRuns::new(
                local.url.clone(),
                local.operator_credential.clone(),
                local.clock.clone(),
                model,
            )));
            // A line scripts and tests wait for, in prose and in --json alike.
            println!("chamber on {}/chamber", local.url);
            say(format!(
                "operator credential of this throwaway registry (the ledger explorer asks for it): {}",
                local.operator_credential
            ));
            say("\nready-to-use agents on this registry, for the README's and the SDKs' quick starts:".into());
            for line in agents::environment_lines(&local).await? {
                say(line);
            }
            say(String::new());
            wait_for_viewer(&local, viewer_wait_s, &say).await;
        }
        let report = story_on(&local, &dir, calls.min(CALLS_MAX), &say).await;
        if serve && report.is_ok() {
            say(format!("\nthe chamber stays open at {}/chamber — Ctrl-C to stop", local.url));
            let _ = tokio::signal::ctrl_c().await;
        }
        report
    }
    .await;
    std::fs::remove_dir_all(&dir).ok();
    let report = report?;
    if json_output {
        println!("{}", serde_json::to_string(&report)?);
    }
    Ok(if proved(&report) { 0 } else { 1 })
}

/// Waits (at most `wait_s`) until someone opens the chamber's live stream, saying on the terminal what it does.
async fn wait_for_viewer(local: &LocalRegistry, wait_s: u64, say: &(dyn Fn(String) + Sync)) {
    let chamber = format!("{}/chamber", local.url);
    if wait_s == 0 {
        say(format!("telling the story now (--viewer-wait-s 0); {chamber} shows the latest of each flow when opened"));
        return;
    }
    say(format!(
        "waiting for the first viewer of {chamber} before telling the story (at most {wait_s} s; --viewer-wait-s 0 tells it at once)"
    ));
    let mut viewers = local.state.stream_hub().viewers.subscribe();
    let wait = std::time::Duration::from_secs(wait_s);
    let seen = tokio::time::timeout(wait, viewers.wait_for(|opened| *opened > 0)).await.is_ok_and(|v| v.is_ok());
    if seen {
        say("a viewer opened the chamber: telling the story now, live".into());
    } else {
        say(format!(
            "nobody opened the chamber within {wait_s} s: telling the story anyway; the chamber shows the latest paid \
             call, contract and dispute whenever it is opened"
        ));
    }
}

/// Whether the report shows what each chapter set out to show.
fn proved(report: &StoryReport) -> bool {
    let escrow_ok = report.escrow.as_ref().is_some_and(|e| e.second_execution_code == "dispute_executed");
    let federation_ok = report.federation.as_ref().is_some_and(|f| {
        f.audits_ok && f.cross_status == 200 && f.corridor_on_a == -f.corridor_on_b && f.corridor_on_a > 0
    });
    let market_ok = report.market.as_ref().is_some_and(|m| m.order["state"] == "completed" && !m.paid.is_empty());
    let labor_ok = report.labor.as_ref().is_some_and(|l| {
        let verdicts: Vec<_> = l.outcomes.iter().map(|o| o.1).collect();
        use bazaar_relay::labor::outcome::Verdict::*;
        verdicts == [Accepted, Rejected, Unassessed] && l.replay_agrees && l.rewards.0 > 0
    });
    let restock = &report.restock;
    restock.audit_ok
        && escrow_ok
        && federation_ok
        && market_ok
        && labor_ok
        && restock.settlements == restock.calls as u64
        && restock.work_runs == restock.calls as u64
}

/// Runs the whole story in `dir` and reports; `say` narrates.
pub async fn story(dir: &std::path::Path, calls: u32, say: &(dyn Fn(String) + Sync)) -> Result<StoryReport> {
    let local = embedded_registry(dir, None).await?;
    story_on(&local, dir, calls, say).await
}

/// The whole story on `local` (a fresh registry).
pub async fn story_on(
    local: &LocalRegistry,
    dir: &std::path::Path,
    calls: u32,
    say: &(dyn Fn(String) + Sync),
) -> Result<StoryReport> {
    say(format!("registry {} on {} (embedded SQLite, WAL, synchronous=FULL)", local.state.registry, local.url));
    let restocked = restock::restock_story(local, dir, calls, say).await?;
    let escrow = escrow::escrow_story(local, say).await?;
    let federation = federation::federation_story(local, &restocked.merchant, &restocked.buyer, dir, say).await?;
    let market = market::market_story(local, say).await?;
    let labor = labor::labor_story(local, dir, say).await?;
    let audit = bazaar_store::audit::audit(local.state.store.as_ref(), &|_| {}).await?;
    let mut restock = restocked.report;
    restock.audit_ok = audit.ok;
    restock.balance_sum_minor = audit.balance_sum_minor;
    say(format!(
        "\nafter all five stories, on registry A: Σ balances = {} (conserved)   audit: {}",
        audit.balance_sum_minor,
        audit_word(audit.ok)
    ));
    Ok(StoryReport {
        restock,
        escrow: Some(escrow),
        federation: Some(federation),
        market: Some(market),
        labor: Some(labor),
    })
}

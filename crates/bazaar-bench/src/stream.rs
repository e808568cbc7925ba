//! `bazaar-bench stream`: what watching costs. One embedded registry, its
//! stream open to the public, driven with complete paid calls three times in
//! one run — alone, with N anonymous `GET /v1/stream` watchers (the chamber's
//! feed) following every event, and alone again — so the watchers' cost is a
//! ratio measured side by side. Each watcher records, for every event, how
//! long after the ledger stamped it (`at_ms`) the event reached the watcher,
//! and checks the sequence arrives whole (no gap, no repeat).

use crate::drive::{self, Plan, Target};
use crate::limits::{BUYERS_DEFAULT, CONCURRENCY_DEFAULT, MERCHANTS_DEFAULT};
use crate::{servers, setup};
use anyhow::{Context, Result};
use clap::Args;
use serde::Serialize;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// Watchers following the stream during the watched phase.
pub const WATCHERS_DEFAULT: usize = 200;
pub const WATCHERS_MAX: usize = 1_000;
/// Seconds per phase.
pub const PHASE_S_DEFAULT: u64 = 10;
pub const PHASE_S_MAX: u64 = 120;
/// The goals: events reach watchers within this (p99), and this many watchers cost at most this share of throughput.
pub const LAG_P99_GOAL_MS: f64 = 1_000.0;
pub const COST_GOAL: f64 = 0.10;
/// The goal for watchers of every event: the server's CPU per event per watcher, in µs (issue 32).
pub const EVENT_CPU_GOAL_US: f64 = 1.0;

#[derive(Args, Clone, Serialize)]
pub struct StreamArgs {
    /// Anonymous stream watchers during the watched phase.
    #[arg(long, default_value_t = WATCHERS_DEFAULT)]
    pub watchers: usize,
    /// Concurrent clients making paid calls.
    #[arg(long, default_value_t = CONCURRENCY_DEFAULT)]
    pub concurrency: usize,
    /// Seconds of each of the three phases.
    #[arg(long, default_value_t = PHASE_S_DEFAULT)]
    pub phase_s: u64,
    #[arg(long, default_value_t = BUYERS_DEFAULT)]
    pub buyers: usize,
    #[arg(long, default_value_t = MERCHANTS_DEFAULT)]
    pub merchants: usize,
    /// Watchers ask for `?summary=true` (one summary per 250 ms: seq range, counts, the latest 20) instead of every event.
    #[arg(long)]
    pub summary: bool,
    /// The `bazaar` binary (default: next to this one).
    #[arg(long)]
    pub bazaar_bin: Option<PathBuf>,
    /// Also write the report as JSON here.
    #[arg(long)]
    pub out: Option<PathBuf>,
}

#[derive(Serialize, Debug, Default)]
pub struct StreamReport {
    pub watchers: usize,
    /// Whether the watchers followed summaries (`?summary=true`) rather than every event.
    pub summary: bool,
    pub concurrency: usize,
    pub phase_s: u64,
    /// Completed paid calls per second: alone, watched, alone again.
    pub alone_calls_per_s: f64,
    pub watched_calls_per_s: f64,
    pub alone_again_calls_per_s: f64,
    /// `1 − watched / mean(alone, alone again)`.
    pub cost: f64,
    /// The server's CPU per completed paid call (ms), alone, watched, alone again: what the watchers cost the server itself.
    pub server_cpu_ms_per_call: [f64; 3],
    /// CPU the harness itself used (its paying clients, and in the watched phase its watchers), in cores, per phase.
    pub harness_cores: [f64; 3],
    pub events_per_watcher: f64,
    /// The server's extra CPU in the watched phase (over the mean of the two alone phases' CPU per call, times the
    /// watched phase's calls) per event delivered to a watcher, in µs: what one watcher costs per event, without
    /// the harness's own watchers (they run in another process).
    pub server_cpu_us_per_event_per_watcher: f64,
    pub lag_p50_ms: Option<f64>,
    pub lag_p99_ms: Option<f64>,
    pub lag_max_ms: Option<f64>,
    /// Watchers that saw a gap or a repeat in the sequence (must be 0).
    pub broken_sequences: usize,
    /// Watchers that never got a stream (must be 0).
    pub refused: usize,
    pub lag_goal_met: bool,
    pub cost_goal_met: bool,
    pub event_cpu_goal_met: bool,
}

/// What one watcher saw.
#[derive(Default)]
struct Watched {
    lags_ms: Vec<u32>,
    events: u64,
    broken: bool,
    refused: bool,
}

/// Follows the stream until `stop`; records each event's lag and whether the sequence held.
async fn watch(base: String, stop: Arc<AtomicBool>, summary: bool) -> Watched {
    let mut seen = Watched::default();
    let client = reqwest::Client::new();
    let path = if summary { "/v1/stream?summary=true" } else { "/v1/stream" };
    let Ok(mut response) = client.get(format!("{base}{path}")).send().await else {
        seen.refused = true;
        return seen;
    };
    if !response.status().is_success() {
        seen.refused = true;
        return seen;
    }
    let (mut buffer, mut last) = (String::new(), None::<u64>);
    while !stop.load(Ordering::Relaxed) {
        let Ok(Ok(Some(chunk))) = tokio::time::timeout(Duration::from_millis(200), response.chunk()).await else {
            continue;
        };
        buffer.push_str(&String::from_utf8_lossy(&chunk));
        while let Some(end) = buffer.find("\n\n") {
            let block: String = buffer.drain(..end + 2).collect();
            // Read as cheaply as a page would: the id line and numbers, no full parse. A summary's
            // lag is its latest event's (the last `at_ms`); its range starts at `from_seq`.
            let number = |key: &str, last_one: bool| {
                let at = if last_one { block.rfind(key) } else { block.find(key) }?;
                let digits: String = block[at + key.len()..].chars().take_while(char::is_ascii_digit).collect();
                digits.parse::<i64>().ok()
            };
            let seq = block.lines().find_map(|l| l.strip_prefix("id: ")).and_then(|v| v.trim().parse::<u64>().ok());
            let (Some(seq), Some(at)) = (seq, number("\"at_ms\":", true)) else { continue };
            let first = if summary { number("\"from_seq\":", false).map_or(seq, |f| f as u64) } else { seq };
            if last.is_some_and(|l| first != l + 1) {
                seen.broken = true;
            }
            last = Some(seq);
            seen.events += seq + 1 - first.min(seq);
            seen.lags_ms.push((crate::baseline::now_ms() - at).clamp(0, u32::MAX as i64) as u32);
        }
    }
    seen
}

/// CPU seconds of the server and of this process around a phase.
struct Cpu {
    server: u64,
    harness: u64,
}

fn cpu(pid: u32) -> Cpu {
    Cpu { server: crate::procfs::process_ticks(pid).unwrap_or(0), harness: crate::procfs::self_ticks() }
}

/// (server CPU ms per call, harness cores) over a phase; ticks are 1/100 s.
fn spent(before: &Cpu, after: &Cpu, outcome: &drive::Outcome) -> (f64, f64) {
    let server_ms = (after.server - before.server) as f64 * 10.0;
    let harness_s = (after.harness - before.harness) as f64 / 100.0;
    (server_ms / (outcome.calls_ok as f64).max(1.0), harness_s / outcome.elapsed.as_secs_f64().max(1e-9))
}

fn per_second(outcome: &drive::Outcome) -> f64 {
    outcome.calls_ok as f64 / outcome.elapsed.as_secs_f64().max(1e-9)
}

pub async fn run(args: StreamArgs) -> i32 {
    match bench(&args).await {
        Ok(report) => {
            print(&report);
            if let Some(path) = &args.out {
                if let Err(error) = crate::report::write_json(path, &report) {
                    eprintln!("error: writing the report: {error:#}");
                }
            }
            i32::from(report.broken_sequences > 0 || report.refused > 0)
        }
        Err(error) => {
            eprintln!("error: {error:#}");
            2
        }
    }
}

async fn bench(args: &StreamArgs) -> Result<StreamReport> {
    let watchers = args.watchers.clamp(1, WATCHERS_MAX);
    let phase = Duration::from_secs(args.phase_s.clamp(1, PHASE_S_MAX));
    let root = std::env::temp_dir().join(format!("bazaar-bench-stream-{}", std::process::id()));
    std::fs::create_dir_all(&root)?;
    let bin = match &args.bazaar_bin {
        Some(bin) => bin.clone(),
        None => std::env::current_exe()?.with_file_name("bazaar"),
    };
    let credential = format!("bzc_bench_{}", crate::baseline::random_b64(24));
    let serve = ["serve", "--port", "0", "--public-stream", "--data-dir"].map(String::from).to_vec();
    let serve = [serve, vec![root.join("data").display().to_string()]].concat();
    let server =
        servers::spawn(&bin, &serve, &[("BAZAAR_OPERATOR_CREDENTIAL", credential.clone())], root.join("serve.log"))
            .await
            .context("starting bazaar serve --public-stream")?;
    let (buyers, merchants) = setup::bazaar(&server.url, &credential, args.buyers, args.merchants).await?;
    let target = Target {
        base: server.url.clone(),
        buyers: Arc::new(buyers),
        merchants: Arc::new(merchants),
        nodes: Default::default(),
    };
    let measured = phases(args, &server, &target, watchers, phase).await;
    drop(server);
    std::fs::remove_dir_all(&root).ok();
    let (alone, watched, again, seen, spent_by_phase) = measured;
    let mut lags: Vec<u32> = seen.iter().flat_map(|w| w.lags_ms.iter().map(|ms| ms * 1000)).collect();
    let lag_max = lags.iter().max().map(|us| f64::from(*us) / 1000.0);
    let (a, w, b) = (per_second(&alone), per_second(&watched), per_second(&again));
    let cost = 1.0 - w / ((a + b) / 2.0).max(1e-9);
    let lag = drive::latency(&mut lags);
    let [alone_ms, watched_ms, again_ms] = spent_by_phase.map(|p| p.0);
    let extra_ms = (watched_ms - (alone_ms + again_ms) / 2.0) * watched.calls_ok as f64;
    let delivered = seen.iter().map(|s| s.events).sum::<u64>();
    let per_event_us = extra_ms * 1000.0 / (delivered as f64).max(1.0);
    Ok(StreamReport {
        watchers,
        summary: args.summary,
        concurrency: args.concurrency,
        phase_s: phase.as_secs(),
        alone_calls_per_s: a,
        watched_calls_per_s: w,
        alone_again_calls_per_s: b,
        cost,
        server_cpu_ms_per_call: spent_by_phase.map(|p| p.0),
        harness_cores: spent_by_phase.map(|p| p.1),
        events_per_watcher: delivered as f64 / watchers as f64,
        server_cpu_us_per_event_per_watcher: per_event_us,
        lag_p50_ms: lag.p50_ms,
        lag_p99_ms: lag.p99_ms,
        lag_max_ms: lag_max,
        broken_sequences: seen.iter().filter(|s| s.broken).count(),
        refused: seen.iter().filter(|s| s.refused).count(),
        lag_goal_met: lag.p99_ms.is_some_and(|p99| p99 < LAG_P99_GOAL_MS),
        cost_goal_met: cost < COST_GOAL,
        event_cpu_goal_met: per_event_us <= EVENT_CPU_GOAL_US,
    })
}

type Phases = (drive::Outcome, drive::Outcome, drive::Outcome, Vec<Watched>, [(f64, f64); 3]);

/// Alone, watched by `watchers`, alone again: each phase's outcome, what the watchers saw, and the CPU spent.
async fn phases(
    args: &StreamArgs,
    server: &servers::Server,
    target: &Target,
    watchers: usize,
    phase: Duration,
) -> Phases {
    let http = drive::http_client(args.concurrency);
    let plan = |tag: &str, duration: Duration| Plan {
        tag: tag.to_string(),
        concurrency: args.concurrency,
        duration,
        calls_max: crate::limits::CALLS_MAX,
        batch: 1,
        rate: None,
        duplicate_pct: 0,
    };
    drive::run(&http, target, &plan("warm", Duration::from_secs(1))).await;
    let pid = server.pid;
    let c0 = cpu(pid);
    let alone = drive::run(&http, target, &plan("alone", phase)).await;
    let c1 = cpu(pid);

    let stop = Arc::new(AtomicBool::new(false));
    let followers: Vec<_> =
        (0..watchers).map(|_| tokio::spawn(watch(server.url.clone(), stop.clone(), args.summary))).collect();
    tokio::time::sleep(Duration::from_millis(500)).await;
    let c2 = cpu(pid);
    let watched = drive::run(&http, target, &plan("watched", phase)).await;
    let c3 = cpu(pid);
    tokio::time::sleep(Duration::from_millis(500)).await;
    stop.store(true, Ordering::Relaxed);
    let mut seen = Vec::new();
    for follower in followers {
        seen.push(follower.await.unwrap_or_default());
    }
    let c4 = cpu(pid);
    let again = drive::run(&http, target, &plan("again", phase)).await;
    let c5 = cpu(pid);
    let phases = [spent(&c0, &c1, &alone), spent(&c2, &c3, &watched), spent(&c4, &c5, &again)];
    (alone, watched, again, seen, phases)
}

pub fn print(report: &StreamReport) {
    println!(
        "stream: {} anonymous watchers ({}), {} paying clients, {} s phases",
        report.watchers,
        if report.summary { "summaries every 250 ms" } else { "every event" },
        report.concurrency,
        report.phase_s
    );
    println!(
        "  paid calls/s: alone {:.0}, watched {:.0}, alone again {:.0} → cost {:.1} % (goal < {:.0} %: {})",
        report.alone_calls_per_s,
        report.watched_calls_per_s,
        report.alone_again_calls_per_s,
        report.cost * 100.0,
        COST_GOAL * 100.0,
        if report.cost_goal_met { "met" } else { "NOT met" }
    );
    let ms = |v: Option<f64>| v.map_or("—".to_string(), |v| format!("{v:.0} ms"));
    println!(
        "  lag from ledger to watcher: p50 {}, p99 {}, max {} (goal p99 < {:.0} ms: {}); {:.0} events per watcher",
        ms(report.lag_p50_ms),
        ms(report.lag_p99_ms),
        ms(report.lag_max_ms),
        LAG_P99_GOAL_MS,
        if report.lag_goal_met { "met" } else { "NOT met" },
        report.events_per_watcher
    );
    let [a, w, b] = report.server_cpu_ms_per_call;
    let [ha, hw, hb] = report.harness_cores;
    println!("  server CPU per paid call: alone {a:.3} ms, watched {w:.3} ms, alone again {b:.3} ms");
    println!(
        "  server CPU per event per watcher: {:.3} µs (goal ≤ {EVENT_CPU_GOAL_US} µs: {})",
        report.server_cpu_us_per_event_per_watcher,
        if report.event_cpu_goal_met { "met" } else { "NOT met" }
    );
    println!(
        "  the harness's own CPU (cores): alone {ha:.2}, watched {hw:.2} (with its watchers), alone again {hb:.2}"
    );
    println!("  sequences broken: {}, streams refused: {}", report.broken_sequences, report.refused);
}

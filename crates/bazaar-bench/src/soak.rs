//! `bazaar-bench soak`: is memory bounded under sustained load? One embedded
//! registry driven with paid calls at a fixed open-loop rate for a long
//! while; every `--sample-s` the harness reads the server's resident set
//! from `/proc/<pid>/status` and its cache gauges from `/metrics`
//! (`bazaar_cache_entries{cache=…}`), and writes the timeline. The verdict is
//! [`plateau`]'s rule: over the last third of the measured run, the resident
//! set grows by less than [`PLATEAU_GROWTH_MAX`] — the total and the
//! anonymous part alike. The caches that grew in that third are named, so a
//! run that does not plateau says where to look. After the load the harness
//! samples [`AFTER_SAMPLES`] more times (phase `after`): reported beside the
//! verdict, not judged by it, since the rule is about memory under load and a
//! server that has just been left alone catches up (the conversation notifier
//! reads what it fell behind on: `notifier_behind`).

use crate::drive::{self, Plan, Target};
use crate::limits::{BUYERS_DEFAULT, CALLS_MAX, CONCURRENCY_DEFAULT, MERCHANTS_DEFAULT, RATE_MAX};
use crate::{procfs, servers, setup};
use anyhow::{bail, Context, Result};
use clap::{Args, ValueEnum};
use serde::Serialize;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The longest soak, and the longest warm-up before it.
pub const SOAK_DURATION_S_MAX: u64 = 4 * 3600;
pub const SOAK_WARMUP_S_DEFAULT: u64 = 30;
pub const SOAK_WARMUP_S_MAX: u64 = 600;
/// Seconds between samples, by default and at most.
pub const SAMPLE_S_DEFAULT: u64 = 10;
pub const SAMPLE_S_MAX: u64 = 600;
/// The plateau rule: the resident set may grow by less than this share over the last third of the run.
pub const PLATEAU_GROWTH_MAX: f64 = 0.05;
/// Samples the last third must hold for a verdict at all.
pub const PLATEAU_SAMPLES_MIN: usize = 3;
/// Samples taken after the load ends, `--sample-s` apart.
pub const AFTER_SAMPLES: usize = 6;

#[derive(ValueEnum, Clone, Copy, Debug, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum SoakTarget {
    /// `bazaar serve` on its embedded SQLite stores.
    Embedded,
}

#[derive(Args, Clone, Serialize)]
pub struct SoakArgs {
    #[arg(long, value_enum, default_value = "embedded")]
    pub target: SoakTarget,
    /// Paid calls started per second (open loop), whatever the pace of the answers.
    #[arg(long)]
    pub rate: u64,
    /// Seconds of measured load after the warm-up.
    #[arg(long)]
    pub duration_s: u64,
    /// Seconds of load before the measured run (sampled, not judged).
    #[arg(long, default_value_t = SOAK_WARMUP_S_DEFAULT)]
    pub warmup_s: u64,
    /// Seconds between samples.
    #[arg(long, default_value_t = SAMPLE_S_DEFAULT)]
    pub sample_s: u64,
    /// Calls in flight at most is `OPEN_LOOP_IN_FLIGHT_MAX`; this sizes the HTTP pool.
    #[arg(long, default_value_t = CONCURRENCY_DEFAULT)]
    pub concurrency: usize,
    #[arg(long, default_value_t = BUYERS_DEFAULT)]
    pub buyers: usize,
    #[arg(long, default_value_t = MERCHANTS_DEFAULT)]
    pub merchants: usize,
    /// The `bazaar` binary (default: next to this one).
    #[arg(long)]
    pub bazaar_bin: Option<PathBuf>,
    /// Write the report (settings, timeline, verdict) as JSON here.
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Write the timeline as a Markdown table here.
    #[arg(long)]
    pub markdown: Option<PathBuf>,
}

/// One reading of the server.
#[derive(Serialize, Debug, Clone, Default)]
pub struct Sample {
    /// Seconds since the load started (the warm-up's start); negative before it.
    pub t_s: f64,
    /// `setup`, `warmup`, `measured`, `after` (the load over).
    pub phase: &'static str,
    /// Settlements the server has committed (`bazaar_settlements_total`).
    pub settlements: u64,
    pub rss_bytes: u64,
    pub anon_bytes: u64,
    pub file_bytes: u64,
    /// Bytes of every file in the server's data directory (databases and their WALs): what the
    /// file-backed part of the resident set maps, at most.
    pub data_bytes: u64,
    /// `bazaar_cache_entries` by cache, `bazaar_tokio_tasks` as `tokio_tasks` and
    /// `bazaar_notifier_behind_events` as `notifier_behind`.
    pub caches: BTreeMap<String, u64>,
}

/// The rule's reading of one series over the last third.
#[derive(Serialize, Debug, Clone, PartialEq)]
pub struct Growth {
    /// The value at the start of the last third, and the largest in it.
    pub from: u64,
    pub peak: u64,
    /// `(peak − from) / from`.
    pub growth: f64,
    pub plateaued: bool,
}

#[derive(Serialize, Debug, Default)]
pub struct SoakReport {
    pub rate: u64,
    pub duration_s: u64,
    pub warmup_s: u64,
    pub sample_s: u64,
    pub rule: String,
    pub calls_ok: u64,
    pub calls_failed: u64,
    pub backlog_refused: u64,
    pub calls_per_s: f64,
    pub call_p50_ms: Option<f64>,
    pub call_p99_ms: Option<f64>,
    pub rss_start_bytes: u64,
    pub rss_warm_bytes: u64,
    pub rss_end_bytes: u64,
    pub rss: Option<Growth>,
    pub anon: Option<Growth>,
    /// Caches whose entries grew over the last third: (name, from, to).
    pub grew: Vec<(String, u64, u64)>,
    /// The lowest and highest anonymous memory after the load ended (not judged).
    pub after_anon_bytes: Option<(u64, u64)>,
    pub plateaued: bool,
    pub timeline: Vec<Sample>,
}

pub async fn run(args: SoakArgs) -> i32 {
    match soak(&args).await {
        Ok(report) => {
            print(&report);
            if let Some(path) = &args.out {
                if let Err(error) = crate::report::write_json(path, &report) {
                    eprintln!("error: writing the report: {error:#}");
                }
            }
            if let Some(path) = &args.markdown {
                if let Err(error) = std::fs::write(path, markdown(&report)) {
                    eprintln!("error: writing the table: {error}");
                }
            }
            i32::from(!report.plateaued)
        }
        Err(error) => {
            eprintln!("error: {error:#}");
            2
        }
    }
}

fn check(args: &SoakArgs) -> Result<()> {
    if !(1..=RATE_MAX).contains(&args.rate) {
        bail!("--rate must be from 1 to {RATE_MAX}");
    }
    if !(1..=SOAK_DURATION_S_MAX).contains(&args.duration_s) {
        bail!("--duration-s must be from 1 to {SOAK_DURATION_S_MAX}");
    }
    if args.warmup_s > SOAK_WARMUP_S_MAX {
        bail!("--warmup-s must be at most {SOAK_WARMUP_S_MAX}");
    }
    if !(1..=SAMPLE_S_MAX).contains(&args.sample_s) {
        bail!("--sample-s must be from 1 to {SAMPLE_S_MAX}");
    }
    Ok(())
}

async fn soak(args: &SoakArgs) -> Result<SoakReport> {
    check(args)?;
    let root = std::env::temp_dir().join(format!("bazaar-bench-soak-{}", std::process::id()));
    std::fs::create_dir_all(&root)?;
    let bin = match &args.bazaar_bin {
        Some(bin) => bin.clone(),
        None => std::env::current_exe()?.with_file_name("bazaar"),
    };
    let credential = format!("bzc_bench_{}", crate::baseline::random_b64(24));
    let serve = ["serve", "--port", "0", "--data-dir"].map(String::from).to_vec();
    let serve = [serve, vec![root.join("data").display().to_string()]].concat();
    let server =
        servers::spawn(&bin, &serve, &[("BAZAAR_OPERATOR_CREDENTIAL", credential.clone())], root.join("serve.log"))
            .await
            .context("starting bazaar serve")?;
    let outcome = drive_and_sample(args, &server, &credential, &root.join("data")).await;
    drop(server);
    std::fs::remove_dir_all(&root).ok();
    outcome
}

async fn drive_and_sample(
    args: &SoakArgs,
    server: &servers::Server,
    credential: &str,
    data: &std::path::Path,
) -> Result<SoakReport> {
    let (buyers, merchants) = setup::bazaar(&server.url, credential, args.buyers, args.merchants).await?;
    let target = Target {
        base: server.url.clone(),
        buyers: Arc::new(buyers),
        merchants: Arc::new(merchants),
        nodes: Default::default(),
    };
    let http = drive::http_client(args.concurrency);
    let scrape = reqwest::Client::new();
    let started = Instant::now();
    let mut timeline = vec![sample(&scrape, server, data, started, "setup").await];
    let plan = Plan {
        tag: "soak".into(),
        concurrency: args.concurrency,
        duration: Duration::from_secs(args.warmup_s + args.duration_s),
        calls_max: CALLS_MAX,
        batch: 1,
        rate: Some(args.rate),
        duplicate_pct: 0,
    };
    let load = {
        let (http, target) = (http.clone(), target.clone());
        tokio::spawn(async move { drive::run(&http, &target, &plan).await })
    };
    let mut ticks = tokio::time::interval(Duration::from_secs(args.sample_s));
    ticks.tick().await;
    while !load.is_finished() {
        ticks.tick().await;
        if load.is_finished() {
            break;
        }
        let phase = if started.elapsed().as_secs() < args.warmup_s { "warmup" } else { "measured" };
        let now = sample(&scrape, server, data, started, phase).await;
        eprintln!("{}", progress(&now, args.warmup_s + args.duration_s));
        timeline.push(now);
    }
    let mut outcome = load.await.context("the load task")?;
    for n in 0..AFTER_SAMPLES {
        if n > 0 {
            ticks.tick().await;
        }
        timeline.push(sample(&scrape, server, data, started, "after").await);
    }
    let latency = drive::latency(&mut outcome.call_us);
    let mut report = judge(timeline, args.warmup_s as f64);
    report.rate = args.rate;
    report.duration_s = args.duration_s;
    report.warmup_s = args.warmup_s;
    report.sample_s = args.sample_s;
    report.calls_ok = outcome.calls_ok;
    report.calls_failed = outcome.calls_failed;
    report.backlog_refused = outcome.backlog_refused;
    report.calls_per_s = outcome.calls_ok as f64 / outcome.elapsed.as_secs_f64().max(1e-9);
    report.call_p50_ms = latency.p50_ms;
    report.call_p99_ms = latency.p99_ms;
    Ok(report)
}

/// The server's resident set and gauges now.
async fn sample(
    http: &reqwest::Client,
    server: &servers::Server,
    data: &std::path::Path,
    started: Instant,
    phase: &'static str,
) -> Sample {
    let status = std::fs::read_to_string(format!("/proc/{}/status", server.pid)).unwrap_or_default();
    let kib = |field| procfs::status_kib(&status, field).unwrap_or(0) * 1024;
    let text = match http.get(format!("{}/metrics", server.url)).send().await {
        Ok(response) => response.text().await.unwrap_or_default(),
        Err(_) => String::new(),
    };
    let (caches, settlements) = gauges(&text);
    let t_s = if phase == "setup" { 0.0 } else { started.elapsed().as_secs_f64() };
    Sample {
        t_s,
        phase,
        settlements,
        rss_bytes: kib("VmRSS:"),
        anon_bytes: kib("RssAnon:"),
        file_bytes: kib("RssFile:"),
        data_bytes: directory_bytes(data),
        caches,
    }
}

/// Bytes of the files directly in `dir`.
fn directory_bytes(dir: &std::path::Path) -> u64 {
    let Ok(entries) = std::fs::read_dir(dir) else { return 0 };
    entries.flatten().filter_map(|e| e.metadata().ok()).filter(|m| m.is_file()).map(|m| m.len()).sum()
}

/// `bazaar_cache_entries` by cache (with `bazaar_tokio_tasks`), and `bazaar_settlements_total`.
pub fn gauges(text: &str) -> (BTreeMap<String, u64>, u64) {
    let mut caches = BTreeMap::new();
    let mut settlements = 0;
    for line in text.lines().filter(|l| !l.starts_with('#')) {
        let Some((series, value)) = line.rsplit_once(' ') else { continue };
        let Ok(value) = value.parse::<f64>() else { continue };
        if let Some(labels) = series.strip_prefix("bazaar_cache_entries{") {
            if let Some(name) = crate::metrics::label(labels, "cache") {
                caches.insert(name, value as u64);
            }
        } else if series == "bazaar_tokio_tasks" {
            caches.insert("tokio_tasks".into(), value as u64);
        } else if series == "bazaar_notifier_behind_events" {
            caches.insert("notifier_behind".into(), value as u64);
        } else if series == "bazaar_settlements_total" {
            settlements = value as u64;
        }
    }
    (caches, settlements)
}

/// The plateau rule over one series: the peak of the last third of the
/// measured samples against that third's first value.
pub fn plateau(series: &[u64]) -> Option<Growth> {
    let third = series.len() / 3;
    if third < PLATEAU_SAMPLES_MIN {
        return None;
    }
    let last = &series[series.len() - third..];
    let (from, peak) = (last[0], *last.iter().max()?);
    let growth = (peak.saturating_sub(from)) as f64 / (from as f64).max(1.0);
    Some(Growth { from, peak, growth, plateaued: growth < PLATEAU_GROWTH_MAX })
}

/// The verdict over a timeline whose measured run starts at `warmup_s`.
pub fn judge(timeline: Vec<Sample>, warmup_s: f64) -> SoakReport {
    let measured: Vec<&Sample> = timeline.iter().filter(|s| s.phase == "measured" && s.t_s >= warmup_s).collect();
    let rss = plateau(&measured.iter().map(|s| s.rss_bytes).collect::<Vec<_>>());
    let anon = plateau(&measured.iter().map(|s| s.anon_bytes).collect::<Vec<_>>());
    let mut grew = Vec::new();
    if let (Some(first), Some(last)) = (measured.get(measured.len() - measured.len() / 3), measured.last()) {
        for (name, to) in &last.caches {
            let from = first.caches.get(name).copied().unwrap_or(0);
            if *to > from {
                grew.push((name.clone(), from, *to));
            }
        }
    }
    let warm = timeline.iter().rfind(|s| s.phase == "warmup").or(measured.first().copied());
    let after: Vec<u64> = timeline.iter().filter(|s| s.phase == "after").map(|s| s.anon_bytes).collect();
    let after_anon_bytes = after.iter().min().zip(after.iter().max()).map(|(lo, hi)| (*lo, *hi));
    SoakReport {
        rule: format!(
            "the resident set (total and anonymous) grows by less than {:.0} % over the last third of the measured run",
            PLATEAU_GROWTH_MAX * 100.0
        ),
        rss_start_bytes: timeline.first().map_or(0, |s| s.rss_bytes),
        rss_warm_bytes: warm.map_or(0, |s| s.rss_bytes),
        rss_end_bytes: measured.last().map_or(0, |s| s.rss_bytes),
        after_anon_bytes,
        plateaued: rss.as_ref().is_some_and(|g| g.plateaued) && anon.as_ref().is_some_and(|g| g.plateaued),
        rss,
        anon,
        grew,
        timeline,
        ..Default::default()
    }
}

/// One sample as a progress line on stderr: where the run is, what it settled, what the server holds.
fn progress(now: &Sample, total_s: u64) -> String {
    let behind = now.caches.get("notifier_behind").copied().unwrap_or(0);
    format!(
        "soak {:>5.0}/{total_s} s {:<8} settled {:>9}  RSS {:>6.1} MB  anon {:>6.1} MB  data {:>7.1} MB  notifier behind {behind}",
        now.t_s,
        now.phase,
        now.settlements,
        mb(now.rss_bytes),
        mb(now.anon_bytes),
        mb(now.data_bytes)
    )
}

fn mb(bytes: u64) -> f64 {
    bytes as f64 / 1e6
}

/// The calls the run made and their latency, as the summary prints them.
fn calls_line(report: &SoakReport) -> String {
    format!(
        "  paid calls: {} ok ({:.0}/s), {} failed, {} not started (backlog); p50 {} ms, p99 {} ms",
        report.calls_ok,
        report.calls_per_s,
        report.calls_failed,
        report.backlog_refused,
        crate::report::ms(report.call_p50_ms),
        crate::report::ms(report.call_p99_ms)
    )
}

pub fn print(report: &SoakReport) {
    println!(
        "soak: embedded, {} paid calls/s for {} s after {} s of warm-up, sampled every {} s",
        report.rate, report.duration_s, report.warmup_s, report.sample_s
    );
    println!("{}", calls_line(report));
    println!(
        "  RSS: {:.1} MB at start, {:.1} MB after warm-up, {:.1} MB at the end of the load",
        mb(report.rss_start_bytes),
        mb(report.rss_warm_bytes),
        mb(report.rss_end_bytes)
    );
    for (name, growth) in [("RSS", &report.rss), ("anonymous", &report.anon)] {
        match growth {
            Some(g) => println!(
                "  {name} over the last third: {:.1} → peak {:.1} MB, {:+.2} % ({})",
                mb(g.from),
                mb(g.peak),
                g.growth * 100.0,
                if g.plateaued { "plateau" } else { "GROWING" }
            ),
            None => println!("  {name}: too few samples for a verdict (need {PLATEAU_SAMPLES_MIN} in the last third)"),
        }
    }
    for (name, from, to) in &report.grew {
        println!("  grew over the last third: {name} {from} → {to}");
    }
    if let Some((lo, hi)) = report.after_anon_bytes {
        println!("  after the load ({AFTER_SAMPLES} samples, not judged): anonymous {:.1} to {:.1} MB", mb(lo), mb(hi));
    }
    println!("  verdict ({}): {}", report.rule, if report.plateaued { "PLATEAU" } else { "NO PLATEAU" });
}

/// The timeline as a compact Markdown table: RSS parts and the caches that ever held anything.
pub fn markdown(report: &SoakReport) -> String {
    let names: Vec<&String> = {
        let mut seen: Vec<&String> =
            report.timeline.iter().flat_map(|s| s.caches.iter().filter(|(_, v)| **v > 0).map(|(k, _)| k)).collect();
        seen.sort();
        seen.dedup();
        seen
    };
    let mut out = format!(
        "| t (s) | phase | settlements | RSS MB | anon MB | file MB | data MB | {} |\n|---|---|---|---|---|---|---|{}\n",
        names.iter().map(|n| n.as_str()).collect::<Vec<_>>().join(" | "),
        "---|".repeat(names.len())
    );
    for s in &report.timeline {
        let caches: Vec<String> = names.iter().map(|n| s.caches.get(*n).copied().unwrap_or(0).to_string()).collect();
        out.push_str(&format!(
            "| {:.0} | {} | {} | {:.1} | {:.1} | {:.1} | {:.1} | {} |\n",
            s.t_s,
            s.phase,
            s.settlements,
            mb(s.rss_bytes),
            mb(s.anon_bytes),
            mb(s.file_bytes),
            mb(s.data_bytes),
            caches.join(" | ")
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(t_s: f64, rss: u64, anon: u64) -> Sample {
        Sample { t_s, phase: "measured", rss_bytes: rss, anon_bytes: anon, ..Default::default() }
    }

    #[test]
    fn the_summary_prints_latencies_as_numbers() {
        let report = SoakReport { calls_ok: 10, call_p50_ms: Some(2.865), call_p99_ms: None, ..judge(vec![], 0.0) };
        let line = calls_line(&report);
        assert!(line.contains("10 ok") && line.contains("p50 2.87 ms") && line.contains("p99 — ms"), "{line}");
    }

    #[test]
    fn each_sample_prints_a_progress_line() {
        let mut now = at(40.0, 123_400_000, 97_100_000);
        now.settlements = 35_123;
        now.caches.insert("notifier_behind".into(), 12);
        let line = progress(&now, 1_230);
        for part in ["40/1230 s", "measured", "35123", "RSS  123.4 MB", "anon   97.1 MB", "notifier behind 12"] {
            assert!(line.contains(part), "{part:?} in {line:?}");
        }
    }

    #[test]
    fn the_rule_reads_the_last_third() {
        // Growing early, flat late: a plateau.
        let flat: Vec<u64> = [50, 70, 90, 100, 100, 101, 100, 102, 101].to_vec();
        assert!(plateau(&flat).unwrap().plateaued);
        // Still climbing at the end: 100 → 110 is 10 %.
        let climbing: Vec<u64> = [50, 60, 70, 80, 90, 95, 100, 105, 110].to_vec();
        let growth = plateau(&climbing).unwrap();
        assert_eq!((growth.from, growth.peak, growth.plateaued), (100, 110, false));
        // Too few samples in the last third: no verdict.
        assert_eq!(plateau(&[1, 2, 3, 4, 5, 6, 7, 8]), None);
    }

    #[test]
    fn the_verdict_needs_both_series_and_names_what_grew() {
        let mut timeline: Vec<Sample> = (0..9).map(|n| at(30.0 + n as f64, 100, 100 + n * 10)).collect();
        timeline[8].caches.insert("verified_tokens".into(), 9);
        let report = judge(timeline, 30.0);
        assert!(report.rss.unwrap().plateaued);
        assert!(!report.anon.unwrap().plateaued);
        assert!(!report.plateaued);
        assert_eq!(report.grew, vec![("verified_tokens".to_string(), 0, 9)]);
    }

    #[test]
    fn samples_after_the_load_are_reported_not_judged() {
        let mut timeline: Vec<Sample> = (0..9).map(|n| at(30.0 + n as f64, 100, 100)).collect();
        timeline.extend([150, 130].map(|anon| Sample { phase: "after", ..at(40.0, 160, anon) }));
        let report = judge(timeline, 30.0);
        assert!(report.plateaued, "a step once the load is over is not growth under load");
        assert_eq!(report.after_anon_bytes, Some((130, 150)));
        assert_eq!(report.rss_end_bytes, 100, "the end of the load, not the last sample after it");
    }

    #[test]
    fn gauges_are_read_from_the_exposition() {
        let text = "# HELP x\nbazaar_cache_entries{cache=\"verified_tokens\"} 4096\nbazaar_tokio_tasks 12\n\
                    bazaar_settlements_total 77\nbazaar_cache_entries_max{cache=\"verified_tokens\"} 4096\n\
                    bazaar_notifier_behind_events 5\n";
        let (caches, settlements) = gauges(text);
        assert_eq!(caches.get("verified_tokens"), Some(&4096));
        assert_eq!(caches.get("tokio_tasks"), Some(&12));
        assert_eq!(caches.get("notifier_behind"), Some(&5));
        assert_eq!(settlements, 77);
    }
}

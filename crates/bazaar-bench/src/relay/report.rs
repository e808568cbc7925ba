//! `bazaar-bench relay`'s report: CPU per phase from `/proc`, each target's
//! figures, the correctness verdict, the goals, and the Markdown
//! table printed at the end of a run (the same figures go to `--out` as JSON).

use crate::procfs;
use crate::relay::load::{self as relay_load, Corpus, Ingest, Queries};
use crate::relay::{RelayArgs, RelayTarget};
use serde::Serialize;
use std::collections::{BTreeMap, HashMap};

/// The goal for Bazaar's ingest (issue 12): events per second, stored durably.
pub const GOAL_EVENTS_PER_S: f64 = 10_000.0;
/// The goal for a 500-event answer while ingest runs (issue 12): p99 `REQ` → `EOSE`.
pub const GOAL_EOSE_P99_MS: f64 = 20.0;

/// CPU counters at one instant.
pub struct Snapshot {
    at: std::time::Instant,
    server: Option<u64>,
    threads: HashMap<u32, (String, u64)>,
    client: u64,
    machine: (u64, u64),
}

impl Snapshot {
    pub fn take(pid: u32) -> Snapshot {
        Snapshot {
            at: std::time::Instant::now(),
            server: procfs::process_ticks(pid),
            threads: procfs::thread_ticks(pid),
            client: procfs::self_ticks(),
            machine: procfs::machine_ticks(),
        }
    }
}

/// Where one phase's CPU went, per 1,000 accepted events.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Cpu {
    pub server_cpu_s_per_1k: Option<f64>,
    /// By thread name (same-named threads summed).
    pub server_threads_cpu_s_per_1k: BTreeMap<String, f64>,
    /// The harness itself: load generator and reader.
    pub client_cpu_s_per_1k: Option<f64>,
    /// Busy share of all cores over the phase.
    pub machine_busy_pct: Option<f64>,
    /// Cores kept busy by everything but the server and the harness (other
    /// work on a shared machine), averaged over the phase.
    pub other_cores: Option<f64>,
}

impl Cpu {
    pub fn between(before: &Snapshot, after: &Snapshot, events: usize) -> Cpu {
        let per_1k = |ticks: u64| (events > 0).then(|| ticks as f64 / procfs::TICKS_PER_S / events as f64 * 1000.0);
        let (busy, total) = (after.machine.0.saturating_sub(before.machine.0), after.machine.1 - before.machine.1);
        let server = before.server.zip(after.server).map(|(b, a)| a.saturating_sub(b));
        let ours = server.map(|server| server + after.client.saturating_sub(before.client));
        let seconds = after.at.duration_since(before.at).as_secs_f64();
        Cpu {
            other_cores: ours
                .filter(|_| seconds > 0.0)
                .map(|ours| busy.saturating_sub(ours) as f64 / procfs::TICKS_PER_S / seconds),
            server_cpu_s_per_1k: server.and_then(per_1k),
            server_threads_cpu_s_per_1k: thread_kinds(procfs::thread_delta(&before.threads, &after.threads))
                .into_iter()
                .filter(|(_, ticks)| *ticks > 0)
                .filter_map(|(name, ticks)| Some((name, per_1k(ticks)?)))
                .collect(),
            client_cpu_s_per_1k: per_1k(after.client.saturating_sub(before.client)),
            machine_busy_pct: (total > 0).then(|| busy as f64 / total as f64 * 100.0),
        }
    }
}

/// Ticks by kind of thread: numbered threads (`tokio-ws-3`) summed under one name (`tokio-ws-*`).
fn thread_kinds(by_name: BTreeMap<String, u64>) -> BTreeMap<String, u64> {
    let mut kinds = BTreeMap::new();
    for (name, ticks) in by_name {
        let stem = name.trim_end_matches(|c: char| c.is_ascii_digit());
        let kind = if stem.len() < name.len() { format!("{stem}*") } else { name };
        *kinds.entry(kind).or_default() += ticks;
    }
    kinds
}

/// One relay's figures.
#[derive(Clone, Debug, Default, Serialize)]
pub struct TargetReport {
    pub target: String,
    pub description: String,
    /// `ok`, or what went wrong.
    pub status: String,
    pub url: String,
    pub ingest: Option<Ingest>,
    pub ingest_cpu: Option<Cpu>,
    /// The second ingest, with the reader beside it.
    pub beside: Option<Ingest>,
    pub beside_cpu: Option<Cpu>,
    /// The reader alone, before the second ingest.
    pub queries_quiet: Option<Queries>,
    pub queries: Option<Queries>,
    /// Server RSS at start, after the timed ingest, after the second.
    pub rss_kib: Vec<Option<u64>>,
    /// Bytes of the relay's database files (with WAL) after the run.
    pub store_bytes: Option<u64>,
    pub exit_code: Option<i32>,
}

impl TargetReport {
    pub fn failed(which: RelayTarget, error: &anyhow::Error) -> TargetReport {
        TargetReport {
            target: which.name().into(),
            description: which.description(),
            status: format!("failed: {error:#}"),
            ..TargetReport::default()
        }
    }

    /// Every event accepted exactly once, no refusal, no failed connection, no
    /// unexpected frame (`NOTICE`, an `OK` for nothing in flight), every answer right.
    pub fn correct(&self) -> bool {
        let clean = |i: &Option<Ingest>| {
            i.as_ref().is_some_and(|i| {
                let quiet = i.refused == 0 && i.duplicates == 0 && i.failed_connections == 0 && i.reasons.is_empty();
                i.accepted == i.events && quiet
            })
        };
        let right = |q: &Option<Queries>| q.as_ref().is_some_and(|q| q.answers > 0 && q.wrong == 0 && !q.failed);
        let answered = right(&self.queries) && right(&self.queries_quiet);
        self.status == "ok" && clean(&self.ingest) && clean(&self.beside) && answered
    }
}

/// A goal from the issue and whether this run met it.
#[derive(Clone, Debug, Serialize)]
pub struct Goal {
    pub goal: String,
    pub figure: Option<f64>,
    pub met: bool,
}

#[derive(Clone, Debug, Serialize)]
pub struct RelayReport {
    pub command: String,
    pub settings: RelayArgs,
    pub cpus: usize,
    pub query: serde_json::Value,
    /// Events of the queried topic the store held when the reader started.
    pub topic_events: usize,
    pub targets: Vec<TargetReport>,
    /// Bazaar's ingest events/s over nostr-rs-relay's.
    pub ingest_ratio: Option<f64>,
    pub goals: Vec<Goal>,
    pub correct: bool,
}

impl RelayReport {
    pub fn new(args: &RelayArgs, corpus: &Corpus, targets: Vec<TargetReport>) -> RelayReport {
        let find = |which: RelayTarget| targets.iter().find(|t| t.target == which.name() && t.status == "ok");
        let rate = |which| find(which).and_then(|t| t.ingest.as_ref()).map(|i| i.events_per_s);
        let ingest_ratio = rate(RelayTarget::Bazaar)
            .zip(rate(RelayTarget::NostrRsRelay))
            .filter(|(_, peer)| *peer > 0.0)
            .map(|(bazaar, peer)| bazaar / peer);
        let mut goals = Vec::new();
        if let Some(bazaar) = targets.iter().find(|t| t.target == RelayTarget::Bazaar.name()) {
            let rate = bazaar.ingest.as_ref().map(|i| i.events_per_s);
            goals.push(Goal {
                goal: format!("bazaar ingest ≥ {} events/s with synchronous=FULL", thousands(GOAL_EVENTS_PER_S)),
                figure: rate,
                met: bazaar.correct() && rate.is_some_and(|r| r >= GOAL_EVENTS_PER_S),
            });
            let p99 = bazaar.queries.as_ref().filter(|q| q.answers > 0).map(|q| q.eose.p99_ms);
            goals.push(Goal {
                goal: format!(
                    "bazaar REQ → EOSE p99 < {GOAL_EOSE_P99_MS:.0} ms for a {}-event answer while ingest runs",
                    relay_load::QUERY_LIMIT
                ),
                figure: p99,
                met: bazaar.correct() && p99.is_some_and(|p| p < GOAL_EOSE_P99_MS),
            });
        }
        RelayReport {
            command: std::env::args().collect::<Vec<_>>().join(" "),
            settings: args.clone(),
            cpus: std::thread::available_parallelism().map(|n| n.get()).unwrap_or(0),
            query: relay_load::query_filter(),
            topic_events: corpus.topic_events,
            correct: targets.iter().all(TargetReport::correct),
            targets,
            ingest_ratio,
            goals,
        }
    }

    /// The run as Markdown: the table, the ratio, the goals, then the details.
    pub fn markdown(&self) -> String {
        let s = &self.settings;
        let mut out = format!(
            "### bazaar-bench relay: {} job requests over {} × {} in flight, then {} beside one reader \
             ({} ms between answer and next REQ; {} cores)\n\n",
            thousands(s.events as f64),
            s.connections,
            s.window,
            thousands(s.beside_events as f64),
            s.req_pause_ms,
            self.cpus
        );
        out.push_str(
            "| target | events/s | OK p50 / p99 | REQ → EOSE p50 / p99 beside ingest | answers | events/s beside \
             the reader | REQ → EOSE p50 / p99 alone | server CPU-s / 1k events | client CPU-s / 1k | machine busy (other work, cores) |\n\
             |---|---|---|---|---|---|---|---|---|---|\n",
        );
        for target in &self.targets {
            out.push_str(&row(target));
        }
        out.push('\n');
        if let Some(ratio) = self.ingest_ratio {
            out.push_str(&format!("Ingest ratio bazaar / nostr-rs-relay: **{ratio:.2}×**\n\n"));
        }
        for goal in &self.goals {
            let figure = goal.figure.map(|f| format!("{f:.2}")).unwrap_or_else(|| "-".into());
            let verdict = if goal.met { "met" } else { "NOT met" };
            out.push_str(&format!("- Goal: {} — **{verdict}** ({figure})\n", goal.goal));
        }
        let verdict = if self.correct { "passed" } else { "FAILED" };
        out.push_str(&format!(
            "- Correctness (every event accepted once, no refusal, every answer exactly the {} newest of the \
             {} stored events of its topic, newest first): **{verdict}**\n\n",
            relay_load::QUERY_LIMIT,
            thousands(self.topic_events as f64)
        ));
        for target in &self.targets {
            out.push_str(&details(target));
        }
        out
    }
}

fn row(target: &TargetReport) -> String {
    let (Some(ingest), Some(beside), Some(queries), Some(quiet)) =
        (&target.ingest, &target.beside, &target.queries, &target.queries_quiet)
    else {
        return format!("| {} | {} | | | | | | | | |\n", target.target, target.status);
    };
    let cpu = target.ingest_cpu.clone().unwrap_or_default();
    let num = |v: Option<f64>| v.map(|v| format!("{v:.3}")).unwrap_or_else(|| "-".into());
    format!(
        "| {} | **{}** | {:.2} / {:.2} ms | {:.2} / **{:.2}** ms | {} ({} wrong) | {} | {:.2} / {:.2} ms | {} | {} | {} |\n",
        target.target,
        thousands(ingest.events_per_s),
        ingest.ok.p50_ms,
        ingest.ok.p99_ms,
        queries.eose.p50_ms,
        queries.eose.p99_ms,
        queries.answers,
        queries.wrong,
        thousands(beside.events_per_s),
        quiet.eose.p50_ms,
        quiet.eose.p99_ms,
        num(cpu.server_cpu_s_per_1k),
        num(cpu.client_cpu_s_per_1k),
        busy(&cpu),
    )
}

/// `97 % (0.52)`: the machine's busy share, and the cores other work took.
fn busy(cpu: &Cpu) -> String {
    let pct = cpu.machine_busy_pct.map(|p| format!("{p:.0} %")).unwrap_or_else(|| "-".into());
    let others = cpu.other_cores.map(|c| format!(" ({c:.2})")).unwrap_or_default();
    pct + &others
}

/// What a target's row leaves out: CPU by thread, memory, store size, refusals and problems.
fn details(target: &TargetReport) -> String {
    let mut out = format!("**{}**: {}. Status: {}.", target.target, target.description, target.status);
    if let Some(cpu) = &target.ingest_cpu {
        let threads: Vec<String> =
            cpu.server_threads_cpu_s_per_1k.iter().map(|(name, s)| format!("{name} {s:.3}")).collect();
        out.push_str(&format!(" Server CPU-s / 1k events by thread (timed ingest): {}.", threads.join(", ")));
    }
    if let Some(cpu) = &target.beside_cpu {
        let num = |v: Option<f64>| v.map(|v| format!("{v:.3}")).unwrap_or_else(|| "-".into());
        out.push_str(&format!(
            " Beside the reader: server {} and client {} CPU-s / 1k events, machine {} busy (other work, cores).",
            num(cpu.server_cpu_s_per_1k),
            num(cpu.client_cpu_s_per_1k),
            busy(cpu)
        ));
    }
    let kib = |v: &Option<u64>| v.map(|k| format!("{:.1}", k as f64 / 1024.0)).unwrap_or_else(|| "-".into());
    let rss: Vec<String> = target.rss_kib.iter().map(kib).collect();
    if !rss.is_empty() {
        out.push_str(&format!(" Server RSS MiB at start / after the ingest / after the second: {}.", rss.join(" / ")));
    }
    if let Some(bytes) = target.store_bytes {
        out.push_str(&format!(" Database files: {:.1} MiB.", bytes as f64 / 1_048_576.0));
    }
    let mut problems: Vec<String> = Vec::new();
    for ingest in [&target.ingest, &target.beside].into_iter().flatten() {
        problems.extend(ingest.reasons.iter().cloned());
        if ingest.refused + ingest.duplicates + ingest.failed_connections > 0 {
            problems.push(format!(
                "{} refused, {} duplicates, {} failed connections",
                ingest.refused, ingest.duplicates, ingest.failed_connections
            ));
        }
    }
    for queries in [&target.queries_quiet, &target.queries].into_iter().flatten() {
        problems.extend(queries.problems.iter().cloned());
    }
    if !problems.is_empty() {
        out.push_str(&format!(" Problems: {}.", problems.join("; ")));
    }
    out + "\n\n"
}

/// `12345.6` → `12,346`.
pub fn thousands(value: f64) -> String {
    let digits = format!("{:.0}", value.max(0.0));
    let mut out = String::new();
    for (n, digit) in digits.chars().enumerate() {
        if n > 0 && (digits.len() - n) % 3 == 0 {
            out.push(',');
        }
        out.push(digit);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn thousands_are_grouped() {
        assert_eq!(thousands(0.2), "0");
        assert_eq!(thousands(999.0), "999");
        assert_eq!(thousands(12_345.6), "12,346");
        assert_eq!(thousands(1_234_567.0), "1,234,567");
    }

    #[test]
    fn numbered_threads_are_summed() {
        let names = BTreeMap::from([("tokio-ws-0".into(), 2), ("tokio-ws-11".into(), 3), ("relay-writer".into(), 5)]);
        let kinds = thread_kinds(names);
        assert_eq!(kinds["tokio-ws-*"], 5);
        assert_eq!(kinds["relay-writer"], 5);
    }

    #[test]
    fn a_failed_target_is_not_correct() {
        let failed = TargetReport::failed(RelayTarget::Bazaar, &anyhow::anyhow!("no binary"));
        assert!(!failed.correct());
        assert!(row(&failed).contains("failed: no binary"));
    }
}

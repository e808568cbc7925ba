//! `bazaar-bench relay`: Bazaar's Nostr relay (`bazaar serve`, `/relay`)
//! beside the peer nostr-rs-relay, one after the other in one run, each on a
//! fresh data directory with the same pre-signed corpus and the same client
//! settings. Per target: a timed ingest (events/s, send → `OK`, server CPU
//! per 1,000 events), then a second ingest with a reader repeating a
//! 500-event `REQ` beside it (send → `EOSE`, each answer checked). Prints a
//! Markdown table and optionally writes the report as JSON.

pub mod load;
pub mod report;
pub mod servers;

use crate::relay::load::{self as relay_load, Corpus, Ingest, Queries};
use crate::relay::report::{Cpu, RelayReport, Snapshot, TargetReport};
use crate::relay::servers::{self as relay_servers, Relay};
use crate::talk;
use anyhow::{bail, Context, Result};
use clap::{Args, ValueEnum};
use serde::Serialize;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// Most events in one ingest phase (the corpus is held in memory, about 1 KB each).
pub const EVENTS_MAX: usize = 400_000;
/// Fewest events in the timed ingest: enough for a full answer of the queried topic.
pub const EVENTS_MIN: usize = relay_load::TOPICS * relay_load::QUERY_LIMIT;
/// Most publishing connections.
pub const CONNECTIONS_MAX: usize = 256;
/// Most events in flight on one connection: nostr-rs-relay queues at most
/// 128 answers per connection and drops the rest (`try_send`), so a deeper
/// window would lose `OK`s there, not measure anything.
pub const WINDOW_MAX: usize = 128;
/// Queries timed with nothing else running, before the second ingest: the reference for the figure beside it.
pub const QUIET_QUERIES: usize = 50;
/// The reader's pause between an answer and its next query: at most 100
/// queries a second, a busy job board, leaving the ingest most of the machine
/// (back to back, the reader alone read ≈ 170,000 events/s from Bazaar).
pub const REQ_PAUSE_MS_DEFAULT: u64 = 10;
/// Longest pause between the reader's queries.
pub const PAUSE_MS_MAX: u64 = 1_000;
/// The peer's configuration as committed; the run writes a copy with its own port.
pub const PEER_CONFIG: &str = include_str!("../../peers/nostr-rs-relay.toml");
/// The peer version the configuration and the report are written for.
pub const PEER_VERSION: &str = "0.8.12";

#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum RelayTarget {
    Bazaar,
    NostrRsRelay,
}

impl RelayTarget {
    pub fn name(self) -> &'static str {
        match self {
            RelayTarget::Bazaar => "bazaar",
            RelayTarget::NostrRsRelay => "nostr-rs-relay",
        }
    }

    pub fn description(self) -> String {
        match self {
            RelayTarget::Bazaar => "bazaar serve, /relay: its own SQLite file (WAL, synchronous=FULL: fsync per \
                commit), group commit, OK after the commit"
                .into(),
            RelayTarget::NostrRsRelay => format!(
                "nostr-rs-relay {PEER_VERSION}: SQLite (WAL, synchronous=NORMAL: no fsync per commit), one \
                 event per write, OK after the commit"
            ),
        }
    }
}

#[derive(Args, Clone, Debug, Serialize)]
pub struct RelayArgs {
    /// Job requests (kind 5905) in the timed ingest, every topic.
    #[arg(long, default_value_t = 40_000, value_parser = within::<EVENTS_MIN, EVENTS_MAX>)]
    pub events: usize,
    /// Job requests written while the reader queries (topics other than the one it reads).
    #[arg(long, default_value_t = 20_000, value_parser = within::<1, EVENTS_MAX>)]
    pub beside_events: usize,
    /// Publishing WebSockets.
    #[arg(long, default_value_t = 8, value_parser = within::<1, CONNECTIONS_MAX>)]
    pub connections: usize,
    /// Events in flight on each publishing WebSocket.
    #[arg(long, default_value_t = 64, value_parser = within::<1, WINDOW_MAX>)]
    pub window: usize,
    /// Pause between one answer and the reader's next query, in ms (0: back to back).
    #[arg(long, default_value_t = REQ_PAUSE_MS_DEFAULT, value_parser = clap::value_parser!(u64).range(0..=PAUSE_MS_MAX))]
    pub req_pause_ms: u64,
    /// Targets to run, in this order.
    #[arg(long, value_delimiter = ',', default_value = "bazaar,nostr-rs-relay")]
    pub targets: Vec<RelayTarget>,
    /// The `bazaar` binary (default: next to this one).
    #[arg(long)]
    pub bazaar_bin: Option<PathBuf>,
    /// The peer (default: target/peers/bin/nostr-rs-relay, as scripts/install-relay-peer puts it).
    #[arg(long)]
    pub peer_bin: Option<PathBuf>,
    /// The peer's configuration (default: crates/bazaar-bench/peers/nostr-rs-relay.toml, built in).
    #[arg(long)]
    pub peer_config: Option<PathBuf>,
    /// Seed of the authors' keys.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Also write the report as JSON here.
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Keep the data directories and logs afterwards.
    #[arg(long)]
    pub keep: bool,
    /// Exit 1 unless every goal is met (by default only the correctness checks decide).
    #[arg(long)]
    pub require_goals: bool,
}

/// A whole number from `MIN` to `MAX`, for the flags.
fn within<const MIN: usize, const MAX: usize>(text: &str) -> Result<usize, String> {
    match text.parse::<usize>() {
        Ok(value) if (MIN..=MAX).contains(&value) => Ok(value),
        _ => Err(format!("must be a whole number from {MIN} to {MAX}")),
    }
}

/// The binaries and configuration a run starts its targets from.
struct Programs {
    bazaar: PathBuf,
    peer: PathBuf,
    peer_config: String,
}

impl Programs {
    fn find(args: &RelayArgs) -> Result<Programs> {
        let here = std::env::current_exe()?;
        let bazaar = args.bazaar_bin.clone().unwrap_or_else(|| here.with_file_name("bazaar"));
        // target/release/bazaar-bench → target/peers/bin/nostr-rs-relay
        let peers = here.parent().and_then(Path::parent).map(|target| target.join("peers/bin/nostr-rs-relay"));
        let peer = args.peer_bin.clone().or(peers).context("no place to look for nostr-rs-relay")?;
        let peer_config = match &args.peer_config {
            Some(path) => std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?,
            None => PEER_CONFIG.to_string(),
        };
        if args.targets.contains(&RelayTarget::Bazaar) && !bazaar.exists() {
            bail!("no bazaar binary at {} (build it: cargo build --release -p bazaar-cli)", bazaar.display());
        }
        Ok(Programs { bazaar, peer, peer_config })
    }
}

pub async fn run(args: RelayArgs) -> i32 {
    let root = std::env::temp_dir().join(format!("bazaar-bench-relay-{}", std::process::id()));
    // Children are killed when the benchmark future is dropped, which Ctrl-C does too.
    let outcome = tokio::select! {
        outcome = bench(&args, &root) => outcome,
        _ = tokio::signal::ctrl_c() => Err(anyhow::anyhow!("interrupted")),
    };
    match args.keep {
        true => eprintln!("kept {}", root.display()),
        false => {
            let _ = std::fs::remove_dir_all(&root);
        }
    }
    match outcome {
        Ok(report) => i32::from(!report.correct || (args.require_goals && report.goals.iter().any(|g| !g.met))),
        Err(error) => {
            eprintln!("error: {error:#}");
            2
        }
    }
}

async fn bench(args: &RelayArgs, root: &Path) -> Result<RelayReport> {
    if args.targets.is_empty() {
        bail!("--targets names no target");
    }
    let programs = Programs::find(args)?;
    std::fs::create_dir_all(root).with_context(|| format!("creating {}", root.display()))?;
    eprintln!("[relay] signing {} + {} job requests", args.events, args.beside_events);
    let (events, beside, seed) = (args.events, args.beside_events, args.seed);
    let now = relay_load::unix_now_s();
    let corpus = tokio::task::spawn_blocking(move || relay_load::corpus(events, beside, seed, now)).await?;
    let mut targets = Vec::new();
    for &which in &args.targets {
        let report = match measure(which, args, &corpus, &programs, root).await {
            Ok(report) => report,
            Err(error) => {
                eprintln!("[{}] failed: {error:#}", which.name());
                TargetReport::failed(which, &error)
            }
        };
        targets.push(report);
    }
    let report = RelayReport::new(args, &corpus, targets);
    println!("{}", report.markdown());
    if let Some(path) = &args.out {
        crate::report::write_json(path, &report)?;
    }
    Ok(report)
}

async fn start(which: RelayTarget, programs: &Programs, root: &Path) -> Result<Relay> {
    let dir = root.join(which.name());
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    let log = root.join(format!("{}.log", which.name()));
    match which {
        RelayTarget::Bazaar => relay_servers::bazaar(&programs.bazaar, &dir, log).await,
        RelayTarget::NostrRsRelay => relay_servers::peer(&programs.peer, &programs.peer_config, &dir, log).await,
    }
}

/// One target, started fresh: the timed ingest, then the second ingest with the reader beside it.
async fn measure(
    which: RelayTarget,
    args: &RelayArgs,
    corpus: &Corpus,
    programs: &Programs,
    root: &Path,
) -> Result<TargetReport> {
    let name = which.name();
    let mut relay = start(which, programs, root).await.with_context(|| format!("starting {name}"))?;
    let rss_start = talk::rss_kib(relay.pid);
    eprintln!("[{name}] ingest: {} events over {} × {} in flight", args.events, args.connections, args.window);
    let sockets = relay_load::connect(&relay.url, args.connections).await?;
    let before = Snapshot::take(relay.pid);
    let ingest = relay_load::ingest(sockets, corpus.ingest.clone(), args.window).await;
    let ingest_cpu = Cpu::between(&before, &Snapshot::take(relay.pid), ingest.accepted);
    eprintln!("[{name}] {:.0} events/s, {} refused", ingest.events_per_s, ingest.refused);
    let rss_ingest = talk::rss_kib(relay.pid);
    eprintln!("[{name}] beside: {} events while one reader repeats the REQ", args.beside_events);
    let (beside, beside_cpu, quiet, queries) = beside(&relay, args, corpus).await?;
    eprintln!(
        "[{name}] REQ → EOSE p99 {:.2} ms over {} answers ({} wrong) beside {:.0} events/s",
        queries.eose.p99_ms, queries.answers, queries.wrong, beside.events_per_s
    );
    let rss_end = talk::rss_kib(relay.pid);
    let exit_code = relay.stop().await?;
    let prefix = match which {
        RelayTarget::Bazaar => "relay.db",
        RelayTarget::NostrRsRelay => "nostr.db",
    };
    Ok(TargetReport {
        target: name.into(),
        description: which.description(),
        status: "ok".into(),
        url: relay.url.clone(),
        ingest: Some(ingest),
        ingest_cpu: Some(ingest_cpu),
        beside: Some(beside),
        beside_cpu: Some(beside_cpu),
        queries_quiet: Some(quiet),
        queries: Some(queries),
        rss_kib: vec![rss_start, rss_ingest, rss_end],
        store_bytes: relay_servers::store_bytes(&root.join(name), prefix),
        exit_code,
    })
}

/// The reader alone ([`QUIET_QUERIES`] answers, for reference), then the
/// second ingest with the reader repeating the query beside it until the
/// ingest's last `OK`.
async fn beside(relay: &Relay, args: &RelayArgs, corpus: &Corpus) -> Result<(Ingest, Cpu, Queries, Queries)> {
    let mut reader = relay_load::connect(&relay.url, 1).await?.remove(0);
    let quiet = relay_load::read_quietly(&mut reader, QUIET_QUERIES, &corpus.expected).await?;
    let sockets = relay_load::connect(&relay.url, args.connections).await?;
    let done = Arc::new(AtomicBool::new(false));
    let pause = Duration::from_millis(args.req_pause_ms);
    let before = Snapshot::take(relay.pid);
    let reading = tokio::spawn(relay_load::read_until(reader, corpus.expected.clone(), pause, done.clone()));
    let ingest = relay_load::ingest(sockets, corpus.beside.clone(), args.window).await;
    done.store(true, Ordering::Release);
    let queries = reading.await?;
    let cpu = Cpu::between(&before, &Snapshot::take(relay.pid), ingest.accepted);
    Ok((ingest, cpu, quiet, queries))
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        args: RelayArgs,
    }

    #[test]
    fn flags_are_bounded() {
        let parse = |flags: &[&str]| Cli::try_parse_from(std::iter::once("relay").chain(flags.iter().copied()));
        let defaults = parse(&[]).unwrap().args;
        assert_eq!((defaults.events, defaults.connections, defaults.window), (40_000, 8, 64));
        assert_eq!(defaults.targets, [RelayTarget::Bazaar, RelayTarget::NostrRsRelay]);
        assert!(parse(&["--window", "129"]).is_err());
        assert!(parse(&["--connections", "0"]).is_err());
        assert!(parse(&["--events", "3999"]).is_err());
        assert!(parse(&["--req-pause-ms", "1001"]).is_err());
        assert!(parse(&["--targets", "nostr-rs-relay"]).is_ok());
    }
}

//! `bazaar-bench run`: starts the three servers, sets each up with many
//! buyers and a few merchants, drives complete paid calls against each in
//! turn, gates each on correctness, and prints (and optionally writes) the
//! comparison. `bazaar-bench baseline-serve` is the baseline peer itself,
//! started by `run` as a child process so its CPU can be measured apart.

use anyhow::{anyhow, bail, Context, Result};
use bazaar_bench::drive::{self, Outcome, Plan, Target};
use bazaar_bench::gate::{self, BazaarStore, Told};
use bazaar_bench::limits::*;
use bazaar_bench::report::{Report, TargetReport, BASELINE, CLUSTER, EMBEDDED, POSTGRES};
use bazaar_bench::servers::{self, PgStats, Server};
use bazaar_bench::{baseline, metrics, procfs, setup};
use clap::{Args, Parser, Subcommand, ValueEnum};
use serde::Serialize;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;
use tokio_postgres::Client;

#[derive(Parser)]
#[command(
    name = "bazaar-bench",
    version,
    about = "Side-by-side paid-call benchmark: Bazaar embedded, Bazaar on PostgreSQL, and a plain PostgreSQL baseline."
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run the benchmark against every selected target in turn.
    Run(RunArgs),
    /// The conversation plane: fanout to many WebSockets beside a bare
    /// reference server, message ingest, and memory per idle socket.
    Talk(bazaar_bench::talk_cmd::TalkArgs),
    /// The attention query over a million messages, on SQLite and PostgreSQL in one run.
    Attention(bazaar_bench::attention::AttentionArgs),
    /// The labor market's Nostr relay beside nostr-rs-relay: ingest, and REQ → EOSE while ingest runs.
    Relay(bazaar_bench::relay::RelayArgs),
    /// The live stream: paid calls alone, with N anonymous stream watchers, and alone again; lag and cost.
    Stream(bazaar_bench::stream::StreamArgs),
    /// Sustained load at a fixed rate: the server's RSS and cache gauges sampled over time, and a plateau verdict.
    Soak(bazaar_bench::soak::SoakArgs),
    /// Serve the baseline peer on 127.0.0.1 (started by `run`).
    #[command(hide = true)]
    BaselineServe {
        #[arg(long, default_value_t = 0)]
        port: u16,
        #[arg(long)]
        database_url: String,
        #[arg(long, default_value_t = BASELINE_POOL_DEFAULT, value_parser = bounded::<BASELINE_POOL_MAX>)]
        pool: usize,
    },
}

#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
enum Which {
    Embedded,
    Postgres,
    /// `--nodes` nodes of the PostgreSQL adapter on one database and one NATS: a cluster.
    Cluster,
    Baseline,
}

impl Which {
    fn name(self) -> &'static str {
        match self {
            Which::Embedded => EMBEDDED,
            Which::Postgres => POSTGRES,
            Which::Cluster => CLUSTER,
            Which::Baseline => BASELINE,
        }
    }

    fn description(self, pool: usize, nodes: usize, cpus: &[String]) -> String {
        let confined = match cpus.is_empty() {
            true => String::new(),
            false => format!(" (nodes on CPU sets {})", cpus.join(" / ")),
        };
        match self {
            Which::Embedded => "bazaar serve: embedded SQLite (WAL, synchronous=FULL), group commit".into(),
            Which::Postgres => "bazaar serve --database-url: PostgreSQL adapter, group commit".into(),
            Which::Cluster => format!(
                "{nodes} × bazaar serve --database-url --nats-url on one database: one ledger sequencer, \
                 the other nodes forward over NATS{confined}"
            ),
            Which::Baseline => {
                format!("plain PostgreSQL peer: one transaction per settlement, pool of {pool}, synchronous_commit=on")
            }
        }
    }
}

#[derive(Args, Clone, Serialize)]
struct RunArgs {
    /// Concurrent clients, each making one paid call at a time.
    #[arg(long, default_value_t = CONCURRENCY_DEFAULT, value_parser = bounded::<CONCURRENCY_MAX>)]
    concurrency: usize,
    /// Seconds of measured load per target.
    #[arg(long, default_value_t = DURATION_S_DEFAULT, value_parser = bounded_u64::<DURATION_S_MAX>)]
    duration_s: u64,
    /// Seconds of unmeasured warm-up per target (0 for none).
    #[arg(long, default_value_t = WARMUP_S_DEFAULT, value_parser = bounded_u64::<WARMUP_S_MAX>)]
    warmup_s: u64,
    /// Stop each measured phase after this many paid calls, if that comes before the duration.
    #[arg(long, value_parser = bounded_u64::<CALLS_MAX>)]
    count: Option<u64>,
    /// Buyer agents per target.
    #[arg(long, default_value_t = BUYERS_DEFAULT, value_parser = bounded::<BUYERS_MAX>)]
    buyers: usize,
    /// Merchant agents per target.
    #[arg(long, default_value_t = MERCHANTS_DEFAULT, value_parser = bounded::<MERCHANTS_MAX>)]
    merchants: usize,
    /// Connections in the baseline peer's pool.
    #[arg(long, default_value_t = BASELINE_POOL_DEFAULT, value_parser = bounded::<BASELINE_POOL_MAX>)]
    pool: usize,
    /// Paid calls per batch (1: single calls). Above 1, each client sends one token batch and one settlement
    /// batch of this many calls at a time (the baseline peer applies each batch in one transaction).
    #[arg(long, default_value_t = 1, value_parser = bounded::<BATCH_MAX>)]
    batch: usize,
    /// Open loop: start paid calls at this many per second whatever the pace of the answers, timing each from
    /// when it was due (p50/p99/p99.9 without coordinated omission); `--concurrency` then only sizes the pool.
    #[arg(long, value_parser = bounded_u64::<RATE_MAX>)]
    rate: Option<u64>,
    /// Percent (0–100) of settles sent twice at the same moment: a duplicate storm. Both answers must name one
    /// settlement (a correctness gate).
    #[arg(long, default_value_t = 0, value_parser = clap::value_parser!(u8).range(0..=100))]
    duplicate_pct: u8,
    /// The `cluster` target's size: this many `bazaar serve` nodes on its one database, joined through NATS
    /// (`--nats-url`); paid calls go round the nodes, and each node's CPU is reported.
    #[arg(long, default_value_t = CLUSTER_NODES_DEFAULT, value_parser = bounded::<NODES_MAX>)]
    nodes: usize,
    /// Confine the Bazaar nodes to CPU sets, one `taskset -c` list per node, `/` between nodes (`0/1/1`: node 0,
    /// which takes the sequencer's lease first, alone on CPU 0, the others on CPU 1): the edge's work and the
    /// sequencer's are then measured apart. Only the `cluster` target's nodes; PostgreSQL, NATS and the load
    /// generator are not confined.
    #[arg(long, value_delimiter = '/')]
    node_cpus: Vec<String>,
    /// NATS with JetStream, for the `cluster` target.
    #[arg(long, env = "BAZAAR_BENCH_NATS", default_value = "nats://127.0.0.1:4222")]
    nats_url: String,
    /// Targets to run, in this order.
    #[arg(long, value_delimiter = ',', default_value = "embedded,postgres,baseline")]
    targets: Vec<Which>,
    /// The `bazaar` binary (default: next to this one).
    #[arg(long)]
    bazaar_bin: Option<PathBuf>,
    /// PostgreSQL server (no database): the harness creates and drops its own databases there.
    #[arg(long, env = "BAZAAR_BENCH_PG", default_value = "postgres://postgres@127.0.0.1:5432")]
    pg_url: String,
    /// Also write the report as JSON here.
    #[arg(long)]
    out: Option<PathBuf>,
    /// Keep the data directories and databases afterwards.
    #[arg(long)]
    keep: bool,
    /// Exit 1 unless every goal is met (by default only the correctness gates decide the exit code).
    #[arg(long)]
    require_goals: bool,
}

fn bounded<const MAX: usize>(text: &str) -> Result<usize, String> {
    match text.parse::<usize>() {
        Ok(value) if (1..=MAX).contains(&value) => Ok(value),
        _ => Err(format!("must be a whole number from 1 to {MAX}")),
    }
}

fn bounded_u64<const MAX: u64>(text: &str) -> Result<u64, String> {
    match text.parse::<u64>() {
        Ok(value) if value <= MAX => Ok(value),
        _ => Err(format!("must be a whole number from 0 to {MAX}")),
    }
}

fn main() {
    let cli = Cli::parse();
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build().expect("tokio runtime");
    let code = runtime.block_on(async move {
        match cli.command {
            Command::BaselineServe { port, database_url, pool } => {
                match baseline::serve(&database_url, port, pool).await {
                    Ok(()) => 0,
                    Err(error) => {
                        eprintln!("error: {error:#}");
                        2
                    }
                }
            }
            Command::Run(args) => run(args).await,
            Command::Relay(args) => bazaar_bench::relay::run(args).await,
            Command::Stream(args) => bazaar_bench::stream::run(args).await,
            Command::Soak(args) => bazaar_bench::soak::run(args).await,
            Command::Attention(args) => {
                match tokio::task::spawn_blocking(move || bazaar_bench::attention::run(&args)).await {
                    Ok(Ok(_)) => 0,
                    Ok(Err(error)) => {
                        eprintln!("error: {error:#}");
                        2
                    }
                    Err(error) => {
                        eprintln!("error: {error}");
                        2
                    }
                }
            }
            Command::Talk(args) => {
                let out = args.out.clone();
                match bazaar_bench::talk_cmd::run(args).await {
                    Ok(report) => {
                        bazaar_bench::talk_cmd::print(&report);
                        let written = out.map(|path| {
                            std::fs::write(path, serde_json::to_string_pretty(&report).unwrap_or_default())
                        });
                        if let Some(Err(error)) = written {
                            eprintln!("error: writing the report: {error}");
                        }
                        0
                    }
                    Err(error) => {
                        eprintln!("error: {error:#}");
                        2
                    }
                }
            }
        }
    });
    drop(runtime);
    std::process::exit(code);
}

/// Names of everything one run creates, so it can all be removed.
struct Scratch {
    root: PathBuf,
    bazaar_db: String,
    cluster_db: String,
    baseline_db: String,
}

async fn run(mut args: RunArgs) -> i32 {
    if args.duration_s == 0 {
        eprintln!("error: --duration-s must be at least 1");
        return 2;
    }
    args.targets.sort();
    args.targets.dedup();
    let pid = std::process::id();
    let scratch = Scratch {
        root: std::env::temp_dir().join(format!("bazaar-bench-{pid}")),
        bazaar_db: format!("bazaar_bench_{pid}"),
        cluster_db: format!("bazaar_cluster_bench_{pid}"),
        baseline_db: format!("baseline_bench_{pid}"),
    };
    // Children are killed when the benchmark future is dropped, which Ctrl-C does too.
    let outcome = tokio::select! {
        outcome = bench(&args, &scratch) => outcome,
        _ = tokio::signal::ctrl_c() => Err(anyhow!("interrupted")),
    };
    if !args.keep {
        clean_up(&args, &scratch).await;
    } else {
        eprintln!(
            "kept {} and databases {}, {}, {}",
            scratch.root.display(),
            scratch.bazaar_db,
            scratch.cluster_db,
            scratch.baseline_db
        );
    }
    match outcome {
        Ok(report) => {
            let ok = report.gates_passed && (!args.require_goals || report.goals_met());
            i32::from(!ok)
        }
        Err(error) => {
            eprintln!("error: {error:#}");
            2
        }
    }
}

async fn clean_up(args: &RunArgs, scratch: &Scratch) {
    if args.targets.iter().any(|t| *t != Which::Embedded) {
        match servers::connect(&servers::database_url(&args.pg_url, "postgres")).await {
            Ok(admin) => {
                for db in [&scratch.bazaar_db, &scratch.cluster_db, &scratch.baseline_db] {
                    if let Err(error) = servers::drop_database(&admin, db).await {
                        eprintln!("warning: dropping {db}: {error:#}");
                    }
                }
            }
            Err(error) => eprintln!("warning: could not drop the bench databases: {error:#}"),
        }
    }
    let _ = std::fs::remove_dir_all(&scratch.root);
}

/// A started, set-up target.
struct Prepared {
    which: Which,
    server: Server,
    /// The other nodes, when the target is several (`--nodes`).
    others: Vec<Server>,
    target: Target,
    /// The PostgreSQL database it uses, if any: (name, URL).
    database: Option<(String, String)>,
    data_dir: PathBuf,
    /// Σ balances right after setup (the baseline's conservation check).
    balance_sum: i64,
}

async fn bench(args: &RunArgs, scratch: &Scratch) -> Result<Report> {
    std::fs::create_dir_all(&scratch.root).with_context(|| format!("creating {}", scratch.root.display()))?;
    let bazaar_bin = match &args.bazaar_bin {
        Some(path) => path.clone(),
        None => std::env::current_exe()?.with_file_name("bazaar"),
    };
    if !args.node_cpus.is_empty() && args.node_cpus.len() != args.nodes {
        bail!("--node-cpus names {} CPU sets for {} nodes: give one per node", args.node_cpus.len(), args.nodes);
    }
    if args.targets.iter().any(|t| *t != Which::Baseline) && !bazaar_bin.exists() {
        bail!("no bazaar binary at {} (build it: cargo build --release -p bazaar-cli)", bazaar_bin.display());
    }
    let admin = match args.targets.iter().any(|t| *t != Which::Embedded) {
        true => Some(servers::connect(&servers::database_url(&args.pg_url, "postgres")).await?),
        false => None,
    };
    let mut reports = Vec::new();
    let mut prepared = Vec::new();
    for &which in &args.targets {
        eprintln!("[{}] starting and setting up {} buyers, {} merchants", which.name(), args.buyers, args.merchants);
        match prepare(which, args, scratch, admin.as_ref(), &bazaar_bin).await {
            Ok(ready) => prepared.push(ready),
            Err(error) => {
                eprintln!("[{}] could not start: {error:#}", which.name());
                reports.push(TargetReport::failed(
                    which.name(),
                    &which.description(args.pool, args.nodes, &args.node_cpus),
                    &error,
                ));
            }
        }
    }
    let http = drive::http_client(args.concurrency);
    for ready in prepared {
        let which = ready.which;
        eprintln!(
            "[{}] driving {} clients for {} s (+{} s warm-up)",
            which.name(),
            args.concurrency,
            args.duration_s,
            args.warmup_s
        );
        let measured = measure(ready, args, admin.as_ref(), &http, &bazaar_bin).await;
        eprintln!(
            "[{}] {:.0} settlements/s; gate {}",
            which.name(),
            measured.settlements_per_s,
            if measured.gate.passed { "passed" } else { "FAILED" }
        );
        reports.push(measured);
    }
    let order = |t: &TargetReport| args.targets.iter().position(|w| w.name() == t.target);
    reports.sort_by_key(order);
    let command = std::env::args().collect::<Vec<_>>().join(" ");
    let mut settings = serde_json::to_value(args)?;
    settings["cpus"] = serde_json::json!(std::thread::available_parallelism().map(|n| n.get()).unwrap_or(0));
    settings["price_minor"] = serde_json::json!(PRICE_MINOR);
    let report = Report::new(command, settings, reports);
    println!("{}", report.markdown());
    if let Some(path) = &args.out {
        bazaar_bench::report::write_json(path, &report)?;
    }
    Ok(report)
}

async fn prepare(
    which: Which,
    args: &RunArgs,
    scratch: &Scratch,
    admin: Option<&Client>,
    bazaar_bin: &Path,
) -> Result<Prepared> {
    let data_dir = scratch.root.join(which.name());
    std::fs::create_dir_all(&data_dir)?;
    let log = scratch.root.join(format!("{}.log", which.name()));
    let database = match which {
        Which::Embedded => None,
        Which::Postgres => Some(scratch.bazaar_db.clone()),
        Which::Cluster => Some(scratch.cluster_db.clone()),
        Which::Baseline => Some(scratch.baseline_db.clone()),
    };
    let database = match database {
        Some(name) => {
            let admin = admin.context("no PostgreSQL admin connection")?;
            servers::create_database(admin, &name).await?;
            let url = servers::database_url(&args.pg_url, &name);
            Some((name, url))
        }
        None => None,
    };
    let dir = data_dir.display().to_string();
    let mut others = Vec::new();
    let (server, buyers, merchants, balance_sum) = match which {
        Which::Embedded | Which::Postgres | Which::Cluster => {
            let url = database.as_ref().map(|(_, url)| url.as_str());
            let (server, more, buyers, merchants) =
                spawn_bazaar(which, args, scratch, dir, url, bazaar_bin, log).await?;
            others = more;
            (server, buyers, merchants, 0)
        }
        Which::Baseline => {
            let (_, url) = database.as_ref().context("the baseline needs a database")?;
            let serve = vec![
                "baseline-serve".to_string(),
                "--port".into(),
                "0".into(),
                "--database-url".into(),
                url.clone(),
                "--pool".into(),
                args.pool.to_string(),
            ];
            let server = servers::spawn(&std::env::current_exe()?, &serve, &[], log).await?;
            let client = servers::connect(url).await?;
            let fund = FUND_PER_BUYER_MINOR as i64;
            let (buyers, merchants) = baseline::setup(&client, args.buyers, args.merchants, fund).await?;
            (server, buyers, merchants, fund * args.buyers as i64)
        }
    };
    let nodes = if others.is_empty() {
        Vec::new()
    } else {
        std::iter::once(&server).chain(&others).map(|s| s.url.clone()).collect()
    };
    let target = Target {
        base: server.url.clone(),
        buyers: Arc::new(buyers),
        merchants: Arc::new(merchants),
        nodes: Arc::new(nodes),
    };
    Ok(Prepared { which, server, others, target, database, data_dir, balance_sum })
}

/// Starts `bazaar serve` for `which` — `args.nodes` of them on one database joined through NATS when the
/// PostgreSQL target is several nodes — and sets up its buyers and merchants through the first.
async fn spawn_bazaar(
    which: Which,
    args: &RunArgs,
    scratch: &Scratch,
    dir: String,
    database_url: Option<&str>,
    bazaar_bin: &Path,
    log: PathBuf,
) -> Result<(Server, Vec<Server>, Vec<drive::Party>, Vec<drive::Party>)> {
    let credential = format!("bzc_bench_{}", baseline::random_b64(24));
    let mut serve = vec!["serve".to_string(), "--port".into(), "0".into(), "--data-dir".into(), dir];
    if let Some(url) = database_url {
        serve.extend(["--database-url".to_string(), url.to_string()]);
    }
    let env = [("BAZAAR_OPERATOR_CREDENTIAL", credential.clone())];
    let several = which == Which::Cluster;
    let node = |i: usize| -> Vec<String> {
        let mut args_i = serve.clone();
        if several {
            args_i[4] = format!("{}-{i}", args_i[4]);
            args_i.extend(["--nats-url".to_string(), args.nats_url.clone(), "--node-id".into(), format!("node-{i}")]);
        }
        args_i
    };
    // A node confined to a CPU set runs under `taskset -c`, which execs it (the pid is the node's).
    let start = |i: usize, log: PathBuf| {
        let (program, mut argv) = match args.node_cpus.get(i).filter(|_| several) {
            Some(cpus) => {
                (PathBuf::from("taskset"), vec!["-c".to_string(), cpus.clone(), bazaar_bin.display().to_string()])
            }
            None => (bazaar_bin.to_path_buf(), Vec::new()),
        };
        argv.extend(node(i));
        let env = env.clone();
        async move { servers::spawn(&program, &argv, &env, log).await }
    };
    let server = start(0, log).await?;
    let mut others = Vec::new();
    for i in 1..if several { args.nodes } else { 1 } {
        others.push(start(i, scratch.root.join(format!("{}-{i}.log", which.name()))).await?);
    }
    let (buyers, merchants) = setup::bazaar(&server.url, &credential, args.buyers, args.merchants).await?;
    Ok((server, others, buyers, merchants))
}

/// CPU counters at one instant.
struct Cpu {
    server: Option<u64>,
    /// Each node's process ticks (the first is `server`), when the target is several nodes.
    nodes: Vec<Option<u64>>,
    threads: std::collections::HashMap<u32, (String, u64)>,
    /// Every `nats-server` on the host, when the target is several nodes.
    nats: Option<u64>,
    pg: Option<procfs::PgProcesses>,
    client: u64,
    machine: (u64, u64),
}

impl Cpu {
    fn take(ready: &Prepared) -> Cpu {
        Cpu {
            server: std::iter::once(&ready.server)
                .chain(&ready.others)
                .map(|s| procfs::process_ticks(s.pid))
                .sum::<Option<u64>>(),
            nodes: std::iter::once(&ready.server).chain(&ready.others).map(|s| procfs::process_ticks(s.pid)).collect(),
            threads: procfs::thread_ticks(ready.server.pid),
            nats: (!ready.others.is_empty())
                .then(|| procfs::pids_named("nats-server").into_iter().filter_map(procfs::process_ticks).sum()),
            pg: ready.database.as_ref().map(|(name, _)| procfs::pg_processes(name)),
            client: procfs::self_ticks(),
            machine: procfs::machine_ticks(),
        }
    }
}

async fn scrape(http: &reqwest::Client, base: &str) -> (metrics::RouteTimes, Option<(f64, f64)>) {
    match http.get(format!("{base}/metrics")).send().await {
        Ok(response) => {
            let text = response.text().await.unwrap_or_default();
            (metrics::parse(&text), metrics::writer(&text))
        }
        Err(_) => Default::default(),
    }
}

async fn pg_stats(admin: Option<&Client>, ready: &Prepared) -> Option<PgStats> {
    servers::pg_stats(admin?, &ready.database.as_ref()?.0).await
}

// reason: one target's measurement is a fixed sequence (warm, snapshot, drive, snapshot, probe, gate, report)
// whose order is the method; split, the phases would only pass a dozen locals along.
#[allow(clippy::too_many_lines)]
async fn measure(
    mut ready: Prepared,
    args: &RunArgs,
    admin: Option<&Client>,
    http: &reqwest::Client,
    bazaar_bin: &Path,
) -> TargetReport {
    let which = ready.which;
    let short = &which.name()[..1];
    let phase = |tag: String, seconds: u64, calls_max: u64| Plan {
        tag,
        concurrency: args.concurrency,
        duration: Duration::from_secs(seconds),
        calls_max,
        batch: args.batch,
        rate: args.rate,
        duplicate_pct: args.duplicate_pct,
    };
    let warm = match args.warmup_s {
        0 => Outcome::default(),
        s => drive::run(http, &ready.target, &phase(format!("bench-w{short}"), s, CALLS_MAX)).await,
    };
    tokio::time::sleep(Duration::from_millis(STATS_SETTLE_MS)).await;
    let (routes_before, stats_before) = (scrape(http, &ready.server.url).await, pg_stats(admin, &ready).await);
    let cpu_before = Cpu::take(&ready);
    let plan = phase(format!("bench-m{short}"), args.duration_s, args.count.unwrap_or(CALLS_MAX).min(CALLS_MAX));
    let mut outcome = drive::run(http, &ready.target, &plan).await;
    let cpu_after = Cpu::take(&ready);
    let routes_after = scrape(http, &ready.server.url).await;
    tokio::time::sleep(Duration::from_millis(STATS_SETTLE_MS)).await;
    let stats_after = pg_stats(admin, &ready).await;

    let probes: Vec<_> = outcome.settled.iter().chain(&warm.settled).take(REPLAY_PROBES).cloned().collect();
    let (probes_ok, probe_problems) = drive::replay_probes(http, &ready.target, &probes).await;
    let stopped = ready.server.stop().await;
    for other in &mut ready.others {
        let _ = other.stop().await;
    }
    let told = Told {
        acked: warm.calls_ok + outcome.calls_ok,
        unknown: warm.settles_unknown + outcome.settles_unknown,
        probes_sent: probes.len(),
        probes_ok,
        probe_problems,
    };
    let mut gate = match (which, &ready.database) {
        (Which::Baseline, Some((_, url))) => gate::baseline(url, ready.balance_sum, &told).await,
        (Which::Postgres | Which::Cluster, Some((_, url))) => {
            gate::bazaar(bazaar_bin, BazaarStore::Postgres { url }, &told).await
        }
        _ => gate::bazaar(bazaar_bin, BazaarStore::Sqlite { data_dir: &ready.data_dir }, &told).await,
    };
    if let Err(error) = stopped {
        gate.failed("server stops", &error);
    }
    let (sent, diverged) =
        (warm.duplicates_sent + outcome.duplicates_sent, warm.duplicates_diverged + outcome.duplicates_diverged);
    if sent > 0 {
        gate.check(
            "duplicate settles name one settlement",
            diverged == 0,
            format!("{diverged} of {sent} pairs diverged"),
        );
    }

    let settled = outcome.calls_ok;
    let per_1k = |ticks: u64| (settled > 0).then(|| ticks as f64 / procfs::TICKS_PER_S / settled as f64 * 1000.0);
    let pg_delta = |pick: fn(&procfs::PgProcesses) -> &std::collections::HashMap<u32, u64>| {
        let (before, after) = (cpu_before.pg.as_ref()?, cpu_after.pg.as_ref()?);
        per_1k(procfs::delta(pick(before), pick(after)))
    };
    let (busy, total) =
        (cpu_after.machine.0 - cpu_before.machine.0, (cpu_after.machine.1 - cpu_before.machine.1).max(1));
    let stats = stats_before.zip(stats_after);
    let elapsed = outcome.elapsed.as_secs_f64();
    TargetReport {
        target: which.name().into(),
        description: which.description(args.pool, args.nodes, &args.node_cpus),
        status: if settled > 0 { "ok".into() } else { format!("failed: no paid call completed: {:?}", outcome.errors) },
        calls: settled,
        failed_calls: outcome.calls_failed,
        elapsed_s: elapsed,
        settlements_per_s: settled as f64 / elapsed.max(1e-9),
        paid_call: drive::latency(&mut outcome.call_us),
        settle: drive::latency(&mut outcome.settle_us),
        server_cpu_s_per_1k: cpu_before.server.zip(cpu_after.server).and_then(|(b, a)| per_1k(a.saturating_sub(b))),
        nodes_cpu_s_per_1k: if ready.others.is_empty() {
            Vec::new()
        } else {
            cpu_before
                .nodes
                .iter()
                .zip(&cpu_after.nodes)
                .filter_map(|(b, a)| per_1k(a.as_ref()?.saturating_sub(*b.as_ref()?)))
                .collect()
        },
        nats_cpu_s_per_1k: cpu_before.nats.zip(cpu_after.nats).and_then(|(b, a)| per_1k(a.saturating_sub(b))),
        server_threads_cpu_s_per_1k: procfs::thread_delta(&cpu_before.threads, &cpu_after.threads)
            .into_iter()
            .filter_map(|(name, ticks)| Some((name, per_1k(ticks)?)))
            .collect(),
        pg_backend_cpu_s_per_1k: pg_delta(|p| &p.backends),
        pg_shared_cpu_s_per_1k: pg_delta(|p| &p.shared),
        client_cpu_s_per_1k: per_1k(cpu_after.client.saturating_sub(cpu_before.client)),
        machine_busy_pct: Some(busy as f64 / total as f64 * 100.0),
        server_ms_per_request: metrics::mean_ms(&routes_before.0, &routes_after.0),
        writer_commands_per_batch: metrics::commands_per_batch(routes_before.1, routes_after.1),
        pg_commits_per_settlement: stats
            .filter(|_| settled > 0)
            .map(|(b, a)| (a.xact_commit - b.xact_commit) as f64 / settled as f64),
        wal_syncs_per_1k: stats
            .filter(|_| settled > 0)
            .map(|(b, a)| (a.wal_sync - b.wal_sync) as f64 / settled as f64 * 1000.0),
        retries: outcome.retries,
        settles_replayed: outcome.settles_replayed,
        duplicates_sent: outcome.duplicates_sent,
        open_loop_refused: outcome.backlog_refused,
        errors: outcome.errors,
        gate,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flags_are_bounded() {
        assert!(bounded::<10>("0").is_err());
        assert!(bounded::<10>("11").is_err());
        assert_eq!(bounded::<10>("10"), Ok(10));
        assert!(bounded_u64::<5>("6").is_err());
        assert!(Cli::try_parse_from(["bazaar-bench", "run", "--concurrency", "100000"]).is_err());
        assert!(Cli::try_parse_from(["bazaar-bench", "run", "--targets", "embedded,baseline"]).is_ok());
    }

    #[test]
    fn node_cpu_sets_are_one_per_node() {
        let cli =
            Cli::try_parse_from(["bazaar-bench", "run", "--targets", "cluster", "--node-cpus", "0/1,2/1"]).unwrap();
        let Command::Run(args) = cli.command else { panic!("run") };
        assert_eq!(args.node_cpus, ["0", "1,2", "1"]);
    }
}

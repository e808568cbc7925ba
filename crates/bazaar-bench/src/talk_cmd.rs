//! The `talk` subcommand's arguments and run: starts `bazaar serve` on the
//! embedded store, measures fanout (beside the bare reference), ingest and
//! idle sockets, and prints (and optionally writes) the report.

use crate::talk::{self, Latency, Registry};
use anyhow::{bail, Context, Result};
use clap::Args;
use serde::Serialize;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

/// Most sockets one fanout room may hold (the server's `CHANNEL_MEMBERS_MAX`).
pub const SUBSCRIBERS_MAX: usize = bazaar_types::limits::CHANNEL_MEMBERS_MAX;
/// Most idle sockets the harness opens (the bench and the server each hold one end).
pub const IDLE_MAX: usize = 15_000;

#[derive(Args, Clone, Debug)]
pub struct TalkArgs {
    /// Sockets (members) in the fanout room.
    #[arg(long, default_value_t = 1_000)]
    pub subscribers: usize,
    /// Posts measured for fanout.
    #[arg(long, default_value_t = 50)]
    pub posts: usize,
    /// Concurrent posters in the ingest run.
    #[arg(long, default_value_t = 32)]
    pub ingest_clients: usize,
    /// Seconds of the ingest run.
    #[arg(long, default_value_t = 10)]
    pub ingest_s: u64,
    /// Concurrent paid-call clients in the settle-under-message-load run (0 skips it).
    #[arg(long, default_value_t = 16)]
    pub settle_clients: usize,
    /// Seconds of each settle phase (quiet, then with posters at full speed).
    #[arg(long, default_value_t = 5)]
    pub settle_s: u64,
    /// Idle inbox sockets to hold open (0 skips the idle run).
    #[arg(long, default_value_t = 10_000)]
    pub idle: usize,
    /// The `bazaar` binary (default: next to this one).
    #[arg(long)]
    pub bazaar_bin: Option<PathBuf>,
    /// Also write the report as JSON here.
    #[arg(long)]
    pub out: Option<PathBuf>,
}

#[derive(Serialize)]
pub struct TalkReport {
    pub subscribers: usize,
    pub fanout_bazaar: Latency,
    pub fanout_reference: Latency,
    /// Bazaar's p99 over the reference's.
    pub fanout_p99_ratio: f64,
    pub ingest_clients: usize,
    pub ingest_messages_per_s: f64,
    /// The plane's writer alone (no HTTP), `ingest_clients` threads on one embedded store.
    pub store_ingest_messages_per_s: f64,
    /// Settle latency with no message traffic, then with `ingest_clients` posting at full speed, in one run.
    pub settle_quiet: Option<crate::drive::Latency>,
    pub settle_busy: Option<crate::drive::Latency>,
    /// Messages per second the posters managed during the busy settle phase.
    pub ingest_during_settle_per_s: Option<f64>,
    pub idle_sockets: usize,
    pub idle_kib_per_socket: Option<f64>,
    /// Ingest over HTTP again, with the idle sockets (in none of the posters' rooms) held open.
    pub ingest_beside_idle_per_s: Option<f64>,
}

pub async fn run(args: TalkArgs) -> Result<TalkReport> {
    if args.subscribers < 2 || args.subscribers > SUBSCRIBERS_MAX || args.idle > IDLE_MAX || args.posts == 0 {
        bail!("subscribers 2..={SUBSCRIBERS_MAX}, idle 0..={IDLE_MAX}, posts at least 1");
    }
    let bazaar = match &args.bazaar_bin {
        Some(path) => path.clone(),
        None => std::env::current_exe()?.with_file_name("bazaar"),
    };
    let dir = std::env::temp_dir().join(format!("bazaar-bench-talk-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let credential = format!("bzc_talk_{}", crate::baseline::random_b64(24));
    let serve = ["serve", "--port", "0", "--data-dir"].map(String::from).into_iter().chain([dir.display().to_string()]);
    let env = [("BAZAAR_OPERATOR_CREDENTIAL", credential.clone()), ("BAZAAR_LOG", "warn".to_string())];
    let mut server = crate::servers::spawn(&bazaar, &serve.collect::<Vec<_>>(), &env, dir.join("serve.log"))
        .await
        .context("starting bazaar serve")?;
    let registry = Registry { url: server.url.clone(), http: reqwest::Client::new(), operator: credential };
    let report = measure(&args, &registry, server.pid).await;
    server.stop().await?;
    std::fs::remove_dir_all(&dir).ok();
    report
}

async fn measure(args: &TalkArgs, registry: &Registry, pid: u32) -> Result<TalkReport> {
    // Ingest first, while no socket listens (each live stream re-reads its inbox as the log moves).
    eprintln!("[talk] ingest: {} posters for {} s", args.ingest_clients, args.ingest_s);
    let posters = registry.people("poster", args.ingest_clients.max(1)).await?;
    let ingest_messages_per_s = talk::ingest(registry, &posters, args.ingest_s).await?;
    eprintln!(
        "[talk] ingest without HTTP: {} threads on the embedded store for {} s",
        args.ingest_clients, args.ingest_s
    );
    let scratch = std::env::temp_dir().join(format!("bazaar-bench-store-{}", std::process::id()));
    std::fs::create_dir_all(&scratch)?;
    let (threads, seconds) = (args.ingest_clients.max(1), args.ingest_s);
    let store_dir = scratch.clone();
    let store_ingest_messages_per_s =
        tokio::task::spawn_blocking(move || talk::store_ingest(&store_dir, threads, seconds)).await??;
    std::fs::remove_dir_all(&scratch).ok();
    // Paid calls beside message load, also before any socket listens.
    let (mut settle_quiet, mut settle_busy, mut ingest_during_settle_per_s) = (None, None, None);
    if args.settle_clients > 0 {
        let (quiet, busy, rate) = settle_under_load(args, registry, &posters).await?;
        (settle_quiet, settle_busy, ingest_during_settle_per_s) = (Some(quiet), Some(busy), Some(rate));
    }
    eprintln!("[talk] enrolling {} members for fanout", args.subscribers);
    let members = registry.people("fan", args.subscribers).await?;
    eprintln!("[talk] fanout: {} posts to {} sockets", args.posts, args.subscribers);
    let fanout_bazaar = talk::fanout(registry, &members, args.posts).await?;
    eprintln!("[talk] reference: the same on a bare tokio-tungstenite broadcast server");
    let fanout_reference = talk::reference_fanout(args.subscribers, args.posts).await?;
    let (mut idle_kib_per_socket, mut ingest_beside_idle_per_s) = (None, None);
    if args.idle > 0 {
        let needed = args.idle.div_ceil(talk::STREAMS_PER_MEMBER);
        eprintln!("[talk] idle: {} sockets held by {needed} members", args.idle);
        let holders = registry.people("idle", needed).await?;
        let (per_socket, sockets) = talk::idle(registry, pid, &holders, args.idle).await?;
        idle_kib_per_socket = Some(per_socket);
        // A post wakes only the streams of members in its channel: these sockets should cost the posters nothing.
        eprintln!("[talk] ingest again, beside the {} idle sockets", args.idle);
        ingest_beside_idle_per_s = Some(talk::ingest(registry, &posters, args.ingest_s).await?);
        drop(sockets);
    }
    let ratio = if fanout_reference.p99_ms > 0.0 { fanout_bazaar.p99_ms / fanout_reference.p99_ms } else { 0.0 };
    Ok(TalkReport {
        subscribers: args.subscribers,
        fanout_bazaar,
        fanout_reference,
        fanout_p99_ratio: ratio,
        ingest_clients: args.ingest_clients,
        ingest_messages_per_s,
        store_ingest_messages_per_s,
        settle_quiet,
        settle_busy,
        ingest_during_settle_per_s,
        idle_sockets: args.idle,
        idle_kib_per_socket,
        ingest_beside_idle_per_s,
    })
}

/// Paid calls alone, then the same with the posters at full speed: does the
/// money writer wait on messages? (The plane has its own file and writer.)
async fn settle_under_load(
    args: &TalkArgs,
    registry: &Registry,
    posters: &[talk::Member],
) -> Result<(crate::drive::Latency, crate::drive::Latency, f64)> {
    use crate::drive::{self, Plan, Target};
    eprintln!("[talk] settle: {} paid-call clients, quiet then beside {} posters", args.settle_clients, posters.len());
    let (buyers, merchants) = crate::setup::bazaar(&registry.url, &registry.operator, args.settle_clients, 4).await?;
    let target = Target {
        base: registry.url.clone(),
        buyers: Arc::new(buyers),
        merchants: Arc::new(merchants),
        nodes: Default::default(),
    };
    let http = drive::http_client(args.settle_clients);
    let plan = |tag: &str| Plan {
        tag: tag.into(),
        concurrency: args.settle_clients,
        duration: Duration::from_secs(args.settle_s),
        calls_max: u64::MAX,
        batch: 1,
        rate: None,
        duplicate_pct: 0,
    };
    let mut quiet = drive::run(&http, &target, &plan("quiet")).await;
    let busy_plan = plan("busy");
    let (mut busy, rate) =
        tokio::join!(drive::run(&http, &target, &busy_plan), talk::ingest(registry, posters, args.settle_s));
    if quiet.calls_failed + busy.calls_failed > 0 {
        bail!("paid calls failed: {} quiet, {} busy", quiet.calls_failed, busy.calls_failed);
    }
    Ok((drive::latency(&mut quiet.settle_us), drive::latency(&mut busy.settle_us), rate?))
}

pub fn print(report: &TalkReport) {
    let line = |name: &str, l: &Latency| {
        println!(
            "  {name:<28} p50 {:>8.2} ms   p99 {:>8.2} ms   max {:>8.2} ms   ({} posts)",
            l.p50_ms, l.p99_ms, l.max_ms, l.samples
        )
    };
    println!("fanout to {} WebSockets (post → last delivery)", report.subscribers);
    line("bazaar (embedded)", &report.fanout_bazaar);
    line("bare tokio-tungstenite", &report.fanout_reference);
    println!("  p99 ratio bazaar / reference: {:.1}x   (goal: bazaar p99 < 50 ms)", report.fanout_p99_ratio);
    println!(
        "ingest over HTTP: {:.0} messages/s with {} posters   (goal: ≥ 10,000/s)",
        report.ingest_messages_per_s, report.ingest_clients
    );
    println!(
        "ingest, the store's writer alone: {:.0} messages/s with {} threads",
        report.store_ingest_messages_per_s, report.ingest_clients
    );
    if let (Some(quiet), Some(busy), Some(rate)) =
        (&report.settle_quiet, &report.settle_busy, report.ingest_during_settle_per_s)
    {
        let ms = |v: Option<f64>| v.map(|v| format!("{v:.2} ms")).unwrap_or_else(|| "-".into());
        println!(
            "settle p50/p99 alone: {} / {}; beside {rate:.0} messages/s: {} / {}",
            ms(quiet.p50_ms),
            ms(quiet.p99_ms),
            ms(busy.p50_ms),
            ms(busy.p99_ms)
        );
    }
    match report.idle_kib_per_socket {
        Some(kib) => {
            println!("idle: {} sockets, {kib:.1} KiB of server RSS each   (goal: < 30 KB)", report.idle_sockets)
        }
        None => println!("idle: skipped"),
    }
    if let Some(rate) = report.ingest_beside_idle_per_s {
        println!(
            "ingest beside {} idle sockets: {rate:.0} messages/s (alone: {:.0})",
            report.idle_sockets, report.ingest_messages_per_s
        );
    }
}

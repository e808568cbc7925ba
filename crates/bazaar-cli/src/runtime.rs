//! Process plumbing: opening the configured store, serving with graceful
//! shutdown, the audit command, and secret files. The wall clock is `bazaar_sdk::clock`'s.

use crate::StoreArgs;
use anyhow::{Context, Result};
use bazaar_core::apply::Config;
use bazaar_store::Store;
use bazaar_types::Clock;
use std::path::Path;
use std::sync::Arc;

use bazaar_sdk::clock::SystemClock;

pub use bazaar_stage::data_dir::{
    CONVERSATION_FILE, DESK_CREDENTIAL_FILE, OPERATOR_CREDENTIAL_FILE, RELAY_FILE, SQLITE_FILE,
};
use bazaar_stage::relay_url;

pub fn registry_config() -> Config {
    Config::standard()
}

pub async fn open_store(args: &StoreArgs, config: Config, clock: Arc<dyn Clock>) -> Result<Arc<dyn Store>> {
    if let Some(url) = &args.database_url {
        let store = bazaar_store_postgres::PostgresStore::connect(url, config, clock)
            .await
            .with_context(|| "opening PostgreSQL (check --database-url)".to_string())?;
        return Ok(Arc::new(store));
    }
    let path = bazaar_stage::data_dir::private_file(&args.data_dir, SQLITE_FILE)?;
    let store = bazaar_store_sqlite::SqliteStore::open(&path, config, clock)
        .with_context(|| format!("opening {}", path.display()))?;
    Ok(Arc::new(store))
}

/// The relay's store: its own SQLite file in the data directory, or its own
/// tables in PostgreSQL beside the ledger when `--database-url` is given.
pub async fn open_relay_store(args: &StoreArgs) -> Result<Arc<dyn bazaar_relay::EventStore>> {
    if let Some(url) = args.database_url.clone() {
        let store = tokio::task::spawn_blocking(move || bazaar_relay_postgres::PostgresEventStore::connect(&url))
            .await?
            .with_context(|| "opening the relay's store on PostgreSQL (check --database-url)".to_string())?;
        return Ok(Arc::new(store));
    }
    let path = bazaar_stage::data_dir::private_file(&args.data_dir, RELAY_FILE)?;
    let store =
        bazaar_relay::sqlite::SqliteEventStore::open(&path).with_context(|| format!("opening {}", path.display()))?;
    Ok(Arc::new(store))
}

/// Starts the relay on `state`: its writer, its purger, and its own port when asked.
async fn start_relay(
    state: &Arc<bazaar_server::AppState>,
    store: Arc<dyn bazaar_relay::EventStore>,
    clock: Arc<dyn Clock>,
    args: &crate::RelayArgs,
    public_url: &str,
) -> Result<String> {
    let mut config = bazaar_relay::RelayConfig::public(relay_url(public_url, args.relay_port));
    if args.relay_private {
        let writers = args.relay_writer.iter().map(|key| {
            bazaar_relay::Hex32::parse(key)
                .with_context(|| format!("--relay-writer {key}: expected 64 lowercase hex characters"))
        });
        config.access = bazaar_relay::Access::Private { writers: writers.collect::<Result<_>>()? };
    }
    let relay = Arc::new(bazaar_relay::Relay::start(store, clock, config).context("starting the relay's writer")?);
    let url = relay.config.url.clone();
    state.attach_relay(relay);
    bazaar_server::relay::spawn_purger(state.clone());
    if let Some(port) = args.relay_port {
        let listener = tokio::net::TcpListener::bind(("127.0.0.1", port))
            .await
            .with_context(|| format!("binding the relay's port 127.0.0.1:{port}"))?;
        let router = bazaar_server::relay::standalone_router(state.clone());
        tokio::spawn(async move {
            if let Err(error) = axum::serve(listener, router).await {
                tracing::error!(%error, "the relay's own port stopped");
            }
        });
    }
    tracing::info!(%url, "relay listening");
    Ok(url)
}

/// The conversation plane's store: PostgreSQL beside the ledger when
/// `--database-url` is given (its own tables), else its own SQLite file.
pub async fn open_conversation(
    args: &StoreArgs,
    clock: Arc<dyn Clock>,
) -> Result<bazaar_server::conversation::SharedStore> {
    let entropy: Arc<dyn bazaar_types::Entropy> = Arc::new(bazaar_server::OsEntropy);
    if let Some(url) = args.database_url.clone() {
        let store = tokio::task::spawn_blocking(move || {
            bazaar_conversation_postgres::PostgresConversationStore::connect(&url, clock, entropy)
        })
        .await?
        .with_context(|| "opening the conversation plane on PostgreSQL (check --database-url)".to_string())?;
        return Ok(Arc::new(store));
    }
    let path = bazaar_stage::data_dir::private_file(&args.data_dir, CONVERSATION_FILE)?;
    let store = bazaar_conversation::sqlite::SqliteConversationStore::open(&path, clock, entropy)
        .with_context(|| format!("opening {}", path.display()))?;
    Ok(Arc::new(store))
}

pub fn init_logs() {
    let filter = tracing_subscriber::EnvFilter::try_from_env("BAZAAR_LOG").unwrap_or_else(|_| "info".into());
    let _ = tracing_subscriber::fmt().with_env_filter(filter).json().with_writer(std::io::stderr).try_init();
}

/// How `bazaar serve` listens and starts.
pub struct Serving {
    pub port: u16,
    pub listen: crate::ListenArgs,
    pub cluster: crate::ClusterArgs,
    /// Set on first start only.
    pub operator_credential: Option<String>,
    pub public_url: Option<String>,
    pub allow_private_webhooks: bool,
    /// Anonymous visitors may watch the live event stream.
    pub public_stream: bool,
    /// Serve from a data directory others can read, with a warning (see [`bazaar_stage::data_dir::guard`]).
    pub allow_insecure_permissions: bool,
    pub relay: crate::RelayArgs,
    /// The chamber's attack catalogue ("try to break it"): each press runs in a scratch registry of its own,
    /// so it needs neither this registry's URL nor its operator's credential, and is attached on every start.
    pub attacks: Option<Arc<dyn bazaar_server::live::AttackRunner>>,
    /// Builds the chamber's story and AI-agent runs for this registry (its URL, the operator's credential and
    /// its clock), attached when the credential is known.
    pub runs: Option<RunsFactory>,
}

/// See [`Serving::runs`].
pub type RunsFactory =
    Box<dyn FnOnce(String, String, Arc<dyn Clock>) -> Arc<dyn bazaar_server::live::StoryRunner> + Send>;

pub async fn serve(args: StoreArgs, windows: crate::WindowArgs, serving: Serving) -> Result<()> {
    let Serving {
        port,
        listen,
        cluster,
        operator_credential,
        public_url,
        allow_private_webhooks,
        public_stream,
        allow_insecure_permissions,
        relay,
        attacks,
        runs,
    } = serving;
    // Read before anything is opened, so a bad certificate fails the start at once.
    let tls = crate::listen::tls(&listen)?;
    init_logs();
    let clock: Arc<dyn Clock> = Arc::new(SystemClock);
    let config = Config { windows: windows.windows().map_err(anyhow::Error::msg)?, ..registry_config() };
    // The data directory holds the signing key and credentials: an exposed one refuses the start, before
    // anything is opened or written.
    bazaar_stage::data_dir::guard(&args.data_dir, allow_insecure_permissions)?;
    // The cluster is reached first: if it cannot be, the start fails with nothing opened.
    let cluster = reach_cluster(&cluster, &args).await?;
    let (store, sequenced) = open_ledger(cluster.as_ref(), &args, &config, &clock).await?;
    let conversation = open_conversation(&args, clock.clone()).await?;
    let relay_store = open_relay_store(&args).await?;
    let booted = bazaar_server::boot(store, clock.clone(), config, operator_credential.clone()).await?;
    // The chamber's story runs need the operator's credential (each run enrolls its own cast).
    let attack_credential = booted.operator_credential.clone().or(operator_credential);
    booted.state.attach_conversation(conversation);
    if let Ok(plane) = booted.state.plane() {
        plane.allow_private_webhooks(allow_private_webhooks);
    }
    booted.state.set_public_stream(public_stream);
    if public_stream {
        tracing::warn!("the live event stream is open to anyone (--public-stream): see /compromises");
    }
    write_first_start_secrets(&booted, &args.data_dir)?;
    let state = booted.state;
    join_cluster(cluster, &state, &args).await?;
    let terminate =
        tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()).context("SIGTERM handler")?;
    bazaar_server::spawn_sweeper(state.clone());
    bazaar_server::conversation::webhooks::spawn_sender(state.clone());
    bazaar_server::conversation::notices::spawn_notifier(state.clone());
    bazaar_server::conversation::meter::spawn_meter(state.clone());
    let (listener, address, scheme) = crate::listen::bind(&listen, port, tls.is_some()).await?;
    let public_url = public_url.unwrap_or_else(|| format!("{scheme}://{address}"));
    *state.public_url.write().expect("url lock") = Some(public_url.clone());
    if let Some(catalogue) = attacks {
        state.attach_attacks(catalogue);
    }
    if let (Some(runs), Some(credential)) = (runs, attack_credential) {
        state.attach_runs(runs(format!("http://{address}"), credential, clock.clone()));
    }
    let relay_url = start_relay(&state, relay_store, clock, &relay, &public_url).await?;
    bazaar_server::fanout::forward_relay(state.clone());
    tracing::info!(%address, did = %state.registry, "bazaar registry listening");
    // A line on stdout that scripts and tests wait for.
    println!("listening on {scheme}://{address}");
    println!("relay on {relay_url}");
    let credential_file = args.data_dir.join(OPERATOR_CREDENTIAL_FILE);
    if credential_file.is_file() {
        println!("operator credential in {}", credential_file.display());
    }
    let served = serve_until_stopped(&state, listener, tls, &listen, terminate).await;
    if let Some(sequenced) = sequenced {
        // The next node takes the ledger over at once instead of after the lease lapses.
        sequenced.release().await;
    }
    served
}

/// Serves the registry on `listener` until SIGTERM or SIGINT: live sockets are told at once (they close with
/// 1001), HTTP connections drain, then the searches counted since the last flush are written.
async fn serve_until_stopped(
    state: &Arc<bazaar_server::AppState>,
    listener: tokio::net::TcpListener,
    tls: Option<Arc<rustls::ServerConfig>>,
    listen: &crate::ListenArgs,
    terminate: tokio::signal::unix::Signal,
) -> Result<()> {
    state.limit_rates(listen.rates());
    state.trust_proxies(listen.trusted_proxies.clone());
    let mut router = bazaar_server::router(state.clone());
    if bazaar_server::contract::check_requested() {
        tracing::warn!(
            "every JSON answer is checked against the wire contract ({})",
            bazaar_server::contract::CHECK_CONTRACT_ENV
        );
        router = bazaar_server::contract::checked(router);
    }
    let counted = state.clone();
    let refused: crate::conn::OnRefused = Arc::new(move |ip| {
        tracing::debug!(%ip, "connection refused: this address holds the most connections it may");
        counted.metrics.add("bazaar_http_connections_refused_total", String::new(), 1.0);
    });
    let stopping = state.clone();
    let stop = async move {
        shutdown_signal(terminate).await;
        stopping.closing.begin();
    };
    crate::listen::serve(listener, router, tls, listen.connections(), refused, stop).await?;
    let grace = std::time::Duration::from_millis(bazaar_server::closing::SOCKET_CLOSE_GRACE_MS);
    if !state.closing.drained(grace).await {
        tracing::warn!(open = state.closing.open(), "some WebSockets had not closed; they are cut");
    }
    // The searches counted since the last flush are written before the process ends.
    if let Err(error) = bazaar_server::shutdown(state).await {
        tracing::warn!(%error, "could not write the last searches counted; they are lost");
    }
    tracing::info!("shut down cleanly");
    Ok(())
}

/// The ledger: a node of a cluster opens it behind the sequencer (docs/design/sequencer.md), any other
/// node as `open_store` does.
async fn open_ledger(
    cluster: Option<&bazaar_cluster::Connected>,
    args: &StoreArgs,
    config: &Config,
    clock: &Arc<dyn Clock>,
) -> Result<(Arc<dyn Store>, Option<Arc<bazaar_cluster::sequencer::Sequenced>>)> {
    if let (Some(cluster), Some(url)) = (cluster, &args.database_url) {
        let sequenced = cluster
            .sequence(url, config.clone(), clock.clone())
            .await
            .context("opening the ledger as a cluster node")?;
        return Ok((sequenced.clone(), Some(sequenced)));
    }
    Ok((open_store(args, config.clone(), clock.clone()).await?, None))
}

/// Connects to the cluster `--nats-url` names, if any (before any store is opened).
async fn reach_cluster(cluster: &crate::ClusterArgs, args: &StoreArgs) -> Result<Option<bazaar_cluster::Connected>> {
    let Some(nats_url) = cluster.nats_url.clone() else { return Ok(None) };
    let node = cluster.node_id.clone().unwrap_or_else(bazaar_cluster::default_node_name);
    let database_url = args.database_url.clone().context("--nats-url needs --database-url")?;
    let config = bazaar_cluster::Config { nats_url, database_url, node };
    Ok(Some(bazaar_cluster::connect(&config).await.context("joining the cluster")?))
}

/// Joins `state` to the cluster reached, and starts its reconciler.
async fn join_cluster(
    cluster: Option<bazaar_cluster::Connected>,
    state: &Arc<bazaar_server::AppState>,
    args: &StoreArgs,
) -> Result<()> {
    match cluster {
        Some(cluster) => {
            let joined = cluster.join(state).await.context("joining the cluster")?;
            bazaar_server::fanout::spawn_reconciler(state.clone());
            tracing::info!(node = %bazaar_server::cluster::Cluster::node(joined.as_ref()), "joined the cluster");
        }
        None if args.database_url.is_some() => tracing::info!(
            "no --nats-url: this node's ledger writer, live streams, in-flight keys and sweeper are its own \
             (see docs/operators.md before running several)"
        ),
        None => {}
    }
    Ok(())
}

/// Writes the credentials a first start created (the operator's, the dispute desk's) into the data directory.
fn write_first_start_secrets(booted: &bazaar_server::Booted, data_dir: &Path) -> Result<()> {
    for (credential, file, what) in [
        (
            &booted.operator_credential,
            OPERATOR_CREDENTIAL_FILE,
            "registry created; operator credential written (mode 0600)",
        ),
        (&booted.desk_credential, DESK_CREDENTIAL_FILE, "dispute desk created; its credential written (mode 0600)"),
    ] {
        if let Some(credential) = credential {
            bazaar_stage::data_dir::create(data_dir)?;
            let path = data_dir.join(file);
            write_secret(&path, credential)?;
            tracing::info!(path = %path.display(), "{what}");
        }
    }
    Ok(())
}

/// Waits for SIGINT or SIGTERM. `terminate` is registered by the caller before
/// it announces itself, so a SIGTERM sent right after "listening" is caught.
pub(crate) async fn shutdown_signal(mut terminate: tokio::signal::unix::Signal) {
    let interrupt = tokio::signal::ctrl_c();
    tokio::select! {
        _ = interrupt => {}
        _ = terminate.recv() => {}
    }
}

/// How often `bazaar audit` reports progress on stderr.
const AUDIT_PROGRESS_EVERY_MS: u64 = 1_000;

pub async fn audit(args: StoreArgs, json_output: bool) -> Result<i32> {
    let store = open_store(&args, registry_config(), Arc::new(SystemClock)).await?;
    let last_report = std::sync::Mutex::new(std::time::Instant::now());
    let progress = |p: bazaar_store::audit::Progress| {
        let mut last = last_report.lock().expect("progress mutex");
        if !json_output && last.elapsed() >= std::time::Duration::from_millis(AUDIT_PROGRESS_EVERY_MS) {
            eprintln!("audit: {} {} read", p.rows, p.stage);
            *last = std::time::Instant::now();
        }
    };
    let report = bazaar_store::audit::audit(store.as_ref(), &progress).await?;
    if json_output {
        println!("{}", serde_json::to_string(&report)?);
    } else {
        println!(
            "events verified: {} (head {} {})\ntransfers: {}\naccounts: {}\nholds: {}\nΣ balances: {}",
            report.events_verified,
            report.head_seq,
            &report.head_hash[..16],
            report.transfers,
            report.accounts,
            report.holds,
            report.balance_sum_minor
        );
        for problem in &report.problems {
            println!("PROBLEM: {problem}");
        }
        println!("{}", if report.ok { "audit passed" } else { "AUDIT FAILED" });
    }
    Ok(if report.ok { 0 } else { 1 })
}

/// Writes a new secret key to `path`, readable by its owner only (0600), refusing a file already there: a
/// key drawn anew must never replace one (the identity it signs for would be lost with it).
pub fn write_new_secret(path: &Path, secret: &str) -> Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let mut file = match std::fs::OpenOptions::new().write(true).create_new(true).mode(0o600).open(path) {
        Ok(file) => file,
        Err(error) if error.kind() == std::io::ErrorKind::AlreadyExists => anyhow::bail!(
            "{} already exists: a new key would replace the one there. Choose another path, or move that file \
             away first if you are sure it holds nothing you need.",
            path.display()
        ),
        Err(error) => return Err(error).with_context(|| format!("writing {}", path.display())),
    };
    file.write_all(secret.as_bytes())?;
    Ok(())
}

/// Writes a secret readable by its owner only (0600).
pub fn write_secret(path: &Path, secret: &str) -> Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(path)
        .with_context(|| format!("writing {}", path.display()))?;
    file.write_all(secret.as_bytes())?;
    Ok(())
}

pub fn read_key(path: &Path) -> Result<ed25519_dalek::SigningKey> {
    let text = std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    let bytes = hex::decode(text.trim()).unwrap_or_default();
    let seed: [u8; 32] =
        bytes.try_into().map_err(|_| anyhow::anyhow!("{} does not hold a 32-byte hex secret key", path.display()))?;
    Ok(ed25519_dalek::SigningKey::from_bytes(&seed))
}

//! Several `bazaar serve` nodes as one registry. They already share one
//! PostgreSQL (the ledger, the conversation plane and the relay, each
//! serialised by its own locks there); this crate adds what a lone node
//! keeps in memory, implementing `bazaar_server::cluster::Cluster`:
//!
//! - **Signals** over one NATS JetStream stream (`STREAM`): each node
//!   publishes, in commit order through one queue, what it committed that
//!   another node's live streams wait on, and reads every other node's
//!   signals through an ordered consumer (in stream order; it re-creates
//!   itself after a gap or a reconnect from the last sequence it saw). A
//!   signal is only a wake: the store holds the items and their cursors.
//! - **In-flight keys** need no bus of their own: every ledger command
//!   reaches the sequencer, which answers a duplicate of a key it is applying
//!   now with `StoreError::InFlight` (409 `idempotency_in_flight`), from
//!   whichever node either came. (Until issue 32 each request published a
//!   claim to a JetStream stream and purged it after: four JetStream calls per
//!   paid call, the largest part of NATS's CPU.)
//! - **Leases** in PostgreSQL (`bazaar_leases`, times by the database's
//!   clock, never a node's): the sweeper and the relay's purger run on the
//!   node holding their lease, taken over after the TTL when it stops renewing.
//! - **The ledger's sequencer** (`sequencer`, docs/design/sequencer.md): the
//!   node holding the fenced `ledger_sequencer` lease runs the only writer
//!   that may commit; every other node forwards its commands there over NATS
//!   core request/reply (`bazaar.ledger.<cluster id>`), so one group commit
//!   folds the whole cluster's traffic.
//!
//! ## Map
//!
//! (What this crate holds, file by file; `ARCHITECTURE.md` keeps the one-line summary.)
//!
//! `bazaar_server::cluster::Cluster` on NATS JetStream
//! and PostgreSQL (`connect` before any store opens, then `Connected::join`):
//! signals in the `BAZAAR_SIGNALS` stream (subject per registry, one
//! publisher queue per node so its signals keep commit order, an ordered
//! consumer per node), `leases` — a `bazaar_leases`
//! row per named job, renewed by the database's clock — and `sequencer`:
//! `Sequenced`, the `Store` a cluster node serves from (reads to PostgreSQL,
//! `submit` to the local writer while leading, else forwarded; resent only
//! when provably not run, or under an idempotency key), the lease loop
//! (renew every 1 s, step down on a renewal slower than 1.5 s, serve the
//! forwarding subject exactly while leading), the forwarding task (the
//! commands waiting go as one NATS request, at most 2 requests in flight per
//! node, so under load one message carries many) and the serving task (each
//! request's commands applied at once, so they share a group commit).

mod leases;
pub mod sequencer;

use async_nats::jetstream::{self, stream};
use bazaar_server::cluster::{Cluster, Signal};
use bazaar_server::AppState;
use futures::StreamExt;
use serde::{Deserialize, Serialize};
use std::sync::{Arc, Weak};
use std::time::Duration;
use tokio::sync::mpsc;

/// The JetStream stream the nodes' signals travel in.
pub const STREAM: &str = "BAZAAR_SIGNALS";
/// The subjects signals are published on: `bazaar.signals.<registry tag>`,
/// so registries sharing one NATS server never hear each other.
pub const SUBJECTS: &str = "bazaar.signals.>";
/// How long the stream keeps a signal: enough for a consumer to catch up after a reconnect.
pub const STREAM_MAX_AGE: Duration = Duration::from_secs(3_600);
/// The stream's size bound; the oldest signals go first.
pub const STREAM_BYTES_MAX: i64 = 256 * 1024 * 1024;
/// Signals queued for publishing; past it a signal is dropped (and counted) and the reconciler covers it.
pub const SIGNAL_QUEUE_MAX: usize = 16_384;
/// How long to wait before re-subscribing after the consumer failed.
const RESUBSCRIBE_AFTER: Duration = Duration::from_millis(500);

#[derive(Debug, thiserror::Error)]
pub enum JoinError {
    #[error("connecting to NATS at {url}: {detail} (is `nats-server -js` running?)")]
    Nats { url: String, detail: String },
    #[error("setting up JetStream ({what}): {detail} (was nats-server started with -js?)")]
    JetStream { what: &'static str, detail: String },
    #[error("the lease table in PostgreSQL: {0}")]
    Leases(String),
    #[error("opening the ledger on PostgreSQL: {0}")]
    Store(bazaar_store::StoreError),
}

/// Where the cluster's parts are and who this node is.
pub struct Config {
    pub nats_url: String,
    pub database_url: String,
    pub node: String,
}

/// A signal as it travels: who sent it, so a node skips its own.
#[derive(Serialize, Deserialize)]
struct Envelope {
    node: String,
    signal: Signal,
}

pub struct NatsCluster {
    node: String,
    queue: mpsc::Sender<Signal>,
    leases: leases::Leases,
    state: Weak<AppState>,
}

/// The cluster's parts, reached and set up before the node opens its stores
/// (so a cluster that cannot be reached fails the start at once, with nothing open).
pub struct Connected {
    js: jetstream::Context,
    stream: stream::Stream,
    leases: leases::Leases,
    node: String,
}

/// Connects to NATS, sets up the signal stream, and the lease table in PostgreSQL.
pub async fn connect(config: &Config) -> Result<Connected, JoinError> {
    let nats = |e: &dyn std::fmt::Display| JoinError::Nats { url: config.nats_url.clone(), detail: e.to_string() };
    let client = async_nats::ConnectOptions::new()
        .name(format!("bazaar {}", config.node))
        .connect(&config.nats_url)
        .await
        .map_err(|e| nats(&e))?;
    let js = jetstream::new(client);
    let stream = ensure_stream(
        &js,
        "the signal stream",
        stream::Config {
            name: STREAM.into(),
            subjects: vec![SUBJECTS.into()],
            max_age: STREAM_MAX_AGE,
            max_bytes: STREAM_BYTES_MAX,
            discard: stream::DiscardPolicy::Old,
            storage: stream::StorageType::File,
            ..Default::default()
        },
    )
    .await?;
    let leases = leases::Leases::open(&config.database_url, &config.node).await.map_err(JoinError::Leases)?;
    Ok(Connected { js, stream, leases, node: config.node.clone() })
}

impl Connected {
    /// Opens the ledger as this node of the cluster: its writer fenced by
    /// the sequencer lease, its commands forwarded to whichever node holds it
    /// (docs/design/sequencer.md). Returns once this node knows whether it leads.
    pub async fn sequence(
        &self,
        database_url: &str,
        config: bazaar_core::apply::Config,
        clock: Arc<dyn bazaar_types::Clock>,
    ) -> Result<Arc<sequencer::Sequenced>, JoinError> {
        let (store, lease) =
            bazaar_store_postgres::PostgresStore::connect_sequenced(database_url, config, clock, &self.node)
                .await
                .map_err(JoinError::Store)?;
        Ok(sequencer::Sequenced::start(store, lease, self.js.client()).await)
    }

    /// Joins `state` to the cluster: starts the subscriber and the publisher
    /// and attaches itself (`AppState::attach_cluster`).
    pub async fn join(self, state: &Arc<AppState>) -> Result<Arc<NatsCluster>, JoinError> {
        let Connected { js, stream, leases, node } = self;
        let tag = registry_tag(state.registry.as_str());
        let subject = format!("bazaar.signals.{tag}");
        let (queue, signals) = mpsc::channel(SIGNAL_QUEUE_MAX);
        let cluster = Arc::new(NatsCluster { node: node.clone(), queue, leases, state: Arc::downgrade(state) });
        // Subscribe before announcing: signals published from now on are read.
        let consumer = subscribe(&stream, &subject).await?;
        tokio::spawn(publish_forever(js, subject.clone(), node.clone(), signals, Arc::downgrade(state)));
        tokio::spawn(receive_forever(stream, subject, consumer, node, Arc::downgrade(state)));
        state.attach_cluster(cluster.clone());
        Ok(cluster)
    }
}

/// Creates the stream, or brings an existing one to this build's settings
/// (a node of a newer build changes them for all: limits are constants).
async fn ensure_stream(
    js: &jetstream::Context,
    what: &'static str,
    config: stream::Config,
) -> Result<stream::Stream, JoinError> {
    let failed = |e: &dyn std::fmt::Display| JoinError::JetStream { what, detail: e.to_string() };
    let name = config.name.clone();
    js.create_or_update_stream(config).await.map_err(|e| failed(&e))?;
    js.get_stream(name).await.map_err(|e| failed(&e))
}

type Consumer = jetstream::consumer::Consumer<jetstream::consumer::pull::OrderedConfig>;

async fn subscribe(stream: &stream::Stream, subject: &str) -> Result<Consumer, JoinError> {
    stream
        .create_consumer(jetstream::consumer::pull::OrderedConfig {
            deliver_policy: jetstream::consumer::DeliverPolicy::New,
            filter_subject: subject.to_string(),
            ..Default::default()
        })
        .await
        .map_err(|e| JoinError::JetStream { what: "the ordered consumer", detail: e.to_string() })
}

/// Publishes queued signals one at a time, each acknowledged before the
/// next, so the stream holds them in this node's commit order.
async fn publish_forever(
    js: jetstream::Context,
    subject: String,
    node: String,
    mut signals: mpsc::Receiver<Signal>,
    state: Weak<AppState>,
) {
    while let Some(signal) = signals.recv().await {
        let Some(state) = state.upgrade() else { return };
        let body = serde_json::to_vec(&Envelope { node: node.clone(), signal }).expect("signals serialize");
        let sent = match js.publish(subject.clone(), body.into()).await {
            Ok(ack) => ack.await.map(|_| ()).map_err(|e| e.to_string()),
            Err(e) => Err(e.to_string()),
        };
        match sent {
            Ok(()) => state.metrics.add("bazaar_cluster_signals_sent_total", String::new(), 1.0),
            Err(detail) => {
                tracing::warn!(%detail, "a signal to the other nodes was not published; their reconcilers cover it");
                state.metrics.add("bazaar_cluster_signals_dropped_total", String::new(), 1.0);
            }
        }
    }
}

/// Applies every other node's signals here, in stream order, until the process ends.
async fn receive_forever(
    stream: stream::Stream,
    subject: String,
    first: Consumer,
    node: String,
    state: Weak<AppState>,
) {
    let mut consumer = Some(first);
    loop {
        let current = match consumer.take() {
            Some(current) => current,
            None => match subscribe(&stream, &subject).await {
                Ok(current) => current,
                Err(error) => {
                    tracing::warn!(%error, "re-subscribing to the other nodes' signals");
                    tokio::time::sleep(RESUBSCRIBE_AFTER).await;
                    continue;
                }
            },
        };
        let mut messages = match current.messages().await {
            Ok(messages) => messages,
            Err(error) => {
                tracing::warn!(%error, "reading the other nodes' signals");
                tokio::time::sleep(RESUBSCRIBE_AFTER).await;
                continue;
            }
        };
        while let Some(message) = messages.next().await {
            let Some(state) = state.upgrade() else { return };
            let message = match message {
                Ok(message) => message,
                Err(error) => {
                    tracing::warn!(%error, "the signal consumer failed; subscribing again");
                    break;
                }
            };
            match serde_json::from_slice::<Envelope>(&message.payload) {
                Ok(envelope) if envelope.node == node => {}
                Ok(envelope) => {
                    state.metrics.add("bazaar_cluster_signals_received_total", String::new(), 1.0);
                    bazaar_server::fanout::receive(&state, envelope.signal);
                }
                Err(error) => tracing::warn!(%error, "an unreadable signal on the stream was skipped"),
            }
        }
        if state.strong_count() == 0 {
            return;
        }
        tokio::time::sleep(RESUBSCRIBE_AFTER).await;
    }
}

#[async_trait::async_trait]
impl Cluster for NatsCluster {
    fn node(&self) -> &str {
        &self.node
    }

    fn publish(&self, signal: Signal) {
        if self.queue.try_send(signal).is_err() {
            if let Some(state) = self.state.upgrade() {
                state.metrics.add("bazaar_cluster_signals_dropped_total", String::new(), 1.0);
            }
        }
    }

    async fn holds(&self, name: &str, ttl: Duration) -> bool {
        self.leases.hold(name, ttl).await
    }
}

/// The first 16 hex characters of the SHA-256 of the registry's DID.
fn registry_tag(registry: &str) -> String {
    bazaar_core::crypto::sha256_hex(registry.as_bytes())[..16].to_string()
}

/// This node's default name: the host's name and the process id.
pub fn default_node_name() -> String {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap_or_else(|_| "node".into());
    format!("{}-{}", host.trim(), std::process::id())
}

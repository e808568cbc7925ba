//! The seam several nodes plug into. A lone node has no [`Cluster`]; the
//! binary attaches `bazaar-cluster`'s (NATS JetStream for signals, PostgreSQL
//! for leases; its ledger sequencer answers keys in flight on any node) when
//! `--nats-url` is given.
//!
//! Every live stream is a cursor into a store the nodes share plus a wake:
//! the store (PostgreSQL) orders and keeps what a stream delivers, so a
//! client resumes by its cursor on any node; a [`Signal`] only wakes the
//! streams another node holds, after the commit that made it true. A lost
//! signal delays a wake by at most `fanout::CLUSTER_RECONCILE_MS` (each node compares
//! the shared heads with what it has seen) and never loses or repeats an item.
//!
//! - the conversation plane's inbox streams (SSE, WebSocket, webhooks' wake):
//!   [`Signal::Message`] and [`Signal::Memberships`], published by the `Plane`;
//! - the relay's live subscriptions: [`Signal::Relay`], forwarded from the
//!   relay's local feed by `fanout::forward_relay`;
//! - the ledger's event stream (`GET /v1/stream`): each node's tailer follows
//!   the shared ledger's head by `seq` itself, so it needs no signal.
//!
//! Work that must run once across nodes (the sweeper, the relay's purger)
//! runs only on the node holding its lease ([`Cluster::holds`]).

use bazaar_conversation::ChannelId;
use bazaar_types::MemberId;
use serde::{Deserialize, Serialize};

/// The lease the sweeper runs under, and how long it lasts unrenewed (the
/// sweeper renews it each `SWEEP_INTERVAL_MS`).
pub const SWEEPER_LEASE: &str = "sweeper";
pub const SWEEPER_LEASE_TTL_MS: u64 = 5_000;
/// The lease the relay's purger runs under (it lasts two purge periods and a half).
pub const RELAY_PURGER_LEASE: &str = "relay-purger";

/// What a node tells the others after a commit of its own.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Signal {
    /// A conversation message committed at `position` in `channel`.
    Message { channel: ChannelId, position: u64 },
    /// Messages committed together (a notifier batch: one notice per paid call), each as (channel, position),
    /// in order: one signal for the batch instead of one per message. A node of an earlier release skips it
    /// (it cannot read the kind) and its reconciler wakes its streams instead.
    Messages { messages: Vec<(ChannelId, u64)> },
    /// These members' memberships changed (joined, left, added, a DM opened).
    Memberships { members: Vec<MemberId> },
    /// A relay event stored (or ephemeral), as its NIP-01 JSON.
    Relay { event: String },
}

/// A cluster as the server sees it.
#[async_trait::async_trait]
pub trait Cluster: Send + Sync {
    /// This node's name.
    fn node(&self) -> &str;
    /// Queues `signal` for the other nodes, in order; never waits.
    fn publish(&self, signal: Signal);
    /// Whether this node holds the lease `name`, taking it if it is free or
    /// expired and renewing it for `ttl` if so. A holder renews well inside
    /// `ttl`; another node takes the lease only after `ttl` without renewal.
    async fn holds(&self, name: &str, ttl: std::time::Duration) -> bool;
}

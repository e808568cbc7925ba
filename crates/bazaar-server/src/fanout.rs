//! A node's part in a cluster's live streams: applying the other nodes'
//! signals here ([`receive`]), forwarding what the relay stores here
//! ([`forward_relay`]), reconciling after a lost signal ([`spawn_reconciler`]),
//! and deciding whether leased work runs here ([`runs_here`]). The seam
//! itself is `cluster`.

use crate::cluster::Signal;
use crate::state::AppState;
use std::sync::Arc;
use std::time::Duration;

/// How often a node compares the shared conversation log's head with what signals told it.
pub const CLUSTER_RECONCILE_MS: u64 = 1_000;

/// Applies another node's signal to this node's live streams.
pub fn receive(state: &AppState, signal: Signal) {
    match signal {
        Signal::Message { channel, position } => {
            if let Ok(plane) = state.plane() {
                plane.advanced_in(&channel, position);
            }
        }
        Signal::Messages { messages } => {
            if let Ok(plane) = state.plane() {
                for (channel, position) in messages {
                    plane.advanced_in(&channel, position);
                }
            }
        }
        Signal::Memberships { members } => {
            if let Ok(plane) = state.plane() {
                plane.memberships_changed_elsewhere(&members);
            }
        }
        Signal::Relay { event } => {
            if let Ok(relay) = state.relay() {
                if let Err(error) = relay.deliver_from_peer(&event) {
                    tracing::warn!(%error, "a relay event from another node was refused");
                }
            }
        }
    }
}

/// Whether this node should run the work under lease `name` now: always on a
/// lone node; on a cluster, only while it holds the lease.
pub async fn runs_here(state: &AppState, name: &str, ttl: Duration) -> bool {
    match state.cluster() {
        Some(cluster) => {
            let held = cluster.holds(name, ttl).await;
            state.metrics.set("bazaar_cluster_lease_held", format!("lease=\"{name}\""), if held { 1.0 } else { 0.0 });
            held
        }
        None => true,
    }
}

/// Forwards every event the relay stores on this node to the others.
pub fn forward_relay(state: Arc<AppState>) {
    let (Ok(relay), Some(cluster)) = (state.relay(), state.cluster().cloned()) else { return };
    let mut local = relay.local_live();
    tokio::spawn(async move {
        loop {
            match local.recv().await {
                Ok(live) => cluster.publish(Signal::Relay { event: live.json.clone() }),
                Err(tokio::sync::broadcast::error::RecvError::Lagged(missed)) => {
                    // Those events are stored; other nodes' live subscribers miss them (a REQ reads them).
                    tracing::warn!(
                        missed,
                        "the relay forwarder fell behind; other nodes' live feeds miss those events"
                    );
                    state.metrics.add("bazaar_cluster_relay_missed_total", String::new(), missed as f64);
                }
                Err(tokio::sync::broadcast::error::RecvError::Closed) => return,
            }
        }
    });
}

/// Every `CLUSTER_RECONCILE_MS`, wakes this node's inbox streams if the shared
/// conversation log moved past what signals told it (a signal lost while the
/// bus was down), so a stream is late by at most that, never stuck.
pub fn spawn_reconciler(state: Arc<AppState>) {
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(Duration::from_millis(CLUSTER_RECONCILE_MS));
        loop {
            tick.tick().await;
            let Ok(plane) = state.plane() else { return };
            match plane.call(|store| store.log_head()).await {
                Ok(last) if last > plane.head() => {
                    state.metrics.add("bazaar_cluster_reconciled_total", String::new(), 1.0);
                    plane.resync(last);
                }
                Ok(_) => {}
                Err(error) => tracing::warn!(detail = %error.detail, "reconciling the conversation log failed"),
            }
        }
    });
}

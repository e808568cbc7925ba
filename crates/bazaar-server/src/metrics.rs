//! Prometheus text-format counters. Small and lock-light: one mutex around a
//! map of counters, touched once per request.

use std::collections::BTreeMap;
use std::fmt::Write;
use std::sync::Mutex;

#[derive(Default)]
pub struct Metrics {
    counters: Mutex<BTreeMap<(&'static str, String), f64>>,
}

pub const HELP: &[(&str, &str)] = &[
    ("bazaar_http_requests_total", "HTTP requests by route and status."),
    ("bazaar_http_request_seconds_sum", "Total seconds spent answering requests, by route."),
    (
        "bazaar_http_connections_refused_total",
        "Connections closed at accept: their remote address held HTTP_CONNECTIONS_PER_IP_MAX already.",
    ),
    ("bazaar_http_rate_limited_total", "Requests answered 429 rate_limited, by what was limited (credential or ip)."),
    ("bazaar_refusals_total", "Commands refused, by stable code."),
    ("bazaar_settlements_total", "Settlements committed."),
    ("bazaar_idempotent_replays_total", "Requests answered from an idempotency record."),
    ("bazaar_holds_expired_total", "Holds released by the expiry sweeper."),
    ("bazaar_idempotency_pruned_total", "Idempotency records deleted after the retention period."),
    ("bazaar_sweeps_total", "Sweeper passes this node ran (on a cluster, only while it held the sweeper lease)."),
    ("bazaar_cluster_signals_sent_total", "Signals this node published to the other nodes."),
    ("bazaar_cluster_signals_received_total", "Signals from other nodes applied here."),
    (
        "bazaar_cluster_signals_dropped_total",
        "Signals not published (bus down or queue full); the reconciler covers them.",
    ),
    ("bazaar_cluster_reconciled_total", "Times the reconciler woke streams a lost signal left asleep."),
    (
        "bazaar_cluster_relay_missed_total",
        "Relay events not forwarded to other nodes' live feeds (stored all the same).",
    ),
    (
        "bazaar_reputation_events_folded_total",
        "Ledger events this node folded into reputation (after the snapshot it took up, if any).",
    ),
];

/// Gauges: a value set, not summed.
pub const GAUGE_HELP: &[(&str, &str)] = &[
    ("bazaar_cluster_lease_held", "1 while this node holds the named lease (the work under it runs here), else 0."),
    (
        "bazaar_notifier_behind_events",
        "Ledger events the conversation notifier has still to read (after its last pass; 0: caught up).",
    ),
    (
        "bazaar_reputation_snapshot_seq",
        "The ledger seq of the reputation snapshot this node last took up or wrote (0: none yet).",
    ),
];

impl Metrics {
    pub fn add(&self, name: &'static str, labels: String, value: f64) {
        *self.counters.lock().expect("metrics mutex").entry((name, labels)).or_default() += value;
    }

    /// Sets a gauge listed in [`GAUGE_HELP`].
    pub fn set(&self, name: &'static str, labels: String, value: f64) {
        self.counters.lock().expect("metrics mutex").insert((name, labels), value);
    }

    pub fn render(&self) -> String {
        let counters = self.counters.lock().expect("metrics mutex");
        let mut out = String::new();
        let kinds = HELP.iter().map(|h| (h, "counter")).chain(GAUGE_HELP.iter().map(|h| (h, "gauge")));
        for ((name, help), kind) in kinds {
            let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} {kind}");
            for ((metric, labels), value) in counters.iter().filter(|((m, _), _)| m == name) {
                let labels = if labels.is_empty() { String::new() } else { format!("{{{labels}}}") };
                let _ = writeln!(out, "{metric}{labels} {value}");
            }
        }
        out
    }
}

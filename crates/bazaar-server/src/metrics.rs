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
    ("bazaar_refusals_total", "Commands refused, by stable code."),
    ("bazaar_settlements_total", "Settlements committed."),
    ("bazaar_idempotent_replays_total", "Requests answered from an idempotency record."),
    ("bazaar_holds_expired_total", "Holds released by the expiry sweeper."),
    ("bazaar_idempotency_pruned_total", "Idempotency records deleted after the retention period."),
];

impl Metrics {
    pub fn add(&self, name: &'static str, labels: String, value: f64) {
        *self.counters.lock().expect("metrics mutex").entry((name, labels)).or_default() += value;
    }

    pub fn render(&self) -> String {
        let counters = self.counters.lock().expect("metrics mutex");
        let mut out = String::new();
        for (name, help) in HELP {
            let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} counter");
            for ((metric, labels), value) in counters.iter().filter(|((m, _), _)| m == name) {
                let labels = if labels.is_empty() { String::new() } else { format!("{{{labels}}}") };
                let _ = writeln!(out, "{metric}{labels} {value}");
            }
        }
        out
    }
}

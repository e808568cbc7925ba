//! The report: one row per target, the ratios against the baseline and the
//! goals, as Markdown for people and JSON for tools.

use crate::drive::Latency;
use crate::gate::Gate;
use serde::Serialize;
use std::collections::BTreeMap;
use std::fmt::Write;

/// Target names, as flags and reports spell them.
pub const EMBEDDED: &str = "embedded";
pub const POSTGRES: &str = "postgres";
pub const CLUSTER: &str = "cluster";
pub const BASELINE: &str = "baseline";

/// Goals the run is reported against.
pub const EMBEDDED_SPEEDUP_GOAL: f64 = 5.0;
pub const EMBEDDED_P99_GOAL_MS: f64 = 20.0;
pub const POSTGRES_SPEEDUP_GOAL: f64 = 1.5;
/// A cluster carries at least what one node on the same database carries (docs/design/sequencer.md)…
pub const CLUSTER_OVER_ONE_NODE_GOAL: f64 = 1.0;
/// …at no more than this much CPU per call in all (nodes + PostgreSQL + NATS against node + PostgreSQL).
pub const CLUSTER_CPU_RATIO_GOAL: f64 = 1.2;

#[derive(Serialize, Debug, Default, Clone)]
pub struct TargetReport {
    pub target: String,
    pub description: String,
    /// `ok`, or why the target could not be measured.
    pub status: String,
    pub calls: u64,
    pub failed_calls: u64,
    pub elapsed_s: f64,
    pub settlements_per_s: f64,
    pub paid_call: Latency,
    pub settle: Latency,
    /// CPU-seconds per 1,000 settlements (all nodes together when there are several).
    pub server_cpu_s_per_1k: Option<f64>,
    /// Each node's share of it, when the target is several nodes (`--nodes`).
    pub nodes_cpu_s_per_1k: Vec<f64>,
    /// The NATS server's CPU (every `nats-server` process on this host), when the target is several nodes:
    /// part of what a cluster costs per call.
    pub nats_cpu_s_per_1k: Option<f64>,
    /// The server process's CPU split by thread name (the group-commit writer is `bazaar-writer`).
    pub server_threads_cpu_s_per_1k: BTreeMap<String, f64>,
    /// PostgreSQL backends connected to this target's database.
    pub pg_backend_cpu_s_per_1k: Option<f64>,
    /// The cluster's shared processes (WAL writer, checkpointer, …): every database's.
    pub pg_shared_cpu_s_per_1k: Option<f64>,
    /// The load generator (this process).
    pub client_cpu_s_per_1k: Option<f64>,
    /// All CPUs of the machine, busy share during the run.
    pub machine_busy_pct: Option<f64>,
    /// Mean server-side milliseconds per request, from `/metrics`.
    pub server_ms_per_request: BTreeMap<String, f64>,
    /// Mean commands per group-commit transaction (Bazaar targets only).
    pub writer_commands_per_batch: Option<f64>,
    pub pg_commits_per_settlement: Option<f64>,
    /// Cluster-wide WAL fsyncs per 1,000 settlements.
    pub wal_syncs_per_1k: Option<f64>,
    pub retries: u64,
    pub settles_replayed: u64,
    /// Duplicate storm: settles sent twice at once.
    pub duplicates_sent: u64,
    /// Open loop: arrivals not started because `OPEN_LOOP_IN_FLIGHT_MAX` calls were running.
    pub open_loop_refused: u64,
    pub errors: BTreeMap<String, u64>,
    pub gate: Gate,
}

impl TargetReport {
    /// CPU-seconds per 1,000 settlements of everything serving the target: its node(s), PostgreSQL's
    /// backends and shared processes, and NATS. `None` without the server's figure.
    pub fn total_cpu_s_per_1k(&self) -> Option<f64> {
        Some(
            self.server_cpu_s_per_1k?
                + self.pg_backend_cpu_s_per_1k.unwrap_or(0.0)
                + self.pg_shared_cpu_s_per_1k.unwrap_or(0.0)
                + self.nats_cpu_s_per_1k.unwrap_or(0.0),
        )
    }

    pub fn failed(target: &str, description: &str, error: &anyhow::Error) -> TargetReport {
        TargetReport {
            target: target.into(),
            description: description.into(),
            status: format!("failed: {error:#}"),
            ..Default::default()
        }
    }

    fn measured(&self) -> bool {
        self.status == "ok" && self.calls > 0
    }
}

#[derive(Serialize, Debug, Clone)]
pub struct Goal {
    pub goal: String,
    pub measured: Option<f64>,
    pub met: Option<bool>,
}

#[derive(Serialize, Debug, Default)]
pub struct Ratios {
    pub embedded_over_baseline: Option<f64>,
    pub postgres_over_baseline: Option<f64>,
    /// The cluster's settlements/s over one PostgreSQL node's.
    pub cluster_over_postgres: Option<f64>,
    /// The cluster's CPU per call in all over one PostgreSQL node's.
    pub cluster_cpu_over_postgres: Option<f64>,
}

#[derive(Serialize, Debug)]
pub struct Report {
    pub command: String,
    pub settings: serde_json::Value,
    pub targets: Vec<TargetReport>,
    pub ratios: Ratios,
    pub goals: Vec<Goal>,
    pub gates_passed: bool,
}

impl Report {
    pub fn new(command: String, settings: serde_json::Value, targets: Vec<TargetReport>) -> Report {
        let rate = |name: &str| targets.iter().find(|t| t.target == name && t.measured()).map(|t| t.settlements_per_s);
        let ratio = |name: &str| Some(rate(name)? / rate(BASELINE).filter(|r| *r > 0.0)?);
        let cpu = |name: &str| {
            targets.iter().find(|t| t.target == name && t.measured()).and_then(TargetReport::total_cpu_s_per_1k)
        };
        let over = |a: Option<f64>, b: Option<f64>| Some(a? / b.filter(|b| *b > 0.0)?);
        let ratios = Ratios {
            embedded_over_baseline: ratio(EMBEDDED),
            postgres_over_baseline: ratio(POSTGRES),
            cluster_over_postgres: over(rate(CLUSTER), rate(POSTGRES)),
            cluster_cpu_over_postgres: over(cpu(CLUSTER), cpu(POSTGRES)),
        };
        let embedded = targets.iter().find(|t| t.target == EMBEDDED && t.measured());
        let under = |v: Option<f64>| v.map(|ms| ms < EMBEDDED_P99_GOAL_MS);
        let goals = vec![
            Goal {
                goal: format!("embedded ≥ {EMBEDDED_SPEEDUP_GOAL}× baseline settlements/s"),
                measured: ratios.embedded_over_baseline,
                met: ratios.embedded_over_baseline.map(|r| r >= EMBEDDED_SPEEDUP_GOAL),
            },
            Goal {
                goal: format!("embedded settle p99 < {EMBEDDED_P99_GOAL_MS} ms"),
                measured: embedded.and_then(|t| t.settle.p99_ms),
                met: under(embedded.and_then(|t| t.settle.p99_ms)),
            },
            Goal {
                goal: format!("embedded paid-call p99 < {EMBEDDED_P99_GOAL_MS} ms (stricter: all 3 requests)"),
                measured: embedded.and_then(|t| t.paid_call.p99_ms),
                met: under(embedded.and_then(|t| t.paid_call.p99_ms)),
            },
            Goal {
                goal: format!("PostgreSQL adapter ≥ {POSTGRES_SPEEDUP_GOAL}× baseline settlements/s"),
                measured: ratios.postgres_over_baseline,
                met: ratios.postgres_over_baseline.map(|r| r >= POSTGRES_SPEEDUP_GOAL),
            },
        ];
        let mut goals = goals;
        if ratios.cluster_over_postgres.is_some() {
            goals.push(Goal {
                goal: format!("cluster ≥ {CLUSTER_OVER_ONE_NODE_GOAL}× one PostgreSQL node's settlements/s"),
                measured: ratios.cluster_over_postgres,
                met: ratios.cluster_over_postgres.map(|r| r >= CLUSTER_OVER_ONE_NODE_GOAL),
            });
            goals.push(Goal {
                goal: format!(
                    "cluster CPU per call in all (nodes + PostgreSQL + NATS) ≤ {CLUSTER_CPU_RATIO_GOAL}× one node's"
                ),
                measured: ratios.cluster_cpu_over_postgres,
                met: ratios.cluster_cpu_over_postgres.map(|r| r <= CLUSTER_CPU_RATIO_GOAL),
            });
        }
        let gates_passed = targets.iter().all(|t| t.status == "ok" && t.gate.passed);
        Report { command, settings, targets, ratios, goals, gates_passed }
    }

    pub fn goals_met(&self) -> bool {
        self.goals.iter().all(|g| g.met == Some(true))
    }

    pub fn markdown(&self) -> String {
        let mut out = String::new();
        let _ = writeln!(out, "## Bazaar benchmark\n\n`{}`\n", self.command);
        let _ = writeln!(
            out,
            "| target | settlements/s | paid call p50 / p99 / p99.9 ms | settle p50 / p99 ms | server CPU-s/1k | PG backends CPU-s/1k | PG shared CPU-s/1k | load-gen CPU-s/1k | gate |"
        );
        let _ = writeln!(out, "|---|---:|---:|---:|---:|---:|---:|---:|---|");
        for t in &self.targets {
            if t.status != "ok" {
                let _ = writeln!(out, "| {} | — | — | — | — | — | — | — | {} |", t.target, one_line(&t.status));
                continue;
            }
            let gate = if t.gate.passed {
                format!("PASS ({} checks)", t.gate.checks.len())
            } else {
                let failed: Vec<String> =
                    t.gate.failures().iter().map(|c| format!("{}: {}", c.name, one_line(&c.detail))).collect();
                format!("FAIL — {}", failed.join("; "))
            };
            let _ = writeln!(
                out,
                "| {} | {:.0} | {} / {} / {} | {} / {} | {} | {} | {} | {} | {gate} |",
                t.target,
                t.settlements_per_s,
                ms(t.paid_call.p50_ms),
                ms(t.paid_call.p99_ms),
                ms(t.paid_call.p999_ms),
                ms(t.settle.p50_ms),
                ms(t.settle.p99_ms),
                num(t.server_cpu_s_per_1k),
                num(t.pg_backend_cpu_s_per_1k),
                num(t.pg_shared_cpu_s_per_1k),
                num(t.client_cpu_s_per_1k),
            );
        }
        self.where_time_goes(&mut out);
        let _ = writeln!(out, "\n### Ratios and goals\n");
        let _ = writeln!(out, "- embedded ÷ baseline: {}", ratio(self.ratios.embedded_over_baseline));
        let _ = writeln!(out, "- PostgreSQL adapter ÷ baseline: {}", ratio(self.ratios.postgres_over_baseline));
        if let Some(cluster) = self.ratios.cluster_over_postgres {
            let _ = writeln!(out, "- cluster ÷ one PostgreSQL node: {cluster:.2}×");
            let _ = writeln!(
                out,
                "- cluster CPU per call in all ÷ one node's: {}",
                ratio(self.ratios.cluster_cpu_over_postgres)
            );
        }
        let _ = writeln!(out);
        for g in &self.goals {
            let verdict = match g.met {
                Some(true) => "MET",
                Some(false) => "MISSED",
                None => "not measured",
            };
            let _ = writeln!(out, "- {}: **{verdict}** (measured {})", g.goal, num(g.measured));
        }
        let _ =
            writeln!(out, "\nCorrectness gates: {}", if self.gates_passed { "all passed" } else { "NOT all passed" });
        out
    }

    /// The second table: per-route server time, CPU by thread, batching, fsyncs, retries and errors.
    fn where_time_goes(&self, out: &mut String) {
        let _ = writeln!(out, "\n### Where time goes\n");
        let _ = writeln!(
            out,
            "| target | calls (failed) | server ms: token / verify / settle | server CPU-s/1k by thread | machine busy % | writer commands/batch | PG commits/settlement | WAL fsyncs/1k | retries | errors |"
        );
        let _ = writeln!(out, "|---|---:|---:|---|---:|---:|---:|---:|---:|---|");
        for t in self.targets.iter().filter(|t| t.status == "ok") {
            let route = |r: &str| ms(t.server_ms_per_request.get(r).copied());
            let errors: Vec<String> = t.errors.iter().map(|(k, v)| format!("{k} ×{v}")).collect();
            let mut threads: Vec<(&String, &f64)> =
                t.server_threads_cpu_s_per_1k.iter().filter(|(_, v)| **v >= 0.0005).collect();
            threads.sort_by(|a, b| b.1.total_cmp(a.1));
            let threads: Vec<String> = threads.iter().map(|(k, v)| format!("{k} {v:.3}")).collect();
            let _ = writeln!(
                out,
                "| {} | {} ({}) | {} / {} / {} | {} | {} | {} | {} | {} | {} | {} |",
                t.target,
                t.calls,
                t.failed_calls,
                route("/v1/tokens"),
                route("/v1/tokens/verify"),
                route("/v1/settlements"),
                if threads.is_empty() { "—".into() } else { threads.join(", ") },
                t.machine_busy_pct.map(|v| format!("{v:.0}")).unwrap_or_else(|| "—".into()),
                t.writer_commands_per_batch.map(|v| format!("{v:.1}")).unwrap_or_else(|| "—".into()),
                num(t.pg_commits_per_settlement),
                t.wal_syncs_per_1k.map(|v| format!("{v:.0}")).unwrap_or_else(|| "—".into()),
                t.retries,
                if errors.is_empty() { "none".into() } else { errors.join(", ") },
            );
        }
        for t in self.targets.iter().filter(|t| t.status == "ok" && !t.nodes_cpu_s_per_1k.is_empty()) {
            let nodes: Vec<String> = t.nodes_cpu_s_per_1k.iter().map(|v| format!("{v:.3}")).collect();
            let _ = writeln!(
                out,
                "\n{}: {} nodes, CPU-s/1k by node {}; NATS server {}; in all (nodes + PostgreSQL + NATS) {}",
                t.target,
                t.nodes_cpu_s_per_1k.len(),
                nodes.join(", "),
                num(t.nats_cpu_s_per_1k),
                num(t.total_cpu_s_per_1k()),
            );
        }
    }
}

/// A latency in milliseconds to two places, or `—` when none was measured.
pub(crate) fn ms(value: Option<f64>) -> String {
    value.map(|v| format!("{v:.2}")).unwrap_or_else(|| "—".into())
}

fn num(value: Option<f64>) -> String {
    value.map(|v| format!("{v:.3}")).unwrap_or_else(|| "—".into())
}

fn ratio(value: Option<f64>) -> String {
    value.map(|v| format!("{v:.2}×")).unwrap_or_else(|| "— (a target was not measured)".into())
}

fn one_line(text: &str) -> String {
    let line = text.replace(['\n', '|'], " ");
    if line.len() > 200 {
        format!("{}…", &line[..line.char_indices().nth(200).map(|(i, _)| i).unwrap_or(line.len())])
    } else {
        line
    }
}

/// Writes a report as pretty JSON to `path` (the `--out` of every command) and says so on stderr.
pub fn write_json(path: &std::path::Path, report: &impl Serialize) -> anyhow::Result<()> {
    use anyhow::Context;
    std::fs::write(path, serde_json::to_string_pretty(report)?)
        .with_context(|| format!("writing {}", path.display()))?;
    eprintln!("wrote {}", path.display());
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn measured(target: &str, rate: f64, p99: f64) -> TargetReport {
        TargetReport {
            target: target.into(),
            status: "ok".into(),
            calls: 100,
            settlements_per_s: rate,
            settle: Latency { p50_ms: Some(1.0), p99_ms: Some(p99), p999_ms: Some(p99) },
            paid_call: Latency { p50_ms: Some(2.0), p99_ms: Some(p99 * 2.0), p999_ms: Some(p99 * 2.0) },
            gate: Gate { passed: true, checks: vec![] },
            ..Default::default()
        }
    }

    #[test]
    fn ratios_and_goals() {
        let targets =
            vec![measured(EMBEDDED, 6000.0, 8.0), measured(POSTGRES, 1200.0, 30.0), measured(BASELINE, 1000.0, 40.0)];
        let report = Report::new("x".into(), serde_json::json!({}), targets);
        assert_eq!(report.ratios.embedded_over_baseline, Some(6.0));
        assert_eq!(report.ratios.postgres_over_baseline, Some(1.2));
        let met: Vec<Option<bool>> = report.goals.iter().map(|g| g.met).collect();
        assert_eq!(met, vec![Some(true), Some(true), Some(true), Some(false)]);
        assert!(report.gates_passed && !report.goals_met());
        let text = report.markdown();
        assert!(text.contains("| embedded | 6000 |") && text.contains("6.00×"), "{text}");
    }

    #[test]
    fn a_failed_target_has_no_ratio() {
        let failed = TargetReport::failed(POSTGRES, "", &anyhow::anyhow!("no\nserver"));
        let report = Report::new("x".into(), serde_json::json!({}), vec![measured(BASELINE, 10.0, 1.0), failed]);
        assert_eq!(report.ratios.postgres_over_baseline, None);
        assert!(!report.gates_passed);
        assert!(report.markdown().contains("| postgres | — | — | — | — | — | — | — | failed: no server |"));
    }
}

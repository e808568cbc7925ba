//! The correctness gate run after each target's load: conservation, one
//! transfer per order and per idempotency key, the store agreeing with what
//! clients were told, and settled orders replaying instead of paying twice.

use crate::limits::AUDIT_TIMEOUT_S;
use anyhow::{Context, Result};
use serde::Serialize;
use std::path::Path;
use std::time::Duration;

#[derive(Serialize, Debug, Clone)]
pub struct Check {
    pub name: String,
    pub ok: bool,
    pub detail: String,
}

#[derive(Serialize, Debug, Default, Clone)]
pub struct Gate {
    pub passed: bool,
    pub checks: Vec<Check>,
}

impl Gate {
    pub fn check(&mut self, name: &str, ok: bool, detail: impl Into<String>) {
        self.checks.push(Check { name: name.into(), ok, detail: detail.into() });
        self.passed = self.checks.iter().all(|c| c.ok);
    }

    /// A check that could not be run counts as failed.
    pub fn failed(&mut self, name: &str, error: &anyhow::Error) {
        self.check(name, false, format!("{error:#}"));
    }

    pub fn failures(&self) -> Vec<&Check> {
        self.checks.iter().filter(|c| !c.ok).collect()
    }
}

/// What clients were told during both phases, and the replay probes.
pub struct Told {
    /// Settles answered 200.
    pub acked: u64,
    /// Settles whose outcome is unknown (they may or may not have applied).
    pub unknown: u64,
    pub probes_sent: usize,
    pub probes_ok: usize,
    pub probe_problems: Vec<String>,
}

impl Told {
    fn agrees(&self, gate: &mut Gate, what: &str, stored: i64) {
        let ok = stored >= self.acked as i64 && stored <= (self.acked + self.unknown) as i64;
        gate.check(
            &format!("{what} = settles acknowledged"),
            ok,
            format!("{stored} stored; {} acknowledged, {} unknown", self.acked, self.unknown),
        );
    }

    fn probes(&self, gate: &mut Gate) {
        let detail = match self.probe_problems.first() {
            Some(problem) => format!("{}/{} replayed; first problem: {problem}", self.probes_ok, self.probes_sent),
            None => format!("{}/{} replayed with the original settlement", self.probes_ok, self.probes_sent),
        };
        gate.check("re-sent settles replay", self.probes_sent > 0 && self.probes_ok == self.probes_sent, detail);
    }
}

/// Where a Bazaar registry keeps its data.
pub enum BazaarStore<'a> {
    Sqlite { data_dir: &'a Path },
    Postgres { url: &'a str },
}

/// Counts read straight from a Bazaar store (both adapters share the schema's names).
#[derive(Debug, Default)]
struct Counts {
    settlements: i64,
    orders_settled_twice: i64,
    holds_paid_twice: i64,
    payment_transfers: i64,
    balance_sum: i64,
}

const COUNT_SQL: [&str; 5] = [
    "SELECT count(*) FROM settlements",
    "SELECT count(*) FROM (SELECT 1 FROM settlements GROUP BY merchant, order_id HAVING count(*) > 1) d",
    "SELECT count(*) FROM (SELECT 1 FROM transfers WHERE kind = 'payment' GROUP BY hold HAVING count(*) > 1) d",
    "SELECT count(*) FROM transfers WHERE kind = 'payment'",
    "SELECT CAST(COALESCE(sum(credits_posted - debits_posted), 0) AS BIGINT) FROM accounts",
];

fn counts(values: Vec<i64>) -> Counts {
    Counts {
        settlements: values[0],
        orders_settled_twice: values[1],
        holds_paid_twice: values[2],
        payment_transfers: values[3],
        balance_sum: values[4],
    }
}

async fn read_counts(store: &BazaarStore<'_>) -> Result<Counts> {
    let values = match store {
        BazaarStore::Sqlite { data_dir } => {
            let path = data_dir.join("bazaar.db");
            tokio::task::spawn_blocking(move || -> Result<Vec<i64>> {
                let flags = rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY;
                let conn = rusqlite::Connection::open_with_flags(&path, flags)
                    .with_context(|| format!("opening {}", path.display()))?;
                COUNT_SQL.iter().map(|sql| Ok(conn.query_row(sql, [], |r| r.get(0))?)).collect()
            })
            .await??
        }
        BazaarStore::Postgres { url } => {
            let client = crate::servers::connect(url).await?;
            let mut values = Vec::new();
            for sql in COUNT_SQL {
                values.push(client.query_one(sql, &[]).await.with_context(|| sql.to_string())?.get(0));
            }
            values
        }
    };
    Ok(counts(values))
}

/// Runs `bazaar audit` on the (stopped) registry's store and checks the store directly.
pub async fn bazaar(bin: &Path, store: BazaarStore<'_>, told: &Told) -> Gate {
    let mut gate = Gate::default();
    let mut command = tokio::process::Command::new(bin);
    command.arg("audit").arg("--json").kill_on_drop(true);
    match &store {
        BazaarStore::Sqlite { data_dir } => command.arg("--data-dir").arg(data_dir),
        BazaarStore::Postgres { url } => command.arg("--database-url").arg(url),
    };
    for name in ["BAZAAR_DATABASE_URL", "BAZAAR_DATA_DIR"] {
        command.env_remove(name);
    }
    match tokio::time::timeout(Duration::from_secs(AUDIT_TIMEOUT_S), command.output()).await {
        Ok(Ok(output)) => {
            let stdout = String::from_utf8_lossy(&output.stdout);
            let report: serde_json::Value = serde_json::from_str(stdout.trim()).unwrap_or_default();
            gate.check(
                "`bazaar audit` exits 0",
                output.status.code() == Some(0),
                format!(
                    "exit {:?}; {} events verified, {} transfers, problems: {}",
                    output.status.code(),
                    report["events_verified"],
                    report["transfers"],
                    report.get("problems").map(|p| p.to_string()).unwrap_or_else(|| stdout.trim().to_string())
                ),
            );
            gate.check(
                "conservation: audit Σ balances = 0",
                report["balance_sum_minor"] == serde_json::json!(0),
                format!("Σ = {}", report["balance_sum_minor"]),
            );
        }
        Ok(Err(error)) => gate.failed("`bazaar audit` exits 0", &error.into()),
        Err(_) => gate.check("`bazaar audit` exits 0", false, format!("still running after {AUDIT_TIMEOUT_S} s")),
    }
    match read_counts(&store).await {
        Ok(c) => {
            gate.check("conservation: store Σ balances = 0", c.balance_sum == 0, format!("Σ = {}", c.balance_sum));
            gate.check(
                "one settlement per (merchant, order)",
                c.orders_settled_twice == 0,
                format!("{} orders settled more than once", c.orders_settled_twice),
            );
            gate.check(
                "one payment transfer per settlement",
                c.holds_paid_twice == 0 && c.payment_transfers == c.settlements,
                format!(
                    "{} payment transfers for {} settlements; {} holds paid twice",
                    c.payment_transfers, c.settlements, c.holds_paid_twice
                ),
            );
            told.agrees(&mut gate, "settlements", c.settlements);
        }
        Err(error) => gate.failed("store counts", &error),
    }
    told.probes(&mut gate);
    gate
}

/// Checks the baseline's ledger with SQL.
pub async fn baseline(url: &str, expected_balance_sum: i64, told: &Told) -> Gate {
    let mut gate = Gate::default();
    let ledger = match crate::servers::connect(url).await {
        Ok(client) => crate::baseline::ledger(&client).await,
        Err(error) => Err(error),
    };
    match ledger {
        Ok(l) => {
            gate.check(
                "conservation: Σ balances unchanged",
                l.balance_sum == expected_balance_sum,
                format!("Σ = {} (set up with {expected_balance_sum})", l.balance_sum),
            );
            gate.check(
                "no account overdrawn",
                l.overdrawn_accounts == 0,
                format!("{} overdrawn", l.overdrawn_accounts),
            );
            gate.check(
                "≤ 1 transfer per idempotency key",
                l.keys_with_many_transfers == 0,
                format!("{} keys with more than one transfer", l.keys_with_many_transfers),
            );
            gate.check(
                "one transfer per (merchant, order)",
                l.orders_with_many_transfers == 0,
                format!("{} orders with more than one transfer", l.orders_with_many_transfers),
            );
            gate.check(
                "holds = pending tokens",
                l.held_sum == l.pending_token_sum,
                format!("held {} vs pending tokens {}", l.held_sum, l.pending_token_sum),
            );
            told.agrees(&mut gate, "transfers", l.transfers);
        }
        Err(error) => gate.failed("ledger read", &error),
    }
    told.probes(&mut gate);
    gate
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gate_fails_on_any_failed_check() {
        let mut gate = Gate::default();
        gate.check("a", true, "");
        assert!(gate.passed);
        gate.check("b", false, "");
        gate.check("c", true, "");
        assert!(!gate.passed);
        assert_eq!(gate.failures().len(), 1);
    }

    #[test]
    fn unknown_settles_widen_the_agreement() {
        let told = Told { acked: 10, unknown: 2, probes_sent: 1, probes_ok: 1, probe_problems: vec![] };
        for (stored, ok) in [(9, false), (10, true), (12, true), (13, false)] {
            let mut gate = Gate::default();
            told.agrees(&mut gate, "x", stored);
            assert_eq!(gate.passed, ok, "{stored}");
        }
    }
}

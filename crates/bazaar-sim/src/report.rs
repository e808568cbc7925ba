//! What a run reports: the counters the reliability report quotes (requests
//! per flow, faults by kind, crashes, audits, replays checked, subjects seen
//! to happen once), the trace digest that proves a replay, and the failure
//! that names the seed, the step and the command to replay it.

use crate::fault::FaultCounts;
use std::collections::BTreeMap;

/// What a run did, for the counters the reliability report quotes.
#[derive(Clone, Debug, Default)]
pub struct Report {
    pub seed: u64,
    pub steps: usize,
    /// Requests answered (first time) per flow, and how many of them the core refused.
    pub answered: BTreeMap<&'static str, (u64, u64)>,
    /// Step kinds taken.
    pub actions: BTreeMap<&'static str, u64>,
    /// Faults by kind: the engine's and the simulator's.
    pub faults: FaultCounts,
    pub crashes: u64,
    pub recoveries: u64,
    pub audits: u64,
    /// Answers compared with an earlier one under the same key (retries, duplicates, re-reads after restarts).
    pub replays_checked: u64,
    /// First answers by command and outcome (`settle ok`, `settle token_expired`, …).
    pub outcomes: BTreeMap<String, u64>,
    /// Subjects the auditor saw happen exactly once, by kind.
    pub once: BTreeMap<&'static str, u64>,
    pub head_seq: u64,
    /// SHA-256 over the whole trace and the final ledger head.
    pub digest: String,
}

impl Report {
    /// Adds another run's counters (for a soak).
    pub fn add(&mut self, other: &Report) {
        self.steps += other.steps;
        for (k, (a, r)) in &other.answered {
            let e = self.answered.entry(k).or_default();
            (e.0, e.1) = (e.0 + a, e.1 + r);
        }
        for (k, v) in &other.actions {
            *self.actions.entry(k).or_default() += v;
        }
        for (k, v) in &other.faults {
            *self.faults.entry(k).or_default() += v;
        }
        self.crashes += other.crashes;
        self.recoveries += other.recoveries;
        self.audits += other.audits;
        self.replays_checked += other.replays_checked;
        for (k, v) in &other.once {
            *self.once.entry(k).or_default() += v;
        }
        for (k, v) in &other.outcomes {
            *self.outcomes.entry(k.clone()).or_default() += v;
        }
    }

    pub fn print(&self, out: &mut impl std::io::Write) -> std::io::Result<()> {
        writeln!(out, "steps: {}", self.steps)?;
        for (flow, (answered, refused)) in &self.answered {
            writeln!(out, "  {flow}: {answered} requests answered ({refused} refused by the core)")?;
        }
        for (action, n) in &self.actions {
            writeln!(out, "  step {action}: {n}")?;
        }
        writeln!(out, "faults injected:")?;
        for (kind, n) in &self.faults {
            writeln!(out, "  {kind}: {n}")?;
        }
        writeln!(out, "crashes: {}, recoveries: {}", self.crashes, self.recoveries)?;
        for (kind, n) in &self.once {
            writeln!(out, "exactly once: {n} {kind}")?;
        }
        writeln!(out, "audits run: {}, replayed answers checked: {}", self.audits, self.replays_checked)
    }

    pub fn print_outcomes(&self, out: &mut impl std::io::Write) -> std::io::Result<()> {
        writeln!(out, "first answers by command and outcome:")?;
        for (what, n) in &self.outcomes {
            writeln!(out, "  {what}: {n}")?;
        }
        Ok(())
    }
}

/// A violation: the seed and step that found it, and how to replay it.
#[derive(Clone, Debug)]
pub struct Failure {
    pub seed: u64,
    pub step: usize,
    pub steps: usize,
    /// The fault profile's `--faults` name.
    pub faults: &'static str,
    pub message: String,
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "seed {} failed at step {}: {}\nreplay: cargo run --release -p bazaar-sim -- --seed {} --steps {} --faults {}",
            self.seed, self.step, self.message, self.seed, self.steps, self.faults
        )
    }
}

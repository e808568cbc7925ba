//! One simulated run: a registry on a SQLite file behind the real group-commit
//! writer and a fault-injecting engine, clients sending requests of every flow
//! with idempotency keys, the sweeper's due work, and faults — failed and torn
//! commits, lost replies, duplicate and reordered delivery, clock jumps,
//! crashes — all decided by one generator from the seed. The auditor runs
//! after every step; a run ends at its last step or at the first violation.

use crate::auditor::Auditor;
use crate::cast::{command, Cast};
use crate::fault::{EngineFaults, FaultCounts, FaultEngine, Plant, Shared};
use crate::flows::{contract_op, dispute_op, read_doc, Flow, Workload};
use crate::rng::{lock, Rng, SharedRng};
use bazaar_core::apply::{Applied, Config};
use bazaar_core::command::{Command, Op, Outcome};
use bazaar_core::dispute::{Dispute, DisputeAct, Windows};
use bazaar_core::escrow::{Contract, ContractAct};
use bazaar_core::model::DocKind;
use bazaar_core::pay;
use bazaar_store::writer::Writer;
use bazaar_store::{Store, StoreError};
use bazaar_store_sqlite::{SqliteEngine, SqliteStore};
use bazaar_types::limits::{IDEMPOTENCY_RETENTION_S, SWEEP_BATCH_MAX, SWEEP_DOCS_MAX};
use bazaar_types::{Amount, Clock, ManualClock, Timestamp};
use futures::executor::block_on;
use futures::future::maybe_done;
use sha2::{Digest, Sha256};
use std::collections::BTreeMap;
use std::future::Future;
use std::path::PathBuf;
use std::pin::Pin;
use std::sync::Arc;
use std::task::Context;

/// 2026-01-01T00:00:00Z.
pub const START: Timestamp = Timestamp(1_767_225_600_000);
/// The protocol fee the simulated registry charges, in basis points.
pub const FEE_BPS: u32 = 100;
/// Requests delivered together (one batch), at most, before a duplicate is added.
pub const GROUP_MAX: u64 = 4;
/// A small clock step, in seconds, at most.
pub const TICK_S_MAX: u64 = 120;
/// A clock jump, in seconds, at least and at most (minutes to hours: phase deadlines, expiries).
pub const JUMP_S: (u64, u64) = (300, 2 * 3_600);
/// A long jump past the idempotency retention, so the sweeper prunes records.
pub const LONG_JUMP_S: u64 = IDEMPOTENCY_RETENTION_S + 3_600;

/// Phase windows of minutes, so short runs see every deadline pass.
pub fn windows() -> Windows {
    Windows {
        claim_s: 12 * 3_600,
        answer_s: 900,
        evidence_s: 1_200,
        ruling_s: 1_200,
        appeal_s: 600,
        stake_cooldown_s: 1_800,
    }
}

pub fn config() -> Config {
    Config {
        fee_bps: FEE_BPS,
        escrow_threshold: Amount(bazaar_types::limits::ESCROW_THRESHOLD_MINOR),
        windows: windows(),
    }
}

/// How likely each fault is, in parts per thousand (engine faults per call, the rest per step or per answer).
#[derive(Clone, Copy, Debug)]
pub struct Faults {
    pub engine: EngineFaults,
    /// An answer committed but lost on its way back; the client retries with the same key.
    pub lost_reply: u64,
    /// One request of a delivered group sent twice.
    pub duplicate: u64,
    /// A group taken from the pending requests out of order.
    pub reorder: u64,
    /// A step that is a clock jump of minutes to hours.
    pub clock_jump: u64,
    /// A clock jump that is a long one, past the idempotency retention.
    pub long_jump: u64,
    /// A step that is a crash and restart.
    pub crash: u64,
}

impl Faults {
    pub const NONE: Faults = Faults {
        engine: EngineFaults::NONE,
        lost_reply: 0,
        duplicate: 0,
        reorder: 0,
        clock_jump: 0,
        long_jump: 0,
        crash: 0,
    };

    pub fn standard() -> Faults {
        Faults {
            engine: EngineFaults {
                begin_unavailable: 20,
                load_unavailable: 20,
                commit_fails: 30,
                crash_before_commit: 10,
            },
            lost_reply: 80,
            duplicate: 80,
            reorder: 300,
            clock_jump: 30,
            long_jump: 30,
            crash: 25,
        }
    }
}

#[derive(Clone, Debug)]
pub struct Options {
    pub seed: u64,
    pub steps: usize,
    pub faults: Faults,
    pub plant: Option<Plant>,
}

impl Options {
    pub fn new(seed: u64, steps: usize) -> Options {
        Options { seed, steps, faults: Faults::standard(), plant: None }
    }
}

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
    pub message: String,
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "seed {} failed at step {}: {}\nreplay: cargo run --release -p bazaar-sim -- --seed {} --steps {}",
            self.seed, self.step, self.message, self.seed, self.steps
        )
    }
}

/// A client's request in flight: sent, not yet answered to the client.
struct Pending {
    flow: Flow,
    command: Command,
    /// The answer that committed but was lost, and when it committed.
    first: Option<(Outcome, Timestamp)>,
}

/// An answer a client was given.
struct Acked {
    command: Command,
    outcome: Outcome,
    at: Timestamp,
}

/// The registry's process: its store (reads, the audit) and its writer (every write).
struct Process {
    store: SqliteStore,
    writer: Writer,
}

pub struct Sim {
    opts: Options,
    rng: SharedRng,
    shared: Arc<Shared>,
    clock: Arc<ManualClock>,
    path: PathBuf,
    process: Option<Process>,
    cast: Cast,
    workload: Workload,
    pending: Vec<Pending>,
    acked: Vec<Acked>,
    auditor: Auditor,
    /// Idempotency records created before this may have been pruned.
    pruned_before: Timestamp,
    trace: Sha256,
    report: Report,
    step: usize,
}

type Step = Result<(), String>;

fn summary(outcome: &Outcome) -> String {
    match outcome {
        Ok(value) => value.to_string(),
        Err(refusal) => format!("refused {}", refusal.code.as_str()),
    }
}

impl Sim {
    /// A fresh registry in `dir` (a file per seed), set up with the cast.
    pub fn new(opts: Options, dir: &std::path::Path) -> Result<Sim, Failure> {
        let rng: SharedRng = Arc::new(std::sync::Mutex::new(Rng::new(opts.seed)));
        let shared = Shared::new(rng.clone(), EngineFaults::NONE, opts.plant);
        let path = dir.join(format!("sim-{}.sqlite", opts.seed));
        for suffix in ["", "-wal", "-shm"] {
            let _ = std::fs::remove_file(format!("{}{suffix}", path.display()));
        }
        let mut sim = Sim {
            report: Report { seed: opts.seed, steps: opts.steps, ..Report::default() },
            opts,
            rng,
            shared,
            clock: Arc::new(ManualClock::new(START)),
            path,
            process: None,
            cast: Cast::new(START),
            workload: Workload::default(),
            pending: Vec::new(),
            acked: Vec::new(),
            auditor: Auditor::default(),
            pruned_before: Timestamp(i64::MIN),
            trace: Sha256::new(),
            step: 0,
        };
        sim.setup().map_err(|message| sim.failure(message))?;
        Ok(sim)
    }

    fn failure(&self, message: String) -> Failure {
        Failure { seed: self.opts.seed, step: self.step, steps: self.opts.steps, message }
    }

    fn store(&self) -> &SqliteStore {
        &self.process.as_ref().expect("the registry is running").store
    }

    fn open(&mut self) -> Step {
        let store = SqliteStore::open(&self.path, config(), self.clock.clone()).map_err(|e| format!("open: {e}"))?;
        let engine = SqliteEngine::connect(&self.path).map_err(|e| format!("connect: {e}"))?;
        let writer = Writer::spawn(FaultEngine::new(engine, self.shared.clone()), config(), self.clock.clone());
        self.process = Some(Process { store, writer });
        Ok(())
    }

    fn setup(&mut self) -> Step {
        self.open()?;
        for batch in self.cast.setup(START) {
            for applied in self.submit_group(batch)? {
                applied.map_err(|e| format!("setup: {e}"))?.outcome.map_err(|r| format!("setup refused: {r:?}"))?;
            }
        }
        // The members exactly as stored, as the edge would load them.
        let stored = |m: &bazaar_core::model::Member| {
            block_on(self.store().member(&m.id)).ok().flatten().ok_or_else(|| format!("member {} missing", m.id))
        };
        let refresh = |ms: &[bazaar_core::model::Member]| ms.iter().map(stored).collect::<Result<Vec<_>, _>>();
        let (owners, agents) = (refresh(&self.cast.owners)?, refresh(&self.cast.agents)?);
        let (registry, operator, desk) =
            (stored(&self.cast.registry)?, stored(&self.cast.operator)?, stored(&self.cast.desk)?);
        (self.cast.owners, self.cast.agents) = (owners, agents);
        (self.cast.registry, self.cast.operator, self.cast.desk) = (registry, operator, desk);
        self.ack_head().map_err(|e| format!("setup head: {e}"))?;
        self.shared.set_faults(self.opts.faults.engine);
        Ok(())
    }

    /// Queues `commands` with the writer held, then lets it go: the group is exactly one batch of the real writer.
    fn submit_group(&mut self, commands: Vec<Command>) -> Result<Vec<Result<Applied, StoreError>>, String> {
        let writer = self.process.as_ref().expect("the registry is running").writer.clone();
        self.shared.arm_gate();
        let mut gate = maybe_done(Box::pin(writer.prune_idempotency(Timestamp(i64::MIN), 0)));
        let mut answers: Vec<_> = commands.into_iter().map(|c| maybe_done(Box::pin(writer.submit(c)))).collect();
        let mut cx = Context::from_waker(futures::task::noop_waker_ref());
        // The first poll of each puts its job in the writer's queue, in order.
        let _ = Pin::new(&mut gate).poll(&mut cx);
        for answer in &mut answers {
            let _ = Pin::new(answer).poll(&mut cx);
        }
        self.shared.open_gate();
        block_on(&mut gate);
        let results = answers
            .iter_mut()
            .map(|answer| {
                block_on(&mut *answer);
                Pin::new(answer).take_output().expect("answered")
            })
            .collect();
        if !writer.stats().running {
            return Err("the writer stopped: an invariant failed inside a batch".into());
        }
        Ok(results)
    }

    /// Remembers the head the clients were just told of.
    fn ack_head(&mut self) -> Step {
        let store = &self.process.as_ref().expect("running").store;
        self.auditor.acked(store)
    }

    fn note(&mut self, line: impl AsRef<str>) {
        self.trace.update(line.as_ref().as_bytes());
        self.trace.update(b"\n");
    }

    fn fault(&mut self, kind: &'static str) {
        self.shared.count(kind);
    }

    /// Runs every step; returns the counters, or the first violation.
    pub fn run(mut self) -> Result<Report, Failure> {
        for step in 1..=self.opts.steps {
            self.step = step;
            self.one_step().map_err(|m| self.failure(m))?;
            let (contracts, disputes) = (self.workload.contracts.clone(), self.workload.disputes.clone());
            let store = &self.process.as_ref().expect("running").store;
            let audit = self.auditor.check(store, &contracts, &disputes);
            audit.map_err(|m| self.failure(format!("audit: {m}")))?;
        }
        let head = block_on(self.store().head()).map_err(|e| self.failure(e.to_string()))?;
        self.note(format!("head {} {}", head.seq, head.hash));
        self.report.head_seq = head.seq;
        self.report.audits = self.auditor.audits;
        self.report.once = self.auditor.once_counts().into_iter().collect();
        self.report.faults = self.shared.counts.lock().unwrap_or_else(|p| p.into_inner()).clone();
        self.report.digest = hex::encode(self.trace.clone().finalize());
        Ok(self.report)
    }

    fn one_step(&mut self) -> Step {
        let f = self.opts.faults;
        let (roll, jump, long) = {
            let mut rng = lock(&self.rng);
            (rng.below(1_000), rng.chance(f.clock_jump), rng.chance(f.long_jump))
        };
        let action = if roll < f.crash {
            "crash"
        } else if jump {
            "clock jump"
        } else {
            match roll % 100 {
                0..=39 => "request",
                40..=79 => "deliver",
                80..=89 => "sweep",
                _ => "tick",
            }
        };
        *self.report.actions.entry(action).or_default() += 1;
        self.note(format!("step {} {action}", self.step));
        match action {
            "crash" => self.crash(),
            "clock jump" => {
                let s = if long { LONG_JUMP_S } else { lock(&self.rng).between(JUMP_S.0, JUMP_S.1) };
                self.fault(if long { "clock_jump_long" } else { "clock_jump" });
                self.clock.advance_s(s);
                self.sweep()
            }
            "request" => self.request(),
            "deliver" => self.deliver(),
            "sweep" => self.sweep(),
            _ => {
                let s = lock(&self.rng).between(1, TICK_S_MAX);
                self.clock.advance_s(s);
                Ok(())
            }
        }?;
        if self.shared.crashed.load(std::sync::atomic::Ordering::SeqCst) {
            self.crash()?;
        }
        self.spot_check()
    }

    fn request(&mut self) -> Step {
        let flow = match lock(&self.rng).below(100) {
            0..=34 => Flow::Pay,
            35..=59 => Flow::Escrow,
            60..=84 => Flow::Dispute,
            _ => Flow::Stake,
        };
        let now = self.clock.now();
        let process = self.process.as_ref().expect("running");
        let next = self.workload.next(flow, &mut lock(&self.rng), &self.cast, &process.store, now);
        if let Some(command) = next.map_err(|e| format!("workload read: {e}"))? {
            self.note(format!("ask {} {}", flow.name(), command.op.name()));
            self.pending.push(Pending { flow, command, first: None });
        }
        Ok(())
    }

    /// Takes a group of pending requests (sometimes out of order, sometimes one twice) and delivers it as one batch.
    fn deliver(&mut self) -> Step {
        if self.pending.is_empty() {
            return Ok(());
        }
        let f = self.opts.faults;
        let (n, reorder, duplicate) = {
            let mut rng = lock(&self.rng);
            (rng.between(1, GROUP_MAX) as usize, rng.chance(f.reorder), rng.chance(f.duplicate))
        };
        let n = n.min(self.pending.len());
        let mut group: Vec<Pending> = if reorder && self.pending.len() > 1 {
            self.fault("reordered_delivery");
            let mut picked = Vec::new();
            for _ in 0..n {
                let i = lock(&self.rng).index(self.pending.len());
                picked.push(self.pending.remove(i));
            }
            picked
        } else {
            self.pending.drain(..n).collect()
        };
        lock(&self.rng).shuffle(&mut group);
        let mut commands: Vec<Command> = group.iter().map(|p| p.command.clone()).collect();
        let twin = duplicate.then(|| lock(&self.rng).index(group.len()));
        if let Some(i) = twin {
            self.fault("duplicate_delivery");
            commands.push(group[i].command.clone());
        }
        let head_before = block_on(self.store().head()).map_err(|e| e.to_string())?;
        let mut results = self.submit_group(commands)?;
        let twin_result = twin.map(|_| results.pop().expect("the duplicate's answer"));
        if results.iter().all(Result::is_err) {
            let head = block_on(self.store().head()).map_err(|e| e.to_string())?;
            if head != head_before {
                return Err(format!("a failed batch wrote: head {} -> {}", head_before.seq, head.seq));
            }
        }
        if let (Some(i), Some(Ok(copy))) = (twin, &twin_result) {
            if let Ok(original) = &results[i] {
                self.report.replays_checked += 1;
                if !copy.replayed || copy.outcome != original.outcome {
                    return Err(format!(
                        "a duplicate of {} answered {copy:?}, the original {original:?}",
                        group[i].command.op.name()
                    ));
                }
            }
        }
        let mut acked_any = false;
        for (request, result) in group.into_iter().zip(results) {
            acked_any |= self.answer(request, result)?;
        }
        if acked_any {
            self.ack_head()?;
        }
        Ok(())
    }

    /// What one request's answer means for its client. Returns whether the client was told.
    fn answer(&mut self, mut request: Pending, result: Result<Applied, StoreError>) -> Result<bool, String> {
        let name = request.command.op.name();
        let applied = match result {
            Err(error) => {
                self.note(format!("{name} unavailable"));
                let _ = error;
                self.pending.push(request);
                return Ok(false);
            }
            Ok(applied) => applied,
        };
        self.note(format!("{name} {} {}", applied.replayed, summary(&applied.outcome)));
        let at = match &request.first {
            Some((first, at)) => {
                if *at >= self.pruned_before {
                    self.report.replays_checked += 1;
                    if !applied.replayed || &applied.outcome != first {
                        return Err(format!("a retry of {name} answered {applied:?}, the lost first answer {first:?}"));
                    }
                }
                *at
            }
            None => {
                if applied.replayed {
                    return Err(format!("a first request of {name} was answered as a replay: {applied:?}"));
                }
                let e = self.report.answered.entry(request.flow.name()).or_default();
                e.0 += 1;
                e.1 += applied.outcome.is_err() as u64;
                let outcome = match &applied.outcome {
                    Ok(_) => "ok",
                    Err(refusal) => refusal.code.as_str(),
                };
                *self.report.outcomes.entry(format!("{name} {outcome}")).or_default() += 1;
                self.learn(&request.command, &applied);
                self.clock.now()
            }
        };
        if lock(&self.rng).chance(self.opts.faults.lost_reply) {
            self.fault("lost_reply");
            request.first.get_or_insert((applied.outcome, at));
            self.pending.push(request);
            return Ok(false);
        }
        self.acked.push(Acked { command: request.command, outcome: applied.outcome, at });
        Ok(true)
    }

    fn learn(&mut self, command: &Command, applied: &Applied) {
        if let (Op::Pay(pay::Op::Settle { claims, amount, order_id }), Ok(_)) = (&command.op, &applied.outcome) {
            self.workload.settled(claims.aud.clone(), order_id.clone(), claims.sub.clone(), amount.0);
        }
    }

    /// The sweeper's due work, as the server's sweeper runs it: expired holds,
    /// contracts past a review deadline, disputes past a phase deadline, then
    /// idempotency records past the retention.
    fn sweep(&mut self) -> Step {
        let now = self.clock.now();
        let registry = self.cast.registry.clone();
        let expired = block_on(self.store().expired_tokens(now, SWEEP_BATCH_MAX)).map_err(|e| e.to_string())?;
        let expiries = expired
            .into_iter()
            .map(|(jti, buyer)| command(&registry, None, Op::Pay(pay::Op::ExpireHold { jti, buyer })));
        self.sweep_group("expire_hold", expiries.collect())?;
        let due = block_on(self.store().due_docs(now, SWEEP_DOCS_MAX)).map_err(|e| e.to_string())?;
        let (mut contracts, mut disputes) = (Vec::new(), Vec::new());
        for (kind, id) in due {
            match kind {
                DocKind::Contract => {
                    if let Some(c) = read_doc::<Contract>(self.store(), &id).map_err(|e| e.to_string())? {
                        contracts.push(command(&registry, None, contract_op(&c, ContractAct::Advance)));
                    }
                }
                DocKind::Dispute => {
                    if let Some(d) = read_doc::<Dispute>(self.store(), &id).map_err(|e| e.to_string())? {
                        disputes.push(command(&registry, None, dispute_op(&d, DisputeAct::Advance)));
                    }
                }
                _ => {}
            }
        }
        self.sweep_group("contract_advance", contracts)?;
        self.sweep_group("dispute_advance", disputes)?;
        let cutoff = Timestamp(now.ms().saturating_sub(IDEMPOTENCY_RETENTION_S as i64 * 1000));
        let writer = self.process.as_ref().expect("running").writer.clone();
        if block_on(writer.prune_idempotency(cutoff, SWEEP_BATCH_MAX)).is_ok() {
            self.pruned_before = self.pruned_before.max(cutoff);
        }
        Ok(())
    }

    fn sweep_group(&mut self, what: &'static str, commands: Vec<Command>) -> Step {
        if commands.is_empty() {
            return Ok(());
        }
        let n = commands.len() as u64;
        let results = self.submit_group(commands)?;
        let ok = results.iter().filter(|r| matches!(r, Ok(a) if a.outcome.is_ok())).count() as u64;
        for result in &results {
            let outcome = match result {
                Ok(Applied { outcome: Ok(_), .. }) => "ok",
                Ok(Applied { outcome: Err(refusal), .. }) => refusal.code.as_str(),
                Err(_) => "unavailable",
            };
            *self.report.outcomes.entry(format!("{what} {outcome}")).or_default() += 1;
        }
        self.note(format!("sweep {what} {n} {ok}"));
        let e = self.report.answered.entry(Flow::Sweeper.name()).or_default();
        (e.0, e.1) = (e.0 + n, e.1 + n - ok);
        if ok > 0 {
            self.ack_head()?;
        }
        Ok(())
    }

    /// The process dies between two steps (or with a transaction open) and restarts on the same file.
    fn crash(&mut self) -> Step {
        self.report.crashes += 1;
        self.process = None;
        self.shared.crashed.store(false, std::sync::atomic::Ordering::SeqCst);
        self.open()?;
        self.report.recoveries += 1;
        self.note("restarted");
        self.recheck_acked(None)
    }

    /// Sends acknowledged requests again, with faults off: each must replay its first answer exactly.
    /// `only`: one of them (the spot check), else all still within the idempotency retention.
    fn recheck_acked(&mut self, only: Option<usize>) -> Step {
        let saved = self.shared.set_faults(EngineFaults::NONE);
        let picked: Vec<usize> = match only {
            Some(i) => vec![i],
            None => (0..self.acked.len()).collect(),
        };
        let picked: Vec<usize> = picked.into_iter().filter(|&i| self.acked[i].at >= self.pruned_before).collect();
        for chunk in picked.chunks(GROUP_MAX as usize * 8) {
            let commands = chunk.iter().map(|&i| self.acked[i].command.clone()).collect();
            let results = self.submit_group(commands)?;
            for (&i, result) in chunk.iter().zip(results) {
                let acked = &self.acked[i];
                let name = acked.command.op.name();
                let applied = result.map_err(|e| format!("re-reading {name}: {e}"))?;
                self.report.replays_checked += 1;
                if !applied.replayed || applied.outcome != acked.outcome {
                    return Err(format!(
                        "an acknowledged {name} did not survive: answered {:?} then {applied:?}",
                        acked.outcome
                    ));
                }
            }
        }
        self.shared.set_faults(saved);
        Ok(())
    }

    /// One acknowledged answer, chosen at random, asked for again.
    fn spot_check(&mut self) -> Step {
        if self.acked.is_empty() {
            return Ok(());
        }
        let i = lock(&self.rng).index(self.acked.len());
        self.recheck_acked(Some(i))
    }
}

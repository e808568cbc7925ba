//! One simulated run: the home registry (and a peer registry for relayed
//! settlements) on SQLite files behind the real group-commit writer and a
//! fault-injecting engine; clients sending requests of every flow with
//! idempotency keys; the sweepers' due work; and faults — failed and torn
//! commits, a store briefly unavailable, lost replies, duplicate and reordered
//! delivery, clock jumps, crashes, a peer down or late — all decided by one
//! generator from the seed. The auditor runs after every step; a run ends at
//! its last step or at the first violation.

use crate::auditor::{check_corridors, Auditor};
use crate::bounties::Bounties;
use crate::cast::{command, Cast};
use crate::fault::{EngineFaults, FaultCounts, Shared};
use crate::flows::{contract_op, dispute_op, read_doc, Flow, Workload};
use crate::hiring::Hiring;
use crate::market::Storefront;
use crate::options::{Options, GROUP_MAX, JUMP_S, LONG_JUMP_S, START, TICK_S_MAX};
use crate::registry::{Answers, Registry};
use crate::relay::{
    confirm_netting, record_netting, relay_finish, relay_retry, settle_relayed, signed_by, PeerCast, Relays, Side,
};
use crate::report::{Failure, Report};
use crate::rng::{lock, Rng, SharedRng};
use bazaar_core::apply::Applied;
use bazaar_core::command::{Command, Op, Outcome, Receipt};
use bazaar_core::dispute::{Dispute, DisputeAct};
use bazaar_core::escrow::{Contract, ContractAct};
use bazaar_core::federation::{Netting, NettingAnswer, NettingState, Relay, RelayResult, RelayState};
use bazaar_core::kernel::batch::record;
use bazaar_core::model::{DocKind, Member};
use bazaar_core::refusal::Code;
use bazaar_core::{federation, pay, token};
use bazaar_store::{Store, StoreError};
use bazaar_types::limits::{IDEMPOTENCY_RETENTION_S, SWEEP_BATCH_MAX, SWEEP_DOCS_MAX};
use bazaar_types::{Clock, ManualClock, Timestamp};
use futures::executor::block_on;
use sha2::{Digest, Sha256};
use std::sync::{Arc, Mutex};

/// Rounds of relay retries, with faults off, that must leave no relay pending at the end of a run.
const QUIESCE_ROUNDS_MAX: usize = 4;

/// A client's request in flight: sent, not yet answered to the client.
struct Pending {
    flow: Flow,
    side: Side,
    command: Command,
    /// The answer that committed but was lost, and when it committed.
    first: Option<(Outcome, Timestamp)>,
}

/// An answer a client was given.
struct Acked {
    side: Side,
    command: Command,
    outcome: Outcome,
    at: Timestamp,
}

pub struct Sim {
    opts: Options,
    rng: SharedRng,
    clock: Arc<ManualClock>,
    home: Registry,
    peer: Registry,
    cast: Cast,
    peer_cast: PeerCast,
    workload: Workload,
    relays: Relays,
    storefront: Storefront,
    hiring: Hiring,
    bounties: Bounties,
    pending: Vec<Pending>,
    acked: Vec<Acked>,
    auditor: Auditor,
    peer_auditor: Auditor,
    /// Idempotency records created before this may have been pruned (on either registry).
    pruned_before: Timestamp,
    trace: Sha256,
    report: Report,
    step: usize,
}

type Step = Result<(), String>;

fn summary(outcome: &Outcome) -> String {
    match outcome {
        Ok(receipt) => receipt.to_json().to_string(),
        Err(refusal) => format!("refused {}", refusal.code.as_str()),
    }
}

fn outcome_name(outcome: &Outcome) -> &'static str {
    match outcome {
        Ok(_) => "ok",
        Err(refusal) => refusal.code.as_str(),
    }
}

/// The member as stored, as the edge would load it.
fn stored(store: &dyn Store, m: &Member) -> Result<Member, String> {
    block_on(store.member(&m.id)).ok().flatten().ok_or_else(|| format!("member {} missing", m.id))
}

impl Sim {
    /// Fresh registries in `dir` (files per seed), set up with the cast.
    pub fn new(opts: Options, dir: &std::path::Path) -> Result<Sim, Failure> {
        let rng: SharedRng = Arc::new(Mutex::new(Rng::new(opts.seed)));
        let counts = Arc::new(Mutex::new(FaultCounts::new()));
        let shared = |_| Shared::new(rng.clone(), counts.clone(), EngineFaults::NONE, opts.plant);
        let home = Registry::new(dir.join(format!("sim-{}-home.sqlite", opts.seed)), shared(0));
        let peer = Registry::new(dir.join(format!("sim-{}-peer.sqlite", opts.seed)), shared(1));
        let mut sim = Sim {
            report: Report { seed: opts.seed, steps: opts.steps, ..Report::default() },
            opts,
            rng,
            clock: Arc::new(ManualClock::new(START)),
            home,
            peer,
            peer_cast: PeerCast::new(&Cast::new(START), START),
            cast: Cast::new(START),
            workload: Workload::default(),
            relays: Relays::default(),
            storefront: Storefront::default(),
            hiring: Hiring::default(),
            bounties: Bounties::default(),
            pending: Vec::new(),
            acked: Vec::new(),
            auditor: Auditor::default(),
            peer_auditor: Auditor::default(),
            pruned_before: Timestamp(i64::MIN),
            trace: Sha256::new(),
            step: 0,
        };
        sim.setup().map_err(|message| sim.failure(message))?;
        Ok(sim)
    }

    fn failure(&self, message: String) -> Failure {
        Failure {
            seed: self.opts.seed,
            step: self.step,
            steps: self.opts.steps,
            faults: self.opts.faults.profile,
            message,
        }
    }

    fn reg(&self, side: Side) -> &Registry {
        match side {
            Side::Home => &self.home,
            Side::Peer => &self.peer,
        }
    }

    fn setup_batches(&self, side: Side, batches: Vec<Vec<Command>>) -> Step {
        for batch in batches {
            for applied in self.reg(side).submit_group(batch)? {
                applied.map_err(|e| format!("setup: {e}"))?.outcome.map_err(|r| format!("setup refused: {r:?}"))?;
            }
        }
        Ok(())
    }

    fn setup(&mut self) -> Step {
        self.home.open(&self.clock)?;
        self.peer.open(&self.clock)?;
        let mut home_batches = self.cast.setup(START);
        home_batches.push(self.peer_cast.recognised_at_home(&self.cast, START));
        self.setup_batches(Side::Home, home_batches)?;
        self.setup_batches(Side::Peer, self.peer_cast.setup(&self.cast, START))?;
        let store = self.home.store();
        let refresh = |ms: &[Member]| ms.iter().map(|m| stored(store, m)).collect::<Result<Vec<_>, _>>();
        let (owners, agents) = (refresh(&self.cast.owners)?, refresh(&self.cast.agents)?);
        let registry = stored(store, &self.cast.registry)?;
        let (operator, desk) = (stored(store, &self.cast.operator)?, stored(store, &self.cast.desk)?);
        let peer_at_home = stored(store, &self.peer_cast.peer_at_home)?;
        (self.cast.owners, self.cast.agents, self.cast.registry) = (owners, agents, registry);
        (self.cast.operator, self.cast.desk, self.peer_cast.peer_at_home) = (operator, desk, peer_at_home);
        let p = self.peer.store();
        let (shop, owner, registry) =
            (stored(p, &self.peer_cast.shop)?, stored(p, &self.peer_cast.owner)?, stored(p, &self.peer_cast.registry)?);
        (self.peer_cast.shop, self.peer_cast.owner, self.peer_cast.registry) = (shop, owner, registry);
        self.peer_cast.home_at_peer = stored(p, &self.peer_cast.home_at_peer)?;
        self.auditor.acked(self.home.store())?;
        self.peer_auditor.acked(self.peer.store())?;
        for reg in [&self.home, &self.peer] {
            reg.shared.set_faults(self.opts.faults.engine);
            reg.shared.arm_plant();
        }
        Ok(())
    }

    fn note(&mut self, line: impl AsRef<str>) {
        if self.opts.verbose {
            eprintln!("{}", line.as_ref());
        }
        self.trace.update(line.as_ref().as_bytes());
        self.trace.update(b"\n");
    }

    fn fault(&self, kind: &'static str) {
        self.home.shared.count(kind);
    }

    fn ack_head(&mut self, side: Side) -> Step {
        match side {
            Side::Home => self.auditor.acked(self.home.store()),
            Side::Peer => self.peer_auditor.acked(self.peer.store()),
        }
    }

    /// Runs every step; returns the counters, or the first violation.
    pub fn run(mut self) -> Result<Report, Failure> {
        for step in 1..=self.opts.steps {
            self.step = step;
            self.one_step().map_err(|m| self.failure(m))?;
            self.audit().map_err(|m| self.failure(format!("audit: {m}")))?;
        }
        self.quiesce().map_err(|m| self.failure(format!("at the end: {m}")))?;
        let head = block_on(self.home.store().head()).map_err(|e| self.failure(e.to_string()))?;
        self.note(format!("head {} {}", head.seq, head.hash));
        self.report.head_seq = head.seq;
        self.report.audits = self.auditor.audits;
        self.report.once = self.auditor.once_counts().into_iter().collect();
        for (kind, n) in self.peer_auditor.once_counts() {
            *self.report.once.entry(kind).or_default() += n;
        }
        self.report.faults = self.home.shared.counts.lock().unwrap_or_else(|p| p.into_inner()).clone();
        self.report.digest = hex::encode(self.trace.clone().finalize());
        Ok(self.report)
    }

    /// Both registries' audits and the corridor between them.
    fn audit(&mut self) -> Step {
        let (contracts, disputes) = (&self.workload.contracts, &self.workload.disputes);
        let docs = crate::auditor::Watched {
            contracts,
            disputes,
            orders: &self.storefront.orders,
            bounties: &self.bounties.ids,
        };
        self.auditor.check(self.home.store(), docs)?;
        self.peer_auditor.check(self.peer.store(), crate::auditor::Watched::default())?;
        let shop = &self.peer_cast.shop.id;
        check_corridors(self.home.store(), self.peer.store(), &self.relays, shop, false)
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
            "crash" => {
                let side = if lock(&self.rng).below(4) == 0 { Side::Peer } else { Side::Home };
                self.crash(side)
            }
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
        for side in [Side::Home, Side::Peer] {
            if self.reg(side).shared.crashed.load(std::sync::atomic::Ordering::SeqCst) {
                self.crash(side)?;
            }
        }
        self.spot_check()
    }

    fn request(&mut self) -> Step {
        let weights = &self.opts.faults.flows;
        let mut roll = lock(&self.rng).below(weights.iter().map(|(_, w)| w).sum());
        let flow = weights
            .iter()
            .find(|(_, w)| {
                let hit = roll < *w;
                roll = roll.saturating_sub(*w);
                hit
            })
            .map(|(flow, _)| *flow)
            .expect("a flow");
        let now = self.clock.now();
        let (side, next) = match flow {
            Flow::Relay => {
                let (side, command) = self.relays.next(&mut lock(&self.rng), &self.cast, &self.peer_cast, now);
                (side, Some(command))
            }
            Flow::Market => {
                let next = self.storefront.next(&mut lock(&self.rng), &self.cast, self.home.store(), now);
                (Side::Home, next.map_err(|e| format!("storefront read: {e}"))?)
            }
            Flow::Bounty => {
                let next = self.bounties.next(&mut lock(&self.rng), &self.cast, self.home.store());
                (Side::Home, next.map_err(|e| format!("bounties read: {e}"))?)
            }
            Flow::Hire => {
                let contracts = &mut self.workload.contracts;
                let next = self.hiring.next(&mut lock(&self.rng), &self.cast, self.home.store(), contracts);
                (Side::Home, next.map_err(|e| format!("hiring read: {e}"))?)
            }
            _ => {
                let next = self.workload.next(flow, &mut lock(&self.rng), &self.cast, self.home.store(), now);
                (Side::Home, next.map_err(|e| format!("workload read: {e}"))?)
            }
        };
        if let Some(command) = next {
            self.note(format!("ask {} {}", flow.name(), command.op.name()));
            self.pending.push(Pending { flow, side, command, first: None });
        }
        Ok(())
    }

    /// Takes a group of one registry's pending requests (sometimes out of order, sometimes one twice) and
    /// delivers it as one batch.
    fn deliver(&mut self) -> Step {
        let f = self.opts.faults;
        let (n, reorder, duplicate, peer_first) = {
            let mut rng = lock(&self.rng);
            (rng.between(1, GROUP_MAX) as usize, rng.chance(f.reorder), rng.chance(f.duplicate), rng.below(4) == 0)
        };
        let preferred = if peer_first { Side::Peer } else { Side::Home };
        let side = if self.pending.iter().any(|p| p.side == preferred) { preferred } else { Side::Home };
        let mut waiting: Vec<usize> = (0..self.pending.len()).filter(|&i| self.pending[i].side == side).collect();
        if waiting.is_empty() {
            return Ok(());
        }
        let n = n.min(waiting.len());
        let mut chosen = Vec::new();
        if reorder && waiting.len() > 1 {
            self.fault("reordered_delivery");
            for _ in 0..n {
                let i = lock(&self.rng).index(waiting.len());
                chosen.push(waiting.remove(i));
            }
        } else {
            chosen.extend(waiting.drain(..n));
        }
        let mut by_index: Vec<(usize, usize)> = chosen.iter().copied().enumerate().collect();
        by_index.sort_by_key(|&(_, i)| std::cmp::Reverse(i));
        let mut taken: Vec<Option<Pending>> = (0..n).map(|_| None).collect();
        for (slot, i) in by_index {
            taken[slot] = Some(self.pending.remove(i));
        }
        let mut group: Vec<Pending> = taken.into_iter().map(|p| p.expect("taken")).collect();
        lock(&self.rng).shuffle(&mut group);
        self.deliver_group(side, group, duplicate)
    }

    fn deliver_group(&mut self, side: Side, group: Vec<Pending>, duplicate: bool) -> Step {
        let mut commands: Vec<Command> = group.iter().map(|p| p.command.clone()).collect();
        let twin = duplicate.then(|| lock(&self.rng).index(group.len()));
        if let Some(i) = twin {
            self.fault("duplicate_delivery");
            commands.push(group[i].command.clone());
        }
        let store = self.reg(side).store();
        let head_before = block_on(store.head()).map_err(|e| e.to_string())?;
        let mut results = self.reg(side).submit_group(commands)?;
        let twin_result = twin.map(|_| results.pop().expect("the duplicate's answer"));
        if results.iter().all(Result::is_err) {
            let head = block_on(self.reg(side).store().head()).map_err(|e| e.to_string())?;
            if head != head_before {
                return Err(format!("a failed batch wrote: head {} -> {}", head_before.seq, head.seq));
            }
        }
        if let (Some(i), Some(Ok(copy))) = (twin, &twin_result) {
            // An unkeyed request sent twice runs twice: the order or the ledger must refuse the second.
            if let (Ok(original), Some(_)) = (&results[i], &group[i].command.idem) {
                self.report.replays_checked += 1;
                if !copy.replayed || copy.outcome != original.outcome {
                    let name = group[i].command.op.name();
                    return Err(format!("a duplicate of {name} answered {copy:?}, the original {original:?}"));
                }
            }
        }
        let mut acked_any = false;
        for (request, result) in group.into_iter().zip(results) {
            acked_any |= self.answer(request, result)?;
        }
        if acked_any {
            self.ack_head(side)?;
        }
        Ok(())
    }

    /// What one request's answer means for its client. Returns whether the client was told.
    fn answer(&mut self, mut request: Pending, result: Result<Applied, StoreError>) -> Result<bool, String> {
        let name = request.command.op.name();
        let Ok(applied) = result else {
            self.note(format!("{name} unavailable"));
            self.pending.push(request);
            return Ok(false);
        };
        self.note(format!("{name} {} {}", applied.replayed, summary(&applied.outcome)));
        let (recorded, tag) = record::to_parts(&applied.outcome);
        if record::from_parts(&recorded, &tag).ok().as_ref() != Some(&applied.outcome) {
            return Err(format!("{name}'s outcome does not read back from its record as itself: {tag} {recorded}"));
        }
        let keyed = request.command.idem.is_some();
        let at = match &request.first {
            Some((_, at)) if !keyed => *at,
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
                (e.0, e.1) = (e.0 + 1, e.1 + applied.outcome.is_err() as u64);
                let outcome = outcome_name(&applied.outcome);
                *self.report.outcomes.entry(format!("{name} {outcome}")).or_default() += 1;
                self.learn(&request.command, &applied)?;
                self.clock.now()
            }
        };
        if lock(&self.rng).chance(self.opts.faults.lost_reply) {
            self.fault("lost_reply");
            request.first.get_or_insert((applied.outcome, at));
            self.pending.push(request);
            return Ok(false);
        }
        if keyed {
            self.acked.push(Acked { side: request.side, command: request.command, outcome: applied.outcome, at });
        }
        Ok(true)
    }

    /// What the world learns from a first answer: a settled call to dispute, a relay to call the issuer for.
    fn learn(&mut self, command: &Command, applied: &Applied) -> Step {
        match (&command.op, &applied.outcome) {
            (Op::Pay(pay::Op::Settle { claims, amount, order_id }), Ok(_)) => {
                self.workload.settled(claims.aud.clone(), order_id.clone(), claims.sub.clone(), amount.0);
                Ok(())
            }
            // The merchant's registry calls the issuer right away, as its edge does.
            (Op::Federation(federation::Op::RelayOpen { claims, .. }), Ok(_)) => {
                self.relay_attempt(&claims.jti.0, true)
            }
            // Home's edge sends a statement to B as soon as its operator proposed it.
            (Op::Federation(federation::Op::ProposeNetting { statement, .. }), Ok(_)) => {
                self.net_attempt(&statement.id, true)
            }
            _ => Ok(()),
        }
    }

    /// One call from the peer to the home registry for a pending relay, and its answer recorded at the peer.
    fn relay_attempt(&mut self, jti: &str, faulty: bool) -> Step {
        let relay = read_doc::<Relay>(self.peer.store(), jti).map_err(|e| e.to_string())?;
        // A stuck relay (no answer for RELAY_RETRY_WINDOW_S) is not swept, but a merchant's retry still attempts it.
        let Some(relay) = relay.filter(|r| matches!(r.state, RelayState::Pending | RelayState::Stuck)) else {
            return Ok(());
        };
        let claims = token::peek(&relay.token).map_err(|e| format!("relay {jti}: its token: {e:?}"))?;
        let f = self.opts.faults;
        let result = if faulty && lock(&self.rng).chance(f.peer_down) {
            self.fault("peer_down");
            RelayResult::Unreachable
        } else {
            let call = settle_relayed(&relay, &claims, &self.peer_cast);
            let answer = self.home.submit_group(vec![call])?.pop().expect("one answer");
            match answer {
                Err(_) => RelayResult::Unreachable,
                Ok(_) if faulty && lock(&self.rng).chance(f.peer_late) => {
                    self.fault("peer_late");
                    RelayResult::Unreachable
                }
                Ok(Applied { outcome: Ok(receipt), .. }) => RelayResult::Settled(receipt.to_json()),
                Ok(Applied { outcome: Err(refusal), .. }) if refusal.code == Code::IdempotencyInFlight => {
                    RelayResult::Unreachable
                }
                Ok(Applied { outcome: Err(refusal), .. }) => RelayResult::Refused(refusal),
            }
        };
        let what = match &result {
            RelayResult::Settled(_) => "settled".to_string(),
            RelayResult::Refused(r) => format!("refused {}", r.code.as_str()),
            RelayResult::Unreachable => "unreachable".to_string(),
        };
        self.note(format!("relay {jti} {what}"));
        *self.report.outcomes.entry(format!("relay_call {what}")).or_default() += 1;
        let finish = relay_finish(&relay, result, &self.peer_cast);
        if let Some(Ok(applied)) = self.peer.submit_group(vec![finish])?.pop() {
            *self.report.outcomes.entry(format!("relay_finish {}", outcome_name(&applied.outcome))).or_default() += 1;
        }
        Ok(())
    }

    /// Home sends a statement still proposed to B (which may be down, or whose answer may be lost) and
    /// records B's answer.
    fn net_attempt(&mut self, id: &str, faulty: bool) -> Step {
        let netting = read_doc::<Netting>(self.home.store(), id).map_err(|e| e.to_string())?;
        let Some(netting) = netting.filter(|n| n.state == NettingState::Proposed) else { return Ok(()) };
        let f = self.opts.faults;
        if faulty && lock(&self.rng).chance(f.peer_down) {
            self.fault("peer_down");
            return Ok(());
        }
        let record = record_netting(&netting.statement, &self.cast, &self.peer_cast);
        let answer = match self.peer.submit_group(vec![record])?.pop().expect("one answer") {
            Err(_) => return Ok(()),
            Ok(_) if faulty && lock(&self.rng).chance(f.peer_late) => {
                self.fault("peer_late");
                return Ok(());
            }
            Ok(Applied { outcome: Ok(receipt), .. }) => {
                let signed = match &receipt {
                    Receipt::Federation(federation::Receipt::NettingStatus(status)) => {
                        status.netting.signatures.len() == 2
                    }
                    _ => false,
                };
                if !signed {
                    return Err(format!("netting {id}: B recorded it without both signatures: {receipt:?}"));
                }
                NettingAnswer::Recorded(signed_by(&self.peer_cast.registry.id))
            }
            Ok(Applied { outcome: Err(refusal), .. }) => NettingAnswer::Refused(refusal),
        };
        let what = match &answer {
            NettingAnswer::Recorded(_) => "recorded".to_string(),
            NettingAnswer::Refused(r) => format!("refused {}", r.code.as_str()),
        };
        *self.report.outcomes.entry(format!("netting_record {what}")).or_default() += 1;
        let confirm = confirm_netting(&netting.statement, answer, &self.cast, &self.peer_cast);
        if let Some(Ok(applied)) = self.home.submit_group(vec![confirm])?.pop() {
            *self.report.outcomes.entry(format!("netting_confirm {}", outcome_name(&applied.outcome))).or_default() +=
                1;
        }
        Ok(())
    }

    /// The peer's operator, reading its recovery records, retries a stuck relay by hand.
    fn retry_if_stuck(&mut self, jti: &str) -> Step {
        let relay = read_doc::<Relay>(self.peer.store(), jti).map_err(|e| e.to_string())?;
        if relay.is_none_or(|r| r.state != RelayState::Stuck) {
            return Ok(());
        }
        let retry = relay_retry(jti, &self.peer_cast);
        if let Some(Ok(applied)) = self.peer.submit_group(vec![retry])?.pop() {
            *self.report.outcomes.entry(format!("relay_retry {}", outcome_name(&applied.outcome))).or_default() += 1;
        }
        Ok(())
    }

    /// The sweepers' due work, as the server's sweeper runs it: at home, expired holds, contracts past a
    /// review deadline, disputes past a phase deadline; at the peer, relays to retry; then on both,
    /// idempotency records past the retention.
    fn sweep(&mut self) -> Step {
        let now = self.clock.now();
        let registry = self.cast.registry.clone();
        let expired = block_on(self.home.store().expired_tokens(now, SWEEP_BATCH_MAX)).map_err(|e| e.to_string())?;
        let expiries = expired
            .into_iter()
            .map(|(jti, buyer)| command(&registry, None, Op::Pay(pay::Op::ExpireHold { jti, buyer })));
        self.sweep_group("expire_hold", expiries.collect())?;
        let due = block_on(self.home.store().due_docs(now, SWEEP_DOCS_MAX)).map_err(|e| e.to_string())?;
        let (mut contracts, mut disputes) = (Vec::new(), Vec::new());
        for (kind, id) in due {
            let store = self.home.store();
            match kind {
                DocKind::Contract => {
                    if let Some(c) = read_doc::<Contract>(store, &id).map_err(|e| e.to_string())? {
                        contracts.push(command(&registry, None, contract_op(&c, ContractAct::Advance)));
                    }
                }
                DocKind::Dispute => {
                    if let Some(d) = read_doc::<Dispute>(store, &id).map_err(|e| e.to_string())? {
                        disputes.push(command(&registry, None, dispute_op(&d, DisputeAct::Advance)));
                    }
                }
                _ => {}
            }
        }
        self.sweep_group("contract_advance", contracts)?;
        self.sweep_group("dispute_advance", disputes)?;
        let relays = block_on(self.peer.store().due_docs(now, SWEEP_DOCS_MAX)).map_err(|e| e.to_string())?;
        for (_, id) in relays.into_iter().filter(|(kind, _)| *kind == DocKind::Relay) {
            self.relay_attempt(&id, true)?;
        }
        let cutoff = Timestamp(now.ms().saturating_sub(IDEMPOTENCY_RETENTION_S as i64 * 1000));
        let pruned = [&self.home, &self.peer].map(|reg| reg.prune_idempotency(cutoff, SWEEP_BATCH_MAX).is_ok());
        if pruned.contains(&true) {
            self.pruned_before = self.pruned_before.max(cutoff);
        }
        Ok(())
    }

    fn sweep_group(&mut self, what: &'static str, commands: Vec<Command>) -> Step {
        if commands.is_empty() {
            return Ok(());
        }
        let n = commands.len() as u64;
        let results: Answers = self.home.submit_group(commands)?;
        let ok = results.iter().filter(|r| matches!(r, Ok(a) if a.outcome.is_ok())).count() as u64;
        for result in &results {
            let outcome = result.as_ref().map_or("unavailable", |a| outcome_name(&a.outcome));
            *self.report.outcomes.entry(format!("{what} {outcome}")).or_default() += 1;
        }
        self.note(format!("sweep {what} {n} {ok}"));
        let e = self.report.answered.entry(Flow::Sweeper.name()).or_default();
        (e.0, e.1) = (e.0 + n, e.1 + n - ok);
        if ok > 0 {
            self.ack_head(Side::Home)?;
        }
        Ok(())
    }

    /// A registry's process dies between two steps (or with a transaction open) and restarts on its
    /// file; so does the other one if its engine died in the same step. Then every acknowledged answer
    /// is asked for again.
    fn crash(&mut self, side: Side) -> Step {
        self.restart(side)?;
        for other in [Side::Home, Side::Peer] {
            if self.reg(other).shared.crashed.load(std::sync::atomic::Ordering::SeqCst) {
                self.restart(other)?;
            }
        }
        self.recheck_acked(None)
    }

    fn restart(&mut self, side: Side) -> Step {
        self.report.crashes += 1;
        let reg = match side {
            Side::Home => &mut self.home,
            Side::Peer => &mut self.peer,
        };
        reg.kill();
        reg.open(&self.clock)?;
        self.report.recoveries += 1;
        self.note(format!("restarted {side:?}"));
        Ok(())
    }

    fn set_faults(&self, faults: EngineFaults) {
        for reg in [&self.home, &self.peer] {
            reg.shared.set_faults(faults);
        }
    }

    /// Sends acknowledged requests again, with faults off: each must replay its first answer exactly.
    /// `only`: one of them (the spot check), else all still within the idempotency retention.
    fn recheck_acked(&mut self, only: Option<usize>) -> Step {
        self.set_faults(EngineFaults::NONE);
        let picked: Vec<usize> = match only {
            Some(i) => vec![i],
            None => (0..self.acked.len()).collect(),
        };
        for side in [Side::Home, Side::Peer] {
            let mine: Vec<usize> = picked
                .iter()
                .copied()
                .filter(|&i| self.acked[i].side == side && self.acked[i].at >= self.pruned_before)
                .collect();
            for chunk in mine.chunks(GROUP_MAX as usize * 8) {
                let commands = chunk.iter().map(|&i| self.acked[i].command.clone()).collect();
                let results = self.reg(side).submit_group(commands)?;
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
        }
        self.set_faults(self.opts.faults.engine);
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

    /// The end of the run: with faults off, the peer retries every pending relay until the home registry
    /// has answered each; then every relay settled on one side is settled on the other, and the two
    /// corridors mirror each other.
    fn quiesce(&mut self) -> Step {
        self.set_faults(EngineFaults::NONE);
        for _ in 0..QUIESCE_ROUNDS_MAX {
            for claims in self.relays.tokens.clone() {
                self.retry_if_stuck(&claims.jti.0)?;
                self.relay_attempt(&claims.jti.0, false)?;
            }
            // Home's operator sends again every statement still proposed.
            for id in self.relays.nettings.clone() {
                self.net_attempt(&id, false)?;
            }
        }
        let shop = &self.peer_cast.shop.id;
        check_corridors(self.home.store(), self.peer.store(), &self.relays, shop, true)
    }
}

//! Reputation: arithmetic over settled work, folded from the event ledger.
//!
//! The formula `bazaar-rep-v1` is documented in `docs/reputation.md`. Its only
//! inputs are events the ledger already holds — `settlement.posted`,
//! `contract.created`, `milestone.released`, `dispute.filed`,
//! `dispute.executed`, and the enrolment events that say who owns whom — so
//! anyone holding the ledger can recompute every figure from scratch with
//! [`Ledger::observe`] and [`Ledger::figures`]. Stake is folded into a separate
//! record ([`StakeFigures`]) and never enters the score.
//!
//! Integer arithmetic throughout, except the Wilson lower bound (IEEE-754
//! `f64`, then floored to basis points) and the decay table (rounded to ppm).

use crate::dispute::events::{DisputeExecuted, DisputeFiled, StakeLocked, StakeWithdrawn, Winner};
use crate::dispute::Subject;
use crate::escrow::events::{ContractCreated, MilestoneReleased};
use crate::identity::events::Enrolled;
use crate::kernel::model::Event;
use crate::pay::events::SettlementPosted;
use bazaar_types::limits::{REPUTATION_HALF_LIFE_DAYS, REPUTATION_SUCCESSES_PER_OWNER_WEEK, REPUTATION_WINDOW_DAYS};
use bazaar_types::{ContractId, MemberId, Timestamp};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, HashMap};

pub mod events;

crate::event_kinds! {
    /// What reputation's own records write on the event ledger (the
    /// federation edge records each passport it signs).
    ReputationEvent {
        PassportIssued => "passport.issued",
    }
}

/// The formula's published name; bump it whenever any rule below changes.
pub const FORMULA: &str = "bazaar-rep-v1";
/// One whole unit of weight (a fresh, fully successful piece of work).
pub const PPM: u64 = 1_000_000;
const BPS: u64 = 10_000;
const DAY_MS: i64 = 86_400_000;

/// One piece of settled work a member was paid for: a paid call or a milestone.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Work {
    /// Who paid for it.
    pub buyer: MemberId,
    pub amount_minor: u64,
    pub at: Timestamp,
    /// How much of it stood: 10 000 unless a dispute refunded some or all of it.
    pub quality_bps: u32,
}

/// A dispute mark against a seller, counted in the figures.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Mark {
    Filed,
    Lost,
    Won,
    Split,
    Refund,
}

/// Everything the fold knows about one member as a seller.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Record {
    /// Keyed by the work's subject key (see [`Subject::key`]).
    pub work: BTreeMap<String, Work>,
    marks: Vec<(Timestamp, Mark)>,
    stake_locked: u64,
    stake_withdrawn: u64,
    slashed: u64,
    slash_count: u64,
}

pub use bazaar_wire::reputation::{Combined, Figures, Imported, StakeFigures};

/// The fold: feed it every event in order, then ask for any member's figures.
/// It can be written down at the seq it has reached ([`Ledger::snapshot`]) and
/// taken up again there ([`Ledger::restore`]), so a node folds forward from a
/// snapshot instead of from genesis.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Ledger {
    /// The last event observed.
    pub seq: u64,
    pub head: String,
    owners: HashMap<MemberId, MemberId>,
    contract_buyers: HashMap<ContractId, MemberId>,
    records: HashMap<MemberId, Record>,
    /// Passports issued per subject on its latest UTC day of issue: (day, count).
    passports: HashMap<MemberId, (i64, u32)>,
    /// Work entries and marks held across every record: counted as they are
    /// added, so [`Ledger::entries`] costs nothing to read.
    held: u64,
}

/// The shape of a written-down fold; bump it whenever [`Ledger`]'s fields change.
pub const SNAPSHOT_FORMAT: &str = "bazaar-rep-fold-v1";

/// A fold snapshot that cannot be taken up: the node folds from genesis instead.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum SnapshotError {
    /// Written by another version of the fold's shape or of the formula: its
    /// figures may follow other rules, so it is folded again from genesis.
    #[error("snapshot is {found}, this registry folds {expected}")]
    Stale { found: String, expected: String },
    #[error("snapshot does not decode: {0}")]
    Undecodable(String),
}

#[derive(Serialize, Deserialize)]
struct Written<L> {
    format: String,
    formula: String,
    fold: L,
}

/// The event's body as its capability's type, if it decodes as one.
fn body<T: serde::de::DeserializeOwned>(event: &Event) -> Option<T> {
    serde_json::from_value(event.body.clone()).ok()
}

/// The event kinds the fold reads, by the capability that writes each.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Input {
    Enrolled,
    Settlement,
    ContractCreated,
    MilestoneReleased,
    DisputeFiled,
    DisputeExecuted,
    PassportIssued,
    StakeLocked,
    StakeWithdrawn,
}

impl Input {
    fn of(kind: &str) -> Option<Input> {
        use crate::dispute::DisputeEvent as D;
        use crate::escrow::EscrowEvent as E;
        use crate::identity::IdentityEvent as I;
        use crate::pay::PayEvent as P;
        if let Some(kind) = I::parse(kind) {
            return matches!(kind, I::OwnerCreated | I::AgentEnrolled).then_some(Input::Enrolled);
        }
        if P::parse(kind) == Some(P::SettlementPosted) {
            return Some(Input::Settlement);
        }
        match E::parse(kind) {
            Some(E::ContractCreated) => return Some(Input::ContractCreated),
            Some(E::MilestoneReleased) => return Some(Input::MilestoneReleased),
            _ => {}
        }
        match D::parse(kind) {
            Some(D::DeskCreated) => Some(Input::Enrolled),
            Some(D::DisputeFiled) => Some(Input::DisputeFiled),
            Some(D::DisputeExecuted) => Some(Input::DisputeExecuted),
            Some(D::StakeLocked) => Some(Input::StakeLocked),
            Some(D::StakeWithdrawn) => Some(Input::StakeWithdrawn),
            _ => {
                (ReputationEvent::parse(kind) == Some(ReputationEvent::PassportIssued)).then_some(Input::PassportIssued)
            }
        }
    }
}

impl Ledger {
    pub fn new() -> Ledger {
        Ledger::default()
    }

    /// Whom `member` acts for: its owner if it is an agent, else itself.
    pub fn principal<'a>(&'a self, member: &'a MemberId) -> &'a MemberId {
        self.owners.get(member).unwrap_or(member)
    }

    /// Everything the fold holds, in entries (owners, contracts, records with
    /// their work and marks, passport counts): it grows with the ledger and
    /// has no other bound. Constant time.
    pub fn entries(&self) -> u64 {
        let maps = self.owners.len() + self.contract_buyers.len() + self.records.len() + self.passports.len();
        maps as u64 + self.held
    }

    /// The fold written down (JSON, tagged with [`SNAPSHOT_FORMAT`] and
    /// [`FORMULA`]) as of [`Ledger::seq`] and [`Ledger::head`].
    pub fn snapshot(&self) -> Vec<u8> {
        let written = Written { format: SNAPSHOT_FORMAT.into(), formula: FORMULA.into(), fold: self };
        serde_json::to_vec(&written).expect("the fold serializes")
    }

    /// Takes up a fold written by [`Ledger::snapshot`]; feed it the events after
    /// its `seq`. The caller checks `head` against its own ledger at that seq.
    pub fn restore(bytes: &[u8]) -> Result<Ledger, SnapshotError> {
        #[derive(Deserialize)]
        struct Tag {
            format: String,
            formula: String,
        }
        let tag: Tag = serde_json::from_slice(bytes).map_err(|e| SnapshotError::Undecodable(e.to_string()))?;
        let expected = format!("{SNAPSHOT_FORMAT}/{FORMULA}");
        let found = format!("{}/{}", tag.format, tag.formula);
        if found != expected {
            return Err(SnapshotError::Stale { found, expected });
        }
        let written: Written<Ledger> =
            serde_json::from_slice(bytes).map_err(|e| SnapshotError::Undecodable(e.to_string()))?;
        Ok(written.fold)
    }

    pub fn record(&self, member: &MemberId) -> Option<&Record> {
        self.records.get(member)
    }

    /// Folds one event in. Events must come in ledger order, each once. Each
    /// input is read as its capability's typed body; a body that does not
    /// decode as one (a hand-edited ledger) is passed over, as an unknown
    /// kind is — the chain check, not the fold, judges a ledger's integrity.
    pub fn observe(&mut self, event: &Event) {
        assert!(event.seq > self.seq, "events fold in order, each once");
        self.seq = event.seq;
        self.head = event.hash.clone();
        let kind = event.kind.as_str();
        match Input::of(kind) {
            Some(Input::Enrolled) => self.observe_enrolled(event),
            Some(Input::Settlement) => self.observe_settlement(event),
            Some(Input::ContractCreated) => {
                if let Some(created) = body::<ContractCreated>(event) {
                    self.contract_buyers.insert(created.contract, created.buyer);
                }
            }
            Some(Input::MilestoneReleased) => self.observe_release(event),
            Some(Input::DisputeFiled) => {
                if let Some(filed) = body::<DisputeFiled>(event) {
                    self.records.entry(filed.respondent).or_default().marks.push((event.at, Mark::Filed));
                    self.held += 1;
                }
            }
            Some(Input::DisputeExecuted) => self.observe_execution(event),
            Some(Input::PassportIssued) => self.observe_passport(event),
            Some(Input::StakeLocked) => {
                if let Some(locked) = body::<StakeLocked>(event) {
                    self.records.entry(locked.member).or_default().stake_locked += locked.locked_minor.0;
                }
            }
            Some(Input::StakeWithdrawn) => {
                if let Some(withdrawn) = body::<StakeWithdrawn>(event) {
                    self.records.entry(withdrawn.member).or_default().stake_withdrawn += withdrawn.withdrawn_minor.0;
                }
            }
            None => {}
        }
    }

    fn observe_enrolled(&mut self, event: &Event) {
        if let Some(Enrolled { id, owner: Some(owner), .. }) = body::<Enrolled>(event) {
            self.owners.insert(id, owner);
        }
    }

    fn observe_settlement(&mut self, event: &Event) {
        let Some(SettlementPosted { paid: posted, corridor, .. }) = body::<SettlementPosted>(event) else {
            return;
        };
        // A settlement this registry made for a peer's merchant counts on that merchant's own registry.
        if corridor.is_some() {
            return;
        }
        let key = Subject::Call { merchant: posted.merchant.clone(), order_id: posted.order_id }.key();
        let work =
            Work { buyer: posted.buyer, amount_minor: posted.amount_minor.0, at: event.at, quality_bps: BPS as u32 };
        if self.records.entry(posted.merchant).or_default().work.insert(key, work).is_none() {
            self.held += 1;
        }
    }

    fn observe_release(&mut self, event: &Event) {
        let Some(released) = body::<MilestoneReleased>(event) else { return };
        let Some(buyer) = self.contract_buyers.get(&released.contract).cloned() else { return };
        let key = Subject::Milestone { contract: released.contract, index: released.milestone }.key();
        let work = Work { buyer, amount_minor: released.amount_minor.0, at: event.at, quality_bps: BPS as u32 };
        if self.records.entry(released.seller).or_default().work.insert(key, work).is_none() {
            self.held += 1;
        }
    }

    fn observe_passport(&mut self, event: &Event) {
        if let Some(subject) = event.body.get("subject").and_then(|v| v.as_str()).map(MemberId::from) {
            let day = event.at.utc_day();
            let entry = self.passports.entry(subject).or_insert((day, 0));
            if entry.0 != day {
                *entry = (day, 0);
            }
            entry.1 += 1;
        }
    }

    fn observe_execution(&mut self, event: &Event) {
        let Some(executed) = body::<DisputeExecuted>(event) else { return };
        let refunded = executed.refunded_minor.0;
        let released = executed.released_minor.0;
        let slashed = executed.slashed_minor.0;
        self.held += 1 + u64::from(refunded > 0);
        let record = self.records.entry(executed.respondent).or_default();
        let mark = match executed.winner {
            Winner::Claimant => Mark::Lost,
            Winner::Split => Mark::Split,
            Winner::Respondent => Mark::Won,
        };
        record.marks.push((event.at, mark));
        if refunded > 0 {
            record.marks.push((event.at, Mark::Refund));
        }
        if slashed > 0 {
            record.slashed += slashed;
            record.slash_count += 1;
        }
        let key = executed.subject.key();
        match record.work.get_mut(&key) {
            Some(work) => {
                let kept = work.amount_minor.saturating_sub(refunded);
                work.quality_bps = work.quality_bps.min(share_bps(kept, work.amount_minor) as u32);
            }
            None => {
                // Work disputed before it was ever released: judged by the ruling alone.
                let amount = refunded + released;
                if amount > 0 {
                    let quality_bps = share_bps(released, amount) as u32;
                    let work = Work { buyer: executed.claimant, amount_minor: amount, at: event.at, quality_bps };
                    record.work.insert(key, work);
                }
            }
        }
    }

    /// Passports issued to `member` on the UTC day of `now`.
    pub fn passports_on(&self, member: &MemberId, now: Timestamp) -> u32 {
        match self.passports.get(member) {
            Some((day, count)) if *day == now.utc_day() => *count,
            _ => 0,
        }
    }

    /// The member's stake record (never part of the score).
    pub fn stake(&self, member: &MemberId) -> StakeFigures {
        let record = self.records.get(member).cloned().unwrap_or_default();
        let locked = record.stake_locked.saturating_sub(record.stake_withdrawn).saturating_sub(record.slashed);
        StakeFigures {
            locked_minor: locked.to_string(),
            slashed_minor: record.slashed.to_string(),
            slash_count: record.slash_count,
        }
    }

    /// The member's figures as of `now`.
    pub fn figures(&self, member: &MemberId, now: Timestamp) -> Figures {
        let empty = Record::default();
        let record = self.records.get(member).unwrap_or(&empty);
        let own = self.principal(member);
        let work = record.work.values().map(|w| (self.principal(&w.buyer).clone(), w.clone()));
        compute(own, work, &record.marks, now)
    }
}

/// `part / whole` in basis points, rounded down; a zero whole counts as all.
fn share_bps(part: u64, whole: u64) -> u64 {
    if whole == 0 {
        return BPS;
    }
    ((part.min(whole) as u128 * BPS as u128) / whole as u128) as u64
}

/// The weight of work `age_days` old: 2^(−age/half-life), rounded to ppm.
pub fn decay_ppm(age_days: i64) -> u64 {
    let age = age_days.max(0) as f64;
    ((-age / REPUTATION_HALF_LIFE_DAYS as f64).exp2() * PPM as f64).round() as u64
}

/// The ISO week (Monday-based) an instant falls in, counted from the epoch.
pub fn iso_week(at: Timestamp) -> i64 {
    // 1970-01-01 was a Thursday: shifting by 3 days puts Monday at the start of each week.
    (at.utc_day() + 3).div_euclid(7)
}

/// ⌊10 000 · (r + 1) / (r + s + 2)⌋ with r and s in ppm.
pub fn score_bps(r_ppm: u64, s_ppm: u64) -> u64 {
    ((BPS as u128 * (r_ppm as u128 + PPM as u128)) / (r_ppm as u128 + s_ppm as u128 + 2 * PPM as u128)) as u64
}

/// Wilson 95 % lower bound of `successes / (successes + failures)`, in basis points.
pub fn wilson_lower_bps(successes: f64, failures: f64) -> u64 {
    let n = successes + failures;
    if n <= 0.0 {
        return 0;
    }
    let z = 1.96_f64;
    let p = successes / n;
    let centre = p + z * z / (2.0 * n);
    let margin = z * ((p * (1.0 - p) + z * z / (4.0 * n)) / n).sqrt();
    let bound = ((centre - margin) / (1.0 + z * z / n)).clamp(0.0, 1.0);
    (bound * BPS as f64).floor() as u64
}

/// The formula itself, over (buyer's owner, work) pairs and dispute marks.
/// `own` is the seller's owner: work whose buyer has the same owner never counts.
pub fn compute(
    own: &MemberId,
    work: impl IntoIterator<Item = (MemberId, Work)>,
    marks: &[(Timestamp, Mark)],
    now: Timestamp,
) -> Figures {
    let cutoff = Timestamp(now.ms().saturating_sub(REPUTATION_WINDOW_DAYS * DAY_MS));
    let in_window = |at: Timestamp| at >= cutoff && at <= now;
    let mut figures = empty_figures(now);
    // Per (buyer owner, ISO week): decayed success sum, undecayed success sum (bps).
    let mut groups: BTreeMap<(MemberId, i64), (u64, u64)> = BTreeMap::new();
    let mut volume_by_owner: BTreeMap<MemberId, u128> = BTreeMap::new();
    let mut volume: u128 = 0;
    let mut failure_ppm: u64 = 0;
    let mut failure_units_bps: u64 = 0;
    for (owner, w) in work {
        if !in_window(w.at) {
            continue;
        }
        if &owner == own {
            figures.excluded_same_owner += 1;
            continue;
        }
        let q = (w.quality_bps as u64).min(BPS);
        figures.settled_count += 1;
        if q == BPS {
            figures.success_count += 1;
        } else {
            figures.failure_count += 1;
        }
        volume += w.amount_minor as u128;
        *volume_by_owner.entry(owner.clone()).or_default() += w.amount_minor as u128;
        let d = decay_ppm((now.ms() - w.at.ms()).div_euclid(DAY_MS));
        failure_ppm += d * (BPS - q) / BPS;
        failure_units_bps += BPS - q;
        let group = groups.entry((owner, iso_week(w.at))).or_default();
        group.0 += d * q / BPS;
        group.1 += q;
    }
    let (success_ppm, success_units_bps) = capped_successes(&groups, now);
    count_marks(&mut figures, marks, in_window);
    figures.settled_volume_minor = volume.to_string();
    figures.distinct_buyer_owners = volume_by_owner.len() as u64;
    let top = volume_by_owner.values().copied().max().unwrap_or(0);
    figures.top_buyer_share_bps = (top * BPS as u128).checked_div(volume).unwrap_or(0) as u64;
    figures.weighted_success_ppm = success_ppm;
    figures.weighted_failure_ppm = failure_ppm;
    figures.score_bps = score_bps(success_ppm, failure_ppm);
    figures.score_lower_bound_bps =
        wilson_lower_bps(success_units_bps as f64 / BPS as f64, failure_units_bps as f64 / BPS as f64);
    figures
}

/// Local figures plus imported ones, each counted at its weight.
pub fn combine(local: &Figures, imported: &[Imported]) -> Combined {
    let mut r = local.weighted_success_ppm as u128;
    let mut s = local.weighted_failure_ppm as u128;
    for import in imported {
        let weight = import.weight_bps.min(BPS) as u128;
        r += import.weighted_success_ppm as u128 * weight / BPS as u128;
        s += import.weighted_failure_ppm as u128 * weight / BPS as u128;
    }
    let (r, s) = (r.min(u64::MAX as u128) as u64, s.min(u64::MAX as u128) as u64);
    Combined { weighted_success_ppm: r, weighted_failure_ppm: s, score_bps: score_bps(r, s) }
}

/// A `passport.issued` event's claim: these figures, for this subject, as of that seq.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct IssuedFigures {
    pub subject: MemberId,
    pub as_of_seq: u64,
    pub figures: Figures,
}

impl IssuedFigures {
    pub fn from_event(event: &Event) -> Option<IssuedFigures> {
        if ReputationEvent::parse(&event.kind) != Some(ReputationEvent::PassportIssued) {
            return None;
        }
        serde_json::from_value(event.body.clone()).ok()
    }
}

/// Checks recorded figures against a recompute from scratch. Feed every event
/// twice: first to [`PassportAudit::collect`], then to [`PassportAudit::check`].
#[derive(Debug, Default)]
pub struct PassportAudit {
    /// Claims by the seq they were computed at.
    claims: BTreeMap<u64, Vec<(u64, IssuedFigures)>>,
    ledger: Ledger,
    pub checked: u64,
    pub problems: Vec<String>,
}

impl PassportAudit {
    pub fn new() -> PassportAudit {
        PassportAudit::default()
    }

    pub fn collect(&mut self, page: &[Event]) {
        for event in page {
            if let Some(claim) = IssuedFigures::from_event(event) {
                self.claims.entry(claim.as_of_seq).or_default().push((event.seq, claim));
            } else if event.kind == "passport.issued" {
                self.problems.push(format!("event {}: passport.issued body does not parse", event.seq));
            }
        }
    }

    fn check_at(&mut self, seq: u64) {
        if let Some(claims) = self.claims.remove(&seq) {
            for (at_event, claim) in claims {
                let recomputed = self.ledger.figures(&claim.subject, Timestamp(claim.figures.computed_at_ms));
                self.checked += 1;
                if recomputed != claim.figures {
                    self.problems.push(format!(
                        "passport at event {at_event} for {}: recorded figures differ from a recompute at seq {seq}",
                        claim.subject
                    ));
                }
            }
        }
    }

    pub fn check(&mut self, page: &[Event]) {
        if self.ledger.seq == 0 {
            self.check_at(0);
        }
        for event in page {
            self.ledger.observe(event);
            self.check_at(event.seq);
        }
    }

    pub fn finish(mut self) -> (u64, Vec<String>) {
        let left: Vec<u64> = self.claims.keys().copied().collect();
        for seq in left {
            self.problems.push(format!("passport figures claim seq {seq}, beyond the ledger's head"));
        }
        (self.checked, self.problems)
    }
}

/// All zeros, computed at `now`.
fn empty_figures(now: Timestamp) -> Figures {
    Figures {
        formula: FORMULA.into(),
        window_days: REPUTATION_WINDOW_DAYS,
        computed_at_ms: now.ms(),
        settled_count: 0,
        success_count: 0,
        failure_count: 0,
        settled_volume_minor: String::new(),
        excluded_same_owner: 0,
        disputes_filed: 0,
        disputes_lost: 0,
        disputes_won: 0,
        disputes_split: 0,
        refunds: 0,
        distinct_buyer_owners: 0,
        top_buyer_share_bps: 0,
        weighted_success_ppm: 0,
        weighted_failure_ppm: 0,
        score_bps: 0,
        score_lower_bound_bps: 0,
    }
}

/// At most `REPUTATION_SUCCESSES_PER_OWNER_WEEK` successes per (buyer owner,
/// ISO week): returns the capped decayed sum (ppm) and the capped raw units (bps).
fn capped_successes(groups: &BTreeMap<(MemberId, i64), (u64, u64)>, now: Timestamp) -> (u64, u64) {
    let cap = REPUTATION_SUCCESSES_PER_OWNER_WEEK;
    let mut success_ppm: u64 = 0;
    let mut success_units_bps: u64 = 0;
    for ((_, week), (decayed, units)) in groups {
        // The cap is aged from the week's last day (or now, for this week), so it
        // depends only on which week it is and a single job is never cut by it.
        let week_end_day = (week * 7 - 3 + 6).min(now.utc_day());
        let cap_ppm = cap * decay_ppm(now.utc_day() - week_end_day);
        success_ppm += (*decayed).min(cap_ppm);
        success_units_bps += (*units).min(cap * BPS);
    }
    (success_ppm, success_units_bps)
}

/// Dispute marks inside the window, by kind.
fn count_marks(figures: &mut Figures, marks: &[(Timestamp, Mark)], in_window: impl Fn(Timestamp) -> bool) {
    for (at, mark) in marks {
        if !in_window(*at) {
            continue;
        }
        match mark {
            Mark::Filed => figures.disputes_filed += 1,
            Mark::Lost => figures.disputes_lost += 1,
            Mark::Won => figures.disputes_won += 1,
            Mark::Split => figures.disputes_split += 1,
            Mark::Refund => figures.refunds += 1,
        }
    }
}

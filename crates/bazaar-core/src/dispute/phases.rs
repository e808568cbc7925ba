//! Disputes in four phases, bound to a settled paid call or a milestone, and
//! the merchant stake a ruling can reach.
//!
//! ```text
//! filed ──respondent answers──► evidence ──deadline──► ruling ──ruled──► appealable ──deadline──► executed
//!   │ respondent silent past deadline: default ruling for the claimant ──────────────────────────► executed
//!                                     ruling ◄──appeal (once, with a bond)── appealable
//!                                     ruling, round 2 ──ruled──────────────────────────────────► executed
//!                                     ruling past deadline: arbiter replaced, deadline renewed
//! ```
//!
//! Filing freezes the disputed amount at once: an unreleased milestone stays
//! held (and cannot be released); otherwise a hold on the merchant's balance
//! and, where that is short, on its stake. Execution is one batch that runs
//! once: refund, release, bond and slash transfers with ids derived from the
//! dispute, so even a second run the core let through would collide in the
//! database.
//!
//! A refund is paid from the frozen balance first, then from the frozen stake;
//! the stake-funded part is the first part of the slash (restitution to the
//! claimant). Whatever the ruling's slash names beyond that comes from the
//! stake left, bounded by what is there: first to the claimant for any refund
//! the frozen units could not cover, the rest to the insurance account.

use super::events::{DisputeExecuted, Winner};
use super::DisputeEvent;
use crate::crypto::sha256_hex;
use crate::escrow::{milestone_hold, ContractState, MilestoneState};
use crate::kernel::batch::{merge, refuse, Batch, Step};
use crate::kernel::docs::Document;
use crate::kernel::model::*;
use crate::kernel::refusal::{Code, Refusal};
use crate::kernel::request::Caller;
use bazaar_types::limits::{APPEAL_BOND_BPS, APPEAL_BOND_MIN_MINOR, REASONS_LEN_MAX};
use bazaar_types::{AccountId, Amount, HoldId, MemberId, OrderId, Timestamp, TransferId};
use serde::{Deserialize, Serialize};
use serde_json::json;

/// Phase deadlines, in seconds. A registry may set its own within the bounds in `limits`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Windows {
    pub claim_s: u64,
    pub answer_s: u64,
    pub evidence_s: u64,
    pub ruling_s: u64,
    pub appeal_s: u64,
    pub stake_cooldown_s: u64,
}

impl Windows {
    pub fn standard() -> Windows {
        use bazaar_types::limits::*;
        Windows {
            claim_s: DISPUTE_CLAIM_WINDOW_S,
            answer_s: DISPUTE_ANSWER_S,
            evidence_s: DISPUTE_EVIDENCE_S,
            ruling_s: DISPUTE_RULING_S,
            appeal_s: DISPUTE_APPEAL_S,
            stake_cooldown_s: STAKE_COOLDOWN_S,
        }
    }
}

/// What a dispute is about.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Subject {
    Call { merchant: MemberId, order_id: OrderId },
    Milestone { contract: String, index: u32 },
}

impl Subject {
    pub fn key(&self) -> String {
        match self {
            Subject::Call { merchant, order_id } => format!("call\n{merchant}\n{order_id}"),
            Subject::Milestone { contract, index } => format!("milestone\n{contract}\n{index}"),
        }
    }
}

/// One dispute per subject, ever: the id is derived from it.
pub fn dispute_id_for(subject: &Subject) -> String {
    format!("dsp_{}", &sha256_hex(format!("bazaar-dispute-v1\n{}", subject.key()).as_bytes())[..32])
}

pub fn dispute_holds(id: &str) -> [HoldId; 3] {
    [HoldId(format!("hold_{id}_bal")), HoldId(format!("hold_{id}_stk")), HoldId(format!("hold_{id}_bond"))]
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ReasonCode {
    NotDelivered,
    NotAsDescribed,
    Defective,
    Unauthorized,
    Other,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Phase {
    Filed,
    Evidence,
    Ruling,
    Appealable,
    Executed,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Decision {
    RefundFull,
    RefundPartial,
    Reject,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Ruling {
    pub round: u8,
    /// `None` for a default ruling against a silent respondent.
    pub arbiter: Option<MemberId>,
    pub decision: Decision,
    pub refund: Amount,
    pub slash: Amount,
    pub reasons: String,
    pub at: Timestamp,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Evidence {
    pub seq: u32,
    pub author: MemberId,
    /// `claimant` or `respondent`.
    pub side: Side,
    pub sha256: String,
    pub url: Option<String>,
    pub signature: String,
    pub at: Timestamp,
}

/// What filing froze, and from where.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Frozen {
    /// Still held in escrow (an unreleased milestone).
    pub escrow: Amount,
    pub balance: Amount,
    pub stake: Amount,
}

impl Frozen {
    pub fn total(&self) -> Amount {
        Amount(self.escrow.0 + self.balance.0 + self.stake.0)
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Appeal {
    pub by: MemberId,
    pub side: Side,
    pub bond: Amount,
    pub at: Timestamp,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TimelineEntry {
    pub phase: Phase,
    pub at: Timestamp,
    pub note: String,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Dispute {
    pub id: String,
    pub subject: Subject,
    pub claimant: MemberId,
    pub respondent: MemberId,
    pub filed_by: MemberId,
    pub reason: ReasonCode,
    pub note: String,
    pub claimed: Amount,
    /// What the claimant paid for the subject: the most a ruling can refund.
    pub at_risk: Amount,
    pub frozen: Frozen,
    pub phase: Phase,
    pub deadline: Option<Timestamp>,
    pub round: u8,
    pub arbiter: Option<MemberId>,
    pub arbiters_used: Vec<MemberId>,
    pub responded: bool,
    pub evidence: Vec<Evidence>,
    pub rulings: Vec<Ruling>,
    pub appeal: Option<Appeal>,
    pub outcome: Option<serde_json::Value>,
    pub timeline: Vec<TimelineEntry>,
    pub filed_at: Timestamp,
}

impl Dispute {
    pub fn view(&self) -> serde_json::Value {
        serde_json::to_value(self).expect("disputes serialize")
    }
    pub(crate) fn enter(&mut self, phase: Phase, at: Timestamp, deadline: Option<Timestamp>, note: impl Into<String>) {
        self.phase = phase;
        self.deadline = deadline;
        self.timeline.push(TimelineEntry { phase, at, note: note.into() });
    }
}

/// A merchant's stake record; the units themselves sit in `stake:<did>`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Stake {
    pub member: MemberId,
    pub open_disputes: u32,
    pub unlock: Option<Unlock>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Unlock {
    pub amount: Amount,
    pub requested_at: Timestamp,
    pub available_at: Timestamp,
}

/// A member's stake as the API shows it: the account's balance and frozen part, and the record.
pub fn stake_view(member: &MemberId, account: Option<&Account>, stake: &Stake) -> serde_json::Value {
    json!({"member": member, "balance_minor": account.map(|a| a.balance()).unwrap_or(0) as i64,
        "frozen_minor": account.map(|a| a.debits_pending).unwrap_or(0),
        "open_disputes": stake.open_disputes, "unlock": stake.unlock})
}

impl Document for Dispute {
    const KIND: DocKind = DocKind::Dispute;
    const VERSION: u32 = 1;
    fn doc_id(&self) -> String {
        self.id.clone()
    }
    fn parties(&self) -> Vec<MemberId> {
        vec![self.claimant.clone(), self.respondent.clone()]
    }
    fn due_at(&self) -> Option<Timestamp> {
        if self.phase == Phase::Executed {
            None
        } else {
            self.deadline
        }
    }
}

impl Document for Stake {
    const KIND: DocKind = DocKind::Stake;
    const VERSION: u32 = 1;
    fn doc_id(&self) -> String {
        self.member.to_string()
    }
    fn parties(&self) -> Vec<MemberId> {
        vec![self.member.clone()]
    }
}

impl Stake {
    /// The record of a member who never staked.
    pub fn empty(member: &MemberId) -> Stake {
        Stake { member: member.clone(), open_disputes: 0, unlock: None }
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "act", rename_all = "snake_case")]
pub enum DisputeAct {
    /// `signature` is Ed25519 by the author's did:key over [`evidence_message`].
    Evidence {
        sha256: String,
        url: Option<String>,
        signature: String,
    },
    Rule {
        decision: Decision,
        refund: Amount,
        slash: Amount,
        reasons: String,
    },
    Appeal,
    /// Runs a final ruling; a second call is refused with the outcome attached.
    Execute,
    /// The sweeper: act on a phase whose deadline passed.
    Advance,
}

impl DisputeAct {
    pub fn name(&self) -> &'static str {
        match self {
            DisputeAct::Evidence { .. } => "dispute_evidence",
            DisputeAct::Rule { .. } => "dispute_rule",
            DisputeAct::Appeal => "dispute_appeal",
            DisputeAct::Execute => "dispute_execute",
            DisputeAct::Advance => "dispute_advance",
        }
    }
}

/// A party's side in a dispute, as stored on evidence and appeals.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Side {
    Claimant,
    Respondent,
}

/// The bytes an evidence author signs.
pub fn evidence_message(dispute: &str, sha256: &str) -> Vec<u8> {
    format!("bazaar-evidence-v1.{dispute}.{sha256}").into_bytes()
}

pub fn appeal_bond(claimed: Amount) -> Amount {
    Amount(claimed.fee_bps(APPEAL_BOND_BPS).0.max(APPEAL_BOND_MIN_MINOR))
}

impl Batch<'_> {
    pub(crate) fn dispute(&self, id: &str) -> Option<Dispute> {
        self.load::<Dispute>(id)
    }

    pub(crate) fn insert_dispute(&mut self, dispute: &Dispute) {
        self.insert(dispute);
    }

    pub(crate) fn update_dispute(&mut self, dispute: &Dispute) {
        self.update(dispute);
    }

    pub(crate) fn stake_record(&self, member: &MemberId) -> Stake {
        self.load::<Stake>(member.as_str()).unwrap_or_else(|| Stake::empty(member))
    }

    pub(crate) fn put_stake(&mut self, stake: &Stake) {
        self.upsert(stake);
    }

    pub(crate) fn available(&self, account: &AccountId) -> Amount {
        Amount(self.snap.accounts.get(account).map(|a| a.available().max(0) as u64).unwrap_or(0))
    }

    /// Acts for `member`: the member itself or its owner.
    pub(crate) fn acts_for(&self, command: &Caller<'_>, member: &MemberId) -> bool {
        command.actor.id == *member
            || self.snap.members.get(member).and_then(|m| m.owner.as_ref()) == Some(&command.actor.id)
    }

    pub(crate) fn file_dispute(
        &mut self,
        command: &Caller<'_>,
        subject: &Subject,
        (claimant, respondent): (&MemberId, &MemberId),
        reason: ReasonCode,
        claimed: Amount,
        note: &str,
        windows: &Windows,
    ) -> Step {
        if note.len() > REASONS_LEN_MAX {
            return refuse(Code::InvalidRequest, "The note is longer than the registry accepts.");
        }
        let id = dispute_id_for(subject);
        if let Some(existing) = self.dispute(&id) {
            return Err(Refusal::new(
                Code::DisputeExists,
                "This call or milestone already has a dispute; each is disputed once. It is attached.",
            )
            .with(json!({"dispute": existing.id, "phase": existing.phase})));
        }
        // What was paid, by whom, and when the claim window closes.
        let (at_risk, paid_at, escrowed) = match subject {
            Subject::Call { merchant, order_id } => {
                let Some(settlement) = self.snap.settlements_by_order.get(&(merchant.clone(), order_id.clone())) else {
                    return refuse(
                        Code::NotDisputable,
                        "No settled paid call with this merchant and order id; only a paid call can be disputed.",
                    );
                };
                if &settlement.buyer != claimant || &settlement.merchant != respondent {
                    return refuse(Code::NotDisputable, "Only the buyer of a paid call can dispute it.");
                }
                (settlement.amount, Some(settlement.settled_at), false)
            }
            Subject::Milestone { contract, index } => {
                let Some(c) = self.contract(contract) else {
                    return refuse(Code::ContractNotFound, "No such contract.");
                };
                if &c.buyer != claimant || &c.seller != respondent {
                    return refuse(Code::NotDisputable, "Only the buyer of a contract can dispute its milestones.");
                }
                let Some(m) = c.milestones.get(*index as usize) else {
                    return refuse(Code::MilestoneNotFound, "No such milestone in this contract.");
                };
                match (c.state, m.state) {
                    (ContractState::Accepted, MilestoneState::Pending | MilestoneState::Delivered) => {
                        (m.amount, None, true)
                    }
                    (_, MilestoneState::Released) => (m.amount, m.released_at, false),
                    _ => {
                        return Err(Refusal::new(
                            Code::NotDisputable,
                            "Only a milestone of an accepted contract, or a released one, can be disputed.",
                        )
                        .with(json!({"contract_state": c.state, "milestone_state": m.state})))
                    }
                }
            }
        };
        if !self.acts_for(command, claimant) {
            return refuse(Code::NotParty, "Only the buyer (or its owner) files a dispute on its purchase.");
        }
        if let Some(paid_at) = paid_at {
            let closes = paid_at.plus_s(windows.claim_s);
            if self.now >= closes {
                return Err(Refusal::new(Code::ClaimWindowClosed, "The window to dispute this payment has closed.")
                    .with(json!({"closed_at_ms": closes})));
            }
        }
        if claimed.0 == 0 || claimed > at_risk {
            return Err(Refusal::new(Code::AmountInvalid, "Claim between 1 and what was paid.")
                .with(json!({"claimed_minor": claimed, "at_risk_minor": at_risk})));
        }
        // Freeze.
        let mut frozen = Frozen::default();
        let [balance_hold, stake_hold, _] = dispute_holds(&id);
        if escrowed {
            let Subject::Milestone { contract, index } = subject else { unreachable!() };
            let mut c = self.contract(contract).expect("checked above");
            let m = &mut c.milestones[*index as usize];
            m.state = MilestoneState::Disputed;
            m.dispute = Some(id.clone());
            self.update_contract(&c);
            frozen.escrow = claimed;
        } else {
            let balance_account = AccountId::of_member(respondent);
            let stake_account = AccountId::stake_of(respondent);
            frozen.balance = Amount(claimed.0.min(self.available(&balance_account).0));
            frozen.stake = Amount((claimed.0 - frozen.balance.0).min(self.available(&stake_account).0));
            if frozen.balance.0 > 0 {
                self.open_hold(balance_hold, balance_account, frozen.balance, Timestamp::NEVER);
            }
            if frozen.stake.0 > 0 {
                self.open_hold(stake_hold, stake_account, frozen.stake, Timestamp::NEVER);
            }
        }
        let mut stake = self.stake_record(respondent);
        stake.open_disputes += 1;
        self.put_stake(&stake);
        let deadline = self.now.plus_s(windows.answer_s);
        let mut dispute = Dispute {
            id: id.clone(),
            subject: subject.clone(),
            claimant: claimant.clone(),
            respondent: respondent.clone(),
            filed_by: command.actor.id.clone(),
            reason,
            note: note.to_string(),
            claimed,
            at_risk,
            frozen,
            phase: Phase::Filed,
            deadline: None,
            round: 1,
            arbiter: None,
            arbiters_used: Vec::new(),
            responded: false,
            evidence: Vec::new(),
            rulings: Vec::new(),
            appeal: None,
            outcome: None,
            timeline: Vec::new(),
            filed_at: self.now,
        };
        dispute.enter(Phase::Filed, self.now, Some(deadline), "filed; the respondent must answer by the deadline");
        self.insert_dispute(&dispute);
        let filed = super::events::DisputeFiled {
            dispute: id.clone(),
            subject: subject.clone(),
            claimant: claimant.clone(),
            respondent: respondent.clone(),
        };
        let mut event = serde_json::to_value(filed).expect("event bodies serialize");
        merge(
            &mut event,
            json!({"reason": reason, "claimed_minor": claimed, "frozen": frozen, "answer_by_ms": deadline}),
        );
        self.event(command, DisputeEvent::DisputeFiled, event);
        Ok(dispute.view())
    }

    /// Picks the next arbiter: the contract's own (first round of a milestone
    /// dispute), then the dispute desk, then the operator — never one used
    /// before in this dispute unless none is left, and never a party.
    pub(crate) fn assign_arbiter(&self, dispute: &mut Dispute, ruling_s: u64, note: &str) {
        let mut candidates = Vec::new();
        if let Subject::Milestone { contract, .. } = &dispute.subject {
            if let Some(c) = self.contract(contract) {
                candidates.push(c.arbiter);
            }
        }
        candidates.push(MemberId(DESK_ID.into()));
        candidates.push(MemberId(OPERATOR_ID.into()));
        candidates.retain(|c| c != &dispute.claimant && c != &dispute.respondent);
        let fresh = candidates.iter().find(|c| !dispute.arbiters_used.contains(c)).cloned();
        let chosen = fresh.unwrap_or_else(|| candidates.last().expect("the operator is never a party").clone());
        dispute.arbiters_used.push(chosen.clone());
        dispute.arbiter = Some(chosen);
        let deadline = self.now.plus_s(ruling_s);
        dispute.enter(Phase::Ruling, self.now, Some(deadline), note);
    }

    /// The final ruling, executed in one batch. Runs once: the phase guard
    /// here, and transfer ids derived from the dispute id in the database.
    pub(crate) fn execute(&mut self, command: &Caller<'_>, mut dispute: Dispute) -> Step {
        assert!(dispute.phase != Phase::Executed);
        let ruling = dispute.rulings.last().expect("executing a ruling").clone();
        let id = dispute.id.clone();
        let claimant_account = AccountId::of_member(&dispute.claimant);
        let stake_account = AccountId::stake_of(&dispute.respondent);
        let [balance_hold, stake_hold, bond_hold] = dispute_holds(&id);
        let mut transfers: Vec<TransferId> = Vec::new();
        let mut refunded = Amount::ZERO;
        let mut released = Amount::ZERO;
        if dispute.frozen.escrow.0 > 0 {
            let Subject::Milestone { contract, index } = &dispute.subject else {
                unreachable!("escrow is a milestone")
            };
            let mut c = self.contract(contract).expect("the disputed contract is loaded");
            let m = c.milestones[*index as usize].clone();
            assert_eq!(m.state, MilestoneState::Disputed);
            let hold = self.snap.holds.get(&milestone_hold(contract, *index)).cloned().expect("milestone hold loaded");
            let refund = Amount(ruling.refund.0.min(m.amount.0));
            let pay = m.amount.checked_sub(refund).expect("refund within milestone");
            let fee = pay.fee_bps(self.config.fee_bps);
            let net = pay.checked_sub(fee).expect("fee within amount");
            let legs = [
                (AccountId::of_member(&c.seller), net, TransferKind::Release, TransferId(format!("tr_{id}_rel"))),
                (AccountId::fees(), fee, TransferKind::Fee, TransferId(format!("tr_{id}_fee"))),
            ];
            let (_, ids) = self.post_hold(command, hold, &legs, Some(&c.buyer));
            transfers.extend(ids);
            c.released_net = c.released_net.checked_add(net).expect("within total");
            c.fees = c.fees.checked_add(fee).expect("within total");
            c.refunded = c.refunded.checked_add(refund).expect("within total");
            let slot = &mut c.milestones[*index as usize];
            slot.state = MilestoneState::Resolved;
            self.maybe_complete(&mut c);
            self.update_contract(&c);
            refunded = refund;
            released = pay;
        }
        // Frozen balance first, then frozen stake. The stake-funded part of the
        // refund is the first part of the slash (restitution to the claimant).
        let mut to_refund = ruling.refund.checked_sub(refunded).unwrap_or(Amount::ZERO);
        let mut to_claimant = Amount::ZERO;
        for (hold_id, frozen, suffix) in [
            (&balance_hold, dispute.frozen.balance, "refund_bal"),
            (&stake_hold, dispute.frozen.stake, "slash_claimant"),
        ] {
            if frozen.0 == 0 {
                continue;
            }
            let hold = self.snap.holds.get(hold_id).cloned().expect("freeze holds are loaded");
            let part = Amount(to_refund.0.min(frozen.0));
            let kind = if hold_id == &stake_hold { TransferKind::Slash } else { TransferKind::Refund };
            let legs = [(claimant_account.clone(), part, kind, TransferId(format!("tr_{id}_{suffix}")))];
            let (_, ids) = self.post_hold(command, hold, &legs, None);
            transfers.extend(ids);
            to_refund = to_refund.checked_sub(part).expect("part within");
            refunded = refunded.checked_add(part).expect("bounded");
            if hold_id == &stake_hold {
                to_claimant = part;
            }
        }
        let shortfall = to_refund;
        // The rest of the slash the ruling names comes from the stake left: first
        // to the claimant for any refund still short, then to insurance.
        let beyond = ruling.slash.checked_sub(to_claimant).unwrap_or(Amount::ZERO);
        let extra = Amount(beyond.0.min(self.available(&stake_account).0));
        let made_good = Amount(extra.0.min(shortfall.0));
        let to_insurance = extra.checked_sub(made_good).expect("within extra");
        let to_claimant = to_claimant.checked_add(made_good).expect("bounded");
        let slashed = to_claimant.checked_add(to_insurance).expect("bounded");
        for (credit, amount, suffix) in [
            (claimant_account.clone(), made_good, "slash_shortfall"),
            (AccountId::insurance(), to_insurance, "slash_insurance"),
        ] {
            if amount.0 > 0 {
                self.ensure_account(credit.clone());
                let tid = TransferId(format!("tr_{id}_{suffix}"));
                self.post_plain(command, tid.clone(), stake_account.clone(), credit, amount, TransferKind::Slash);
                transfers.push(tid);
            }
        }
        // The appeal bond: back to an appellant the second ruling favoured, else to the other side.
        let mut bond_outcome = serde_json::Value::Null;
        if let Some(appeal) = &dispute.appeal {
            let first = &dispute.rulings[dispute.rulings.len() - 2];
            let won = match appeal.side {
                Side::Claimant => ruling.refund > first.refund,
                Side::Respondent => ruling.refund < first.refund || ruling.slash < first.slash,
            };
            let hold = self.snap.holds.get(&bond_hold).cloned().expect("bond hold loaded");
            let other = if appeal.side == Side::Claimant { &dispute.respondent } else { &dispute.claimant };
            let legs = if won {
                vec![]
            } else {
                vec![(
                    AccountId::of_member(other),
                    appeal.bond,
                    TransferKind::Bond,
                    TransferId(format!("tr_{id}_bond")),
                )]
            };
            let (_, ids) = self.post_hold(command, hold, &legs, None);
            transfers.extend(ids);
            bond_outcome = json!({"by": appeal.by, "bond_minor": appeal.bond,
                "returned": won, "forfeited_to": if won { None } else { Some(other) }});
        }
        let mut stake = self.stake_record(&dispute.respondent);
        stake.open_disputes = stake.open_disputes.checked_sub(1).expect("an open dispute was counted");
        self.put_stake(&stake);
        let winner = match ruling.decision {
            Decision::RefundFull => Winner::Claimant,
            Decision::RefundPartial => Winner::Split,
            Decision::Reject => Winner::Respondent,
        };
        let executed = DisputeExecuted {
            dispute: id.clone(),
            subject: dispute.subject.clone(),
            claimant: dispute.claimant.clone(),
            respondent: dispute.respondent.clone(),
            winner,
            refunded_minor: refunded,
            released_minor: released,
            slashed_minor: slashed,
        };
        let mut outcome = serde_json::to_value(executed).expect("event bodies serialize");
        merge(
            &mut outcome,
            json!({"decision": ruling.decision, "default": ruling.arbiter.is_none(),
            "rounds": dispute.round, "shortfall_minor": shortfall, "slash_to_claimant_minor": to_claimant,
            "slash_to_insurance_minor": to_insurance, "bond": bond_outcome, "transfers": transfers,
            "executed_at_ms": self.now}),
        );
        dispute.outcome = Some(outcome.clone());
        dispute.enter(Phase::Executed, self.now, None, format!("executed: {}", winner.as_str()));
        self.update_dispute(&dispute);
        // The outcome event reputation is computed from.
        self.event(command, DisputeEvent::DisputeExecuted, outcome.clone());
        Ok(outcome)
    }
}

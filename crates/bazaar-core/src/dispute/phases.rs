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

use super::events::{DisputeFiled, DisputeFiledBody};
use crate::crypto::sha256_hex;
use crate::escrow::{ContractState, MilestoneState};
use crate::kernel::batch::{refuse, Batch};
use crate::kernel::model::*;
use crate::kernel::refusal::{Code, Refusal};
use crate::kernel::request::Caller;
use bazaar_types::limits::{APPEAL_BOND_BPS, APPEAL_BOND_MIN_MINOR, REASONS_LEN_MAX};
use bazaar_types::{AccountId, Amount, ContractId, DisputeId, HoldId, MemberId, OrderId, Timestamp};
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
    Milestone { contract: ContractId, index: u32 },
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
pub fn dispute_id_for(subject: &Subject) -> DisputeId {
    DisputeId(format!("dsp_{}", &sha256_hex(format!("bazaar-dispute-v1\n{}", subject.key()).as_bytes())[..32]))
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
    /// The bond counted against `by`'s budget (it appealed itself, an agent):
    /// a returned bond is then given back to it, as a voided hold is. Absent
    /// (false) on appeals made by an owner, or before bonds counted.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub budgeted: bool,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TimelineEntry {
    pub phase: Phase,
    pub at: Timestamp,
    pub note: String,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Dispute {
    pub id: DisputeId,
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
    /// Stake locked since locks counted against the budget, not yet given
    /// back by a withdrawal: a withdrawal gives back at most this, so stake
    /// locked before (never counted) is never given back, and slashed stake
    /// (never withdrawn) stays spent.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub budgeted: Amount,
}

fn is_zero(amount: &Amount) -> bool {
    amount.0 == 0
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Unlock {
    pub amount: Amount,
    pub requested_at: Timestamp,
    pub available_at: Timestamp,
}

/// A member's stake as the API shows it: the account's balance and frozen part, and the record.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct StakeView {
    pub member: MemberId,
    pub balance_minor: i64,
    pub frozen_minor: u64,
    pub open_disputes: u32,
    pub unlock: Option<Unlock>,
}

pub fn stake_view(member: &MemberId, account: Option<&Account>, stake: &Stake) -> StakeView {
    StakeView {
        member: member.clone(),
        balance_minor: account.map(|a| a.balance()).unwrap_or(0) as i64,
        frozen_minor: account.map(|a| a.debits_pending).unwrap_or(0),
        open_disputes: stake.open_disputes,
        unlock: stake.unlock.clone(),
    }
}

crate::document!(Dispute, Dispute, version 1,
    id = |d| d.id.to_string(),
    parties = |d| vec![d.claimant.clone(), d.respondent.clone()],
    due = |d| if d.phase == Phase::Executed { None } else { d.deadline },
);

crate::document!(Stake, Stake, version 1, id = |s| s.member.to_string(), parties = |s| vec![s.member.clone()]);

impl Stake {
    /// The record of a member who never staked.
    pub fn empty(member: &MemberId) -> Stake {
        Stake { member: member.clone(), open_disputes: 0, unlock: None, budgeted: Amount::ZERO }
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

/// A claim as filed: what is disputed, by whom, against whom, why and for how much.
pub(crate) struct Claim<'a> {
    pub subject: &'a Subject,
    pub claimant: &'a MemberId,
    pub respondent: &'a MemberId,
    pub reason: ReasonCode,
    pub claimed: Amount,
    pub note: &'a str,
}

/// What was paid for a disputed subject: the amount at risk, when it was paid
/// (none for a milestone still in escrow), and whether escrow still holds it.
struct Paid {
    at_risk: Amount,
    paid_at: Option<Timestamp>,
    escrowed: bool,
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
        claim: &Claim<'_>,
        windows: &Windows,
    ) -> Result<Dispute, Refusal> {
        if claim.note.len() > REASONS_LEN_MAX {
            return refuse(Code::InvalidRequest, "The note is longer than the registry accepts.");
        }
        // Who asks comes first: a stranger learns nothing of the subject, not even that it is disputed.
        if !self.acts_for(command, claim.claimant) {
            return refuse(Code::NotParty, "Only the buyer (or its owner) files a dispute on its purchase.");
        }
        let id = dispute_id_for(claim.subject);
        if let Some(existing) = self.dispute(&id).filter(|existing| existing.claimant == *claim.claimant) {
            return Err(Refusal::new(
                Code::DisputeExists,
                "This call or milestone already has a dispute; each is disputed once. It is attached.",
            )
            .with(json!({"dispute": existing.id, "phase": existing.phase})));
        }
        let paid = self.disputed_payment(claim)?;
        if let Some(paid_at) = paid.paid_at {
            let closes = paid_at.plus_s(windows.claim_s);
            if self.now >= closes {
                return Err(Refusal::new(Code::ClaimWindowClosed, "The window to dispute this payment has closed.")
                    .with(json!({"closed_at_ms": closes})));
            }
        }
        if claim.claimed.0 == 0 || claim.claimed > paid.at_risk {
            return Err(Refusal::new(Code::AmountInvalid, "Claim between 1 and what was paid.")
                .with(json!({"claimed_minor": claim.claimed, "at_risk_minor": paid.at_risk})));
        }
        let frozen = self.freeze(&id, claim, paid.escrowed);
        let mut stake = self.stake_record(claim.respondent);
        stake.open_disputes += 1;
        self.put_stake(&stake);
        Ok(self.open_dispute(command, id, claim, paid.at_risk, frozen, windows))
    }

    /// What was paid for the subject, by whom, and when the claim window opened.
    fn disputed_payment(&self, claim: &Claim<'_>) -> Result<Paid, Refusal> {
        match claim.subject {
            Subject::Call { merchant, order_id } => {
                let Some(settlement) = self.snap.settlements_by_order.get(&(merchant.clone(), order_id.clone())) else {
                    return refuse(
                        Code::NotDisputable,
                        "No settled paid call with this merchant and order id; only a paid call can be disputed.",
                    );
                };
                if &settlement.buyer != claim.claimant || &settlement.merchant != claim.respondent {
                    return refuse(Code::NotDisputable, "Only the buyer of a paid call can dispute it.");
                }
                Ok(Paid { at_risk: settlement.amount, paid_at: Some(settlement.settled_at), escrowed: false })
            }
            Subject::Milestone { contract, index } => {
                let Some(c) = self.contract(contract) else {
                    return refuse(Code::ContractNotFound, "No such contract.");
                };
                if &c.buyer != claim.claimant || &c.seller != claim.respondent {
                    return refuse(Code::NotDisputable, "Only the buyer of a contract can dispute its milestones.");
                }
                let Some(m) = c.milestones.get(*index as usize) else {
                    return refuse(Code::MilestoneNotFound, "No such milestone in this contract.");
                };
                match (c.state, m.state) {
                    (ContractState::Accepted, MilestoneState::Pending | MilestoneState::Delivered) => {
                        Ok(Paid { at_risk: m.amount, paid_at: None, escrowed: true })
                    }
                    (_, MilestoneState::Released) => {
                        Ok(Paid { at_risk: m.amount, paid_at: m.released_at, escrowed: false })
                    }
                    _ => Err(Refusal::new(
                        Code::NotDisputable,
                        "Only a milestone of an accepted contract, or a released one, can be disputed.",
                    )
                    .with(json!({"contract_state": c.state, "milestone_state": m.state}))),
                }
            }
        }
    }

    /// Freezes the claim: an escrowed milestone stays held; otherwise the
    /// respondent's balance, then its stake, are held for it.
    fn freeze(&mut self, id: &str, claim: &Claim<'_>, escrowed: bool) -> Frozen {
        let mut frozen = Frozen::default();
        let [balance_hold, stake_hold, _] = dispute_holds(id);
        if escrowed {
            let Subject::Milestone { contract, index } = claim.subject else { unreachable!() };
            let mut c = self.contract(contract).expect("checked above");
            let m = &mut c.milestones[*index as usize];
            m.state = MilestoneState::Disputed;
            m.dispute = Some(DisputeId(id.to_string()));
            self.update(&c);
            frozen.escrow = claim.claimed;
            return frozen;
        }
        let balance_account = AccountId::of_member(claim.respondent);
        let stake_account = AccountId::stake_of(claim.respondent);
        frozen.balance = Amount(claim.claimed.0.min(self.available(&balance_account).0));
        frozen.stake = Amount((claim.claimed.0 - frozen.balance.0).min(self.available(&stake_account).0));
        if frozen.balance.0 > 0 {
            self.open_hold(balance_hold, balance_account, frozen.balance, Timestamp::NEVER);
        }
        if frozen.stake.0 > 0 {
            self.open_hold(stake_hold, stake_account, frozen.stake, Timestamp::NEVER);
        }
        frozen
    }

    /// Writes the new dispute in its first phase and says so on the ledger.
    fn open_dispute(
        &mut self,
        command: &Caller<'_>,
        id: DisputeId,
        claim: &Claim<'_>,
        at_risk: Amount,
        frozen: Frozen,
        windows: &Windows,
    ) -> Dispute {
        let deadline = self.now.plus_s(windows.answer_s);
        let mut dispute = Dispute {
            id: id.clone(),
            subject: claim.subject.clone(),
            claimant: claim.claimant.clone(),
            respondent: claim.respondent.clone(),
            filed_by: command.actor.id.clone(),
            reason: claim.reason,
            note: claim.note.to_string(),
            claimed: claim.claimed,
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
        let filed = DisputeFiled {
            dispute: id,
            subject: claim.subject.clone(),
            claimant: claim.claimant.clone(),
            respondent: claim.respondent.clone(),
        };
        let body = DisputeFiledBody {
            filed,
            reason: claim.reason,
            claimed_minor: claim.claimed,
            frozen,
            answer_by_ms: deadline,
        };
        self.emit(command, &body);
        dispute
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
}

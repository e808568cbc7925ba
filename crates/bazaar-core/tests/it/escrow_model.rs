//! Model-based tests of escrowed contracts, four-phase disputes and merchant stake, driven the way a storage adapter
//! and the HTTP edge drive `apply_batch`, and checked after every step against the ledger's invariants and an
//! independent model.
//!
//! A fixed cast (registry, operator, dispute desk, three owners, five agents — the last one an independent arbiter)
//! trades through random steps: paid calls, contracts (some malformed), deliveries, releases (twice, by strangers),
//! reclaims of undelivered milestones (too early, after delivery, on disputed ones, racing a delivery or the sweeper's
//! auto-release in one batch),
//! the sweeper's advances, disputes on milestones in every state and on calls (by strangers, on unpaid orders),
//! signed and forged evidence, rulings by the arbiter, by parties and by bystanders, appeals in and after the window,
//! executions (twice), and stake locks, unlocks and withdrawals — while a clock jumps past every deadline. The fields
//! the edge fills from stored documents (`ContractAct{buyer,seller,milestones}`, `FileDispute{claimant,respondent}`,
//! `DisputeAct{subject,claimant,respondent}`) are read from the database, as the edge does.
//!
//! After every batch: money is conserved and every cached account agrees with its transfers and holds; each contract
//! balances and holds exactly its pending milestone holds; nothing moves on a disputed milestone; holds resolve once;
//! a dispute executes once; slashes stay within the stake; refusals change nothing but their idempotency record; a
//! milestone is released or reclaimed at most once between them, and reclaimed only undelivered and past its due date
//! and the grace; appeal bonds and stake locks count against the agent's budget and come back to it when returned or
//! withdrawn; and balances, documents, budgets and counts agree with the model.
// reason: model tests read as one script per scenario or one reference step per op; splitting them would scatter each case.
#![allow(clippy::too_many_lines)]

use crate::common;

use bazaar_core::apply::{apply_batch, Applied, Config};
use bazaar_core::chain::{self, ChainHead};
use bazaar_core::command::{Command, Idem, Op};
use bazaar_core::crypto::{did_key, sha256_hex, sign, verify};
use bazaar_core::dispute::{
    dispute_holds, dispute_id_for, evidence_message, Decision, Dispute, DisputeAct, Frozen, Phase, ReasonCode, Side,
    Stake, Subject, Windows,
};
use bazaar_core::escrow::{
    contract_id_for, milestone_hold, Contract, ContractAct, ContractState, MilestoneSpec, MilestoneState,
};
use bazaar_core::kernel::docs::decode;
use bazaar_core::model::*;
use bazaar_core::refusal::Code;
use bazaar_core::state::Snapshot;
use bazaar_core::token::{self, TokenClaims};
use bazaar_core::types::limits::{
    APPEAL_BOND_BPS, APPEAL_BOND_MIN_MINOR, CONTRACT_MILESTONES_MAX, EVIDENCE_PER_DISPUTE_MAX, EVIDENCE_URL_LEN_MAX,
    MILESTONE_DESCRIPTION_LEN_MAX, MILESTONE_RECLAIM_GRACE_S, REASONS_LEN_MAX, REVIEW_WINDOW_S_MAX,
    REVIEW_WINDOW_S_MIN,
};
use bazaar_core::types::{AccountId, Amount, ContractId, DisputeId, HoldId, MemberId, OrderId, Timestamp, TokenId};
use bazaar_core::{dispute, escrow, pay};
use common::{
    assert_same_rows, check_idempotency, create_owner, record_idempotency, registry_member, Db, IdemRecords, MBudget,
};
use ed25519_dalek::SigningKey;
use proptest::prelude::*;
use serde_json::json;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::OnceLock;

const FEE_BPS: u64 = 100;
const AMOUNT_MAX: u64 = bazaar_core::types::limits::AMOUNT_MINOR_MAX;
/// 2026-01-01T23:40:00Z: twenty minutes before a UTC midnight, so budgets cross a day boundary.
const START: Timestamp = Timestamp(1_767_225_600_000 + 86_400_000 - 20 * 60_000);
const HOUR: u64 = 3_600;
const DAY: u64 = 24 * HOUR;

fn config(windows: Windows) -> Config {
    Config { fee_bps: FEE_BPS as u32, escrow_threshold: Amount(100_000), windows }
}

/// Phase deadlines of hours instead of days, so short runs see every phase end.
fn short_windows() -> Windows {
    Windows {
        claim_s: 12 * HOUR,
        answer_s: HOUR,
        evidence_s: 2 * HOUR,
        ruling_s: 2 * HOUR,
        appeal_s: HOUR,
        stake_cooldown_s: 3 * HOUR,
    }
}

fn fee(amount: u64) -> u64 {
    (amount as u128 * FEE_BPS as u128 / 10_000) as u64
}

fn is_hex64(text: &str) -> bool {
    text.len() == 64 && text.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

// ---- the cast ---------------------------------------------------------------------------------------------------

const REGISTRY: usize = 0;
const OPERATOR: usize = 1;
const DESK: usize = 2;
const OWNERS: [usize; 3] = [3, 4, 5];
/// Agents 6 and 7 belong to owner 3, 8 and 9 to owner 4, and 10 — the independent arbiter — to owner 5.
const AGENTS: [usize; 5] = [6, 7, 8, 9, 10];
const ARBITER: usize = 10;
/// The agents that usually buy and sell.
const TRADERS: [usize; 4] = [6, 7, 8, 9];

#[derive(Clone)]
struct Cast {
    all: Vec<Member>,
    /// The signing key behind each member's did:key (the operator and the desk have none).
    keys: Vec<Option<SigningKey>>,
}

impl Cast {
    fn get(&self, id: &MemberId) -> Option<&Member> {
        self.all.iter().find(|m| &m.id == id)
    }
    fn index_of(&self, id: &MemberId) -> usize {
        self.all.iter().position(|m| &m.id == id).expect("a cast member")
    }
    fn principal(&self, id: &MemberId) -> Option<MemberId> {
        self.get(id).map(|m| m.principal().clone())
    }
    /// The member itself or its owner.
    fn acts_for(&self, actor: &Member, member: &MemberId) -> bool {
        &actor.id == member || self.get(member).and_then(|m| m.owner.as_ref()) == Some(&actor.id)
    }
    fn owner_index(&self, index: usize) -> usize {
        match &self.all[index].owner {
            Some(owner) => self.index_of(owner),
            None => index,
        }
    }
}

fn key_of(seed: u8) -> SigningKey {
    SigningKey::from_bytes(&[seed; 32])
}

fn ghost() -> MemberId {
    MemberId(did_key(&key_of(99).verifying_key()))
}

// ---- commands ----------------------------------------------------------------------------------------------------

/// What the HTTP edge would hash for the fingerprint: the operation and the request.
fn fingerprint(op: &Op) -> String {
    sha256_hex(format!("{}\n{op:?}", op.name()).as_bytes())
}

fn command(actor: &Member, key: Option<&str>, op: Op) -> Command {
    let idem = key.map(|key| Idem::sent(format!("{}:{}", actor.id, op.name()), key.to_string(), fingerprint(&op)));
    Command { actor: actor.clone(), idem, op }
}

fn contract_doc(rows: &Snapshot, id: &str) -> Option<Contract> {
    rows.docs.get(&(DocKind::Contract, id.to_string())).map(|row| decode::<Contract>(row).unwrap())
}

fn dispute_doc(rows: &Snapshot, id: &str) -> Option<Dispute> {
    rows.docs.get(&(DocKind::Dispute, id.to_string())).map(|row| decode::<Dispute>(row).unwrap())
}

/// A contract act as the edge submits it: the parties and the milestone count read from the stored contract.
fn contract_op(contract: &Contract, act: ContractAct) -> Op {
    Op::Escrow(escrow::Op::ContractAct {
        contract: contract.id.clone(),
        buyer: contract.buyer.clone(),
        seller: contract.seller.clone(),
        milestones: contract.milestones.len() as u32,
        act,
    })
}

/// A dispute act as the edge submits it: subject and parties read from the stored dispute.
fn dispute_op(dispute: &Dispute, act: DisputeAct) -> Op {
    Op::Dispute(dispute::Op::DisputeAct {
        dispute: dispute.id.clone(),
        subject: dispute.subject.clone(),
        claimant: dispute.claimant.clone(),
        respondent: dispute.respondent.clone(),
        act,
    })
}

// ---- the model ---------------------------------------------------------------------------------------------------

#[derive(Clone, Debug)]
struct MMilestone {
    amount: u64,
    due_at: Timestamp,
    state: MilestoneState,
    review_deadline: Option<Timestamp>,
    released_at: Option<Timestamp>,
    dispute: Option<DisputeId>,
}

#[derive(Clone, Debug)]
struct MContract {
    buyer: MemberId,
    seller: MemberId,
    arbiter: MemberId,
    state: ContractState,
    window_s: u64,
    /// The UTC day its holds were opened (their budget day).
    day: i64,
    total: u64,
    milestones: Vec<MMilestone>,
    released_net: u64,
    fees: u64,
    refunded: u64,
}

impl MContract {
    fn held(&self) -> u64 {
        let open = |m: &&MMilestone| {
            matches!(m.state, MilestoneState::Pending | MilestoneState::Delivered | MilestoneState::Disputed)
        };
        self.milestones.iter().filter(open).map(|m| m.amount).sum()
    }
}

#[derive(Clone, Debug)]
struct MRuling {
    decision: Decision,
    refund: u64,
    slash: u64,
    default: bool,
}

#[derive(Clone, Debug)]
struct MAppeal {
    party: MemberId,
    claimant_side: bool,
    bond: u64,
    /// Counted against the party's budget on this UTC day (the party appealed itself).
    budget_day: Option<i64>,
}

#[derive(Clone, Debug)]
struct MDispute {
    subject: Subject,
    claimant: MemberId,
    respondent: MemberId,
    claimed: u64,
    frozen: Frozen,
    phase: Phase,
    deadline: Option<Timestamp>,
    round: u8,
    arbiter: Option<MemberId>,
    used: Vec<MemberId>,
    responded: bool,
    /// Evidence items added by the claimant's side and the respondent's.
    evidence: [usize; 2],
    rulings: Vec<MRuling>,
    appeal: Option<MAppeal>,
}

#[derive(Clone, Debug, Default)]
struct MStake {
    open: u32,
    unlock: Option<(u64, Timestamp)>,
    /// Locked units counted against the budget and not yet given back.
    budgeted: u64,
}

#[derive(Clone, Debug)]
struct MSettlement {
    buyer: MemberId,
    merchant: MemberId,
    amount: u64,
    at: Timestamp,
}

#[derive(Clone, Debug)]
struct MToken {
    buyer: MemberId,
    merchant: MemberId,
    max: u64,
    order: OrderId,
}

#[derive(Clone, Debug, Default)]
struct Model {
    balances: HashMap<AccountId, i128>,
    pending: HashMap<AccountId, u64>,
    budgets: HashMap<MemberId, MBudget>,
    tokens: HashMap<TokenId, MToken>,
    settlements: HashMap<(MemberId, OrderId), MSettlement>,
    contracts: BTreeMap<ContractId, MContract>,
    disputes: BTreeMap<DisputeId, MDispute>,
    stakes: HashMap<MemberId, MStake>,
    /// (scope, key) → the fingerprint and the outcome first recorded under it.
    idem: IdemRecords,
    events: usize,
    transfers: usize,
    /// How often each outcome was seen, for the coverage report.
    seen: BTreeMap<String, usize>,
}

/// What the model expects a command to do when it runs (not replayed): succeed with these receipt fields, or be
/// refused with a code.
type Expected = Result<serde_json::Value, Code>;

impl Model {
    fn available(&self, account: &AccountId) -> i128 {
        self.balances.get(account).copied().unwrap_or(0) - self.pending.get(account).copied().unwrap_or(0) as i128
    }

    fn post(&mut self, debit: &AccountId, credit: &AccountId, amount: u64) {
        if amount == 0 {
            return;
        }
        *self.balances.entry(debit.clone()).or_default() -= amount as i128;
        *self.balances.entry(credit.clone()).or_default() += amount as i128;
        self.transfers += 1;
    }

    fn hold(&mut self, account: &AccountId, amount: u64) {
        *self.pending.entry(account.clone()).or_default() += amount;
    }

    fn unhold(&mut self, account: &AccountId, amount: u64) {
        if amount == 0 {
            return;
        }
        let pending = self.pending.get_mut(account).expect("a held account");
        *pending = pending.checked_sub(amount).expect("model: pending covers the hold");
    }

    fn check_budget(&self, agent: &MemberId, amount: u64, now: Timestamp) -> Result<(), Code> {
        let budget = &self.budgets[agent];
        let today = budget.by_day.get(&now.utc_day()).copied().unwrap_or(0);
        if amount > budget.per_call {
            return Err(Code::BudgetPerCallExceeded);
        }
        if today + amount > budget.per_day {
            return Err(Code::BudgetPerDayExceeded);
        }
        if budget.spent_total + amount > budget.total {
            return Err(Code::BudgetTotalExceeded);
        }
        Ok(())
    }

    /// A bond or a stake lock: only the per-day and total ceilings bind, then the funds.
    fn check_commitment(&self, agent: &MemberId, amount: u64, now: Timestamp) -> Result<(), Code> {
        let budget = &self.budgets[agent];
        let today = budget.by_day.get(&now.utc_day()).copied().unwrap_or(0);
        if today + amount > budget.per_day {
            return Err(Code::BudgetPerDayExceeded);
        }
        if budget.spent_total + amount > budget.total {
            return Err(Code::BudgetTotalExceeded);
        }
        if self.available(&AccountId::of_member(agent)) < amount as i128 {
            return Err(Code::InsufficientFunds);
        }
        Ok(())
    }

    /// Predicts one command that runs (not replayed), applying its effects if it succeeds.
    fn run(&mut self, cast: &Cast, config: &Config, command: &Command, now: Timestamp) -> Expected {
        let actor = &command.actor;
        match &command.op {
            Op::Pay(pay::Op::Mint { owner, amount }) => {
                assert_eq!(actor.kind, MemberKind::Operator, "the model mints only as the operator");
                self.post(&AccountId::issuance(), &AccountId::of_member(owner), amount.0);
                self.events += 1;
                Ok(json!({"amount_minor": amount}))
            }
            Op::Pay(pay::Op::Fund { agent, amount }) => {
                let source = AccountId::of_member(&actor.id);
                if self.available(&source) < amount.0 as i128 {
                    return Err(Code::InsufficientFunds);
                }
                self.post(&source, &AccountId::of_member(agent), amount.0);
                self.events += 1;
                Ok(json!({"amount_minor": amount}))
            }
            Op::Pay(pay::Op::SetBudget { agent, per_call_max, per_day_max, total_max }) => {
                let budget = self.budgets.get_mut(agent).expect("agents have budgets");
                (budget.per_call, budget.per_day, budget.total) = (per_call_max.0, per_day_max.0, total_max.0);
                self.events += 1;
                Ok(json!({"total_max_minor": total_max}))
            }
            Op::Pay(pay::Op::IssueToken { claims, .. }) => {
                let max = claims.max.0;
                self.check_budget(&claims.sub, max, now)?;
                let account = AccountId::of_member(&claims.sub);
                if self.available(&account) < max as i128 {
                    return Err(Code::InsufficientFunds);
                }
                self.budgets.get_mut(&claims.sub).unwrap().spend(max, now.utc_day());
                self.hold(&account, max);
                let token =
                    MToken { buyer: claims.sub.clone(), merchant: claims.aud.clone(), max, order: claims.ord.clone() };
                self.tokens.insert(claims.jti.clone(), token);
                self.events += 1;
                Ok(json!({"jti": claims.jti}))
            }
            Op::Pay(pay::Op::Settle { claims, amount, .. }) => {
                let token = self.tokens.get(&claims.jti).cloned().ok_or(Code::TokenNotFound)?;
                assert_eq!(amount.0, token.max, "the model settles in full");
                let buyer = AccountId::of_member(&token.buyer);
                self.unhold(&buyer, token.max);
                self.post(&buyer, &AccountId::of_member(&token.merchant), amount.0 - fee(amount.0));
                self.post(&buyer, &AccountId::fees(), fee(amount.0));
                let settlement =
                    MSettlement { buyer: token.buyer, merchant: token.merchant.clone(), amount: amount.0, at: now };
                self.settlements.insert((token.merchant, token.order), settlement);
                self.events += 1;
                Ok(json!({"amount_minor": amount}))
            }
            Op::Escrow(escrow::Op::CreateContract { seller, arbiter, milestones, terms_hash, review_window_s }) => {
                self.create_contract(cast, command, (seller, arbiter), milestones, terms_hash, *review_window_s, now)
            }
            Op::Escrow(escrow::Op::ContractAct { contract, buyer, seller, act, .. }) => {
                self.contract_act(cast, command, contract, (buyer, seller), act, now)
            }
            Op::Dispute(dispute::Op::FileDispute { subject, claimant, respondent, claimed, note, .. }) => {
                self.file(cast, config, command, subject, (claimant, respondent), claimed.0, note, now)
            }
            Op::Dispute(dispute::Op::DisputeAct { dispute, claimant, respondent, act, .. }) => {
                self.dispute_act(cast, config, command, dispute, (claimant, respondent), act, now)
            }
            Op::Dispute(dispute::Op::StakeLock { amount }) => {
                if actor.kind != MemberKind::Agent {
                    return Err(Code::NotAnAgent);
                }
                let balance = AccountId::of_member(&actor.id);
                self.check_commitment(&actor.id, amount.0, now)?;
                self.budgets.get_mut(&actor.id).unwrap().spend(amount.0, now.utc_day());
                self.post(&balance, &AccountId::stake_of(&actor.id), amount.0);
                self.stakes.entry(actor.id.clone()).or_default().budgeted += amount.0;
                self.events += 1;
                Ok(json!({"locked_minor": amount}))
            }
            Op::Dispute(dispute::Op::StakeUnlock { amount }) => {
                let stake = self.stakes.get(&actor.id).cloned().unwrap_or_default();
                if stake.open > 0 {
                    return Err(Code::StakeDisputeOpen);
                }
                let available = self.available(&AccountId::stake_of(&actor.id));
                if amount.0 == 0 || amount.0 as i128 > available {
                    return Err(Code::InsufficientFunds);
                }
                let at = now.plus_s(config.windows.stake_cooldown_s);
                self.stakes.get_mut(&actor.id).expect("stake was locked").unlock = Some((amount.0, at));
                self.events += 1;
                Ok(json!({"unlock_minor": amount, "available_at_ms": at}))
            }
            Op::Dispute(dispute::Op::StakeWithdraw) => {
                let stake = self.stakes.get(&actor.id).cloned().unwrap_or_default();
                let Some((amount, at)) = stake.unlock else { return Err(Code::StakeNotUnlocked) };
                if stake.open > 0 {
                    return Err(Code::StakeDisputeOpen);
                }
                if now < at {
                    return Err(Code::StakeCooldown);
                }
                let account = AccountId::stake_of(&actor.id);
                let amount = amount.min(self.available(&account).max(0) as u64);
                self.post(&account, &AccountId::of_member(&actor.id), amount);
                let stake = self.stakes.get_mut(&actor.id).unwrap();
                stake.unlock = None;
                let back = amount.min(stake.budgeted);
                stake.budgeted -= back;
                self.budgets.get_mut(&actor.id).unwrap().release_total(back);
                self.events += 1;
                Ok(json!({"withdrawn_minor": amount}))
            }
            other => panic!("the model does not cover {}", other.name()),
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn create_contract(
        &mut self,
        cast: &Cast,
        command: &Command,
        (seller, arbiter): (&MemberId, &MemberId),
        specs: &[MilestoneSpec],
        terms: &str,
        window_s: u64,
        now: Timestamp,
    ) -> Expected {
        let buyer = &command.actor;
        if buyer.kind != MemberKind::Agent {
            return Err(Code::NotPermitted);
        }
        let Some(idem) = &command.idem else { return Err(Code::IdempotencyKeyRequired) };
        if specs.is_empty() || specs.len() > CONTRACT_MILESTONES_MAX {
            return Err(Code::MilestonesInvalid);
        }
        for spec in specs {
            let described = !spec.description.is_empty() && spec.description.len() <= MILESTONE_DESCRIPTION_LEN_MAX;
            if spec.amount.0 == 0 || spec.amount.0 > AMOUNT_MAX || !described || spec.due_at <= now {
                return Err(Code::MilestonesInvalid);
            }
        }
        let total: u64 = specs.iter().map(|s| s.amount.0).sum();
        if total > AMOUNT_MAX {
            return Err(Code::AmountInvalid);
        }
        if !is_hex64(terms) || !(REVIEW_WINDOW_S_MIN..=REVIEW_WINDOW_S_MAX).contains(&window_s) {
            return Err(Code::InvalidRequest);
        }
        let seller_member = cast.get(seller).ok_or(Code::MemberNotFound)?;
        if seller_member.kind != MemberKind::Agent {
            return Err(Code::NotAnAgent);
        }
        if seller == &buyer.id || seller_member.principal() == buyer.principal() {
            return Err(Code::NotPermitted);
        }
        let arbiter_principal = cast.principal(arbiter).ok_or(Code::MemberNotFound)?;
        if arbiter == &buyer.id
            || arbiter == seller
            || [buyer.principal(), seller_member.principal()].contains(&&arbiter_principal)
        {
            return Err(Code::ArbiterInvalid);
        }
        let id = contract_id_for(&buyer.id, seller, arbiter, &idem.key);
        if self.contracts.contains_key(&id) {
            return Err(Code::ContractExists);
        }
        let account = AccountId::of_member(&buyer.id);
        if self.available(&account) < total as i128 {
            return Err(Code::InsufficientFunds);
        }
        self.check_budget(&buyer.id, total, now)?;
        self.budgets.get_mut(&buyer.id).unwrap().spend(total, now.utc_day());
        self.hold(&account, total);
        let milestones = specs
            .iter()
            .map(|s| MMilestone {
                amount: s.amount.0,
                due_at: s.due_at,
                state: MilestoneState::Pending,
                review_deadline: None,
                released_at: None,
                dispute: None,
            })
            .collect();
        let contract = MContract {
            buyer: buyer.id.clone(),
            seller: seller.clone(),
            arbiter: arbiter.clone(),
            state: ContractState::Offered,
            window_s,
            day: now.utc_day(),
            total,
            milestones,
            released_net: 0,
            fees: 0,
            refunded: 0,
        };
        self.contracts.insert(id.clone(), contract);
        self.events += 1;
        Ok(json!({"id": id, "state": "offered", "total": total, "held_minor": total}))
    }

    fn contract_act(
        &mut self,
        cast: &Cast,
        command: &Command,
        id: &ContractId,
        (buyer, seller): (&MemberId, &MemberId),
        act: &ContractAct,
        now: Timestamp,
    ) -> Expected {
        let Some(c) = self.contracts.get(id).cloned() else { return Err(Code::ContractNotFound) };
        assert!(&c.buyer == buyer && &c.seller == seller, "the edge reads the parties from the contract");
        let actor = &command.actor;
        let is_buyer = cast.acts_for(actor, &c.buyer);
        let is_seller = cast.acts_for(actor, &c.seller);
        let index_of =
            |m: u32| if (m as usize) < c.milestones.len() { Ok(m as usize) } else { Err(Code::MilestoneNotFound) };
        match act {
            ContractAct::Accept | ContractAct::Decline => {
                if !is_seller {
                    return Err(Code::NotParty);
                }
                if c.state != ContractState::Offered {
                    return Err(Code::ContractState);
                }
                if matches!(act, ContractAct::Accept) {
                    self.contracts.get_mut(id).unwrap().state = ContractState::Accepted;
                    self.events += 1;
                    return Ok(json!({"state": "accepted"}));
                }
                Ok(self.void(id, ContractState::Declined))
            }
            ContractAct::Cancel => {
                if !is_buyer {
                    return Err(Code::NotParty);
                }
                if c.state != ContractState::Offered {
                    return Err(Code::ContractState);
                }
                Ok(self.void(id, ContractState::Cancelled))
            }
            ContractAct::Deliver { milestone, evidence_sha256 } => {
                if !is_seller {
                    return Err(Code::NotParty);
                }
                if !is_hex64(evidence_sha256) {
                    return Err(Code::InvalidRequest);
                }
                if c.state != ContractState::Accepted {
                    return Err(Code::ContractState);
                }
                let index = index_of(*milestone)?;
                if c.milestones[index].state != MilestoneState::Pending {
                    return Err(Code::MilestoneState);
                }
                let deadline = now.plus_s(c.window_s);
                let m = &mut self.contracts.get_mut(id).unwrap().milestones[index];
                (m.state, m.review_deadline) = (MilestoneState::Delivered, Some(deadline));
                self.events += 1;
                Ok(json!({"review_deadline_ms": deadline}))
            }
            ContractAct::Release { milestone } => {
                if !is_buyer {
                    return Err(Code::NotParty);
                }
                let index = index_of(*milestone)?;
                match c.milestones[index].state {
                    MilestoneState::Delivered if c.state == ContractState::Accepted => {}
                    MilestoneState::Delivered => return Err(Code::ContractState),
                    MilestoneState::Released => return Err(Code::MilestoneAlreadyReleased),
                    MilestoneState::Disputed => return Err(Code::MilestoneDisputed),
                    MilestoneState::Pending
                    | MilestoneState::Resolved
                    | MilestoneState::Voided
                    | MilestoneState::Reclaimed => return Err(Code::MilestoneState),
                }
                Ok(self.release(id, index, now, false))
            }
            ContractAct::Reclaim { milestone } => {
                if !is_buyer {
                    return Err(Code::NotParty);
                }
                let index = index_of(*milestone)?;
                let m = &c.milestones[index];
                match m.state {
                    MilestoneState::Pending => {}
                    MilestoneState::Delivered => return Err(Code::MilestoneDelivered),
                    MilestoneState::Disputed => return Err(Code::MilestoneDisputed),
                    MilestoneState::Released => return Err(Code::MilestoneAlreadyReleased),
                    MilestoneState::Reclaimed => return Err(Code::MilestoneAlreadyReclaimed),
                    MilestoneState::Resolved | MilestoneState::Voided => return Err(Code::MilestoneState),
                }
                if c.state != ContractState::Accepted {
                    return Err(Code::ContractState);
                }
                let reclaimable_at = m.due_at.plus_s(MILESTONE_RECLAIM_GRACE_S);
                if now < reclaimable_at {
                    return Err(Code::ReclaimTooEarly);
                }
                let amount = m.amount;
                self.unhold(&AccountId::of_member(&c.buyer), amount);
                self.budgets.get_mut(&c.buyer).unwrap().release(amount, c.day);
                let stored = self.contracts.get_mut(id).unwrap();
                stored.refunded += amount;
                stored.milestones[index].state = MilestoneState::Reclaimed;
                Model::complete(stored);
                self.events += 1;
                Ok(json!({"milestone": milestone, "refunded_minor": amount, "reclaimable_at_ms": reclaimable_at,
                    "reclaimed_at_ms": now}))
            }
            ContractAct::Advance => {
                if actor.kind != MemberKind::Registry {
                    return Err(Code::NotPermitted);
                }
                for (index, m) in c.milestones.iter().enumerate() {
                    if m.state == MilestoneState::Delivered && m.review_deadline.is_some_and(|d| d <= now) {
                        self.release(id, index, now, true);
                    }
                }
                Ok(json!({"contract": id}))
            }
        }
    }

    fn void(&mut self, id: &ContractId, end: ContractState) -> serde_json::Value {
        let c = self.contracts.get(id).unwrap().clone();
        let account = AccountId::of_member(&c.buyer);
        for m in &c.milestones {
            assert_eq!(m.state, MilestoneState::Pending);
            self.unhold(&account, m.amount);
            self.budgets.get_mut(&c.buyer).unwrap().release(m.amount, c.day);
        }
        let stored = self.contracts.get_mut(id).unwrap();
        stored.milestones.iter_mut().for_each(|m| m.state = MilestoneState::Voided);
        stored.refunded = stored.total;
        stored.state = end;
        self.events += 1;
        json!({"state": end, "held_minor": 0})
    }

    fn release(&mut self, id: &ContractId, index: usize, now: Timestamp, automatic: bool) -> serde_json::Value {
        let c = self.contracts.get(id).unwrap().clone();
        let amount = c.milestones[index].amount;
        let (fee, buyer) = (fee(amount), AccountId::of_member(&c.buyer));
        self.unhold(&buyer, amount);
        self.post(&buyer, &AccountId::of_member(&c.seller), amount - fee);
        self.post(&buyer, &AccountId::fees(), fee);
        let stored = self.contracts.get_mut(id).unwrap();
        stored.released_net += amount - fee;
        stored.fees += fee;
        let m = &mut stored.milestones[index];
        (m.state, m.released_at) = (MilestoneState::Released, Some(now));
        Model::complete(stored);
        self.events += 1;
        json!({"amount_minor": amount, "net_minor": amount - fee, "fee_minor": fee, "automatic": automatic})
    }

    fn complete(c: &mut MContract) {
        if c.state == ContractState::Accepted && c.held() == 0 {
            c.state = ContractState::Completed;
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn file(
        &mut self,
        cast: &Cast,
        config: &Config,
        command: &Command,
        subject: &Subject,
        (claimant, respondent): (&MemberId, &MemberId),
        claimed: u64,
        note: &str,
        now: Timestamp,
    ) -> Expected {
        if note.len() > REASONS_LEN_MAX {
            return Err(Code::InvalidRequest);
        }
        // Who asks comes first: a stranger is not told that the subject is disputed.
        if !cast.acts_for(&command.actor, claimant) {
            return Err(Code::NotParty);
        }
        let id = dispute_id_for(subject);
        if self.disputes.get(&id).is_some_and(|d| &d.claimant == claimant) {
            return Err(Code::DisputeExists);
        }
        let (at_risk, paid_at, escrowed) = match subject {
            Subject::Call { merchant, order_id } => {
                let Some(s) = self.settlements.get(&(merchant.clone(), order_id.clone())) else {
                    return Err(Code::NotDisputable);
                };
                if &s.buyer != claimant || &s.merchant != respondent {
                    return Err(Code::NotDisputable);
                }
                (s.amount, Some(s.at), false)
            }
            Subject::Milestone { contract, index } => {
                let c = self.contracts.get(contract).ok_or(Code::ContractNotFound)?;
                if &c.buyer != claimant || &c.seller != respondent {
                    return Err(Code::NotDisputable);
                }
                let m = c.milestones.get(*index as usize).ok_or(Code::MilestoneNotFound)?;
                match (c.state, m.state) {
                    (ContractState::Accepted, MilestoneState::Pending | MilestoneState::Delivered) => {
                        (m.amount, None, true)
                    }
                    (_, MilestoneState::Released) => (m.amount, m.released_at, false),
                    _ => return Err(Code::NotDisputable),
                }
            }
        };
        if paid_at.is_some_and(|at| now >= at.plus_s(config.windows.claim_s)) {
            return Err(Code::ClaimWindowClosed);
        }
        if claimed == 0 || claimed > at_risk {
            return Err(Code::AmountInvalid);
        }
        let mut frozen = Frozen::default();
        if escrowed {
            let Subject::Milestone { contract, index } = subject else { unreachable!() };
            let m = &mut self.contracts.get_mut(contract).unwrap().milestones[*index as usize];
            (m.state, m.dispute) = (MilestoneState::Disputed, Some(id.clone()));
            frozen.escrow = Amount(claimed);
        } else {
            let (balance, stake) = (AccountId::of_member(respondent), AccountId::stake_of(respondent));
            let from_balance = claimed.min(self.available(&balance).max(0) as u64);
            let from_stake = (claimed - from_balance).min(self.available(&stake).max(0) as u64);
            self.hold(&balance, from_balance);
            self.hold(&stake, from_stake);
            (frozen.balance, frozen.stake) = (Amount(from_balance), Amount(from_stake));
        }
        self.stakes.entry(respondent.clone()).or_default().open += 1;
        let dispute = MDispute {
            subject: subject.clone(),
            claimant: claimant.clone(),
            respondent: respondent.clone(),
            claimed,
            frozen,
            phase: Phase::Filed,
            deadline: Some(now.plus_s(config.windows.answer_s)),
            round: 1,
            arbiter: None,
            used: Vec::new(),
            responded: false,
            evidence: [0, 0],
            rulings: Vec::new(),
            appeal: None,
        };
        self.disputes.insert(id.clone(), dispute);
        self.events += 1;
        Ok(json!({"id": id, "phase": "filed", "frozen": frozen, "claimed": claimed, "at_risk": at_risk}))
    }

    /// The next arbiter: the contract's own, the desk, the operator — a fresh one while any is left, never a party.
    fn assign(&mut self, config: &Config, id: &DisputeId, now: Timestamp) {
        let d = self.disputes.get(id).unwrap();
        let mut candidates = Vec::new();
        if let Subject::Milestone { contract, .. } = &d.subject {
            candidates.push(self.contracts[contract].arbiter.clone());
        }
        candidates.push(MemberId(DESK_ID.into()));
        candidates.push(MemberId(OPERATOR_ID.into()));
        candidates.retain(|c| c != &d.claimant && c != &d.respondent);
        let fresh = candidates.iter().find(|c| !d.used.contains(c)).cloned();
        let chosen = fresh.unwrap_or_else(|| candidates.last().unwrap().clone());
        let d = self.disputes.get_mut(id).unwrap();
        d.used.push(chosen.clone());
        d.arbiter = Some(chosen);
        d.phase = Phase::Ruling;
        d.deadline = Some(now.plus_s(config.windows.ruling_s));
    }

    #[allow(clippy::too_many_arguments)]
    fn dispute_act(
        &mut self,
        cast: &Cast,
        config: &Config,
        command: &Command,
        id: &DisputeId,
        (claimant, respondent): (&MemberId, &MemberId),
        act: &DisputeAct,
        now: Timestamp,
    ) -> Expected {
        let Some(d) = self.disputes.get(id).cloned() else { return Err(Code::DisputeNotFound) };
        assert!(&d.claimant == claimant && &d.respondent == respondent, "the edge reads the parties");
        let actor = &command.actor;
        let side = if cast.acts_for(actor, &d.claimant) {
            Some(true)
        } else if cast.acts_for(actor, &d.respondent) {
            Some(false)
        } else {
            None
        };
        let due = d.deadline.is_some_and(|t| now >= t);
        match act {
            DisputeAct::Evidence { sha256, url, signature } => {
                let claimant_side = side.ok_or(Code::NotParty)?;
                if !matches!(d.phase, Phase::Filed | Phase::Evidence) || due {
                    return Err(Code::EvidenceClosed);
                }
                if !is_hex64(sha256) || url.as_ref().is_some_and(|u| u.is_empty() || u.len() > EVIDENCE_URL_LEN_MAX) {
                    return Err(Code::InvalidRequest);
                }
                if d.evidence[usize::from(!claimant_side)] >= EVIDENCE_PER_DISPUTE_MAX / 2 {
                    return Err(Code::EvidenceLimit);
                }
                let key = cast.all.iter().position(|m| m.id == actor.id).and_then(|i| cast.keys[i].as_ref());
                let message = evidence_message(id, sha256);
                if key.is_none_or(|k| verify(&k.verifying_key(), &message, signature).is_err()) {
                    return Err(Code::EvidenceSignatureInvalid);
                }
                let d = self.disputes.get_mut(id).unwrap();
                d.evidence[usize::from(!claimant_side)] += 1;
                if !claimant_side && !d.responded {
                    d.responded = true;
                    if d.phase == Phase::Filed {
                        d.phase = Phase::Evidence;
                        d.deadline = Some(now.plus_s(config.windows.evidence_s));
                    }
                }
                self.events += 1;
                Ok(json!({"phase": d.phase}))
            }
            DisputeAct::Rule { decision, refund, slash, reasons } => {
                let principals = [cast.principal(&d.claimant), cast.principal(&d.respondent)];
                let party = actor.id == d.claimant || actor.id == d.respondent;
                if party || principals.contains(&Some(actor.principal().clone())) {
                    return Err(Code::PartyCannotRule);
                }
                if d.phase != Phase::Ruling {
                    return Err(Code::DisputePhase);
                }
                if d.arbiter.as_ref() != Some(&actor.id) {
                    return Err(Code::NotArbiter);
                }
                let refund = match decision {
                    Decision::RefundFull => d.claimed,
                    Decision::Reject => 0,
                    Decision::RefundPartial if refund.0 > 0 && refund.0 < d.claimed => refund.0,
                    Decision::RefundPartial => return Err(Code::RulingInvalid),
                };
                let bad_reasons = reasons.is_empty() || reasons.len() > REASONS_LEN_MAX;
                if (*decision == Decision::Reject && slash.0 > 0) || slash.0 > AMOUNT_MAX || bad_reasons {
                    return Err(Code::RulingInvalid);
                }
                let ruling = MRuling { decision: *decision, refund, slash: slash.0, default: false };
                let d = self.disputes.get_mut(id).unwrap();
                d.rulings.push(ruling);
                self.events += 1;
                if d.round == 1 {
                    d.phase = Phase::Appealable;
                    d.deadline = Some(now.plus_s(config.windows.appeal_s));
                    return Ok(json!({"phase": "appealable"}));
                }
                Ok(self.execute(id, now))
            }
            DisputeAct::Appeal => {
                let claimant_side = side.ok_or(Code::NotParty)?;
                // A ruling executed without an appeal, or one whose window passed: too late.
                let lapsed = d.phase == Phase::Executed && d.appeal.is_none();
                if lapsed || (d.phase == Phase::Appealable && due) {
                    return Err(Code::AppealWindowClosed);
                }
                if d.phase != Phase::Appealable || d.appeal.is_some() {
                    return Err(Code::DisputePhase);
                }
                let last = d.rulings.last().unwrap();
                let lost = if claimant_side { last.refund < d.claimed } else { last.refund > 0 || last.slash > 0 };
                if !lost {
                    return Err(Code::NotPermitted);
                }
                let party = if claimant_side { d.claimant.clone() } else { d.respondent.clone() };
                let bond = (d.claimed * APPEAL_BOND_BPS as u64 / 10_000).max(APPEAL_BOND_MIN_MINOR);
                let account = AccountId::of_member(&party);
                // An agent appealing for itself pays the bond from its budget; its owner has none.
                let budget_day = (actor.kind == MemberKind::Agent).then(|| now.utc_day());
                if budget_day.is_some() {
                    self.check_commitment(&party, bond, now)?;
                    self.budgets.get_mut(&party).unwrap().spend(bond, now.utc_day());
                } else if self.available(&account) < bond as i128 {
                    return Err(Code::InsufficientFunds);
                }
                self.hold(&account, bond);
                let d = self.disputes.get_mut(id).unwrap();
                d.appeal = Some(MAppeal { party, claimant_side, bond, budget_day });
                d.round = 2;
                self.assign(config, id, now);
                self.events += 1;
                Ok(json!({"phase": "ruling", "round": 2, "arbiter": self.disputes[id].arbiter}))
            }
            DisputeAct::Execute => {
                if d.phase == Phase::Executed {
                    return Err(Code::DisputeExecuted);
                }
                if d.phase != Phase::Appealable || !due {
                    return Err(Code::DisputePhase);
                }
                Ok(self.execute(id, now))
            }
            DisputeAct::Advance => {
                if actor.kind != MemberKind::Registry {
                    return Err(Code::NotPermitted);
                }
                if !due || d.phase == Phase::Executed {
                    return Ok(json!({"advanced": false}));
                }
                match d.phase {
                    Phase::Filed => {
                        let ruling =
                            MRuling { decision: Decision::RefundFull, refund: d.claimed, slash: 0, default: true };
                        self.disputes.get_mut(id).unwrap().rulings.push(ruling);
                        self.events += 1;
                        Ok(self.execute(id, now))
                    }
                    Phase::Evidence | Phase::Ruling => {
                        self.assign(config, id, now);
                        self.events += 1;
                        Ok(json!({"phase": "ruling", "arbiter": self.disputes[id].arbiter}))
                    }
                    Phase::Appealable => Ok(self.execute(id, now)),
                    Phase::Executed => unreachable!(),
                }
            }
        }
    }

    /// The final ruling: escrow first, then frozen balance, then frozen stake; a slash bounded by the stake left,
    /// to the claimant up to what the refund still lacks and the rest to insurance; the bond to whoever it is due.
    fn execute(&mut self, id: &DisputeId, now: Timestamp) -> serde_json::Value {
        let d = self.disputes.get(id).unwrap().clone();
        let ruling = d.rulings.last().unwrap().clone();
        let claimant = AccountId::of_member(&d.claimant);
        let stake = AccountId::stake_of(&d.respondent);
        let (mut refunded, mut released) = (0, 0);
        if d.frozen.escrow.0 > 0 {
            let Subject::Milestone { contract, index } = &d.subject else { unreachable!() };
            let c = self.contracts.get(contract).unwrap().clone();
            let m = &c.milestones[*index as usize];
            assert_eq!(m.state, MilestoneState::Disputed);
            let refund = ruling.refund.min(m.amount);
            let pay = m.amount - refund;
            self.unhold(&claimant, m.amount);
            self.post(&claimant, &AccountId::of_member(&c.seller), pay - fee(pay));
            self.post(&claimant, &AccountId::fees(), fee(pay));
            self.budgets.get_mut(&c.buyer).unwrap().release(refund, c.day);
            let stored = self.contracts.get_mut(contract).unwrap();
            stored.released_net += pay - fee(pay);
            stored.fees += fee(pay);
            stored.refunded += refund;
            stored.milestones[*index as usize].state = MilestoneState::Resolved;
            Model::complete(stored);
            (refunded, released) = (refund, pay);
        }
        let mut to_refund = ruling.refund.saturating_sub(refunded);
        let mut stake_part = 0;
        for (account, frozen) in
            [(AccountId::of_member(&d.respondent), d.frozen.balance.0), (stake.clone(), d.frozen.stake.0)]
        {
            let part = to_refund.min(frozen);
            self.unhold(&account, frozen);
            self.post(&account, &claimant, part);
            to_refund -= part;
            refunded += part;
            if account == stake {
                stake_part = part;
            }
        }
        let shortfall = to_refund;
        let extra = ruling.slash.saturating_sub(stake_part).min(self.available(&stake).max(0) as u64);
        let made_good = extra.min(shortfall);
        self.post(&stake, &claimant, made_good);
        self.post(&stake, &AccountId::insurance(), extra - made_good);
        let to_claimant = stake_part + made_good;
        let slashed = to_claimant + extra - made_good;
        if let Some(appeal) = &d.appeal {
            let first = &d.rulings[d.rulings.len() - 2];
            let won = if appeal.claimant_side {
                ruling.refund > first.refund
            } else {
                ruling.refund < first.refund || ruling.slash < first.slash
            };
            let other = if appeal.claimant_side { &d.respondent } else { &d.claimant };
            let account = AccountId::of_member(&appeal.party);
            self.unhold(&account, appeal.bond);
            if !won {
                self.post(&account, &AccountId::of_member(other), appeal.bond);
            } else if let Some(day) = appeal.budget_day {
                // A returned bond comes back to the budget, as a voided token's hold does.
                self.budgets.get_mut(&appeal.party).unwrap().release(appeal.bond, day);
            }
        }
        self.stakes.get_mut(&d.respondent).unwrap().open -= 1;
        let stored = self.disputes.get_mut(id).unwrap();
        stored.phase = Phase::Executed;
        stored.deadline = None;
        self.events += 1;
        let winner = match ruling.decision {
            Decision::RefundFull => "claimant",
            Decision::RefundPartial => "split",
            Decision::Reject => "respondent",
        };
        json!({"dispute": id, "winner": winner, "default": ruling.default, "rounds": d.round,
            "refunded_minor": refunded, "released_minor": released, "shortfall_minor": shortfall,
            "slashed_minor": slashed, "slash_to_claimant_minor": to_claimant,
            "slash_to_insurance_minor": slashed - to_claimant, "executed_at_ms": now})
    }

    /// Checks what the core answered for one command against the model, and learns from it.
    fn observe(&mut self, cast: &Cast, config: &Config, command: &Command, applied: &Applied, now: Timestamp) {
        let what = format!("{} by {} ({:?})", command.op.name(), command.actor.handle, command.idem);
        if let Some(replayed) = check_idempotency(&self.idem, command, applied, &what) {
            self.count(replayed);
            return;
        }
        let expected = self.run(cast, config, command, now);
        match (&expected, &applied.outcome) {
            (Ok(fields), Ok(receipt)) => {
                let receipt = receipt.to_json();
                for (name, value) in fields.as_object().unwrap() {
                    assert_eq!(&receipt[name], value, "{what}: receipt field {name}: {receipt}");
                }
                let detail = match &command.op {
                    Op::Dispute(dispute::Op::DisputeAct { act: DisputeAct::Advance, .. })
                        if receipt["advanced"] == false =>
                    {
                        " no-op".into()
                    }
                    Op::Dispute(dispute::Op::DisputeAct { act: DisputeAct::Advance, .. })
                        if receipt["winner"].is_string() =>
                    {
                        format!(" executed (default {})", receipt["default"])
                    }
                    Op::Dispute(dispute::Op::DisputeAct { act: DisputeAct::Advance, .. }) => {
                        format!(
                            " to {} (arbiters used {})",
                            receipt["phase"].as_str().unwrap(),
                            receipt["arbiters_used"].as_array().unwrap().len()
                        )
                    }
                    Op::Dispute(dispute::Op::DisputeAct { act: DisputeAct::Rule { .. }, .. })
                        if receipt["winner"].is_string() =>
                    {
                        " round 2, executed".into()
                    }
                    Op::Dispute(dispute::Op::DisputeAct { act: DisputeAct::Rule { .. }, .. }) => " round 1".into(),
                    Op::Dispute(dispute::Op::DisputeAct { .. }) if receipt["winner"].is_string() => {
                        let slashed = receipt["slashed_minor"].as_u64().unwrap();
                        let restitution = receipt["slash_to_claimant_minor"].as_u64().unwrap();
                        format!(" executed, slashed {}, restitution {}", slashed > 0, restitution > 0)
                    }
                    Op::Dispute(dispute::Op::FileDispute { subject, .. }) => {
                        let kind = if matches!(subject, Subject::Call { .. }) { "call" } else { "milestone" };
                        let frozen = ["escrow", "balance", "stake"].map(|k| receipt["frozen"][k].as_u64().unwrap() > 0);
                        format!(" {kind}, frozen escrow/balance/stake {frozen:?}")
                    }
                    _ => String::new(),
                };
                self.count(format!("{} ok{detail}", command.op.name()));
            }
            (Err(code), Err(refusal)) => {
                assert_eq!(*code, refusal.code, "{what}: refused for another reason: {refusal:?}");
                if command.idem.is_some() {
                    self.events += 1; // refusal.recorded
                }
                self.count(format!("{} {}", command.op.name(), code.as_str()));
            }
            _ => panic!("{what}: model expected {expected:?}, core answered {:?}", applied.outcome),
        }
        record_idempotency(&mut self.idem, command, applied);
    }

    fn count(&mut self, what: String) {
        *self.seen.entry(what).or_default() += 1;
    }
}

// ---- the world: cast, database, model and clock ------------------------------------------------------------------

#[derive(Clone)]
struct World {
    cast: Cast,
    config: Config,
    db: Db,
    model: Model,
    now: Timestamp,
    next: u64,
    registry_key: SigningKey,
    /// Every command sent with an idempotency key, for replays.
    keyed: Vec<Command>,
    /// Contracts and disputes the core created, and orders it settled, in order.
    contracts: Vec<ContractId>,
    disputes: Vec<DisputeId>,
    calls: Vec<(MemberId, OrderId)>,
    /// How far the event chain was verified.
    chain: ChainHead,
    verified: usize,
}

/// Bootstraps the registry, creates three owners and the dispute desk, and enrols five agents.
fn build_base() -> World {
    let registry_key = key_of(42);
    let registry = registry_member(&registry_key, START);
    let operator_id = MemberId(OPERATOR_ID.into());
    let cfg = config(Windows::standard());
    let mut db = Db::new();
    let operator = db.bootstrap(&cfg, &registry, &operator_id, START);
    let owner_seeds = [1u8, 2, 3];
    let owner_ids: Vec<MemberId> = owner_seeds.iter().map(|&s| MemberId(did_key(&key_of(s).verifying_key()))).collect();
    let mut commands: Vec<Command> =
        owner_ids.iter().enumerate().map(|(i, id)| create_owner(&operator, i, id)).collect();
    commands.push(command(
        &operator,
        None,
        Op::Dispute(dispute::Op::CreateDesk { credential_hash: "desk-cred".into() }),
    ));
    db.setup(&cfg, commands, START);
    let agent_seeds = [10u8, 11, 12, 13, 14];
    let mut agent_ids = Vec::new();
    for (n, owner_index) in [0, 0, 1, 1, 2].into_iter().enumerate() {
        let id = MemberId(did_key(&key_of(agent_seeds[n]).verifying_key()));
        db.enroll(&cfg, &owner_ids[owner_index], n, &id, START);
        agent_ids.push(id);
    }
    let desk_id = MemberId(DESK_ID.into());
    let ids = [registry.id.clone(), operator_id, desk_id].into_iter().chain(owner_ids).chain(agent_ids.clone());
    let all: Vec<Member> = ids.map(|id| db.rows.members[&id].clone()).collect();
    let mut keys = vec![Some(registry_key.clone()), None, None];
    keys.extend(owner_seeds.iter().chain(&agent_seeds).map(|&s| Some(key_of(s))));
    let cast = Cast { all, keys };
    let mut model = Model { events: db.events.len(), ..Model::default() };
    for id in agent_ids.iter().chain([&MemberId(DESK_ID.into())]) {
        model.budgets.insert(id.clone(), MBudget::default());
    }
    World {
        cast,
        config: cfg,
        db,
        model,
        now: START,
        next: 0,
        registry_key,
        keyed: Vec::new(),
        contracts: Vec::new(),
        disputes: Vec::new(),
        calls: Vec::new(),
        chain: ChainHead::genesis(),
        verified: 0,
    }
}

impl World {
    /// A fresh copy of the enrolled cast (built once), with these phase windows.
    fn new(windows: Windows) -> World {
        static BASE: OnceLock<World> = OnceLock::new();
        let mut world = BASE.get_or_init(build_base).clone();
        world.config = config(windows);
        world.check();
        world
    }

    fn m(&self, index: usize) -> Member {
        self.cast.all[index].clone()
    }

    fn id(&self, index: usize) -> MemberId {
        self.cast.all[index].id.clone()
    }

    fn advance(&mut self, seconds: u64) {
        self.now = self.now.plus_s(seconds);
    }

    fn fresh(&mut self) -> u64 {
        self.next += 1;
        self.next
    }

    /// Mints for every owner, funds each agent and sets its ceilings.
    fn open(&mut self, agents: &[(u64, [u64; 3])]) {
        let mut commands: Vec<Command> = OWNERS
            .iter()
            .map(|&o| {
                command(
                    &self.m(OPERATOR),
                    None,
                    Op::Pay(pay::Op::Mint { owner: self.id(o), amount: Amount(5_000_000) }),
                )
            })
            .collect();
        for (&agent, (funds, ceilings)) in AGENTS.iter().zip(agents) {
            let owner = self.m(self.cast.owner_index(agent));
            if *funds > 0 {
                commands.push(command(
                    &owner,
                    None,
                    Op::Pay(pay::Op::Fund { agent: self.id(agent), amount: Amount(*funds) }),
                ));
            }
            let [per_call_max, per_day_max, total_max] = ceilings.map(Amount);
            let op = Op::Pay(pay::Op::SetBudget { agent: self.id(agent), per_call_max, per_day_max, total_max });
            commands.push(command(&owner, None, op));
        }
        let results = self.submit(commands);
        assert!(results.iter().all(|r| r.outcome.is_ok()), "opening: {results:?}");
    }

    /// A paid call: the buyer asks for a token and the merchant settles it in full, in one batch.
    fn pay(&mut self, buyer: usize, merchant: usize, amount: u64) -> (MemberId, OrderId) {
        let n = self.fresh();
        let claims = TokenClaims {
            v: 1,
            iss: self.id(REGISTRY),
            jti: TokenId(format!("tok_{n}")),
            sub: self.id(buyer),
            aud: self.id(merchant),
            max: Amount(amount),
            ord: OrderId(format!("order-{n}")),
            res: "https://merchant.test/call".into(),
            iat_ms: self.now,
            exp_ms: self.now.plus_s(60),
            via: None,
        };
        let token = token::encode(&claims, &self.registry_key);
        let settle =
            Op::Pay(pay::Op::Settle { claims: claims.clone(), amount: Amount(amount), order_id: claims.ord.clone() });
        let commands = vec![
            command(&self.m(buyer), None, Op::Pay(pay::Op::IssueToken { claims: claims.clone(), token })),
            command(&self.m(merchant), None, settle),
        ];
        let results = self.submit(commands);
        let order = (claims.aud.clone(), claims.ord.clone());
        if results[1].outcome.is_ok() {
            self.calls.push(order.clone());
        }
        order
    }

    /// Runs one batch as an adapter would, folds it into the database, and checks it against the model.
    fn submit(&mut self, commands: Vec<Command>) -> Vec<Applied> {
        let before = self.db.rows.clone();
        let (transfers_before, events_before) = (self.db.transfers.len(), self.db.events.len());
        let results = self.db.apply_as_adapter(&self.config, &commands, self.now);
        for (command, applied) in commands.iter().zip(&results) {
            self.model.observe(&self.cast, &self.config, command, applied, self.now);
            if command.idem.is_some() {
                self.keyed.push(command.clone());
            }
        }
        for (command, applied) in commands.iter().zip(&results) {
            self.learn(command, applied);
        }
        if let [command] = commands.as_slice() {
            self.check_command(&before, transfers_before, events_before, command, &results[0]);
        } else {
            // A batch answers and writes exactly what its commands would one at a time, and each refusal in it
            // leaves no trace but its idempotency record.
            let mut rows = before;
            for (command, applied) in commands.iter().zip(&results) {
                let prev = rows.clone();
                let (alone, _) = apply_batch(&mut rows, &self.config, std::slice::from_ref(command), self.now);
                assert_eq!(&alone[0], applied, "{} answers differently in a batch", command.op.name());
                if applied.replayed || applied.outcome.is_err() {
                    assert_eq!((&prev.accounts, &prev.holds, &prev.docs), (&rows.accounts, &rows.holds, &rows.docs));
                    assert_eq!(
                        (&prev.budgets, &prev.settlements_by_order),
                        (&rows.budgets, &rows.settlements_by_order)
                    );
                    assert!(rows.head.seq - prev.head.seq <= u64::from(command.idem.is_some() && !applied.replayed));
                }
            }
            assert_same_rows(&rows, &self.db.rows, "one batch vs one command at a time");
        }
        self.check();
        self.verify_chain();
        results
    }

    fn one(&mut self, command: Command) -> Applied {
        self.submit(vec![command]).pop().unwrap()
    }

    /// Remembers contracts and disputes the core created, for later steps to act on.
    fn learn(&mut self, command: &Command, applied: &Applied) {
        let Ok(receipt) = &applied.outcome else { return };
        if applied.replayed {
            return;
        }
        let receipt = receipt.to_json();
        match &command.op {
            Op::Escrow(escrow::Op::CreateContract { .. }) => {
                self.contracts.push(ContractId(receipt["id"].as_str().unwrap().to_string()))
            }
            Op::Dispute(dispute::Op::FileDispute { .. }) => {
                self.disputes.push(DisputeId(receipt["id"].as_str().unwrap().to_string()))
            }
            _ => {}
        }
    }

    /// The invariants that concern one command on its own.
    fn check_command(
        &self,
        before: &Snapshot,
        transfers_before: usize,
        events_before: usize,
        command: &Command,
        applied: &Applied,
    ) {
        let rows = &self.db.rows;
        let what = format!("{} by {}", command.op.name(), command.actor.handle);
        let new_events = &self.db.events[events_before..];
        let unchanged = |what: &str| {
            assert_eq!(before.accounts, rows.accounts, "{what}: accounts changed");
            assert_eq!(before.holds, rows.holds, "{what}: holds changed");
            assert_eq!(before.docs, rows.docs, "{what}: documents changed");
            assert_eq!(before.budgets, rows.budgets, "{what}: budgets changed");
            assert_eq!(before.settlements_by_order, rows.settlements_by_order, "{what}: settlements changed");
            assert_eq!(self.db.transfers.len(), transfers_before, "{what}: transfers posted");
        };
        let fresh = command.idem.as_ref().is_none_or(|i| !before.idem.contains_key(&(i.scope.clone(), i.key.clone())));
        // 7. A refusal changes nothing but its idempotency record and the event saying so; a replay changes nothing.
        if applied.replayed {
            unchanged(&format!("replayed {what}"));
            assert!(new_events.is_empty() && before.idem == rows.idem, "{what}: a replay writes nothing");
        } else if let Err(refusal) = &applied.outcome {
            unchanged(&format!("refused {what} ({:?})", refusal.code));
            let recorded: Vec<&str> = new_events.iter().map(|e| e.kind.as_str()).collect();
            // A key first used for another request (idempotency_conflict) records nothing.
            let recorded_key = command.idem.is_some() && fresh;
            let expected: &[&str] = if recorded_key { &["refusal.recorded"] } else { &[] };
            assert_eq!(recorded, expected, "{what}: a refusal's only event");
            assert_eq!(rows.idem.len(), before.idem.len() + usize::from(recorded_key));
        }
        let code = applied.outcome.as_ref().err().map(|r| r.code);
        match &command.op {
            // 3. A disputed milestone is never released; its buyer is told why.
            Op::Escrow(escrow::Op::ContractAct { contract, act: ContractAct::Release { milestone }, .. }) => {
                let Some(c) = contract_doc(before, contract) else { return };
                let disputed =
                    c.milestones.get(*milestone as usize).is_some_and(|m| m.state == MilestoneState::Disputed);
                if disputed {
                    assert!(applied.outcome.is_err(), "{what}: a disputed milestone was released");
                    if fresh && self.cast.acts_for(&command.actor, &c.buyer) {
                        assert_eq!(code, Some(Code::MilestoneDisputed), "{what}");
                    }
                }
            }
            Op::Dispute(dispute::Op::DisputeAct { dispute, act, .. }) => {
                let Some(d) = dispute_doc(before, dispute) else { return };
                match act {
                    // 5. A second execution is refused with the outcome attached.
                    DisputeAct::Execute if d.phase == Phase::Executed => {
                        assert!(applied.outcome.is_err(), "{what}: executed twice");
                        if fresh {
                            let refusal = applied.outcome.as_ref().unwrap_err();
                            assert_eq!(refusal.code, Code::DisputeExecuted, "{what}");
                            assert_eq!(Some(&refusal.facts), d.outcome.as_ref(), "{what}: the outcome is attached");
                        }
                    }
                    // 8. Nobody rules on a case they (or their owner) are party to.
                    DisputeAct::Rule { .. } => {
                        let principals = [self.cast.principal(&d.claimant), self.cast.principal(&d.respondent)];
                        let party = [&d.claimant, &d.respondent].contains(&&command.actor.id)
                            || principals.contains(&Some(command.actor.principal().clone()));
                        if party && fresh {
                            assert_eq!(code, Some(Code::PartyCannotRule), "{what}");
                        }
                        if applied.outcome.is_ok() && !applied.replayed {
                            assert_eq!(d.arbiter.as_ref(), Some(&command.actor.id), "{what}: only the arbiter rules");
                        }
                    }
                    // 8. Only parties (or their owners) add evidence.
                    DisputeAct::Evidence { .. } => {
                        let party = self.cast.acts_for(&command.actor, &d.claimant)
                            || self.cast.acts_for(&command.actor, &d.respondent);
                        if !party && fresh {
                            assert_eq!(code, Some(Code::NotParty), "{what}");
                        }
                    }
                    _ => {}
                }
                if let Some(event) = new_events.iter().find(|e| e.kind == "dispute.executed") {
                    self.check_execution(before, &d, &event.body);
                }
            }
            _ => {}
        }
    }

    /// 6 and 8: what one execution paid the claimant, and what it slashed.
    fn check_execution(&self, before: &Snapshot, d: &Dispute, outcome: &serde_json::Value) {
        let rows = &self.db.rows;
        let after = dispute_doc(rows, &d.id).unwrap();
        let ruling = after.rulings.last().unwrap();
        let amount = |name: &str| outcome[name].as_u64().unwrap_or_else(|| panic!("outcome {name}: {outcome}"));
        let available = |rows: &Snapshot, account: &AccountId| rows.accounts.get(account).map_or(0, |a| a.available());
        // The claimant gets back what the ruling refunds, as far as the frozen units reach, plus the slash's
        // restitution; and an appeal bond when it is due to the claimant.
        let refunded = amount("refunded_minor");
        assert_eq!(refunded, ruling.refund.0.min(d.frozen.total().0), "refund within what was frozen");
        assert_eq!(amount("shortfall_minor"), ruling.refund.0 - refunded);
        let restitution = amount("slash_to_claimant_minor");
        // The stake-funded part of the refund is restitution already counted in `refunded`.
        let stake_part = refunded - refunded.min(d.frozen.escrow.0 + d.frozen.balance.0);
        let made_good = restitution - stake_part;
        let extra = amount("slashed_minor") - stake_part;
        assert_eq!(made_good, extra.min(amount("shortfall_minor")), "restitution first");
        let bond = match &after.appeal {
            Some(appeal) => {
                let returned = outcome["bond"]["returned"].as_bool().unwrap();
                let to_claimant = if appeal.side == Side::Claimant { returned } else { !returned };
                if to_claimant {
                    appeal.bond.0
                } else {
                    0
                }
            }
            None => 0,
        };
        let claimant = AccountId::of_member(&d.claimant);
        let gained = available(rows, &claimant) - available(before, &claimant);
        assert_eq!(gained, (refunded + made_good + bond) as i128, "what the claimant received: {outcome}");
        // Slashed ≤ the stake available at execution (its freeze released first), and the stake stays ≥ 0.
        let stake = AccountId::stake_of(&d.respondent);
        let stake_then = available(before, &stake) + d.frozen.stake.0 as i128;
        let slashed = amount("slashed_minor");
        assert!(slashed as i128 <= stake_then, "slashed {slashed} of {stake_then}");
        assert!(slashed <= ruling.slash.0.max(stake_part), "slashed {slashed}: more than the ruling and restitution");
        assert_eq!(slashed, amount("slash_to_claimant_minor") + amount("slash_to_insurance_minor"));
        assert!(available(rows, &stake) >= 0);
    }

    /// Every invariant, checked after every batch.
    fn check(&self) {
        let rows = &self.db.rows;
        let model = &self.model;
        // 1. Conservation, floors, pending = pending holds, and agreement with the model.
        self.db.assert_accounts(&model.balances, &model.pending);
        for (id, balance) in &model.balances {
            assert!(*balance == 0 || rows.accounts.contains_key(id), "model account {id} missing");
        }
        for hold in rows.holds.values() {
            assert!(hold.posted_amount <= hold.amount, "hold {} posted over its amount", hold.id);
            assert_eq!(hold.resolved_at.is_some(), hold.state != HoldState::Pending);
        }
        let touched: HashSet<&HoldId> = self.db.transfers.iter().filter_map(|t| t.hold.as_ref()).collect();
        // Exactly once: each milestone's `milestone.released` and `milestone.reclaimed` events, together.
        let mut resolutions: HashMap<(String, u32), usize> = HashMap::new();
        for event in
            self.db.events.iter().filter(|e| ["milestone.released", "milestone.reclaimed"].contains(&e.kind.as_str()))
        {
            let key = (
                event.body["contract"].as_str().unwrap().to_string(),
                event.body["milestone"].as_u64().unwrap() as u32,
            );
            *resolutions.entry(key).or_default() += 1;
        }
        // 2 and 3. Contracts balance, hold exactly their open milestones, and nothing moves on a disputed one.
        let contracts = rows.docs.keys().filter(|(kind, _)| *kind == DocKind::Contract).count();
        assert_eq!(contracts, model.contracts.len(), "contract count");
        for (id, expected) in &model.contracts {
            let row = &rows.docs[&(DocKind::Contract, id.to_string())];
            let c = decode::<Contract>(row).unwrap();
            assert!(c.balanced(), "contract {id} out of balance: {c:?}");
            assert_eq!(row.parties, [c.buyer.clone(), c.seller.clone(), c.arbiter.clone()]);
            assert_eq!(row.due_at, c.due_at(), "contract {id}: sweeper column");
            let got = (c.state, c.released_net.0, c.fees.0, c.refunded.0, c.held().0, c.total.0);
            let want = (
                expected.state,
                expected.released_net,
                expected.fees,
                expected.refunded,
                expected.held(),
                expected.total,
            );
            assert_eq!(got, want, "contract {id}: state, released, fees, refunded, held, total");
            assert_eq!((&c.buyer, &c.seller, &c.arbiter), (&expected.buyer, &expected.seller, &expected.arbiter));
            let mut pending_holds = 0;
            for (m, e) in c.milestones.iter().zip(&expected.milestones) {
                let what = format!("contract {id} milestone {}", m.index);
                assert_eq!((m.state, m.amount.0, m.review_deadline), (e.state, e.amount, e.review_deadline), "{what}");
                assert_eq!((&m.released_at, &m.dispute), (&e.released_at, &e.dispute), "{what}");
                let hold = &rows.holds[&milestone_hold(id, m.index)];
                assert_eq!((&hold.account, hold.amount), (&AccountId::of_member(&c.buyer), m.amount), "{what}: hold");
                let open =
                    matches!(m.state, MilestoneState::Pending | MilestoneState::Delivered | MilestoneState::Disputed);
                assert_eq!(hold.state == HoldState::Pending, open, "{what}: hold {:?}", hold.state);
                if open {
                    pending_holds += hold.amount.0;
                }
                match m.state {
                    MilestoneState::Disputed => {
                        assert!(!touched.contains(&hold.id), "{what}: a transfer touched a disputed milestone");
                    }
                    MilestoneState::Released => assert_eq!(hold.posted_amount, m.amount, "{what}: posted in full"),
                    MilestoneState::Voided => assert_eq!(hold.state, HoldState::Voided, "{what}"),
                    // A reclaim voids the hold back to the buyer: nothing ever posted from it, never delivered,
                    // and never before the due date and the grace.
                    MilestoneState::Reclaimed => {
                        assert_eq!((hold.state, hold.posted_amount), (HoldState::Voided, Amount::ZERO), "{what}");
                        assert!(!touched.contains(&hold.id), "{what}: a transfer touched a reclaimed milestone");
                        assert!(m.delivered_at.is_none() && m.dispute.is_none(), "{what}: reclaimed after delivery");
                        let at = m.reclaimed_at.expect("a reclaimed milestone says when");
                        assert!(at >= m.reclaimable_at(), "{what}: reclaimed before its due date and the grace");
                    }
                    _ => {}
                }
                let ended = resolutions.get(&(id.to_string(), m.index)).copied().unwrap_or(0);
                let expected_ended =
                    usize::from(matches!(m.state, MilestoneState::Released | MilestoneState::Reclaimed));
                assert_eq!(ended, expected_ended, "{what}: released or reclaimed events");
            }
            assert_eq!(c.held().0, pending_holds, "contract {id}: held vs its pending holds");
        }
        // Disputes agree with the model; their freeze holds are pending exactly until execution.
        let disputes = rows.docs.keys().filter(|(kind, _)| *kind == DocKind::Dispute).count();
        assert_eq!(disputes, model.disputes.len(), "dispute count");
        let mut executed_events: HashMap<&str, usize> = HashMap::new();
        for event in self.db.events.iter().filter(|e| e.kind == "dispute.executed") {
            *executed_events.entry(event.body["dispute"].as_str().unwrap()).or_default() += 1;
        }
        for (id, e) in &model.disputes {
            let row = &rows.docs[&(DocKind::Dispute, id.to_string())];
            let d = decode::<Dispute>(row).unwrap();
            let what = format!("dispute {id}");
            assert_eq!(row.parties, [d.claimant.clone(), d.respondent.clone()]);
            assert_eq!(row.due_at, if d.phase == Phase::Executed { None } else { d.deadline }, "{what}: sweeper");
            assert_eq!((&d.subject, &d.claimant, &d.respondent), (&e.subject, &e.claimant, &e.respondent), "{what}");
            assert_eq!(
                (d.phase, d.deadline, d.round, d.claimed.0),
                (e.phase, e.deadline, e.round, e.claimed),
                "{what}"
            );
            assert_eq!((&d.arbiter, &d.arbiters_used, d.responded), (&e.arbiter, &e.used, e.responded), "{what}");
            let sides =
                [Side::Claimant, Side::Respondent].map(|side| d.evidence.iter().filter(|x| x.side == side).count());
            assert_eq!((sides, d.rulings.len(), d.frozen), (e.evidence, e.rulings.len(), e.frozen), "{what}");
            assert_eq!(
                d.appeal.as_ref().map(|a| (&a.by, a.bond.0, a.budgeted)),
                e.appeal.as_ref().map(|a| (&a.party, a.bond, a.budget_day.is_some()))
            );
            for (ruling, expected) in d.rulings.iter().zip(&e.rulings) {
                let got = (ruling.decision, ruling.refund.0, ruling.slash.0, ruling.arbiter.is_none());
                assert_eq!(got, (expected.decision, expected.refund, expected.slash, expected.default), "{what}");
            }
            let executed = d.phase == Phase::Executed;
            // 5. Execution runs once.
            assert_eq!(executed_events.get(id.as_str()).copied().unwrap_or(0), usize::from(executed), "{what}: events");
            assert_eq!(d.outcome.is_some(), executed, "{what}: outcome");
            let [balance, stake, bond] = dispute_holds(id);
            for (hold, amount) in [(balance, d.frozen.balance.0), (stake, d.frozen.stake.0)] {
                match rows.holds.get(&hold) {
                    Some(h) => assert_eq!((h.amount.0, h.state == HoldState::Pending), (amount, !executed), "{what}"),
                    None => assert_eq!(amount, 0, "{what}: freeze hold {hold} missing"),
                }
            }
            match (rows.holds.get(&bond), &d.appeal) {
                (Some(h), Some(appeal)) => {
                    assert_eq!((h.amount, h.state == HoldState::Pending), (appeal.bond, !executed), "{what}: bond")
                }
                (None, None) => {}
                (hold, appeal) => panic!("{what}: bond hold {hold:?} for appeal {appeal:?}"),
            }
        }
        // 6. Stake funds refunds and slashes of rulings and its own withdrawal, never a release.
        for t in &self.db.transfers {
            let from_stake = t.debit.0.starts_with("stake:");
            match t.kind {
                TransferKind::Slash => assert!(from_stake, "a slash not from stake: {t:?}"),
                TransferKind::Unstake | TransferKind::Refund => {}
                _ => assert!(!from_stake, "stake funded a {:?}: {t:?}", t.kind),
            }
            assert!(t.kind != TransferKind::Release || t.debit.0.starts_with("acct:"), "release from {}", t.debit);
        }
        // Stake records agree with the model.
        let stakes = rows.docs.keys().filter(|(kind, _)| *kind == DocKind::Stake).count();
        assert_eq!(stakes, model.stakes.len(), "stake record count");
        for (member, e) in &model.stakes {
            let row = &rows.docs[&(DocKind::Stake, member.to_string())];
            let s: Stake = serde_json::from_value(row.body.clone()).unwrap();
            assert_eq!(s.open_disputes, e.open, "open disputes against {member}");
            assert_eq!(s.unlock.map(|u| (u.amount.0, u.available_at)), e.unlock, "unlock of {member}");
            assert_eq!(s.budgeted.0, e.budgeted, "stake of {member} counted against its budget");
        }
        // Budgets match the model.
        let today = self.now.utc_day();
        for (agent, expected) in &model.budgets {
            let budget = &rows.budgets[agent];
            expected.assert_spent(budget, agent, today);
        }
        // Counts of idempotency records, events and transfers.
        self.db.assert_counts(model.idem.len(), model.events, model.transfers);
        // 1 and 4. The auditor recomputes every account from the transfers and every hold's posted amount.
        self.db.audit_ledger();
    }

    /// Verifies the events appended since the last call, continuing the chain.
    fn verify_chain(&mut self) {
        chain::verify_page(&mut self.chain, &self.db.events[self.verified..]).expect("the chain verifies");
        self.verified = self.db.events.len();
        assert_eq!(self.chain, self.db.rows.head, "the stored head is the last event");
    }
}

// ---- generated sequences -----------------------------------------------------------------------------------------

#[derive(Clone, Debug)]
enum SellerPick {
    /// An agent of another owner than the buyer's.
    Other(usize),
    /// The independent arbiter's agent.
    Arbiter,
    SameOwner,
    Itself,
    Ghost,
}

#[derive(Clone, Debug)]
enum ArbiterPick {
    Desk,
    Independent,
    Buyer,
    Seller,
    BuyerMate,
    Operator,
    Ghost,
}

#[derive(Clone, Copy, Debug)]
enum Flaw {
    NoMilestones,
    TooMany,
    ZeroAmount,
    PastDue,
    NoDescription,
    BadTerms,
    ShortWindow,
    NoKey,
}

#[derive(Clone, Debug)]
enum CAct {
    Accept,
    Decline,
    Cancel,
    Deliver(Option<u8>, bool),
    Release(Option<u8>),
    Reclaim(Option<u8>),
    Advance,
}

#[derive(Clone, Debug)]
enum SubjectPick {
    Milestone(usize, Option<u8>),
    Call(usize),
    Unpaid(usize),
}

#[derive(Clone, Copy, Debug)]
enum ClaimPick {
    Full,
    Part(u16),
    Zero,
    Over,
}

#[derive(Clone, Debug)]
enum Act {
    Create {
        buyer: usize,
        seller: SellerPick,
        arbiter: ArbiterPick,
        milestones: Vec<(u64, u32)>,
        flaw: Option<Flaw>,
        window_s: u64,
    },
    /// `who`: `None` is the natural actor; see [`World::contract_actor`].
    Contract {
        pick: usize,
        who: Option<u8>,
        act: CAct,
    },
    File {
        subject: SubjectPick,
        who: Option<u8>,
        claim: ClaimPick,
    },
    /// `who`: see [`World::dispute_actor`]; `None` is the assigned arbiter for a ruling.
    Evidence {
        pick: usize,
        who: u8,
        forged: bool,
        bad_hash: bool,
        url: bool,
    },
    Rule {
        pick: usize,
        who: Option<u8>,
        decision: Decision,
        share: u16,
        slash: u64,
        no_reasons: bool,
    },
    Appeal {
        pick: usize,
        who: u8,
    },
    Execute {
        pick: usize,
        who: u8,
    },
    Advance {
        pick: usize,
        by_registry: bool,
    },
    Ghost {
        dispute: bool,
    },
    StakeLock {
        agent: usize,
        amount: u64,
    },
    StakeUnlock {
        agent: usize,
        share: Option<u16>,
    },
    StakeWithdraw {
        agent: usize,
    },
}

#[derive(Clone, Debug)]
enum Step {
    Wait(u64),
    /// Moves the clock to a pending deadline, give or take a millisecond (never backwards).
    ToDeadline(usize, i8),
    Pay {
        buyer: usize,
        offset: usize,
        amount: u64,
    },
    /// The sweeper's pass: one batch advancing every contract and dispute that is due.
    Sweep,
    Replay(usize, bool),
    Act(Act, Option<u8>),
    /// Several acts in one batch, all built from the rows as they were before it (as the edge reads them); with
    /// `twice`, the last command is sent a second time in the same batch.
    Batch(Vec<(Act, Option<u8>)>, bool),
    /// The natural next move on an open contract or dispute, with the clock moved past a deadline where that is the
    /// move; `choice` picks among the moves and the ruling fields are used if it is a ruling.
    Progress {
        pick: usize,
        choice: u8,
        decision: Decision,
        share: u16,
        slash: u64,
    },
}

fn key() -> impl Strategy<Value = Option<u8>> {
    prop_oneof![6 => Just(None), 1 => (0u8..3).prop_map(Some), 3 => (3u8..=255).prop_map(Some)]
}

fn agent() -> impl Strategy<Value = usize> {
    prop::sample::select(AGENTS.to_vec())
}

fn who() -> impl Strategy<Value = Option<u8>> {
    prop_oneof![8 => Just(None), 2 => (0u8..16).prop_map(Some)]
}

fn create() -> impl Strategy<Value = Act> {
    let seller = prop_oneof![
        12 => (0usize..3).prop_map(SellerPick::Other),
        1 => Just(SellerPick::Arbiter),
        1 => Just(SellerPick::SameOwner),
        1 => Just(SellerPick::Itself),
        1 => Just(SellerPick::Ghost),
    ];
    let arbiter = prop_oneof![
        8 => Just(ArbiterPick::Desk),
        6 => Just(ArbiterPick::Independent),
        1 => Just(ArbiterPick::Buyer),
        1 => Just(ArbiterPick::Seller),
        1 => Just(ArbiterPick::BuyerMate),
        1 => Just(ArbiterPick::Operator),
        1 => Just(ArbiterPick::Ghost),
    ];
    let milestone = (prop_oneof![6 => 1u64..=20_000, 1 => 20_000u64..=400_000], 1u32..=400);
    let flaw = prop_oneof![
        20 => Just(None),
        1 => Just(Some(Flaw::NoMilestones)),
        1 => Just(Some(Flaw::TooMany)),
        1 => Just(Some(Flaw::ZeroAmount)),
        1 => Just(Some(Flaw::PastDue)),
        1 => Just(Some(Flaw::NoDescription)),
        1 => Just(Some(Flaw::BadTerms)),
        1 => Just(Some(Flaw::ShortWindow)),
        1 => Just(Some(Flaw::NoKey)),
    ];
    let window = prop_oneof![4 => 60u64..=2 * HOUR, 1 => 2 * HOUR..=4 * DAY];
    let buyer = prop_oneof![6 => prop::sample::select(TRADERS.to_vec()), 1 => agent()];
    (buyer, seller, arbiter, prop::collection::vec(milestone, 1..=4), flaw, window).prop_map(
        |(buyer, seller, arbiter, milestones, flaw, window_s)| Act::Create {
            buyer,
            seller,
            arbiter,
            milestones,
            flaw,
            window_s,
        },
    )
}

fn milestone_index() -> impl Strategy<Value = Option<u8>> {
    prop_oneof![12 => any::<u8>().prop_map(Some), 1 => Just(None)]
}

fn contract_act() -> impl Strategy<Value = Act> {
    let act = prop_oneof![
        4 => Just(CAct::Accept),
        1 => Just(CAct::Decline),
        1 => Just(CAct::Cancel),
        6 => (milestone_index(), prop::bool::weighted(0.05)).prop_map(|(m, bad)| CAct::Deliver(m, bad)),
        5 => milestone_index().prop_map(CAct::Release),
        4 => milestone_index().prop_map(CAct::Reclaim),
        2 => Just(CAct::Advance),
    ];
    (any::<usize>(), who(), act).prop_map(|(pick, who, act)| Act::Contract { pick, who, act })
}

fn dispute_acts() -> impl Strategy<Value = Act> {
    let party = prop_oneof![6 => Just(0u8), 6 => Just(2u8), 1 => Just(1u8), 1 => Just(3u8), 2 => 4u8..16];
    let subject = prop_oneof![
        6 => (any::<usize>(), milestone_index()).prop_map(|(pick, m)| SubjectPick::Milestone(pick, m)),
        4 => any::<usize>().prop_map(SubjectPick::Call),
        1 => any::<usize>().prop_map(SubjectPick::Unpaid),
    ];
    let claim = prop_oneof![
        6 => Just(ClaimPick::Full),
        3 => (1u16..1000).prop_map(ClaimPick::Part),
        1 => Just(ClaimPick::Zero),
        1 => Just(ClaimPick::Over),
    ];
    let (decision, slash) = (decision(), slash());
    prop_oneof![
        6 => (subject, prop_oneof![8 => Just(None), 1 => Just(Some(1u8)), 2 => (2u8..16).prop_map(Some)], claim)
            .prop_map(|(subject, who, claim)| Act::File { subject, who, claim }),
        8 => (any::<usize>(), party.clone(), prop::bool::weighted(0.1), prop::bool::weighted(0.03), any::<bool>())
            .prop_map(|(pick, who, forged, bad_hash, url)| Act::Evidence { pick, who, forged, bad_hash, url }),
        6 => (any::<usize>(), prop_oneof![8 => Just(None), 3 => (0u8..16).prop_map(Some)], decision, 0u16..=1000,
                slash, prop::bool::weighted(0.03))
            .prop_map(|(pick, who, decision, share, slash, no_reasons)| Act::Rule {
                pick, who, decision, share, slash, no_reasons
            }),
        4 => (any::<usize>(), party.clone()).prop_map(|(pick, who)| Act::Appeal { pick, who }),
        3 => (any::<usize>(), 0u8..16).prop_map(|(pick, who)| Act::Execute { pick, who }),
        5 => (any::<usize>(), prop::bool::weighted(0.9)).prop_map(|(pick, by_registry)| Act::Advance { pick, by_registry }),
        1 => any::<bool>().prop_map(|dispute| Act::Ghost { dispute }),
    ]
}

fn decision() -> impl Strategy<Value = Decision> {
    prop_oneof![Just(Decision::RefundFull), Just(Decision::RefundPartial), Just(Decision::Reject)]
}

/// None, within a typical stake, or far beyond it.
fn slash() -> impl Strategy<Value = u64> {
    prop_oneof![4 => Just(0u64), 3 => 1u64..=5_000, 2 => 20_000u64..=2_000_000]
}

fn stake_acts() -> impl Strategy<Value = Act> {
    prop_oneof![
        3 => (agent(), 1u64..=60_000).prop_map(|(agent, amount)| Act::StakeLock { agent, amount }),
        2 => (agent(), prop_oneof![1 => Just(None), 4 => (0u16..=1100).prop_map(Some)])
            .prop_map(|(agent, share)| Act::StakeUnlock { agent, share }),
        2 => agent().prop_map(|agent| Act::StakeWithdraw { agent }),
    ]
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        3 => prop_oneof![3 => 1u64..=600, 3 => 600u64..=3 * HOUR, 2 => 3 * HOUR..=DAY, 1 => DAY..=9 * DAY]
            .prop_map(Step::Wait),
        4 => (any::<usize>(), -1i8..=1).prop_map(|(pick, delta)| Step::ToDeadline(pick, delta)),
        3 => (agent(), 1usize..AGENTS.len(), prop_oneof![3 => 1u64..=20_000, 1 => 20_000u64..=100_000])
            .prop_map(|(buyer, offset, amount)| Step::Pay { buyer, offset, amount }),
        3 => Just(Step::Sweep),
        1 => (any::<usize>(), prop::bool::weighted(0.7)).prop_map(|(pick, same)| Step::Replay(pick, same)),
        3 => (create(), key()).prop_map(|(act, key)| Step::Act(act, key)),
        6 => (contract_act(), key()).prop_map(|(act, key)| Step::Act(act, key)),
        10 => (dispute_acts(), key()).prop_map(|(act, key)| Step::Act(act, key)),
        4 => (stake_acts(), key()).prop_map(|(act, key)| Step::Act(act, key)),
        3 => (prop::collection::vec((prop_oneof![contract_act(), dispute_acts(), stake_acts()], key()), 1..=4),
            any::<bool>())
            .prop_map(|(acts, twice)| Step::Batch(acts, twice)),
        30 => (any::<usize>(), any::<u8>(), decision(), 0u16..=1000, slash())
            .prop_map(|(pick, choice, decision, share, slash)| Step::Progress { pick, choice, decision, share, slash }),
    ]
}

/// Each agent's funds and ceilings (per call, per day, total).
fn opening() -> impl Strategy<Value = Vec<(u64, [u64; 3])>> {
    let ceilings = prop_oneof![
        1 => prop::array::uniform3(0u64..=50_000),
        6 => Just([400_000u64, 1_000_000, 3_000_000]),
    ];
    let funds = prop_oneof![2 => 0u64..=30_000, 3 => 30_000u64..=200_000, 2 => 200_000u64..=800_000];
    prop::collection::vec((funds, ceilings), AGENTS.len())
}

impl World {
    /// A generated index into `items`: mostly one of the last few, sometimes any.
    fn recent<T: Clone>(items: &[T], pick: usize) -> Option<T> {
        let n = items.len();
        if n == 0 {
            return None;
        }
        let at = if pick.is_multiple_of(3) { pick / 3 % n } else { n - 1 - (pick / 3) % n.min(3) };
        Some(items[at].clone())
    }

    /// Picks among `all`: mostly among those `want` accepts (when there are any), sometimes any at all.
    fn choose<T: Clone>(&self, all: &[T], pick: usize, want: impl Fn(&T) -> bool) -> Option<T> {
        let wanted: Vec<T> = all.iter().filter(|id| want(id)).cloned().collect();
        if pick.is_multiple_of(4) || wanted.is_empty() {
            World::recent(all, pick / 4)
        } else {
            World::recent(&wanted, pick / 4)
        }
    }

    /// A contract to act on: mostly one with a milestone in one of `states` (and in contract state `state`).
    fn pick_contract(&self, pick: usize, state: Option<ContractState>, states: &[MilestoneState]) -> Option<Contract> {
        let id = self.choose(&self.contracts, pick, |id| {
            let c = &self.model.contracts[id];
            state.is_none_or(|s| s == c.state)
                && (states.is_empty() || c.milestones.iter().any(|m| states.contains(&m.state)))
        })?;
        contract_doc(&self.db.rows, &id)
    }

    /// A dispute to act on: mostly one in one of `phases`.
    fn pick_dispute(&self, pick: usize, phases: &[Phase]) -> Option<Dispute> {
        let id = self.choose(&self.disputes, pick, |id| phases.contains(&self.model.disputes[id].phase))?;
        dispute_doc(&self.db.rows, &id)
    }

    /// For contracts: 0 the buyer, 1 its owner, 2 the seller, 3 its owner, 4 the arbiter, 5 the registry, 6.. anyone.
    fn contract_actor(&self, c: &Contract, who: u8) -> usize {
        let buyer = self.cast.index_of(&c.buyer);
        let seller = self.cast.index_of(&c.seller);
        match who {
            0 => buyer,
            1 => self.cast.owner_index(buyer),
            2 => seller,
            3 => self.cast.owner_index(seller),
            4 => self.cast.index_of(&c.arbiter),
            5 => REGISTRY,
            n => (n as usize - 6) % self.cast.all.len(),
        }
    }

    /// For disputes: 0 the claimant, 1 its owner, 2 the respondent, 3 its owner, 4 the assigned arbiter (the desk if
    /// none), 5 the desk, 6 the operator, 7 the independent arbiter, 8 its owner, 9.. anyone.
    fn dispute_actor(&self, d: &Dispute, who: u8) -> usize {
        let claimant = self.cast.index_of(&d.claimant);
        let respondent = self.cast.index_of(&d.respondent);
        match who {
            0 => claimant,
            1 => self.cast.owner_index(claimant),
            2 => respondent,
            3 => self.cast.owner_index(respondent),
            4 => d.arbiter.as_ref().map_or(DESK, |a| self.cast.index_of(a)),
            5 => DESK,
            6 => OPERATOR,
            7 => ARBITER,
            8 => self.cast.owner_index(ARBITER),
            n => (n as usize - 9) % self.cast.all.len(),
        }
    }

    /// A milestone index: mostly one in one of `states`, sometimes any, rarely one past the end.
    fn milestone(c: &Contract, pick: Option<u8>, states: &[MilestoneState]) -> u32 {
        let count = c.milestones.len() as u32;
        let Some(pick) = pick else { return count };
        let wanted: Vec<u32> = c.milestones.iter().filter(|m| states.contains(&m.state)).map(|m| m.index).collect();
        if pick.is_multiple_of(4) || wanted.is_empty() {
            pick as u32 % count
        } else {
            wanted[(pick / 4) as usize % wanted.len()]
        }
    }

    /// Turns a generated act into a command, or `None` when it has nothing to act on.
    fn build(&mut self, act: &Act, key: Option<u8>) -> Option<Command> {
        let key_text = key.map(|k| format!("k{k}"));
        let key = key_text.as_deref();
        Some(match act {
            Act::Create { buyer, seller, arbiter, milestones, flaw, window_s } => {
                let buyer_owner = self.cast.owner_index(*buyer);
                let others: Vec<usize> =
                    TRADERS.into_iter().filter(|&a| self.cast.owner_index(a) != buyer_owner).collect();
                let mate = AGENTS.into_iter().find(|&a| a != *buyer && self.cast.owner_index(a) == buyer_owner);
                let seller_index = match seller {
                    SellerPick::Other(i) => Some(others[i % others.len()]),
                    SellerPick::Arbiter => Some(ARBITER),
                    SellerPick::SameOwner => Some(mate.unwrap_or(*buyer)),
                    SellerPick::Itself => Some(*buyer),
                    SellerPick::Ghost => None,
                };
                let seller_id = seller_index.map_or_else(ghost, |s| self.id(s));
                let arbiter_id = match arbiter {
                    ArbiterPick::Desk => self.id(DESK),
                    ArbiterPick::Independent => self.id(ARBITER),
                    ArbiterPick::Buyer => self.id(*buyer),
                    ArbiterPick::Seller => seller_id.clone(),
                    ArbiterPick::BuyerMate => self.id(mate.unwrap_or(*buyer)),
                    ArbiterPick::Operator => self.id(OPERATOR),
                    ArbiterPick::Ghost => ghost(),
                };
                let mut specs: Vec<MilestoneSpec> = milestones
                    .iter()
                    .enumerate()
                    .map(|(i, (amount, due_h))| MilestoneSpec {
                        amount: Amount(*amount),
                        description: format!("milestone {i}"),
                        due_at: self.now.plus_s(*due_h as u64 * HOUR),
                    })
                    .collect();
                let mut terms = sha256_hex(format!("terms {}", self.fresh()).as_bytes());
                let mut window_s = *window_s;
                let mut key = Some(key.map_or_else(|| format!("c{}", self.fresh()), str::to_string));
                match flaw {
                    None => {}
                    Some(Flaw::NoMilestones) => specs.clear(),
                    Some(Flaw::TooMany) => specs = vec![specs[0].clone(); CONTRACT_MILESTONES_MAX + 1],
                    Some(Flaw::ZeroAmount) => specs.last_mut().unwrap().amount = Amount::ZERO,
                    Some(Flaw::PastDue) => specs.last_mut().unwrap().due_at = self.now,
                    Some(Flaw::NoDescription) => specs[0].description.clear(),
                    Some(Flaw::BadTerms) => terms = terms.to_uppercase(),
                    Some(Flaw::ShortWindow) => window_s = REVIEW_WINDOW_S_MIN - 1,
                    Some(Flaw::NoKey) => key = None,
                }
                let op = Op::Escrow(escrow::Op::CreateContract {
                    seller: seller_id,
                    arbiter: arbiter_id,
                    milestones: specs,
                    terms_hash: terms,
                    review_window_s: window_s,
                });
                command(&self.m(*buyer), key.as_deref(), op)
            }
            Act::Contract { pick, who, act } => {
                use MilestoneState::{Delivered, Pending};
                let c = match act {
                    CAct::Accept | CAct::Decline | CAct::Cancel => {
                        self.pick_contract(*pick, Some(ContractState::Offered), &[])?
                    }
                    CAct::Deliver(..) | CAct::Reclaim(_) => {
                        self.pick_contract(*pick, Some(ContractState::Accepted), &[Pending])?
                    }
                    CAct::Release(_) | CAct::Advance => self.pick_contract(*pick, None, &[Delivered])?,
                };
                let (natural, act) = match act {
                    CAct::Accept => (2, ContractAct::Accept),
                    CAct::Decline => (2, ContractAct::Decline),
                    CAct::Cancel => (0, ContractAct::Cancel),
                    CAct::Deliver(m, bad) => {
                        let mut evidence_sha256 = sha256_hex(format!("delivery {}", self.fresh()).as_bytes());
                        if *bad {
                            evidence_sha256.truncate(10);
                        }
                        (2, ContractAct::Deliver { milestone: World::milestone(&c, *m, &[Pending]), evidence_sha256 })
                    }
                    CAct::Release(m) => (0, ContractAct::Release { milestone: World::milestone(&c, *m, &[Delivered]) }),
                    CAct::Reclaim(m) => (0, ContractAct::Reclaim { milestone: World::milestone(&c, *m, &[Pending]) }),
                    CAct::Advance => (5, ContractAct::Advance),
                };
                let actor = self.contract_actor(&c, who.unwrap_or(natural));
                command(&self.m(actor), key, contract_op(&c, act))
            }
            Act::File { subject, who, claim } => {
                let (subject, claimant, respondent, at_risk) = match subject {
                    SubjectPick::Milestone(pick, m) => {
                        use MilestoneState::{Delivered, Pending, Released};
                        let c = self.pick_contract(*pick, None, &[Pending, Delivered, Released])?;
                        let index = World::milestone(&c, *m, &[Pending, Delivered, Released]);
                        let id = c.id.clone();
                        let at_risk = c.milestones.get(index as usize).map_or(1_000, |m| m.amount.0);
                        (Subject::Milestone { contract: id, index }, c.buyer, c.seller, at_risk)
                    }
                    SubjectPick::Call(pick) => {
                        let (merchant, order_id) = World::recent(&self.calls, *pick)?;
                        let s = self.db.rows.settlements_by_order[&(merchant.clone(), order_id.clone())].clone();
                        (Subject::Call { merchant, order_id }, s.buyer, s.merchant, s.amount.0)
                    }
                    SubjectPick::Unpaid(merchant) => {
                        let merchant = self.id(AGENTS[merchant % AGENTS.len()]);
                        let buyer = self.id(AGENTS[(merchant.0.len() + self.next as usize) % AGENTS.len()]);
                        let order_id = OrderId(format!("unpaid-{}", self.fresh()));
                        (Subject::Call { merchant: merchant.clone(), order_id }, buyer, merchant, 1_000)
                    }
                };
                let claimed = match claim {
                    ClaimPick::Full => at_risk,
                    ClaimPick::Part(share) => (at_risk * *share as u64 / 1000).max(1),
                    ClaimPick::Zero => 0,
                    ClaimPick::Over => at_risk + 1,
                };
                let claimant_index = self.cast.index_of(&claimant);
                let actor = match who {
                    None => claimant_index,
                    Some(1) => self.cast.owner_index(claimant_index),
                    Some(n) => (*n as usize) % self.cast.all.len(),
                };
                let op = Op::Dispute(dispute::Op::FileDispute {
                    subject,
                    claimant,
                    respondent,
                    reason: ReasonCode::NotAsDescribed,
                    claimed: Amount(claimed),
                    note: "not what was asked for".into(),
                });
                command(&self.m(actor), key, op)
            }
            Act::Evidence { pick, who, forged, bad_hash, url } => {
                let d = self.pick_dispute(*pick, &[Phase::Filed, Phase::Evidence])?;
                let actor = self.dispute_actor(&d, *who);
                let mut sha256 = sha256_hex(format!("evidence {}", self.fresh()).as_bytes());
                let signer = if *forged { Some(&self.registry_key) } else { self.cast.keys[actor].as_ref() };
                let signature =
                    signer.map_or_else(|| "not-a-signature".into(), |k| sign(k, &evidence_message(&d.id, &sha256)));
                if *bad_hash {
                    sha256 = sha256.to_uppercase();
                }
                let url = url.then(|| format!("https://evidence.test/{}", self.next));
                command(&self.m(actor), key, dispute_op(&d, DisputeAct::Evidence { sha256, url, signature }))
            }
            Act::Rule { pick, who, decision, share, slash, no_reasons } => {
                let d = self.pick_dispute(*pick, &[Phase::Ruling])?;
                let actor = match who {
                    None => d.arbiter.as_ref().map_or(DESK, |a| self.cast.index_of(a)),
                    Some(n) => self.dispute_actor(&d, *n),
                };
                let refund = Amount(d.claimed.0 * *share as u64 / 1000);
                let reasons = if *no_reasons { String::new() } else { "weighed the evidence".into() };
                let act = DisputeAct::Rule { decision: *decision, refund, slash: Amount(*slash), reasons };
                command(&self.m(actor), key, dispute_op(&d, act))
            }
            Act::Appeal { pick, who } => {
                let d = self.pick_dispute(*pick, &[Phase::Appealable])?;
                command(&self.m(self.dispute_actor(&d, *who)), key, dispute_op(&d, DisputeAct::Appeal))
            }
            Act::Execute { pick, who } => {
                let d = self.pick_dispute(*pick, &[Phase::Appealable])?;
                command(&self.m(self.dispute_actor(&d, *who)), key, dispute_op(&d, DisputeAct::Execute))
            }
            Act::Advance { pick, by_registry } => {
                let open = [Phase::Filed, Phase::Evidence, Phase::Ruling, Phase::Appealable];
                let d = self.pick_dispute(*pick, &open)?;
                let actor = if *by_registry { REGISTRY } else { self.dispute_actor(&d, 2) };
                command(&self.m(actor), key, dispute_op(&d, DisputeAct::Advance))
            }
            Act::Ghost { dispute } => {
                let (buyer, seller) = (self.id(AGENTS[0]), self.id(AGENTS[2]));
                let op = if *dispute {
                    let subject = Subject::Call { merchant: seller.clone(), order_id: OrderId("ghost".into()) };
                    Op::Dispute(dispute::Op::DisputeAct {
                        dispute: dispute_id_for(&subject),
                        subject,
                        claimant: buyer,
                        respondent: seller,
                        act: DisputeAct::Execute,
                    })
                } else {
                    let act = ContractAct::Release { milestone: 0 };
                    Op::Escrow(escrow::Op::ContractAct {
                        contract: "ctr_ghost".into(),
                        buyer,
                        seller,
                        milestones: 1,
                        act,
                    })
                };
                command(&self.m(AGENTS[0]), key, op)
            }
            Act::StakeLock { agent, amount } => {
                command(&self.m(*agent), key, Op::Dispute(dispute::Op::StakeLock { amount: Amount(*amount) }))
            }
            Act::StakeUnlock { agent, share } => {
                let staked = |w: &World, a: usize| {
                    w.db.rows.accounts.get(&AccountId::stake_of(&w.id(a))).map_or(0, |a| a.available())
                };
                let stakers: Vec<usize> = AGENTS.into_iter().filter(|&a| staked(self, a) > 0).collect();
                let agent =
                    &if *agent % 4 != 0 && !stakers.is_empty() { stakers[*agent % stakers.len()] } else { *agent };
                let staked = staked(self, *agent);
                let amount = share.map_or(0, |s| (staked.max(1) as u64 * s as u64).div_ceil(1000));
                command(&self.m(*agent), key, Op::Dispute(dispute::Op::StakeUnlock { amount: Amount(amount) }))
            }
            Act::StakeWithdraw { agent } => {
                let unlocking: Vec<usize> = AGENTS
                    .into_iter()
                    .filter(|&a| self.model.stakes.get(&self.id(a)).is_some_and(|s| s.unlock.is_some()))
                    .collect();
                let agent =
                    if *agent % 4 != 0 && !unlocking.is_empty() { unlocking[*agent % unlocking.len()] } else { *agent };
                command(&self.m(agent), key, Op::Dispute(dispute::Op::StakeWithdraw))
            }
        })
    }

    /// Every instant something falls due: phase deadlines, review deadlines, cooldowns, claim windows.
    fn deadlines(&self) -> Vec<Timestamp> {
        let claim_s = self.config.windows.claim_s;
        let mut due: Vec<Timestamp> = self.model.disputes.values().filter_map(|d| d.deadline).collect();
        for c in self.model.contracts.values() {
            due.extend(c.milestones.iter().filter_map(|m| m.review_deadline));
            let pending = c.milestones.iter().filter(|m| m.state == MilestoneState::Pending);
            due.extend(pending.map(|m| m.due_at.plus_s(MILESTONE_RECLAIM_GRACE_S)));
            due.extend(c.milestones.iter().filter_map(|m| m.released_at.map(|t| t.plus_s(claim_s))));
        }
        due.extend(self.model.stakes.values().filter_map(|s| s.unlock.map(|u| u.1)));
        due.extend(self.model.settlements.values().map(|s| s.at.plus_s(claim_s)));
        due.retain(|t| *t >= self.now);
        due.sort();
        due
    }

    /// The sweeper: every document whose `due_at` has come, advanced by the registry in one batch.
    fn sweep(&mut self) {
        let mut due: Vec<&DocRow> =
            self.db.rows.docs.values().filter(|row| row.due_at.is_some_and(|t| t <= self.now)).collect();
        due.sort_by(|a, b| (a.kind, &a.id).cmp(&(b.kind, &b.id)));
        let registry = self.m(REGISTRY);
        let commands: Vec<Command> = due
            .into_iter()
            .map(|row| match row.kind {
                DocKind::Contract => {
                    command(&registry, None, contract_op(&decode::<Contract>(row).unwrap(), ContractAct::Advance))
                }
                DocKind::Dispute => {
                    command(&registry, None, dispute_op(&decode::<Dispute>(row).unwrap(), DisputeAct::Advance))
                }
                DocKind::Stake
                | DocKind::Peer
                | DocKind::Import
                | DocKind::Relay
                | DocKind::Recovery
                | DocKind::Netting
                | DocKind::Listing
                | DocKind::Rfq
                | DocKind::Order
                | DocKind::Policy
                | DocKind::Blob
                | DocKind::Bounty
                | DocKind::Reward
                | DocKind::ServiceAuthorization
                | DocKind::Hire
                | DocKind::Lease
                | DocKind::Terms => {
                    unreachable!("only contracts and disputes are due in this model")
                }
            })
            .collect();
        if !commands.is_empty() {
            let results = self.submit(commands);
            assert!(results.iter().all(|r| r.outcome.is_ok()), "the sweeper is never refused: {results:?}");
        }
    }

    /// Moves the clock to `at` (never backwards).
    fn jump(&mut self, at: Option<Timestamp>) {
        if let Some(at) = at {
            self.now = self.now.max(at);
        }
    }

    /// Signed evidence by member `author` on dispute `d`.
    fn evidence(&mut self, d: &Dispute, author: usize) -> Command {
        let sha256 = sha256_hex(format!("evidence {}", self.fresh()).as_bytes());
        let signature = sign(self.cast.keys[author].as_ref().unwrap(), &evidence_message(&d.id, &sha256));
        command(&self.m(author), None, dispute_op(d, DisputeAct::Evidence { sha256, url: None, signature }))
    }

    /// See [`Step::Progress`].
    fn progress(&mut self, pick: usize, choice: u8, ruling: (Decision, u16, u64)) {
        let open_disputes: Vec<DisputeId> =
            self.disputes.iter().filter(|id| self.model.disputes[*id].phase != Phase::Executed).cloned().collect();
        let open_contracts: Vec<ContractId> = self
            .contracts
            .iter()
            .filter(|id| {
                let c = &self.model.contracts[*id];
                c.state == ContractState::Offered
                    || c.milestones
                        .iter()
                        .any(|m| matches!(m.state, MilestoneState::Pending | MilestoneState::Delivered))
                    || c.milestones.iter().any(|m| m.state == MilestoneState::Released && m.dispute.is_none())
            })
            .cloned()
            .collect();
        if choice % 8 == 7 {
            self.stake_story(pick);
            return;
        }
        if choice % 8 == 6 {
            self.call_story(pick, choice);
            return;
        }
        if (open_contracts.len() < 2 && choice % 4 == 3) || (open_contracts.is_empty() && open_disputes.is_empty()) {
            self.open_contract(pick, choice);
            return;
        }
        let on_dispute = !open_disputes.is_empty() && (open_contracts.is_empty() || !pick.is_multiple_of(4));
        if on_dispute {
            let id = World::recent(&open_disputes, pick / 3).unwrap();
            let d = dispute_doc(&self.db.rows, &id).unwrap();
            let (claimant, respondent) = (self.cast.index_of(&d.claimant), self.cast.index_of(&d.respondent));
            let registry = self.m(REGISTRY);
            match d.phase {
                Phase::Filed if choice.is_multiple_of(4) => {
                    // The respondent stays silent.
                    self.jump(d.deadline);
                    self.sweep();
                }
                Phase::Filed => {
                    let answer = self.evidence(&d, respondent);
                    self.one(answer);
                }
                Phase::Evidence if choice.is_multiple_of(3) => {
                    let more = self.evidence(&d, if choice.is_multiple_of(2) { claimant } else { respondent });
                    self.one(more);
                }
                Phase::Evidence => {
                    self.jump(d.deadline);
                    self.one(command(&registry, None, dispute_op(&d, DisputeAct::Advance)));
                }
                Phase::Ruling if choice.is_multiple_of(5) => {
                    // The arbiter misses its deadline.
                    self.jump(d.deadline);
                    self.one(command(&registry, None, dispute_op(&d, DisputeAct::Advance)));
                }
                Phase::Ruling => {
                    let (decision, share, slash) = ruling;
                    let refund = Amount((d.claimed.0 * share as u64 / 1000).clamp(1, d.claimed.0.max(2) - 1));
                    let act =
                        DisputeAct::Rule { decision, refund, slash: Amount(slash), reasons: "on the evidence".into() };
                    let arbiter = self.cast.index_of(d.arbiter.as_ref().unwrap());
                    self.one(command(&self.m(arbiter), None, dispute_op(&d, act)));
                }
                Phase::Appealable if choice.is_multiple_of(2) => {
                    let ruling = d.rulings.last().unwrap();
                    let loser = if ruling.refund < d.claimed { claimant } else { respondent };
                    self.one(command(&self.m(loser), None, dispute_op(&d, DisputeAct::Appeal)));
                }
                Phase::Appealable => {
                    self.jump(d.deadline);
                    let actor = [claimant, respondent, REGISTRY][choice as usize % 3];
                    self.one(command(&self.m(actor), None, dispute_op(&d, DisputeAct::Execute)));
                }
                Phase::Executed => unreachable!("open disputes only"),
            }
            return;
        }
        let Some(id) = World::recent(&open_contracts, pick / 3) else { return };
        let c = contract_doc(&self.db.rows, &id).unwrap();
        let (buyer, seller) = (self.m(self.cast.index_of(&c.buyer)), self.m(self.cast.index_of(&c.seller)));
        let find = |state: MilestoneState| c.milestones.iter().find(|m| m.state == state).cloned();
        if c.state == ContractState::Offered {
            let (actor, act) = match choice % 8 {
                0 => (&buyer, ContractAct::Cancel),
                1 => (&seller, ContractAct::Decline),
                _ => (&seller, ContractAct::Accept),
            };
            self.one(command(actor, None, contract_op(&c, act)));
        } else if let Some(m) = find(MilestoneState::Delivered).filter(|_| !choice.is_multiple_of(2)) {
            match choice % 3 {
                0 => {
                    self.one(command(&buyer, None, contract_op(&c, ContractAct::Release { milestone: m.index })));
                }
                1 => self.file_on(&c, m.index, m.amount.0, choice),
                _ => {
                    self.jump(m.review_deadline);
                    self.sweep();
                }
            }
        } else if let Some(m) = find(MilestoneState::Pending).filter(|_| c.state == ContractState::Accepted) {
            if choice % 7 == 1 {
                self.file_on(&c, m.index, m.amount.0, choice);
            } else if choice % 7 == 3 {
                self.reclaim_story(&c, m.index, choice);
            } else {
                let evidence_sha256 = sha256_hex(format!("delivery {}", self.fresh()).as_bytes());
                let act = ContractAct::Deliver { milestone: m.index, evidence_sha256 };
                self.one(command(&seller, None, contract_op(&c, act)));
            }
        } else if let Some(m) = c.milestones.iter().find(|m| m.state == MilestoneState::Released && m.dispute.is_none())
        {
            self.file_on(&c, m.index, m.amount.0, choice);
        }
    }

    /// The seller is late: the clock moves to around the milestone's due date plus the grace, and the buyer reclaims
    /// it — alone, or racing in one batch the seller's late delivery (either first) or, for another milestone already
    /// delivered, the sweeper's auto-release.
    fn reclaim_story(&mut self, c: &Contract, index: u32, choice: u8) {
        let m = &c.milestones[index as usize];
        let at = m.reclaimable_at();
        self.jump(Some(Timestamp(at.ms() + [-1, 0, 0, 1, 0, 3_600_000][choice as usize / 7 % 6])));
        let buyer = self.m(self.cast.index_of(&c.buyer));
        let seller = self.m(self.cast.index_of(&c.seller));
        let reclaim = command(&buyer, None, contract_op(c, ContractAct::Reclaim { milestone: index }));
        let evidence_sha256 = sha256_hex(format!("late delivery {}", self.fresh()).as_bytes());
        let deliver =
            command(&seller, None, contract_op(c, ContractAct::Deliver { milestone: index, evidence_sha256 }));
        let advance = command(&self.m(REGISTRY), None, contract_op(c, ContractAct::Advance));
        let results = match choice / 42 % 4 {
            0 => self.submit(vec![reclaim]),
            1 => self.submit(vec![reclaim, deliver]),
            2 => self.submit(vec![deliver, reclaim]),
            _ => self.submit(vec![reclaim, advance]),
        };
        // Whatever the order, the milestone ended at most one way.
        let after = &self.contract(&c.id).milestones[index as usize];
        let ok = results.iter().filter(|r| r.outcome.is_ok()).count();
        match after.state {
            MilestoneState::Reclaimed => assert!(after.delivered_at.is_none()),
            MilestoneState::Delivered => assert!(after.reclaimed_at.is_none()),
            MilestoneState::Pending => assert!(self.now < at && ok < results.len()),
            other => panic!("a reclaim story ended {other:?}"),
        }
    }

    /// A paid call, or its buyer disputing one.
    fn call_story(&mut self, pick: usize, choice: u8) {
        let undisputed: Vec<(MemberId, OrderId)> = self
            .calls
            .iter()
            .filter(|(merchant, order_id)| {
                let subject = Subject::Call { merchant: merchant.clone(), order_id: order_id.clone() };
                !self.model.disputes.contains_key(&dispute_id_for(&subject))
            })
            .cloned()
            .collect();
        match World::recent(&undisputed, pick / 2) {
            Some((merchant, order_id)) if pick.is_multiple_of(2) => {
                let s = self.db.rows.settlements_by_order[&(merchant.clone(), order_id.clone())].clone();
                let claimed = if choice.is_multiple_of(3) { s.amount.0.div_ceil(2) } else { s.amount.0 };
                if choice.is_multiple_of(2) {
                    self.stake_most(self.cast.index_of(&s.merchant), choice);
                }
                let op = Op::Dispute(dispute::Op::FileDispute {
                    subject: Subject::Call { merchant, order_id },
                    claimant: s.buyer.clone(),
                    respondent: s.merchant,
                    reason: ReasonCode::Defective,
                    claimed: Amount(claimed),
                    note: String::new(),
                });
                self.one(command(&self.m(self.cast.index_of(&s.buyer)), None, op));
            }
            _ => {
                let buyer = TRADERS[pick % TRADERS.len()];
                let merchant = TRADERS[(pick / 4 + 1 + buyer) % TRADERS.len()];
                if merchant != buyer {
                    self.pay(buyer, merchant, 500 + pick as u64 % 30_000);
                }
            }
        }
    }

    /// A merchant stakes, asks to unlock, or withdraws once the cooldown has passed.
    fn stake_story(&mut self, pick: usize) {
        // Mostly a merchant with a dispute open against it.
        let respondents: Vec<usize> = self
            .model
            .disputes
            .values()
            .filter(|d| d.phase != Phase::Executed)
            .map(|d| self.cast.index_of(&d.respondent))
            .collect();
        let agent = match World::recent(&respondents, pick / 2) {
            Some(agent) if pick.is_multiple_of(2) => agent,
            _ => AGENTS[pick % AGENTS.len()],
        };
        let me = self.m(agent);
        let stake = self.model.stakes.get(&me.id).cloned().unwrap_or_default();
        let staked = self.model.available(&AccountId::stake_of(&me.id));
        let op = match stake.unlock {
            Some((_, at)) => {
                self.jump(Some(at));
                Op::Dispute(dispute::Op::StakeWithdraw)
            }
            None if staked > 0 && !pick.is_multiple_of(3) => {
                Op::Dispute(dispute::Op::StakeUnlock { amount: Amount((staked as u64).div_ceil(2)) })
            }
            None => {
                // Often most of what it has, so a later claim reaches into the stake.
                let available = self.model.available(&AccountId::of_member(&me.id)).max(0) as u64;
                let share = [10, 50, 90, 97][pick / 8 % 4];
                Op::Dispute(dispute::Op::StakeLock { amount: Amount((available * share / 100).max(1)) })
            }
        };
        self.one(command(&me, None, op));
    }

    /// A well-formed contract between two traders of different owners, with the desk or the independent arbiter.
    fn open_contract(&mut self, pick: usize, choice: u8) {
        let buyer = TRADERS[pick % TRADERS.len()];
        let owner = self.cast.owner_index(buyer);
        let sellers: Vec<usize> = TRADERS.into_iter().filter(|&t| self.cast.owner_index(t) != owner).collect();
        let seller = sellers[(pick / 4) % sellers.len()];
        let arbiter = if choice.is_multiple_of(2) { DESK } else { ARBITER };
        let milestones = (0..(pick / 8) % 3 + 1)
            .map(|i| MilestoneSpec {
                amount: Amount(1_000 + (pick as u64 / 32 + i as u64 * 7_919) % 29_000),
                description: format!("part {i}"),
                due_at: self.now.plus_s(30 * DAY),
            })
            .collect();
        let op = Op::Escrow(escrow::Op::CreateContract {
            seller: self.id(seller),
            arbiter: self.id(arbiter),
            milestones,
            terms_hash: sha256_hex(format!("terms {}", self.fresh()).as_bytes()),
            review_window_s: [60, 900, HOUR, DAY][choice as usize % 4],
        });
        let key = format!("c{}", self.fresh());
        self.one(command(&self.m(buyer), Some(&key), op));
    }

    /// The merchant locks most of its balance as stake, so a claim reaches into the stake.
    fn stake_most(&mut self, merchant: usize, choice: u8) {
        let available = self.model.available(&AccountId::of_member(&self.id(merchant))).max(0) as u64;
        let amount = available - [0, 100, 2_000, 20_000][choice as usize / 2 % 4].min(available);
        if amount > 0 {
            self.one(command(&self.m(merchant), None, Op::Dispute(dispute::Op::StakeLock { amount: Amount(amount) })));
        }
    }

    /// The buyer disputes a milestone, for all of it or a part.
    fn file_on(&mut self, c: &Contract, index: u32, amount: u64, choice: u8) {
        let released = c.milestones[index as usize].state == MilestoneState::Released;
        if released && choice % 4 == 1 {
            self.stake_most(self.cast.index_of(&c.seller), choice);
        }
        let claimed = if choice.is_multiple_of(2) { amount } else { (amount * (choice as u64 % 10 + 1) / 11).max(1) };
        let op = Op::Dispute(dispute::Op::FileDispute {
            subject: Subject::Milestone { contract: c.id.clone(), index },
            claimant: c.buyer.clone(),
            respondent: c.seller.clone(),
            reason: ReasonCode::NotDelivered,
            claimed: Amount(claimed),
            note: String::new(),
        });
        let buyer = self.m(self.cast.index_of(&c.buyer));
        self.one(command(&buyer, None, op));
    }

    fn play(&mut self, steps: &[Step]) {
        for step in steps {
            match step {
                Step::Wait(seconds) => self.advance(*seconds),
                Step::ToDeadline(pick, delta) => {
                    let due = self.deadlines();
                    if !due.is_empty() {
                        let at = if pick.is_multiple_of(3) { due[pick / 3 % due.len()] } else { due[0] };
                        self.now = self.now.max(Timestamp(at.ms() + *delta as i64));
                    }
                }
                Step::Pay { buyer, offset, amount } => {
                    let at = AGENTS.iter().position(|a| a == buyer).unwrap();
                    self.pay(*buyer, AGENTS[(at + offset) % AGENTS.len()], *amount);
                }
                Step::Sweep => self.sweep(),
                Step::Replay(pick, same) => {
                    if let Some(mut earlier) = World::recent(&self.keyed, *pick) {
                        if !same {
                            earlier.idem.as_mut().unwrap().fingerprint.push_str("-changed");
                        }
                        self.one(earlier);
                    }
                }
                Step::Act(act, key) => {
                    if let Some(command) = self.build(act, *key) {
                        self.one(command);
                    }
                }
                Step::Batch(acts, twice) => {
                    let mut commands: Vec<Command> =
                        acts.iter().filter_map(|(act, key)| self.build(act, *key)).collect();
                    if *twice {
                        commands.extend(commands.last().cloned());
                    }
                    if !commands.is_empty() {
                        self.submit(commands);
                    }
                }
                Step::Progress { pick, choice, decision, share, slash } => {
                    self.progress(*pick, *choice, (*decision, *share, *slash))
                }
            }
        }
    }
}

proptest! {
    // PROPTEST_CASES runs more (or fewer) cases than the default.
    #![proptest_config(ProptestConfig {
        cases: std::env::var("PROPTEST_CASES").ok().and_then(|n| n.parse().ok()).unwrap_or(128),
        ..ProptestConfig::default()
    })]

    #[test]
    fn escrow_disputes_and_stake_keep_every_invariant(
        short in prop::bool::weighted(0.7),
        opening in opening(),
        steps in prop::collection::vec(step(), 10..=40),
    ) {
        let mut world = World::new(if short { short_windows() } else { Windows::standard() });
        world.open(&opening);
        world.play(&steps);
        if std::env::var_os("MODEL_COVERAGE").is_some() {
            eprintln!("{:?}", world.model.seen);
        }
    }
}

// ---- the happy paths, end to end ---------------------------------------------------------------------------------

const BUYER: usize = 6;
const SELLER: usize = 8;

fn ok(applied: Applied) -> serde_json::Value {
    applied.outcome.unwrap_or_else(|refusal| panic!("refused: {refusal:?}")).to_json()
}

fn code(applied: Applied) -> Code {
    applied.outcome.expect_err("expected a refusal").code
}

impl World {
    /// Each agent funded with `funds`, under ceilings that never bind.
    fn funded(windows: Windows, funds: [u64; 5]) -> World {
        let mut w = World::new(windows);
        w.open(&funds.map(|f| (f, [1_000_000, 1_000_000, 10_000_000])));
        w
    }

    fn balance(&self, account: &AccountId) -> (i128, i128) {
        self.db.rows.accounts.get(account).map_or((0, 0), |a| (a.balance(), a.available()))
    }

    fn of(&self, member: usize) -> (i128, i128) {
        self.balance(&AccountId::of_member(&self.id(member)))
    }

    fn stake(&self, member: usize) -> (i128, i128) {
        self.balance(&AccountId::stake_of(&self.id(member)))
    }

    fn contract(&self, id: &ContractId) -> Contract {
        contract_doc(&self.db.rows, id).unwrap()
    }

    fn dispute(&self, id: &DisputeId) -> Dispute {
        dispute_doc(&self.db.rows, id).unwrap()
    }

    fn create(&mut self, buyer: usize, seller: usize, arbiter: usize, amounts: &[u64], window_s: u64) -> ContractId {
        let milestones = amounts
            .iter()
            .map(|&a| MilestoneSpec {
                amount: Amount(a),
                description: "work".into(),
                due_at: self.now.plus_s(30 * DAY),
            })
            .collect();
        let op = Op::Escrow(escrow::Op::CreateContract {
            seller: self.id(seller),
            arbiter: self.id(arbiter),
            milestones,
            terms_hash: sha256_hex(b"the terms"),
            review_window_s: window_s,
        });
        let key = format!("c{}", self.fresh());
        ContractId(ok(self.one(command(&self.m(buyer), Some(&key), op)))["id"].as_str().unwrap().to_string())
    }

    fn on_contract(&mut self, actor: usize, id: &ContractId, act: ContractAct) -> Applied {
        let op = contract_op(&self.contract(id), act);
        self.one(command(&self.m(actor), None, op))
    }

    fn deliver(&mut self, id: &ContractId, milestone: u32) {
        let evidence_sha256 = sha256_hex(format!("delivery {milestone}").as_bytes());
        let seller = self.cast.index_of(&self.contract(id).seller);
        ok(self.on_contract(seller, id, ContractAct::Deliver { milestone, evidence_sha256 }));
    }

    fn file(&mut self, actor: usize, subject: Subject, claimed: u64) -> Applied {
        let (claimant, respondent) = match &subject {
            Subject::Milestone { contract, .. } => {
                let c = self.contract(contract);
                (c.buyer, c.seller)
            }
            Subject::Call { merchant, order_id } => {
                let s = &self.db.rows.settlements_by_order[&(merchant.clone(), order_id.clone())];
                (s.buyer.clone(), s.merchant.clone())
            }
        };
        let op = Op::Dispute(dispute::Op::FileDispute {
            subject,
            claimant,
            respondent,
            reason: ReasonCode::NotAsDescribed,
            claimed: Amount(claimed),
            note: "see evidence".into(),
        });
        self.one(command(&self.m(actor), None, op))
    }

    fn on_dispute(&mut self, actor: usize, id: &DisputeId, act: DisputeAct) -> Applied {
        let op = dispute_op(&self.dispute(id), act);
        self.one(command(&self.m(actor), None, op))
    }

    fn answer(&mut self, author: usize, id: &DisputeId) -> Applied {
        let d = self.dispute(id);
        let evidence = self.evidence(&d, author);
        self.one(evidence)
    }

    fn rule(&mut self, arbiter: usize, id: &DisputeId, decision: Decision, refund: u64, slash: u64) -> Applied {
        let act = DisputeAct::Rule {
            decision,
            refund: Amount(refund),
            slash: Amount(slash),
            reasons: "on the evidence".into(),
        };
        self.on_dispute(arbiter, id, act)
    }

    fn sweep_at(&mut self, at: Option<Timestamp>) {
        self.jump(at);
        self.sweep();
    }
}

#[test]
fn three_milestones_released_auto_released_and_disputed_through_four_phases_with_an_appeal_and_a_slash() {
    let mut w = World::funded(Windows::standard(), [200_000, 0, 0, 0, 0]);
    let id = w.create(BUYER, SELLER, ARBITER, &[10_000, 20_000, 30_000], DAY);
    assert_eq!(w.of(BUYER), (200_000, 140_000), "the whole contract is held up front");
    ok(w.on_contract(SELLER, &id, ContractAct::Accept));
    for m in 0..3 {
        w.deliver(&id, m);
    }
    // Milestone 0: released by the buyer, once.
    let receipt = ok(w.on_contract(BUYER, &id, ContractAct::Release { milestone: 0 }));
    assert_eq!((receipt["net_minor"].as_u64(), receipt["fee_minor"].as_u64()), (Some(9_900), Some(100)));
    let again = w.on_contract(BUYER, &id, ContractAct::Release { milestone: 0 }).outcome.unwrap_err();
    assert_eq!((again.code, &again.facts), (Code::MilestoneAlreadyReleased, &receipt), "the original is attached");
    assert_eq!(code(w.on_contract(ARBITER, &id, ContractAct::Release { milestone: 1 })), Code::NotParty);
    // Milestone 2: disputed before its review window ends; it stays held and cannot be released.
    let subject = Subject::Milestone { contract: id.clone(), index: 2 };
    let d = DisputeId(ok(w.file(BUYER, subject, 30_000))["id"].as_str().unwrap().to_string());
    assert_eq!(w.dispute(&d).frozen, Frozen { escrow: Amount(30_000), ..Frozen::default() });
    assert_eq!(code(w.on_contract(BUYER, &id, ContractAct::Release { milestone: 2 })), Code::MilestoneDisputed);
    // The seller stakes (during the dispute: locking is always allowed) and cannot unlock while it is open.
    ok(w.one(command(&w.m(SELLER), None, Op::Dispute(dispute::Op::StakeLock { amount: Amount(5_000) }))));
    assert_eq!(
        code(w.one(command(&w.m(SELLER), None, Op::Dispute(dispute::Op::StakeUnlock { amount: Amount(1) })))),
        Code::StakeDisputeOpen
    );
    // Milestone 1: the review window passes; the sweeper releases it and leaves the disputed one alone.
    w.sweep_at(w.contract(&id).milestones[1].review_deadline);
    let c = w.contract(&id);
    assert_eq!(
        c.milestones.iter().map(|m| m.state).collect::<Vec<_>>(),
        [MilestoneState::Released, MilestoneState::Released, MilestoneState::Disputed]
    );
    assert_eq!(c.milestones[1].release.as_ref().unwrap()["automatic"], true);
    assert_eq!((c.state, c.held().0), (ContractState::Accepted, 30_000));
    // Phase 1 → 2: the seller answers; both sides add evidence; strangers and forgeries are turned away.
    ok(w.answer(SELLER, &d));
    assert_eq!(w.dispute(&d).phase, Phase::Evidence);
    ok(w.answer(BUYER, &d));
    assert_eq!(code(w.answer(ARBITER, &d)), Code::NotParty);
    let forged = {
        let sha256 = sha256_hex(b"forged");
        let signature = sign(&key_of(77), &evidence_message(&d, &sha256));
        DisputeAct::Evidence { sha256, url: None, signature }
    };
    assert_eq!(code(w.on_dispute(BUYER, &d, forged)), Code::EvidenceSignatureInvalid);
    // Phase 3: evidence closes; the contract's arbiter rules; parties and bystanders cannot.
    w.sweep_at(w.dispute(&d).deadline);
    assert_eq!((w.dispute(&d).phase, w.dispute(&d).arbiter), (Phase::Ruling, Some(w.id(ARBITER))));
    assert_eq!(code(w.answer(SELLER, &d)), Code::EvidenceClosed);
    assert_eq!(code(w.rule(OWNERS[1], &d, Decision::Reject, 0, 0)), Code::PartyCannotRule, "the seller's owner");
    assert_eq!(code(w.rule(DESK, &d, Decision::Reject, 0, 0)), Code::NotArbiter);
    ok(w.rule(ARBITER, &d, Decision::RefundPartial, 10_000, 3_000));
    assert_eq!(code(w.on_dispute(BUYER, &d, DisputeAct::Execute)), Code::DisputePhase, "the appeal window is open");
    // Phase 4: the seller appeals with a bond; the desk hears it and its ruling executes at once.
    ok(w.on_dispute(SELLER, &d, DisputeAct::Appeal));
    let seller_before = w.of(SELLER);
    assert_eq!(w.dispute(&d).arbiter, Some(w.id(DESK)), "a new arbiter hears the appeal");
    assert_eq!(code(w.on_dispute(BUYER, &d, DisputeAct::Appeal)), Code::DisputePhase, "one appeal");
    assert_eq!(code(w.rule(ARBITER, &d, Decision::Reject, 0, 0)), Code::NotArbiter);
    let outcome = ok(w.rule(DESK, &d, Decision::RefundPartial, 5_000, 2_000));
    assert_eq!(outcome["refunded_minor"], 5_000);
    assert_eq!(outcome["released_minor"], 25_000);
    assert_eq!(
        (outcome["slashed_minor"].as_u64(), outcome["slash_to_insurance_minor"].as_u64()),
        (Some(2_000), Some(2_000))
    );
    assert_eq!(outcome["bond"]["returned"], true, "the appeal lowered the refund");
    assert_eq!(outcome["rounds"], 2);
    // Everything settled: the contract is complete and balanced, and the money went where the rulings said.
    let c = w.contract(&id);
    assert_eq!((c.state, c.held().0, c.refunded.0, c.fees.0), (ContractState::Completed, 0, 5_000, 100 + 200 + 250));
    assert_eq!(w.of(BUYER), (145_000, 145_000));
    assert_eq!(w.of(SELLER).0, seller_before.0 + 24_750);
    assert_eq!(w.of(SELLER).1, seller_before.1 + 24_750 + 3_000, "the bond came back");
    assert_eq!(w.stake(SELLER), (3_000, 3_000));
    assert_eq!(w.balance(&AccountId::insurance()).0, 2_000);
    assert_eq!(w.balance(&AccountId::fees()).0, 550);
    // Execution ran once; a second try is refused with the outcome attached.
    let second = w.on_dispute(BUYER, &d, DisputeAct::Execute).outcome.unwrap_err();
    assert_eq!(second.code, Code::DisputeExecuted);
    assert_eq!(second.facts["refunded_minor"], 5_000);
    ok(w.one(command(&w.m(SELLER), None, Op::Dispute(dispute::Op::StakeUnlock { amount: Amount(3_000) }))));
}

#[test]
fn a_silent_respondent_loses_by_default_and_its_balance_then_stake_pay() {
    let mut w = World::funded(Windows::standard(), [100_000, 0, 0, 0, 0]);
    let (merchant, order_id) = w.pay(BUYER, SELLER, 8_000);
    assert_eq!(w.of(SELLER), (7_920, 7_920));
    ok(w.one(command(&w.m(SELLER), None, Op::Dispute(dispute::Op::StakeLock { amount: Amount(5_000) }))));
    let subject = Subject::Call { merchant, order_id };
    assert_eq!(code(w.file(ARBITER, subject.clone(), 8_000)), Code::NotParty, "only the buyer files");
    assert_eq!(code(w.file(BUYER, subject.clone(), 8_001)), Code::AmountInvalid, "no more than was paid");
    let d = DisputeId(ok(w.file(OWNERS[0], subject.clone(), 8_000))["id"].as_str().unwrap().to_string());
    let frozen = Frozen { escrow: Amount::ZERO, balance: Amount(2_920), stake: Amount(5_000) };
    assert_eq!(w.dispute(&d).frozen, frozen, "the balance first, then the stake");
    assert_eq!((w.of(SELLER).1, w.stake(SELLER).1), (0, 0));
    assert_eq!(code(w.file(BUYER, subject, 1)), Code::DisputeExists);
    // Nothing happens before the answer deadline; past it, the sweeper rules for the claimant and executes.
    w.advance(Windows::standard().answer_s - 1);
    w.sweep();
    assert_eq!(w.dispute(&d).phase, Phase::Filed);
    w.advance(1);
    assert_eq!(code(w.answer(SELLER, &d)), Code::EvidenceClosed, "too late to answer");
    let buyer_before = w.of(BUYER).0;
    w.sweep();
    let d = w.dispute(&d);
    let outcome = d.outcome.clone().unwrap();
    assert_eq!((d.phase, d.rulings.len(), d.rulings[0].arbiter.is_none()), (Phase::Executed, 1, true));
    assert_eq!((outcome["default"].as_bool(), outcome["winner"].as_str()), (Some(true), Some("claimant")));
    assert_eq!((outcome["refunded_minor"].as_u64(), outcome["shortfall_minor"].as_u64()), (Some(7_920), Some(80)));
    assert_eq!(w.of(BUYER).0, buyer_before + 7_920);
    assert_eq!((w.of(SELLER), w.stake(SELLER)), ((0, 0), (0, 0)));
    assert_eq!(w.model.stakes[&w.id(SELLER)].open, 0);
}

#[test]
fn an_arbiter_who_misses_the_deadline_is_replaced_and_the_parties_are_unaffected() {
    let mut w = World::funded(short_windows(), [100_000, 0, 50_000, 0, 0]);
    let id = w.create(BUYER, SELLER, ARBITER, &[12_000], HOUR);
    ok(w.on_contract(SELLER, &id, ContractAct::Accept));
    let d = DisputeId(
        ok(w.file(BUYER, Subject::Milestone { contract: id.clone(), index: 0 }, 12_000))["id"]
            .as_str()
            .unwrap()
            .to_string(),
    );
    ok(w.answer(SELLER, &d));
    w.sweep_at(w.dispute(&d).deadline);
    assert_eq!(w.dispute(&d).arbiter, Some(w.id(ARBITER)));
    let (accounts, holds) = (w.db.rows.accounts.clone(), w.db.rows.holds.clone());
    // The arbiter lets the ruling deadline pass: the desk replaces it with a fresh deadline.
    let missed = w.dispute(&d).deadline.unwrap();
    w.sweep_at(Some(missed));
    let replaced = w.dispute(&d);
    assert_eq!((replaced.phase, replaced.arbiter.clone()), (Phase::Ruling, Some(w.id(DESK))));
    assert_eq!(replaced.deadline, Some(missed.plus_s(short_windows().ruling_s)));
    assert_eq!(replaced.arbiters_used, [w.id(ARBITER), w.id(DESK)]);
    assert_eq!((&w.db.rows.accounts, &w.db.rows.holds), (&accounts, &holds), "nothing moved");
    assert_eq!(code(w.rule(ARBITER, &d, Decision::Reject, 0, 0)), Code::NotArbiter, "the old arbiter is out");
    // The desk misses too: the operator takes over.
    w.sweep_at(replaced.deadline);
    assert_eq!(w.dispute(&d).arbiter, Some(w.id(OPERATOR)));
    assert_eq!((&w.db.rows.accounts, &w.db.rows.holds), (&accounts, &holds), "nothing moved");
    ok(w.rule(OPERATOR, &d, Decision::Reject, 0, 0));
    w.sweep_at(w.dispute(&d).deadline);
    let outcome = w.dispute(&d).outcome.unwrap();
    assert_eq!((outcome["winner"].as_str(), outcome["released_minor"].as_u64()), (Some("respondent"), Some(12_000)));
    assert_eq!(w.of(SELLER).0, 50_000 + 12_000 - 120);
    assert_eq!(w.contract(&id).state, ContractState::Completed);
}

#[test]
fn a_slash_beyond_the_stake_makes_the_claimant_whole_first_and_the_rest_goes_to_insurance() {
    let mut w = World::funded(short_windows(), [100_000, 0, 0, 0, 0]);
    let (merchant, order_id) = w.pay(BUYER, SELLER, 10_000);
    // The merchant spends (stakes) all it earned, so the freeze finds only stake.
    ok(w.one(command(&w.m(SELLER), None, Op::Dispute(dispute::Op::StakeLock { amount: Amount(9_900) }))));
    let d =
        DisputeId(ok(w.file(BUYER, Subject::Call { merchant, order_id }, 10_000))["id"].as_str().unwrap().to_string());
    assert_eq!(w.dispute(&d).frozen, Frozen { stake: Amount(9_900), ..Frozen::default() });
    // More stake arrives while the dispute is open; withdrawing is refused meanwhile.
    ok(w.one(command(&w.m(OWNERS[1]), None, Op::Pay(pay::Op::Fund { agent: w.id(SELLER), amount: Amount(3_000) }))));
    ok(w.one(command(&w.m(SELLER), None, Op::Dispute(dispute::Op::StakeLock { amount: Amount(3_000) }))));
    assert_eq!(
        code(w.one(command(&w.m(SELLER), None, Op::Dispute(dispute::Op::StakeWithdraw)))),
        Code::StakeNotUnlocked
    );
    ok(w.answer(SELLER, &d));
    w.sweep_at(w.dispute(&d).deadline);
    assert_eq!(code(w.rule(DESK, &d, Decision::Reject, 0, 1)), Code::RulingInvalid, "a rejection slashes nothing");
    ok(w.rule(DESK, &d, Decision::RefundFull, 0, 1_000_000));
    let buyer_before = w.of(BUYER).0;
    w.jump(w.dispute(&d).deadline);
    assert_eq!(code(w.on_dispute(SELLER, &d, DisputeAct::Appeal)), Code::AppealWindowClosed);
    let outcome = ok(w.on_dispute(ARBITER, &d, DisputeAct::Execute));
    // Refund 10 000: 9 900 from the frozen stake, a shortfall of 100 made good from the slash; the rest of the
    // 3 000 stake left goes to insurance. The slash asked for far more than there was.
    assert_eq!(outcome["refunded_minor"], 9_900);
    assert_eq!(outcome["slashed_minor"], 12_900);
    assert_eq!(outcome["slash_to_claimant_minor"], 10_000);
    assert_eq!(outcome["slash_to_insurance_minor"], 2_900);
    assert_eq!(w.of(BUYER).0, buyer_before + 10_000);
    assert_eq!(w.stake(SELLER), (0, 0));
    assert_eq!(w.balance(&AccountId::insurance()).0, 2_900);
    assert_eq!(code(w.on_dispute(ARBITER, &d, DisputeAct::Execute)), Code::DisputeExecuted);
}

#[test]
fn stake_unlocks_after_the_cooldown_and_never_while_a_dispute_is_open() {
    let windows = short_windows();
    let mut w = World::funded(windows, [100_000, 0, 20_000, 0, 0]);
    ok(w.one(command(&w.m(SELLER), None, Op::Dispute(dispute::Op::StakeLock { amount: Amount(10_000) }))));
    ok(w.one(command(&w.m(SELLER), None, Op::Dispute(dispute::Op::StakeUnlock { amount: Amount(6_000) }))));
    assert_eq!(code(w.one(command(&w.m(SELLER), None, Op::Dispute(dispute::Op::StakeWithdraw)))), Code::StakeCooldown);
    // A dispute filed during the cooldown freezes what it needs and blocks the withdrawal until it is executed.
    let (merchant, order_id) = w.pay(BUYER, SELLER, 4_000);
    ok(w.one(command(&w.m(SELLER), None, Op::Dispute(dispute::Op::StakeLock { amount: Amount(13_960) }))));
    let d =
        DisputeId(ok(w.file(BUYER, Subject::Call { merchant, order_id }, 4_000))["id"].as_str().unwrap().to_string());
    assert_eq!(w.dispute(&d).frozen.stake, Amount(4_000));
    w.advance(windows.stake_cooldown_s);
    assert_eq!(
        code(w.one(command(&w.m(SELLER), None, Op::Dispute(dispute::Op::StakeWithdraw)))),
        Code::StakeDisputeOpen
    );
    w.sweep(); // the respondent never answered: default for the claimant, paid from the frozen stake
    let withdrawn = ok(w.one(command(&w.m(SELLER), None, Op::Dispute(dispute::Op::StakeWithdraw))));
    assert_eq!(withdrawn["withdrawn_minor"], 6_000);
    assert_eq!(w.stake(SELLER), (23_960 - 4_000 - 6_000, 23_960 - 4_000 - 6_000));
    assert_eq!(
        code(w.one(command(&w.m(SELLER), None, Op::Dispute(dispute::Op::StakeWithdraw)))),
        Code::StakeNotUnlocked,
        "once"
    );
}

// ---- regressions for core bugs this test found ------------------------------------------------------------------

#[test]
fn a_claimant_cannot_use_up_the_evidence_limit_to_silence_the_respondent() {
    let mut w = World::funded(short_windows(), [100_000, 0, 0, 0, 0]);
    let (merchant, order_id) = w.pay(BUYER, SELLER, 5_000);
    let d =
        DisputeId(ok(w.file(BUYER, Subject::Call { merchant, order_id }, 5_000))["id"].as_str().unwrap().to_string());
    // The claimant floods the dispute with evidence before the respondent answers...
    let mut accepted = 0;
    for _ in 0..EVIDENCE_PER_DISPUTE_MAX {
        if w.answer(BUYER, &d).outcome.is_ok() {
            accepted += 1;
        }
    }
    assert!(accepted < EVIDENCE_PER_DISPUTE_MAX, "one side filled the whole evidence limit");
    // ...yet the respondent can still answer, and does not lose by default.
    ok(w.answer(SELLER, &d));
    assert_eq!(w.dispute(&d).phase, Phase::Evidence);
}

// ---- milestones past due: the buyer reclaims ---------------------------------------------------------------------

impl World {
    fn reclaim(&mut self, actor: usize, id: &ContractId, milestone: u32) -> Applied {
        self.on_contract(actor, id, ContractAct::Reclaim { milestone })
    }

    fn spent(&self, agent: usize) -> (u64, u64) {
        let budget = &self.db.rows.budgets[&self.id(agent)];
        (budget.spent_total.0, budget.spent_on(self.now.utc_day()).0)
    }
}

#[test]
fn an_undelivered_milestone_is_reclaimed_once_after_its_due_date_and_the_grace_and_every_other_reclaim_is_refused() {
    let mut w = World::funded(Windows::standard(), [200_000, 0, 0, 0, 0]);
    let id = w.create(BUYER, SELLER, ARBITER, &[10_000, 20_000, 30_000, 5_000], DAY);
    let due = w.contract(&id).milestones[0].due_at;
    let reclaimable_at = due.plus_s(MILESTONE_RECLAIM_GRACE_S);
    // Before acceptance the buyer cancels instead; a reclaim is refused.
    w.jump(Some(reclaimable_at));
    assert_eq!(code(w.reclaim(BUYER, &id, 0)), Code::ContractState);
    w.now = START;
    ok(w.on_contract(SELLER, &id, ContractAct::Accept));
    assert_eq!(code(w.reclaim(SELLER, &id, 0)), Code::NotParty, "the seller never reclaims");
    assert_eq!(code(w.reclaim(ARBITER, &id, 0)), Code::NotParty);
    assert_eq!(code(w.reclaim(BUYER, &id, 9)), Code::MilestoneNotFound);
    // Milestone 1 delivered, milestone 2 disputed, both before the due date.
    w.deliver(&id, 1);
    let d = DisputeId(
        ok(w.file(BUYER, Subject::Milestone { contract: id.clone(), index: 2 }, 30_000))["id"]
            .as_str()
            .unwrap()
            .to_string(),
    );
    // At the due date, and a millisecond before the grace ends: too early, and the refusal says when.
    w.jump(Some(due));
    assert_eq!(code(w.reclaim(BUYER, &id, 0)), Code::ReclaimTooEarly);
    w.jump(Some(Timestamp(reclaimable_at.ms() - 1)));
    let early = w.reclaim(BUYER, &id, 0).outcome.unwrap_err();
    assert_eq!(early.code, Code::ReclaimTooEarly);
    assert_eq!(early.facts["reclaimable_at_ms"], json!(reclaimable_at));
    assert_eq!(early.facts["grace_s"], MILESTONE_RECLAIM_GRACE_S);
    // From the due date plus the grace: the hold goes back to the buyer's balance and budget, once.
    w.jump(Some(reclaimable_at));
    let (available, spent) = (w.of(BUYER).1, w.spent(BUYER).0);
    let receipt = ok(w.reclaim(BUYER, &id, 0));
    assert_eq!((receipt["refunded_minor"].clone(), receipt["reclaimed_at_ms"].clone()), (json!(10_000), json!(w.now)));
    assert_eq!(w.of(BUYER).1, available + 10_000);
    assert_eq!(w.spent(BUYER).0, spent - 10_000, "a reclaimed hold gives its units back to the budget");
    assert_eq!(code(w.reclaim(BUYER, &id, 0)), Code::MilestoneAlreadyReclaimed);
    // A reclaimed milestone is closed: never delivered, released or disputed afterwards.
    let evidence_sha256 = sha256_hex(b"too late");
    assert_eq!(
        code(w.on_contract(SELLER, &id, ContractAct::Deliver { milestone: 0, evidence_sha256 })),
        Code::MilestoneState
    );
    assert_eq!(code(w.on_contract(BUYER, &id, ContractAct::Release { milestone: 0 })), Code::MilestoneState);
    assert_eq!(code(w.file(BUYER, Subject::Milestone { contract: id.clone(), index: 0 }, 10_000)), Code::NotDisputable);
    // Delivered and disputed milestones are not reclaimable, however late.
    assert_eq!(code(w.reclaim(BUYER, &id, 1)), Code::MilestoneDelivered);
    assert_eq!(code(w.reclaim(BUYER, &id, 2)), Code::MilestoneDisputed);
    assert_eq!(w.contract(&id).milestones[2].dispute, Some(d));
    ok(w.on_contract(BUYER, &id, ContractAct::Release { milestone: 1 }));
    assert_eq!(code(w.reclaim(BUYER, &id, 1)), Code::MilestoneAlreadyReleased);
    // The buyer's owner may reclaim for it.
    ok(w.reclaim(w.cast.owner_index(BUYER), &id, 3));
    let c = w.contract(&id);
    assert!(c.balanced());
    assert_eq!((c.refunded.0, c.held().0), (15_000, 30_000));
}

#[test]
fn a_reclaim_and_a_delivery_or_an_auto_release_in_one_batch_resolve_to_exactly_one() {
    let mut w = World::funded(Windows::standard(), [200_000, 0, 0, 0, 0]);
    let a = w.create(BUYER, SELLER, DESK, &[1_000, 2_000], 60);
    let b = w.create(BUYER, SELLER, DESK, &[3_000], 60);
    ok(w.on_contract(SELLER, &a, ContractAct::Accept));
    ok(w.on_contract(SELLER, &b, ContractAct::Accept));
    w.deliver(&a, 1);
    w.jump(Some(w.contract(&a).milestones[0].reclaimable_at()));
    let (ca, cb) = (w.contract(&a), w.contract(&b));
    let (buyer, seller, registry) = (w.m(BUYER), w.m(SELLER), w.m(REGISTRY));
    let deliver = |c: &Contract| {
        let act = ContractAct::Deliver { milestone: 0, evidence_sha256: sha256_hex(b"late") };
        command(&seller, None, contract_op(c, act))
    };
    let reclaim = |c: &Contract, milestone| command(&buyer, None, contract_op(c, ContractAct::Reclaim { milestone }));
    // a: the reclaim runs first and the late delivery is refused; the sweeper's auto-release of the delivered
    // milestone 1 and a reclaim of it in the same batch: the release wins, the reclaim is refused.
    let batch = vec![
        reclaim(&ca, 0),
        deliver(&ca),
        command(&registry, None, contract_op(&ca, ContractAct::Advance)),
        reclaim(&ca, 1),
    ];
    let results = w.submit(batch);
    assert!(results[0].outcome.is_ok());
    assert_eq!(results[1].outcome.as_ref().unwrap_err().code, Code::MilestoneState);
    assert_eq!(results[2].outcome.as_ref().unwrap().to_json()["released"].as_array().unwrap().len(), 1);
    assert_eq!(results[3].outcome.as_ref().unwrap_err().code, Code::MilestoneAlreadyReleased);
    // b: the delivery runs first and the reclaim is refused; the milestone releases once, later, to the seller.
    let results = w.submit(vec![deliver(&cb), reclaim(&cb, 0)]);
    assert!(results[0].outcome.is_ok());
    assert_eq!(results[1].outcome.as_ref().unwrap_err().code, Code::MilestoneDelivered);
    w.sweep_at(w.contract(&b).milestones[0].review_deadline);
    let states = |w: &World, id: &ContractId| w.contract(id).milestones.iter().map(|m| m.state).collect::<Vec<_>>();
    assert_eq!(states(&w, &a), [MilestoneState::Reclaimed, MilestoneState::Released]);
    assert_eq!(states(&w, &b), [MilestoneState::Released]);
    assert_eq!(w.contract(&a).state, ContractState::Completed);
    assert_eq!(code(w.reclaim(BUYER, &b, 0)), Code::MilestoneAlreadyReleased);
}

// ---- appeal bonds and stake locks count against the agent's budget -----------------------------------------------

impl World {
    fn set_budget(&mut self, agent: usize, [per_call, per_day, total]: [u64; 3]) {
        let op = Op::Pay(pay::Op::SetBudget {
            agent: self.id(agent),
            per_call_max: Amount(per_call),
            per_day_max: Amount(per_day),
            total_max: Amount(total),
        });
        ok(self.one(command(&self.m(self.cast.owner_index(agent)), None, op)));
    }

    /// A one-milestone contract, disputed by the buyer, answered, and ruled on in round 1 by the independent arbiter.
    fn ruled(&mut self, amount: u64, decision: Decision) -> DisputeId {
        let id = self.create(BUYER, SELLER, ARBITER, &[amount], DAY);
        ok(self.on_contract(SELLER, &id, ContractAct::Accept));
        let subject = Subject::Milestone { contract: id, index: 0 };
        let d = DisputeId(ok(self.file(BUYER, subject, amount))["id"].as_str().unwrap().to_string());
        ok(self.answer(SELLER, &d));
        self.sweep_at(self.dispute(&d).deadline);
        let refund = if decision == Decision::Reject { 0 } else { amount };
        ok(self.rule(ARBITER, &d, decision, refund, 0));
        d
    }
}

#[test]
fn an_appeal_bond_counts_against_the_appellants_budget_and_comes_back_only_when_returned() {
    let mut w = World::new(short_windows());
    w.open(&[(200_000, [1_000_000, 1_000_000, 10_000_000]); 5]);
    // Returned: the buyer appeals a rejection (bond 10 % of 40 000) and wins round 2.
    let d = w.ruled(40_000, Decision::Reject);
    let (total, today) = w.spent(BUYER);
    w.set_budget(BUYER, [1_000, 1_000_000, total + 3_999]);
    let refusal = w.on_dispute(BUYER, &d, DisputeAct::Appeal).outcome.unwrap_err();
    assert_eq!(refusal.code, Code::BudgetTotalExceeded, "the same code as a token past its ceiling");
    assert_eq!(refusal.facts["requested_minor"], 4_000);
    w.set_budget(BUYER, [1_000, today + 3_999, 10_000_000]);
    assert_eq!(code(w.on_dispute(BUYER, &d, DisputeAct::Appeal)), Code::BudgetPerDayExceeded);
    // The per-call ceiling (1 000 here) does not bind a bond: it is not a call.
    w.set_budget(BUYER, [1_000, 1_000_000, 10_000_000]);
    ok(w.on_dispute(BUYER, &d, DisputeAct::Appeal));
    assert_eq!(w.spent(BUYER), (total + 4_000, today + 4_000));
    assert!(w.dispute(&d).appeal.unwrap().budgeted);
    w.set_budget(BUYER, [1_000_000, 1_000_000, 10_000_000]);
    let outcome = ok(w.rule(DESK, &d, Decision::RefundFull, 40_000, 0));
    assert_eq!(outcome["bond"]["returned"], true);
    // The refunded milestone and the returned bond both come back, as voided holds do.
    assert_eq!(w.spent(BUYER).0, total - 40_000);
    // Forfeited: the seller appeals a full refund and loses round 2; its bond stays spent.
    let d = w.ruled(20_000, Decision::RefundFull);
    let before = w.spent(SELLER).0;
    ok(w.on_dispute(SELLER, &d, DisputeAct::Appeal));
    assert_eq!(w.spent(SELLER).0, before + 2_000);
    let outcome = ok(w.rule(DESK, &d, Decision::RefundFull, 20_000, 0));
    assert_eq!(outcome["bond"]["returned"], false);
    assert_eq!(w.spent(SELLER).0, before + 2_000, "a forfeited bond was spent");
    // An owner appealing for its agent spends as an owner: the agent's budget is untouched, even when exhausted.
    let d = w.ruled(10_000, Decision::Reject);
    let spent = w.spent(BUYER);
    w.set_budget(BUYER, [0, 0, 0]);
    ok(w.on_dispute(w.cast.owner_index(BUYER), &d, DisputeAct::Appeal));
    assert_eq!(w.spent(BUYER), spent);
    assert!(!w.dispute(&d).appeal.unwrap().budgeted);
    w.set_budget(BUYER, [1_000_000, 1_000_000, 10_000_000]);
    let outcome = ok(w.rule(DESK, &d, Decision::RefundFull, 10_000, 0));
    assert_eq!(outcome["bond"]["returned"], true);
    assert_eq!(w.spent(BUYER).0, spent.0 - 10_000, "only the milestone came back; the bond was never counted");
}

#[test]
fn a_stake_lock_counts_against_the_budget_and_a_withdrawal_gives_it_back() {
    let windows = short_windows();
    let mut w = World::new(windows);
    w.open(&[(200_000, [1_000, 12_000, 20_000]); 5]);
    let lock = |w: &mut World, amount| {
        let op = Op::Dispute(dispute::Op::StakeLock { amount: Amount(amount) });
        w.one(command(&w.m(SELLER), None, op))
    };
    assert_eq!(code(lock(&mut w, 12_001)), Code::BudgetPerDayExceeded);
    // Above the per-call ceiling (1 000): a stake lock is not a call.
    ok(lock(&mut w, 8_000));
    assert_eq!(w.spent(SELLER), (8_000, 8_000));
    assert_eq!(code(lock(&mut w, 4_001)), Code::BudgetPerDayExceeded);
    w.advance(DAY);
    ok(lock(&mut w, 12_000));
    assert_eq!(w.spent(SELLER), (20_000, 12_000));
    w.advance(DAY);
    assert_eq!(code(lock(&mut w, 1)), Code::BudgetTotalExceeded);
    // Withdrawn stake comes back to the total (today's figure keeps it: the lock's day is not kept).
    ok(w.one(command(&w.m(SELLER), None, Op::Dispute(dispute::Op::StakeUnlock { amount: Amount(15_000) }))));
    w.advance(windows.stake_cooldown_s);
    ok(w.one(command(&w.m(SELLER), None, Op::Dispute(dispute::Op::StakeWithdraw))));
    assert_eq!(w.spent(SELLER).0, 5_000);
    // A new day: the room in the total the withdrawal made is spendable again.
    w.advance(DAY);
    ok(lock(&mut w, 12_000));
    assert_eq!(w.spent(SELLER), (17_000, 12_000));
}

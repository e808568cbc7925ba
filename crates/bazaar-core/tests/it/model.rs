//! Model-based tests of the sans-IO core: random batches of money commands, driven the way a storage adapter drives
//! `apply_batch`, checked after every batch against an independent model and the ledger's invariants.
//!
//! The test keeps one in-memory "database" (every row ever written, folded from each batch's `Changes` under the
//! unique constraints an adapter enforces) and a plain model (balances, pending amounts, hold states, settled tokens
//! and orders, budgets, idempotency records). Each batch is also re-run on a snapshot holding only the rows its
//! `Keys` name, as a real adapter would load it, and must give the same answer.
// reason: model tests read as one script per scenario or one reference step per op; splitting them would scatter each case.
#![allow(clippy::too_many_lines)]

use crate::common;

use bazaar_core::apply::{apply_batch, Applied, Config};
use bazaar_core::command::{Command, Idem, Op};
use bazaar_core::crypto::{did_key, sha256_hex};
use bazaar_core::dispute::Windows;
use bazaar_core::model::*;
use bazaar_core::pay::hold_id_for;
use bazaar_core::refusal::Code;
use bazaar_core::state::Changes;
use bazaar_core::token::{self, TokenClaims};
use bazaar_core::types::{AccountId, Amount, HoldId, MemberId, OrderId, Timestamp, TokenId};
use bazaar_core::{identity, pay};
use common::{check_idempotency, create_owner, record_idempotency, registry_member, Db, IdemRecords, MBudget};
use ed25519_dalek::SigningKey;
use proptest::prelude::*;
use serde_json::json;
use std::collections::{BTreeMap, HashMap, HashSet};

const FEE_BPS: u64 = 100;
const ESCROW: u64 = 100_000;
/// 2026-01-01T23:40:00Z: twenty minutes before a UTC midnight, so short runs cross a day boundary.
const START: Timestamp = Timestamp(1_767_225_600_000 + 86_400_000 - 20 * 60_000);
const ORDERS: [&str; 3] = ["order-a", "order-b", "order-c"];

fn config() -> Config {
    Config { fee_bps: FEE_BPS as u32, escrow_threshold: Amount(ESCROW), windows: Windows::standard() }
}

// ---- the cast ---------------------------------------------------------------------------------------------------

/// Index of a member in [`Cast::all`].
const REGISTRY: usize = 0;
const OPERATOR: usize = 1;
const OWNERS: [usize; 2] = [2, 3];
/// Agents 4, 5, 6 belong to owner 2; agents 7, 8 to owner 3.
const AGENTS: [usize; 5] = [4, 5, 6, 7, 8];

struct Cast {
    key: SigningKey,
    /// Registry, operator, two owners, five agents, as stored after enrollment.
    all: Vec<Member>,
    by_id: HashMap<MemberId, Member>,
}

impl Cast {
    fn member(&self, index: usize) -> &Member {
        &self.all[index]
    }
    fn kind(&self, id: &MemberId) -> Option<MemberKind> {
        self.by_id.get(id).map(|m| m.kind)
    }
}

fn member_id(seed: u8) -> MemberId {
    MemberId(did_key(&SigningKey::from_bytes(&[seed; 32]).verifying_key()))
}

fn stranger(id: &MemberId) -> Member {
    Member { id: id.clone(), kind: MemberKind::Agent, owner: None, handle: String::new(), created_at: START }
}

// ---- commands ----------------------------------------------------------------------------------------------------

/// What the HTTP edge would hash for the fingerprint: the operation and the request, not the token id it draws.
fn fingerprint(op: &Op) -> String {
    let request = match op {
        Op::Pay(pay::Op::IssueToken { claims, .. }) => format!(
            "{} {} {} {} {}",
            claims.aud,
            claims.max,
            claims.ord,
            claims.res,
            claims.exp_ms.ms() - claims.iat_ms.ms()
        ),
        Op::Pay(pay::Op::Settle { claims, amount, order_id }) => format!("{} {} {}", claims.jti, amount, order_id),
        other => format!("{other:?}"),
    };
    sha256_hex(format!("{}\n{request}", op.name()).as_bytes())
}

fn command(actor: &Member, key: Option<&str>, op: Op) -> Command {
    let idem = key.map(|key| Idem::sent(format!("{}:{}", actor.id, op.name()), key.to_string(), fingerprint(&op)));
    Command { actor: actor.clone(), idem, op }
}

fn settle_op(claims: &TokenClaims, amount: u64) -> Op {
    Op::Pay(pay::Op::Settle { claims: claims.clone(), amount: Amount(amount), order_id: claims.ord.clone() })
}

// ---- the model ---------------------------------------------------------------------------------------------------

#[derive(Clone, Debug)]
struct MHold {
    buyer: MemberId,
    merchant: MemberId,
    max: u64,
    order: OrderId,
    day: i64,
    expires_at: Timestamp,
    state: HoldState,
    posted: u64,
}

#[derive(Debug, Default)]
struct Model {
    balances: HashMap<AccountId, i128>,
    pending: HashMap<AccountId, u64>,
    budgets: HashMap<MemberId, MBudget>,
    holds: HashMap<TokenId, MHold>,
    settled_tokens: HashSet<TokenId>,
    settled_orders: HashSet<(MemberId, OrderId)>,
    /// (scope, key) → the fingerprint and the outcome first recorded under it.
    idem: IdemRecords,
    events: usize,
    transfers: usize,
    settlements: usize,
    /// How often each outcome was seen, for the coverage report.
    seen: BTreeMap<String, usize>,
}

/// What the model expects a command to do when it runs (not replayed): succeed, or be refused with a code.
type Expected = Result<serde_json::Value, Code>;

impl Model {
    fn available(&self, account: &AccountId) -> i128 {
        self.balances.get(account).copied().unwrap_or(0) - self.pending.get(account).copied().unwrap_or(0) as i128
    }

    fn post(&mut self, debit: AccountId, credit: AccountId, amount: u64) {
        *self.balances.entry(debit).or_default() -= amount as i128;
        *self.balances.entry(credit).or_default() += amount as i128;
        self.transfers += 1;
    }

    /// Predicts one command that runs, applying its effects if it succeeds.
    fn run(&mut self, cast: &Cast, command: &Command, now: Timestamp) -> Expected {
        let actor = &command.actor;
        match &command.op {
            Op::Pay(pay::Op::Mint { owner, amount }) => {
                if actor.kind != MemberKind::Operator {
                    return Err(Code::NotPermitted);
                }
                match cast.kind(owner) {
                    None => return Err(Code::MemberNotFound),
                    Some(MemberKind::Owner) => {}
                    Some(_) => return Err(Code::NotPermitted),
                }
                self.post(AccountId::issuance(), AccountId::of_member(owner), amount.0);
                Ok(json!({"amount_minor": amount}))
            }
            Op::Pay(pay::Op::Fund { agent, amount }) => {
                self.owned_agent(cast, actor, agent)?;
                let source = AccountId::of_member(&actor.id);
                if self.available(&source) < amount.0 as i128 {
                    return Err(Code::InsufficientFunds);
                }
                self.post(source, AccountId::of_member(agent), amount.0);
                Ok(json!({"amount_minor": amount}))
            }
            Op::Pay(pay::Op::SetBudget { agent, per_call_max, per_day_max, total_max }) => {
                self.owned_agent(cast, actor, agent)?;
                let budget = self.budgets.get_mut(agent).expect("every agent has a budget");
                (budget.per_call, budget.per_day, budget.total) = (per_call_max.0, per_day_max.0, total_max.0);
                Ok(json!({"total_max_minor": total_max, "spent_total_minor": budget.spent_total}))
            }
            Op::Pay(pay::Op::IssueToken { claims, .. }) => self.issue(cast, actor, claims, now),
            Op::Pay(pay::Op::Settle { claims, amount, order_id }) => {
                self.settle(actor, claims, amount.0, order_id, now)
            }
            Op::Pay(pay::Op::VoidToken { jti, buyer }) => {
                // The buyer itself or the buyer's owner may void.
                let buyer_owner = cast.by_id.get(buyer).and_then(|m| m.owner.as_ref());
                if &actor.id != buyer && buyer_owner != Some(&actor.id) {
                    return Err(Code::NotPermitted);
                }
                self.end_hold(jti, buyer, HoldState::Voided, now)
            }
            Op::Pay(pay::Op::ExpireHold { jti, buyer }) => {
                if actor.kind != MemberKind::Registry {
                    return Err(Code::NotPermitted);
                }
                self.end_hold(jti, buyer, HoldState::Expired, now)
            }
            other => panic!("the model does not cover {}", other.name()),
        }
    }

    fn owned_agent(&self, cast: &Cast, actor: &Member, agent: &MemberId) -> Result<(), Code> {
        let target = cast.by_id.get(agent).ok_or(Code::MemberNotFound)?;
        if target.kind != MemberKind::Agent {
            return Err(Code::NotAnAgent);
        }
        if target.owner.as_ref() != Some(&actor.id) {
            return Err(Code::NotOwner);
        }
        Ok(())
    }

    fn issue(&mut self, cast: &Cast, actor: &Member, claims: &TokenClaims, now: Timestamp) -> Expected {
        if actor.kind != MemberKind::Agent || actor.id != claims.sub {
            return Err(Code::NotPermitted);
        }
        match cast.kind(&claims.aud) {
            None => return Err(Code::MemberNotFound),
            Some(MemberKind::Agent) => {}
            Some(_) => return Err(Code::NotAnAgent),
        }
        if claims.aud == claims.sub {
            return Err(Code::NotPermitted);
        }
        let max = claims.max.0;
        if max > ESCROW {
            return Err(Code::EscrowRequired);
        }
        let day = now.utc_day();
        let budget = &self.budgets[&claims.sub];
        let today = budget.by_day.get(&day).copied().unwrap_or(0);
        if max > budget.per_call {
            return Err(Code::BudgetPerCallExceeded);
        }
        if today + max > budget.per_day {
            return Err(Code::BudgetPerDayExceeded);
        }
        if budget.spent_total + max > budget.total {
            return Err(Code::BudgetTotalExceeded);
        }
        let account = AccountId::of_member(&claims.sub);
        if self.available(&account) < max as i128 {
            return Err(Code::InsufficientFunds);
        }
        if self.holds.contains_key(&claims.jti) {
            return Err(Code::InvalidRequest);
        }
        let budget = self.budgets.get_mut(&claims.sub).unwrap();
        budget.spent_total += max;
        *budget.by_day.entry(day).or_default() += max;
        // The ceilings hold at the moment of issue.
        assert!(budget.spent_total <= budget.total && budget.by_day[&day] <= budget.per_day);
        *self.pending.entry(account).or_default() += max;
        let hold = MHold {
            buyer: claims.sub.clone(),
            merchant: claims.aud.clone(),
            max,
            order: claims.ord.clone(),
            day,
            expires_at: claims.exp_ms,
            state: HoldState::Pending,
            posted: 0,
        };
        self.holds.insert(claims.jti.clone(), hold);
        Ok(json!({"jti": claims.jti, "max_amount_minor": max, "order_id": claims.ord}))
    }

    fn settle(
        &mut self,
        actor: &Member,
        claims: &TokenClaims,
        amount: u64,
        order: &OrderId,
        now: Timestamp,
    ) -> Expected {
        if actor.id != claims.aud {
            return Err(Code::NotAudience);
        }
        let hold = self.holds.get(&claims.jti).ok_or(Code::TokenNotFound)?.clone();
        if &hold.order != order {
            return Err(Code::OrderMismatch);
        }
        if self.settled_tokens.contains(&claims.jti) {
            return Err(Code::TokenSettled);
        }
        if self.settled_orders.contains(&(claims.aud.clone(), order.clone())) {
            return Err(Code::OrderAlreadySettled);
        }
        match hold.state {
            HoldState::Pending if now < hold.expires_at => {}
            HoldState::Pending | HoldState::Expired => return Err(Code::TokenExpired),
            HoldState::Voided => return Err(Code::TokenVoided),
            HoldState::Posted => panic!("model: a posted hold of an unsettled token"),
        }
        if amount == 0 || amount > hold.max {
            return Err(Code::AmountExceedsToken);
        }
        let fee = amount * FEE_BPS / 10_000;
        let net = amount - fee;
        let buyer = AccountId::of_member(&hold.buyer);
        *self.pending.get_mut(&buyer).unwrap() -= hold.max;
        self.post(buyer.clone(), AccountId::of_member(&hold.merchant), net);
        if fee > 0 {
            self.post(buyer, AccountId::fees(), fee);
        }
        self.budgets.get_mut(&hold.buyer).unwrap().release(hold.max - amount, hold.day);
        let stored = self.holds.get_mut(&claims.jti).unwrap();
        (stored.state, stored.posted) = (HoldState::Posted, amount);
        self.settled_tokens.insert(claims.jti.clone());
        self.settled_orders.insert((claims.aud.clone(), order.clone()));
        self.settlements += 1;
        Ok(json!({"jti": claims.jti, "amount_minor": amount, "fee_minor": fee, "net_minor": net,
            "released_minor": hold.max - amount}))
    }

    fn end_hold(&mut self, jti: &TokenId, buyer: &MemberId, end: HoldState, now: Timestamp) -> Expected {
        let hold = self.holds.get(jti).filter(|h| &h.buyer == buyer).ok_or(Code::TokenNotFound)?.clone();
        match hold.state {
            HoldState::Pending => {}
            HoldState::Posted => return Err(Code::TokenSettled),
            HoldState::Voided => return Err(Code::TokenVoided),
            HoldState::Expired => return Err(Code::TokenExpired),
        }
        if end == HoldState::Expired && now < hold.expires_at {
            return Err(Code::NotPermitted);
        }
        *self.pending.get_mut(&AccountId::of_member(buyer)).unwrap() -= hold.max;
        self.budgets.get_mut(buyer).unwrap().release(hold.max, hold.day);
        self.holds.get_mut(jti).unwrap().state = end;
        Ok(json!({"jti": jti, "released_minor": hold.max}))
    }

    /// Checks what the core answered for one command against the model, and learns from it.
    fn observe(&mut self, cast: &Cast, command: &Command, applied: &Applied, now: Timestamp) {
        let what = format!("{} by {} ({:?})", command.op.name(), command.actor.handle, command.idem);
        if let Some(replayed) = check_idempotency(&self.idem, command, applied, &what) {
            self.count(replayed);
            return;
        }
        let expected = self.run(cast, command, now);
        match (&expected, &applied.outcome) {
            (Ok(fields), Ok(receipt)) => {
                let receipt = receipt.to_json();
                for (name, value) in fields.as_object().unwrap() {
                    assert_eq!(&receipt[name], value, "{what}: receipt field {name}: {receipt}");
                }
                self.events += 1;
                self.count(format!("{} ok", command.op.name()));
            }
            (Err(code), Err(refusal)) => {
                assert_eq!(*code, refusal.code, "{what}: refused for another reason: {refusal:?}");
                let ceiling = match code {
                    Code::BudgetPerCallExceeded => Some("per-call"),
                    Code::BudgetPerDayExceeded => Some("per-day"),
                    Code::BudgetTotalExceeded => Some("total"),
                    _ => None,
                };
                if let Some(name) = ceiling {
                    assert_eq!(refusal.facts["ceiling"], name, "{what}: the refusal names its ceiling");
                }
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

struct World {
    cast: Cast,
    db: Db,
    model: Model,
    now: Timestamp,
    next_jti: u64,
    /// Every command sent with an idempotency key, for replays.
    keyed: Vec<Command>,
    /// Claims of every token issued, and of those asked for in the batch being built.
    tokens: Vec<TokenClaims>,
    /// Claims the core refused to issue (settling one finds no token).
    refused: Vec<TokenClaims>,
    /// Holds that left `pending`, as they were when they did.
    resolved: HashMap<HoldId, Hold>,
}

impl World {
    /// Bootstraps the registry and enrolls two owners and their agents (3 and 2).
    fn new() -> World {
        let key = SigningKey::from_bytes(&[42u8; 32]);
        let registry = registry_member(&key, START);
        let operator_id = MemberId("did:bazaar:operator".into());
        let mut db = Db::new();
        let operator = db.bootstrap(&config(), &registry, &operator_id, START);
        let owner_ids = [member_id(1), member_id(2)];
        let owners = owner_ids.iter().enumerate().map(|(i, id)| create_owner(&operator, i, id));
        db.setup(&config(), owners.collect(), START);
        let mut agents = Vec::new();
        for (n, owner_index) in [0, 0, 0, 1, 1].into_iter().enumerate() {
            let id = member_id(10 + n as u8);
            db.enroll(&config(), &owner_ids[owner_index], n, &id, START);
            agents.push(id);
        }
        let ids = [registry.id.clone(), operator_id].into_iter().chain(owner_ids).chain(agents);
        let all: Vec<Member> = ids.map(|id| db.rows.members[&id].clone()).collect();
        let by_id = all.iter().map(|m| (m.id.clone(), m.clone())).collect();
        let cast = Cast { key, all, by_id };
        let mut model = Model { events: db.events.len(), ..Model::default() };
        for &a in &AGENTS {
            model.budgets.insert(cast.member(a).id.clone(), MBudget::default());
        }
        let world = World {
            cast,
            db,
            model,
            now: START,
            next_jti: 0,
            keyed: Vec::new(),
            tokens: Vec::new(),
            refused: Vec::new(),
            resolved: HashMap::new(),
        };
        world.check();
        world
    }

    fn m(&self, index: usize) -> Member {
        self.cast.member(index).clone()
    }

    fn advance(&mut self, seconds: u64) {
        self.now = self.now.plus_s(seconds);
    }

    /// Fresh claims for a token, signed by the registry key (the edge signs before the core decides).
    fn claims(&mut self, buyer: usize, merchant: usize, max: u64, order: &str, ttl_s: u64) -> (TokenClaims, String) {
        self.next_jti += 1;
        let claims = TokenClaims {
            v: 1,
            iss: self.m(REGISTRY).id,
            jti: TokenId(format!("tok_{}", self.next_jti)),
            sub: self.m(buyer).id,
            aud: self.m(merchant).id,
            max: Amount(max),
            ord: OrderId(order.into()),
            res: "https://merchant.test/restock".into(),
            iat_ms: self.now,
            exp_ms: self.now.plus_s(ttl_s),
            via: None,
        };
        let token = token::encode(&claims, &self.cast.key);
        self.tokens.push(claims.clone());
        (claims, token)
    }

    fn issue_op(&mut self, buyer: usize, merchant: usize, max: u64, order: &str, ttl_s: u64) -> Op {
        let (claims, token) = self.claims(buyer, merchant, max, order, ttl_s);
        Op::Pay(pay::Op::IssueToken { claims, token })
    }

    /// Issues a token that the core must accept, in a batch of its own; returns its claims.
    fn issued(&mut self, buyer: usize, merchant: usize, max: u64, order: &str, ttl_s: u64) -> TokenClaims {
        let op = self.issue_op(buyer, merchant, max, order, ttl_s);
        let Op::Pay(pay::Op::IssueToken { claims, .. }) = &op else { unreachable!() };
        let claims = claims.clone();
        self.one(command(&self.m(buyer), None, op)).outcome.unwrap();
        claims
    }

    /// Runs one batch as an adapter would, folds it into the database, and checks it against the model.
    fn submit(&mut self, commands: Vec<Command>) -> Vec<Applied> {
        let results = self.db.apply_as_adapter(&config(), &commands, self.now);
        for (command, applied) in commands.iter().zip(&results) {
            self.model.observe(&self.cast, command, applied, self.now);
        }
        self.check();
        self.remember_resolved();
        results
    }

    fn one(&mut self, command: Command) -> Applied {
        self.submit(vec![command]).pop().unwrap()
    }

    /// Every invariant, checked after every batch.
    fn check(&self) {
        let rows = &self.db.rows;
        let model = &self.model;
        // Conservation, overdraft, and agreement with the model.
        assert_eq!(model.balances.values().sum::<i128>(), 0, "model conservation");
        self.db.assert_accounts(&model.balances, &model.pending);
        for id in model.balances.keys().chain(model.pending.keys()) {
            assert!(rows.accounts.contains_key(id), "model account {id} missing");
        }
        // Holds: same states as the model; a resolved hold never changes again.
        assert_eq!(rows.holds.len(), model.holds.len(), "hold count");
        assert_eq!(rows.tokens.len(), model.holds.len(), "token count");
        for (jti, expected) in &model.holds {
            let hold = &rows.holds[&hold_id_for(jti)];
            let token = &rows.tokens[jti];
            assert_eq!(
                (hold.state, hold.posted_amount.0, hold.amount.0),
                (expected.state, expected.posted, expected.max)
            );
            assert_eq!(
                (&token.buyer, &token.merchant, &token.order_id),
                (&expected.buyer, &expected.merchant, &expected.order)
            );
            assert_eq!(hold.resolved_at.is_some(), hold.state != HoldState::Pending);
        }
        for (id, then) in &self.resolved {
            assert_eq!(&rows.holds[id], then, "a resolved hold changed");
        }
        // Settlements: once per token, once per (merchant, order), one event each.
        let tokens: HashSet<&TokenId> = rows.settlements_by_token.keys().collect();
        assert_eq!(tokens, model.settled_tokens.iter().collect::<HashSet<_>>(), "settled tokens");
        let orders: HashSet<&(MemberId, OrderId)> = rows.settlements_by_order.keys().collect();
        assert_eq!(orders, model.settled_orders.iter().collect::<HashSet<_>>(), "settled orders");
        assert_eq!(rows.settlements_by_token.len(), model.settlements);
        let settled_events = self.db.events.iter().filter(|e| e.kind == "settlement.posted").count();
        assert_eq!(settled_events, rows.settlements_by_token.len(), "one settlement event per settlement");
        for (jti, s) in &rows.settlements_by_token {
            assert_eq!(&s.jti, jti);
            assert_eq!(s.fee.0 + s.net.0, s.amount.0);
            assert_eq!(rows.holds[&hold_id_for(jti)].posted_amount, s.amount);
        }
        // Budgets match the model.
        let today = self.now.utc_day();
        for (agent, expected) in &model.budgets {
            let budget = &rows.budgets[agent];
            let ceilings = [budget.per_call_max.0, budget.per_day_max.0, budget.total_max.0];
            assert_eq!(ceilings, [expected.per_call, expected.per_day, expected.total], "ceilings of {agent}");
            expected.assert_spent(budget, agent, today);
        }
        // Counts of idempotency records, events and transfers.
        self.db.assert_counts(model.idem.len(), model.events, model.transfers);
        // The chain verifies end to end and the auditor agrees with every cached row.
        self.db.audit();
    }

    /// Remembers holds that left `pending` so later steps can check they never change.
    fn remember_resolved(&mut self) {
        for (id, hold) in &self.db.rows.holds {
            if hold.state != HoldState::Pending {
                self.resolved.entry(id.clone()).or_insert_with(|| hold.clone());
            }
        }
    }
}

// ---- generated sequences -----------------------------------------------------------------------------------------

#[derive(Clone, Debug)]
enum SettleAmount {
    Zero,
    Full,
    /// A share of the maximum, in thousandths (at least 1 unit).
    Part(u16),
    Over(u32),
}

#[derive(Clone, Debug)]
enum Act {
    Mint {
        actor: usize,
        owner: usize,
        amount: u64,
        key: Option<u8>,
    },
    /// `by`: 0 the agent's owner, 1 the other owner, 2 the agent itself, 3.. member `by - 3`.
    Fund {
        by: u8,
        agent: usize,
        amount: u64,
        key: Option<u8>,
    },
    SetBudget {
        by: u8,
        agent: usize,
        ceilings: [u64; 3],
        key: Option<u8>,
    },
    /// `merchant`: an offset from the buyer among the agents (0 is the buyer itself), or anyone.
    Issue {
        actor: Option<usize>,
        buyer: usize,
        merchant: Result<usize, usize>,
        max: u64,
        order: usize,
        ttl_s: u64,
        key: Option<u8>,
    },
    Settle {
        token: usize,
        amount: SettleAmount,
        wrong_merchant: bool,
        wrong_order: bool,
        key: Option<u8>,
    },
    Void {
        token: usize,
        by: u8,
        key: Option<u8>,
    },
    Expire {
        token: usize,
        by_registry: bool,
        wrong_buyer: bool,
        key: Option<u8>,
    },
    Replay {
        pick: usize,
        same_fingerprint: bool,
    },
}

#[derive(Clone, Debug)]
enum Step {
    Advance(u64),
    /// Moves the clock to a recent token's expiry, give or take a millisecond (never backwards).
    ToExpiry(usize, i8),
    Batch(Vec<Act>),
}

/// No key, one of a few shared keys (so requests collide), or one of many.
fn key() -> impl Strategy<Value = Option<u8>> {
    prop_oneof![5 => Just(None), 2 => (0u8..3).prop_map(Some), 3 => (3u8..=255).prop_map(Some)]
}

fn by() -> impl Strategy<Value = u8> {
    prop_oneof![12 => Just(0u8), 1 => Just(1u8), 1 => Just(2u8), 1 => 3u8..12]
}

fn agent() -> impl Strategy<Value = usize> {
    prop::sample::select(AGENTS.to_vec())
}

fn anyone() -> impl Strategy<Value = usize> {
    0usize..9
}

fn ceiling() -> impl Strategy<Value = u64> {
    prop_oneof![1 => Just(0u64), 2 => 1_000u64..=20_000, 6 => 50_000u64..=500_000, 1 => 500_000u64..=5_000_000]
}

fn act() -> impl Strategy<Value = Act> {
    let owner = prop::sample::select(OWNERS.to_vec());
    prop_oneof![
        2 => (prop_oneof![6 => Just(OPERATOR), 1 => anyone()], prop_oneof![6 => owner, 1 => anyone()],
            prop_oneof![5 => 1u64..=1_000_000, 1 => 1_000_000u64..=1_000_000_000_000], key())
            .prop_map(|(actor, owner, amount, key)| Act::Mint { actor, owner, amount, key }),
        3 => (by(), prop_oneof![12 => agent(), 1 => anyone()],
            prop_oneof![3 => 1u64..=150_000, 1 => 150_000u64..=600_000], key())
            .prop_map(|(by, agent, amount, key)| Act::Fund { by, agent, amount, key }),
        3 => (by(), prop_oneof![12 => agent(), 1 => anyone()], prop::array::uniform3(ceiling()), key())
            .prop_map(|(by, agent, ceilings, key)| Act::SetBudget { by, agent, ceilings, key }),
        8 => (prop_oneof![15 => Just(None), 1 => agent().prop_map(Some)], agent(),
            prop_oneof![15 => (1usize..AGENTS.len()).prop_map(Ok), 1 => Just(Ok(0)), 1 => anyone().prop_map(Err)],
            prop_oneof![5 => 1u64..=5_000, 3 => 5_000u64..=40_000, 1 => 99_900u64..=100_100, 1 => 100_001u64..=400_000],
            0usize..ORDERS.len(), prop_oneof![1 => 5u64..=60, 3 => 60u64..=900], key())
            .prop_map(|(actor, buyer, merchant, max, order, ttl_s, key)| Act::Issue {
                actor, buyer, merchant, max, order, ttl_s, key
            }),
        8 => (any::<usize>(), prop_oneof![1 => Just(SettleAmount::Zero), 4 => Just(SettleAmount::Full),
                4 => (1u16..=1000).prop_map(SettleAmount::Part), 1 => (1u32..=100_000).prop_map(SettleAmount::Over)],
            prop::bool::weighted(0.1), prop::bool::weighted(0.1), key())
            .prop_map(|(token, amount, wrong_merchant, wrong_order, key)| Act::Settle {
                token, amount, wrong_merchant, wrong_order, key
            }),
        2 => (any::<usize>(), prop_oneof![6 => Just(0u8), 1 => Just(1u8), 1 => Just(2u8)], key())
            .prop_map(|(token, by, key)| Act::Void { token, by, key }),
        2 => (any::<usize>(), prop::bool::weighted(0.9), prop::bool::weighted(0.1), key())
            .prop_map(|(token, by_registry, wrong_buyer, key)| Act::Expire { token, by_registry, wrong_buyer, key }),
        2 => (any::<usize>(), prop::bool::weighted(0.7))
            .prop_map(|(pick, same_fingerprint)| Act::Replay { pick, same_fingerprint }),
    ]
}

/// An opening batch most cases start with: both owners minted, each agent funded and given a budget.
type Opening = Option<Vec<(u64, [u64; 3])>>;

fn opening() -> impl Strategy<Value = Opening> {
    let per_agent = (0u64..=300_000, prop::array::uniform3(prop_oneof![1 => 0u64..=20_000, 4 => 20_000u64..=600_000]));
    prop::option::weighted(0.8, prop::collection::vec(per_agent, AGENTS.len()))
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        2 => prop_oneof![4 => 1u64..=120, 3 => 120u64..=1_200, 1 => 3_600u64..=30_000].prop_map(Step::Advance),
        1 => (any::<usize>(), -1i8..=1).prop_map(|(token, delta)| Step::ToExpiry(token, delta)),
        10 => prop::collection::vec(act(), 1..=5).prop_map(Step::Batch),
    ]
}

impl World {
    /// A token by a generated index: mostly one of the last few asked for, sometimes any.
    fn token_at(&self, index: usize) -> Option<TokenClaims> {
        if index.is_multiple_of(10) && !self.refused.is_empty() {
            return Some(self.refused[index / 10 % self.refused.len()].clone());
        }
        let n = self.tokens.len();
        if n == 0 {
            return None;
        }
        let at = if index.is_multiple_of(3) { index / 3 % n } else { n - 1 - (index / 3) % n.min(4) };
        Some(self.tokens[at].clone())
    }

    /// Who acts on an agent's behalf for a generated `by` (see [`Act::Fund`]).
    fn acting_for(&self, agent: usize, by: u8) -> usize {
        let owner = match &self.m(agent).owner {
            Some(owner) => self.index_of(owner),
            None => OWNERS[0],
        };
        match by {
            0 => owner,
            1 => OWNERS.into_iter().find(|&o| o != owner).unwrap(),
            2 => agent,
            anyone => anyone as usize - 3,
        }
    }

    fn owner_of(&self, agent: &MemberId) -> usize {
        let owner = self.cast.by_id[agent].owner.clone().expect("agents have owners");
        self.cast.all.iter().position(|m| m.id == owner).unwrap()
    }

    fn index_of(&self, id: &MemberId) -> usize {
        self.cast.all.iter().position(|m| &m.id == id).unwrap()
    }

    /// Turns a generated act into a command, or `None` when it has nothing to act on.
    fn build(&mut self, act: &Act) -> Option<Command> {
        let key_text = |key: &Option<u8>| key.map(|k| format!("k{k}"));
        Some(match act {
            Act::Mint { actor, owner, amount, key } => {
                let op = Op::Pay(pay::Op::Mint { owner: self.m(*owner).id, amount: Amount(*amount) });
                command(&self.m(*actor), key_text(key).as_deref(), op)
            }
            Act::Fund { by, agent, amount, key } => {
                let op = Op::Pay(pay::Op::Fund { agent: self.m(*agent).id, amount: Amount(*amount) });
                command(&self.m(self.acting_for(*agent, *by)), key_text(key).as_deref(), op)
            }
            Act::SetBudget { by, agent, ceilings, key } => {
                let [per_call_max, per_day_max, total_max] = ceilings.map(Amount);
                let op = Op::Pay(pay::Op::SetBudget { agent: self.m(*agent).id, per_call_max, per_day_max, total_max });
                command(&self.m(self.acting_for(*agent, *by)), key_text(key).as_deref(), op)
            }
            Act::Issue { actor, buyer, merchant, max, order, ttl_s, key } => {
                let merchant = match merchant {
                    Ok(offset) => AGENTS[(AGENTS.iter().position(|a| a == buyer).unwrap() + offset) % AGENTS.len()],
                    Err(anyone) => *anyone,
                };
                let op = self.issue_op(*buyer, merchant, *max, ORDERS[*order], *ttl_s);
                command(&self.m(actor.unwrap_or(*buyer)), key_text(key).as_deref(), op)
            }
            Act::Settle { token, amount, wrong_merchant, wrong_order, key } => {
                let claims = self.token_at(*token)?;
                let max = claims.max.0;
                let amount = match amount {
                    SettleAmount::Zero => 0,
                    SettleAmount::Full => max,
                    SettleAmount::Part(share) => (max * *share as u64 / 1000).max(1),
                    SettleAmount::Over(extra) => max + *extra as u64,
                };
                let merchant = self.index_of(&claims.aud);
                let actor = if *wrong_merchant {
                    AGENTS.into_iter().find(|&a| a != merchant && self.m(a).id != claims.sub).unwrap()
                } else {
                    merchant
                };
                let order_id = if *wrong_order { OrderId("order-z".into()) } else { claims.ord.clone() };
                let op = Op::Pay(pay::Op::Settle { claims, amount: Amount(amount), order_id });
                command(&self.m(actor), key_text(key).as_deref(), op)
            }
            Act::Void { token, by, key } => {
                let claims = self.token_at(*token)?;
                let buyer = self.index_of(&claims.sub);
                let actor = match by {
                    0 => buyer,
                    1 => self.owner_of(&claims.sub),
                    _ => AGENTS.into_iter().find(|&a| a != buyer).unwrap(),
                };
                let op = Op::Pay(pay::Op::VoidToken { jti: claims.jti, buyer: claims.sub });
                command(&self.m(actor), key_text(key).as_deref(), op)
            }
            Act::Expire { token, by_registry, wrong_buyer, key } => {
                let claims = self.token_at(*token)?;
                let buyer = if *wrong_buyer { claims.aud.clone() } else { claims.sub.clone() };
                let actor = if *by_registry { REGISTRY } else { self.index_of(&claims.sub) };
                let op = Op::Pay(pay::Op::ExpireHold { jti: claims.jti, buyer });
                command(&self.m(actor), key_text(key).as_deref(), op)
            }
            Act::Replay { pick, same_fingerprint } => {
                if self.keyed.is_empty() {
                    return None;
                }
                let mut earlier = self.keyed[pick % self.keyed.len()].clone();
                if !same_fingerprint {
                    earlier.idem.as_mut().unwrap().fingerprint.push_str("-changed");
                }
                earlier
            }
        })
    }

    fn open(&mut self, opening: &Opening) {
        let Some(agents) = opening else { return };
        let mut commands: Vec<Command> = OWNERS
            .iter()
            .map(|&o| {
                command(
                    &self.m(OPERATOR),
                    None,
                    Op::Pay(pay::Op::Mint { owner: self.m(o).id, amount: Amount(1_000_000) }),
                )
            })
            .collect();
        for (&agent, (funds, ceilings)) in AGENTS.iter().zip(agents) {
            let owner = self.acting_for(agent, 0);
            if *funds > 0 {
                let op = Op::Pay(pay::Op::Fund { agent: self.m(agent).id, amount: Amount(*funds) });
                commands.push(command(&self.m(owner), None, op));
            }
            let [per_call_max, per_day_max, total_max] = ceilings.map(Amount);
            let op = Op::Pay(pay::Op::SetBudget { agent: self.m(agent).id, per_call_max, per_day_max, total_max });
            commands.push(command(&self.m(owner), None, op));
        }
        self.submit(commands);
    }

    fn play(&mut self, steps: &[Step]) {
        for step in steps {
            match step {
                Step::Advance(seconds) => self.advance(*seconds),
                Step::ToExpiry(token, delta) => {
                    if let Some(claims) = self.token_at(*token) {
                        self.now = self.now.max(Timestamp(claims.exp_ms.ms() + *delta as i64));
                    }
                }
                Step::Batch(acts) => {
                    let mut commands = Vec::new();
                    for act in acts {
                        if let Some(command) = self.build(act) {
                            // Commands built earlier in this batch are replayable within it.
                            if command.idem.is_some() {
                                self.keyed.push(command.clone());
                            }
                            commands.push(command);
                        }
                    }
                    if !commands.is_empty() {
                        self.submit(commands);
                    }
                    let asked = std::mem::take(&mut self.tokens);
                    let (issued, refused) = asked.into_iter().partition(|c| self.db.rows.tokens.contains_key(&c.jti));
                    self.tokens = issued;
                    self.refused.extend::<Vec<_>>(refused);
                }
            }
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 128, ..ProptestConfig::default() })]

    #[test]
    fn random_batches_keep_every_invariant(opening in opening(), steps in prop::collection::vec(step(), 1..=60)) {
        let mut world = World::new();
        world.open(&opening);
        world.play(&steps);
        if std::env::var_os("MODEL_COVERAGE").is_some() {
            eprintln!("{:?}", world.model.seen);
        }
    }
}

// ---- sharp cases -------------------------------------------------------------------------------------------------

/// A world where owner 2 minted and funded agent 4 (buyer) with `funds`, under `ceilings`; agent 7 sells.
fn funded(funds: u64, ceilings: [u64; 3]) -> (World, usize, usize) {
    let mut w = World::new();
    let (owner, buyer, merchant) = (OWNERS[0], AGENTS[0], AGENTS[3]);
    let [per_call_max, per_day_max, total_max] = ceilings.map(Amount);
    let commands = vec![
        command(&w.m(OPERATOR), None, Op::Pay(pay::Op::Mint { owner: w.m(owner).id, amount: Amount(funds) })),
        command(&w.m(owner), None, Op::Pay(pay::Op::Fund { agent: w.m(buyer).id, amount: Amount(funds) })),
        command(
            &w.m(owner),
            None,
            Op::Pay(pay::Op::SetBudget { agent: w.m(buyer).id, per_call_max, per_day_max, total_max }),
        ),
    ];
    assert!(w.submit(commands).iter().all(|a| a.outcome.is_ok()));
    (w, buyer, merchant)
}

fn code(applied: &Applied) -> Code {
    applied.outcome.as_ref().expect_err("expected a refusal").code
}

fn account(w: &World, index: usize) -> Account {
    w.db.rows.accounts[&AccountId::of_member(&w.m(index).id)].clone()
}

#[test]
fn partial_settle_releases_the_rest_to_the_budget() {
    let (mut w, buyer, merchant) = funded(10_000, [1_000, 1_000, 10_000]);
    let claims = w.issued(buyer, merchant, 500, "o-1", 900);
    let receipt = w.one(command(&w.m(merchant), None, settle_op(&claims, 400))).outcome.unwrap().to_json();
    assert_eq!((receipt["fee_minor"].as_u64(), receipt["released_minor"].as_u64()), (Some(4), Some(100)));
    let budget = &w.db.rows.budgets[&w.m(buyer).id];
    assert_eq!((budget.spent_total, budget.spent_on(w.now.utc_day())), (Amount(400), Amount(400)));
    assert_eq!((account(&w, buyer).balance(), account(&w, buyer).available()), (9_600, 9_600));
    assert_eq!(account(&w, merchant).balance(), 396);
    // The released 100 is spendable again today: 400 + 600 fills the per-day ceiling exactly.
    let op = w.issue_op(buyer, merchant, 600, "o-2", 900);
    w.one(command(&w.m(buyer), None, op)).outcome.unwrap();
    let op = w.issue_op(buyer, merchant, 1, "o-3", 900);
    assert_eq!(code(&w.one(command(&w.m(buyer), None, op))), Code::BudgetPerDayExceeded);
}

#[test]
fn a_hold_expired_by_the_sweeper_cannot_be_settled_or_voided() {
    let (mut w, buyer, merchant) = funded(10_000, [1_000, 5_000, 10_000]);
    let claims = w.issued(buyer, merchant, 700, "o-1", 60);
    let expire = || Op::Pay(pay::Op::ExpireHold { jti: claims.jti.clone(), buyer: claims.sub.clone() });
    w.advance(59);
    assert_eq!(code(&w.one(command(&w.m(REGISTRY), None, expire()))), Code::NotPermitted, "not yet due");
    w.advance(1);
    // At the very instant of expiry the token no longer settles, and the sweeper may take it.
    assert_eq!(w.now, claims.exp_ms);
    assert_eq!(code(&w.one(command(&w.m(merchant), None, settle_op(&claims, 700)))), Code::TokenExpired);
    let swept = w.one(command(&w.m(REGISTRY), None, expire())).outcome.unwrap().to_json();
    assert_eq!(swept["released_minor"], 700);
    assert_eq!(code(&w.one(command(&w.m(merchant), None, settle_op(&claims, 700)))), Code::TokenExpired);
    let void = Op::Pay(pay::Op::VoidToken { jti: claims.jti.clone(), buyer: claims.sub.clone() });
    assert_eq!(code(&w.one(command(&w.m(buyer), None, void))), Code::TokenExpired);
    assert_eq!(code(&w.one(command(&w.m(REGISTRY), None, expire()))), Code::TokenExpired, "a hold resolves once");
    assert_eq!(account(&w, buyer).available(), 10_000);
    assert_eq!(w.db.rows.budgets[&w.m(buyer).id].spent_total, Amount::ZERO);
    assert_eq!(w.db.rows.holds[&hold_id_for(&claims.jti)].state, HoldState::Expired);
}

#[test]
fn a_second_token_for_a_settled_order_is_refused_and_the_buyer_pays_once() {
    let (mut w, buyer, merchant) = funded(10_000, [1_000, 5_000, 10_000]);
    let mut tokens = Vec::new();
    for _ in 0..2 {
        tokens.push(w.issued(buyer, merchant, 300, "order-7", 900));
    }
    w.one(command(&w.m(merchant), Some("s1"), settle_op(&tokens[0], 300))).outcome.unwrap();
    let refused = w.one(command(&w.m(merchant), Some("s2"), settle_op(&tokens[1], 300)));
    let refusal = refused.outcome.unwrap_err();
    assert_eq!(refusal.code, Code::OrderAlreadySettled);
    assert_eq!(refusal.facts["jti"], json!(tokens[0].jti));
    assert_eq!(account(&w, buyer).balance(), 9_700, "one debit for the order");
    assert_eq!(account(&w, merchant).balance(), 297);
    // The second token's hold is still pending until the buyer lets it go.
    assert_eq!(account(&w, buyer).available(), 9_400);
    let void = Op::Pay(pay::Op::VoidToken { jti: tokens[1].jti.clone(), buyer: tokens[1].sub.clone() });
    w.one(command(&w.m(buyer), None, void)).outcome.unwrap();
    assert_eq!(account(&w, buyer).available(), 9_700);
    // The refusal was recorded under its key and stays a refusal.
    let again = w.one(command(&w.m(merchant), Some("s2"), settle_op(&tokens[1], 300)));
    assert!(again.replayed);
    assert_eq!(again.outcome, Err(refusal));
}

#[test]
fn a_replay_inside_the_same_batch_returns_the_first_result() {
    let (mut w, buyer, merchant) = funded(10_000, [1_000, 5_000, 10_000]);
    let op = w.issue_op(buyer, merchant, 250, "o-1", 900);
    let Op::Pay(pay::Op::IssueToken { claims, .. }) = &op else { unreachable!() };
    let claims = claims.clone();
    let m = w.m(merchant);
    let results = w.submit(vec![
        command(&w.m(buyer), Some("t"), op),
        command(&m, Some("k"), settle_op(&claims, 250)),
        command(&m, Some("k"), settle_op(&claims, 250)),
        command(&m, Some("k"), settle_op(&claims, 200)),
        command(&m, Some("k2"), settle_op(&claims, 250)),
    ]);
    let receipt = results[1].outcome.as_ref().unwrap().to_json();
    assert_eq!(receipt["amount_minor"], 250);
    assert!(!results[1].replayed);
    assert!(results[2].replayed);
    assert_eq!(results[2].outcome, results[1].outcome);
    assert_eq!(code(&results[3]), Code::IdempotencyConflict);
    assert_eq!(code(&results[4]), Code::TokenSettled);
    assert_eq!(account(&w, buyer).balance(), 9_750);
    assert_eq!(w.db.events.iter().filter(|e| e.kind == "settlement.posted").count(), 1);
}

// ---- regressions for core bugs this test found ------------------------------------------------------------------

/// Runs commands on a copy of the database without writing or checking the model.
fn dry_run(w: &World, commands: &[Command]) -> (Vec<Applied>, Changes) {
    apply_batch(&mut w.db.rows.clone(), &config(), commands, w.now)
}

#[test]
fn an_owner_may_void_its_agents_token() {
    let (mut w, buyer, merchant) = funded(10_000, [1_000, 5_000, 10_000]);
    let claims = w.issued(buyer, merchant, 300, "o-1", 900);
    let owner = w.m(w.acting_for(buyer, 0));
    let void = Op::Pay(pay::Op::VoidToken { jti: claims.jti.clone(), buyer: claims.sub.clone() });
    let (results, _) = dry_run(&w, &[command(&owner, None, void)]);
    assert!(results[0].outcome.is_ok(), "owner void refused: {:?}", results[0].outcome);
}

#[test]
fn a_refused_redeem_leaves_no_trace() {
    let w = World::new();
    let owner = w.m(OWNERS[0]);
    let agent = member_id(99);
    let redeem = |credential_hash: &str| {
        Op::Identity(identity::Op::RedeemInvite {
            code_hash: "invite-x".into(),
            agent: agent.clone(),
            handle: "newcomer".into(),
            credential_hash: credential_hash.into(),
        })
    };
    let invite =
        Op::Identity(identity::Op::IssueInvite { code_hash: "invite-x".into(), expires_at: START.plus_s(3600) });
    // The new credential collides with the operator's, so enrollment is refused...
    let refused_only =
        [command(&owner, None, invite.clone()), command(&stranger(&agent), Some("r1"), redeem("op-cred"))];
    let (results, changes) = dry_run(&w, &refused_only);
    assert_eq!(code(&results[1]), Code::InvalidRequest);
    // ...and a refusal must leave no trace but its idempotency record and event.
    let mut traces = Vec::new();
    if !changes.upsert_budgets.is_empty() {
        traces.push(format!("a budget row for the refused agent: {:?}", changes.upsert_budgets));
    }
    let with_retry = [
        command(&owner, None, invite),
        command(&stranger(&agent), Some("r1"), redeem("op-cred")),
        command(&stranger(&agent), None, redeem("fresh-cred")),
    ];
    let (results, _) = dry_run(&w, &with_retry);
    if let Err(refusal) = &results[2].outcome {
        traces.push(format!("the invite was used up by the refusal: the retry got {:?}", refusal.code));
    }
    assert!(traces.is_empty(), "{traces:#?}");
}

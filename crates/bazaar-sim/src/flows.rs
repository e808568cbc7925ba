//! The workload: what the clients ask for next, flow by flow. Each request is
//! built as the edge builds it — parties and milestone counts read from the
//! stored documents — and is mostly one the core should accept, sometimes one
//! it should refuse (a wrong actor, an amount too large, a phase passed).

use crate::cast::{command, Cast, ARBITER, TRADERS};
use crate::rng::Rng;
use bazaar_core::command::{Command, Op};
use bazaar_core::crypto::{sha256_hex, sign};
use bazaar_core::dispute::{
    self, dispute_id_for, evidence_message, Decision, Dispute, DisputeAct, Phase, ReasonCode, Subject,
};
use bazaar_core::escrow::{self, contract_id_for, Contract, ContractAct, ContractState, MilestoneSpec, MilestoneState};
use bazaar_core::kernel::docs::{decode, Document};
use bazaar_core::model::Member;
use bazaar_core::pay;
use bazaar_core::token::{self, TokenClaims};
use bazaar_store::{Store, StoreError};
use bazaar_types::{Amount, ContractId, DisputeId, MemberId, OrderId, Timestamp, TokenId};
use futures::executor::block_on;

/// The flows a request belongs to, for the counters.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Flow {
    Pay,
    Escrow,
    Dispute,
    Stake,
    /// Relayed settlements through the corridor to the peer registry (built in `relay`).
    Relay,
    /// The storefront: listings, requests for quote, orders, proofs, cancellations (built in `market`).
    Market,
    /// Service payments, guest hires (direct and escrowed) and priority leases (built in `hiring`).
    Hire,
    /// Job rewards: funded, released on an accepted verdict, withdrawn after the claim window (built in `bounties`).
    Bounty,
    Sweeper,
}

impl Flow {
    pub fn name(self) -> &'static str {
        match self {
            Flow::Pay => "paid calls",
            Flow::Escrow => "escrow",
            Flow::Dispute => "disputes",
            Flow::Stake => "stake",
            Flow::Relay => "relayed settlements",
            Flow::Market => "storefront",
            Flow::Hire => "hiring",
            Flow::Bounty => "bounties",
            Flow::Sweeper => "sweeper",
        }
    }
}

/// A token's time to live, in seconds, at least and at most.
const TOKEN_TTL_S: (u64, u64) = (300, 3_600);
/// A paid call's maximum, in minor units, at least and at most (below the escrow threshold).
const CALL_MINOR: (u64, u64) = (100, 60_000);
/// A milestone's amount, in minor units, at least and at most.
const MILESTONE_MINOR: (u64, u64) = (500, 40_000);
/// Milestones per contract, at most.
const MILESTONES_MAX: u64 = 3;
/// A contract's review window, in seconds, at least and at most.
const REVIEW_S: (u64, u64) = (60, 1_200);
/// Stake locked or unlocked at once, in minor units, at most.
const STAKE_MINOR_MAX: u64 = 30_000;
/// How often (per mille) a request comes from the wrong member or asks for too much.
pub const WRONG_PER_MILLE: u64 = 80;
/// Remembered contracts and disputes the workload picks among (the most recent).
const RECENT_MAX: usize = 24;
/// Tokens a settle or a void picks among (the most recent): older ones have mostly expired.
const RECENT_TOKENS_MAX: usize = 6;
/// How often (per mille) a settle or a void is for the latest token (a paid call runs soon after its token).
const LATEST_TOKEN_PER_MILLE: u64 = 700;

/// What the workload remembers of what it asked for.
#[derive(Default)]
pub struct Workload {
    next: u64,
    tokens: Vec<TokenClaims>,
    /// Calls settled at least once: (merchant, order, buyer, amount).
    calls: Vec<(MemberId, OrderId, MemberId, u64)>,
    pub contracts: Vec<ContractId>,
    pub disputes: Vec<DisputeId>,
}

/// `right`, or (sometimes) a trader who has no business sending this.
pub fn or_stray<'a>(rng: &mut Rng, cast: &'a Cast, right: &'a Member) -> &'a Member {
    if rng.chance(WRONG_PER_MILLE) {
        &cast.agents[TRADERS[rng.index(TRADERS.len())]]
    } else {
        right
    }
}

fn recent<T: Clone>(rng: &mut Rng, items: &[T]) -> Option<T> {
    recent_of(rng, items, RECENT_MAX)
}

pub fn recent_of<T: Clone>(rng: &mut Rng, items: &[T], max: usize) -> Option<T> {
    let start = items.len().saturating_sub(max);
    rng.pick(&items[start..]).cloned()
}

pub fn read_doc<T: Document>(store: &dyn Store, id: &str) -> Result<Option<T>, StoreError> {
    match block_on(store.doc(T::KIND, id))? {
        Some(row) => Ok(Some(decode::<T>(&row)?)),
        None => Ok(None),
    }
}

/// The documents among the last `max` of `ids` that are stored and pass `keep`.
pub fn recent_docs<T: Document, I: std::ops::Deref<Target = str>>(
    store: &dyn Store,
    ids: &[I],
    max: usize,
    keep: impl Fn(&T) -> bool,
) -> Result<Vec<T>, StoreError> {
    let mut docs = Vec::new();
    for id in &ids[ids.len().saturating_sub(max)..] {
        docs.extend(read_doc::<T>(store, id)?.filter(&keep));
    }
    Ok(docs)
}

pub fn contract_op(c: &Contract, act: ContractAct) -> Op {
    Op::Escrow(escrow::Op::ContractAct {
        contract: c.id.clone(),
        buyer: c.buyer.clone(),
        seller: c.seller.clone(),
        milestones: c.milestones.len() as u32,
        act,
    })
}

pub fn dispute_op(d: &Dispute, act: DisputeAct) -> Op {
    Op::Dispute(dispute::Op::DisputeAct {
        dispute: d.id.clone(),
        subject: d.subject.clone(),
        claimant: d.claimant.clone(),
        respondent: d.respondent.clone(),
        act,
    })
}

impl Workload {
    fn key(&mut self) -> String {
        self.next += 1;
        format!("k-{}", self.next)
    }

    /// A settled call the workload learnt of from an answer.
    pub fn settled(&mut self, merchant: MemberId, order: OrderId, buyer: MemberId, amount: u64) {
        self.calls.push((merchant, order, buyer, amount));
    }

    /// The next request of `flow`, or none if the flow has nothing to act on yet.
    pub fn next(
        &mut self,
        flow: Flow,
        rng: &mut Rng,
        cast: &Cast,
        store: &dyn Store,
        now: Timestamp,
    ) -> Result<Option<Command>, StoreError> {
        match flow {
            Flow::Pay => Ok(Some(self.pay(rng, cast, now))),
            Flow::Escrow => self.escrow(rng, cast, store, now),
            Flow::Dispute => self.dispute(rng, cast, store),
            Flow::Stake => Ok(Some(self.stake(rng, cast))),
            Flow::Relay | Flow::Market | Flow::Hire | Flow::Bounty | Flow::Sweeper => Ok(None),
        }
    }

    /// A buyer and a seller of different owners (agents of one owner cannot contract with each other).
    fn two_traders(rng: &mut Rng) -> (usize, usize) {
        let half = TRADERS.len() / 2;
        let a = rng.index(TRADERS.len());
        let b = (a / half + 1) % 2 * half + rng.index(half);
        (TRADERS[a], TRADERS[b])
    }

    fn pay(&mut self, rng: &mut Rng, cast: &Cast, now: Timestamp) -> Command {
        let key = Some(self.key());
        match rng.below(100) {
            0..=2 => {
                let owner = &cast.owners[rng.index(cast.owners.len())];
                let op =
                    Op::Pay(pay::Op::Mint { owner: owner.id.clone(), amount: Amount(rng.between(10_000, 400_000)) });
                command(or_stray(rng, cast, &cast.operator), key, op)
            }
            3..=8 => {
                let agent = rng.index(cast.agents.len());
                let op = Op::Pay(pay::Op::Fund {
                    agent: cast.agents[agent].id.clone(),
                    amount: Amount(rng.between(1_000, 200_000)),
                });
                command(or_stray(rng, cast, cast.owner_of(agent)), key, op)
            }
            9..=10 => {
                let agent = rng.index(cast.agents.len());
                let per_call = rng.between(CALL_MINOR.1 / 2, 90_000);
                let op = Op::Pay(pay::Op::SetBudget {
                    agent: cast.agents[agent].id.clone(),
                    per_call_max: Amount(per_call),
                    per_day_max: Amount(rng.between(500_000, 3_000_000)),
                    total_max: Amount(rng.between(5_000_000, 30_000_000)),
                });
                command(cast.owner_of(agent), key, op)
            }
            11..=45 => self.issue(rng, cast, now, key),
            46..=85 => match self.some_token(rng) {
                Some(claims) => {
                    let amount =
                        if rng.chance(WRONG_PER_MILLE) { claims.max.0 + 1 } else { rng.between(1, claims.max.0) };
                    let merchant = cast.find(&claims.aud).expect("a cast merchant");
                    let op = Op::Pay(pay::Op::Settle {
                        claims: claims.clone(),
                        amount: Amount(amount),
                        order_id: claims.ord.clone(),
                    });
                    command(or_stray(rng, cast, merchant), key, op)
                }
                None => self.issue(rng, cast, now, key),
            },
            _ => match self.some_token(rng) {
                Some(claims) => {
                    let buyer = cast.find(&claims.sub).expect("a cast buyer");
                    let op = Op::Pay(pay::Op::VoidToken { jti: claims.jti.clone(), buyer: claims.sub.clone() });
                    command(or_stray(rng, cast, buyer), key, op)
                }
                None => self.issue(rng, cast, now, key),
            },
        }
    }

    fn some_token(&self, rng: &mut Rng) -> Option<TokenClaims> {
        if rng.chance(LATEST_TOKEN_PER_MILLE) {
            self.tokens.last().cloned()
        } else {
            recent_of(rng, &self.tokens, RECENT_TOKENS_MAX)
        }
    }

    fn issue(&mut self, rng: &mut Rng, cast: &Cast, now: Timestamp, key: Option<String>) -> Command {
        let (buyer, merchant) = Self::two_traders(rng);
        self.next += 1;
        let claims = TokenClaims {
            v: 1,
            iss: cast.registry.id.clone(),
            jti: TokenId(format!("tok_{:06}", self.next)),
            sub: cast.agents[buyer].id.clone(),
            aud: cast.agents[merchant].id.clone(),
            max: Amount(rng.between(CALL_MINOR.0, CALL_MINOR.1)),
            ord: OrderId(format!("order-{}", self.next)),
            res: "https://merchant.test/call".into(),
            iat_ms: now,
            exp_ms: now.plus_s(rng.between(TOKEN_TTL_S.0, TOKEN_TTL_S.1)),
            via: None,
        };
        let token = token::encode(&claims, &cast.registry_key);
        self.tokens.push(claims.clone());
        command(&cast.agents[buyer], key, Op::Pay(pay::Op::IssueToken { claims, token }))
    }

    fn escrow(
        &mut self,
        rng: &mut Rng,
        cast: &Cast,
        store: &dyn Store,
        now: Timestamp,
    ) -> Result<Option<Command>, StoreError> {
        let existing = match recent(rng, &self.contracts) {
            Some(id) if rng.below(100) < 70 => read_doc::<Contract>(store, &id)?,
            _ => None,
        };
        let key = self.key();
        let Some(c) = existing else { return Ok(Some(self.create_contract(rng, cast, now, key))) };
        let buyer = cast.find(&c.buyer).expect("a cast buyer");
        let seller = cast.find(&c.seller).expect("a cast seller");
        let with = |state: MilestoneState| {
            c.milestones.iter().filter(|m| m.state == state).map(|m| m.index).collect::<Vec<_>>()
        };
        let (actor, act) = match c.state {
            ContractState::Offered => match rng.below(10) {
                0..=6 => (seller, ContractAct::Accept),
                7 | 8 => (seller, ContractAct::Decline),
                _ => (buyer, ContractAct::Cancel),
            },
            ContractState::Accepted => {
                let (pending, delivered) = (with(MilestoneState::Pending), with(MilestoneState::Delivered));
                let overdue =
                    c.milestones.iter().find(|m| m.state == MilestoneState::Pending && now >= m.reclaimable_at());
                match (rng.pick(&pending), rng.pick(&delivered)) {
                    // A seller this late may lose the milestone: half the time the buyer reclaims it instead (no
                    // extra draw, so the seed's other choices stay as they were).
                    (Some(_), _) if overdue.is_some() && self.next.is_multiple_of(2) => {
                        (buyer, ContractAct::Reclaim { milestone: overdue.expect("overdue").index })
                    }
                    (Some(&m), _) if rng.below(2) == 0 || delivered.is_empty() => {
                        let evidence = sha256_hex(format!("{}:{m}:{}", c.id, self.next).as_bytes());
                        (seller, ContractAct::Deliver { milestone: m, evidence_sha256: evidence })
                    }
                    (_, Some(&m)) => (buyer, ContractAct::Release { milestone: m }),
                    _ => return Ok(Some(self.create_contract(rng, cast, now, key))),
                }
            }
            _ => return Ok(Some(self.create_contract(rng, cast, now, key))),
        };
        Ok(Some(command(or_stray(rng, cast, actor), Some(key), contract_op(&c, act))))
    }

    fn create_contract(&mut self, rng: &mut Rng, cast: &Cast, now: Timestamp, key: String) -> Command {
        let (buyer, seller) = Self::two_traders(rng);
        let arbiter = if rng.below(2) == 0 { &cast.agents[ARBITER] } else { &cast.desk };
        let milestones = (0..rng.between(1, MILESTONES_MAX))
            .map(|i| MilestoneSpec {
                amount: Amount(rng.between(MILESTONE_MINOR.0, MILESTONE_MINOR.1)),
                description: format!("part {i}"),
                due_at: now.plus_s(86_400),
            })
            .collect();
        let (b, s) = (&cast.agents[buyer], &cast.agents[seller]);
        self.contracts.push(contract_id_for(&b.id, &s.id, &arbiter.id, &key));
        let op = Op::Escrow(escrow::Op::CreateContract {
            seller: s.id.clone(),
            arbiter: arbiter.id.clone(),
            milestones,
            terms_hash: sha256_hex(key.as_bytes()),
            review_window_s: rng.between(REVIEW_S.0, REVIEW_S.1),
        });
        command(b, Some(key), op)
    }

    fn dispute(&mut self, rng: &mut Rng, cast: &Cast, store: &dyn Store) -> Result<Option<Command>, StoreError> {
        let key = Some(self.key());
        if rng.below(100) < 80 {
            let open = recent_docs::<Dispute, _>(store, &self.disputes, RECENT_MAX, |d| d.phase != Phase::Executed)?;
            if let Some(d) = rng.pick(&open) {
                return Ok(self.dispute_act(rng, cast, d, key));
            }
        }
        // File: on a settled call, or on a delivered or released milestone, not disputed yet (mostly).
        let fresh = |d: &DisputeId, rng: &mut Rng| !self.disputes.contains(d) || rng.chance(WRONG_PER_MILLE);
        let on_call = rng.below(2) == 0 || self.contracts.is_empty();
        let (subject, claimant, respondent, most) = if on_call {
            let Some((merchant, order_id, buyer, amount)) = recent(rng, &self.calls) else { return Ok(None) };
            (Subject::Call { merchant: merchant.clone(), order_id }, buyer, merchant, amount)
        } else {
            let Some(id) = recent(rng, &self.contracts) else { return Ok(None) };
            let Some(c) = read_doc::<Contract>(store, &id)? else { return Ok(None) };
            let done = |m: &&escrow::Milestone| matches!(m.state, MilestoneState::Delivered | MilestoneState::Released);
            let candidates: Vec<u32> = c.milestones.iter().filter(done).map(|m| m.index).collect();
            let Some(&index) = rng.pick(&candidates) else { return Ok(None) };
            let amount = c.milestones[index as usize].amount.0;
            (Subject::Milestone { contract: c.id.clone(), index }, c.buyer, c.seller, amount)
        };
        if !fresh(&dispute_id_for(&subject), rng) {
            return Ok(None);
        }
        let claimed = if rng.chance(WRONG_PER_MILLE) { most + 1 } else { rng.between(1, most) };
        let id = dispute_id_for(&subject);
        if !self.disputes.contains(&id) {
            self.disputes.push(id);
        }
        let actor = cast.find(&claimant).expect("a cast buyer");
        let op = Op::Dispute(dispute::Op::FileDispute {
            subject,
            claimant: claimant.clone(),
            respondent,
            reason: ReasonCode::NotAsDescribed,
            claimed: Amount(claimed),
            note: String::new(),
        });
        Ok(Some(command(or_stray(rng, cast, actor), key, op)))
    }

    fn dispute_act(&mut self, rng: &mut Rng, cast: &Cast, d: &Dispute, key: Option<String>) -> Option<Command> {
        let claimant = cast.agent_index(&d.claimant)?;
        let respondent = cast.agent_index(&d.respondent)?;
        let side = if rng.below(3) == 0 { claimant } else { respondent };
        let (actor, act) = match d.phase {
            Phase::Filed | Phase::Evidence => {
                let sha = sha256_hex(format!("{}:{}", d.id, self.next).as_bytes());
                let signature = sign(&cast.agent_keys[side], &evidence_message(&d.id, &sha));
                (&cast.agents[side], DisputeAct::Evidence { sha256: sha, url: None, signature })
            }
            Phase::Ruling => {
                let arbiter = d.arbiter.as_ref().and_then(|a| cast.find(a)).unwrap_or(&cast.operator);
                let decision = [Decision::RefundFull, Decision::RefundPartial, Decision::Reject][rng.index(3)];
                let refund = if d.claimed.0 > 1 { rng.between(1, d.claimed.0 - 1) } else { 1 };
                let slash = if decision == Decision::Reject { 0 } else { rng.below(d.claimed.0 + 1) };
                let act = DisputeAct::Rule {
                    decision,
                    refund: Amount(refund),
                    slash: Amount(slash),
                    reasons: "simulated".into(),
                };
                (arbiter, act)
            }
            Phase::Appealable if rng.below(2) == 0 => {
                // The side the ruling went against (mostly): only it may appeal.
                let ruling = d.rulings.last()?;
                let claimant_lost = ruling.refund < d.claimed;
                let loser =
                    if claimant_lost && (rng.below(2) == 0 || ruling.refund.0 == 0) { claimant } else { respondent };
                (&cast.agents[loser], DisputeAct::Appeal)
            }
            Phase::Appealable | Phase::Executed => (&cast.agents[side], DisputeAct::Execute),
        };
        Some(command(or_stray(rng, cast, actor), key, dispute_op(d, act)))
    }

    fn stake(&mut self, rng: &mut Rng, cast: &Cast) -> Command {
        let agent = &cast.agents[TRADERS[rng.index(TRADERS.len())]];
        let amount = Amount(rng.between(1, STAKE_MINOR_MAX));
        let op = match rng.below(10) {
            0..=5 => dispute::Op::StakeLock { amount },
            6..=7 => dispute::Op::StakeUnlock { amount },
            _ => dispute::Op::StakeWithdraw,
        };
        command(agent, Some(self.key()), Op::Dispute(op))
    }
}

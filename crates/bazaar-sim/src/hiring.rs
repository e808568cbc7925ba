//! Hiring: an owner's exact authorization for its agent to pay a specialist
//! once (paid, revoked, or paid with the wrong terms), fixed-price guest hires
//! of another owner's specialist from its signed offer (paid on a verified
//! response, directly or by releasing the escrowed milestone the specialist
//! accepted and delivered), and prepaid priority leases at a worker's queue
//! with the worker's receipt. Requests are built as the server's hire routes
//! build them: an acceptance carries the specialist, payee and contract read
//! from the stored hire, and the response the edge would have verified.

use crate::cast::{command, other_owners_trader, Cast, TRADERS};
use crate::flows::{contract_op, or_stray, read_doc, recent_docs, WRONG_PER_MILLE};
use crate::rng::Rng;
use bazaar_core::command::{Command, Op};
use bazaar_core::crypto::{sha256_hex, sign};
use bazaar_core::escrow::{Contract, ContractAct, ContractState, MilestoneState};
use bazaar_core::hire::{
    self, authorization_id, hire_contract, hire_id, lease_id, offer_statement, AuthorizationState, Hire, HireState,
    Lease, LeaseOrder, Offer, ServiceAuthorization, Terms, VerifiedResponse,
};
use bazaar_store::{Store, StoreError};
use bazaar_types::{Amount, ContractId, MemberId};

/// A service payment or a hire's price, in minor units, at least and at most (under every per-call ceiling).
const PRICE_MINOR: (u64, u64) = (100, 20_000);
/// A lease's period, in seconds, at least and at most (within the core's bounds).
const LEASE_S: (u64, u64) = (60, 86_400);
/// Authorizations, hires and leases the workload picks among (the most recent).
const RECENT_MAX: usize = 12;

#[derive(Default)]
pub struct Hiring {
    next: u64,
    authorizations: Vec<String>,
    hires: Vec<String>,
    leases: Vec<String>,
}

/// Whom a specialist (or worker) is paid through: itself mostly, else its owner.
fn payee(rng: &mut Rng, cast: &Cast, agent: usize) -> MemberId {
    if rng.below(4) == 0 {
        cast.owner_of(agent).id.clone()
    } else {
        cast.agents[agent].id.clone()
    }
}

impl Hiring {
    fn key(&mut self) -> String {
        self.next += 1;
        format!("h-{}", self.next)
    }

    /// A fresh task id (a job's event id: 64 hex).
    fn task(&mut self) -> String {
        self.next += 1;
        sha256_hex(format!("task {}", self.next).as_bytes())
    }

    /// The next request. An escrowed hire's contract is added to `contracts`, where the escrow and
    /// dispute flows (and the auditor) find it too.
    pub fn next(
        &mut self,
        rng: &mut Rng,
        cast: &Cast,
        store: &dyn Store,
        contracts: &mut Vec<ContractId>,
    ) -> Result<Option<Command>, StoreError> {
        let roll = rng.below(100);
        if roll < 30 {
            let open = recent_docs::<ServiceAuthorization, _>(store, &self.authorizations, RECENT_MAX, |a| {
                a.state == AuthorizationState::Authorized
            })?;
            return Ok(Some(match rng.pick(&open).filter(|_| roll >= 10).cloned() {
                Some(a) => self.on_authorization(rng, cast, &a),
                None => self.authorize(rng, cast),
            }));
        }
        if roll < 70 {
            let agreed = recent_docs::<Hire, _>(store, &self.hires, RECENT_MAX, |h| h.state == HireState::Agreed)?;
            if let Some(h) = rng.pick(&agreed).filter(|_| roll >= 45).cloned() {
                return self.on_hire(rng, cast, store, &h);
            }
            return Ok(Some(self.agree(rng, cast, contracts)));
        }
        let unreceipted = recent_docs::<Lease, _>(store, &self.leases, RECENT_MAX, |l| l.receipt_at.is_none())?;
        Ok(Some(match rng.pick(&unreceipted).filter(|_| roll >= 88).cloned() {
            Some(lease) => Self::receipt(rng, cast, &lease, self.key()),
            None => self.buy_lease(rng, cast),
        }))
    }

    /// An owner authorizes one of its agents to pay another owner's specialist for a task (zero: sponsored).
    fn authorize(&mut self, rng: &mut Rng, cast: &Cast) -> Command {
        let agent = TRADERS[rng.index(TRADERS.len())];
        let specialist = other_owners_trader(rng, agent);
        let amount = if rng.below(10) == 0 { 0 } else { rng.between(PRICE_MINOR.0, PRICE_MINOR.1) };
        let terms = Terms {
            task: self.task(),
            specialist: cast.agents[specialist].id.clone(),
            pay_to: payee(rng, cast, specialist),
            amount_minor: Amount(amount),
        };
        let id = &cast.agents[agent].id;
        self.authorizations.push(authorization_id(id, &terms.task));
        let op = Op::Hire(hire::Op::Authorize { agent: id.clone(), terms });
        command(or_stray(rng, cast, cast.owner_of(agent)), Some(self.key()), op)
    }

    /// The agent pays against it (sometimes with terms that differ by a unit), or the owner revokes it.
    fn on_authorization(&mut self, rng: &mut Rng, cast: &Cast, a: &ServiceAuthorization) -> Command {
        let key = Some(self.key());
        let agent = cast.agent_index(&a.agent).expect("a cast agent");
        if rng.below(4) == 0 {
            let op = Op::Hire(hire::Op::Revoke { authorization: a.id.clone(), agent: a.agent.clone() });
            return command(or_stray(rng, cast, cast.owner_of(agent)), key, op);
        }
        let mut terms = a.terms.clone();
        if rng.chance(WRONG_PER_MILLE) {
            terms.amount_minor = Amount(terms.amount_minor.0 + 1);
        }
        let op = Op::Hire(hire::Op::Pay { authorization: a.id.clone(), owner: a.owner.clone(), terms });
        command(or_stray(rng, cast, &cast.agents[agent]), key, op)
    }

    /// A trader hires another owner's specialist from its signed offer; a third of the hires ride escrow.
    fn agree(&mut self, rng: &mut Rng, cast: &Cast, contracts: &mut Vec<ContractId>) -> Command {
        let hirer = TRADERS[rng.index(TRADERS.len())];
        let specialist = other_owners_trader(rng, hirer);
        let escrow = rng.below(3) == 0;
        let pay_to = if escrow { cast.agents[specialist].id.clone() } else { payee(rng, cast, specialist) };
        let (task, price) = (self.task(), Amount(rng.between(PRICE_MINOR.0, PRICE_MINOR.1)));
        let specialist_id = &cast.agents[specialist].id;
        let statement = offer_statement(specialist_id, &task, &pay_to, price);
        // Sometimes the offer was signed for another price: refused, nothing held.
        let signed = if rng.chance(WRONG_PER_MILLE) {
            offer_statement(specialist_id, &task, &pay_to, Amount(price.0 + 1))
        } else {
            statement
        };
        let key = self.key();
        let hirer_id = &cast.agents[hirer].id;
        self.hires.push(hire_id(hirer_id, &task));
        if escrow {
            contracts.push(hire_contract(hirer_id, specialist_id, &key));
        }
        let offer = Offer {
            specialist: specialist_id.clone(),
            task,
            price,
            pay_to,
            signature: sign(&cast.agent_keys[specialist], signed.as_bytes()),
            conversation: None,
            escrow,
        };
        command(&cast.agents[hirer], Some(key), Op::Hire(hire::Op::Agree { offer }))
    }

    /// An agreed hire moves on: its escrowed contract accepted and delivered by the specialist, then the
    /// hirer accepts the specialist's verified response and pays (sometimes a response by someone else).
    fn on_hire(
        &mut self,
        rng: &mut Rng,
        cast: &Cast,
        store: &dyn Store,
        h: &Hire,
    ) -> Result<Option<Command>, StoreError> {
        let key = Some(self.key());
        let specialist = cast.find(&h.terms.specialist).expect("a cast specialist");
        if let Some(id) = &h.contract {
            let Some(c) = read_doc::<Contract>(store, id)? else { return Ok(None) };
            let pending = c.milestones.first().is_some_and(|m| m.state == MilestoneState::Pending);
            let act = match c.state {
                ContractState::Offered => Some(ContractAct::Accept),
                ContractState::Accepted if pending => {
                    let evidence = sha256_hex(format!("{}:{}", c.id, self.next).as_bytes());
                    Some(ContractAct::Deliver { milestone: 0, evidence_sha256: evidence })
                }
                _ => None,
            };
            if let Some(act) = act.filter(|_| rng.below(4) != 0) {
                return Ok(Some(command(or_stray(rng, cast, specialist), key, contract_op(&c, act))));
            }
        }
        let author = if rng.chance(WRONG_PER_MILLE) { h.hirer.clone() } else { h.terms.specialist.clone() };
        let response = VerifiedResponse {
            task: h.terms.task.clone(),
            author,
            result_event: sha256_hex(format!("result {} {}", h.id, self.next).as_bytes()),
        };
        let hirer = cast.find(&h.hirer).expect("a cast hirer");
        let op = Op::Hire(hire::Op::Accept {
            hire: h.id.clone(),
            specialist: h.terms.specialist.clone(),
            pay_to: h.terms.pay_to.clone(),
            contract: h.contract.clone(),
            response,
        });
        Ok(Some(command(or_stray(rng, cast, hirer), key, op)))
    }

    /// A trader prepays priority at another owner's worker for its own task identity (sometimes one
    /// bound to someone else: refused, nothing paid).
    fn buy_lease(&mut self, rng: &mut Rng, cast: &Cast) -> Command {
        let payer = TRADERS[rng.index(TRADERS.len())];
        let worker = other_owners_trader(rng, payer);
        let identity_of = if rng.chance(WRONG_PER_MILLE) { worker } else { payer };
        let order = LeaseOrder {
            worker: cast.agents[worker].id.clone(),
            pay_to: payee(rng, cast, worker),
            price: Amount(rng.between(PRICE_MINOR.0, PRICE_MINOR.1)),
            period_s: rng.between(LEASE_S.0, LEASE_S.1),
            identity: self.task(),
            identity_of: cast.agents[identity_of].id.clone(),
        };
        let key = self.key();
        self.leases.push(lease_id(&cast.agents[payer].id, &order.worker, &key));
        command(&cast.agents[payer], Some(key), Op::Hire(hire::Op::BuyLease { order }))
    }

    /// The worker (or its owner) publishes the lease's receipt.
    fn receipt(rng: &mut Rng, cast: &Cast, lease: &Lease, key: String) -> Command {
        let worker = cast.agent_index(&lease.worker).expect("a cast worker");
        let right = if rng.below(4) == 0 { cast.owner_of(worker) } else { &cast.agents[worker] };
        let op = Op::Hire(hire::Op::ReceiptLease { lease: lease.id.clone(), worker: lease.worker.clone() });
        command(or_stray(rng, cast, right), Some(key), op)
    }
}

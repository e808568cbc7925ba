//! Escrowed contracts: a buyer funds milestones up front as holds on its own
//! account, the seller delivers, and each milestone is released (posted) to
//! the seller once — on the buyer's word or when the review window passes —
//! or, never delivered, reclaimed by the buyer once its due date and the grace
//! have passed (the exactly-once rule is in the module docs of `escrow`).
//!
//! Invariant, per contract, after every command:
//! `total == held + released_net + fees + refunded`, where `held` is the sum
//! of milestones whose hold is still pending and `refunded` counts voided,
//! reclaimed and dispute-refunded units. Nothing moves on a milestone while a
//! dispute is open on it; the dispute's execution resolves its hold.

use super::events::*;
use super::receipts::{ContractView, Delivered, Receipt, Reclaimed, Released, ReleasedDue};
use crate::crypto::sha256_hex;
use crate::kernel::batch::{refuse, Batch};
use crate::kernel::ledger::{PaidOut, PayOut};
use crate::kernel::model::*;
use crate::kernel::refusal::{Code, Refusal};
use crate::kernel::request::Caller;
use bazaar_types::limits::{
    CONTRACT_MILESTONES_MAX, MILESTONE_DESCRIPTION_LEN_MAX, MILESTONE_RECLAIM_GRACE_S, REVIEW_WINDOW_S_MAX,
    REVIEW_WINDOW_S_MIN,
};
use bazaar_types::{AccountId, Amount, ContractId, DisputeId, HoldId, MemberId, Timestamp};
use serde::{Deserialize, Serialize};
use serde_json::json;

/// A milestone as the buyer asks for it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct MilestoneSpec {
    pub amount: Amount,
    pub description: String,
    pub due_at: Timestamp,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ContractState {
    /// Funded, waiting for the seller.
    Offered,
    Accepted,
    Declined,
    Cancelled,
    /// Every milestone released or resolved.
    Completed,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MilestoneState {
    Pending,
    Delivered,
    Released,
    /// A dispute froze it before release; its execution resolves it.
    Disputed,
    /// A dispute's execution paid it out (in part or whole) and refunded the rest.
    Resolved,
    /// Declined or cancelled before acceptance; the hold went back to the buyer.
    Voided,
    /// Never delivered: the buyer took its hold back after the due date and the grace.
    Reclaimed,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Milestone {
    pub index: u32,
    pub amount: Amount,
    pub description: String,
    pub due_at: Timestamp,
    pub hold: HoldId,
    pub state: MilestoneState,
    pub delivered_at: Option<Timestamp>,
    pub evidence_sha256: Option<String>,
    /// When a delivered milestone is released if the buyer stays silent.
    pub review_deadline: Option<Timestamp>,
    pub released_at: Option<Timestamp>,
    /// The release receipt, returned again to anyone who asks twice.
    pub release: Option<serde_json::Value>,
    pub dispute: Option<DisputeId>,
    /// When the buyer reclaimed it (absent from bodies written before reclaims existed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reclaimed_at: Option<Timestamp>,
}

impl Milestone {
    /// The earliest instant its buyer may reclaim it, if still undelivered.
    pub fn reclaimable_at(&self) -> Timestamp {
        self.due_at.plus_s(MILESTONE_RECLAIM_GRACE_S)
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Contract {
    pub id: ContractId,
    pub buyer: MemberId,
    pub seller: MemberId,
    pub arbiter: MemberId,
    pub total: Amount,
    pub terms_sha256: String,
    pub review_window_s: u64,
    pub state: ContractState,
    pub milestones: Vec<Milestone>,
    pub created_at: Timestamp,
    pub accepted_at: Option<Timestamp>,
    pub released_net: Amount,
    pub fees: Amount,
    pub refunded: Amount,
}

impl Contract {
    /// Units still held for this contract (milestones whose hold is pending).
    pub fn held(&self) -> Amount {
        let held = self
            .milestones
            .iter()
            .filter(|m| {
                matches!(m.state, MilestoneState::Pending | MilestoneState::Delivered | MilestoneState::Disputed)
            })
            .map(|m| m.amount.0)
            .sum();
        Amount(held)
    }

    /// `total == held + released_net + fees + refunded`.
    pub fn balanced(&self) -> bool {
        let sum = self.held().0 as u128 + self.released_net.0 as u128 + self.fees.0 as u128 + self.refunded.0 as u128;
        sum == self.total.0 as u128
    }

    /// When the sweeper must next look: the earliest review deadline.
    pub fn due_at(&self) -> Option<Timestamp> {
        if self.state != ContractState::Accepted {
            return None;
        }
        self.milestones.iter().filter(|m| m.state == MilestoneState::Delivered).filter_map(|m| m.review_deadline).min()
    }

    /// The contract as the API shows it, with what it still holds.
    pub fn view(&self) -> ContractView {
        ContractView { contract: self.clone(), held_minor: self.held() }
    }
}

crate::document!(Contract, Contract, version 1,
    id = |c| c.id.to_string(),
    parties = |c| vec![c.buyer.clone(), c.seller.clone(), c.arbiter.clone()],
    due = |c| Contract::due_at(c),
    invariants = |c| assert!(c.balanced(), "escrow out of balance on {}", c.id),
);

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "act", rename_all = "snake_case")]
pub enum ContractAct {
    Accept,
    Decline,
    Cancel,
    Deliver {
        milestone: u32,
        evidence_sha256: String,
    },
    Release {
        milestone: u32,
    },
    /// The buyer takes back an undelivered milestone's hold after its due date and the grace.
    Reclaim {
        milestone: u32,
    },
    /// The sweeper: release every delivered milestone whose review window passed.
    Advance,
}

impl ContractAct {
    pub fn name(&self) -> &'static str {
        match self {
            ContractAct::Accept => "contract_accept",
            ContractAct::Decline => "contract_decline",
            ContractAct::Cancel => "contract_cancel",
            ContractAct::Deliver { .. } => "milestone_deliver",
            ContractAct::Release { .. } => "milestone_release",
            ContractAct::Reclaim { .. } => "milestone_reclaim",
            ContractAct::Advance => "contract_advance",
        }
    }
}

/// `ctr_` + 32 hex chars of SHA-256 over the three parties and the buyer's
/// idempotency key: a retried create lands on the same contract.
pub fn contract_id_for(buyer: &MemberId, seller: &MemberId, arbiter: &MemberId, key: &str) -> ContractId {
    let digest = sha256_hex(format!("bazaar-contract-v1\n{buyer}\n{seller}\n{arbiter}\n{key}").as_bytes());
    ContractId(format!("ctr_{}", &digest[..32]))
}

pub fn milestone_hold(contract: &str, index: u32) -> HoldId {
    HoldId(format!("hold_{contract}_m{index}"))
}

pub(crate) fn is_sha256_hex(text: &str) -> bool {
    text.len() == 64 && text.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

impl Batch<'_> {
    pub(crate) fn contract(&self, id: &str) -> Option<Contract> {
        self.load::<Contract>(id)
    }

    pub(crate) fn create_contract(
        &mut self,
        command: &Caller<'_>,
        seller: &MemberId,
        arbiter: &MemberId,
        specs: &[MilestoneSpec],
        terms: &str,
        review_window_s: u64,
    ) -> Result<ContractView, Refusal> {
        let buyer = command.actor.clone();
        if buyer.kind != MemberKind::Agent {
            return refuse(Code::NotPermitted, "Only an agent opens a contract, on its own budget.");
        }
        let Some(idem) = &command.idem else {
            return refuse(Code::IdempotencyKeyRequired, "Creating a contract needs an Idempotency-Key.");
        };
        if specs.is_empty() || specs.len() > CONTRACT_MILESTONES_MAX {
            return Err(Refusal::new(Code::MilestonesInvalid, "A contract has 1 to 16 milestones.")
                .with(json!({"milestones": specs.len(), "max": CONTRACT_MILESTONES_MAX})));
        }
        let total = check_milestones(specs, self.now)?;
        check_terms(terms, review_window_s)?;
        self.check_contract_parties(&buyer, seller, arbiter)?;
        self.check_invited(seller, &buyer.id)?;
        let id = crate::escrow::contract_id_for(&buyer.id, seller, arbiter, &idem.key);
        if let Some(existing) = self.contract(&id) {
            return Err(Refusal::new(
                Code::ContractExists,
                "A contract with these parties and this Idempotency-Key already exists; it is attached.",
            )
            .with(serde_json::to_value(existing.view()).expect("contracts serialize")));
        }
        let account = AccountId::of_member(&buyer.id);
        self.check_available(&account, total)?;
        let budget = self.snap.budgets.get(&buyer.id).cloned().unwrap_or_else(|| Budget::zero(buyer.id.clone()));
        crate::kernel::ledger::check_ceilings(&budget, total, self.now)?;
        self.put_budget(crate::kernel::ledger::spend(budget, total, self.now));
        let milestones = self.open_milestones(&id, &account, specs);
        let contract = Contract {
            id: id.clone(),
            buyer: buyer.id.clone(),
            seller: seller.clone(),
            arbiter: arbiter.clone(),
            total,
            terms_sha256: terms.to_string(),
            review_window_s,
            state: ContractState::Offered,
            milestones,
            created_at: self.now,
            accepted_at: None,
            released_net: Amount::ZERO,
            fees: Amount::ZERO,
            refunded: Amount::ZERO,
        };
        self.insert(&contract);
        let created = ContractCreated {
            contract: id,
            buyer: buyer.id.clone(),
            seller: seller.clone(),
            arbiter: arbiter.clone(),
            total_minor: total,
            milestones: specs.len(),
        };
        self.emit(command, &ContractOffered { created, terms_sha256: terms.to_string() });
        Ok(contract.view())
    }

    /// The seller is another owner's agent; the arbiter acts for neither party.
    fn check_contract_parties(&self, buyer: &Member, seller: &MemberId, arbiter: &MemberId) -> Result<(), Refusal> {
        let seller_member = self.member(seller)?;
        if seller_member.kind != MemberKind::Agent {
            return refuse(Code::NotAnAgent, "Contracts are made with seller agents.");
        }
        if seller == &buyer.id || seller_member.principal() == buyer.principal() {
            return refuse(Code::NotPermitted, "An agent cannot contract with itself or an agent of its own owner.");
        }
        let arbiter_member = self.member(arbiter)?;
        let principals = [buyer.principal(), seller_member.principal()];
        if arbiter == &buyer.id || arbiter == seller || principals.contains(&arbiter_member.principal()) {
            return refuse(Code::ArbiterInvalid, "The arbiter must be neither party nor act for either party's owner.");
        }
        Ok(())
    }

    /// A hold per milestone on the buyer's account.
    fn open_milestones(&mut self, id: &str, account: &AccountId, specs: &[MilestoneSpec]) -> Vec<Milestone> {
        let mut milestones = Vec::new();
        for (index, spec) in specs.iter().enumerate() {
            let hold = milestone_hold(id, index as u32);
            self.open_hold(hold.clone(), account.clone(), spec.amount, Timestamp::NEVER);
            milestones.push(Milestone {
                index: index as u32,
                amount: spec.amount,
                description: spec.description.clone(),
                due_at: spec.due_at,
                hold,
                state: MilestoneState::Pending,
                delivered_at: None,
                evidence_sha256: None,
                review_deadline: None,
                released_at: None,
                release: None,
                dispute: None,
                reclaimed_at: None,
            });
        }
        milestones
    }

    pub(crate) fn contract_act(
        &mut self,
        command: &Caller<'_>,
        id: &ContractId,
        buyer: &MemberId,
        seller: &MemberId,
        act: &ContractAct,
    ) -> Result<Receipt, Refusal> {
        let Some(contract) = self.contract(id) else {
            return refuse(Code::ContractNotFound, format!("No contract {id} on this registry."));
        };
        if &contract.buyer != buyer || &contract.seller != seller {
            return refuse(Code::InvalidRequest, "The contract's parties do not match the request; read it again.");
        }
        let actor = &command.actor;
        let is_buyer = actor.id == contract.buyer || self.owner_of(&contract.buyer) == Some(&actor.id);
        let is_seller = actor.id == contract.seller || self.owner_of(&contract.seller) == Some(&actor.id);
        match act {
            ContractAct::Accept | ContractAct::Decline => {
                if !is_seller {
                    return refuse(Code::NotParty, "Only the seller (or its owner) accepts or declines a contract.");
                }
                self.answer_offer(command, contract, matches!(act, ContractAct::Accept)).map(Receipt::Contract)
            }
            ContractAct::Cancel => {
                if !is_buyer {
                    return refuse(Code::NotParty, "Only the buyer (or its owner) cancels a contract.");
                }
                if contract.state != ContractState::Offered {
                    return Err(Refusal::new(
                        Code::ContractState,
                        "Only a contract the seller has not accepted can be cancelled; after that, dispute it.",
                    )
                    .with(json!({"state": contract.state})));
                }
                self.void_contract(command, contract, ContractState::Cancelled).map(Receipt::Contract)
            }
            ContractAct::Deliver { milestone, evidence_sha256 } => {
                if !is_seller {
                    return refuse(Code::NotParty, "Only the seller (or its owner) marks a milestone delivered.");
                }
                self.deliver(command, contract, *milestone, evidence_sha256).map(Receipt::Delivered)
            }
            ContractAct::Release { milestone } => {
                if !is_buyer {
                    return refuse(Code::NotParty, "Only the buyer (or its owner) releases a milestone.");
                }
                let index = self.milestone_index(&contract, *milestone)?;
                self.release(command, contract, index, false).map(Receipt::Released)
            }
            ContractAct::Reclaim { milestone } => {
                if !is_buyer {
                    return refuse(Code::NotParty, "Only the buyer (or its owner) reclaims a milestone.");
                }
                let index = self.milestone_index(&contract, *milestone)?;
                self.reclaim(command, contract, index).map(Receipt::Reclaimed)
            }
            ContractAct::Advance => {
                if actor.kind != MemberKind::Registry {
                    return refuse(Code::NotPermitted, "Only the registry's sweeper advances contracts.");
                }
                self.release_due(command, contract).map(Receipt::ReleasedDue)
            }
        }
    }

    /// The seller accepts the offered contract, or declines it (its holds are voided).
    fn answer_offer(
        &mut self,
        command: &Caller<'_>,
        mut contract: Contract,
        accept: bool,
    ) -> Result<ContractView, Refusal> {
        if contract.state != ContractState::Offered {
            return Err(Refusal::new(Code::ContractState, "The contract is no longer waiting for the seller.")
                .with(json!({"state": contract.state})));
        }
        if !accept {
            return self.void_contract(command, contract, ContractState::Declined);
        }
        contract.state = ContractState::Accepted;
        contract.accepted_at = Some(self.now);
        self.update(&contract);
        self.emit(command, &ContractAccepted { contract: contract.id.clone() });
        Ok(contract.view())
    }

    /// The seller marks a pending milestone delivered; the buyer's review window opens.
    fn deliver(
        &mut self,
        command: &Caller<'_>,
        mut contract: Contract,
        milestone: u32,
        evidence_sha256: &str,
    ) -> Result<Delivered, Refusal> {
        if !is_sha256_hex(evidence_sha256) {
            return refuse(Code::InvalidRequest, "`evidence_sha256` is 64 lowercase hex chars.");
        }
        self.check_active(&contract)?;
        let index = self.milestone_index(&contract, milestone)?;
        let m = &contract.milestones[index];
        if m.state != MilestoneState::Pending {
            return Err(Refusal::new(Code::MilestoneState, "Only a pending milestone can be marked delivered.")
                .with(json!({"milestone": milestone, "state": m.state})));
        }
        let deadline = self.now.plus_s(contract.review_window_s);
        let m = &mut contract.milestones[index];
        m.state = MilestoneState::Delivered;
        m.delivered_at = Some(self.now);
        m.evidence_sha256 = Some(evidence_sha256.to_string());
        m.review_deadline = Some(deadline);
        self.update(&contract);
        let delivery = Delivery {
            contract: contract.id.clone(),
            milestone,
            evidence_sha256: evidence_sha256.to_string(),
            review_deadline_ms: deadline,
        };
        self.emit(command, &MilestoneDelivered { delivery: delivery.clone() });
        Ok(Delivered { delivery })
    }

    /// The sweeper: releases every delivered milestone whose review window passed.
    fn release_due(&mut self, command: &Caller<'_>, mut contract: Contract) -> Result<ReleasedDue, Refusal> {
        let id = contract.id.clone();
        let due: Vec<usize> = contract
            .milestones
            .iter()
            .filter(|m| m.state == MilestoneState::Delivered && m.review_deadline.is_some_and(|d| d <= self.now))
            .map(|m| m.index as usize)
            .collect();
        let mut released = Vec::new();
        for index in due {
            let receipt = self.release(command, contract.clone(), index, true)?;
            released.push(receipt);
            contract = self.contract(&id).expect("just written");
        }
        Ok(ReleasedDue { contract: id, released })
    }

    fn check_active(&self, contract: &Contract) -> Result<(), Refusal> {
        if contract.state != ContractState::Accepted {
            return Err(Refusal::new(Code::ContractState, "The contract is not in force (accepted by the seller).")
                .with(json!({"state": contract.state})));
        }
        Ok(())
    }

    fn milestone_index(&self, contract: &Contract, milestone: u32) -> Result<usize, Refusal> {
        if (milestone as usize) < contract.milestones.len() {
            Ok(milestone as usize)
        } else {
            Err(Refusal::new(Code::MilestoneNotFound, "No such milestone in this contract.")
                .with(json!({"milestone": milestone, "milestones": contract.milestones.len()})))
        }
    }

    /// Posts a milestone's hold to the seller, less the fee. Runs at most once
    /// per milestone: a second ask is refused with the original receipt attached.
    pub(crate) fn release(
        &mut self,
        command: &Caller<'_>,
        mut contract: Contract,
        index: usize,
        automatic: bool,
    ) -> Result<Released, Refusal> {
        let m = contract.milestones[index].clone();
        match m.state {
            MilestoneState::Delivered => {}
            MilestoneState::Released => {
                return Err(Refusal::new(
                    Code::MilestoneAlreadyReleased,
                    "This milestone was already released; it pays once. The original release is attached.",
                )
                .with(m.release.clone().unwrap_or_default()))
            }
            MilestoneState::Disputed => {
                return Err(Refusal::new(
                    Code::MilestoneDisputed,
                    "A dispute is open on this milestone; nothing moves until its ruling is executed.",
                )
                .with(json!({"dispute": m.dispute})))
            }
            MilestoneState::Pending => {
                return refuse(Code::MilestoneState, "The seller has not marked this milestone delivered yet.")
            }
            MilestoneState::Resolved | MilestoneState::Voided | MilestoneState::Reclaimed => {
                return Err(Refusal::new(Code::MilestoneState, "This milestone is closed.")
                    .with(json!({"state": m.state, "dispute": m.dispute})))
            }
        }
        self.check_active(&contract)?;
        let hold = self.snap.holds.get(&m.hold).cloned().expect("milestone holds are loaded");
        let ids = format!("tr_{}_m{}", contract.id, m.index);
        let out = PayOut {
            payee: AccountId::of_member(&contract.seller),
            amount: m.amount,
            kind: TransferKind::Release,
            ids: &ids,
            suffix: "rel",
            fee_bps: self.config.fee_bps,
        };
        let PaidOut { net, fee, link, transfers } = self.pay_out(command, hold, out, Some(&contract.buyer));
        contract.released_net = contract.released_net.checked_add(net).expect("within total");
        contract.fees = contract.fees.checked_add(fee).expect("within total");
        let released = MilestoneReleased {
            contract: contract.id.clone(),
            milestone: m.index,
            seller: contract.seller.clone(),
            amount_minor: m.amount,
        };
        let payout = Payout { net_minor: net, fee_minor: fee, transfers, link, released_at_ms: self.now, automatic };
        let receipt = Released { released: released.clone(), payout: payout.clone() };
        let slot = &mut contract.milestones[index];
        slot.state = MilestoneState::Released;
        slot.released_at = Some(self.now);
        slot.release = Some(serde_json::to_value(&receipt).expect("receipts serialize"));
        self.maybe_complete(&mut contract);
        self.update(&contract);
        self.emit(command, &MilestoneReleasedBody { released, payout });
        Ok(receipt)
    }

    /// Gives an undelivered milestone's hold back to the buyer (and its
    /// budget, as any voided hold does) once `now ≥ due_at + grace`. Only a
    /// pending milestone of an accepted contract qualifies, so it cannot meet a
    /// delivery, a release (automatic or not) or a dispute on the same hold.
    fn reclaim(&mut self, command: &Caller<'_>, mut contract: Contract, index: usize) -> Result<Reclaimed, Refusal> {
        let m = contract.milestones[index].clone();
        check_reclaimable(&m)?;
        self.check_active(&contract)?;
        check_reclaim_time(&m, self.now)?;
        let reclaimable_at = m.reclaimable_at();
        let hold = self.snap.holds.get(&m.hold).cloned().expect("milestone holds are loaded");
        self.post_hold(command, hold, &[], Some(&contract.buyer));
        contract.refunded = contract.refunded.checked_add(m.amount).expect("within total");
        let slot = &mut contract.milestones[index];
        slot.state = MilestoneState::Reclaimed;
        slot.reclaimed_at = Some(self.now);
        self.maybe_complete(&mut contract);
        self.update(&contract);
        let reclaimed = MilestoneReclaimed {
            contract: contract.id.clone(),
            milestone: m.index,
            buyer: contract.buyer.clone(),
            seller: contract.seller.clone(),
            amount_minor: m.amount,
            due_at_ms: m.due_at,
            reclaimable_at_ms: reclaimable_at,
        };
        let reclaim = Reclaim { hold: m.hold.clone(), refunded_minor: m.amount, reclaimed_at_ms: self.now };
        self.emit(command, &MilestoneReclaimedBody { reclaimed: reclaimed.clone(), reclaim: reclaim.clone() });
        Ok(Reclaimed { reclaimed, reclaim })
    }

    pub(crate) fn maybe_complete(&self, contract: &mut Contract) {
        let open = contract
            .milestones
            .iter()
            .any(|m| matches!(m.state, MilestoneState::Pending | MilestoneState::Delivered | MilestoneState::Disputed));
        if contract.state == ContractState::Accepted && !open {
            contract.state = ContractState::Completed;
        }
    }

    fn void_contract(
        &mut self,
        command: &Caller<'_>,
        mut contract: Contract,
        end: ContractState,
    ) -> Result<ContractView, Refusal> {
        for index in 0..contract.milestones.len() {
            let m = contract.milestones[index].clone();
            assert_eq!(m.state, MilestoneState::Pending, "an offered contract has only pending milestones");
            let hold = self.snap.holds.get(&m.hold).cloned().expect("milestone holds are loaded");
            self.post_hold(command, hold, &[], Some(&contract.buyer));
            contract.refunded = contract.refunded.checked_add(m.amount).expect("within total");
            contract.milestones[index].state = MilestoneState::Voided;
        }
        contract.state = end;
        self.update(&contract);
        let voided = ContractVoided { contract: contract.id.clone(), released_minor: contract.total };
        if end == ContractState::Declined {
            self.emit(command, &ContractDeclined(voided));
        } else {
            self.emit(command, &ContractCancelled(voided));
        }
        Ok(contract.view())
    }

    fn owner_of(&self, member: &MemberId) -> Option<&MemberId> {
        self.snap.members.get(member).and_then(|m| m.owner.as_ref())
    }
}

/// Refuses a reclaim of `m` before its due date plus the grace, saying when it
/// becomes possible. Under the route's derived key the refusal is not kept
/// (`Idem::keeps_refusals`), so the same ask runs once the time comes.
fn check_reclaim_time(m: &Milestone, now: Timestamp) -> Result<(), Refusal> {
    let reclaimable_at = m.reclaimable_at();
    if now >= reclaimable_at {
        return Ok(());
    }
    Err(Refusal::new(
        Code::ReclaimTooEarly,
        "An undelivered milestone can be reclaimed only after its due date and the grace; until then the seller may still deliver.",
    )
    .with(json!({
        "milestone": m.index, "due_at_ms": m.due_at, "grace_s": MILESTONE_RECLAIM_GRACE_S,
        "reclaimable_at_ms": reclaimable_at, "now_ms": now,
    })))
}

/// A reclaim needs a pending milestone: each other state names its own refusal.
fn check_reclaimable(m: &Milestone) -> Result<(), Refusal> {
    let facts = json!({"milestone": m.index, "state": m.state});
    match m.state {
        MilestoneState::Pending => Ok(()),
        MilestoneState::Delivered => Err(Refusal::new(
            Code::MilestoneDelivered,
            "The seller marked this milestone delivered; release it, or dispute it before the review deadline.",
        )
        .with(
            json!({"milestone": m.index, "delivered_at_ms": m.delivered_at, "review_deadline_ms": m.review_deadline}),
        )),
        MilestoneState::Disputed => Err(Refusal::new(
            Code::MilestoneDisputed,
            "A dispute is open on this milestone; its executed ruling decides the refund.",
        )
        .with(json!({"milestone": m.index, "dispute": m.dispute}))),
        MilestoneState::Released => Err(Refusal::new(
            Code::MilestoneAlreadyReleased,
            "This milestone was already released to the seller; dispute it within the claim window instead.",
        )
        .with(m.release.clone().unwrap_or(facts))),
        MilestoneState::Reclaimed => Err(Refusal::new(
            Code::MilestoneAlreadyReclaimed,
            "This milestone was already reclaimed; its hold went back once.",
        )
        .with(json!({"milestone": m.index, "reclaimed_at_ms": m.reclaimed_at}))),
        MilestoneState::Resolved | MilestoneState::Voided => {
            Err(Refusal::new(Code::MilestoneState, "This milestone is closed.")
                .with(json!({"milestone": m.index, "state": m.state, "dispute": m.dispute})))
        }
    }
}

/// Each milestone's amount, description and due date; returns the total.
fn check_milestones(specs: &[MilestoneSpec], now: Timestamp) -> Result<Amount, Refusal> {
    let mut total = Amount::ZERO;
    for (index, spec) in specs.iter().enumerate() {
        if spec.amount.0 == 0 || spec.amount.0 > bazaar_types::limits::AMOUNT_MINOR_MAX {
            return Err(Refusal::new(Code::MilestonesInvalid, "Each milestone's amount is at least 1 minor unit.")
                .with(json!({"milestone": index})));
        }
        if spec.description.is_empty() || spec.description.len() > MILESTONE_DESCRIPTION_LEN_MAX {
            return Err(Refusal::new(Code::MilestonesInvalid, "Each milestone needs a description of 1 to 500 bytes.")
                .with(json!({"milestone": index})));
        }
        if spec.due_at <= now {
            return Err(Refusal::new(Code::MilestonesInvalid, "Each milestone's due date must be in the future.")
                .with(json!({"milestone": index, "due_at_ms": spec.due_at})));
        }
        total = total.checked_add(spec.amount).unwrap_or(Amount(u64::MAX));
    }
    if total.0 > bazaar_types::limits::AMOUNT_MINOR_MAX {
        return refuse(Code::AmountInvalid, "The contract total is above the largest amount one request may move.");
    }
    Ok(total)
}

/// The terms' hash and the review window the buyer asks for.
fn check_terms(terms: &str, review_window_s: u64) -> Result<(), Refusal> {
    if !is_sha256_hex(terms) {
        return refuse(Code::InvalidRequest, "`terms_sha256` is the SHA-256 of the terms, as 64 lowercase hex chars.");
    }
    if !(REVIEW_WINDOW_S_MIN..=REVIEW_WINDOW_S_MAX).contains(&review_window_s) {
        return Err(Refusal::new(Code::InvalidRequest, "The review window is outside the registry's bounds.").with(
            json!({"review_window_s": review_window_s, "min": REVIEW_WINDOW_S_MIN, "max": REVIEW_WINDOW_S_MAX}),
        ));
    }
    Ok(())
}

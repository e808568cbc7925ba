//! Escrowed contracts: milestones funded up front as holds, delivered by the
//! seller, released once (by the buyer or when the review window passes), or
//! reclaimed by the buyer when never delivered well past the due date.
//! Uses identity and pay; disputes and the market's escrowed orders build on it.
//!
//! Invariant: a milestone's hold resolves exactly once, in exactly one of
//! three ways —
//! - **released** to the seller (less the fee): only once delivered, by the
//!   buyer's word or by the sweeper when the review window passes;
//! - **refunded** (in part or whole) by a dispute's executed ruling, the only
//!   thing that resolves a disputed milestone;
//! - **reclaimed** by the buyer (or its owner) only when it is not delivered
//!   ∧ `now ≥ due_at + MILESTONE_RECLAIM_GRACE_S` ∧ it is not disputed (and the
//!   contract is accepted: before that, cancelling gives every hold back).
//!
//! A delivered milestone is never reclaimed, and a reclaimed one is never
//! delivered, released or disputed: each act moves the milestone out of the one
//! state the others need (`pending` for deliver and reclaim, `delivered` for
//! release and auto-release), and the commands of a batch run one after
//! another over the same rows, so a reclaim and a delivery (or a reclaim and
//! the sweeper's auto-release) racing in one batch resolve to exactly one —
//! whichever runs first; the other is refused and changes nothing.

mod contract;
pub mod events;
pub mod receipts;
pub use receipts::Receipt;

pub use contract::*;

use crate::kernel::batch::Batch;
use crate::kernel::keys::Keys;
use crate::kernel::model::DocKind;
use crate::kernel::refusal::Refusal;
use crate::kernel::request::Caller;
use bazaar_types::limits::CONTRACT_MILESTONES_MAX;
use bazaar_types::{AccountId, ContractId, MemberId};

crate::event_kinds! {
    /// What escrow writes on the event ledger.
    EscrowEvent {
        ContractCreated => "contract.created",
        ContractAccepted => "contract.accepted",
        ContractDeclined => "contract.declined",
        ContractCancelled => "contract.cancelled",
        MilestoneDelivered => "milestone.delivered",
        MilestoneReleased => "milestone.released",
        MilestoneReclaimed => "milestone.reclaimed",
    }
}

#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
pub enum Op {
    /// The buyer (the actor) opens an escrowed contract. Its id is derived from
    /// the parties and the command's idempotency key, which is required.
    CreateContract {
        seller: MemberId,
        arbiter: MemberId,
        milestones: Vec<MilestoneSpec>,
        terms_hash: String,
        review_window_s: u64,
    },
    /// Anything done to an existing contract. `buyer`, `seller` and
    /// `milestones` are read from the stored contract by the edge so the rows
    /// can be loaded; the core checks they still match.
    ContractAct { contract: ContractId, buyer: MemberId, seller: MemberId, milestones: u32, act: ContractAct },
}

impl Op {
    /// A stable name, used in idempotency scopes and metrics.
    /// Whether the command moves money: funding a contract and every act on it
    /// (accepting commits funds, delivering starts the clock on a release).
    pub fn moves_money(&self) -> bool {
        match self {
            Op::CreateContract { .. } | Op::ContractAct { .. } => true,
        }
    }

    pub fn name(&self) -> &'static str {
        match self {
            Op::CreateContract { .. } => "create_contract",
            Op::ContractAct { act, .. } => act.name(),
        }
    }

    /// The rows this command needs.
    pub fn keys(&self, keys: &mut Keys, caller: &Caller<'_>) {
        match self {
            Op::CreateContract { seller, arbiter, milestones, .. } => {
                let buyer = &caller.actor.id;
                keys.members.insert(seller.clone());
                keys.members.insert(arbiter.clone());
                keys.doc(crate::kernel::model::DocKind::Terms, seller.to_string());
                keys.accounts.insert(AccountId::of_member(buyer));
                keys.budgets.insert(buyer.clone());
                if let Some(idem) = caller.idem {
                    let id = contract_id_for(buyer, seller, arbiter, &idem.key);
                    for index in 0..milestones.len().min(CONTRACT_MILESTONES_MAX) {
                        keys.holds.insert(milestone_hold(&id, index as u32));
                    }
                    keys.doc(DocKind::Contract, id);
                }
            }
            Op::ContractAct { contract, buyer, seller, milestones, .. } => {
                contract_rows(keys, contract, buyer, seller, *milestones)
            }
        }
    }

    pub(crate) fn apply(&self, batch: &mut Batch<'_>, caller: &Caller<'_>) -> Result<receipts::Receipt, Refusal> {
        match self {
            Op::CreateContract { seller, arbiter, milestones, terms_hash, review_window_s } => batch
                .create_contract(caller, seller, arbiter, milestones, terms_hash, *review_window_s)
                .map(receipts::Receipt::Contract),
            Op::ContractAct { contract, buyer, seller, act, .. } => {
                batch.contract_act(caller, contract, buyer, seller, act)
            }
        }
    }
}

/// The rows of a stored contract: its document, parties, accounts and milestone holds.
fn contract_rows(keys: &mut Keys, contract: &str, buyer: &MemberId, seller: &MemberId, milestones: u32) {
    keys.doc(DocKind::Contract, contract);
    keys.members.insert(buyer.clone());
    keys.members.insert(seller.clone());
    keys.accounts.insert(AccountId::of_member(buyer));
    keys.accounts.insert(AccountId::of_member(seller));
    keys.accounts.insert(AccountId::fees());
    keys.budgets.insert(buyer.clone());
    let count = (milestones as usize).min(CONTRACT_MILESTONES_MAX) as u32;
    for index in 0..count {
        keys.holds.insert(milestone_hold(contract, index));
    }
}

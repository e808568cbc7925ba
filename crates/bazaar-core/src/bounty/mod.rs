//! Bounties: the reward a job on the labor market carries. Funded when the
//! job is posted — a hold on the posting agent's own budget, with no expiry —
//! and paid to the worker's reward destination only on an **accepted**
//! outcome signed by the job's validator. Uses identity and pay; nothing else.
//!
//! Invariants, per bounty, after every command:
//! - it resolves once: `funded → released` (to one worker, once) or
//!   `funded → withdrawn` (back to the poster, only after the claim window);
//! - a rejected or unassessed outcome moves nothing and changes nothing, so
//!   an unassessed job re-assessed as accepted is paid then;
//! - `amount == net + fee` when released, `amount == refunded` when withdrawn;
//! - the payee is an account the worker's owner holds (the owner or one of
//!   its agents), never anyone the presenter names;
//! - until released, the reward is a hold on the poster: nobody can spend a
//!   future reward today.
//!
//! The edge checks the signatures (the job, the validator's verdict, the
//! worker's enrollment and review) and hands the core the facts they prove;
//! the core checks those facts against the stored bounty.

pub mod events;
mod flow;
pub mod receipts;
pub use receipts::Receipt;

pub use flow::*;

use crate::kernel::batch::Batch;
use crate::kernel::keys::Keys;
use crate::kernel::model::DocKind;
use crate::kernel::refusal::Refusal;
use crate::kernel::request::Caller;
use bazaar_types::{AccountId, Amount, MemberId};

crate::event_kinds! {
    /// What bounties write on the event ledger.
    BountyEvent {
        BountyFunded => "bounty.funded",
        BountyReleased => "bounty.released",
        BountyWithdrawn => "bounty.withdrawn",
    }
}

#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
pub enum Op {
    /// The posting agent (the actor) funds the reward for its job.
    Fund { job: String, validator: String, amount: Amount, claim_s: u64 },
    /// Anyone presents the validator's verdict on a worker's result (checked
    /// at the edge); an accepted one pays the worker's reward destination, once.
    Release { bounty: String, poster: MemberId, outcome: Outcome },
    /// The poster (or its owner) takes an unclaimed reward back after the claim window.
    Withdraw { bounty: String, poster: MemberId },
}

impl Op {
    /// Every bounty command moves money: funding holds it, release pays it, withdrawal returns it.
    pub fn moves_money(&self) -> bool {
        match self {
            Op::Fund { .. } | Op::Release { .. } | Op::Withdraw { .. } => true,
        }
    }

    pub fn name(&self) -> &'static str {
        match self {
            Op::Fund { .. } => "bounty_fund",
            Op::Release { .. } => "bounty_release",
            Op::Withdraw { .. } => "bounty_withdraw",
        }
    }

    pub fn keys(&self, keys: &mut Keys, caller: &Caller<'_>) {
        match self {
            Op::Fund { job, .. } => {
                let poster = &caller.actor.id;
                keys.accounts.insert(AccountId::of_member(poster));
                keys.budgets.insert(poster.clone());
                let id = bounty_id(job);
                keys.holds.insert(bounty_hold(&id));
                keys.doc(DocKind::Bounty, id);
            }
            Op::Release { bounty, poster, outcome } => {
                poster_rows(keys, bounty, poster);
                keys.members.insert(outcome.worker.clone());
                keys.members.insert(outcome.destination.clone());
                keys.accounts.insert(AccountId::of_member(&outcome.destination));
                keys.accounts.insert(AccountId::fees());
                keys.doc(DocKind::Reward, reward_id(bounty));
            }
            Op::Withdraw { bounty, poster } => poster_rows(keys, bounty, poster),
        }
    }

    pub(crate) fn apply(&self, batch: &mut Batch<'_>, caller: &Caller<'_>) -> Result<receipts::Receipt, Refusal> {
        match self {
            Op::Fund { job, validator, amount, claim_s } => {
                batch.fund_bounty(caller, job, validator, *amount, *claim_s).map(receipts::Receipt::Bounty)
            }
            Op::Release { bounty, poster, outcome } => {
                batch.release_bounty(caller, bounty, poster, outcome).map(receipts::Receipt::Reward)
            }
            Op::Withdraw { bounty, poster } => {
                batch.withdraw_bounty(caller, bounty, poster).map(receipts::Receipt::Bounty)
            }
        }
    }
}

fn poster_rows(keys: &mut Keys, bounty: &str, poster: &MemberId) {
    keys.doc(DocKind::Bounty, bounty);
    keys.members.insert(poster.clone());
    keys.accounts.insert(AccountId::of_member(poster));
    keys.budgets.insert(poster.clone());
    keys.holds.insert(bounty_hold(bounty));
}

//! Disputes and stake: any settled paid call or milestone can be disputed
//! through four phases with deadlines; filing freezes the claim; execution
//! runs once. Merchants lock stake a ruling can reach. Uses identity, pay and
//! escrow.

mod acts;
mod desk;
pub mod events;
mod execute;
mod phases;
pub mod receipts;
mod stake;

pub use phases::*;

use crate::escrow::milestone_hold;
use crate::kernel::batch::Batch;
use crate::kernel::keys::Keys;
use crate::kernel::model::{DocKind, DESK_HANDLE, DESK_ID};
use crate::kernel::refusal::Refusal;
use crate::kernel::request::Caller;
use bazaar_types::{AccountId, Amount, DisputeId, MemberId};
pub use receipts::Receipt;

crate::event_kinds! {
    /// What disputes and stake write on the event ledger.
    DisputeEvent {
        DeskCreated => "desk.created",
        DisputeFiled => "dispute.filed",
        DisputeEvidence => "dispute.evidence",
        DisputeRuled => "dispute.ruled",
        DisputeAppealed => "dispute.appealed",
        DisputeRulingOpened => "dispute.ruling_opened",
        DisputeArbiterReplaced => "dispute.arbiter_replaced",
        DisputeExecuted => "dispute.executed",
        StakeLocked => "stake.locked",
        StakeUnlockRequested => "stake.unlock_requested",
        StakeWithdrawn => "stake.withdrawn",
    }
}

#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
pub enum Op {
    /// The registry's dispute desk: an agent of the operator, the default arbiter.
    CreateDesk {
        credential_hash: String,
    },
    FileDispute {
        subject: Subject,
        /// The buyer of the subject, read by the edge; the core checks it.
        claimant: MemberId,
        respondent: MemberId,
        reason: ReasonCode,
        claimed: Amount,
        note: String,
    },
    DisputeAct {
        dispute: DisputeId,
        subject: Subject,
        claimant: MemberId,
        respondent: MemberId,
        act: DisputeAct,
    },
    StakeLock {
        amount: Amount,
    },
    /// Starts the cooldown on `amount` of the actor's stake.
    StakeUnlock {
        amount: Amount,
    },
    /// Moves unlocked stake back to the balance after the cooldown.
    StakeWithdraw,
}

impl Op {
    /// A stable name, used in idempotency scopes and metrics.
    /// Whether the command moves money: acts on a dispute (bonds, execution)
    /// and stake; filing freezes a claim but moves nothing, and a desk is set up once.
    pub fn moves_money(&self) -> bool {
        match self {
            Op::CreateDesk { .. } | Op::FileDispute { .. } => false,
            // Evidence is a signed hash and a link: it moves nothing. A ruling decides what execution moves, an
            // appeal posts a bond, execution and the sweeper's advance move the frozen funds.
            Op::DisputeAct { act: DisputeAct::Evidence { .. }, .. } => false,
            Op::DisputeAct { .. } | Op::StakeLock { .. } | Op::StakeUnlock { .. } | Op::StakeWithdraw => true,
        }
    }

    pub fn name(&self) -> &'static str {
        match self {
            Op::CreateDesk { .. } => "create_desk",
            Op::FileDispute { .. } => "file_dispute",
            Op::DisputeAct { act, .. } => act.name(),
            Op::StakeLock { .. } => "stake_lock",
            Op::StakeUnlock { .. } => "stake_unlock",
            Op::StakeWithdraw => "stake_withdraw",
        }
    }

    /// The rows this command needs.
    pub fn keys(&self, keys: &mut Keys, caller: &Caller<'_>) {
        match self {
            Op::CreateDesk { credential_hash } => {
                keys.members.insert(MemberId(DESK_ID.into()));
                keys.handles.insert(DESK_HANDLE.into());
                keys.credentials.insert(credential_hash.clone());
            }
            Op::FileDispute { subject, claimant, respondent, .. }
            | Op::DisputeAct { subject, claimant, respondent, .. } => dispute_rows(keys, subject, claimant, respondent),
            Op::StakeLock { .. } | Op::StakeUnlock { .. } | Op::StakeWithdraw => {
                let me = &caller.actor.id;
                keys.accounts.insert(AccountId::of_member(me));
                keys.accounts.insert(AccountId::stake_of(me));
                keys.budgets.insert(me.clone());
                keys.doc(DocKind::Stake, me.to_string());
            }
        }
    }

    pub(crate) fn apply(
        &self,
        batch: &mut Batch<'_>,
        caller: &Caller<'_>,
        windows: &Windows,
    ) -> Result<Receipt, Refusal> {
        match self {
            Op::CreateDesk { credential_hash } => batch.create_desk(caller, credential_hash).map(Receipt::Desk),
            Op::FileDispute { subject, claimant, respondent, reason, claimed, note } => {
                let claim = Claim { subject, claimant, respondent, reason: *reason, claimed: *claimed, note };
                batch.file_dispute(caller, &claim, windows).map(Receipt::from)
            }
            Op::DisputeAct { dispute, claimant, respondent, act, .. } => {
                batch.dispute_act(caller, dispute, (claimant, respondent), act, windows)
            }
            Op::StakeLock { amount } => batch.stake_lock(caller, *amount).map(Receipt::Locked),
            Op::StakeUnlock { amount } => batch.stake_unlock(caller, *amount, windows).map(Receipt::UnlockRequested),
            Op::StakeWithdraw => batch.stake_withdraw(caller).map(Receipt::Withdrawn),
        }
    }
}

/// A dispute's rows: its document, both parties' accounts and the
/// respondent's stake, the freeze holds, and the subject's own rows.
fn dispute_rows(keys: &mut Keys, subject: &Subject, claimant: &MemberId, respondent: &MemberId) {
    let id = dispute_id_for(subject);
    keys.doc(DocKind::Dispute, id.clone());
    keys.members.insert(claimant.clone());
    keys.members.insert(respondent.clone());
    keys.accounts.insert(AccountId::of_member(claimant));
    keys.accounts.insert(AccountId::of_member(respondent));
    keys.accounts.insert(AccountId::stake_of(respondent));
    keys.accounts.insert(AccountId::insurance());
    keys.accounts.insert(AccountId::fees());
    keys.budgets.insert(claimant.clone());
    // Either side may appeal, and its bond counts against its budget.
    keys.budgets.insert(respondent.clone());
    keys.doc(DocKind::Stake, respondent.to_string());
    for hold in dispute_holds(&id) {
        keys.holds.insert(hold);
    }
    match subject {
        Subject::Call { merchant, order_id } => {
            keys.settlements_by_order.insert((merchant.clone(), order_id.clone()));
        }
        Subject::Milestone { contract, index } => {
            keys.doc(DocKind::Contract, contract.clone());
            keys.holds.insert(milestone_hold(contract, *index));
        }
    }
}

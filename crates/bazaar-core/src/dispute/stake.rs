//! Merchant stake: locked from the balance, unlocked only after a cooldown and
//! never while a dispute is open, withdrawn back to the balance.

use super::events::{StakeLocked, StakeLockedBody, StakeUnlockRequested, StakeWithdrawn, StakeWithdrawnBody};
use super::phases::*;
use super::receipts::{Locked, UnlockRequested, Withdrawn};
use crate::kernel::batch::{refuse, Batch};
use crate::kernel::model::*;
use crate::kernel::refusal::{Code, Refusal};
use crate::kernel::request::Caller;
use bazaar_types::{AccountId, Amount, MemberId, TransferId};
use serde_json::json;

impl Batch<'_> {
    pub(crate) fn stake_lock(&mut self, command: &Caller<'_>, amount: Amount) -> Result<Locked, Refusal> {
        command.require_agent("Stake is locked by merchant agents")?;
        let me = command.actor.id.clone();
        let balance = AccountId::of_member(&me);
        let mut stake = self.stake_record(&me);
        self.commit_from_budget(&me, amount)?;
        self.ensure_account(AccountId::stake_of(&me));
        let tid = TransferId(format!("tr_{}_stake", self.snap.head.seq + 1));
        self.post_plain(command, tid.clone(), balance, AccountId::stake_of(&me), amount, TransferKind::Stake);
        stake.budgeted = stake.budgeted.checked_add(amount).expect("within the ledger");
        self.put_stake(&stake);
        let locked = StakeLocked { member: me.clone(), locked_minor: amount };
        let stake = self.stake_view(&me);
        self.emit(command, &StakeLockedBody { locked: locked.clone(), transfer: tid.clone(), stake: stake.clone() });
        Ok(Locked { locked, transfer: tid, stake })
    }

    pub(crate) fn stake_unlock(
        &mut self,
        command: &Caller<'_>,
        amount: Amount,
        windows: &Windows,
    ) -> Result<UnlockRequested, Refusal> {
        let me = command.actor.id.clone();
        let mut stake = self.stake_record(&me);
        if stake.open_disputes > 0 {
            return Err(Refusal::new(
                Code::StakeDisputeOpen,
                "Stake cannot be unlocked while a dispute is open against you.",
            )
            .with(json!({"open_disputes": stake.open_disputes})));
        }
        let available = self.available(&AccountId::stake_of(&me));
        if amount.0 == 0 || amount > available {
            return Err(Refusal::new(Code::InsufficientFunds, "Unlock between 1 and your available stake.")
                .with(json!({"available_minor": available, "requested_minor": amount})));
        }
        let available_at = self.now.plus_s(windows.stake_cooldown_s);
        stake.unlock = Some(Unlock { amount, requested_at: self.now, available_at });
        self.put_stake(&stake);
        self.emit(
            command,
            &StakeUnlockRequested { member: me.clone(), unlock_minor: amount, available_at_ms: available_at },
        );
        Ok(UnlockRequested { member: me, unlock_minor: amount, available_at_ms: available_at })
    }

    pub(crate) fn stake_withdraw(&mut self, command: &Caller<'_>) -> Result<Withdrawn, Refusal> {
        let me = command.actor.id.clone();
        let mut stake = self.stake_record(&me);
        let Some(unlock) = stake.unlock.clone() else {
            return refuse(
                Code::StakeNotUnlocked,
                "Ask to unlock stake first; it can be withdrawn after the cooldown.",
            );
        };
        if stake.open_disputes > 0 {
            return Err(Refusal::new(
                Code::StakeDisputeOpen,
                "Stake cannot be withdrawn while a dispute is open against you.",
            )
            .with(json!({"open_disputes": stake.open_disputes})));
        }
        if self.now < unlock.available_at {
            return Err(Refusal::new(Code::StakeCooldown, "The unlock cooldown has not passed yet.")
                .with(json!({"available_at_ms": unlock.available_at})));
        }
        let stake_account = AccountId::stake_of(&me);
        let amount = Amount(unlock.amount.0.min(self.available(&stake_account).0));
        let withdrawn = StakeWithdrawn { member: me.clone(), withdrawn_minor: amount };
        let mut transfer = None;
        if amount.0 > 0 {
            let tid = TransferId(format!("tr_{}_unstake", self.snap.head.seq + 1));
            self.post_plain(
                command,
                tid.clone(),
                stake_account,
                AccountId::of_member(&me),
                amount,
                TransferKind::Unstake,
            );
            transfer = Some(tid);
        }
        // Withdrawn stake comes back unspent, like a voided hold: to the budget's
        // total (at most what was counted). The lock's day is not kept, so
        // today's figure keeps it; with the default cooldown the lock was days ago anyway.
        let back = Amount(amount.0.min(stake.budgeted.0));
        if back.0 > 0 {
            self.give_back(&me, back, None);
            stake.budgeted = stake.budgeted.checked_sub(back).expect("within budgeted");
        }
        stake.unlock = None;
        self.put_stake(&stake);
        self.emit(command, &StakeWithdrawnBody { withdrawn: withdrawn.clone(), transfer: transfer.clone() });
        Ok(Withdrawn { withdrawn, transfer })
    }

    pub(crate) fn stake_view(&self, member: &MemberId) -> StakeView {
        stake_view(member, self.snap.accounts.get(&AccountId::stake_of(member)), &self.stake_record(member))
    }
}

//! Ledger primitives on a batch: accounts, holds that resolve once, transfers,
//! linked legs that commit together, and the spending ceilings (budgets) a
//! hold counts against. Money paths `assert!` their invariants: a failed
//! assert stops the writer rather than commit a wrong ledger.
//!
//! Budgets: everything an agent commits of its own money counts against its
//! ceilings through `check_ceilings`/`check_running_ceilings` and `spend` —
//! tokens, contracts, bounties, orders, and (through `commit_from_budget`)
//! appeal bonds and stake locks. What comes back unspent is given back by
//! `give_back`: a resolved hold's unposted part (voided, expired, refunded or
//! a returned bond) and withdrawn stake. Owners and the operator have no budget.

use crate::kernel::batch::Batch;
use crate::kernel::model::*;
use crate::kernel::refusal::{Code, Refusal};
use crate::kernel::request::Caller;
use bazaar_types::{AccountId, Amount, HoldId, MemberId, Timestamp, TransferId};
use serde::{Deserialize, Serialize};
use serde_json::json;

/// A payment out of a pending hold: `amount` to `payee` less the protocol fee
/// at `fee_bps`, as transfers `{ids}_{suffix}` (net, of `kind`) and `{ids}_fee`.
pub struct PayOut<'a> {
    pub payee: AccountId,
    pub amount: Amount,
    pub kind: TransferKind,
    pub ids: &'a str,
    pub suffix: &'a str,
    pub fee_bps: u32,
}

/// What a [`PayOut`] posted.
pub struct PaidOut {
    pub net: Amount,
    pub fee: Amount,
    pub link: String,
    pub transfers: Vec<TransferId>,
}

/// What [`Batch::post_linked`] posted: the part of a linked posting's event
/// body (and receipt) the ledger knows; the capability adds whom it was for.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Linked {
    pub transfers: Vec<TransferId>,
    pub link: String,
    /// The sum of the legs.
    pub amount_minor: Amount,
}

/// One leg of a hold being posted: credit, amount, kind, transfer id.
pub type HoldLeg = (AccountId, Amount, TransferKind, TransferId);
/// One leg of a plain linked transfer: debit, credit, amount, kind.
pub type Leg = (AccountId, AccountId, Amount, TransferKind);

impl Batch<'_> {
    pub fn check_available(&self, account: &AccountId, amount: Amount) -> Result<(), Refusal> {
        let available = self.snap.accounts.get(account).map(Account::available).unwrap_or(0);
        if available < amount.0 as i128 {
            return Err(Refusal::new(
                Code::InsufficientFunds,
                "The account does not hold enough available units; fund it first.",
            )
            .with(json!({"available_minor": available as i64, "needed_minor": amount})));
        }
        Ok(())
    }

    /// Creates an account that may not exist yet (stake, insurance on an older registry).
    pub fn ensure_account(&mut self, id: AccountId) {
        if !self.snap.accounts.contains_key(&id) {
            self.put_account(Account::new(id, false));
        }
    }

    /// The link id shared by every leg written for the next event.
    pub fn next_link(&self) -> String {
        format!("lnk_{}", self.snap.head.seq + 1)
    }

    pub fn post_transfer(&mut self, transfer: Transfer) {
        assert!(transfer.amount.0 > 0);
        assert!(transfer.debit != transfer.credit);
        let mut debit = self.snap.accounts.get(&transfer.debit).cloned().expect("debit account loaded");
        let mut credit = self.snap.accounts.get(&transfer.credit).cloned().expect("credit account loaded");
        debit.debits_posted = debit.debits_posted.checked_add(transfer.amount.0).expect("no overflow");
        credit.credits_posted = credit.credits_posted.checked_add(transfer.amount.0).expect("no overflow");
        assert!(debit.allow_negative || debit.available() >= 0, "overdraft on {}", debit.id);
        self.put_account(debit);
        self.put_account(credit);
        self.changes.insert_transfers.push(transfer);
    }

    /// A transfer authored by the caller at the batch's time.
    #[allow(clippy::too_many_arguments)] // reason: a transfer row has this many parts; a struct would only rename them.
    pub fn transfer_by(
        &self,
        caller: &Caller<'_>,
        id: TransferId,
        debit: AccountId,
        credit: AccountId,
        amount: Amount,
        kind: TransferKind,
        hold: Option<HoldId>,
        link: &str,
    ) -> Transfer {
        Transfer {
            id,
            debit,
            credit,
            amount,
            kind,
            hold,
            link: link.to_string(),
            authored_by: caller.actor.id.clone(),
            on_behalf_of: caller.actor.principal().clone(),
            at: self.now,
        }
    }

    /// Posts all legs or none, under one link; the capability writes the
    /// event. The caller checked every debit; the asserts here catch a bug,
    /// not a user error.
    pub fn post_linked(&mut self, caller: &Caller<'_>, legs: &[Leg]) -> Linked {
        let seq = self.snap.head.seq + 1;
        let link = self.next_link();
        let mut ids = Vec::new();
        for (index, (debit, credit, amount, transfer_kind)) in legs.iter().enumerate() {
            let id = TransferId(format!("tr_{seq}_{index}"));
            let transfer = self.transfer_by(
                caller,
                id.clone(),
                debit.clone(),
                credit.clone(),
                *amount,
                *transfer_kind,
                None,
                &link,
            );
            self.post_transfer(transfer);
            ids.push(id);
        }
        let total: u64 = legs.iter().map(|l| l.2 .0).sum();
        Linked { transfers: ids, link, amount_minor: Amount(total) }
    }

    /// Opens a pending hold on `account`; the caller checked it is available.
    pub fn open_hold(&mut self, id: HoldId, account: AccountId, amount: Amount, expires_at: Timestamp) {
        let mut debited = self.snap.accounts.get(&account).cloned().expect("held account loaded");
        debited.debits_pending = debited.debits_pending.checked_add(amount.0).expect("no overflow");
        self.put_account(debited);
        let hold = Hold {
            id,
            account,
            amount,
            created_at: self.now,
            expires_at,
            state: HoldState::Pending,
            posted_amount: Amount::ZERO,
            resolved_at: None,
        };
        assert!(!self.snap.holds.contains_key(&hold.id), "hold ids are never reused");
        self.snap.holds.insert(hold.id.clone(), hold.clone());
        self.changes.insert_holds.push(hold);
    }

    /// Takes a pending hold's whole amount out of its account's pending debits,
    /// before its legs post against the posted balance.
    pub fn unpend(&mut self, hold: &Hold) {
        let mut account = self.snap.accounts[&hold.account].clone();
        account.debits_pending = account.debits_pending.checked_sub(hold.amount.0).expect("pending covers hold");
        self.put_account(account);
    }

    /// Resolves a pending hold: posts `legs` from its account, all in one link,
    /// and returns the rest to the account. No legs (or all zero) voids it.
    /// `budget_of` gets the unposted part back.
    pub fn post_hold(
        &mut self,
        caller: &Caller<'_>,
        hold: Hold,
        legs: &[HoldLeg],
        budget_of: Option<&MemberId>,
    ) -> (String, Vec<TransferId>) {
        let posted: u64 = legs.iter().map(|l| l.1 .0).sum();
        assert!(posted <= hold.amount.0, "a hold posts at most its amount");
        self.unpend(&hold);
        let link = self.next_link();
        let mut ids = Vec::new();
        for (credit, amount, kind, id) in legs {
            if amount.0 == 0 {
                continue;
            }
            let transfer = self.transfer_by(
                caller,
                id.clone(),
                hold.account.clone(),
                credit.clone(),
                *amount,
                *kind,
                Some(hold.id.clone()),
                &link,
            );
            self.post_transfer(transfer);
            ids.push(id.clone());
        }
        let end = if posted > 0 { HoldState::Posted } else { HoldState::Voided };
        self.resolve_hold(hold, end, Amount(posted), budget_of);
        (link, ids)
    }

    /// Posts a payment out of a pending hold, the fee to the fee account, in one
    /// link; the unposted rest of the hold goes back to its account (and to
    /// `budget_of`'s budget). Every payout with a protocol fee goes through here.
    pub fn pay_out(
        &mut self,
        caller: &Caller<'_>,
        hold: Hold,
        out: PayOut<'_>,
        budget_of: Option<&MemberId>,
    ) -> PaidOut {
        let fee = out.amount.fee_bps(out.fee_bps);
        let net = out.amount.checked_sub(fee).expect("fee never exceeds amount");
        let legs = [
            (out.payee, net, out.kind, TransferId(format!("{}_{}", out.ids, out.suffix))),
            (AccountId::fees(), fee, TransferKind::Fee, TransferId(format!("{}_fee", out.ids))),
        ];
        let (link, transfers) = self.post_hold(caller, hold, &legs, budget_of);
        PaidOut { net, fee, link, transfers }
    }

    /// One transfer with no hold; the caller checked the debit is available.
    pub fn post_plain(
        &mut self,
        caller: &Caller<'_>,
        id: TransferId,
        debit: AccountId,
        credit: AccountId,
        amount: Amount,
        kind: TransferKind,
    ) {
        let link = self.next_link();
        let transfer = self.transfer_by(caller, id, debit, credit, amount, kind, None, &link);
        self.post_transfer(transfer);
    }

    /// Marks a pending hold resolved and gives the unposted part back to the budget.
    pub fn resolve_hold(&mut self, hold: Hold, end: HoldState, posted: Amount, budget_of: Option<&MemberId>) {
        assert!(hold.state == HoldState::Pending);
        assert!(end != HoldState::Pending);
        assert!(posted <= hold.amount);
        let released = hold.amount.checked_sub(posted).expect("posted within hold");
        if let Some(member) = budget_of {
            self.give_back(member, released, Some(hold.created_at.utc_day()));
        }
        let resolved = Hold { state: end, posted_amount: posted, resolved_at: Some(self.now), ..hold };
        self.snap.holds.insert(resolved.id.clone(), resolved.clone());
        self.changes.resolve_holds.push(resolved);
    }
}

impl Batch<'_> {
    /// An appeal bond or a stake lock of the agent's own: refused past its
    /// per-day or total ceiling (not the per-call one — neither is a call, and
    /// a bond on a large claim would otherwise need the per-call ceiling of a
    /// large paid call), then past its available funds; counted as spent once
    /// both pass, exactly as a token's hold is.
    pub fn commit_from_budget(&mut self, agent: &MemberId, amount: Amount) -> Result<(), Refusal> {
        let budget = self.snap.budgets.get(agent).cloned().unwrap_or_else(|| Budget::zero(agent.clone()));
        check_running_ceilings(&budget, amount, self.now)?;
        self.check_available(&AccountId::of_member(agent), amount)?;
        self.put_budget(spend(budget, amount, self.now));
        Ok(())
    }

    /// Gives `amount` that came back unspent to `member`'s budget: always to
    /// the total, and to today's figure too when it was spent on `spent_day`
    /// and that is still the budget's current day (`None`: the day is not
    /// known, so today's figure keeps it — the safe side). A member without a
    /// budget row (an owner) has nothing to give back to.
    pub fn give_back(&mut self, member: &MemberId, amount: Amount, spent_day: Option<i64>) {
        if let Some(budget) = self.snap.budgets.get(member).cloned() {
            self.put_budget(unspend(budget, amount, spent_day));
        }
    }
}

/// Refuses a hold of `amount` that would cross a ceiling, naming the ceiling.
pub fn check_ceilings(budget: &Budget, amount: Amount, now: Timestamp) -> Result<(), Refusal> {
    if amount > budget.per_call_max {
        return Err(ceiling_refusal(Code::BudgetPerCallExceeded, "per-call", budget.per_call_max, amount, amount));
    }
    check_running_ceilings(budget, amount, now)
}

/// The per-day and total ceilings alone: what `amount` would bring today's
/// and the lifetime spending to.
pub fn check_running_ceilings(budget: &Budget, amount: Amount, now: Timestamp) -> Result<(), Refusal> {
    let today = budget.spent_on(now.utc_day());
    let checks = [
        (
            today.checked_add(amount).unwrap_or(Amount(u64::MAX)),
            budget.per_day_max,
            Code::BudgetPerDayExceeded,
            "per-day",
        ),
        (
            budget.spent_total.checked_add(amount).unwrap_or(Amount(u64::MAX)),
            budget.total_max,
            Code::BudgetTotalExceeded,
            "total",
        ),
    ];
    for (would_be, ceiling, code, name) in checks {
        if would_be > ceiling {
            return Err(ceiling_refusal(code, name, ceiling, would_be, amount));
        }
    }
    Ok(())
}

fn ceiling_refusal(code: Code, name: &str, ceiling: Amount, would_be: Amount, amount: Amount) -> Refusal {
    Refusal::new(code, format!("This would exceed the agent's {name} ceiling; its owner can raise the ceiling."))
        .with(json!({"ceiling": name, "ceiling_minor": ceiling, "would_be_minor": would_be, "requested_minor": amount}))
}

/// Counts `amount` against the budget; `check_ceilings` passed first.
pub fn spend(mut budget: Budget, amount: Amount, now: Timestamp) -> Budget {
    let day = now.utc_day();
    budget.spent_day = budget.spent_on(day).checked_add(amount).expect("checked against ceiling");
    budget.day = day;
    budget.spent_total = budget.spent_total.checked_add(amount).expect("checked against ceiling");
    budget
}

fn unspend(mut budget: Budget, released: Amount, spent_day: Option<i64>) -> Budget {
    budget.spent_total = budget.spent_total.checked_sub(released).expect("released was spent");
    if spent_day == Some(budget.day) {
        budget.spent_day = budget.spent_day.checked_sub(released).expect("released was spent today");
    }
    budget
}

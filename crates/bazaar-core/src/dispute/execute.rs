//! Executing a final ruling, in one batch that runs once: the escrowed
//! milestone split between refund and release, the frozen balance then stake
//! refunded, the rest of the slash to the claimant's shortfall then to
//! insurance, and the appeal bond returned or forfeited. Transfer ids derive
//! from the dispute id, so even a second run the core let through would
//! collide in the database.

use super::events::{BondOutcome, DisputeExecuted, DisputeExecutedBody, Execution, Winner};
use super::phases::*;
use super::receipts::Executed;
use crate::escrow::{milestone_hold, MilestoneState};
use crate::kernel::batch::Batch;
use crate::kernel::ledger::{PaidOut, PayOut};
use crate::kernel::model::*;
use crate::kernel::request::Caller;
use bazaar_types::{AccountId, Amount, TransferId};

/// What an execution moved so far.
#[derive(Default)]
struct Moved {
    transfers: Vec<TransferId>,
    refunded: Amount,
    released: Amount,
    /// Refund the frozen units could not cover.
    shortfall: Amount,
    slash_to_claimant: Amount,
    slash_to_insurance: Amount,
}

impl Batch<'_> {
    /// The final ruling, executed in one batch (see the module docs).
    pub(crate) fn execute(&mut self, command: &Caller<'_>, mut dispute: Dispute) -> Executed {
        assert!(dispute.phase != Phase::Executed);
        let ruling = dispute.rulings.last().expect("executing a ruling").clone();
        let mut moved = Moved::default();
        if dispute.frozen.escrow.0 > 0 {
            self.split_escrowed_milestone(command, &dispute, &ruling, &mut moved);
        }
        self.refund_from_freeze(command, &dispute, &ruling, &mut moved);
        self.slash_the_rest(command, &dispute, &ruling, &mut moved);
        let bond = self.settle_bond(command, &dispute, &ruling, &mut moved);
        let mut stake = self.stake_record(&dispute.respondent);
        stake.open_disputes = stake.open_disputes.checked_sub(1).expect("an open dispute was counted");
        self.put_stake(&stake);
        let winner = match ruling.decision {
            Decision::RefundFull => Winner::Claimant,
            Decision::RefundPartial => Winner::Split,
            Decision::Reject => Winner::Respondent,
        };
        let executed = DisputeExecuted {
            dispute: dispute.id.clone(),
            subject: dispute.subject.clone(),
            claimant: dispute.claimant.clone(),
            respondent: dispute.respondent.clone(),
            winner,
            refunded_minor: moved.refunded,
            released_minor: moved.released,
            slashed_minor: moved.slash_to_claimant.checked_add(moved.slash_to_insurance).expect("bounded"),
        };
        let execution = Execution {
            decision: ruling.decision,
            by_default: ruling.arbiter.is_none(),
            rounds: dispute.round,
            shortfall_minor: moved.shortfall,
            slash_to_claimant_minor: moved.slash_to_claimant,
            slash_to_insurance_minor: moved.slash_to_insurance,
            bond,
            transfers: moved.transfers,
            executed_at_ms: self.now,
        };
        let outcome = Executed { executed: executed.clone(), execution: execution.clone() };
        dispute.outcome = Some(serde_json::to_value(&outcome).expect("outcomes serialize"));
        dispute.enter(Phase::Executed, self.now, None, format!("executed: {}", winner.as_str()));
        self.update_dispute(&dispute);
        // The outcome event reputation is computed from.
        self.emit(command, &DisputeExecutedBody { executed, execution });
        outcome
    }

    /// A milestone still in escrow: the refund goes back to the buyer's budget, the rest is released.
    fn split_escrowed_milestone(
        &mut self,
        command: &Caller<'_>,
        dispute: &Dispute,
        ruling: &Ruling,
        moved: &mut Moved,
    ) {
        let id = &dispute.id;
        let Subject::Milestone { contract, index } = &dispute.subject else { unreachable!("escrow is a milestone") };
        let mut c = self.contract(contract).expect("the disputed contract is loaded");
        let m = c.milestones[*index as usize].clone();
        assert_eq!(m.state, MilestoneState::Disputed);
        let hold = self.snap.holds.get(&milestone_hold(contract, *index)).cloned().expect("milestone hold loaded");
        let refund = Amount(ruling.refund.0.min(m.amount.0));
        let pay = m.amount.checked_sub(refund).expect("refund within milestone");
        let ids = format!("tr_{id}");
        let out = PayOut {
            payee: AccountId::of_member(&c.seller),
            amount: pay,
            kind: TransferKind::Release,
            ids: &ids,
            suffix: "rel",
            fee_bps: self.config.fee_bps,
        };
        let PaidOut { net, fee, transfers, .. } = self.pay_out(command, hold, out, Some(&c.buyer));
        moved.transfers.extend(transfers);
        c.released_net = c.released_net.checked_add(net).expect("within total");
        c.fees = c.fees.checked_add(fee).expect("within total");
        c.refunded = c.refunded.checked_add(refund).expect("within total");
        c.milestones[*index as usize].state = MilestoneState::Resolved;
        self.maybe_complete(&mut c);
        self.update(&c);
        moved.refunded = refund;
        moved.released = pay;
    }

    /// Frozen balance first, then frozen stake. The stake-funded part of the
    /// refund is the first part of the slash (restitution to the claimant).
    fn refund_from_freeze(&mut self, command: &Caller<'_>, dispute: &Dispute, ruling: &Ruling, moved: &mut Moved) {
        let id = &dispute.id;
        let [balance_hold, stake_hold, _] = dispute_holds(id);
        let claimant_account = AccountId::of_member(&dispute.claimant);
        let mut to_refund = ruling.refund.checked_sub(moved.refunded).unwrap_or(Amount::ZERO);
        for (hold_id, frozen, suffix) in [
            (&balance_hold, dispute.frozen.balance, "refund_bal"),
            (&stake_hold, dispute.frozen.stake, "slash_claimant"),
        ] {
            if frozen.0 == 0 {
                continue;
            }
            let hold = self.snap.holds.get(hold_id).cloned().expect("freeze holds are loaded");
            let part = Amount(to_refund.0.min(frozen.0));
            let kind = if hold_id == &stake_hold { TransferKind::Slash } else { TransferKind::Refund };
            let legs = [(claimant_account.clone(), part, kind, TransferId(format!("tr_{id}_{suffix}")))];
            let (_, ids) = self.post_hold(command, hold, &legs, None);
            moved.transfers.extend(ids);
            to_refund = to_refund.checked_sub(part).expect("part within");
            moved.refunded = moved.refunded.checked_add(part).expect("bounded");
            if hold_id == &stake_hold {
                moved.slash_to_claimant = part;
            }
        }
        moved.shortfall = to_refund;
    }

    /// The rest of the slash the ruling names comes from the stake left: first
    /// to the claimant for any refund still short, then to insurance.
    fn slash_the_rest(&mut self, command: &Caller<'_>, dispute: &Dispute, ruling: &Ruling, moved: &mut Moved) {
        let stake_account = AccountId::stake_of(&dispute.respondent);
        let beyond = ruling.slash.checked_sub(moved.slash_to_claimant).unwrap_or(Amount::ZERO);
        let extra = Amount(beyond.0.min(self.available(&stake_account).0));
        let made_good = Amount(extra.0.min(moved.shortfall.0));
        let to_insurance = extra.checked_sub(made_good).expect("within extra");
        moved.slash_to_claimant = moved.slash_to_claimant.checked_add(made_good).expect("bounded");
        moved.slash_to_insurance = to_insurance;
        for (credit, amount, suffix) in [
            (AccountId::of_member(&dispute.claimant), made_good, "slash_shortfall"),
            (AccountId::insurance(), to_insurance, "slash_insurance"),
        ] {
            if amount.0 > 0 {
                self.ensure_account(credit.clone());
                let tid = TransferId(format!("tr_{}_{suffix}", dispute.id));
                self.post_plain(command, tid.clone(), stake_account.clone(), credit, amount, TransferKind::Slash);
                moved.transfers.push(tid);
            }
        }
    }

    /// The appeal bond: back to an appellant the second ruling favoured, else to the other side.
    fn settle_bond(
        &mut self,
        command: &Caller<'_>,
        dispute: &Dispute,
        ruling: &Ruling,
        moved: &mut Moved,
    ) -> Option<BondOutcome> {
        let appeal = dispute.appeal.as_ref()?;
        let first = &dispute.rulings[dispute.rulings.len() - 2];
        let won = match appeal.side {
            Side::Claimant => ruling.refund > first.refund,
            Side::Respondent => ruling.refund < first.refund || ruling.slash < first.slash,
        };
        let [_, _, bond_hold] = dispute_holds(&dispute.id);
        let hold = self.snap.holds.get(&bond_hold).cloned().expect("bond hold loaded");
        let other = if appeal.side == Side::Claimant { &dispute.respondent } else { &dispute.claimant };
        let legs = if won {
            vec![]
        } else {
            let id = TransferId(format!("tr_{}_bond", dispute.id));
            vec![(AccountId::of_member(other), appeal.bond, TransferKind::Bond, id)]
        };
        // A returned bond goes back to the budget it counted against; a forfeited one stays spent.
        let budget_of = appeal.budgeted.then_some(&appeal.by);
        let (_, ids) = self.post_hold(command, hold, &legs, budget_of);
        moved.transfers.extend(ids);
        Some(BondOutcome {
            by: appeal.by.clone(),
            bond_minor: appeal.bond,
            returned: won,
            forfeited_to: if won { None } else { Some(other.clone()) },
        })
    }
}

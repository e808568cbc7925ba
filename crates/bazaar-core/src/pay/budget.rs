//! Budgets, minting and funding: the ceilings an owner sets on its agent, the
//! operator's issuance into an owner's account, and an owner funding its agent.

use super::events::{self, BudgetFacts};
use super::receipts::{BudgetSet, Funded, Minted};
use crate::kernel::batch::{refuse, Batch};
use crate::kernel::model::*;
use crate::kernel::refusal::{Code, Refusal};
use crate::kernel::request::Caller;
use bazaar_types::{AccountId, Amount, MemberId, Timestamp};

impl Batch<'_> {
    pub(crate) fn set_budget(
        &mut self,
        command: &Caller<'_>,
        agent: &MemberId,
        ceilings: [Amount; 3],
    ) -> Result<BudgetSet, Refusal> {
        self.owned_agent(command, agent)?;
        let [per_call_max, per_day_max, total_max] = ceilings;
        let current = self.snap.budgets.get(agent).cloned().unwrap_or_else(|| Budget::zero(agent.clone()));
        let budget = Budget { per_call_max, per_day_max, total_max, ..current };
        self.put_budget(budget.clone());
        let facts = BudgetFacts::of(&budget, self.now);
        self.emit(command, &events::BudgetSet { budget: facts.clone() });
        Ok(BudgetSet { budget: facts })
    }

    pub(crate) fn mint(&mut self, command: &Caller<'_>, owner: &MemberId, amount: Amount) -> Result<Minted, Refusal> {
        if command.actor.kind != MemberKind::Operator {
            return refuse(Code::NotPermitted, "Only the registry operator mints units.");
        }
        let target = self.member(owner)?;
        if target.kind != MemberKind::Owner {
            return refuse(
                Code::NotPermitted,
                "Units are minted into an owner's account only; owners fund their agents.",
            );
        }
        let legs = [(AccountId::issuance(), AccountId::of_member(owner), amount, TransferKind::Issuance)];
        let legs = self.post_linked(command, &legs);
        self.emit(command, &events::TransferMinted { legs: legs.clone(), owner: owner.clone() });
        Ok(Minted { legs, owner: owner.clone() })
    }

    pub(crate) fn fund(&mut self, command: &Caller<'_>, agent: &MemberId, amount: Amount) -> Result<Funded, Refusal> {
        self.owned_agent(command, agent)?;
        let source = AccountId::of_member(&command.actor.id);
        self.check_available(&source, amount)?;
        let legs = [(source, AccountId::of_member(agent), amount, TransferKind::Funding)];
        let legs = self.post_linked(command, &legs);
        self.emit(command, &events::TransferFunded { legs: legs.clone(), agent: agent.clone() });
        Ok(Funded { legs, agent: agent.clone() })
    }
}

/// A budget as the API shows it at `now`.
pub fn budget_view(budget: &Budget, now: Timestamp) -> BudgetFacts {
    BudgetFacts::of(budget, now)
}

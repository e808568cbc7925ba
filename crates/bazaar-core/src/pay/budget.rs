//! Budgets, minting and funding: the ceilings an owner sets on its agent, the
//! operator's issuance into an owner's account, and an owner funding its agent.

use super::PayEvent;
use crate::kernel::batch::{refuse, Batch, Step};
use crate::kernel::model::*;
use crate::kernel::refusal::Code;
use crate::kernel::request::Caller;
use bazaar_types::{AccountId, Amount, MemberId, Timestamp};
use serde_json::json;

impl Batch<'_> {
    pub(crate) fn set_budget(&mut self, command: &Caller<'_>, agent: &MemberId, ceilings: [Amount; 3]) -> Step {
        self.owned_agent(command, agent)?;
        let [per_call_max, per_day_max, total_max] = ceilings;
        let current = self.snap.budgets.get(agent).cloned().unwrap_or_else(|| Budget::zero(agent.clone()));
        let budget = Budget { per_call_max, per_day_max, total_max, ..current };
        self.put_budget(budget.clone());
        let body = budget_view(&budget, self.now);
        self.event(command, PayEvent::BudgetSet, body.clone());
        Ok(body)
    }

    pub(crate) fn mint(&mut self, command: &Caller<'_>, owner: &MemberId, amount: Amount) -> Step {
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
        self.post_linked(command, PayEvent::TransferMinted, &legs, json!({"owner": owner}))
    }

    pub(crate) fn fund(&mut self, command: &Caller<'_>, agent: &MemberId, amount: Amount) -> Step {
        self.owned_agent(command, agent)?;
        let source = AccountId::of_member(&command.actor.id);
        self.check_available(&source, amount)?;
        let legs = [(source, AccountId::of_member(agent), amount, TransferKind::Funding)];
        self.post_linked(command, PayEvent::TransferFunded, &legs, json!({"agent": agent}))
    }
}

pub fn budget_view(budget: &Budget, now: Timestamp) -> serde_json::Value {
    json!({"agent": budget.agent, "per_call_max_minor": budget.per_call_max, "per_day_max_minor": budget.per_day_max,
        "total_max_minor": budget.total_max, "spent_total_minor": budget.spent_total,
        "spent_today_minor": budget.spent_on(now.utc_day())})
}

//! Hiring: an owner's exact authorization for one of its agents to pay a
//! specialist for one task, and the payment against it — from the hiring
//! agent's own account and budget, never the owner's. Uses identity and pay.
//!
//! Invariants, per authorization, after every command:
//! - a payment matches its authorization exactly (task, specialist, pay-to,
//!   amount) or nothing moves;
//! - an authorization pays at most once (`paid` is final, its receipt kept
//!   and attached to any second ask), so a payment whose answer was lost can
//!   never be paid twice, whatever the hiring agent's side does;
//! - gross = net + protocol fee, recorded apart; an amount of zero is
//!   **sponsorship**, recorded as such, and no payment can be made against it;
//! - the owner authorizes and revokes; only the hiring agent pays.

pub mod events;
pub mod receipts;
mod service;

pub use service::*;

use crate::kernel::batch::Batch;
use crate::kernel::keys::Keys;
use crate::kernel::model::DocKind;
use crate::kernel::refusal::Refusal;
use crate::kernel::request::Caller;
use bazaar_types::{AccountId, MemberId};

crate::event_kinds! {
    /// What hiring writes on the event ledger.
    HireEvent {
        ServiceAuthorized => "service.authorized",
        ServicePaid => "service.paid",
        ServiceRevoked => "service.revoked",
    }
}

#[derive(Clone, Debug)]
pub enum Op {
    /// The owner (the actor) authorizes its agent to pay `specialist` exactly
    /// `terms` for one task; an amount of zero records sponsorship.
    Authorize { agent: MemberId, terms: Terms },
    /// The hiring agent pays against its authorization; `terms` must match exactly.
    Pay { authorization: String, owner: MemberId, terms: Terms },
    /// The owner withdraws an authorization that has not paid.
    Revoke { authorization: String, agent: MemberId },
}

impl Op {
    /// An authorization is permission, not money; paying and revoking are money commands.
    pub fn moves_money(&self) -> bool {
        match self {
            Op::Authorize { .. } => false,
            Op::Pay { .. } | Op::Revoke { .. } => true,
        }
    }

    pub fn name(&self) -> &'static str {
        match self {
            Op::Authorize { .. } => "service_authorize",
            Op::Pay { .. } => "service_pay",
            Op::Revoke { .. } => "service_revoke",
        }
    }

    pub fn keys(&self, keys: &mut Keys, caller: &Caller<'_>) {
        match self {
            Op::Authorize { agent, terms } => {
                keys.members.insert(agent.clone());
                keys.members.insert(terms.specialist.clone());
                keys.members.insert(terms.pay_to.clone());
                keys.doc(DocKind::ServiceAuthorization, authorization_id(agent, &terms.task));
            }
            Op::Pay { authorization, owner, terms } => {
                let agent = &caller.actor.id;
                keys.doc(DocKind::ServiceAuthorization, authorization.clone());
                keys.members.insert(owner.clone());
                keys.members.insert(terms.specialist.clone());
                keys.members.insert(terms.pay_to.clone());
                keys.accounts.insert(AccountId::of_member(agent));
                keys.accounts.insert(AccountId::of_member(&terms.pay_to));
                keys.accounts.insert(AccountId::fees());
                keys.budgets.insert(agent.clone());
            }
            Op::Revoke { authorization, agent } => {
                keys.doc(DocKind::ServiceAuthorization, authorization.clone());
                keys.members.insert(agent.clone());
            }
        }
    }

    pub(crate) fn apply(&self, batch: &mut Batch<'_>, caller: &Caller<'_>) -> Result<receipts::Receipt, Refusal> {
        match self {
            Op::Authorize { agent, terms } => {
                batch.authorize_service(caller, agent, terms).map(receipts::Receipt::Authorization)
            }
            Op::Pay { authorization, owner, terms } => {
                batch.pay_service(caller, authorization, owner, terms).map(receipts::Receipt::Paid)
            }
            Op::Revoke { authorization, agent } => {
                batch.revoke_service(caller, authorization, agent).map(receipts::Receipt::Authorization)
            }
        }
    }
}

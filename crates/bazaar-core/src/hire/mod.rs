//! Hiring: an owner's exact authorization for one of its agents to pay a
//! specialist for one task, and the payment against it — from the hiring
//! agent's own account and budget, never the owner's; and guest hires of
//! another owner's specialist. Uses identity, pay and escrow.
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
//!
//! Guest hires (`guest`): terms locked at agreement and never changed;
//! accepted only on a verified response to the exact task; paid once, from
//! the hirer's budget, directly or by releasing the hire's escrowed contract
//! (which is why hiring sits on escrow).
//!
//! Priority leases (`lease`): prepaid queue priority for the payer's own task
//! identity at a worker, for a stated period; never renewed; active only once
//! the worker published its receipt.

pub mod events;
mod guest;
mod lease;
pub mod receipts;
pub use receipts::Receipt;
mod service;

pub use guest::*;
pub use lease::*;
pub use service::*;

use crate::escrow::milestone_hold;
use crate::kernel::batch::Batch;
use crate::kernel::keys::Keys;
use crate::kernel::model::DocKind;
use crate::kernel::model::DESK_ID;
use crate::kernel::refusal::Refusal;
use crate::kernel::request::Caller;
use bazaar_types::{AccountId, ContractId, MemberId};

/// The hirer's account and budget: what every hire command may touch.
fn hirer_rows(keys: &mut Keys, hirer: &MemberId) {
    keys.members.insert(hirer.clone());
    keys.accounts.insert(AccountId::of_member(hirer));
    keys.budgets.insert(hirer.clone());
}

crate::event_kinds! {
    /// What hiring writes on the event ledger.
    HireEvent {
        ServiceAuthorized => "service.authorized",
        ServicePaid => "service.paid",
        ServiceRevoked => "service.revoked",
        HireAgreed => "hire.agreed",
        HireAccepted => "hire.accepted",
        LeaseBought => "lease.bought",
        LeaseReceipted => "lease.receipted",
    }
}

#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
pub enum Op {
    /// The owner (the actor) authorizes its agent to pay `specialist` exactly
    /// `terms` for one task; an amount of zero records sponsorship.
    Authorize { agent: MemberId, terms: Terms },
    /// The hiring agent pays against its authorization; `terms` must match exactly.
    Pay { authorization: String, owner: MemberId, terms: Terms },
    /// The owner withdraws an authorization that has not paid.
    Revoke { authorization: String, agent: MemberId },
    /// The hirer (the actor) agrees a fixed-price guest hire, locking its terms.
    Agree { offer: Offer },
    /// The hirer accepts a verified response and pays. `specialist`, `pay_to`
    /// and `contract` are read from the stored hire by the edge, so the rows load.
    Accept {
        hire: String,
        specialist: MemberId,
        pay_to: MemberId,
        contract: Option<ContractId>,
        response: VerifiedResponse,
    },
    /// The payer (the actor) buys a prepaid priority lease for its own task identity.
    BuyLease { order: LeaseOrder },
    /// The worker (or its owner) publishes a lease's receipt.
    ReceiptLease { lease: String, worker: MemberId },
}

impl Op {
    /// An authorization is permission, not money; paying and revoking are money commands.
    pub fn moves_money(&self) -> bool {
        match self {
            Op::Authorize { .. } => false,
            // Agreeing may fund an escrowed contract; accepting pays.
            Op::Pay { .. } | Op::Revoke { .. } | Op::Agree { .. } | Op::Accept { .. } | Op::BuyLease { .. } => true,
            Op::ReceiptLease { .. } => false,
        }
    }

    pub fn name(&self) -> &'static str {
        match self {
            Op::Authorize { .. } => "service_authorize",
            Op::Pay { .. } => "service_pay",
            Op::Revoke { .. } => "service_revoke",
            Op::Agree { .. } => "hire_agree",
            Op::Accept { .. } => "hire_accept",
            Op::BuyLease { .. } => "lease_buy",
            Op::ReceiptLease { .. } => "lease_receipt",
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
            Op::Agree { offer } => {
                let hirer = &caller.actor.id;
                hirer_rows(keys, hirer);
                keys.members.insert(offer.specialist.clone());
                keys.members.insert(offer.pay_to.clone());
                keys.members.insert(MemberId(DESK_ID.into()));
                keys.doc(DocKind::Hire, hire_id(hirer, &offer.task));
                if let (true, Some(idem)) = (offer.escrow, caller.idem) {
                    let contract = hire_contract(hirer, &offer.specialist, &idem.key);
                    keys.holds.insert(milestone_hold(&contract, 0));
                    keys.doc(DocKind::Contract, contract);
                }
            }
            Op::Accept { hire, specialist, pay_to, contract, .. } => {
                hirer_rows(keys, &caller.actor.id);
                keys.doc(DocKind::Hire, hire.clone());
                keys.members.insert(specialist.clone());
                keys.members.insert(pay_to.clone());
                keys.accounts.insert(AccountId::of_member(pay_to));
                keys.accounts.insert(AccountId::of_member(specialist));
                keys.accounts.insert(AccountId::fees());
                if let Some(contract) = contract {
                    keys.doc(DocKind::Contract, contract.clone());
                    keys.holds.insert(milestone_hold(contract, 0));
                }
            }
            Op::BuyLease { order } => {
                let payer = &caller.actor.id;
                hirer_rows(keys, payer);
                keys.members.insert(order.worker.clone());
                keys.members.insert(order.pay_to.clone());
                keys.accounts.insert(AccountId::of_member(&order.pay_to));
                keys.accounts.insert(AccountId::fees());
                if let Some(idem) = caller.idem {
                    keys.doc(DocKind::Lease, lease_id(payer, &order.worker, &idem.key));
                }
            }
            Op::ReceiptLease { lease, worker } => {
                keys.doc(DocKind::Lease, lease.clone());
                keys.members.insert(worker.clone());
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
            Op::Agree { offer } => batch.agree_hire(caller, offer).map(receipts::Receipt::Hire),
            Op::Accept { hire, response, .. } => {
                batch.accept_hire(caller, hire, response).map(receipts::Receipt::HirePaid)
            }
            Op::BuyLease { order } => batch.buy_lease(caller, order).map(receipts::Receipt::Lease),
            Op::ReceiptLease { lease, .. } => batch.receipt_lease(caller, lease).map(receipts::Receipt::Lease),
        }
    }
}

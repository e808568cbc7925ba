//! Service payments: the owner's exact authorization and the one payment it allows.

use super::events::{Payment, ServiceAuthorized, ServicePaid, ServiceRevoked};
use crate::crypto::sha256_hex;
use crate::kernel::batch::{refuse, Batch};
use crate::kernel::ledger::Linked;
use crate::kernel::model::*;
use crate::kernel::refusal::{Code, Refusal};
use crate::kernel::request::Caller;
use crate::validate::is_hex64;
use bazaar_types::limits::AMOUNT_MINOR_MAX;
use bazaar_types::{AccountId, Amount, MemberId, Timestamp};
use serde::{Deserialize, Serialize};
use serde_json::json;

/// The exact terms of one service payment.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Terms {
    /// The task (a job's Nostr event id, 64 hex) the specialist is paid for.
    pub task: String,
    pub specialist: MemberId,
    /// The account paid: the specialist's owner or one of its agents.
    pub pay_to: MemberId,
    /// Gross, before the protocol fee; zero is sponsorship.
    pub amount_minor: Amount,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AuthorizationState {
    /// May be paid, once.
    Authorized,
    /// The fee is zero and sponsored: recorded, never paid.
    Sponsored,
    Paid,
    Revoked,
}

/// An owner's authorization, as stored.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ServiceAuthorization {
    pub id: String,
    pub owner: MemberId,
    /// The hiring agent: the only member that pays, from its own account and budget.
    pub agent: MemberId,
    #[serde(flatten)]
    pub terms: Terms,
    pub state: AuthorizationState,
    pub created_at: Timestamp,
    pub resolved_at: Option<Timestamp>,
    /// The payment, once made; attached again to any second ask.
    pub payment: Option<Payment>,
}

crate::document!(ServiceAuthorization, ServiceAuthorization, version 1,
    id = |a| a.id.clone(),
    parties = |a| crate::kernel::docs::parties_with(
        vec![a.owner.clone(), a.agent.clone()],
        [a.terms.specialist.clone(), a.terms.pay_to.clone()],
    ),
    invariants = |a| assert!(
        (a.state == AuthorizationState::Paid) == a.payment.is_some()
            && a.payment.as_ref().is_none_or(|p| p.terms == a.terms
                && p.net_minor.0 + p.fee_minor.0 == p.gross_minor.0
                && p.gross_minor == a.terms.amount_minor)
            && ((a.state == AuthorizationState::Sponsored) <= (a.terms.amount_minor == Amount::ZERO)),
        "service authorization {} out of shape", a.id
    ),
);

/// `sva_` + 32 hex of SHA-256 over the hiring agent and the task: one authorization per task.
pub fn authorization_id(agent: &MemberId, task: &str) -> String {
    let digest = sha256_hex(format!("bazaar-service-v1\n{agent}\n{task}").as_bytes());
    format!("sva_{}", &digest[..32])
}

impl Batch<'_> {
    pub(crate) fn authorize_service(
        &mut self,
        caller: &Caller<'_>,
        agent: &MemberId,
        terms: &Terms,
    ) -> Result<ServiceAuthorization, Refusal> {
        let hiring = self.owned_agent(caller, agent)?;
        if !is_hex64(&terms.task) {
            return refuse(Code::InvalidRequest, "`task` is the job's event id: 64 lowercase hex chars.");
        }
        if terms.amount_minor.0 > AMOUNT_MINOR_MAX {
            return refuse(Code::AmountInvalid, "The amount is above the largest amount one request may move.");
        }
        let specialist = self.member(&terms.specialist)?;
        if specialist.kind != MemberKind::Agent || specialist.id == hiring.id {
            return refuse(Code::NotAnAgent, "A specialist is another agent.");
        }
        if !specialist.owner_holds(&self.member(&terms.pay_to)?) {
            return Err(Refusal::new(
                Code::PayToInvalid,
                "`pay_to` must be an account the specialist's owner holds (the owner or one of its agents).",
            )
            .with(json!({"specialist": terms.specialist, "pay_to": terms.pay_to})));
        }
        let id = authorization_id(agent, &terms.task);
        self.not_stored::<ServiceAuthorization>(
            &id,
            Code::AuthorizationExists,
            "This agent already holds an authorization for this task; it is attached. Revoke it first to change it.",
        )?;
        let sponsored = terms.amount_minor == Amount::ZERO;
        let state = if sponsored { AuthorizationState::Sponsored } else { AuthorizationState::Authorized };
        let authorization = ServiceAuthorization {
            id: id.clone(),
            owner: caller.actor.id.clone(),
            agent: agent.clone(),
            terms: terms.clone(),
            state,
            created_at: self.now,
            resolved_at: None,
            payment: None,
        };
        self.insert(&authorization);
        let body = ServiceAuthorized {
            authorization: id,
            owner: caller.actor.id.clone(),
            agent: agent.clone(),
            terms: terms.clone(),
            sponsored,
        };
        self.emit(caller, &body);
        Ok(authorization)
    }

    /// The stored authorization; a paid one is refused with its payment attached.
    fn open_authorization(&self, id: &str) -> Result<ServiceAuthorization, Refusal> {
        let Some(found) = self.load::<ServiceAuthorization>(id) else {
            return refuse(Code::AuthorizationNotFound, format!("No service authorization {id} on this registry."));
        };
        match found.state {
            AuthorizationState::Authorized | AuthorizationState::Sponsored => Ok(found),
            AuthorizationState::Paid => Err(Refusal::new(
                Code::AuthorizationUsed,
                "This authorization has paid; it pays once. The payment is attached.",
            )
            .with(serde_json::to_value(&found.payment).expect("payments serialize"))),
            AuthorizationState::Revoked => {
                Err(Refusal::new(Code::AuthorizationRevoked, "The owner revoked this authorization.")
                    .with(json!({"resolved_at_ms": found.resolved_at})))
            }
        }
    }

    pub(crate) fn pay_service(
        &mut self,
        caller: &Caller<'_>,
        id: &str,
        owner: &MemberId,
        terms: &Terms,
    ) -> Result<Payment, Refusal> {
        let mut authorization = self.open_authorization(id)?;
        if &authorization.owner != owner {
            return refuse(
                Code::InvalidRequest,
                "The authorization's owner does not match the request; read it again.",
            );
        }
        if caller.actor.id != authorization.agent {
            return refuse(
                Code::NotPermitted,
                "Only the hiring agent pays, from its own budget; the owner's account never pays a specialist.",
            );
        }
        if authorization.state == AuthorizationState::Sponsored {
            return refuse(
                Code::ServiceSponsored,
                "This specialist's work is sponsored (a fee of zero): nothing is paid.",
            );
        }
        if &authorization.terms != terms {
            return Err(Refusal::new(
                Code::AuthorizationMismatch,
                "The payment does not match the owner's authorization exactly (task, specialist, pay-to, amount); nothing moved.",
            )
            .with(json!({"authorized": authorization.terms, "asked": terms})));
        }
        let agent = authorization.agent.clone();
        let amount = terms.amount_minor;
        let (fee, net, linked) = self.pay_from_agent(caller, &agent, &terms.pay_to, amount)?;
        let payment = Payment {
            authorization: id.to_string(),
            agent: agent.clone(),
            terms: terms.clone(),
            gross_minor: amount,
            fee_minor: fee,
            net_minor: net,
            transfers: linked.transfers,
            link: linked.link,
            paid_at_ms: self.now,
        };
        authorization.state = AuthorizationState::Paid;
        authorization.resolved_at = Some(self.now);
        authorization.payment = Some(payment.clone());
        self.update(&authorization);
        self.emit(caller, &ServicePaid { payment: payment.clone() });
        Ok(payment)
    }

    /// Pays `amount` from `agent`'s own account, within its budget, to
    /// `pay_to` less the protocol fee, in one link: the one direct payment
    /// hiring makes (a service payment, a guest hire accepted without escrow).
    pub(super) fn pay_from_agent(
        &mut self,
        caller: &Caller<'_>,
        agent: &MemberId,
        pay_to: &MemberId,
        amount: Amount,
    ) -> Result<(Amount, Amount, Linked), Refusal> {
        let account = AccountId::of_member(agent);
        self.check_available(&account, amount)?;
        let budget = self.snap.budgets.get(agent).cloned().unwrap_or_else(|| Budget::zero(agent.clone()));
        crate::kernel::ledger::check_ceilings(&budget, amount, self.now)?;
        self.put_budget(crate::kernel::ledger::spend(budget, amount, self.now));
        let payee = AccountId::of_member(pay_to);
        self.ensure_account(payee.clone());
        let fee = amount.fee_bps(self.config.fee_bps);
        let net = amount.checked_sub(fee).expect("fee never exceeds amount");
        let legs: Vec<_> = [
            (account.clone(), payee, net, TransferKind::Payment),
            (account, AccountId::fees(), fee, TransferKind::Fee),
        ]
        .into_iter()
        .filter(|leg| leg.2 .0 > 0)
        .collect();
        Ok((fee, net, self.post_linked(caller, &legs)))
    }

    pub(crate) fn revoke_service(
        &mut self,
        caller: &Caller<'_>,
        id: &str,
        agent: &MemberId,
    ) -> Result<ServiceAuthorization, Refusal> {
        self.owned_agent(caller, agent)?;
        let mut authorization = self.open_authorization(id)?;
        if &authorization.agent != agent {
            return refuse(
                Code::InvalidRequest,
                "The authorization's agent does not match the request; read it again.",
            );
        }
        authorization.state = AuthorizationState::Revoked;
        authorization.resolved_at = Some(self.now);
        self.update(&authorization);
        self.emit(caller, &ServiceRevoked { authorization: id.to_string(), agent: agent.clone() });
        Ok(authorization)
    }
}

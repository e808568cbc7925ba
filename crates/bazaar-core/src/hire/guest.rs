//! Guest hires: a fixed-price hire of another owner's specialist for one
//! exact task. The terms — price, the paying account and the pay-to the
//! specialist signed — are locked at agreement; nothing changes them after
//! (a second agreement for the task is refused with the locked terms
//! attached). "Accept result and pay" needs a verified successful response
//! from that specialist to that task (checked at the edge, matched here) and
//! records acceptance, not a grade. A hire may ride an escrowed contract with
//! the dispute desk as arbiter, so a bad result is disputed through the four
//! phases instead of paid.

use super::events::{HireAccepted, HireAgreed, HirePayment};
use crate::crypto::{did_signed, sha256_hex};
use crate::escrow::{contract_id_for, MilestoneSpec};
use crate::kernel::batch::{refuse, Batch};
use crate::kernel::model::*;
use crate::kernel::refusal::{Code, Refusal};
use crate::kernel::request::Caller;
use crate::validate::is_hex64;
use bazaar_types::limits::{AMOUNT_MINOR_MAX, HIRE_DUE_S, REVIEW_WINDOW_S};
use bazaar_types::{AccountId, Amount, ContractId, MemberId, Timestamp};
use serde::{Deserialize, Serialize};
use serde_json::json;

/// What the specialist signed (its did:key, base64url) and the hirer agreed to.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct HireTerms {
    pub task: String,
    pub specialist: MemberId,
    pub price_minor: Amount,
    /// The hirer's own account: the only one that pays.
    pub paying_account: AccountId,
    pub pay_to: MemberId,
    pub offer_signature: String,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum HireState {
    /// Terms locked; waiting for a verified response.
    Agreed,
    /// Accepted and paid (directly, or by releasing its escrowed milestone).
    Paid,
}

/// The hirer's acceptance: the response it accepted, not a quality grade.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Acceptance {
    /// The specialist's signed result event (a Nostr id) the edge verified.
    pub result_event: String,
    pub accepted_at_ms: Timestamp,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Hire {
    pub id: String,
    pub hirer: MemberId,
    #[serde(flatten)]
    pub terms: HireTerms,
    /// The guest conversation (a DM of the conversation plane) the hire was arranged in.
    pub conversation: Option<String>,
    /// The escrowed contract the hire rides, with the desk as arbiter.
    pub contract: Option<ContractId>,
    pub state: HireState,
    pub agreed_at: Timestamp,
    pub acceptance: Option<Acceptance>,
    pub payment: Option<HirePayment>,
}

impl Hire {
    /// Only the hiring agent accepts and pays, from its own budget: asked
    /// before anything else about an acceptance, so no one else learns more
    /// than that the hire is not theirs.
    pub fn may_accept(&self, actor: &MemberId) -> Result<(), Refusal> {
        if *actor != self.hirer {
            return refuse(Code::NotPermitted, "Only the hiring agent accepts and pays, from its own budget.");
        }
        Ok(())
    }
}

crate::document!(Hire, Hire, version 1,
    id = |h| h.id.clone(),
    parties = |h| crate::kernel::docs::parties_with(
        vec![h.hirer.clone(), h.terms.specialist.clone()],
        [h.terms.pay_to.clone()],
    ),
    invariants = |h| assert!(
        (h.state == HireState::Paid) == (h.acceptance.is_some() && h.payment.is_some())
            && h.payment.as_ref().is_none_or(|p| p.gross_minor == h.terms.price_minor
                && p.net_minor.0 + p.fee_minor.0 == p.gross_minor.0),
        "hire {} out of shape", h.id
    ),
);

/// `hir_` + 32 hex of SHA-256 over the hirer and the task: one hire per task.
pub fn hire_id(hirer: &MemberId, task: &str) -> String {
    let digest = sha256_hex(format!("bazaar-hire-v1\n{hirer}\n{task}").as_bytes());
    format!("hir_{}", &digest[..32])
}

/// The exact bytes a specialist signs to offer one task at one price, paid to one account.
pub fn offer_statement(specialist: &MemberId, task: &str, pay_to: &MemberId, price: Amount) -> String {
    format!("bazaar-hire-offer-v1\n{specialist}\n{task}\n{pay_to}\n{}", price.0)
}

/// The offer as the hirer agrees to it.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Offer {
    pub specialist: MemberId,
    pub task: String,
    pub price: Amount,
    pub pay_to: MemberId,
    pub signature: String,
    pub conversation: Option<String>,
    pub escrow: bool,
}

/// A response the edge verified: signed by the Nostr key the specialist's
/// enrollment binds to its DID, answering `task`.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct VerifiedResponse {
    pub task: String,
    pub author: MemberId,
    pub result_event: String,
}

/// The contract an escrowed hire opens under the agreement's idempotency key.
pub fn hire_contract(hirer: &MemberId, specialist: &MemberId, key: &str) -> ContractId {
    contract_id_for(hirer, specialist, &MemberId(DESK_ID.into()), key)
}

impl Batch<'_> {
    pub(crate) fn agree_hire(&mut self, caller: &Caller<'_>, offer: &Offer) -> Result<Hire, Refusal> {
        let hirer = caller.actor.clone();
        if hirer.kind != MemberKind::Agent {
            return refuse(Code::NotPermitted, "Only an agent hires, on its own budget.");
        }
        if !is_hex64(&offer.task) {
            return refuse(Code::InvalidRequest, "`task` is the job's event id: 64 lowercase hex chars.");
        }
        if offer.price.0 == 0 || offer.price.0 > AMOUNT_MINOR_MAX {
            return refuse(Code::AmountInvalid, "A fixed-price hire costs at least 1 minor unit.");
        }
        let id = hire_id(&hirer.id, &offer.task);
        self.not_stored::<Hire>(
            &id,
            Code::HireExists,
            "This task is already hired; its terms were locked at agreement and are attached.",
        )?;
        let specialist = self.member(&offer.specialist)?;
        if specialist.kind != MemberKind::Agent || specialist.principal() == hirer.principal() {
            return refuse(Code::NotPermitted, "A guest hire is of another owner's agent.");
        }
        let statement = offer_statement(&offer.specialist, &offer.task, &offer.pay_to, offer.price);
        if !did_signed(offer.specialist.as_str(), statement.as_bytes(), &offer.signature) {
            return Err(Refusal::new(
                Code::OfferSignatureInvalid,
                "The specialist did not sign these terms (task, pay-to, price) with its key.",
            )
            .with(json!({"statement": statement})));
        }
        let pay_to = self.member(&offer.pay_to)?;
        if !specialist.owner_holds(&pay_to) || (offer.escrow && pay_to.id != specialist.id) {
            return Err(Refusal::new(
                Code::PayToInvalid,
                "`pay_to` must be the specialist, its owner or one of its owner's agents; an escrowed hire pays the specialist itself.",
            )
            .with(json!({"specialist": offer.specialist, "pay_to": offer.pay_to, "escrow": offer.escrow})));
        }
        let contract = if offer.escrow { Some(self.open_hire_contract(caller, offer, &statement)?) } else { None };
        let terms = HireTerms {
            task: offer.task.clone(),
            specialist: offer.specialist.clone(),
            price_minor: offer.price,
            paying_account: AccountId::of_member(&hirer.id),
            pay_to: offer.pay_to.clone(),
            offer_signature: offer.signature.clone(),
        };
        let hire = Hire {
            id: id.clone(),
            hirer: hirer.id.clone(),
            terms: terms.clone(),
            conversation: offer.conversation.clone(),
            contract: contract.clone(),
            state: HireState::Agreed,
            agreed_at: self.now,
            acceptance: None,
            payment: None,
        };
        self.insert(&hire);
        self.emit(
            caller,
            &HireAgreed { hire: id, hirer: hirer.id, terms, conversation: offer.conversation.clone(), contract },
        );
        Ok(hire)
    }

    /// One milestone at the price, the desk as arbiter, funded now from the hirer's budget.
    fn open_hire_contract(
        &mut self,
        caller: &Caller<'_>,
        offer: &Offer,
        statement: &str,
    ) -> Result<ContractId, Refusal> {
        let spec = MilestoneSpec {
            amount: offer.price,
            description: format!("guest hire for task {}", offer.task),
            due_at: self.now.plus_s(HIRE_DUE_S),
        };
        let terms = sha256_hex(statement.as_bytes());
        let desk = MemberId(DESK_ID.into());
        let view = self.create_contract(caller, &offer.specialist, &desk, &[spec], &terms, REVIEW_WINDOW_S)?;
        Ok(view.contract.id)
    }

    pub(crate) fn accept_hire(
        &mut self,
        caller: &Caller<'_>,
        id: &str,
        response: &VerifiedResponse,
    ) -> Result<HirePayment, Refusal> {
        let Some(mut hire) = self.load::<Hire>(id) else {
            return refuse(Code::HireNotFound, format!("No hire {id} on this registry."));
        };
        hire.may_accept(&caller.actor.id)?;
        if let Some(paid) = &hire.payment {
            return Err(Refusal::new(Code::HirePaid, "This hire was accepted and paid once; the payment is attached.")
                .with(serde_json::to_value(paid).expect("payments serialize")));
        }
        if response.task != hire.terms.task || response.author != hire.terms.specialist {
            return Err(Refusal::new(
                Code::ResponseNotVerified,
                "Accepting needs a verified successful response from the hired specialist to this exact task.",
            )
            .with(json!({"task": hire.terms.task, "specialist": hire.terms.specialist,
                "response_task": response.task, "response_author": response.author})));
        }
        let payment = match hire.contract.clone() {
            Some(contract) => self.release_hire_contract(caller, &contract)?,
            None => self.pay_hire(caller, &hire)?,
        };
        hire.state = HireState::Paid;
        hire.acceptance = Some(Acceptance { result_event: response.result_event.clone(), accepted_at_ms: self.now });
        hire.payment = Some(payment.clone());
        self.update(&hire);
        self.emit(
            caller,
            &HireAccepted {
                hire: id.to_string(),
                result_event: response.result_event.clone(),
                payment: payment.clone(),
            },
        );
        Ok(payment)
    }

    /// Pays the locked price from the hirer's account to the locked pay-to, less the fee.
    fn pay_hire(&mut self, caller: &Caller<'_>, hire: &Hire) -> Result<HirePayment, Refusal> {
        let amount = hire.terms.price_minor;
        let (fee, net, linked) = self.pay_from_agent(caller, &hire.hirer, &hire.terms.pay_to, amount)?;
        Ok(HirePayment {
            gross_minor: amount,
            fee_minor: fee,
            net_minor: net,
            transfers: linked.transfers,
            link: linked.link,
            contract: None,
        })
    }

    /// Releases the escrowed milestone (the specialist must have accepted the contract and marked it delivered).
    fn release_hire_contract(&mut self, caller: &Caller<'_>, id: &ContractId) -> Result<HirePayment, Refusal> {
        let contract = self.contract(id).expect("a hire's contract is loaded");
        let released = self.release(caller, contract, 0, false)?;
        let payout = released.payout;
        Ok(HirePayment {
            gross_minor: released.released.amount_minor,
            fee_minor: payout.fee_minor,
            net_minor: payout.net_minor,
            transfers: payout.transfers,
            link: payout.link,
            contract: Some(id.clone()),
        })
    }
}

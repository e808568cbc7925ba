//! A merchant's own terms, for adoption phase by phase: its own escrow
//! threshold and, for a pilot, the buyers it has invited ("no strangers yet").
//!
//! Invariants:
//! - Terms never loosen the registry's: a merchant's threshold is at most the
//!   registry's (`terms_invalid` otherwise), and without terms a merchant has
//!   exactly the registry's threshold and is open to every buyer.
//! - A buyer not on a pilot's list gets no token, no escrowed contract and no
//!   storefront share from that merchant (`buyer_not_invited`).
//! - A token above the merchant's threshold is refused (`escrow_required`,
//!   naming the merchant's threshold); a storefront share above its maker's
//!   threshold rides its own escrowed contract.
//! - Terms apply to what is asked for after they are set: a token or order
//!   already granted stays good.

use crate::kernel::batch::Batch;
use crate::kernel::model::MemberKind;
use crate::kernel::refusal::{Code, Refusal};
use crate::kernel::request::Caller;
use bazaar_types::limits::TERMS_INVITED_MAX;
use bazaar_types::{Amount, MemberId, Timestamp};
use serde::{Deserialize, Serialize};
use serde_json::json;
use std::collections::BTreeSet;

/// One merchant agent's terms (a document `terms` keyed by the merchant).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct MerchantTerms {
    pub merchant: MemberId,
    /// Tokens above this must ride escrow; at most the registry's threshold.
    pub escrow_threshold_minor: Amount,
    /// A pilot's invited buyers; `None`: open to every buyer.
    pub invited_buyers: Option<BTreeSet<MemberId>>,
    pub set_by: MemberId,
    pub set_at: Timestamp,
}

impl MerchantTerms {
    /// The threshold in force: its own, never above the registry's (which an operator may have lowered since).
    pub fn threshold(&self, registry: Amount) -> Amount {
        self.escrow_threshold_minor.min(registry)
    }
}

crate::document!(MerchantTerms, Terms, version 1, id = |t| t.merchant.to_string(), parties = |t| vec![t.merchant.clone()]);

impl Batch<'_> {
    /// The merchant itself or its owner sets its terms, replacing any before.
    pub(crate) fn set_terms(
        &mut self,
        command: &Caller<'_>,
        merchant: &MemberId,
        threshold: Option<Amount>,
        invited: Option<&[MemberId]>,
    ) -> Result<MerchantTerms, Refusal> {
        let member = self.member(merchant)?;
        if member.kind != MemberKind::Agent {
            return Err(Refusal::new(Code::NotAnAgent, "Terms are a merchant agent's."));
        }
        if command.actor.id != *merchant && member.owner.as_ref() != Some(&command.actor.id) {
            return Err(Refusal::new(Code::NotOwner, "Only the merchant agent or its owner sets its terms."));
        }
        let registry = self.config.escrow_threshold;
        let threshold = threshold.unwrap_or(registry);
        if threshold > registry {
            return Err(Refusal::new(
                Code::TermsInvalid,
                "A merchant's escrow threshold can only be stricter than the registry's: at most the registry's.",
            )
            .with(json!({"escrow_threshold_minor": threshold, "registry_escrow_threshold_minor": registry})));
        }
        let invited = match invited {
            None => None,
            Some(list) if list.len() > TERMS_INVITED_MAX => {
                return Err(Refusal::new(Code::TermsInvalid, "Too many invited buyers.")
                    .with(json!({"invited": list.len(), "max": TERMS_INVITED_MAX})));
            }
            Some(list) => {
                for buyer in list {
                    self.member(buyer)?;
                }
                Some(list.iter().cloned().collect())
            }
        };
        let terms = MerchantTerms {
            merchant: merchant.clone(),
            escrow_threshold_minor: threshold,
            invited_buyers: invited,
            set_by: command.actor.id.clone(),
            set_at: self.now,
        };
        self.upsert(&terms);
        self.emit(command, &super::events::TermsSet { terms: terms.clone() });
        Ok(terms)
    }

    /// The merchant's escrow threshold: its own, or the registry's.
    pub(crate) fn merchant_threshold(&self, merchant: &MemberId) -> Amount {
        self.load::<MerchantTerms>(merchant.as_str())
            .map_or(self.config.escrow_threshold, |t| t.threshold(self.config.escrow_threshold))
    }

    /// Refuses `buyer` when `merchant` runs a pilot that has not invited it.
    pub(crate) fn check_invited(&self, merchant: &MemberId, buyer: &MemberId) -> Result<(), Refusal> {
        let terms = self.load::<MerchantTerms>(merchant.as_str());
        match terms.and_then(|t| t.invited_buyers) {
            Some(invited) if !invited.contains(buyer) => Err(Refusal::new(
                Code::BuyerNotInvited,
                "This merchant runs a pilot with invited buyers only, and this buyer is not one of them yet.",
            )
            .with(json!({"merchant": merchant}))),
            _ => Ok(()),
        }
    }

    /// A token to `merchant` for up to `max`: invited, and within its threshold.
    pub(crate) fn check_merchant_terms(
        &self,
        merchant: &MemberId,
        buyer: &MemberId,
        max: Amount,
    ) -> Result<(), Refusal> {
        self.check_invited(merchant, buyer)?;
        let threshold = self.merchant_threshold(merchant);
        if max > threshold {
            return Err(Refusal::new(
                Code::EscrowRequired,
                "This merchant takes orders above its own escrow threshold only on an escrowed contract.",
            )
            .with(json!({"max_minor": max, "escrow_threshold_minor": threshold, "merchant": merchant})));
        }
        Ok(())
    }
}

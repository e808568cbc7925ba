//! Payment tokens and their settlement: a hold per token on the buyer's
//! budget, settled exactly once by its merchant (fee and net as linked legs),
//! voided by the buyer or expired by the registry.

use super::events::{self, HoldEnded, Posting, SettlementFacts, TokenFacts};
use super::receipts::{HoldReleased, Settled, TokenGranted};
use super::token::TokenClaims;
use crate::kernel::batch::{refuse, Batch};
use crate::kernel::ledger::{check_ceilings, spend, PaidOut, PayOut};
use crate::kernel::model::*;
use crate::kernel::refusal::{Code, Refusal};
use crate::kernel::request::Caller;
use bazaar_types::{AccountId, Amount, HoldId, MemberId, OrderId, TokenId};
use serde_json::json;

pub fn hold_id_for(jti: &TokenId) -> HoldId {
    HoldId(format!("hold_{jti}"))
}

impl Batch<'_> {
    /// A token for a merchant agent of this registry.
    pub(crate) fn issue_token(
        &mut self,
        command: &Caller<'_>,
        claims: &TokenClaims,
        token: &str,
    ) -> Result<TokenGranted, Refusal> {
        self.check_token_buyer(command, claims)?;
        if claims.via.is_some() {
            return refuse(
                Code::InvalidRequest,
                "A token for a merchant on a peer registry goes through its corridor.",
            );
        }
        let merchant = self.member(&claims.aud)?;
        if merchant.kind != MemberKind::Agent {
            return refuse(Code::NotAnAgent, "Payment tokens are addressed to merchant agents.");
        }
        if claims.aud == claims.sub {
            return refuse(Code::NotPermitted, "An agent cannot pay itself.");
        }
        self.check_merchant_terms(&claims.aud, &claims.sub, claims.max)?;
        self.hold_for_token(command, claims, token, Some(merchant.handle))
    }

    /// Only an agent asks for payment tokens, and only on its own budget.
    pub(crate) fn check_token_buyer(&self, command: &Caller<'_>, claims: &TokenClaims) -> Result<(), Refusal> {
        if command.actor.kind != MemberKind::Agent || command.actor.id != claims.sub {
            return refuse(Code::NotPermitted, "Only an agent asks for payment tokens, and only on its own budget.");
        }
        Ok(())
    }

    /// Everything after the merchant checks: the escrow threshold, the budget's
    /// ceilings and funds, then the hold and the token record.
    pub(crate) fn hold_for_token(
        &mut self,
        command: &Caller<'_>,
        claims: &TokenClaims,
        token: &str,
        merchant_handle: Option<String>,
    ) -> Result<TokenGranted, Refusal> {
        if claims.max > self.config.escrow_threshold {
            return Err(Refusal::new(
                Code::EscrowRequired,
                "Orders above the escrow threshold must ride an escrowed contract, not a bare token.",
            )
            .with(json!({"max_minor": claims.max, "escrow_threshold_minor": self.config.escrow_threshold})));
        }
        let budget = self.snap.budgets.get(&claims.sub).cloned().unwrap_or_else(|| Budget::zero(claims.sub.clone()));
        check_ceilings(&budget, claims.max, self.now)?;
        let account = AccountId::of_member(&claims.sub);
        self.check_available(&account, claims.max)?;
        if self.snap.tokens.contains_key(&claims.jti) {
            return refuse(Code::InvalidRequest, "Token id collision; retry.");
        }
        let hold = Hold {
            id: hold_id_for(&claims.jti),
            account: account.clone(),
            amount: claims.max,
            created_at: self.now,
            expires_at: claims.exp_ms,
            state: HoldState::Pending,
            posted_amount: Amount::ZERO,
            resolved_at: None,
        };
        let mut buyer = self.snap.accounts[&account].clone();
        buyer.debits_pending = buyer.debits_pending.checked_add(claims.max.0).expect("no overflow");
        assert!(buyer.available() >= 0);
        self.put_account(buyer);
        self.put_budget(spend(budget, claims.max, self.now));
        let record = TokenRecord {
            jti: claims.jti.clone(),
            buyer: claims.sub.clone(),
            merchant: claims.aud.clone(),
            max_amount: claims.max,
            order_id: claims.ord.clone(),
            resource: claims.res.clone(),
            hold: hold.id.clone(),
            issued_at: self.now,
            expires_at: claims.exp_ms,
        };
        self.snap.holds.insert(hold.id.clone(), hold.clone());
        self.changes.insert_holds.push(hold);
        self.snap.tokens.insert(record.jti.clone(), record.clone());
        self.changes.insert_tokens.push(record);
        let issued = token_facts(claims, merchant_handle);
        self.emit(command, &events::TokenIssued { token: issued.clone() });
        Ok(TokenGranted { issued, token: token.to_string() })
    }

    pub(crate) fn settle(
        &mut self,
        command: &Caller<'_>,
        claims: &TokenClaims,
        amount: Amount,
        order_id: &OrderId,
    ) -> Result<Settled, Refusal> {
        if command.actor.id != claims.aud {
            return refuse(
                Code::NotAudience,
                "This token is addressed to another merchant; only its audience may settle it.",
            );
        }
        if claims.via.is_some() {
            return refuse(Code::NotAudience, "This token is settled through the merchant's own registry.");
        }
        self.settle_checked(command, claims, amount, order_id, None)
    }

    pub(crate) fn settle_checked(
        &mut self,
        command: &Caller<'_>,
        claims: &TokenClaims,
        amount: Amount,
        order_id: &OrderId,
        corridor: Option<MemberId>,
    ) -> Result<Settled, Refusal> {
        let Some(record) = self.snap.tokens.get(&claims.jti).cloned() else {
            return refuse(Code::TokenNotFound, "This registry never issued this token.");
        };
        assert!(record.buyer == claims.sub && record.merchant == claims.aud && record.max_amount == claims.max);
        if &record.order_id != order_id {
            return Err(Refusal::new(
                Code::OrderMismatch,
                "The token was issued for a different order id; settle the order it names.",
            )
            .with(json!({"token_order_id": record.order_id, "order_id": order_id})));
        }
        if let Some(original) = self.snap.settlements_by_token.get(&claims.jti) {
            return Err(Refusal::new(
                Code::TokenSettled,
                "This token was already settled; a token pays once. The original settlement is attached.",
            )
            .with(settlement_view(original)));
        }
        if let Some(original) = self.snap.settlements_by_order.get(&(claims.aud.clone(), order_id.clone())) {
            return Err(Refusal::new(Code::OrderAlreadySettled, "This order was already settled with another token; it is paid once. The original settlement is attached.")
                .with(settlement_view(original)));
        }
        let hold = self.snap.holds.get(&record.hold).cloned().expect("every token has a hold");
        match hold.state {
            HoldState::Pending if self.now < hold.expires_at => {}
            HoldState::Pending | HoldState::Expired => {
                return refuse(Code::TokenExpired, "The token expired; ask the buyer for a new one.")
            }
            HoldState::Voided => return refuse(Code::TokenVoided, "The buyer voided this token; ask for a new one."),
            HoldState::Posted => unreachable!("a posted hold always has a settlement"),
        }
        if amount.0 == 0 || amount > record.max_amount {
            return Err(Refusal::new(Code::AmountExceedsToken, "Settle between 1 and the token's maximum amount.")
                .with(json!({"amount_minor": amount, "max_amount_minor": record.max_amount})));
        }
        Ok(self.post_settlement(command, &record, hold, amount, corridor))
    }

    pub(crate) fn post_settlement(
        &mut self,
        command: &Caller<'_>,
        record: &TokenRecord,
        hold: Hold,
        amount: Amount,
        corridor: Option<MemberId>,
    ) -> Settled {
        // A relayed settlement pays the whole amount into the corridor; the
        // merchant's registry takes its fee on its own side.
        let released = hold.amount.checked_sub(amount).expect("amount within hold");
        let seq = self.snap.head.seq + 1;
        let ids = format!("tr_{}", record.jti);
        let out = PayOut {
            payee: corridor.as_ref().map(AccountId::corridor).unwrap_or_else(|| AccountId::of_member(&record.merchant)),
            amount,
            kind: TransferKind::Payment,
            ids: &ids,
            suffix: "pay",
            fee_bps: if corridor.is_some() { 0 } else { self.config.fee_bps },
        };
        let PaidOut { fee, link, transfers: transfer_ids, .. } = self.pay_out(command, hold, out, Some(&record.buyer));
        let settlement = Settlement::new(record, amount, fee, self.now);
        self.record_settlement(settlement.clone());
        let posting = Posting {
            transfers: transfer_ids,
            link,
            released_minor: released,
            event_seq: seq,
            corridor_minor: corridor.is_some().then_some(amount),
        };
        let facts = SettlementFacts::from(&settlement);
        let posted = events::SettlementPosted {
            paid: facts.paid.clone(),
            row: Some(facts.row.clone()),
            posting: Some(posting.clone()),
            corridor: corridor.clone(),
        };
        self.emit(command, &posted);
        Settled { settlement: facts, posting, corridor }
    }

    pub(crate) fn end_hold(
        &mut self,
        command: &Caller<'_>,
        jti: &TokenId,
        buyer: &MemberId,
        end: HoldState,
    ) -> Result<HoldReleased, Refusal> {
        let allowed = match end {
            HoldState::Expired => command.actor.kind == MemberKind::Registry,
            _ => {
                let buyer_owner = self.snap.members.get(buyer).and_then(|m| m.owner.as_ref());
                &command.actor.id == buyer || buyer_owner == Some(&command.actor.id)
            }
        };
        if !allowed {
            return refuse(
                Code::NotPermitted,
                "Only the buyer or its owner voids a token; only the registry expires holds.",
            );
        }
        let Some(record) = self.snap.tokens.get(jti).filter(|t| &t.buyer == buyer).cloned() else {
            return refuse(Code::TokenNotFound, "No such token for this buyer.");
        };
        let hold = self.snap.holds.get(&record.hold).cloned().expect("every token has a hold");
        match hold.state {
            HoldState::Pending => {}
            HoldState::Posted => {
                return refuse(Code::TokenSettled, "The token was already settled; it can no longer be voided.")
            }
            HoldState::Voided => return refuse(Code::TokenVoided, "The token was already voided."),
            HoldState::Expired => {
                return refuse(Code::TokenExpired, "The token already expired and its hold was released.")
            }
        }
        if end == HoldState::Expired && self.now < hold.expires_at {
            return refuse(Code::NotPermitted, "The hold has not expired yet.");
        }
        self.unpend(&hold);
        let released = hold.amount;
        self.resolve_hold(hold, end, Amount::ZERO, Some(buyer));
        let ended = HoldEnded { jti: jti.clone(), hold: record.hold.clone(), released_minor: released, state: end };
        self.emit(command, &ended);
        Ok(HoldReleased { jti: jti.clone(), hold: record.hold, released_minor: released, state: end })
    }
}

/// What the ledger keeps of a token's claims; `merchant_handle` is none for a peer's merchant.
fn token_facts(claims: &TokenClaims, merchant_handle: Option<String>) -> TokenFacts {
    TokenFacts {
        jti: claims.jti.clone(),
        hold: hold_id_for(&claims.jti),
        buyer: claims.sub.clone(),
        merchant: claims.aud.clone(),
        merchant_handle,
        via: claims.via.clone(),
        max_amount_minor: claims.max,
        order_id: claims.ord.clone(),
        resource: claims.res.clone(),
        expires_at_ms: claims.exp_ms,
    }
}

/// A settlement as the API shows it (and as refusals attach the original).
pub fn settlement_view(s: &Settlement) -> serde_json::Value {
    serde_json::to_value(SettlementFacts::from(s)).expect("settlements serialize")
}

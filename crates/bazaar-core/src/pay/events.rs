//! Paid calls' event bodies: one type per kind pay writes, each serialising to
//! exactly the body stored on the ledger (the kernel adds `authored_handle`).
//! Reputation reads `settlement.posted` through [`SettlementPosted`], whichever
//! registry side wrote it.

use super::PayEvent;
use crate::kernel::batch::EventBody;
use crate::kernel::ledger::Linked;
use crate::kernel::model::{Budget, HoldState, Settlement};
use bazaar_types::{Amount, HoldId, MemberId, OrderId, Timestamp, TokenId, TransferId};
use serde::{Deserialize, Serialize};

/// A budget's ceilings and what was spent against them (also the budget read's shape).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct BudgetFacts {
    pub agent: MemberId,
    pub per_call_max_minor: Amount,
    pub per_day_max_minor: Amount,
    pub total_max_minor: Amount,
    pub spent_total_minor: Amount,
    pub spent_today_minor: Amount,
}

impl BudgetFacts {
    /// `budget` as it stands at `now` (today's spending is counted per UTC day).
    pub fn of(budget: &Budget, now: Timestamp) -> BudgetFacts {
        BudgetFacts {
            agent: budget.agent.clone(),
            per_call_max_minor: budget.per_call_max,
            per_day_max_minor: budget.per_day_max,
            total_max_minor: budget.total_max,
            spent_total_minor: budget.spent_total,
            spent_today_minor: budget.spent_on(now.utc_day()),
        }
    }
}

/// `budget.set`: an owner set its agent's ceilings.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct BudgetSet {
    #[serde(flatten)]
    pub budget: BudgetFacts,
}

/// `transfer.minted`: the operator issued units into an owner's account.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TransferMinted {
    #[serde(flatten)]
    pub legs: Linked,
    pub owner: MemberId,
}

/// `transfer.funded`: an owner moved units to its agent.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TransferFunded {
    #[serde(flatten)]
    pub legs: Linked,
    pub agent: MemberId,
}

/// What a payment token holds and for whom (its claims, as the ledger keeps them).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TokenFacts {
    pub jti: TokenId,
    pub hold: HoldId,
    pub buyer: MemberId,
    pub merchant: MemberId,
    /// The merchant's handle here; null for a merchant on a peer registry.
    pub merchant_handle: Option<String>,
    /// The peer registry the merchant settles through; null for a local merchant.
    pub via: Option<MemberId>,
    pub max_amount_minor: Amount,
    pub order_id: OrderId,
    pub resource: String,
    pub expires_at_ms: Timestamp,
}

/// `token.issued`: a hold on the buyer's budget backs a new token.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TokenIssued {
    #[serde(flatten)]
    pub token: TokenFacts,
}

/// Who paid whom, for which order, how much: what reputation counts of a settlement.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Paid {
    pub buyer: MemberId,
    pub merchant: MemberId,
    pub order_id: OrderId,
    pub amount_minor: Amount,
}

/// The rest of a settlement row: its ids, the fee and the net, when.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SettlementRow {
    pub settlement_id: String,
    pub jti: TokenId,
    pub fee_minor: Amount,
    pub net_minor: Amount,
    pub settled_at_ms: Timestamp,
}

/// A settlement as answered and stored (also the settlement read's shape).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SettlementFacts {
    #[serde(flatten)]
    pub paid: Paid,
    #[serde(flatten)]
    pub row: SettlementRow,
}

impl From<&Settlement> for SettlementFacts {
    fn from(s: &Settlement) -> SettlementFacts {
        SettlementFacts {
            paid: Paid {
                buyer: s.buyer.clone(),
                merchant: s.merchant.clone(),
                order_id: s.order_id.clone(),
                amount_minor: s.amount,
            },
            row: SettlementRow {
                settlement_id: s.id.clone(),
                jti: s.jti.clone(),
                fee_minor: s.fee,
                net_minor: s.net,
                settled_at_ms: s.settled_at,
            },
        }
    }
}

/// How pay posted a settlement out of the token's hold.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Posting {
    pub transfers: Vec<TransferId>,
    pub link: String,
    /// What went back to the buyer from the hold.
    pub released_minor: Amount,
    pub event_seq: u64,
    /// A relayed settlement only: the whole amount, paid into the corridor.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub corridor_minor: Option<Amount>,
}

/// `settlement.posted`: a token settled, once. Pay writes it whole; a
/// merchant's registry settling a relayed token writes the same kind with its
/// own body (`federation::events::RelaySettled`), which reads here with no
/// [`Posting`]. Reputation counts [`Paid`] and `corridor`, so only those are
/// required to read a body (the rest is there on every body this build writes).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SettlementPosted {
    #[serde(flatten)]
    pub paid: Paid,
    #[serde(flatten)]
    pub row: Option<SettlementRow>,
    #[serde(flatten)]
    pub posting: Option<Posting>,
    /// Set when this registry settled for a peer's merchant (the work counts there, not here).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub corridor: Option<MemberId>,
}

/// `hold.voided` and `hold.expired`: a token's hold went back unposted; the
/// kind follows `state`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct HoldEnded {
    pub jti: TokenId,
    pub hold: HoldId,
    pub released_minor: Amount,
    pub state: HoldState,
}

impl EventBody for HoldEnded {
    type Kind = PayEvent;
    fn kind(&self) -> PayEvent {
        match self.state {
            HoldState::Expired => PayEvent::HoldExpired,
            _ => PayEvent::HoldVoided,
        }
    }
}

crate::event_bodies!(
    BudgetSet => PayEvent::BudgetSet,
    TransferMinted => PayEvent::TransferMinted,
    TransferFunded => PayEvent::TransferFunded,
    TokenIssued => PayEvent::TokenIssued,
    SettlementPosted => PayEvent::SettlementPosted,
    TermsSet => PayEvent::TermsSet,
);

/// `terms.set`: a merchant's own terms, as stored.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TermsSet {
    #[serde(flatten)]
    pub terms: super::terms::MerchantTerms,
}

//! Paid calls' answers: one type per distinct success, each serialising to
//! exactly the JSON the API has always answered. They share nested parts with
//! the event bodies (`events.rs`) but are their own types.

use super::events::{BudgetFacts, Posting, SettlementFacts, TokenFacts};
use crate::kernel::ledger::Linked;
use crate::kernel::model::HoldState;
use bazaar_types::{Amount, HoldId, MemberId, TokenId};
use serde::Serialize;

/// The budget as set.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct BudgetSet {
    #[serde(flatten)]
    pub budget: BudgetFacts,
}

/// Units minted into an owner's account.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct Minted {
    #[serde(flatten)]
    pub legs: Linked,
    pub owner: MemberId,
}

/// Units moved from an owner to its agent.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct Funded {
    #[serde(flatten)]
    pub legs: Linked,
    pub agent: MemberId,
}

/// A new payment token and what backs it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct TokenGranted {
    #[serde(flatten)]
    pub issued: TokenFacts,
    /// The signed `apt_` token itself (never stored on the ledger).
    pub token: String,
}

/// A token settled: the settlement and how it was posted.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct Settled {
    #[serde(flatten)]
    pub settlement: SettlementFacts,
    #[serde(flatten)]
    pub posting: Posting,
    /// The peer registry whose merchant this settled for, on a relayed settle.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub corridor: Option<MemberId>,
}

/// A token's hold voided or expired.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct HoldReleased {
    pub jti: TokenId,
    pub hold: HoldId,
    pub released_minor: Amount,
    pub state: HoldState,
}

crate::receipt_set! {
    /// Every success pay answers with.
    #[derive(Clone, Debug, PartialEq, Eq, Serialize)]
    #[serde(untagged)]
    pub enum Receipt {
        BudgetSet(BudgetSet),
        Minted(Minted),
        Funded(Funded),
        TokenGranted(TokenGranted),
        Settled(Settled),
        HoldReleased(HoldReleased),
        /// A merchant's terms as set.
        Terms(super::terms::MerchantTerms),
    }
}

crate::receipts_into!(Receipt: BudgetSet, Minted, Funded, TokenGranted, Settled, HoldReleased);

//! Paid calls: budgets set by owners, units minted and funded, `apt_` payment
//! tokens backed by a hold, settled exactly once by their merchant, voided by
//! the buyer or expired by the registry. Uses identity; escrow, disputes,
//! federation and the market build on it.

mod budget;
pub mod events;
pub mod receipts;
pub use receipts::Receipt;
mod settle;
pub mod terms;
pub mod token;

pub use budget::budget_view;
pub use settle::{hold_id_for, settlement_view};

/// The idempotency key a settle sent without one is recorded under, scoped to
/// the merchant: `token:<jti>`. The key names the token, so a retry of one
/// settle replays it, and a refused token never blocks a later token for the
/// same order; one payment per order is the ledger's uniqueness on
/// (merchant, order), whatever the keys. (Before 0010, the key was
/// `order:<order_id>`; the migration `0010_settle_keys_name_the_token` copies
/// each stored settlement under its token's key.)
pub fn settle_key(jti: &TokenId) -> String {
    format!("{SETTLE_KEY_PREFIX}{jti}")
}

/// The prefix of [`settle_key`].
pub const SETTLE_KEY_PREFIX: &str = "token:";

use crate::kernel::batch::Batch;
use crate::kernel::keys::Keys;
use crate::kernel::model::{DocKind, HoldState};
use crate::kernel::refusal::Refusal;
use crate::kernel::request::Caller;
use bazaar_types::{AccountId, Amount, MemberId, OrderId, TokenId};
use token::TokenClaims;

crate::event_kinds! {
    /// What paid calls write on the event ledger.
    PayEvent {
        BudgetSet => "budget.set",
        TransferMinted => "transfer.minted",
        TransferFunded => "transfer.funded",
        TokenIssued => "token.issued",
        SettlementPosted => "settlement.posted",
        HoldVoided => "hold.voided",
        HoldExpired => "hold.expired",
        TermsSet => "terms.set",
    }
}

#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
pub enum Op {
    SetBudget {
        agent: MemberId,
        per_call_max: Amount,
        per_day_max: Amount,
        total_max: Amount,
    },
    Mint {
        owner: MemberId,
        amount: Amount,
    },
    Fund {
        agent: MemberId,
        amount: Amount,
    },
    /// A token for a merchant of this registry (`claims.via` is none).
    IssueToken {
        claims: TokenClaims,
        token: String,
    },
    Settle {
        claims: TokenClaims,
        amount: Amount,
        order_id: OrderId,
    },
    VoidToken {
        jti: TokenId,
        buyer: MemberId,
    },
    ExpireHold {
        jti: TokenId,
        buyer: MemberId,
    },
    /// The merchant (or its owner) sets its own terms; `None` threshold: the registry's; `None` invited: open.
    SetTerms {
        merchant: MemberId,
        escrow_threshold: Option<Amount>,
        invited: Option<Vec<MemberId>>,
    },
}

impl Op {
    /// A stable name, used in idempotency scopes and metrics.
    /// Whether the command moves money (a credential without `pay` may not send it):
    /// every one of pay's does — a budget authorises spending, a token holds, a
    /// settlement pays, a void or expiry releases a hold.
    pub fn moves_money(&self) -> bool {
        match self {
            Op::SetBudget { .. }
            | Op::Mint { .. }
            | Op::Fund { .. }
            | Op::IssueToken { .. }
            | Op::Settle { .. }
            | Op::VoidToken { .. }
            | Op::ExpireHold { .. } => true,
            Op::SetTerms { .. } => false,
        }
    }

    pub fn name(&self) -> &'static str {
        match self {
            Op::SetBudget { .. } => "set_budget",
            Op::Mint { .. } => "mint",
            Op::Fund { .. } => "fund",
            Op::IssueToken { .. } => "issue_token",
            Op::Settle { .. } => "settle",
            Op::VoidToken { .. } => "void_token",
            Op::ExpireHold { .. } => "expire_hold",
            Op::SetTerms { .. } => "set_terms",
        }
    }

    /// The rows this command needs.
    pub fn keys(&self, keys: &mut Keys, caller: &Caller<'_>) {
        match self {
            Op::SetBudget { agent, .. } => {
                keys.members.insert(agent.clone());
                keys.budgets.insert(agent.clone());
            }
            Op::Mint { owner, .. } => {
                keys.members.insert(owner.clone());
                keys.accounts.insert(AccountId::issuance());
                keys.accounts.insert(AccountId::of_member(owner));
            }
            Op::Fund { agent, .. } => {
                keys.members.insert(agent.clone());
                keys.accounts.insert(AccountId::of_member(&caller.actor.id));
                keys.accounts.insert(AccountId::of_member(agent));
            }
            Op::IssueToken { claims, .. } => token_issue_rows(keys, claims),
            Op::Settle { claims, order_id, .. } => {
                token_rows(keys, &claims.jti, &claims.sub);
                keys.accounts.insert(AccountId::of_member(&claims.aud));
                keys.accounts.insert(AccountId::fees());
                keys.settlements_by_order.insert((claims.aud.clone(), order_id.clone()));
                keys.settlements_by_order.insert((claims.aud.clone(), claims.ord.clone()));
            }
            Op::VoidToken { jti, buyer } | Op::ExpireHold { jti, buyer } => token_rows(keys, jti, buyer),
            Op::SetTerms { merchant, invited, .. } => {
                keys.members.insert(merchant.clone());
                keys.doc(DocKind::Terms, merchant.to_string());
                for buyer in invited.iter().flatten().take(bazaar_types::limits::TERMS_INVITED_MAX) {
                    keys.members.insert(buyer.clone());
                }
            }
        }
    }

    pub(crate) fn apply(&self, batch: &mut Batch<'_>, caller: &Caller<'_>) -> Result<receipts::Receipt, Refusal> {
        Ok(match self {
            Op::SetBudget { agent, per_call_max, per_day_max, total_max } => {
                batch.set_budget(caller, agent, [*per_call_max, *per_day_max, *total_max])?.into()
            }
            Op::Mint { owner, amount } => batch.mint(caller, owner, *amount)?.into(),
            Op::Fund { agent, amount } => batch.fund(caller, agent, *amount)?.into(),
            Op::IssueToken { claims, token } => batch.issue_token(caller, claims, token)?.into(),
            Op::Settle { claims, amount, order_id } => batch.settle(caller, claims, *amount, order_id)?.into(),
            Op::VoidToken { jti, buyer } => batch.end_hold(caller, jti, buyer, HoldState::Voided)?.into(),
            Op::ExpireHold { jti, buyer } => batch.end_hold(caller, jti, buyer, HoldState::Expired)?.into(),
            Op::SetTerms { merchant, escrow_threshold, invited } => {
                receipts::Receipt::Terms(batch.set_terms(caller, merchant, *escrow_threshold, invited.as_deref())?)
            }
        })
    }
}

/// The rows issuing a token reads: the merchant, the buyer's account and budget, the token id.
pub(crate) fn token_issue_rows(keys: &mut Keys, claims: &TokenClaims) {
    keys.members.insert(claims.aud.clone());
    keys.accounts.insert(AccountId::of_member(&claims.sub));
    keys.budgets.insert(claims.sub.clone());
    keys.tokens.insert(claims.jti.clone());
    keys.doc(DocKind::Terms, claims.aud.to_string());
}

/// The rows of an issued token: its record, hold, settlement, buyer account and budget.
pub(crate) fn token_rows(keys: &mut Keys, jti: &TokenId, buyer: &MemberId) {
    keys.members.insert(buyer.clone());
    keys.tokens.insert(jti.clone());
    keys.holds.insert(hold_id_for(jti));
    keys.settlements_by_token.insert(jti.clone());
    keys.accounts.insert(AccountId::of_member(buyer));
    keys.budgets.insert(buyer.clone());
}

//! Paying's response bodies: ledger postings, budgets, tokens, settlements
//! and the event ledger.

use serde::{Deserialize, Serialize};

/// Linked transfers posted to the ledger as one (the core's `post_linked`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Posting {
    /// The transfer ids posted.
    pub transfers: Vec<String>,
    /// The link that ties the transfers together (`lnk_<seq>`).
    pub link: String,
    /// The transfers' total.
    pub amount_minor: u64,
}

/// Units issued to an owner: the ledger posting.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Minted {
    #[serde(flatten)]
    pub posting: Posting,
    /// The owner's DID.
    pub owner: String,
}

/// Units moved from the owner's account into its agent's budget account.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Funded {
    #[serde(flatten)]
    pub posting: Posting,
    /// The agent's DID.
    pub agent: String,
}

/// An agent's ceilings and what it spent against them.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Budget {
    /// The agent's DID.
    pub agent: String,
    pub per_call_max_minor: u64,
    pub per_day_max_minor: u64,
    pub total_max_minor: u64,
    pub spent_total_minor: u64,
    /// Spent on the current UTC day.
    pub spent_today_minor: u64,
}

/// A registry-signed token and the hold placed for it on the buyer's budget.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct TokenIssued {
    /// The token id (`tok_…`).
    pub jti: String,
    /// The hold's id.
    pub hold: String,
    /// The buyer agent's DID.
    pub buyer: String,
    /// The merchant's DID.
    pub merchant: String,
    /// The merchant's handle here; null for a merchant on a peer registry.
    #[cfg_attr(feature = "openapi", schema(required = true))]
    pub merchant_handle: Option<String>,
    /// The peer registry the token settles through; null for a local merchant.
    #[cfg_attr(feature = "openapi", schema(required = true))]
    pub via: Option<String>,
    pub max_amount_minor: u64,
    pub order_id: String,
    pub resource: String,
    /// Unix milliseconds.
    pub expires_at_ms: i64,
    /// The `apt_…` token to hand the merchant.
    pub token: String,
}

/// What verify says about a token: a receipt check, never a work order. One
/// of three shapes, told apart by `genuine` and by `issuer`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(untagged)]
pub enum TokenCheck {
    /// A genuine token a peer registry issued, to settle through this one.
    Foreign(ForeignTokenCheck),
    /// A genuine token of this registry.
    Local(LocalTokenCheck),
    /// Not a genuine token: `genuine` is false.
    NotGenuine(NotGenuine),
}

impl TokenCheck {
    /// Whether the token is genuine (never a reason to do paid work: a settled token is genuine too).
    pub fn genuine(&self) -> bool {
        !matches!(self, TokenCheck::NotGenuine(_))
    }

    /// The token's state (`open`, `settled`, … or a peer token's relay state); none when not genuine.
    pub fn state(&self) -> Option<&str> {
        match self {
            TokenCheck::Local(check) => Some(&check.state),
            TokenCheck::Foreign(check) => Some(&check.state),
            TokenCheck::NotGenuine(_) => None,
        }
    }
}

/// What a token says, as signed (`apt_<claims>.<signature>`, the claims base64url JSON).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct TokenClaims {
    /// The claims' version: 1.
    pub v: u8,
    /// The issuing registry's DID.
    pub iss: String,
    /// The token id (`tok_…`).
    pub jti: String,
    /// The buyer.
    pub sub: String,
    /// The merchant: the only member that may settle it.
    pub aud: String,
    /// The most it may be settled for, minor units.
    pub max: u64,
    /// The order it pays for.
    pub ord: String,
    /// The resource it was asked for.
    pub res: String,
    pub iat_ms: i64,
    pub exp_ms: i64,
    /// Cross-registry tokens only: the peer registry the merchant settles through.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub via: Option<String>,
}

/// A genuine token of this registry: its state, claims and settlement.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct LocalTokenCheck {
    /// True.
    pub genuine: bool,
    /// `open`, `settled`, `expired` or `voided`.
    pub state: String,
    /// Always false: a genuine token is not a reason to do paid work.
    pub work_order: bool,
    /// The token's signed claims.
    pub claims: TokenClaims,
    /// The settlement; null until there is one.
    #[cfg_attr(feature = "openapi", schema(required = true))]
    pub settlement: Option<Settlement>,
}

/// A genuine token of a peer registry, to settle through this one.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ForeignTokenCheck {
    /// True.
    pub genuine: bool,
    /// `unsettled`, `settling`, `settled`, `refused` or `stuck`.
    pub state: String,
    /// Always false.
    pub work_order: bool,
    /// The issuing registry.
    pub issuer: String,
    /// The token's signed claims.
    pub claims: TokenClaims,
    /// The relay to the issuing registry; null until one is opened.
    #[cfg_attr(feature = "openapi", schema(value_type = Option<Object>, required = true))]
    pub relay: Option<serde_json::Value>,
}

/// A token that is not genuine, and why.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct NotGenuine {
    /// False.
    pub genuine: bool,
    pub reason: String,
}

/// A settlement: the amount, the registry's fee and what the merchant nets.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Settlement {
    pub settlement_id: String,
    /// The token settled.
    pub jti: String,
    pub buyer: String,
    pub merchant: String,
    pub order_id: String,
    pub amount_minor: u64,
    pub fee_minor: u64,
    pub net_minor: u64,
    /// Unix milliseconds.
    pub settled_at_ms: i64,
}

/// A settlement receipt. A settlement here also carries its ledger posting
/// (`transfers`, `link`, `released_minor`, `event_seq`); one relayed to a peer
/// registry carries `via` and the issuer's receipt instead.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct SettlementReceipt {
    #[serde(flatten)]
    pub settlement: Settlement,
    /// The transfer ids posted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub transfers: Option<Vec<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub link: Option<String>,
    /// What was left of the hold and went back to the buyer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub released_minor: Option<u64>,
    /// The event-ledger position of the settlement.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub event_seq: Option<u64>,
    /// Set when this registry settled for a peer's merchant.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub corridor: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub corridor_minor: Option<u64>,
    /// The issuing registry, for a peer's token settled through it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub via: Option<String>,
    /// The issuing registry's own receipt, for a peer's token.
    #[cfg_attr(feature = "openapi", schema(value_type = Option<Object>))]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub issuer_receipt: Option<serde_json::Value>,
}

/// A token voided: its hold ended and the units went back.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Voided {
    pub jti: String,
    pub hold: String,
    pub released_minor: u64,
    /// The hold's end state (`voided`).
    pub state: String,
}

/// One entry of the hash-chained event ledger.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Event {
    pub seq: u64,
    /// The previous event's hash.
    pub prev_hash: String,
    pub hash: String,
    /// What happened, e.g. `settlement.posted`.
    pub kind: String,
    /// The event's own body; its members depend on `kind`.
    #[cfg_attr(feature = "openapi", schema(value_type = Object))]
    pub body: serde_json::Value,
    pub authored_by: String,
    pub on_behalf_of: String,
    /// Unix milliseconds.
    pub at: i64,
}

/// A page of the event ledger.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct EventPage {
    pub events: Vec<Event>,
    /// Pass as `after` for the next page; null on an empty page.
    #[cfg_attr(feature = "openapi", schema(required = true))]
    pub next_after: Option<u64>,
}

/// One account and its balances (signed balances as decimal strings: only issuance goes below zero).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct AccountBalance {
    pub id: String,
    /// Posted credits − posted debits, in minor units (a decimal string).
    pub balance: String,
    /// What can still be debited or held: balance − pending (a decimal string).
    pub available: String,
    pub pending: u64,
    pub credits_posted: u64,
    pub debits_posted: u64,
}

/// A page of accounts.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct AccountPage {
    pub accounts: Vec<AccountBalance>,
    /// Pass as `after` for the next page; null on the last page.
    #[cfg_attr(feature = "openapi", schema(required = true))]
    pub next_after: Option<String>,
}

/// One transfer as an account saw it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct AccountTransfer {
    /// The transfer's position in the commit log (pass the last as `after`).
    pub position: i64,
    pub id: String,
    /// e.g. `payment`, `fee`, `escrow`.
    pub kind: String,
    /// `debit` (units left this account) or `credit`.
    pub direction: String,
    pub counterparty: String,
    pub amount: u64,
    /// Transfers sharing a link were committed together.
    pub link: String,
    pub authored_by: String,
    pub on_behalf_of: String,
    /// Unix milliseconds.
    pub at: i64,
}

/// An account and a page of the transfers that moved it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct AccountHistory {
    pub account: AccountBalance,
    pub transfers: Vec<AccountTransfer>,
    /// Pass as `after` to continue; null once the whole log was read.
    #[cfg_attr(feature = "openapi", schema(required = true))]
    pub next_after: Option<i64>,
}

/// One batch item's answer, exactly as its single call would have answered.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct BatchAnswer {
    /// The single call's HTTP status (201 for a token, 200 for a settlement, or the refusal's).
    pub status: u16,
    /// Answered from an idempotency record (the single call's `Idempotent-Replayed`).
    pub replayed: bool,
    /// The single call's body: the receipt, or the problem+json refusal.
    #[cfg_attr(feature = "openapi", schema(value_type = Object))]
    pub body: serde_json::Value,
}

/// A batch's answers, one per item, in the items' order.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct BatchAnswers {
    pub results: Vec<BatchAnswer>,
}

/// The terms as stored, or the registry's defaults for a merchant without its own.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Terms {
    pub merchant: String,
    pub escrow_threshold_minor: u64,
    pub registry_escrow_threshold_minor: u64,
    /// Null: open to every buyer.
    #[cfg_attr(feature = "openapi", schema(required = true))]
    pub invited_buyers: Option<Vec<String>>,
    /// Whether the merchant set its own (false: the registry's defaults).
    pub own: bool,
    /// Who set them (the merchant or its owner); absent for the registry's defaults.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub set_by: Option<String>,
    /// Unix milliseconds; absent for the registry's defaults.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub set_at: Option<i64>,
}

/// The terms as `PUT` stored them (the receipt of `set_terms`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct StoredTerms {
    pub merchant: String,
    /// The merchant's own threshold (at most the registry's when set).
    pub escrow_threshold_minor: u64,
    /// Null: open to every buyer.
    #[cfg_attr(feature = "openapi", schema(required = true))]
    pub invited_buyers: Option<Vec<String>>,
    pub set_by: String,
    /// Unix milliseconds.
    pub set_at: i64,
}

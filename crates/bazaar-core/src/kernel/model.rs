//! The rows the core reads and writes. Storage adapters persist them as they are.

use bazaar_types::{AccountId, Amount, HoldId, MemberId, OrderId, Timestamp, TokenId, TransferId};
use serde::{Deserialize, Serialize};

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MemberKind {
    Registry,
    Operator,
    Owner,
    Agent,
    /// A peer registry this one recognises; it acts only through signed server-to-server requests.
    Peer,
}

impl MemberKind {
    pub fn as_str(self) -> &'static str {
        match self {
            MemberKind::Registry => "registry",
            MemberKind::Operator => "operator",
            MemberKind::Owner => "owner",
            MemberKind::Agent => "agent",
            MemberKind::Peer => "peer",
        }
    }
    pub fn parse(text: &str) -> Option<MemberKind> {
        Some(match text {
            "registry" => MemberKind::Registry,
            "operator" => MemberKind::Operator,
            "owner" => MemberKind::Owner,
            "agent" => MemberKind::Agent,
            "peer" => MemberKind::Peer,
            _ => return None,
        })
    }
}

/// The operator's fixed member id (it has no key of its own; it signs in with a credential).
pub const OPERATOR_ID: &str = "did:bazaar:operator";
/// The registry's dispute desk: an agent of the operator and the default arbiter.
pub const DESK_ID: &str = "did:bazaar:dispute-desk";
pub const DESK_HANDLE: &str = "dispute-desk";

/// A person, an agent, the operator or the registry itself.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Member {
    pub id: MemberId,
    pub kind: MemberKind,
    /// The principal an agent acts for; `None` for everyone else.
    pub owner: Option<MemberId>,
    pub handle: String,
    pub created_at: Timestamp,
}

impl Member {
    /// Whom this member's acts are on behalf of: an agent's owner, else itself.
    pub fn principal(&self) -> &MemberId {
        self.owner.as_ref().unwrap_or(&self.id)
    }

    /// Whether `account` is one this agent's owner holds: the owner itself or
    /// any of its agents (this one included). False for a member without an owner.
    pub fn owner_holds(&self, account: &Member) -> bool {
        self.owner.as_ref().is_some_and(|owner| &account.id == owner || account.owner.as_ref() == Some(owner))
    }
}

/// A handle ever worn. A retired handle stays here forever so nobody can take it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct HandleRow {
    pub handle: String,
    pub member: MemberId,
    pub retired: bool,
    pub since: Timestamp,
}

/// A bearer credential, known only by its SHA-256.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Credential {
    pub hash: String,
    pub member: MemberId,
    pub created_at: Timestamp,
    pub revoked_at: Option<Timestamp>,
    /// What the credential may do, canonical (`jobs,read,talk`: sorted, comma-joined);
    /// `None` is every scope, as every credential before scopes.
    pub scopes: Option<String>,
}

/// The scopes an owner may give an agent's credential. `pay` is the one
/// that moves money: without it every money-moving command is refused.
pub const CREDENTIAL_SCOPES: &[&str] = &["jobs", "pay", "read", "talk"];

impl Credential {
    /// Whether this credential may move money.
    pub fn may_spend(&self) -> bool {
        self.has_scope("pay")
    }

    /// Whether this credential may speak in the conversation plane: post,
    /// react, edit, delete, open rooms and DMs, join, manage members, publish
    /// a sealing key.
    pub fn may_talk(&self) -> bool {
        self.has_scope("talk")
    }

    /// Whether this credential has `scope` (one with no scopes has every scope).
    fn has_scope(&self, scope: &str) -> bool {
        self.scopes.as_deref().is_none_or(|scopes| scopes.split(',').any(|s| s == scope))
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Invite {
    pub code_hash: String,
    pub owner: MemberId,
    pub expires_at: Timestamp,
    pub used_by: Option<MemberId>,
    pub used_at: Option<Timestamp>,
}

/// A ledger account. Balances are cached sums of the immutable transfers;
/// `bazaar audit` recomputes them.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Account {
    pub id: AccountId,
    /// Only the issuance account may go below zero.
    pub allow_negative: bool,
    pub debits_posted: u64,
    pub credits_posted: u64,
    pub debits_pending: u64,
}

impl Account {
    pub fn new(id: AccountId, allow_negative: bool) -> Account {
        Account { id, allow_negative, debits_posted: 0, credits_posted: 0, debits_pending: 0 }
    }
    /// Posted balance (credits − debits); negative only for issuance.
    pub fn balance(&self) -> i128 {
        self.credits_posted as i128 - self.debits_posted as i128
    }
    /// What can still be debited or held.
    pub fn available(&self) -> i128 {
        self.balance() - self.debits_pending as i128
    }
}

/// An agent's spending ceilings, set by its owner, and what it has committed.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Budget {
    pub agent: MemberId,
    pub per_call_max: Amount,
    pub per_day_max: Amount,
    pub total_max: Amount,
    /// Held plus settled, over the agent's life.
    pub spent_total: Amount,
    /// The UTC day `spent_day` counts.
    pub day: i64,
    pub spent_day: Amount,
}

impl Budget {
    pub fn zero(agent: MemberId) -> Budget {
        Budget {
            agent,
            per_call_max: Amount::ZERO,
            per_day_max: Amount::ZERO,
            total_max: Amount::ZERO,
            spent_total: Amount::ZERO,
            day: 0,
            spent_day: Amount::ZERO,
        }
    }
    pub fn spent_on(&self, day: i64) -> Amount {
        if self.day == day {
            self.spent_day
        } else {
            Amount::ZERO
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum HoldState {
    Pending,
    Posted,
    Voided,
    Expired,
}

impl HoldState {
    pub fn as_str(self) -> &'static str {
        match self {
            HoldState::Pending => "pending",
            HoldState::Posted => "posted",
            HoldState::Voided => "voided",
            HoldState::Expired => "expired",
        }
    }
    pub fn parse(text: &str) -> Option<HoldState> {
        Some(match text {
            "pending" => HoldState::Pending,
            "posted" => HoldState::Posted,
            "voided" => HoldState::Voided,
            "expired" => HoldState::Expired,
            _ => return None,
        })
    }
}

/// A pending debit on one account. It resolves at most once.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Hold {
    pub id: HoldId,
    pub account: AccountId,
    pub amount: Amount,
    pub created_at: Timestamp,
    pub expires_at: Timestamp,
    pub state: HoldState,
    pub posted_amount: Amount,
    pub resolved_at: Option<Timestamp>,
}

/// The registry's record of a payment token it issued.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TokenRecord {
    pub jti: TokenId,
    pub buyer: MemberId,
    pub merchant: MemberId,
    pub max_amount: Amount,
    pub order_id: OrderId,
    pub resource: String,
    pub hold: HoldId,
    pub issued_at: Timestamp,
    pub expires_at: Timestamp,
}

/// One settled paid call. Unique by token and by (merchant, order).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Settlement {
    pub id: String,
    pub jti: TokenId,
    pub buyer: MemberId,
    pub merchant: MemberId,
    pub order_id: OrderId,
    pub amount: Amount,
    pub fee: Amount,
    pub net: Amount,
    pub settled_at: Timestamp,
}

impl Settlement {
    /// The id a settlement of token `jti` has (stores derive it rather than keep it: docs/design/stored-shapes.md).
    pub fn id_for(jti: &TokenId) -> String {
        format!("stl_{jti}")
    }

    /// The settlement of `token` (its id, buyer, merchant and order) for `amount`, `fee` of it to the registry.
    pub fn of(
        token: (&TokenId, &MemberId, &MemberId, &OrderId),
        amount: Amount,
        fee: Amount,
        at: Timestamp,
    ) -> Settlement {
        let (jti, buyer, merchant, order_id) = token;
        Settlement {
            id: Settlement::id_for(jti),
            jti: jti.clone(),
            buyer: buyer.clone(),
            merchant: merchant.clone(),
            order_id: order_id.clone(),
            amount,
            fee,
            net: amount.checked_sub(fee).expect("fee never exceeds amount"),
            settled_at: at,
        }
    }

    /// The settlement of a token this registry issued.
    pub fn new(record: &TokenRecord, amount: Amount, fee: Amount, at: Timestamp) -> Settlement {
        Settlement::of((&record.jti, &record.buyer, &record.merchant, &record.order_id), amount, fee, at)
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TransferKind {
    Issuance,
    Funding,
    Payment,
    Fee,
    /// Balance → stake account, and back on withdrawal.
    Stake,
    Unstake,
    /// An escrowed milestone paid to its seller.
    Release,
    /// Units returned to a claimant by a dispute ruling.
    Refund,
    /// Stake taken from a merchant by a ruling.
    Slash,
    /// An appeal bond forfeited to the other party.
    Bond,
    /// A job's bounty paid to its worker's reward destination on an accepted outcome.
    Reward,
    /// A corridor netted: units paid between registries off the ledger, recorded by both.
    Netting,
}

impl TransferKind {
    pub fn as_str(self) -> &'static str {
        match self {
            TransferKind::Issuance => "issuance",
            TransferKind::Funding => "funding",
            TransferKind::Payment => "payment",
            TransferKind::Fee => "fee",
            TransferKind::Stake => "stake",
            TransferKind::Unstake => "unstake",
            TransferKind::Release => "release",
            TransferKind::Refund => "refund",
            TransferKind::Slash => "slash",
            TransferKind::Bond => "bond",
            TransferKind::Reward => "reward",
            TransferKind::Netting => "netting",
        }
    }
    pub fn parse(text: &str) -> Option<TransferKind> {
        Some(match text {
            "issuance" => TransferKind::Issuance,
            "funding" => TransferKind::Funding,
            "payment" => TransferKind::Payment,
            "fee" => TransferKind::Fee,
            "stake" => TransferKind::Stake,
            "unstake" => TransferKind::Unstake,
            "release" => TransferKind::Release,
            "refund" => TransferKind::Refund,
            "slash" => TransferKind::Slash,
            "bond" => TransferKind::Bond,
            "reward" => TransferKind::Reward,
            "netting" => TransferKind::Netting,
            _ => return None,
        })
    }
}

/// An immutable posted movement of units. Corrections are new transfers.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Transfer {
    pub id: TransferId,
    pub debit: AccountId,
    pub credit: AccountId,
    pub amount: Amount,
    pub kind: TransferKind,
    /// The hold this transfer posts, if any.
    pub hold: Option<HoldId>,
    /// Transfers sharing a link id were committed all together.
    pub link: String,
    pub authored_by: MemberId,
    pub on_behalf_of: MemberId,
    pub at: Timestamp,
}

/// What a request under an idempotency key produced. Refusals are kept too,
/// so a retry cannot later succeed by surprise.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct IdempotencyRecord {
    pub scope: String,
    pub key: String,
    pub fingerprint: String,
    /// The outcome as stored: `{"Ok": <the receipt's JSON>}` or `{"Err": <refusal>}`
    /// (`kernel::batch::record`).
    pub outcome: String,
    /// The receipt's tag (`pay.Settled`) that reads `outcome` back as its type; empty for a refusal and
    /// for records written before receipts were tagged. A column of its own, so a build that does not
    /// know it still reads `outcome`.
    #[serde(default)]
    pub tag: String,
    pub created_at: Timestamp,
}

/// One entry of the hash-chained event ledger.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Event {
    pub seq: u64,
    pub prev_hash: String,
    pub hash: String,
    pub kind: String,
    pub body: serde_json::Value,
    pub authored_by: MemberId,
    pub on_behalf_of: MemberId,
    pub at: Timestamp,
}

/// What a merchant learns from verify: a receipt check, never a work order.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TokenState {
    Open,
    Settled,
    Expired,
    Voided,
}

impl TokenState {
    pub fn of(hold: &Hold, now: Timestamp) -> TokenState {
        match hold.state {
            HoldState::Posted => TokenState::Settled,
            HoldState::Voided => TokenState::Voided,
            HoldState::Expired => TokenState::Expired,
            HoldState::Pending if now >= hold.expires_at => TokenState::Expired,
            HoldState::Pending => TokenState::Open,
        }
    }
}

/// The kinds of state-machine documents: the kernel's table of document kinds,
/// as stored (each capability owns the body of its kinds).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DocKind {
    Contract,
    Dispute,
    Stake,
    /// A peer registry this one recognises.
    Peer,
    /// Reputation imported from a peer's passport, per (subject, issuer).
    Import,
    /// A cross-registry settlement relayed to the buyer's registry.
    Relay,
    /// A relay the sweeper stopped retrying, for the operators.
    Recovery,
    /// A corridor netting statement both registries sign, by statement id.
    Netting,
    /// A product a seller lists in the storefront.
    Listing,
    /// A buyer's request for quote, with every offer on it.
    Rfq,
    /// A storefront order: one authorization, a share per maker.
    Order,
    /// An owner's order policy for one agent (when a person must approve).
    Policy,
    /// An uploaded file stored as a document by builds before the blob table;
    /// read-only now (new files go to the blob table, see [`Blob`]).
    Blob,
    /// A job's reward, funded when the job is posted (the labor market).
    Bounty,
    /// A bounty paid out: the worker's ledger-confirmed earning.
    Reward,
    /// An owner's exact authorization for its agent to pay a specialist for one task.
    ServiceAuthorization,
    /// A fixed-price guest hire of another owner's specialist, its terms locked at agreement.
    Hire,
    /// A prepaid priority lease at a worker's queue.
    Lease,
    /// A merchant's own terms: its escrow threshold and a pilot's invited buyers.
    Terms,
}

impl DocKind {
    pub fn as_str(self) -> &'static str {
        match self {
            DocKind::Contract => "contract",
            DocKind::Dispute => "dispute",
            DocKind::Stake => "stake",
            DocKind::Peer => "peer",
            DocKind::Import => "import",
            DocKind::Relay => "relay",
            DocKind::Recovery => "relay_recovery",
            DocKind::Netting => "netting",
            DocKind::Listing => "listing",
            DocKind::Rfq => "rfq",
            DocKind::Order => "order",
            DocKind::Policy => "policy",
            DocKind::Blob => "blob",
            DocKind::Bounty => "bounty",
            DocKind::Reward => "reward",
            DocKind::ServiceAuthorization => "service_authorization",
            DocKind::Hire => "hire",
            DocKind::Lease => "lease",
            DocKind::Terms => "terms",
        }
    }
    pub fn parse(text: &str) -> Option<DocKind> {
        Some(match text {
            "contract" => DocKind::Contract,
            "dispute" => DocKind::Dispute,
            "stake" => DocKind::Stake,
            "peer" => DocKind::Peer,
            "import" => DocKind::Import,
            "relay" => DocKind::Relay,
            "relay_recovery" => DocKind::Recovery,
            "netting" => DocKind::Netting,
            "listing" => DocKind::Listing,
            "rfq" => DocKind::Rfq,
            "order" => DocKind::Order,
            "policy" => DocKind::Policy,
            "blob" => DocKind::Blob,
            "bounty" => DocKind::Bounty,
            "reward" => DocKind::Reward,
            "service_authorization" => DocKind::ServiceAuthorization,
            "hire" => DocKind::Hire,
            "lease" => DocKind::Lease,
            "terms" => DocKind::Terms,
            _ => return None,
        })
    }
}

/// A state-machine document as stored: the capability that owns the kind owns
/// the JSON body's shape; adapters keep it as text
/// with two indexable columns: when the sweeper must next look at it
/// (`due_at`) and who may list it (`parties`). Money never lives here: every
/// unit a document speaks of is a hold or a transfer in the ledger.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct DocRow {
    pub kind: DocKind,
    pub id: String,
    pub body: serde_json::Value,
    pub due_at: Option<Timestamp>,
    /// Members this document concerns; set when it is created and never changed.
    pub parties: Vec<MemberId>,
}

/// An uploaded file (a courier receipt's image), content-addressed: stored
/// once, in its own table, by the lowercase hex SHA-256 of its bytes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Blob {
    pub sha256: String,
    pub content_type: String,
    pub bytes: Vec<u8>,
    /// Members who may read it.
    pub parties: Vec<MemberId>,
    pub created_at: Timestamp,
}

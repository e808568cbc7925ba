//! Hiring: an owner's service authorization and the one payment it allows, guest hires, priority leases.

use serde::{Deserialize, Serialize};

/// An owner's exact authorization of one payment by one of its agents to one specialist for one task.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ServiceAuthorization {
    /// `sva_…`
    pub id: String,
    pub owner: String,
    /// The hiring agent: the only member that pays, from its own account and budget.
    pub agent: String,
    /// The task (a job's Nostr event id, 64 hex) the specialist is paid for.
    pub task: String,
    pub specialist: String,
    /// The account paid: the specialist, its owner or one of its owner's agents.
    pub pay_to: String,
    /// Gross, before the protocol fee; zero is sponsorship.
    pub amount_minor: u64,
    /// `authorized`, `sponsored` (a zero fee: recorded, never paid), `paid` or `revoked`.
    pub state: String,
    pub created_at: i64,
    #[cfg_attr(feature = "openapi", schema(required = true))]
    pub resolved_at: Option<i64>,
    /// The payment, once made.
    #[cfg_attr(feature = "openapi", schema(required = true))]
    pub payment: Option<ServicePayment>,
}

/// The one payment an authorization allows: its terms, gross, fee and net, and the transfers that moved it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ServicePayment {
    pub authorization: String,
    pub agent: String,
    pub task: String,
    pub specialist: String,
    pub pay_to: String,
    pub amount_minor: u64,
    pub gross_minor: u64,
    pub fee_minor: u64,
    pub net_minor: u64,
    pub transfers: Vec<String>,
    pub link: String,
    pub paid_at_ms: i64,
}

/// Authorizations naming a party, by id.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct AuthorizationPage {
    pub authorizations: Vec<ServiceAuthorization>,
    /// Ask again with `after` set to this for the next page; null on the last.
    #[cfg_attr(feature = "openapi", schema(required = true))]
    pub next_after: Option<String>,
}

/// A guest hire: terms locked when agreed, paid only on a verified response.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Hire {
    /// `hir_…`
    pub id: String,
    pub hirer: String,
    pub task: String,
    pub specialist: String,
    pub price_minor: u64,
    /// The hirer's own account: the only one that pays.
    pub paying_account: String,
    pub pay_to: String,
    /// The specialist's did:key signature (base64url) over the offer.
    pub offer_signature: String,
    /// The guest conversation (a DM) the hire was arranged in.
    #[cfg_attr(feature = "openapi", schema(required = true))]
    pub conversation: Option<String>,
    /// The escrowed contract the hire rides, with the desk as arbiter.
    #[cfg_attr(feature = "openapi", schema(required = true))]
    pub contract: Option<String>,
    /// `agreed` or `paid`.
    pub state: String,
    pub agreed_at: i64,
    #[cfg_attr(feature = "openapi", schema(required = true))]
    pub acceptance: Option<Acceptance>,
    #[cfg_attr(feature = "openapi", schema(required = true))]
    pub payment: Option<HirePayment>,
}

/// The hirer's acceptance: the response it accepted, not a quality grade.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Acceptance {
    /// The specialist's signed result event (a Nostr id) the registry verified.
    pub result_event: String,
    pub accepted_at_ms: i64,
}

/// A hire's or a lease's payment.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct HirePayment {
    pub gross_minor: u64,
    pub fee_minor: u64,
    pub net_minor: u64,
    pub transfers: Vec<String>,
    pub link: String,
    /// The contract whose milestone was released, for an escrowed hire.
    #[cfg_attr(feature = "openapi", schema(required = true))]
    pub contract: Option<String>,
}

/// Hires naming a party, by id.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct HirePage {
    pub hires: Vec<Hire>,
    #[cfg_attr(feature = "openapi", schema(required = true))]
    pub next_after: Option<String>,
}

/// Prepaid queue priority at a worker for the payer's own task identity, and how it reads now.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Lease {
    /// `lse_…`
    pub id: String,
    /// The paying agent.
    pub payer: String,
    /// The task identity (x-only Nostr key, hex) whose jobs get priority: the payer's own.
    pub identity: String,
    pub worker: String,
    pub pay_to: String,
    pub price_minor: u64,
    pub starts_at: i64,
    pub ends_at: i64,
    pub payment: HirePayment,
    /// When the worker published its receipt; until then the lease is a recovery case.
    #[cfg_attr(feature = "openapi", schema(required = true))]
    pub receipt_at: Option<i64>,
    /// `active`, `ended`, or `recovery` (paid, no receipt: never priority).
    pub status: String,
}

/// Leases naming a party, by id, each with its status now.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct LeasePage {
    pub leases: Vec<Lease>,
    #[cfg_attr(feature = "openapi", schema(required = true))]
    pub next_after: Option<String>,
}

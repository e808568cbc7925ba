//! What an owner reads about its agents: the list of them with their money
//! and ceilings (`/v1/me/agents`), and one agent's spending across
//! capabilities (`/v1/agents/{agent}/spending`), in ledger units.

use crate::bounty::{Bounty, Earnings};
use crate::hire::{Hire, Lease, ServiceAuthorization};
use crate::pay::Budget;
use serde::{Deserialize, Serialize};

/// One of the caller's agents with its balance, what is held, its budget and its locked stake.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct OwnedAgent {
    pub id: String,
    pub handle: String,
    /// `null` until the agent's account has moved.
    #[cfg_attr(feature = "openapi", schema(required = true))]
    pub balance_minor: Option<i64>,
    #[cfg_attr(feature = "openapi", schema(required = true))]
    pub available_minor: Option<i64>,
    #[cfg_attr(feature = "openapi", schema(required = true))]
    pub held_minor: Option<u64>,
    /// `null` until the owner sets one.
    #[cfg_attr(feature = "openapi", schema(required = true))]
    pub budget: Option<Budget>,
    pub stake_minor: i64,
}

/// The caller's agents (at most `AGENTS_LISTED_MAX`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct OwnedAgents {
    pub agents: Vec<OwnedAgent>,
    /// False when the owner has more agents than one answer lists.
    pub complete: bool,
}

/// An agent's balance: what it can spend now and what is held.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct SpendingBalance {
    pub available_minor: i64,
    pub pending_minor: u64,
}

/// The service authorizations an agent holds (at most `SPENDING_RECORDS_MAX`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct AuthorizationRecords {
    pub records: Vec<ServiceAuthorization>,
    /// False when there were more than one answer reads.
    pub complete: bool,
}

/// The guest hires naming an agent.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct HireRecords {
    pub records: Vec<Hire>,
    pub complete: bool,
}

/// The leases naming an agent, each with its status now.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct LeaseRecords {
    pub records: Vec<Lease>,
    pub complete: bool,
}

/// The bounties an agent funded.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct BountyRecords {
    pub records: Vec<Bounty>,
    pub complete: bool,
}

/// The owner's view of one agent's spending, every figure in ledger units (minor).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Spending {
    pub agent: String,
    /// Always `ledger units (minor)`.
    pub asset: String,
    #[cfg_attr(feature = "openapi", schema(required = true))]
    pub balance: Option<SpendingBalance>,
    #[cfg_attr(feature = "openapi", schema(required = true))]
    pub budget: Option<Budget>,
    pub service_authorizations: AuthorizationRecords,
    pub hires: HireRecords,
    pub leases: LeaseRecords,
    /// Leases paid for with no receipt from the worker.
    pub leases_in_recovery: u64,
    pub bounties_funded: BountyRecords,
    pub earnings: Earnings,
    /// What this view cannot show: the records on the worker's machine.
    pub not_here: String,
}

//! The chamber's catalogue of attacks: what a visitor can try, and the
//! refusal each must meet.

use serde::{Deserialize, Serialize};

/// One attack and the refusal code it must meet.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Attack {
    pub name: String,
    /// The stable code the registry must refuse it with.
    pub expect: String,
}

/// Every attack, and how many may run a minute on this node.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct AttackCatalogue {
    pub attacks: Vec<Attack>,
    pub per_minute_max: u64,
}

/// What pressing one attack came to in a scratch registry, and whether this registry recorded the refusal.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct AttackVerdict {
    pub name: String,
    /// What the attack sent, in words.
    pub tried: String,
    /// The HTTP status it met (0 where the attack is not an HTTP request).
    pub status: u16,
    /// The refusal code it met.
    pub code: String,
    /// Whether that is the status and code the catalogue expects.
    pub refused_as_expected: bool,
    /// Whether every party's balance is what it was before the press.
    pub balances_unchanged: bool,
    /// The kinds of the events appended during the press (only `refusal.recorded` may be).
    pub events_appended: Vec<String>,
    pub ledger_unchanged: bool,
    /// Whether this registry appended its one record of the press (only for a refusal as expected).
    pub recorded: bool,
}

/// What the chamber's run buttons can do on this registry.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct RunsAvailable {
    /// Whether the binary attached the runs (the story, the pilot, the federation phase).
    pub story: bool,
    /// The model the AI buyer agent uses; `null` when none is configured.
    pub agent_model: Option<String>,
    pub signed_in_as_operator: bool,
    /// The AI run's request when none is given.
    pub default_request: String,
}

/// The scripted story's report: the order waiting at its approval link, and how it got there.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct StoryReport {
    /// `story`.
    pub run: String,
    /// The suffix every handle of this run's cast ends in.
    pub cast: String,
    /// The order's id.
    pub order: String,
    pub total_minor: u64,
    pub approval_url: String,
    /// The throwaway hotel owner's credential, to approve the order with.
    pub hotel_owner_credential: Option<String>,
    /// (maker, unit price, units, its refusal code or `valid`) for every proposal.
    #[cfg_attr(feature = "openapi", schema(value_type = Vec<Vec<crate::OpenObject>>))]
    pub proposals: Vec<(String, u64, u64, String)>,
    /// The closed request's allocation, as `POST /v1/rfqs/{id}/close` answers it.
    #[cfg_attr(feature = "openapi", schema(value_type = crate::OpenObject))]
    pub allocation: serde_json::Value,
    /// What the buyer searched for that nobody sells.
    pub unmet: crate::market::UnmetSearches,
}

/// The pilot's proof: paid calls through the paid-route middleware with crashes, read back through the API.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct PilotProof {
    /// `pilot`.
    pub run: String,
    pub cast: String,
    pub calls: u32,
    /// Settlements on the merchant's account: one per order.
    pub settlements: u64,
    /// Times the merchant's work ran: one per order.
    pub work_runs: u64,
    pub requests_sent: u64,
    /// Answers the merchant gave from its work receipts.
    pub replayed_answers: u64,
    pub buyer_paid_minor: i64,
    pub merchant_received_minor: i64,
    /// Σ of every account's balance, a decimal string: `0`.
    pub balance_sum_minor: String,
}

/// The peer registry of the federation run.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct PeerShown {
    pub did: String,
    pub url: String,
}

/// The stranger's paid call here, relayed through its own registry, and its retry.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct StrangerCall {
    pub order: String,
    pub status: u16,
    pub settlement: Option<String>,
    /// The retry was answered from the merchant's work receipt.
    pub retry_replayed: bool,
}

/// The stranger joined here as a guest and funded through the corridor.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct GuestShown {
    pub joined_as: String,
    pub funded_minor: u64,
    pub balance_minor: i64,
}

/// The guest's escrowed order.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct EscrowShown {
    pub contract: String,
    pub milestone_minor: u64,
    pub state: String,
}

/// The federation phase's proof: a stranger from a peer registry pays here, joins as a guest and orders.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct FederationProof {
    /// `federation`.
    pub run: String,
    pub cast: String,
    pub peer: PeerShown,
    /// The stranger's DID.
    pub stranger: String,
    /// This registry had never seen the stranger before the run.
    pub unknown_here_before: bool,
    pub call: StrangerCall,
    pub guest: GuestShown,
    pub escrow: EscrowShown,
    pub stranger_on_peer_minor: i64,
    pub stranger_paid_minor: u64,
    pub stranger_funds_minor: u64,
    pub atelier_received_minor: i64,
    /// The corridor account's balance here, a decimal string.
    pub corridor_here_minor: String,
    /// The corridor account's balance on the peer, a decimal string.
    pub corridor_on_peer_minor: String,
    pub peer_audit_ok: bool,
}

/// One tool call the AI buyer agent's model made and what came back.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct AgentStep {
    pub tool: String,
    /// The arguments the model chose, as it sent them (free-form: a model's output).
    #[cfg_attr(feature = "openapi", schema(value_type = crate::OpenObject))]
    pub arguments: serde_json::Value,
    /// False when the tool answered with an error (a refusal's code is in `result`).
    pub ok: bool,
    pub result: String,
}

/// How an AI buyer agent's run ended.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct AgentRun {
    pub model: String,
    pub steps: Vec<AgentStep>,
    /// `approval_link` (the order waits for a person), `answered` (the model stopped with words), or `stopped`.
    pub outcome: String,
    pub approval_url: Option<String>,
    /// The model's last words, when it answered.
    pub answer: Option<String>,
    /// Why the run stopped, when it did.
    pub error: Option<String>,
}

/// The AI buyer agent's run on a request in words.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct AgentReport {
    /// `agent`.
    pub run: String,
    pub cast: String,
    pub request: String,
    pub agent: AgentRun,
    pub hotel_owner_credential: Option<String>,
}

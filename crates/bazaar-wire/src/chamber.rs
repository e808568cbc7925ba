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

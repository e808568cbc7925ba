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

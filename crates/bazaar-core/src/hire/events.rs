//! The bodies hiring writes: one type per kind.

use super::service::Terms;
use super::HireEvent;
use bazaar_types::{Amount, MemberId, Timestamp, TransferId};
use serde::{Deserialize, Serialize};

/// `service.authorized`: the owner's exact terms for one task.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ServiceAuthorized {
    pub authorization: String,
    pub owner: MemberId,
    pub agent: MemberId,
    #[serde(flatten)]
    pub terms: Terms,
    /// The specialist's fee is zero and sponsored: nothing will be paid.
    pub sponsored: bool,
}

/// How a service payment moved: shared by `service.paid` and its receipt.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Payment {
    pub authorization: String,
    pub agent: MemberId,
    #[serde(flatten)]
    pub terms: Terms,
    pub gross_minor: Amount,
    pub fee_minor: Amount,
    pub net_minor: Amount,
    pub transfers: Vec<TransferId>,
    pub link: String,
    pub paid_at_ms: Timestamp,
}

/// `service.paid`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ServicePaid {
    #[serde(flatten)]
    pub payment: Payment,
}

/// `service.revoked`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ServiceRevoked {
    pub authorization: String,
    pub agent: MemberId,
}

crate::event_bodies!(
    ServiceAuthorized => HireEvent::ServiceAuthorized,
    ServicePaid => HireEvent::ServicePaid,
    ServiceRevoked => HireEvent::ServiceRevoked,
);

//! The bodies hiring writes: one type per kind.

use super::guest::HireTerms;
use super::lease::Lease;
use super::service::Terms;
use super::HireEvent;
use bazaar_types::{Amount, ContractId, MemberId, Timestamp, TransferId};
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

/// How an accepted hire paid: directly, or by releasing its escrowed milestone.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct HirePayment {
    pub gross_minor: Amount,
    pub fee_minor: Amount,
    pub net_minor: Amount,
    pub transfers: Vec<TransferId>,
    pub link: String,
    /// The contract whose milestone was released, for an escrowed hire.
    pub contract: Option<ContractId>,
}

/// `hire.agreed`: the locked terms.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct HireAgreed {
    pub hire: String,
    pub hirer: MemberId,
    #[serde(flatten)]
    pub terms: HireTerms,
    pub conversation: Option<String>,
    pub contract: Option<ContractId>,
}

/// `hire.accepted`: the response accepted (not a grade) and the payment.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct HireAccepted {
    pub hire: String,
    pub result_event: String,
    pub payment: HirePayment,
}

/// `lease.bought`: the lease, prepaid.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LeaseBought {
    pub lease: Lease,
}

/// `lease.receipted`: the worker published its receipt; the lease is priority until it ends.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LeaseReceipted {
    pub lease: String,
    pub worker: MemberId,
    pub at_ms: Timestamp,
}

crate::event_bodies!(
    LeaseBought => HireEvent::LeaseBought,
    LeaseReceipted => HireEvent::LeaseReceipted,
    HireAgreed => HireEvent::HireAgreed,
    HireAccepted => HireEvent::HireAccepted,
    ServiceAuthorized => HireEvent::ServiceAuthorized,
    ServicePaid => HireEvent::ServicePaid,
    ServiceRevoked => HireEvent::ServiceRevoked,
);

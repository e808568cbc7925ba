//! What hiring commands answer.

use super::events::{HirePayment, Payment};
use super::guest::Hire;
use super::lease::Lease;
use super::service::ServiceAuthorization;
use serde::Serialize;

crate::receipt_set! {
    /// Every success answer of a hiring command.
    #[derive(Clone, Debug, PartialEq, Eq, Serialize)]
    #[serde(untagged)]
    pub enum Receipt {
        Authorization(ServiceAuthorization),
        Paid(Payment),
        Hire(Hire),
        HirePaid(HirePayment),
        Lease(Lease),
    }
}

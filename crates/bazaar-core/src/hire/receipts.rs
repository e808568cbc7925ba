//! What hiring commands answer.

use super::events::Payment;
use super::service::ServiceAuthorization;
use serde::Serialize;

/// Every success answer of a hiring command.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(untagged)]
pub enum Receipt {
    Authorization(ServiceAuthorization),
    Paid(Payment),
}

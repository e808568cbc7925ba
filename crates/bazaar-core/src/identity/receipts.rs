//! Identity's answers: one type per distinct success, each serialising to
//! exactly the JSON the API has always answered. They share nested parts with
//! the event bodies but are their own types, so either can change alone.

use super::events::Enrolled;
use bazaar_types::{Amount, MemberId, Timestamp};
use serde::Serialize;

/// The registry is set up.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct Bootstrapped {
    pub registry: MemberId,
    pub operator: MemberId,
    pub fee_bps: u32,
    pub escrow_threshold_minor: Amount,
}

/// A member joined (an owner created, an agent enrolled).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct Joined {
    #[serde(flatten)]
    pub member: Enrolled,
}

/// An invite was issued.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct Invited {
    pub owner: MemberId,
    pub expires_at_ms: Timestamp,
}

/// A credential was rotated or revoked.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct CredentialChanged {
    pub member: MemberId,
}

/// A member took a new handle.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct Renamed {
    pub member: MemberId,
    pub from: String,
    pub to: String,
}

crate::receipt_set! {
    /// Every success identity answers with.
    #[derive(Clone, Debug, PartialEq, Eq, Serialize)]
    #[serde(untagged)]
    pub enum Receipt {
        Bootstrapped(Bootstrapped),
        Joined(Joined),
        Invited(Invited),
        CredentialChanged(CredentialChanged),
        Renamed(Renamed),
    }
}

crate::receipts_into!(Receipt: Bootstrapped, Joined, Invited, CredentialChanged, Renamed);

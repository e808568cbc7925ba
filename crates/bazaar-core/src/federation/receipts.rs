//! Federation's answers: one type per distinct success, each serialising to
//! exactly the JSON the API has always answered. Corridor tokens and relayed
//! settles on the buyer's side answer with pay's receipts.

use super::events::{PeerFacts, RelayFacts, Relayed};
use super::netting::NettingStatus;
use super::ImportRecord;
use crate::identity::events::Enrolled;
use crate::pay::events::SettlementFacts;
use crate::pay::receipts::{Settled, TokenGranted};
use crate::reputation::IssuedFigures;
use bazaar_types::{Amount, MemberId};
use serde::Serialize;

/// A peer recognised or updated.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct PeerRecorded {
    #[serde(flatten)]
    pub peer: PeerFacts,
}

/// A new signing key recorded.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct KeyRecorded {
    pub did: String,
    pub from_ms: i64,
    pub sig: Option<String>,
}

/// A signed passport's figures recorded.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct PassportRecorded {
    #[serde(flatten)]
    pub issued: IssuedFigures,
    pub credential_id: String,
    pub valid_until_ms: i64,
}

/// Imported reputation stored.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct ImportStored {
    #[serde(flatten)]
    pub record: ImportRecord,
}

/// A relay's state (opened, retrying, failed, or already settled).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct RelayStatus {
    #[serde(flatten)]
    pub relay: RelayFacts,
}

/// A relayed settlement paid out to the merchant.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct RelayPaid {
    #[serde(flatten)]
    pub settlement: SettlementFacts,
    #[serde(flatten)]
    pub relayed: Relayed,
}

/// A new guest.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct GuestJoined {
    #[serde(flatten)]
    pub member: Enrolled,
    pub home: MemberId,
    pub ceiling_minor: Amount,
    /// Always false here; see [`GuestReturned`].
    pub returning: bool,
}

/// A returning guest with a new credential.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct GuestReturned {
    pub id: MemberId,
    pub handle: String,
    pub home: MemberId,
    /// Always true.
    pub returning: bool,
}

crate::receipt_set! {
    /// Every success federation answers with.
    #[derive(Clone, Debug, PartialEq, Eq, Serialize)]
    #[serde(untagged)]
    pub enum Receipt {
        PeerRecorded(PeerRecorded),
        KeyRecorded(KeyRecorded),
        PassportRecorded(PassportRecorded),
        ImportStored(ImportStored),
        TokenGranted(TokenGranted),
        Settled(Settled),
        RelayStatus(RelayStatus),
        RelayPaid(RelayPaid),
        GuestJoined(GuestJoined),
        GuestReturned(GuestReturned),
        NettingStatus(NettingStatus),
    }
}

crate::receipts_into!(Receipt: PeerRecorded,
    KeyRecorded,
    PassportRecorded,
    ImportStored,
    TokenGranted,
    Settled,
    RelayStatus,
    RelayPaid,
    GuestJoined,
    GuestReturned,
    NettingStatus
);

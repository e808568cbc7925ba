//! Federation's event bodies: one type per kind federation writes, each
//! serialising to exactly the body stored on the ledger (the kernel adds
//! `authored_handle`). A relayed settlement is pay's kind, `settlement.posted`,
//! with federation's own body ([`RelaySettled`]); reputation reads it as
//! `pay::events::SettlementPosted`.

use super::{FederationEvent, ImportRecord, Relay, RelayState, Terms};
use crate::identity::events::Enrolled;
use crate::kernel::batch::EventBody;
use crate::kernel::refusal::Refusal;
use crate::pay::events::SettlementFacts;
use crate::pay::PayEvent;
use bazaar_types::{Amount, MemberId, OrderId, Timestamp, TokenId, TransferId};
use serde::{Deserialize, Serialize};

/// `guest.enrolled`: an agent of a peer registry joined as a guest.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct GuestEnrolled {
    #[serde(flatten)]
    pub member: Enrolled,
}

/// `guest.credential_added`: a returning guest got a new credential.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct GuestCredentialAdded {
    pub id: MemberId,
    pub handle: String,
    pub home: MemberId,
    /// Always true: this body is only written for a guest already here.
    pub returning: bool,
}

/// A recognised peer as the operator last set it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PeerFacts {
    pub peer: MemberId,
    pub url: String,
    pub weight_bps: u32,
    pub terms: Terms,
    /// How many keys of the peer's history were verified.
    pub keys: usize,
    /// The peer was known before.
    pub updated: bool,
}

/// `federation.peer_added` and `federation.peer_updated`: the kind follows `updated`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PeerRecognised {
    #[serde(flatten)]
    pub peer: PeerFacts,
}

impl EventBody for PeerRecognised {
    type Kind = FederationEvent;
    fn kind(&self) -> FederationEvent {
        if self.peer.updated {
            FederationEvent::PeerUpdated
        } else {
            FederationEvent::PeerAdded
        }
    }
}

/// `registry.key_rotated`: the registry signs with a new key from `from_ms`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct KeyRotated {
    pub did: String,
    pub from_ms: i64,
    /// The predecessor's signature; null on the first key.
    pub sig: Option<String>,
}

/// `passport.imported`: reputation imported from a peer's passport, as stored.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PassportImported {
    #[serde(flatten)]
    pub record: ImportRecord,
}

/// A relay as answered and recorded (its token left out).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RelayFacts {
    pub jti: TokenId,
    pub issuer: MemberId,
    pub buyer: MemberId,
    pub merchant: MemberId,
    pub order_id: OrderId,
    pub amount_minor: Amount,
    pub state: RelayState,
    pub attempts: u32,
    pub opened_at_ms: Timestamp,
    pub receipt: Option<serde_json::Value>,
    pub failure: Option<Refusal>,
}

impl From<&Relay> for RelayFacts {
    fn from(relay: &Relay) -> RelayFacts {
        RelayFacts {
            jti: relay.jti.clone(),
            issuer: relay.issuer.clone(),
            buyer: relay.buyer.clone(),
            merchant: relay.merchant.clone(),
            order_id: relay.order_id.clone(),
            amount_minor: relay.amount,
            state: relay.state,
            attempts: relay.attempts,
            opened_at_ms: relay.opened_at,
            receipt: relay.receipt.clone(),
            failure: relay.failure.clone(),
        }
    }
}

/// `relay.opened`: the merchant presented a peer's token; the relay is pending.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RelayOpened {
    #[serde(flatten)]
    pub relay: RelayFacts,
}

/// `relay.failed`: the buyer's registry refused the relayed settlement for good.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RelayFailed {
    #[serde(flatten)]
    pub relay: RelayFacts,
}

/// `relay.stuck`: the buyer's registry did not answer for `RELAY_RETRY_WINDOW_S`;
/// the relay is no longer retried and its recovery record is written.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RelayStuck {
    #[serde(flatten)]
    pub relay: RelayFacts,
}

/// `relay.retried`: the operator made a stuck relay pending again.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RelayRetried {
    #[serde(flatten)]
    pub relay: RelayFacts,
}

/// `netting.proposed`: the operator proposed a netting statement this registry signed; nothing moved.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct NettingProposed {
    #[serde(flatten)]
    pub netting: super::Netting,
}

/// `corridor.netted`: both registries signed the statement and this one moved its corridor.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CorridorNetted {
    #[serde(flatten)]
    pub netting: super::Netting,
}

/// `netting.refused`: the counterparty refused a statement this registry proposed; nothing moved.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct NettingRefused {
    #[serde(flatten)]
    pub netting: super::Netting,
}

/// How the merchant's registry paid out a relayed settlement.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Relayed {
    /// The buyer's registry, whose corridor paid.
    pub via: MemberId,
    pub transfers: Vec<TransferId>,
    /// The buyer's registry's own settlement receipt, as it answered.
    pub issuer_receipt: serde_json::Value,
}

/// `settlement.posted` on the merchant's registry: a relayed token settled
/// out of the corridor (pay's kind, federation's body).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RelaySettled {
    #[serde(flatten)]
    pub settlement: SettlementFacts,
    #[serde(flatten)]
    pub relayed: Relayed,
}

impl EventBody for RelaySettled {
    type Kind = PayEvent;
    fn kind(&self) -> PayEvent {
        PayEvent::SettlementPosted
    }
}

crate::event_bodies!(
    GuestEnrolled => FederationEvent::GuestEnrolled,
    GuestCredentialAdded => FederationEvent::GuestCredentialAdded,
    KeyRotated => FederationEvent::KeyRotated,
    PassportImported => FederationEvent::PassportImported,
    RelayOpened => FederationEvent::RelayOpened,
    RelayFailed => FederationEvent::RelayFailed,
    RelayStuck => FederationEvent::RelayStuck,
    RelayRetried => FederationEvent::RelayRetried,
    NettingProposed => FederationEvent::NettingProposed,
    CorridorNetted => FederationEvent::CorridorNetted,
    NettingRefused => FederationEvent::NettingRefused,
);

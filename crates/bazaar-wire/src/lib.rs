//! The wire contract: the bodies Bazaar serves, one serde type each, named as
//! `/openapi.json` names its schemas (`utoipa::ToSchema` behind the `openapi`
//! feature, which the server turns on and clients leave off). Each file
//! follows a capability.
//!
//! Where the server builds an answer from one of these types, the type *is*
//! the answer; where it still serialises a core type, the server's contract
//! check (`bazaar_server::contract`, on in every server test) reads each answer
//! strictly into the type its route names ([`strict`]), so a type here that
//! drifts from what is served fails the test that met it. A field that is
//! free-form JSON in the core says so (`Object`) rather than invent members.
//!
//! Amounts are integers in minor units (`*_minor`, or the core's bare names
//! such as `total`); instants are Unix milliseconds (`*_ms`, `*_at`); members
//! are DIDs. Optional members are either always written (`null` when absent)
//! or left out when absent (`skip_serializing_if`), exactly as served: the
//! strict check tells the two apart.

pub mod bounty;
pub mod chamber;
pub mod conversation;
pub mod dispute;
pub mod escrow;
pub mod federation;
pub mod hire;
pub mod identity;
pub mod jobs;
pub mod market;
pub mod nostr;
pub mod owner;
pub mod pay;
pub mod proof;
pub mod registry;
pub mod reprice;
pub mod reputation;
pub mod stream;
pub mod strict;

use serde::{Deserialize, Serialize};

/// A wire body as JSON, for what prints `--json`, keeps a journal or compares answers: every type here
/// serialises, so this cannot fail.
pub fn wire_json(answer: &impl Serialize) -> serde_json::Value {
    serde_json::to_value(answer).expect("wire types serialise")
}

/// A JSON object whose members the route does not fix (a signed document, an
/// outcome whose shape depends on what happened): see the route's description.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[cfg_attr(feature = "openapi", schema(value_type = Object))]
#[serde(transparent)]
pub struct OpenObject(pub serde_json::Value);

/// One Server-Sent Event as a client reads it off an event stream: `data` is
/// JSON text (the route says of what), `id` the position to resume after with
/// `Last-Event-ID`, `event` absent for `message` or `error` for the stream's
/// last word before it closes.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct SseEvent {
    pub data: String,
    pub event: Option<String>,
    pub id: Option<String>,
    /// Milliseconds the client should wait before reconnecting.
    pub retry: Option<u64>,
}

/// The problem+json body of every refusal and error (RFC 9457 members plus
/// this API's stable `code` and its `facts`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ProblemDetails {
    /// `https://bazaar.dev/problems/<code>`.
    #[serde(rename = "type")]
    pub type_: String,
    /// The code in words (`token_settled` reads "token settled").
    pub title: String,
    /// The HTTP status, repeated.
    pub status: u16,
    /// The stable machine code: match on this, never on `detail`.
    pub code: String,
    /// A sentence that says what to do.
    pub detail: String,
    /// What the refusal is about (amounts, states, the original receipt), when it has anything to add.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", schema(value_type = Option<Object>))]
    pub facts: Option<serde_json::Value>,
}

strict::contract_types! {
    conversation::Channel,
    conversation::Membership,
    conversation::MyChannel,
    conversation::ListedMember,
    conversation::ChannelView,
    conversation::ReplyTo,
    conversation::Message,
    conversation::SealingKey,
    conversation::MemberSealingKey,
    conversation::InboxPage,
    conversation::Attention,
    conversation::Passkey,
    conversation::Answer,
    dispute::Dispute,
    dispute::DisputeSubject,
    dispute::DisputePage,
    dispute::EvidenceAdded,
    dispute::Stake,
    dispute::StakeLocked,
    dispute::StakeUnlocking,
    dispute::StakeWithdrawn,
    dispute::DisputeOutcome,
    dispute::RulingAnswer,
    escrow::Milestone,
    escrow::Contract,
    escrow::ContractPage,
    escrow::MilestoneDelivered,
    escrow::MilestoneReclaimed,
    escrow::MilestoneReleased,
    federation::KeyEntry,
    federation::KeyHistory,
    federation::KeyRotated,
    federation::Reputation,
    federation::PassportValid,
    federation::PassportImported,
    federation::Peer,
    federation::PeerList,
    federation::PeerAdded,
    federation::GuestEnrolled,
    federation::GuestNew,
    federation::GuestReturning,
    federation::PassportShape,
    federation::Passport,
    federation::PassportSubject,
    federation::PassportAsOf,
    federation::RecognitionList,
    federation::Recognising,
    federation::Recognised,
    federation::CorridorTerms,
    nostr::SignedEvent,
    chamber::Attack,
    chamber::AttackCatalogue,
    chamber::AttackVerdict,
    chamber::RunsAvailable,
    chamber::StoryReport,
    chamber::PilotProof,
    chamber::PeerShown,
    chamber::StrangerCall,
    chamber::GuestShown,
    chamber::EscrowShown,
    chamber::FederationProof,
    chamber::AgentStep,
    chamber::AgentRun,
    chamber::AgentReport,
    reprice::PriceLine,
    reprice::Repriced,
    stream::StreamEvent,
    stream::StreamHistory,
    stream::StreamFlow,
    stream::StreamLatest,
    stream::StreamViewer,
    jobs::Task,
    jobs::TaskAnswer,
    jobs::TaskFeedback,
    owner::OwnedAgent,
    owner::OwnedAgents,
    owner::SpendingBalance,
    owner::AuthorizationRecords,
    owner::HireRecords,
    owner::LeaseRecords,
    owner::BountyRecords,
    owner::Spending,
    market::ListingRequest,
    reputation::Figures,
    reputation::StakeFigures,
    reputation::Imported,
    reputation::Combined,
    reputation::LedgerPosition,
    federation::Recovery,
    federation::RecoveryPage,
    federation::RelayRetried,
    federation::NettingSent,
    federation::NettingPage,
    identity::Member,
    identity::Enrolled,
    identity::Invite,
    identity::Rotated,
    identity::Revoked,
    identity::Renamed,
    identity::Me,
    identity::Scope,
    identity::CeremonyStarted,
    identity::SignedOut,
    identity::CredentialListed,
    conversation::Meter,
    conversation::WebhookView,
    conversation::WebhookRemoved,
    conversation::WebhookDelivery,
    conversation::Replayed,
    pay::Terms,
    pay::TokenClaims,
    pay::StoredTerms,
    self::OpenObject,
    self::SseEvent,
    self::ProblemDetails,
    market::Listing,
    market::SearchResults,
    market::UnmetSearch,
    market::UnmetSearches,
    market::Rfq,
    market::RfqList,
    market::Offer,
    market::RfqAllocation,
    market::OrderPolicy,
    market::Order,
    market::OrderList,
    market::SharePaid,
    market::ShareCancelled,
    bounty::Bounty,
    bounty::BountyPage,
    bounty::Reward,
    bounty::EarningsTotals,
    bounty::Earnings,
    hire::ServiceAuthorization,
    hire::ServicePayment,
    hire::AuthorizationPage,
    hire::Hire,
    hire::Acceptance,
    hire::HirePayment,
    hire::HirePage,
    hire::Lease,
    hire::LeasePage,
    pay::Posting,
    pay::Minted,
    pay::Funded,
    pay::Budget,
    pay::TokenIssued,
    pay::TokenCheck,
    pay::LocalTokenCheck,
    pay::ForeignTokenCheck,
    pay::NotGenuine,
    pay::Settlement,
    pay::SettlementReceipt,
    pay::Voided,
    pay::Event,
    pay::EventPage,
    pay::AccountBalance,
    pay::AccountPage,
    pay::AccountTransfer,
    pay::AccountHistory,
    pay::BatchAnswer,
    pay::BatchAnswers,
    registry::RegistryCard,
    registry::DisputeWindows,
    registry::X402Terms,
    registry::CardLimits,
    proof::DataIntegrityProof,
    registry::Health,
    registry::X402Supported,
    registry::X402Verified,
    registry::X402Settled,
}

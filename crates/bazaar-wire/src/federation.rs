//! Federation's response bodies: reputation, passports, keys, peers and guests.

use crate::proof::DataIntegrityProof;
use crate::reputation::{Figures, Imported, StakeFigures};
use serde::{Deserialize, Serialize};

/// One signing key in a registry's history.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct KeyEntry {
    /// `did:key:z6Mk…` of this key.
    pub did: String,
    pub from_ms: i64,
    /// When the next key took over; null for the current key.
    #[serde(default)]
    pub until_ms: Option<i64>,
    /// The predecessor's signature over the rotation message (`bazaar-key-rotation-v1`, the registry, this
    /// key's DID, `from_ms`, one per line) handing over to this key; absent on the first key.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sig: Option<String>,
}

/// Every key the registry signed with.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct KeyHistory {
    /// The registry's DID.
    pub registry: String,
    pub keys: Vec<KeyEntry>,
}

/// The key the registry rotated to, and the history after it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct KeyRotated {
    pub entry: KeyEntry,
    pub keys: Vec<KeyEntry>,
}

pub use crate::reputation::Reputation;

/// A passport that verified.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct PassportValid {
    /// Always true (a passport that does not verify is refused).
    pub valid: bool,
    /// The issuing registry's DID.
    pub registry: String,
    /// The key that signed it.
    pub key: String,
    pub subject: String,
    pub credential_id: String,
    pub valid_until_ms: i64,
    pub as_of_seq: u64,
    pub figures: Figures,
    /// True when this registry issued it.
    pub local: bool,
}

/// A peer's passport imported for its subject.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct PassportImported {
    pub subject: String,
    /// The issuer, the weight here and the figures that count.
    pub imported: Imported,
    pub credential_id: String,
    /// Unix milliseconds.
    pub imported_at: i64,
}

/// A peer registry as recognised here.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Peer {
    pub did: String,
    pub url: String,
    pub handle: String,
    /// How much its passports count here, in basis points of local work.
    pub weight_bps: u32,
    /// The corridor's terms: `fee_bps`, `per_call_max_minor`, `outstanding_max_minor`.
    #[cfg_attr(feature = "openapi", schema(value_type = Object))]
    pub terms: serde_json::Value,
    pub keys: Vec<KeyEntry>,
    /// Unix milliseconds.
    pub added_at: i64,
}

/// The peers this registry recognises.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct PeerList {
    pub peers: Vec<Peer>,
}

/// A peer recognised (or its terms updated).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct PeerAdded {
    pub peer: String,
    pub url: String,
    pub weight_bps: u32,
    #[cfg_attr(feature = "openapi", schema(value_type = Object))]
    pub terms: serde_json::Value,
    /// How many keys its verified card listed.
    pub keys: usize,
    /// True when the peer was known already.
    pub updated: bool,
}

/// A guest enrolled: new here (its kind, owner and ceiling) or returning (a new credential only).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(untagged)]
pub enum GuestEnrolled {
    New(GuestNew),
    Returning(GuestReturning),
}

/// A peer's agent enrolled here for the first time.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct GuestNew {
    /// The agent's DID.
    pub id: String,
    pub handle: String,
    /// The agent's home registry.
    pub home: String,
    /// False.
    pub returning: bool,
    /// `agent`.
    pub kind: String,
    #[cfg_attr(feature = "openapi", schema(required = true))]
    pub owner: Option<String>,
    pub ceiling_minor: u64,
    /// The bearer credential, shown once.
    pub credential: String,
}

/// A guest that was here already: a new credential.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct GuestReturning {
    /// The agent's DID.
    pub id: String,
    pub handle: String,
    /// The agent's home registry.
    pub home: String,
    /// True.
    pub returning: bool,
    /// The bearer credential, shown once.
    pub credential: String,
}

/// A TrustPassport: a W3C VC 2.0 credential secured with an `eddsa-jcs-2022`
/// Data Integrity proof (`docs/passports.md`), signed by the issuing
/// registry's key. Every member is fixed and every number an integer, so it
/// reads into this type and writes back as the JSON that was signed (JCS
/// orders members; the proof still verifies).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Passport {
    #[serde(rename = "@context")]
    pub context: Vec<String>,
    /// `urn:bazaar:passport:…`
    pub id: String,
    #[serde(rename = "type")]
    pub r#type: Vec<String>,
    /// The issuing key's `did:key`.
    pub issuer: String,
    /// RFC 3339 (UTC, seconds).
    #[serde(rename = "validFrom")]
    pub valid_from: String,
    #[serde(rename = "validUntil")]
    pub valid_until: String,
    #[serde(rename = "credentialSubject")]
    pub credential_subject: PassportSubject,
    pub proof: DataIntegrityProof,
}

/// A passport as the API accepts it: only its outline is stated, so a peer's
/// passport with members this version does not know is still taken (the
/// proof decides the rest). What this registry issues is a [`Passport`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct PassportShape {
    #[serde(rename = "@context")]
    pub context: Vec<String>,
    #[serde(rename = "type")]
    pub r#type: Vec<String>,
    pub issuer: String,
    #[serde(rename = "credentialSubject")]
    #[cfg_attr(feature = "openapi", schema(value_type = Object))]
    pub credential_subject: serde_json::Value,
    #[cfg_attr(feature = "openapi", schema(value_type = Object))]
    pub proof: serde_json::Value,
}

/// What a passport says of its subject: the figures, as of a ledger position.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct PassportSubject {
    /// The subject's DID.
    pub id: String,
    /// The issuing registry's DID.
    pub registry: String,
    /// The reputation window, as an ISO 8601 duration (`P90D`).
    pub window: String,
    #[serde(rename = "asOf")]
    pub as_of: PassportAsOf,
    pub stake: StakeFigures,
    #[serde(rename = "networkUnit")]
    pub network_unit: String,
    #[serde(flatten)]
    pub figures: Figures,
}

/// The ledger position a passport's figures are as of.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct PassportAsOf {
    #[serde(rename = "ledgerSeq")]
    pub ledger_seq: u64,
    /// `sha256:` and the hash of the event at `ledgerSeq`.
    #[serde(rename = "ledgerHead")]
    pub ledger_head: String,
}

/// The signed list of registries this one recognises (`/.well-known/bazaar-recognition`): a VC 2.0 credential
/// with an `eddsa-jcs-2022` proof by the registry's key.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct RecognitionList {
    #[serde(rename = "@context")]
    pub context: Vec<String>,
    #[serde(rename = "type")]
    pub r#type: Vec<String>,
    pub issuer: String,
    #[serde(rename = "validFrom")]
    pub valid_from: String,
    #[serde(rename = "validUntil")]
    pub valid_until: String,
    #[serde(rename = "credentialSubject")]
    pub credential_subject: Recognising,
    pub proof: DataIntegrityProof,
}

/// The registry and the peers it recognises.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Recognising {
    /// This registry's DID.
    pub id: String,
    pub recognised: Vec<Recognised>,
}

/// One recognised peer: its weight here and the corridor's terms.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct Recognised {
    pub id: String,
    pub url: String,
    pub weight_bps: u32,
    pub accepted_types: Vec<String>,
    pub terms: CorridorTerms,
}

/// A corridor's terms as the recognition list states them (amounts as decimal strings).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct CorridorTerms {
    pub fee_bps: u32,
    pub per_call_max_minor: String,
    pub outstanding_max_minor: String,
}

/// A relay the sweeper stopped retrying: written when it stuck, brought up to date since.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Recovery {
    pub jti: String,
    /// The buyer's registry, which did not answer.
    pub issuer: String,
    pub merchant: String,
    pub order_id: String,
    pub amount: u64,
    /// Unix milliseconds.
    pub opened_at: i64,
    /// Unix milliseconds.
    pub stuck_at: i64,
    pub attempts: u32,
    /// `stuck`, `pending` (retried by the operator), `settled` or `failed`.
    pub state: String,
    /// Times the operator retried it.
    pub retried: u32,
    /// Unix milliseconds; null until the buyer's registry answered.
    #[cfg_attr(feature = "openapi", schema(required = true))]
    pub resolved_at: Option<i64>,
}

/// A page of recovery records, by token id.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct RecoveryPage {
    pub recovery: Vec<Recovery>,
    /// Pass as `after` for the next page; null on an empty page.
    #[cfg_attr(feature = "openapi", schema(required = true))]
    pub next_after: Option<String>,
}

/// A stuck relay retried by the operator, after one attempt.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct RelayRetried {
    /// The relay now (`state`: `settled`, `failed`, or `pending` again if the issuer still did not answer).
    #[cfg_attr(feature = "openapi", schema(value_type = Object))]
    pub relay: serde_json::Value,
    /// The attempt's refusal code (`relay_pending`, `relay_failed`, …), or null if it settled.
    #[cfg_attr(feature = "openapi", schema(required = true))]
    pub attempt: Option<String>,
}

/// A netting statement sent, after the peer's answer.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct NettingSent {
    /// The statement as held here: `statement` {id, payer, payee, amount_minor, proposed_at_ms, reference},
    /// `proposed_by`, `signatures` (this registry's, then the peer's), `state` (`proposed`, `recorded`,
    /// `refused`), `recorded_at`, `transfer`, `failure`.
    #[cfg_attr(feature = "openapi", schema(value_type = Object))]
    pub netting: serde_json::Value,
    /// False if the peer gave no answer (send the same request again later).
    pub answered: bool,
}

/// A page of netting statements, by id.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct NettingPage {
    #[cfg_attr(feature = "openapi", schema(value_type = Vec<Object>))]
    pub netting: Vec<serde_json::Value>,
    /// Pass as `after` for the next page; null on an empty page.
    #[cfg_attr(feature = "openapi", schema(required = true))]
    pub next_after: Option<String>,
}

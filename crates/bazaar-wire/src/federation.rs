//! Federation's response bodies: reputation, passports, keys, peers and guests.

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

/// Everything published about one DID, computed from the ledger now.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Reputation {
    pub subject: String,
    /// This registry's figures (counts, volume, score; see docs for the formula).
    #[cfg_attr(feature = "openapi", schema(value_type = Object))]
    pub local: serde_json::Value,
    #[cfg_attr(feature = "openapi", schema(value_type = Object))]
    pub stake: serde_json::Value,
    /// Peers' passports imported for this subject and still valid.
    #[cfg_attr(feature = "openapi", schema(value_type = Vec<Object>))]
    pub imported: Vec<serde_json::Value>,
    /// Local and imported figures combined.
    #[cfg_attr(feature = "openapi", schema(value_type = Object))]
    pub combined: serde_json::Value,
    /// `ledger_seq` and `ledger_head`: the ledger position the figures are as of.
    #[cfg_attr(feature = "openapi", schema(value_type = Object))]
    pub as_of: serde_json::Value,
}

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
    #[cfg_attr(feature = "openapi", schema(value_type = Object))]
    pub figures: serde_json::Value,
    /// True when this registry issued it.
    pub local: bool,
}

/// A peer's passport imported for its subject.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct PassportImported {
    pub subject: String,
    /// The issuer, the weight here and the figures that count.
    #[cfg_attr(feature = "openapi", schema(value_type = Object))]
    pub imported: serde_json::Value,
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

/// A passport as the API accepts it: a W3C VC 2.0 credential secured with an
/// `eddsa-jcs-2022` Data Integrity proof (`docs/passports.md`). Only its
/// outline is stated here; the proof decides the rest.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct PassportShape {
    #[serde(rename = "@context")]
    #[cfg_attr(feature = "openapi", schema(value_type = Vec<String>))]
    pub context: Vec<String>,
    #[serde(rename = "type")]
    #[cfg_attr(feature = "openapi", schema(value_type = Vec<String>))]
    pub r#type: Vec<String>,
    pub issuer: String,
    #[serde(rename = "credentialSubject")]
    #[cfg_attr(feature = "openapi", schema(value_type = Object))]
    pub credential_subject: serde_json::Value,
    #[cfg_attr(feature = "openapi", schema(value_type = Object))]
    pub proof: serde_json::Value,
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

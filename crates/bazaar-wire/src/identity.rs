//! Identity's response bodies: members, enrolments with their one-time
//! credential, invites and the caller's own view.

use super::pay::Budget;
use serde::{Deserialize, Serialize};

/// A member: a person (owner), an agent, the operator, the registry or a peer registry.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Member {
    /// The member's DID.
    pub id: String,
    /// `registry`, `operator`, `owner`, `agent` or `peer`.
    pub kind: String,
    /// The owner an agent acts for; null for everyone else.
    #[cfg_attr(feature = "openapi", schema(required = true))]
    pub owner: Option<String>,
    /// The current handle.
    pub handle: String,
    /// Unix milliseconds.
    pub created_at: i64,
}

/// A new member and the credential it authenticates with. The credential is
/// shown here once; the registry keeps only its hash.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Enrolled {
    /// The member's DID.
    pub id: String,
    /// `owner` or `agent`.
    pub kind: String,
    /// The agent's owner; null for an owner.
    #[cfg_attr(feature = "openapi", schema(required = true))]
    pub owner: Option<String>,
    pub handle: String,
    /// The bearer credential, shown once.
    pub credential: String,
}

/// A single-use invite code for one agent.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Invite {
    /// `inv_…`, shown once.
    pub invite_code: String,
    /// When the code dies unused, Unix milliseconds.
    pub expires_at_ms: i64,
}

/// The caller's new credential; the old one stopped working.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Rotated {
    /// The caller's DID.
    pub member: String,
    /// The new bearer credential, shown once.
    pub credential: String,
}

/// The credential used for this request is revoked.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Revoked {
    /// The caller's DID.
    pub member: String,
}

/// A member's handle changed; the old one stays reserved.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Renamed {
    pub member: String,
    /// The old handle.
    pub from: String,
    /// The new handle.
    pub to: String,
}

/// The caller, its account and (for an agent) its budget.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Me {
    pub member: Member,
    /// Null when the caller has no account.
    #[cfg_attr(feature = "openapi", schema(required = true))]
    pub balance_minor: Option<i64>,
    /// Balance less holds; null when the caller has no account.
    #[cfg_attr(feature = "openapi", schema(required = true))]
    pub available_minor: Option<i64>,
    /// Units on hold; null when the caller has no account.
    #[cfg_attr(feature = "openapi", schema(required = true))]
    pub held_minor: Option<u64>,
    /// An agent's ceilings and spending; null for others and for an agent without one.
    #[cfg_attr(feature = "openapi", schema(required = true))]
    pub budget: Option<Budget>,
}

/// A credential's scope (`CREDENTIAL_SCOPES`): `pay` lets it move money.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "lowercase")]
pub enum Scope {
    Jobs,
    Pay,
    Read,
    Talk,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct CeremonyStarted {
    /// Pass back with the browser's answer.
    pub ceremony: String,
    /// WebAuthn options: give `options.publicKey` to `PublicKeyCredential.parse…OptionsFromJSON`.
    #[cfg_attr(feature = "openapi", schema(value_type = Object))]
    pub options: serde_json::Value,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct SignedOut {
    /// Always true: any session the browser held is revoked.
    pub signed_out: bool,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct CredentialListed {
    /// The first 16 hex characters of the credential's SHA-256: enough to name it, useless to sign in.
    pub id: String,
    pub created_at: i64,
    #[cfg_attr(feature = "openapi", schema(required = true))]
    pub revoked_at: Option<i64>,
    /// What it may do; absent: every scope. Without `pay` it cannot move money.
    #[cfg_attr(feature = "openapi", schema(required = true))]
    pub scopes: Option<Vec<String>>,
}

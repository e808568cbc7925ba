//! Identity's event bodies: one type per kind identity writes, each
//! serialising to exactly the body stored on the ledger (the kernel adds
//! `authored_handle`). `Enrolled` is also the body other capabilities'
//! enrolments carry (`desk.created`, `guest.enrolled`) and what reputation reads.

use super::IdentityEvent;
use crate::kernel::model::MemberKind;
use bazaar_types::{Amount, MemberId, Timestamp};
use serde::{Deserialize, Serialize};

/// `owner.created`, `agent.enrolled`, `desk.created` and `guest.enrolled`:
/// a member joined, and on whose behalf it acts (reputation's same-owner rule).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Enrolled {
    pub id: MemberId,
    pub kind: MemberKind,
    pub owner: Option<MemberId>,
    pub handle: String,
}

/// `registry.created`: the registry bootstrapped itself with these money policies.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RegistryCreated {
    pub registry: MemberId,
    pub operator: MemberId,
    pub fee_bps: u32,
    pub escrow_threshold_minor: Amount,
}

/// `owner.created`: the operator created an owner.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct OwnerCreated {
    #[serde(flatten)]
    pub member: Enrolled,
}

/// `agent.enrolled`: an agent redeemed its owner's invite.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct AgentEnrolled {
    #[serde(flatten)]
    pub member: Enrolled,
}

/// `invite.issued`: an owner invited an agent (the code itself is never stored).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct InviteIssued {
    pub owner: MemberId,
    pub expires_at_ms: Timestamp,
}

/// `credential.rotated`: a member replaced the credential it signed in with.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CredentialRotated {
    pub member: MemberId,
}

/// `credential.revoked`: a member (or its owner) revoked one of its credentials.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CredentialRevoked {
    pub member: MemberId,
}

/// `credential.reissued`: an owner gave its agent a new credential and revoked `revoked` of its old ones.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CredentialReissued {
    pub agent: MemberId,
    pub revoked: u32,
}

/// `member.renamed`: the old handle stays reserved forever.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct MemberRenamed {
    pub member: MemberId,
    pub from: String,
    pub to: String,
}

crate::event_bodies!(
    RegistryCreated => IdentityEvent::RegistryCreated,
    OwnerCreated => IdentityEvent::OwnerCreated,
    AgentEnrolled => IdentityEvent::AgentEnrolled,
    InviteIssued => IdentityEvent::InviteIssued,
    CredentialRotated => IdentityEvent::CredentialRotated,
    CredentialRevoked => IdentityEvent::CredentialRevoked,
    CredentialReissued => IdentityEvent::CredentialReissued,
    MemberRenamed => IdentityEvent::MemberRenamed,
);

//! Identity: the registry's bootstrap, owners, agents enrolled by invite,
//! credentials that rotate and revoke, and renameable handles whose old names
//! stay reserved. Lowest capability: every other one looks members up here.

pub mod events;
mod members;
pub mod receipts;
pub use receipts::Receipt;

use crate::kernel::batch::Batch;
use crate::kernel::keys::Keys;
use crate::kernel::refusal::Refusal;
use crate::kernel::request::Caller;
use bazaar_types::{AccountId, MemberId, Timestamp};

crate::event_kinds! {
    /// What identity writes on the event ledger.
    IdentityEvent {
        RegistryCreated => "registry.created",
        OwnerCreated => "owner.created",
        AgentEnrolled => "agent.enrolled",
        InviteIssued => "invite.issued",
        CredentialRotated => "credential.rotated",
        CredentialRevoked => "credential.revoked",
        CredentialReissued => "credential.reissued",
        MemberRenamed => "member.renamed",
    }
}

#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
pub enum Op {
    /// First start: the registry, its system accounts and the operator.
    Bootstrap {
        registry: MemberId,
        operator: MemberId,
        operator_credential_hash: String,
    },
    CreateOwner {
        id: MemberId,
        handle: String,
        credential_hash: String,
    },
    IssueInvite {
        code_hash: String,
        expires_at: Timestamp,
    },
    RedeemInvite {
        code_hash: String,
        agent: MemberId,
        handle: String,
        credential_hash: String,
    },
    RotateCredential {
        old_hash: String,
        new_hash: String,
    },
    RevokeCredential {
        member: MemberId,
        hash: String,
    },
    /// An owner gives its agent a new credential and revokes those listed
    /// (the agent's live ones, as the caller read them).
    ReissueCredential {
        agent: MemberId,
        revoke: Vec<String>,
        new_hash: String,
        /// Canonical scopes (see `CREDENTIAL_SCOPES`); `None`: every scope.
        scopes: Option<String>,
    },
    Rename {
        member: MemberId,
        handle: String,
    },
}

impl Op {
    /// A stable name, used in idempotency scopes and metrics.
    /// Whether the command moves money (a credential without `pay` may not send it). Identity never does.
    pub fn moves_money(&self) -> bool {
        match self {
            Op::Bootstrap { .. }
            | Op::CreateOwner { .. }
            | Op::IssueInvite { .. }
            | Op::RedeemInvite { .. }
            | Op::RotateCredential { .. }
            | Op::RevokeCredential { .. }
            | Op::ReissueCredential { .. }
            | Op::Rename { .. } => false,
        }
    }

    pub fn name(&self) -> &'static str {
        match self {
            Op::Bootstrap { .. } => "bootstrap",
            Op::CreateOwner { .. } => "create_owner",
            Op::IssueInvite { .. } => "issue_invite",
            Op::RedeemInvite { .. } => "redeem_invite",
            Op::RotateCredential { .. } => "rotate_credential",
            Op::RevokeCredential { .. } => "revoke_credential",
            Op::ReissueCredential { .. } => "reissue_credential",
            Op::Rename { .. } => "rename",
        }
    }

    /// The rows this command needs.
    pub fn keys(&self, keys: &mut Keys) {
        match self {
            Op::Bootstrap { registry, operator, operator_credential_hash } => {
                keys.members.insert(registry.clone());
                keys.members.insert(operator.clone());
                keys.credentials.insert(operator_credential_hash.clone());
                keys.accounts.insert(AccountId::issuance());
                keys.accounts.insert(AccountId::fees());
            }
            Op::CreateOwner { id, handle, credential_hash }
            | Op::RedeemInvite { agent: id, handle, credential_hash, .. } => {
                keys.members.insert(id.clone());
                keys.handles.insert(handle.clone());
                keys.credentials.insert(credential_hash.clone());
                if let Op::RedeemInvite { code_hash, .. } = self {
                    keys.invites.insert(code_hash.clone());
                }
            }
            Op::IssueInvite { code_hash, .. } => {
                keys.invites.insert(code_hash.clone());
            }
            Op::RotateCredential { old_hash, new_hash } => {
                keys.credentials.insert(old_hash.clone());
                keys.credentials.insert(new_hash.clone());
            }
            Op::RevokeCredential { member, hash } => {
                keys.members.insert(member.clone());
                keys.credentials.insert(hash.clone());
            }
            Op::ReissueCredential { agent, revoke, new_hash, .. } => {
                keys.members.insert(agent.clone());
                keys.credentials.extend(revoke.iter().cloned());
                keys.credentials.insert(new_hash.clone());
            }
            Op::Rename { member, handle } => {
                keys.members.insert(member.clone());
                keys.handles.insert(handle.clone());
            }
        }
    }

    pub(crate) fn apply(&self, batch: &mut Batch<'_>, caller: &Caller<'_>) -> Result<receipts::Receipt, Refusal> {
        Ok(match self {
            Op::Bootstrap { registry, operator, operator_credential_hash } => {
                batch.bootstrap(caller, registry, operator, operator_credential_hash)?.into()
            }
            Op::CreateOwner { id, handle, credential_hash } => {
                batch.create_owner(caller, id, handle, credential_hash)?.into()
            }
            Op::IssueInvite { code_hash, expires_at } => batch.issue_invite(caller, code_hash, *expires_at)?.into(),
            Op::RedeemInvite { code_hash, agent, handle, credential_hash } => {
                batch.redeem_invite(caller, code_hash, agent, handle, credential_hash)?.into()
            }
            Op::RotateCredential { old_hash, new_hash } => batch.rotate_credential(caller, old_hash, new_hash)?.into(),
            Op::RevokeCredential { member, hash } => batch.revoke_credential(caller, member, hash)?.into(),
            Op::ReissueCredential { agent, revoke, new_hash, scopes } => {
                batch.reissue_credential(caller, agent, revoke, (new_hash, scopes.as_deref()))?.into()
            }
            Op::Rename { member, handle } => batch.rename(caller, member, handle)?.into(),
        })
    }
}

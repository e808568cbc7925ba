//! Members and their handles: the registry's own bootstrap, owners created
//! by the operator, agents enrolled by invite, renames that keep the old handle
//! reserved forever, and the lookups other capabilities use (`member`,
//! `owned_agent`, `check_new_member`, `enroll_as`).

use super::events::{self, Enrolled};
use super::receipts::{Bootstrapped, CredentialChanged, Invited, Joined, Renamed};
use crate::kernel::batch::{refuse, Batch, EventBody};
use crate::kernel::model::*;
use crate::kernel::refusal::{Code, Refusal};
use crate::kernel::request::Caller;
use bazaar_types::{AccountId, MemberId, Timestamp};

impl Batch<'_> {
    pub(crate) fn bootstrap(
        &mut self,
        command: &Caller<'_>,
        registry: &MemberId,
        operator: &MemberId,
        credential_hash: &str,
    ) -> Result<Bootstrapped, Refusal> {
        if command.actor.kind != MemberKind::Registry || &command.actor.id != registry {
            return refuse(Code::NotPermitted, "Only the registry bootstraps itself.");
        }
        if self.snap.members.contains_key(registry) {
            return refuse(Code::MemberExists, "This registry is already set up.");
        }
        let registry_member = Member {
            id: registry.clone(),
            kind: MemberKind::Registry,
            owner: None,
            handle: "registry".into(),
            created_at: self.now,
        };
        let operator_member = Member {
            id: operator.clone(),
            kind: MemberKind::Operator,
            owner: None,
            handle: "operator".into(),
            created_at: self.now,
        };
        self.insert_member(registry_member);
        self.insert_member(operator_member);
        self.put_credential(Credential {
            hash: credential_hash.to_string(),
            member: operator.clone(),
            created_at: self.now,
            revoked_at: None,
            scopes: None,
        });
        self.put_account(Account::new(AccountId::issuance(), true));
        self.put_account(Account::new(AccountId::fees(), false));
        let (fee_bps, escrow_threshold_minor) = (self.config.fee_bps, self.config.escrow_threshold);
        let created = events::RegistryCreated {
            registry: registry.clone(),
            operator: operator.clone(),
            fee_bps,
            escrow_threshold_minor,
        };
        self.emit(command, &created);
        Ok(Bootstrapped { registry: registry.clone(), operator: operator.clone(), fee_bps, escrow_threshold_minor })
    }

    pub(crate) fn create_owner(
        &mut self,
        command: &Caller<'_>,
        id: &MemberId,
        handle: &str,
        credential_hash: &str,
    ) -> Result<Joined, Refusal> {
        if command.actor.kind != MemberKind::Operator {
            return refuse(Code::NotPermitted, "Only the registry operator creates owners.");
        }
        self.check_new_member(id, handle, credential_hash)?;
        let member = Member {
            id: id.clone(),
            kind: MemberKind::Owner,
            owner: None,
            handle: handle.into(),
            created_at: self.now,
        };
        let member = self.enroll_as(command, member, credential_hash, |member| events::OwnerCreated { member });
        Ok(Joined { member })
    }

    pub(crate) fn issue_invite(
        &mut self,
        command: &Caller<'_>,
        code_hash: &str,
        expires_at: Timestamp,
    ) -> Result<Invited, Refusal> {
        if command.actor.kind != MemberKind::Owner {
            return refuse(Code::NotPermitted, "Only an owner invites agents.");
        }
        if self.snap.invites.contains_key(code_hash) {
            return refuse(Code::InvalidRequest, "This invite code already exists; draw a new one.");
        }
        let invite = Invite {
            code_hash: code_hash.into(),
            owner: command.actor.id.clone(),
            expires_at,
            used_by: None,
            used_at: None,
        };
        self.put_invite(invite);
        self.emit(command, &events::InviteIssued { owner: command.actor.id.clone(), expires_at_ms: expires_at });
        Ok(Invited { owner: command.actor.id.clone(), expires_at_ms: expires_at })
    }

    pub(crate) fn redeem_invite(
        &mut self,
        _caller: &Caller<'_>,
        code_hash: &str,
        agent: &MemberId,
        handle: &str,
        credential_hash: &str,
    ) -> Result<Joined, Refusal> {
        let Some(invite) = self.snap.invites.get(code_hash).cloned() else {
            return refuse(Code::InviteNotFound, "No such invite code; ask your owner for a new one.");
        };
        if invite.used_at.is_some() {
            return refuse(
                Code::InviteUsed,
                "This invite code was already used; each code works once. Ask your owner for a new one.",
            );
        }
        if self.now >= invite.expires_at {
            return refuse(Code::InviteExpired, "This invite code has expired; ask your owner for a new one.");
        }
        self.check_new_member(agent, handle, credential_hash)?;
        let member = Member {
            id: agent.clone(),
            kind: MemberKind::Agent,
            owner: Some(invite.owner.clone()),
            handle: handle.into(),
            created_at: self.now,
        };
        self.put_invite(Invite { used_by: Some(agent.clone()), used_at: Some(self.now), ..invite });
        self.put_budget(Budget::zero(agent.clone()));
        // The agent authors its own enrollment, on behalf of the owner who invited it.
        let actor = member.clone();
        let enrolling = Caller { actor: &actor, idem: None };
        let member = self.enroll_as(&enrolling, member, credential_hash, |member| events::AgentEnrolled { member });
        Ok(Joined { member })
    }

    /// Everything enrolment needs, checked before anything is written.
    pub(crate) fn check_new_member(&self, id: &MemberId, handle: &str, credential_hash: &str) -> Result<(), Refusal> {
        crate::validate::handle(handle)?;
        if self.snap.credentials.contains_key(credential_hash) {
            return refuse(Code::InvalidRequest, "Credential collision; retry.");
        }
        if self.snap.members.contains_key(id) {
            return refuse(Code::MemberExists, "A member with this key is already registered.");
        }
        self.check_handle_free(handle)
    }

    pub(crate) fn check_handle_free(&self, handle: &str) -> Result<(), Refusal> {
        match self.snap.handles.get(handle) {
            Some(row) if row.retired => {
                refuse(Code::HandleReserved, "This handle was retired and stays reserved forever; pick another.")
            }
            Some(_) => refuse(Code::HandleTaken, "This handle is taken; pick another."),
            None => Ok(()),
        }
    }

    /// Writes a new member; `check_new_member` ran first. `event` builds the
    /// body of the kind the member joins under (each capability names its own).
    pub(crate) fn enroll_as<B: EventBody>(
        &mut self,
        command: &Caller<'_>,
        member: Member,
        credential_hash: &str,
        event: impl FnOnce(Enrolled) -> B,
    ) -> Enrolled {
        assert!(!self.snap.credentials.contains_key(credential_hash));
        self.put_credential(Credential {
            hash: credential_hash.into(),
            member: member.id.clone(),
            created_at: self.now,
            revoked_at: None,
            scopes: None,
        });
        self.put_account(Account::new(AccountId::of_member(&member.id), false));
        let enrolled = Enrolled {
            id: member.id.clone(),
            kind: member.kind,
            owner: member.owner.clone(),
            handle: member.handle.clone(),
        };
        self.insert_member(member);
        self.emit(command, &event(enrolled.clone()));
        enrolled
    }

    pub(crate) fn rotate_credential(
        &mut self,
        command: &Caller<'_>,
        old_hash: &str,
        new_hash: &str,
    ) -> Result<CredentialChanged, Refusal> {
        let old = match self.snap.credentials.get(old_hash) {
            Some(c) if c.member == command.actor.id && c.revoked_at.is_none() => c.clone(),
            _ => return refuse(Code::Unauthenticated, "Rotate with the credential you are signed in with."),
        };
        if self.snap.credentials.contains_key(new_hash) {
            return refuse(Code::InvalidRequest, "Credential collision; retry.");
        }
        // The new credential may do exactly what the one it replaces could.
        let scopes = old.scopes.clone();
        self.put_credential(Credential { revoked_at: Some(self.now), ..old });
        self.put_credential(Credential {
            hash: new_hash.into(),
            member: command.actor.id.clone(),
            created_at: self.now,
            revoked_at: None,
            scopes,
        });
        self.emit(command, &events::CredentialRotated { member: command.actor.id.clone() });
        Ok(CredentialChanged { member: command.actor.id.clone() })
    }

    pub(crate) fn revoke_credential(
        &mut self,
        command: &Caller<'_>,
        member: &MemberId,
        hash: &str,
    ) -> Result<CredentialChanged, Refusal> {
        let target = self.member(member)?;
        self.check_self_or_owner(command, &target)?;
        let credential = match self.snap.credentials.get(hash) {
            Some(c) if &c.member == member => c.clone(),
            _ => return refuse(Code::InvalidRequest, "No such credential for this member."),
        };
        if credential.revoked_at.is_none() {
            self.put_credential(Credential { revoked_at: Some(self.now), ..credential });
        }
        self.emit(command, &events::CredentialRevoked { member: member.clone() });
        Ok(CredentialChanged { member: member.clone() })
    }

    /// The agent's owner gives it a new credential (`new_hash`, limited to
    /// `scopes` when given) and revokes each of `revoke` still live; every one
    /// must be the agent's.
    pub(crate) fn reissue_credential(
        &mut self,
        command: &Caller<'_>,
        agent: &MemberId,
        revoke: &[String],
        (new_hash, scopes): (&str, Option<&str>),
    ) -> Result<CredentialChanged, Refusal> {
        let target = self.member(agent)?;
        if target.kind != MemberKind::Agent || target.owner.as_ref() != Some(&command.actor.id) {
            return refuse(Code::NotOwner, "Only an agent's owner reissues its credential.");
        }
        if self.snap.credentials.contains_key(new_hash) {
            return refuse(Code::InvalidRequest, "Credential collision; retry.");
        }
        let mut revoked = 0;
        for hash in revoke {
            let credential = match self.snap.credentials.get(hash) {
                Some(c) if &c.member == agent => c.clone(),
                _ => return refuse(Code::InvalidRequest, "A credential to revoke is not this agent's."),
            };
            if credential.revoked_at.is_none() {
                self.put_credential(Credential { revoked_at: Some(self.now), ..credential });
                revoked += 1;
            }
        }
        self.put_credential(Credential {
            hash: new_hash.into(),
            member: agent.clone(),
            created_at: self.now,
            revoked_at: None,
            scopes: scopes.map(str::to_string),
        });
        self.emit(command, &events::CredentialReissued { agent: agent.clone(), revoked });
        Ok(CredentialChanged { member: agent.clone() })
    }

    pub(crate) fn rename(&mut self, command: &Caller<'_>, member: &MemberId, handle: &str) -> Result<Renamed, Refusal> {
        crate::validate::handle(handle)?;
        let target = self.member(member)?;
        self.check_self_or_owner(command, &target)?;
        self.check_handle_free(handle)?;
        let old = target.handle.clone();
        self.retire_handle(&old, member);
        self.insert_handle(HandleRow {
            handle: handle.into(),
            member: member.clone(),
            retired: false,
            since: self.now,
        });
        self.update_member(Member { handle: handle.into(), ..target });
        let renamed = events::MemberRenamed { member: member.clone(), from: old.clone(), to: handle.to_string() };
        self.emit(command, &renamed);
        Ok(Renamed { member: member.clone(), from: old, to: handle.to_string() })
    }

    pub(crate) fn check_self_or_owner(&self, command: &Caller<'_>, target: &Member) -> Result<(), Refusal> {
        if command.actor.id == target.id || target.owner.as_ref() == Some(&command.actor.id) {
            Ok(())
        } else {
            refuse(Code::NotOwner, "Only the member itself or its owner may do this.")
        }
    }

    pub(crate) fn member(&self, id: &MemberId) -> Result<Member, Refusal> {
        self.snap
            .members
            .get(id)
            .cloned()
            .ok_or_else(|| Refusal::new(Code::MemberNotFound, format!("No member {id} on this registry.")))
    }

    /// The agent `id`, which must belong to the actor.
    pub(crate) fn owned_agent(&self, command: &Caller<'_>, id: &MemberId) -> Result<Member, Refusal> {
        let agent = self.member(id)?;
        if agent.kind != MemberKind::Agent {
            return refuse(Code::NotAnAgent, "Budgets belong to agents; this member is not an agent.");
        }
        if agent.owner.as_ref() != Some(&command.actor.id) {
            return refuse(Code::NotOwner, "Only the agent's owner may do this; an agent never sets its own budget.");
        }
        Ok(agent)
    }
}

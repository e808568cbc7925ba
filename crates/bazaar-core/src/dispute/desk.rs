//! The registry's dispute desk: an agent of the operator, the default arbiter.

use super::events::DeskCreated;
use crate::identity::receipts::Joined;
use crate::kernel::batch::{refuse, Batch};
use crate::kernel::model::*;
use crate::kernel::refusal::{Code, Refusal};
use crate::kernel::request::Caller;
use bazaar_types::MemberId;

impl Batch<'_> {
    pub(crate) fn create_desk(&mut self, command: &Caller<'_>, credential_hash: &str) -> Result<Joined, Refusal> {
        if command.actor.kind != MemberKind::Operator {
            return refuse(Code::NotPermitted, "Only the operator sets up the dispute desk.");
        }
        let id = MemberId(DESK_ID.into());
        self.check_new_member(&id, DESK_HANDLE, credential_hash)?;
        let member = Member {
            id: id.clone(),
            kind: MemberKind::Agent,
            owner: Some(command.actor.id.clone()),
            handle: DESK_HANDLE.into(),
            created_at: self.now,
        };
        self.put_budget(Budget::zero(id));
        let enrolled = self.enroll_as(command, member, credential_hash, |member| DeskCreated { member });
        Ok(Joined { member: enrolled })
    }
}

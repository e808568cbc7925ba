//! The registry's dispute desk: an agent of the operator, the default arbiter.

use super::DisputeEvent;
use crate::kernel::batch::{refuse, Batch, Step};
use crate::kernel::model::*;
use crate::kernel::refusal::Code;
use crate::kernel::request::Caller;
use bazaar_types::MemberId;

impl Batch<'_> {
    pub(crate) fn create_desk(&mut self, command: &Caller<'_>, credential_hash: &str) -> Step {
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
        self.enroll(command, member, credential_hash, DisputeEvent::DeskCreated)
    }
}

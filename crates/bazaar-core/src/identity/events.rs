//! Identity's event bodies that other capabilities read.

use crate::kernel::model::MemberKind;
use bazaar_types::MemberId;
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

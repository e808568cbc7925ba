//! Who asks, under which idempotency key: the part of a command the kernel
//! needs, whatever capability the command belongs to.

use crate::kernel::model::{Member, MemberKind};
use crate::kernel::refusal::{Code, Refusal};

/// An idempotency key in its scope (the caller and the operation), with the
/// fingerprint of the request it first came with.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Idem {
    pub scope: String,
    pub key: String,
    pub fingerprint: String,
    /// Whether a refusal is kept under this key (and replayed) like a success. True for a key the caller
    /// chose; false for one the edge derived from the request's natural key (a token's order, a settle's
    /// token), so a refusal there (a balance too low, a token expired) never pins the order: the same
    /// request runs again once its cause is fixed. A refused command moved nothing, so running it again
    /// can only do what a fresh request would.
    pub keeps_refusals: bool,
}

impl Idem {
    /// A key the caller chose: successes and refusals are kept.
    pub fn sent(scope: String, key: String, fingerprint: String) -> Self {
        Idem { scope, key, fingerprint, keeps_refusals: true }
    }
}

/// The caller of one command as capabilities see it. `authored_by` on every
/// event and transfer is `actor.id`; `on_behalf_of` is its principal.
#[derive(Clone, Copy, Debug)]
pub struct Caller<'c> {
    pub actor: &'c Member,
    pub idem: Option<&'c Idem>,
}

impl Caller<'_> {
    /// Refuses a caller that is not an agent (an owner, its session, the
    /// operator) for an act only agents do: 403 `not_permitted`, `who` saying
    /// whose act it is. (`not_an_agent` is the answer about a *target*.)
    pub(crate) fn require_agent(&self, who: &str) -> Result<(), Refusal> {
        if self.actor.kind == MemberKind::Agent {
            return Ok(());
        }
        Err(Refusal::new(Code::NotPermitted, format!("{who}; this caller is not an agent.")))
    }
}

/// What the kernel's batch driver needs of a command: its caller and a stable
/// name (for idempotency scopes, metrics and `refusal.recorded` events).
pub trait Request {
    fn caller(&self) -> Caller<'_>;
    fn name(&self) -> &'static str;
}

#[cfg(test)]
mod tests {
    use super::*;
    use bazaar_types::{MemberId, Timestamp};

    #[test]
    fn only_an_agent_passes_require_agent_and_the_rest_are_not_permitted() {
        let member = |kind| Member {
            id: MemberId("did:key:zX".into()),
            kind,
            owner: None,
            handle: "x".into(),
            created_at: Timestamp(0),
        };
        let agent = member(MemberKind::Agent);
        assert!(Caller { actor: &agent, idem: None }.require_agent("Stake is locked by agents").is_ok());
        for kind in [MemberKind::Owner, MemberKind::Operator, MemberKind::Registry] {
            let other = member(kind);
            let refused = Caller { actor: &other, idem: None }.require_agent("Stake is locked by agents").unwrap_err();
            assert_eq!(refused.code, Code::NotPermitted, "{kind:?}: 403, never 422 not_an_agent");
            assert_eq!(refused.detail, "Stake is locked by agents; this caller is not an agent.");
        }
    }
}

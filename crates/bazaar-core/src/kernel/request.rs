//! Who asks, under which idempotency key: the part of a command the kernel
//! needs, whatever capability the command belongs to.

use crate::kernel::model::Member;
use crate::kernel::refusal::Refusal;

/// The result of one command, as stored under an idempotency key and as
/// replayed: a JSON receipt or a refusal.
pub type Outcome = Result<serde_json::Value, Refusal>;

/// An idempotency key in its scope (the caller and the operation), with the
/// fingerprint of the request it first came with.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Idem {
    pub scope: String,
    pub key: String,
    pub fingerprint: String,
}

/// The caller of one command as capabilities see it. `authored_by` on every
/// event and transfer is `actor.id`; `on_behalf_of` is its principal.
#[derive(Clone, Copy, Debug)]
pub struct Caller<'c> {
    pub actor: &'c Member,
    pub idem: Option<&'c Idem>,
}

/// What the kernel's batch driver needs of a command: its caller and a stable
/// name (for idempotency scopes, metrics and `refusal.recorded` events).
pub trait Request {
    fn caller(&self) -> Caller<'_>;
    fn name(&self) -> &'static str;
}

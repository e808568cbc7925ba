//! The composer: every state change in Bazaar is a [`Command`] whose [`Op`]
//! belongs to one capability. This file only composes — one line per
//! capability in the op enum, its name, its rows and its dispatch — so adding
//! a command touches its capability's folder and nothing here.

use crate::kernel::batch::{Batch, Step};
use crate::kernel::model::Member;
use crate::kernel::request::{Caller, Request};
use crate::{bounty, chamber, dispute, escrow, federation, hire, identity, market, pay};

pub use crate::kernel::keys::Keys;

/// Every event kind every capability declares with `event_kinds!` (one module, one family), the kernel's
/// first. A capability with events adds its line here; `every_event_family_is_collected` fails if one is
/// declared and not collected.
pub const EVENT_KIND_NAMES: &[&[&str]] = &[
    crate::kernel::batch::EVENT_KIND_NAMES,
    identity::EVENT_KIND_NAMES,
    pay::EVENT_KIND_NAMES,
    escrow::EVENT_KIND_NAMES,
    dispute::EVENT_KIND_NAMES,
    crate::reputation::EVENT_KIND_NAMES,
    federation::EVENT_KIND_NAMES,
    market::EVENT_KIND_NAMES,
    bounty::EVENT_KIND_NAMES,
    hire::EVENT_KIND_NAMES,
];
pub use crate::kernel::request::{Idem, Outcome};

#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
pub struct Command {
    /// Who asks. `authored_by` is `actor.id`; `on_behalf_of` is its principal.
    pub actor: Member,
    pub idem: Option<Idem>,
    pub op: Op,
}

/// One capability's command. Lower capabilities come first (see ARCHITECTURE.md).
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
pub enum Op {
    Identity(identity::Op),
    Pay(pay::Op),
    Escrow(escrow::Op),
    Dispute(dispute::Op),
    Federation(federation::Op),
    Market(market::Op),
    Bounty(bounty::Op),
    Hire(hire::Op),
    Chamber(chamber::Op),
}

impl Op {
    /// Whether the command moves money: only a credential with the `pay` scope may send it.
    pub fn moves_money(&self) -> bool {
        match self {
            Op::Identity(op) => op.moves_money(),
            Op::Pay(op) => op.moves_money(),
            Op::Escrow(op) => op.moves_money(),
            Op::Dispute(op) => op.moves_money(),
            Op::Federation(op) => op.moves_money(),
            Op::Market(op) => op.moves_money(),
            Op::Bounty(op) => op.moves_money(),
            Op::Hire(op) => op.moves_money(),
            Op::Chamber(op) => op.moves_money(),
        }
    }

    /// A stable name, used in idempotency scopes and metrics.
    pub fn name(&self) -> &'static str {
        match self {
            Op::Identity(op) => op.name(),
            Op::Pay(op) => op.name(),
            Op::Escrow(op) => op.name(),
            Op::Dispute(op) => op.name(),
            Op::Federation(op) => op.name(),
            Op::Market(op) => op.name(),
            Op::Bounty(op) => op.name(),
            Op::Hire(op) => op.name(),
            Op::Chamber(op) => op.name(),
        }
    }
}

impl Op {
    /// Asks for a payment token: through pay for a merchant of this registry,
    /// through federation (its corridor) when `claims.via` names a peer.
    pub fn issue_token(claims: pay::token::TokenClaims, token: String) -> Op {
        match claims.via {
            None => Op::Pay(pay::Op::IssueToken { claims, token }),
            Some(_) => Op::Federation(federation::Op::IssueToken { claims, token }),
        }
    }
}

impl Request for Command {
    fn caller(&self) -> Caller<'_> {
        Caller { actor: &self.actor, idem: self.idem.as_ref() }
    }
    fn name(&self) -> &'static str {
        self.op.name()
    }
}

impl Keys {
    /// Adds the rows `command` needs.
    pub fn add(&mut self, command: &Command) {
        let caller = command.caller();
        self.add_caller(&caller);
        match &command.op {
            Op::Identity(op) => op.keys(self),
            Op::Pay(op) => op.keys(self, &caller),
            Op::Escrow(op) => op.keys(self, &caller),
            Op::Dispute(op) => op.keys(self, &caller),
            Op::Federation(op) => op.keys(self, &caller),
            Op::Market(op) => op.keys(self, &caller),
            Op::Bounty(op) => op.keys(self, &caller),
            Op::Hire(op) => op.keys(self, &caller),
            Op::Chamber(op) => op.keys(self),
        }
    }
}

/// Runs one command in its capability. Receipts are typed up to here; this
/// is where each is serialised, once, for the answer and the idempotency record.
pub(crate) fn run(batch: &mut Batch<'_>, command: &Command, windows: &dispute::Windows) -> Step {
    let caller = command.caller();
    match &command.op {
        Op::Identity(op) => op.apply(batch, &caller).map(json),
        Op::Pay(op) => op.apply(batch, &caller).map(json),
        Op::Escrow(op) => op.apply(batch, &caller).map(json),
        Op::Dispute(op) => op.apply(batch, &caller, windows).map(json),
        Op::Federation(op) => op.apply(batch, &caller).map(json),
        Op::Market(op) => op.apply(batch, &caller).map(json),
        Op::Bounty(op) => op.apply(batch, &caller).map(json),
        Op::Hire(op) => op.apply(batch, &caller).map(json),
        Op::Chamber(op) => op.apply(batch, &caller).map(json),
    }
}

fn json(receipt: impl serde::Serialize) -> serde_json::Value {
    serde_json::to_value(receipt).expect("receipts serialize")
}

macro_rules! op_from {
    ($($capability:ident => $variant:ident),+) => {
        $(impl From<$capability::Op> for Op {
            fn from(op: $capability::Op) -> Op {
                Op::$variant(op)
            }
        })+
    };
}
op_from!(identity => Identity, pay => Pay, escrow => Escrow, dispute => Dispute, federation => Federation, market => Market, bounty => Bounty, hire => Hire, chamber => Chamber);

//! The composer: every state change in Bazaar is a [`Command`] whose [`Op`]
//! belongs to one capability. This file only composes — one line per
//! capability in the op enum, its name, its rows and its dispatch — so adding
//! a command touches its capability's folder and nothing here.

use crate::kernel::batch::{Batch, Receipts};
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
pub use crate::kernel::request::Idem;

/// What a command answers: its capability's typed receipt, or a refusal. Stored under an idempotency key
/// and replayed as the same type (`kernel::batch::record`).
pub type Outcome = crate::kernel::batch::Outcome<Receipt>;

/// Every success a command answers with: its capability's receipt, tagged by capability. It serialises to the
/// receipt's own JSON (what the API answers); an idempotency record stores it with its tag
/// (`pay.Settled`), so a replay reads back the same variant and serialises to the same bytes.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
#[serde(untagged)]
pub enum Receipt {
    Identity(identity::Receipt),
    Pay(pay::Receipt),
    Escrow(escrow::Receipt),
    Dispute(dispute::Receipt),
    Federation(federation::Receipt),
    Market(market::Receipt),
    Bounty(bounty::Receipt),
    Hire(hire::Receipt),
    Chamber(chamber::Receipt),
    /// A receipt an idempotency record holds without a tag this build reads (written before receipts were
    /// tagged, or by a build with a receipt this one lacks): replayed as its recorded JSON, byte for byte.
    /// Such records go after `IDEMPOTENCY_RETENTION_S`.
    Recorded(serde_json::Value),
}

impl Receipt {
    /// The receipt as the API answers it, for a reader that wants fields by name.
    pub fn to_json(&self) -> serde_json::Value {
        serde_json::to_value(self).expect("receipts serialize")
    }
}

macro_rules! composed_receipts {
    ($($capability:ident => $variant:ident),+) => {
        impl Receipts for Receipt {
            fn tag(&self) -> String {
                match self {
                    $(Receipt::$variant(receipt) => format!("{}.{}", stringify!($capability), receipt.name()),)+
                    Receipt::Recorded(_) => "recorded".into(),
                }
            }
            fn untag(tag: &str, body: serde_json::Value) -> Option<Receipt> {
                let (capability, name) = tag.split_once('.')?;
                match capability {
                    $(stringify!($capability) => $capability::Receipt::read(name, body).map(Receipt::$variant),)+
                    _ => None,
                }
            }
            fn recorded(body: serde_json::Value) -> Receipt {
                Receipt::Recorded(body)
            }
        }
        $(impl From<$capability::Receipt> for Receipt {
            fn from(receipt: $capability::Receipt) -> Receipt {
                Receipt::$variant(receipt)
            }
        })+
    };
}
composed_receipts!(identity => Identity, pay => Pay, escrow => Escrow, dispute => Dispute, federation => Federation, market => Market, bounty => Bounty, hire => Hire, chamber => Chamber);

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

/// Runs one command in its capability and tags its receipt with the capability.
pub(crate) fn run(batch: &mut Batch<'_>, command: &Command, windows: &dispute::Windows) -> Outcome {
    let caller = command.caller();
    match &command.op {
        Op::Identity(op) => op.apply(batch, &caller).map(Receipt::Identity),
        Op::Pay(op) => op.apply(batch, &caller).map(Receipt::Pay),
        Op::Escrow(op) => op.apply(batch, &caller).map(Receipt::Escrow),
        Op::Dispute(op) => op.apply(batch, &caller, windows).map(Receipt::Dispute),
        Op::Federation(op) => op.apply(batch, &caller).map(Receipt::Federation),
        Op::Market(op) => op.apply(batch, &caller).map(Receipt::Market),
        Op::Bounty(op) => op.apply(batch, &caller).map(Receipt::Bounty),
        Op::Hire(op) => op.apply(batch, &caller).map(Receipt::Hire),
        Op::Chamber(op) => op.apply(batch, &caller).map(Receipt::Chamber),
    }
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernel::batch::record;
    use crate::kernel::refusal::{Code, Refusal};
    use bazaar_types::MemberId;

    fn press() -> Receipt {
        Receipt::Chamber(chamber::Receipt::PressRecorded(chamber::PressRecorded {
            attack: "over-ceiling".into(),
            code: "budget_per_call_exceeded".into(),
        }))
    }

    #[test]
    fn a_recorded_receipt_reads_back_as_the_same_variant_and_the_same_bytes() {
        let renamed = Receipt::Identity(identity::Receipt::Renamed(identity::receipts::Renamed {
            member: MemberId("did:key:z6Mk-agent".into()),
            from: "shopper".into(),
            to: "buyer-bot".into(),
        }));
        for receipt in [press(), renamed] {
            let (text, tag) = record::to_parts(&Ok(receipt.clone()));
            let stored: serde_json::Value = serde_json::from_str(&text).unwrap();
            assert_eq!(stored, serde_json::json!({"Ok": receipt.to_json()}), "the text records always held");
            assert_eq!(tag, receipt.tag());
            let read: Outcome = record::from_parts(&text, &tag).unwrap();
            assert_eq!(read, Ok(receipt.clone()), "the same variant, not its JSON");
            let answered = serde_json::to_string(&receipt).unwrap();
            assert_eq!(serde_json::to_string(&read.unwrap()).unwrap(), answered, "a replay answers the same bytes");
            // A build that predates tags reads the same text as it always did.
            let old: Result<serde_json::Value, Refusal> = serde_json::from_str(&text).unwrap();
            assert_eq!(old, Ok(receipt.to_json()));
        }
        let refused = Err(Refusal::new(Code::NotPermitted, "no"));
        let (text, tag) = record::to_parts::<Receipt>(&refused);
        assert_eq!((record::from_parts::<Receipt>(&text, &tag).unwrap(), tag.as_str()), (refused, ""));
    }

    #[test]
    fn a_record_without_a_tag_or_with_an_unknown_one_replays_its_json() {
        let text = r#"{"Ok":{"jti":"tok_1","amount_minor":300}}"#;
        let json = serde_json::json!({"jti": "tok_1", "amount_minor": 300});
        for tag in ["", "pay.Unheard", "unheard.Settled", "untagged", "pay.Settled"] {
            let read = record::from_parts::<Receipt>(text, tag).unwrap();
            assert_eq!(read, Ok(Receipt::Recorded(json.clone())), "{tag:?}");
        }
        assert!(record::from_parts::<Receipt>(r#"{"Err":{"code":"not_permitted","detail":"no"},"Ok":1}"#, "").is_err());
    }

    #[test]
    fn an_outcome_crosses_between_nodes_as_itself_and_an_older_node_reads_it() {
        let applied = crate::apply::Applied { outcome: Ok(press()), replayed: true };
        let sent = serde_json::to_string(&applied).unwrap();
        assert_eq!(serde_json::from_str::<crate::apply::Applied>(&sent).unwrap(), applied);
        // What a node of the previous release reads: the outcome as `{"Ok": …}` and `replayed`; `tag` ignored.
        #[derive(serde::Deserialize, Debug, PartialEq)]
        struct Before {
            outcome: Result<serde_json::Value, Refusal>,
            replayed: bool,
        }
        let before: Before = serde_json::from_str(&sent).unwrap();
        assert_eq!(before, Before { outcome: Ok(press().to_json()), replayed: true });
        let from_before = serde_json::json!({"outcome": {"Ok": press().to_json()}, "replayed": true}).to_string();
        let read: crate::apply::Applied = serde_json::from_str(&from_before).unwrap();
        assert_eq!(read.outcome, Ok(Receipt::Recorded(press().to_json())), "an untagged answer is its JSON");
    }
}

//! One batch of commands over one snapshot: the driver that runs each command
//! once (or replays its idempotency record), and the write primitives every
//! capability uses so each touched row is written once with its final value.
//!
//! What a command *does* is not here: the composer hands the driver a function
//! that dispatches to the command's capability.

use crate::kernel::chain;
use crate::kernel::config::Config;
use crate::kernel::model::*;
use crate::kernel::refusal::{Code, Refusal};
use crate::kernel::request::{Caller, Request};
use crate::kernel::state::{Changes, Dirty, Snapshot};
use bazaar_types::{MemberId, Timestamp};
use serde_json::json;
use std::any::Any;
use std::cell::RefCell;
use std::collections::HashMap;
use std::rc::Rc;

/// What running one command gives: its typed receipt or a refusal. The same
/// type is stored under an idempotency key and replayed (see [`record`]).
pub type Outcome<T> = Result<T, Refusal>;

pub fn refuse<T>(code: Code, detail: impl Into<String>) -> Result<T, Refusal> {
    Err(Refusal::new(code, detail))
}

/// One command's outcome. Sent between nodes with its receipt's tag ([`record`]), so a receipt arrives as
/// the type it left.
#[derive(Clone, Debug, PartialEq)]
pub struct Applied<T> {
    pub outcome: Outcome<T>,
    /// The outcome came from an idempotency record, not from running the command.
    pub replayed: bool,
}

/// A closed set of typed success answers (receipts). Serialising one gives exactly the JSON the API answers;
/// [`Receipts::tag`] names its variant, stored beside that JSON in an idempotency record, and
/// [`Receipts::untag`] reads the JSON back into the same variant, so a replay is the typed receipt the first
/// run answered and serialises to the same bytes. Each capability declares its set with `receipt_set!`.
pub trait Receipts: serde::Serialize + Sized {
    /// The variant's name, stable across builds (`Settled`; the composer's are `pay.Settled`).
    fn tag(&self) -> String;
    /// The receipt `tag` names, read from its JSON; `None` when the tag is unknown or the JSON is not its shape.
    fn untag(tag: &str, body: serde_json::Value) -> Option<Self>;
    /// A receipt recorded without a tag (before receipts were tagged), or under a tag this build cannot read:
    /// replayed as its recorded JSON. The composer's `Receipt::Recorded`.
    fn recorded(body: serde_json::Value) -> Self;
}

/// Declares a capability's closed set of receipts as an untagged enum (it serialises to the receipt's own
/// JSON), each variant's `name` (its tag) and `read` (a variant from its tag and JSON): `receipt_set! {
/// #[derive(…, serde::Serialize)] #[serde(untagged)] pub enum Receipt { A(A), B(Box<B>) } }`. The composer
/// implements [`Receipts`] over every capability's set.
#[macro_export]
macro_rules! receipt_set {
    ($(#[$meta:meta])* pub enum $name:ident { $($(#[$vmeta:meta])* $variant:ident($ty:ty)),+ $(,)? }) => {
        $(#[$meta])*
        pub enum $name { $($(#[$vmeta])* $variant($ty)),+ }
        impl $name {
            /// The variant's name: the tag an idempotency record stores beside the receipt's JSON.
            pub fn name(&self) -> &'static str {
                match self { $($name::$variant(_) => stringify!($variant)),+ }
            }
            /// The receipt `tag` names, read from its JSON.
            pub fn read(tag: &str, body: serde_json::Value) -> Option<$name> {
                match tag {
                    $(stringify!($variant) => serde_json::from_value::<$ty>(body).ok().map($name::$variant),)+
                    _ => None,
                }
            }
        }
    };
}

/// The stored (and node-to-node) form of an [`Outcome`]: the text `{"Ok": <the receipt's JSON>}` or
/// `{"Err": <refusal>}` — exactly what records always held, so a build that predates tags (a node mid-roll, a
/// migration reading `$.Ok.jti`) still reads it — and, beside it, the receipt's tag (`pay.Settled`), which a
/// record keeps in its own column (`IdempotencyRecord::tag`) and a node-to-node [`Applied`] in its own member.
/// A record without a tag (written before receipts were tagged), or with one this build cannot read, replays
/// as [`Receipts::recorded`]: its JSON, byte for byte, until the retention period drops it.
pub mod record {
    use super::{Applied, Outcome, Receipts};
    use crate::kernel::refusal::Refusal;
    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    #[derive(Serialize)]
    enum Written<'a, T> {
        Ok(&'a T),
        Err(&'a Refusal),
    }

    #[derive(Deserialize)]
    enum Read {
        Ok(serde_json::Value),
        Err(Refusal),
    }

    /// `outcome` as written, and its receipt's tag (empty for a refusal).
    fn written<T: Receipts>(outcome: &Outcome<T>) -> (Written<'_, T>, String) {
        match outcome {
            Ok(receipt) => (Written::Ok(receipt), receipt.tag()),
            Err(refusal) => (Written::Err(refusal), String::new()),
        }
    }

    /// The record's text for `outcome`, and its tag (empty for a refusal).
    pub fn to_parts<T: Receipts>(outcome: &Outcome<T>) -> (String, String) {
        let (written, tag) = written(outcome);
        (serde_json::to_string(&written).expect("outcomes serialize"), tag)
    }

    /// The outcome a record's text and tag hold.
    pub fn from_parts<T: Receipts>(text: &str, tag: &str) -> serde_json::Result<Outcome<T>> {
        Ok(read(serde_json::from_str(text)?, tag))
    }

    fn read<T: Receipts>(read: Read, tag: &str) -> Outcome<T> {
        match read {
            Read::Ok(body) if tag.is_empty() => Ok(T::recorded(body)),
            Read::Ok(body) => Ok(T::untag(tag, body.clone()).unwrap_or_else(|| T::recorded(body))),
            Read::Err(refusal) => Err(refusal),
        }
    }

    /// An [`Applied`] between nodes: `{"outcome": {"Ok": …}, "replayed": …, "tag": …}`; a node that does
    /// not know `tag` ignores it and reads the rest as before.
    #[derive(Serialize)]
    struct AppliedOut<'a, T> {
        outcome: Written<'a, T>,
        replayed: bool,
        #[serde(skip_serializing_if = "String::is_empty")]
        tag: String,
    }

    #[derive(Deserialize)]
    struct AppliedIn {
        outcome: Read,
        replayed: bool,
        #[serde(default)]
        tag: String,
    }

    impl<T: Receipts> Serialize for Applied<T> {
        fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
            let (outcome, tag) = written(&self.outcome);
            AppliedOut { outcome, replayed: self.replayed, tag }.serialize(serializer)
        }
    }

    impl<'de, T: Receipts> Deserialize<'de> for Applied<T> {
        fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
            let AppliedIn { outcome, replayed, tag } = AppliedIn::deserialize(deserializer)?;
            Ok(Applied { outcome: read(outcome, &tag), replayed })
        }
    }
}

/// A closed set of event kinds, one enum per capability. The stored kind is
/// the string; the enum is how code names it.
pub trait EventKind: Copy {
    fn as_str(self) -> &'static str;
}

/// A typed event body: it serialises to the stored body and names its own
/// kind, so a kind cannot be written with another kind's body. Each
/// capability declares its bodies in its `events.rs`; [`Batch::emit`] writes them.
pub trait EventBody: serde::Serialize {
    type Kind: EventKind;
    /// The shape this build writes, stored as `version` beside the body's
    /// fields. Bump it when a field changes meaning or goes away; readers of
    /// older events see either no `version` (written before versions) or a
    /// lower one.
    const VERSION: u32 = 1;
    fn kind(&self) -> Self::Kind;
}

/// The field every typed event body is stored with (see [`EventBody::VERSION`]).
pub const EVENT_VERSION_FIELD: &str = "version";

/// Declares which kind each typed event body is written under:
/// `crate::event_bodies!(Body => Family::Kind, …)`.
#[macro_export]
macro_rules! event_bodies {
    ($($body:ident => $family:ident :: $kind:ident),+ $(,)?) => {
        $(impl $crate::kernel::batch::EventBody for $body {
            type Kind = $family;
            fn kind(&self) -> $family {
                $family::$kind
            }
        })+
    };
}

/// `From` each of a capability's receipt types into its untagged `Receipt`
/// enum, whose variants are named after the types: `crate::receipts_into!(Receipt: A, B, …)`.
#[macro_export]
macro_rules! receipts_into {
    ($receipt:ident : $($variant:ident),+ $(,)?) => {
        $(impl From<$variant> for $receipt {
            fn from(receipt: $variant) -> $receipt {
                $receipt::$variant(receipt)
            }
        })+
    };
}

/// Declares a capability's closed enum of event kinds and their stored names.
#[macro_export]
macro_rules! event_kinds {
    ($(#[$meta:meta])* $name:ident { $($(#[$vmeta:meta])* $variant:ident => $text:literal),+ $(,)? }) => {
        $(#[$meta])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        pub enum $name { $($(#[$vmeta])* $variant),+ }
        impl $name {
            /// Every kind, for the uniqueness check and for readers.
            pub const ALL: &'static [$name] = &[$($name::$variant),+];
            /// The kind as stored on the event ledger.
            pub fn parse(text: &str) -> Option<$name> {
                match text { $($text => Some($name::$variant),)+ _ => None }
            }
        }
        impl $crate::kernel::batch::EventKind for $name {
            fn as_str(self) -> &'static str {
                match self { $($name::$variant => $text),+ }
            }
        }
        /// Every event kind this module declares, as stored: the composer collects each module's
        /// (`command::EVENT_KIND_NAMES`), so no list of event families is written anywhere else.
        pub const EVENT_KIND_NAMES: &[&str] = &[$($text),+];
    };
}

event_kinds! {
    /// The kernel's own events.
    KernelEvent {
        /// A refused command under an idempotency key: it stays refused.
        RefusalRecorded => "refusal.recorded",
    }
}

/// `refusal.recorded`: a command refused under an idempotency key (it stays refused).
#[derive(serde::Serialize)]
struct RefusalRecorded<'r> {
    op: &'static str,
    code: Code,
    key: &'r str,
}

impl EventBody for RefusalRecorded<'_> {
    type Kind = KernelEvent;
    fn kind(&self) -> KernelEvent {
        KernelEvent::RefusalRecorded
    }
}

/// Runs `requests` in order over `snap`; `run` dispatches one command to its
/// capability. Returns each outcome and the rows to write.
pub fn apply_batch<R: Request, T: Receipts>(
    snap: &mut Snapshot,
    config: &Config,
    requests: &[R],
    now: Timestamp,
    mut run: impl FnMut(&mut Batch<'_>, &R) -> Outcome<T>,
) -> (Vec<Applied<T>>, Changes) {
    let mut batch =
        Batch { snap, config, now, changes: Changes::default(), dirty: Dirty::default(), typed: RefCell::default() };
    let results = requests.iter().map(|r| batch.apply_one(r, &mut run)).collect();
    let changes = batch.finish();
    (results, changes)
}

pub struct Batch<'a> {
    pub snap: &'a mut Snapshot,
    pub config: &'a Config,
    pub now: Timestamp,
    pub changes: Changes,
    dirty: Dirty,
    /// Documents decoded (or written) in this batch, by kind and id: each stored body is decoded once.
    pub(crate) typed: RefCell<HashMap<(DocKind, String), Rc<dyn Any>>>,
}

impl Batch<'_> {
    fn apply_one<R: Request, T: Receipts>(
        &mut self,
        request: &R,
        run: &mut impl FnMut(&mut Self, &R) -> Outcome<T>,
    ) -> Applied<T> {
        let caller = request.caller();
        if let Some(idem) = caller.idem {
            if let Some(record) = self.snap.idem.get(&(idem.scope.clone(), idem.key.clone())) {
                if record.fingerprint != idem.fingerprint {
                    let refusal = Refusal::new(
                        Code::IdempotencyConflict,
                        "This Idempotency-Key was first used with a different request; use a new key for a new request.",
                    );
                    return Applied { outcome: Err(refusal), replayed: false };
                }
                let outcome = record::from_parts(&record.outcome, &record.tag).expect("stored outcomes parse");
                return Applied { outcome, replayed: true };
            }
        }
        let outcome = run(self, request);
        if let Some(idem) = caller.idem.filter(|idem| outcome.is_ok() || idem.keeps_refusals) {
            let (text, tag) = record::to_parts(&outcome);
            let record = IdempotencyRecord {
                scope: idem.scope.clone(),
                key: idem.key.clone(),
                fingerprint: idem.fingerprint.clone(),
                outcome: text,
                tag,
                created_at: self.now,
            };
            self.snap.idem.insert((record.scope.clone(), record.key.clone()), record.clone());
            self.changes.insert_idem.push(record);
            if let Err(refusal) = &outcome {
                let body = RefusalRecorded { op: request.name(), code: refusal.code, key: &idem.key };
                self.emit(&caller, &body);
            }
        }
        Applied { outcome, replayed: false }
    }

    /// Appends a typed event to the chain, stamped with the caller's handle at the time.
    pub fn emit<B: EventBody>(&mut self, caller: &Caller<'_>, body: &B) {
        let mut value = serde_json::to_value(body).expect("event bodies serialize");
        let fields = value.as_object_mut().expect("event bodies are objects");
        assert!(!fields.contains_key(EVENT_VERSION_FIELD), "`version` is the kernel's field");
        fields.insert(EVENT_VERSION_FIELD.into(), B::VERSION.into());
        self.event(caller, body.kind(), value);
    }

    /// Appends an event to the chain, stamped with the caller's handle at the time.
    pub fn event(&mut self, caller: &Caller<'_>, kind: impl EventKind, mut body: serde_json::Value) {
        merge(&mut body, json!({"authored_handle": caller.actor.handle}));
        let event = chain::append(
            &mut self.snap.head,
            kind.as_str(),
            body,
            &caller.actor.id,
            caller.actor.principal(),
            self.now,
        );
        self.changes.insert_events.push(event);
    }

    pub fn doc(&self, kind: DocKind, id: &str) -> Option<&DocRow> {
        self.snap.docs.get(&(kind, id.to_string()))
    }

    /// Writes a document that must not exist yet.
    pub fn insert_doc(&mut self, row: DocRow) {
        let key = (row.kind, row.id.clone());
        assert!(!self.snap.docs.contains_key(&key), "new documents are new");
        self.dirty.docs_new.insert(key.clone());
        self.dirty.docs.insert(key.clone());
        self.snap.docs.insert(key, row);
    }

    /// Rewrites a document loaded (or written) by this batch.
    pub fn update_doc(&mut self, row: DocRow) {
        let key = (row.kind, row.id.clone());
        assert!(self.snap.docs.contains_key(&key), "updated documents exist");
        self.dirty.docs.insert(key.clone());
        self.snap.docs.insert(key, row);
    }

    /// Inserts or rewrites, whichever the snapshot says; for records kept per key (peers, stake, listings).
    pub fn upsert_doc(&mut self, row: DocRow) {
        if self.snap.docs.contains_key(&(row.kind, row.id.clone())) {
            self.update_doc(row);
        } else {
            self.insert_doc(row);
        }
    }

    /// Stores a new blob; the caller checked it is not stored yet.
    pub fn insert_blob(&mut self, blob: Blob) {
        assert!(self.snap.blobs.insert(blob.sha256.clone()), "blobs are stored once");
        self.changes.insert_blobs.push(blob);
    }

    pub fn record_settlement(&mut self, settlement: Settlement) {
        self.snap.settlements_by_token.insert(settlement.jti.clone(), settlement.clone());
        self.snap
            .settlements_by_order
            .insert((settlement.merchant.clone(), settlement.order_id.clone()), settlement.clone());
        self.changes.insert_settlements.push(settlement);
    }

    /// A new member and its handle.
    pub fn insert_member(&mut self, member: Member) {
        self.insert_handle(HandleRow {
            handle: member.handle.clone(),
            member: member.id.clone(),
            retired: false,
            since: self.now,
        });
        self.dirty.members_new.insert(member.id.clone());
        self.snap.members.insert(member.id.clone(), member);
    }

    /// A stored member changed (its handle, after `retire_handle` and `insert_handle`).
    pub fn update_member(&mut self, member: Member) {
        self.dirty.members.insert(member.id.clone());
        self.snap.members.insert(member.id.clone(), member);
    }

    pub fn insert_handle(&mut self, row: HandleRow) {
        self.changes.insert_handles.push(row.clone());
        self.snap.handles.insert(row.handle.clone(), row);
    }

    /// Keeps a handle given up by `member`, reserved forever.
    pub fn retire_handle(&mut self, handle: &str, member: &MemberId) {
        self.changes.retire_handles.push(handle.to_string());
        let row = HandleRow { handle: handle.to_string(), member: member.clone(), retired: true, since: self.now };
        self.snap.handles.insert(handle.to_string(), row);
    }

    pub fn put_credential(&mut self, credential: Credential) {
        self.dirty.credentials.insert(credential.hash.clone());
        self.snap.credentials.insert(credential.hash.clone(), credential);
    }

    pub fn put_invite(&mut self, invite: Invite) {
        self.dirty.invites.insert(invite.code_hash.clone());
        self.snap.invites.insert(invite.code_hash.clone(), invite);
    }

    pub fn put_account(&mut self, account: Account) {
        assert!(account.allow_negative || account.available() >= 0);
        self.dirty.accounts.insert(account.id.clone());
        self.snap.accounts.insert(account.id.clone(), account);
    }

    pub fn put_budget(&mut self, budget: Budget) {
        self.dirty.budgets.insert(budget.agent.clone());
        self.snap.budgets.insert(budget.agent.clone(), budget);
    }

    fn finish(mut self) -> Changes {
        let snap = &*self.snap;
        let dirty = std::mem::take(&mut self.dirty);
        let mut changes = self.changes;
        changes.insert_members = dirty.members_new.iter().map(|id| snap.members[id].clone()).collect();
        changes.update_members =
            dirty.members.difference(&dirty.members_new).map(|id| snap.members[id].clone()).collect();
        changes.upsert_credentials = dirty.credentials.iter().map(|h| snap.credentials[h].clone()).collect();
        changes.upsert_invites = dirty.invites.iter().map(|h| snap.invites[h].clone()).collect();
        changes.upsert_accounts = dirty.accounts.iter().map(|id| snap.accounts[id].clone()).collect();
        changes.upsert_budgets = dirty.budgets.iter().map(|id| snap.budgets[id].clone()).collect();
        changes.insert_docs = dirty.docs_new.iter().map(|k| snap.docs[k].clone()).collect();
        changes.update_docs = dirty.docs.difference(&dirty.docs_new).map(|k| snap.docs[k].clone()).collect();
        changes
    }
}

/// Adds `extra`'s fields to the object `into`.
pub fn merge(into: &mut serde_json::Value, extra: serde_json::Value) {
    if let (Some(target), serde_json::Value::Object(source)) = (into.as_object_mut(), extra) {
        target.extend(source);
    }
}

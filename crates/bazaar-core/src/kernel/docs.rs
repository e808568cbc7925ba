//! Typed documents: each capability's document kind has one body type with a
//! version, encoded into a [`DocRow`] on write and decoded once per batch on
//! read. A stored document that does not decode stops the writer with an
//! error naming its kind, id and version: the core never guesses at a body.

use crate::kernel::batch::Batch;
use crate::kernel::model::{DocKind, DocRow};
use crate::kernel::refusal::{Code, Refusal};
use bazaar_types::{MemberId, Timestamp};
use serde::de::DeserializeOwned;
use serde::Serialize;
use std::any::Any;
use std::rc::Rc;

/// The field every stored body carries; bodies written before versions
/// existed have none and read as version 1.
pub const VERSION_FIELD: &str = "version";

/// One document kind's body.
pub trait Document: Serialize + DeserializeOwned + Clone + 'static {
    const KIND: DocKind;
    /// The body version this build writes and reads (it reads every older one it knows).
    const VERSION: u32;
    fn doc_id(&self) -> String;
    /// Members this document concerns; stored once, when it is created.
    fn parties(&self) -> Vec<MemberId>;
    /// When the sweeper must next look at it.
    fn due_at(&self) -> Option<Timestamp> {
        None
    }
    /// Asserts the document's money invariant (a contract's or an order's
    /// balance); the batch calls it on every write, so a wrong body stops the
    /// writer instead of being committed.
    fn assert_invariants(&self) {}
}

/// Implements [`Document`] for a body type from its kind, version and the
/// expressions that give its id, its parties and (optionally) its due time.
#[macro_export]
macro_rules! document {
    ($ty:ty, $kind:ident, version $version:literal, id = |$d:ident| $id:expr, parties = |$p:ident| $parties:expr
        $(, due = |$u:ident| $due:expr)? $(, invariants = |$i:ident| $invariants:expr)? $(,)?) => {
        impl $crate::kernel::docs::Document for $ty {
            const KIND: $crate::kernel::model::DocKind = $crate::kernel::model::DocKind::$kind;
            const VERSION: u32 = $version;
            fn doc_id(&self) -> String {
                let $d = self;
                $id
            }
            fn parties(&self) -> Vec<bazaar_types::MemberId> {
                let $p = self;
                $parties
            }
            $(fn due_at(&self) -> Option<bazaar_types::Timestamp> {
                let $u = self;
                $due
            })?
            $(fn assert_invariants(&self) {
                let $i = self;
                $invariants
            })?
        }
    };
}

/// `first`, then each of `more` not already among them, in order: a document's party list.
pub fn parties_with(mut first: Vec<MemberId>, more: impl IntoIterator<Item = MemberId>) -> Vec<MemberId> {
    for party in more {
        if !first.contains(&party) {
            first.push(party);
        }
    }
    first
}

/// A stored document this build cannot read.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("stored {kind} document {id} (version {version}) does not decode: {reason}")]
pub struct DocError {
    pub kind: &'static str,
    pub id: String,
    pub version: u64,
    pub reason: String,
}

/// The row for `doc`, with its version in the body.
pub fn encode<T: Document>(doc: &T) -> DocRow {
    encode_due(doc, doc.due_at())
}

/// The row for `doc` with a due time the body does not hold (a relay's next retry).
pub fn encode_due<T: Document>(doc: &T, due_at: Option<Timestamp>) -> DocRow {
    let mut body = serde_json::to_value(doc).expect("document bodies serialize");
    let object = body.as_object_mut().expect("document bodies are objects");
    object.insert(VERSION_FIELD.into(), T::VERSION.into());
    DocRow { kind: T::KIND, id: doc.doc_id(), body, due_at, parties: doc.parties() }
}

/// Reads a stored row as `T`: the kind must match and the version be one this build knows.
pub fn decode<T: Document>(row: &DocRow) -> Result<T, DocError> {
    let version = row.body.get(VERSION_FIELD).and_then(|v| v.as_u64()).unwrap_or(1);
    let fail = |reason: String| DocError { kind: row.kind.as_str(), id: row.id.clone(), version, reason };
    if row.kind != T::KIND {
        return Err(fail(format!("expected a {} document", T::KIND.as_str())));
    }
    if version == 0 || version > u64::from(T::VERSION) {
        return Err(fail(format!("this build reads versions 1 to {}", T::VERSION)));
    }
    serde_json::from_value(row.body.clone()).map_err(|error| fail(error.to_string()))
}

impl Batch<'_> {
    /// The document `id` of kind `T::KIND`, decoded at most once per batch.
    /// A stored body that does not decode stops the writer (see the module docs).
    pub fn load<T: Document>(&self, id: &str) -> Option<T> {
        let key = (T::KIND, id.to_string());
        if let Some(cached) = self.typed.borrow().get(&key) {
            return Some(cached.downcast_ref::<T>().expect("one body type per kind").clone());
        }
        let row = self.snap.docs.get(&key)?;
        let doc: T = decode(row).unwrap_or_else(|error| panic!("{error}; the writer stops rather than guess"));
        self.typed.borrow_mut().insert(key, Rc::new(doc.clone()) as Rc<dyn Any>);
        Some(doc)
    }

    pub fn exists<T: Document>(&self, id: &str) -> bool {
        self.snap.docs.contains_key(&(T::KIND, id.to_string()))
    }

    /// The document a command would create is not stored yet; if it is (its id
    /// derives from a task, a job or an Idempotency-Key whose record was
    /// pruned), refuses with `code` and the stored one attached. Asked before
    /// anything moves: inserting it again would stop the writer.
    pub fn not_stored<T: Document>(&self, id: &str, code: Code, detail: &str) -> Result<(), Refusal> {
        match self.load::<T>(id) {
            Some(existing) => Err(Refusal::new(code, detail.to_string())
                .with(serde_json::to_value(existing).expect("documents serialize"))),
            None => Ok(()),
        }
    }

    /// Writes a new document.
    pub fn insert<T: Document>(&mut self, doc: &T) {
        self.remember(doc);
        self.insert_doc(encode(doc));
    }

    /// Rewrites a stored document.
    pub fn update<T: Document>(&mut self, doc: &T) {
        self.remember(doc);
        self.update_doc(encode(doc));
    }

    /// Inserts or rewrites, whichever the snapshot says.
    pub fn upsert<T: Document>(&mut self, doc: &T) {
        self.remember(doc);
        self.upsert_doc(encode(doc));
    }

    /// Rewrites a stored document with a due time its body does not hold.
    pub fn update_due<T: Document>(&mut self, doc: &T, due_at: Option<Timestamp>) {
        self.remember(doc);
        self.update_doc(encode_due(doc, due_at));
    }

    /// Writes a new document with a due time its body does not hold.
    pub fn insert_due<T: Document>(&mut self, doc: &T, due_at: Option<Timestamp>) {
        self.remember(doc);
        self.insert_doc(encode_due(doc, due_at));
    }

    fn remember<T: Document>(&self, doc: &T) {
        doc.assert_invariants();
        self.typed.borrow_mut().insert((T::KIND, doc.doc_id()), Rc::new(doc.clone()) as Rc<dyn Any>);
    }
}

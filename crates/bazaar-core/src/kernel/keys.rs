//! The rows a batch needs, by table: each capability names its command's rows
//! here so an adapter can load them all before the batch runs.

use crate::kernel::model::DocKind;
use crate::kernel::request::Caller;
use bazaar_types::{AccountId, HoldId, MemberId, OrderId, TokenId};
use std::collections::BTreeSet;

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Keys {
    pub members: BTreeSet<MemberId>,
    pub handles: BTreeSet<String>,
    pub credentials: BTreeSet<String>,
    pub invites: BTreeSet<String>,
    pub accounts: BTreeSet<AccountId>,
    pub budgets: BTreeSet<MemberId>,
    pub holds: BTreeSet<HoldId>,
    pub tokens: BTreeSet<TokenId>,
    pub settlements_by_token: BTreeSet<TokenId>,
    pub settlements_by_order: BTreeSet<(MemberId, OrderId)>,
    pub idem: BTreeSet<(String, String)>,
    pub docs: BTreeSet<(DocKind, String)>,
    /// Blobs by SHA-256 (only whether each is stored is loaded, never its bytes).
    pub blobs: BTreeSet<String>,
}

impl Keys {
    /// What every command needs: its actor and its idempotency record.
    pub fn add_caller(&mut self, caller: &Caller<'_>) {
        self.members.insert(caller.actor.id.clone());
        if let Some(idem) = caller.idem {
            self.idem.insert((idem.scope.clone(), idem.key.clone()));
        }
    }

    pub fn doc(&mut self, kind: DocKind, id: impl Into<String>) {
        self.docs.insert((kind, id.into()));
    }
}

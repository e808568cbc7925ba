//! The rows a batch works on ([`Snapshot`]) and what it changed ([`Changes`]).

use crate::kernel::chain::ChainHead;
use crate::kernel::model::*;
use bazaar_types::{AccountId, HoldId, MemberId, OrderId, TokenId};
use std::collections::{BTreeSet, HashMap, HashSet};

/// Everything a batch may read, loaded by the adapter from [`crate::kernel::keys::Keys`].
/// Absent rows are simply missing from the maps.
#[derive(Clone, Debug)]
pub struct Snapshot {
    pub head: ChainHead,
    pub members: HashMap<MemberId, Member>,
    pub handles: HashMap<String, HandleRow>,
    pub credentials: HashMap<String, Credential>,
    pub invites: HashMap<String, Invite>,
    pub accounts: HashMap<AccountId, Account>,
    pub budgets: HashMap<MemberId, Budget>,
    pub holds: HashMap<HoldId, Hold>,
    pub tokens: HashMap<TokenId, TokenRecord>,
    pub settlements_by_token: HashMap<TokenId, Settlement>,
    pub settlements_by_order: HashMap<(MemberId, OrderId), Settlement>,
    pub idem: HashMap<(String, String), IdempotencyRecord>,
    pub docs: HashMap<(DocKind, String), DocRow>,
    /// Which of the blobs the keys named are stored.
    pub blobs: HashSet<String>,
}

impl Snapshot {
    pub fn empty(head: ChainHead) -> Snapshot {
        Snapshot {
            head,
            members: HashMap::new(),
            handles: HashMap::new(),
            credentials: HashMap::new(),
            invites: HashMap::new(),
            accounts: HashMap::new(),
            budgets: HashMap::new(),
            holds: HashMap::new(),
            tokens: HashMap::new(),
            settlements_by_token: HashMap::new(),
            settlements_by_order: HashMap::new(),
            idem: HashMap::new(),
            docs: HashMap::new(),
            blobs: HashSet::new(),
        }
    }
}

/// What one batch wrote. Rows in `upsert_*` replace the stored row (or create
/// it); rows in `insert_*` are new and must not collide with stored ones — the
/// database's unique constraints refuse a collision, which is the second
/// layer behind the core's own checks.
#[derive(Clone, Debug, Default)]
pub struct Changes {
    pub insert_members: Vec<Member>,
    pub update_members: Vec<Member>,
    pub insert_handles: Vec<HandleRow>,
    /// Handles given up by a rename: kept, marked retired, reserved forever.
    pub retire_handles: Vec<String>,
    pub upsert_credentials: Vec<Credential>,
    pub upsert_invites: Vec<Invite>,
    pub upsert_accounts: Vec<Account>,
    pub upsert_budgets: Vec<Budget>,
    pub insert_holds: Vec<Hold>,
    /// Holds leaving `pending`. Adapters also insert a row in a table keyed
    /// by hold id, so a hold cannot resolve twice even if the core erred.
    pub resolve_holds: Vec<Hold>,
    pub insert_tokens: Vec<TokenRecord>,
    pub insert_settlements: Vec<Settlement>,
    pub insert_transfers: Vec<Transfer>,
    pub insert_idem: Vec<IdempotencyRecord>,
    pub insert_events: Vec<Event>,
    /// New documents; a stored one with the same (kind, id) is a constraint
    /// violation (a contract id or a dispute's subject used twice).
    pub insert_docs: Vec<DocRow>,
    /// Documents that changed; `parties` of an updated row are already stored.
    pub update_docs: Vec<DocRow>,
    /// New blobs; one already stored under the same SHA-256 is a constraint violation.
    pub insert_blobs: Vec<Blob>,
}

/// Tracks which cached rows a batch touched, so each is written once with its final value.
#[derive(Debug, Default)]
pub(crate) struct Dirty {
    pub members_new: BTreeSet<MemberId>,
    pub members: BTreeSet<MemberId>,
    pub credentials: BTreeSet<String>,
    pub invites: BTreeSet<String>,
    pub accounts: BTreeSet<AccountId>,
    pub budgets: BTreeSet<MemberId>,
    pub docs_new: BTreeSet<(DocKind, String)>,
    pub docs: BTreeSet<(DocKind, String)>,
}

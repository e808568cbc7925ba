//! Shared by the model-based tests: an in-memory "database" that holds every row ever written, loads the rows a
//! batch's `Keys` name (as a storage adapter would), and folds each batch's `Changes` under the unique constraints an
//! adapter enforces; plus the end-to-end audit of what it holds.
//!
//! Each test file compiles this module on its own and uses a different part of it.
#![allow(dead_code)]

use bazaar_core::audit::Auditor;
use bazaar_core::chain::{self, ChainHead};
use bazaar_core::command::Keys;
use bazaar_core::model::*;
use bazaar_core::state::{Changes, Snapshot};
use bazaar_core::types::TransferId;
use std::collections::{HashMap, HashSet};
use std::hash::Hash;

/// Every row ever written, as an adapter would hold it.
#[derive(Clone)]
pub struct Db {
    pub rows: Snapshot,
    pub transfers: Vec<Transfer>,
    pub transfer_ids: HashSet<TransferId>,
    pub events: Vec<Event>,
}

pub fn insert_new<K: Hash + Eq + std::fmt::Debug, V>(map: &mut HashMap<K, V>, key: K, value: V, table: &str) {
    assert!(!map.contains_key(&key), "unique constraint on {table}: {key:?} already stored");
    map.insert(key, value);
}

fn pick<K: Hash + Eq + Clone, V: Clone>(from: &HashMap<K, V>, keys: impl IntoIterator<Item = K>) -> HashMap<K, V> {
    keys.into_iter().filter_map(|k| from.get(&k).map(|v| (k, v.clone()))).collect()
}

impl Db {
    pub fn new() -> Db {
        Db {
            rows: Snapshot::empty(ChainHead::genesis()),
            transfers: Vec::new(),
            transfer_ids: HashSet::new(),
            events: Vec::new(),
        }
    }

    /// The snapshot an adapter loads for a batch: only the rows its keys name.
    pub fn load(&self, keys: &Keys) -> Snapshot {
        let r = &self.rows;
        Snapshot {
            head: r.head.clone(),
            members: pick(&r.members, keys.members.iter().cloned()),
            handles: pick(&r.handles, keys.handles.iter().cloned()),
            credentials: pick(&r.credentials, keys.credentials.iter().cloned()),
            invites: pick(&r.invites, keys.invites.iter().cloned()),
            accounts: pick(&r.accounts, keys.accounts.iter().cloned()),
            budgets: pick(&r.budgets, keys.budgets.iter().cloned()),
            holds: pick(&r.holds, keys.holds.iter().cloned()),
            tokens: pick(&r.tokens, keys.tokens.iter().cloned()),
            settlements_by_token: pick(&r.settlements_by_token, keys.settlements_by_token.iter().cloned()),
            settlements_by_order: pick(&r.settlements_by_order, keys.settlements_by_order.iter().cloned()),
            idem: pick(&r.idem, keys.idem.iter().cloned()),
            docs: pick(&r.docs, keys.docs.iter().cloned()),
            blobs: keys.blobs.iter().filter(|sha| r.blobs.contains(*sha)).cloned().collect(),
        }
    }

    /// Writes one batch's changes, refusing what a database's unique constraints would refuse.
    pub fn fold(&mut self, changes: Changes) {
        let r = &mut self.rows;
        for m in changes.insert_members {
            insert_new(&mut r.members, m.id.clone(), m, "members");
        }
        for m in changes.update_members {
            assert!(r.members.contains_key(&m.id), "update of unknown member {}", m.id);
            r.members.insert(m.id.clone(), m);
        }
        for h in changes.insert_handles {
            insert_new(&mut r.handles, h.handle.clone(), h, "handles");
        }
        for h in changes.retire_handles {
            r.handles.get_mut(&h).expect("retired handle exists").retired = true;
        }
        for c in changes.upsert_credentials {
            r.credentials.insert(c.hash.clone(), c);
        }
        for i in changes.upsert_invites {
            r.invites.insert(i.code_hash.clone(), i);
        }
        for a in changes.upsert_accounts {
            r.accounts.insert(a.id.clone(), a);
        }
        for b in changes.upsert_budgets {
            r.budgets.insert(b.agent.clone(), b);
        }
        for h in changes.insert_holds {
            assert_eq!(h.state, HoldState::Pending, "holds are born pending");
            insert_new(&mut r.holds, h.id.clone(), h, "holds");
        }
        for h in changes.resolve_holds {
            let stored = r.holds.get_mut(&h.id).expect("resolved hold exists");
            assert_eq!(stored.state, HoldState::Pending, "hold {} resolved twice", h.id);
            assert_ne!(h.state, HoldState::Pending, "hold {} resolved to pending", h.id);
            assert_eq!((&stored.account, stored.amount, stored.expires_at), (&h.account, h.amount, h.expires_at));
            assert!(h.posted_amount <= h.amount, "hold {} posted more than it held", h.id);
            *stored = h;
        }
        for t in changes.insert_tokens {
            insert_new(&mut r.tokens, t.jti.clone(), t, "tokens");
        }
        for s in changes.insert_settlements {
            insert_new(&mut r.settlements_by_token, s.jti.clone(), s.clone(), "settlements(jti)");
            let order = (s.merchant.clone(), s.order_id.clone());
            insert_new(&mut r.settlements_by_order, order, s, "settlements(merchant, order)");
        }
        for t in changes.insert_transfers {
            assert!(self.transfer_ids.insert(t.id.clone()), "unique constraint on transfers: {}", t.id);
            self.transfers.push(t);
        }
        for i in changes.insert_idem {
            insert_new(&mut r.idem, (i.scope.clone(), i.key.clone()), i, "idempotency");
        }
        for d in changes.insert_docs {
            insert_new(&mut r.docs, (d.kind, d.id.clone()), d, "docs");
        }
        for d in changes.update_docs {
            let stored = r.docs.get_mut(&(d.kind, d.id.clone())).expect("updated document exists");
            assert_eq!(stored.parties, d.parties, "parties never change");
            *stored = d;
        }
        for b in changes.insert_blobs {
            assert!(r.blobs.insert(b.sha256.clone()), "unique constraint on blobs: {}", b.sha256);
        }
        for e in changes.insert_events {
            assert_eq!(e.seq, r.head.seq + 1, "events are appended in order");
            r.head = ChainHead { seq: e.seq, hash: e.hash.clone() };
            self.events.push(e);
        }
    }

    /// The chain verifies end to end, the stored head is its last event, and the auditor's recomputation from the
    /// transfers and holds agrees with every cached account row (conservation, floors, pending sums).
    pub fn audit(&self) {
        let rows = &self.rows;
        let mut head = ChainHead::genesis();
        chain::verify_page(&mut head, &self.events).expect("the chain verifies");
        assert_eq!(head, rows.head, "the stored head is the last event");
        let mut auditor = Auditor::new();
        auditor.events(&self.events);
        auditor.transfers(&self.transfers);
        auditor.holds(&rows.holds.values().cloned().collect::<Vec<_>>());
        let report = auditor.finish(&rows.accounts.values().cloned().collect::<Vec<_>>());
        assert!(report.ok, "audit: {:?}", report.problems);
        assert_eq!((report.balance_sum_minor, report.events_verified), (0, self.events.len() as u64));
    }

    /// The auditor's recomputation without the chain (for callers that verify the chain page by page).
    pub fn audit_ledger(&self) {
        let mut auditor = Auditor::new();
        auditor.transfers(&self.transfers);
        auditor.holds(&self.rows.holds.values().cloned().collect::<Vec<_>>());
        let report = auditor.finish(&self.rows.accounts.values().cloned().collect::<Vec<_>>());
        assert!(report.ok, "audit: {:?}", report.problems);
        assert_eq!(report.balance_sum_minor, 0);
    }
}

/// The maps of two snapshots agree, row for row.
pub fn assert_same_rows(a: &Snapshot, b: &Snapshot, context: &str) {
    assert_eq!(a.head, b.head, "{context}: head");
    assert_eq!(a.members, b.members, "{context}: members");
    assert_eq!(a.handles, b.handles, "{context}: handles");
    assert_eq!(a.credentials, b.credentials, "{context}: credentials");
    assert_eq!(a.invites, b.invites, "{context}: invites");
    assert_eq!(a.accounts, b.accounts, "{context}: accounts");
    assert_eq!(a.budgets, b.budgets, "{context}: budgets");
    assert_eq!(a.holds, b.holds, "{context}: holds");
    assert_eq!(a.tokens, b.tokens, "{context}: tokens");
    assert_eq!(a.settlements_by_token, b.settlements_by_token, "{context}: settlements by token");
    assert_eq!(a.settlements_by_order, b.settlements_by_order, "{context}: settlements by order");
    assert_eq!(a.idem, b.idem, "{context}: idempotency");
    assert_eq!(a.docs, b.docs, "{context}: documents");
}

//! Shared by the model-based tests: an in-memory "database" that holds every row ever written, loads the rows a
//! batch's `Keys` name (as a storage adapter would), and folds each batch's `Changes` under the unique constraints an
//! adapter enforces; plus the end-to-end audit of what it holds, the enrolment every model's world starts from, and
//! the idempotency check every model applies to a keyed command.
//!
//! Every test module of the one test binary (`tests/it/main.rs`) shares it.
#![allow(dead_code)]

use bazaar_core::apply::{apply_batch, Applied, Config};
use bazaar_core::audit::Auditor;
use bazaar_core::chain::{self, ChainHead};
use bazaar_core::command::{Command, Keys, Op, Outcome};
use bazaar_core::identity;
use bazaar_core::model::*;
use bazaar_core::state::{Changes, Snapshot};
use bazaar_core::types::{AccountId, MemberId, Timestamp, TransferId};
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

    /// Runs a setup batch at `now` that must succeed in full, and writes it.
    pub fn setup(&mut self, config: &Config, commands: Vec<Command>, now: Timestamp) {
        let mut snap = self.rows.clone();
        let (results, changes) = apply_batch(&mut snap, config, &commands, now);
        for (c, r) in commands.iter().zip(&results) {
            assert!(r.outcome.is_ok(), "setup {}: {:?}", c.op.name(), r.outcome);
        }
        self.fold(changes);
    }

    /// Runs one batch as an adapter would and writes it: the batch is also re-run on a snapshot holding only the
    /// rows its `Keys` name (what an adapter loads), which must answer and write the same; and what the batch saw in
    /// memory must be what got written.
    pub fn apply_as_adapter(&mut self, config: &Config, commands: &[Command], now: Timestamp) -> Vec<Applied> {
        let mut snap = self.rows.clone();
        let (results, changes) = apply_batch(&mut snap, config, commands, now);
        let mut keys = Keys::default();
        commands.iter().for_each(|c| keys.add(c));
        let mut narrow = self.load(&keys);
        let (narrow_results, narrow_changes) = apply_batch(&mut narrow, config, commands, now);
        assert_eq!(results, narrow_results, "a snapshot loaded from Keys answers differently");
        assert_eq!(
            format!("{changes:?}"),
            format!("{narrow_changes:?}"),
            "a snapshot loaded from Keys writes differently"
        );
        self.fold(changes);
        assert_same_rows(&snap, &self.rows, "batch view vs written rows");
        results
    }

    /// Bootstraps the registry (with the operator credential hash `op-cred`) at `now`; returns the operator.
    pub fn bootstrap(&mut self, config: &Config, registry: &Member, operator: &MemberId, now: Timestamp) -> Member {
        let op = Op::Identity(identity::Op::Bootstrap {
            registry: registry.id.clone(),
            operator: operator.clone(),
            operator_credential_hash: "op-cred".into(),
        });
        self.setup(config, vec![unkeyed(registry, op)], now);
        self.rows.members[operator].clone()
    }

    /// Agent number `n` (`agent-{n}`, key `id`) enrolled through an invite from `owner` that expires in an hour.
    pub fn enroll(&mut self, config: &Config, owner: &MemberId, n: usize, id: &MemberId, now: Timestamp) {
        let owner = self.rows.members[owner].clone();
        let code_hash = format!("invite-{n}");
        let redeem = Op::Identity(identity::Op::RedeemInvite {
            code_hash: code_hash.clone(),
            agent: id.clone(),
            handle: format!("agent-{n}"),
            credential_hash: format!("c-{id}"),
        });
        let invite = Op::Identity(identity::Op::IssueInvite { code_hash, expires_at: now.plus_s(3_600) });
        let stranger =
            Member { id: id.clone(), kind: MemberKind::Agent, owner: None, handle: String::new(), created_at: now };
        self.setup(config, vec![unkeyed(&owner, invite), unkeyed(&stranger, redeem)], now);
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

    /// Balances sum to zero; every stored account agrees with the model's balances and pending amounts and with its
    /// pending holds; only issuance may go negative, and nothing else is overdrawn.
    pub fn assert_accounts(&self, balances: &HashMap<AccountId, i128>, pending: &HashMap<AccountId, u64>) {
        let rows = &self.rows;
        let issuance = AccountId::issuance();
        let sum: i128 = rows.accounts.values().map(Account::balance).sum();
        assert_eq!(sum, 0, "conservation: balances sum to {sum}");
        let mut pending_by_account: HashMap<&AccountId, u64> = HashMap::new();
        for hold in rows.holds.values().filter(|h| h.state == HoldState::Pending) {
            *pending_by_account.entry(&hold.account).or_default() += hold.amount.0;
        }
        for (id, account) in &rows.accounts {
            assert_eq!(account.balance(), balances.get(id).copied().unwrap_or(0), "balance of {id}");
            assert_eq!(account.debits_pending, pending.get(id).copied().unwrap_or(0), "pending of {id}");
            assert_eq!(account.debits_pending, pending_by_account.get(id).copied().unwrap_or(0), "holds of {id}");
            assert_eq!(account.allow_negative, id == &issuance, "only issuance may go negative");
            if id != &issuance {
                assert!(account.available() >= 0, "overdraft on {id}: {account:?}");
            }
        }
    }

    /// As many idempotency records, events and transfers as the model counted.
    pub fn assert_counts(&self, idem: usize, events: usize, transfers: usize) {
        assert_eq!(self.rows.idem.len(), idem, "idempotency records");
        assert_eq!(self.events.len(), events, "event count");
        assert_eq!(self.transfers.len(), transfers, "transfer count");
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

/// A budget as the models keep it: the ceilings and what was spent, in total and per day.
#[derive(Clone, Debug, Default)]
pub struct MBudget {
    pub per_call: u64,
    pub per_day: u64,
    pub total: u64,
    pub spent_total: u64,
    /// Held-or-spent amounts by the UTC day the hold was created.
    pub by_day: HashMap<i64, u64>,
}

impl MBudget {
    pub fn spend(&mut self, amount: u64, day: i64) {
        self.spent_total += amount;
        *self.by_day.entry(day).or_default() += amount;
    }

    pub fn release(&mut self, amount: u64, day: i64) {
        self.spent_total -= amount;
        *self.by_day.get_mut(&day).expect("the hold's day was spent") -= amount;
    }

    /// Gives back to the total only: the day it was spent is not known (withdrawn stake).
    pub fn release_total(&mut self, amount: u64) {
        self.spent_total -= amount;
    }

    /// The stored budget of `agent` has spent what the model did, in total and on `today`.
    pub fn assert_spent(&self, stored: &Budget, agent: &MemberId, today: i64) {
        assert_eq!(stored.spent_total.0, self.spent_total, "spent total of {agent}");
        let spent_today = self.by_day.get(&today).copied().unwrap_or(0);
        assert_eq!(stored.spent_on(today).0, spent_today, "spent today of {agent}");
    }
}

/// The registry's own member, whose key is `key`.
pub fn registry_member(key: &ed25519_dalek::SigningKey, created_at: Timestamp) -> Member {
    let id = MemberId(bazaar_core::crypto::did_key(&key.verifying_key()));
    Member { id, kind: MemberKind::Registry, owner: None, handle: "registry".into(), created_at }
}

/// A command without an idempotency key (setup never retries).
pub fn unkeyed(actor: &Member, op: Op) -> Command {
    Command { actor: actor.clone(), idem: None, op }
}

/// `CreateOwner` for owner number `i` (`owner-{i}`), sent by the operator.
pub fn create_owner(operator: &Member, i: usize, id: &MemberId) -> Command {
    let op = Op::Identity(identity::Op::CreateOwner {
        id: id.clone(),
        handle: format!("owner-{i}"),
        credential_hash: format!("c-{id}"),
    });
    unkeyed(operator, op)
}

/// (scope, key) → the fingerprint and the outcome first recorded under it.
pub type IdemRecords = HashMap<(String, String), (String, Outcome)>;

/// A command under a key seen before must replay the first outcome (the same request) or be refused as a conflict
/// (another request); returns what happened, for the coverage report. A command under no key or a new key must not
/// be a replay; returns `None` so the model predicts it.
pub fn check_idempotency(records: &IdemRecords, command: &Command, applied: &Applied, what: &str) -> Option<String> {
    if let Some(idem) = &command.idem {
        if let Some((fingerprint, first)) = records.get(&(idem.scope.clone(), idem.key.clone())) {
            if fingerprint == &idem.fingerprint {
                assert!(applied.replayed, "{what}: a repeated key must replay");
                assert_eq!(&applied.outcome, first, "{what}: a replay returns exactly the first outcome");
                return Some(format!("{} replayed", command.op.name()));
            }
            assert!(!applied.replayed, "{what}: a conflicting key is not a replay");
            let code = applied.outcome.as_ref().err().map(|r| r.code);
            assert_eq!(code, Some(bazaar_core::refusal::Code::IdempotencyConflict), "{what}: same key, other request");
            return Some(format!("{} idempotency_conflict", command.op.name()));
        }
    }
    assert!(!applied.replayed, "{what}: a fresh command is not a replay");
    None
}

/// Remembers the first outcome under a command's key (a no-op without one).
pub fn record_idempotency(records: &mut IdemRecords, command: &Command, applied: &Applied) {
    if let Some(idem) = &command.idem {
        let first = (idem.fingerprint.clone(), applied.outcome.clone());
        records.insert((idem.scope.clone(), idem.key.clone()), first);
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

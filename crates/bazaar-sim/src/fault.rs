//! The fault-injecting [`Engine`]: wraps a real engine (SQLite on a file) and,
//! as the run's generator decides, fails `begin` or `load` (the store briefly
//! unavailable), fails a `commit` after rolling back (nothing written), or
//! dies just before a commit (the process crashes with the transaction open).
//! It can also carry a planted bug, so a test can show the auditor catches one.
//!
//! It also holds the writer still on request ([`Shared::arm_gate`]), so the
//! simulator can queue a whole group of commands before the real group-commit
//! writer looks at its queue: the group then becomes exactly one batch.

use crate::rng::{lock, SharedRng};
use bazaar_core::command::Keys;
use bazaar_core::state::{Changes, Snapshot};
use bazaar_store::{Engine, StoreError};
use bazaar_types::Timestamp;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex};

/// How likely each engine fault is, per call, in parts per thousand.
#[derive(Clone, Copy, Debug)]
pub struct EngineFaults {
    pub begin_unavailable: u64,
    pub load_unavailable: u64,
    pub commit_fails: u64,
    pub crash_before_commit: u64,
}

impl EngineFaults {
    pub const NONE: EngineFaults =
        EngineFaults { begin_unavailable: 0, load_unavailable: 0, commit_fails: 0, crash_before_commit: 0 };
}

/// A bug planted in the engine, for the tests that prove the auditor can fail.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Plant {
    /// Every `PLANT_EVERY`-th write is dropped, yet the commit succeeds and the batch is answered.
    DropWrite,
    /// Idempotency records are never written: a retried request runs again.
    SkipIdempotency,
}

/// One write in this many is dropped by [`Plant::DropWrite`].
pub const PLANT_EVERY: u64 = 7;

/// Faults by kind, as counted where they fired.
pub type FaultCounts = BTreeMap<&'static str, u64>;

/// What the simulator and the engine on the writer's thread share.
pub struct Shared {
    pub rng: SharedRng,
    pub faults: Mutex<EngineFaults>,
    pub plant: Option<Plant>,
    /// Shared by every registry's engine in the run.
    pub counts: Arc<Mutex<FaultCounts>>,
    /// Set by the engine when it "crashed" mid-transaction; the simulator then restarts.
    pub crashed: AtomicBool,
    /// The plant acts only once armed (after setup), so it is the auditor that must find it.
    plant_armed: AtomicBool,
    writes: Mutex<u64>,
    gate_armed: AtomicBool,
    gate: (Mutex<bool>, Condvar),
}

impl Shared {
    pub fn new(
        rng: SharedRng,
        counts: Arc<Mutex<FaultCounts>>,
        faults: EngineFaults,
        plant: Option<Plant>,
    ) -> Arc<Shared> {
        Arc::new(Shared {
            rng,
            faults: Mutex::new(faults),
            plant,
            counts,
            crashed: AtomicBool::new(false),
            plant_armed: AtomicBool::new(false),
            writes: Mutex::new(0),
            gate_armed: AtomicBool::new(false),
            gate: (Mutex::new(false), Condvar::new()),
        })
    }

    pub fn count(&self, kind: &'static str) {
        *self.counts.lock().unwrap_or_else(|p| p.into_inner()).entry(kind).or_default() += 1;
    }

    /// Replaces the fault probabilities (the simulator turns them off for setup and checks).
    pub fn set_faults(&self, faults: EngineFaults) -> EngineFaults {
        std::mem::replace(&mut *self.faults.lock().unwrap_or_else(|p| p.into_inner()), faults)
    }

    pub fn arm_plant(&self) {
        self.plant_armed.store(true, Ordering::SeqCst);
    }

    /// The next prune the engine runs waits for [`Shared::open_gate`] first.
    pub fn arm_gate(&self) {
        *self.gate.0.lock().unwrap_or_else(|p| p.into_inner()) = false;
        self.gate_armed.store(true, Ordering::SeqCst);
    }

    pub fn open_gate(&self) {
        *self.gate.0.lock().unwrap_or_else(|p| p.into_inner()) = true;
        self.gate.1.notify_all();
    }

    fn wait_gate(&self) {
        if !self.gate_armed.swap(false, Ordering::SeqCst) {
            return;
        }
        let mut open = self.gate.0.lock().unwrap_or_else(|p| p.into_inner());
        while !*open {
            open = self.gate.1.wait(open).unwrap_or_else(|p| p.into_inner());
        }
    }

    fn roll(&self, per_mille: impl Fn(&EngineFaults) -> u64) -> bool {
        let p = per_mille(&self.faults.lock().unwrap_or_else(|p| p.into_inner()));
        p > 0 && lock(&self.rng).chance(p)
    }
}

pub struct FaultEngine<E: Engine> {
    inner: E,
    shared: Arc<Shared>,
    /// A crash left the transaction open: refuse everything until the process is restarted.
    dead: bool,
}

impl<E: Engine> FaultEngine<E> {
    pub fn new(inner: E, shared: Arc<Shared>) -> FaultEngine<E> {
        FaultEngine { inner, shared, dead: false }
    }

    fn injected(&self, kind: &'static str) -> StoreError {
        self.shared.count(kind);
        StoreError::Unavailable(format!("injected: {kind}"))
    }
}

fn dead() -> StoreError {
    StoreError::Unavailable("the process crashed".into())
}

impl<E: Engine> Engine for FaultEngine<E> {
    fn begin(&mut self) -> Result<(), StoreError> {
        if self.dead {
            return Err(dead());
        }
        if self.shared.roll(|f| f.begin_unavailable) {
            return Err(self.injected("begin_unavailable"));
        }
        self.inner.begin()
    }

    fn load(&mut self, keys: &Keys) -> Result<Snapshot, StoreError> {
        if self.shared.roll(|f| f.load_unavailable) {
            return Err(self.injected("load_unavailable"));
        }
        self.inner.load(keys)
    }

    fn write(&mut self, changes: &Changes) -> Result<(), StoreError> {
        let plant = self.shared.plant.filter(|_| self.shared.plant_armed.load(Ordering::SeqCst));
        let n = {
            let mut writes = self.shared.writes.lock().unwrap_or_else(|p| p.into_inner());
            *writes += plant.is_some() as u64;
            *writes
        };
        match plant {
            Some(Plant::DropWrite) if n % PLANT_EVERY == 0 => Ok(()),
            Some(Plant::SkipIdempotency) => {
                let mut changes = changes.clone();
                changes.insert_idem.clear();
                self.inner.write(&changes)
            }
            _ => self.inner.write(changes),
        }
    }

    fn commit(&mut self) -> Result<(), StoreError> {
        if self.shared.roll(|f| f.crash_before_commit) {
            // The transaction stays open; the connection closes with it when the process is dropped.
            self.dead = true;
            self.shared.crashed.store(true, Ordering::SeqCst);
            return Err(self.injected("crash_before_commit"));
        }
        if self.shared.roll(|f| f.commit_fails) {
            self.inner.rollback();
            return Err(self.injected("commit_fails"));
        }
        self.inner.commit()
    }

    fn rollback(&mut self) {
        if !self.dead {
            self.inner.rollback();
        }
    }

    fn prune_idempotency(&mut self, before: Timestamp, limit: usize) -> Result<usize, StoreError> {
        self.shared.wait_gate();
        if self.dead {
            return Err(dead());
        }
        self.inner.prune_idempotency(before, limit)
    }
}

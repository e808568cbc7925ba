//! One registry's process: its SQLite file, its store (reads and the audit)
//! and the real group-commit writer over the fault-injecting engine (every
//! write). A crash drops the process; a restart opens the same file again.

use crate::fault::{FaultEngine, Shared};
use crate::options::config;
use bazaar_core::apply::Applied;
use bazaar_core::command::Command;
use bazaar_store::writer::Writer;
use bazaar_store::StoreError;
use bazaar_store_sqlite::{SqliteEngine, SqliteStore};
use bazaar_types::{ManualClock, Timestamp};
use futures::executor::block_on;
use futures::future::maybe_done;
use std::future::Future;
use std::path::PathBuf;
use std::pin::Pin;
use std::sync::Arc;
use std::task::Context;

struct Process {
    store: SqliteStore,
    writer: Writer,
}

pub struct Registry {
    path: PathBuf,
    pub shared: Arc<Shared>,
    process: Option<Process>,
}

pub type Answers = Vec<Result<Applied, StoreError>>;

impl Registry {
    /// A registry on a fresh file at `path` (any old one is removed), not yet running.
    pub fn new(path: PathBuf, shared: Arc<Shared>) -> Registry {
        for suffix in ["", "-wal", "-shm"] {
            let _ = std::fs::remove_file(format!("{}{suffix}", path.display()));
        }
        Registry { path, shared, process: None }
    }

    /// Starts the process on the file: the store, and the writer over a fault-injecting engine.
    pub fn open(&mut self, clock: &Arc<ManualClock>) -> Result<(), String> {
        let store = SqliteStore::open(&self.path, config(), clock.clone()).map_err(|e| format!("open: {e}"))?;
        let engine = SqliteEngine::connect(&self.path).map_err(|e| format!("connect: {e}"))?;
        let writer = Writer::spawn(FaultEngine::new(engine, self.shared.clone()), config(), clock.clone());
        self.process = Some(Process { store, writer });
        Ok(())
    }

    /// The process dies: its writer and store are dropped, an open transaction with them.
    pub fn kill(&mut self) {
        self.process = None;
        self.shared.crashed.store(false, std::sync::atomic::Ordering::SeqCst);
    }

    pub fn store(&self) -> &SqliteStore {
        &self.process.as_ref().expect("the registry is running").store
    }

    fn writer(&self) -> Writer {
        self.process.as_ref().expect("the registry is running").writer.clone()
    }

    /// Queues `commands` with the writer held, then lets it go: the group is exactly one batch of the real writer.
    pub fn submit_group(&self, commands: Vec<Command>) -> Result<Answers, String> {
        let writer = self.writer();
        self.shared.arm_gate();
        let mut gate = maybe_done(Box::pin(writer.prune_idempotency(Timestamp(i64::MIN), 0)));
        let mut answers: Vec<_> = commands.into_iter().map(|c| maybe_done(Box::pin(writer.submit(c)))).collect();
        let mut cx = Context::from_waker(futures::task::noop_waker_ref());
        // The first poll of each puts its job in the writer's queue, in order.
        let _ = Pin::new(&mut gate).poll(&mut cx);
        for answer in &mut answers {
            let _ = Pin::new(answer).poll(&mut cx);
        }
        self.shared.open_gate();
        block_on(&mut gate);
        let results = answers
            .iter_mut()
            .map(|answer| {
                block_on(&mut *answer);
                Pin::new(answer).take_output().expect("answered")
            })
            .collect();
        if !writer.stats().running {
            return Err("the writer stopped: an invariant failed inside a batch".into());
        }
        Ok(results)
    }

    /// The sweeper's idempotency pruning, through the writer as the server's is.
    pub fn prune_idempotency(&self, before: Timestamp, limit: usize) -> Result<usize, StoreError> {
        block_on(self.writer().prune_idempotency(before, limit))
    }
}

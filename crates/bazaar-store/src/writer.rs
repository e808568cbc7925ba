//! The group-commit writer shared by every adapter: one thread, one
//! connection, a bounded queue, and one transaction per batch.

use crate::{Engine, StoreError};

use bazaar_core::apply::{apply_batch, Applied, Config};
use bazaar_core::command::{Command, Keys};
use bazaar_types::limits::{WRITE_BATCH_MAX, WRITE_QUEUE_MAX};
use bazaar_types::{Clock, Timestamp};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use tokio::sync::{mpsc, oneshot};

type Reply = oneshot::Sender<Result<Applied, StoreError>>;

/// Work for the writer thread. Nearly every job is `Apply`; boxing it to
/// shrink the rare `Prune` would cost an allocation per command.
#[allow(clippy::large_enum_variant)]
enum Job {
    Apply(Command, Reply),
    Prune { before: Timestamp, limit: usize, reply: oneshot::Sender<Result<usize, StoreError>> },
}

/// The handle commands are submitted through. Cheap to clone.
#[derive(Clone)]
pub struct Writer {
    queue: mpsc::Sender<Job>,
    stats: Arc<Counters>,
}

#[derive(Default)]
struct Counters {
    batches: AtomicU64,
    commands: AtomicU64,
    busy_us: AtomicU64,
    fenced: AtomicU64,
}

/// What the writer has done since start: batches committed (or failed),
/// commands in them, and microseconds spent inside batches.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct WriterStats {
    /// False once the writer thread has stopped (a failed invariant stops it
    /// rather than commit a wrong ledger); every write then fails.
    pub running: bool,
    pub batches: u64,
    pub commands: u64,
    pub busy_us: u64,
    /// Jobs waiting in the queue now (at most `WRITE_QUEUE_MAX`).
    pub queued: u64,
    /// Batches the store refused because this node's writer is not the
    /// cluster's sequencer (`StoreError::Fenced`): nothing of them was written.
    pub fenced: u64,
    /// On a node of a cluster: whether it is the ledger's sequencer now.
    pub sequencer: Option<bool>,
    /// On a node of a cluster: commands it sent to another node's sequencer.
    pub forwarded: u64,
}

impl Writer {
    /// Starts the writer thread. It stops when every `Writer` clone is dropped.
    pub fn spawn<E: Engine>(engine: E, config: Config, clock: Arc<dyn Clock>) -> Writer {
        let (queue, receiver) = mpsc::channel(WRITE_QUEUE_MAX);
        let stats = Arc::new(Counters::default());
        let counters = stats.clone();
        std::thread::Builder::new()
            .name("bazaar-writer".into())
            .spawn(move || run(engine, config, clock, receiver, &counters))
            .expect("spawn writer thread");
        Writer { queue, stats }
    }

    pub fn stats(&self) -> WriterStats {
        WriterStats {
            running: !self.queue.is_closed(),
            batches: self.stats.batches.load(Ordering::Relaxed),
            commands: self.stats.commands.load(Ordering::Relaxed),
            busy_us: self.stats.busy_us.load(Ordering::Relaxed),
            queued: (self.queue.max_capacity() - self.queue.capacity()) as u64,
            fenced: self.stats.fenced.load(Ordering::Relaxed),
            sequencer: None,
            forwarded: 0,
        }
    }

    pub async fn submit(&self, command: Command) -> Result<Applied, StoreError> {
        let (reply, answer) = oneshot::channel();
        self.enqueue(Job::Apply(command, reply))?;
        answer.await.map_err(|_| StoreError::Unavailable("writer stopped".into()))?
    }

    /// Prunes idempotency records on the writer's own connection, between batches.
    pub async fn prune_idempotency(&self, before: Timestamp, limit: usize) -> Result<usize, StoreError> {
        let (reply, answer) = oneshot::channel();
        self.enqueue(Job::Prune { before, limit, reply })?;
        answer.await.map_err(|_| StoreError::Unavailable("writer stopped".into()))?
    }

    fn enqueue(&self, job: Job) -> Result<(), StoreError> {
        self.queue.try_send(job).map_err(|error| match error {
            mpsc::error::TrySendError::Full(_) => StoreError::Busy,
            mpsc::error::TrySendError::Closed(_) => StoreError::Unavailable("writer stopped".into()),
        })
    }
}

fn run<E: Engine>(
    mut engine: E,
    config: Config,
    clock: Arc<dyn Clock>,
    mut receiver: mpsc::Receiver<Job>,
    counters: &Counters,
) {
    let mut next = None;
    while let Some(first) = next.take().or_else(|| receiver.blocking_recv()) {
        let mut jobs = Vec::new();
        match first {
            Job::Prune { before, limit, reply } => {
                let _ = reply.send(engine.prune_idempotency(before, limit));
                continue;
            }
            Job::Apply(command, reply) => jobs.push((command, reply)),
        }
        // Fold in whatever else is waiting, up to a batch; a prune waits for the next turn.
        while jobs.len() < WRITE_BATCH_MAX {
            match receiver.try_recv() {
                Ok(Job::Apply(command, reply)) => jobs.push((command, reply)),
                Ok(prune) => {
                    next = Some(prune);
                    break;
                }
                Err(_) => break,
            }
        }
        let (commands, replies): (Vec<Command>, Vec<Reply>) = jobs.into_iter().unzip();
        let started = std::time::Instant::now();
        let results = match run_batch(&mut engine, &config, clock.as_ref(), &commands) {
            Ok(results) => results.into_iter().map(Ok).collect(),
            // A constraint fired: the batch is gone as a whole. Run each command
            // alone so only the offending one fails and the rest see fresh rows.
            Err(StoreError::Constraint(_)) if commands.len() > 1 => commands
                .iter()
                .map(|c| {
                    run_batch(&mut engine, &config, clock.as_ref(), std::slice::from_ref(c)).map(|mut r| r.remove(0))
                })
                .collect(),
            Err(error) => {
                if matches!(error, StoreError::Fenced(_)) {
                    counters.fenced.fetch_add(1, Ordering::Relaxed);
                }
                vec![Err(error); commands.len()]
            }
        };
        counters.batches.fetch_add(1, Ordering::Relaxed);
        counters.commands.fetch_add(commands.len() as u64, Ordering::Relaxed);
        counters.busy_us.fetch_add(started.elapsed().as_micros() as u64, Ordering::Relaxed);
        for (reply, result) in replies.into_iter().zip(results) {
            let _ = reply.send(result);
        }
    }
}

/// One transaction: load, apply, write, commit. Nothing is written unless all of it commits.
pub fn run_batch<E: Engine>(
    engine: &mut E,
    config: &Config,
    clock: &dyn Clock,
    commands: &[Command],
) -> Result<Vec<Applied>, StoreError> {
    let mut keys = Keys::default();
    for command in commands {
        keys.add(command);
    }
    engine.begin()?;
    let attempt = (|| {
        let mut snapshot = engine.load(&keys)?;
        let (results, changes) = apply_batch(&mut snapshot, config, commands, clock.now());
        engine.write(&changes)?;
        Ok(results)
    })();
    match attempt {
        Ok(results) => {
            engine.commit()?;
            Ok(results)
        }
        Err(error) => {
            engine.rollback();
            Err(error)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bazaar_core::command::Op;
    use bazaar_core::identity;
    use bazaar_core::model::{Member, MemberKind};
    use bazaar_core::state::{Changes, Snapshot};
    use bazaar_types::{ManualClock, MemberId};

    /// An engine whose load trips an assert, as a corrupt row would.
    struct Tripping;

    impl Engine for Tripping {
        fn begin(&mut self) -> Result<(), StoreError> {
            Ok(())
        }
        fn load(&mut self, _: &Keys) -> Result<Snapshot, StoreError> {
            panic!("invariant failed while loading");
        }
        fn write(&mut self, _: &Changes) -> Result<(), StoreError> {
            Ok(())
        }
        fn commit(&mut self) -> Result<(), StoreError> {
            Ok(())
        }
        fn rollback(&mut self) {}
        fn prune_idempotency(&mut self, _: Timestamp, _: usize) -> Result<usize, StoreError> {
            Ok(0)
        }
    }

    #[tokio::test]
    async fn a_stopped_writer_says_so_and_refuses_writes() {
        let config = Config::standard();
        let writer = Writer::spawn(Tripping, config, Arc::new(ManualClock::new(Timestamp(0))));
        assert!(writer.stats().running);
        let actor = Member {
            id: MemberId("did:x".into()),
            kind: MemberKind::Owner,
            owner: None,
            handle: "x".into(),
            created_at: Timestamp(0),
        };
        let command = Command {
            actor,
            idem: None,
            op: Op::Identity(identity::Op::IssueInvite { code_hash: "h".into(), expires_at: Timestamp(1) }),
        };
        assert!(matches!(writer.submit(command.clone()).await, Err(StoreError::Unavailable(_))));
        // The thread is gone (its queue closes as it unwinds, just after it
        // dropped the reply), and every later write fails fast.
        for _ in 0..1_000_000 {
            if !writer.stats().running {
                break;
            }
            std::thread::yield_now();
        }
        assert!(!writer.stats().running);
        assert!(matches!(writer.submit(command).await, Err(StoreError::Unavailable(_))));
    }
}

//! The ledger's writer: the plane kit's sequenced writer ([`bazaar_plane::writer`]: one thread, one
//! connection, a bounded queue, every command answered after its batch's transaction ends, a failed
//! invariant stopping it) with the ledger's batch — load the rows the commands name, apply them in the
//! core, write, commit — and the idempotency prune between batches.

use crate::{Engine, StoreError};

use bazaar_core::apply::{apply_batch, Applied, Config};
use bazaar_core::command::{Command, Keys};
use bazaar_plane::writer::{GroupWrite, GroupWriter, Limits, Refused};
use bazaar_types::limits::{WRITE_BATCH_MAX, WRITE_QUEUE_MAX};
use bazaar_types::{Clock, Timestamp};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// Work for the writer thread. Nearly every job is `Apply`; boxing it to
/// shrink the rare `Prune` would cost an allocation per command.
#[allow(clippy::large_enum_variant)]
enum Job {
    Apply(Command),
    /// Runs between batches, alone: idempotency records older than `before`, at most `limit`.
    Prune {
        before: Timestamp,
        limit: usize,
    },
}

/// What a job came to. Nearly every answer is `Applied`; boxing it would cost an allocation per command.
#[allow(clippy::large_enum_variant)]
enum Done {
    Applied(Result<Applied, StoreError>),
    Pruned(Result<usize, StoreError>),
}

/// The handle commands are submitted through. Cheap to clone; the writer
/// stops (after what is queued) when the last clone is dropped.
#[derive(Clone)]
pub struct Writer {
    writer: GroupWriter<Ledger>,
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

/// The ledger's group write: an engine, the core's config and the clock.
struct Ledger {
    engine: Box<dyn Engine>,
    config: Config,
    clock: Arc<dyn Clock>,
    counters: Arc<Counters>,
}

impl Ledger {
    fn batch(&mut self, commands: &[Command]) -> Result<Vec<Applied>, StoreError> {
        run_batch(self.engine.as_mut(), &self.config, self.clock.as_ref(), commands)
    }
}

impl GroupWrite for Ledger {
    type Item = Job;
    type Answer = Done;

    fn alone(job: &Job) -> bool {
        matches!(job, Job::Prune { .. })
    }

    fn write(&mut self, jobs: Vec<Job>) -> Vec<Done> {
        let mut commands = Vec::with_capacity(jobs.len());
        for job in jobs {
            match job {
                Job::Prune { before, limit } => {
                    return vec![Done::Pruned(self.engine.prune_idempotency(before, limit))]
                }
                Job::Apply(command) => commands.push(command),
            }
        }
        let started = std::time::Instant::now();
        let results = match self.batch(&commands) {
            Ok(results) => results.into_iter().map(Ok).collect(),
            // A constraint fired: the batch is gone as a whole. Run each command
            // alone so only the offending one fails and the rest see fresh rows.
            Err(StoreError::Constraint(_)) if commands.len() > 1 => {
                commands.iter().map(|c| self.batch(std::slice::from_ref(c)).map(|mut r| r.remove(0))).collect()
            }
            Err(error) => {
                if matches!(error, StoreError::Fenced(_)) {
                    self.counters.fenced.fetch_add(1, Ordering::Relaxed);
                }
                vec![Err(error); commands.len()]
            }
        };
        self.counters.batches.fetch_add(1, Ordering::Relaxed);
        self.counters.commands.fetch_add(commands.len() as u64, Ordering::Relaxed);
        self.counters.busy_us.fetch_add(started.elapsed().as_micros() as u64, Ordering::Relaxed);
        results.into_iter().map(Done::Applied).collect()
    }
}

fn refused(refused: Refused) -> StoreError {
    match refused {
        Refused::Busy => StoreError::Busy,
        Refused::Stopped => StoreError::Unavailable("writer stopped".into()),
    }
}

impl Writer {
    /// Starts the writer thread. It stops when every `Writer` clone is dropped.
    pub fn spawn<E: Engine>(engine: E, config: Config, clock: Arc<dyn Clock>) -> Writer {
        let stats = Arc::new(Counters::default());
        let ledger = Ledger { engine: Box::new(engine), config, clock, counters: stats.clone() };
        let limits = Limits { queue_max: WRITE_QUEUE_MAX, group_max: WRITE_BATCH_MAX };
        let writer = GroupWriter::spawn("bazaar-writer", limits, ledger).expect("spawn writer thread");
        Writer { writer, stats }
    }

    pub fn stats(&self) -> WriterStats {
        let kit = self.writer.stats();
        WriterStats {
            running: kit.running,
            batches: self.stats.batches.load(Ordering::Relaxed),
            commands: self.stats.commands.load(Ordering::Relaxed),
            busy_us: self.stats.busy_us.load(Ordering::Relaxed),
            queued: kit.queued,
            fenced: self.stats.fenced.load(Ordering::Relaxed),
            sequencer: None,
            forwarded: 0,
        }
    }

    pub async fn submit(&self, command: Command) -> Result<Applied, StoreError> {
        match self.writer.submit(Job::Apply(command)).await.map_err(refused)? {
            Done::Applied(result) => result,
            Done::Pruned(_) => unreachable!("an apply is answered as applied"),
        }
    }

    /// Prunes idempotency records on the writer's own connection, between batches.
    pub async fn prune_idempotency(&self, before: Timestamp, limit: usize) -> Result<usize, StoreError> {
        match self.writer.submit(Job::Prune { before, limit }).await.map_err(refused)? {
            Done::Pruned(result) => result,
            Done::Applied(_) => unreachable!("a prune is answered as pruned"),
        }
    }
}

/// One transaction: load, apply, write, commit. Nothing is written unless all of it commits.
pub fn run_batch<E: Engine + ?Sized>(
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

//! The embedded engine's writer: the plane kit's sequenced writer ([`bazaar_plane::writer`]) owning the
//! write connection, committing whatever acts are waiting in one transaction (group commit), each act in a
//! savepoint of its own, so one act's refusal undoes only its own writes and a burst of posts costs one
//! fsync, not one each.
//!
//! Callers block until their act's transaction has committed (or failed), so a reply always means durable.
//! If anything but an act's own refusal goes wrong (a savepoint or the commit fails), the whole transaction
//! is rolled back and every act in it is answered `unavailable`: none is half-written. A full queue
//! (`CONVERSATION_WRITE_QUEUE_MAX` acts) is answered `unavailable` at once rather than grow.

use std::any::Any;
use std::sync::Arc;

use bazaar_plane::writer::{GroupWrite, GroupWriter, Limits};
use bazaar_types::limits::{CONVERSATION_WRITE_QUEUE_MAX, GROUP_COMMIT_MAX};
use bazaar_types::{Clock, Timestamp};
use rusqlite::{Connection, Transaction, TransactionBehavior};

use crate::store::{ConversationError, Result};

type Outcome = Result<Box<dyn Any + Send>>;
type Job = Box<dyn FnOnce(&Transaction<'_>, Timestamp) -> Outcome + Send>;

fn unavailable(error: impl std::fmt::Display) -> ConversationError {
    ConversationError::Unavailable(error.to_string())
}

/// The write connection and the clock each group is stamped by.
struct Acts {
    connection: Connection,
    clock: Arc<dyn Clock>,
}

impl GroupWrite for Acts {
    type Item = Job;
    type Answer = Outcome;

    fn write(&mut self, group: Vec<Job>) -> Vec<Outcome> {
        let now = self.clock.now();
        commit_group(&mut self.connection, now, group)
    }
}

/// The writer thread and the queue to it; dropping it writes what is queued and waits for the thread.
pub(crate) struct Writer(GroupWriter<Acts>);

impl Writer {
    /// Starts the thread that owns `connection`.
    pub(crate) fn start(connection: Connection, clock: Arc<dyn Clock>) -> Result<Writer> {
        let limits = Limits { queue_max: CONVERSATION_WRITE_QUEUE_MAX, group_max: GROUP_COMMIT_MAX };
        GroupWriter::spawn("conversation-writer", limits, Acts { connection, clock }).map(Writer).map_err(unavailable)
    }

    /// Runs `act` in the next group and waits for that group's commit.
    pub(crate) fn submit<T: Send + 'static>(
        &self,
        act: impl FnOnce(&Transaction<'_>, Timestamp) -> Result<T> + Send + 'static,
    ) -> Result<T> {
        let job: Job = Box::new(move |tx, now| act(tx, now).map(|value| Box::new(value) as Box<dyn Any + Send>));
        let value = self.0.submit_blocking(job).map_err(unavailable)??;
        value.downcast::<T>().map(|boxed| *boxed).map_err(|_| unavailable("the writer answered with another type"))
    }
}

/// One transaction for the group; each act between `SAVEPOINT` and `RELEASE`
/// (or `ROLLBACK TO` when it refuses). Outcomes are answered after the commit:
/// an act is answered only once it is durable.
fn commit_group(connection: &mut Connection, now: Timestamp, group: Vec<Job>) -> Vec<Outcome> {
    let size = group.len();
    let tx = match connection.transaction_with_behavior(TransactionBehavior::Immediate) {
        Ok(tx) => tx,
        Err(error) => return failed(size, &error),
    };
    let mut done: Vec<Outcome> = Vec::with_capacity(size);
    for job in group {
        if let Err(error) = tx.execute_batch("SAVEPOINT act") {
            // The transaction rolls back as it drops: nothing of the group is written.
            return failed(size, &error);
        }
        let outcome = job(&tx, now);
        let end = if outcome.is_ok() { "RELEASE act" } else { "ROLLBACK TO act; RELEASE act" };
        if let Err(error) = tx.execute_batch(end) {
            return failed(size, &error);
        }
        done.push(outcome);
    }
    match tx.commit() {
        Ok(()) => done,
        Err(error) => failed(size, &error),
    }
}

/// Every act of a failed group is answered `unavailable`.
fn failed(size: usize, error: &dyn std::fmt::Display) -> Vec<Outcome> {
    (0..size).map(|_| Err(unavailable(error))).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use bazaar_types::ManualClock;

    /// Acts that write and then refuse, interleaved with acts that succeed,
    /// from many threads at once (so groups hold both): the refusals leave
    /// nothing, the others all commit.
    #[test]
    fn a_refusal_in_a_group_undoes_only_its_own_writes() {
        let dir = std::env::temp_dir().join(format!("bazaar-group-commit-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("g.db");
        let connection = Connection::open(&path).unwrap();
        connection
            .execute_batch("PRAGMA journal_mode = WAL; CREATE TABLE t (n INTEGER PRIMARY KEY, tx INTEGER)")
            .unwrap();
        let writer = Writer::start(connection, Arc::new(ManualClock::default())).unwrap();
        std::thread::scope(|scope| {
            for thread in 0..8i64 {
                let writer = &writer;
                scope.spawn(move || {
                    for n in 0..50i64 {
                        let key = thread * 1000 + n;
                        let outcome = writer.submit(move |tx, _now| {
                            tx.execute("INSERT INTO t VALUES (?1, 0)", [key]).map_err(unavailable)?;
                            if n % 3 == 0 {
                                return Err(ConversationError::BodyEmpty);
                            }
                            Ok(key)
                        });
                        assert_eq!(outcome.is_ok(), n % 3 != 0);
                    }
                });
            }
        });
        drop(writer);
        let check = Connection::open(&path).unwrap();
        let kept: Vec<i64> = check
            .prepare("SELECT n FROM t ORDER BY n")
            .unwrap()
            .query_map([], |r| r.get(0))
            .unwrap()
            .map(|r| r.unwrap())
            .collect();
        let expected: Vec<i64> =
            (0..8).flat_map(|t| (0..50).filter(|n| n % 3 != 0).map(move |n| t * 1000 + n)).collect();
        assert_eq!(kept, expected);
        std::fs::remove_dir_all(&dir).ok();
    }
}

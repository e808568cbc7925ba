//! The embedded engine's writer: one thread owns the write connection and
//! commits whatever acts are waiting in one transaction (group commit), each
//! act in a savepoint of its own, so one act's refusal undoes only its own
//! writes and a burst of posts costs one fsync, not one each.
//!
//! Callers block until their act's transaction has committed (or failed), so
//! a reply always means durable. If anything but an act's own refusal goes
//! wrong (a savepoint or the commit fails), the whole transaction is rolled
//! back and every act in it is answered `unavailable`: none is half-written.

use std::any::Any;
use std::sync::mpsc;
use std::sync::Arc;
use std::thread::JoinHandle;

use bazaar_types::limits::GROUP_COMMIT_MAX;
use bazaar_types::{Clock, Timestamp};
use rusqlite::{Connection, Transaction, TransactionBehavior};

use crate::store::{ConversationError, Result};

type Outcome = Result<Box<dyn Any + Send>>;
type Job = Box<dyn FnOnce(&Transaction<'_>, Timestamp) -> Outcome + Send>;

struct Request {
    job: Job,
    reply: mpsc::Sender<Outcome>,
}

fn unavailable(error: impl std::fmt::Display) -> ConversationError {
    ConversationError::Unavailable(error.to_string())
}

/// The writer thread and the queue to it.
pub(crate) struct Writer {
    queue: Option<mpsc::Sender<Request>>,
    thread: Option<JoinHandle<()>>,
}

impl Writer {
    /// Starts the thread that owns `connection`.
    pub(crate) fn start(connection: Connection, clock: Arc<dyn Clock>) -> Result<Writer> {
        let (queue, requests) = mpsc::channel::<Request>();
        let thread = std::thread::Builder::new()
            .name("conversation-writer".into())
            .spawn(move || run(connection, clock.as_ref(), &requests))
            .map_err(unavailable)?;
        Ok(Writer { queue: Some(queue), thread: Some(thread) })
    }

    /// Runs `act` in the next group and waits for that group's commit.
    pub(crate) fn submit<T: Send + 'static>(
        &self,
        act: impl FnOnce(&Transaction<'_>, Timestamp) -> Result<T> + Send + 'static,
    ) -> Result<T> {
        let (reply, answer) = mpsc::channel();
        let job: Job = Box::new(move |tx, now| act(tx, now).map(|value| Box::new(value) as Box<dyn Any + Send>));
        let queue = self.queue.as_ref().ok_or_else(|| unavailable("the writer has stopped"))?;
        queue.send(Request { job, reply }).map_err(|_| unavailable("the writer has stopped"))?;
        let value = answer.recv().map_err(|_| unavailable("the writer stopped during this write"))??;
        value.downcast::<T>().map(|boxed| *boxed).map_err(|_| unavailable("the writer answered with another type"))
    }
}

impl Drop for Writer {
    /// Closes the queue, lets the thread finish what it holds, and waits for it.
    fn drop(&mut self) {
        self.queue.take();
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

fn run(mut connection: Connection, clock: &dyn Clock, requests: &mpsc::Receiver<Request>) {
    while let Ok(first) = requests.recv() {
        let mut group = vec![first];
        while group.len() < GROUP_COMMIT_MAX {
            match requests.try_recv() {
                Ok(next) => group.push(next),
                Err(_) => break,
            }
        }
        commit_group(&mut connection, clock.now(), group);
    }
}

/// One transaction for the group; each act between `SAVEPOINT` and `RELEASE`
/// (or `ROLLBACK TO` when it refuses). Outcomes are held until the commit:
/// an act is answered only once it is durable.
fn commit_group(connection: &mut Connection, now: Timestamp, group: Vec<Request>) {
    let tx = match connection.transaction_with_behavior(TransactionBehavior::Immediate) {
        Ok(tx) => tx,
        Err(error) => return answer_all(group.into_iter().map(|r| r.reply), &error),
    };
    let mut done: Vec<(mpsc::Sender<Outcome>, Outcome)> = Vec::with_capacity(group.len());
    let mut waiting = group.into_iter();
    while let Some(Request { job, reply }) = waiting.next() {
        let failed = match tx.execute_batch("SAVEPOINT act") {
            Err(error) => {
                done.push((reply, Err(unavailable(&error))));
                Some(error)
            }
            Ok(()) => {
                let outcome = job(&tx, now);
                let end = if outcome.is_ok() { "RELEASE act" } else { "ROLLBACK TO act; RELEASE act" };
                let ended = tx.execute_batch(end);
                done.push((reply, outcome));
                ended.err()
            }
        };
        if let Some(error) = failed {
            // The transaction rolls back as it drops: nothing of the group is written.
            let replies = done.into_iter().map(|(reply, _)| reply);
            return answer_all(replies.chain(waiting.map(|r| r.reply)), &error);
        }
    }
    match tx.commit() {
        Ok(()) => {
            for (reply, outcome) in done {
                let _ = reply.send(outcome);
            }
        }
        Err(error) => answer_all(done.into_iter().map(|(reply, _)| reply), &error),
    }
}

/// Every act of a failed group is answered `unavailable`.
fn answer_all(replies: impl Iterator<Item = mpsc::Sender<Outcome>>, error: &dyn std::fmt::Display) {
    for reply in replies {
        let _ = reply.send(Err(unavailable(error)));
    }
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

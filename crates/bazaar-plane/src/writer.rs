//! The sequenced writer: a queue, a thread that takes what is waiting as one group (up to the group size),
//! the plane's [`GroupWrite::write`] that turns the group into one transaction, and a reply to each item
//! after that transaction ends. Invariants:
//!
//! - An item is answered only after the group it was written in has committed or failed as a whole; a
//!   caller that hears `Ok` from the plane has a durable write.
//! - Items are written in the order they were queued; a group never exceeds [`Limits::group_max`], and an
//!   item the plane marks [`GroupWrite::alone`] is written in a group of its own.
//! - The queue is bounded ([`Limits::queue_max`]): a full queue refuses at once ([`Refused::Busy`]) rather
//!   than grow.
//! - A write that panics (a failed invariant) stops the writer: its group and every later submission are
//!   answered [`Refused::Stopped`], and [`GroupWriter::stats`] says it is no longer running. Nothing after
//!   the failed invariant is written.
//! - The writer stops when the last handle is dropped, after writing what is queued; that drop waits for
//!   the thread, so a plane's files are closed when its store is.

use futures::channel::oneshot;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{self, Receiver, Sender};
use std::sync::Arc;
use std::thread::JoinHandle;

/// What a plane's writer does with one group of queued items, on the writer's own thread.
pub trait GroupWrite: Send + 'static {
    type Item: Send + 'static;
    type Answer: Send + 'static;

    /// Writes `group` (in queue order) in one transaction and answers each item, in order: exactly
    /// `group.len()` answers. Panics only on a failed invariant, which stops the writer.
    fn write(&mut self, group: Vec<Self::Item>) -> Vec<Self::Answer>;

    /// Whether `item` is written in a group of its own (maintenance between groups, say).
    fn alone(_item: &Self::Item) -> bool {
        false
    }
}

/// Why a submission was not written.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Refused {
    /// The queue holds `queue_max` items already.
    #[error("the writer's queue is full")]
    Busy,
    /// The writer has stopped (a failed invariant, or its store is closing).
    #[error("the writer has stopped")]
    Stopped,
}

/// A writer's bounds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Items waiting for the writer at most; one more is refused `Busy`.
    pub queue_max: usize,
    /// Items written in one transaction at most.
    pub group_max: usize,
}

/// What a writer has done since it started.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    /// False once the writer has stopped; every submission is then refused.
    pub running: bool,
    /// Groups written (committed or failed).
    pub groups: u64,
    /// Items in them.
    pub items: u64,
    /// Microseconds spent inside `write`.
    pub busy_us: u64,
    /// Items waiting in the queue now.
    pub queued: u64,
}

type Queued<W> = (<W as GroupWrite>::Item, oneshot::Sender<<W as GroupWrite>::Answer>);

#[derive(Default)]
struct Counters {
    stopped: AtomicBool,
    groups: AtomicU64,
    items: AtomicU64,
    busy_us: AtomicU64,
    queued: AtomicU64,
}

/// What every handle shares: the thread, joined when the last handle goes, and the counters.
struct Inner {
    thread: Option<JoinHandle<()>>,
    counters: Arc<Counters>,
}

impl Drop for Inner {
    /// Runs after the last handle's sender is gone (see `GroupWriter`'s field order), so the queue is
    /// closed: the thread writes what it holds and ends, and this waits for it.
    fn drop(&mut self) {
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// The handle items are submitted through. Cheap to clone; the writer stops when the last clone drops.
pub struct GroupWriter<W: GroupWrite> {
    // Declared (so dropped) before `inner`: the last handle's sender closes before `Inner` joins the thread.
    queue: Sender<Queued<W>>,
    inner: Arc<Inner>,
    queue_max: u64,
}

impl<W: GroupWrite> Clone for GroupWriter<W> {
    fn clone(&self) -> Self {
        GroupWriter { queue: self.queue.clone(), inner: self.inner.clone(), queue_max: self.queue_max }
    }
}

impl<W: GroupWrite> GroupWriter<W> {
    /// Starts the writer thread, named `name`, that owns `write`.
    pub fn spawn(name: &str, limits: Limits, write: W) -> std::io::Result<GroupWriter<W>> {
        assert!(limits.group_max >= 1 && limits.queue_max >= limits.group_max, "bad writer limits {limits:?}");
        // Unbounded underneath (nothing is allocated for the bound); `enqueue` holds it to `queue_max`.
        let (queue, receiver) = mpsc::channel::<Queued<W>>();
        let counters = Arc::new(Counters::default());
        let running = counters.clone();
        let thread =
            std::thread::Builder::new().name(name.into()).spawn(move || run(write, limits, &receiver, &running))?;
        let inner = Inner { thread: Some(thread), counters };
        Ok(GroupWriter { queue, inner: Arc::new(inner), queue_max: limits.queue_max as u64 })
    }

    /// Queues `item` for the next group and waits for that group to end.
    pub async fn submit(&self, item: W::Item) -> Result<W::Answer, Refused> {
        let answer = self.enqueue(item)?;
        answer.await.map_err(|_| Refused::Stopped)
    }

    /// [`submit`](Self::submit) for a synchronous caller: blocks this thread until the group ends. Call it
    /// from a thread that may block (not an async task's).
    pub fn submit_blocking(&self, item: W::Item) -> Result<W::Answer, Refused> {
        let answer = self.enqueue(item)?;
        futures::executor::block_on(answer).map_err(|_| Refused::Stopped)
    }

    fn enqueue(&self, item: W::Item) -> Result<oneshot::Receiver<W::Answer>, Refused> {
        let counters = &self.inner.counters;
        if counters.stopped.load(Ordering::Acquire) {
            return Err(Refused::Stopped);
        }
        let (reply, answer) = oneshot::channel();
        if counters.queued.fetch_add(1, Ordering::AcqRel) >= self.queue_max {
            counters.queued.fetch_sub(1, Ordering::AcqRel);
            return Err(Refused::Busy);
        }
        self.queue.send((item, reply)).map_err(|_| {
            counters.queued.fetch_sub(1, Ordering::AcqRel);
            Refused::Stopped
        })?;
        Ok(answer)
    }

    pub fn stats(&self) -> Stats {
        let counters = &self.inner.counters;
        Stats {
            running: !counters.stopped.load(Ordering::Acquire),
            groups: counters.groups.load(Ordering::Relaxed),
            items: counters.items.load(Ordering::Relaxed),
            busy_us: counters.busy_us.load(Ordering::Relaxed),
            queued: counters.queued.load(Ordering::Relaxed),
        }
    }
}

/// Marks the writer stopped however its thread ends, a panic included.
struct Stopping<'a>(&'a Counters);

impl Drop for Stopping<'_> {
    fn drop(&mut self) {
        self.0.stopped.store(true, Ordering::Release);
    }
}

fn run<W: GroupWrite>(mut write: W, limits: Limits, receiver: &Receiver<Queued<W>>, counters: &Counters) {
    let _stopping = Stopping(counters);
    let taken = || counters.queued.fetch_sub(1, Ordering::AcqRel);
    let mut next: Option<Queued<W>> = None;
    loop {
        let first = match next.take() {
            Some(queued) => queued,
            None => match receiver.recv() {
                Ok(queued) => {
                    taken();
                    queued
                }
                // Every handle is gone and the queue is empty.
                Err(_) => break,
            },
        };
        let alone = W::alone(&first.0);
        let mut group = vec![first];
        while !alone && group.len() < limits.group_max {
            match receiver.try_recv() {
                Ok(queued) => {
                    taken();
                    if W::alone(&queued.0) {
                        next = Some(queued);
                        break;
                    }
                    group.push(queued);
                }
                Err(_) => break,
            }
        }
        let (items, replies): (Vec<W::Item>, Vec<oneshot::Sender<W::Answer>>) = group.into_iter().unzip();
        let started = std::time::Instant::now();
        let answers = write.write(items);
        assert_eq!(answers.len(), replies.len(), "a group write answers every item it was given");
        counters.groups.fetch_add(1, Ordering::Relaxed);
        counters.items.fetch_add(replies.len() as u64, Ordering::Relaxed);
        counters.busy_us.fetch_add(started.elapsed().as_micros() as u64, Ordering::Relaxed);
        for (reply, answer) in replies.into_iter().zip(answers) {
            let _ = reply.send(answer);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicUsize;
    use std::sync::Mutex;

    /// The groups a writer was given, in order.
    type Groups = Arc<Mutex<Vec<Vec<u32>>>>;

    /// Records each group it is given; panics on the item `u32::MAX` (a failed invariant).
    struct Recording(Groups);

    impl GroupWrite for Recording {
        type Item = u32;
        type Answer = u32;
        fn write(&mut self, group: Vec<u32>) -> Vec<u32> {
            assert!(!group.contains(&u32::MAX), "invariant failed");
            self.0.lock().unwrap().push(group.clone());
            group.into_iter().map(|n| n * 2).collect()
        }
        fn alone(item: &u32) -> bool {
            *item >= 1_000_000 && *item != u32::MAX
        }
    }

    fn recording(limits: Limits) -> (GroupWriter<Recording>, Groups) {
        let groups = Arc::new(Mutex::new(Vec::new()));
        (GroupWriter::spawn("test-writer", limits, Recording(groups.clone())).unwrap(), groups)
    }

    /// Many threads submit at once: each hears its own answer, every item is written exactly once, in
    /// groups no larger than `group_max`, and an item marked `alone` is in a group of its own.
    #[test]
    fn every_item_is_written_once_in_bounded_groups_and_answered() {
        let (writer, groups) = recording(Limits { queue_max: 4096, group_max: 7 });
        std::thread::scope(|scope| {
            for thread in 0..8u32 {
                let writer = writer.clone();
                scope.spawn(move || {
                    for n in 0..200u32 {
                        let item = if n == 100 { 1_000_000 + thread } else { thread * 1000 + n };
                        assert_eq!(writer.submit_blocking(item), Ok(item * 2));
                    }
                });
            }
        });
        let groups = groups.lock().unwrap().clone();
        let mut all: Vec<u32> = groups.iter().flatten().copied().collect();
        all.sort_unstable();
        let mut expected: Vec<u32> = (0..8u32)
            .flat_map(|t| (0..200u32).map(move |n| if n == 100 { 1_000_000 + t } else { t * 1000 + n }))
            .collect();
        expected.sort_unstable();
        assert_eq!(all, expected);
        assert!(groups.iter().all(|g| g.len() <= 7));
        assert!(groups.iter().filter(|g| g.iter().any(|&n| n >= 1_000_000)).all(|g| g.len() == 1));
        let stats = writer.stats();
        assert_eq!((stats.items, stats.queued, stats.running), (1600, 0, true));
    }

    /// Items from one submitter are written in the order it queued them.
    #[test]
    fn one_submitters_items_keep_their_order() {
        let (writer, groups) = recording(Limits { queue_max: 64, group_max: 5 });
        let answers: Vec<_> = (0..40u32).map(|n| writer.enqueue(n).unwrap()).collect();
        for (n, answer) in answers.into_iter().enumerate() {
            assert_eq!(futures::executor::block_on(answer), Ok(n as u32 * 2));
        }
        let written: Vec<u32> = groups.lock().unwrap().iter().flatten().copied().collect();
        assert_eq!(written, (0..40).collect::<Vec<_>>());
    }

    /// A full queue refuses at once instead of growing.
    #[test]
    fn a_full_queue_refuses_busy() {
        struct Slow(Arc<AtomicUsize>);
        impl GroupWrite for Slow {
            type Item = ();
            type Answer = ();
            fn write(&mut self, group: Vec<()>) -> Vec<()> {
                // Hold the first group until the test has filled the queue.
                while self.0.load(Ordering::SeqCst) == 0 {
                    std::thread::yield_now();
                }
                group
            }
        }
        let release = Arc::new(AtomicUsize::new(0));
        let writer = GroupWriter::spawn("slow", Limits { queue_max: 2, group_max: 1 }, Slow(release.clone())).unwrap();
        let first = writer.enqueue(()).unwrap();
        // The thread takes the first item; two more fill the queue; the next is refused.
        while writer.stats().queued > 0 {
            std::thread::yield_now();
        }
        let queued: Vec<_> = (0..2).map(|_| writer.enqueue(()).unwrap()).collect();
        assert_eq!(writer.enqueue(()).err(), Some(Refused::Busy));
        release.store(1, Ordering::SeqCst);
        assert_eq!(futures::executor::block_on(first), Ok(()));
        for answer in queued {
            assert_eq!(futures::executor::block_on(answer), Ok(()));
        }
    }

    /// A write that panics stops the writer: its group is answered `Stopped`, so is every later
    /// submission, the stats say so, and nothing after it is written.
    #[test]
    fn a_failed_invariant_stops_the_writer() {
        let (writer, groups) = recording(Limits { queue_max: 64, group_max: 1 });
        assert_eq!(writer.submit_blocking(1), Ok(2));
        assert_eq!(writer.submit_blocking(u32::MAX), Err(Refused::Stopped));
        for _ in 0..1_000_000 {
            if !writer.stats().running {
                break;
            }
            std::thread::yield_now();
        }
        assert!(!writer.stats().running);
        assert_eq!(writer.submit_blocking(3), Err(Refused::Stopped));
        assert_eq!(groups.lock().unwrap().clone(), vec![vec![1]]);
    }

    /// Dropping the last handle writes what is queued and waits for the thread.
    #[test]
    fn the_last_drop_writes_what_is_queued_and_joins() {
        let (writer, groups) = recording(Limits { queue_max: 64, group_max: 3 });
        let answers: Vec<_> = (0..10u32).map(|n| writer.enqueue(n).unwrap()).collect();
        let copy = writer.clone();
        drop(writer);
        drop(copy);
        assert_eq!(groups.lock().unwrap().iter().flatten().count(), 10);
        for answer in answers {
            assert!(futures::executor::block_on(answer).is_ok());
        }
    }
}

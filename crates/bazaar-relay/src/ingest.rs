//! The relay's writer: one thread that takes whatever events are queued and
//! writes them in one transaction (group commit, no flush timer: a lone
//! publisher waits for one fsync, not for a tick), answers each only after
//! the commit, then hands the stored ones to live subscribers. The strfry
//! model: one writer, never an `OK` before the commit.

use std::sync::mpsc;
use std::sync::Arc;
use std::thread::JoinHandle;

use bazaar_types::Clock;
use tokio::sync::{broadcast, oneshot};

use crate::event::{Encoded, Event};
use crate::limits::INGEST_GROUP_MAX;
use crate::store::{unavailable, EventStore, Result, Written};

/// An event as live subscribers receive it: parsed (to match filters) and as
/// JSON (to send) — the JSON the store wrote.
pub type Live = Encoded;

/// Where a stored event goes live: `all` is what this node's subscriptions
/// read; `local` carries only what this node stored, for a cluster's
/// forwarder (events from other nodes enter `all` alone, so nothing loops).
#[derive(Clone)]
pub(crate) struct Feeds {
    pub(crate) all: broadcast::Sender<Arc<Live>>,
    pub(crate) local: broadcast::Sender<Arc<Live>>,
}

impl Feeds {
    pub(crate) fn send(&self, live: Live) {
        let live = Arc::new(live);
        // No receiver is not an error: nobody is listening (or no cluster).
        if self.local.receiver_count() > 0 {
            let _ = self.local.send(live.clone());
        }
        let _ = self.all.send(live);
    }
}

struct Request {
    event: Event,
    reply: oneshot::Sender<Result<Written>>,
}

pub(crate) struct Ingest {
    queue: Option<mpsc::Sender<Request>>,
    thread: Option<JoinHandle<()>>,
}

impl Ingest {
    pub(crate) fn start(store: Arc<dyn EventStore>, clock: Arc<dyn Clock>, feed: Feeds) -> Result<Ingest> {
        let (queue, requests) = mpsc::channel::<Request>();
        let thread = std::thread::Builder::new()
            .name("relay-writer".into())
            .spawn(move || run(store.as_ref(), clock.as_ref(), &feed, &requests))
            .map_err(unavailable)?;
        Ok(Ingest { queue: Some(queue), thread: Some(thread) })
    }

    /// Queues `event` for the next group and waits for that group's commit.
    pub(crate) async fn submit(&self, event: Event) -> Result<Written> {
        let (reply, answer) = oneshot::channel();
        let queue = self.queue.as_ref().ok_or_else(|| unavailable("the relay writer has stopped"))?;
        queue.send(Request { event, reply }).map_err(|_| unavailable("the relay writer has stopped"))?;
        answer.await.map_err(|_| unavailable("the relay writer stopped during this write"))?
    }
}

impl Drop for Ingest {
    /// Closes the queue, lets the thread write what it holds, and waits for it.
    fn drop(&mut self) {
        self.queue.take();
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

fn run(store: &dyn EventStore, clock: &dyn Clock, feed: &Feeds, requests: &mpsc::Receiver<Request>) {
    while let Ok(first) = requests.recv() {
        let mut group = vec![first];
        while group.len() < INGEST_GROUP_MAX {
            match requests.try_recv() {
                Ok(next) => group.push(next),
                Err(_) => break,
            }
        }
        let (events, replies): (Vec<Encoded>, Vec<_>) =
            group.into_iter().map(|r| (Encoded::of(r.event), r.reply)).unzip();
        let now = (clock.now().0 / 1000).max(0) as u64;
        match store.write(&events, now) {
            Ok(written) => {
                // Live subscribers hear of an event before its publisher's OK: a
                // client that subscribes after its OK finds the event stored and
                // is not sent it a second time as live.
                for ((encoded, reply), outcome) in events.into_iter().zip(replies).zip(written) {
                    if outcome == Written::Stored {
                        feed.send(encoded);
                    }
                    let _ = reply.send(Ok(outcome));
                }
            }
            Err(error) => {
                for reply in replies {
                    let _ = reply.send(Err(error.clone()));
                }
            }
        }
    }
}

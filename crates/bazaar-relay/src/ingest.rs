//! The relay's writer: the plane kit's sequenced writer ([`bazaar_plane::writer`]) taking whatever events
//! are queued and writing them in one transaction (group commit, no flush timer: a lone publisher waits for
//! one fsync, not for a tick), answering each only after the commit, and handing the stored ones to live
//! subscribers. The strfry model: one writer, never an `OK` before the commit.

use std::sync::Arc;

use bazaar_plane::writer::{GroupWrite, GroupWriter, Limits};
use bazaar_types::Clock;
use tokio::sync::broadcast;

use crate::event::{Encoded, Event};
use crate::limits::{INGEST_GROUP_MAX, INGEST_QUEUE_MAX};
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

/// The store and the feeds one group is written to and announced on.
struct Events {
    store: Arc<dyn EventStore>,
    clock: Arc<dyn Clock>,
    feed: Feeds,
}

impl GroupWrite for Events {
    type Item = Event;
    type Answer = Result<Written>;

    fn write(&mut self, group: Vec<Event>) -> Vec<Result<Written>> {
        let events: Vec<Encoded> = group.into_iter().map(Encoded::of).collect();
        let now = (self.clock.now().0 / 1000).max(0) as u64;
        match self.store.write(&events, now) {
            Ok(written) => {
                // Live subscribers hear of an event before its publisher's OK: a
                // client that subscribes after its OK finds the event stored and
                // is not sent it a second time as live.
                for (encoded, outcome) in events.into_iter().zip(&written) {
                    if *outcome == Written::Stored {
                        self.feed.send(encoded);
                    }
                }
                written.into_iter().map(Ok).collect()
            }
            Err(error) => events.iter().map(|_| Err(error.clone())).collect(),
        }
    }
}

/// The relay's writer; dropping it writes what is queued and waits for the thread.
pub(crate) struct Ingest(GroupWriter<Events>);

impl Ingest {
    pub(crate) fn start(store: Arc<dyn EventStore>, clock: Arc<dyn Clock>, feed: Feeds) -> Result<Ingest> {
        let limits = Limits { queue_max: INGEST_QUEUE_MAX, group_max: INGEST_GROUP_MAX };
        GroupWriter::spawn("relay-writer", limits, Events { store, clock, feed }).map(Ingest).map_err(unavailable)
    }

    /// Queues `event` for the next group and waits for that group's commit.
    pub(crate) async fn submit(&self, event: Event) -> Result<Written> {
        self.0.submit(event).await.map_err(|refused| unavailable(format!("the relay writer: {refused}")))?
    }
}

//! The relay engine: admission (id, signature, limits, NIP-40, NIP-70,
//! NIP-42 in private mode, the directed-job rule), the writer, queries and
//! the live feed. No HTTP here: the server owns the sockets and hands each
//! connection's frames to a `Session` (in `session`).

use std::collections::HashSet;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use bazaar_types::Clock;
use tokio::sync::broadcast;

use crate::event::{Event, PublicKey};
use crate::filter::Filter;
use crate::ingest::{Feeds, Ingest, Live};
use crate::jobs::{directed, JobRequest};
use crate::kind::{class, Class, AUTH};
use crate::limits::{CONNECTIONS_MAX, CREATED_AT_FUTURE_S_MAX, FANOUT_BUFFER, RETENTION_S};
use crate::store::{EventStore, Purged, Result, StoreError, Written};

/// Who may read and write.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Access {
    /// Anonymous read and anonymous write. The relay never sends `AUTH` and
    /// never answers `auth-required:`: a worker behind NAT with no inbound
    /// port connects out, publishes and subscribes with nothing else.
    Public,
    /// NIP-42: the relay challenges every connection; reading and writing
    /// need an authenticated key, and writing needs one on `writers` (every
    /// authenticated key when `writers` is empty).
    Private { writers: HashSet<PublicKey> },
}

#[derive(Debug, Clone)]
pub struct RelayConfig {
    pub access: Access,
    /// This relay's `wss://…/relay` URL, as NIP-42 `relay` tags must name it.
    pub url: String,
    pub name: String,
    pub description: String,
}

impl RelayConfig {
    pub fn public(url: impl Into<String>) -> RelayConfig {
        RelayConfig {
            access: Access::Public,
            url: url.into(),
            name: "Bazaar relay".into(),
            description: "The Bazaar labor market: jobs, claims, results and verdicts (NIP-90 shapes).".into(),
        }
    }
}

/// The answer to one `EVENT`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ack {
    pub accepted: bool,
    /// `prefix: text` when refused; may be empty when accepted.
    pub message: String,
}

impl Ack {
    fn accepted(message: &str) -> Ack {
        Ack { accepted: true, message: message.into() }
    }
    fn refused(message: impl Into<String>) -> Ack {
        Ack { accepted: false, message: message.into() }
    }
}

pub struct Relay {
    store: Arc<dyn EventStore>,
    connections: Arc<AtomicUsize>,
    ingest: Ingest,
    feed: Feeds,
    clock: Arc<dyn Clock>,
    pub config: RelayConfig,
}

impl Relay {
    pub fn start(store: Arc<dyn EventStore>, clock: Arc<dyn Clock>, config: RelayConfig) -> Result<Relay> {
        let feed = Feeds { all: broadcast::channel(FANOUT_BUFFER).0, local: broadcast::channel(FANOUT_BUFFER).0 };
        let ingest = Ingest::start(store.clone(), clock.clone(), feed.clone())?;
        Ok(Relay { store, connections: Arc::default(), ingest, feed, clock, config })
    }

    /// The relay's clock in unix seconds.
    pub fn now(&self) -> u64 {
        (self.clock.now().0 / 1000).max(0) as u64
    }

    /// The live feed: every event stored (or ephemeral) from now on.
    pub fn live(&self) -> broadcast::Receiver<Arc<Live>> {
        self.feed.all.subscribe()
    }

    /// Only the events this node stored (or relayed as ephemeral) from now
    /// on: what a cluster forwards to the other nodes.
    pub fn local_live(&self) -> broadcast::Receiver<Arc<Live>> {
        self.feed.local.subscribe()
    }

    /// Sends an event another node of the cluster stored to this node's live
    /// subscriptions. Its signature is checked again: a node trusts no bytes
    /// it did not verify.
    pub fn deliver_from_peer(&self, json: &str) -> std::result::Result<(), crate::event::Invalid> {
        let event = Event::parse(json)?;
        event.verify()?;
        let _ = self.feed.all.send(Arc::new(Live { event, json: json.to_string() }));
        Ok(())
    }

    /// Admits or refuses `event` from a connection authenticated as `authed`.
    pub async fn publish(&self, event: Event, authed: &HashSet<PublicKey>) -> Ack {
        if let Err(invalid) = event.verify() {
            return Ack::refused(invalid.to_string());
        }
        if let Some(refusal) = self.refusal(&event, authed).await {
            return Ack::refused(refusal);
        }
        if class(event.kind) == Class::Ephemeral {
            self.feed.send(Live::of(event));
            return Ack::accepted("");
        }
        match self.ingest.submit(event).await {
            Ok(Written::Stored) => Ack::accepted(""),
            Ok(Written::Duplicate) => Ack::accepted("duplicate: already have this event"),
            Ok(Written::Superseded) => {
                Ack::refused("invalid: a newer version of this replaceable event is stored; older versions are refused")
            }
            Ok(Written::Deleted) => {
                Ack::refused("blocked: its author deleted this event (NIP-09); it cannot be resubmitted")
            }
            Err(StoreError::Unavailable(_)) => {
                Ack::refused("error: the relay could not store this event; send it again")
            }
        }
    }

    /// The policy, in order: kind, time window, expiry, access, NIP-70, the directed-job rule.
    async fn refusal(&self, event: &Event, authed: &HashSet<PublicKey>) -> Option<String> {
        let now = self.now();
        if event.kind == AUTH {
            return Some("invalid: kind 22242 is sent with AUTH, never published".into());
        }
        if event.created_at > now + CREATED_AT_FUTURE_S_MAX {
            return Some(format!(
                "invalid: created_at is more than {CREATED_AT_FUTURE_S_MAX} s ahead of the relay's clock"
            ));
        }
        if event.created_at < now.saturating_sub(RETENTION_S) {
            return Some(format!(
                "invalid: created_at is older than this relay's retention of {} days",
                RETENTION_S / 86_400
            ));
        }
        if event.expires_at().is_some_and(|at| at <= now) {
            return Some("invalid: this event has expired (NIP-40)".into());
        }
        if let Access::Private { writers } = &self.config.access {
            if authed.is_empty() {
                return Some("auth-required: this relay is private; authenticate with NIP-42 first".into());
            }
            if !writers.is_empty() && !authed.iter().any(|key| writers.contains(key)) {
                return Some("restricted: this key may not write to this relay".into());
            }
        }
        if event.has_flag("-") && !authed.contains(&event.pubkey) {
            return Some(match self.config.access {
                Access::Public => "restricted: a protected event (NIP-70) needs its author authenticated, and this public relay never authenticates".into(),
                Access::Private { .. } => "restricted: a protected event (NIP-70) is accepted only from its authenticated author".into(),
            });
        }
        let filter = directed::jobs_answered(event)?;
        match self.query_events(vec![filter]).await {
            Ok(jobs) => jobs.iter().filter_map(JobRequest::from_event).find_map(|job| directed::refusal(&job, event)),
            Err(_) => Some("error: the relay could not read the job this answers; send it again".into()),
        }
    }

    /// Stored, unexpired events matching any filter, newest first.
    pub async fn query(&self, filters: Vec<Filter>) -> Result<Vec<String>> {
        let store = self.store.clone();
        let now = self.now();
        tokio::task::spawn_blocking(move || store.query(&filters, now))
            .await
            .map_err(|e| StoreError::Unavailable(e.to_string()))?
    }

    /// Stored events matching any filter, parsed.
    pub async fn query_events(&self, filters: Vec<Filter>) -> Result<Vec<Event>> {
        let rows = self.query(filters).await?;
        Ok(rows.iter().filter_map(|json| Event::parse(json).ok()).collect())
    }

    /// Removes expired events and those past retention.
    pub async fn purge(&self) -> Result<Purged> {
        let store = self.store.clone();
        let now = self.now();
        tokio::task::spawn_blocking(move || store.purge(now, now.saturating_sub(RETENTION_S)))
            .await
            .map_err(|e| StoreError::Unavailable(e.to_string()))?
    }

    /// A place for one more connection, or `None` at [`CONNECTIONS_MAX`]. The place frees itself on drop.
    pub fn admit_connection(&self) -> Option<ConnectionPlace> {
        let taken = self.connections.fetch_add(1, Ordering::SeqCst);
        let place = ConnectionPlace(self.connections.clone());
        (taken < CONNECTIONS_MAX).then_some(place)
    }

    pub fn connection_count(&self) -> usize {
        self.connections.load(Ordering::SeqCst)
    }

    pub fn store(&self) -> &Arc<dyn EventStore> {
        &self.store
    }
}

/// One open connection's place in the count.
pub struct ConnectionPlace(Arc<AtomicUsize>);

impl Drop for ConnectionPlace {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

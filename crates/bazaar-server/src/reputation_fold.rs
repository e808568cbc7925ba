//! The reputation fold a node keeps ([`Fold`]): caught up from the event ledger
//! on each read, written down in the store every
//! `REPUTATION_SNAPSHOT_EVERY_EVENTS` events it folds, and on a node's first
//! read taken up from the latest snapshot (any node's: it is in the shared
//! store) and folded forward, instead of folded from genesis.
//!
//! A snapshot is derived state. It is taken up only if its format and formula
//! are this build's and the ledger holds its `head` at its `seq`; otherwise the
//! node folds from genesis and says why in its log. `bazaar audit` and the
//! passport audit never read it: they fold the whole ledger themselves.

use crate::metrics::Metrics;
use bazaar_core::reputation::Ledger;
use bazaar_store::{FoldSnapshot, Store, StoreError};
use bazaar_types::limits::{REPUTATION_EVENTS_PAGE_MAX, REPUTATION_SNAPSHOT_EVERY_EVENTS};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use tokio::sync::{MappedMutexGuard, Mutex, MutexGuard};

/// The name the reputation fold's snapshot is stored under.
pub const SNAPSHOT_NAME: &str = "reputation";

/// The fold, its snapshot bookkeeping and what it has done since this node started.
pub struct Fold {
    inner: Mutex<Inner>,
    /// Events folded between snapshots (`REPUTATION_SNAPSHOT_EVERY_EVENTS` unless set).
    every: AtomicU64,
}

#[derive(Default)]
struct Inner {
    ledger: Ledger,
    /// Whether the store's snapshot has been looked for (once per node).
    opened: bool,
    /// The seq of the last snapshot taken up or written.
    snapshot_seq: u64,
}

/// What `/metrics` shows of the fold.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FoldStats {
    pub entries: u64,
    pub seq: u64,
    pub snapshot_seq: u64,
}

impl Default for Fold {
    fn default() -> Fold {
        Fold { inner: Mutex::default(), every: AtomicU64::new(REPUTATION_SNAPSHOT_EVERY_EVENTS) }
    }
}

impl Fold {
    /// Writes a snapshot every `events` folded events instead (at least 1).
    pub fn snapshot_every(&self, events: u64) {
        self.every.store(events.max(1), Ordering::Relaxed);
    }

    /// The fold caught up to the ledger's head: taken up from the store's
    /// snapshot on first use, then folded forward a page at a time. Every
    /// event folded is counted in `bazaar_reputation_events_folded_total`.
    pub async fn caught_up(
        &self,
        store: &Arc<dyn Store>,
        metrics: &Metrics,
    ) -> Result<MappedMutexGuard<'_, Ledger>, StoreError> {
        let mut inner = self.inner.lock().await;
        if !inner.opened {
            if let Some(ledger) = take_up(store).await? {
                inner.snapshot_seq = ledger.seq;
                inner.ledger = ledger;
            }
            inner.opened = true;
            metrics.set("bazaar_reputation_snapshot_seq", String::new(), inner.snapshot_seq as f64);
        }
        loop {
            let page = store.events(inner.ledger.seq, REPUTATION_EVENTS_PAGE_MAX).await?;
            for event in &page {
                inner.ledger.observe(event);
            }
            metrics.add("bazaar_reputation_events_folded_total", String::new(), page.len() as f64);
            if page.len() < REPUTATION_EVENTS_PAGE_MAX {
                break;
            }
        }
        if inner.ledger.seq >= inner.snapshot_seq.saturating_add(self.every.load(Ordering::Relaxed)) {
            inner.snapshot_seq = inner.ledger.seq;
            metrics.set("bazaar_reputation_snapshot_seq", String::new(), inner.snapshot_seq as f64);
            write_down(store.clone(), inner.ledger.clone());
        }
        Ok(MutexGuard::map(inner, |inner| &mut inner.ledger))
    }

    /// The fold's size and seqs, unless it is catching up right now.
    pub fn stats(&self) -> Option<FoldStats> {
        let inner = self.inner.try_lock().ok()?;
        Some(FoldStats { entries: inner.ledger.entries(), seq: inner.ledger.seq, snapshot_seq: inner.snapshot_seq })
    }
}

/// The store's snapshot as a fold, if there is one this node may take up.
async fn take_up(store: &Arc<dyn Store>) -> Result<Option<Ledger>, StoreError> {
    let Some(snapshot) = store.fold_snapshot(SNAPSHOT_NAME).await? else { return Ok(None) };
    let FoldSnapshot { seq, head, body, .. } = snapshot;
    let decoded = tokio::task::spawn_blocking(move || Ledger::restore(&body))
        .await
        .map_err(|e| StoreError::Unavailable(format!("reputation snapshot reader: {e}")))?;
    let ledger = match decoded {
        Ok(ledger) if ledger.seq == seq && ledger.head == head => ledger,
        Ok(_) => {
            tracing::warn!(seq, "reputation snapshot's row and body disagree: folding from genesis");
            return Ok(None);
        }
        Err(error) => {
            tracing::warn!(seq, %error, "reputation snapshot not taken up: folding from genesis");
            return Ok(None);
        }
    };
    if seq > 0 {
        let at = store.events(seq - 1, 1).await?;
        if !matches!(at.first(), Some(event) if event.seq == seq && event.hash == head) {
            tracing::warn!(seq, "reputation snapshot does not match this ledger at its seq: folding from genesis");
            return Ok(None);
        }
    }
    tracing::info!(seq, "reputation fold taken up from its snapshot");
    Ok(Some(ledger))
}

/// Serializes `ledger` off the async workers and stores it; a failure is
/// logged and the next snapshot is due `every` events later.
fn write_down(store: Arc<dyn Store>, ledger: Ledger) {
    tokio::spawn(async move {
        let (seq, head) = (ledger.seq, ledger.head.clone());
        let body = match tokio::task::spawn_blocking(move || ledger.snapshot()).await {
            Ok(body) => body,
            Err(error) => return tracing::warn!(seq, %error, "reputation snapshot not written"),
        };
        let bytes = body.len();
        let snapshot = FoldSnapshot { name: SNAPSHOT_NAME.into(), seq, head, body };
        match store.save_fold_snapshot(&snapshot).await {
            Ok(()) => tracing::info!(seq, bytes, "reputation snapshot written"),
            Err(error) => tracing::warn!(seq, %error, "reputation snapshot not written"),
        }
    });
}

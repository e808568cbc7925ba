//! The search tally: searches counted in memory, per normalised query, and
//! flushed to the store in batches ([`Store::record_searches`], never the
//! money writer), so a search never waits on a ledger group commit or fails
//! because the ledger's queue is full. A crash loses at most what was counted
//! since the last flush (`SEARCH_FLUSH_INTERVAL_MS`).

use bazaar_store::{SearchCount, Store, StoreError};
use bazaar_types::limits::SEARCH_TALLY_QUERIES_MAX;
use bazaar_types::Timestamp;
use std::collections::BTreeMap;
use std::sync::Mutex;

/// Searches counted since the last flush, bounded by `SEARCH_TALLY_QUERIES_MAX` queries.
#[derive(Default)]
pub struct SearchTally {
    pending: Mutex<BTreeMap<String, SearchCount>>,
    /// Held across take-and-write, so flushes land one after another and a
    /// reader that flushes first sees everything counted before it.
    flushing: tokio::sync::Mutex<()>,
    /// Woken when the tally fills, to flush before the interval is up.
    full: tokio::sync::Notify,
}

impl SearchTally {
    /// Counts one search for `query` that found `hits` listings at `at`.
    /// `false` if the tally is full and `query` is new: the search is not
    /// counted (the caller still answers it).
    pub fn count(&self, query: &str, hits: u64, at: Timestamp) -> bool {
        let mut pending = self.pending.lock().expect("tally mutex");
        if let Some(entry) = pending.get_mut(query) {
            entry.count += 1;
            (entry.hits_last, entry.last_at) = (hits, at);
            return true;
        }
        if pending.len() >= SEARCH_TALLY_QUERIES_MAX {
            self.full.notify_one();
            return false;
        }
        let entry = SearchCount { query: query.to_string(), count: 1, hits_last: hits, first_at: at, last_at: at };
        pending.insert(query.to_string(), entry);
        if pending.len() == SEARCH_TALLY_QUERIES_MAX {
            self.full.notify_one();
        }
        true
    }

    /// Distinct queries waiting for the next flush.
    pub fn len(&self) -> usize {
        self.pending.lock().expect("tally mutex").len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Resolves when the tally filled up (or already had, since the last wait).
    pub async fn filled(&self) {
        self.full.notified().await
    }

    /// Writes everything counted so far to `store` in one batch; returns how
    /// many queries it wrote. On failure the batch goes back into the tally
    /// (what no longer fits is dropped and logged) for the next flush.
    pub async fn flush(&self, store: &dyn Store) -> Result<usize, StoreError> {
        let _one_at_a_time = self.flushing.lock().await;
        let batch: Vec<SearchCount> =
            std::mem::take(&mut *self.pending.lock().expect("tally mutex")).into_values().collect();
        if batch.is_empty() {
            return Ok(0);
        }
        match store.record_searches(&batch).await {
            Ok(()) => Ok(batch.len()),
            Err(error) => {
                self.restore(batch);
                Err(error)
            }
        }
    }

    /// Puts back a batch that did not reach the store. It is older than
    /// anything counted since, so counts add and the newer last search wins.
    fn restore(&self, batch: Vec<SearchCount>) {
        let mut pending = self.pending.lock().expect("tally mutex");
        let mut dropped = 0;
        for older in batch {
            if let Some(newer) = pending.get_mut(&older.query) {
                newer.count += older.count;
                newer.first_at = newer.first_at.min(older.first_at);
            } else if pending.len() < SEARCH_TALLY_QUERIES_MAX {
                pending.insert(older.query.clone(), older);
            } else {
                dropped += older.count;
            }
        }
        if dropped > 0 {
            tracing::warn!(dropped, "search tally full while a flush failed; some searches were not counted");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_fold_per_query_and_stay_within_the_bound() {
        let tally = SearchTally::default();
        assert!(tally.count("lamp", 0, Timestamp(1)));
        assert!(tally.count("lamp", 3, Timestamp(2)));
        let lamp = tally.pending.lock().unwrap()["lamp"].clone();
        assert_eq!((lamp.count, lamp.hits_last, lamp.first_at, lamp.last_at), (2, 3, Timestamp(1), Timestamp(2)));
        for n in 1..SEARCH_TALLY_QUERIES_MAX {
            assert!(tally.count(&format!("q{n}"), 0, Timestamp(3)));
        }
        assert_eq!(tally.len(), SEARCH_TALLY_QUERIES_MAX);
        assert!(!tally.count("one too many", 0, Timestamp(4)), "a new query past the bound is not counted");
        assert!(tally.count("lamp", 0, Timestamp(4)), "a query already tallied still counts");
        assert_eq!(tally.len(), SEARCH_TALLY_QUERIES_MAX);
    }

    #[test]
    fn a_failed_batch_goes_back_under_what_was_counted_since() {
        let tally = SearchTally::default();
        tally.count("lamp", 0, Timestamp(1));
        let batch: Vec<SearchCount> = std::mem::take(&mut *tally.pending.lock().unwrap()).into_values().collect();
        tally.count("lamp", 2, Timestamp(5));
        tally.restore(batch);
        let lamp = tally.pending.lock().unwrap()["lamp"].clone();
        assert_eq!((lamp.count, lamp.hits_last, lamp.first_at, lamp.last_at), (2, 2, Timestamp(1), Timestamp(5)));
    }
}

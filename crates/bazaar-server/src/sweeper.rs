//! The background work: the sweeper, which asks each capability in turn for
//! the work that fell due (expired holds, contracts and disputes past their
//! deadline, relayed settlements to retry and keys to pick up, idempotency
//! records to prune), and the flusher of the search tally.

use crate::state::AppState;
use crate::{dispute, escrow, exec, federation, market, pay};
use bazaar_store::StoreError;
use bazaar_types::limits::{SEARCH_FLUSH_INTERVAL_MS, SWEEP_INTERVAL_MS};
use std::sync::Arc;
use std::time::Duration;

/// One pass of the sweeper at the injected clock's `now`: every capability's
/// due work, in this order. Returns how many expired holds it released.
pub async fn sweep_once(state: &Arc<AppState>) -> Result<usize, StoreError> {
    let now = state.now();
    let released = pay::due(state, now).await?;
    escrow::due(state, now).await?;
    dispute::due(state, now).await?;
    federation::due(state, now).await?;
    exec::due(state, now).await?;
    Ok(released)
}

/// Runs the background work until the process ends: the sweeper every
/// `SWEEP_INTERVAL_MS`, and the search flusher every `SEARCH_FLUSH_INTERVAL_MS`
/// (or sooner when the tally fills). Both run in the one task, side by side,
/// so a sweep waiting on the writer never holds up a flush.
pub fn spawn_sweeper(state: Arc<AppState>) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        tokio::join!(sweep_forever(&state), flush_searches_forever(&state));
    })
}

async fn sweep_forever(state: &Arc<AppState>) {
    let mut tick = tokio::time::interval(Duration::from_millis(SWEEP_INTERVAL_MS));
    let lease_ttl = Duration::from_millis(crate::cluster::SWEEPER_LEASE_TTL_MS);
    loop {
        tick.tick().await;
        if !crate::fanout::runs_here(state, crate::cluster::SWEEPER_LEASE, lease_ttl).await {
            continue;
        }
        state.metrics.add("bazaar_sweeps_total", String::new(), 1.0);
        if let Err(error) = sweep_once(state).await {
            tracing::warn!(%error, "expiry sweep failed; will retry");
        }
    }
}

async fn flush_searches_forever(state: &Arc<AppState>) {
    let mut tick = tokio::time::interval(Duration::from_millis(SEARCH_FLUSH_INTERVAL_MS));
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            _ = state.searches.filled() => {}
        }
        if let Err(error) = market::flush_searches(state).await {
            tracing::warn!(%error, "search tally flush failed; will retry");
        }
    }
}

/// What a graceful shutdown does after the server stopped taking requests:
/// writes the search tally, so a clean restart loses no counted search.
pub async fn shutdown(state: &AppState) -> Result<(), StoreError> {
    market::flush_searches(state).await.map(|_| ())
}

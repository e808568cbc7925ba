//! The sweeper, which asks each capability in turn for
//! the work that fell due (expired holds, contracts and disputes past their
//! deadline, relayed settlements to retry and keys to pick up, idempotency
//! records to prune).

use crate::state::AppState;
use crate::{dispute, escrow, exec, federation, pay};
use bazaar_store::StoreError;
use bazaar_types::limits::SWEEP_INTERVAL_MS;
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

/// Runs the sweeper every `SWEEP_INTERVAL_MS` until the process ends.
pub fn spawn_sweeper(state: Arc<AppState>) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(Duration::from_millis(SWEEP_INTERVAL_MS));
        loop {
            tick.tick().await;
            if let Err(error) = sweep_once(&state).await {
                tracing::warn!(%error, "expiry sweep failed; will retry");
            }
        }
    })
}

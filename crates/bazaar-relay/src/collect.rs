//! The collector behind `ask` and `wait`, in-process: it reads the task and
//! every response from the relay's store, then (for `wait`) follows the live
//! feed until the task is answered or the wait ends. It never posts, rents
//! or pays, and needs no signing key: a restarted asker reads the same state.
//! Remote callers (the CLI, workers) run the same `derive` over a relay
//! connection.

use std::time::Duration;

use serde::Serialize;
use tokio::sync::broadcast::error::RecvError;

use crate::event::{Event, EventId};
use crate::jobs::task::{derive, task_filters, TaskState, TaskView};
use crate::jobs::JobRequest;
use crate::limits::RETENTION_S;
use crate::relay::Relay;
use crate::store::Result;

/// Longest `wait` one call may ask for, in seconds.
pub const WAIT_S_MAX: u64 = 120;

/// What a lookup found.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "found", rename_all = "snake_case")]
pub enum TaskLookup {
    Task {
        view: TaskView,
    },
    /// The task was here and was purged when its history passed retention.
    PastRetention {
        purged_at: u64,
        retention_days: u64,
    },
    /// Never seen here (or purged before this relay remembered purges).
    NotFound {
        retention_days: u64,
    },
}

/// Reads the task now.
pub async fn ask(relay: &Relay, task: EventId) -> Result<TaskLookup> {
    let events = relay.query_events(task_filters(&task)).await?;
    lookup(relay, task, &events).await
}

/// Reads the task, then follows the live feed for up to `wait` until it is answered.
pub async fn wait(relay: &Relay, task: EventId, wait: Duration) -> Result<TaskLookup> {
    let mut live = relay.live();
    let mut events = relay.query_events(task_filters(&task)).await?;
    let first = lookup(relay, task, &events).await?;
    let TaskLookup::Task { view } = &first else { return Ok(first) };
    if view.state == TaskState::Answered {
        return Ok(first);
    }
    let Some(request) = events.iter().find(|e| e.id == task).and_then(JobRequest::from_event) else {
        return Ok(first);
    };
    let task_hex = task.to_hex();
    let deadline = tokio::time::Instant::now() + wait.min(Duration::from_secs(WAIT_S_MAX));
    loop {
        match tokio::time::timeout_at(deadline, live.recv()).await {
            Err(_) | Ok(Err(RecvError::Closed)) => break,
            Ok(Err(RecvError::Lagged(_))) => events = relay.query_events(task_filters(&task)).await?,
            Ok(Ok(item)) => {
                if !item.event.tag_values("e").any(|e| e == task_hex) {
                    continue;
                }
                events.push(item.event.clone());
            }
        }
        if derive(&request, &events).state == TaskState::Answered {
            break;
        }
    }
    Ok(TaskLookup::Task { view: derive(&request, &events) })
}

async fn lookup(relay: &Relay, task: EventId, events: &[Event]) -> Result<TaskLookup> {
    let retention_days = RETENTION_S / 86_400;
    match events.iter().find(|e| e.id == task).and_then(JobRequest::from_event) {
        Some(request) => Ok(TaskLookup::Task { view: derive(&request, events) }),
        None => {
            let store = relay.store().clone();
            let purged = tokio::task::spawn_blocking(move || store.purged_at(&task))
                .await
                .map_err(|e| crate::store::StoreError::Unavailable(e.to_string()))??;
            Ok(match purged {
                Some(purged_at) => TaskLookup::PastRetention { purged_at, retention_days },
                None => TaskLookup::NotFound { retention_days },
            })
        }
    }
}

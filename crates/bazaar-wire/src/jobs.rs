//! The labor market's task view (`GET /v1/jobs/{task_id}`): a job request's
//! state as the relay shows it. Keys and ids are 64 lowercase hex; times are
//! Unix seconds, as Nostr has them.

use serde::{Deserialize, Serialize};

/// A task: its request, who may answer, its state and the eligible answers and feedback.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Task {
    /// The job request's event id.
    pub task_id: String,
    /// The job request's kind (5000–5999).
    pub kind: u16,
    pub asker: String,
    pub posted_at: u64,
    #[cfg_attr(feature = "openapi", schema(required = true))]
    pub workflow: Option<String>,
    /// The request carries data for evaluation (a validator's job).
    pub evaluation_data: bool,
    /// The keys the request names as eligible (empty: anyone).
    pub workers: Vec<String>,
    /// `pending`, `claimed` or `answered`.
    pub state: String,
    /// The newest `processing` feedback from an eligible worker.
    #[cfg_attr(feature = "openapi", schema(required = true))]
    pub latest_progress_at: Option<u64>,
    pub successful_answers: u64,
    /// `error` feedback from eligible workers (declines included).
    pub failures: u64,
    pub answers: Vec<TaskAnswer>,
    pub feedback: Vec<TaskFeedback>,
    /// Events naming the task from authors it does not name (never counted).
    pub ignored: u64,
}

/// One eligible result.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct TaskAnswer {
    pub id: String,
    pub worker: String,
    pub created_at: u64,
    pub content: String,
}

/// One feedback event.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct TaskFeedback {
    pub id: String,
    pub author: String,
    pub created_at: u64,
    /// `processing`, `error`, `success`, `partial`, `payment-required`, or what the worker sent.
    pub status: String,
    /// The status tag's third value (`claim`, a progress note, `declined`, an error).
    pub detail: String,
}

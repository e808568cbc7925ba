//! A task's state, derived from the relay alone: the request, then every
//! feedback and result event that names it, deduplicated by id (a `since`
//! filter is inclusive, so re-reads overlap). Only events from eligible
//! authors count. The state says what the relay shows, no more:
//!
//! - **answered**: at least one valid result from an eligible worker;
//! - **claimed**: an eligible worker's latest feedback is `processing` (a claim
//!   does not prove the worker is still running: see `latest_progress_at`);
//! - **pending**: neither (including after a worker's `error`).
//!
//! `successful_answers` counts results only: a failure or a decline is not completed work.

use std::collections::{BTreeMap, HashSet};

use serde::Serialize;

use crate::event::{Event, EventId, PublicKey};
use crate::filter::Filter;
use crate::jobs::{result_kind_of, JobRequest, JOB_FEEDBACK};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum TaskState {
    Pending,
    Claimed,
    Answered,
}

/// One result, as the task view shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Answer {
    pub id: EventId,
    pub worker: PublicKey,
    pub created_at: u64,
    pub content: String,
}

/// One feedback event.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Feedback {
    pub id: EventId,
    pub author: PublicKey,
    pub created_at: u64,
    /// `processing`, `error`, `success`, `partial`, `payment-required`, or what the worker sent.
    pub status: String,
    /// The status tag's third value (`claim`, a progress note, `declined`, an error).
    pub detail: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct TaskView {
    pub task_id: EventId,
    pub kind: u16,
    pub asker: PublicKey,
    pub posted_at: u64,
    pub workflow: Option<String>,
    pub evaluation_data: bool,
    pub workers: Vec<PublicKey>,
    pub state: TaskState,
    /// The newest `processing` feedback from an eligible worker.
    pub latest_progress_at: Option<u64>,
    pub successful_answers: usize,
    /// `error` feedback from eligible workers (declines included).
    pub failures: usize,
    pub answers: Vec<Answer>,
    pub feedback: Vec<Feedback>,
    /// Events naming the task from authors it does not name (never counted).
    pub ignored: usize,
}

/// The one `REQ` that reads a task: the request by id, and every event naming
/// it (`derive` keeps the results and feedback among them and ignores the rest,
/// such as a handoff naming it as its parent or a verdict label).
pub fn task_filters(task: &EventId) -> Vec<Filter> {
    vec![
        Filter { ids: Some(vec![*task]), ..Filter::default() },
        Filter {
            tags: vec![('e', vec![task.to_hex()])],
            limit: Some(crate::limits::QUERY_LIMIT_MAX as u64),
            ..Filter::default()
        },
    ]
}

/// The eligible answers and feedback among `events`, each once, and how many were ignored.
fn collect(request: &JobRequest, events: &[Event]) -> (Vec<Answer>, Vec<Feedback>, usize) {
    let mut seen = HashSet::new();
    let mut answers = Vec::new();
    let mut feedback = Vec::new();
    let mut ignored = 0;
    let result_kind = result_kind_of(request.kind);
    let task_hex = request.id.to_hex();
    for event in events {
        if !seen.insert(event.id) || event.id == request.id || !event.tag_values("e").any(|e| e == task_hex) {
            continue;
        }
        let is_result = Some(event.kind) == result_kind;
        if !(is_result || event.kind == JOB_FEEDBACK) {
            continue;
        }
        let askers_own_feedback = event.kind == JOB_FEEDBACK && event.pubkey == request.asker;
        if !(request.eligible(&event.pubkey) || askers_own_feedback) {
            ignored += 1;
            continue;
        }
        if is_result {
            answers.push(Answer {
                id: event.id,
                worker: event.pubkey,
                created_at: event.created_at,
                content: event.content.clone(),
            });
        } else {
            let status = event.tags.iter().find(|tag| tag[0] == "status");
            let value = |i: usize| status.and_then(|tag| tag.get(i)).cloned().unwrap_or_default();
            feedback.push(Feedback {
                id: event.id,
                author: event.pubkey,
                created_at: event.created_at,
                status: value(1),
                detail: value(2),
            });
        }
    }
    (answers, feedback, ignored)
}

/// Derives the view from the request and any events (duplicates and unrelated ones are ignored).
pub fn derive(request: &JobRequest, events: &[Event]) -> TaskView {
    let (mut answers, mut feedback, ignored) = collect(request, events);
    answers.sort_by_key(|a| (a.created_at, a.id));
    feedback.sort_by_key(|f| (f.created_at, f.id));
    let from_workers = |f: &&Feedback| f.author != request.asker || request.eligible(&f.author);
    let latest_progress_at =
        feedback.iter().filter(from_workers).filter(|f| f.status == "processing").map(|f| f.created_at).max();
    let failures = feedback.iter().filter(from_workers).filter(|f| f.status == "error").count();
    // Each worker's latest feedback decides whether it is still working.
    let mut latest: BTreeMap<PublicKey, &Feedback> = BTreeMap::new();
    for f in feedback.iter().filter(from_workers) {
        latest.insert(f.author, f);
    }
    let state = if !answers.is_empty() {
        TaskState::Answered
    } else if latest.values().any(|f| f.status == "processing") {
        TaskState::Claimed
    } else {
        TaskState::Pending
    };
    TaskView {
        task_id: request.id,
        kind: request.kind,
        asker: request.asker,
        posted_at: request.created_at,
        workflow: request.workflow.clone(),
        evaluation_data: request.evaluation_data,
        workers: request.workers.clone(),
        state,
        latest_progress_at,
        successful_answers: answers.len(),
        failures,
        answers,
        feedback,
        ignored,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::{tag, Signer};
    use crate::jobs::{request_tags, JOB_REQUEST, JOB_RESULT};
    use bazaar_types::SeededEntropy;

    fn signer(seed: u64) -> Signer {
        Signer::generate(&SeededEntropy::new(seed))
    }

    fn feedback(worker: &Signer, job: &Event, at: u64, status: &str, detail: &str) -> Event {
        let tags =
            vec![tag(&["status", status, detail]), tag(&["e", &job.id.to_hex()]), tag(&["p", &job.pubkey.to_hex()])];
        worker.sign(at, JOB_FEEDBACK, tags, "")
    }

    fn result(worker: &Signer, job: &Event, at: u64, content: &str) -> Event {
        worker.sign(at, JOB_RESULT, vec![tag(&["e", &job.id.to_hex()]), tag(&["p", &job.pubkey.to_hex()])], content)
    }

    #[test]
    fn pending_then_claimed_then_answered_and_only_named_workers_count() {
        let (asker, named, stranger) = (signer(1), signer(2), signer(3));
        let job = asker.sign(
            100,
            JOB_REQUEST,
            request_tags("brief-script-delivery/v1", true, &[named.public_key()], "brief"),
            "",
        );
        let request = JobRequest::from_event(&job).unwrap();
        assert_eq!(request.workflow.as_deref(), Some("brief-script-delivery/v1"));
        assert!(request.evaluation_data && request.is_directed());
        assert_eq!(derive(&request, &[]).state, TaskState::Pending);

        let stranger_result = result(&stranger, &job, 101, "unasked");
        let view = derive(&request, std::slice::from_ref(&stranger_result));
        assert_eq!((view.state, view.ignored, view.successful_answers), (TaskState::Pending, 1, 0));

        let claim = feedback(&named, &job, 102, "processing", "claim");
        let progress = feedback(&named, &job, 110, "processing", "50%");
        let view = derive(&request, &[claim.clone(), progress.clone(), claim.clone()]);
        assert_eq!((view.state, view.latest_progress_at, view.feedback.len()), (TaskState::Claimed, Some(110), 2));

        let answer = result(&named, &job, 120, "Line one.\nLine two.");
        let events = [claim, progress, answer.clone(), answer.clone(), stranger_result];
        let view = derive(&request, &events);
        assert_eq!((view.state, view.successful_answers, view.ignored), (TaskState::Answered, 1, 1));
        assert_eq!(view.answers[0].content, "Line one.\nLine two.");
    }

    /// The task's REQ is one a relay accepts: every filter within its limits.
    #[test]
    fn task_filters_are_within_the_relays_limits() {
        let job = signer(1).sign(100, JOB_REQUEST, vec![], "");
        for filter in task_filters(&job.id) {
            assert_eq!(Filter::parse(&filter.to_value()), Ok(filter));
        }
    }

    #[test]
    fn a_failure_is_not_an_answer_and_ends_the_claim() {
        let (asker, worker) = (signer(1), signer(2));
        let job = asker.sign(100, JOB_REQUEST, request_tags("w/v1", false, &[], "x"), "");
        let request = JobRequest::from_event(&job).unwrap();
        let events =
            [feedback(&worker, &job, 101, "processing", "claim"), feedback(&worker, &job, 105, "error", "declined")];
        let view = derive(&request, &events);
        assert_eq!((view.state, view.failures, view.successful_answers), (TaskState::Pending, 1, 0));
        assert!(!view.evaluation_data, "absent flag means not evaluation data");
    }
}

//! The directed-job rule at the relay's door: feedback (7000) and results
//! (request kind + 1000) on a job this relay holds are accepted only from
//! the workers the job names, or from its asker's own feedback. NIP-90 calls
//! `p` advisory; Bazaar enforces it here, and the validator's collect step
//! enforces it again (results can be stored on other relays).

use crate::event::{Event, Hex32};
use crate::filter::Filter;
use crate::jobs::{result_kind_of, JobRequest, JOB_FEEDBACK};

/// Whether `event` answers a job in the NIP-90 sense (feedback or a result).
pub fn answers_a_job(kind: u16) -> bool {
    kind == JOB_FEEDBACK || (6_000..=6_999).contains(&kind)
}

/// The filter that finds the jobs `event` answers, if it answers any.
pub fn jobs_answered(event: &Event) -> Option<Filter> {
    if !answers_a_job(event.kind) {
        return None;
    }
    let job_ids: Vec<Hex32> = event.tag_values("e").filter_map(Hex32::parse).collect();
    if job_ids.is_empty() {
        return None;
    }
    // By id alone: `JobRequest::from_event` keeps only requests, so no
    // thousand-kind list has to be bound into the query of every answer.
    Some(Filter { ids: Some(job_ids), ..Filter::default() })
}

/// The rule itself, for one job this relay holds.
pub fn refusal(job: &JobRequest, event: &Event) -> Option<String> {
    if event.kind != JOB_FEEDBACK && Some(event.kind) != result_kind_of(job.kind) {
        return Some(format!("invalid: a result to a kind {} job has kind {}", job.kind, job.kind + 1_000));
    }
    let own_feedback = event.kind == JOB_FEEDBACK && event.pubkey == job.asker;
    if own_feedback || job.eligible(&event.pubkey) {
        return None;
    }
    Some("restricted: not a named worker for this job".into())
}

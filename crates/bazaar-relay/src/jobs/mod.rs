//! Jobs in the NIP-90 shape, with Bazaar's rules where NIP-90 is silent:
//! a dedicated request kind carrying a versioned workflow id and an
//! evaluation-data flag, results at request kind + 1000, feedback at 7000,
//! directed jobs (`p` tags) enforced rather than advisory, and a task state
//! derived only from what the relay holds.

pub mod directed;
pub mod reward;
pub mod task;

use crate::event::{Event, Hex32, PublicKey};

/// Bazaar's job request kind (NIP-90 request range).
pub const JOB_REQUEST: u16 = 5_905;
/// Results to a request: its kind plus 1000.
pub const JOB_RESULT: u16 = JOB_REQUEST + 1_000;
/// NIP-90 feedback: claims, progress, failures, payment requests.
pub const JOB_FEEDBACK: u16 = 7_000;
/// `["param", "workflow", "<name>/v<n>"]`: which workflow (and version) a job follows.
pub const WORKFLOW_PARAM: &str = "workflow";
/// `["param", "evaluation-data", "true"]`: the job may be exported for evaluation.
/// Absent means no: customer hires and room conversations never are.
pub const EVALUATION_PARAM: &str = "evaluation-data";
/// The `t` tag every Bazaar job carries, so a job board is one filter.
pub const JOB_TOPIC: &str = "bazaar-job";

/// Whether a kind is a NIP-90 request, and the result kind that answers it.
pub fn result_kind_of(request_kind: u16) -> Option<u16> {
    (5_000..=5_999).contains(&request_kind).then_some(request_kind + 1_000)
}

/// A job request read from its event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobRequest {
    pub id: Hex32,
    pub kind: u16,
    pub asker: PublicKey,
    pub created_at: u64,
    /// `None` when the request names no workflow (any NIP-90 client's job).
    pub workflow: Option<String>,
    pub evaluation_data: bool,
    /// Named workers (`p` tags); empty means anyone may answer.
    pub workers: Vec<PublicKey>,
    /// The `i` inputs' data, in order.
    pub inputs: Vec<String>,
    /// NIP-40 deadline, if any.
    pub expires_at: Option<u64>,
}

impl JobRequest {
    pub fn from_event(event: &Event) -> Option<JobRequest> {
        result_kind_of(event.kind)?;
        let param = |name: &str| {
            event
                .tags
                .iter()
                .find(|tag| tag.len() >= 3 && tag[0] == "param" && tag[1] == name)
                .map(|tag| tag[2].clone())
        };
        Some(JobRequest {
            id: event.id,
            kind: event.kind,
            asker: event.pubkey,
            created_at: event.created_at,
            workflow: param(WORKFLOW_PARAM),
            evaluation_data: param(EVALUATION_PARAM).as_deref() == Some("true"),
            workers: event.tag_values("p").filter_map(Hex32::parse).collect(),
            inputs: event.tag_values("i").map(str::to_string).collect(),
            expires_at: event.expires_at(),
        })
    }

    /// Whether `author` may claim, report on or answer this job: a named
    /// worker, or anyone when none is named. The asker may always post feedback.
    pub fn eligible(&self, author: &PublicKey) -> bool {
        self.workers.is_empty() || self.workers.contains(author)
    }

    pub fn is_directed(&self) -> bool {
        !self.workers.is_empty()
    }
}

/// The tags of a new Bazaar job request.
pub fn request_tags(workflow: &str, evaluation_data: bool, workers: &[PublicKey], input: &str) -> Vec<Vec<String>> {
    let mut tags = vec![
        vec!["i".into(), input.into(), "text".into()],
        vec!["param".into(), WORKFLOW_PARAM.into(), workflow.into()],
        vec!["t".into(), JOB_TOPIC.into()],
    ];
    if evaluation_data {
        tags.push(vec!["param".into(), EVALUATION_PARAM.into(), "true".into()]);
    }
    tags.extend(workers.iter().map(|worker| vec!["p".into(), worker.to_hex()]));
    tags
}

//! The three outcomes, which never pretend. **Accepted**: the evidence held
//! and the observation passed; eligible for a quality grade. **Rejected**:
//! wrong content, invalid signed evidence, or an explicit worker failure;
//! quality 0. **Unassessed**: the evidence or the observation was
//! unavailable; quality stays null, never 0. Each is attested as a signed
//! NIP-32 label with its grounds.

use serde::{Deserialize, Serialize};

use crate::event::{Event, Signer};
use crate::kind::LABEL;

/// The NIP-32 namespace of verdicts.
pub const VERDICT_NAMESPACE: &str = "bazaar.verdict";

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    Accepted,
    Rejected,
    Unassessed,
}

impl Verdict {
    pub fn as_str(self) -> &'static str {
        match self {
            Verdict::Accepted => "accepted",
            Verdict::Rejected => "rejected",
            Verdict::Unassessed => "unassessed",
        }
    }
}

/// An assessment: the verdict, its quality (null exactly when unassessed) and why.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Assessment {
    pub verdict: Verdict,
    pub quality: Option<f64>,
    pub grounds: String,
}

impl Assessment {
    pub fn accepted(quality: f64, grounds: impl Into<String>) -> Assessment {
        Assessment { verdict: Verdict::Accepted, quality: Some(quality.clamp(0.0, 1.0)), grounds: grounds.into() }
    }
    pub fn rejected(grounds: impl Into<String>) -> Assessment {
        Assessment { verdict: Verdict::Rejected, quality: Some(0.0), grounds: grounds.into() }
    }
    pub fn unassessed(grounds: impl Into<String>) -> Assessment {
        Assessment { verdict: Verdict::Unassessed, quality: None, grounds: grounds.into() }
    }
}

/// What an attestation names besides its verdict.
pub struct Subject<'a> {
    pub job: &'a Event,
    pub result: Option<&'a Event>,
    pub worker: &'a crate::event::PublicKey,
    pub workflow: &'a str,
    pub config_hash: &'a str,
}

/// The signed label (kind 1985): `L`/`l` in the verdict namespace, the task,
/// the result and the worker as targets, the grades' key as tags, and the
/// assessment as content.
pub fn verdict_event(validator: &Signer, subject: &Subject<'_>, assessment: &Assessment, created_at: u64) -> Event {
    let mut tags = vec![
        vec!["L".into(), VERDICT_NAMESPACE.into()],
        vec!["l".into(), assessment.verdict.as_str().into(), VERDICT_NAMESPACE.into()],
        vec!["e".into(), subject.job.id.to_hex(), String::new(), "task".into()],
        vec!["p".into(), subject.worker.to_hex()],
        vec!["workflow".into(), subject.workflow.into()],
        vec!["config".into(), subject.config_hash.into()],
    ];
    if let Some(result) = subject.result {
        tags.push(vec!["e".into(), result.id.to_hex(), String::new(), "result".into()]);
    }
    let content = serde_json::to_string(assessment).expect("an assessment serialises");
    validator.sign(created_at, LABEL, tags, content)
}

/// Reads a verdict label back (any validator's; the caller decides whom to trust).
pub fn read_verdict(event: &Event) -> Option<Assessment> {
    if event.kind != LABEL || event.tag("L") != Some(VERDICT_NAMESPACE) || event.verify().is_err() {
        return None;
    }
    let assessment: Assessment = serde_json::from_str(&event.content).ok()?;
    (event.tag("l") == Some(assessment.verdict.as_str())).then_some(assessment)
}

/// What a verdict label names: the task, the result (if any) and the worker.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Named {
    pub job: String,
    pub result: Option<String>,
    pub worker: String,
}

/// The task, result and worker a verdict label targets (read by marker).
pub fn verdict_targets(event: &Event) -> Option<Named> {
    let marked =
        |marker: &str| event.tags.iter().find(|t| t.len() >= 4 && t[0] == "e" && t[3] == marker).map(|t| t[1].clone());
    Some(Named { job: marked("task")?, result: marked("result"), worker: event.tag("p")?.to_string() })
}

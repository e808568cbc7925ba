//! The records, kept apart. Grades are keyed by (workflow, configuration
//! hash, rubric): a changed configuration starts a new record, and contest
//! and coordination grades never count for each other. Failures and
//! unassessed attempts stay visible beside the accepted count; quality
//! averages over assessed attempts only (an unassessed one is not a zero).
//! Specialists build a capability record from accepted handoffs whether or
//! not they ever enrolled. Nothing here reads stake or reputation, and
//! nothing here is read by them: the three are never one score.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::event::PublicKey;
use crate::labor::judge::Rubric;
use crate::labor::outcome::{Assessment, Verdict};

#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize)]
pub struct GradeKey {
    pub workflow: String,
    pub config_hash: String,
    pub rubric: Rubric,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Grade {
    pub accepted: u64,
    pub rejected: u64,
    pub unassessed: u64,
    /// Mean quality over accepted and rejected attempts; `None` before any was assessed.
    pub quality: Option<f64>,
    #[serde(skip)]
    quality_sum: f64,
}

impl Grade {
    fn add(&mut self, assessment: &Assessment) {
        match assessment.verdict {
            Verdict::Accepted => self.accepted += 1,
            Verdict::Rejected => self.rejected += 1,
            Verdict::Unassessed => self.unassessed += 1,
        }
        if let Some(quality) = assessment.quality {
            self.quality_sum += quality;
            self.quality = Some(self.quality_sum / (self.accepted + self.rejected) as f64);
        }
    }
}

/// Every record the validator keeps, folded from its outcomes.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Records {
    pub grades: BTreeMap<String, (GradeKey, Grade)>,
    /// Accepted handoffs per (specialist, capability).
    pub capabilities: BTreeMap<String, u64>,
}

impl Records {
    pub fn record(&mut self, key: GradeKey, assessment: &Assessment) {
        let name = format!("{}@{}/{:?}", key.workflow, &key.config_hash[..key.config_hash.len().min(12)], key.rubric);
        self.grades.entry(name).or_insert_with(|| (key, Grade::default())).1.add(assessment);
    }

    /// A specialist's handoff counts only when the parent job was accepted.
    pub fn record_handoff(&mut self, specialist: &PublicKey, capability: &str, parent: &Assessment) {
        if parent.verdict == Verdict::Accepted {
            *self.capabilities.entry(format!("{specialist}:{capability}")).or_default() += 1;
        }
    }

    pub fn grade(&self, key: &GradeKey) -> Option<&Grade> {
        self.grades.values().find(|(k, _)| k == key).map(|(_, grade)| grade)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(rubric: Rubric, config: &str) -> GradeKey {
        GradeKey { workflow: "brief-script-delivery/v1".into(), config_hash: config.into(), rubric }
    }

    #[test]
    fn unassessed_is_counted_but_never_a_zero_and_rubrics_stay_apart() {
        let mut records = Records::default();
        let coordination = key(Rubric::Coordination, "aaa");
        records.record(coordination.clone(), &Assessment::accepted(1.0, "ok"));
        records.record(coordination.clone(), &Assessment::unassessed("down"));
        let grade = records.grade(&coordination).unwrap();
        assert_eq!((grade.accepted, grade.unassessed, grade.quality), (1, 1, Some(1.0)));
        records.record(coordination.clone(), &Assessment::rejected("wrong"));
        assert_eq!(records.grade(&coordination).unwrap().quality, Some(0.5));
        records.record(key(Rubric::Contest, "aaa"), &Assessment::accepted(0.2, "lost the pair"));
        assert_eq!(records.grade(&coordination).unwrap().quality, Some(0.5), "a contest grade never counts here");
        assert_eq!(records.grade(&key(Rubric::Coordination, "bbb")), None, "a new configuration starts a new record");
    }

    #[test]
    fn handoffs_count_only_under_an_accepted_parent() {
        let mut records = Records::default();
        let specialist = crate::event::Hex32([7; 32]);
        records.record_handoff(&specialist, "speech", &Assessment::accepted(1.0, "ok"));
        records.record_handoff(&specialist, "speech", &Assessment::rejected("wrong"));
        records.record_handoff(&specialist, "speech", &Assessment::unassessed("down"));
        assert_eq!(records.capabilities.values().copied().collect::<Vec<_>>(), vec![1]);
    }
}

//! Judging, pluggable per workflow. Two rubrics that never count for each
//! other: **coordination** (an independent observation of the delivery:
//! delivered exactly, or not) and **contest** (pairwise comparisons between
//! answers, aggregated by Bradley–Terry). An observer checks content; the
//! built-in one compares a delivered text artifact with the approved script
//! byte for byte.

use serde::{Deserialize, Serialize};

use crate::labor::outcome::Assessment;

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Rubric {
    Coordination,
    Contest,
}

/// What an observer saw in the delivered bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Observation {
    /// The content is what was asked for.
    Matched,
    /// The content is wrong; the detail says how.
    Mismatched(String),
    /// The observer could not look (its tool missing, the bytes unreadable to it).
    Unavailable(String),
}

/// Checks delivered bytes against what the task approved.
pub trait Observer: Send + Sync {
    fn name(&self) -> &'static str;
    fn observe(&self, delivered: &[u8], approved: &str) -> Observation;
}

/// The built-in observer: the artifact's text is exactly the approved script.
pub struct ExactText;

impl Observer for ExactText {
    fn name(&self) -> &'static str {
        "exact-text"
    }

    fn observe(&self, delivered: &[u8], approved: &str) -> Observation {
        match std::str::from_utf8(delivered) {
            Err(_) => Observation::Mismatched("the artifact is not UTF-8 text".into()),
            Ok(text) if text == approved => Observation::Matched,
            Ok(text) => {
                let at = text.chars().zip(approved.chars()).take_while(|(a, b)| a == b).count();
                Observation::Mismatched(format!(
                    "the delivered text differs from the approved script at character {at} ({} vs {} characters)",
                    text.chars().count(),
                    approved.chars().count()
                ))
            }
        }
    }
}

/// A workflow's judge: the rubric it grades under, and its grade of one observation.
pub trait Judge: Send + Sync {
    fn rubric(&self) -> Rubric;
    fn judge(&self, observation: &Observation) -> Assessment;
}

/// Coordination: the delivery was observed exactly (quality 1) or it was not
/// (rejected, quality 0); an observation that could not happen is unassessed.
/// How many specialists were hired, or paid, changes nothing.
pub struct CoordinationJudge;

impl Judge for CoordinationJudge {
    fn rubric(&self) -> Rubric {
        Rubric::Coordination
    }

    fn judge(&self, observation: &Observation) -> Assessment {
        match observation {
            Observation::Matched => {
                Assessment::accepted(1.0, "the delivered artifact is the approved script, observed independently")
            }
            Observation::Mismatched(detail) => Assessment::rejected(format!("wrong content: {detail}")),
            Observation::Unavailable(detail) => Assessment::unassessed(format!("observation unavailable: {detail}")),
        }
    }
}

/// One pairwise comparison: players `a` and `b`, and `a`'s score (1 win, 0.5 tie, 0 loss).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Comparison {
    pub a: usize,
    pub b: usize,
    pub score_a: f64,
}

/// Iterations of the minorisation–maximisation fit.
const BT_ITERATIONS: usize = 200;
/// Pseudo-comparisons each player gets against a virtual average player,
/// so a player who always wins (or loses) keeps a finite rating.
const BT_PRIOR: f64 = 0.5;

/// Bradley–Terry ratings by Hunter's MM algorithm, on the Elo-like scale
/// `400·log10(strength) + 1000` (the mean player near 1000). Ties count half.
pub fn bradley_terry(players: usize, comparisons: &[Comparison]) -> Vec<f64> {
    let mut strength = vec![1.0f64; players];
    for _ in 0..BT_ITERATIONS {
        let mut next = vec![0.0; players];
        for (i, slot) in next.iter_mut().enumerate() {
            let mut wins = BT_PRIOR;
            let mut denominator = BT_PRIOR * 2.0 / (strength[i] + 1.0);
            for c in comparisons.iter().filter(|c| c.a == i || c.b == i) {
                let (other, score) = if c.a == i { (c.b, c.score_a) } else { (c.a, 1.0 - c.score_a) };
                wins += score;
                denominator += 1.0 / (strength[i] + strength[other]);
            }
            *slot = wins / denominator;
        }
        let mean_log = next.iter().map(|s| s.ln()).sum::<f64>() / players.max(1) as f64;
        strength = next.iter().map(|s| (s.ln() - mean_log).exp()).collect();
    }
    strength.iter().map(|s| 400.0 * s.log10() + 1000.0).collect()
}

/// The contest workflow: the same task to several workers, their answers compared in pairs.
pub const CONTEST_ANSWER: &str = "contest-answer/v1";

/// Compares two answers to one prompt: `Some(score of a)` — 1 a is better,
/// 0.5 a tie, 0 b is better — or `None` when it cannot judge this pair.
pub trait PairwiseJudge: Send + Sync {
    fn compare(&self, prompt: &str, a: &str, b: &str) -> Option<f64>;
}

/// A contest's assessments, one per answer in order: every pair compared,
/// ratings fitted by Bradley–Terry, each answer's quality its expected score
/// against an average answer. Fewer than two answers, or no comparison
/// possible, is unassessed — never a zero.
pub fn judge_contest(prompt: &str, answers: &[String], judge: &dyn PairwiseJudge) -> Vec<Assessment> {
    if answers.len() < 2 {
        return answers.iter().map(|_| Assessment::unassessed("a contest needs at least two answers")).collect();
    }
    let mut comparisons = Vec::new();
    for a in 0..answers.len() {
        for b in a + 1..answers.len() {
            if let Some(score_a) = judge.compare(prompt, &answers[a], &answers[b]) {
                comparisons.push(Comparison { a, b, score_a: score_a.clamp(0.0, 1.0) });
            }
        }
    }
    if comparisons.is_empty() {
        return answers.iter().map(|_| Assessment::unassessed("no pair of answers could be compared")).collect();
    }
    let ratings = bradley_terry(answers.len(), &comparisons);
    ratings
        .iter()
        .enumerate()
        .map(|(i, rating)| {
            let judged = comparisons.iter().filter(|c| c.a == i || c.b == i).count();
            let quality = 1.0 / (1.0 + 10f64.powf((1000.0 - rating) / 400.0));
            Assessment::accepted(
                quality,
                format!("contest: Bradley–Terry rating {rating:.0} over {judged} comparisons"),
            )
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::labor::outcome::Verdict;

    #[test]
    fn exact_text_is_exact() {
        assert_eq!(ExactText.observe(b"Line one.\nLine two.", "Line one.\nLine two."), Observation::Matched);
        assert!(matches!(
            ExactText.observe(b"Line one.\nLine two!", "Line one.\nLine two."),
            Observation::Mismatched(_)
        ));
        assert!(matches!(
            ExactText.observe(b"Line one.\nLine two.\n", "Line one.\nLine two."),
            Observation::Mismatched(_)
        ));
        assert!(matches!(ExactText.observe(&[0xff, 0xfe], "x"), Observation::Mismatched(_)));
    }

    #[test]
    fn unassessed_keeps_quality_null_and_rejected_is_zero() {
        let judge = CoordinationJudge;
        let unavailable = judge.judge(&Observation::Unavailable("no tool".into()));
        assert_eq!((unavailable.verdict, unavailable.quality), (Verdict::Unassessed, None));
        let wrong = judge.judge(&Observation::Mismatched("x".into()));
        assert_eq!((wrong.verdict, wrong.quality), (Verdict::Rejected, Some(0.0)));
        assert_eq!(judge.judge(&Observation::Matched).quality, Some(1.0));
    }

    struct Longer;
    impl PairwiseJudge for Longer {
        fn compare(&self, _prompt: &str, a: &str, b: &str) -> Option<f64> {
            Some(match a.len().cmp(&b.len()) {
                std::cmp::Ordering::Greater => 1.0,
                std::cmp::Ordering::Equal => 0.5,
                std::cmp::Ordering::Less => 0.0,
            })
        }
    }

    #[test]
    fn a_contest_grades_every_answer_by_its_pairs_and_never_zeroes_the_unjudged() {
        let answers: Vec<String> = ["a", "abc", "ab"].iter().map(|s| s.to_string()).collect();
        let graded = judge_contest("p", &answers, &Longer);
        let q: Vec<f64> = graded.iter().map(|a| a.quality.unwrap()).collect();
        assert!(q[1] > q[2] && q[2] > q[0], "{q:?}");
        assert!(graded.iter().all(|a| a.verdict == Verdict::Accepted));
        let alone = judge_contest("p", &answers[..1], &Longer);
        assert_eq!((alone[0].verdict, alone[0].quality), (Verdict::Unassessed, None));
        struct Blind;
        impl PairwiseJudge for Blind {
            fn compare(&self, _: &str, _: &str, _: &str) -> Option<f64> {
                None
            }
        }
        assert!(judge_contest("p", &answers, &Blind).iter().all(|a| a.quality.is_none()));
    }

    #[test]
    fn bradley_terry_orders_by_strength_and_ties_count_half() {
        // 0 beats 1 three times in four; 1 beats 2 three times in four; 0 and 2 tie once.
        let mut comparisons = Vec::new();
        for (a, b) in [(0, 1), (1, 2)] {
            comparisons.extend([1.0, 1.0, 1.0, 0.0].map(|score_a| Comparison { a, b, score_a }));
        }
        comparisons.push(Comparison { a: 0, b: 2, score_a: 0.5 });
        let ratings = bradley_terry(3, &comparisons);
        assert!(ratings[0] > ratings[1] && ratings[1] > ratings[2], "{ratings:?}");
        let even = bradley_terry(2, &[Comparison { a: 0, b: 1, score_a: 0.5 }]);
        assert!((even[0] - even[1]).abs() < 1e-9, "a tie is even: {even:?}");
        let sweep = bradley_terry(2, &[Comparison { a: 0, b: 1, score_a: 1.0 }; 10]);
        assert!(sweep[0].is_finite() && sweep[1].is_finite() && sweep[0] > sweep[1]);
    }
}

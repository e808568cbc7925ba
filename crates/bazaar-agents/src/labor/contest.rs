//! The contest workflow on the validator: the same prompt to several named
//! workers; each answer is the text artifact its worker signed (fetched
//! under the fetch policy and checked against the signed hash); every pair
//! of answers goes to a pluggable pairwise judge; Bradley–Terry turns the
//! comparisons into ratings and each answer's quality; each is attested with
//! its own signed label and recorded under the contest rubric, which never
//! counts toward coordination grades. A worker whose evidence cannot be
//! fetched is unassessed; one whose bytes do not match its signed hash is rejected.

use std::time::Duration;

use anyhow::{bail, Context, Result};
use bazaar_relay::jobs::task::TaskView;
use bazaar_relay::jobs::{request_tags, JOB_REQUEST};
use bazaar_relay::labor::evidence::artifact_of;
use bazaar_relay::labor::judge::{judge_contest, PairwiseJudge, CONTEST_ANSWER};
use bazaar_relay::labor::outcome::{verdict_event, Assessment, Subject};
use bazaar_relay::{Event, Filter, PublicKey};
use rusqlite::params;
use serde::Serialize;
use sha2::{Digest, Sha256};

use super::fetch::fetch;
use super::validator::Validator;
use crate::relay_client::{follow_task_until, RelayClient};

/// One worker's contest outcome.
#[derive(Debug, Clone, Serialize)]
pub struct ContestRecorded {
    pub worker: String,
    pub verdict_id: String,
    #[serde(flatten)]
    pub assessment: Assessment,
}

/// A pairwise judge that runs a command: `PROMPT`, `ANSWER_A` and
/// `ANSWER_B` in its environment; it prints `a`, `b` or `tie`.
pub struct CommandJudge {
    pub command: String,
}

impl PairwiseJudge for CommandJudge {
    fn compare(&self, prompt: &str, a: &str, b: &str) -> Option<f64> {
        let output = std::process::Command::new("sh")
            .arg("-c")
            .arg(&self.command)
            .env("PROMPT", prompt)
            .env("ANSWER_A", a)
            .env("ANSWER_B", b)
            .output()
            .ok()?;
        match String::from_utf8_lossy(&output.stdout).trim() {
            "a" => Some(1.0),
            "b" => Some(0.0),
            "tie" => Some(0.5),
            _ => None,
        }
    }
}

impl Validator {
    /// Posts `prompt` to `workers`, waits up to `wait` for their answers, judges and attests each.
    pub async fn contest(
        &self,
        workers: &[PublicKey],
        prompt: &str,
        judge: &dyn PairwiseJudge,
        wait: Duration,
    ) -> Result<Vec<ContestRecorded>> {
        if workers.len() < 2 {
            bail!("a contest needs at least two workers");
        }
        let job = self.signer.sign(
            bazaar_sdk::clock::unix_now(),
            JOB_REQUEST,
            request_tags(CONTEST_ANSWER, false, workers, prompt),
            "",
        );
        let mut client = RelayClient::connect(&self.relay).await?;
        let (accepted, message) = client.publish(&job).await?;
        if !accepted {
            bail!("the relay refused the contest: {message}");
        }
        let all_answered =
            |view: &TaskView| workers.iter().all(|worker| view.answers.iter().any(|answer| answer.worker == *worker));
        let view = follow_task_until(&self.relay, &job.id, wait.as_secs(), &all_answered).await?;
        let mut entrants = Vec::new();
        for worker in workers {
            let Some(answer) = view.answers.iter().find(|a| a.worker == *worker) else { continue };
            let found = client.fetch(&[Filter { ids: Some(vec![answer.id]), ..Filter::default() }]).await?;
            let result = found.into_iter().next().context("the answer's event")?;
            let text = self.text_of(&result).await;
            entrants.push((result, text));
        }
        let texts: Vec<String> = entrants.iter().filter_map(|(_, text)| text.as_ref().ok().cloned()).collect();
        let mut graded = judge_contest(prompt, &texts, judge).into_iter();
        let mut recorded = Vec::new();
        for (result, text) in &entrants {
            let assessment = match text {
                Ok(_) => graded.next().context("one grade per answer")?,
                Err(assessment) => assessment.clone(),
            };
            recorded.push(self.attest_entrant(&job, result, assessment).await?);
        }
        Ok(recorded)
    }

    /// An answer's text: its signed artifact, fetched and hash-checked, or the assessment it gets instead.
    async fn text_of(&self, result: &Event) -> std::result::Result<String, Assessment> {
        let artifact = artifact_of(result)
            .ok_or_else(|| Assessment::rejected("invalid signed evidence: the answer carries no artifact"))?;
        let bytes = fetch(&self.policy, &artifact.url)
            .await
            .map_err(|e| Assessment::unassessed(format!("evidence unavailable: {e}")))?;
        if hex::encode(Sha256::digest(&bytes)) != artifact.sha256 {
            return Err(Assessment::rejected(
                "invalid signed evidence: the fetched bytes do not match the signed hash",
            ));
        }
        String::from_utf8(bytes).map_err(|_| Assessment::rejected("wrong content: the artifact is not UTF-8 text"))
    }

    async fn attest_entrant(&self, job: &Event, result: &Event, assessment: Assessment) -> Result<ContestRecorded> {
        let config_hash = result.tag("config").unwrap_or("unknown").to_string();
        let subject = Subject {
            job,
            result: Some(result),
            worker: &result.pubkey,
            workflow: CONTEST_ANSWER,
            config_hash: &config_hash,
        };
        let verdict = verdict_event(&self.signer, &subject, &assessment, bazaar_sdk::clock::unix_now());
        self.db()?.execute(
            "INSERT INTO contest_outcomes VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
            params![
                job.id.to_hex(),
                result.pubkey.to_hex(),
                verdict.id.to_hex(),
                result.id.to_hex(),
                config_hash,
                serde_json::to_string(&assessment)?
            ],
        )?;
        let (accepted, message) = RelayClient::connect(&self.relay).await?.publish(&verdict).await?;
        if !accepted {
            tracing::warn!(%message, "the relay refused a contest label; it is recorded locally");
        }
        Ok(ContestRecorded { worker: result.pubkey.to_hex(), verdict_id: verdict.id.to_hex(), assessment })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_command_judge_reads_a_b_or_tie_and_nothing_else() {
        let longer = CommandJudge {
            command: r#"if [ ${#ANSWER_A} -gt ${#ANSWER_B} ]; then echo a; elif [ ${#ANSWER_A} -lt ${#ANSWER_B} ]; then echo b; else echo tie; fi"#.into(),
        };
        assert_eq!(longer.compare("p", "long answer", "short"), Some(1.0));
        assert_eq!(longer.compare("p", "short", "long answer"), Some(0.0));
        assert_eq!(longer.compare("p", "same", "same"), Some(0.5));
        let confused = CommandJudge { command: "echo maybe".into() };
        assert_eq!(confused.compare("p", "a", "b"), None, "an unreadable verdict judges nothing");
    }
}

//! `bazaar validator`: post → collect → accept → judge → attest, for the
//! coordination workflow. It posts a directed brief to a reviewed
//! coordinator and remembers the approved script; collects the answer from
//! the named coordinator only (the directed rule, again: results may come
//! from other relays); accepts by checking every signature and link of the
//! evidence chain, fetching the artifact under the fetch policy and hashing
//! it against the signed hash; has the observer check the content and the
//! workflow's judge grade it; and attests with a signed NIP-32 label while
//! recording the outcome, the saved events and the fetched bytes locally.
//! A worker's claim of success, a coordinator's acceptance or a payment claim
//! never replaces the check. An outcome is attested once per task.

use std::path::Path;
use std::sync::Mutex;
use std::time::Duration;

use anyhow::{anyhow, bail, Context, Result};
use bazaar_relay::jobs::task::TaskState;
use bazaar_relay::jobs::{request_tags, JobRequest, JOB_REQUEST};
use bazaar_relay::labor::evidence::{check_chain, links_of, ArtifactRef, Chain};
use bazaar_relay::labor::grades::{GradeKey, Records};
use bazaar_relay::labor::judge::{CoordinationJudge, ExactText, Judge, Observer, Rubric, CONTEST_ANSWER};
use bazaar_relay::labor::outcome::{verdict_event, Assessment, Subject, Verdict};
use bazaar_relay::labor::review::{passed_config, REVIEW};
use bazaar_relay::labor::BRIEF_SCRIPT_DELIVERY;
use bazaar_relay::{Event, Filter, Hex32, PublicKey, Signer};
use rusqlite::{params, Connection, OptionalExtension};
use serde::Serialize;
use sha2::{Digest, Sha256};

use super::bounty::{self, PostReward};
use super::fetch::{fetch, FetchPolicy};
use crate::relay_client::{follow_task, RelayClient};

/// The capability a specialist's accepted handoff counts toward.
pub const HANDOFF_CAPABILITY: &str = "script-delivery";

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS tasks (
    job_id TEXT PRIMARY KEY, workflow TEXT NOT NULL, approved TEXT NOT NULL,
    evaluation_data INTEGER NOT NULL, job_json TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS contest_outcomes (
    job_id TEXT NOT NULL, worker TEXT NOT NULL, verdict_id TEXT NOT NULL, result_id TEXT,
    config_hash TEXT NOT NULL, assessment TEXT NOT NULL, PRIMARY KEY (job_id, worker));
CREATE TABLE IF NOT EXISTS outcomes (
    job_id TEXT PRIMARY KEY, verdict_id TEXT NOT NULL, result_id TEXT, worker TEXT NOT NULL,
    specialist TEXT, workflow TEXT NOT NULL, config_hash TEXT NOT NULL, assessment TEXT NOT NULL,
    evidence TEXT NOT NULL, artifact BLOB, verdict_json TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS bounties (
    job_id TEXT PRIMARY KEY, bounty_id TEXT NOT NULL, amount_minor INTEGER NOT NULL, reward TEXT);
";

/// What one assessment recorded.
#[derive(Debug, Clone, Serialize)]
pub struct Recorded {
    pub job_id: String,
    pub verdict_id: String,
    pub worker: String,
    pub config_hash: String,
    #[serde(flatten)]
    pub assessment: Assessment,
    /// The reward the registry paid for this outcome (gross, fee, net, transfers), once released.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reward: Option<serde_json::Value>,
}

/// A replay's answer: local, unsigned, written nowhere.
#[derive(Debug, Clone, Serialize)]
pub struct Replay {
    pub job_id: String,
    pub original: Assessment,
    pub replayed: Assessment,
    pub agrees: bool,
    pub signed: bool,
}

pub struct Validator {
    pub relay: String,
    pub(super) signer: Signer,
    pub(super) policy: FetchPolicy,
    db: Mutex<Connection>,
    observer: Box<dyn Observer>,
    judge: Box<dyn Judge>,
    /// The registry where this validator's jobs' bounties are funded, as the posting agent.
    registry: Option<bazaar_sdk::Client>,
}

/// The evidence gathered for one answer: the chain's four events, the artifact, its bytes.
struct Gathered {
    events: Vec<Event>,
    bytes: Option<Vec<u8>>,
}

impl Validator {
    pub fn open(relay: &str, signer: Signer, policy: FetchPolicy, db: &Path) -> Result<Validator> {
        let connection = Connection::open(db).with_context(|| format!("opening {}", db.display()))?;
        connection.execute_batch(&format!("PRAGMA journal_mode = WAL; PRAGMA synchronous = FULL; {SCHEMA}"))?;
        Ok(Validator {
            relay: relay.to_string(),
            signer,
            policy,
            db: Mutex::new(connection),
            observer: Box::new(ExactText),
            judge: Box::new(CoordinationJudge),
            registry: None,
        })
    }

    /// Funds and releases bounties at `registry`, with the posting agent's credential.
    pub fn with_registry(mut self, registry: bazaar_sdk::Client) -> Validator {
        self.registry = Some(registry);
        self
    }

    pub fn public_key(&self) -> PublicKey {
        self.signer.public_key()
    }

    pub(super) fn db(&self) -> Result<std::sync::MutexGuard<'_, Connection>> {
        self.db.lock().map_err(|_| anyhow!("the validator's database lock is poisoned"))
    }

    /// Posts the brief to `coordinator`, explicitly paying no reward.
    pub async fn post(&self, coordinator: PublicKey, script: &str, evaluation_data: bool) -> Result<Event> {
        self.post_with(coordinator, script, evaluation_data, PostReward::None).await
    }

    /// Posts the brief to `coordinator`, whose last review must have passed.
    /// A bounty is funded at the registry before the job is published: if
    /// funding is refused, nothing is published.
    pub async fn post_with(
        &self,
        coordinator: PublicKey,
        script: &str,
        evaluation_data: bool,
        reward: PostReward,
    ) -> Result<Event> {
        let mut client = RelayClient::connect(&self.relay).await?;
        let reviews = client
            .fetch(&[Filter { kinds: Some(vec![REVIEW]), authors: Some(vec![coordinator]), ..Filter::default() }])
            .await?;
        if reviews.first().and_then(passed_config).is_none() {
            bail!("coordinator {coordinator} has no passed review on this relay; it cannot take directed work");
        }
        let mut tags = request_tags(BRIEF_SCRIPT_DELIVERY, evaluation_data, &[coordinator], script);
        let poster = match (reward, &self.registry) {
            (PostReward::None, _) => String::new(),
            (PostReward::Bounty(_), Some(registry)) => registry.me().await?.member.id,
            (PostReward::Bounty(_), None) => {
                bail!("a reward is funded at a registry: give --registry and the posting agent's credential")
            }
        };
        tags.push(bounty::reward_tag(reward, &poster));
        let job = self.signer.sign(bazaar_sdk::clock::unix_now(), JOB_REQUEST, tags, "");
        if let (PostReward::Bounty(amount), Some(registry)) = (reward, &self.registry) {
            let funded = bounty::fund(registry, &job, amount).await?;
            let id = funded.id.clone();
            self.db()?
                .execute("INSERT INTO bounties VALUES (?1, ?2, ?3, NULL)", params![job.id.to_hex(), id, amount])?;
        }
        self.db()?.execute(
            "INSERT INTO tasks VALUES (?1, ?2, ?3, ?4, ?5)",
            params![job.id.to_hex(), BRIEF_SCRIPT_DELIVERY, script, evaluation_data, job.to_json()],
        )?;
        let (accepted, message) = client.publish(&job).await?;
        if !accepted {
            bail!("the relay refused the brief: {message}");
        }
        Ok(job)
    }

    /// Collects, accepts, judges and attests the task; `None` while it is
    /// still pending (no answer and no failure). Once attested, the recorded
    /// outcome is returned again and nothing is signed twice.
    pub async fn assess(&self, job_id: &Hex32, wait: Duration) -> Result<Option<Recorded>> {
        if let Some(recorded) = self.recorded(job_id)? {
            return Ok(Some(recorded));
        }
        self.assess_now(job_id, wait).await
    }

    /// Assesses a task whose recorded outcome is *unassessed* again (the
    /// evidence may be reachable now), signing a new verdict; any other
    /// recorded outcome is returned unchanged: accepted and rejected are final.
    pub async fn reassess(&self, job_id: &Hex32, wait: Duration) -> Result<Option<Recorded>> {
        match self.recorded(job_id)? {
            Some(recorded) if recorded.assessment.verdict == Verdict::Unassessed => {
                self.db()?.execute("DELETE FROM outcomes WHERE job_id = ?1", [job_id.to_hex()])?;
                self.assess_now(job_id, wait).await
            }
            other => Ok(other),
        }
    }

    async fn assess_now(&self, job_id: &Hex32, wait: Duration) -> Result<Option<Recorded>> {
        let (job, approved) = self.task(job_id)?;
        let view = follow_task(&self.relay, job_id, wait.as_secs()).await?;
        let request = JobRequest::from_event(&job).context("the task is a job request")?;
        let coordinator = *request.workers.first().context("a directed task")?;
        let (assessment, gathered, result) = if view.state == TaskState::Answered {
            let answer = &view.answers[0];
            let mut client = RelayClient::connect(&self.relay).await?;
            let result = client.fetch(&[by_ids(&[answer.id])]).await?.pop().context("the answer's event")?;
            let (assessment, gathered) = self.accept(&mut client, &job, &result, &approved).await?;
            (assessment, gathered, Some(result))
        } else if let Some(failure) = view.feedback.iter().find(|f| f.status == "error" && request.eligible(&f.author))
        {
            let grounds = format!("explicit worker failure: {}", failure.detail);
            (Assessment::rejected(grounds), Gathered { events: vec![job.clone()], bytes: None }, None)
        } else {
            return Ok(None);
        };
        self.attest(&job, result.as_ref(), coordinator, assessment, gathered).await.map(Some)
    }

    /// Accept and judge: every link of the chain, the fetched bytes against the signed hash, the observer.
    async fn accept(
        &self,
        client: &mut RelayClient,
        job: &Event,
        result: &Event,
        approved: &str,
    ) -> Result<(Assessment, Gathered)> {
        let mut gathered = Gathered { events: vec![job.clone(), result.clone()], bytes: None };
        let Some((handoff_id, handoff_result_id)) = links_of(result) else {
            return Ok((Assessment::rejected("invalid signed evidence: the result links no handoff"), gathered));
        };
        let found = client.fetch(&[by_ids(&[handoff_id, handoff_result_id])]).await?;
        let pick = |id: Hex32| found.iter().find(|e| e.id == id).cloned();
        let (Some(handoff), Some(handoff_result)) = (pick(handoff_id), pick(handoff_result_id)) else {
            return Ok((
                Assessment::unassessed("evidence unavailable: the handoff or its result is not on the relay"),
                gathered,
            ));
        };
        gathered.events.extend([handoff.clone(), handoff_result.clone()]);
        // The answer must come from the configuration the coordinator last passed review with.
        let reviews = client
            .fetch(&[Filter { kinds: Some(vec![REVIEW]), authors: Some(vec![result.pubkey]), ..Filter::default() }])
            .await?;
        let reviewed = reviews.first().and_then(passed_config);
        if result.tag("config").is_none() || result.tag("config") != reviewed {
            let grounds = "invalid signed evidence: the answer names a configuration that has not passed review";
            return Ok((Assessment::rejected(grounds), gathered));
        }
        let chain = Chain { job, result, handoff: &handoff, handoff_result: &handoff_result };
        let artifact = match check_chain(&chain) {
            Ok(artifact) => artifact,
            Err(grounds) => return Ok((Assessment::rejected(format!("invalid signed evidence: {grounds}")), gathered)),
        };
        let bytes = match fetch(&self.policy, &artifact.url).await {
            Ok(bytes) => bytes,
            Err(error) => return Ok((Assessment::unassessed(format!("evidence unavailable: {error}")), gathered)),
        };
        let assessment = self.observe(&artifact, &bytes, approved);
        gathered.bytes = Some(bytes);
        Ok((assessment, gathered))
    }

    /// The bytes against the signed hash, then the observer, then the judge.
    fn observe(&self, artifact: &ArtifactRef, bytes: &[u8], approved: &str) -> Assessment {
        if hex::encode(Sha256::digest(bytes)) != artifact.sha256 {
            return Assessment::rejected("invalid signed evidence: the fetched bytes do not match the signed hash");
        }
        self.judge.judge(&self.observer.observe(bytes, approved))
    }

    /// Signs and publishes the label, and records the outcome with its evidence.
    async fn attest(
        &self,
        job: &Event,
        result: Option<&Event>,
        worker: PublicKey,
        assessment: Assessment,
        gathered: Gathered,
    ) -> Result<Recorded> {
        let config_hash = result.and_then(|r| r.tag("config")).unwrap_or("unknown").to_string();
        let subject =
            Subject { job, result, worker: &worker, workflow: BRIEF_SCRIPT_DELIVERY, config_hash: &config_hash };
        let verdict = verdict_event(&self.signer, &subject, &assessment, bazaar_sdk::clock::unix_now());
        let specialist = gathered.events.get(3).map(|r| r.pubkey.to_hex());
        let evidence = serde_json::to_string(&gathered.events)?;
        self.db()?.execute(
            "INSERT INTO outcomes VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)",
            params![
                job.id.to_hex(),
                verdict.id.to_hex(),
                result.map(|r| r.id.to_hex()),
                worker.to_hex(),
                specialist,
                BRIEF_SCRIPT_DELIVERY,
                config_hash,
                serde_json::to_string(&assessment)?,
                evidence,
                gathered.bytes,
                verdict.to_json()
            ],
        )?;
        let mut client = RelayClient::connect(&self.relay).await?;
        let (accepted, message) = client.publish(&verdict).await?;
        if !accepted {
            tracing::warn!(%message, "the relay refused the verdict label; it is recorded locally");
        }
        let reward = if assessment.verdict == Verdict::Accepted {
            match self.release(&job.id).await {
                Ok(reward) => reward,
                Err(error) => {
                    tracing::warn!(%error, "the bounty was not released now; `bazaar validator release` tries again");
                    None
                }
            }
        } else {
            None
        };
        Ok(Recorded {
            job_id: job.id.to_hex(),
            verdict_id: verdict.id.to_hex(),
            worker: worker.to_hex(),
            config_hash,
            assessment,
            reward,
        })
    }

    /// Releases the task's bounty on its recorded accepted verdict, once;
    /// `None` when the job carries no bounty. Safe to repeat.
    pub async fn release(&self, job_id: &Hex32) -> Result<Option<serde_json::Value>> {
        let row: Option<(String, Option<String>)> = self
            .db()?
            .query_row("SELECT bounty_id, reward FROM bounties WHERE job_id = ?1", [job_id.to_hex()], |r| {
                Ok((r.get(0)?, r.get(1)?))
            })
            .optional()?;
        let Some((bounty_id, paid)) = row else { return Ok(None) };
        if let Some(paid) = paid {
            return Ok(Some(serde_json::from_str(&paid)?));
        }
        let (verdict_json, worker): (String, String) = self
            .db()?
            .query_row("SELECT verdict_json, worker FROM outcomes WHERE job_id = ?1", [job_id.to_hex()], |r| {
                Ok((r.get(0)?, r.get(1)?))
            })
            .optional()?
            .ok_or_else(|| anyhow!("task {job_id} has no recorded outcome"))?;
        let verdict = Event::parse(&verdict_json).map_err(|e| anyhow!("{e}"))?;
        let worker = Hex32::parse(&worker).context("the recorded worker key")?;
        let registry = self.registry.as_ref().context("releasing a bounty needs --registry and a credential")?;
        let reward = bounty::release(registry, &self.relay, &bounty_id, &verdict, worker).await?;
        self.db()?.execute(
            "UPDATE bounties SET reward = ?2 WHERE job_id = ?1",
            params![job_id.to_hex(), serde_json::to_string(&reward)?],
        )?;
        Ok(Some(bazaar_sdk::wire::wire_json(&reward)))
    }

    fn task(&self, job_id: &Hex32) -> Result<(Event, String)> {
        let row: Option<(String, String)> = self
            .db()?
            .query_row("SELECT job_json, approved FROM tasks WHERE job_id = ?1", [job_id.to_hex()], |r| {
                Ok((r.get(0)?, r.get(1)?))
            })
            .optional()?;
        let (json, approved) = row.ok_or_else(|| anyhow!("task {job_id} was not posted by this validator"))?;
        Ok((Event::parse(&json).map_err(|e| anyhow!("{e}"))?, approved))
    }

    fn recorded(&self, job_id: &Hex32) -> Result<Option<Recorded>> {
        let row = self
            .db()?
            .query_row(
                "SELECT verdict_id, worker, config_hash, assessment FROM outcomes WHERE job_id = ?1",
                [job_id.to_hex()],
                |r| {
                    Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?, r.get::<_, String>(2)?, r.get::<_, String>(3)?))
                },
            )
            .optional()?;
        let reward: Option<String> = self
            .db()?
            .query_row("SELECT reward FROM bounties WHERE job_id = ?1", [job_id.to_hex()], |r| r.get(0))
            .optional()?
            .flatten();
        row.map(|(verdict_id, worker, config_hash, assessment)| {
            Ok(Recorded {
                job_id: job_id.to_hex(),
                verdict_id,
                worker,
                config_hash,
                assessment: serde_json::from_str(&assessment)?,
                reward: reward.as_deref().map(serde_json::from_str).transpose()?,
            })
        })
        .transpose()
    }
}

fn by_ids(ids: &[Hex32]) -> Filter {
    Filter { ids: Some(ids.to_vec()), ..Filter::default() }
}

impl Validator {
    /// Re-runs accept and judge from the saved signed events and fetched
    /// bytes: no relay, no network, no signature, no write.
    pub fn replay(&self, job_id: &Hex32) -> Result<Replay> {
        let (_, approved) = self.task(job_id)?;
        let (assessment, evidence, bytes): (String, String, Option<Vec<u8>>) = self
            .db()?
            .query_row(
                "SELECT assessment, evidence, artifact FROM outcomes WHERE job_id = ?1",
                [job_id.to_hex()],
                |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
            )
            .optional()?
            .ok_or_else(|| anyhow!("task {job_id} has no recorded outcome to replay"))?;
        let original: Assessment = serde_json::from_str(&assessment)?;
        let events: Vec<Event> = serde_json::from_str(&evidence)?;
        let replayed = match (events.as_slice(), bytes) {
            ([job, result, handoff, handoff_result], Some(bytes)) => {
                match check_chain(&Chain { job, result, handoff, handoff_result }) {
                    Ok(artifact) => self.observe(&artifact, &bytes, &approved),
                    Err(grounds) => Assessment::rejected(format!("invalid signed evidence: {grounds}")),
                }
            }
            // Nothing was fetched or observed: the replay can only repeat what was recorded.
            _ => original.clone(),
        };
        let agrees = replayed.verdict == original.verdict && replayed.quality == original.quality;
        Ok(Replay { job_id: job_id.to_hex(), original, replayed, agrees, signed: false })
    }

    /// Outcomes of tasks flagged as evaluation data, with their events; nothing else, ever.
    pub fn export(&self) -> Result<Vec<serde_json::Value>> {
        let db = self.db()?;
        let mut statement = db.prepare(
            "SELECT o.job_id, o.assessment, o.evidence FROM outcomes o JOIN tasks t ON t.job_id = o.job_id
             WHERE t.evaluation_data = 1 ORDER BY o.job_id",
        )?;
        let rows = statement
            .query_map([], |r| Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?, r.get::<_, String>(2)?)))?;
        rows.map(|row| {
            let (job_id, assessment, evidence) = row?;
            Ok(serde_json::json!({
                "job_id": job_id,
                "assessment": serde_json::from_str::<serde_json::Value>(&assessment)?,
                "events": serde_json::from_str::<serde_json::Value>(&evidence)?,
            }))
        })
        .collect()
    }

    /// The records folded from every outcome: grades by (workflow, configuration, rubric), and specialists' handoffs.
    pub fn records(&self) -> Result<Records> {
        let db = self.db()?;
        let mut statement = db.prepare("SELECT workflow, config_hash, assessment, specialist FROM outcomes")?;
        let rows = statement.query_map([], |r| {
            Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?, r.get::<_, String>(2)?, r.get::<_, Option<String>>(3)?))
        })?;
        let mut records = Records::default();
        for row in rows {
            let (workflow, config_hash, assessment, specialist) = row?;
            let assessment: Assessment = serde_json::from_str(&assessment)?;
            records.record(GradeKey { workflow, config_hash, rubric: self.judge.rubric() }, &assessment);
            if let Some(specialist) = specialist.as_deref().and_then(Hex32::parse) {
                records.record_handoff(&specialist, HANDOFF_CAPABILITY, &assessment);
            }
        }
        // Contest grades: their own rubric, never counted with coordination's.
        let mut statement = db.prepare("SELECT config_hash, assessment FROM contest_outcomes")?;
        let rows = statement.query_map([], |r| Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?)))?;
        for row in rows {
            let (config_hash, assessment) = row?;
            let key = GradeKey { workflow: CONTEST_ANSWER.into(), config_hash, rubric: Rubric::Contest };
            records.record(key, &serde_json::from_str(&assessment)?);
        }
        Ok(records)
    }
}

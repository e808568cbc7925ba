//! `bazaar worker`: an agent working the market with outbound connections
//! only (no public IP, no inbound port). It takes directed jobs only from
//! the keys its owner accepts (trusted validators for a worker, permitted
//! coordinators for a specialist: enrollment grants no summon permission),
//! runs one task at a time, and publishes claim, progress, usage (labelled
//! *reported*) and its result. Its answer is signed and saved before it is
//! published: after a crash the saved event is published again (the relay
//! answers `duplicate:` if it already had it), so an answer is never lost and
//! never given twice. A worker whose configuration changed since its last
//! passed review takes no directed work.

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use bazaar_relay::event::tag;
use bazaar_relay::jobs::task::{task_filters, TaskState};
use bazaar_relay::jobs::{request_tags, JobRequest, JOB_FEEDBACK, JOB_REQUEST, JOB_RESULT};
use bazaar_relay::labor::allowance::{micros, Allowance, Metered, Micros};
use bazaar_relay::labor::evidence::{artifact_of, coordinator_result_tags};
use bazaar_relay::labor::review::{passed_config, Manifest, REVIEW};
use bazaar_relay::{Event, Filter, PublicKey, Signer};
use sha2::{Digest, Sha256};
use tokio::sync::mpsc;

use super::engine::{Engine, EngineFailure};
use crate::relay_client::{Delivery, RelayClient};

/// The workflow a coordinator's handoff to its specialist follows.
pub const HANDOFF_WORKFLOW: &str = "script-delivery/v1";
/// Jobs queued for the one task at a time.
const QUEUE_MAX: usize = 256;

pub enum Role {
    /// Runs its engine and hosts the text it produces as an artifact.
    Specialist { engine: Engine, artifact_dir: PathBuf, artifact_url: String },
    /// Hands the task to one specialist and answers with the evidence chain.
    Coordinator { specialist: PublicKey, handoff_wait: Duration, fee: SpecialistFee },
}

/// What the coordinator pays its specialist for each task.
#[derive(Clone)]
pub enum SpecialistFee {
    /// Nothing, explicitly: each handoff says `["fee", "0", "sponsored"]`.
    Sponsored,
    /// What the owner authorized for the task at the registry (`sva_…` for
    /// this agent and the task), paid through the journal in the state
    /// directory **before** the handoff; no authorization, a refusal, or an
    /// uncertain or unresolved attempt declines the task without handing it
    /// off (it is taken again after a restart once the owner has acted).
    Authorized {
        /// The hiring agent's credential (with the `pay` scope).
        registry: bazaar_sdk::Client,
        /// The hiring agent's DID.
        agent: String,
    },
}

impl SpecialistFee {
    /// The handoff's `fee` tag.
    fn tag(&self, job: &Event) -> Vec<String> {
        match self {
            SpecialistFee::Sponsored => tag(&["fee", "0", "sponsored"]),
            SpecialistFee::Authorized { agent, .. } => {
                let id = bazaar_core::hire::authorization_id(&bazaar_types::MemberId(agent.clone()), &job.id.to_hex());
                tag(&["fee", "authorized", &id])
            }
        }
    }
}

/// Pays the task's authorized fee through the journal; `Err` says why the task is declined.
async fn pay_specialist(
    config: &WorkerConfig,
    job: &Event,
    registry: &bazaar_sdk::Client,
    agent: &str,
) -> Result<std::result::Result<(), String>> {
    use super::payments::{Journal, Order, PayOutcome};
    let task = job.id.to_hex();
    let id = bazaar_core::hire::authorization_id(&bazaar_types::MemberId(agent.to_string()), &task);
    let found = match registry.service_authorization(&id).await {
        Ok(found) => found,
        Err(error) if error.code() == Some("authorization_not_found") => {
            return Ok(Err(format!("no authorization from the owner for this task's specialist fee ({id})")))
        }
        Err(error) => return Ok(Err(format!("the authorization could not be read: {error}"))),
    };
    if found.state == "sponsored" {
        return Ok(Ok(()));
    }
    let (specialist, pay_to) = (found.specialist, found.pay_to);
    let order = Order {
        authorization: &id,
        task: &task,
        specialist: &specialist,
        pay_to: &pay_to,
        amount_minor: found.amount_minor,
    };
    let mut journal = Journal::open(&config.state_dir)?;
    Ok(match journal.pay(registry, &order).await? {
        PayOutcome::Paid(_) | PayOutcome::AlreadyPaid(_) => Ok(()),
        PayOutcome::Refused { code, detail } => Err(format!("the specialist's fee was refused ({code}): {detail}")),
        PayOutcome::Uncertain(_) | PayOutcome::Blocked(_) => {
            Err("the specialist's fee payment is uncertain; it is never retried by itself: the owner resolves it (`bazaar hire payments`)".into())
        }
    })
}

pub struct WorkerConfig {
    pub relay: String,
    pub signer: Arc<Signer>,
    /// Askers whose directed jobs this worker takes.
    pub accept_from: HashSet<PublicKey>,
    pub manifest: Manifest,
    pub role: Role,
    /// Where answers are saved before they are published.
    pub state_dir: PathBuf,
    /// The daily model-usage allowance a specialist's engine runs under (none: unmetered by Bazaar).
    pub allowance: Option<AllowanceConfig>,
    /// Where this worker's priority leases are read (none: first come, first served).
    pub leases: Option<LeaseSource>,
}

/// How long a worker that sells leases waits for more queued jobs before
/// choosing the next one (jobs arrive one relay frame at a time).
pub const LEASE_GATHER: Duration = Duration::from_millis(100);

/// The registry holding the leases bought at this worker's queue.
#[derive(Clone)]
pub struct LeaseSource {
    /// A credential of the worker's agent (or its owner), to read its leases.
    pub registry: bazaar_sdk::Client,
    /// The worker's agent at the registry (DID or handle).
    pub agent: String,
}

impl LeaseSource {
    /// The task identities holding an **active** lease here now: receipted
    /// and within their period. A lease without a receipt is a recovery case
    /// and gives no priority; a registry that cannot be read gives none either.
    pub async fn priority(&self) -> HashSet<PublicKey> {
        let path = format!("/v1/leases?party={}", self.agent);
        let Ok(page) = self.registry.call::<serde_json::Value>(reqwest::Method::GET, &path, None, None).await else {
            tracing::warn!("the registry's leases could not be read; no priority this turn");
            return HashSet::new();
        };
        let leases = page.body["leases"].as_array().cloned().unwrap_or_default();
        leases
            .iter()
            .filter(|l| l["status"] == "active")
            .filter_map(|l| l["identity"].as_str().and_then(bazaar_relay::Hex32::parse))
            .collect()
    }
}

/// The next job to work: the first from an identity holding an active lease,
/// else the first to arrive. Priority orders the queue; it promises nothing more.
pub fn next_job(pending: &mut Vec<Event>, priority: &HashSet<PublicKey>) -> Option<Event> {
    let at = pending.iter().position(|job| priority.contains(&job.pubkey)).unwrap_or(0);
    (!pending.is_empty()).then(|| pending.remove(at))
}

/// A daily allowance in the engine's own asset.
#[derive(Debug, Clone)]
pub struct AllowanceConfig {
    pub asset: String,
    pub daily: Micros,
}

/// The allowance's state file in the worker's state directory.
pub const ALLOWANCE_FILE: &str = "allowance.json";

/// The allowance and the file it is kept in, saved after every change.
pub struct Meter {
    path: PathBuf,
    pub state: Allowance,
}

impl Meter {
    /// Loads the allowance (or starts one), applies the owner's current figures,
    /// and turns a task that was running when the worker stopped into a pending attempt.
    pub fn open(state_dir: &Path, config: &AllowanceConfig) -> Result<Meter> {
        let path = state_dir.join(ALLOWANCE_FILE);
        let mut state = match std::fs::read_to_string(&path) {
            Ok(text) => serde_json::from_str(&text).with_context(|| format!("reading {}", path.display()))?,
            Err(_) => Allowance::new(&config.asset, config.daily, now()),
        };
        state.asset.clone_from(&config.asset);
        state.daily = config.daily;
        state.interrupted();
        let meter = Meter { path, state };
        meter.save()?;
        Ok(meter)
    }

    /// Opens the file as it is, for the owner's view and reconciliation (no restart semantics).
    pub fn inspect(state_dir: &Path) -> Result<Meter> {
        let path = state_dir.join(ALLOWANCE_FILE);
        let text = std::fs::read_to_string(&path).with_context(|| format!("reading {}", path.display()))?;
        Ok(Meter { state: serde_json::from_str(&text)?, path })
    }

    pub fn save(&self) -> Result<()> {
        write_durably(&self.path, serde_json::to_string(&self.state)?.as_bytes())
    }
}

fn now() -> u64 {
    bazaar_sdk::clock::unix_now()
}

/// Runs until `stop` resolves (or the relay connection fails).
pub async fn run(config: WorkerConfig, stop: impl std::future::Future<Output = ()>) -> Result<()> {
    for dir in ["answered", "failed", "handoffs"] {
        std::fs::create_dir_all(config.state_dir.join(dir))?;
    }
    let mut publisher = RelayClient::connect(&config.relay).await?;
    check_review(&mut publisher, &config).await?;
    let mut meter = config.allowance.as_ref().map(|a| Meter::open(&config.state_dir, a)).transpose()?;
    let (jobs, mut queue) = mpsc::channel(QUEUE_MAX);
    let mut listener = tokio::spawn(listen(config.relay.clone(), config.signer.public_key(), jobs));
    tokio::pin!(stop);
    let mut handled = HashSet::new();
    let mut pending: Vec<Event> = Vec::new();
    let outcome = loop {
        if pending.is_empty() {
            let job = tokio::select! {
                _ = &mut stop => break Ok(()),
                job = queue.recv() => match job {
                    Some(job) => job,
                    None => break (&mut listener).await.context("the job listener")?,
                },
            };
            pending.push(job);
        }
        // Everything already waiting joins the queue, so a leased identity's job
        // can go first; a worker that sells leases looks a moment longer.
        if config.leases.is_some() {
            while let Ok(Some(job)) = tokio::time::timeout(LEASE_GATHER, queue.recv()).await {
                pending.push(job);
            }
        }
        while let Ok(job) = queue.try_recv() {
            pending.push(job);
        }
        let priority = match &config.leases {
            Some(leases) if pending.len() > 1 => leases.priority().await,
            _ => HashSet::new(),
        };
        let Some(job) = next_job(&mut pending, &priority) else { continue };
        if handled.insert(job.id) {
            if let Err(error) = work(&mut publisher, &config, &job, meter.as_mut()).await {
                tracing::warn!(%error, job = %job.id, "the task failed");
            }
        }
    };
    listener.abort();
    outcome
}

/// The worker's last review on the relay must have passed its current configuration.
async fn check_review(client: &mut RelayClient, config: &WorkerConfig) -> Result<()> {
    let filter =
        Filter { kinds: Some(vec![REVIEW]), authors: Some(vec![config.signer.public_key()]), ..Filter::default() };
    let reviews = client.fetch(&[filter]).await?;
    let hash = config.manifest.config_hash();
    match reviews.first().and_then(passed_config) {
        Some(passed) if passed == hash => Ok(()),
        Some(_) => bail!("this worker's configuration changed since its last passed review; run `bazaar worker review` before taking directed work"),
        None => bail!("this worker has no passed review; run `bazaar worker review` (sending it to the market) first"),
    }
}

/// Follows jobs naming this worker (stored, then live) into the queue.
async fn listen(relay: String, me: PublicKey, jobs: mpsc::Sender<Event>) -> Result<()> {
    let mut client = RelayClient::connect(&relay).await?;
    let filter = Filter { kinds: Some(vec![JOB_REQUEST]), tags: vec![('p', vec![me.to_hex()])], ..Filter::default() };
    client.subscribe("jobs", &[filter]).await?;
    loop {
        match client.next("jobs", Duration::from_secs(3_600)).await? {
            Some(Delivery::Event(job)) => {
                if jobs.send(job).await.is_err() {
                    return Ok(());
                }
            }
            Some(Delivery::Closed(reason)) => bail!("the relay closed the job subscription: {reason}"),
            Some(Delivery::EndOfStored) | None => {}
        }
    }
}

fn saved(dir: &Path, kind: &str, job: &Event) -> PathBuf {
    dir.join(kind).join(format!("{}.json", job.id))
}

/// Writes `event` to `path` durably.
fn save(path: &Path, event: &Event) -> Result<()> {
    write_durably(path, event.to_json().as_bytes())
}

/// Writes `bytes` to `path` durably: a temp file, fsynced, renamed over it,
/// and the directory fsynced so the rename itself survives a power loss.
pub(crate) fn write_durably(path: &Path, bytes: &[u8]) -> Result<()> {
    use std::io::Write;
    let temp = path.with_extension("tmp");
    let mut file = std::fs::File::create(&temp)?;
    file.write_all(bytes)?;
    file.sync_all()?;
    std::fs::rename(&temp, path)?;
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::File::open(dir)?.sync_all()?;
    }
    Ok(())
}

fn load(path: &Path) -> Option<Event> {
    Event::parse(&std::fs::read_to_string(path).ok()?).ok()
}

async fn publish(client: &mut RelayClient, event: &Event) -> Result<()> {
    let (accepted, message) = client.publish(event).await?;
    if !accepted {
        bail!("the relay refused event {}: {message}", event.id);
    }
    Ok(())
}

fn feedback(config: &WorkerConfig, job: &Event, status: &str, detail: &str, extra: Vec<Vec<String>>) -> Event {
    let mut tags =
        vec![tag(&["status", status, detail]), tag(&["e", &job.id.to_hex()]), tag(&["p", &job.pubkey.to_hex()])];
    tags.push(tag(&["config", &config.manifest.config_hash()]));
    tags.extend(extra);
    config.signer.sign(now(), JOB_FEEDBACK, tags, "")
}

/// One task: skip it, answer it again from what was saved, or work it.
async fn work(client: &mut RelayClient, config: &WorkerConfig, job: &Event, meter: Option<&mut Meter>) -> Result<()> {
    let Some(request) = JobRequest::from_event(job) else { return Ok(()) };
    if !config.accept_from.contains(&request.asker) {
        tracing::info!(job = %job.id, asker = %request.asker, "not from an accepted asker; ignored");
        return Ok(());
    }
    if let Some(answer) = load(&saved(&config.state_dir, "answered", job)) {
        // Saved before a crash or already sent: sending it again is idempotent.
        return publish(client, &answer).await;
    }
    if saved(&config.state_dir, "failed", job).exists() || request.expires_at.is_some_and(|at| at <= now()) {
        return Ok(());
    }
    let mut meter = meter;
    if let (Some(meter), Role::Specialist { .. }) = (meter.as_deref_mut(), &config.role) {
        // The reservation is made before the claim and kept by the run; a
        // crash before the model starts drops it at the next start.
        if let Err(refused) = meter.state.reserve(&job.id.to_hex(), now()) {
            // Not taken: nothing is saved as failed, so it can be taken once the allowance allows.
            return publish(client, &feedback(config, job, "error", &format!("declined: {refused}"), vec![])).await;
        }
        meter.save()?;
    }
    if let Role::Coordinator { fee: SpecialistFee::Authorized { registry, agent }, .. } = &config.role {
        // A handoff already saved was paid for before it was saved.
        if !saved(&config.state_dir, "handoffs", job).exists() {
            if let Err(declined) = pay_specialist(config, job, registry, agent).await? {
                // Not taken: nothing is saved as failed, so it can be taken once the owner has acted.
                return publish(client, &feedback(config, job, "error", &format!("declined: {declined}"), vec![]))
                    .await;
            }
        }
    }
    let answer = async {
        publish(client, &feedback(config, job, "processing", "claim", vec![])).await?;
        match &config.role {
            Role::Specialist { engine, artifact_dir, artifact_url } => {
                let place = (artifact_dir, artifact_url);
                specialist(client, config, job, &request, (engine, meter.as_deref_mut()), place).await
            }
            Role::Coordinator { specialist, handoff_wait, fee } => {
                coordinator(client, config, job, &request, (*specialist, fee), *handoff_wait).await
            }
        }
    }
    .await;
    if let Some(meter) = meter {
        // A task that ended (by error) before its model started releases its reservation at once.
        meter.state.fail(&job.id.to_hex());
        meter.save()?;
    }
    match answer? {
        Ok(result) => {
            save(&saved(&config.state_dir, "answered", job), &result)?;
            publish(client, &result).await
        }
        Err(failure) => {
            let failed = feedback(config, job, "error", &failure, vec![]);
            save(&saved(&config.state_dir, "failed", job), &failed)?;
            publish(client, &failed).await
        }
    }
}

/// Runs the engine under the allowance; the result (or the explicit failure's reason).
async fn specialist(
    client: &mut RelayClient,
    config: &WorkerConfig,
    job: &Event,
    request: &JobRequest,
    (engine, meter): (&Engine, Option<&mut Meter>),
    (artifact_dir, artifact_url): (&PathBuf, &String),
) -> Result<std::result::Result<Event, String>> {
    publish(client, &feedback(config, job, "processing", "running", vec![])).await?;
    let run =
        metered_run(engine, meter, &job.id.to_hex(), request.inputs.first().map(String::as_str).unwrap_or_default())
            .await?;
    let run = match run {
        Ok(run) => run,
        Err((failure, usage)) => {
            if let Some(usage) = usage {
                let reported = vec![tag(&["usage", &usage.amount, &usage.asset, "reported"])];
                publish(client, &feedback(config, job, "processing", "usage", reported)).await?;
            }
            return Ok(Err(failure));
        }
    };
    if let Some(usage) = &run.usage {
        let reported = vec![tag(&["usage", &usage.amount, &usage.asset, "reported"])];
        publish(client, &feedback(config, job, "processing", "usage", reported)).await?;
    }
    let sha = hex::encode(Sha256::digest(run.output.as_bytes()));
    std::fs::create_dir_all(artifact_dir)?;
    std::fs::write(artifact_dir.join(format!("{sha}.txt")), run.output.as_bytes())?;
    let url = format!("{}/{sha}.txt", artifact_url.trim_end_matches('/'));
    let tags = vec![
        tag(&["e", &job.id.to_hex()]),
        tag(&["p", &job.pubkey.to_hex()]),
        tag(&["artifact", &url, &sha]),
        tag(&["config", &config.manifest.config_hash()]),
    ];
    Ok(Ok(config.signer.sign(now(), JOB_RESULT, tags, format!("delivered {} bytes", run.output.len()))))
}

/// The engine run with its reservation: usage charged as it arrives (the
/// allowance saved each time), the engine stopped at the allowance, the
/// reservation settled by how the run ended. The failure's reason and the
/// last usage reported, when there is no answer.
async fn metered_run(
    engine: &Engine,
    meter: Option<&mut Meter>,
    task: &str,
    input: &str,
) -> Result<std::result::Result<super::engine::EngineRun, (String, Option<super::engine::Usage>)>> {
    let Some(meter) = meter else {
        return Ok(engine.run(input, &mut |_| true).await.map_err(|failure| (describe(&failure), usage_of(&failure))));
    };
    // Reserved by `work` before the claim.
    meter.state.model_started(task);
    meter.save()?;
    let outcome = engine
        .run(input, &mut |usage| {
            let Some(cumulative) = micros(&usage.amount) else { return true };
            let metered = meter.state.usage(task, cumulative, now());
            // A usage the worker cannot keep is a reason to stop, not to guess.
            meter.save().is_ok() && metered == Metered::Continue
        })
        .await;
    match &outcome {
        Err(EngineFailure::NotStarted(_)) => meter.state.fail(task),
        _ => meter.state.complete(task),
    }
    meter.save()?;
    Ok(outcome.map_err(|failure| (describe(&failure), usage_of(&failure))))
}

fn describe(failure: &EngineFailure) -> String {
    match failure {
        EngineFailure::NotStarted(why) | EngineFailure::Failed(why) => why.clone(),
        EngineFailure::Stopped(usage) => format!(
            "cancelled at the daily model-usage allowance (reported so far: {}; a call in flight may have overshot)",
            usage.as_ref().map_or("nothing".to_string(), |u| format!("{} {}", u.amount, u.asset))
        ),
    }
}

fn usage_of(failure: &EngineFailure) -> Option<super::engine::Usage> {
    match failure {
        EngineFailure::Stopped(usage) => usage.clone(),
        _ => None,
    }
}

/// Hands the task to the specialist (one handoff, saved so a restart reuses
/// it) and answers with the chain once the specialist delivers.
async fn coordinator(
    client: &mut RelayClient,
    config: &WorkerConfig,
    job: &Event,
    request: &JobRequest,
    (specialist, fee): (PublicKey, &SpecialistFee),
    wait: Duration,
) -> Result<std::result::Result<Event, String>> {
    let path = saved(&config.state_dir, "handoffs", job);
    let handoff = match load(&path) {
        Some(handoff) => handoff,
        None => {
            let input = request.inputs.first().map(String::as_str).unwrap_or_default();
            let mut tags = request_tags(HANDOFF_WORKFLOW, false, &[specialist], input);
            tags.push(tag(&["e", &job.id.to_hex(), "", "parent"]));
            tags.push(fee.tag(job));
            let handoff = config.signer.sign(now(), JOB_REQUEST, tags, "");
            save(&path, &handoff)?;
            handoff
        }
    };
    publish(client, &handoff).await?;
    publish(client, &feedback(config, job, "processing", "handed to a specialist", vec![])).await?;
    let delivered = crate::relay_client::follow_task(&config.relay, &handoff.id, wait.as_secs()).await?;
    if delivered.state != TaskState::Answered {
        return Ok(Err(format!("the specialist did not deliver within {} s", wait.as_secs())));
    }
    let answer = delivered.answers.first().map(|a| a.id).context("an answer")?;
    let mut events = client.fetch(&task_filters(&handoff.id)).await?;
    events.retain(|e| e.id == answer);
    let Some(handoff_result) = events.pop().filter(|e| artifact_of(e).is_some()) else {
        return Ok(Err("the specialist's result carries no artifact".into()));
    };
    let mut tags = coordinator_result_tags(job, &handoff, &handoff_result);
    tags.push(tag(&["config", &config.manifest.config_hash()]));
    Ok(Ok(config.signer.sign(now(), JOB_RESULT, tags, "delivered through a specialist")))
}

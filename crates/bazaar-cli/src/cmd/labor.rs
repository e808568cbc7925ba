//! The labor market's roles on the command line: `bazaar worker enroll|review|run`
//! and `bazaar validator post|assess|replay|export|records`. The runtimes are
//! `bazaar_agents::labor`; this module parses arguments and prints answers.

use super::common::print_pretty;
use super::jobs::{read_signer, RelayArg};
use anyhow::{anyhow, bail, Context, Result};
use bazaar_agents::labor::bounty::{self, PostReward};
use bazaar_agents::labor::contest::CommandJudge;
use bazaar_agents::labor::engine::Engine;
use bazaar_agents::labor::fetch::{FetchPolicy, FixedResolver};
use bazaar_agents::labor::identity;
use bazaar_agents::labor::validator::Validator;
use bazaar_agents::labor::worker::{self, AllowanceConfig, Meter, Role, WorkerConfig};
use bazaar_agents::relay_client::RelayClient;
use bazaar_cli::runtime::read_key;
use bazaar_relay::labor::allowance::{decimal, micros};
use bazaar_relay::labor::enrollment::ENROLLMENT;
use bazaar_relay::labor::review::{preflight, review_event, Manifest, REVIEW};
use bazaar_relay::{Hex32, Signer};
use bazaar_sdk::clock::unix_now;
use clap::{Args, Subcommand};
use serde_json::json;
use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

#[derive(Subcommand)]
pub enum Command {
    /// Work the labor market: enroll, be reviewed, take directed jobs.
    #[command(subcommand)]
    Worker(WorkerCmd),
    /// Post briefs and judge their delivery: post → collect → accept → judge → attest.
    #[command(subcommand)]
    Validator(ValidatorCmd),
}

#[derive(Subcommand)]
pub enum WorkerCmd {
    /// Bind this worker's Nostr key to its agent's DID (a record signed by both keys).
    Enroll {
        #[command(flatten)]
        relay: RelayArg,
        /// The worker's Nostr key (from `bazaar jobs key`).
        #[arg(long)]
        key_file: PathBuf,
        /// The agent's Bazaar identity key (from `bazaar keygen`).
        #[arg(long)]
        identity_key: PathBuf,
    },
    /// Send the worker to the market: a preflight of its manifest (no model call), published as its review.
    Review {
        #[command(flatten)]
        relay: RelayArg,
        /// The worker's Nostr key file (from `bazaar jobs key`); it signs the review.
        #[arg(long)]
        key_file: PathBuf,
        /// The worker's manifest (JSON: runtime, model, tools, credentials, reward_destination, reports_usage).
        #[arg(long)]
        manifest: PathBuf,
        /// The registry the worker's agent is enrolled at, to check that its owner holds the reward destination.
        #[arg(long, env = "BAZAAR_REGISTRY")]
        registry: Option<String>,
        /// A credential of the worker's owner (or agent) at that registry.
        #[arg(long, env = "BAZAAR_CREDENTIAL", hide_env_values = true)]
        credential: Option<String>,
    },
    /// Take directed jobs from accepted askers, one at a time, until stopped.
    Run(Box<RunArgs>),
    /// The worker's earnings: rewards the registry confirmed, and (never summed) payments its results claim.
    Earnings {
        #[command(flatten)]
        relay: RelayArg,
        /// The worker's Nostr key (its results are read from the relay).
        #[arg(long)]
        key_file: PathBuf,
        /// The worker's agent at the registry (DID or handle).
        #[arg(long)]
        agent: String,
        #[command(flatten)]
        remote: super::common::Remote,
    },
    /// The owner's view of the model-usage allowance, and reconciling an attempt whose cost is unknown.
    Allowance {
        /// The worker's state directory.
        #[arg(long)]
        state_dir: PathBuf,
        #[command(subcommand)]
        action: Option<AllowanceCmd>,
    },
}

#[derive(Subcommand)]
pub enum AllowanceCmd {
    /// Today's allowance, what is spent, the running reservation and any pending attempt (the default).
    Show,
    /// Record what a pending attempt really cost beyond what the engine reported (stop the worker first).
    Reconcile {
        /// A decimal in the allowance's asset.
        #[arg(long)]
        cost: String,
    },
    /// Clear a pending attempt whose cost is recorded, so new work may start.
    Clear,
}

#[derive(Args)]
pub struct RunArgs {
    #[command(flatten)]
    relay: RelayArg,
    /// The worker's Nostr key file (from `bazaar jobs key`); it signs the answers.
    #[arg(long)]
    key_file: PathBuf,
    /// The worker's manifest (JSON, as for `bazaar worker review`); the configuration it works under.
    #[arg(long)]
    manifest: PathBuf,
    /// An asker whose directed jobs this worker takes (a trusted validator or a permitted coordinator); repeat.
    #[arg(long, required = true)]
    accept_from: Vec<String>,
    /// Where answers are saved before they are published.
    #[arg(long)]
    state_dir: PathBuf,
    /// As a specialist: the engine command (input on stdin, answer on stdout, `usage: <n> <asset>` on stderr).
    #[arg(long, conflicts_with = "coordinator_for")]
    engine: Option<String>,
    /// As a specialist: the directory answers are written to (as `<sha256>.txt`), served at --artifact-url.
    #[arg(long, requires = "engine")]
    artifact_dir: Option<PathBuf>,
    /// As a specialist: the base URL --artifact-dir is served under; answers link `<url>/<sha256>.txt`.
    #[arg(long, requires = "engine")]
    artifact_url: Option<String>,
    /// As a coordinator: the specialist every task is handed to.
    #[arg(long)]
    coordinator_for: Option<String>,
    /// As a coordinator: how long to wait for the specialist, in seconds.
    #[arg(long, default_value_t = 600)]
    handoff_wait_s: u64,
    /// As a specialist: the daily model-usage allowance, a decimal in the engine's asset (e.g. 5.00).
    #[arg(long, requires = "engine")]
    daily_allowance: Option<String>,
    /// The allowance's asset, as the engine reports it.
    #[arg(long, default_value = "USD")]
    allowance_asset: String,
    /// This worker's agent at --registry (its DID), for --leases and --specialist-fee authorized.
    #[arg(long)]
    agent: Option<String>,
    /// Serve task identities holding an active priority lease at --agent first.
    #[arg(long, requires = "agent")]
    leases: bool,
    /// As a coordinator: `sponsored` (the specialist works without a fee, said on each handoff) or
    /// `authorized` (pay what the owner authorized for each task, before the handoff; needs --agent).
    #[arg(long, default_value = "sponsored")]
    specialist_fee: String,
    #[command(flatten)]
    remote: super::common::Remote,
}

#[derive(Args)]
pub struct ValidatorArgs {
    /// The validator's Nostr key (it signs briefs and verdicts).
    #[arg(long)]
    key_file: PathBuf,
    /// The validator's outcome records (SQLite).
    #[arg(long, default_value = "./validator.db")]
    db: PathBuf,
    /// A host artifacts may be fetched from (exact name; HTTPS); repeat.
    #[arg(long)]
    allow_host: Vec<String>,
    /// A host allowed to resolve to a private or loopback address, over HTTP too (tests, closed networks only).
    #[arg(long)]
    allow_private_host: Vec<String>,
    /// A fixed DNS answer, `host=address` (tests); repeat.
    #[arg(long)]
    resolve: Vec<String>,
    /// Where the validator's bounties are funded and released, with the posting agent's credential.
    #[command(flatten)]
    remote: super::common::Remote,
}

#[derive(Subcommand)]
pub enum ValidatorCmd {
    /// Post a brief (the approved script) to a reviewed coordinator.
    Post {
        #[command(flatten)]
        relay: RelayArg,
        #[command(flatten)]
        validator: ValidatorArgs,
        /// The coordinator's Nostr public key (64 hex); its latest review on the relay must have passed.
        #[arg(long)]
        coordinator: String,
        /// Allow this job to be exported for evaluation.
        #[arg(long)]
        evaluation_data: bool,
        /// The job's reward: `none`, or a bounty in minor units funded at --registry before the job is published.
        #[arg(long, default_value = "none")]
        reward: String,
        /// The approved script.
        script: String,
    },
    /// Collect, accept, judge and attest a task (waiting up to `--wait` seconds for its answer).
    Assess {
        #[command(flatten)]
        relay: RelayArg,
        #[command(flatten)]
        validator: ValidatorArgs,
        /// The task's id (64 hex), as `bazaar validator post` prints it; this validator's --db must hold it.
        #[arg(long)]
        task_id: String,
        /// Seconds to wait for the task's answer (0: look once).
        #[arg(long, default_value_t = 60)]
        wait: u64,
        /// Assess again a task whose recorded outcome is unassessed (accepted and rejected are final).
        #[arg(long)]
        again: bool,
    },
    /// Release the bounty of an accepted task (done by `assess`; this retries one that failed). Safe to repeat.
    Release {
        #[command(flatten)]
        relay: RelayArg,
        #[command(flatten)]
        validator: ValidatorArgs,
        /// The task's id (64 hex), as `bazaar validator post` prints it; this validator's --db must hold it.
        #[arg(long)]
        task_id: String,
    },
    /// A contest: one prompt to several named workers, every pair of answers judged, Bradley–Terry ratings.
    Contest {
        #[command(flatten)]
        relay: RelayArg,
        #[command(flatten)]
        validator: ValidatorArgs,
        /// A contestant's public key; at least two.
        #[arg(long, required = true)]
        worker: Vec<String>,
        /// The pairwise judge: a command given PROMPT, ANSWER_A and ANSWER_B that prints a, b or tie.
        #[arg(long)]
        judge: String,
        /// Seconds to wait for every contestant's answer.
        #[arg(long, default_value_t = 60)]
        wait: u64,
        /// The prompt every contestant answers.
        prompt: String,
    },
    /// Replay a recorded assessment from its saved signed events: local, unsigned, no network, no write.
    Replay {
        #[command(flatten)]
        validator: ValidatorArgs,
        /// The task's id (64 hex), as `bazaar validator post` prints it; this validator's --db must hold it.
        #[arg(long)]
        task_id: String,
    },
    /// Outcomes of jobs flagged as evaluation data (nothing else), as JSON lines.
    Export {
        #[command(flatten)]
        validator: ValidatorArgs,
    },
    /// Grades by (workflow, configuration, rubric) and specialists' handoffs.
    Records {
        #[command(flatten)]
        validator: ValidatorArgs,
    },
}

pub async fn run(command: Command, json_output: bool) -> Result<i32> {
    match command {
        Command::Worker(command) => worker_cmd(command, json_output).await,
        Command::Validator(command) => validator_cmd(command, json_output).await,
    }
}

fn manifest(path: &Path) -> Result<Manifest> {
    let text = std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    serde_json::from_str(&text).with_context(|| format!("{} is not a worker manifest", path.display()))
}

fn key(text: &str, what: &str) -> Result<Hex32> {
    Hex32::parse(text).ok_or_else(|| anyhow!("{what} {text}: expected 64 lowercase hex characters"))
}

/// Whether `tool` is an executable on PATH (the review's probe; no model call).
fn on_path(tool: &str) -> bool {
    std::env::var_os("PATH").is_some_and(|path| std::env::split_paths(&path).any(|dir| dir.join(tool).is_file()))
}

async fn worker_cmd(command: WorkerCmd, json_output: bool) -> Result<i32> {
    match command {
        WorkerCmd::Enroll { relay, key_file, identity_key } => {
            let signer = read_signer(&key_file)?;
            let at = after_latest(&relay.relay, ENROLLMENT, &signer).await?;
            let record = identity::enroll(&signer, &read_key(&identity_key)?, at);
            let binding = identity::check(&record).map_err(|e| anyhow!("{e}"))?;
            publish(&relay.relay, &record).await?;
            print_pretty(
                json_output,
                &json!({"nostr": binding.nostr.to_hex(), "did": binding.did, "record": record.id.to_hex()}),
            );
            Ok(0)
        }
        WorkerCmd::Review { relay, key_file, manifest: path, registry, credential } => {
            let (signer, manifest) = (read_signer(&key_file)?, manifest(&path)?);
            let mut found = preflight(&manifest, &on_path, &|name| std::env::var_os(name).is_some());
            let at_registry = registry.zip(credential);
            if let Some(problem) = reward_problem(&relay.relay, &signer, &manifest, at_registry).await? {
                found.problems.push(problem);
            }
            let at = after_latest(&relay.relay, REVIEW, &signer).await?;
            let record = review_event(&signer, &manifest, &found, at);
            publish(&relay.relay, &record).await?;
            let admitted = found.admitted();
            print_pretty(
                json_output,
                &json!({"admitted": admitted, "config_hash": manifest.config_hash(), "preflight": found}),
            );
            Ok(if admitted { 0 } else { 1 })
        }
        WorkerCmd::Earnings { relay, key_file, agent, remote } => {
            let worker = read_signer(&key_file)?.public_key();
            let record = bounty::earnings(&remote.client()?, &agent, &relay.relay, worker).await?;
            print_pretty(json_output, &record);
            Ok(0)
        }
        WorkerCmd::Allowance { state_dir, action } => {
            print_pretty(json_output, &allowance(&state_dir, action.unwrap_or(AllowanceCmd::Show))?);
            Ok(0)
        }
        WorkerCmd::Run(args) => {
            let config = worker_config(*args)?;
            worker::run(config, async {
                let _ = tokio::signal::ctrl_c().await;
            })
            .await?;
            Ok(0)
        }
    }
}

/// The owner's view, or one reconciling act, on the worker's allowance file.
pub(super) fn allowance(state_dir: &Path, action: AllowanceCmd) -> Result<serde_json::Value> {
    let mut meter = Meter::inspect(state_dir)?;
    let now = unix_now();
    match action {
        AllowanceCmd::Show => {}
        AllowanceCmd::Reconcile { cost } => {
            let cost = micros(&cost).with_context(|| format!("--cost {cost}: a decimal with at most 6 places"))?;
            meter.state.reconcile(cost, now).map_err(|e| anyhow!("{e}"))?;
            meter.save()?;
        }
        AllowanceCmd::Clear => {
            meter.state.clear().map_err(|e| anyhow!("{e}"))?;
            meter.save()?;
        }
    }
    let state = &mut meter.state;
    let remaining = state.remaining(now);
    Ok(json!({
        "asset": state.asset,
        "daily": decimal(state.daily),
        "spent_today": decimal(state.spent),
        "remaining_today": decimal(remaining),
        "running": state.active.as_ref().map(|r| json!({"task": r.task, "reserved": decimal(r.reserved), "used": decimal(r.used)})),
        "pending": state.pending.as_ref().map(|p| json!({
            "task": p.task, "why": p.why, "reserved": decimal(p.reserved), "reported_before_it_stopped": decimal(p.used_known),
            "missing_cost": p.missing_cost.map_or("unknown".to_string(), decimal),
        })),
        "note": "a meter of what the engine reports, in its own asset: not ledger units, not an invoice",
    }))
}

fn worker_config(args: RunArgs) -> Result<WorkerConfig> {
    let fee = match (args.specialist_fee.as_str(), &args.agent) {
        ("sponsored", _) => worker::SpecialistFee::Sponsored,
        ("authorized", Some(agent)) => {
            worker::SpecialistFee::Authorized { registry: args.remote.client()?, agent: agent.clone() }
        }
        ("authorized", None) => {
            bail!("--specialist-fee authorized needs --agent (the coordinator's DID at --registry)")
        }
        (other, _) => bail!("--specialist-fee is `sponsored` or `authorized`, not {other:?}"),
    };
    let role = match (args.engine, args.coordinator_for) {
        (Some(command), None) => Role::Specialist {
            engine: Engine { command },
            artifact_dir: args.artifact_dir.context("--artifact-dir is needed with --engine")?,
            artifact_url: args.artifact_url.context("--artifact-url is needed with --engine")?,
        },
        (None, Some(specialist)) => Role::Coordinator {
            specialist: key(&specialist, "--coordinator-for")?,
            handoff_wait: Duration::from_secs(args.handoff_wait_s),
            fee,
        },
        _ => bail!("give --engine (a specialist) or --coordinator-for (a coordinator)"),
    };
    let accept_from = args.accept_from.iter().map(|k| key(k, "--accept-from")).collect::<Result<HashSet<_>>>()?;
    let allowance = args
        .daily_allowance
        .map(|daily| {
            let daily = micros(&daily)
                .with_context(|| format!("--daily-allowance {daily}: a decimal with at most 6 places"))?;
            Ok::<_, anyhow::Error>(AllowanceConfig { asset: args.allowance_asset.clone(), daily })
        })
        .transpose()?;
    let leases = match (&args.agent, args.leases) {
        (Some(agent), true) => Some(worker::LeaseSource { registry: args.remote.client()?, agent: agent.clone() }),
        _ => None,
    };
    Ok(WorkerConfig {
        allowance,
        leases,
        relay: args.relay.relay,
        signer: Arc::new(read_signer(&args.key_file)?),
        accept_from,
        manifest: manifest(&args.manifest)?,
        role,
        state_dir: args.state_dir,
    })
}

/// Why the reward destination cannot be admitted, if it cannot: it must be an
/// account the worker's owner holds — the owner itself or one of its agents —
/// as the registry the worker is enrolled at says.
async fn reward_problem(
    relay: &str,
    worker: &Signer,
    manifest: &Manifest,
    registry: Option<(String, String)>,
) -> Result<Option<String>> {
    let Some((registry, credential)) = registry else {
        return Ok(Some("the reward destination was not checked: give --registry and a credential (BAZAAR_REGISTRY, BAZAAR_CREDENTIAL)".into()));
    };
    let filter = bazaar_relay::Filter {
        kinds: Some(vec![ENROLLMENT]),
        authors: Some(vec![worker.public_key()]),
        ..Default::default()
    };
    let enrolled = RelayClient::connect(relay).await?.fetch(&[filter]).await?;
    let Some(binding) = enrolled.first().and_then(|record| identity::check(record).ok()) else {
        return Ok(Some("the worker is not enrolled: run `bazaar worker enroll` first".into()));
    };
    let client = bazaar_sdk::Client::new(&registry, Some(credential));
    let agent =
        client.member(&binding.did).await.with_context(|| format!("looking up {} at {registry}", binding.did))?;
    let owner = agent.owner.unwrap_or_default();
    let destination = match client.member(&manifest.reward_destination).await {
        Ok(member) => member,
        Err(_) => {
            return Ok(Some(format!(
                "the reward destination {} is not a member of {registry}",
                manifest.reward_destination
            )))
        }
    };
    let holds = !owner.is_empty() && (destination.id == owner || destination.owner.as_deref() == Some(owner.as_str()));
    Ok((!holds).then(|| {
        format!("the reward destination {} is not an account the worker's owner holds", manifest.reward_destination)
    }))
}

/// Now, or just after this worker's latest record of `kind` if that is not
/// older: a replaceable record must be newer than the one it replaces, and
/// two in one second would otherwise tie.
async fn after_latest(relay: &str, kind: u16, signer: &Signer) -> Result<u64> {
    let filter = bazaar_relay::Filter {
        kinds: Some(vec![kind]),
        authors: Some(vec![signer.public_key()]),
        ..Default::default()
    };
    let latest = RelayClient::connect(relay).await?.fetch(&[filter]).await?.first().map(|e| e.created_at);
    Ok(latest.map_or(unix_now(), |at| unix_now().max(at + 1)))
}

async fn publish(relay: &str, event: &bazaar_relay::Event) -> Result<()> {
    let (accepted, message) = RelayClient::connect(relay).await?.publish(event).await?;
    if !accepted {
        bail!("the relay refused the record: {message}");
    }
    Ok(())
}

fn open_validator(relay: &str, args: &ValidatorArgs, signs: bool) -> Result<Validator> {
    let signer = if signs { read_signer(&args.key_file)? } else { Signer::generate(&bazaar_server::OsEntropy) };
    let mut policy = FetchPolicy::new(args.allow_host.iter().cloned());
    policy.private_hosts = args.allow_private_host.iter().cloned().collect();
    if !args.resolve.is_empty() {
        let mut fixed = FixedResolver::default();
        for pair in &args.resolve {
            let (host, address) = pair.split_once('=').context("--resolve takes host=address")?;
            fixed.0.insert(host.to_string(), address.parse().with_context(|| format!("--resolve {pair}"))?);
        }
        policy.resolver = Arc::new(fixed);
    }
    Ok(Validator::open(relay, signer, policy, &args.db)?.with_registry(args.remote.client()?))
}

async fn validator_cmd(command: ValidatorCmd, json_output: bool) -> Result<i32> {
    let value = match command {
        ValidatorCmd::Post { relay, validator, coordinator, evaluation_data, reward, script } => {
            let reward = PostReward::parse(&reward)?;
            let validator = open_validator(&relay.relay, &validator, true)?;
            let coordinator_key = key(&coordinator, "--coordinator")?;
            let job = validator.post_with(coordinator_key, &script, evaluation_data, reward).await?;
            let bounty = match reward {
                PostReward::None => json!(null),
                PostReward::Bounty(amount) => json!({"id": format!("bty_{}", job.id.to_hex()), "amount_minor": amount}),
            };
            json!({"task_id": job.id.to_hex(), "coordinator": coordinator, "evaluation_data": evaluation_data, "bounty": bounty})
        }
        ValidatorCmd::Release { relay, validator, task_id } => {
            let validator = open_validator(&relay.relay, &validator, true)?;
            match validator.release(&key(&task_id, "--task-id")?).await? {
                Some(reward) => reward,
                None => json!({"task_id": task_id, "bounty": null, "detail": "this task carries no bounty"}),
            }
        }
        ValidatorCmd::Assess { relay, validator, task_id, wait, again } => {
            let validator = open_validator(&relay.relay, &validator, true)?;
            let (task, wait) = (key(&task_id, "--task-id")?, Duration::from_secs(wait));
            let recorded =
                if again { validator.reassess(&task, wait).await? } else { validator.assess(&task, wait).await? };
            match recorded {
                Some(recorded) => serde_json::to_value(recorded)?,
                None => {
                    json!({"task_id": task_id, "state": "pending", "detail": "no answer and no failure yet; assess again later"})
                }
            }
        }
        ValidatorCmd::Contest { relay, validator, worker, judge, wait, prompt } => {
            let validator = open_validator(&relay.relay, &validator, true)?;
            let workers = worker.iter().map(|w| key(w, "--worker")).collect::<Result<Vec<_>>>()?;
            let judge = CommandJudge { command: judge };
            serde_json::to_value(validator.contest(&workers, &prompt, &judge, Duration::from_secs(wait)).await?)?
        }
        ValidatorCmd::Replay { validator, task_id } => {
            serde_json::to_value(open_validator("", &validator, false)?.replay(&key(&task_id, "--task-id")?)?)?
        }
        ValidatorCmd::Export { validator } => {
            for line in open_validator("", &validator, false)?.export()? {
                println!("{line}");
            }
            return Ok(0);
        }
        ValidatorCmd::Records { validator } => serde_json::to_value(open_validator("", &validator, false)?.records()?)?,
    };
    print_pretty(json_output, &value);
    Ok(0)
}

//! The labor market from the asker's side, over any relay: `jobs key` makes a
//! Nostr key file, `jobs post` posts a job (directed with `--worker`),
//! `jobs ask` reports a task's state once, and `jobs wait` follows it until it
//! is answered or the wait ends. `ask` and `wait` need no key: they read the
//! original task and late responses from the relay, so they work after a
//! restart, and they never post another task, rent or pay.

use super::common::print;
use anyhow::{anyhow, bail, Context, Result};
use bazaar_agents::relay_client::{follow_task, RelayClient};
use bazaar_relay::jobs::{request_tags, JOB_REQUEST};
use bazaar_relay::{Hex32, Signer};
use clap::{Args, Subcommand};
use serde_json::{json, Value};
use std::path::PathBuf;

/// Longest `jobs wait`, in seconds.
pub const WAIT_S_MAX: u64 = 3_600;

#[derive(Args, Clone)]
pub struct RelayArg {
    /// The relay's WebSocket URL, e.g. ws://127.0.0.1:8080/relay.
    #[arg(long, env = "BAZAAR_RELAY")]
    pub relay: String,
}

#[derive(Subcommand)]
pub enum Command {
    /// The labor market: post jobs and follow them on a relay.
    #[command(subcommand)]
    Jobs(Jobs),
}

#[derive(Subcommand)]
pub enum Jobs {
    /// Write a new Nostr secret key (hex, mode 0600) and print its public key.
    Key {
        /// Where to write the secret key (64 hex, mode 0600): a new file (one already there is refused, never replaced).
        #[arg(long)]
        out: PathBuf,
    },
    /// Post a job request (kind 5905); directed when workers are named.
    Post {
        #[command(flatten)]
        relay: RelayArg,
        /// The asker's Nostr key file (from `jobs key`).
        #[arg(long)]
        key_file: PathBuf,
        /// The versioned workflow, e.g. brief-script-delivery/v1.
        #[arg(long)]
        workflow: String,
        /// A worker's public key (64 hex); repeat for several. None: anyone may answer.
        #[arg(long)]
        worker: Vec<String>,
        /// Mark the job as evaluation data (the only jobs ever exported for evaluation).
        #[arg(long)]
        evaluation_data: bool,
        /// The job's input text.
        input: String,
    },
    /// A task's state now: pending, claimed (with the latest progress time) or answered.
    Ask {
        #[command(flatten)]
        relay: RelayArg,
        /// The task's id (the job request's event id, 64 hex), as `bazaar jobs post` prints it.
        #[arg(long)]
        task_id: String,
    },
    /// Follow a task until it is answered or the wait ends; never posts or pays.
    Wait {
        #[command(flatten)]
        relay: RelayArg,
        /// The task's id (the job request's event id, 64 hex), as `bazaar jobs post` prints it.
        #[arg(long)]
        task_id: String,
        /// Seconds to keep watching.
        #[arg(long, default_value_t = 60)]
        wait: u64,
    },
}

pub async fn run(command: Command, json_output: bool) -> Result<i32> {
    let Command::Jobs(jobs) = command;
    let value = match jobs {
        Jobs::Key { out } => key(&out)?,
        Jobs::Post { relay, key_file, workflow, worker, evaluation_data, input } => {
            post(&relay.relay, &key_file, &workflow, &worker, evaluation_data, &input).await?
        }
        Jobs::Ask { relay, task_id } => serde_json::to_value(follow_task(&relay.relay, &task(&task_id)?, 0).await?)?,
        Jobs::Wait { relay, task_id, wait } => {
            if wait > WAIT_S_MAX {
                bail!("--wait is at most {WAIT_S_MAX} seconds");
            }
            serde_json::to_value(follow_task(&relay.relay, &task(&task_id)?, wait).await?)?
        }
    };
    print(json_output, &value, |v| serde_json::to_string_pretty(v).unwrap_or_default());
    Ok(0)
}

fn task(task_id: &str) -> Result<Hex32> {
    Hex32::parse(task_id).ok_or_else(|| anyhow!("--task-id: expected a 64-hex event id"))
}

fn key(out: &std::path::Path) -> Result<Value> {
    let signer = Signer::generate(&bazaar_server::OsEntropy);
    bazaar_cli::runtime::write_new_secret(out, &signer.secret_hex())?;
    Ok(json!({"public_key": signer.public_key().to_hex(), "key_file": out.display().to_string()}))
}

/// Reads a Nostr key file written by `jobs key` (64 hex).
pub fn read_signer(path: &std::path::Path) -> Result<Signer> {
    let text = std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    Signer::from_secret_hex(&text)
        .ok_or_else(|| anyhow!("{} does not hold a 64-hex secp256k1 secret key", path.display()))
}

async fn post(
    url: &str,
    key_file: &std::path::Path,
    workflow: &str,
    workers: &[String],
    evaluation_data: bool,
    input: &str,
) -> Result<Value> {
    let signer = read_signer(key_file)?;
    let workers: Vec<Hex32> = workers
        .iter()
        .map(|w| Hex32::parse(w).ok_or_else(|| anyhow!("--worker {w}: expected 64 lowercase hex characters")))
        .collect::<Result<_>>()?;
    let job = signer.sign(
        bazaar_sdk::clock::unix_now(),
        JOB_REQUEST,
        request_tags(workflow, evaluation_data, &workers, input),
        "",
    );
    let mut client = RelayClient::connect(url).await?;
    let (accepted, message) = client.publish(&job).await?;
    if !accepted {
        bail!("the relay refused the job: {message}");
    }
    Ok(json!({"task_id": job.id.to_hex(), "asker": job.pubkey.to_hex(), "directed": !workers.is_empty()}))
}

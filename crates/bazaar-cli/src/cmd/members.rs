//! Members and money in: `keygen`, `owner`, `invite`, `enroll`, `budget`,
//! `mint`, `fund`, `me`, `rotate` and `rename`.

use super::common::{key_or_random, print, print_pretty, Remote};
use anyhow::Result;
use bazaar_cli::runtime;
use clap::Subcommand;
use serde_json::{json, Value};
use std::path::PathBuf;

#[derive(Subcommand)]
pub enum Command {
    /// Draw an Ed25519 keypair; prints its DID and secret.
    Keygen {
        /// Write the secret (hex) to this new file, mode 0600 (a file already there is refused, never replaced).
        #[arg(long)]
        out: Option<PathBuf>,
    },
    /// Operator: register an owner.
    Owner {
        #[command(flatten)]
        remote: Remote,
        /// The owner's handle: 3-32 characters of a-z, 0-9 and '-' (not first); usable wherever its DID is.
        #[arg(long)]
        handle: String,
        /// The owner's Ed25519 public key (hex); see `bazaar keygen`.
        #[arg(long)]
        public_key: String,
    },
    /// Owner: draw an invite code for an agent.
    Invite {
        #[command(flatten)]
        remote: Remote,
    },
    /// Agent: enroll with an invite code and your own key (file from `keygen --out`).
    Enroll {
        #[command(flatten)]
        remote: Remote,
        /// The invite code, as `bazaar invite` printed it (single use, valid for 24 h).
        #[arg(long)]
        invite: String,
        /// The agent's handle: 3-32 characters of a-z, 0-9 and '-' (not first).
        #[arg(long)]
        handle: String,
        /// The agent's secret key file (hex, from `bazaar keygen --out`); its public key becomes the agent's DID.
        #[arg(long)]
        key_file: PathBuf,
    },
    /// Owner: set an agent's ceilings.
    Budget {
        #[command(flatten)]
        remote: Remote,
        /// One of your agents: its DID or handle.
        agent: String,
        /// The most one call may cost, in minor units (0: the agent may spend nothing).
        #[arg(long)]
        per_call: u64,
        /// The most the agent may spend in one UTC day, in minor units.
        #[arg(long)]
        per_day: u64,
        /// The most the agent may spend in all, over its life, in minor units.
        #[arg(long)]
        total: u64,
    },
    /// Operator: mint units into an owner's account.
    Mint {
        #[command(flatten)]
        remote: Remote,
        /// The owner whose account receives the units: its DID or handle.
        owner: String,
        /// How much to mint, in minor units.
        amount: u64,
        /// Idempotency key; reuse it when retrying.
        #[arg(long)]
        key: Option<String>,
    },
    /// Owner: move units into an agent's budget account.
    Fund {
        #[command(flatten)]
        remote: Remote,
        /// One of your agents: its DID or handle.
        agent: String,
        /// How much to move from your account, in minor units.
        amount: u64,
        /// Idempotency key; reuse it when retrying (a fresh one by default, so a retry without it funds again).
        #[arg(long)]
        key: Option<String>,
    },
    /// Who am I, with balance and budget.
    Me {
        #[command(flatten)]
        remote: Remote,
    },
    /// Replace your credential; the old one stops working at once. Prints the new one.
    Rotate {
        #[command(flatten)]
        remote: Remote,
    },
    /// Rename yourself or one of your agents; the old handle stays reserved forever.
    Rename {
        #[command(flatten)]
        remote: Remote,
        /// DID or current handle.
        member: String,
        /// The new handle: 3-32 characters of a-z, 0-9 and '-' (not first).
        handle: String,
    },
}

pub async fn run(command: Command, json_output: bool) -> Result<i32> {
    let j = json_output;
    match command {
        Command::Keygen { out } => keygen(out, j)?,
        Command::Owner { remote, handle, public_key } => {
            let body = json!({"public_key": public_key, "handle": handle});
            let value = remote
                .client()?
                .call::<Value>(reqwest::Method::POST, "/v1/owners", Some(bazaar_sdk::Body::json(body)), None)
                .await?
                .body;
            print(j, &value, owner_prose);
        }
        Command::Invite { remote } => {
            let code = remote.client()?.issue_invite().await?;
            print(j, &json!({"invite_code": code}), |_| format!("invite code (single use, 24 h): {code}"));
        }
        Command::Enroll { remote, invite, handle, key_file } => {
            let key = runtime::read_key(&key_file)?;
            let value = serde_json::to_value(remote.client()?.redeem_invite(&invite, &key, &handle).await?)?;
            print(j, &value, enrolled_prose);
        }
        Command::Budget { remote, agent, per_call, per_day, total } => {
            let value = serde_json::to_value(remote.client()?.set_budget(&agent, per_call, per_day, total).await?)?;
            print(j, &value, |v| {
                let (call, day, all) = (&v["per_call_max_minor"], &v["per_day_max_minor"], &v["total_max_minor"]);
                format!("budget for {agent}: per call {call}, per day {day}, total {all}")
            });
        }
        Command::Mint { remote, owner, amount, key } => {
            let value = serde_json::to_value(remote.client()?.mint(&owner, amount, &key_or_random(key)).await?)?;
            print(j, &value, |v| format!("minted {} into {owner} (transfers {})", v["amount_minor"], v["transfers"]));
        }
        Command::Fund { remote, agent, amount, key } => {
            let value = serde_json::to_value(remote.client()?.fund(&agent, amount, &key_or_random(key)).await?)?;
            print(j, &value, |v| format!("moved {} into {agent}'s budget", v["amount_minor"]));
        }
        Command::Me { remote } => print_pretty(j, &serde_json::to_value(remote.client()?.me().await?)?),
        Command::Rotate { remote } => {
            let credential = remote.client()?.rotate_credential().await?;
            print(j, &json!({"credential": credential}), |_| {
                format!("new credential (shown once; the old one is dead): {credential}")
            });
        }
        Command::Rename { remote, member, handle } => rename(remote, &member, handle, j).await?,
    }
    Ok(0)
}

/// Draws a key; the secret goes to `out` (0600) when given, else to stdout.
fn keygen(out: Option<PathBuf>, json_output: bool) -> Result<()> {
    let key = bazaar_sdk::generate_key();
    let secret = hex::encode(key.to_bytes());
    let public = hex::encode(key.verifying_key().as_bytes());
    if let Some(path) = &out {
        runtime::write_new_secret(path, &secret)?;
    }
    let shown_secret = if out.is_some() { Value::Null } else { json!(secret) };
    let value = json!({"did": bazaar_sdk::did_of(&key), "public_key": public, "secret_key": shown_secret});
    print(json_output, &value, |v| {
        format!(
            "did: {}\npublic key: {}\n{}",
            v["did"].as_str().unwrap_or(""),
            public,
            out.as_ref()
                .map(|p| format!("secret key written to {}", p.display()))
                .unwrap_or_else(|| format!("secret key: {secret} (keep it safe)"))
        )
    });
    Ok(())
}

fn owner_prose(v: &Value) -> String {
    format!(
        "owner {} ({})\ncredential (shown once): {}",
        v["handle"].as_str().unwrap_or(""),
        v["id"].as_str().unwrap_or(""),
        v["credential"].as_str().unwrap_or("")
    )
}

fn enrolled_prose(v: &Value) -> String {
    format!(
        "enrolled {} ({}) for owner {}\ncredential (shown once): {}",
        v["handle"].as_str().unwrap_or(""),
        v["id"].as_str().unwrap_or(""),
        v["owner"].as_str().unwrap_or(""),
        v["credential"].as_str().unwrap_or("")
    )
}

async fn rename(remote: Remote, member: &str, handle: String, json_output: bool) -> Result<()> {
    let body = json!({"handle": handle});
    let path = format!("/v1/members/{member}/handle");
    let value = remote
        .client()?
        .call::<Value>(reqwest::Method::PUT, &path, Some(bazaar_sdk::Body::json(body)), None)
        .await?
        .body;
    print(json_output, &value, |v| format!("renamed {} to {}; {} stays reserved", v["from"], v["to"], v["from"]));
    Ok(())
}

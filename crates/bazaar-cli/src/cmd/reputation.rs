//! Trust: `reputation` (a member's local figures, stake, imports and combined
//! score) and `passport` (issue from a registry, verify offline, import a
//! peer's).

use super::common::{print, print_pretty, Remote};
use anyhow::{Context, Result};
use bazaar_cli::runtime;
use clap::Subcommand;
use serde_json::Value;
use std::path::{Path, PathBuf};

#[derive(Subcommand)]
pub enum Command {
    /// Reputation of a DID or handle: local figures, stake, imports, combined score.
    Reputation {
        #[command(flatten)]
        remote: Remote,
        /// The member: its DID or handle.
        member: String,
    },
    /// Trust passports: issue (from a registry), verify (offline), import (a peer's, at this registry).
    Passport {
        #[command(subcommand)]
        action: PassportCmd,
    },
}

#[derive(Subcommand)]
pub enum PassportCmd {
    /// Ask the registry for a signed passport (yours, or an agent's you own).
    Issue {
        #[command(flatten)]
        remote: Remote,
        /// One of your agents to issue it for (DID or handle); yourself by default.
        #[arg(long)]
        subject: Option<String>,
        /// Write the passport here instead of stdout.
        #[arg(long)]
        out: Option<PathBuf>,
    },
    /// Verify a passport file offline: proof, validity window, and (with --keys) that
    /// its key belongs to the registry's published key history. Exits 1 if refused.
    Verify {
        /// The passport file (JSON, as `bazaar passport issue --out` writes it).
        file: PathBuf,
        /// A key history as served at /.well-known/bazaar-keys.
        #[arg(long)]
        keys: Option<PathBuf>,
    },
    /// Present a peer registry's passport to this registry, signed with the subject's key.
    Import {
        #[command(flatten)]
        remote: Remote,
        /// The peer registry's passport file (JSON, as `bazaar passport issue --out` writes it there).
        file: PathBuf,
        /// The subject's secret key file (from `keygen --out`).
        #[arg(long)]
        key: PathBuf,
    },
}

pub async fn run(command: Command, json_output: bool) -> Result<i32> {
    match command {
        Command::Reputation { remote, member } => {
            let value = bazaar_cli::wire_json(&remote.client()?.reputation(&member).await?);
            print(json_output, &value, reputation_prose);
            Ok(0)
        }
        Command::Passport { action } => passport_cmd(action, json_output).await,
    }
}

fn reputation_prose(v: &Value) -> String {
    let local = &v["local"];
    format!(
        "{}: score {} bps (lower bound {}), {} settled ({} ok, {} failed), volume {}, {} distinct buyer owners, top share {} bps, {} self-dealt excluded\ndisputes: {} filed, {} lost, {} won, {} split; stake {} (slashed {})\ncombined with {} import(s): {} bps",
        v["subject"].as_str().unwrap_or(""),
        local["scoreBps"], local["scoreLowerBoundBps"], local["settledCount"], local["successCount"],
        local["failureCount"], local["settledVolumeMinor"].as_str().unwrap_or(""), local["distinctBuyerOwners"],
        local["topBuyerShareBps"], local["excludedSameOwner"], local["disputesFiled"], local["disputesLost"],
        local["disputesWon"], local["disputesSplit"], v["stake"]["lockedMinor"].as_str().unwrap_or(""),
        v["stake"]["slashedMinor"].as_str().unwrap_or(""), v["imported"].as_array().map_or(0, |a| a.len()),
        v["combined"]["scoreBps"]
    )
}

async fn passport_cmd(action: PassportCmd, json_output: bool) -> Result<i32> {
    match action {
        PassportCmd::Issue { remote, subject, out } => {
            let passport = remote.client()?.passport(subject.as_deref()).await?;
            let text = serde_json::to_string_pretty(&passport)?;
            match out {
                Some(path) => {
                    std::fs::write(&path, &text).with_context(|| format!("writing {}", path.display()))?;
                    eprintln!("passport written to {}", path.display());
                }
                None => println!("{text}"),
            }
            Ok(0)
        }
        PassportCmd::Verify { file, keys } => {
            let passport: Value =
                serde_json::from_str(&read(&file)?).with_context(|| format!("{} is not JSON", file.display()))?;
            let verdict = bazaar_cli::passport::verify_file(&passport, keys.as_deref(), bazaar_sdk::clock::now_ms())?;
            print(json_output, &verdict, verdict_prose);
            Ok(if verdict["valid"] == true { 0 } else { 1 })
        }
        PassportCmd::Import { remote, file, key } => {
            let passport: bazaar_sdk::wire::federation::Passport = serde_json::from_str(&read(&file)?)
                .with_context(|| format!("{} is not a TrustPassport", file.display()))?;
            let client = remote.client()?;
            let audience = client.well_known().await?.did;
            let value =
                bazaar_cli::wire_json(&client.import_passport(&passport, &runtime::read_key(&key)?, &audience).await?);
            print_pretty(json_output, &value);
            Ok(0)
        }
    }
}

fn read(file: &Path) -> Result<String> {
    std::fs::read_to_string(file).with_context(|| format!("reading {}", file.display()))
}

fn verdict_prose(v: &Value) -> String {
    if v["valid"] != true {
        return format!("INVALID: {} — {}", v["code"].as_str().unwrap_or(""), v["detail"].as_str().unwrap_or(""));
    }
    let registry = v["registry"]
        .as_str()
        .map(|r| format!(" of registry {r}"))
        .unwrap_or_else(|| " (no --keys: the key was not checked against a registry's history)".into());
    format!(
        "VALID: {} for {} (score {} bps, {} settled), signed by {}{}, valid until {}",
        v["id"].as_str().unwrap_or(""),
        v["subject"].as_str().unwrap_or(""),
        v["figures"]["scoreBps"],
        v["figures"]["settledCount"],
        v["key"].as_str().unwrap_or(""),
        registry,
        v["valid_until"].as_str().unwrap_or("")
    )
}

//! `bazaar attack`: run the refusal rails (the library's attack catalogue) in a
//! scratch registry started for the run and deleted after, or — for operators,
//! with `--registry` — against a live registry, or list them.

use super::common::credential;
use anyhow::{Context, Result};
use bazaar_attacks::{left_behind, scratch, Verdict, CATALOGUE};
use clap::Subcommand;
use std::path::PathBuf;

#[derive(Subcommand)]
pub enum Command {
    /// Run the refusal rails: named attacks (or all) through the public API. Each must be
    /// refused with its code and change nothing. Without --registry they run in a scratch
    /// registry (its own temp directory, short dispute windows, webhooks to loopback allowed)
    /// that is deleted after; with it, against that registry, where their casts stay.
    Attack {
        /// Run against this registry instead (operators; needs its operator credential). Each attack
        /// enrolls and funds a cast there that is never removed; attacks this registry's settings
        /// cannot meet are skipped with the reason.
        #[arg(long)]
        registry: Option<String>,
        /// The operator credential of --registry (or use --credential-file).
        #[arg(long, env = "BAZAAR_CREDENTIAL", hide_env_values = true)]
        credential: Option<String>,
        /// File holding the operator credential of --registry.
        #[arg(long, env = "BAZAAR_CREDENTIAL_FILE")]
        credential_file: Option<PathBuf>,
        /// Attack names; none (or --all) means the whole catalogue.
        names: Vec<String>,
        /// Run the whole catalogue.
        #[arg(long, conflicts_with = "names")]
        all: bool,
        /// List the catalogue and exit.
        #[arg(long)]
        list: bool,
    },
}

pub async fn run(command: Command, json_output: bool) -> Result<i32> {
    match command {
        Command::Attack { list: true, .. } => {
            list_catalogue();
            Ok(0)
        }
        Command::Attack { registry: None, names, .. } => in_scratch(names, json_output).await,
        Command::Attack { registry: Some(registry), credential: given, credential_file, names, .. } => {
            let credential = credential(&given, &credential_file)?.context(
                "an attack against --registry needs its operator credential (--credential or --credential-file)",
            )?;
            against(&registry, &credential, &names, json_output).await
        }
    }
}

fn list_catalogue() {
    for attack in CATALOGUE {
        println!("{:<18} must be refused with {} {}", attack.name, attack.expect_status(), attack.expect.as_str());
    }
}

/// In a scratch registry: every attack runs (none is skipped), and nothing is left anywhere.
async fn in_scratch(names: Vec<String>, json_output: bool) -> Result<i32> {
    if !json_output {
        println!("running in a scratch registry (its own temp directory, short dispute windows, webhooks to loopback allowed), deleted after\n");
    }
    let verdicts = scratch::run(
        names,
        move |line| {
            if !json_output {
                println!("{line}")
            }
        },
        None,
    )
    .await?;
    report(&verdicts, json_output, "the scratch registry was deleted")
}

/// Against a named registry: says first what the run will leave there; an attack its settings cannot
/// meet is skipped, with the reason.
async fn against(registry: &str, credential: &str, names: &[String], json_output: bool) -> Result<i32> {
    let count = if names.is_empty() { CATALOGUE.len() } else { names.len() };
    let notice = format!("against {registry}: {}\n", left_behind(count));
    if json_output {
        eprintln!("{notice}");
    } else {
        println!("{notice}");
    }
    let say = |line: String| {
        if !json_output {
            println!("{line}");
        }
    };
    let verdicts = bazaar_attacks::run(registry, credential, names, &say).await?;
    report(&verdicts, json_output, &format!("the attacks' casts stay on {registry}"))
}

/// Prints the verdicts (`--json`) or the tally; exits 0 only when every attack that ran was refused and
/// changed nothing.
fn report(verdicts: &[Verdict], json_output: bool, afterwards: &str) -> Result<i32> {
    let held = verdicts.iter().filter(|v| v.held()).count();
    let skipped: Vec<&Verdict> = verdicts.iter().filter(|v| v.skipped.is_some()).collect();
    let ran = verdicts.len() - skipped.len();
    if json_output {
        println!("{}", serde_json::to_string(&verdicts)?);
    } else {
        println!("\n{held} of {ran} attacks run refused with nothing changed; {} skipped; {afterwards}", skipped.len());
        for verdict in skipped {
            println!("  skipped {}: {}", verdict.name, verdict.skipped.as_deref().unwrap_or_default());
        }
    }
    Ok(if held == ran { 0 } else { 1 })
}

//! `bazaar attack`: run the refusal rails (the library's attack catalogue)
//! against a live registry, or list them.

use super::common::Remote;
use anyhow::{Context, Result};
use bazaar_cli::attack::CATALOGUE;
use clap::Subcommand;

#[derive(Subcommand)]
pub enum Command {
    /// Run the refusal rails: named attacks (or all) through the public API. Each
    /// must be refused with its code and change nothing. Needs the operator credential.
    Attack {
        #[command(flatten)]
        remote: Remote,
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
        Command::Attack { remote, names, list: false, .. } => attack(remote, &names, json_output).await,
    }
}

fn list_catalogue() {
    for attack in CATALOGUE {
        println!("{:<18} must be refused with {} {}", attack.name, attack.expect_status(), attack.expect.as_str());
    }
}

/// Exits 0 only when every attack that ran was refused and changed nothing; an attack this registry's
/// dispute windows are too long for is skipped, with the reason.
async fn attack(remote: Remote, names: &[String], json_output: bool) -> Result<i32> {
    let client = remote.client()?;
    let credential =
        client.credential().context("the attack needs the operator credential (--credential or --credential-file)")?;
    let say = |line: String| {
        if !json_output {
            println!("{line}");
        }
    };
    let verdicts = bazaar_cli::attack::run(client.base(), credential, names, &say).await?;
    if json_output {
        println!("{}", serde_json::to_string(&verdicts)?);
    }
    let held = verdicts.iter().filter(|v| v.held()).count();
    let skipped = verdicts.iter().filter(|v| v.skipped.is_some()).count();
    let ran = verdicts.len() - skipped;
    say(format!("\n{held} of {ran} attacks run refused with nothing changed; {skipped} skipped (reasons above)"));
    Ok(if held == ran { 0 } else { 1 })
}

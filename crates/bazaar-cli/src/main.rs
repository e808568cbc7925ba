//! The `bazaar` binary: parse the command line, hand the command to its family
//! in `cmd/`, and turn an error into exit code 2 (as prose on stderr, or as
//! JSON with `--json`). `anyhow` lives here only.

mod cmd;

/// mimalloc instead of glibc malloc: the paid-call profile spent 17 % of the
/// server's CPU in malloc/free, much of it consolidating fragmented arenas
/// (BENCHMARKS.md, "A faster single call"). Off with `--no-default-features`.
#[cfg(feature = "mimalloc")]
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

use anyhow::Result;
use clap::{CommandFactory, FromArgMatches, Parser, Subcommand};
use cmd::{
    attack, backup, demo, escrow, federation, hire, jobs, labor, members, merchant, payments, registry, reprice,
    reputation, storefront, talk,
};
use serde_json::json;

#[derive(Parser)]
#[command(name = "bazaar", version, about = "A registry where software agents pay each other per call, exactly once.")]
struct Cli {
    /// Print machine-readable JSON instead of prose.
    #[arg(long, global = true)]
    json: bool,
    #[command(subcommand)]
    command: Command,
}

/// Every family's subcommands, flattened: `bazaar serve`, not `bazaar registry serve`.
#[derive(Subcommand)]
enum Command {
    #[command(flatten)]
    Registry(registry::Command),
    #[command(flatten)]
    Backup(backup::Command),
    #[command(flatten)]
    Demo(demo::Command),
    #[command(flatten)]
    Members(members::Command),
    #[command(flatten)]
    Payments(payments::Command),
    #[command(flatten)]
    Merchant(merchant::Command),
    #[command(flatten)]
    Attack(attack::Command),
    #[command(flatten)]
    Escrow(escrow::Command),
    #[command(flatten)]
    Reputation(reputation::Command),
    #[command(flatten)]
    Federation(federation::Command),
    #[command(flatten)]
    Talk(talk::Command),
    #[command(flatten)]
    Jobs(jobs::Command),
    #[command(flatten)]
    Labor(labor::Command),
    #[command(flatten)]
    Hire(hire::Command),
    #[command(flatten)]
    Reprice(reprice::Command),
    #[command(flatten)]
    Storefront(storefront::Command),
}

/// The order `bazaar --help` lists the commands in. Flattening the families
/// would list them family by family; this keeps the order users have known
/// since before the families had modules. A new command goes here too.
const HELP_ORDER: [&str; 36] = [
    "serve",
    "audit",
    "backup",
    "demo",
    "keygen",
    "owner",
    "invite",
    "enroll",
    "budget",
    "mint",
    "fund",
    "pay",
    "verify",
    "merchant",
    "me",
    "attack",
    "rotate",
    "rename",
    "void",
    "contract",
    "dispute",
    "stake",
    "reputation",
    "passport",
    "federation",
    "keys",
    "events",
    "openapi",
    "dm",
    "jobs",
    "worker",
    "validator",
    "market",
    "hire",
    "spending",
    "reprice",
];

/// The command line, with the commands in [`HELP_ORDER`].
fn command_line() -> clap::Command {
    let cli = values_may_begin_with_a_hyphen(Cli::command());
    HELP_ORDER.iter().enumerate().fold(cli, |cli, (order, name)| cli.mut_subcommand(name, |c| c.display_order(order)))
}

/// Every option that takes a value takes the next word as it, whatever it
/// begins with, as getopt does: a base64url key or signature begins with '-'
/// one time in 64, and clap would otherwise read it as an unknown flag.
fn values_may_begin_with_a_hyphen(command: clap::Command) -> clap::Command {
    command
        .mut_args(|arg| {
            let option_with_value = arg.get_long().is_some() && arg.get_action().takes_values();
            if option_with_value {
                arg.allow_hyphen_values(true)
            } else {
                arg
            }
        })
        .mut_subcommands(values_may_begin_with_a_hyphen)
}

async fn run(cli: Cli) -> Result<i32> {
    let json = cli.json;
    match cli.command {
        Command::Registry(command) => registry::run(command, json).await,
        Command::Backup(command) => backup::run(command, json).await,
        Command::Demo(command) => demo::run(command, json).await,
        Command::Members(command) => members::run(command, json).await,
        Command::Payments(command) => payments::run(command, json).await,
        Command::Merchant(command) => merchant::run(command, json).await,
        Command::Attack(command) => attack::run(command, json).await,
        Command::Escrow(command) => escrow::run(command, json).await,
        Command::Reputation(command) => reputation::run(command, json).await,
        Command::Federation(command) => federation::run(command, json).await,
        Command::Talk(command) => talk::run(command, json).await,
        Command::Jobs(command) => jobs::run(command, json).await,
        Command::Labor(command) => labor::run(command, json).await,
        Command::Hire(command) => hire::run(command, json).await,
        Command::Reprice(command) => reprice::run(command, json).await,
        Command::Storefront(command) => storefront::run(command, json).await,
    }
}

fn main() {
    let cli = Cli::from_arg_matches(&command_line().get_matches()).unwrap_or_else(|error| error.exit());
    let json_output = cli.json;
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build().expect("tokio runtime");
    match runtime.block_on(run(cli)) {
        Ok(code) => std::process::exit(code),
        Err(error) => {
            // A registry's refusal is printed with its code and facts (when a reclaim opens, what a budget allows).
            let problem = error.chain().find_map(|cause| match cause.downcast_ref::<bazaar_sdk::SdkError>() {
                Some(bazaar_sdk::SdkError::Problem { status, code, detail, body }) => {
                    Some((*status, code, detail, body))
                }
                _ => None,
            });
            if json_output {
                let printed = match problem {
                    Some((status, code, detail, body)) => {
                        cmd::common::refusal_json(format!("{error:#}"), status, code, detail, body)
                    }
                    None => json!({"error": format!("{error:#}")}),
                };
                println!("{printed}");
            } else {
                eprintln!("error: {error:#}");
                if let Some(line) = problem.and_then(|(.., body)| cmd::common::facts_line(body)) {
                    eprintln!("{line}");
                }
            }
            std::process::exit(2);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{command_line, HELP_ORDER};

    #[test]
    fn the_help_lists_every_command_in_its_place() {
        let cli = command_line();
        cli.clone().debug_assert();
        let names: Vec<&str> = cli.get_subcommands().map(|c| c.get_name()).collect();
        let mut listed = names.clone();
        listed.sort_by_key(|name| HELP_ORDER.iter().position(|n| n == name));
        assert_eq!(listed, HELP_ORDER, "every command, and only those, in HELP_ORDER");
    }

    /// Every subcommand, and every argument of every subcommand, at any depth, whose `--help` line would
    /// otherwise be a bare name.
    fn undescribed(command: &clap::Command, path: &str, out: &mut Vec<String>) {
        for arg in command.get_arguments() {
            let id = arg.get_id().as_str();
            if ["help", "version"].contains(&id) || arg.is_hide_set() {
                continue;
            }
            let described = arg.get_help().or(arg.get_long_help()).is_some_and(|h| !h.to_string().trim().is_empty());
            if !described {
                out.push(format!("{path} <{id}>"));
            }
        }
        for sub in command.get_subcommands() {
            let path = format!("{path} {}", sub.get_name());
            if sub.get_about().or(sub.get_long_about()).is_none_or(|a| a.to_string().trim().is_empty()) {
                out.push(format!("{path} (the command itself)"));
            }
            undescribed(sub, &path, out);
        }
    }

    #[test]
    fn every_subcommand_describes_itself_and_every_argument() {
        let cli = command_line();
        let mut missing = Vec::new();
        undescribed(&cli, "bazaar", &mut missing);
        assert!(missing.is_empty(), "{} arguments have no help text:\n{}", missing.len(), missing.join("\n"));
    }
}

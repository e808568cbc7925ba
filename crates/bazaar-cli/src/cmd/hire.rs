//! `bazaar hire`: service payments and guest hires. The owner authorizes (and revokes) one
//! exact payment for one task; the hiring agent pays it through its local
//! journal, which saves each attempt before money moves and never retries an
//! uncertain one; the owner lists and resolves recovery records after reading
//! the registry's record. A specialist signs an offer; a hirer agrees it
//! (terms locked) and accepts a signed result to pay.

use super::common::{print_pretty, Remote};
use anyhow::{bail, Context, Result};
use bazaar_agents::labor::payments::{Journal, Order, PayOutcome};
use clap::Subcommand;
use serde_json::{json, Value};
use std::path::PathBuf;

#[derive(Subcommand)]
pub enum Command {
    /// Service payments: exact authorizations, payments never retried when uncertain, recovery.
    #[command(subcommand)]
    Hire(HireCmd),
    /// The owner's view of an agent: allowance and pending reconciliations (each worker's own asset),
    /// payment attempts and recovery records, authorizations, hires, leases, bounties, earnings (ledger units).
    Spending {
        #[command(flatten)]
        remote: Remote,
        /// The agent (DID or handle).
        #[arg(long)]
        agent: String,
        /// A worker's state directory on this machine (its meter and payment journal); repeat.
        #[arg(long)]
        state_dir: Vec<PathBuf>,
    },
}

#[derive(Subcommand)]
pub enum HireCmd {
    /// Owner: authorize one of your agents to pay a specialist exactly this, for one task (0 = sponsored).
    Authorize {
        #[command(flatten)]
        remote: Remote,
        /// The hiring agent (DID or handle).
        #[arg(long)]
        agent: String,
        /// The task (the job's event id, 64 hex).
        #[arg(long)]
        task: String,
        /// The specialist agent (DID or handle).
        #[arg(long)]
        specialist: String,
        /// The specialist's owner or one of its agents.
        #[arg(long)]
        pay_to: String,
        /// Gross, in minor units, before the protocol fee; 0 records sponsorship.
        #[arg(long)]
        amount: u64,
    },
    /// Owner: revoke an authorization that has not paid.
    Revoke {
        #[command(flatten)]
        remote: Remote,
        /// The authorization's id (`sva_…`), as `bazaar hire authorize` prints it.
        id: String,
    },
    /// Specialist: sign an offer for one task at one price, paid to one account (prints the signature).
    Offer {
        /// The specialist agent's identity key (from `bazaar keygen`).
        #[arg(long)]
        key: PathBuf,
        /// The task (the job request's event id, 64 hex).
        #[arg(long)]
        task: String,
        /// The DID paid: the specialist, its owner or one of its owner's agents.
        #[arg(long)]
        pay_to: String,
        /// The price, in minor units (at least 1; the protocol fee comes out of it).
        #[arg(long)]
        price: u64,
    },
    /// Hirer agent: agree a fixed-price guest hire from the specialist's signed offer; its terms are locked.
    Agree {
        #[command(flatten)]
        remote: Remote,
        /// The specialist agent who signed the offer (DID or handle).
        #[arg(long)]
        specialist: String,
        /// The task, exactly as in the offer (the job request's event id, 64 hex).
        #[arg(long)]
        task: String,
        /// The price, in minor units, exactly as in the offer.
        #[arg(long)]
        price: u64,
        /// The account paid, as in the offer (DID or handle).
        #[arg(long)]
        pay_to: String,
        /// The offer's `signature`, as `bazaar hire offer` prints it (base64url).
        #[arg(long)]
        signature: String,
        /// Hold the price now in an escrowed contract with the dispute desk as arbiter.
        #[arg(long)]
        escrow: bool,
    },
    /// Hirer agent: accept the specialist's signed result (a JSON file) and pay, once.
    Accept {
        #[command(flatten)]
        remote: Remote,
        /// The hire's id (`hir_…`), as `bazaar hire agree` prints it.
        id: String,
        /// The specialist's result event (kind 6905), as JSON.
        #[arg(long)]
        result: PathBuf,
        /// The specialist's enrollment event (kind 30950), as JSON.
        #[arg(long)]
        enrollment: PathBuf,
    },
    /// An authorization (`sva_…`) or a hire (`hir_…`), with its payment once made.
    Show {
        #[command(flatten)]
        remote: Remote,
        /// The authorization's id (`sva_…`) or the hire's (`hir_…`).
        id: String,
    },
    /// Hiring agent: pay an authorization, saved in the journal first; an uncertain outcome is never retried.
    Pay {
        #[command(flatten)]
        remote: Remote,
        /// Where the journal is kept (`payments.json`).
        #[arg(long)]
        state_dir: PathBuf,
        /// The authorization's id (`sva_…`), as `bazaar hire authorize` prints it.
        id: String,
    },
    /// The journal: every attempt and the recovery records; `resolve` one after reading the registry.
    Payments {
        /// The hiring agent's state directory, as given to `bazaar hire pay` (its journal is `payments.json`).
        #[arg(long)]
        state_dir: PathBuf,
        #[command(subcommand)]
        action: Option<PaymentsCmd>,
    },
}

#[derive(Subcommand)]
pub enum PaymentsCmd {
    /// Every attempt, and the unresolved ones apart (the default).
    Show,
    /// Resolve a task's uncertain attempt; the registry's record must agree (it is read first).
    Resolve {
        #[command(flatten)]
        remote: Remote,
        /// The task (64 hex) whose uncertain attempt to resolve.
        #[arg(long)]
        task: String,
        /// The registry's record shows the authorization paid.
        #[arg(long, conflicts_with = "not_paid", required_unless_present = "not_paid")]
        paid: bool,
        /// The registry's record shows it unpaid: a new attempt may follow.
        #[arg(long)]
        not_paid: bool,
        /// Why, in words, kept with the resolution in the journal; none by default.
        #[arg(long, default_value = "")]
        note: String,
    },
}

pub async fn run(command: Command, json_output: bool) -> Result<i32> {
    let command = match command {
        Command::Hire(command) => command,
        Command::Spending { remote, agent, state_dir } => {
            print_pretty(json_output, &spending(&remote, &agent, &state_dir).await?);
            return Ok(0);
        }
    };
    let value = match command {
        HireCmd::Authorize { remote, agent, task, specialist, pay_to, amount } => bazaar_cli::wire_json(
            &remote.client()?.authorize_service(&agent, &task, &specialist, &pay_to, amount).await?.body,
        ),
        HireCmd::Revoke { remote, id } => bazaar_cli::wire_json(&remote.client()?.revoke_service(&id).await?.body),
        HireCmd::Show { remote, id } if id.starts_with("hir_") => {
            bazaar_cli::wire_json(&remote.client()?.hire(&id).await?)
        }
        HireCmd::Show { remote, id } => bazaar_cli::wire_json(&remote.client()?.service_authorization(&id).await?),
        HireCmd::Offer { key, task, pay_to, price } => {
            let key = bazaar_cli::runtime::read_key(&key)?;
            let specialist = bazaar_core::crypto::did_key(&key.verifying_key());
            let statement = bazaar_sdk::hire_offer_statement(&specialist, &task, &pay_to, price);
            let signature = bazaar_core::crypto::sign(&key, statement.as_bytes());
            json!({"specialist": specialist, "task": task, "pay_to": pay_to, "price_minor": price, "signature": signature})
        }
        HireCmd::Agree { remote, specialist, task, price, pay_to, signature, escrow } => bazaar_cli::wire_json(
            &remote.client()?.agree_hire(&specialist, &task, price, &pay_to, &signature, escrow).await?.body,
        ),
        HireCmd::Accept { remote, id, result, enrollment } => {
            let read = |path: &PathBuf| -> Result<bazaar_sdk::wire::nostr::SignedEvent> {
                let text = std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
                serde_json::from_str(&text).with_context(|| format!("{} is not a signed Nostr event", path.display()))
            };
            bazaar_cli::wire_json(&remote.client()?.accept_hire(&id, &read(&result)?, &read(&enrollment)?).await?.body)
        }
        HireCmd::Pay { remote, state_dir, id } => return pay(&remote, &state_dir, &id, json_output).await,
        HireCmd::Payments { state_dir, action } => payments(&state_dir, action.unwrap_or(PaymentsCmd::Show)).await?,
    };
    print_pretty(json_output, &value);
    Ok(0)
}

/// Pays the authorization's exact terms through the journal. Exit 0 when paid
/// (now or before), 1 when refused, 3 when uncertain or blocked (the owner must resolve it).
async fn pay(remote: &Remote, state_dir: &std::path::Path, id: &str, json_output: bool) -> Result<i32> {
    let registry = remote.client()?;
    let found = registry.service_authorization(id).await.context("reading the authorization")?;
    let (task, specialist, pay_to) = (found.task, found.specialist, found.pay_to);
    let order = Order {
        authorization: id,
        task: &task,
        specialist: &specialist,
        pay_to: &pay_to,
        amount_minor: found.amount_minor,
    };
    let mut journal = Journal::open(state_dir)?;
    let (code, value) = match journal.pay(&registry, &order).await? {
        PayOutcome::Paid(payment) => (0, json!({"outcome": "paid", "payment": payment})),
        PayOutcome::AlreadyPaid(attempt) => (0, json!({"outcome": "already_paid", "attempt": attempt})),
        PayOutcome::Refused { code, detail } => (1, json!({"outcome": "refused", "code": code, "detail": detail})),
        PayOutcome::Uncertain(attempt) => (
            3,
            json!({"outcome": "uncertain", "attempt": attempt,
            "detail": "the outcome is unknown: it will not be retried; read the registry's record, then `bazaar hire payments resolve`"}),
        ),
        PayOutcome::Blocked(attempt) => (
            3,
            json!({"outcome": "blocked", "attempt": attempt,
            "detail": "an earlier attempt for this task is unresolved; the owner resolves it first"}),
        ),
    };
    print_pretty(json_output, &value);
    Ok(code)
}

/// The registry's view (ledger units) with, for each state directory, the
/// worker's meter (its engine's asset) and its payment journal beside it.
async fn spending(remote: &Remote, agent: &str, state_dirs: &[PathBuf]) -> Result<Value> {
    let mut view =
        bazaar_cli::wire_json(&remote.client()?.spending(agent).await.context("reading the agent's spending")?);
    let mut local = Vec::new();
    for dir in state_dirs {
        let meter = dir
            .join(bazaar_agents::labor::worker::ALLOWANCE_FILE)
            .exists()
            .then(|| super::labor::allowance(dir, super::labor::AllowanceCmd::Show))
            .transpose()?;
        let journal = Journal::inspect(dir)?;
        local.push(json!({
            "state_dir": dir.display().to_string(),
            "allowance": meter,
            "payment_attempts": journal.attempts(),
            "recovery_records": journal.recovery(),
        }));
    }
    view["on_this_machine"] = Value::Array(local);
    Ok(view)
}

async fn payments(state_dir: &std::path::Path, action: PaymentsCmd) -> Result<Value> {
    let PaymentsCmd::Resolve { remote, task, paid, not_paid: _, note } = action else {
        // Read as it is: a worker may be running against the journal.
        let journal = Journal::inspect(state_dir)?;
        return Ok(json!({"attempts": journal.attempts(), "recovery": journal.recovery()}));
    };
    let mut journal = Journal::open(state_dir)?;
    let Some(open) = journal.recovery().into_iter().find(|a| a.task == task).cloned() else {
        bail!("no unresolved payment attempt for task {task}");
    };
    let record = remote.client()?.service_authorization(&open.authorization).await?;
    let registry_paid = record.state == "paid";
    if registry_paid != paid {
        bail!(
            "the registry's record of {} says it is {}; resolve it as what the ledger shows",
            open.authorization,
            record.state
        );
    }
    let resolved = journal.resolve(&task, paid, record.payment.as_ref().map(bazaar_cli::wire_json), &note)?;
    Ok(serde_json::to_value(resolved)?)
}

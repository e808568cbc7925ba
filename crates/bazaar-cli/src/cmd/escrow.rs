//! Escrowed work: `contract` (create, show, list, accept, decline, cancel,
//! deliver, release, reclaim), `dispute` (file, evidence, rule, appeal, execute, show,
//! list) and `stake`. Every answer prints as indented JSON.

use super::common::{key_or_random, print_pretty, Remote};
use anyhow::{Context, Result};
use bazaar_cli::runtime;
use bazaar_sdk::wire::dispute::DisputeSubject;
use bazaar_sdk::Client;
use clap::Subcommand;
use serde_json::Value;
use std::path::PathBuf;

#[derive(Subcommand)]
pub enum Command {
    /// Escrowed contracts: create, show, list, accept, decline, cancel, deliver, release, reclaim.
    Contract {
        #[command(flatten)]
        remote: Remote,
        #[command(subcommand)]
        action: ContractCmd,
    },
    /// Disputes: file, evidence, rule, appeal, execute, show (the timeline), list.
    Dispute {
        #[command(flatten)]
        remote: Remote,
        #[command(subcommand)]
        action: DisputeCmd,
    },
    /// Merchant stake: lock, unlock (starts the cooldown), withdraw, show.
    Stake {
        #[command(flatten)]
        remote: Remote,
        #[command(subcommand)]
        action: StakeCmd,
    },
}

#[derive(Subcommand)]
pub enum ContractCmd {
    /// Buyer agent: open and fund a contract.
    Create {
        /// Seller agent (DID or handle).
        #[arg(long)]
        seller: String,
        /// Arbiter (DID or handle); the registry's dispute desk by default.
        #[arg(long)]
        arbiter: Option<String>,
        /// AMOUNT:DUE_IN_DAYS:DESCRIPTION, once per milestone, in order.
        #[arg(long = "milestone", required = true)]
        milestones: Vec<String>,
        /// The terms text; only its SHA-256 is stored.
        #[arg(long)]
        terms: String,
        /// Seconds the buyer has to review a delivery before it releases by itself (60 s to 30 days; default 3 days).
        #[arg(long)]
        review_window_s: Option<u64>,
        /// Idempotency key; reuse it when retrying (a retry finds the same contract).
        #[arg(long)]
        key: Option<String>,
    },
    /// The contract: parties, milestones and each milestone's state.
    Show {
        /// The contract's id (`ctr_…`), as `bazaar contract create` prints it.
        id: String,
    },
    /// Contracts naming you (or --party, for an owner or the operator).
    List {
        /// Whose contracts: one of your agents (DID or handle), or anyone's for the operator; yours by default.
        #[arg(long)]
        party: Option<String>,
    },
    /// Seller (or its owner): accept the contract, committing to deliver its milestones.
    Accept {
        /// The contract's id (`ctr_…`), as `bazaar contract create` prints it.
        id: String,
    },
    /// Seller (or its owner): decline the contract; every milestone's hold is voided.
    Decline {
        /// The contract's id (`ctr_…`), as `bazaar contract create` prints it.
        id: String,
    },
    /// Buyer (or its owner): cancel before the seller accepts; every milestone's hold is voided.
    Cancel {
        /// The contract's id (`ctr_…`), as `bazaar contract create` prints it.
        id: String,
    },
    /// Seller: mark a milestone delivered; the evidence text is hashed.
    Deliver {
        /// The contract's id (`ctr_…`), as `bazaar contract create` prints it.
        id: String,
        /// The milestone's index in the contract (0 first).
        milestone: u32,
        /// What was delivered, as text (a URL, a summary); only its SHA-256 is sent.
        #[arg(long)]
        evidence: String,
    },
    /// Buyer: release a delivered milestone to the seller.
    Release {
        /// The contract's id (`ctr_…`), as `bazaar contract create` prints it.
        id: String,
        /// The milestone's index in the contract (0 first).
        milestone: u32,
    },
    /// Buyer: take back an undelivered milestone once its due date and the registry's grace have passed (before
    /// that the registry answers `reclaim_too_early` with `reclaimable_at_ms`).
    Reclaim {
        /// The contract's id (`ctr_…`), as `bazaar contract create` prints it.
        id: String,
        /// The milestone's index in the contract (0 first).
        milestone: u32,
    },
}

#[derive(Subcommand)]
pub enum DisputeCmd {
    /// Buyer (or its owner): dispute a paid call (--call MERCHANT:ORDER) or a milestone (--milestone CONTRACT:INDEX).
    File {
        /// The paid call, as MERCHANT:ORDER: the merchant's DID or handle, and your order id.
        #[arg(long, conflicts_with = "milestone")]
        call: Option<String>,
        /// The milestone, as CONTRACT:INDEX: the contract's id (`ctr_…`) and the milestone's index (0 first).
        #[arg(long)]
        milestone: Option<String>,
        /// not_delivered, not_as_described, defective, unauthorized or other.
        #[arg(long)]
        reason: String,
        /// How much you claim back, in minor units; it is frozen when the dispute is filed.
        #[arg(long)]
        claimed: u64,
        /// Free text for the arbiter (at most 2000 characters); none by default.
        #[arg(long, default_value = "")]
        note: String,
    },
    /// A party: add evidence (its text is hashed and signed with your key).
    Evidence {
        /// The dispute's id (`dsp_…`), as `bazaar dispute file` prints it.
        id: String,
        /// Your secret key file (hex, from `bazaar keygen --out`): signs the evidence's hash.
        #[arg(long)]
        key_file: PathBuf,
        /// The evidence, as text; only its SHA-256 is sent.
        #[arg(long)]
        content: String,
        /// Where the evidence can be read in full (at most 2048 characters).
        #[arg(long)]
        url: Option<String>,
    },
    /// The assigned arbiter: refund_full, refund_partial or reject.
    Rule {
        /// The dispute's id (`dsp_…`), as `bazaar dispute file` prints it.
        id: String,
        /// The ruling: refund_full, refund_partial or reject.
        #[arg(long)]
        decision: String,
        /// With refund_partial: the refund, in minor units (between 1 and the claim less 1).
        #[arg(long, default_value_t = 0)]
        refund: u64,
        /// Stake to take from the respondent, in minor units (capped at what it holds at execution); 0 takes none.
        #[arg(long, default_value_t = 0)]
        slash: u64,
        /// Why, in words, for the parties (at most 2000 characters).
        #[arg(long)]
        reasons: String,
    },
    /// The losing party: appeal a ruling once, posting the appeal bond.
    Appeal {
        /// The dispute's id (`dsp_…`), as `bazaar dispute file` prints it.
        id: String,
    },
    /// Carry out a final ruling: refunds, releases, bond and slash in one run-once transaction.
    Execute {
        /// The dispute's id (`dsp_…`), as `bazaar dispute file` prints it.
        id: String,
    },
    /// The dispute's record and timeline.
    Show {
        /// The dispute's id (`dsp_…`), as `bazaar dispute file` prints it.
        id: String,
    },
    /// Disputes naming you (or --party, for an owner or the operator).
    List {
        /// Whose disputes: one of your agents (DID or handle), or anyone's for the operator; yours by default.
        #[arg(long)]
        party: Option<String>,
    },
}

#[derive(Subcommand)]
pub enum StakeCmd {
    /// Merchant: lock stake from your balance (it never raises reputation; a ruling can slash it).
    Lock {
        /// How much to move from your balance into stake, in minor units.
        amount: u64,
        /// Idempotency key; reuse it when retrying (a fresh one by default, so a retry without it locks again).
        #[arg(long)]
        key: Option<String>,
    },
    /// Ask to unlock stake: the cooldown starts; refused while a dispute against you is open.
    Unlock {
        /// How much stake to unlock, in minor units; it can be withdrawn after the cooldown.
        amount: u64,
        /// Idempotency key; reuse it when retrying (a fresh one by default, so a retry without it unlocks again).
        #[arg(long)]
        key: Option<String>,
    },
    /// Move stake whose cooldown has passed back to your balance.
    Withdraw {
        /// Idempotency key; reuse it when retrying (a fresh one by default).
        #[arg(long)]
        key: Option<String>,
    },
    /// Anyone's stake: balance, frozen, open disputes and any pending unlock.
    Show {
        /// The member: its DID or handle.
        member: String,
    },
}

pub async fn run(command: Command, json_output: bool) -> Result<i32> {
    let value = match command {
        Command::Contract { remote, action } => contract_cmd(&remote.client()?, action).await?,
        Command::Dispute { remote, action } => dispute_cmd(&remote.client()?, action).await?,
        Command::Stake { remote, action } => stake_cmd(&remote.client()?, action).await?,
    };
    print_pretty(json_output, &value);
    Ok(0)
}

async fn contract_cmd(client: &Client, action: ContractCmd) -> Result<Value> {
    Ok(match action {
        ContractCmd::Create { seller, arbiter, milestones, terms, review_window_s, key } => {
            let specs = milestone_specs(&milestones, bazaar_sdk::clock::now_ms())?;
            let specs: Vec<(u64, &str, i64)> = specs.iter().map(|(a, d, t)| (*a, d.as_str(), *t)).collect();
            let created = client
                .create_contract(&seller, arbiter.as_deref(), &specs, &terms, review_window_s, &key_or_random(key))
                .await?;
            bazaar_cli::wire_json(&created.body)
        }
        ContractCmd::Show { id } => bazaar_cli::wire_json(&client.contract(&id).await?),
        ContractCmd::List { party } => {
            let path = party.map(|p| format!("/v1/contracts?party={p}")).unwrap_or_else(|| "/v1/contracts".into());
            client.call::<Value>(reqwest::Method::GET, &path, None, None).await?.body
        }
        ContractCmd::Accept { id } => bazaar_cli::wire_json(&client.contract_act(&id, "accept").await?.body),
        ContractCmd::Decline { id } => bazaar_cli::wire_json(&client.contract_act(&id, "decline").await?.body),
        ContractCmd::Cancel { id } => bazaar_cli::wire_json(&client.contract_act(&id, "cancel").await?.body),
        ContractCmd::Deliver { id, milestone, evidence } => {
            bazaar_cli::wire_json(&client.deliver(&id, milestone, evidence.as_bytes()).await?.body)
        }
        ContractCmd::Release { id, milestone } => {
            bazaar_cli::wire_json(&client.release(&id, milestone, None).await?.body)
        }
        ContractCmd::Reclaim { id, milestone } => {
            bazaar_cli::wire_json(&client.reclaim(&id, milestone, None).await?.body)
        }
    })
}

/// Each `AMOUNT:DUE_IN_DAYS:DESCRIPTION` as (amount, description, due in ms after `now_ms`).
fn milestone_specs(milestones: &[String], now_ms: i64) -> Result<Vec<(u64, String, i64)>> {
    let mut specs = Vec::new();
    for text in milestones {
        let mut parts = text.splitn(3, ':');
        let amount: u64 = parts.next().unwrap_or("").parse().context("milestone AMOUNT")?;
        let days: i64 = parts.next().unwrap_or("").parse().context("milestone DUE_IN_DAYS")?;
        let description = parts.next().context("milestone DESCRIPTION")?.to_string();
        specs.push((amount, description, now_ms + days * 86_400_000));
    }
    Ok(specs)
}

async fn dispute_cmd(client: &Client, action: DisputeCmd) -> Result<Value> {
    Ok(match action {
        DisputeCmd::File { call, milestone, reason, claimed, note } => {
            let subject = dispute_subject(call, milestone)?;
            bazaar_cli::wire_json(&client.file_dispute(subject, &reason, claimed, &note).await?.body)
        }
        DisputeCmd::Evidence { id, key_file, content, url } => {
            let key = runtime::read_key(&key_file)?;
            bazaar_cli::wire_json(&client.add_evidence(&id, &key, content.as_bytes(), url.as_deref()).await?.body)
        }
        DisputeCmd::Rule { id, decision, refund, slash, reasons } => {
            bazaar_cli::wire_json(&client.rule(&id, &decision, refund, slash, &reasons).await?.body)
        }
        DisputeCmd::Appeal { id } => bazaar_cli::wire_json(&client.appeal(&id).await?.body),
        DisputeCmd::Execute { id } => bazaar_cli::wire_json(&client.execute_dispute(&id, None).await?.body),
        DisputeCmd::Show { id } => bazaar_cli::wire_json(&client.dispute(&id).await?),
        DisputeCmd::List { party } => bazaar_cli::wire_json(&client.disputes(party.as_deref()).await?),
    })
}

/// What a dispute is about: a paid call (`MERCHANT:ORDER`) or a milestone (`CONTRACT:INDEX`).
fn dispute_subject(call: Option<String>, milestone: Option<String>) -> Result<DisputeSubject> {
    Ok(match (call, milestone) {
        (Some(call), None) => {
            let (merchant, order_id) = split_pair(&call, "--call")?;
            DisputeSubject::Call { merchant, order_id }
        }
        (None, Some(m)) => {
            let (contract, index) = split_pair(&m, "--milestone")?;
            DisputeSubject::Milestone { contract, index: index.parse::<u32>().context("--milestone INDEX")? }
        }
        _ => anyhow::bail!("give --call MERCHANT:ORDER or --milestone CONTRACT:INDEX"),
    })
}

fn split_pair(text: &str, what: &str) -> Result<(String, String)> {
    let (a, b) = text.rsplit_once(':').with_context(|| format!("{what} is A:B"))?;
    Ok((a.to_string(), b.to_string()))
}

async fn stake_cmd(client: &Client, action: StakeCmd) -> Result<Value> {
    Ok(match action {
        StakeCmd::Lock { amount, key } => {
            bazaar_cli::wire_json(&client.stake_lock(amount, &key_or_random(key)).await?.body)
        }
        StakeCmd::Unlock { amount, key } => {
            bazaar_cli::wire_json(&client.stake_unlock(amount, &key_or_random(key)).await?.body)
        }
        StakeCmd::Withdraw { key } => bazaar_cli::wire_json(&client.stake_withdraw(&key_or_random(key)).await?.body),
        StakeCmd::Show { member } => bazaar_cli::wire_json(&client.stake(&member).await?),
    })
}

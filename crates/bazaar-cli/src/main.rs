//! The `bazaar` binary: serve a registry, run the demo, audit a store, and the
//! owner/agent/budget/mint/pay/verify commands. `anyhow` lives here only.

use bazaar_cli::{demo, runtime, StoreArgs};

use anyhow::{Context, Result};
use bazaar_sdk::Client;
use clap::{Args, Parser, Subcommand};
use serde_json::{json, Value};
use std::path::PathBuf;

/// The port `bazaar serve` listens on by default…
const DEFAULT_PORT: u16 = 7878;
/// …and the registry the client commands call by default.
const DEFAULT_REGISTRY: &str = "http://127.0.0.1:7878";

#[derive(Parser)]
#[command(name = "bazaar", version, about = "A registry where software agents pay each other per call, exactly once.")]
struct Cli {
    /// Print machine-readable JSON instead of prose.
    #[arg(long, global = true)]
    json: bool,
    #[command(subcommand)]
    command: Command,
}

#[derive(Args, Clone)]
struct Remote {
    /// Registry base URL.
    #[arg(long, env = "BAZAAR_REGISTRY", default_value = DEFAULT_REGISTRY)]
    registry: String,
    /// Bearer credential (or use --credential-file).
    #[arg(long, env = "BAZAAR_CREDENTIAL", hide_env_values = true)]
    credential: Option<String>,
    /// File holding the bearer credential.
    #[arg(long, env = "BAZAAR_CREDENTIAL_FILE")]
    credential_file: Option<PathBuf>,
}

impl Remote {
    fn client(&self) -> Result<Client> {
        let credential = match (&self.credential, &self.credential_file) {
            (Some(c), _) => Some(c.clone()),
            (None, Some(path)) => Some(
                std::fs::read_to_string(path)
                    .with_context(|| format!("reading {}", path.display()))?
                    .trim()
                    .to_string(),
            ),
            (None, None) => None,
        };
        Ok(Client::new(&self.registry, credential))
    }
}

#[derive(Subcommand)]
enum Command {
    /// Run a registry over HTTP on 127.0.0.1.
    Serve {
        #[command(flatten)]
        store: StoreArgs,
        #[command(flatten)]
        windows: bazaar_cli::WindowArgs,
        #[arg(long, default_value_t = DEFAULT_PORT)]
        port: u16,
        /// Operator credential to set on first start (otherwise one is drawn and written to <data-dir>/operator-credential).
        #[arg(long, env = "BAZAAR_OPERATOR_CREDENTIAL", hide_env_values = true)]
        operator_credential: Option<String>,
        /// The base URL peers reach this registry at (published in its card); default http://127.0.0.1:<port>.
        #[arg(long)]
        public_url: Option<String>,
    },
    /// Verify the event chain end to end and recompute every balance; exits 1 on any mismatch.
    Audit {
        #[command(flatten)]
        store: StoreArgs,
    },
    /// The restock story on a fresh embedded registry, narrated.
    Demo {
        /// Paid calls to make.
        #[arg(long, default_value_t = 100)]
        calls: u32,
    },
    /// Draw an Ed25519 keypair; prints its DID and secret.
    Keygen {
        /// Write the secret (hex) to this file, mode 0600.
        #[arg(long)]
        out: Option<PathBuf>,
    },
    /// Operator: register an owner.
    Owner {
        #[command(flatten)]
        remote: Remote,
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
        #[arg(long)]
        invite: String,
        #[arg(long)]
        handle: String,
        #[arg(long)]
        key_file: PathBuf,
    },
    /// Owner: set an agent's ceilings.
    Budget {
        #[command(flatten)]
        remote: Remote,
        agent: String,
        #[arg(long)]
        per_call: u64,
        #[arg(long)]
        per_day: u64,
        #[arg(long)]
        total: u64,
    },
    /// Operator: mint units into an owner's account.
    Mint {
        #[command(flatten)]
        remote: Remote,
        owner: String,
        amount: u64,
        /// Idempotency key; reuse it when retrying.
        #[arg(long)]
        key: Option<String>,
    },
    /// Owner: move units into an agent's budget account.
    Fund {
        #[command(flatten)]
        remote: Remote,
        agent: String,
        amount: u64,
        #[arg(long)]
        key: Option<String>,
    },
    /// Buyer agent: get a token for an order and call a paid URL with it.
    Pay {
        #[command(flatten)]
        remote: Remote,
        url: String,
        #[arg(long)]
        merchant: String,
        #[arg(long)]
        max: u64,
        #[arg(long)]
        order: String,
    },
    /// Merchant: check a token's genuineness and state. A receipt check, never a work order.
    Verify {
        #[command(flatten)]
        remote: Remote,
        token: String,
        /// Check genuineness offline with this registry public key (base64url or hex,
        /// from /.well-known/bazaar); the state then stays unknown.
        #[arg(long)]
        registry_key: Option<String>,
    },
    /// Who am I, with balance and budget.
    Me {
        #[command(flatten)]
        remote: Remote,
    },
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
        handle: String,
    },
    /// Buyer (or its owner): void an unsettled token and release its hold.
    Void {
        #[command(flatten)]
        remote: Remote,
        jti: String,
    },
    /// Escrowed contracts: create, show, list, accept, decline, cancel, deliver, release.
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
    /// Reputation of a DID or handle: local figures, stake, imports, combined score.
    Reputation {
        #[command(flatten)]
        remote: Remote,
        member: String,
    },
    /// Trust passports: issue (from a registry), verify (offline), import (a peer's, at this registry).
    Passport {
        #[command(subcommand)]
        action: PassportCmd,
    },
    /// Operator: peer registries (federation).
    Federation {
        #[command(flatten)]
        remote: Remote,
        #[command(subcommand)]
        action: FederationCmd,
    },
    /// The registry's signing keys: show the published history, or rotate (operator).
    Keys {
        #[command(flatten)]
        remote: Remote,
        #[command(subcommand)]
        action: KeysCmd,
    },
    /// Operator: read the hash-chained event ledger, a page at a time.
    Events {
        #[command(flatten)]
        remote: Remote,
        #[arg(long, default_value_t = 0)]
        after: u64,
        #[arg(long, default_value_t = bazaar_types::limits::PAGE_LIMIT_MAX)]
        limit: usize,
    },
}

#[derive(Subcommand)]
enum PassportCmd {
    /// Ask the registry for a signed passport (yours, or an agent's you own).
    Issue {
        #[command(flatten)]
        remote: Remote,
        #[arg(long)]
        subject: Option<String>,
        /// Write the passport here instead of stdout.
        #[arg(long)]
        out: Option<PathBuf>,
    },
    /// Verify a passport file offline: proof, validity window, and (with --keys) that
    /// its key belongs to the registry's published key history. Exits 1 if refused.
    Verify {
        file: PathBuf,
        /// A key history as served at /.well-known/bazaar-keys.
        #[arg(long)]
        keys: Option<PathBuf>,
    },
    /// Present a peer registry's passport to this registry, signed with the subject's key.
    Import {
        #[command(flatten)]
        remote: Remote,
        file: PathBuf,
        /// The subject's secret key file (from `keygen --out`).
        #[arg(long)]
        key: PathBuf,
    },
}

#[derive(Subcommand)]
enum FederationCmd {
    /// Recognise a peer registry: its card at URL must be signed by DID's key history.
    Add {
        url: String,
        did: String,
        /// How much its passports count here, in basis points (10000 = like local work).
        #[arg(long, default_value_t = 5_000)]
        weight_bps: u32,
        /// Fee this registry takes on settlements relayed from that registry's buyers.
        #[arg(long, default_value_t = 0)]
        fee_bps: u32,
        #[arg(long, default_value_t = bazaar_types::limits::ESCROW_THRESHOLD_MINOR)]
        per_call_max: u64,
        #[arg(long, default_value_t = 10_000_000)]
        outstanding_max: u64,
    },
    /// The peers this registry recognises.
    List,
}

#[derive(Subcommand)]
enum KeysCmd {
    /// The published key history.
    Show,
    /// Operator: rotate to a fresh key; old passports stay verifiable through the history.
    Rotate,
}

#[derive(Subcommand)]
enum ContractCmd {
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
        #[arg(long)]
        review_window_s: Option<u64>,
        /// Idempotency key; reuse it when retrying (a retry finds the same contract).
        #[arg(long)]
        key: Option<String>,
    },
    Show {
        id: String,
    },
    /// Contracts naming you (or --party, for an owner or the operator).
    List {
        #[arg(long)]
        party: Option<String>,
    },
    Accept {
        id: String,
    },
    Decline {
        id: String,
    },
    Cancel {
        id: String,
    },
    /// Seller: mark a milestone delivered; the evidence text is hashed.
    Deliver {
        id: String,
        milestone: u32,
        #[arg(long)]
        evidence: String,
    },
    /// Buyer: release a delivered milestone to the seller.
    Release {
        id: String,
        milestone: u32,
    },
}

#[derive(Subcommand)]
enum DisputeCmd {
    /// Buyer (or its owner): dispute a paid call (--call MERCHANT:ORDER) or a milestone (--milestone CONTRACT:INDEX).
    File {
        #[arg(long, conflicts_with = "milestone")]
        call: Option<String>,
        #[arg(long)]
        milestone: Option<String>,
        /// not_delivered, not_as_described, defective, unauthorized or other.
        #[arg(long)]
        reason: String,
        #[arg(long)]
        claimed: u64,
        #[arg(long, default_value = "")]
        note: String,
    },
    /// A party: add evidence (its text is hashed and signed with your key).
    Evidence {
        id: String,
        #[arg(long)]
        key_file: PathBuf,
        #[arg(long)]
        content: String,
        #[arg(long)]
        url: Option<String>,
    },
    /// The assigned arbiter: refund_full, refund_partial or reject.
    Rule {
        id: String,
        #[arg(long)]
        decision: String,
        #[arg(long, default_value_t = 0)]
        refund: u64,
        #[arg(long, default_value_t = 0)]
        slash: u64,
        #[arg(long)]
        reasons: String,
    },
    Appeal {
        id: String,
    },
    Execute {
        id: String,
    },
    /// The dispute's record and timeline.
    Show {
        id: String,
    },
    List {
        #[arg(long)]
        party: Option<String>,
    },
}

#[derive(Subcommand)]
enum StakeCmd {
    Lock {
        amount: u64,
        #[arg(long)]
        key: Option<String>,
    },
    Unlock {
        amount: u64,
        #[arg(long)]
        key: Option<String>,
    },
    Withdraw {
        #[arg(long)]
        key: Option<String>,
    },
    Show {
        member: String,
    },
}

fn split_pair(text: &str, what: &str) -> Result<(String, String)> {
    let (a, b) = text.rsplit_once(':').with_context(|| format!("{what} is A:B"))?;
    Ok((a.to_string(), b.to_string()))
}

async fn contract_cmd(client: &Client, action: ContractCmd) -> Result<Value> {
    Ok(match action {
        ContractCmd::Create { seller, arbiter, milestones, terms, review_window_s, key } => {
            let now = bazaar_types::Clock::now(&bazaar_cli::runtime::SystemClock).ms();
            let mut specs = Vec::new();
            for text in &milestones {
                let mut parts = text.splitn(3, ':');
                let amount: u64 = parts.next().unwrap_or("").parse().context("milestone AMOUNT")?;
                let days: i64 = parts.next().unwrap_or("").parse().context("milestone DUE_IN_DAYS")?;
                let description = parts.next().context("milestone DESCRIPTION")?.to_string();
                specs.push((amount, description, now + days * 86_400_000));
            }
            let specs: Vec<(u64, &str, i64)> = specs.iter().map(|(a, d, t)| (*a, d.as_str(), *t)).collect();
            client
                .create_contract(&seller, arbiter.as_deref(), &specs, &terms, review_window_s, &key_or_random(key))
                .await?
                .body
        }
        ContractCmd::Show { id } => client.contract(&id).await?,
        ContractCmd::List { party } => {
            let path = party.map(|p| format!("/v1/contracts?party={p}")).unwrap_or_else(|| "/v1/contracts".into());
            client.call(reqwest::Method::GET, &path, None, None).await?.body
        }
        ContractCmd::Accept { id } => client.contract_act(&id, "accept").await?.body,
        ContractCmd::Decline { id } => client.contract_act(&id, "decline").await?.body,
        ContractCmd::Cancel { id } => client.contract_act(&id, "cancel").await?.body,
        ContractCmd::Deliver { id, milestone, evidence } => {
            client.deliver(&id, milestone, evidence.as_bytes()).await?.body
        }
        ContractCmd::Release { id, milestone } => client.release(&id, milestone, None).await?.body,
    })
}

async fn dispute_cmd(client: &Client, action: DisputeCmd) -> Result<Value> {
    Ok(match action {
        DisputeCmd::File { call, milestone, reason, claimed, note } => {
            let subject = match (call, milestone) {
                (Some(call), None) => {
                    let (merchant, order) = split_pair(&call, "--call")?;
                    json!({"type": "call", "merchant": merchant, "order_id": order})
                }
                (None, Some(m)) => {
                    let (contract, index) = split_pair(&m, "--milestone")?;
                    json!({"type": "milestone", "contract": contract, "index": index.parse::<u32>()?})
                }
                _ => anyhow::bail!("give --call MERCHANT:ORDER or --milestone CONTRACT:INDEX"),
            };
            client.file_dispute(subject, &reason, claimed, &note).await?.body
        }
        DisputeCmd::Evidence { id, key_file, content, url } => {
            let key = runtime::read_key(&key_file)?;
            client.add_evidence(&id, &key, content.as_bytes(), url.as_deref()).await?.body
        }
        DisputeCmd::Rule { id, decision, refund, slash, reasons } => {
            client.rule(&id, &decision, refund, slash, &reasons).await?.body
        }
        DisputeCmd::Appeal { id } => client.appeal(&id).await?.body,
        DisputeCmd::Execute { id } => client.execute_dispute(&id, None).await?.body,
        DisputeCmd::Show { id } => client.dispute(&id).await?,
        DisputeCmd::List { party } => client.disputes(party.as_deref()).await?,
    })
}

async fn stake_cmd(client: &Client, action: StakeCmd) -> Result<Value> {
    Ok(match action {
        StakeCmd::Lock { amount, key } => client.stake_lock(amount, &key_or_random(key)).await?.body,
        StakeCmd::Unlock { amount, key } => client.stake_unlock(amount, &key_or_random(key)).await?.body,
        StakeCmd::Withdraw { key } => client.stake_withdraw(&key_or_random(key)).await?.body,
        StakeCmd::Show { member } => client.stake(&member).await?,
    })
}

fn main() {
    let cli = Cli::parse();
    let json_output = cli.json;
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build().expect("tokio runtime");
    match runtime.block_on(run(cli)) {
        Ok(code) => std::process::exit(code),
        Err(error) => {
            if json_output {
                println!("{}", json!({"error": format!("{error:#}")}));
            } else {
                eprintln!("error: {error:#}");
            }
            std::process::exit(2);
        }
    }
}

fn print(json_output: bool, value: &Value, human: impl FnOnce(&Value) -> String) {
    if json_output {
        println!("{value}");
    } else {
        println!("{}", human(value));
    }
}

fn key_or_random(key: Option<String>) -> String {
    key.unwrap_or_else(|| format!("cli-{}", bazaar_server::random_b64(16)))
}

async fn run(cli: Cli) -> Result<i32> {
    let j = cli.json;
    match cli.command {
        Command::Serve { store, windows, port, operator_credential, public_url } => {
            runtime::serve(store, windows, port, operator_credential, public_url).await.map(|_| 0)
        }
        Command::Audit { store } => runtime::audit(store, j).await,
        Command::Demo { calls } => demo::run(calls, j).await,
        Command::Keygen { out } => {
            let key = bazaar_sdk::generate_key();
            let secret = hex::encode(key.to_bytes());
            let public = hex::encode(key.verifying_key().as_bytes());
            if let Some(path) = &out {
                runtime::write_secret(path, &secret)?;
            }
            let value = json!({"did": bazaar_sdk::did_of(&key), "public_key": public, "secret_key": if out.is_some() { Value::Null } else { json!(secret) }});
            print(j, &value, |v| {
                format!(
                    "did: {}\npublic key: {}\n{}",
                    v["did"].as_str().unwrap_or(""),
                    public,
                    out.as_ref()
                        .map(|p| format!("secret key written to {}", p.display()))
                        .unwrap_or_else(|| format!("secret key: {secret} (keep it safe)"))
                )
            });
            Ok(0)
        }
        Command::Owner { remote, handle, public_key } => {
            let client = remote.client()?;
            let body = json!({"public_key": public_key, "handle": handle});
            let value = client.call(reqwest::Method::POST, "/v1/owners", Some(body), None).await?.body;
            print(j, &value, |v| {
                format!(
                    "owner {} ({})\ncredential (shown once): {}",
                    v["handle"].as_str().unwrap_or(""),
                    v["id"].as_str().unwrap_or(""),
                    v["credential"].as_str().unwrap_or("")
                )
            });
            Ok(0)
        }
        Command::Invite { remote } => {
            let code = remote.client()?.issue_invite().await?;
            print(j, &json!({"invite_code": code}), |_| format!("invite code (single use, 24 h): {code}"));
            Ok(0)
        }
        Command::Enroll { remote, invite, handle, key_file } => {
            let key = runtime::read_key(&key_file)?;
            let value = remote.client()?.redeem_invite(&invite, &key, &handle).await?;
            print(j, &value, |v| {
                format!(
                    "enrolled {} ({}) for owner {}\ncredential (shown once): {}",
                    v["handle"].as_str().unwrap_or(""),
                    v["id"].as_str().unwrap_or(""),
                    v["owner"].as_str().unwrap_or(""),
                    v["credential"].as_str().unwrap_or("")
                )
            });
            Ok(0)
        }
        Command::Budget { remote, agent, per_call, per_day, total } => {
            let value = remote.client()?.set_budget(&agent, per_call, per_day, total).await?;
            print(j, &value, |v| {
                format!(
                    "budget for {}: per call {}, per day {}, total {}",
                    agent, v["per_call_max_minor"], v["per_day_max_minor"], v["total_max_minor"]
                )
            });
            Ok(0)
        }
        Command::Mint { remote, owner, amount, key } => {
            let value = remote.client()?.mint(&owner, amount, &key_or_random(key)).await?;
            print(j, &value, |v| format!("minted {} into {owner} (transfers {})", v["amount_minor"], v["transfers"]));
            Ok(0)
        }
        Command::Fund { remote, agent, amount, key } => {
            let value = remote.client()?.fund(&agent, amount, &key_or_random(key)).await?;
            print(j, &value, |v| format!("moved {} into {agent}'s budget", v["amount_minor"]));
            Ok(0)
        }
        Command::Pay { remote, url, merchant, max, order } => {
            let paid = match remote.client()?.purchase(&url, &merchant, max, &order).await? {
                bazaar_sdk::Purchase::Paid(paid) => paid,
                bazaar_sdk::Purchase::Escrowed(contract) => {
                    print(j, &contract, |c| {
                        format!(
                            "{max} is above the registry's escrow threshold: opened escrowed contract {} \
                             (one milestone, {} held). The merchant accepts and delivers; release it with \
                             `bazaar contract release {} 0`.",
                            c["id"].as_str().unwrap_or(""),
                            c["held_minor"],
                            c["id"].as_str().unwrap_or("")
                        )
                    });
                    return Ok(0);
                }
            };
            let value = json!({"status": paid.status, "settlement": paid.settlement, "replayed": paid.replayed, "attempts": paid.attempts, "body": paid.body});
            print(j, &value, |_| {
                format!(
                    "{} after {} attempt(s); settlement {}\n{}",
                    paid.status,
                    paid.attempts,
                    paid.settlement.clone().unwrap_or_else(|| "-".into()),
                    paid.body
                )
            });
            Ok(if paid.status < 400 { 0 } else { 1 })
        }
        Command::Verify { token, registry_key: Some(key), .. } => {
            let claims = bazaar_sdk::token::verify_offline(&token, &key)?;
            let value = json!({"genuine": true, "state": "unknown offline", "claims": claims});
            print(j, &value, |v| {
                format!("genuine: true (checked offline)\nclaims: {}\nstate: ask the registry; verify is never a work order", v["claims"])
            });
            Ok(0)
        }
        Command::Verify { remote, token, registry_key: None } => {
            let value = remote.client()?.verify(&token).await?;
            print(j, &value, |v| {
                format!(
                    "genuine: {}\nstate: {}\n(verify is a receipt check, never a work order)",
                    v["genuine"], v["state"]
                )
            });
            Ok(0)
        }
        Command::Me { remote } => {
            let value = remote.client()?.me().await?;
            print(j, &value, |v| serde_json::to_string_pretty(v).unwrap_or_default());
            Ok(0)
        }
        Command::Attack { list: true, .. } => {
            for attack in bazaar_cli::attack::CATALOGUE {
                println!(
                    "{:<18} must be refused with {} {}",
                    attack.name,
                    attack.expect_status(),
                    attack.expect.as_str()
                );
            }
            Ok(0)
        }
        Command::Attack { remote, names, list: false, .. } => {
            let client = remote.client()?;
            let credential = client
                .credential()
                .context("the attack needs the operator credential (--credential or --credential-file)")?;
            let say = |line: String| {
                if !j {
                    println!("{line}");
                }
            };
            let verdicts = bazaar_cli::attack::run(client.base(), credential, &names, &say).await?;
            if j {
                println!("{}", serde_json::to_string(&verdicts)?);
            }
            let held = verdicts.iter().filter(|v| v.held()).count();
            say(format!("\n{held} of {} attacks refused with nothing changed", verdicts.len()));
            Ok(if held == verdicts.len() { 0 } else { 1 })
        }
        Command::Rotate { remote } => {
            let credential = remote.client()?.rotate_credential().await?;
            print(j, &json!({"credential": credential}), |_| {
                format!("new credential (shown once; the old one is dead): {credential}")
            });
            Ok(0)
        }
        Command::Rename { remote, member, handle } => {
            let body = json!({"handle": handle});
            let path = format!("/v1/members/{member}/handle");
            let value = remote.client()?.call(reqwest::Method::PUT, &path, Some(body), None).await?.body;
            print(j, &value, |v| format!("renamed {} to {}; {} stays reserved", v["from"], v["to"], v["from"]));
            Ok(0)
        }
        Command::Void { remote, jti } => {
            let value = remote.client()?.void(&jti).await?;
            print(j, &value, |v| format!("voided {jti}; released {}", v["released_minor"]));
            Ok(0)
        }
        Command::Contract { remote, action } => {
            let value = contract_cmd(&remote.client()?, action).await?;
            print(j, &value, |v| serde_json::to_string_pretty(v).unwrap_or_default());
            Ok(0)
        }
        Command::Dispute { remote, action } => {
            let value = dispute_cmd(&remote.client()?, action).await?;
            print(j, &value, |v| serde_json::to_string_pretty(v).unwrap_or_default());
            Ok(0)
        }
        Command::Stake { remote, action } => {
            let value = stake_cmd(&remote.client()?, action).await?;
            print(j, &value, |v| serde_json::to_string_pretty(v).unwrap_or_default());
            Ok(0)
        }
        Command::Reputation { remote, member } => {
            let value = remote.client()?.reputation(&member).await?;
            print(j, &value, |v| {
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
            });
            Ok(0)
        }
        Command::Passport { action } => passport_cmd(action, j).await,
        Command::Federation { remote, action } => {
            let client = remote.client()?;
            let value = match action {
                FederationCmd::Add { url, did, weight_bps, fee_bps, per_call_max, outstanding_max } => {
                    client.add_peer(&url, &did, weight_bps, (fee_bps, per_call_max, outstanding_max)).await?
                }
                FederationCmd::List => client.peers().await?,
            };
            print(j, &value, |v| serde_json::to_string_pretty(v).unwrap_or_default());
            Ok(0)
        }
        Command::Keys { remote, action } => {
            let client = remote.client()?;
            let value = match action {
                KeysCmd::Show => client.key_history().await?,
                KeysCmd::Rotate => client.rotate_key().await?,
            };
            print(j, &value, |v| serde_json::to_string_pretty(v).unwrap_or_default());
            Ok(0)
        }
        Command::Events { remote, after, limit } => {
            let value = remote.client()?.events(after, limit).await?;
            print(j, &value, |v| {
                let lines: Vec<String> = v["events"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .map(|e| {
                        format!(
                            "{:>6} {} {} by {}",
                            e["seq"],
                            e["kind"].as_str().unwrap_or(""),
                            &e["hash"].as_str().unwrap_or("")[..12.min(e["hash"].as_str().unwrap_or("").len())],
                            e["authored_by"].as_str().unwrap_or("")
                        )
                    })
                    .collect();
                lines.join("\n")
            });
            Ok(0)
        }
    }
}

async fn passport_cmd(action: PassportCmd, j: bool) -> Result<i32> {
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
            let text = std::fs::read_to_string(&file).with_context(|| format!("reading {}", file.display()))?;
            let passport: Value =
                serde_json::from_str(&text).with_context(|| format!("{} is not JSON", file.display()))?;
            let verdict = bazaar_cli::passport::verify_file(&passport, keys.as_deref(), bazaar_cli::runtime_now_ms())?;
            print(j, &verdict, |v| {
                if v["valid"] == true {
                    format!(
                        "VALID: {} for {} (score {} bps, {} settled), signed by {}{}, valid until {}",
                        v["id"].as_str().unwrap_or(""),
                        v["subject"].as_str().unwrap_or(""),
                        v["figures"]["scoreBps"],
                        v["figures"]["settledCount"],
                        v["key"].as_str().unwrap_or(""),
                        v["registry"].as_str().map(|r| format!(" of registry {r}")).unwrap_or_else(|| {
                            " (no --keys: the key was not checked against a registry's history)".into()
                        }),
                        v["valid_until"].as_str().unwrap_or("")
                    )
                } else {
                    format!("INVALID: {} — {}", v["code"].as_str().unwrap_or(""), v["detail"].as_str().unwrap_or(""))
                }
            });
            Ok(if verdict["valid"] == true { 0 } else { 1 })
        }
        PassportCmd::Import { remote, file, key } => {
            let text = std::fs::read_to_string(&file).with_context(|| format!("reading {}", file.display()))?;
            let passport: Value = serde_json::from_str(&text)?;
            let client = remote.client()?;
            let audience = client.well_known().await?["did"].as_str().unwrap_or_default().to_string();
            let value = client.import_passport(&passport, &runtime::read_key(&key)?, &audience).await?;
            print(j, &value, |v| serde_json::to_string_pretty(v).unwrap_or_default());
            Ok(0)
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_default_registry_is_the_default_serve_port() {
        assert_eq!(super::DEFAULT_REGISTRY, format!("http://127.0.0.1:{}", super::DEFAULT_PORT));
    }
}

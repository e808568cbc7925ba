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
        #[arg(long, default_value_t = DEFAULT_PORT)]
        port: u16,
        /// Operator credential to set on first start (otherwise one is drawn and written to <data-dir>/operator-credential).
        #[arg(long, env = "BAZAAR_OPERATOR_CREDENTIAL", hide_env_values = true)]
        operator_credential: Option<String>,
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
        /// Attack names; none means all.
        names: Vec<String>,
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
        Command::Serve { store, port, operator_credential } => {
            runtime::serve(store, port, operator_credential).await.map(|_| 0)
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
            let paid = remote.client()?.pay(&url, &merchant, max, &order).await?;
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
        Command::Attack { remote, names, list: false } => {
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

#[cfg(test)]
mod tests {
    #[test]
    fn the_default_registry_is_the_default_serve_port() {
        assert_eq!(super::DEFAULT_REGISTRY, format!("http://127.0.0.1:{}", super::DEFAULT_PORT));
    }
}

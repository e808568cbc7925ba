//! Paying per call: `pay` (a token for an order, then the paid URL; above the
//! escrow threshold, a contract instead), `verify` (online or offline) and `void`.

use super::common::{print, Remote};
use anyhow::Result;
use bazaar_sdk::Purchase;
use clap::Subcommand;
use serde_json::json;

#[derive(Subcommand)]
pub enum Command {
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
    /// Buyer (or its owner): void an unsettled token and release its hold.
    Void {
        #[command(flatten)]
        remote: Remote,
        jti: String,
    },
}

pub async fn run(command: Command, json_output: bool) -> Result<i32> {
    let j = json_output;
    match command {
        Command::Pay { remote, url, merchant, max, order } => pay(remote, &url, &merchant, max, &order, j).await,
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
        Command::Void { remote, jti } => {
            let value = remote.client()?.void(&jti).await?;
            print(j, &value, |v| format!("voided {jti}; released {}", v["released_minor"]));
            Ok(0)
        }
    }
}

/// Exits 1 when the merchant answered 400 or above; an escrowed order exits 0.
async fn pay(remote: Remote, url: &str, merchant: &str, max: u64, order: &str, json_output: bool) -> Result<i32> {
    let paid = match remote.client()?.purchase(url, merchant, max, order).await? {
        Purchase::Paid(paid) => paid,
        Purchase::Escrowed(contract) => {
            print(json_output, &contract, |c| {
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
    print(json_output, &value, |_| {
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

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
    ///
    /// Prints the token's id (`bazaar void TOKEN_ID` releases its hold if the call is abandoned), the
    /// merchant's status and body, and the settlement. Exits 1 when the merchant answered 400 or above.
    Pay {
        #[command(flatten)]
        remote: Remote,
        /// The paid URL to call (the merchant's route, e.g. http://127.0.0.1:8000/translate).
        url: String,
        /// Who is paid: the merchant agent's handle or DID.
        #[arg(long)]
        merchant: String,
        /// The most this call may cost, in minor units (the token's amount; the merchant settles at most this).
        #[arg(long)]
        max: u64,
        /// Your order id: the unit of "exactly once" (the same order gets the same token and settlement).
        #[arg(long)]
        order: String,
    },
    /// Merchant: check a token's genuineness and state. A receipt check, never a work order.
    Verify {
        #[command(flatten)]
        remote: Remote,
        /// The payment token (`apt_…`) the buyer sent.
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
        /// The token's id (`jti`), as `bazaar pay` prints it.
        #[arg(value_name = "TOKEN_ID")]
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
            let value = serde_json::to_value(remote.client()?.verify(&token).await?)?;
            print(j, &value, verify_prose);
            Ok(0)
        }
        Command::Void { remote, jti } => {
            let value = serde_json::to_value(remote.client()?.void(&jti).await?)?;
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
            print(json_output, &bazaar_cli::wire_json(&contract), |c| {
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
    let token_id = bazaar_sdk::token::claims_unverified(&paid.token).map(|claims| claims.jti).unwrap_or_default();
    let value = json!({"token_id": token_id, "status": paid.status, "settlement": paid.settlement,
        "replayed": paid.replayed, "attempts": paid.attempts, "body": paid.body});
    print(json_output, &value, |_| {
        let settled = match &paid.settlement {
            Some(settlement) => format!("settlement {settlement}"),
            None => format!("not settled: if you abandon the call, `bazaar void {token_id}` releases the hold now"),
        };
        format!("token {token_id}\n{} after {} attempt(s); {settled}\n{}", paid.status, paid.attempts, paid.body)
    });
    Ok(if paid.status < 400 { 0 } else { 1 })
}

/// `bazaar verify`'s prose: genuineness, state, and the reason when the registry gives one.
fn verify_prose(v: &serde_json::Value) -> String {
    let mut lines =
        vec![format!("genuine: {}", v["genuine"]), format!("state: {}", v["state"].as_str().unwrap_or("-"))];
    for field in ["reason", "detail"] {
        if let Some(reason) = v[field].as_str().filter(|r| !r.is_empty()) {
            lines.push(format!("reason: {reason}"));
        }
    }
    lines.push("(verify is a receipt check, never a work order)".into());
    lines.join("\n")
}

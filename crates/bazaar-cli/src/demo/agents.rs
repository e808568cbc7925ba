//! The two agents `bazaar demo --serve` hands to whoever runs it, so a quick start (the README's, an SDK's)
//! works on the demo registry at once: a buyer agent (enrolled, rotated, funded, with ceilings) and a merchant
//! agent (enrolled, rotated), each printed as one `export` line a shell takes as it is.

use anyhow::Result;
use bazaar_stage::{enroll_pair, member_id, LocalRegistry};

/// The owner both agents belong to, and the agents' handles.
pub const OWNER: &str = "you";
pub const BUYER: &str = "your-buyer";
pub const MERCHANT: &str = "your-merchant";
/// What the owner is minted and moves to the buyer's budget, and the buyer's ceilings (per call, per day, total).
const MINT_MINOR: u64 = 100_000;
const FUND_MINOR: u64 = 50_000;
const BUDGET: [u64; 3] = [1_000, 20_000, 50_000];

/// Enrols the owner and its two agents on `local` and returns the lines to print: a comment and an
/// `export BAZAAR_REGISTRY=… BAZAAR_CREDENTIAL=…` line for each agent.
pub async fn environment_lines(local: &LocalRegistry) -> Result<Vec<String>> {
    let operator = local.operator();
    let (owner, buyer) = enroll_pair(&operator, OWNER, BUYER).await?;
    let invite = owner.issue_invite().await?;
    let merchant_key = bazaar_sdk::generate_key();
    let merchant = operator.with_credential("").redeem_invite(&invite, &merchant_key, MERCHANT).await?;
    operator.mint(&member_id(&owner).await?, MINT_MINOR, "demo-you-mint").await?;
    owner.fund(BUYER, FUND_MINOR, "demo-you-fund").await?;
    let [per_call, per_day, total] = BUDGET;
    owner.set_budget(BUYER, per_call, per_day, total).await?;
    let export = |credential: &str| format!("export BAZAAR_REGISTRY={} BAZAAR_CREDENTIAL={credential}", local.url);
    Ok(vec![
        format!(
            "# a buyer agent, @{BUYER} (owner @{OWNER}): {FUND_MINOR} units, at most {per_call} a call, \
             {per_day} a day"
        ),
        export(buyer.credential().unwrap_or_default()),
        format!("# a merchant agent, @{MERCHANT} (owner @{OWNER}): `bazaar merchant` serves a paid route with it"),
        export(merchant.credential.as_str()),
    ])
}

//! Setting up a Bazaar registry for load through its own API, as an operator
//! would: owners, invites, agents enrolling with their own keys, a mint, and
//! funding and ceilings for every buyer.

use crate::drive::Party;
use crate::limits::{FUND_PER_BUYER_MINOR, PRICE_MINOR, SETUP_PARALLELISM};
use anyhow::{Context, Result};
use bazaar_sdk::{generate_key, Client};
use futures::{StreamExt, TryStreamExt};

/// Creates a buyer owner with `buyers` funded agents and a merchant owner with
/// `merchants` agents. Returns (buyers, merchants).
pub async fn bazaar(
    url: &str,
    operator_credential: &str,
    buyers: usize,
    merchants: usize,
) -> Result<(Vec<Party>, Vec<Party>)> {
    let operator = Client::new(url, Some(operator_credential.to_string()));
    let (buyer_owner, buyer_owner_id) = owner(&operator, "bench-buyers").await?;
    let (merchant_owner, _) = owner(&operator, "bench-merchants").await?;
    let total = FUND_PER_BUYER_MINOR * buyers as u64;
    operator.mint(&buyer_owner_id, total, "bench-mint").await.context("minting")?;
    let buyer_owner = &buyer_owner;
    let buyers: Vec<Party> = futures::stream::iter(0..buyers)
        .map(|i| async move {
            let handle = format!("buyer-{i:04}");
            let party = enroll(url, buyer_owner, &handle).await?;
            buyer_owner.fund(&handle, FUND_PER_BUYER_MINOR, &format!("bench-fund-{handle}")).await?;
            buyer_owner.set_budget(&handle, PRICE_MINOR, FUND_PER_BUYER_MINOR, FUND_PER_BUYER_MINOR).await?;
            anyhow::Ok(party)
        })
        .buffered(SETUP_PARALLELISM)
        .try_collect()
        .await
        .context("enrolling buyers")?;
    let merchant_owner = &merchant_owner;
    let merchants: Vec<Party> = futures::stream::iter(0..merchants)
        .map(|i| async move { enroll(url, merchant_owner, &format!("merchant-{i:02}")).await })
        .buffered(SETUP_PARALLELISM)
        .try_collect()
        .await
        .context("enrolling merchants")?;
    Ok((buyers, merchants))
}

async fn owner(operator: &Client, handle: &str) -> Result<(Client, String)> {
    let created = operator.create_owner(&generate_key(), handle).await.with_context(|| format!("owner {handle}"))?;
    let credential = created.credential.as_str();
    let id = created.id.clone();
    Ok((operator.with_credential(credential), id))
}

/// An owner's invite, redeemed by a new agent with its own key.
async fn enroll(url: &str, owner: &Client, handle: &str) -> Result<Party> {
    let invite = owner.issue_invite().await?;
    let enrolled = Client::new(url, None).redeem_invite(&invite, &generate_key(), handle).await?;
    Ok(Party { id: enrolled.id.clone(), credential: enrolled.credential.as_str().to_string() })
}

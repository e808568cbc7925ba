//! A job's reward, from the validator's side: funded at the registry before
//! the job is published (so a job that says it pays is already paid for),
//! released on the validator's own accepted verdict with the worker's signed
//! enrollment and review, and recorded locally so a failed release can be
//! tried again (`bazaar validator release`; the registry's derived key makes
//! a retry safe). And a worker's earnings as the registry confirms them,
//! beside payment claims its results make, which are never summed.

use anyhow::{anyhow, bail, Context, Result};
use bazaar_relay::jobs::reward::JobReward;
use bazaar_relay::jobs::JOB_RESULT;
use bazaar_relay::labor::enrollment::ENROLLMENT;
use bazaar_relay::labor::review::REVIEW;
use bazaar_relay::{Event, Filter, PublicKey};
use bazaar_sdk::wire::bounty::{Bounty, Reward};
use serde_json::{json, Value};

use crate::relay_client::RelayClient;

/// What a job pays when posted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PostReward {
    /// The job says, explicitly, that it pays nothing.
    None,
    /// A bounty of this many minor units, funded before the job is published.
    Bounty(u64),
}

impl PostReward {
    /// `none` or a positive whole number of minor units.
    pub fn parse(text: &str) -> Result<PostReward> {
        if text == "none" {
            return Ok(PostReward::None);
        }
        match text.parse::<u64>() {
            Ok(amount) if amount > 0 => Ok(PostReward::Bounty(amount)),
            _ => bail!("--reward is `none` or a positive amount in minor units, not {text:?}"),
        }
    }
}

/// The tag for `reward`, naming `poster` (the registry member that funds it).
pub fn reward_tag(reward: PostReward, poster: &str) -> Vec<String> {
    match reward {
        PostReward::None => JobReward::None.tag(),
        PostReward::Bounty(amount_minor) => JobReward::Bounty { amount_minor, poster: poster.to_string() }.tag(),
    }
}

fn as_value(event: &Event) -> Result<bazaar_sdk::wire::nostr::SignedEvent> {
    Ok(event.into())
}

/// Funds `job`'s bounty at the registry. Nothing is published before this succeeds.
pub async fn fund(registry: &bazaar_sdk::Client, job: &Event, amount: u64) -> Result<Bounty> {
    let funded = registry.fund_bounty(&as_value(job)?, amount, None).await.context("funding the job's bounty")?;
    Ok(funded.body)
}

/// The worker's newest record of `kind` on the relay.
async fn latest(relay: &str, kind: u16, worker: PublicKey) -> Result<Event> {
    let filter = Filter { kinds: Some(vec![kind]), authors: Some(vec![worker]), ..Filter::default() };
    RelayClient::connect(relay)
        .await?
        .fetch(&[filter])
        .await?
        .into_iter()
        .next()
        .ok_or_else(|| anyhow!("worker {worker} has no record of kind {kind} on {relay}"))
}

/// Presents an accepted verdict with the worker's enrollment and latest review.
/// A bounty already released answers with the reward it paid (from the refusal's facts).
pub async fn release(
    registry: &bazaar_sdk::Client,
    relay: &str,
    bounty: &str,
    verdict: &Event,
    worker: PublicKey,
) -> Result<Reward> {
    let enrollment = latest(relay, ENROLLMENT, worker).await?;
    let review = latest(relay, REVIEW, worker).await?;
    let answer =
        registry.release_bounty(bounty, &as_value(verdict)?, &as_value(&enrollment)?, &as_value(&review)?).await;
    match answer {
        Ok(answer) => Ok(answer.body),
        Err(bazaar_sdk::SdkError::Problem { code, body, .. }) if code == "bounty_already_released" => {
            serde_json::from_value(body["facts"].clone()).context("reading the reward a released bounty paid")
        }
        Err(error) => Err(error).context("releasing the job's bounty"),
    }
}

/// A worker's earnings: the registry's confirmed rewards for `agent`, and
/// beside them — never added to them — any payment its results on the relay
/// claim (`amount` tags), marked unverified.
pub async fn earnings(registry: &bazaar_sdk::Client, agent: &str, relay: &str, worker: PublicKey) -> Result<Value> {
    let mut record =
        bazaar_sdk::wire::wire_json(&registry.earnings(agent).await.context("reading the agent's earnings")?);
    let results = Filter { kinds: Some(vec![JOB_RESULT]), authors: Some(vec![worker]), ..Filter::default() };
    let claims: Vec<Value> = RelayClient::connect(relay)
        .await?
        .fetch(&[results])
        .await?
        .iter()
        .filter_map(|result| {
            let claim = result.tags.iter().find(|t| t.first().map(String::as_str) == Some("amount"))?;
            Some(json!({"result": result.id.to_hex(), "claimed": claim.get(1), "status": "unverified"}))
        })
        .collect();
    record["unverified_claims"] = Value::Array(claims);
    Ok(record)
}

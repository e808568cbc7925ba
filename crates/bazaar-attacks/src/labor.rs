//! The labor market's attacks, for `bazaar attack`: each tries one thing the
//! relay or the validator must refuse — a result from a worker the job does
//! not name, a forged (altered) event, a deleted event sent again, an older
//! version of a replaceable event, evidence from a host off the allowlist,
//! and a redirect to a private address — and reports the refusal as a real
//! client sees it. None of them moves money.

use anyhow::{ensure, Result};
use bazaar_relay::event::tag;
use bazaar_relay::jobs::{request_tags, JOB_REQUEST, JOB_RESULT};
use bazaar_relay::{Event, Signer};
use bazaar_sdk::SdkError;
use serde_json::{json, Value};

use super::{snapshot, Attempt, Cast, Measured};
use bazaar_agents::labor::fetch::{fetch, FetchError, FetchPolicy, FixedResolver};
use bazaar_agents::relay_client::RelayClient;

fn relay_url(cast: &Cast) -> String {
    bazaar_stage::relay_url(&cast.registry, None)
}

fn signer() -> Signer {
    Signer::generate(&bazaar_server::OsEntropy)
}

/// The relay's answer to `event` as the attempt's result: a refusal becomes its prefix.
async fn sent(client: &mut RelayClient, event: &Event) -> Result<std::result::Result<Value, SdkError>> {
    Ok(match client.publish(event).await? {
        (true, message) => Ok(json!({"accepted": true, "message": message})),
        (false, message) => Err(SdkError::Problem {
            status: 0,
            code: message.split(':').next().unwrap_or_default().to_string(),
            detail: message,
            body: Value::Null,
        }),
    })
}

async fn attempt(cast: &Cast, tried: &str, client: &mut RelayClient, event: &Event) -> Result<Measured> {
    let (balances, head) = snapshot(cast).await?;
    let result = sent(client, event).await?;
    Ok((balances, head, Attempt { tried: tried.into(), result }))
}

async fn accepted(client: &mut RelayClient, event: &Event) -> Result<()> {
    let (ok, message) = client.publish(event).await?;
    ensure!(ok, "the honest setup was refused: {message}");
    Ok(())
}

pub async fn unnamed_worker_result(cast: &Cast) -> Result<Measured> {
    let mut client = RelayClient::connect(&relay_url(cast)).await?;
    let (asker, named, intruder) = (signer(), signer(), signer());
    let now = bazaar_sdk::clock::unix_now();
    let job = asker.sign(now, JOB_REQUEST, request_tags("attack/v1", false, &[named.public_key()], "x"), "");
    accepted(&mut client, &job).await?;
    let result = intruder.sign(now, JOB_RESULT, vec![tag(&["e", &job.id.to_hex()])], "I was not asked");
    attempt(cast, "answer a directed job as a worker it does not name", &mut client, &result).await
}

pub async fn forged_event(cast: &Cast) -> Result<Measured> {
    let mut client = RelayClient::connect(&relay_url(cast)).await?;
    let mut event = signer().sign(bazaar_sdk::clock::unix_now(), 1, vec![], "pay 10 to worker A");
    event.content = "pay 10 to worker B".into();
    attempt(cast, "publish an event altered after it was signed", &mut client, &event).await
}

pub async fn resubmitted_deleted(cast: &Cast) -> Result<Measured> {
    let mut client = RelayClient::connect(&relay_url(cast)).await?;
    let author = signer();
    let now = bazaar_sdk::clock::unix_now();
    let note = author.sign(now, 1, vec![], "withdrawn offer");
    accepted(&mut client, &note).await?;
    accepted(&mut client, &author.sign(now, 5, vec![tag(&["e", &note.id.to_hex()])], "")).await?;
    attempt(cast, "send an event again after its author deleted it", &mut client, &note).await
}

pub async fn older_replaceable(cast: &Cast) -> Result<Measured> {
    let mut client = RelayClient::connect(&relay_url(cast)).await?;
    let author = signer();
    let now = bazaar_sdk::clock::unix_now();
    let older = author.sign(now - 60, 10_002, vec![], "older relay list");
    accepted(&mut client, &author.sign(now, 10_002, vec![], "newer relay list")).await?;
    attempt(cast, "replace a replaceable event with an older version", &mut client, &older).await
}

/// The fetch's refusal as the attempt's result.
fn fetched(outcome: std::result::Result<Vec<u8>, FetchError>) -> std::result::Result<Value, SdkError> {
    let code = match &outcome {
        Ok(bytes) => return Ok(json!({"fetched": bytes.len()})),
        Err(FetchError::OffAllowlist(_)) => "off_allowlist",
        Err(FetchError::PrivateAddress { .. }) => "private_address",
        Err(_) => "fetch_failed",
    };
    Err(SdkError::Problem { status: 0, code: code.into(), detail: format!("{:?}", outcome.err()), body: Value::Null })
}

pub async fn evidence_off_allowlist(cast: &Cast) -> Result<Measured> {
    let policy = FetchPolicy::new(["artifacts.example".to_string()]);
    let (balances, head) = snapshot(cast).await?;
    let result = fetched(fetch(&policy, "https://evil.example/artifact.txt").await);
    let tried = "have the validator fetch evidence from a host off its allowlist";
    Ok((balances, head, Attempt { tried: tried.into(), result }))
}

pub async fn redirect_to_private(cast: &Cast) -> Result<Measured> {
    // An allowlisted artifact host (on loopback, allowed for this test) redirects to an
    // allowlisted name that resolves to a private address: the second hop is refused.
    let receiver = axum::Router::new().route(
        "/artifact.txt",
        axum::routing::get(|| async {
            axum::response::Redirect::temporary("http://metadata.internal/latest/meta-data")
        }),
    );
    let url = format!("{}/artifact.txt", bazaar_stage::serve(receiver).await?);
    let host = url.split("//").nth(1).and_then(|rest| rest.split([':', '/']).next()).unwrap_or_default().to_string();
    let mut policy = FetchPolicy::new([host.clone(), "metadata.internal".to_string()]);
    policy.private_hosts = [host.clone()].into();
    let resolved = [(host, "127.0.0.1".parse()?), ("metadata.internal".to_string(), "169.254.169.254".parse()?)];
    policy.resolver = std::sync::Arc::new(FixedResolver(resolved.into_iter().collect()));
    let (balances, head) = snapshot(cast).await?;
    let result = fetched(fetch(&policy, &url).await);
    let tried = "redirect the validator's evidence fetch to a private (link-local metadata) address";
    Ok((balances, head, Attempt { tried: tried.into(), result }))
}

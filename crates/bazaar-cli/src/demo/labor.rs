//! The labor market chapter of `bazaar demo`: on the registry's relay, a
//! validator posts three briefs to a reviewed coordinator, which hands each
//! to its specialist (a fixture engine: the script back, or — when the brief
//! says `WRONG-ME` — an altered one), which hosts the text as an artifact.
//! The validator checks every link of each evidence chain, fetches the
//! artifact and attests: accepted (the exact text), rejected (the wrong
//! text), unassessed (an artifact host off its allowlist — quality null,
//! never 0). Then it replays the first outcome locally and shows the grades.
//! The first two briefs carry a bounty held on the posting agent's budget
//! before they are published: the accepted one pays the coordinator's owner,
//! the rejected one pays nothing and stays held for its poster.

use std::collections::{BTreeSet, HashSet};
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result};
use bazaar_relay::labor::outcome::Verdict;
use bazaar_relay::labor::review::{preflight, review_event, Manifest};
use bazaar_relay::Signer;
use serde::Serialize;

use bazaar_agents::labor::bounty::PostReward;
use bazaar_agents::labor::engine::Engine;
use bazaar_agents::labor::fetch::{FetchPolicy, FixedResolver};
use bazaar_agents::labor::validator::Validator;
use bazaar_agents::labor::worker::{self, Role, WorkerConfig};
use bazaar_agents::relay_client::{follow_task, RelayClient};
use bazaar_stage::{serve, LocalRegistry};

/// The name the specialist's artifacts are served under (resolved to loopback for the demo).
const ARTIFACT_HOST: &str = "artifacts.demo";
/// The approved script.
const SCRIPT: &str = "Welcome to the Hotel Lindqvist.\nBreakfast is served from seven.";

#[derive(Debug, Serialize)]
pub struct LaborReport {
    /// (what the brief was, verdict, quality, grounds) in order.
    pub outcomes: Vec<(String, Verdict, Option<f64>, String)>,
    pub replay_agrees: bool,
    /// Accepted, rejected and unassessed in the coordinator's grade.
    pub grade: (u64, u64, u64),
    /// Net paid to the coordinator's owner by the accepted brief's bounty, and what stays held.
    pub rewards: (u64, u64),
}

/// Each of the first two briefs' bounty, in minor units.
pub const BOUNTY_MINOR: u64 = 500;

/// The registry's side of the chapter: the validator's agent (funded, it
/// posts the bounties) and the coordinator's owner and agent (the enrollment
/// binding the coordinator's Nostr key is published on the relay).
struct Money {
    poster: bazaar_sdk::Client,
    coordinator_owner: bazaar_sdk::Client,
    destination: String,
}

async fn money(
    local: &LocalRegistry,
    relay: &str,
    coordinator: &Signer,
    agent_key: &ed25519_dalek::SigningKey,
) -> Result<Money> {
    let operator = local.operator();
    let (poster_owner, poster) = bazaar_stage::enroll_pair(&operator, "labor-poster-owner", "labor-poster").await?;
    let owner_id = bazaar_stage::member_id(&poster_owner).await?;
    operator.mint(&owner_id, 2 * BOUNTY_MINOR, "labor-mint").await?;
    poster_owner.fund("labor-poster", 2 * BOUNTY_MINOR, "labor-fund").await?;
    poster_owner.set_budget("labor-poster", BOUNTY_MINOR, 2 * BOUNTY_MINOR, 2 * BOUNTY_MINOR).await?;
    let (coordinator_owner, _) =
        bazaar_stage::enroll_pair_with_key(&operator, "labor-coord-owner", "labor-coord", agent_key).await?;
    let enrollment = bazaar_agents::labor::identity::enroll(coordinator, agent_key, bazaar_sdk::clock::unix_now());
    let (accepted, message) = RelayClient::connect(relay).await?.publish(&enrollment).await?;
    anyhow::ensure!(accepted, "the enrollment was refused: {message}");
    let destination = bazaar_stage::member_id(&coordinator_owner).await?;
    Ok(Money { poster, coordinator_owner, destination })
}

fn manifest(model: &str, destination: &str) -> Manifest {
    Manifest {
        runtime: "bazaar-worker/0.1".into(),
        model: model.into(),
        tools: vec!["sed".into()],
        credentials: vec![],
        reward_destination: destination.into(),
        reports_usage: true,
    }
}

async fn reviewed(relay: &str, signer: Signer, manifest: &Manifest) -> Result<Arc<Signer>> {
    let review =
        review_event(&signer, manifest, &preflight(manifest, &|_| true, &|_| true), bazaar_sdk::clock::unix_now());
    let (accepted, message) = RelayClient::connect(relay).await?.publish(&review).await?;
    anyhow::ensure!(accepted, "the review was refused: {message}");
    Ok(Arc::new(signer))
}

fn validator(relay: &str, key: &str, artifacts: &str, allow: bool, db: &Path) -> Result<Validator> {
    let host = artifacts.split("//").nth(1).and_then(|r| r.split(':').next()).unwrap_or_default().to_string();
    let mut policy = FetchPolicy::new(if allow { vec![host.clone()] } else { vec![] });
    policy.private_hosts = BTreeSet::from([host.clone()]);
    policy.resolver = Arc::new(FixedResolver([(host, "127.0.0.1".parse()?)].into_iter().collect()));
    let signer = Signer::from_secret_hex(key).context("the validator's key")?;
    Validator::open(relay, signer, policy, db)
}

pub async fn labor_story(local: &LocalRegistry, dir: &Path, say: &(dyn Fn(String) + Sync)) -> Result<LaborReport> {
    say("\n— the labor market: a brief, a coordinator, a specialist, a validator —".into());
    let relay = bazaar_stage::relay_url(&local.url, None);
    let artifact_dir = dir.join("artifacts");
    std::fs::create_dir_all(&artifact_dir)?;
    let files = axum::Router::new().fallback_service(tower_http_free_serve(artifact_dir.clone()));
    let served = serve(files).await?.replacen("127.0.0.1", ARTIFACT_HOST, 1);
    let coordinator_key = Signer::generate(&bazaar_server::OsEntropy);
    let money = money(local, &relay, &coordinator_key, &bazaar_sdk::generate_key()).await?;
    let coordinator_manifest = manifest("coordinator-demo", &format!("acct:{}", money.destination));
    let specialist_manifest = manifest("specialist-demo", &format!("acct:{}", money.destination));
    let coordinator = reviewed(&relay, coordinator_key, &coordinator_manifest).await?;
    let specialist = reviewed(&relay, Signer::generate(&bazaar_server::OsEntropy), &specialist_manifest).await?;
    let key = Signer::generate(&bazaar_server::OsEntropy).secret_hex();
    let trusting =
        validator(&relay, &key, &served, true, &dir.join("validator.db"))?.with_registry(money.poster.clone());
    let engine = Engine { command: "sed 's/WRONG-ME/altered/'; echo 'usage: 0.0021 USD' >&2".into() };
    let specialist_config = WorkerConfig {
        relay: relay.clone(),
        signer: specialist.clone(),
        accept_from: HashSet::from([coordinator.public_key()]),
        manifest: specialist_manifest,
        role: Role::Specialist { engine, artifact_dir, artifact_url: served.clone() },
        state_dir: dir.join("specialist"),
        allowance: None,
        leases: None,
    };
    let coordinator_config = WorkerConfig {
        relay: relay.clone(),
        signer: coordinator.clone(),
        accept_from: HashSet::from([trusting.public_key()]),
        manifest: coordinator_manifest,
        role: Role::Coordinator {
            specialist: specialist.public_key(),
            handoff_wait: Duration::from_secs(30),
            fee: bazaar_agents::labor::worker::SpecialistFee::Sponsored,
        },
        state_dir: dir.join("coordinator"),
        allowance: None,
        leases: None,
    };
    let workers = [
        tokio::spawn(worker::run(specialist_config, std::future::pending())),
        tokio::spawn(worker::run(coordinator_config, std::future::pending())),
    ];
    say(format!(
        "relay {relay}: coordinator {} and specialist {} reviewed; outbound connections only",
        short(&coordinator),
        short(&specialist)
    ));
    let outcome = briefs(&trusting, &relay, &key, &served, dir, &coordinator, &money, say).await;
    workers.iter().for_each(tokio::task::JoinHandle::abort);
    outcome
}

fn short(signer: &Signer) -> String {
    signer.public_key().to_hex()[..12].to_string()
}

#[allow(clippy::too_many_arguments)] // reason: the chapter's cast, passed once from labor_story.
async fn briefs(
    trusting: &Validator,
    relay: &str,
    key: &str,
    served: &str,
    dir: &Path,
    coordinator: &Signer,
    money: &Money,
    say: &(dyn Fn(String) + Sync),
) -> Result<LaborReport> {
    let wrong = SCRIPT.replace("seven", "WRONG-ME");
    let runs = [
        ("the exact script", SCRIPT.to_string(), true, PostReward::Bounty(BOUNTY_MINOR)),
        ("a script the specialist alters", wrong, true, PostReward::Bounty(BOUNTY_MINOR)),
        ("an artifact host off the allowlist", format!("{SCRIPT} "), false, PostReward::None),
    ];
    let mut outcomes = Vec::new();
    let mut first = None;
    let mut rewards = (0, 0);
    for (what, script, allowed, reward) in runs {
        let job = trusting.post_with(coordinator.public_key(), &script, allowed, reward).await?;
        if let PostReward::Bounty(amount) = reward {
            say(format!(
                "brief {}: a bounty of {amount} held on the poster's budget before it was published",
                &job.id.to_hex()[..12]
            ));
        }
        first.get_or_insert(job.id);
        let view = follow_task(relay, &job.id, 30).await?;
        let state = format!("{:?}", view.state).to_lowercase();
        say(format!(
            "brief {} ({what}): {state} by the coordinator, {} answer",
            &job.id.to_hex()[..12],
            view.successful_answers
        ));
        // The third brief is judged by a validator that does not allow the artifact host.
        let judge = if allowed { None } else { Some(validator(relay, key, served, false, &dir.join("validator.db"))?) };
        let recorded =
            judge.as_ref().unwrap_or(trusting).assess(&job.id, Duration::from_secs(5)).await?.context("an outcome")?;
        let a = recorded.assessment;
        say(format!(
            "  validator: {} (quality {}) — {}",
            a.verdict.as_str(),
            a.quality.map_or("null".into(), |q| q.to_string()),
            a.grounds
        ));
        match (&recorded.reward, reward) {
            (Some(paid), _) => {
                rewards.0 += paid["net_minor"].as_u64().unwrap_or(0);
                say(format!(
                    "  bounty released on acceptance: {} gross, {} fee, {} net to the coordinator's owner",
                    paid["gross_minor"], paid["fee_minor"], paid["net_minor"]
                ));
            }
            (None, PostReward::Bounty(amount)) => {
                rewards.1 += amount;
                say(format!(
                    "  bounty: nothing released on a {} outcome; {amount} stays held for the poster",
                    a.verdict.as_str()
                ));
            }
            (None, PostReward::None) => {}
        }
        outcomes.push((what.to_string(), a.verdict, a.quality, a.grounds));
    }
    let earned = u64::try_from(money.coordinator_owner.me().await?.available_minor.unwrap_or(0)).unwrap_or(0);
    say(format!("the coordinator's owner holds {earned}: exactly the ledger-confirmed reward"));
    let replay = trusting.replay(&first.context("a brief")?)?;
    say(format!(
        "replayed the first outcome from its saved signed events: {} (local, unsigned, nothing written)",
        if replay.agrees { "agrees" } else { "DISAGREES" }
    ));
    let records = trusting.records()?;
    let grade = records.grades.values().next().map(|(_, g)| (g.accepted, g.rejected, g.unassessed)).unwrap_or_default();
    say(format!(
        "coordinator's grade (brief-script-delivery/v1, its configuration): {} accepted, {} rejected, {} unassessed",
        grade.0, grade.1, grade.2
    ));
    Ok(LaborReport { outcomes, replay_agrees: replay.agrees, grade, rewards })
}

/// Serves the files of `dir` by name (no listing, no subdirectories).
fn tower_http_free_serve(dir: std::path::PathBuf) -> axum::routing::MethodRouter {
    axum::routing::get(move |uri: axum::http::Uri| {
        let dir = dir.clone();
        async move {
            let name = uri.path().trim_start_matches('/').rsplit('/').next().unwrap_or_default().to_string();
            match std::fs::read(dir.join(&name)) {
                Ok(bytes) if !name.contains("..") => Ok(bytes),
                _ => Err(axum::http::StatusCode::NOT_FOUND),
            }
        }
    })
}

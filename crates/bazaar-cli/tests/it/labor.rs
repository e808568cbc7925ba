//! The coordination workflow end to end, in process, over the registry's
//! relay: a validator posts a brief to a reviewed coordinator, which hands it
//! to its specialist (a fixture engine), which hosts the text as an artifact;
//! the validator collects, checks the evidence chain, fetches the artifact
//! under its policy, observes it and attests. One case each of accepted,
//! rejected (wrong text) and unassessed (a redirect off the allowlist, a
//! redirect to a private address, a body over the cap, a deadline passed);
//! then replay, export and the records; and the workers' own rules.

use bazaar_cli::wire_json;
use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::net::IpAddr;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::extract::{Path as UrlPath, State};
use axum::response::{IntoResponse, Redirect, Response};
use bazaar_agents::labor::bounty::PostReward;
use bazaar_agents::labor::engine::Engine;
use bazaar_agents::labor::fetch::{FetchPolicy, FixedResolver, BODY_BYTES_MAX};
use bazaar_agents::labor::validator::Validator;
use bazaar_agents::labor::worker::{self, Role, WorkerConfig};
use bazaar_agents::relay_client::RelayClient;
use bazaar_relay::jobs::{request_tags, JOB_FEEDBACK, JOB_REQUEST, JOB_RESULT};
use bazaar_relay::labor::outcome::Verdict;
use bazaar_relay::labor::review::{preflight, review_event, Manifest};
use bazaar_relay::{Filter, Signer};
use bazaar_server::OsEntropy;

/// How the artifact host answers the next fetch.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Mode {
    Serve,
    RedirectOffAllowlist,
    RedirectToPrivate,
    TooBig,
    Slow,
}

#[derive(Clone)]
struct Host {
    dir: PathBuf,
    port: u16,
    mode: Arc<Mutex<Mode>>,
}

async fn artifact(State(host): State<Host>, UrlPath(file): UrlPath<String>) -> Response {
    let mode = *host.mode.lock().unwrap();
    match mode {
        Mode::Serve => match std::fs::read(host.dir.join(&file)) {
            Ok(bytes) => bytes.into_response(),
            Err(_) => axum::http::StatusCode::NOT_FOUND.into_response(),
        },
        Mode::RedirectOffAllowlist => {
            Redirect::temporary(&format!("http://elsewhere.test:{}/a/{file}", host.port)).into_response()
        }
        Mode::RedirectToPrivate => {
            Redirect::temporary(&format!("http://private.test:{}/a/{file}", host.port)).into_response()
        }
        Mode::TooBig => vec![b'x'; BODY_BYTES_MAX + 1].into_response(),
        Mode::Slow => {
            tokio::time::sleep(Duration::from_secs(5)).await;
            "late".into_response()
        }
    }
}

struct Market {
    _local: bazaar_stage::LocalRegistry,
    /// The validator's agent at the registry: it funds the bounties.
    poster: bazaar_sdk::Client,
    /// The coordinator's owner: its reward destination.
    coordinator_owner: bazaar_sdk::Client,
    coordinator_agent: String,
    /// The coordinator's agent itself (its credential pays the specialist's fee).
    coordinator_client: bazaar_sdk::Client,
    coordinator_manifest: Manifest,
    relay: String,
    host: Host,
    validator: Validator,
    coordinator: Arc<Signer>,
    specialist: Arc<Signer>,
    dir: PathBuf,
    workers: Vec<tokio::task::JoinHandle<anyhow::Result<()>>>,
}

fn manifest(model: &str) -> Manifest {
    paying(model, "acct:owner")
}

fn paying(model: &str, destination: &str) -> Manifest {
    Manifest {
        runtime: "bazaar-worker/0.1".into(),
        model: model.into(),
        tools: vec!["sed".into()],
        credentials: vec![],
        reward_destination: destination.into(),
        reports_usage: true,
    }
}

/// The registry's cast: the validator's funded agent, and the coordinator's
/// owner and agent (whose key the coordinator's enrollment binds).
async fn registry_cast(
    local: &bazaar_stage::LocalRegistry,
    relay: &str,
    coordinator: &Signer,
) -> (bazaar_sdk::Client, bazaar_sdk::Client, String, bazaar_sdk::Client) {
    let operator = local.operator();
    let (poster_owner, poster) = bazaar_stage::enroll_pair(&operator, "poster-owner", "poster").await.unwrap();
    let owner_id = bazaar_stage::member_id(&poster_owner).await.unwrap();
    operator.mint(&owner_id, 10_000, "mint").await.unwrap();
    poster_owner.fund("poster", 10_000, "fund").await.unwrap();
    poster_owner.set_budget("poster", 5_000, 10_000, 10_000).await.unwrap();
    let agent_key = bazaar_sdk::generate_key();
    let (coordinator_owner, agent) =
        bazaar_stage::enroll_pair_with_key(&operator, "paid-coord-owner", "paid-coord", &agent_key).await.unwrap();
    let enrollment = bazaar_agents::labor::identity::enroll(coordinator, &agent_key, bazaar_sdk::clock::unix_now());
    let (accepted, message) = RelayClient::connect(relay).await.unwrap().publish(&enrollment).await.unwrap();
    assert!(accepted, "{message}");
    let agent_id = bazaar_stage::member_id(&agent).await.unwrap();
    (poster, coordinator_owner, agent_id, agent)
}

/// The fixture specialist: the script back, with `WRONG-ME` altered, and its usage on stderr.
const SPECIALIST_ENGINE: &str = "sed 's/WRONG-ME/altered/'; echo 'usage: 0.0042 USD' >&2";

/// Publishes a passed review, `later_s` seconds after now (a re-review must be newer than the last).
async fn review(relay: &str, signer: &Signer, manifest: &Manifest, later_s: u64) {
    let found = preflight(manifest, &|_| true, &|_| true);
    let event = review_event(signer, manifest, &found, bazaar_sdk::clock::unix_now() + later_s);
    let (accepted, message) = RelayClient::connect(relay).await.unwrap().publish(&event).await.unwrap();
    assert!(accepted, "{message}");
}

impl Market {
    async fn open(name: &str) -> Market {
        let dir = std::env::temp_dir().join(format!("bazaar-labor-{name}-{}", std::process::id()));
        std::fs::remove_dir_all(&dir).ok();
        std::fs::create_dir_all(dir.join("artifacts")).unwrap();
        let local =
            bazaar_stage::embedded_registry_with(&dir, Some("op".into()), bazaar_core::apply::Config::standard())
                .await
                .unwrap();
        let relay = format!("{}/relay", local.url.replace("http://", "ws://"));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let host = Host { dir: dir.join("artifacts"), port, mode: Arc::new(Mutex::new(Mode::Serve)) };
        let app = axum::Router::new().route("/a/{file}", axum::routing::get(artifact)).with_state(host.clone());
        tokio::spawn(async move { axum::serve(listener, app).await });
        let loopback: IpAddr = "127.0.0.1".parse().unwrap();
        let names = ["artifacts.test", "private.test", "elsewhere.test"];
        let mut policy = FetchPolicy::new(["artifacts.test".to_string(), "private.test".to_string()]);
        policy.private_hosts = BTreeSet::from(["artifacts.test".to_string()]);
        policy.resolver =
            Arc::new(FixedResolver(names.iter().map(|n| (n.to_string(), loopback)).collect::<BTreeMap<_, _>>()));
        policy.deadline = Duration::from_secs(2);
        let (coordinator, specialist) =
            (Arc::new(Signer::generate(&OsEntropy)), Arc::new(Signer::generate(&OsEntropy)));
        let (poster, coordinator_owner, coordinator_agent, coordinator_client) =
            registry_cast(&local, &relay, &coordinator).await;
        let validator = Validator::open(&relay, Signer::generate(&OsEntropy), policy, &dir.join("validator.db"))
            .unwrap()
            .with_registry(poster.clone());
        let owner_id = bazaar_stage::member_id(&coordinator_owner).await.unwrap();
        let coordinator_manifest = paying("coordinator-1", &format!("acct:{owner_id}"));
        review(&relay, &coordinator, &coordinator_manifest, 0).await;
        review(&relay, &specialist, &manifest("specialist-1"), 0).await;
        let mut market = Market {
            _local: local,
            poster,
            coordinator_owner,
            coordinator_agent,
            coordinator_client,
            coordinator_manifest,
            relay,
            host,
            validator,
            coordinator,
            specialist,
            dir,
            workers: vec![],
        };
        market.start_specialist();
        market.start_coordinator();
        market
    }

    fn specialist_config(&self) -> WorkerConfig {
        WorkerConfig {
            relay: self.relay.clone(),
            signer: self.specialist.clone(),
            accept_from: HashSet::from([self.coordinator.public_key()]),
            manifest: manifest("specialist-1"),
            role: Role::Specialist {
                engine: Engine { command: SPECIALIST_ENGINE.into() },
                artifact_dir: self.host.dir.clone(),
                artifact_url: format!("http://artifacts.test:{}/a", self.host.port),
            },
            state_dir: self.dir.join("specialist-state"),
            allowance: None,
            leases: None,
        }
    }

    fn start_specialist(&mut self) {
        let config = self.specialist_config();
        self.workers.push(tokio::spawn(worker::run(config, std::future::pending())));
    }

    fn start_coordinator(&mut self) {
        let config = WorkerConfig {
            relay: self.relay.clone(),
            signer: self.coordinator.clone(),
            accept_from: HashSet::from([self.validator.public_key()]),
            manifest: self.coordinator_manifest.clone(),
            role: Role::Coordinator {
                specialist: self.specialist.public_key(),
                handoff_wait: Duration::from_secs(20),
                fee: worker::SpecialistFee::Sponsored,
            },
            state_dir: self.dir.join("coordinator-state"),
            allowance: None,
            leases: None,
        };
        self.workers.push(tokio::spawn(worker::run(config, std::future::pending())));
    }

    /// Posts `script`, lets the workers answer, and assesses with the host in `mode`.
    async fn run(&self, script: &str, evaluation_data: bool, mode: Mode) -> bazaar_agents::labor::validator::Recorded {
        self.run_paid(script, evaluation_data, mode, PostReward::None).await
    }

    async fn run_paid(
        &self,
        script: &str,
        evaluation_data: bool,
        mode: Mode,
        reward: PostReward,
    ) -> bazaar_agents::labor::validator::Recorded {
        *self.host.mode.lock().unwrap() = Mode::Serve;
        let coordinator = self.coordinator.public_key();
        let job = self.validator.post_with(coordinator, script, evaluation_data, reward).await.unwrap();
        let answered = bazaar_agents::relay_client::follow_task(&self.relay, &job.id, 30).await.unwrap();
        assert!(!answered.answers.is_empty() || answered.failures > 0, "the coordinator answered: {answered:?}");
        *self.host.mode.lock().unwrap() = mode;
        let recorded = self.validator.assess(&job.id, Duration::from_secs(1)).await.unwrap().expect("an outcome");
        *self.host.mode.lock().unwrap() = Mode::Serve;
        recorded
    }

    async fn count(&self, filter: Filter) -> usize {
        RelayClient::connect(&self.relay).await.unwrap().fetch(&[filter]).await.unwrap().len()
    }
}

impl Drop for Market {
    fn drop(&mut self) {
        self.workers.iter().for_each(tokio::task::JoinHandle::abort);
        std::fs::remove_dir_all(&self.dir).ok();
    }
}

const SCRIPT: &str = "Line one of the approved script.\nLine two.";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn accepted_rejected_and_each_unassessed_case_with_replay_export_and_records() {
    let market = Market::open("outcomes").await;
    let accepted = market.run(SCRIPT, true, Mode::Serve).await;
    assert_eq!(
        (accepted.assessment.verdict, accepted.assessment.quality),
        (Verdict::Accepted, Some(1.0)),
        "{accepted:?}"
    );
    let wrong = market.run("Line one. WRONG-ME\nLine two.", false, Mode::Serve).await;
    assert_eq!((wrong.assessment.verdict, wrong.assessment.quality), (Verdict::Rejected, Some(0.0)));
    assert!(wrong.assessment.grounds.contains("wrong content"), "{wrong:?}");
    for (mode, grounds) in [
        (Mode::RedirectOffAllowlist, "not on the validator's allowlist"),
        (Mode::RedirectToPrivate, "private or loopback"),
        (Mode::TooBig, "larger than"),
        (Mode::Slow, "did not finish within"),
    ] {
        let script = format!("{SCRIPT}\n{grounds}");
        let unassessed = market.run(&script, false, mode).await;
        assert_eq!((unassessed.assessment.verdict, unassessed.assessment.quality), (Verdict::Unassessed, None));
        assert!(unassessed.assessment.grounds.contains(grounds), "{grounds}: {unassessed:?}");
    }
    // Assessing again returns the recorded outcome; nothing is signed twice.
    let job = bazaar_relay::Hex32::parse(&accepted.job_id).unwrap();
    let again = market.validator.assess(&job, Duration::from_secs(1)).await.unwrap().unwrap();
    assert_eq!(again.verdict_id, accepted.verdict_id);
    let labels =
        Filter { kinds: Some(vec![1_985]), authors: Some(vec![market.validator.public_key()]), ..Filter::default() };
    assert_eq!(market.count(labels).await, 6, "one signed label per assessed task");

    let replay = market.validator.replay(&job).unwrap();
    assert!(replay.agrees && !replay.signed, "{replay:?}");
    let exported = market.validator.export().unwrap();
    assert_eq!(exported.len(), 1, "only the job flagged as evaluation data");
    assert_eq!(exported[0]["job_id"], accepted.job_id);
    let kinds: Vec<u64> =
        exported[0]["events"].as_array().unwrap().iter().map(|e| e["kind"].as_u64().unwrap()).collect();
    assert!(
        kinds.iter().all(|k| [JOB_REQUEST, JOB_RESULT].contains(&(*k as u16))),
        "job events only, never conversations: {kinds:?}"
    );
    let records = market.validator.records().unwrap();
    let (_, grade) = records.grades.values().next().unwrap();
    assert_eq!((grade.accepted, grade.rejected, grade.unassessed, grade.quality), (1, 1, 4, Some(0.5)));
    assert_eq!(
        records.capabilities.values().copied().collect::<Vec<_>>(),
        vec![1],
        "the specialist's accepted handoff"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn workers_report_usage_as_reported_and_answer_once_across_restarts() {
    let mut market = Market::open("restart").await;
    let recorded = market.run(SCRIPT, false, Mode::Serve).await;
    assert_eq!(recorded.assessment.verdict, Verdict::Accepted);
    let usage = RelayClient::connect(&market.relay)
        .await
        .unwrap()
        .fetch(&[Filter {
            kinds: Some(vec![JOB_FEEDBACK]),
            authors: Some(vec![market.specialist.public_key()]),
            ..Filter::default()
        }])
        .await
        .unwrap();
    let reported = usage.iter().find_map(|e| e.tags.iter().find(|t| t[0] == "usage").cloned()).expect("a usage report");
    assert_eq!(reported, vec!["usage", "0.0042", "USD", "reported"]);

    // Restart both workers: the stored jobs come again, and no second answer appears.
    market.workers.drain(..).for_each(|w| w.abort());
    market.start_specialist();
    market.start_coordinator();
    tokio::time::sleep(Duration::from_millis(1_500)).await;
    let results = |author: &Signer| Filter {
        kinds: Some(vec![JOB_RESULT]),
        authors: Some(vec![author.public_key()]),
        ..Filter::default()
    };
    assert_eq!(market.count(results(&market.specialist)).await, 1);
    assert_eq!(market.count(results(&market.coordinator)).await, 1);
    let handoffs = Filter {
        kinds: Some(vec![JOB_REQUEST]),
        authors: Some(vec![market.coordinator.public_key()]),
        ..Filter::default()
    };
    assert_eq!(market.count(handoffs).await, 1, "a restarted coordinator reuses its saved handoff");

    // A crash between saving an answer and publishing it: the restarted worker publishes the saved one.
    market.workers.drain(..).for_each(|w| w.abort());
    let now = bazaar_sdk::clock::unix_now();
    let tags = request_tags("script-delivery/v1", false, &[market.specialist.public_key()], "saved before the crash");
    let job = market.coordinator.sign(now, JOB_REQUEST, tags, "");
    RelayClient::connect(&market.relay).await.unwrap().publish(&job).await.unwrap();
    let saved = market.specialist.sign(
        now,
        JOB_RESULT,
        vec![bazaar_relay::event::tag(&["e", &job.id.to_hex()])],
        "saved answer",
    );
    let path = market.dir.join("specialist-state/answered").join(format!("{}.json", job.id));
    std::fs::write(&path, saved.to_json()).unwrap();
    market.start_specialist();
    let view = bazaar_agents::relay_client::follow_task(&market.relay, &job.id, 10).await.unwrap();
    assert_eq!(
        view.answers.iter().map(|a| a.id).collect::<Vec<_>>(),
        vec![saved.id],
        "the saved answer, once, not a new one"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_specialist_answers_only_permitted_coordinators_and_a_changed_config_needs_review() {
    let market = Market::open("rules").await;
    // A stranger names the specialist directly: enrollment grants no summon permission.
    let stranger = Signer::generate(&OsEntropy);
    let tags = request_tags("script-delivery/v1", false, &[market.specialist.public_key()], "sneak");
    let job = stranger.sign(bazaar_sdk::clock::unix_now(), JOB_REQUEST, tags, "");
    RelayClient::connect(&market.relay).await.unwrap().publish(&job).await.unwrap();
    tokio::time::sleep(Duration::from_millis(1_500)).await;
    let view = bazaar_agents::relay_client::follow_task(&market.relay, &job.id, 0).await.unwrap();
    assert_eq!((view.feedback.len(), view.answers.len()), (0, 0), "not claimed, not answered");

    // A coordinator that claims a configuration it was never reviewed with is rejected,
    // whatever it delivered: the validator checks the answer's configuration against the review.
    let mut changed = market.coordinator_manifest.clone();
    changed.model = "coordinator-unreviewed".into();
    let job = market.validator.post(market.coordinator.public_key(), "unreviewed config", false).await.unwrap();
    bazaar_agents::relay_client::follow_task(&market.relay, &job.id, 30).await.unwrap();
    review(&market.relay, &market.coordinator, &changed, 2).await;
    let recorded = market.validator.assess(&job.id, Duration::from_secs(1)).await.unwrap().unwrap();
    assert_eq!(recorded.assessment.verdict, Verdict::Rejected, "{recorded:?}");
    assert!(recorded.assessment.grounds.contains("not passed review"), "{recorded:?}");

    // A worker whose manifest changed since its review refuses to take directed work.
    let mut changed = market.specialist_config();
    changed.manifest.model = "specialist-2".into();
    let refused = worker::run(changed, std::future::pending()).await.unwrap_err();
    assert!(refused.to_string().contains("changed since its last passed review"), "{refused}");
    let unreviewed = WorkerConfig { signer: Arc::new(Signer::generate(&OsEntropy)), ..market.specialist_config() };
    assert!(worker::run(unreviewed, std::future::pending())
        .await
        .unwrap_err()
        .to_string()
        .contains("no passed review"));
}

/// A specialist's engine is stopped at its daily allowance (the overshoot of
/// the call in flight recorded, never hidden), the next task is declined;
/// an attempt interrupted by a crash keeps its reservation pending across the
/// restart and blocks work until the owner records the cost and clears it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_specialist_works_within_its_allowance_and_unknown_costs_wait_for_the_owner() {
    use bazaar_agents::labor::worker::{AllowanceConfig, Meter};
    use bazaar_relay::labor::allowance::PendingWhy;
    let mut market = Market::open("allowance").await;
    market.workers.drain(..).for_each(|w| w.abort());
    let metered = |daily: u64| {
        let mut config = market.specialist_config();
        let engine =
            "cat >/dev/null; echo 'usage: 0.3 USD' >&2; sleep 0.2; echo 'usage: 1.2 USD' >&2; sleep 5; echo late";
        if let Role::Specialist { engine: e, .. } = &mut config.role {
            e.command = engine.into();
        }
        config.allowance = Some(AllowanceConfig { asset: "USD".into(), daily });
        config
    };
    let job = |input: &str| {
        let tags = request_tags("script-delivery/v1", false, &[market.specialist.public_key()], input);
        market.coordinator.sign(bazaar_sdk::clock::unix_now(), JOB_REQUEST, tags, "")
    };
    let worker = tokio::spawn(worker::run(metered(1_000_000), std::future::pending()));
    let first = job("first");
    RelayClient::connect(&market.relay).await.unwrap().publish(&first).await.unwrap();
    let failed = wait_for_feedback(&market.relay, &first.id, "error").await;
    assert!(failed.detail.contains("cancelled at the daily model-usage allowance"), "{failed:?}");
    let second = job("second");
    RelayClient::connect(&market.relay).await.unwrap().publish(&second).await.unwrap();
    let declined = wait_for_feedback(&market.relay, &second.id, "error").await;
    assert!(declined.detail.contains("today's allowance is spent"), "{declined:?}");
    worker.abort();
    let state = Meter::inspect(&market.dir.join("specialist-state")).unwrap().state;
    assert_eq!(state.spent, 1_200_000, "the overshoot of the call in flight is recorded");

    // A crash with a task running: on restart its cost is unknown and blocks work.
    let mut meter = Meter::inspect(&market.dir.join("specialist-state")).unwrap();
    meter.state.daily = 10_000_000;
    meter.state.reserve("crashed-task", bazaar_sdk::clock::unix_now()).unwrap();
    meter.state.usage("crashed-task", 100_000, bazaar_sdk::clock::unix_now());
    meter.save().unwrap();
    let worker = tokio::spawn(worker::run(metered(10_000_000), std::future::pending()));
    let third = job("third");
    RelayClient::connect(&market.relay).await.unwrap().publish(&third).await.unwrap();
    let blocked = wait_for_feedback(&market.relay, &third.id, "error").await;
    assert!(blocked.detail.contains("unknown cost"), "{blocked:?}");
    worker.abort();
    let mut meter = Meter::inspect(&market.dir.join("specialist-state")).unwrap();
    let pending = meter.state.pending.clone().expect("pending across the restart");
    assert_eq!((pending.why, pending.used_known, pending.missing_cost), (PendingWhy::Interrupted, 100_000, None));
    assert!(meter.state.clear().is_err(), "an unknown cost is never cleared as zero");
    meter.state.reconcile(50_000, bazaar_sdk::clock::unix_now()).unwrap();
    meter.state.clear().unwrap();
    meter.save().unwrap();
    market.workers.push(tokio::spawn(worker::run(metered(10_000_000), std::future::pending())));
    let worked = wait_for_feedback(&market.relay, &third.id, "processing").await;
    assert!(
        ["claim", "running"].contains(&worked.detail.as_str()),
        "after reconciliation the stored task is taken: {worked:?}"
    );
}

/// The first feedback on `task` with `status`, waiting up to 20 s.
async fn wait_for_feedback(
    relay: &str,
    task: &bazaar_relay::Hex32,
    status: &str,
) -> bazaar_relay::jobs::task::Feedback {
    for _ in 0..100 {
        let view = bazaar_agents::relay_client::follow_task(relay, task, 0).await.unwrap();
        if let Some(found) = view.feedback.iter().find(|f| f.status == status) {
            return found.clone();
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    panic!("no {status} feedback on {task}");
}

/// The longer answer wins: a pairwise judge for the test.
struct Longer;

impl bazaar_relay::labor::judge::PairwiseJudge for Longer {
    fn compare(&self, _prompt: &str, a: &str, b: &str) -> Option<f64> {
        Some(match a.len().cmp(&b.len()) {
            std::cmp::Ordering::Greater => 1.0,
            std::cmp::Ordering::Equal => 0.5,
            std::cmp::Ordering::Less => 0.0,
        })
    }
}

/// A contest: the same prompt to three named workers, every pair judged,
/// Bradley–Terry ratings as quality, one signed label each, and the grades
/// kept under the contest rubric, apart from coordination's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_contest_rates_named_workers_by_pairwise_judgement_apart_from_coordination() {
    use bazaar_relay::labor::judge::{Rubric, CONTEST_ANSWER};
    let mut market = Market::open("contest").await;
    let coordination = market.run(SCRIPT, false, Mode::Serve).await;
    assert_eq!(coordination.assessment.verdict, Verdict::Accepted);
    let mut entrants = Vec::new();
    for (n, engine) in ["cat", "cat; echo ' and more'", "cat; echo ' and more, and most'"].iter().enumerate() {
        let signer = Arc::new(Signer::generate(&OsEntropy));
        let model = format!("contestant-{n}");
        review(&market.relay, &signer, &manifest(&model), 0).await;
        let mut config = market.specialist_config();
        config.signer = signer.clone();
        config.accept_from = HashSet::from([market.validator.public_key()]);
        config.manifest = manifest(&model);
        config.state_dir = market.dir.join(format!("contestant-{n}"));
        if let Role::Specialist { engine: e, .. } = &mut config.role {
            e.command = (*engine).into();
        }
        market.workers.push(tokio::spawn(worker::run(config, std::future::pending())));
        entrants.push(signer.public_key());
    }
    let outcomes =
        market.validator.contest(&entrants, "Describe the lobby.", &Longer, Duration::from_secs(20)).await.unwrap();
    assert_eq!(outcomes.len(), 3, "{outcomes:?}");
    let quality: Vec<f64> = outcomes.iter().map(|o| o.assessment.quality.unwrap()).collect();
    assert!(quality[2] > quality[1] && quality[1] > quality[0], "the longer answers won: {quality:?}");
    let records = market.validator.records().unwrap();
    let contest: Vec<_> = records.grades.values().filter(|(k, _)| k.rubric == Rubric::Contest).collect();
    assert_eq!(contest.len(), 3, "one contest record per configuration");
    assert!(contest.iter().all(|(k, g)| k.workflow == CONTEST_ANSWER && g.accepted == 1));
    let (_, coordination_grade) = records.grades.values().find(|(k, _)| k.rubric == Rubric::Coordination).unwrap();
    assert_eq!(
        (coordination_grade.accepted, coordination_grade.quality),
        (1, Some(1.0)),
        "contest grades never count here"
    );
    let labels =
        Filter { kinds: Some(vec![1_985]), authors: Some(vec![market.validator.public_key()]), ..Filter::default() };
    assert_eq!(market.count(labels).await, 4, "one label for the coordination task, one per contestant");
}

/// Records stay distinct: a coordinator enrolled as a registry agent with
/// stake locked fails a job — the outcome is rejected with quality 0 (stake
/// does not rescue it), and neither the agent's stake nor its reputation
/// moves (a job outcome never reaches a stake not locked for that job, and
/// grades never enter the reputation score).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_job_touches_no_stake_and_no_reputation_and_stake_rescues_nothing() {
    let market = Market::open("distinct").await;
    let operator = bazaar_sdk::Client::new(&market._local.url, Some("op".into()));
    let agent_key = bazaar_sdk::generate_key();
    let (owner, agent) =
        bazaar_stage::enroll_pair_with_key(&operator, "coord-owner", "coord-agent", &agent_key).await.unwrap();
    let owner_id = bazaar_stage::member_id(&owner).await.unwrap();
    operator.mint(&owner_id, 10_000, "distinct-mint").await.unwrap();
    owner.fund("coord-agent", 5_000, "distinct-fund").await.unwrap();
    // A stake lock counts against the agent's budget like any commitment of its own money.
    owner.set_budget("coord-agent", 0, 2_000, 2_000).await.unwrap();
    agent.stake_lock(2_000, "distinct-stake").await.unwrap();
    let enrollment =
        bazaar_agents::labor::identity::enroll(&market.coordinator, &agent_key, bazaar_sdk::clock::unix_now());
    RelayClient::connect(&market.relay).await.unwrap().publish(&enrollment).await.unwrap();
    let agent_id = bazaar_stage::member_id(&agent).await.unwrap();
    let (stake_before, reputation_before) =
        (operator.stake(&agent_id).await.unwrap(), operator.reputation(&agent_id).await.unwrap());

    let failed = market.run("Line one. WRONG-ME\nLine two.", false, Mode::Serve).await;
    assert_eq!(
        (failed.assessment.verdict, failed.assessment.quality),
        (Verdict::Rejected, Some(0.0)),
        "stake rescues nothing"
    );
    assert_eq!(
        operator.stake(&agent_id).await.unwrap(),
        stake_before,
        "no stake moved for a job it was not locked for"
    );
    assert_eq!(stake_before.balance_minor, 2000, "the stake was locked: {stake_before:?}");
    let mut reputation_after = wire_json(&operator.reputation(&agent_id).await.unwrap());
    let mut reputation_before = wire_json(&reputation_before);
    assert!(reputation_before["local"].is_object() && reputation_before["combined"].is_object(), "{reputation_before}");
    for figures in [&mut reputation_before, &mut reputation_after] {
        figures["local"].as_object_mut().unwrap().remove("computedAtMs");
    }
    assert_eq!(reputation_after["local"], reputation_before["local"], "a job grade never enters reputation");
    assert_eq!(reputation_after["combined"], reputation_before["combined"]);
    assert_eq!(reputation_after["stake"], reputation_before["stake"]);
}

async fn available(client: &bazaar_sdk::Client) -> u64 {
    wire_json(&client.me().await.unwrap())["available_minor"].as_u64().unwrap()
}

/// A job's bounty is funded before it is published, pays nothing on an
/// unassessed or rejected outcome, is paid once — to the coordinator's
/// owner, as its review declares — when the unassessed job is assessed again
/// and accepted, and the worker's earnings are exactly that confirmed reward.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bounty_pays_once_on_acceptance_and_never_on_rejection_or_unassessed() {
    let market = Market::open("bounty").await;
    let before = available(&market.poster).await;
    let script = format!("{SCRIPT}\nunassessed first");
    let unassessed = market.run_paid(&script, false, Mode::TooBig, PostReward::Bounty(500)).await;
    assert_eq!((unassessed.assessment.verdict, &unassessed.reward), (Verdict::Unassessed, &None));
    assert_eq!(available(&market.poster).await, before - 500, "held from the moment the job was posted");
    assert_eq!(available(&market.coordinator_owner).await, 0);

    let job = bazaar_relay::Hex32::parse(&unassessed.job_id).unwrap();
    let accepted = market.validator.reassess(&job, Duration::from_secs(1)).await.unwrap().unwrap();
    assert_eq!(accepted.assessment.verdict, Verdict::Accepted, "{accepted:?}");
    let reward = accepted.reward.clone().expect("released on acceptance");
    assert_eq!((reward["gross_minor"].as_u64(), reward["net_minor"].as_u64()), (Some(500), Some(495)));
    assert_eq!(available(&market.coordinator_owner).await, 495, "paid to the declared destination");
    // Releasing again (a retry of a release that looked failed) pays nothing more.
    let again = market.validator.release(&job).await.unwrap().unwrap();
    assert_eq!(again["transfers"], reward["transfers"]);
    assert_eq!(
        market.validator.reassess(&job, Duration::from_secs(1)).await.unwrap().unwrap().verdict_id,
        accepted.verdict_id,
        "accepted is final"
    );
    assert_eq!(available(&market.coordinator_owner).await, 495);

    let rejected = market.run_paid("Line one. WRONG-ME\nLine two.", false, Mode::Serve, PostReward::Bounty(300)).await;
    assert_eq!((rejected.assessment.verdict, &rejected.reward), (Verdict::Rejected, &None));
    assert_eq!(available(&market.coordinator_owner).await, 495, "a rejected outcome releases nothing");
    assert_eq!(available(&market.poster).await, before - 800, "the rejected job's bounty stays held for its poster");

    let earnings = bazaar_agents::labor::bounty::earnings(
        &market.coordinator_owner,
        &market.coordinator_agent,
        &market.relay,
        market.coordinator.public_key(),
    )
    .await
    .unwrap();
    assert_eq!(earnings["totals"]["net_minor"], 495);
    assert_eq!(earnings["rewards"].as_array().unwrap().len(), 1);
    assert_eq!(earnings["unverified_claims"], serde_json::json!([]));
}

/// Lines the leasing test's engine wrote, in the order it ran them.
async fn wait_for_lines(path: &std::path::Path, count: usize) -> Vec<String> {
    for _ in 0..150 {
        let text = std::fs::read_to_string(path).unwrap_or_default();
        let lines: Vec<String> = text.lines().filter(|l| !l.is_empty()).map(str::to_string).collect();
        if lines.len() >= count {
            return lines;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    panic!("the engine ran fewer than {count} tasks");
}

/// A worker that sells leases serves the identity holding an active lease
/// first, whichever job arrived first; a lease the worker has not receipted
/// is a recovery case and gives no priority.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_leased_identity_is_served_first_only_once_the_lease_is_receipted() {
    use bazaar_agents::labor::worker::LeaseSource;
    let mut market = Market::open("lease").await;
    market.workers.drain(..).for_each(|w| w.abort());
    let operator = market._local.operator();
    let payer_key = bazaar_sdk::generate_key();
    let (payer_owner, payer) =
        bazaar_stage::enroll_pair_with_key(&operator, "lease-b-owner", "lease-b", &payer_key).await.unwrap();
    let owner_id = bazaar_stage::member_id(&payer_owner).await.unwrap();
    operator.mint(&owner_id, 1_000, "lease-mint").await.unwrap();
    payer_owner.fund("lease-b", 1_000, "lease-fund").await.unwrap();
    payer_owner.set_budget("lease-b", 1_000, 1_000, 1_000).await.unwrap();
    let (worker_owner, worker_agent) = bazaar_stage::enroll_pair(&operator, "lease-w-owner", "lease-w").await.unwrap();
    let worker_owner_id = bazaar_stage::member_id(&worker_owner).await.unwrap();
    let (walk_in, leased) = (Signer::generate(&OsEntropy), Signer::generate(&OsEntropy));
    let identity = bazaar_agents::labor::identity::enroll(&leased, &payer_key, bazaar_sdk::clock::unix_now());
    let identity = bazaar_sdk::wire::nostr::SignedEvent::from(&identity);
    let lease =
        wire_json(&payer.buy_lease("lease-w", &worker_owner_id, 100, 3_600, &identity, "lease-1").await.unwrap().body);

    let order = market.dir.join("order.log");
    let config = || {
        let mut config = market.specialist_config();
        config.accept_from = HashSet::from([walk_in.public_key(), leased.public_key()]);
        config.leases = Some(LeaseSource { registry: worker_agent.clone(), agent: "lease-w".into() });
        if let Role::Specialist { engine, .. } = &mut config.role {
            let log = order.display();
            engine.command = format!("cat >> {log}; echo >> {log}; echo 'usage: 0.001 USD' >&2; echo done");
        }
        config
    };
    // The leased identity's job is older, so the relay hands the walk-in's over first.
    let post = |by: &Signer, input: &str, age_s: u64| {
        let tags = request_tags("script-delivery/v1", false, &[market.specialist.public_key()], input);
        by.sign(bazaar_sdk::clock::unix_now() - age_s, JOB_REQUEST, tags, "")
    };
    let round = |config: WorkerConfig, jobs: Vec<bazaar_relay::Event>, lines: usize| {
        let relay = market.relay.clone();
        let order = order.clone();
        async move {
            let mut client = RelayClient::connect(&relay).await.unwrap();
            for job in &jobs {
                assert!(client.publish(job).await.unwrap().0);
            }
            let running = tokio::spawn(worker::run(config, std::future::pending()));
            let ran = wait_for_lines(&order, lines).await;
            running.abort();
            ran
        }
    };
    let first = vec![post(&leased, "leased-1", 20), post(&walk_in, "walk-in-1", 10)];
    let ran = round(config(), first, 2).await;
    assert_eq!(ran, ["walk-in-1", "leased-1"], "no receipt, no priority: first come, first served");

    worker_agent.receipt_lease(lease["id"].as_str().unwrap()).await.unwrap();
    let second = vec![post(&leased, "leased-2", 20), post(&walk_in, "walk-in-2", 10)];
    let ran = round(config(), second, 4).await;
    assert_eq!(&ran[2..], ["leased-2", "walk-in-2"], "an active lease goes first");
}

/// A coordinator that pays its specialist takes no task the owner has not
/// authorized a fee for (declined, not failed: taken again once the owner
/// acts), and pays exactly the authorized fee, from its own budget, before
/// it hands the task off.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_coordinator_pays_only_the_authorized_fee_before_handing_off() {
    let mut market = Market::open("fee").await;
    market.workers.drain(..).for_each(|w| w.abort());
    market.start_specialist();
    let operator = market._local.operator();
    let owner_id = bazaar_stage::member_id(&market.coordinator_owner).await.unwrap();
    operator.mint(&owner_id, 1_000, "fee-mint").await.unwrap();
    market.coordinator_owner.fund("paid-coord", 1_000, "fee-fund").await.unwrap();
    market.coordinator_owner.set_budget("paid-coord", 500, 1_000, 1_000).await.unwrap();
    let (spec_owner, spec_agent) = bazaar_stage::enroll_pair(&operator, "spec-owner", "spec-agent").await.unwrap();
    let (spec_owner_id, spec_agent_id) =
        (bazaar_stage::member_id(&spec_owner).await.unwrap(), bazaar_stage::member_id(&spec_agent).await.unwrap());
    let job = market.validator.post(market.coordinator.public_key(), SCRIPT, false).await.unwrap();
    let coordinator = |market: &Market| {
        let fee = worker::SpecialistFee::Authorized {
            registry: market.coordinator_client.clone(),
            agent: market.coordinator_agent.clone(),
        };
        WorkerConfig {
            relay: market.relay.clone(),
            signer: market.coordinator.clone(),
            accept_from: HashSet::from([market.validator.public_key()]),
            manifest: market.coordinator_manifest.clone(),
            role: Role::Coordinator {
                specialist: market.specialist.public_key(),
                handoff_wait: Duration::from_secs(20),
                fee,
            },
            state_dir: market.dir.join("coordinator-state"),
            allowance: None,
            leases: None,
        }
    };
    let first = tokio::spawn(worker::run(coordinator(&market), std::future::pending()));
    let declined = wait_for_feedback(&market.relay, &job.id, "error").await;
    assert!(declined.detail.contains("no authorization from the owner"), "{declined:?}");
    first.abort();
    assert_eq!(available(&spec_owner).await, 0, "nothing paid, nothing handed off");

    market
        .coordinator_owner
        .authorize_service(&market.coordinator_agent, &job.id.to_hex(), &spec_agent_id, &spec_owner_id, 200)
        .await
        .unwrap();
    market.workers.push(tokio::spawn(worker::run(coordinator(&market), std::future::pending())));
    let answered = bazaar_agents::relay_client::follow_task_until(&market.relay, &job.id, 30, &|view| {
        view.state == bazaar_relay::jobs::task::TaskState::Answered
    })
    .await
    .unwrap();
    assert_eq!(answered.state, bazaar_relay::jobs::task::TaskState::Answered, "taken again once authorized");
    assert_eq!(available(&spec_owner).await, 198, "the authorized fee, less the protocol fee");
    assert_eq!(available(&market.coordinator_client).await, 800, "from the coordinator's own budget");
    let journal = bazaar_agents::labor::payments::Journal::inspect(&market.dir.join("coordinator-state")).unwrap();
    assert_eq!(journal.attempts().len(), 1);
    assert_eq!(journal.attempts()[0].state, bazaar_agents::labor::payments::AttemptState::Confirmed);
    let recorded = market.validator.assess(&job.id, Duration::from_secs(1)).await.unwrap().unwrap();
    assert_eq!(recorded.assessment.verdict, Verdict::Accepted, "a paid fee does not accept the job; the evidence does");
}

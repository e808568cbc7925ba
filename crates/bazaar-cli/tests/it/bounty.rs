//! Bounties through HTTP on the embedded store and on PostgreSQL: a job's
//! reward is held when the job is posted, released once on the validator's
//! accepted verdict (never on rejected or unassessed, never by a verdict from
//! another key, never to a destination the worker's owner does not hold),
//! and withdrawn only after its claim window. Earnings equal the ledger's
//! confirmed transfers, and a future reward never funds today's spending.

use crate::common;

use bazaar_cli::wire_json;
use common::{available, event_json, refused};

use bazaar_relay::jobs::request_tags;
use bazaar_relay::jobs::reward::JobReward;
use bazaar_relay::labor::outcome::{verdict_event, Assessment, Subject};
use bazaar_relay::labor::review::{preflight, review_event, Manifest};
use bazaar_relay::{Event, Signer};
use bazaar_sdk::Client;
use bazaar_server::OsEntropy;
use bazaar_stage::{enroll_pair, enroll_pair_with_key, member_id, LocalRegistry};
use bazaar_types::limits::BOUNTY_CLAIM_S_MIN;
use serde_json::json;

const REWARD: u64 = 1_000;
const FEE: u64 = REWARD / 100;

fn job(validator: &Signer, worker: &Signer, reward: Option<JobReward>) -> Event {
    let mut tags = request_tags("coordination/v1", false, &[worker.public_key()], "brief");
    tags.extend(reward.map(|r| r.tag()));
    validator.sign(bazaar_sdk::clock::unix_now(), bazaar_relay::jobs::JOB_REQUEST, tags, "")
}

fn review(worker: &Signer, destination: &str, later_s: u64) -> bazaar_sdk::wire::nostr::SignedEvent {
    let manifest = Manifest {
        runtime: "bazaar-worker/0.1".into(),
        model: "m".into(),
        tools: vec![],
        credentials: vec![],
        reward_destination: destination.into(),
        reports_usage: true,
    };
    let found = preflight(&manifest, &|_| true, &|_| true);
    event_json(&review_event(worker, &manifest, &found, bazaar_sdk::clock::unix_now() + later_s))
}

fn verdict(
    validator: &Signer,
    job: &Event,
    worker: &Signer,
    assessment: &Assessment,
) -> bazaar_sdk::wire::nostr::SignedEvent {
    let result =
        worker.sign(job.created_at, bazaar_relay::jobs::JOB_RESULT, vec![vec!["e".into(), job.id.to_hex()]], "done");
    let subject = Subject {
        job,
        result: Some(&result),
        worker: &worker.public_key(),
        workflow: "coordination/v1",
        config_hash: "c",
    };
    event_json(&verdict_event(validator, &subject, assessment, job.created_at + 1))
}

struct Cast {
    poster: Client,
    poster_id: String,
    worker_owner: Client,
    worker_owner_id: String,
    stranger: Client,
    validator: Signer,
    worker: Signer,
    enrollment: bazaar_sdk::wire::nostr::SignedEvent,
}

async fn cast(local: &LocalRegistry, case: &str) -> Cast {
    let operator = local.operator();
    let (poster_owner, poster) =
        enroll_pair(&operator, &format!("{case}-poster-owner"), &format!("{case}-poster")).await.unwrap();
    let (mint, fund) = (format!("{case}-mint"), format!("{case}-fund"));
    let funding = common::Funding { mint: (10_000, &mint), fund: (10_000, &fund), budget: [5_000, 10_000, 10_000] };
    common::fund_agent(&operator, &poster_owner, &format!("{case}-poster"), funding).await;
    let agent_key = bazaar_sdk::generate_key();
    let (worker_owner, _worker_agent) =
        enroll_pair_with_key(&operator, &format!("{case}-worker-owner"), &format!("{case}-worker"), &agent_key)
            .await
            .unwrap();
    let (_, stranger) =
        enroll_pair(&operator, &format!("{case}-stranger-owner"), &format!("{case}-stranger")).await.unwrap();
    let worker = Signer::generate(&OsEntropy);
    let enrollment =
        event_json(&bazaar_agents::labor::identity::enroll(&worker, &agent_key, bazaar_sdk::clock::unix_now()));
    Cast {
        poster_id: member_id(&poster).await.unwrap(),
        poster,
        worker_owner_id: member_id(&worker_owner).await.unwrap(),
        worker_owner,
        stranger,
        validator: Signer::generate(&OsEntropy),
        worker,
        enrollment,
    }
}

async fn releases_once_on_accepted_only(local: &LocalRegistry) {
    let c = cast(local, "once").await;
    let reward = JobReward::Bounty { amount_minor: REWARD, poster: c.poster_id.clone() };
    // A job whose tag does not name this amount and poster cannot be funded; nor one that says none.
    for wrong in [None, Some(JobReward::None), Some(JobReward::Bounty { amount_minor: 7, poster: c.poster_id.clone() })]
    {
        let (code, _) =
            refused(c.poster.fund_bounty(&event_json(&job(&c.validator, &c.worker, wrong)), REWARD, None).await);
        assert_eq!(code, "bounty_invalid");
    }
    let job = job(&c.validator, &c.worker, Some(reward));
    let before = available(&c.poster).await;
    let funded = wire_json(&c.poster.fund_bounty(&event_json(&job), REWARD, None).await.unwrap().body);
    let id = funded["id"].as_str().unwrap().to_string();
    assert_eq!((funded["state"].as_str(), id.clone()), (Some("funded"), format!("bty_{}", job.id.to_hex())));
    assert_eq!(available(&c.poster).await, before - REWARD, "held when the job is posted");
    assert!(c.poster.fund_bounty(&event_json(&job), REWARD, None).await.unwrap().replayed, "a retry replays");

    let owner_review = review(&c.worker, &format!("acct:{}", c.worker_owner_id), 0);
    let present = |client: &Client,
                   verdict: bazaar_sdk::wire::nostr::SignedEvent,
                   review: bazaar_sdk::wire::nostr::SignedEvent| {
        let (client, id, enrollment) = (client.clone(), id.clone(), c.enrollment.clone());
        async move { client.release_bounty(&id, &verdict, &enrollment, &review).await }
    };
    // Rejected and unassessed release nothing and change nothing.
    let rejected = verdict(&c.validator, &job, &c.worker, &Assessment::rejected("wrong content"));
    let unassessed = verdict(&c.validator, &job, &c.worker, &Assessment::unassessed("artifact unavailable"));
    for (verdict, said) in [(rejected, "rejected"), (unassessed, "unassessed")] {
        let (code, body) = refused(present(&c.worker_owner, verdict, owner_review.clone()).await);
        assert_eq!((code.as_str(), body["facts"]["verdict"].as_str()), ("bounty_not_accepted", Some(said)));
    }
    // An accepted verdict signed by any key but the job's author releases nothing.
    let impostor = Signer::generate(&OsEntropy);
    let forged = verdict(&impostor, &job, &c.worker, &Assessment::accepted(1.0, "ok"));
    assert_eq!(refused(present(&c.stranger, forged, owner_review.clone()).await).0, "outcome_invalid");
    // A destination the worker's owner does not hold is refused, even on an accepted verdict.
    let accepted = verdict(&c.validator, &job, &c.worker, &Assessment::accepted(1.0, "re-assessed: evidence held"));
    let elsewhere = review(&c.worker, &c.poster_id, 1);
    assert_eq!(refused(present(&c.stranger, accepted.clone(), elsewhere).await).0, "reward_destination_invalid");
    // Until then, the reward is nobody's to spend: the worker's owner holds nothing.
    assert_eq!(available(&c.worker_owner).await, 0, "a future reward never funds today");
    let state = wire_json(&c.stranger.bounty(&id).await.unwrap());
    assert_eq!(state["state"], "funded");

    // The unassessed job, re-assessed as accepted, is released — once.
    let paid = wire_json(&present(&c.stranger, accepted.clone(), owner_review.clone()).await.unwrap().body);
    assert_eq!((paid["gross_minor"].as_u64(), paid["fee_minor"].as_u64()), (Some(REWARD), Some(FEE)));
    assert_eq!(paid["net_minor"].as_u64(), Some(REWARD - FEE));
    assert_eq!(paid["destination"].as_str(), Some(c.worker_owner_id.as_str()));
    assert_eq!(available(&c.worker_owner).await, REWARD - FEE, "paid to the destination the worker declared");
    let (code_again, body) = refused(present(&c.worker_owner, accepted.clone(), owner_review.clone()).await);
    assert_eq!((code_again.as_str(), &body["facts"]["transfers"]), ("bounty_already_released", &paid["transfers"]));
    assert!(present(&c.stranger, accepted, owner_review).await.unwrap().replayed, "the presenter's retry replays");
    assert_eq!(available(&c.worker_owner).await, REWARD - FEE, "released once");
    assert_eq!(available(&c.poster).await, before - REWARD);
    assert_eq!(refused(c.poster.withdraw_bounty(&id).await).0, "bounty_already_released");

    // Earnings are exactly the ledger-confirmed rewards.
    let worker_agent = paid["worker"].as_str().unwrap();
    let earned = wire_json(&c.worker_owner.earnings(worker_agent).await.unwrap());
    assert_eq!(earned["rewards"].as_array().unwrap().len(), 1);
    assert_eq!(earned["totals"], json!({"gross_minor": REWARD, "fee_minor": FEE, "net_minor": REWARD - FEE}));
    assert_eq!(earned["rewards"][0]["transfers"], paid["transfers"]);
    let refused = c.stranger.earnings(worker_agent).await.unwrap_err();
    assert_eq!(refused.code(), Some("not_permitted"));
}

async fn withdraws_only_after_the_claim_window(local: &LocalRegistry) {
    let c = cast(local, "late").await;
    let reward = JobReward::Bounty { amount_minor: REWARD, poster: c.poster_id.clone() };
    let job = job(&c.validator, &c.worker, Some(reward));
    let before = available(&c.poster).await;
    let id = c.poster.fund_bounty(&event_json(&job), REWARD, Some(BOUNTY_CLAIM_S_MIN)).await.unwrap().body.id;
    assert_eq!(refused(c.poster.withdraw_bounty(&id).await).0, "bounty_claim_open");
    local.clock.advance_s(BOUNTY_CLAIM_S_MIN + 1);
    assert_eq!(refused(c.stranger.withdraw_bounty(&id).await).0, "not_party");
    let withdrawn = wire_json(&c.poster.withdraw_bounty(&id).await.unwrap().body);
    assert_eq!((withdrawn["state"].as_str(), withdrawn["refunded"].as_u64()), (Some("withdrawn"), Some(REWARD)));
    assert_eq!(available(&c.poster).await, before, "the hold went back");
    let accepted = verdict(&c.validator, &job, &c.worker, &Assessment::accepted(1.0, "late"));
    let owner_review = review(&c.worker, &c.worker_owner_id, 0);
    let late = c.worker_owner.release_bounty(&id, &accepted, &c.enrollment, &owner_review).await;
    assert_eq!(refused(late).0, "bounty_state");
    assert_eq!(available(&c.worker_owner).await, 0);
}

async fn all_cases(local: &LocalRegistry) {
    releases_once_on_accepted_only(local).await;
    withdraws_only_after_the_claim_window(local).await;
    let audit = common::assert_store_audit_passes(local).await;
    assert_eq!(audit.balance_sum_minor, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bounties_on_sqlite() {
    let dir = common::fresh_dir("bazaar-bounty");
    let (local, _) = common::embedded_with_operator(&dir, "op").await;
    all_cases(&local).await;
    std::fs::remove_dir_all(&dir).ok();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bounties_on_postgres() {
    let database = common::ThrowawayDatabase::create(&format!("bazaar_bounty_{}", std::process::id())).await;
    let local = database.registry().await;
    all_cases(&local).await;
    drop(local);
    database.drop().await;
}

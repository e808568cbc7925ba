//! Priority leases on both stores: bought only for the payer's own task
//! identity, prepaid once from its budget, never active until the worker
//! publishes its receipt (a recovery case until then), ended when the period
//! ends and never renewed.

use crate::common;

use bazaar_cli::wire_json;
use common::{available, refused};

use bazaar_relay::Signer;
use bazaar_sdk::Client;
use bazaar_server::OsEntropy;
use bazaar_stage::{enroll_pair_with_key, member_id, LocalRegistry};

const PRICE: u64 = 300;
const PERIOD_S: u64 = 3_600;

/// An agent enrolled with a known key, and the enrollment binding a fresh Nostr key to it.
async fn agent_with_identity(
    local: &LocalRegistry,
    owner: &str,
    agent: &str,
) -> (Client, Client, String, bazaar_sdk::wire::nostr::SignedEvent) {
    let key = bazaar_sdk::generate_key();
    let (owner, agent) = enroll_pair_with_key(&local.operator(), owner, agent, &key).await.unwrap();
    let nostr = Signer::generate(&OsEntropy);
    let enrollment = bazaar_agents::labor::identity::enroll(&nostr, &key, bazaar_sdk::clock::unix_now());
    let enrollment = bazaar_sdk::wire::nostr::SignedEvent::from(&enrollment);
    let id = member_id(&agent).await.unwrap();
    (owner, agent, id, enrollment)
}

async fn leases(local: &LocalRegistry) {
    let (payer_owner, payer, _, identity) = agent_with_identity(local, "lease-payer-owner", "lease-payer").await;
    let payer_owner_id = member_id(&payer_owner).await.unwrap();
    local.operator().mint(&payer_owner_id, 5_000, "lease-mint").await.unwrap();
    payer_owner.fund("lease-payer", 5_000, "lease-fund").await.unwrap();
    payer_owner.set_budget("lease-payer", 1_000, 5_000, 5_000).await.unwrap();
    let (worker_owner, worker, worker_id, _) = agent_with_identity(local, "lease-worker-owner", "lease-worker").await;
    let worker_owner_id = member_id(&worker_owner).await.unwrap();
    let (_, _, _, someone_else) = agent_with_identity(local, "lease-other-owner", "lease-other").await;

    // Priority belongs to the payer's own task identity: another's is refused, and nothing moves.
    let other = payer.buy_lease(&worker_id, &worker_owner_id, PRICE, PERIOD_S, &someone_else, "k-1").await;
    assert_eq!(refused(other).0, "lease_identity_mismatch");
    let short = payer.buy_lease(&worker_id, &worker_owner_id, PRICE, 1, &identity, "k-2").await;
    assert_eq!(refused(short).0, "invalid_request", "the period has bounds");
    assert_eq!(available(&payer).await, 5_000);

    let lease = wire_json(
        &payer.buy_lease(&worker_id, &worker_owner_id, PRICE, PERIOD_S, &identity, "k-3").await.unwrap().body,
    );
    let id = lease["id"].as_str().unwrap().to_string();
    assert_eq!(lease["status"], "recovery", "paid, but no receipt yet: never shown as priority");
    assert_eq!(available(&payer).await, 5_000 - PRICE, "prepaid in full");
    assert_eq!(available(&worker_owner).await, PRICE - PRICE / 100);
    assert_eq!(wire_json(&payer.lease(&id).await.unwrap())["status"], "recovery");
    assert_eq!(refused(payer.receipt_lease(&id).await).0, "not_party", "only the worker publishes its receipt");
    let receipted = wire_json(&worker.receipt_lease(&id).await.unwrap().body);
    assert_eq!(receipted["status"], "active");
    let listed = worker.call::<serde_json::Value>(reqwest::Method::GET, "/v1/leases", None, None).await.unwrap().body;
    assert_eq!(listed["leases"][0]["status"], "active");
    assert_eq!(listed["leases"][0]["identity"], identity.pubkey.as_str());

    // The period ends; nothing renews it and nothing more is charged.
    local.clock.advance_s(PERIOD_S + 1);
    assert_eq!(wire_json(&payer.lease(&id).await.unwrap())["status"], "ended");
    assert_eq!(available(&payer).await, 5_000 - PRICE);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leases_on_sqlite() {
    let dir = common::fresh_dir("bazaar-lease");
    let (local, _) = common::embedded_with_operator(&dir, "op").await;
    leases(&local).await;
    assert_eq!(common::assert_store_audit_passes(&local).await.balance_sum_minor, 0);
    std::fs::remove_dir_all(&dir).ok();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leases_on_postgres() {
    let database = common::ThrowawayDatabase::create(&format!("bazaar_lease_{}", std::process::id())).await;
    let local = database.registry().await;
    leases(&local).await;
    assert_eq!(common::assert_store_audit_passes(&local).await.balance_sum_minor, 0);
    drop(local);
    database.drop().await;
}

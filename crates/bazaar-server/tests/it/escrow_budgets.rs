//! Over HTTP: a buyer reclaims an undelivered milestone only after its due date
//! plus the grace (409 `reclaim_too_early` naming when, then 200, then 409
//! once), and a stake lock past the agent's per-day ceiling is the same 422
//! `budget_per_day_exceeded` problem a token gets, counted once it passes.

use crate::common;

use bazaar_sdk::{Client, SdkError};
use bazaar_types::limits::MILESTONE_RECLAIM_GRACE_S;
use bazaar_types::Clock;
use common::{agent_of, person, registry, Registry};
use serde_json::Value;

/// A problem's status, code and facts.
fn problem(error: SdkError) -> (u16, String, Value) {
    match error {
        SdkError::Problem { status, code, body, .. } => (status, code, body["facts"].clone()),
        other => panic!("not a problem: {other}"),
    }
}

/// An owner's client and two agents of two owners: a buyer funded with `funds` under `ceilings`, and a seller.
async fn parties(r: &Registry, funds: u64, [per_call, per_day, total]: [u64; 3]) -> (Client, Client, Client, String) {
    let (owner, other) = (person(r, "owner-a").await, person(r, "owner-b").await);
    let buyer = agent_of(r, &owner, "buyer-a").await;
    let seller = agent_of(r, &other, "seller-b").await;
    let owner_client = r.operator.with_credential(&owner.credential);
    r.operator.mint(&owner.id, funds, "mint-a").await.unwrap();
    owner_client.fund("buyer-a", funds, "fund-a").await.unwrap();
    owner_client.set_budget("buyer-a", per_call, per_day, total).await.unwrap();
    let client = |who: &common::Person| r.operator.with_credential(&who.credential);
    (owner_client, client(&buyer), client(&seller), seller.id)
}

#[tokio::test]
async fn a_milestone_is_reclaimed_after_its_due_date_and_the_grace_and_a_stake_lock_meets_the_budget() {
    let r = registry().await;
    let (owner, buyer, seller, seller_id) = parties(&r, 100_000, [50_000, 60_000, 100_000]).await;
    let due = r.clock.now().0 + 86_400_000;
    let created = buyer.create_contract(&seller_id, None, &[(20_000, "cut", due)], "terms", None, "c1").await.unwrap();
    let id = created.body.id.clone();
    seller.contract_act(&id, "accept").await.unwrap();
    let spent = |me: bazaar_wire::identity::Me| me.budget.unwrap().spent_total_minor;
    let before = spent(buyer.me().await.unwrap());
    // Past the due date but inside the grace: 409, and the facts say when it becomes possible.
    r.clock.advance_s(86_400 + MILESTONE_RECLAIM_GRACE_S - 1);
    let (status, code, facts) = problem(buyer.reclaim(&id, 0, None).await.unwrap_err());
    assert_eq!((status, code.as_str()), (409, "reclaim_too_early"));
    assert_eq!(facts["reclaimable_at_ms"].as_i64(), Some(due + MILESTONE_RECLAIM_GRACE_S as i64 * 1000));
    assert_eq!(problem(seller.reclaim(&id, 0, None).await.unwrap_err()).1, "not_party");
    r.clock.advance_s(1);
    let reclaimed = buyer.reclaim(&id, 0, None).await.unwrap();
    assert_eq!(reclaimed.body.refunded_minor, 20_000);
    assert!(buyer.reclaim(&id, 0, None).await.unwrap().replayed, "the derived key replays");
    let again = problem(buyer.reclaim(&id, 0, Some("another-key")).await.unwrap_err());
    assert_eq!((again.0, again.1.as_str()), (409, "milestone_already_reclaimed"));
    assert_eq!(buyer.contract(&id).await.unwrap().milestones[0].state, "reclaimed");
    assert_eq!(spent(buyer.me().await.unwrap()), before - 20_000, "the hold went back to the budget");
    // A stake lock past today's ceiling is refused like a token; within it, it counts.
    let (status, code, facts) = problem(buyer.stake_lock(60_001, "s1").await.unwrap_err());
    assert_eq!((status, code.as_str()), (422, "budget_per_day_exceeded"));
    assert_eq!(facts["requested_minor"], 60_001);
    buyer.stake_lock(55_000, "s2").await.unwrap();
    assert_eq!(spent(buyer.me().await.unwrap()), before - 20_000 + 55_000);
    // Above the per-call ceiling (50 000) is fine: a stake lock is not a call. The owner, with no budget, is unchanged.
    assert!(owner.me().await.unwrap().budget.is_none());
}

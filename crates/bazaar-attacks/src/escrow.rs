//! Escrow, disputes and stake: double releases, releasing a disputed milestone, disputes over what was not
//! paid or not one's own, evidence from a stranger, a party ruling, a second execution, early withdrawal of
//! stake, a late appeal.

use super::{
    paid_order, snapshot, Attempt, Cast, Measured, Unmet, MILESTONE_MINOR, PHASE_WAIT_S_MAX, PRICE_MINOR, STAKE_MINOR,
};
use anyhow::{ensure, Result};
use bazaar_sdk::{generate_key, Client};
use serde_json::Value;

/// A funded, accepted one-milestone contract from the buyer to the merchant,
/// delivered; `arbiter` defaults to the dispute desk.
pub(super) async fn delivered_contract(cast: &Cast, arbiter: Option<&str>) -> Result<String> {
    let due = bazaar_sdk::clock::now_ms() + 86_400_000;
    let key = format!("contract-{}", cast.tag);
    let created = cast
        .buyer
        .create_contract(&cast.merchant_handle, arbiter, &[(MILESTONE_MINOR, "restock", due)], "terms", None, &key)
        .await?;
    let id = created.body.id.clone();
    cast.merchant.contract_act(&id, "accept").await?;
    cast.merchant.deliver(&id, 0, b"delivery note").await?;
    Ok(id)
}

pub(super) async fn milestone_dispute(cast: &Cast, contract: &str) -> Result<String> {
    let subject = bazaar_sdk::wire::dispute::DisputeSubject::Milestone { contract: contract.to_string(), index: 0 };
    let filed = cast.buyer.file_dispute(subject, "not_as_described", MILESTONE_MINOR, "wrong colour").await?;
    Ok(filed.body.id)
}

pub(super) async fn call_dispute(cast: &Cast, order: &str) -> Result<String> {
    paid_order(cast, order).await?;
    let subject = bazaar_sdk::wire::dispute::DisputeSubject::Call {
        merchant: cast.merchant_handle.to_string(),
        order_id: order.to_string(),
    };
    let filed = cast.buyer.file_dispute(subject, "not_delivered", PRICE_MINOR, "nothing came back").await?;
    Ok(filed.body.id)
}

/// Waits until the dispute leaves `phase` (the sweeper acts on deadlines), if
/// the registry's deadline is near enough to wait for.
pub(super) async fn outwait(cast: &Cast, client: &Client, dispute: &str, phase: &str) -> Result<Value> {
    use bazaar_sdk::wire::dispute::Dispute;
    let started = std::time::Instant::now();
    loop {
        let record: Dispute = client.dispute(dispute).await?;
        if record.phase != phase {
            return Ok(bazaar_sdk::wire::wire_json(&record));
        }
        let deadline = record.deadline.unwrap_or(i64::MAX);
        let wait_ms = deadline.saturating_sub(bazaar_sdk::clock::now_ms());
        if wait_ms > (PHASE_WAIT_S_MAX * 1000) as i64 {
            return Err(Unmet(format!(
                "it outwaits the {phase} phase, whose deadline is {} s away; run it against a registry with \
                 short windows (serve --answer-window-s 2 --evidence-window-s 2 --appeal-window-s 2)",
                wait_ms / 1000
            ))
            .into());
        }
        ensure!(started.elapsed().as_secs() <= 2 * PHASE_WAIT_S_MAX, "the sweeper did not advance {dispute}");
        let _ = cast;
        tokio::time::sleep(std::time::Duration::from_millis(bazaar_types::limits::SWEEP_INTERVAL_MS / 2)).await;
    }
}

pub(super) async fn double_release(cast: &Cast) -> Result<Measured> {
    let id = delivered_contract(cast, None).await?;
    cast.buyer.release(&id, 0, None).await?;
    measured!(cast, "release a milestone that was already released, under a fresh key", async {
        cast.buyer.release(&id, 0, Some("another-key")).await.map(|a| a.body)
    })
}

pub(super) async fn release_disputed(cast: &Cast) -> Result<Measured> {
    let id = delivered_contract(cast, None).await?;
    milestone_dispute(cast, &id).await?;
    measured!(cast, "release a milestone while a dispute on it is open", async {
        cast.buyer.release(&id, 0, None).await.map(|a| a.body)
    })
}

pub(super) async fn dispute_unpaid(cast: &Cast) -> Result<Measured> {
    let subject = bazaar_sdk::wire::dispute::DisputeSubject::Call {
        merchant: cast.merchant_handle.to_string(),
        order_id: "never-paid".to_string(),
    };
    measured!(cast, "dispute an order that was never paid", async {
        cast.buyer.file_dispute(subject, "not_delivered", PRICE_MINOR, "").await.map(|a| a.body)
    })
}

pub(super) async fn dispute_foreign(cast: &Cast) -> Result<Measured> {
    paid_order(cast, "order-1").await?;
    let subject = bazaar_sdk::wire::dispute::DisputeSubject::Call {
        merchant: cast.merchant_handle.to_string(),
        order_id: "order-1".to_string(),
    };
    measured!(cast, "dispute a paid call someone else bought (to freeze a rival's funds)", async {
        cast.other_merchant.file_dispute(subject, "not_delivered", PRICE_MINOR, "").await.map(|a| a.body)
    })
}

pub(super) async fn evidence_stranger(cast: &Cast) -> Result<Measured> {
    let dispute = call_dispute(cast, "order-1").await?;
    let stranger_key = generate_key();
    measured!(cast, "add evidence to a dispute one is not party to", async {
        cast.other_merchant.add_evidence(&dispute, &stranger_key, b"fake receipt", None).await.map(|a| a.body)
    })
}

pub(super) async fn party_rules(cast: &Cast) -> Result<Measured> {
    let dispute = call_dispute(cast, "order-1").await?;
    measured!(cast, "the respondent rules on its own dispute (reject the claim)", async {
        cast.merchant.rule(&dispute, "reject", 0, 0, "I did nothing wrong").await.map(|a| a.body)
    })
}

pub(super) async fn second_execution(cast: &Cast) -> Result<Measured> {
    let dispute = call_dispute(cast, "order-1").await?;
    // The merchant stays silent: past the answer deadline the sweeper executes a default ruling.
    let record = outwait(cast, &cast.buyer, &dispute, "filed").await?;
    ensure!(record["phase"] == "executed", "expected a default execution, got {}", record["phase"]);
    measured!(cast, "execute a dispute's ruling a second time", async {
        cast.buyer.execute_dispute(&dispute, Some("again")).await.map(|a| a.body)
    })
}

pub(super) async fn stake_withdraw(cast: &Cast) -> Result<Measured> {
    paid_order(cast, "order-0").await?;
    cast.merchant.stake_lock(STAKE_MINOR, &format!("lock-{}", cast.tag)).await?;
    cast.merchant.stake_unlock(STAKE_MINOR, &format!("unlock-{}", cast.tag)).await?;
    call_dispute(cast, "order-1").await?;
    measured!(cast, "withdraw stake while a dispute against the merchant is open", async {
        cast.merchant.stake_withdraw(&format!("withdraw-{}", cast.tag)).await.map(|a| a.body)
    })
}

pub(super) async fn late_appeal(cast: &Cast) -> Result<Measured> {
    // The rival merchant's agent is a neutral arbiter for this contract.
    let arbiter = cast.other_merchant.me().await?.member.id;
    let id = delivered_contract(cast, Some(&arbiter)).await?;
    let dispute = milestone_dispute(cast, &id).await?;
    cast.merchant.add_evidence(&dispute, &cast.merchant_key, b"signed delivery receipt", None).await?;
    outwait(cast, &cast.buyer, &dispute, "evidence").await?;
    cast.other_merchant.rule(&dispute, "reject", 0, 0, "delivery receipt is signed").await?;
    outwait(cast, &cast.buyer, &dispute, "appealable").await?;
    measured!(cast, "appeal a ruling after the appeal window closed", async {
        cast.buyer.appeal(&dispute).await.map(|a| a.body)
    })
}

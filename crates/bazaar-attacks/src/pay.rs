//! The paid call's attacks: spending without the `pay` scope, a second settlement, replayed, expired,
//! over-ceiling, foreign and forged tokens, a reused invite.

use super::{paid_order, snapshot, token, Attempt, Cast, Measured, PER_CALL_MAX_MINOR, PRICE_MINOR, SWEEP_WAITS_MAX};
use anyhow::{ensure, Context, Result};
use bazaar_sdk::{generate_key, Body};
use serde_json::{json, Value};

pub(super) async fn spend_without_pay(cast: &Cast) -> Result<Measured> {
    // The owner hands its agent a job-run credential: jobs, read, talk — no `pay`.
    let buyer = format!("buy-{}", cast.tag);
    let job_run = cast.owner.issue_scoped_credential(&buyer, &["jobs", "read", "talk"]).await?;
    let agent = cast.buyer.with_credential(job_run);
    ensure!(agent.me().await.is_ok(), "the job-run credential still reads");
    measured!(cast, "ask for a payment token with a credential issued without the pay scope", async {
        agent
            .issue_token(&cast.merchant_handle, PRICE_MINOR, "job-run-order", "https://shop/restock")
            .await
            .map(|a| a.body)
    })
}

pub(super) async fn second_settlement(cast: &Cast) -> Result<Measured> {
    paid_order(cast, "order-1").await?;
    // The buyer is tricked into a second token for the paid order; the merchant settles it too.
    let key = format!("second-{}", cast.tag);
    let body = json!({"merchant": cast.merchant_handle, "max_amount_minor": PRICE_MINOR, "order_id": "order-1", "resource": "https://shop/restock"});
    let second =
        cast.buyer.call::<Value>(reqwest::Method::POST, "/v1/tokens", Some(Body::json(body)), Some(&key)).await?;
    let second = second.body["token"].as_str().unwrap_or_default().to_string();
    let (balances_before, head_before) = snapshot(cast).await?;
    let result = cast
        .merchant
        .settle(&second, PRICE_MINOR, "order-1", Some("a-fresh-key"))
        .await
        .map(|a| bazaar_sdk::wire::wire_json(&a.body));
    Ok((
        balances_before,
        head_before,
        Attempt { tried: "settle a second token for an order already paid, under a fresh key".into(), result },
    ))
}

pub(super) async fn replayed_token(cast: &Cast) -> Result<Measured> {
    let token = paid_order(cast, "order-1").await?;
    measured!(cast, "settle an already-settled token again under a fresh Idempotency-Key", async {
        cast.merchant.settle(&token, PRICE_MINOR, "order-1", Some("fresh-key")).await.map(|a| a.body)
    })
}

pub(super) async fn expired_token(cast: &Cast) -> Result<Measured> {
    let ttl_s = bazaar_types::limits::TOKEN_TTL_S_MIN;
    let body = json!({"merchant": cast.merchant_handle, "max_amount_minor": PRICE_MINOR, "order_id": "order-1", "resource": "r", "ttl_s": ttl_s});
    let answer = cast.buyer.call::<Value>(reqwest::Method::POST, "/v1/tokens", Some(Body::json(body)), None).await?;
    let token = answer.body["token"].as_str().unwrap_or_default().to_string();
    // Wait out the shortest lifetime a token can have, then for the sweeper to
    // release its hold, so the snapshot is taken after the registry's own work.
    let available = cast.buyer.me().await?.available_minor;
    tokio::time::sleep(std::time::Duration::from_secs(ttl_s)).await;
    for _ in 0..SWEEP_WAITS_MAX {
        if cast.buyer.me().await?.available_minor != available {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(bazaar_types::limits::SWEEP_INTERVAL_MS / 4)).await;
    }
    measured!(cast, format!("settle a token after its {ttl_s} s lifetime ran out"), async {
        cast.merchant.settle(&token, PRICE_MINOR, "order-1", None).await.map(|a| a.body)
    })
}

pub(super) async fn over_ceiling(cast: &Cast) -> Result<Measured> {
    measured!(
        cast,
        format!("ask for a token of {} against a per-call ceiling of {PER_CALL_MAX_MINOR}", PER_CALL_MAX_MINOR + 1),
        async {
            cast.buyer.issue_token(&cast.merchant_handle, PER_CALL_MAX_MINOR + 1, "order-1", "r").await.map(|a| a.body)
        }
    )
}

pub(super) async fn other_merchant(cast: &Cast) -> Result<Measured> {
    let token = token(cast, "order-1", PRICE_MINOR).await?;
    measured!(cast, "a rival merchant settles a token addressed to another merchant", async {
        cast.other_merchant.settle(&token, PRICE_MINOR, "order-1", None).await.map(|a| a.body)
    })
}

pub(super) async fn forged_token(cast: &Cast) -> Result<Measured> {
    use base64::Engine;
    let token = token(cast, "order-1", PRICE_MINOR).await?;
    let (payload, signature) = token.trim_start_matches("apt_").split_once('.').context("token shape")?;
    let b64 = base64::engine::general_purpose::URL_SAFE_NO_PAD;
    let mut claims: Value = serde_json::from_slice(&b64.decode(payload)?)?;
    claims["max"] = json!(PER_CALL_MAX_MINOR * 5);
    let forged = format!("apt_{}.{signature}", b64.encode(serde_json::to_vec(&claims)?));
    measured!(cast, "raise a token's max amount and keep its signature", async {
        cast.merchant.settle(&forged, PER_CALL_MAX_MINOR * 5, "order-1", None).await.map(|a| a.body)
    })
}

pub(super) async fn invite_reuse(cast: &Cast) -> Result<Measured> {
    let invite = cast.owner.issue_invite().await?;
    cast.owner.redeem_invite(&invite, &generate_key(), &format!("first-{}", cast.tag)).await?;
    measured!(cast, "redeem an invite code a second time", async {
        let joined = cast.owner.redeem_invite(&invite, &generate_key(), &format!("second-{}", cast.tag)).await?;
        Ok(serde_json::to_value(joined).expect("an enrolment serialises"))
    })
}

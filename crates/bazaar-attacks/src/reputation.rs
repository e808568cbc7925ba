//! Reputation, passports and federation: tampered and foreign passports, an unrecognised issuer, a replayed
//! relay, self-dealing and tiny buys that must not raise a score.

use super::{paid_order, snapshot, token, Attempt, Cast, Measured, PRICE_MINOR, SELF_DEALS, TINY_BUYS};
use anyhow::{Context, Result};
use bazaar_sdk::wire::federation::Reputation;
use bazaar_sdk::{generate_key, SdkError};
use serde_json::{json, Value};

pub(super) async fn merchant_passport(cast: &Cast) -> Result<bazaar_sdk::wire::federation::Passport> {
    paid_order(cast, "order-1").await?;
    Ok(cast.merchant.passport(None).await?)
}

pub(super) async fn tampered_passport(cast: &Cast) -> Result<Measured> {
    let mut passport = merchant_passport(cast).await?;
    passport.credential_subject.figures.score_bps = 9_999;
    measured!(cast, "raise the score in a genuine passport and present it", async {
        cast.merchant.verify_passport(&passport).await
    })
}

pub(super) async fn unrecognised_issuer(cast: &Cast) -> Result<Measured> {
    // A passport-shaped credential signed by a key no registry this one recognises holds.
    let rogue = generate_key();
    let mut passport = serde_json::to_value(merchant_passport(cast).await?)?;
    passport.as_object_mut().context("passport object")?.remove("proof");
    let rogue_did = bazaar_sdk::did_of(&rogue);
    passport["issuer"] = json!(rogue_did);
    passport["credentialSubject"]["scoreBps"] = json!(10_000);
    let method = bazaar_core::vc::did_key_verification_method(&rogue.verifying_key());
    let created = passport["validFrom"].as_str().unwrap_or_default().to_string();
    let forged: bazaar_sdk::wire::federation::Passport =
        serde_json::from_value(bazaar_core::vc::sign_eddsa_jcs_2022(&passport, &rogue, &method, &created)?)?;
    let audience = cast.operator.well_known().await?.did;
    measured!(cast, "import a passport signed by an unrecognised issuer", async {
        cast.merchant.import_passport(&forged, &cast.merchant_key, &audience).await
    })
}

pub(super) async fn passport_other_agent(cast: &Cast) -> Result<Measured> {
    let passport = merchant_passport(cast).await?;
    let audience = cast.operator.well_known().await?.did;
    measured!(cast, "present another agent's genuine passport as one's own", async {
        cast.buyer.import_passport(&passport, &generate_key(), &audience).await
    })
}

pub(super) async fn replayed_relay(cast: &Cast) -> Result<Measured> {
    // A settlement relay for a genuine token, signed by a registry this one does not recognise.
    let token = token(cast, "order-1", PRICE_MINOR).await?;
    let rogue = generate_key();
    let rogue_did = bazaar_sdk::did_of(&rogue);
    let body = serde_json::to_vec(&json!({"token": token, "amount_minor": PRICE_MINOR, "order_id": "order-1"}))?;
    let ts = bazaar_sdk::clock::now_ms();
    let message = bazaar_core::federation::s2s_message(&rogue_did, "POST", "/v1/federation/settle", ts, &body);
    let sig = bazaar_core::crypto::sign(&rogue, &message);
    let header = format!("registry={rogue_did},key={rogue_did},ts={ts},sig={sig}");
    let url = format!("{}/v1/federation/settle", cast.operator.base());
    measured!(cast, "relay a settlement of this registry's token from an unrecognised registry", async {
        let request = cast
            .operator
            .http()
            .post(&url)
            .header("bazaar-registry-signature", &header)
            .header("content-type", "application/json")
            .body(body.clone());
        Ok(cast.operator.send::<Value>(request).await?.body)
    })
}

/// Reads a member's reputation and says whether the score rose from `before`.
pub(super) async fn gained(cast: &Cast, who: &str, before: &Reputation) -> Result<Value, SdkError> {
    let after = cast.operator.reputation(who).await?;
    let (before, after) = (&before.local, &after.local);
    let rose = after.score_bps > before.score_bps || after.weighted_success_ppm > before.weighted_success_ppm;
    Ok(json!({"gained": rose, "before": before, "after": after}))
}

pub(super) async fn self_dealing(cast: &Cast) -> Result<Measured> {
    // The buyer's owner enrolls a second agent as a shop and buys from it: wash trading.
    let twin_handle = format!("twin-{}", cast.tag);
    let invite = cast.owner.issue_invite().await?;
    let twin = cast.owner.redeem_invite(&invite, &generate_key(), &twin_handle).await?;
    let twin = cast.owner.with_credential(twin.credential.as_str());
    let before = cast.operator.reputation(&twin_handle).await?;
    for n in 0..SELF_DEALS {
        let order = format!("wash-{n}");
        let token = cast.buyer.issue_token(&twin_handle, PRICE_MINOR, &order, "https://twin/wash").await?;
        twin.settle(token.body.token.as_str(), PRICE_MINOR, &order, None).await?;
    }
    measured!(cast, "buy from an agent of one's own owner to farm its reputation", async {
        gained(cast, &twin_handle, &before).await
    })
}

pub(super) async fn tiny_buys(cast: &Cast) -> Result<Measured> {
    // One buyer after one genuine purchase: many more tiny buys the same week.
    paid_order(cast, "first").await?;
    let before = cast.operator.reputation(&cast.merchant_handle).await?;
    for n in 0..TINY_BUYS {
        let order = format!("tiny-{n}");
        let token = token(cast, &order, 1).await?;
        cast.merchant.settle(&token, 1, &order, None).await?;
    }
    measured!(cast, "inflate a merchant's count with many one-unit buys from one counterparty", async {
        gained(cast, &cast.merchant_handle, &before).await
    })
}

//! The conversation plane's attacks: rooms, sealed channels and webhooks. They move no money, so balances
//! and the event ledger must not move at all.

use super::{snapshot, Attempt, Cast, Measured, Unmet, DELIVERY_WAIT_S, RECEIVER_REFUSAL_STATUS, WEBHOOK_URL_REFUSED};
use anyhow::{ensure, Context, Result};
use bazaar_conversation::sealing::{seal, sign_message, Content};
use bazaar_sdk::{generate_key, Body, Client, SdkError};
use serde_json::{json, Value};

pub(super) async fn room(owner: &Client, name: &str, private: bool) -> Result<String> {
    let body = json!({"name": name, "private": private});
    let room = owner.call::<Value>(reqwest::Method::POST, "/v1/rooms", Some(Body::json(body)), None).await?.body;
    room["id"].as_str().map(str::to_string).context("a room id")
}

pub(super) async fn private_room_read(cast: &Cast) -> Result<Measured> {
    let secret = room(&cast.owner, "negotiation", true).await?;
    let path = format!("/v1/channels/{secret}/messages");
    cast.owner
        .call::<Value>(reqwest::Method::POST, &path, Some(Body::json(json!({"body": "our floor is 2,400"}))), None)
        .await?;
    measured!(cast, "read a private room's history as a member of the registry who is not in it", async {
        cast.other_merchant.call::<Value>(reqwest::Method::GET, &path, None, None).await.map(|a| a.body)
    })
}

pub(super) async fn agent_etiquette(cast: &Cast) -> Result<Measured> {
    let lobby = room(&cast.owner, "lobby", false).await?;
    cast.buyer.call::<Value>(reqwest::Method::POST, &format!("/v1/channels/{lobby}/join"), None, None).await?;
    let path = format!("/v1/channels/{lobby}/messages");
    for n in 0..bazaar_types::limits::AGENT_UNADDRESSED_POSTS_MAX {
        let body = json!({"body": format!("buy now, offer {n}")});
        cast.buyer.call::<Value>(reqwest::Method::POST, &path, Some(Body::json(body)), None).await?;
    }
    measured!(cast, "an agent posts to a room once more without anyone addressing it", async {
        let body = json!({"body": "buy now, one more time"});
        cast.buyer.call::<Value>(reqwest::Method::POST, &path, Some(Body::json(body)), None).await.map(|a| a.body)
    })
}

/// Two members of the cast who published sealing keys, and their sealed DM:
/// the merchant and a fresh agent of the buyer's owner.
pub(super) async fn sealed_dm(cast: &Cast) -> Result<(String, Client, ed25519_dalek::SigningKey)> {
    let invite = cast.owner.issue_invite().await?;
    let peer_key = generate_key();
    let peer = cast.owner.redeem_invite(&invite, &peer_key, &format!("peer-{}", cast.tag)).await?;
    let peer = cast.owner.with_credential(peer.credential.as_str());
    for (client, key) in [(&cast.merchant, &cast.merchant_key), (&peer, &peer_key)] {
        let me = client.me().await?;
        let member = bazaar_types::MemberId(me.member.id.clone());
        bazaar_agents::sealed::publish_sealing_key(client, key, &member).await?;
    }
    let with = json!({"with": format!("peer-{}", cast.tag)});
    let dm = cast.merchant.call::<Value>(reqwest::Method::POST, "/v1/dms", Some(Body::json(with)), None).await?.body;
    let id = dm["id"].as_str().context("a DM id")?.to_string();
    Ok((id, peer, peer_key))
}

pub(super) async fn sealed_plaintext_post(cast: &Cast) -> Result<Measured> {
    let (dm, _, _) = sealed_dm(cast).await?;
    let path = format!("/v1/channels/{dm}/messages");
    measured!(cast, "post plaintext into a sealed DM, where the registry would store it readable", async {
        let body = json!({"body": "our floor is 2,400"});
        cast.merchant.call::<Value>(reqwest::Method::POST, &path, Some(Body::json(body)), None).await.map(|a| a.body)
    })
}

pub(super) async fn forged_message_signature(cast: &Cast) -> Result<Measured> {
    let (dm, _, peer_key) = sealed_dm(cast).await?;
    let me = cast.merchant.me().await?;
    let merchant = bazaar_types::MemberId(me.member.id.clone());
    let channel = bazaar_conversation::ChannelId(dm.clone());
    let to = bazaar_agents::sealed::sealing_keys(&cast.merchant, &channel).await?;
    let sealed = seal(&channel, &merchant, "I agree to 1,900", &to)?;
    // Signed by the peer's key, but posted as the merchant: a handoff the merchant never wrote.
    let signature = sign_message(&peer_key, &channel, &merchant, &Content::Sealed(&sealed));
    let path = format!("/v1/channels/{dm}/messages");
    measured!(cast, "post a sealed message whose signature is by someone other than its author", async {
        let body = json!({"sealed": sealed, "signature": signature});
        cast.merchant.call::<Value>(reqwest::Method::POST, &path, Some(Body::json(body)), None).await.map(|a| a.body)
    })
}

/// A genuine delivery to the merchant's webhook, captured on a loopback
/// receiver the attack runs: what an eavesdropper on an `http` endpoint, or
/// anyone with the receiver's logs, could keep. The registry must allow
/// loopback targets (`bazaar serve --allow-private-webhooks`).
pub(super) struct Captured {
    secret: String,
    id: String,
    timestamp: i64,
    signature: String,
    body: Vec<u8>,
}

pub(super) async fn capture_delivery(cast: &Cast) -> Result<Captured> {
    type Kept = std::sync::Arc<std::sync::Mutex<Option<(axum::http::HeaderMap, axum::body::Bytes)>>>;
    let kept: Kept = Default::default();
    let keeper = kept.clone();
    let receiver = axum::Router::new().route(
        "/hook",
        axum::routing::post(move |headers: axum::http::HeaderMap, body: axum::body::Bytes| async move {
            keeper.lock().expect("kept").get_or_insert((headers, body));
            axum::http::StatusCode::OK
        }),
    );
    let url = format!("{}/hook", bazaar_stage::serve(receiver).await?);
    let endpoint = match cast
        .merchant
        .call::<Value>(reqwest::Method::POST, "/v1/webhooks", Some(Body::json(json!({"url": url}))), None)
        .await
    {
        Err(SdkError::Problem { code, .. }) if code == WEBHOOK_URL_REFUSED => {
            return Err(Unmet(format!(
                "it registers a webhook on a loopback receiver it runs, which this registry refuses ({code}); run it \
                 against a registry started with --allow-private-webhooks"
            ))
            .into())
        }
        endpoint => endpoint.context("registering a loopback webhook")?,
    };
    let secret = endpoint.body["secret"].as_str().context("the endpoint's secret")?.to_string();
    let dm = cast
        .buyer
        .call::<Value>(reqwest::Method::POST, "/v1/dms", Some(Body::json(json!({"with": cast.merchant_handle}))), None)
        .await?;
    let dm = dm.body["id"].as_str().context("a DM id")?.to_string();
    let path = format!("/v1/channels/{dm}/messages");
    cast.buyer
        .call::<Value>(reqwest::Method::POST, &path, Some(Body::json(json!({"body": "the invoice is attached"}))), None)
        .await?;
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(DELIVERY_WAIT_S);
    loop {
        if let Some((headers, body)) = kept.lock().expect("kept").clone() {
            let header = |name: &str| headers.get(name).and_then(|v| v.to_str().ok()).unwrap_or_default().to_string();
            return Ok(Captured {
                secret,
                id: header("webhook-id"),
                timestamp: header("webhook-timestamp").parse().context("webhook-timestamp")?,
                signature: header("webhook-signature"),
                body: body.to_vec(),
            });
        }
        ensure!(
            std::time::Instant::now() < deadline,
            "no delivery reached the loopback receiver in {DELIVERY_WAIT_S} s"
        );
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
}

/// The receiver's verdict on a delivery arriving at `now_s`, as a client sees an HTTP answer.
pub(super) fn received(captured: &Captured, signature: &str, body: &[u8], now_s: i64) -> Result<Value, SdkError> {
    use bazaar_conversation::webhooks::sign::verify;
    match verify(&[&captured.secret], &captured.id, captured.timestamp, signature, body, now_s) {
        Ok(()) => Ok(json!({"accepted": true})),
        Err(refused) => Err(SdkError::Problem {
            status: RECEIVER_REFUSAL_STATUS,
            code: refused.code().to_string(),
            detail: refused.to_string(),
            body: Value::Null,
        }),
    }
}

pub(super) async fn webhook_replay(cast: &Cast) -> Result<Measured> {
    let captured = capture_delivery(cast).await?;
    // The genuine delivery is accepted when it arrives; the same bytes ten minutes later are not.
    ensure!(received(&captured, &captured.signature, &captured.body, captured.timestamp).is_ok());
    let later = captured.timestamp + 2 * bazaar_conversation::webhooks::sign::TOLERANCE_S;
    measured!(cast, "replay a captured webhook delivery to its receiver ten minutes later", async {
        received(&captured, &captured.signature, &captured.body, later)
    })
}

pub(super) async fn webhook_forgery(cast: &Cast) -> Result<Measured> {
    let captured = capture_delivery(cast).await?;
    let forged_body = String::from_utf8_lossy(&captured.body).replace("the invoice is attached", "pay to my account");
    let now = captured.timestamp;
    measured!(cast, "deliver a forged body under a captured signature, and one signed with a guessed secret", async {
        let guessed = bazaar_conversation::webhooks::sign::sign(
            "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw",
            &captured.id,
            now,
            forged_body.as_bytes(),
        )
        .unwrap_or_default();
        received(&captured, &captured.signature, forged_body.as_bytes(), now)
            .and_then(|_| received(&captured, &guessed, forged_body.as_bytes(), now))
    })
}

//! The client side of sealed channels, shared by `bazaar dm` and the
//! attacks: publishing the sealing key derived from a member's identity key,
//! and reading the keys a post to a channel must be sealed for.

use anyhow::{bail, Result};
use bazaar_conversation::sealing::{sign_sealing_key, SealingSecret};
use bazaar_conversation::ChannelId;
use bazaar_sdk::Client;
use bazaar_types::MemberId;
use ed25519_dalek::SigningKey;
use serde_json::json;

/// Publishes the sealing key derived from `identity` for `me`; the key.
pub async fn publish_sealing_key(client: &Client, identity: &SigningKey, me: &MemberId) -> Result<String> {
    let public_key = SealingSecret::derive(identity).public_key();
    let signature = sign_sealing_key(identity, me, &public_key);
    let body = json!({"public_key": public_key, "signature": signature});
    client
        .call::<serde_json::Value>(reqwest::Method::PUT, "/v1/sealing-key", Some(bazaar_sdk::Body::json(body)), None)
        .await?;
    Ok(public_key)
}

/// Every current member of `channel` with the sealing key a post must be
/// sealed for; an error names a member that has none.
pub async fn sealing_keys(client: &Client, channel: &ChannelId) -> Result<Vec<(MemberId, String)>> {
    let keys = client
        .call::<serde_json::Value>(reqwest::Method::GET, &format!("/v1/channels/{channel}/sealing-keys"), None, None)
        .await?;
    let mut to = Vec::new();
    for entry in keys.body.as_array().into_iter().flatten() {
        let member = MemberId(entry["member"].as_str().unwrap_or_default().to_string());
        let Some(key) = entry["sealing_key"]["public_key"].as_str() else {
            bail!("{member} has no sealing key, so nothing can be sealed for it");
        };
        to.push((member, key.to_string()));
    }
    Ok(to)
}

//! Direct messages from the command line: `dm key`, `dm send` and `dm read`.
//! Sealing and opening happen here, on the client, with a sealing key derived
//! from the member's own key file; the registry sees only ciphertext
//! (`docs/sealing.md`).

use super::common::{key_or_random, print, Remote};
use anyhow::{bail, Result};
use bazaar_cli::runtime;
use bazaar_conversation::sealing::{open, seal, sign_message, Content, SealedBody, SealingSecret};
use bazaar_conversation::ChannelId;
use bazaar_sdk::{Body, Client, SdkError};
use bazaar_types::MemberId;
use clap::Subcommand;
use ed25519_dalek::SigningKey;
use serde_json::{json, Value};
use std::path::PathBuf;

#[derive(Subcommand)]
pub enum Command {
    /// Direct messages, sealed on this machine when both members have a sealing key.
    Dm {
        #[command(subcommand)]
        action: Dm,
    },
}

#[derive(Subcommand)]
pub enum Dm {
    /// Publish your sealing key (derived from your key file) if the registry
    /// does not have it yet. Do this before your first DM: a DM is sealed only
    /// if both members had a key when it was first opened.
    Key {
        #[command(flatten)]
        remote: Remote,
        /// Your Ed25519 key file (from `bazaar keygen --out`).
        #[arg(long)]
        key_file: PathBuf,
    },
    /// Send a DM: sealed when the DM is sealed, plaintext (and said so) when not.
    Send {
        #[command(flatten)]
        remote: Remote,
        /// The other member: a handle or a DID.
        #[arg(long)]
        to: String,
        /// Your Ed25519 key file (from `bazaar keygen --out`): signs the message; your sealing key derives from it.
        #[arg(long)]
        key_file: PathBuf,
        /// Idempotency key; reuse it when retrying.
        #[arg(long)]
        key: Option<String>,
        /// The message text.
        text: String,
    },
    /// Read a DM's latest messages, opening the sealed ones with your key.
    Read {
        #[command(flatten)]
        remote: Remote,
        /// The other member: a handle or a DID.
        #[arg(long)]
        with: String,
        /// Your Ed25519 key file (from `bazaar keygen --out`), to open the sealed messages.
        #[arg(long)]
        key_file: PathBuf,
        /// How many of the latest messages (at most 200).
        #[arg(long, default_value_t = 50)]
        limit: usize,
    },
}

pub async fn run(command: Command, json_output: bool) -> Result<i32> {
    let Command::Dm { action } = command;
    match action {
        Dm::Key { remote, key_file } => {
            let key = runtime::read_key(&key_file)?;
            let (client, me) = signed_in(&remote).await?;
            let (public_key, published) = ensure_sealing_key(&client, &key, &me).await?;
            let value = json!({"member": me, "public_key": public_key, "published_now": published});
            print(json_output, &value, |_| {
                let verb = if published { "published" } else { "already published" };
                format!("sealing key {verb}: {public_key}")
            });
        }
        Dm::Send { remote, to, key_file, key, text } => {
            let identity = runtime::read_key(&key_file)?;
            let (client, me) = signed_in(&remote).await?;
            ensure_sealing_key(&client, &identity, &me).await?;
            let channel = open_dm(&client, &to).await?;
            let value = send(&client, &identity, &me, &channel, &text, &key_or_random(key)).await?;
            print(json_output, &value, |v| {
                let how = if v["sealed"] == true {
                    "sealed".to_string()
                } else {
                    format!("in plaintext: {}", v["why_not_sealed"].as_str().unwrap_or("the DM is not sealed"))
                };
                format!("sent message {} to {to} {how}", v["seq"])
            });
        }
        Dm::Read { remote, with, key_file, limit } => {
            let identity = runtime::read_key(&key_file)?;
            let (client, me) = signed_in(&remote).await?;
            let channel = open_dm(&client, &with).await?;
            let page = get(&client, &format!("/v1/channels/{}/messages?limit={limit}", channel.id)).await?;
            let secret = SealingSecret::derive(&identity);
            let read: Vec<Value> = page
                .as_array()
                .map(|messages| messages.iter().map(|m| readable(&channel.id, &me, &secret, m)).collect())
                .unwrap_or_default();
            print(json_output, &json!({"channel": channel.id, "sealed": channel.sealed, "messages": read}), |v| {
                let mut lines =
                    vec![format!("DM {} ({})", channel.id, if channel.sealed { "sealed" } else { "not sealed" })];
                for m in v["messages"].as_array().into_iter().flatten() {
                    let who = m["handle"].as_str().unwrap_or("registry");
                    lines.push(format!("{:>5}  {who}: {}", m["seq"], m["text"].as_str().unwrap_or("")));
                }
                lines.join("\n")
            });
        }
    }
    Ok(0)
}

async fn get(client: &Client, path: &str) -> Result<Value> {
    Ok(client.call::<Value>(reqwest::Method::GET, path, None, None).await?.body)
}

/// A DM as this command sees it.
struct DirectMessage {
    id: ChannelId,
    sealed: bool,
}

async fn signed_in(remote: &Remote) -> Result<(Client, MemberId)> {
    let client = remote.client()?;
    let me = client.me().await?;
    Ok((client, MemberId(me.member.id)))
}

/// Publishes the sealing key derived from `identity` unless the registry
/// already holds exactly it; whether it published now.
async fn ensure_sealing_key(client: &Client, identity: &SigningKey, me: &MemberId) -> Result<(String, bool)> {
    let public_key = SealingSecret::derive(identity).public_key();
    match client
        .call::<Value>(reqwest::Method::GET, &format!("/v1/members/{me}/sealing-key"), None, None)
        .await
        .map(|a| a.body)
    {
        Ok(found) if found["public_key"] == public_key.as_str() => return Ok((public_key, false)),
        Ok(_) => {}
        Err(SdkError::Problem { code, .. }) if code == "sealing_key_not_found" => {}
        Err(other) => return Err(other.into()),
    }
    Ok((bazaar_agents::sealed::publish_sealing_key(client, identity, me).await?, true))
}

async fn open_dm(client: &Client, with: &str) -> Result<DirectMessage> {
    let dm = client
        .call::<Value>(reqwest::Method::POST, "/v1/dms", Some(Body::json(json!({"with": with}))), None)
        .await?
        .body;
    let Some(id) = dm["id"].as_str() else { bail!("the registry answered no DM: {dm}") };
    Ok(DirectMessage { id: ChannelId(id.to_string()), sealed: dm["sealed"] == true })
}

/// Seals (in a sealed DM) or signs plaintext, and posts under `idem_key`.
async fn send(
    client: &Client,
    identity: &SigningKey,
    me: &MemberId,
    dm: &DirectMessage,
    text: &str,
    idem_key: &str,
) -> Result<Value> {
    let path = format!("/v1/channels/{}/messages", dm.id);
    let (body, why_not) = if dm.sealed {
        let to = bazaar_agents::sealed::sealing_keys(client, &dm.id).await?;
        let sealed = seal(&dm.id, me, text, &to)?;
        let signature = sign_message(identity, &dm.id, me, &Content::Sealed(&sealed));
        (json!({"sealed": sealed, "signature": signature}), None)
    } else {
        let signature = sign_message(identity, &dm.id, me, &Content::Plain(text));
        let history = get(client, &format!("/v1/channels/{}/messages?after=0&limit=1", dm.id)).await?;
        let why = history[0]["body"].as_str().unwrap_or("the DM was born plaintext").to_string();
        (json!({"body": text, "signature": signature}), Some(why))
    };
    let posted = client.call::<Value>(reqwest::Method::POST, &path, Some(Body::json(body)), Some(idem_key)).await?.body;
    Ok(json!({
        "channel": dm.id, "seq": posted["seq"], "position": posted["position"],
        "sealed": dm.sealed, "why_not_sealed": why_not,
    }))
}

/// One message as `me` can read it: a sealed body opened with `secret`, or
/// said plainly why not.
fn readable(channel: &ChannelId, me: &MemberId, secret: &SealingSecret, message: &Value) -> Value {
    let sealed: Option<SealedBody> = serde_json::from_value(message["sealed"].clone()).ok();
    let text = match &sealed {
        None => message["body"].as_str().unwrap_or("").to_string(),
        Some(envelope) => {
            let author = MemberId(message["authored_by"].as_str().unwrap_or_default().to_string());
            match open(channel, &author, me, secret, envelope) {
                Ok(text) => text,
                Err(why) => format!("[sealed; cannot open: {why}]"),
            }
        }
    };
    json!({
        "seq": message["seq"], "handle": message["handle"], "authored_by": message["authored_by"],
        "at": message["at"], "sealed": sealed.is_some(), "signed": message["signature"].is_string(), "text": text,
    })
}

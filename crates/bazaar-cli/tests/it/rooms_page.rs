//! The chamber's rooms page in Debian's headless Chromium (`tests/browser/rooms.mjs`): a member signs in and
//! sees its channels with an attention badge for unread messages, opens a plaintext room (its header says so,
//! the member rail lists who is in it and how they listen, the messages are there), posts a message that
//! appears and clears the badge, and opens a sealed room whose header says sealed and offers no plaintext post.

use crate::common;

use bazaar_stage::{enroll_pair, enroll_pair_with_key};
use reqwest::Method;
use serde_json::json;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_member_reads_its_rooms_with_badges_headers_and_the_member_rail() {
    let dir = common::fresh_dir("bazaar-rooms-page");
    let (local, operator) = common::embedded_with_operator(&dir, "op").await;
    let key = bazaar_sdk::generate_key();
    let (_, ada) = enroll_pair_with_key(&operator, "rooms-home", "ada", &key).await.unwrap();
    let (_, bo) = enroll_pair(&operator, "rooms-other", "bob").await.unwrap();
    let ada_id = bazaar_types::MemberId(ada.me().await.unwrap().member.id);
    bazaar_agents::sealed::publish_sealing_key(&ada, &key, &ada_id).await.unwrap();
    let create = |name: &str, private: bool, sealed: bool| json!({"name": name, "private": private, "sealed": sealed});
    let lobby = ada
        .call::<serde_json::Value>(
            Method::POST,
            "/v1/rooms",
            Some(bazaar_sdk::Body::json(create("lobby", false, false))),
            None,
        )
        .await
        .unwrap()
        .body;
    let lobby = lobby["id"].as_str().unwrap().to_string();
    let vault = ada
        .call::<serde_json::Value>(
            Method::POST,
            "/v1/rooms",
            Some(bazaar_sdk::Body::json(create("vault", true, true))),
            None,
        )
        .await
        .unwrap()
        .body;
    assert_eq!(vault["sealed"], true, "{vault}");
    let vault = vault["id"].as_str().unwrap().to_string();
    bo.call::<serde_json::Value>(Method::POST, &format!("/v1/channels/{lobby}/join"), None, None).await.unwrap();
    let post = json!({"body": "the linen arrived"});
    bo.call::<serde_json::Value>(
        Method::POST,
        &format!("/v1/channels/{lobby}/messages"),
        Some(bazaar_sdk::Body::json(post)),
        None,
    )
    .await
    .unwrap();

    let args = vec![local.url.clone(), ada.credential().unwrap().to_string(), lobby.clone(), vault.clone()];
    let (report, exited_ok) = common::browser_driver("rooms", args).await;
    assert_eq!(report["problems"], json!([]), "{report}");
    let channels: Vec<&str> = report["channels"].as_array().unwrap().iter().map(|c| c.as_str().unwrap()).collect();
    assert!(
        channels.iter().any(|c| c.starts_with("lobby") && c.ends_with('1')),
        "an unread badge on the lobby: {channels:?}"
    );
    assert!(channels.contains(&"vault"), "{channels:?}");
    let lobby_seen = &report["lobby"];
    assert!(lobby_seen["mode"].as_str().unwrap().starts_with("Plaintext"), "{report}");
    assert_eq!(lobby_seen["rail"].as_array().unwrap().len(), 2, "both members on the rail: {report}");
    let messages = lobby_seen["messages"].to_string();
    assert!(messages.contains("@bob: the linen arrived") && messages.contains("hello from the chamber"), "{messages}");
    assert_eq!(lobby_seen["badge_after"], serde_json::Value::Null, "read: the badge is gone: {report}");
    assert!(report["sealed"]["mode"].as_str().unwrap().starts_with("Sealed"), "{report}");
    assert_eq!(report["sealed"]["post_hidden"], true, "no plaintext post box in a sealed room");
    assert_eq!(report["axe"], json!([]), "{report}");
    assert!(exited_ok, "{report}");
    std::fs::remove_dir_all(&dir).ok();
}

/// The sealing vault in Debian's headless Chromium (`tests/browser/rooms_vault.mjs`): in a sealed DM, bob's message
/// (sealed by the Rust client) opens in ada's browser once she imports her key under a passphrase, with its signature
/// checked; her reply is sealed in the browser and opens with bob's key in Rust; the registry's files hold neither
/// plaintext; after a reload a wrong passphrase is refused and the right one opens both; a passkey's PRF locks and
/// opens the vault as well. Another member's key is refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_member_reads_and_writes_sealed_messages_in_the_browser_through_her_vault() {
    use bazaar_conversation::sealing::{seal, sign_message, Content};
    use bazaar_conversation::ChannelId;
    const FIRST: &str = "the linen is 40 a cover, sealed";
    const REPLY: &str = "40 is fine: ship on Friday";
    let dir = common::fresh_dir("bazaar-rooms-vault");
    let (local, operator) = common::embedded_with_operator(&dir, "op").await;
    let (ada_key, bob_key) = (bazaar_sdk::generate_key(), bazaar_sdk::generate_key());
    let (_, ada) = enroll_pair_with_key(&operator, "vault-home", "ada", &ada_key).await.unwrap();
    let (_, bob) = enroll_pair_with_key(&operator, "vault-other", "bob", &bob_key).await.unwrap();
    let ada_id = bazaar_types::MemberId(bazaar_sdk::did_of(&ada_key));
    let bob_id = bazaar_types::MemberId(bazaar_sdk::did_of(&bob_key));
    bazaar_agents::sealed::publish_sealing_key(&ada, &ada_key, &ada_id).await.unwrap();
    bazaar_agents::sealed::publish_sealing_key(&bob, &bob_key, &bob_id).await.unwrap();
    let dm = bob
        .call::<serde_json::Value>(Method::POST, "/v1/dms", Some(bazaar_sdk::Body::json(json!({"with": "ada"}))), None)
        .await
        .unwrap()
        .body;
    assert_eq!(dm["sealed"], true, "{dm}");
    let channel = ChannelId(dm["id"].as_str().unwrap().to_string());
    let to = bazaar_agents::sealed::sealing_keys(&bob, &channel).await.unwrap();
    let sealed = seal(&channel, &bob_id, FIRST, &to).unwrap();
    let signature = sign_message(&bob_key, &channel, &bob_id, &Content::Sealed(&sealed));
    let path = format!("/v1/channels/{channel}/messages");
    bob.call::<serde_json::Value>(
        Method::POST,
        &path,
        Some(bazaar_sdk::Body::json(json!({"sealed": sealed, "signature": signature}))),
        None,
    )
    .await
    .unwrap();

    let base = local.url.replace("127.0.0.1", "localhost");
    let other_seed = hex::encode(bazaar_sdk::generate_key().to_bytes());
    let args = vec![
        base,
        ada.credential().unwrap().to_string(),
        channel.to_string(),
        hex::encode(ada_key.to_bytes()),
        other_seed,
        "a long vault passphrase".into(),
        REPLY.into(),
    ];
    let (report, exited_ok) = common::browser_driver("rooms_vault", args).await;
    assert_eq!(report["problems"], json!([]), "{report}");
    let before = report["before"].to_string();
    assert!(before.contains("🔒 sealed") && !before.contains(FIRST), "sealed until unlocked: {report}");
    assert_eq!(
        (report["before"]["create_shown"].as_bool(), report["before"]["post_hidden"].as_bool()),
        (Some(true), Some(true))
    );
    assert!(report["wrong_key"].as_str().unwrap().contains("not the member signed in here"), "{report}");
    for seen in ["opened", "reopened", "passkey_opened"] {
        let lines = report[seen].to_string();
        assert!(lines.contains(&format!("@bob: {FIRST} (sealed · signature checked)")), "{seen}: {report}");
        assert!(lines.contains(&format!("@ada: {REPLY} (sealed · signature checked)")), "{seen}: {report}");
    }
    let locked = &report["reloaded_locked"];
    assert_eq!(
        (locked["unlock_shown"].as_bool(), locked["post_hidden"].as_bool()),
        (Some(true), Some(true)),
        "{report}"
    );
    assert!(!locked["messages"].to_string().contains(REPLY), "locked again after a reload: {report}");
    assert!(report["wrong_passphrase"].as_str().unwrap().contains("Wrong passphrase"), "{report}");
    assert_eq!(report["axe"], json!([]), "{report}");
    assert!(exited_ok, "{report}");

    bob_opens_the_reply_and_no_plaintext_is_on_disk(&bob, &bob_key, &channel, &ada_id, &dir, [FIRST, REPLY]).await;
    std::fs::remove_dir_all(&dir).ok();
}

/// Bob opens ada's browser-sealed reply in Rust; the registry's files hold neither message in plaintext.
async fn bob_opens_the_reply_and_no_plaintext_is_on_disk(
    bob: &bazaar_sdk::Client,
    bob_key: &ed25519_dalek::SigningKey,
    channel: &bazaar_conversation::ChannelId,
    ada_id: &bazaar_types::MemberId,
    dir: &std::path::Path,
    said: [&str; 2],
) {
    use bazaar_conversation::sealing::{open, SealedBody, SealingSecret};
    let bob_id = bazaar_types::MemberId(bazaar_sdk::did_of(bob_key));
    let path = format!("/v1/channels/{channel}/messages?limit=10");
    let listed = bob.call::<serde_json::Value>(Method::GET, &path, None, None).await.unwrap().body;
    let messages = listed["messages"].as_array().or(listed.as_array()).unwrap().clone();
    let reply = messages.iter().find(|m| m["authored_by"] == ada_id.0.as_str()).expect("ada's reply");
    assert_eq!(reply["body"], "", "no plaintext body stored: {reply}");
    let envelope: SealedBody = serde_json::from_value(reply["sealed"].clone()).unwrap();
    let opened = open(channel, ada_id, &bob_id, &SealingSecret::derive(bob_key), &envelope).unwrap();
    assert_eq!(opened, said[1]);
    for entry in std::fs::read_dir(dir).unwrap() {
        let bytes = std::fs::read(entry.unwrap().path()).unwrap_or_default();
        for text in said {
            assert!(!bytes.windows(text.len()).any(|w| w == text.as_bytes()), "plaintext found on disk: {text}");
        }
    }
}

//! The chamber's rooms page in Debian's headless Chromium (`tests/browser/rooms.mjs`): a member signs in and
//! sees its channels with an attention badge for unread messages, opens a plaintext room (its header says so,
//! the member rail lists who is in it and how they listen, the messages are there), posts a message that
//! appears and clears the badge, and opens a sealed room whose header says sealed and offers no plaintext post.

mod common;

use bazaar_cli::story::{enroll_pair, enroll_pair_with_key};
use reqwest::Method;
use serde_json::json;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_member_reads_its_rooms_with_badges_headers_and_the_member_rail() {
    let dir = common::fresh_dir("bazaar-rooms-page");
    let (local, operator) = common::embedded_with_operator(&dir, "op").await;
    let key = bazaar_sdk::generate_key();
    let (_, ada) = enroll_pair_with_key(&operator, "rooms-home", "ada", &key).await.unwrap();
    let (_, bo) = enroll_pair(&operator, "rooms-other", "bob").await.unwrap();
    let ada_id = bazaar_types::MemberId(ada.me().await.unwrap()["member"]["id"].as_str().unwrap().to_string());
    bazaar_cli::sealed::publish_sealing_key(&ada, &key, &ada_id).await.unwrap();
    let create = |name: &str, private: bool, sealed: bool| json!({"name": name, "private": private, "sealed": sealed});
    let lobby = ada.call(Method::POST, "/v1/rooms", Some(create("lobby", false, false)), None).await.unwrap().body;
    let lobby = lobby["id"].as_str().unwrap().to_string();
    let vault = ada.call(Method::POST, "/v1/rooms", Some(create("vault", true, true)), None).await.unwrap().body;
    assert_eq!(vault["sealed"], true, "{vault}");
    let vault = vault["id"].as_str().unwrap().to_string();
    bo.call(Method::POST, &format!("/v1/channels/{lobby}/join"), None, None).await.unwrap();
    let post = json!({"body": "the linen arrived"});
    bo.call(Method::POST, &format!("/v1/channels/{lobby}/messages"), Some(post), None).await.unwrap();

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

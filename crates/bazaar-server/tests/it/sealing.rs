//! Sealed DMs and rooms over HTTP: keys published under the identity key's
//! signature, a channel sealed at birth or plaintext with a line saying why,
//! a sealed post that only its members open, and a database that never holds
//! the words. The JavaScript side of the format is checked in
//! `bazaar-conversation`'s `sealing_interop` test.

use crate::common;

use bazaar_conversation::sealing::{open, seal, sign_message, sign_sealing_key, Content, SealedBody, SealingSecret};
use bazaar_conversation::ChannelId;
use bazaar_types::MemberId;
use common::{person, registry, Person, Registry};
use serde_json::{json, Value};

fn code(body: &Value) -> &str {
    body["code"].as_str().unwrap_or("")
}

/// Publishes `who`'s derived sealing key, signed by its identity key.
async fn publish(r: &Registry, who: &Person) -> String {
    let public_key = SealingSecret::derive(&who.key).public_key();
    let signature = sign_sealing_key(&who.key, &MemberId(who.id.clone()), &public_key);
    let body = json!({"public_key": public_key, "signature": signature});
    let (status, key) = r.call(who, reqwest::Method::PUT, "/v1/sealing-key", Some(body)).await;
    assert_eq!(status, 200, "{key}");
    public_key
}

/// A sealed post by `author` for the channel's current members, as a client makes it.
async fn sealed_post(r: &Registry, author: &Person, channel: &str, words: &str) -> Value {
    let (status, keys) = r.get(author, &format!("/v1/channels/{channel}/sealing-keys")).await;
    assert_eq!(status, 200, "{keys}");
    let to: Vec<(MemberId, String)> = keys
        .as_array()
        .unwrap()
        .iter()
        .map(|k| {
            let key = k["sealing_key"]["public_key"].as_str().expect("every member has a key").to_string();
            (MemberId(k["member"].as_str().unwrap().to_string()), key)
        })
        .collect();
    let (id, me) = (ChannelId(channel.to_string()), MemberId(author.id.clone()));
    let sealed = seal(&id, &me, words, &to).unwrap();
    let signature = sign_message(&author.key, &id, &me, &Content::Sealed(&sealed));
    json!({"sealed": sealed, "signature": signature})
}

#[tokio::test]
async fn a_sealed_dm_opens_for_its_members_and_its_words_never_reach_the_database() {
    let r = registry().await;
    let (ivy, jon) = (person(&r, "ivy").await, person(&r, "jon").await);
    publish(&r, &ivy).await;
    publish(&r, &jon).await;
    let (_, dm) = r.post(&ivy, "/v1/dms", json!({"with": "jon"})).await;
    assert_eq!(dm["sealed"], true, "{dm}");
    let channel = dm["id"].as_str().unwrap();
    let path = format!("/v1/channels/{channel}/messages");
    // Plaintext into a sealed channel is refused.
    let (status, refused) = r.post(&ivy, &path, json!({"body": "in the clear"})).await;
    assert_eq!((status, code(&refused)), (409, "sealed_required"));
    // A signature by anyone but the author is refused before the store sees the post.
    let marker = "the-sealed-floor-is-2400-zq";
    let mut forged = sealed_post(&r, &ivy, channel, marker).await;
    let sealed: SealedBody = serde_json::from_value(forged["sealed"].clone()).unwrap();
    let (id, ivy_id) = (ChannelId(channel.into()), MemberId(ivy.id.clone()));
    forged["signature"] = json!(sign_message(&jon.key, &id, &ivy_id, &Content::Sealed(&sealed)));
    let (status, refused) = r.post(&ivy, &path, forged).await;
    assert_eq!((status, code(&refused)), (400, "signature_invalid"));
    let mut post = sealed_post(&r, &ivy, channel, marker).await;
    post["mentions"] = json!(["@jon"]);
    let (status, posted) = r.post(&ivy, &path, post).await;
    assert_eq!(status, 201, "{posted}");
    assert_eq!(posted["body"], "");
    // Metadata is not sealed: who, when and whom it mentions are the registry's to see.
    assert_eq!(posted["mentions"], json!([jon.id]));
    let (_, history) = r.get(&jon, &path).await;
    let stored = history.as_array().unwrap().last().unwrap().clone();
    let envelope: SealedBody = serde_json::from_value(stored["sealed"].clone()).unwrap();
    let opened = open(&id, &ivy_id, &MemberId(jon.id.clone()), &SealingSecret::derive(&jon.key), &envelope).unwrap();
    assert_eq!(opened, marker);
    assert!(stored["signature"].is_string(), "the signature travels with the message");
    let (_, attention) = r.get(&jon, "/v1/attention").await;
    assert_eq!(attention[0]["wakes"], 1, "a sealed DM post wakes like any: {attention}");
    let leaked = std::fs::read_dir(r.dir()).unwrap().filter_map(Result::ok).any(|file| {
        let name = file.file_name().to_string_lossy().to_string();
        name.starts_with("c.db")
            && std::fs::read(file.path()).unwrap().windows(marker.len()).any(|w| w == marker.as_bytes())
    });
    assert!(!leaked, "the sealed words are in no database file");
    let (status, _) = r.get(&ivy, &format!("/v1/members/{}/sealing-key", jon.id)).await;
    assert_eq!(status, 200);
    // An edit is sealed too: plaintext is refused, a sealed and signed one is kept.
    let target = format!("/v1/channels/{channel}/messages/{}", posted["seq"]);
    let (status, refused) = r.call(&ivy, reqwest::Method::PATCH, &target, Some(json!({"body": "in the clear"}))).await;
    assert_eq!((status, code(&refused)), (409, "sealed_required"));
    let edit = sealed_post(&r, &ivy, channel, "the-sealed-floor-is-2500").await;
    let unsigned = json!({"sealed": edit["sealed"]});
    let (status, refused) = r.call(&ivy, reqwest::Method::PATCH, &target, Some(unsigned)).await;
    assert_eq!((status, code(&refused)), (400, "signature_required"));
    let (status, edited) = r.call(&ivy, reqwest::Method::PATCH, &target, Some(edit)).await;
    assert_eq!((status, &edited["kind"]["type"]), (201, &json!("edit")), "{edited}");
    let envelope: SealedBody = serde_json::from_value(edited["sealed"].clone()).unwrap();
    let jon_key = SealingSecret::derive(&jon.key);
    assert_eq!(open(&id, &ivy_id, &MemberId(jon.id.clone()), &jon_key, &envelope).unwrap(), "the-sealed-floor-is-2500");
}

#[tokio::test]
async fn a_keyless_member_gets_a_plaintext_dm_that_says_why_and_keys_must_be_signed() {
    let r = registry().await;
    let (kim, lou) = (person(&r, "kim").await, person(&r, "lou").await);
    publish(&r, &kim).await;
    // A key signed by someone else is refused.
    let public_key = SealingSecret::derive(&lou.key).public_key();
    let forged = sign_sealing_key(&kim.key, &MemberId(lou.id.clone()), &public_key);
    let body = json!({"public_key": public_key, "signature": forged});
    let (status, refused) = r.call(&lou, reqwest::Method::PUT, "/v1/sealing-key", Some(body)).await;
    assert_eq!((status, code(&refused)), (400, "signature_invalid"));
    let (status, missing) = r.get(&kim, &format!("/v1/members/{}/sealing-key", lou.id)).await;
    assert_eq!((status, code(&missing)), (404, "sealing_key_not_found"));
    let (_, dm) = r.post(&kim, "/v1/dms", json!({"with": "lou"})).await;
    assert_eq!(dm["sealed"], false);
    let channel = dm["id"].as_str().unwrap();
    let (_, history) = r.get(&lou, &format!("/v1/channels/{channel}/messages")).await;
    let line = &history[0];
    assert_eq!(line["kind"]["line"], "sealing");
    assert_eq!(line["kind"]["lacking"], json!([lou.id]));
    assert!(line["body"].as_str().unwrap().contains("no sealing key"), "{line}");
    // Lou publishing later does not convert it; a sealed post is refused there.
    publish(&r, &lou).await;
    let sealed = sealed_post(&r, &kim, channel, "x").await;
    let (status, refused) = r.post(&kim, &format!("/v1/channels/{channel}/messages"), sealed).await;
    assert_eq!((status, code(&refused)), (409, "not_sealed"));
    // A plaintext post may carry a signature, checked against the author's did:key.
    let (id, kim_id) = (ChannelId(channel.into()), MemberId(kim.id.clone()));
    let signature = sign_message(&kim.key, &id, &kim_id, &Content::Plain("signed words"));
    let body = json!({"body": "signed words", "signature": signature});
    let (status, posted) = r.post(&kim, &format!("/v1/channels/{channel}/messages"), body).await;
    assert_eq!(status, 201, "{posted}");
    let body = json!({"body": "other words", "signature": signature});
    let (status, refused) = r.post(&kim, &format!("/v1/channels/{channel}/messages"), body).await;
    assert_eq!((status, code(&refused)), (400, "signature_invalid"));
}

#[tokio::test]
async fn a_sealed_room_admits_only_members_with_keys() {
    let r = registry().await;
    let (ann, bo) = (person(&r, "ann").await, person(&r, "bo-b").await);
    publish(&r, &ann).await;
    let (status, room) = r.post(&ann, "/v1/rooms", json!({"name": "desk", "private": true, "sealed": true})).await;
    assert_eq!((status, &room["sealed"]), (201, &json!(true)), "{room}");
    let channel = room["id"].as_str().unwrap();
    let add = format!("/v1/channels/{channel}/members");
    let (status, refused) = r.post(&ann, &add, json!({"member": bo.id})).await;
    assert_eq!((status, code(&refused)), (409, "sealing_key_required"));
    publish(&r, &bo).await;
    let (status, _) = r.post(&ann, &add, json!({"member": bo.id})).await;
    assert_eq!(status, 200);
    let post = sealed_post(&r, &bo, channel, "hello desk").await;
    let (status, posted) = r.post(&bo, &format!("/v1/channels/{channel}/messages"), post).await;
    assert_eq!(status, 201, "{posted}");
    let (status, refused) = r.post(&ann, "/v1/rooms", json!({"name": "open", "sealed": true})).await;
    assert_eq!((status, code(&refused)), (400, "sealed_public_room"));
}

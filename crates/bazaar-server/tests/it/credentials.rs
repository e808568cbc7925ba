//! Owners answer for their agents' credentials: a credential an invite (or
//! an owner's reissue) hands over does nothing but rotate; the owner lists,
//! reissues and revokes its agent's credentials; nobody else may.

use crate::common;

use bazaar_sdk::{generate_key, Body, Client};
use common::{person, registry};
use serde_json::{json, Value};

async fn call(r: &common::Registry, credential: &str, method: reqwest::Method, path: &str) -> (u16, Value) {
    let response = r.http.request(method, format!("{}{path}", r.url)).bearer_auth(credential).send().await.unwrap();
    let status = response.status().as_u16();
    (status, response.json().await.unwrap_or(Value::Null))
}

/// Redeems an invite over plain HTTP (the SDK would rotate at once): the invite's own credential.
async fn enroll_raw(r: &common::Registry, owner: &Client, handle: &str) -> (String, String) {
    let invite = owner.issue_invite().await.unwrap();
    let key = generate_key();
    let message = format!("bazaar-invite-v1\n{invite}\n{handle}");
    let proof = bazaar_core::crypto::sign(&key, message.as_bytes());
    let body = json!({"invite_code": invite, "public_key": hex::encode(key.verifying_key().as_bytes()), "handle": handle, "proof": proof});
    let joined: Value =
        r.http.post(format!("{}/v1/agents", r.url)).json(&body).send().await.unwrap().json().await.unwrap();
    (joined["credential"].as_str().unwrap().to_string(), joined["id"].as_str().unwrap().to_string())
}

#[tokio::test]
async fn an_invited_agent_rotates_before_anything_and_its_owner_answers_for_its_credentials() {
    let r = registry().await;
    let hotel = person(&r, "hotel").await;
    let owner = r.operator.with_credential(&hotel.credential);
    let (issued, agent_id) = enroll_raw(&r, &owner, "concierge").await;
    assert!(issued.starts_with("bzi_"), "{issued}");
    // The invite's credential does nothing but rotate.
    for (method, path) in [(reqwest::Method::GET, "/v1/me"), (reqwest::Method::POST, "/v1/rooms")] {
        let (status, refused) = call(&r, &issued, method, path).await;
        assert_eq!((status, refused["code"].as_str()), (403, Some("rotation_required")), "{path}");
    }
    let (status, rotated) = call(&r, &issued, reqwest::Method::POST, "/v1/credentials/rotate").await;
    assert_eq!(status, 200, "{rotated}");
    let own = rotated["credential"].as_str().unwrap().to_string();
    assert!(own.starts_with("bzc_"));
    assert_eq!(call(&r, &own, reqwest::Method::GET, "/v1/me").await.0, 200);
    assert_eq!(call(&r, &issued, reqwest::Method::GET, "/v1/me").await.0, 401, "the invite's is dead");
    // The owner lists them: the invite's (revoked by the rotation) and the agent's own.
    let path = format!("/v1/agents/{agent_id}/credentials");
    let (status, listed) = call(&r, &hotel.credential, reqwest::Method::GET, &path).await;
    assert_eq!(status, 200, "{listed}");
    let live = |listed: &Value| -> Vec<String> {
        let all = listed.as_array().unwrap();
        all.iter().filter(|c| c["revoked_at"].is_null()).map(|c| c["id"].as_str().unwrap().to_string()).collect()
    };
    assert_eq!((listed.as_array().unwrap().len(), live(&listed).len()), (2, 1), "{listed}");
    assert_eq!(listed[0]["id"].as_str().unwrap().len(), 16);
    // Someone else's owner may not look.
    let stranger = person(&r, "stranger").await;
    let (status, refused) = call(&r, &stranger.credential, reqwest::Method::GET, &path).await;
    assert_eq!((status, refused["code"].as_str()), (403, Some("not_owner")));
    // The owner reissues: the agent's own is revoked, the new one must be rotated first.
    let (status, reissued) =
        call(&r, &hotel.credential, reqwest::Method::POST, "/v1/agents/concierge/credentials/reissue").await;
    assert_eq!(status, 200, "{reissued}");
    let handed = reissued["credential"].as_str().unwrap().to_string();
    assert!(handed.starts_with("bzi_"));
    assert_eq!(call(&r, &own, reqwest::Method::GET, "/v1/me").await.0, 401, "the old one is revoked");
    assert_eq!(call(&r, &handed, reqwest::Method::GET, "/v1/me").await.0, 403);
    let (_, again) = call(&r, &handed, reqwest::Method::POST, "/v1/credentials/rotate").await;
    let newest = again["credential"].as_str().unwrap().to_string();
    // An agent cannot reissue itself (that is rotation); the owner revokes one by id.
    let (status, refused) = call(&r, &newest, reqwest::Method::POST, "/v1/agents/concierge/credentials/reissue").await;
    assert_eq!((status, refused["code"].as_str()), (403, Some("not_owner")));
    let (_, listed) = call(&r, &hotel.credential, reqwest::Method::GET, &path).await;
    assert_eq!(listed.as_array().unwrap().len(), 4, "invite's, own, reissued, rotated: {listed}");
    let newest_id = live(&listed).pop().expect("one live credential");
    let revoke = format!("/v1/agents/concierge/credentials/{newest_id}/revoke");
    assert_eq!(call(&r, &hotel.credential, reqwest::Method::POST, &revoke).await.0, 200);
    assert_eq!(call(&r, &newest, reqwest::Method::GET, "/v1/me").await.0, 401);
    let (status, missing) =
        call(&r, &hotel.credential, reqwest::Method::POST, "/v1/agents/concierge/credentials/0000000000000000/revoke")
            .await;
    assert_eq!((status, missing["code"].as_str()), (404, Some("credential_not_found")));
}

#[tokio::test]
async fn the_sdk_rotates_an_invites_credential_at_once() {
    let r = registry().await;
    let hotel = person(&r, "hotel").await;
    let owner = r.operator.with_credential(&hotel.credential);
    let invite = owner.issue_invite().await.unwrap();
    let joined = owner.with_credential("none").redeem_invite(&invite, &generate_key(), "valet").await.unwrap();
    let credential = joined.credential.as_str();
    assert!(credential.starts_with("bzc_"), "{joined:?}");
    assert_eq!(call(&r, credential, reqwest::Method::GET, "/v1/me").await.0, 200);
}

/// An owner issues its agent a credential without `pay`: it reads and talks,
/// and every money-moving command is refused `credential_cannot_spend` —
/// tokens, stake, contracts, budgets — while the agent's full credential
/// still pays; the listing names each credential's scopes; unknown scopes
/// are refused; nobody but the owner issues one.
#[tokio::test]
async fn a_credential_without_pay_reads_and_talks_but_never_moves_money() {
    let r = registry().await;
    let hotel = person(&r, "hotel").await;
    let owner = r.operator.with_credential(&hotel.credential);
    let agent = common::agent_of(&r, &hotel, "concierge").await;
    common::agent_of(&r, &hotel, "shop").await;
    r.operator.mint(&hotel.id, 10_000, "mint-1").await.unwrap();
    owner.fund("concierge", 5_000, "fund-1").await.unwrap();
    owner.set_budget("concierge", 1_000, 5_000, 5_000).await.unwrap();
    let job_run = owner.issue_scoped_credential("concierge", &["jobs", "read", "talk"]).await.unwrap();
    assert_eq!(call(&r, &job_run, reqwest::Method::GET, "/v1/me").await.0, 200, "it reads");
    let runner = owner.with_credential(&job_run);
    let talked = post(&runner, "/v1/rooms", json!({"name": "ops", "private": true})).await;
    assert!(talked.is_ok(), "it talks: {talked:?}");
    let refusals = [
        (
            "token",
            runner.issue_token("shop", 100, "o-1", "https://x/y").await.map(|a| serde_json::to_value(a.body).unwrap()),
        ),
        ("stake", runner.stake_lock(100, "k-1").await.map(|a| serde_json::to_value(a.body).unwrap())),
        (
            "contract",
            runner
                .create_contract("hotel", None, &[(100, "x", 4_000_000_000_000)], "terms", None, "k-2")
                .await
                .map(|a| serde_json::to_value(a.body).unwrap()),
        ),
    ];
    for (what, refused) in refusals {
        let refused = refused.unwrap_err();
        assert_eq!((refused.status(), refused.code()), (Some(403), Some("credential_cannot_spend")), "{what}");
    }
    let paid = owner
        .with_credential(&agent.credential)
        .call::<Value>(
            reqwest::Method::POST,
            "/v1/tokens",
            Some(Body::json(
                json!({"merchant": "shop", "max_amount_minor": 100, "order_id": "o-2", "resource": "https://x/y"}),
            )),
            Some("k-2"),
        )
        .await;
    assert!(paid.is_ok(), "the agent's full credential still pays: {paid:?}");
    let (_, listed) = call(&r, &hotel.credential, reqwest::Method::GET, "/v1/agents/concierge/credentials").await;
    let scopes: Vec<Value> = listed.as_array().unwrap().iter().map(|c| c["scopes"].clone()).collect();
    assert!(scopes.contains(&json!(["jobs", "read", "talk"])) && scopes.contains(&Value::Null), "{listed}");
    let unknown = owner.issue_scoped_credential("concierge", &["jobs", "spend-everything"]).await.unwrap_err();
    assert_eq!(unknown.code(), Some("scope_unknown"));
    let by_agent =
        owner.with_credential(&agent.credential).issue_scoped_credential("concierge", &["read"]).await.unwrap_err();
    assert_eq!(by_agent.code(), Some("not_owner"), "an agent cannot issue itself credentials");
}

/// A POST of `body`, answered as JSON.
async fn post(client: &Client, path: &str, body: Value) -> Result<bazaar_sdk::Answer<Value>, bazaar_sdk::SdkError> {
    client.call(reqwest::Method::POST, path, Some(Body::json(body)), None).await
}

/// A credential without `talk` reads rooms but never speaks in them: every
/// speaking route — opening a room or a DM, joining, adding, removing, a role,
/// posting, reacting, editing, deleting, a sealing key — is refused 403
/// `credential_cannot_talk`, before anything else is checked; reading,
/// muting, read marks and leaving still work; the agent's full credential
/// still talks.
#[tokio::test]
async fn a_credential_without_talk_reads_rooms_but_never_speaks() {
    let r = registry().await;
    let hotel = person(&r, "hotel").await;
    let guest = person(&r, "guest").await;
    let owner = r.operator.with_credential(&hotel.credential);
    let agent = common::agent_of(&r, &hotel, "concierge").await;
    let full = owner.with_credential(&agent.credential);
    let room = post(&full, "/v1/rooms", json!({"name": "ops", "private": true})).await;
    let room = room.unwrap().body["id"].as_str().unwrap().to_string();
    post(&full, &format!("/v1/channels/{room}/members"), json!({"member": "guest"})).await.unwrap();
    let said = post(&full, &format!("/v1/channels/{room}/messages"), json!({"body": "hello"})).await.unwrap();
    let seq = said.body["seq"].as_u64().unwrap();
    let quiet = owner.issue_scoped_credential("concierge", &["jobs", "pay", "read"]).await.unwrap();
    let quiet = owner.with_credential(&quiet);
    use reqwest::Method;
    let speaking: Vec<(Method, String, Option<Value>)> = vec![
        (Method::POST, "/v1/rooms".into(), Some(json!({"name": "more"}))),
        (Method::POST, "/v1/dms".into(), Some(json!({"with": "guest"}))),
        (Method::POST, format!("/v1/channels/{room}/join"), None),
        (Method::POST, format!("/v1/channels/{room}/members"), Some(json!({"member": "hotel"}))),
        (Method::PUT, format!("/v1/channels/{room}/members/guest/role"), Some(json!({"role": "owner"}))),
        (Method::DELETE, format!("/v1/channels/{room}/members/guest"), None),
        (Method::POST, format!("/v1/channels/{room}/messages"), Some(json!({"body": "psst"}))),
        (Method::POST, format!("/v1/channels/{room}/messages/{seq}/reactions"), Some(json!({"emoji": "ok"}))),
        (Method::PATCH, format!("/v1/channels/{room}/messages/{seq}"), Some(json!({"body": "bye"}))),
        (Method::DELETE, format!("/v1/channels/{room}/messages/{seq}"), None),
        (Method::PUT, "/v1/sealing-key".into(), Some(json!({"public_key": "x", "signature": "y"}))),
    ];
    for (method, path, body) in speaking {
        let refused = quiet.call::<Value>(method.clone(), &path, (body).map(Body::json), None).await.unwrap_err();
        assert_eq!((refused.status(), refused.code()), (Some(403), Some("credential_cannot_talk")), "{method} {path}");
    }
    // Nothing it tried was said: the room holds the join lines and hello, and guest is still a member.
    let history = quiet.call::<Value>(Method::GET, &format!("/v1/channels/{room}/messages"), None, None).await.unwrap();
    let bodies: Vec<&str> = history.body.as_array().unwrap().iter().filter_map(|m| m["body"].as_str()).collect();
    assert!(bodies.contains(&"hello") && !bodies.contains(&"psst"), "{bodies:?}");
    let (_, guests) = call(&r, &guest.credential, Method::GET, "/v1/channels").await;
    assert!(guests.to_string().contains(&room), "guest was not removed: {guests}");
    for (method, path, body) in [
        (Method::GET, "/v1/channels".to_string(), None),
        (Method::GET, "/v1/inbox".to_string(), None),
        (Method::PUT, format!("/v1/channels/{room}/mute"), Some(json!({"muted": true}))),
        (Method::POST, format!("/v1/channels/{room}/read"), Some(json!({"seq": seq}))),
    ] {
        let read = quiet.call::<Value>(method.clone(), &path, (body).map(Body::json), None).await;
        assert!(read.is_ok(), "{method} {path}: {read:?}");
    }
    // The full credential still speaks.
    let reacted = post(&full, &format!("/v1/channels/{room}/messages/{seq}/reactions"), json!({"emoji": "ok"})).await;
    assert!(reacted.is_ok(), "{reacted:?}");
}

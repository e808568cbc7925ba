//! Browser sessions without a browser: a session (as a passkey sign-in opens
//! it) stands in for the owner's credential on reads, must carry the
//! registry's own `Origin` to change anything, cannot rotate or revoke a
//! credential, and is dead once signed out. The WebAuthn ceremonies
//! themselves run in headless Chromium (`bazaar-cli/tests/it/passkey_browser.rs`).

use crate::common;

use bazaar_core::crypto::sha256_hex;
use bazaar_types::MemberId;
use common::{person, registry};
use serde_json::{json, Value};

#[tokio::test]
async fn a_session_reads_as_its_owner_and_changes_things_only_from_the_registrys_origin() {
    let r = registry().await;
    *r.state.public_url.write().unwrap() = Some(r.url.clone());
    let origin = r.url.replace("127.0.0.1", "localhost");
    let ivy = person(&r, "ivy").await;
    let token = "bzs_test-session-token";
    let member = MemberId(ivy.id.clone());
    let store = r.state.plane().unwrap().clone();
    store.call(move |s| s.open_session(sha256_hex(token.as_bytes()), &member, None)).await.unwrap();
    let with_cookie = |method: reqwest::Method, path: &str, cookie: &str| {
        r.http.request(method, format!("{}{path}", r.url)).header("cookie", format!("bazaar_session={cookie}"))
    };
    let answer = |response: reqwest::Response| async move {
        let status = response.status().as_u16();
        (status, response.json::<Value>().await.unwrap_or(Value::Null))
    };
    let (status, me) = answer(with_cookie(reqwest::Method::GET, "/v1/me", token).send().await.unwrap()).await;
    assert_eq!((status, me["member"]["handle"].as_str()), (200, Some("ivy")));
    let (status, _) = answer(with_cookie(reqwest::Method::GET, "/v1/me", "bzs_forged").send().await.unwrap()).await;
    assert_eq!(status, 401);
    // A state-changing request on the session needs the registry's Origin.
    let room = json!({"name": "from the browser"});
    let bare = with_cookie(reqwest::Method::POST, "/v1/rooms", token).json(&room);
    let (status, refused) = answer(bare.send().await.unwrap()).await;
    assert_eq!((status, refused["code"].as_str()), (403, Some("origin_refused")));
    let foreign = with_cookie(reqwest::Method::POST, "/v1/rooms", token).header("origin", "http://evil.example");
    let (status, _) = answer(foreign.json(&room).send().await.unwrap()).await;
    assert_eq!(status, 403);
    let own = with_cookie(reqwest::Method::POST, "/v1/rooms", token).header("origin", &origin);
    let (status, made) = answer(own.json(&room).send().await.unwrap()).await;
    assert_eq!((status, made["created_by"].as_str()), (201, Some(ivy.id.as_str())));
    // A session is not a credential.
    let rotate = with_cookie(reqwest::Method::POST, "/v1/credentials/rotate", token).header("origin", &origin);
    let (status, refused) = answer(rotate.send().await.unwrap()).await;
    assert_eq!((status, refused["code"].as_str()), (403, Some("session_not_credential")));
    // Signing out revokes it on the server.
    let out = with_cookie(reqwest::Method::POST, "/v1/sessions/sign-out", token).send().await.unwrap();
    let cleared = out.headers().get("set-cookie").unwrap().to_str().unwrap().to_string();
    assert!(cleared.starts_with("bazaar_session=;") && cleared.contains("Max-Age=0"), "{cleared}");
    let (status, _) = answer(with_cookie(reqwest::Method::GET, "/v1/me", token).send().await.unwrap()).await;
    assert_eq!(status, 401);
}

#[tokio::test]
async fn ceremonies_are_refused_when_unknown_and_passkeys_need_a_domain() {
    let r = registry().await;
    *r.state.public_url.write().unwrap() = Some(r.url.clone());
    let ivy = person(&r, "ivy").await;
    let body = json!({"ceremony": "wac_never", "credential": {}});
    let (status, refused) = r.post(&ivy, "/v1/passkeys/sign-in/finish", body.clone()).await;
    assert_eq!((status, refused["code"].as_str()), (404, Some("ceremony_invalid")));
    let (status, started) = r.post(&ivy, "/v1/passkeys/sign-in/start", json!({})).await;
    assert_eq!(status, 200, "{started}");
    assert_eq!(started["options"]["publicKey"]["rpId"], "localhost");
    // A sign-in ceremony is not a registration, and each is used once.
    let wrong = json!({"ceremony": started["ceremony"], "credential": {}});
    let (status, refused) = r.post(&ivy, "/v1/passkeys/register/finish", wrong.clone()).await;
    assert_eq!((status, refused["code"].as_str()), (404, Some("ceremony_invalid")));
    let (status, refused) = r.post(&ivy, "/v1/passkeys/sign-in/finish", wrong).await;
    assert_eq!((status, refused["code"].as_str()), (404, Some("ceremony_invalid")), "taken by the wrong finish");
    let (status, started) = r.post(&ivy, "/v1/passkeys/register/start", json!({})).await;
    assert_eq!(status, 200, "{started}");
    let selection = &started["options"]["publicKey"]["authenticatorSelection"];
    assert_eq!(
        (selection["residentKey"].as_str(), selection["userVerification"].as_str()),
        (Some("required"), Some("required"))
    );
    let garbage = json!({"ceremony": started["ceremony"], "credential": {"id": "x"}});
    let (status, refused) = r.post(&ivy, "/v1/passkeys/register/finish", garbage).await;
    assert_eq!((status, refused["code"].as_str()), (400, Some("passkey_invalid")));
    *r.state.public_url.write().unwrap() = Some("http://10.1.2.3:7878".into());
    let (status, refused) = r.post(&ivy, "/v1/passkeys/sign-in/start", json!({})).await;
    assert_eq!((status, refused["code"].as_str()), (503, Some("passkeys_unavailable")));
}

//! The HTTP API end to end on an embedded store: problem+json, idempotency
//! headers, exactly-once under concurrency, authorization, expiry, and the
//! registry's published documents (and that answers fit the bodies they
//! describe); searches counted off the money writer.

use bazaar_core::apply::Config;
use bazaar_core::model::{Account, Budget, Credential, DocKind, DocRow, Event, Hold, Member, Settlement, Transfer};
use bazaar_sdk::{generate_key, Body, Client, SdkError};
use bazaar_server::{boot, router, sweep_once, AppState};
use bazaar_store::conformance::EPOCH;
use bazaar_store::Store;
use bazaar_types::limits::ESCROW_THRESHOLD_MINOR;
use bazaar_types::{AccountId, ManualClock, MemberId, OrderId, Timestamp, TokenId};
use serde_json::{json, Value};
use std::sync::Arc;

struct Registry {
    url: String,
    state: Arc<AppState>,
    clock: Arc<ManualClock>,
    operator: Client,
    _dir: TempDir,
}

struct TempDir(std::path::PathBuf);
impl Drop for TempDir {
    fn drop(&mut self) {
        std::fs::remove_dir_all(&self.0).ok();
    }
}

fn config() -> Config {
    Config::standard()
}

async fn registry() -> Registry {
    static COUNTER: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = COUNTER.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    let dir = std::env::temp_dir().join(format!("bazaar-api-{}-{n}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let clock = Arc::new(ManualClock::new(EPOCH));
    let store: Arc<dyn Store> =
        Arc::new(bazaar_store_sqlite::SqliteStore::open(dir.join("r.db"), config(), clock.clone()).unwrap());
    let booted = boot(store, clock.clone(), config(), Some("operator-secret".into())).await.unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let app = bazaar_server::contract::checked(router(booted.state.clone()));
    tokio::spawn(async move { axum::serve(listener, app).await });
    let operator = Client::new(&url, Some("operator-secret".into()));
    Registry { url, state: booted.state, clock, operator, _dir: TempDir(dir) }
}

/// Owner client, buyer client, merchant client; the buyer holds `funds` with generous ceilings.
async fn cast(r: &Registry, tag: &str, funds: u64) -> (Client, Client, Client, String) {
    let owner_key = generate_key();
    let owner = r.operator.create_owner(&owner_key, &format!("owner-{tag}")).await.unwrap();
    let owner = r.operator.with_credential(owner.credential.as_str());
    let enroll = |handle: String| {
        let owner = owner.clone();
        async move {
            let invite = owner.issue_invite().await.unwrap();
            let agent = owner.with_credential("none").redeem_invite(&invite, &generate_key(), &handle).await.unwrap();
            owner.with_credential(agent.credential.as_str())
        }
    };
    let buyer = enroll(format!("buyer-{tag}")).await;
    let merchant = enroll(format!("shop-{tag}")).await;
    let owner_id = owner.me().await.unwrap().member.id;
    r.operator.mint(&owner_id, funds, &format!("mint-{tag}")).await.unwrap();
    owner.fund(&format!("buyer-{tag}"), funds, &format!("fund-{tag}")).await.unwrap();
    owner.set_budget(&format!("buyer-{tag}"), funds, funds, funds).await.unwrap();
    (owner, buyer, merchant, format!("shop-{tag}"))
}

fn code(error: SdkError) -> (u16, String) {
    (error.status().unwrap_or(0), error.code().unwrap_or("").to_string())
}

#[tokio::test]
async fn problems_are_rfc9457_with_stable_codes() {
    let r = registry().await;
    let http = reqwest::Client::new();
    let response = http.post(format!("{}/v1/tokens", r.url)).json(&json!({})).send().await.unwrap();
    assert_eq!(response.status(), 401);
    assert_eq!(response.headers()["content-type"], "application/problem+json");
    let body: Value = response.json().await.unwrap();
    assert_eq!(body["code"], "unauthenticated");
    assert_eq!(body["type"], "https://bazaar.dev/problems/unauthenticated");
    let response = http
        .post(format!("{}/v1/mint", r.url))
        .bearer_auth("operator-secret")
        .header("idempotency-key", "k")
        .json(&json!({"owner": "x", "amount_minor": 1, "surprise": true}))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 400);
    let body: Value = response.json().await.unwrap();
    assert_eq!(body["code"], "invalid_request");
    assert!(body["detail"].as_str().unwrap().contains("surprise"), "{body}");
    let unkeyed = r
        .operator
        .call::<Value>(
            reqwest::Method::POST,
            "/v1/mint",
            Some(Body::json(json!({"owner": "x", "amount_minor": 1}))),
            None,
        )
        .await;
    assert_eq!(code(unkeyed.unwrap_err()), (400, "idempotency_key_required".into()));
    let too_big = http
        .post(format!("{}/v1/tokens/verify", r.url))
        .bearer_auth("operator-secret")
        .header("content-type", "application/json")
        .body(vec![b' '; 70 * 1024])
        .send()
        .await
        .unwrap();
    assert_eq!(too_big.status(), 413);
    let missing = http.get(format!("{}/v1/nope", r.url)).send().await.unwrap();
    assert_eq!(missing.status(), 404);
    // A malformed query string is problem+json too, on every route that reads one.
    for path in ["/v1/events?after=soon", "/v1/contracts?limit=-1", "/v1/disputes?limit=x", "/v1/search?q=a&limit=x"] {
        let response = http.get(format!("{}{path}", r.url)).bearer_auth("operator-secret").send().await.unwrap();
        assert_eq!(response.status(), 400, "{path}");
        assert_eq!(response.headers()["content-type"], "application/problem+json", "{path}");
        let body: Value = response.json().await.unwrap();
        assert_eq!(body["code"], "invalid_request", "{path}");
    }
}

#[tokio::test]
async fn settle_replays_conflicts_and_in_flight() {
    let r = registry().await;
    let (_, buyer, merchant, shop) = cast(&r, "a", 10_000).await;
    let token = buyer.issue_token(&shop, 500, "o-1", "https://shop/x").await.unwrap().body.token.clone();
    let first = merchant.settle(&token, 500, "o-1", None).await.unwrap();
    assert!(!first.replayed);
    let again = merchant.settle(&token, 500, "o-1", None).await.unwrap();
    assert!(again.replayed, "a replay is marked Idempotent-Replayed");
    assert_eq!(again.body, first.body);
    let different = merchant.settle(&token, 400, "o-1", None).await.unwrap_err();
    assert_eq!(code(different), (422, "idempotency_conflict".into()));
    let fresh_key = merchant.settle(&token, 500, "o-1", Some("other-key")).await.unwrap_err();
    assert_eq!(code(fresh_key), (409, "token_settled".into()));
    // Many concurrent requests under one key: each is the original or "in flight" with Retry-After.
    let token2 = buyer.issue_token(&shop, 500, "o-2", "https://shop/x").await.unwrap().body.token.clone();
    let http = reqwest::Client::new();
    let credential = merchant_credential(&merchant);
    let sends = (0..32).map(|_| {
        http.post(format!("{}/v1/settlements", r.url))
            .bearer_auth(&credential)
            .header("idempotency-key", "same")
            .json(&json!({"token": token2, "amount_minor": 500, "order_id": "o-2"}))
            .send()
    });
    let mut bodies = Vec::new();
    for response in futures::future::join_all(sends).await {
        let response = response.unwrap();
        match response.status().as_u16() {
            200 => bodies.push(response.json::<Value>().await.unwrap()),
            409 => {
                assert!(response.headers().contains_key("retry-after"));
                assert_eq!(response.json::<Value>().await.unwrap()["code"], "idempotency_in_flight");
            }
            other => panic!("unexpected {other}"),
        }
    }
    assert!(!bodies.is_empty());
    assert!(bodies.iter().all(|b| b == &bodies[0]));
    assert_eq!(buyer.me().await.unwrap().balance_minor, Some(9_000));
}

/// A replay answers the first answer's bytes, not only its JSON: the idempotency record keeps the typed receipt
/// with its tag, and it serialises as it did the first time (a token's receipt and a settlement's).
#[tokio::test]
async fn a_replay_answers_the_same_bytes() {
    let r = registry().await;
    let (_, buyer, merchant, shop) = cast(&r, "bytes", 10_000).await;
    let http = reqwest::Client::new();
    let twice = |path: &str, credential: String, body: Value| {
        let (http, url) = (http.clone(), format!("{}{path}", r.url));
        async move {
            let mut answers = Vec::new();
            for _ in 0..2 {
                let response = http
                    .post(&url)
                    .bearer_auth(&credential)
                    .header("idempotency-key", "bytes-1")
                    .json(&body)
                    .send()
                    .await
                    .unwrap();
                let replayed = response.headers().contains_key("idempotent-replayed");
                assert!(response.status().is_success(), "{url}: {}", response.status());
                answers.push((replayed, response.bytes().await.unwrap()));
            }
            assert_eq!((answers[0].0, answers[1].0), (false, true), "{url}: the second is the replay");
            assert_eq!(answers[0].1, answers[1].1, "{url}: the replay's bytes");
            serde_json::from_slice::<Value>(&answers[0].1).unwrap()
        }
    };
    let issue = json!({"merchant": shop, "max_amount_minor": 500, "order_id": "o-bytes", "resource": "https://shop/x"});
    let issued = twice("/v1/tokens", merchant_credential(&buyer), issue).await;
    let settle = json!({"token": issued["token"], "amount_minor": 400, "order_id": "o-bytes"});
    let settled = twice("/v1/settlements", merchant_credential(&merchant), settle).await;
    assert_eq!(settled["net_minor"], 396);
}

fn merchant_credential(client: &Client) -> String {
    client.credential().unwrap_or_default().to_string()
}

#[tokio::test]
async fn sixty_four_concurrent_settles_make_one_transfer() {
    let r = registry().await;
    let (_, buyer, merchant, shop) = cast(&r, "c", 100_000).await;
    let token = buyer.issue_token(&shop, 250, "race", "https://shop/x").await.unwrap().body.token.clone();
    // Same token, 64 different keys.
    let sends = (0..64).map(|i| {
        let (merchant, token) = (merchant.clone(), token.clone());
        async move { merchant.settle(&token, 250, "race", Some(&format!("k-{i}"))).await }
    });
    let results = futures::future::join_all(sends).await;
    let winners: Vec<_> = results.iter().filter_map(|r| r.as_ref().ok()).collect();
    assert_eq!(winners.len(), 1);
    for result in &results {
        if let Err(error) = result {
            assert!(matches!(error.code(), Some("token_settled")), "{error}");
        }
    }
    // Same order, 64 different tokens (the buyer asked again under fresh keys).
    let mut tokens = Vec::new();
    for i in 0..64 {
        let answer = buyer
            .call::<Value>(
                reqwest::Method::POST,
                "/v1/tokens",
                Some(Body::json(
                    json!({"merchant": shop, "max_amount_minor": 250, "order_id": "race-2", "resource": "r"}),
                )),
                Some(&format!("t-{i}")),
            )
            .await
            .unwrap();
        tokens.push(answer.body["token"].as_str().unwrap().to_string());
    }
    let sends = tokens.iter().enumerate().map(|(i, token)| {
        let (merchant, token) = (merchant.clone(), token.clone());
        async move { (i, merchant.settle(&token, 250, "race-2", Some(&format!("o-{i}"))).await) }
    });
    let results = futures::future::join_all(sends).await;
    assert_eq!(results.iter().filter(|(_, r)| r.is_ok()).count(), 1);
    // Every replay returns the original body.
    for (i, result) in &results {
        let replay = merchant.settle(&tokens[*i], 250, "race-2", Some(&format!("o-{i}"))).await;
        match (result, replay) {
            (Ok(first), Ok(again)) => assert_eq!(first.body, again.body),
            (Err(first), Err(again)) => assert_eq!(first.code(), again.code()),
            _ => panic!("replay changed the outcome"),
        }
    }
    let me = buyer.me().await.unwrap();
    assert_eq!(me.balance_minor, Some(100_000 - 500), "two orders, one debit each");
    let report = bazaar_store::audit::audit(r.state.store.as_ref(), &|_| {}).await.unwrap();
    assert!(report.ok, "{:?}", report.problems);
}

#[tokio::test]
async fn authority_follows_the_principal_chain() {
    let r = registry().await;
    let (owner, buyer, merchant, shop) = cast(&r, "d", 10_000).await;
    let (_, other_buyer, other_shop_client, other_shop) = cast(&r, "e", 10_000).await;
    // An agent cannot change its own budget.
    assert_eq!(code(buyer.set_budget("buyer-d", 1, 1, 1).await.unwrap_err()), (403, "not_owner".into()));
    // An owner cannot fund or budget someone else's agent.
    assert_eq!(code(owner.fund("buyer-e", 1, "x").await.unwrap_err()), (403, "not_owner".into()));
    // A merchant cannot settle a token addressed to another merchant.
    let token = buyer.issue_token(&other_shop, 100, "p-1", "r").await.unwrap().body.token.clone();
    assert_eq!(code(merchant.settle(&token, 100, "p-1", None).await.unwrap_err()), (403, "not_audience".into()));
    assert_eq!(code(merchant.verify(&token).await.unwrap_err()), (403, "not_audience".into()));
    other_shop_client.settle(&token, 100, "p-1", None).await.unwrap();
    // A token is always on the caller's own budget: another agent's budget is out of reach.
    let before = other_buyer.me().await.unwrap().available_minor;
    buyer.issue_token(&shop, 100, "p-2", "r").await.unwrap();
    assert_eq!(other_buyer.me().await.unwrap().available_minor, before);
    // Unknown members are refused whether named by DID or by handle.
    let nobody = "did:key:z6MkhaXgBZDvotDkL5257faiztiGiC2QtKLGpbnnEGta2doK";
    assert_eq!(code(buyer.issue_token(nobody, 100, "p-3", "r").await.unwrap_err()), (404, "member_not_found".into()));
    assert_eq!(
        code(buyer.issue_token("no-such-shop", 100, "p-3", "r").await.unwrap_err()),
        (404, "member_not_found".into())
    );
    assert_eq!(code(owner.fund(nobody, 1, "y").await.unwrap_err()), (404, "member_not_found".into()));
    // Invite codes work once.
    let invite = owner.issue_invite().await.unwrap();
    owner.redeem_invite(&invite, &generate_key(), "first-use").await.unwrap();
    assert_eq!(
        code(owner.redeem_invite(&invite, &generate_key(), "second-use").await.unwrap_err()),
        (410, "invite_used".into())
    );
    // Wrong and rotated-away credentials get 401.
    assert_eq!(code(buyer.with_credential("bzc_wrong").me().await.unwrap_err()), (401, "unauthenticated".into()));
    let fresh = buyer.rotate_credential().await.unwrap();
    assert_eq!(code(buyer.me().await.unwrap_err()), (401, "unauthenticated".into()));
    buyer.with_credential(fresh).me().await.unwrap();
}

#[tokio::test]
async fn expired_tokens_release_their_holds_and_cannot_settle() {
    let r = registry().await;
    let (_, buyer, merchant, shop) = cast(&r, "f", 10_000).await;
    let token = buyer.issue_token(&shop, 700, "late", "r").await.unwrap().body.token.clone();
    assert_eq!(buyer.me().await.unwrap().available_minor, Some(9_300));
    for order in ["late-2", "late-3"] {
        buyer.issue_token(&shop, 100, order, "r").await.unwrap();
    }
    r.clock.advance_s(901);
    assert_eq!(sweep_once(&r.state).await.unwrap(), 3, "one pass releases every expired hold");
    assert_eq!(buyer.me().await.unwrap().available_minor, Some(10_000));
    assert_eq!(merchant.verify(&token).await.unwrap().state(), Some("expired"));
    assert_eq!(code(merchant.settle(&token, 700, "late", None).await.unwrap_err()), (410, "token_expired".into()));
    assert_eq!(sweep_once(&r.state).await.unwrap(), 0, "a hold expires once");
    // A day later the sweeper prunes the idempotency records; the key then starts anew.
    r.clock.advance_s(bazaar_types::limits::IDEMPOTENCY_RETENTION_S + 1);
    sweep_once(&r.state).await.unwrap();
    let metrics = reqwest::get(format!("{}/metrics", r.url)).await.unwrap().text().await.unwrap();
    assert!(
        metrics.lines().any(|l| l.starts_with("bazaar_idempotency_pruned_total ") && !l.ends_with(" 0")),
        "{metrics}"
    );
    let fresh = buyer.issue_token(&shop, 700, "late", "r").await.unwrap();
    assert!(!fresh.replayed, "the order's pruned key is a new request");
    assert_ne!(fresh.body.token, token);
    let big = buyer.issue_token(&shop, ESCROW_THRESHOLD_MINOR + 1, "big", "r").await.unwrap_err();
    assert_eq!(code(big), (422, "escrow_required".into()));
    // Tokens live 15 minutes unless the buyer asks for less (never for more, never below the minimum).
    let ask = |order: &str, ttl_s: u64| {
        let body =
            json!({"merchant": shop, "max_amount_minor": 10, "order_id": order, "resource": "r", "ttl_s": ttl_s});
        buyer.call::<Value>(reqwest::Method::POST, "/v1/tokens", Some(Body::json(body)), None)
    };
    let short = ask("short", 60).await.unwrap().body;
    let now = bazaar_types::Clock::now(r.clock.as_ref()).ms();
    assert_eq!(short["expires_at_ms"].as_i64(), Some(now + 60_000));
    assert_eq!(code(ask("too-short", 1).await.unwrap_err()), (400, "invalid_request".into()));
    assert_eq!(code(ask("too-long", 901).await.unwrap_err()), (400, "invalid_request".into()));
    let default = buyer.issue_token(&shop, 10, "default-ttl", "r").await.unwrap().body;
    assert_eq!(default.expires_at_ms, now + 900_000);
    r.clock.advance_s(1);
    let later = ask("later", 60).await.unwrap().body;
    assert!(short["jti"].as_str().unwrap() < later["jti"].as_str().unwrap(), "token ids sort by issue time");
}

/// A settle's derived key names the token (`token:<jti>`), not the order: a
/// token refused for an order (expired) never blocks the next token for that
/// order, a retry of a settle that succeeded replays its answer, a retry of one
/// refused is judged again, and the order is still paid once
/// (`order_already_settled` for the first token retried and for a third).
#[tokio::test]
async fn a_refused_token_never_blocks_the_next_token_for_its_order() {
    let r = registry().await;
    let (_, buyer, merchant, shop) = cast(&r, "k", 10_000).await;
    let token_of = |answer: bazaar_sdk::answer::Answer<bazaar_sdk::wire::pay::TokenIssued>| answer.body.token;
    let first = token_of(buyer.issue_token(&shop, 400, "again", "r").await.unwrap());
    r.clock.advance_s(901);
    assert_eq!(code(merchant.settle(&first, 400, "again", None).await.unwrap_err()), (410, "token_expired".into()));
    // The buyer asks for a new token for the same order (a key of its own: the derived one replays the first).
    let ask = |key: &'static str| {
        let body = json!({"merchant": shop, "max_amount_minor": 400, "order_id": "again", "resource": "r"});
        let buyer = buyer.clone();
        async move {
            buyer
                .call::<bazaar_sdk::wire::pay::TokenIssued>(
                    reqwest::Method::POST,
                    "/v1/tokens",
                    Some(Body::json(body)),
                    Some(key),
                )
                .await
        }
    };
    let second = token_of(ask("renew-1").await.unwrap());
    let settled = merchant.settle(&second, 400, "again", None).await.unwrap();
    assert!(!settled.replayed, "the second token settles under its own key: {:?}", settled.body);
    let retried = merchant.settle(&second, 400, "again", None).await.unwrap();
    assert!(retried.replayed);
    assert_eq!(retried.body, settled.body);
    // The first token's refusal was not kept under its derived key: a retry is judged afresh, on today's books.
    let refused_again = merchant.settle(&first, 400, "again", None).await.unwrap_err();
    assert_eq!(code(refused_again), (409, "order_already_settled".into()), "judged afresh, not replayed");
    let third = token_of(ask("renew-2").await.unwrap());
    let paid_once = merchant.settle(&third, 400, "again", None).await.unwrap_err();
    assert_eq!(code(paid_once), (409, "order_already_settled".into()));
    assert_eq!(merchant.me().await.unwrap().balance_minor, Some(settled.body.settlement.net_minor as i64));
}

/// A refusal under a derived key is not kept: a token refused for an order (the buyer's budget too small) is
/// issued for that same order, without a key, once the owner raises the budget; a key the caller chose keeps its
/// refusal (replayed after the budget rose) until the caller uses a new key.
#[tokio::test]
async fn a_refusal_under_a_derived_key_never_pins_the_order() {
    let r = registry().await;
    let (owner, buyer, _merchant, shop) = cast(&r, "pin", 300).await;
    let refused = code(buyer.issue_token(&shop, 400, "pinned", "r").await.unwrap_err());
    assert_eq!(refused.0 / 100, 4, "over budget: {refused:?}");
    let body = json!({"merchant": shop, "max_amount_minor": 400, "order_id": "sticky", "resource": "r"});
    let with_key =
        || buyer.call::<Value>(reqwest::Method::POST, "/v1/tokens", Some(Body::json(body.clone())), Some("chosen-key"));
    assert_eq!(code(with_key().await.unwrap_err()), refused);
    let owner_id = owner.me().await.unwrap().member.id;
    r.operator.mint(&owner_id, 1_000, "mint-pin-more").await.unwrap();
    owner.fund("buyer-pin", 1_000, "fund-pin-more").await.unwrap();
    owner.set_budget("buyer-pin", 1_300, 1_300, 1_300).await.unwrap();
    let issued = buyer.issue_token(&shop, 400, "pinned", "r").await.unwrap();
    assert!(!issued.replayed, "the derived key kept no refusal: {:?}", issued.body);
    let again = buyer.issue_token(&shop, 400, "pinned", "r").await.unwrap();
    assert!(again.replayed, "the derived key keeps the token it issued");
    assert_eq!(again.body.token, issued.body.token);
    assert_eq!(code(with_key().await.unwrap_err()), refused, "a chosen key keeps its refusal");
}

#[tokio::test]
async fn verify_is_a_receipt_check() {
    let r = registry().await;
    let (_, buyer, merchant, shop) = cast(&r, "g", 10_000).await;
    let token = buyer.issue_token(&shop, 300, "v", "r").await.unwrap().body.token.clone();
    assert_eq!(merchant.verify(&token).await.unwrap().state(), Some("open"));
    merchant.settle(&token, 300, "v", None).await.unwrap();
    let verified = serde_json::to_value(merchant.verify(&token).await.unwrap()).unwrap();
    assert_eq!(verified["genuine"], true, "a consumed token still verifies as genuine");
    assert_eq!(verified["state"], "settled");
    assert_eq!(verified["work_order"], false);
    assert_eq!(verified["settlement"]["amount_minor"], 300);
    // Genuineness offline, with the key from the registry card and no call to the registry.
    let card = merchant.well_known().await.unwrap();
    let key = card.public_key.as_str();
    let claims = bazaar_sdk::token::verify_offline(&token, key).unwrap();
    assert_eq!((claims.ord.as_str(), claims.max), ("v", 300));
    assert_eq!(bazaar_sdk::token::verify_offline(&token, &card.public_key_hex).unwrap(), claims);
    let (payload, signature) = token.trim_start_matches("apt_").split_once('.').unwrap();
    let mut raised: Value = serde_json::from_slice(&base64_url(payload)).unwrap();
    raised["max"] = json!(30_000);
    let altered = format!("apt_{}.{signature}", base64_url_encode(&serde_json::to_vec(&raised).unwrap()));
    assert_eq!(bazaar_sdk::token::verify_offline(&altered, key), Err(bazaar_sdk::token::OfflineError::BadSignature));
    let forged = format!("{}x", &token[..token.len() - 2]);
    assert!(!merchant.verify(&forged).await.unwrap().genuine());
    assert_eq!(code(merchant.settle(&forged, 300, "v", Some("f")).await.unwrap_err()).1, "token_signature_invalid");
}

/// A token this node signed is remembered as verified when it is issued: the verify and settle that follow
/// cost a lookup, not an Ed25519 verification. A forgery of it is still refused.
#[tokio::test]
async fn a_token_this_node_issued_needs_no_fresh_signature_check() {
    let r = registry().await;
    let (_, buyer, merchant, shop) = cast(&r, "remembered", 10_000).await;
    let http = reqwest::Client::new();
    let cached = || async {
        let metrics = http.get(format!("{}/metrics", r.url)).send().await.unwrap().text().await.unwrap();
        series_value(&metrics, "bazaar_cache_entries{cache=\"verified_tokens\"}")
    };
    let before = cached().await;
    let token = buyer.issue_token(&shop, 300, "remembered", "r").await.unwrap().body.token.clone();
    assert_eq!(cached().await, before + 1, "remembered at issue, before any verify");
    assert!(merchant.verify(&token).await.unwrap().genuine());
    assert_eq!(cached().await, before + 1, "the verify found it; nothing new was verified");
    let forged = format!("{}x", &token[..token.len() - 2]);
    assert!(!merchant.verify(&forged).await.unwrap().genuine());
    merchant.settle(&token, 300, "remembered", None).await.unwrap();
}

#[tokio::test]
async fn registry_publishes_card_openapi_and_metrics() {
    let r = registry().await;
    let http = reqwest::Client::new();
    let card: Value = http.get(format!("{}/.well-known/bazaar", r.url)).send().await.unwrap().json().await.unwrap();
    assert_eq!(card["did"], json!(r.state.registry));
    assert_eq!(card["token_ttl_s"], 900);
    assert_eq!(card["escrow_threshold_minor"], ESCROW_THRESHOLD_MINOR);
    let spec: Value = http.get(format!("{}/openapi.json", r.url)).send().await.unwrap().json().await.unwrap();
    assert!(spec["openapi"].as_str().unwrap().starts_with("3.1"));
    assert!(spec["paths"]["/v1/settlements"]["post"].is_object());
    let health: Value = http.get(format!("{}/healthz", r.url)).send().await.unwrap().json().await.unwrap();
    assert_eq!(health["status"], "ok");
    let metrics = http.get(format!("{}/metrics", r.url)).send().await.unwrap().text().await.unwrap();
    assert!(metrics.contains("bazaar_http_requests_total{route=\"/healthz\",status=\"200\"} 1"), "{metrics}");
    let counter = |name: &str| -> f64 {
        let line =
            metrics.lines().find(|l| l.starts_with(&format!("{name} "))).unwrap_or_else(|| panic!("{name} missing"));
        line.rsplit_once(' ').unwrap().1.parse().unwrap()
    };
    assert!(counter("bazaar_writer_batches_total") >= 1.0, "bootstrap ran through the writer");
    assert!(counter("bazaar_writer_commands_total") >= counter("bazaar_writer_batches_total"));
}

#[tokio::test]
async fn pay_renews_a_replayed_token_that_has_expired() {
    let r = registry().await;
    let (_, buyer, merchant, shop) = cast(&r, "h", 10_000).await;
    let echo = axum::Router::new().route(
        "/paid",
        axum::routing::post(|headers: axum::http::HeaderMap| async move {
            headers.get(bazaar_sdk::PAYMENT_HEADER).and_then(|v| v.to_str().ok()).unwrap_or_default().to_string()
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/paid", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, echo).await });
    #[allow(clippy::disallowed_methods)] // The SDK judges expiry by the wall clock; line the registry up with it.
    let wall = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_millis() as i64;
    r.clock.set(bazaar_types::Timestamp(wall - 1_000_000));
    let first = buyer.issue_token(&shop, 100, "renew-me", &url).await.unwrap().body.token.clone();
    r.clock.set(bazaar_types::Timestamp(wall));
    let paid = buyer.pay(&url, &shop, 100, "renew-me").await.unwrap();
    assert_ne!(paid.body, first, "an expired token is renewed, not replayed to the merchant");
    assert_eq!(paid.token, paid.body);
    assert_eq!(merchant.verify(&paid.token).await.unwrap().state(), Some("open"));
    let again = buyer.pay(&url, &shop, 100, "renew-me").await.unwrap();
    assert_eq!(again.token, paid.token, "a live token for the order is reused");
}

fn base64_url(text: &str) -> Vec<u8> {
    use base64::Engine;
    base64::engine::general_purpose::URL_SAFE_NO_PAD.decode(text).unwrap()
}

fn base64_url_encode(bytes: &[u8]) -> String {
    use base64::Engine;
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
}

/// A store whose writer can be stopped: once `stalled`, every `submit` waits
/// forever (a writer stuck in a long commit, or a queue that never drains)
/// and is counted. Everything else goes to the SQLite store underneath.
struct StalledWriter {
    inner: Arc<dyn Store>,
    stalled: std::sync::atomic::AtomicBool,
    submits_while_stalled: std::sync::atomic::AtomicU64,
}

#[async_trait::async_trait]
impl Store for StalledWriter {
    async fn submit(
        &self,
        command: bazaar_core::command::Command,
    ) -> Result<bazaar_core::apply::Applied, bazaar_store::StoreError> {
        if self.stalled.load(std::sync::atomic::Ordering::SeqCst) {
            self.submits_while_stalled.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            std::future::pending::<()>().await;
        }
        self.inner.submit(command).await
    }
    fn writer_stats(&self) -> bazaar_store::writer::WriterStats {
        self.inner.writer_stats()
    }
    async fn registry_key_seed(&self, candidate: [u8; 32]) -> Result<[u8; 32], bazaar_store::StoreError> {
        self.inner.registry_key_seed(candidate).await
    }
    async fn registry_keys(&self) -> Result<Vec<String>, bazaar_store::StoreError> {
        self.inner.registry_keys().await
    }
    async fn add_registry_key(&self, n: u32, record: String) -> Result<bool, bazaar_store::StoreError> {
        self.inner.add_registry_key(n, record).await
    }
    async fn head(&self) -> Result<bazaar_core::chain::ChainHead, bazaar_store::StoreError> {
        self.inner.head().await
    }
    async fn credentials_of(
        &self,
        member: &MemberId,
    ) -> Result<Vec<bazaar_core::model::Credential>, bazaar_store::StoreError> {
        self.inner.credentials_of(member).await
    }
    async fn member(&self, id: &MemberId) -> Result<Option<Member>, bazaar_store::StoreError> {
        self.inner.member(id).await
    }
    async fn member_by_handle(&self, handle: &str) -> Result<Option<Member>, bazaar_store::StoreError> {
        self.inner.member_by_handle(handle).await
    }
    async fn agents_of(&self, owner: &MemberId, limit: usize) -> Result<Vec<Member>, bazaar_store::StoreError> {
        self.inner.agents_of(owner, limit).await
    }
    async fn credential(&self, hash: &str) -> Result<Option<Credential>, bazaar_store::StoreError> {
        self.inner.credential(hash).await
    }
    async fn authenticate(&self, hash: &str) -> Result<Option<(Credential, Member)>, bazaar_store::StoreError> {
        self.inner.authenticate(hash).await
    }
    async fn account(&self, id: &AccountId) -> Result<Option<Account>, bazaar_store::StoreError> {
        self.inner.account(id).await
    }
    async fn budget(&self, agent: &MemberId) -> Result<Option<Budget>, bazaar_store::StoreError> {
        self.inner.budget(agent).await
    }
    async fn token(&self, jti: &TokenId) -> Result<Option<bazaar_store::TokenView>, bazaar_store::StoreError> {
        self.inner.token(jti).await
    }
    async fn settlement_by_order(
        &self,
        merchant: &MemberId,
        order: &OrderId,
    ) -> Result<Option<Settlement>, bazaar_store::StoreError> {
        self.inner.settlement_by_order(merchant, order).await
    }
    async fn expired_tokens(
        &self,
        now: Timestamp,
        limit: usize,
    ) -> Result<Vec<(TokenId, MemberId)>, bazaar_store::StoreError> {
        self.inner.expired_tokens(now, limit).await
    }
    async fn events(&self, after: u64, limit: usize) -> Result<Vec<Event>, bazaar_store::StoreError> {
        self.inner.events(after, limit).await
    }
    async fn transfers(&self, after: i64, limit: usize) -> Result<Vec<(i64, Transfer)>, bazaar_store::StoreError> {
        self.inner.transfers(after, limit).await
    }
    async fn holds(&self, after: &str, limit: usize) -> Result<Vec<Hold>, bazaar_store::StoreError> {
        self.inner.holds(after, limit).await
    }
    async fn accounts(&self, after: &str, limit: usize) -> Result<Vec<Account>, bazaar_store::StoreError> {
        self.inner.accounts(after, limit).await
    }
    async fn prune_idempotency(&self, before: Timestamp, limit: usize) -> Result<usize, bazaar_store::StoreError> {
        self.inner.prune_idempotency(before, limit).await
    }
    async fn doc(&self, kind: DocKind, id: &str) -> Result<Option<DocRow>, bazaar_store::StoreError> {
        self.inner.doc(kind, id).await
    }
    async fn blob(&self, sha256: &str) -> Result<Option<bazaar_core::model::Blob>, bazaar_store::StoreError> {
        self.inner.blob(sha256).await
    }
    async fn docs_by_party(
        &self,
        kind: DocKind,
        party: &MemberId,
        after: &str,
        limit: usize,
    ) -> Result<Vec<DocRow>, bazaar_store::StoreError> {
        self.inner.docs_by_party(kind, party, after, limit).await
    }
    async fn search_listings(&self, terms: &[String], limit: usize) -> Result<Vec<DocRow>, bazaar_store::StoreError> {
        self.inner.search_listings(terms, limit).await
    }
    async fn record_searches(&self, searches: &[bazaar_store::SearchCount]) -> Result<(), bazaar_store::StoreError> {
        self.inner.record_searches(searches).await
    }
    async fn unmet_searches(&self, limit: usize) -> Result<Vec<(String, u64, Timestamp)>, bazaar_store::StoreError> {
        self.inner.unmet_searches(limit).await
    }
    async fn fold_snapshot(&self, name: &str) -> Result<Option<bazaar_store::FoldSnapshot>, bazaar_store::StoreError> {
        self.inner.fold_snapshot(name).await
    }
    async fn save_fold_snapshot(&self, snapshot: &bazaar_store::FoldSnapshot) -> Result<(), bazaar_store::StoreError> {
        self.inner.save_fold_snapshot(snapshot).await
    }
    async fn due_docs(&self, now: Timestamp, limit: usize) -> Result<Vec<(DocKind, String)>, bazaar_store::StoreError> {
        self.inner.due_docs(now, limit).await
    }
}

async fn get_json(url: String, credential: &str) -> (u16, Value) {
    let response = reqwest::Client::new().get(url).bearer_auth(credential).send().await.unwrap();
    (response.status().as_u16(), response.json().await.unwrap())
}

#[tokio::test]
async fn a_search_never_waits_on_the_money_writer() {
    let dir = TempDir(std::env::temp_dir().join(format!("bazaar-api-stalled-{}", std::process::id())));
    std::fs::create_dir_all(&dir.0).unwrap();
    let clock = Arc::new(ManualClock::new(EPOCH));
    let sqlite = bazaar_store_sqlite::SqliteStore::open(dir.0.join("r.db"), config(), clock.clone()).unwrap();
    let store = Arc::new(StalledWriter {
        inner: Arc::new(sqlite),
        stalled: Default::default(),
        submits_while_stalled: Default::default(),
    });
    let state = boot(store.clone(), clock, config(), Some("operator-secret".into())).await.unwrap().state;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, bazaar_server::contract::checked(router(state))).await });
    store.stalled.store(true, std::sync::atomic::Ordering::SeqCst);
    let patience = std::time::Duration::from_secs(10);
    for _ in 0..2 {
        let search = get_json(format!("{url}/v1/search?q=Lampshades"), "operator-secret");
        let (status, body) =
            tokio::time::timeout(patience, search).await.expect("a search answers with the writer stalled");
        assert_eq!((status, body["query"].clone()), (200, json!("lampshade")));
    }
    let unmet = get_json(format!("{url}/v1/searches/unmet"), "operator-secret");
    let (status, body) = tokio::time::timeout(patience, unmet).await.expect("unmet demand answers too");
    assert_eq!(status, 200);
    assert_eq!(body["unmet"][0]["query"], "lampshade");
    assert_eq!(body["unmet"][0]["count"], 2, "counted off the writer, flushed before the read");
    assert_eq!(store.submits_while_stalled.load(std::sync::atomic::Ordering::SeqCst), 0, "nothing submitted");
}

#[tokio::test]
async fn counted_searches_survive_a_restart_after_a_flush() {
    let r = registry().await;
    let (_owner, buyer, _merchant, _shop) = cast(&r, "restart", 1_000).await;
    for _ in 0..3 {
        assert!(buyer.search("lampshade").await.unwrap().listings.is_empty());
    }
    bazaar_server::shutdown(&r.state).await.unwrap();
    buyer.search("quilt").await.unwrap();
    // A second store on the same file: what a restarted registry reads.
    let reopened = bazaar_store_sqlite::SqliteStore::open(r._dir.0.join("r.db"), config(), r.clock.clone()).unwrap();
    let unmet: Vec<(String, u64)> =
        reopened.unmet_searches(10).await.unwrap().into_iter().map(|(q, n, _)| (q, n)).collect();
    assert_eq!(unmet, [("lampshade".to_string(), 3)], "flushed searches persist; the unflushed one is the sharp edge");
    bazaar_server::shutdown(&r.state).await.unwrap();
    let unmet = reopened.unmet_searches(10).await.unwrap();
    assert_eq!(unmet.len(), 2, "the next flush (here: a graceful shutdown) writes the rest");
}

/// Randomness is injected like the clock: two registries booted on fresh
/// stores with the same seeded source draw the same signing key, operator
/// credential and invite code; another seed draws others.
#[tokio::test]
async fn a_seeded_entropy_source_makes_a_registry_replayable() {
    async fn draw(tag: &str, seed: u64) -> (MemberId, String, String) {
        let dir = std::env::temp_dir().join(format!("bazaar-entropy-{tag}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let _cleanup = TempDir(dir.clone());
        let clock = Arc::new(ManualClock::new(EPOCH));
        let store: Arc<dyn Store> =
            Arc::new(bazaar_store_sqlite::SqliteStore::open(dir.join("r.db"), config(), clock.clone()).unwrap());
        let entropy = Arc::new(bazaar_types::SeededEntropy::new(seed));
        let booted = bazaar_server::boot_with_entropy(store, clock, config(), None, entropy).await.unwrap();
        let operator = booted.operator_credential.expect("a fresh registry draws one");
        (booted.state.registry.clone(), operator, booted.state.random_b64(12))
    }
    let (first, again, other) = (draw("a", 42).await, draw("b", 42).await, draw("c", 43).await);
    assert_eq!(first, again, "same seed, same registry");
    assert!(first.1.starts_with("bzc_"));
    assert_ne!((&first.0, &first.1), (&other.0, &other.1));
}

/// A stored document this build cannot read is an internal error at the edge
/// (logged with its kind, id and version), never a panic of the request.
#[tokio::test]
async fn an_unreadable_stored_document_is_a_500_not_a_panic() {
    use bazaar_store::Engine;
    let r = registry().await;
    let corrupt = DocRow {
        kind: DocKind::Contract,
        id: "ctr_unreadable".into(),
        body: json!({"version": 99, "id": "ctr_unreadable"}),
        due_at: None,
        parties: vec![MemberId(bazaar_core::model::OPERATOR_ID.into())],
    };
    let mut engine = bazaar_store_sqlite::SqliteEngine::connect(r._dir.0.join("r.db")).unwrap();
    engine.begin().unwrap();
    engine.load(&bazaar_core::command::Keys::default()).unwrap();
    engine.write(&bazaar_core::state::Changes { insert_docs: vec![corrupt], ..Default::default() }).unwrap();
    engine.commit().unwrap();
    let response = reqwest::Client::new()
        .get(format!("{}/v1/contracts/ctr_unreadable", r.url))
        .bearer_auth("operator-secret")
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 500);
    let problem: Value = response.json().await.unwrap();
    assert_eq!(problem["code"], "internal", "{problem}");
    let health = reqwest::get(format!("{}/healthz", r.url)).await.unwrap();
    assert_eq!(health.status(), 200, "a read that fails stops nothing");
}

/// Why `body` does not fit `schema` (resolving `$ref`s in `document`): a
/// required member missing, or a member of another JSON type. Members the
/// schema does not name are allowed, as JSON Schema allows them.
fn misfit(document: &Value, schema: &Value, body: &Value, at: &str) -> Option<String> {
    if let Some(reference) = schema["$ref"].as_str() {
        let name = reference.trim_start_matches("#/components/schemas/");
        return misfit(document, &document["components"]["schemas"][name], body, at);
    }
    if let Some(parts) = schema["allOf"].as_array() {
        return parts.iter().find_map(|part| misfit(document, part, body, at));
    }
    if let Some(choices) = schema["oneOf"].as_array() {
        let fits = choices.iter().any(|choice| misfit(document, choice, body, at).is_none());
        return (!fits).then(|| format!("{at}: fits none of oneOf"));
    }
    let types: Vec<&str> = match &schema["type"] {
        Value::String(one) => vec![one.as_str()],
        Value::Array(many) => many.iter().filter_map(Value::as_str).collect(),
        _ => return None,
    };
    let actual = match body {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(n) if n.is_f64() => "number",
        Value::Number(_) => "integer",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    };
    let fits = types.contains(&actual) || (actual == "integer" && types.contains(&"number"));
    if !fits {
        return Some(format!("{at}: {actual}, described as {types:?}"));
    }
    match body {
        Value::Object(members) => {
            for required in schema["required"].as_array().into_iter().flatten().filter_map(Value::as_str) {
                if !members.contains_key(required) {
                    return Some(format!("{at}.{required}: missing"));
                }
            }
            let properties = schema["properties"].as_object();
            members.iter().find_map(|(name, value)| {
                let property = properties.and_then(|p| p.get(name))?;
                misfit(document, property, value, &format!("{at}.{name}"))
            })
        }
        Value::Array(items) => {
            items.iter().find_map(|item| misfit(document, &schema["items"], item, &format!("{at}[]")))
        }
        _ => None,
    }
}

/// Asserts that `body` fits what `/openapi.json` says `method path` answers with `status`.
fn assert_described(document: &Value, method: &str, path: &str, status: &str, body: &Value) {
    let response = &document["paths"][path][method]["responses"][status];
    let schema = &response["content"]["application/json"]["schema"];
    assert!(schema.is_object(), "{method} {path} {status}: no JSON schema described");
    if let Some(why) = misfit(document, schema, body, &format!("{method} {path} {status}")) {
        panic!("{why}\n{body:#}");
    }
}

#[tokio::test]
async fn answers_fit_the_bodies_the_api_description_states() {
    let r = registry().await;
    let document: Value = reqwest::get(format!("{}/openapi.json", r.url)).await.unwrap().json().await.unwrap();
    let check = |method: &str, path: &str, status: &str, body: &dyn erased::Json| {
        let body = &body.json();
        assert_described(&document, method, path, status, body);
    };
    let (owner, buyer, merchant, shop) = cast(&r, "schema", 10_000).await;
    let me = buyer.me().await.unwrap();
    check("get", "/v1/me", "200", &me);
    check("get", "/v1/me", "200", &r.operator.me().await.unwrap());
    check("get", "/v1/members/{member}", "200", &owner.member(&shop).await.unwrap());
    let owner_id = owner.me().await.unwrap().member.id;
    check("post", "/v1/mint", "200", &r.operator.mint(&owner_id, 100, "mint-schema-2").await.unwrap());
    check("post", "/v1/agents/{agent}/fund", "200", &owner.fund("buyer-schema", 100, "fund-schema-2").await.unwrap());
    let budget = owner.set_budget("buyer-schema", 10_000, 10_000, 10_000).await.unwrap();
    check("put", "/v1/agents/{agent}/budget", "200", &budget);
    let issued = buyer.issue_token(&shop, 300, "o-1", "r").await.unwrap().body;
    check("post", "/v1/tokens", "201", &issued);
    let token = issued.token.as_str();
    check("post", "/v1/tokens/verify", "200", &merchant.verify(token).await.unwrap());
    check("post", "/v1/settlements", "200", &merchant.settle(token, 300, "o-1", None).await.unwrap().body);
    check("post", "/v1/tokens/verify", "200", &merchant.verify(token).await.unwrap());
    check("post", "/v1/tokens/verify", "200", &merchant.verify("apt_x.y").await.unwrap());
    let spare = buyer.issue_token(&shop, 10, "o-2", "r").await.unwrap().body;
    check("post", "/v1/tokens/{jti}/void", "200", &buyer.void(&spare.jti).await.unwrap());
    check("get", "/v1/events", "200", &r.operator.events(0, 50).await.unwrap());
    check("get", "/.well-known/bazaar-keys", "200", &buyer.key_history().await.unwrap());
    check("get", "/v1/federation/peers", "200", &buyer.peers().await.unwrap());
    check("get", "/v1/reputation/{member}", "200", &buyer.reputation(&shop).await.unwrap());
    let passport = merchant.passport(None).await.unwrap();
    check("post", "/v1/passports/verify", "200", &buyer.verify_passport(&passport).await.unwrap());
    let health: Value = reqwest::get(format!("{}/healthz", r.url)).await.unwrap().json().await.unwrap();
    check("get", "/healthz", "200", &health);
    // An agent contracts only with another owner's agents.
    let (_, _, seller, seller_handle) = cast(&r, "schema-seller", 1_000).await;
    let due = EPOCH.ms() + 7 * 86_400_000;
    let created =
        buyer.create_contract(&seller_handle, None, &[(6_000, "work", due)], "terms", None, "c-1").await.unwrap().body;
    check("post", "/v1/contracts", "201", &created);
    let id = created.id.as_str();
    check("post", "/v1/contracts/{id}/accept", "200", &seller.contract_act(id, "accept").await.unwrap().body);
    let delivered = seller.deliver(id, 0, b"done").await.unwrap().body;
    check("post", "/v1/contracts/{id}/milestones/{index}/deliver", "200", &delivered);
    let released = buyer.release(id, 0, None).await.unwrap().body;
    check("post", "/v1/contracts/{id}/milestones/{index}/release", "200", &released);
    check("get", "/v1/contracts/{id}", "200", &buyer.contract(id).await.unwrap());
    // A list serves each contract as GET of one does: its view (with `held_minor`), never the stored document.
    let listed = buyer.call::<Value>(reqwest::Method::GET, "/v1/contracts", None, None).await.unwrap().body;
    check("get", "/v1/contracts", "200", &listed);
    let in_list = listed["contracts"].as_array().unwrap().iter().find(|c| c["id"] == id).unwrap();
    let one = serde_json::to_value(buyer.contract(id).await.unwrap()).unwrap();
    assert_eq!(in_list, &one, "the listed contract is the one GET serves");
    assert!(in_list.get("version").is_none() && in_list.get("held_minor").is_some(), "{in_list}");
    // A stake lock counts against the merchant's own budget.
    owner.set_budget("shop-schema", 0, 100, 100).await.unwrap();
    check("post", "/v1/stake", "200", &merchant.stake_lock(100, "s-1").await.unwrap().body);
    check("post", "/v1/stake/unlock", "200", &merchant.stake_unlock(50, "s-2").await.unwrap().body);
    check("get", "/v1/stake/{member}", "200", &buyer.stake(&shop).await.unwrap());
    check("get", "/v1/disputes", "200", &buyer.disputes(None).await.unwrap());
    let listing = json!({"sku": "mug", "title": "Clay mug", "list_price_minor": 500, "floor_minor": 400,
        "capacity_per_day": 5, "capacity_max": 50, "language": "en"});
    let listed = merchant.put_listing(&serde_json::from_value(listing).unwrap()).await.unwrap();
    check("put", "/v1/listings", "200", &listed);
    check("get", "/v1/listings/{id}", "200", &buyer.listing(&listed.id).await.unwrap());
    check("get", "/v1/search", "200", &buyer.search("mug").await.unwrap());
    check("get", "/v1/search", "200", &buyer.search("teapot").await.unwrap());
    check("get", "/v1/searches/unmet", "200", &buyer.unmet_searches().await.unwrap());
}

/// Claims for token `n` of a test that signs its own tokens with the registry's key.
fn token_claims(r: &Registry, n: usize) -> bazaar_core::token::TokenClaims {
    bazaar_core::token::TokenClaims {
        v: 1,
        iss: r.state.registry.clone(),
        jti: TokenId(format!("tok_{n}")),
        sub: "did:key:zB".into(),
        aud: "did:key:zM".into(),
        max: bazaar_types::Amount(1),
        ord: OrderId(format!("o{n}")),
        res: "r".into(),
        iat_ms: Timestamp(0),
        exp_ms: Timestamp(1),
        via: None,
    }
}

/// The value of one series in a Prometheus text exposition.
fn series_value(metrics: &str, series: &str) -> u64 {
    let line = metrics
        .lines()
        .find(|l| l.starts_with(&format!("{series} ")))
        .unwrap_or_else(|| panic!("{series} missing:\n{metrics}"));
    line.rsplit_once(' ').unwrap().1.parse().unwrap()
}

/// `/metrics` names every cache, buffer and queue that grows with use, beside
/// its bound, SQLite's configured memory and the process's resident set; the
/// verified-token cache, filled past its bound, holds exactly its bound (the
/// oldest evicted) and the gauge says so.
#[tokio::test]
async fn metrics_name_every_cache_with_its_bound_and_one_evicts_at_it() {
    use bazaar_server::VERIFIED_TOKENS_MAX;
    let r = registry().await;
    let plane_clock: Arc<dyn bazaar_types::Clock> = r.clock.clone();
    let entropy = Arc::new(bazaar_types::SeededEntropy::new(7));
    let plane =
        bazaar_conversation::sqlite::SqliteConversationStore::open(&r._dir.0.join("c.db"), plane_clock, entropy);
    assert!(r.state.attach_conversation(Arc::new(plane.unwrap())));
    let key = r.state.signing_key();
    for n in 0..VERIFIED_TOKENS_MAX + 10 {
        let claims = token_claims(&r, n);
        assert_eq!(r.state.decode_token(&bazaar_core::token::encode(&claims, &key)), Ok(claims));
    }
    let http = reqwest::Client::new();
    let accounts = http.get(format!("{}/v1/accounts", r.url)).bearer_auth("operator-secret").send().await.unwrap();
    assert_eq!(accounts.status(), 200);
    let metrics = http.get(format!("{}/metrics", r.url)).send().await.unwrap().text().await.unwrap();
    let value = |series: &str| series_value(&metrics, series);
    let bounded = [
        "verified_tokens",
        "idempotency_in_flight",
        "search_tally",
        "chamber_streams",
        "chamber_broadcast",
        "attack_visitors",
        "http_requests_in_flight",
        "writer_queue",
        "credentials",
        "conversation_recent_messages",
        "conversation_followed_members",
        "conversation_streams",
    ];
    for cache in bounded {
        let entries = value(&format!("bazaar_cache_entries{{cache=\"{cache}\"}}"));
        let max = value(&format!("bazaar_cache_entries_max{{cache=\"{cache}\"}}"));
        assert!(max > 0 && entries <= max, "{cache}: {entries} of {max}");
    }
    // Bounded by the ledger or by pruning, not by a constant: their size is shown, with no max line.
    let unbounded = [
        "reputation_fold",
        "conversation_membership_epochs",
        "conversation_meter_pending",
        "rate_buckets_credential",
        "rate_buckets_ip",
    ];
    for cache in unbounded {
        value(&format!("bazaar_cache_entries{{cache=\"{cache}\"}}"));
        assert!(!metrics.contains(&format!("bazaar_cache_entries_max{{cache=\"{cache}\"}}")), "{cache}");
    }
    assert_eq!(
        value("bazaar_cache_entries{cache=\"verified_tokens\"}"),
        VERIFIED_TOKENS_MAX as u64,
        "evicted at the bound"
    );
    assert!(value("bazaar_cache_entries{cache=\"http_requests_in_flight\"}") >= 1, "the scrape itself is in flight");
    assert!(value("bazaar_cache_entries{cache=\"credentials\"}") >= 1, "the operator's credential was remembered");
    assert_eq!(value("bazaar_sqlite_connections{db=\"ledger\"}"), 7);
    // The writer's 32 MiB, four readers' 8 MiB and two 2 MiB side connections; nothing memory-mapped.
    assert_eq!(value("bazaar_sqlite_cache_size_bytes{db=\"ledger\"}"), 68 * 1024 * 1024);
    assert_eq!(value("bazaar_sqlite_mmap_size_bytes{db=\"ledger\"}"), 0);
    assert!(value("bazaar_tokio_tasks") >= 1);
    let rss = value("bazaar_process_resident_bytes");
    assert!(rss > 1024 * 1024 && rss >= value("bazaar_process_resident_anon_bytes"), "{rss}");
}

/// Events this node has folded into reputation, from its `/metrics` counter.
fn events_folded(state: &AppState) -> u64 {
    let text = state.metrics.render();
    let line = text.lines().find(|l| l.starts_with("bazaar_reputation_events_folded_total ")).unwrap_or("x 0");
    line.rsplit(' ').next().unwrap().parse::<f64>().unwrap() as u64
}

/// A node that starts on a store other nodes wrote takes up the reputation snapshot there and folds only the
/// events after it, to the same figures as a node that folded from genesis; a snapshot that does not match the
/// ledger at its seq (or of another formula) is passed over for a fold from genesis, with the same figures.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_node_folds_reputation_forward_from_the_stored_snapshot() {
    use bazaar_server::federation::reputation::reputation_of;
    use bazaar_server::reputation_fold::SNAPSHOT_NAME;
    let r = registry().await;
    let (_, buyer, merchant, shop) = cast(&r, "fold", 100_000).await;
    let merchant_id = MemberId(merchant.me().await.unwrap().member.id);
    let pay = |order: String| {
        let (buyer, merchant, shop) = (buyer.clone(), merchant.clone(), shop.clone());
        async move {
            let token = serde_json::Value::String(
                buyer.issue_token(&shop, 500, &order, "https://shop/x").await.unwrap().body.token,
            );
            merchant.settle(token.as_str().unwrap(), 500, &order, None).await.unwrap();
        }
    };
    for i in 0..4 {
        pay(format!("fold-{i}")).await;
    }
    r.state.reputation.snapshot_every(1);
    let first = serde_json::to_value(reputation_of(&r.state, &merchant_id).await.unwrap()).unwrap();
    let at = first["as_of"]["ledger_seq"].as_u64().unwrap();
    let mut snapshot = None;
    for _ in 0..200 {
        snapshot = r.state.store.fold_snapshot(SNAPSHOT_NAME).await.unwrap();
        if snapshot.as_ref().is_some_and(|s| s.seq == at) {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(25)).await;
    }
    let snapshot = snapshot.expect("the first node wrote its fold down");
    assert_eq!((snapshot.seq, snapshot.head.as_str()), (at, first["as_of"]["ledger_head"].as_str().unwrap()));
    assert_eq!(events_folded(&r.state), at, "the first node folded from genesis: no snapshot yet");
    let snapshot_seq = format!("bazaar_reputation_snapshot_seq {at}");
    assert!(r.state.metrics.render().lines().any(|l| l == snapshot_seq), "{snapshot_seq} on /metrics");
    // No more snapshots from the first node: the ones below are the test's own.
    r.state.reputation.snapshot_every(u64::MAX);
    for i in 4..7 {
        pay(format!("fold-{i}")).await;
    }

    let second = boot(r.state.store.clone(), r.clock.clone(), config(), None).await.unwrap().state;
    let resumed = serde_json::to_value(reputation_of(&second, &merchant_id).await.unwrap()).unwrap();
    let head = resumed["as_of"]["ledger_seq"].as_u64().unwrap();
    assert!(head > snapshot.seq + 3, "three more calls after the snapshot: {head} vs {}", snapshot.seq);
    assert_eq!(events_folded(&second), head - snapshot.seq, "the new node folded only what came after the snapshot");
    let whole = serde_json::to_value(reputation_of(&r.state, &merchant_id).await.unwrap()).unwrap();
    assert_eq!(resumed, whole, "the same figures as the node that folded from genesis");
    assert_eq!(resumed["local"]["excludedSameOwner"], 7, "all seven calls are in the fold: {resumed}");

    // A snapshot whose head is not this ledger's at its seq: the node folds from genesis, to the same figures.
    let mut forged: Value = serde_json::from_slice(&snapshot.body).unwrap();
    forged["fold"]["seq"] = json!(head);
    forged["fold"]["head"] = json!("forged");
    let forged = bazaar_store::FoldSnapshot {
        name: SNAPSHOT_NAME.into(),
        seq: head,
        head: "forged".into(),
        body: serde_json::to_vec(&forged).unwrap(),
    };
    r.state.store.save_fold_snapshot(&forged).await.unwrap();
    let third = boot(r.state.store.clone(), r.clock.clone(), config(), None).await.unwrap().state;
    let refolded = serde_json::to_value(reputation_of(&third, &merchant_id).await.unwrap()).unwrap();
    let head = refolded["as_of"]["ledger_seq"].as_u64().unwrap();
    assert_eq!(events_folded(&third), head, "a forged snapshot is passed over: folded from genesis");
    assert_eq!(refolded["local"], whole["local"]);

    // A snapshot of another formula: the same.
    let mut older: Value = serde_json::from_slice(&snapshot.body).unwrap();
    older["formula"] = json!("bazaar-rep-v0");
    older["fold"]["seq"] = json!(head + 1);
    let older = bazaar_store::FoldSnapshot { seq: head + 1, body: serde_json::to_vec(&older).unwrap(), ..forged };
    r.state.store.save_fold_snapshot(&older).await.unwrap();
    let fourth = boot(r.state.store.clone(), r.clock.clone(), config(), None).await.unwrap().state;
    let refolded = serde_json::to_value(reputation_of(&fourth, &merchant_id).await.unwrap()).unwrap();
    assert_eq!(events_folded(&fourth), refolded["as_of"]["ledger_seq"].as_u64().unwrap());
    assert_eq!(refolded["local"], whole["local"]);
}

/// The x402 facilitator settles under the token's derived key, the same as `POST /v1/settlements` without an
/// `Idempotency-Key` (`pay::settle_key`): a REST retry of a token the facilitator settled replays that very
/// settlement (`Idempotent-Replayed`), and the facilitator's retry answers the same transaction.
#[tokio::test]
async fn the_x402_facilitator_and_the_settle_route_share_the_tokens_derived_key() {
    let r = registry().await;
    let (_, buyer, merchant, shop) = cast(&r, "x402key", 10_000).await;
    let token = buyer.issue_token(&shop, 500, "x402-1", "https://shop/x").await.unwrap().body.token.clone();
    let merchant_id = merchant.me().await.unwrap().member.id;
    let network = bazaar_server::x402::network(&r.state);
    let payment = json!({
        "x402Version": 2,
        "paymentPayload": {"x402Version": 2, "payload": {"token": token}, "resource": {"url": "https://shop/x"}},
        "paymentRequirements": {"scheme": bazaar_server::x402::SCHEME, "network": network,
            "asset": bazaar_server::x402::ASSET, "amount": "500", "payTo": merchant_id},
    });
    let settle =
        || merchant.call::<Value>(reqwest::Method::POST, "/x402/settle", Some(Body::json(payment.clone())), None);
    let first = settle().await.unwrap().body;
    assert_eq!(first["success"], true, "{first}");
    let transaction = first["transaction"].clone();
    let rest = merchant.settle(&token, 500, "x402-1", None).await.unwrap();
    assert!(rest.replayed, "the REST settle replays the facilitator's settlement: {:?}", rest.body);
    assert_eq!(rest.body.settlement.settlement_id, transaction);
    let again = settle().await.unwrap().body;
    assert_eq!((again["success"].clone(), again["transaction"].clone()), (json!(true), transaction));
}

/// Typed answers and JSON ones checked alike against the description.
mod erased {
    pub trait Json {
        fn json(&self) -> serde_json::Value;
    }
    impl<T: serde::Serialize> Json for T {
        fn json(&self) -> serde_json::Value {
            serde_json::to_value(self).unwrap()
        }
    }
}

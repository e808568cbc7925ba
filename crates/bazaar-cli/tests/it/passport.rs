//! Passports through HTTP and the binary: issued after real settlements,
//! verified online and offline (`bazaar passport verify`), still verifiable
//! after the registry rotates its key (through the published key history),
//! and rechecked by `audit` against a recompute from the ledger; a tampered
//! figure in a recorded passport event fails the audit.

use crate::common;

use bazaar_cli::wire_json;
use bazaar_core::apply::Config;
use bazaar_sdk::generate_key;
use bazaar_stage::{embedded_registry_with, enroll_pair, enroll_pair_with_key, peer_registry, LocalRegistry};
use serde_json::{json, Value};

/// A passport as JSON (tampered, say) read as the SDK's type: every member kept, so it is what was signed or altered.
fn typed(passport: &Value) -> bazaar_sdk::wire::federation::Passport {
    serde_json::from_value(passport.clone()).unwrap()
}

fn verify_offline(passport: &Value, keys: Option<&Value>, dir: &std::path::Path) -> (i32, Value) {
    let file = dir.join("passport.json");
    std::fs::write(&file, serde_json::to_vec(passport).unwrap()).unwrap();
    let mut args = vec!["--json".to_string(), "passport".into(), "verify".into(), file.display().to_string()];
    if let Some(keys) = keys {
        let path = dir.join("keys.json");
        std::fs::write(&path, serde_json::to_vec(keys).unwrap()).unwrap();
        args.extend(["--keys".into(), path.display().to_string()]);
    }
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_bazaar")).args(&args).output().unwrap();
    let verdict: Value = serde_json::from_slice(&output.stdout).unwrap_or(Value::Null);
    (output.status.code().unwrap_or(-1), verdict)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn passports_verify_survive_rotation_and_are_audited() {
    let dir = common::fresh_dir("bazaar-passport");
    let (local, operator) = common::embedded_with_operator(&dir, "pp-op").await;
    let (owner, buyer) = enroll_pair(&operator, "pp-owner", "pp-buyer").await.unwrap();
    let (_, shop) = enroll_pair_with_key(&operator, "pp-shop-owner", "pp-shop", &generate_key()).await.unwrap();
    let funding =
        common::Funding { mint: (100_000, "pp-mint"), fund: (100_000, "pp-fund"), budget: [10_000, 100_000, 100_000] };
    common::fund_agent(&operator, &owner, "pp-buyer", funding).await;
    for n in 0..3 {
        let order = format!("o{n}");
        let token = buyer.issue_token("pp-shop", 1_000, &order, "https://shop").await.unwrap();
        shop.settle(token.body.token.as_str(), 1_000, &order, None).await.unwrap();
    }

    let reputation = wire_json(&operator.reputation("pp-shop").await.unwrap());
    assert_eq!(reputation["local"]["settledCount"], 3);
    assert_eq!(reputation["local"]["weightedSuccessPpm"], 1_000_000, "one buyer owner, one week: counted once");
    let issued = shop.passport(None).await.unwrap();
    let passport = wire_json(&issued);
    assert_eq!(passport["type"], json!(["VerifiableCredential", "TrustPassport"]));
    assert_eq!(passport["credentialSubject"]["settledCount"], 3);
    assert_eq!(passport["proof"]["cryptosuite"], "eddsa-jcs-2022");
    let online = wire_json(&operator.verify_passport(&issued).await.unwrap());
    assert_eq!((online["valid"].clone(), online["local"].clone()), (json!(true), json!(true)));

    // Offline: with and without the key history; a changed number fails.
    let keys = wire_json(&operator.key_history().await.unwrap());
    let (code, verdict) = verify_offline(&passport, Some(&keys), &dir);
    assert_eq!((code, verdict["valid"].clone()), (0, json!(true)), "{verdict}");
    let mut tampered = passport.clone();
    tampered["credentialSubject"]["settledCount"] = json!(300);
    let (code, verdict) = verify_offline(&tampered, Some(&keys), &dir);
    assert_eq!((code, verdict["code"].as_str()), (1, Some("passport_proof_invalid")));
    let refused = operator.verify_passport(&typed(&tampered)).await.unwrap_err();
    assert_eq!(refused.code(), Some("passport_proof_invalid"));

    // Rotation: a new key signs from now on; the old passport still verifies through the history.
    let rotated = wire_json(&operator.rotate_key().await.unwrap());
    let history = wire_json(&operator.key_history().await.unwrap());
    assert_eq!(history["keys"].as_array().unwrap().len(), 2);
    assert!(history["keys"][0]["until_ms"].is_i64(), "the old key's period closed");
    assert_eq!(history["keys"][1]["did"], rotated["entry"]["did"]);
    assert!(bazaar_core::federation::verify_history(
        history["registry"].as_str().unwrap(),
        &serde_json::from_value::<Vec<_>>(history["keys"].clone()).unwrap()
    )
    .is_ok());
    assert_eq!(
        wire_json(&operator.verify_passport(&issued).await.unwrap())["valid"],
        true,
        "old passport after rotation"
    );
    let (code, _) = verify_offline(&passport, Some(&history), &dir);
    assert_eq!(code, 0, "old passport verifies offline with the new history");
    let fresh = shop.passport(None).await.unwrap();
    assert_eq!(fresh.issuer, rotated["entry"]["did"], "new passports are signed by the new key");
    assert_eq!(wire_json(&operator.verify_passport(&fresh).await.unwrap())["valid"], true);
    let card = wire_json(&operator.well_known().await.unwrap());
    assert_eq!(card["did"], history["registry"], "the registry's identity survives rotation");
    assert!(bazaar_core::vc::verify_eddsa_jcs_2022(&card).is_ok(), "the card is signed by the current key");
    // Tokens issued after rotation settle (signed by the new key).
    let token = buyer.issue_token("pp-shop", 1_000, "after-rotation", "https://shop").await.unwrap();
    shop.settle(token.body.token.as_str(), 1_000, "after-rotation", None).await.unwrap();

    // The audit recomputes every passport's figures from the ledger.
    let report = common::assert_store_audit_passes(&local).await;
    assert_eq!(report.passports_checked, 2);
    std::fs::remove_dir_all(&dir).ok();
}

/// A passport.issued event whose figures differ from the ledger fails the audit.
#[test]
fn audit_catches_recorded_figures_that_do_not_recompute() {
    use bazaar_core::chain::{append, ChainHead};
    use bazaar_core::reputation::{Ledger, PassportAudit};
    use bazaar_types::{MemberId, Timestamp};
    let mut head = ChainHead::genesis();
    let x = MemberId::from("x");
    let mut events = vec![append(
        &mut head,
        "settlement.posted",
        json!({"buyer": "b", "merchant": "m", "order_id": "o", "amount_minor": 10}),
        &x,
        &x,
        Timestamp(1_000),
    )];
    let mut ledger = Ledger::new();
    ledger.observe(&events[0]);
    let mut figures = ledger.figures(&MemberId::from("m"), Timestamp(2_000));
    figures.settled_count += 1;
    let body = json!({"subject": "m", "as_of_seq": 1, "figures": figures});
    events.push(append(&mut head, "passport.issued", body, &x, &x, Timestamp(2_000)));
    let mut audit = PassportAudit::new();
    audit.collect(&events);
    audit.check(&events);
    let (checked, problems) = audit.finish();
    assert_eq!(checked, 1);
    assert_eq!(problems.len(), 1, "{problems:?}");
}

/// Registries A (operator `op-a`) and B (`op-b`) in `dir`/a and `dir`/b, on A's clock.
async fn registries_on_one_clock(dir: &std::path::Path) -> (LocalRegistry, LocalRegistry) {
    std::fs::create_dir_all(dir.join("a")).unwrap();
    let a = embedded_registry_with(&dir.join("a"), Some("op-a".into()), Config::standard()).await.unwrap();
    let b = peer_registry(&a, &dir.join("b"), Some("op-b".into())).await.unwrap();
    (a, b)
}

/// Two embedded registries on one clock: a passport from B, presented at A by
/// its subject, counts at B's weight beside (not inside) A's local figures;
/// presented by another agent it is refused; expired it is refused, and a
/// stored import stops counting once its passport's window has passed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn imported_passports_count_at_the_peer_weight_shown_apart() {
    let dir = common::fresh_dir("bazaar-import");
    let (a, b) = registries_on_one_clock(&dir).await;
    let (op_a, op_b) =
        (bazaar_sdk::Client::new(&a.url, Some("op-a".into())), bazaar_sdk::Client::new(&b.url, Some("op-b".into())));
    let (did_a, did_b) = (a.state.registry.to_string(), b.state.registry.to_string());
    op_a.add_peer(&b.url, &did_b, 2_500, (0, 10_000, 1_000_000)).await.unwrap();

    // Work on B: a seller with three buyers of different owners.
    let seller_key = generate_key();
    let (_, seller) = enroll_pair_with_key(&op_b, "b-seller-owner", "b-seller", &seller_key).await.unwrap();
    for n in 0..3 {
        let (owner, buyer) = enroll_pair(&op_b, &format!("b-owner-{n}"), &format!("b-buyer-{n}")).await.unwrap();
        let owner_id = owner.me().await.unwrap().member.id;
        op_b.mint(&owner_id, 10_000, &format!("m{n}")).await.unwrap();
        owner.fund(&format!("b-buyer-{n}"), 10_000, &format!("f{n}")).await.unwrap();
        owner.set_budget(&format!("b-buyer-{n}"), 1_000, 10_000, 10_000).await.unwrap();
        let order = format!("o{n}");
        let token = buyer.issue_token("b-seller", 500, &order, "https://b").await.unwrap();
        seller.settle(token.body.token.as_str(), 500, &order, None).await.unwrap();
    }
    let passport = seller.passport(None).await.unwrap();
    let seller_did = bazaar_sdk::did_of(&seller_key);
    let now = || bazaar_types::Clock::now(a.clock.as_ref()).ms();

    let anyone = bazaar_sdk::Client::new(&a.url, None);
    let stolen = anyone.import_passport_at(&passport, &generate_key(), &did_a, now()).await.unwrap_err();
    assert_eq!(stolen.code(), Some("passport_subject_mismatch"));
    let unrecognised = bazaar_sdk::Client::new(&b.url, None);
    let at_b = unrecognised.import_passport_at(&passport, &seller_key, &did_b, now()).await.unwrap_err();
    assert_eq!(at_b.code(), Some("invalid_request"), "a registry's own passports need no import");

    anyone.import_passport_at(&passport, &seller_key, &did_a, now()).await.unwrap();
    let shown = wire_json(&op_a.reputation(&seller_did).await.unwrap());
    assert_eq!(shown["local"]["settledCount"], 0, "nothing local at A");
    assert_eq!(shown["imported"][0]["registry"], did_b.as_str());
    assert_eq!(shown["imported"][0]["weightBps"], 2_500);
    let r_b = passport.credential_subject.figures.weighted_success_ppm;
    assert_eq!(r_b, 3_000_000, "three owners, one success each");
    assert_eq!(shown["combined"]["weightedSuccessPpm"], r_b / 4, "counted at a quarter");

    // A day later: the passport has expired; it is refused and the stored import no longer counts.
    a.clock.advance_s(bazaar_types::limits::PASSPORT_VALIDITY_S + 1);
    let late = anyone.import_passport_at(&passport, &seller_key, &did_a, now()).await.unwrap_err();
    assert_eq!(late.code(), Some("passport_expired"));
    let shown = wire_json(&op_a.reputation(&seller_did).await.unwrap());
    assert_eq!(shown["imported"].as_array().unwrap().len(), 0);
    assert_eq!(shown["combined"]["weightedSuccessPpm"], 0);
    std::fs::remove_dir_all(&dir).ok();
}

/// Each passport is recorded on the ledger, so issuance is bounded per subject per UTC day.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn passports_per_subject_per_day_are_bounded() {
    use bazaar_types::limits::PASSPORTS_PER_SUBJECT_DAY_MAX;
    let dir = common::fresh_dir("bazaar-passport-limit");
    let (local, operator) = common::embedded_with_operator(&dir, "pl-op").await;
    let (_, agent) = enroll_pair(&operator, "pl-owner", "pl-agent").await.unwrap();
    for _ in 0..PASSPORTS_PER_SUBJECT_DAY_MAX {
        agent.passport(None).await.unwrap();
    }
    let refused = agent.passport(None).await.unwrap_err();
    assert_eq!((refused.status(), refused.code()), (Some(429), Some("passport_limit")));
    local.clock.advance_s(86_400);
    agent.passport(None).await.expect("a new UTC day, a new allowance");
    std::fs::remove_dir_all(&dir).ok();
}

/// Server-to-server requests: signed by a recognised peer's key, fresh — or refused with the reason.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn peer_requests_must_be_signed_fresh_and_by_a_recognised_key() {
    use bazaar_core::federation::s2s_message;
    let dir = common::fresh_dir("bazaar-s2s");
    let (a, b) = registries_on_one_clock(&dir).await;
    let op_a = bazaar_sdk::Client::new(&a.url, Some("op-a".into()));
    let did_b = b.state.registry.to_string();
    op_a.add_peer(&b.url, &did_b, 5_000, (0, 10_000, 1_000_000)).await.unwrap();
    let body = br#"{"token":"apt_x.y","amount_minor":1,"order_id":"o"}"#.to_vec();
    let key = b.state.signing_key();
    let key_did = bazaar_core::crypto::did_key(&key.verifying_key());
    let now = bazaar_types::Clock::now(a.clock.as_ref()).ms();
    let send = |ts: i64, signer: ed25519_dalek::SigningKey, body_signed: Vec<u8>| {
        let message = s2s_message(&did_b, "POST", "/v1/federation/settle", ts, &body_signed);
        let sig = bazaar_core::crypto::sign(&signer, &message);
        let header = format!("registry={did_b},key={key_did},ts={ts},sig={sig}");
        let (url, body) = (format!("{}/v1/federation/settle", a.url), body.clone());
        async move {
            let response = reqwest::Client::new()
                .post(url)
                .header("bazaar-registry-signature", header)
                .header("content-type", "application/json")
                .body(body)
                .send()
                .await
                .unwrap();
            let status = response.status().as_u16();
            let json: serde_json::Value = response.json().await.unwrap();
            (status, json["code"].as_str().unwrap_or_default().to_string())
        }
    };
    let stale = now - (bazaar_types::limits::FEDERATION_SKEW_S_MAX as i64 + 1) * 1000;
    assert_eq!(send(stale, key.clone(), body.clone()).await, (401, "request_stale".into()));
    assert_eq!(send(now, generate_key(), body.clone()).await, (401, "request_signature_invalid".into()));
    let other_body = br#"{"token":"apt_x.y","amount_minor":999,"order_id":"o"}"#.to_vec();
    assert_eq!(send(now, key.clone(), other_body).await, (401, "request_signature_invalid".into()), "body changed");
    // Signed properly, the request reaches the token check (this token is not A's).
    assert_eq!(send(now, key, body.clone()).await, (400, "token_malformed".into()));
    std::fs::remove_dir_all(&dir).ok();
}

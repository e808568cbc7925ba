//! The passport verifier page end to end in Debian's headless Chromium: a registry
//! serves `/passport/verify` on 127.0.0.1, `bazaar-core` signs passports with the
//! registry's key, and `tests/browser/verify_passport.mjs` pastes each one into the
//! page and reads the verdict the page's own WebCrypto code reached.
//!
//! Needs `/usr/bin/chromium` and `tests/browser/node_modules`; `./scripts/test`
//! installs both. Without them this test fails, it never passes silently.

use bazaar_core::crypto::did_key;
use bazaar_core::vc::{did_key_verification_method, rfc3339_from_ms, sign_eddsa_jcs_2022};
use bazaar_stage::{embedded_registry_with, LocalRegistry};
use ed25519_dalek::SigningKey;
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::process::Command;

const CHROMIUM: &str = "/usr/bin/chromium";
const DAY_MS: i64 = 24 * 60 * 60 * 1000;

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..").canonicalize().unwrap()
}

/// The driver script, after checking that what it needs is installed.
fn driver() -> PathBuf {
    let browser_dir = repo_root().join("tests/browser");
    let fix = "run ./scripts/test once (it installs Debian's chromium and runs `npm ci` in tests/browser)";
    assert!(Path::new(CHROMIUM).exists(), "{CHROMIUM} is missing: {fix}");
    assert!(browser_dir.join("node_modules/playwright-core").is_dir(), "tests/browser/node_modules is missing: {fix}");
    let node = Command::new("node").arg("--version").output();
    assert!(node.is_ok_and(|out| out.status.success()), "node is missing: {fix}");
    browser_dir.join("verify_passport.mjs")
}

/// A fresh registry on a temporary SQLite store, served on 127.0.0.1; the folder also holds the passport files.
async fn registry(tag: &str) -> (LocalRegistry, PathBuf) {
    let dir = std::env::temp_dir().join(format!("bazaar-passport-{tag}-{}", std::process::id()));
    std::fs::remove_dir_all(&dir).ok();
    std::fs::create_dir_all(&dir).unwrap();
    let local = embedded_registry_with(&dir, None, bazaar_core::apply::Config::standard()).await.unwrap();
    (local, dir)
}

/// Runs the driver over `passports` (written to `dir`); one result line per passport.
async fn verdicts(url: String, dir: &Path, flags: &[&str], passports: Vec<(&str, Value)>) -> Vec<String> {
    let script = driver();
    let mut files = Vec::new();
    for (name, passport) in &passports {
        let file = dir.join(format!("{name}.json"));
        std::fs::write(&file, serde_json::to_string_pretty(passport).unwrap()).unwrap();
        files.push(file);
    }
    let flags: Vec<String> = flags.iter().map(|f| f.to_string()).collect();
    let output = tokio::task::spawn_blocking(move || {
        Command::new("node").arg(script).arg(url).args(flags).args(files).output().unwrap()
    })
    .await
    .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout).to_string();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "verify_passport.mjs failed: {stdout}\n{stderr}");
    let lines: Vec<String> = stdout.lines().map(str::to_string).collect();
    assert_eq!(lines.len(), passports.len(), "{stdout}\n{stderr}");
    lines
}

fn passport(issuer: &SigningKey, from_ms: i64, until_ms: i64) -> Value {
    let body = json!({
        "@context": ["https://www.w3.org/ns/credentials/v2", "https://bazaar.example/ns/passport/v1"],
        "id": "urn:uuid:6d1f0c2a-0000-4000-8000-00000000beef",
        "type": ["VerifiableCredential", "TrustPassport"],
        "issuer": did_key(&issuer.verifying_key()),
        "validFrom": rfc3339_from_ms(from_ms),
        "validUntil": rfc3339_from_ms(until_ms),
        "credentialSubject": {
            "id": did_key(&SigningKey::from_bytes(&[5u8; 32]).verifying_key()),
            "window": "P365D",
            "settledCount": 412,
            "successCount": 401,
            "disputesLost": 6,
            "scoreBps": 9710,
            "settledVolume": [{"currency": "USD", "minorUnits": "1843250"}],
            "formula": "bazaar-rep-v1"
        }
    });
    let method = did_key_verification_method(&issuer.verifying_key());
    sign_eddsa_jcs_2022(&body, issuer, &method, &rfc3339_from_ms(from_ms)).unwrap()
}

async fn check_page_headers(base: &str) {
    let http = reqwest::Client::new();
    let page = http.get(format!("{base}/passport/verify")).send().await.unwrap();
    assert_eq!(page.status(), 200);
    let header = |name: &str| page.headers().get(name).map(|v| v.to_str().unwrap().to_string()).unwrap_or_default();
    assert_eq!(header("content-type"), "text/html; charset=utf-8");
    let policy = header("content-security-policy");
    // The page's own inline script runs by its hash: no inline script else, no framing, no referrer.
    assert!(policy.starts_with("default-src 'none'") && policy.contains("script-src 'self' 'sha256-"), "{policy}");
    assert!(!policy.contains("script-src 'unsafe-inline'") && policy.contains("frame-ancestors 'none'"), "{policy}");
    assert_eq!(header("referrer-policy"), "no-referrer");
    assert!(!page.text().await.unwrap().contains("__REGISTRY_KEYS__"));
    let spec: Value = http.get(format!("{base}/openapi.json")).send().await.unwrap().json().await.unwrap();
    assert!(spec["paths"]["/passport/verify"]["get"].is_object(), "the page is in the OpenAPI document");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_browser_page_verifies_passports_signed_by_the_registry() {
    let (local, dir) = registry("browser").await;
    check_page_headers(&local.url).await;
    let registry_key = &local.state.signing_key();
    assert_eq!(did_key(&registry_key.verifying_key()), local.state.registry.0);

    let now = bazaar_sdk::clock::now_ms();
    let genuine = passport(registry_key, now, now + DAY_MS);
    let mut changed = genuine.clone();
    changed["credentialSubject"]["settledCount"] = json!(413);
    let stranger = SigningKey::from_bytes(&[77u8; 32]);
    let cases = vec![
        ("genuine", genuine, "VALID"),
        ("one-number-changed", changed, "INVALID: passport_proof_invalid"),
        ("another-key", passport(&stranger, now, now + DAY_MS), "INVALID: passport_issuer_unknown"),
        ("expired", passport(registry_key, now - 2 * DAY_MS, now - DAY_MS), "INVALID: passport_expired"),
        ("not-yet-valid", passport(registry_key, now + DAY_MS, now + 2 * DAY_MS), "INVALID: passport_not_yet_valid"),
    ];
    // And one the registry issued itself through its API.
    let operator = bazaar_sdk::Client::new(&local.url, Some(local.operator_credential.clone()));
    let issued = bazaar_cli::wire_json(&operator.passport(None).await.unwrap());
    let mut issued_changed = issued.clone();
    issued_changed["credentialSubject"]["scoreBps"] = json!(9_999);
    let mut cases = cases;
    cases.push(("issued-by-the-api", issued, "VALID"));
    cases.push(("issued-then-changed", issued_changed, "INVALID: passport_proof_invalid"));
    let expected: Vec<&str> = cases.iter().map(|(_, _, verdict)| *verdict).collect();
    let passports = cases.into_iter().map(|(name, passport, _)| (name, passport)).collect();
    let url = format!("{}/passport/verify", local.url);
    assert_eq!(verdicts(url.clone(), &dir, &[], passports).await, expected);

    // After a key rotation the page (fed the history) still accepts the old key's
    // passport and accepts the new key's; a passport the old key signs after it
    // was retired is refused.
    let old_key = registry_key.clone();
    local.state.rotate_key().await.unwrap();
    let new_key = local.state.signing_key();
    // Past the rotation's second, so only the new key covers the issue time.
    tokio::time::sleep(std::time::Duration::from_millis(1_100)).await;
    let later = bazaar_sdk::clock::now_ms();
    let cases = vec![
        ("old-key-before-rotation", passport(&old_key, now, now + DAY_MS)),
        ("new-key", passport(&new_key, later, later + DAY_MS)),
        ("old-key-after-rotation", passport(&old_key, later, later + DAY_MS)),
    ];
    let got = verdicts(url, &dir, &[], cases).await;
    assert_eq!(got[0], "VALID", "{got:?}");
    assert_eq!(got[1], "VALID", "{got:?}");
    assert_eq!(got[2], "INVALID: passport_issuer_unknown", "a retired key signs nothing new: {got:?}");
    std::fs::remove_dir_all(&dir).ok();
}

/// The page's own JavaScript, not just Rust, reproduces the W3C vector's hash and accepts its proof.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_page_script_agrees_with_the_w3c_vector() {
    let (local, dir) = registry("vector").await;
    let vectors = repo_root().join("crates/bazaar-core/tests/vectors");
    let read = |path: &str| std::fs::read_to_string(vectors.join(path)).unwrap();
    let w3c: Value = serde_json::from_str(&read("w3c-eddsa-jcs-2022/signedJCS.json")).unwrap();
    let sample: Value = serde_json::from_str(&read("bazaar-r4-passport.json")).unwrap();
    let mut tampered = w3c.clone();
    tampered["credentialSubject"]["alumniOf"] = json!("Elsewhere");
    let passports = vec![("w3c", w3c), ("r4-sample", sample), ("w3c-tampered", tampered)];
    let lines = verdicts(format!("{}/passport/verify", local.url), &dir, &["--proof-only"], passports).await;
    assert_eq!(lines[0], format!("PROOF VALID {}", read("w3c-eddsa-jcs-2022/combinedHashJCS.txt").trim()));
    assert!(lines[1].starts_with("PROOF VALID "), "{}", lines[1]);
    assert!(lines[2].starts_with("INVALID: passport_proof_invalid "), "{}", lines[2]);
    std::fs::remove_dir_all(&dir).ok();
}

/// The card: a real registry's passport for a merchant with settled work shows its figures as inputs; one changed
/// by one and checked again fails the signature in the browser.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn changing_any_number_on_the_card_fails_the_check_again() {
    driver();
    let (local, dir) = registry("card").await;
    let operator = local.operator();
    let (owner, buyer) = bazaar_stage::enroll_pair(&operator, "card-hotel", "card-buyer").await.unwrap();
    let (_, shop) = bazaar_stage::enroll_pair(&operator, "card-mill", "card-shop").await.unwrap();
    let owner_id = owner.me().await.unwrap().member.id;
    operator.mint(&owner_id, 5_000, "m").await.unwrap();
    owner.fund("card-buyer", 5_000, "f").await.unwrap();
    owner.set_budget("card-buyer", 1_000, 5_000, 5_000).await.unwrap();
    for n in 0..2 {
        let order = format!("card-{n}");
        let token = buyer.issue_token("card-shop", 400, &order, "https://shop/x").await.unwrap();
        shop.settle(token.body.token.as_str(), 400, &order, None).await.unwrap();
    }
    let passport = shop
        .call::<Value>(reqwest::Method::POST, "/v1/passports", Some(bazaar_sdk::Body::json(json!({}))), None)
        .await
        .unwrap()
        .body;
    let file = dir.join("card.json");
    std::fs::write(&file, serde_json::to_string_pretty(&passport).unwrap()).unwrap();
    let args = vec![local.url.clone(), file.display().to_string()];
    let (report, exited_ok) = card_driver(args).await;
    assert_eq!(report["problems"], json!([]), "{report}");
    assert_eq!(report["first"], "VALID", "{report}");
    let fields: Vec<&str> = report["fields"].as_array().unwrap().iter().map(|f| f.as_str().unwrap()).collect();
    assert!(fields.contains(&"settledCount"), "the figures are on the card: {fields:?}");
    assert!(report["second"].as_str().unwrap().starts_with("INVALID: "), "one number changed: {report}");
    assert_eq!(report["axe"], json!([]), "{report}");
    assert!(exited_ok, "{report}");
    std::fs::remove_dir_all(&dir).ok();
}

/// Runs `tests/browser/passport_card.mjs`: its one-line report and whether it exited 0.
async fn card_driver(args: Vec<String>) -> (Value, bool) {
    let script = repo_root().join("tests/browser/passport_card.mjs");
    let output = tokio::task::spawn_blocking(move || Command::new("node").arg(script).args(args).output().unwrap())
        .await
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout).to_string();
    let report = serde_json::from_str(stdout.trim())
        .unwrap_or_else(|_| panic!("{stdout}\n{}", String::from_utf8_lossy(&output.stderr)));
    (report, output.status.success())
}

//! Fuzzing the core's parsers of untrusted input on the stable toolchain (see
//! `fuzz/README.md`): `apt_` payment tokens, `did:key` and public-key text,
//! verifiable credentials and trust passports (`eddsa-jcs-2022`), and a peer's
//! published key history. Each target replays `fuzz/corpus/<target>/`, then
//! mutates from it and generates from scratch; beyond "never panics" each
//! checks that nothing but a signed seed verifies, that valid seeds still
//! verify, and that parse → serialise → parse is stable.
//!
//! `cargo test -p bazaar-core --test fuzz -- --nocapture` prints the executions
//! per target; `BAZAAR_FUZZ_CASES=200000` runs longer. `cargo test -p
//! bazaar-core --test fuzz -- --ignored write_corpus` rewrites the seeds.

#[path = "../../../fuzz/harness.rs"]
mod harness;

use bazaar_core::crypto::{b64url, did_key, did_signed, parse_public_key, public_key_from_did, sign};
use bazaar_core::federation::{key_valid_at, rotation_message, verify_history, verify_passport, KeyEntry};
use bazaar_core::token::{self, TokenClaims, TokenError};
use bazaar_core::vc;
use bazaar_types::{Amount, Timestamp};
use ed25519_dalek::SigningKey;
use harness::{ensure, fuzz, fuzz_json, valid_seeds, write_seed, Input};
use serde_json::{json, Value};

/// Generated cases per target in the bounded run (`cargo test`).
const TOKEN_CASES: u32 = 20_000;
const DID_KEY_CASES: u32 = 20_000;
const PASSPORT_CASES: u32 = 8_000;
const KEY_HISTORY_CASES: u32 = 8_000;

/// The key the token seeds are signed with, and another registry's.
const TOKEN_KEY: [u8; 32] = [1; 32];
const OTHER_KEY: [u8; 32] = [2; 32];
/// The registry whose key history and passports the seeds hold: genesis, then two rotations.
const REGISTRY_KEYS: [[u8; 32]; 3] = [[11; 32], [12; 32], [13; 32]];
/// When the passport seeds are checked: inside their validity window.
const PASSPORT_NOW: &str = "2026-11-30T12:00:00Z";
const ROTATED_AT_MS: [i64; 2] = [1_700_000_000_000, 1_780_000_000_000];

const TOKEN_TOKENS: &[&str] = &["apt_", "eyJ", "-", "_", "A", "=", "+", "/"];
const DID_TOKENS: &[&str] = &["did:key:", "z", "6Mk", "1", "0", "l", "I", "O", "f", "F"];
const PASSPORT_TOKENS: &[&str] = &[
    "\"proof\"",
    "\"@context\"",
    "\"issuer\"",
    "\"validFrom\"",
    "\"validUntil\"",
    "\"2026-02-29T00:00:00Z\"",
    "\"9999-12-31T23:59:59Z\"",
    "\"verificationMethod\"",
    "\"proofValue\"",
    "\"z\"",
    "\"TrustPassport\"",
];
const HISTORY_TOKENS: &[&str] = &["\"until_ms\"", "\"from_ms\"", "\"sig\"", "\"did\"", "9223372036854775807"];

fn token_claims(n: u8, via: bool) -> TokenClaims {
    TokenClaims {
        v: 1,
        iss: did_key(&SigningKey::from_bytes(&TOKEN_KEY).verifying_key()).as_str().into(),
        jti: format!("tok_{n}").as_str().into(),
        sub: "did:key:z6MkhaXgBZDvotDkL5257faiztiGiC2QtKLGpbnnEGta2doK".into(),
        aud: "did:key:z6MkgRJszHiNAGo5FdAgQhNy1Hz8AVZo3vWCkUuJDNsC3bk6".into(),
        max: Amount(250 * u64::from(n)),
        ord: format!("order-{n}").as_str().into(),
        res: format!("https://shop.example/restock/{n}?q=é"),
        iat_ms: Timestamp(1_700_000_000_000),
        exp_ms: Timestamp(1_700_000_900_000),
        via: via.then(|| did_key(&SigningKey::from_bytes(&OTHER_KEY).verifying_key()).as_str().into()),
    }
}

// ---- apt_ tokens ------------------------------------------------------------------------

fn check_token(input: &Input) -> Result<(), String> {
    let text = input.text();
    let key = SigningKey::from_bytes(&TOKEN_KEY).verifying_key();
    let other = SigningKey::from_bytes(&OTHER_KEY).verifying_key();
    let decoded = token::decode(&text, &key);
    let peeked = token::peek(&text);
    let _ = token::decode(&text, &other);
    match &decoded {
        Ok(claims) => {
            // Only a token the registry signed decodes, and it re-encodes to the same bytes.
            let signed: Vec<String> =
                valid_seeds("apt-token").iter().map(|s| String::from_utf8_lossy(s).into()).collect();
            ensure(signed.iter().any(|s| *s == text), || "a token nobody signed decoded".into())?;
            ensure(token::encode(claims, &SigningKey::from_bytes(&TOKEN_KEY)) == text, || {
                "re-encoding changed it".into()
            })?;
            ensure(peeked.as_ref() == Ok(claims), || "peek and decode disagree".into())?;
            ensure(token::check_signature(&text, &key).is_ok(), || "check_signature refused a decoded token".into())
        }
        Err(TokenError::BadSignature) => ensure(peeked.is_ok(), || "a bad signature on claims peek cannot read".into()),
        Err(TokenError::Malformed) => ensure(peeked.is_err(), || "peek read claims decode calls malformed".into()),
    }
}

#[test]
fn fuzz_apt_token() {
    for seed in valid_seeds("apt-token").iter() {
        let text = String::from_utf8(seed.clone()).unwrap();
        assert!(token::decode(&text, &SigningKey::from_bytes(&TOKEN_KEY).verifying_key()).is_ok(), "{text}");
    }
    let report = fuzz("apt-token", TOKEN_CASES, TOKEN_TOKENS, check_token);
    assert!(report.executions > u64::from(TOKEN_CASES.min(harness::cases(TOKEN_CASES))));
}

// ---- did:key and public keys -------------------------------------------------------------

fn check_did_key(input: &Input) -> Result<(), String> {
    let text = input.text();
    if let Ok(key) = public_key_from_did(&text) {
        ensure(did_key(&key) == text, || format!("{text} names the key {} too", did_key(&key)))?;
    }
    if let Ok(key) = parse_public_key(&text) {
        let canonical = hex::encode(key.as_bytes()) == text.to_ascii_lowercase() || b64url(key.as_bytes()) == text;
        ensure(canonical, || format!("{text} parses as a key it does not spell"))?;
    }
    let signer = SigningKey::from_bytes(&TOKEN_KEY);
    let message = b"fuzz";
    let signature = sign(&signer, message);
    let signed = did_signed(&text, message, &signature);
    ensure(!signed || text == did_key(&signer.verifying_key()), || "another DID verified the signature".into())?;
    let _ = did_signed(&did_key(&signer.verifying_key()), message, &text);
    Ok(())
}

#[test]
fn fuzz_did_key() {
    fuzz("did-key", DID_KEY_CASES, DID_TOKENS, check_did_key);
}

// ---- verifiable credentials and passports ----------------------------------------------------

fn registry_history() -> Vec<KeyEntry> {
    let dids: Vec<String> = REGISTRY_KEYS.iter().map(|k| did_key(&SigningKey::from_bytes(k).verifying_key())).collect();
    let registry = dids[0].clone();
    let mut history = vec![KeyEntry { did: registry.clone(), from_ms: 0, until_ms: Some(ROTATED_AT_MS[0]), sig: None }];
    for (i, from_ms) in ROTATED_AT_MS.iter().enumerate() {
        let predecessor = SigningKey::from_bytes(&REGISTRY_KEYS[i]);
        let sig = sign(&predecessor, &rotation_message(&registry, &dids[i + 1], *from_ms));
        let until_ms = ROTATED_AT_MS.get(i + 1).copied();
        history.push(KeyEntry { did: dids[i + 1].clone(), from_ms: *from_ms, until_ms, sig: Some(sig) });
    }
    history
}

fn registries() -> Vec<(String, Vec<KeyEntry>)> {
    let history = registry_history();
    vec![(history[0].did.clone(), history)]
}

fn now_ms() -> i64 {
    vc::ms_from_rfc3339(PASSPORT_NOW).unwrap()
}

/// Everything a passport's reader runs, on one input; what must hold of what it answers.
fn check_passport(input: &Input) -> Result<(), String> {
    let Ok(doc) = serde_json::from_slice::<Value>(&input.0) else { return Ok(()) };
    let reparsed: Value = serde_json::from_str(&doc.to_string()).map_err(|e| format!("re-reading failed: {e}"))?;
    ensure(reparsed == doc, || "parse → serialise → parse changed the document".into())?;
    if let Ok(bytes) = vc::jcs(&doc) {
        let again = serde_json::from_slice::<Value>(&bytes).map_err(|e| format!("JCS is not JSON: {e}"))?;
        ensure(vc::jcs(&again).as_ref() == Ok(&bytes), || "JCS is not idempotent".into())?;
    }
    let _ = vc::hash_data(&doc);
    let _ = vc::check_validity(&doc, now_ms());
    let proof = vc::verify_proof(&doc);
    let verified = vc::verify_eddsa_jcs_2022(&doc);
    if let Err(error) = &verified {
        ensure(!error.code().is_empty(), || "an error without a code".into())?;
    }
    ensure(verified.is_err() || proof.is_ok(), || "the credential verified but its proof did not".into())?;
    if proof.is_ok() {
        let canonical = vc::jcs(&doc).map_err(|e| e.to_string())?;
        let signed = valid_seeds("passport").iter().any(|seed| {
            serde_json::from_slice::<Value>(seed).ok().and_then(|s| vc::jcs(&s).ok()).as_ref() == Some(&canonical)
        });
        ensure(signed, || "a credential nobody signed verified".into())?;
    }
    match verify_passport(&doc, now_ms(), &registries()) {
        Ok(info) => {
            ensure(verified.is_ok(), || "a passport verified whose credential did not".into())?;
            ensure(info.subject.as_str() == doc["credentialSubject"]["id"], || {
                "the subject is not the one signed".into()
            })
        }
        Err(refusal) => ensure(!refusal.code.as_str().is_empty(), || "a refusal without a code".into()),
    }
}

#[test]
fn fuzz_passport() {
    for seed in valid_seeds("passport").iter() {
        let doc: Value = serde_json::from_slice(seed).unwrap();
        vc::verify_proof(&doc).unwrap();
    }
    fuzz_json("passport", PASSPORT_CASES, PASSPORT_TOKENS, check_passport);
}

// ---- key histories ------------------------------------------------------------------------

/// A later key's signature by its predecessor and when it took over.
type Rotation = (Option<String>, i64);

/// What a key history's signatures pin down: every key, and each later key's
/// signature and start (the genesis key's start and any `sig` it carries are
/// not signed, and `verify_history` ignores them).
fn signed_part(history: &[KeyEntry]) -> Vec<(String, Option<Rotation>)> {
    history.iter().enumerate().map(|(i, k)| (k.did.clone(), (i > 0).then(|| (k.sig.clone(), k.from_ms)))).collect()
}

fn check_key_history(input: &Input) -> Result<(), String> {
    let Ok(history) = serde_json::from_slice::<Vec<KeyEntry>>(&input.0) else { return Ok(()) };
    let registry = registry_history()[0].did.clone();
    for at_ms in [i64::MIN, -1, 0, ROTATED_AT_MS[0], ROTATED_AT_MS[1] - 1, i64::MAX] {
        for key in &history {
            let _ = key_valid_at(&history, &key.did, at_ms);
        }
    }
    let first = history.first().map(|k| k.did.clone()).unwrap_or_default();
    let _ = verify_history(&first, &history);
    if verify_history(&registry, &history).is_ok() {
        let seeds: Vec<Vec<KeyEntry>> =
            valid_seeds("key-history").iter().filter_map(|s| serde_json::from_slice(s).ok()).collect();
        let known = seeds.iter().any(|seed| signed_part(seed) == signed_part(&history));
        ensure(known, || "a key history nobody signed verified".into())?;
    }
    Ok(())
}

#[test]
fn fuzz_key_history() {
    let registry = registry_history()[0].did.clone();
    for seed in valid_seeds("key-history").iter() {
        let history: Vec<KeyEntry> = serde_json::from_slice(seed).unwrap();
        verify_history(&registry, &history).unwrap();
    }
    fuzz_json("key-history", KEY_HISTORY_CASES, HISTORY_TOKENS, check_key_history);
}

// ---- the seeds ------------------------------------------------------------------------------

fn figures_subject(subject: &str, registry: &str) -> Value {
    json!({
        "id": subject, "registry": registry, "formula": "bazaar-rep-v1", "windowDays": 365,
        "computedAtMs": 1_764_460_800_000i64, "settledCount": 412, "successCount": 401, "failureCount": 11,
        "settledVolumeMinor": "1843250", "excludedSameOwner": 3, "disputesFiled": 14, "disputesLost": 6,
        "disputesWon": 7, "disputesSplit": 1, "refunds": 5, "distinctBuyerOwners": 57, "topBuyerShareBps": 1830,
        "weightedSuccessPpm": 400_000_000, "weightedFailurePpm": 11_000_000, "scoreBps": 9710,
        "scoreLowerBoundBps": 9528, "asOf": {"ledgerSeq": 184_467, "ledgerHead": "sha256:4f2a"},
        "window": "P365D", "networkUnit": "BNU"
    })
}

fn passport_seed(key: &SigningKey, subject: &str, registry: &str) -> Value {
    let unsigned = json!({
        "@context": [bazaar_core::federation::VC_CONTEXT, bazaar_core::federation::BAZAAR_CONTEXT],
        "id": "urn:bazaar:passport:fuzz",
        "type": ["VerifiableCredential", bazaar_core::federation::PASSPORT_TYPE],
        "issuer": did_key(&key.verifying_key()),
        "validFrom": "2026-11-30T00:00:00Z",
        "validUntil": "2026-12-01T00:00:00Z",
        "credentialSubject": figures_subject(subject, registry),
    });
    let method = vc::did_key_verification_method(&key.verifying_key());
    vc::sign_eddsa_jcs_2022(&unsigned, key, &method, "2026-11-30T00:00:00Z").unwrap()
}

/// The valid seeds of every core target, as this build makes them (`harness::write_seed`).
#[test]
fn committed_seeds_are_what_this_build_makes() {
    let signer = SigningKey::from_bytes(&TOKEN_KEY);
    for (n, via) in [(1, false), (2, false), (3, true)] {
        write_seed("apt-token", &format!("seed-{n}"), token::encode(&token_claims(n, via), &signer).as_bytes());
    }
    let foreign = token::encode(&token_claims(4, false), &SigningKey::from_bytes(&OTHER_KEY));
    write_seed("apt-token", "other-registry", foreign.as_bytes());
    for (i, key) in REGISTRY_KEYS.iter().chain([&TOKEN_KEY]).enumerate() {
        let public = SigningKey::from_bytes(key).verifying_key();
        write_seed("did-key", &format!("seed-did-{i}"), did_key(&public).as_bytes());
        write_seed("did-key", &format!("seed-hex-{i}"), hex::encode(public.as_bytes()).as_bytes());
        write_seed("did-key", &format!("seed-b64-{i}"), b64url(public.as_bytes()).as_bytes());
    }
    let history = registry_history();
    let subject = did_key(&SigningKey::from_bytes(&TOKEN_KEY).verifying_key());
    let current = SigningKey::from_bytes(&REGISTRY_KEYS[2]);
    let passport = passport_seed(&current, &subject, &history[0].did);
    write_seed("passport", "seed-trust-passport.json", &serde_json::to_vec_pretty(&passport).unwrap());
    let w3c = include_str!("vectors/w3c-eddsa-jcs-2022/signedJCS.json");
    write_seed("passport", "seed-w3c-signed.json", w3c.as_bytes());
    let stranger = passport_seed(&SigningKey::from_bytes(&OTHER_KEY), &subject, "did:key:zUnknown");
    write_seed("passport", "seed-unknown-issuer.json", &serde_json::to_vec_pretty(&stranger).unwrap());
    for len in 1..=history.len() {
        let mut prefix = history[..len].to_vec();
        prefix.last_mut().unwrap().until_ms = None;
        write_seed("key-history", &format!("seed-{len}-keys.json"), &serde_json::to_vec_pretty(&prefix).unwrap());
    }
}

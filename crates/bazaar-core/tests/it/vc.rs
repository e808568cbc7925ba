//! Passports as verifiable credentials: the W3C eddsa-jcs-2022 test vectors (hash,
//! verification, a byte-identical re-signature), the sample passport from the trust
//! notes, and what each kind of tampering is refused as.

use bazaar_core::crypto::did_key;
use bazaar_core::vc::{
    check_validity, did_key_verification_method, hash_data, jcs, ms_from_rfc3339, sign_eddsa_jcs_2022,
    verify_eddsa_jcs_2022, verify_proof,
};
use ed25519_dalek::SigningKey;
use serde_json::{json, Value};

const W3C_SIGNED: &str = include_str!("../vectors/w3c-eddsa-jcs-2022/signedJCS.json");
const W3C_KEY_PAIR: &str = include_str!("../vectors/w3c-eddsa-jcs-2022/keyPair.json");
const W3C_COMBINED_HASH: &str = include_str!("../vectors/w3c-eddsa-jcs-2022/combinedHashJCS.txt");
const W3C_PROOF_HASH: &str = include_str!("../vectors/w3c-eddsa-jcs-2022/proofHashJCS.txt");
const W3C_DOC_HASH: &str = include_str!("../vectors/w3c-eddsa-jcs-2022/docHashJCS.txt");
const W3C_CANON_DOC: &str = include_str!("../vectors/w3c-eddsa-jcs-2022/canonDocJCS.txt");
const R4_PASSPORT: &str = include_str!("../vectors/bazaar-r4-passport.json");

/// Multicodec prefix of an Ed25519 secret key (0x1300, varint-encoded).
const ED25519_SECRET_MULTICODEC: [u8; 2] = [0x80, 0x26];

fn parse(text: &str) -> Value {
    serde_json::from_str(text).unwrap()
}

fn w3c_secret_key() -> SigningKey {
    let pair = parse(W3C_KEY_PAIR);
    let encoded = pair["privateKeyMultibase"].as_str().unwrap().strip_prefix('z').unwrap();
    let bytes = bs58::decode(encoded).into_vec().unwrap();
    assert_eq!(bytes[..2], ED25519_SECRET_MULTICODEC);
    let key = SigningKey::from_bytes(&bytes[2..].try_into().unwrap());
    let public = pair["publicKeyMultibase"].as_str().unwrap();
    assert_eq!(did_key(&key.verifying_key()), format!("did:key:{public}"), "the pair's halves belong together");
    key
}

fn without_proof(signed: &Value) -> Value {
    let mut unsigned = signed.clone();
    unsigned.as_object_mut().unwrap().remove("proof");
    unsigned
}

fn code<T>(result: Result<T, bazaar_core::vc::VcError>) -> Result<(), &'static str> {
    result.map(|_| ()).map_err(|error| error.code())
}

#[test]
fn w3c_hash_data_is_the_published_combined_hash() {
    let signed = parse(W3C_SIGNED);
    let hash = hash_data(&signed).unwrap();
    assert_eq!(hex::encode(hash), W3C_COMBINED_HASH.trim());
    assert!(W3C_COMBINED_HASH.starts_with("66ab154f") && W3C_COMBINED_HASH.trim().ends_with("2f19"));
    assert_eq!(hex::encode(&hash[..32]), W3C_PROOF_HASH.trim(), "the proof configuration's hash comes first");
    assert_eq!(hex::encode(&hash[32..]), W3C_DOC_HASH.trim());
    assert_eq!(String::from_utf8(jcs(&without_proof(&signed)).unwrap()).unwrap(), W3C_CANON_DOC.trim());
}

#[test]
fn w3c_signed_credential_verifies() {
    let verified = verify_proof(&parse(W3C_SIGNED)).unwrap();
    assert_eq!(verified.issuer_did, "did:key:z6MkrJVnaZkeFzdQyMZu1cgjg7k1pZZ6pvBQ7XJPt4swbTQ2");
    assert_eq!(verified.created, "2023-02-24T23:36:38Z");
    // The vector's issuer is an https URL, not the signing DID: the proof is sound, but a
    // passport pins its issuer to the key, so the full check refuses it for that reason alone.
    assert_eq!(code(verify_eddsa_jcs_2022(&parse(W3C_SIGNED))), Err("passport_issuer_mismatch"));
}

#[test]
fn w3c_unsigned_credential_signs_to_the_published_proof() {
    let published = parse(W3C_SIGNED);
    let proof = &published["proof"];
    assert_eq!(did_key_verification_method(&w3c_secret_key().verifying_key()), proof["verificationMethod"]);
    let signed = sign_eddsa_jcs_2022(
        &without_proof(&published),
        &w3c_secret_key(),
        proof["verificationMethod"].as_str().unwrap(),
        proof["created"].as_str().unwrap(),
    )
    .unwrap();
    assert_eq!(signed["proof"]["proofValue"], proof["proofValue"], "Ed25519 is deterministic");
    assert_eq!(signed, published);
}

#[test]
fn w3c_credential_with_one_field_changed_fails() {
    let mut changed = parse(W3C_SIGNED);
    changed["credentialSubject"]["alumniOf"] = json!("The School of Counterexamples");
    assert_eq!(code(verify_proof(&changed)), Err("passport_proof_invalid"));
    let mut changed = parse(W3C_SIGNED);
    changed["proof"]["created"] = json!("2023-02-24T23:36:39Z");
    assert_eq!(code(verify_proof(&changed)), Err("passport_proof_invalid"));
}

#[test]
fn sample_passport_verifies_within_its_day_only() {
    let passport = parse(R4_PASSPORT);
    let verified = verify_eddsa_jcs_2022(&passport).unwrap();
    assert_eq!(verified.issuer_did, passport["issuer"]);
    let from = ms_from_rfc3339("2026-11-30T00:00:00Z").unwrap();
    let until = ms_from_rfc3339("2026-12-01T00:00:00Z").unwrap();
    assert_eq!(code(check_validity(&passport, from)), Ok(()));
    assert_eq!(code(check_validity(&passport, until - 1)), Ok(()));
    assert_eq!(code(check_validity(&passport, until)), Err("passport_expired"));
    assert_eq!(code(check_validity(&passport, from - 1)), Err("passport_not_yet_valid"));
}

// ---- our own passports ---------------------------------------------------------

const CREATED: &str = "2026-01-02T03:04:05Z";

fn issuer_key() -> SigningKey {
    SigningKey::from_bytes(&[42u8; 32])
}

fn method_of(key: &SigningKey) -> String {
    did_key_verification_method(&key.verifying_key())
}

fn passport_body(issuer: &SigningKey) -> Value {
    json!({
        "@context": ["https://www.w3.org/ns/credentials/v2", "https://bazaar.example/ns/passport/v1"],
        "id": "urn:uuid:00000000-0000-4000-8000-000000000042",
        "type": ["VerifiableCredential", "TrustPassport"],
        "issuer": did_key(&issuer.verifying_key()),
        "validFrom": "2026-01-02T00:00:00Z",
        "validUntil": "2026-01-03T00:00:00Z",
        "credentialSubject": {
            "id": did_key(&SigningKey::from_bytes(&[7u8; 32]).verifying_key()),
            "settledCount": 412,
            "disputesLost": 6,
            "scoreBps": 9710,
            "settledVolume": [{"currency": "USD", "minorUnits": "1843250"}],
            "largest": 9_007_199_254_740_991u64,
        }
    })
}

fn signed_passport() -> Value {
    let key = issuer_key();
    sign_eddsa_jcs_2022(&passport_body(&key), &key, &method_of(&key), CREATED).unwrap()
}

#[test]
fn signed_passports_verify_and_carry_their_proof() {
    let passport = signed_passport();
    let proof = &passport["proof"];
    assert_eq!(proof["type"], "DataIntegrityProof");
    assert_eq!(proof["cryptosuite"], "eddsa-jcs-2022");
    assert_eq!(proof["proofPurpose"], "assertionMethod");
    assert_eq!(proof["@context"], passport["@context"]);
    assert!(proof["proofValue"].as_str().unwrap().starts_with('z'));
    let verified = verify_eddsa_jcs_2022(&passport).unwrap();
    assert_eq!(verified.issuer_did, did_key(&issuer_key().verifying_key()));
    assert_eq!(verified.created, CREATED);
    let mut issuer_object = passport_body(&issuer_key());
    issuer_object["issuer"] = json!({"id": did_key(&issuer_key().verifying_key()), "name": "A registry"});
    let signed = sign_eddsa_jcs_2022(&issuer_object, &issuer_key(), &method_of(&issuer_key()), CREATED).unwrap();
    assert_eq!(code(verify_eddsa_jcs_2022(&signed)), Ok(()), "issuer may be an object with an id");
}

fn other_did() -> String {
    did_key(&SigningKey::from_bytes(&[1u8; 32]).verifying_key())
}

fn proof_value(passport: &Value) -> String {
    passport["proof"]["proofValue"].as_str().unwrap().to_string()
}

type Tamper = (&'static str, fn(&mut Value), &'static str);

const TAMPERS: [Tamper; 22] = [
    ("a count", |p| p["credentialSubject"]["settledCount"] = json!(413), "passport_proof_invalid"),
    (
        "a money string",
        |p| p["credentialSubject"]["settledVolume"][0]["minorUnits"] = json!("1843251"),
        "passport_proof_invalid",
    ),
    ("the issuer", |p| p["issuer"] = json!(other_did()), "passport_proof_invalid"),
    ("validUntil", |p| p["validUntil"] = json!("2027-01-03T00:00:00Z"), "passport_proof_invalid"),
    ("proof.created", |p| p["proof"]["created"] = json!("2026-01-02T03:04:06Z"), "passport_proof_invalid"),
    ("an added field", |p| p["credentialSubject"]["extra"] = json!(true), "passport_proof_invalid"),
    (
        "a context appended",
        |p| p["@context"].as_array_mut().unwrap().push(json!("https://x.example/v1")),
        "passport_proof_invalid",
    ),
    ("the contexts swapped", |p| p["@context"].as_array_mut().unwrap().reverse(), "passport_context"),
    ("the proof context", |p| p["proof"]["@context"] = json!(["https://evil.example/v1"]), "passport_context"),
    ("the document context", |p| p["@context"] = json!(["https://www.w3.org/ns/credentials/v2"]), "passport_context"),
    ("the cryptosuite", |p| p["proof"]["cryptosuite"] = json!("eddsa-rdfc-2022"), "passport_cryptosuite"),
    ("the proof type", |p| p["proof"]["type"] = json!("Ed25519Signature2020"), "passport_cryptosuite"),
    ("the purpose", |p| p["proof"]["proofPurpose"] = json!("authentication"), "passport_proof_purpose"),
    (
        "an https method",
        |p| p["proof"]["verificationMethod"] = json!("https://r.example/keys#1"),
        "passport_verification_method",
    ),
    (
        "the method's fragment",
        |p| p["proof"]["verificationMethod"] = json!(format!("{}#key-1", p["issuer"].as_str().unwrap())),
        "passport_verification_method",
    ),
    (
        "proofValue's prefix",
        |p| p["proof"]["proofValue"] = json!(proof_value(p).replacen('z', "u", 1)),
        "passport_malformed",
    ),
    ("proofValue's length", |p| p["proof"]["proofValue"] = json!("z3yZe7d"), "passport_malformed"),
    ("a proof set", |p| p["proof"] = json!([p["proof"].clone()]), "passport_malformed"),
    ("no proof", |p| drop(p.as_object_mut().unwrap().remove("proof")), "passport_malformed"),
    (
        "an unsafe integer",
        |p| p["credentialSubject"]["settledCount"] = json!(9_007_199_254_740_992u64),
        "passport_malformed",
    ),
    ("a fraction", |p| p["credentialSubject"]["settledCount"] = json!(412.5), "passport_malformed"),
    ("a non-ASCII key", |p| p["credentialSubject"]["größe"] = json!(1), "passport_malformed"),
];

#[test]
fn each_kind_of_tampering_is_refused() {
    assert_eq!(code(verify_eddsa_jcs_2022(&signed_passport())), Ok(()));
    for (what, tamper, expected) in TAMPERS {
        let mut passport = signed_passport();
        tamper(&mut passport);
        assert_eq!(code(verify_eddsa_jcs_2022(&passport)), Err(expected), "tampered {what}");
    }
}

#[test]
fn a_key_cannot_vouch_for_another_issuer() {
    let key = issuer_key();
    let mut body = passport_body(&key);
    body["issuer"] = json!(other_did());
    let signed = sign_eddsa_jcs_2022(&body, &key, &method_of(&key), CREATED).unwrap();
    assert_eq!(code(verify_proof(&signed)), Ok(()));
    assert_eq!(code(verify_eddsa_jcs_2022(&signed)), Err("passport_issuer_mismatch"));
    body["issuer"] = json!(42);
    let signed = sign_eddsa_jcs_2022(&body, &key, &method_of(&key), CREATED).unwrap();
    assert_eq!(code(verify_eddsa_jcs_2022(&signed)), Err("passport_malformed"));
}

#[test]
fn signing_refuses_what_verifiers_would_read_differently() {
    let key = issuer_key();
    let method = method_of(&key);
    let body = passport_body(&key);
    let with = |path: &str, value: Value| {
        let mut body = body.clone();
        body["credentialSubject"][path] = value;
        body
    };
    let cases = [
        (with("big", json!(9_007_199_254_740_992u64)), method.clone(), CREATED, "passport_malformed"),
        (with("negative", json!(-9_007_199_254_740_992i64)), method.clone(), CREATED, "passport_malformed"),
        (with("float", json!(0.1)), method.clone(), CREATED, "passport_malformed"),
        (with("ünicode", json!(1)), method.clone(), CREATED, "passport_malformed"),
        (signed_passport(), method.clone(), CREATED, "passport_malformed"),
        (json!(["not", "an", "object"]), method.clone(), CREATED, "passport_malformed"),
        (body.clone(), method.clone(), "2026-01-02T03:04:05.000Z", "passport_malformed"),
        (body.clone(), method_of(&SigningKey::from_bytes(&[1u8; 32])), CREATED, "passport_verification_method"),
        (body.clone(), "https://r.example/keys#1".to_string(), CREATED, "passport_verification_method"),
    ];
    for (document, method, created, expected) in cases {
        assert_eq!(code(sign_eddsa_jcs_2022(&document, &key, &method, created)), Err(expected), "{document}");
    }
    let mut no_context = body.clone();
    no_context.as_object_mut().unwrap().remove("@context");
    assert_eq!(code(sign_eddsa_jcs_2022(&no_context, &key, &method, CREATED)), Err("passport_malformed"));
}

#[test]
fn validity_is_from_inclusive_until_exclusive() {
    let passport = signed_passport();
    let from = ms_from_rfc3339("2026-01-02T00:00:00Z").unwrap();
    let until = ms_from_rfc3339("2026-01-03T00:00:00Z").unwrap();
    let cases = [
        (from - 1, Err("passport_not_yet_valid")),
        (from, Ok(())),
        (until - 1, Ok(())),
        (until, Err("passport_expired")),
        (until + 86_400_000, Err("passport_expired")),
    ];
    for (now_ms, expected) in cases {
        assert_eq!(code(check_validity(&passport, now_ms)), expected, "at {now_ms}");
    }
    let mut open_ended = passport.clone();
    open_ended.as_object_mut().unwrap().remove("validUntil");
    assert_eq!(code(check_validity(&open_ended, from)), Err("passport_malformed"));
    let mut sloppy = passport;
    sloppy["validFrom"] = json!("2026-01-02");
    assert_eq!(code(check_validity(&sloppy, from)), Err("passport_malformed"));
}

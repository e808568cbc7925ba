//! Sealed messages against a client nobody here wrote: npm `@hpke/core`
//! (with `@hpke/dhkem-x25519` and `@hpke/chacha20poly1305`) driven by
//! `tests/sealing/interop.mjs`. Sealed in JavaScript, opened in Rust, and
//! back; both sign, both check. Needs `tests/sealing/node_modules`
//! (`./scripts/test` installs it).

use std::io::Write;
use std::path::PathBuf;
use std::process::{Command, Stdio};

use bazaar_conversation::sealing::{
    open, seal, sign_message, sign_sealing_key, signing_bytes, verify_signature, Content, SealedBody, SealingSecret,
};
use bazaar_conversation::ChannelId;
use bazaar_types::MemberId;
use ed25519_dalek::SigningKey;
use serde_json::{json, Value};

fn interop_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/sealing")
}

/// Runs one operation of the JavaScript client; `Err` carries its stderr.
fn js(request: &Value) -> Result<Value, String> {
    let dir = interop_dir();
    assert!(
        dir.join("node_modules/@hpke/core").is_dir(),
        "tests/sealing/node_modules is missing: run ./scripts/test (or npm ci in tests/sealing)"
    );
    let mut child = Command::new("node")
        .arg(dir.join("interop.mjs"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("node runs");
    child.stdin.take().unwrap().write_all(request.to_string().as_bytes()).unwrap();
    let output = child.wait_with_output().unwrap();
    if !output.status.success() {
        return Err(String::from_utf8_lossy(&output.stderr).into_owned());
    }
    Ok(serde_json::from_slice(&output.stdout).expect("interop.mjs answers JSON"))
}

struct Party {
    identity: SigningKey,
    did: MemberId,
    sealing: SealingSecret,
}

fn party(byte: u8) -> Party {
    let identity = SigningKey::from_bytes(&[byte; 32]);
    let did = MemberId::from(format!("did:key:party-{byte}").as_str());
    Party { sealing: SealingSecret::derive(&identity), identity, did }
}

fn seed_hex(party: &Party) -> String {
    hex::encode(party.identity.to_bytes())
}

#[test]
fn both_clients_derive_the_same_sealing_key_and_signature() {
    let alice = party(11);
    let derived = js(&json!({"op": "derive", "seed": seed_hex(&alice)})).unwrap();
    assert_eq!(derived["public_key"], alice.sealing.public_key());
    let signed = js(&json!({
        "op": "sign_key", "seed": seed_hex(&alice), "member": alice.did, "public_key": alice.sealing.public_key()
    }))
    .unwrap();
    assert_eq!(signed["signature"], sign_sealing_key(&alice.identity, &alice.did, &alice.sealing.public_key()));
}

#[test]
fn sealed_in_javascript_opens_in_rust() {
    let (alice, bob) = (party(21), party(22));
    let channel = ChannelId("ch_0123456789abcdef0123456789abcdef".into());
    let text = "forty per crate, final — ünïcode too";
    let sealed = js(&json!({
        "op": "seal", "channel": channel, "author": bob.did, "author_seed": seed_hex(&bob), "plaintext": text,
        "recipients": [
            {"member": alice.did, "key": alice.sealing.public_key()},
            {"member": bob.did, "key": bob.sealing.public_key()},
        ],
    }))
    .unwrap();
    let body: SealedBody = serde_json::from_value(sealed["sealed"].clone()).unwrap();
    assert_eq!(open(&channel, &bob.did, &alice.did, &alice.sealing, &body).unwrap(), text);
    assert_eq!(open(&channel, &bob.did, &bob.did, &bob.sealing, &body).unwrap(), text);
    let signed = signing_bytes(&channel, &bob.did, &Content::Sealed(&body));
    let signature = sealed["signature"].as_str().unwrap();
    assert!(verify_signature(&bob.identity.verifying_key(), &signed, signature));
    assert!(!verify_signature(&alice.identity.verifying_key(), &signed, signature));
}

#[test]
fn sealed_in_rust_opens_in_javascript_and_tampering_is_caught() {
    let (alice, bob) = (party(31), party(32));
    let channel = ChannelId("ch_fedcba9876543210fedcba9876543210".into());
    let text = "deliver by Friday";
    let to = vec![(alice.did.clone(), alice.sealing.public_key()), (bob.did.clone(), bob.sealing.public_key())];
    let body = seal(&channel, &alice.did, text, &to).unwrap();
    let signature = sign_message(&alice.identity, &channel, &alice.did, &Content::Sealed(&body));
    let request = |body: &SealedBody| {
        json!({
            "op": "open", "channel": channel, "author": alice.did,
            "author_public_key": hex::encode(alice.identity.verifying_key().as_bytes()),
            "member": bob.did, "seed": seed_hex(&bob), "sealed": body, "signature": signature,
        })
    };
    let opened = js(&request(&body)).unwrap();
    assert_eq!(opened["plaintext"], text);
    assert_eq!(opened["signature_valid"], true);
    let mut tampered = body.clone();
    let mut bytes = base64_decode(&tampered.ciphertext);
    bytes[0] ^= 1;
    tampered.ciphertext = base64_encode(&bytes);
    let refused = js(&request(&tampered)).unwrap_err();
    assert!(refused.contains("failed"), "{refused}");
}

fn base64_decode(text: &str) -> Vec<u8> {
    use base64::Engine as _;
    base64::engine::general_purpose::URL_SAFE_NO_PAD.decode(text).unwrap()
}

fn base64_encode(bytes: &[u8]) -> String {
    use base64::Engine as _;
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
}

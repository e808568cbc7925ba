//! Fuzzing the Standard Webhooks signatures on the stable toolchain (see
//! `fuzz/README.md`): the receiver's check (`webhooks::sign::verify`, with its
//! `webhook-signature` header parser and timestamp tolerance), the signer's
//! inputs (`sign`, `signature_header`) and the `whsec_` secret parser. The
//! target replays `fuzz/corpus/webhook-delivery/` (deliveries as JSON: secrets,
//! id, timestamp, header, body, the receiver's clock), then mutates from it and
//! generates from scratch. Beyond "never panics": only content a seed's secret
//! signed verifies, and whatever the signer signs, the receiver accepts.
//!
//! `cargo test -p bazaar-conversation --test fuzz -- --nocapture` prints the
//! executions; `BAZAAR_FUZZ_CASES=200000` runs longer; `-- --ignored
//! write_corpus` rewrites the seeds.

#[path = "../../../fuzz/harness.rs"]
mod harness;

use bazaar_conversation::webhooks::sign::{self, new_secret, secret_key, signature_header, verify, TOLERANCE_S};
use bazaar_types::SeededEntropy;
use harness::{ensure, fuzz_json, valid_seeds, write_seed, Input};
use proptest::prelude::*;
use serde::{Deserialize, Serialize};

/// Generated cases per target in the bounded run (`cargo test`).
const DELIVERY_CASES: u32 = 4_000;
const SIGNER_CASES: u32 = 1_000;

/// The Standard Webhooks reference vectors' secrets: what the seeds are signed with.
const SECRETS: [&str; 2] = ["whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", "whsec_C2FVsBQIhrscChlQIMV+b5sSYspob7oD"];

const WEBHOOK_TOKENS: &[&str] = &["v1,", "v2,", " ", "whsec_", "=", "+", "/", "msg_", "9223372036854775807"];

/// One delivery as a receiver sees it, and the receiver's clock.
#[derive(Serialize, Deserialize, Clone)]
struct Delivery {
    secrets: Vec<String>,
    id: String,
    timestamp: i64,
    signature: String,
    body: String,
    now: i64,
}

impl Delivery {
    fn content(&self) -> String {
        format!("{}.{}.{}", self.id, self.timestamp, self.body)
    }
}

fn seeds() -> Vec<Delivery> {
    valid_seeds("webhook-delivery").iter().map(|s| serde_json::from_slice(s).unwrap()).collect()
}

fn check_delivery(input: &Input) -> Result<(), String> {
    let text = input.text();
    let _ = (secret_key(&text), sign::sign(&text, "msg", 1, b"{}"));
    let Ok(delivery) = serde_json::from_slice::<Delivery>(&input.0) else {
        // Not a delivery: the bytes as a `webhook-signature` header on each seed.
        for seed in seeds() {
            let secrets: Vec<&str> = seed.secrets.iter().map(String::as_str).collect();
            if verify(&secrets, &seed.id, seed.timestamp, &text, seed.body.as_bytes(), seed.now).is_ok() {
                let genuine = text.split(' ').any(|s| seed.signature.split(' ').any(|g| g == s));
                ensure(genuine, || "a header without the genuine signature verified".into())?;
            }
        }
        return Ok(());
    };
    let secrets: Vec<&str> = delivery.secrets.iter().map(String::as_str).collect();
    let verdict =
        verify(&secrets, &delivery.id, delivery.timestamp, &delivery.signature, delivery.body.as_bytes(), delivery.now);
    if verdict.is_ok() {
        let within = (i128::from(delivery.now) - i128::from(delivery.timestamp)).abs() <= i128::from(TOLERANCE_S);
        ensure(within, || "a delivery outside the tolerance verified".into())?;
        let signed = seeds().iter().any(|seed| {
            seed.content() == delivery.content() && seed.secrets.iter().any(|s| delivery.secrets.contains(s))
        });
        ensure(signed, || format!("content nobody signed verified: {:?}", delivery.content()))?;
    }
    Ok(())
}

#[test]
fn fuzz_webhook_delivery() {
    for seed in seeds() {
        let secrets: Vec<&str> = seed.secrets.iter().map(String::as_str).collect();
        verify(&secrets, &seed.id, seed.timestamp, &seed.signature, seed.body.as_bytes(), seed.now).unwrap();
    }
    fuzz_json("webhook-delivery", DELIVERY_CASES, WEBHOOK_TOKENS, check_delivery);
}

proptest! {
    #![proptest_config(ProptestConfig { failure_persistence: None, cases: harness::cases(SIGNER_CASES), ..ProptestConfig::default() })]

    /// Whatever the signer is given, what it signs the receiver accepts at
    /// that time, refuses a tolerance later, and never panics on.
    #[test]
    fn what_the_signer_signs_the_receiver_accepts(
        seed in any::<u64>(),
        id in ".{0,40}",
        timestamp in prop_oneof![any::<i64>(), Just(i64::MIN), Just(i64::MAX), 0i64..2_000_000_000],
        body in proptest::collection::vec(any::<u8>(), 0..256),
        now in prop_oneof![any::<i64>(), Just(i64::MIN), Just(i64::MAX)],
    ) {
        let entropy = SeededEntropy::new(seed);
        let (new, old) = (new_secret(&entropy), new_secret(&entropy));
        let header = signature_header(&[&new, &old], &id, timestamp, &body).unwrap();
        prop_assert_eq!(verify(&[&old], &id, timestamp, &header, &body, timestamp), Ok(()));
        let late = timestamp.checked_add(TOLERANCE_S + 1);
        if let Some(late) = late {
            prop_assert!(verify(&[&new], &id, timestamp, &header, &body, late).is_err());
        }
        let _ = verify(&[&new], &id, timestamp, &header, &body, now);
    }
}

/// The valid seeds of `fuzz/corpus/webhook-delivery/`, as this build makes them (`harness::write_seed`).
#[test]
fn committed_seeds_are_what_this_build_makes() {
    let deliveries = [
        (vec![SECRETS[0]], "msg_p5jXN8AQM9LWM0D4loKWxJek", 1_614_265_330, r#"{"test": 2432232314}"#),
        (vec![SECRETS[1]], "msg_27UH4WbU6Z5A5EzD8u03UvzRbpk", 1_649_367_553, r#"{"email":"test@example.com"}"#),
        (SECRETS.to_vec(), "msg_rotation", 1_700_000_000, r#"{"type":"message.created","data":{"body":"é"}}"#),
    ];
    for (i, (secrets, id, timestamp, body)) in deliveries.into_iter().enumerate() {
        let signature = signature_header(&secrets, id, timestamp, body.as_bytes()).unwrap();
        let delivery = Delivery {
            secrets: secrets.iter().map(|s| s.to_string()).collect(),
            id: id.into(),
            timestamp,
            signature,
            body: body.into(),
            now: timestamp + 60,
        };
        write_seed("webhook-delivery", &format!("seed-{i}.json"), &serde_json::to_vec_pretty(&delivery).unwrap());
    }
}

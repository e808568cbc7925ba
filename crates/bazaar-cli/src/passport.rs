//! Offline passport verification for `bazaar passport verify`: the proof, the
//! validity window and, given a registry's published key history, that the
//! signing key was that registry's when the passport was issued.

use anyhow::{Context, Result};
use bazaar_core::federation::{verify_history, verify_passport, KeyEntry};
use serde_json::{json, Value};
use std::path::Path;

/// The verdict as JSON: `valid`, and either the passport's facts or the refusal `code` and `detail`.
pub fn verify_file(passport: &Value, keys: Option<&Path>, now_ms: i64) -> Result<Value> {
    let registries = match keys {
        Some(path) => {
            let text = std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
            let history: Value =
                serde_json::from_str(&text).with_context(|| format!("{} is not JSON", path.display()))?;
            let registry = history["registry"].as_str().context("the key history names no registry")?.to_string();
            let entries: Vec<KeyEntry> =
                serde_json::from_value(history["keys"].clone()).context("the key history's keys")?;
            if let Err(problem) = verify_history(&registry, &entries) {
                return Ok(json!({"valid": false, "code": "passport_issuer_unknown",
                    "detail": format!("the key history does not verify: {problem}")}));
            }
            Some(vec![(registry, entries)])
        }
        None => None,
    };
    let verdict = match &registries {
        Some(registries) => verify_passport(passport, now_ms, registries).map(|info| {
            json!({"valid": true, "registry": info.registry, "key": info.key, "subject": info.subject, "id": info.id,
                "figures": info.figures, "valid_until": passport["validUntil"], "as_of_seq": info.as_of_seq})
        }),
        None => {
            // Without a key history: a self-certifying did:key proof and the window only.
            let known = bazaar_core::vc::verify_eddsa_jcs_2022(passport).map_err(|e| e.to_string());
            let key = known.as_ref().map(|v| v.issuer_did.clone()).unwrap_or_default();
            let anyone = [(String::new(), vec![KeyEntry { did: key, from_ms: i64::MIN, until_ms: None, sig: None }])];
            verify_passport(passport, now_ms, &anyone).map(|info| {
                json!({"valid": true, "registry": null, "key": info.key, "subject": info.subject, "id": info.id,
                    "figures": info.figures, "valid_until": passport["validUntil"], "as_of_seq": info.as_of_seq})
            })
        }
    };
    Ok(verdict
        .unwrap_or_else(|refusal| json!({"valid": false, "code": refusal.code.as_str(), "detail": refusal.detail})))
}

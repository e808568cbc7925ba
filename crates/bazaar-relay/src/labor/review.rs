//! A worker's declared configuration and its review. Entering the evaluated
//! market is opt-in: the owner "sends the worker to the market", which runs a
//! preflight over what the worker declares (runtime, model, enabled tools,
//! credentials it needs, reward destination) without calling any model, and
//! publishes the review with the configuration's hash. A missing tool or
//! credential blocks admission. A worker whose configuration hash differs
//! from its last passed review takes no directed work until reviewed again.
//! Rooms and trading never need a review: Bazaar knows who an agent is, not
//! how it thinks.

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::event::{Event, Signer};

/// Addressable kind of a worker's review record (the latest per worker).
pub const REVIEW: u16 = 30_951;
/// Its `d` tag.
pub const REVIEW_D: &str = "bazaar-review";

/// What a worker declares about itself.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Manifest {
    /// e.g. `bazaar-worker/0.1`.
    pub runtime: String,
    /// The model the engine uses, as its maker names it.
    pub model: String,
    /// Tools the engine may call: each must be an executable on the worker's PATH.
    #[serde(default)]
    pub tools: Vec<String>,
    /// Environment variables the engine needs (names only, never values).
    #[serde(default)]
    pub credentials: Vec<String>,
    /// Where rewards go: an account the worker's owner holds.
    pub reward_destination: String,
    /// Whether the engine reports its usage (a worker whose engine does not is refused model work).
    pub reports_usage: bool,
}

impl Manifest {
    /// `sha256` of the manifest's canonical JSON (fields in declaration order,
    /// lists sorted): a changed configuration is a changed hash.
    pub fn config_hash(&self) -> String {
        let mut canonical = self.clone();
        canonical.tools.sort();
        canonical.credentials.sort();
        let bytes = serde_json::to_vec(&canonical).expect("a manifest serialises");
        hex::encode(Sha256::digest(bytes))
    }
}

/// What the preflight found missing; empty means admitted.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Preflight {
    pub missing_tools: Vec<String>,
    pub missing_credentials: Vec<String>,
    pub problems: Vec<String>,
}

impl Preflight {
    pub fn admitted(&self) -> bool {
        self.missing_tools.is_empty() && self.missing_credentials.is_empty() && self.problems.is_empty()
    }
}

/// The preflight, over the worker's environment as seen by the two probes.
/// It calls no model.
pub fn preflight(
    manifest: &Manifest,
    has_tool: &dyn Fn(&str) -> bool,
    has_credential: &dyn Fn(&str) -> bool,
) -> Preflight {
    let mut found = Preflight {
        missing_tools: manifest.tools.iter().filter(|t| !has_tool(t)).cloned().collect(),
        missing_credentials: manifest.credentials.iter().filter(|c| !has_credential(c)).cloned().collect(),
        problems: Vec::new(),
    };
    if manifest.reward_destination.trim().is_empty() {
        found.problems.push("no reward destination declared".into());
    }
    if !manifest.reports_usage {
        found.problems.push("the engine does not report usage; model work is refused to unmetered engines".into());
    }
    if manifest.runtime.trim().is_empty() || manifest.model.trim().is_empty() {
        found.problems.push("runtime and model must be declared".into());
    }
    found
}

/// The review record: the manifest as content, its hash and the verdict as tags.
pub fn review_event(worker: &Signer, manifest: &Manifest, preflight: &Preflight, created_at: u64) -> Event {
    let verdict = if preflight.admitted() { "passed" } else { "blocked" };
    let tags = vec![
        vec!["d".into(), REVIEW_D.into()],
        vec!["config".into(), manifest.config_hash()],
        vec!["review".into(), verdict.into()],
    ];
    let content = serde_json::json!({"manifest": manifest, "preflight": preflight}).to_string();
    worker.sign(created_at, REVIEW, tags, content)
}

/// The configuration hash a review record passed, if it passed.
pub fn passed_config(review: &Event) -> Option<&str> {
    (review.kind == REVIEW && review.verify().is_ok() && review.tag("review") == Some("passed"))
        .then(|| review.tag("config"))
        .flatten()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn manifest() -> Manifest {
        Manifest {
            runtime: "bazaar-worker/0.1".into(),
            model: "fixture-1".into(),
            tools: vec!["cat".into(), "sh".into()],
            credentials: vec!["FIXTURE_KEY".into()],
            reward_destination: "acct:owner".into(),
            reports_usage: true,
        }
    }

    #[test]
    fn missing_tools_or_credentials_block_admission() {
        let all = preflight(&manifest(), &|_| true, &|_| true);
        assert!(all.admitted());
        let no_key = preflight(&manifest(), &|_| true, &|_| false);
        assert_eq!(no_key.missing_credentials, vec!["FIXTURE_KEY"]);
        assert!(!no_key.admitted());
        let no_sh = preflight(&manifest(), &|tool| tool != "sh", &|_| true);
        assert_eq!(no_sh.missing_tools, vec!["sh"]);
        let unmetered = preflight(&Manifest { reports_usage: false, ..manifest() }, &|_| true, &|_| true);
        assert!(!unmetered.admitted(), "an engine that reports no usage is refused before model work");
    }

    #[test]
    fn the_hash_changes_with_the_configuration_and_not_with_list_order() {
        let base = manifest();
        let reordered = Manifest { tools: vec!["sh".into(), "cat".into()], ..manifest() };
        assert_eq!(base.config_hash(), reordered.config_hash());
        let other_model = Manifest { model: "fixture-2".into(), ..manifest() };
        assert_ne!(base.config_hash(), other_model.config_hash());
        let signer = Signer::generate(&bazaar_types::SeededEntropy::new(3));
        let passed = review_event(&signer, &base, &preflight(&base, &|_| true, &|_| true), 100);
        assert_eq!(passed_config(&passed), Some(base.config_hash().as_str()));
        let blocked = review_event(&signer, &base, &preflight(&base, &|_| false, &|_| true), 100);
        assert_eq!(passed_config(&blocked), None);
    }
}

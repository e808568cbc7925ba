//! A coordination job's evidence chain: task → handoff → artifact hash →
//! observation → outcome. The coordinator's result names the handoff it
//! posted and the specialist's result it accepted; the specialist's result
//! carries the artifact's URL and the sha256 of its bytes, under its own
//! signature. [`check_chain`] verifies every link that signatures can prove;
//! fetching the bytes and observing them is the validator's next step.

use crate::event::{Event, Hex32};
use crate::jobs::{result_kind_of, JobRequest};

/// `["artifact", url, sha256-hex]` on a result.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ArtifactRef {
    pub url: String,
    pub sha256: String,
}

pub fn artifact_of(event: &Event) -> Option<ArtifactRef> {
    let tag = event.tags.iter().find(|tag| tag.len() >= 3 && tag[0] == "artifact")?;
    let sha = &tag[2];
    (sha.len() == 64 && sha.bytes().all(|b| b.is_ascii_hexdigit()))
        .then(|| ArtifactRef { url: tag[1].clone(), sha256: sha.to_ascii_lowercase() })
}

/// The tags a coordinator's result carries to link its evidence.
pub fn coordinator_result_tags(job: &Event, handoff: &Event, handoff_result: &Event) -> Vec<Vec<String>> {
    let mut tags = vec![
        vec!["e".into(), job.id.to_hex()],
        vec!["p".into(), job.pubkey.to_hex()],
        vec!["handoff".into(), handoff.id.to_hex()],
        vec!["handoff-result".into(), handoff_result.id.to_hex()],
    ];
    if let Some(artifact) = artifact_of(handoff_result) {
        tags.push(vec!["artifact".into(), artifact.url, artifact.sha256]);
    }
    tags
}

/// The ids a coordinator's result points at: (handoff, handoff result).
pub fn links_of(result: &Event) -> Option<(Hex32, Hex32)> {
    Some((Hex32::parse(result.tag("handoff")?)?, Hex32::parse(result.tag("handoff-result")?)?))
}

/// The events of one chain, as collected from the relay.
pub struct Chain<'a> {
    pub job: &'a Event,
    pub result: &'a Event,
    pub handoff: &'a Event,
    pub handoff_result: &'a Event,
}

/// Verifies the chain's signatures and links; the artifact to fetch, or the
/// grounds on which the signed evidence is invalid (a rejection, not a gap).
pub fn check_chain(chain: &Chain<'_>) -> Result<ArtifactRef, String> {
    for (name, event) in [
        ("task", chain.job),
        ("result", chain.result),
        ("handoff", chain.handoff),
        ("handoff result", chain.handoff_result),
    ] {
        event.verify().map_err(|invalid| format!("the {name} event does not verify: {invalid}"))?;
    }
    let job = JobRequest::from_event(chain.job).ok_or("the task is not a job request")?;
    answers(&job, chain.result, "the coordinator's result")?;
    let handoff = JobRequest::from_event(chain.handoff).ok_or("the handoff is not a job request")?;
    if handoff.asker != chain.result.pubkey {
        return Err("the handoff was not posted by the coordinator who answered".into());
    }
    if !chain.handoff.tag_values("e").any(|e| e == job.id.to_hex()) {
        return Err("the handoff does not name the task it serves".into());
    }
    if !handoff.is_directed() {
        return Err("the handoff names no specialist".into());
    }
    answers(&handoff, chain.handoff_result, "the specialist's result")?;
    if links_of(chain.result) != Some((chain.handoff.id, chain.handoff_result.id)) {
        return Err("the coordinator's result does not link this handoff and its result".into());
    }
    let delivered = artifact_of(chain.handoff_result).ok_or("the specialist's result carries no artifact hash")?;
    if artifact_of(chain.result).as_ref() != Some(&delivered) {
        return Err("the coordinator's artifact differs from the one the specialist signed".into());
    }
    Ok(delivered)
}

/// `result` answers `job`: the right kind, naming it, from a named worker (the directed rule, again).
fn answers(job: &JobRequest, result: &Event, what: &str) -> Result<(), String> {
    if Some(result.kind) != result_kind_of(job.kind) {
        return Err(format!("{what} has kind {}, not {}", result.kind, job.kind + 1_000));
    }
    if !result.tag_values("e").any(|e| e == job.id.to_hex()) {
        return Err(format!("{what} does not name its task"));
    }
    if !job.eligible(&result.pubkey) {
        return Err(format!("{what} comes from a worker the task does not name"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::{tag, Signer};
    use crate::jobs::{request_tags, JOB_REQUEST, JOB_RESULT};

    struct Cast {
        validator: Signer,
        coordinator: Signer,
        specialist: Signer,
        stranger: Signer,
    }

    fn cast() -> Cast {
        let s = |n| Signer::generate(&bazaar_types::SeededEntropy::new(n));
        Cast { validator: s(1), coordinator: s(2), specialist: s(3), stranger: s(4) }
    }

    const SHA: &str = "5f0c0b8f43ee9d32e3c6f8c6b3f3df8f4b0e5f6d1c2b3a4958677a8b9c0d1e2f";

    /// A well-formed chain: (job, result, handoff, handoff result).
    fn chain(c: &Cast, specialist_signs: &Signer) -> (Event, Event, Event, Event) {
        let job = c.validator.sign(
            10,
            JOB_REQUEST,
            request_tags("brief-script-delivery/v1", true, &[c.coordinator.public_key()], "brief"),
            "",
        );
        let mut handoff_tags = request_tags("speech-delivery/v1", false, &[c.specialist.public_key()], "script");
        handoff_tags.push(tag(&["e", &job.id.to_hex(), "", "parent"]));
        let handoff = c.coordinator.sign(11, JOB_REQUEST, handoff_tags, "");
        let artifact = tag(&["artifact", "https://files.example/a.txt", SHA]);
        let handoff_result =
            specialist_signs.sign(12, JOB_RESULT, vec![tag(&["e", &handoff.id.to_hex()]), artifact], "delivered");
        let result =
            c.coordinator.sign(13, JOB_RESULT, coordinator_result_tags(&job, &handoff, &handoff_result), "delivered");
        (job, result, handoff, handoff_result)
    }

    #[test]
    fn a_sound_chain_yields_the_signed_artifact() {
        let c = cast();
        let (job, result, handoff, handoff_result) = chain(&c, &c.specialist);
        let artifact =
            check_chain(&Chain { job: &job, result: &result, handoff: &handoff, handoff_result: &handoff_result })
                .unwrap();
        assert_eq!(artifact, ArtifactRef { url: "https://files.example/a.txt".into(), sha256: SHA.into() });
    }

    #[test]
    fn every_broken_link_is_named() {
        let c = cast();
        // The handoff's result from a specialist the handoff does not name.
        let (job, result, handoff, handoff_result) = chain(&c, &c.stranger);
        let broken =
            check_chain(&Chain { job: &job, result: &result, handoff: &handoff, handoff_result: &handoff_result });
        assert!(broken.unwrap_err().contains("does not name"));
        // An altered artifact hash in the coordinator's result.
        let (job, result, handoff, handoff_result) = chain(&c, &c.specialist);
        let mut tags = result.tags.clone();
        tags.iter_mut().filter(|t| t[0] == "artifact").for_each(|t| t[2] = "0".repeat(64));
        let swapped = c.coordinator.sign(13, JOB_RESULT, tags, "delivered");
        let broken =
            check_chain(&Chain { job: &job, result: &swapped, handoff: &handoff, handoff_result: &handoff_result });
        assert!(broken.unwrap_err().contains("differs"));
        // A forged event anywhere.
        let mut forged = handoff_result.clone();
        forged.content = "edited".into();
        let broken = check_chain(&Chain { job: &job, result: &result, handoff: &handoff, handoff_result: &forged });
        assert!(broken.unwrap_err().contains("does not verify"));
        // A handoff that someone other than the answering coordinator posted.
        let foreign = c.stranger.sign(11, JOB_REQUEST, handoff.tags.clone(), "");
        let broken =
            check_chain(&Chain { job: &job, result: &result, handoff: &foreign, handoff_result: &handoff_result });
        assert!(broken.unwrap_err().contains("not posted by the coordinator"));
    }
}

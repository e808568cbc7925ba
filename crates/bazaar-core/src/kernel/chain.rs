//! The hash-chained event ledger: each event commits to the one before it.
//!
//! `hash = sha256(len-prefixed(seq, prev_hash, kind, body_json, authored_by, on_behalf_of, at))`
//! where `body_json` is serde_json's output for the body (object keys sorted).
//! The genesis `prev_hash` is 64 zeros.

use crate::kernel::model::Event;
use bazaar_types::{MemberId, Timestamp};
use sha2::{Digest, Sha256};

pub const GENESIS_HASH: &str = "0000000000000000000000000000000000000000000000000000000000000000";

/// The last event's position; `seq` 0 and the genesis hash for an empty ledger.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ChainHead {
    pub seq: u64,
    pub hash: String,
}

impl ChainHead {
    pub fn genesis() -> ChainHead {
        ChainHead { seq: 0, hash: GENESIS_HASH.to_string() }
    }
}

pub fn event_hash(
    seq: u64,
    prev_hash: &str,
    kind: &str,
    body: &serde_json::Value,
    authored_by: &MemberId,
    on_behalf_of: &MemberId,
    at: Timestamp,
) -> String {
    let body_json = serde_json::to_string(body).expect("a JSON value always serializes");
    let mut hasher = Sha256::new();
    for part in [
        seq.to_string().as_bytes(),
        prev_hash.as_bytes(),
        kind.as_bytes(),
        body_json.as_bytes(),
        authored_by.as_str().as_bytes(),
        on_behalf_of.as_str().as_bytes(),
        at.ms().to_string().as_bytes(),
    ] {
        hasher.update((part.len() as u64).to_be_bytes());
        hasher.update(part);
    }
    hex::encode(hasher.finalize())
}

/// Appends an event after `head` and moves `head` to it.
pub fn append(
    head: &mut ChainHead,
    kind: &str,
    body: serde_json::Value,
    authored_by: &MemberId,
    on_behalf_of: &MemberId,
    at: Timestamp,
) -> Event {
    let seq = head.seq + 1;
    let hash = event_hash(seq, &head.hash, kind, &body, authored_by, on_behalf_of, at);
    let event = Event {
        seq,
        prev_hash: head.hash.clone(),
        hash: hash.clone(),
        kind: kind.to_string(),
        body,
        authored_by: authored_by.clone(),
        on_behalf_of: on_behalf_of.clone(),
        at,
    };
    *head = ChainHead { seq, hash };
    event
}

#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum ChainError {
    #[error("event {seq}: expected seq {expected}")]
    Gap { seq: u64, expected: u64 },
    #[error("event {seq}: prev_hash does not match the previous event's hash")]
    BrokenLink { seq: u64 },
    #[error("event {seq}: hash does not match its contents")]
    BadHash { seq: u64 },
}

/// Checks events in order, continuing from `head`. Call it page by page.
pub fn verify_page(head: &mut ChainHead, events: &[Event]) -> Result<(), ChainError> {
    for event in events {
        let expected = head.seq + 1;
        if event.seq != expected {
            return Err(ChainError::Gap { seq: event.seq, expected });
        }
        if event.prev_hash != head.hash {
            return Err(ChainError::BrokenLink { seq: event.seq });
        }
        let hash = event_hash(
            event.seq,
            &event.prev_hash,
            &event.kind,
            &event.body,
            &event.authored_by,
            &event.on_behalf_of,
            event.at,
        );
        if hash != event.hash {
            return Err(ChainError::BadHash { seq: event.seq });
        }
        *head = ChainHead { seq: event.seq, hash };
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn three() -> Vec<Event> {
        let mut head = ChainHead::genesis();
        let who = MemberId::from("did:key:zA");
        (0..3).map(|i| append(&mut head, "k", json!({"i": i}), &who, &who, Timestamp(i))).collect()
    }

    #[test]
    fn a_clean_chain_verifies() {
        let mut head = ChainHead::genesis();
        assert_eq!(verify_page(&mut head, &three()), Ok(()));
        assert_eq!(head.seq, 3);
    }

    #[test]
    fn any_edit_breaks_the_chain() {
        let mut events = three();
        events[1].body = json!({"i": 99});
        assert_eq!(verify_page(&mut ChainHead::genesis(), &events), Err(ChainError::BadHash { seq: 2 }));
        let mut events = three();
        events.remove(1);
        assert_eq!(verify_page(&mut ChainHead::genesis(), &events), Err(ChainError::Gap { seq: 3, expected: 2 }));
        let mut events = three();
        events[2].prev_hash = GENESIS_HASH.into();
        assert_eq!(verify_page(&mut ChainHead::genesis(), &events), Err(ChainError::BrokenLink { seq: 3 }));
    }
}

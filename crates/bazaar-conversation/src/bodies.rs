//! Bodies: one identity may run several processes at once (a resident
//! daemon and an interactive workbench on one credential, one history). Every
//! body sees the whole stream, but each addressed event is answered by
//! exactly one: the holder of the member's lease, or — when no live lease is
//! held — the body that claims it first, which then holds the lease for
//! `BODY_LEASE_TTL_S`, renewed while it stays connected and released when it
//! goes. The choice is written once per (member, event) and never changes.

use bazaar_types::limits::BODY_LEASE_TTL_S;
use bazaar_types::MemberId;

use crate::engine::{BodyRows, Engine};
pub use crate::model::{Answer, BodyLease};
use crate::store::{ConversationError, Result};

/// A body's name: 1 to `BODY_NAME_BYTES_MAX` of the base64url alphabet
/// (`A-Z a-z 0-9 - _`), so a name drawn at random is one.
pub fn check_body_name(name: &str) -> Result<()> {
    use bazaar_types::limits::BODY_NAME_BYTES_MAX;
    let ok = !name.is_empty()
        && name.len() <= BODY_NAME_BYTES_MAX
        && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_');
    if ok {
        Ok(())
    } else {
        Err(ConversationError::BodyNameInvalid { max: BODY_NAME_BYTES_MAX })
    }
}

pub trait BodyStore {
    /// Who answers the member's event at `position`: decided by the first
    /// claim (the live lease holder, else `body`, which takes the lease) and
    /// the same for every later claim.
    fn claim_answer(&self, member: &MemberId, position: u64, body: &str) -> Result<Answer>;
    /// Extends the lease if `body` holds it; whether it does.
    fn renew_lease(&self, member: &MemberId, body: &str) -> Result<bool>;
    /// Gives the lease up if `body` holds it (the body went away).
    fn release_lease(&self, member: &MemberId, body: &str) -> Result<()>;
    /// The answers chosen for the member after `position`, oldest first.
    fn answers(&self, member: &MemberId, after_position: u64, limit: usize) -> Result<Vec<Answer>>;
}

impl<E: Engine> BodyStore for E {
    fn claim_answer(&self, member: &MemberId, position: u64, body: &str) -> Result<Answer> {
        check_body_name(body)?;
        let (member, body) = (member.clone(), body.to_string());
        self.write(move |tx, now| {
            if let Some(chosen) = tx.load_answer(&member, position)? {
                return Ok(chosen);
            }
            let holder = match tx.load_lease(&member)? {
                Some(lease) if lease.expires_at > now => lease.body,
                _ => {
                    let lease = BodyLease { member: member.clone(), body, expires_at: now.plus_s(BODY_LEASE_TTL_S) };
                    tx.put_lease(&lease)?;
                    lease.body
                }
            };
            let answer = Answer { member, position, body: holder, at: now };
            tx.insert_answer(&answer)?;
            Ok(answer)
        })
    }

    fn renew_lease(&self, member: &MemberId, body: &str) -> Result<bool> {
        let (member, body) = (member.clone(), body.to_string());
        self.write(move |tx, now| match tx.load_lease(&member)? {
            Some(lease) if lease.body == body && lease.expires_at > now => {
                tx.put_lease(&BodyLease { expires_at: now.plus_s(BODY_LEASE_TTL_S), ..lease })?;
                Ok(true)
            }
            _ => Ok(false),
        })
    }

    fn release_lease(&self, member: &MemberId, body: &str) -> Result<()> {
        let (member, body) = (member.clone(), body.to_string());
        self.write(move |tx, _now| {
            if tx.load_lease(&member)?.is_some_and(|lease| lease.body == body) {
                tx.delete_lease(&member)?;
            }
            Ok(())
        })
    }

    fn answers(&self, member: &MemberId, after_position: u64, limit: usize) -> Result<Vec<Answer>> {
        crate::compose::check_page(limit, bazaar_types::limits::INBOX_PAGE_MAX)?;
        self.read(|tx| tx.answers_of(member, after_position, limit))
    }
}

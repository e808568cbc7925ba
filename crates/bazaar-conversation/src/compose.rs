//! The sans-IO half of posting: the checks and resolution a message needs
//! before the store's transaction, with no database in sight.

use bazaar_types::limits::{MESSAGE_BODY_BYTES_MAX, MESSAGE_MENTIONS_MAX};
use bazaar_types::MemberId;

use crate::mentions::mentioned_handles;
use crate::store::{ConversationError, Directory, Result};

/// A body is non-empty and at most `MESSAGE_BODY_BYTES_MAX` bytes.
pub fn check_body(body: &str) -> Result<()> {
    if body.trim().is_empty() {
        return Err(ConversationError::BodyEmpty);
    }
    if body.len() > MESSAGE_BODY_BYTES_MAX {
        return Err(ConversationError::BodyTooLong { len: body.len(), max: MESSAGE_BODY_BYTES_MAX });
    }
    Ok(())
}

/// The distinct members a body mentions, resolved now: a handle renamed later
/// still points at the member it named when the message was sent. Handles
/// nobody holds are plain text.
pub fn resolve_mentions(directory: &dyn Directory, body: &str) -> Result<Vec<MemberId>> {
    resolve_handles(directory, mentioned_handles(body))
}

/// [`resolve_mentions`] for handles listed apart from the body (a sealed
/// body's, which the store cannot read); a leading `@` is optional.
pub fn resolve_handles<'a>(
    directory: &dyn Directory,
    handles: impl IntoIterator<Item = &'a str>,
) -> Result<Vec<MemberId>> {
    let mut members: Vec<MemberId> = Vec::new();
    for handle in handles {
        let handle = handle.strip_prefix('@').unwrap_or(handle);
        let Some(member) = directory.member_by_handle(handle) else { continue };
        if !members.contains(&member) {
            members.push(member);
        }
    }
    if members.len() > MESSAGE_MENTIONS_MAX {
        return Err(ConversationError::TooManyMentions { count: members.len(), max: MESSAGE_MENTIONS_MAX });
    }
    Ok(members)
}

/// At most `MESSAGE_REFS_MAX` references, each of a known kind with an id of
/// 1 to `RECORD_ID_BYTES_MAX` bytes (a ledger reference's id is an event `seq`).
pub fn check_refs(refs: &[crate::model::RecordRef]) -> Result<()> {
    use bazaar_types::limits::{MESSAGE_REFS_MAX, RECORD_ID_BYTES_MAX};
    if refs.len() > MESSAGE_REFS_MAX {
        return Err(ConversationError::RefsInvalid(format!("at most {MESSAGE_REFS_MAX} per message")));
    }
    for record in refs {
        if !crate::model::RECORD_KINDS.contains(&record.kind.as_str()) {
            let kinds = crate::model::RECORD_KINDS.join(", ");
            return Err(ConversationError::RefsInvalid(format!("kind {:?} is not one of {kinds}", record.kind)));
        }
        let id_ok = !record.id.is_empty()
            && record.id.len() <= RECORD_ID_BYTES_MAX
            && record.id.bytes().all(|b| b.is_ascii_graphic() && b != b'/' && b != b'?' && b != b'#');
        if !id_ok || (record.kind == "ledger" && record.id.parse::<u64>().is_err()) {
            return Err(ConversationError::RefsInvalid(format!("{} id {:?} is malformed", record.kind, record.id)));
        }
    }
    Ok(())
}

/// A page size is 1 to `max`; 0 never means "all".
pub fn check_page(asked: usize, max: usize) -> Result<()> {
    if asked == 0 || asked > max {
        return Err(ConversationError::PageInvalid { asked, max });
    }
    Ok(())
}

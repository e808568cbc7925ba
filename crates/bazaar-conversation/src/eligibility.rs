//! The one place that decides who receives a message and whom it wakes; the
//! inbox and the attention query both call these functions and nothing else.

use bazaar_types::MemberId;

use crate::model::{ChannelKind, Membership, Message, MessageKind};

/// A member receives the messages of a channel it is in, posted during this
/// stint: after the log position when it joined, up to the one when it left.
pub fn delivered_to(membership: &Membership, message: &Message) -> bool {
    if membership.channel != message.channel {
        return false;
    }
    if message.position <= membership.joined_after {
        return false;
    }
    match membership.left_after {
        Some(left_after) => message.position <= left_after,
        None => true,
    }
}

/// What counts as unread: something said (text) or a registry notice.
/// System lines, reactions, edits and deletions are delivered but never counted.
pub fn counts_as_unread(message: &Message) -> bool {
    matches!(message.kind, MessageKind::Text | MessageKind::Notice(_))
}

/// A delivered message wakes `me` when it is in a DM, mentions me, or replies
/// to a message of mine. Never my own message, never a system line (presence
/// alone wakes nobody), and in a muted channel only a mention wakes.
pub fn wakes(membership: &Membership, message: &Message, me: &MemberId) -> bool {
    if !delivered_to(membership, message) {
        return false;
    }
    if message.authored_by == *me {
        return false;
    }
    if !counts_as_unread(message) {
        return false;
    }
    if message.mentions.contains(me) {
        return true;
    }
    if membership.muted {
        return false;
    }
    let is_dm = is_dm_channel(message);
    let replies_to_me = message.reply_to.as_ref().is_some_and(|reply| reply.author == *me);
    is_dm || replies_to_me
}

/// The message carries its channel's kind (fixed at creation), so deciding
/// needs no second read.
fn is_dm_channel(message: &Message) -> bool {
    message.channel_kind == ChannelKind::Dm
}

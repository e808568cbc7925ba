//! The channel and message acts, written once for every engine: every [`Engine`] (see `engine`) is a
//! [`ConversationStore`]. The checks, the order of reads and writes, and the use of the one eligibility
//! predicate live here; an engine only says how a row is read or written in its SQL (`ChannelRows`). The
//! other families' acts are `people`, `bodies`, `meter` and `webhooks`, each over its own rows trait.

use crate::compose::{check_body, check_page, check_refs, resolve_handles, resolve_mentions};
use crate::eligibility::{counts_as_unread, delivered_to, wakes};
use crate::engine::{ChannelRows, Engine, Rows};
use crate::mentions::mentioned_handles;
use crate::model::{
    Attention, Channel, ChannelId, ChannelKind, ChannelView, Membership, Message, MessageKind, RecordRef, ReplyTo,
    Role, SystemLine,
};
use crate::sealing::{check_public_key, check_shape, SealedBody, SealingKey};
use crate::store::{
    Addressed, Change, ChangeKind, ConversationError, ConversationStore, Directory, HistoryRange, InboxPage,
    NewMessage, NewRoom, Result,
};
use bazaar_types::limits::{
    AGENT_UNADDRESSED_POSTS_MAX, ATTENTION_SCAN_MAX, CHANNEL_MEMBERS_MAX, CHANNEL_NAME_BYTES_MAX, ETIQUETTE_SCAN,
    HISTORY_PAGE_MAX, INBOX_PAGE_MAX, INBOX_SCAN_MAX, REACTION_BYTES_MAX, ROOM_PAGE_MAX, SEALED_CHANNEL_MEMBERS_MAX,
};
use bazaar_types::{MemberId, Timestamp};

fn require_stint(tx: &impl Rows, channel: &ChannelId, member: &MemberId) -> Result<Membership> {
    tx.current_stint(channel, member)?
        .ok_or_else(|| ConversationError::NotMember { channel: channel.clone(), member: member.clone() })
}

/// The open stint of the member an owner acts on: its absence is about the
/// target, not the caller (`member_not_in_channel`, not `not_member`).
fn require_target_stint(tx: &impl Rows, channel: &ChannelId, member: &MemberId) -> Result<Membership> {
    tx.current_stint(channel, member)?
        .ok_or_else(|| ConversationError::NotInChannel { channel: channel.clone(), member: member.clone() })
}

/// Opens a stint for a member who has none open. Its read mark and mute carry
/// over from the member's previous stint in the channel, if any.
fn open_stint(
    tx: &impl Rows,
    channel: &ChannelId,
    member: &MemberId,
    role: Role,
    now: Timestamp,
) -> Result<Membership> {
    assert!(tx.current_stint(channel, member)?.is_none());
    if tx.open_member_count(channel)? >= CHANNEL_MEMBERS_MAX {
        return Err(ConversationError::ChannelFull(channel.clone()));
    }
    let (muted, read_seq) = tx.previous_stint(channel, member)?.unwrap_or((false, 0));
    let stint = Membership {
        channel: channel.clone(),
        member: member.clone(),
        role,
        joined_at: now,
        joined_after: tx.last_position()?,
        left_at: None,
        left_after: None,
        muted,
        read_seq,
    };
    tx.insert_stint(&stint)?;
    Ok(stint)
}

/// The DM of two members, created (with both as members) on first use.
fn dm_of(tx: &impl Rows, one: &MemberId, two: &MemberId, now: Timestamp) -> Result<Channel> {
    let id = ChannelId::dm(one, two);
    match tx.load_channel(&id) {
        Ok(existing) => return Ok(existing),
        Err(ConversationError::ChannelNotFound(_)) => {}
        Err(other) => return Err(other),
    }
    let mut lacking = Vec::new();
    for member in [one, two] {
        if tx.sealing_key(member)?.is_none() {
            lacking.push(member.clone());
        }
    }
    let sealed = lacking.is_empty();
    let channel = Channel { id, kind: ChannelKind::Dm, name: None, created_by: one.clone(), created_at: now, sealed };
    tx.insert_channel(&channel)?;
    open_stint(tx, &channel.id, one, Role::Member, now)?;
    open_stint(tx, &channel.id, two, Role::Member, now)?;
    write_line(tx, &channel.id, one, SystemLine::Sealing { sealed, lacking }, now)?;
    Ok(channel)
}

/// A sealed post is sealed for exactly the channel's current members, each
/// under the sealing key it has published now.
fn check_recipients(tx: &impl Rows, channel: &ChannelId, sealed: &SealedBody) -> Result<()> {
    let members = tx.current_members(channel)?;
    if sealed.recipients.len() != members.len() {
        return Err(ConversationError::SealedRecipients(format!(
            "the channel has {} members; the body is sealed for {}",
            members.len(),
            sealed.recipients.len()
        )));
    }
    for stint in &members {
        let Some(to) = sealed.recipients.iter().find(|to| to.member == stint.member) else {
            return Err(ConversationError::SealedRecipients(format!("{} is not a recipient", stint.member)));
        };
        let current = tx.sealing_key(&stint.member)?.map(|key| key.public_key);
        if current.as_deref() != Some(to.key.as_str()) {
            return Err(ConversationError::SealedRecipients(format!(
                "{} is sealed for under a key that is not its current one",
                stint.member
            )));
        }
    }
    Ok(())
}

/// Join or add: the checks both share once the caller's right to do it is settled.
fn enter(
    tx: &impl Rows,
    now: Timestamp,
    channel: &ChannelId,
    by: Option<&MemberId>,
    member: &MemberId,
) -> Result<Membership> {
    let found = tx.load_channel(channel)?;
    match (found.kind, by) {
        (ChannelKind::Dm, _) => return Err(ConversationError::DirectMessage(channel.clone())),
        (ChannelKind::PrivateRoom, None) => return Err(ConversationError::PrivateRoom(channel.clone())),
        (_, Some(by)) => {
            if require_stint(tx, channel, by)?.role != Role::Owner {
                return Err(ConversationError::NotOwner(channel.clone()));
            }
        }
        (ChannelKind::PublicRoom, None) => {}
    }
    if tx.current_stint(channel, member)?.is_some() {
        return Err(ConversationError::AlreadyMember { channel: channel.clone(), member: member.clone() });
    }
    if found.sealed {
        if tx.sealing_key(member)?.is_none() {
            return Err(ConversationError::SealingKeyRequired(member.clone()));
        }
        if tx.open_member_count(channel)? >= SEALED_CHANNEL_MEMBERS_MAX {
            return Err(ConversationError::ChannelFull(channel.clone()));
        }
    }
    let stint = open_stint(tx, channel, member, Role::Member, now)?;
    let line = SystemLine::Joined { member: member.clone(), added_by: by.cloned() };
    write_line(tx, channel, by.unwrap_or(member), line, now)?;
    Ok(stint)
}

/// Writes what the server says in a room, delivered like any message (and
/// owed to webhooks); the joiner's stint already includes it, a leaver's
/// still does.
fn write_line(
    tx: &impl Rows,
    channel: &ChannelId,
    actor: &MemberId,
    line: SystemLine,
    now: Timestamp,
) -> Result<Message> {
    let found = tx.load_channel(channel)?;
    append(tx, &found, Draft::line(actor, line), None, now)
}

/// What a new message says; [`append`] numbers it.
struct Draft {
    authored_by: MemberId,
    on_behalf_of: Option<MemberId>,
    handle: Option<String>,
    kind: MessageKind,
    body: String,
    reply_to: Option<ReplyTo>,
    mentions: Vec<MemberId>,
    sealed: Option<SealedBody>,
    signature: Option<String>,
    refs: Vec<RecordRef>,
}

impl Draft {
    /// What the server says for `actor`: the line, and its words as the body.
    fn line(actor: &MemberId, line: SystemLine) -> Draft {
        Draft { body: line.words(), kind: MessageKind::System(line), ..Draft::by(actor) }
    }

    /// An empty text by `author`, to fill in.
    fn by(author: &MemberId) -> Draft {
        Draft {
            authored_by: author.clone(),
            on_behalf_of: None,
            handle: None,
            kind: MessageKind::Text,
            body: String::new(),
            reply_to: None,
            mentions: Vec::new(),
            sealed: None,
            signature: None,
            refs: Vec::new(),
        }
    }
}

/// The one way a message is written: the channel's next `seq` and the next
/// log position, the row (with the author's idempotency key, if any), and
/// the webhook deliveries it owes, all in the caller's transaction.
fn append(tx: &impl Rows, channel: &Channel, draft: Draft, idem_key: Option<&str>, now: Timestamp) -> Result<Message> {
    let (seq, position) = tx.next_numbers(&channel.id)?;
    let message = Message {
        seq,
        position,
        channel: channel.id.clone(),
        channel_kind: channel.kind,
        authored_by: draft.authored_by,
        on_behalf_of: draft.on_behalf_of,
        handle: draft.handle,
        kind: draft.kind,
        body: draft.body,
        reply_to: draft.reply_to,
        mentions: draft.mentions,
        at: now,
        sealed: draft.sealed,
        signature: draft.signature,
        refs: draft.refs,
    };
    tx.insert_message(&message, idem_key)?;
    tx.enqueue_deliveries(&message.channel, position, now)?;
    Ok(message)
}

/// [`append`] once per `key` of the draft's author: the message written under
/// it before, if any (`false`), else a new one (`true`).
fn append_once(tx: &impl Rows, channel: &Channel, draft: Draft, key: &str, now: Timestamp) -> Result<(Message, bool)> {
    if let Some(first) = tx.message_by_idem(&draft.authored_by, key)? {
        return Ok((first, false));
    }
    Ok((append(tx, channel, draft, Some(key), now)?, true))
}

/// [`append`] by a member of the channel, whose read mark then moves to its
/// own message (posting says the author has read the channel up to it).
fn append_read(
    tx: &impl Rows,
    channel: &Channel,
    mut author: Membership,
    draft: Draft,
    idem_key: Option<&str>,
    now: Timestamp,
) -> Result<Message> {
    let message = append(tx, channel, draft, idem_key, now)?;
    author.read_seq = message.seq;
    tx.update_open_stint(&author)?;
    Ok(message)
}

/// Refuses when `member` is the only owner of a room others are still in.
fn check_not_last_owner(tx: &impl Rows, channel: &ChannelId, member: &MemberId) -> Result<()> {
    let members = tx.current_members(channel)?;
    let owners = members.iter().filter(|m| m.role == Role::Owner).count();
    let is_owner = members.iter().any(|m| m.member == *member && m.role == Role::Owner);
    if is_owner && owners == 1 && members.len() > 1 {
        return Err(ConversationError::LastOwner(channel.clone()));
    }
    Ok(())
}

/// Writes `line`, then closes the member's stint after it (so the member's
/// own inbox ends with it).
fn close_stint(
    tx: &impl Rows,
    channel: &ChannelId,
    actor: &MemberId,
    member: &MemberId,
    line: SystemLine,
    now: Timestamp,
) -> Result<Membership> {
    let mut stint = require_stint(tx, channel, member)?;
    let written = write_line(tx, channel, actor, line, now)?;
    stint.left_at = Some(now);
    stint.left_after = Some(written.position);
    tx.update_open_stint(&stint)?;
    Ok(stint)
}

/// The room an owner acts in: not a DM, and `by` an owner of it now.
fn require_owner(tx: &impl Rows, channel: &ChannelId, by: &MemberId) -> Result<()> {
    if tx.load_channel(channel)?.kind == ChannelKind::Dm {
        return Err(ConversationError::DirectMessage(channel.clone()));
    }
    if require_stint(tx, channel, by)?.role != Role::Owner {
        return Err(ConversationError::NotOwner(channel.clone()));
    }
    Ok(())
}

/// The text message a change points at, checked for the change.
fn change_target(tx: &impl Rows, change: &Change) -> Result<Message> {
    let seq = change.target;
    let target = tx.load_message(&change.channel, seq)?.ok_or(ConversationError::MessageNotFound { seq })?;
    if target.kind != MessageKind::Text {
        return Err(ConversationError::TargetInvalid { seq });
    }
    let by_author = target.authored_by == change.author;
    match change.what {
        ChangeKind::React { .. } => {}
        ChangeKind::Edit { .. } | ChangeKind::SealedEdit { .. } if !by_author => {
            return Err(ConversationError::NotAuthor { seq })
        }
        ChangeKind::Delete if !by_author => {
            if require_stint(tx, &change.channel, &change.author)?.role != Role::Owner {
                return Err(ConversationError::NotAuthor { seq });
            }
        }
        ChangeKind::Edit { .. } | ChangeKind::SealedEdit { .. } | ChangeKind::Delete => {}
    }
    // Who may change it comes before whether it still can be: one who may not
    // is told so, not that the message was deleted.
    let changes = tx.messages_referring(&change.channel, seq)?;
    if changes.iter().any(|m| matches!(m.kind, MessageKind::Deletion { .. })) {
        return Err(ConversationError::MessageDeleted { seq });
    }
    Ok(target)
}

/// An agent's text posts to a room since it was last addressed there (a
/// mention of it, or a reply to one of its messages), newest first over the
/// last `ETIQUETTE_SCAN` messages: at `AGENT_UNADDRESSED_POSTS_MAX` it waits.
fn check_etiquette(tx: &impl Rows, channel: &ChannelId, agent: &MemberId) -> Result<()> {
    let mut unaddressed = 0;
    for message in tx.channel_messages(channel, HistoryRange::Latest, ETIQUETTE_SCAN)? {
        let to_agent = message.authored_by != *agent
            && (message.mentions.contains(agent) || message.reply_to.as_ref().is_some_and(|r| r.author == *agent));
        if to_agent {
            break;
        }
        if message.authored_by == *agent && message.kind == MessageKind::Text {
            unaddressed += 1;
        }
    }
    if unaddressed >= AGENT_UNADDRESSED_POSTS_MAX {
        return Err(ConversationError::EtiquetteLimit { max: AGENT_UNADDRESSED_POSTS_MAX });
    }
    Ok(())
}

/// A reaction is a short token: 1 to `REACTION_BYTES_MAX` bytes, no whitespace.
fn check_reaction(emoji: &str) -> Result<()> {
    if emoji.is_empty() || emoji.len() > REACTION_BYTES_MAX || emoji.chars().any(char::is_whitespace) {
        return Err(ConversationError::ReactionInvalid { len: emoji.len(), max: REACTION_BYTES_MAX });
    }
    Ok(())
}

/// Changes the member's open stint in the channel and writes it back.
fn change_stint(
    tx: &impl Rows,
    channel: &ChannelId,
    member: &MemberId,
    change: impl FnOnce(&mut Membership),
) -> Result<Membership> {
    tx.load_channel(channel)?;
    let mut stint = require_stint(tx, channel, member)?;
    change(&mut stint);
    tx.update_open_stint(&stint)?;
    Ok(stint)
}

fn inbox_scan(tx: &impl Rows, member: &MemberId, after_position: u64, limit: usize) -> Result<InboxPage> {
    let stints = tx.stints_of(member, false)?;
    let mut page = InboxPage { messages: Vec::new(), next_after: after_position };
    for message in tx.inbox_candidates(member, after_position, INBOX_SCAN_MAX)? {
        assert!(message.position > page.next_after);
        page.next_after = message.position;
        if stints.iter().any(|stint| delivered_to(stint, &message)) {
            page.messages.push(message);
            if page.messages.len() == limit {
                break;
            }
        }
    }
    Ok(page)
}

fn attention_of(tx: &impl Rows, member: &MemberId) -> Result<Vec<Attention>> {
    let mut found = Vec::new();
    for stint in tx.stints_of(member, true)? {
        let mut candidates = tx.messages_after(&stint.channel, stint.read_seq, ATTENTION_SCAN_MAX + 1)?;
        let capped = candidates.len() > ATTENTION_SCAN_MAX;
        candidates.truncate(ATTENTION_SCAN_MAX);
        let delivered = candidates.iter().filter(|message| delivered_to(&stint, message) && counts_as_unread(message));
        let unread = delivered.clone().count() as u64;
        let waking = delivered.filter(|message| wakes(&stint, message, member)).count() as u64;
        if unread > 0 {
            found.push(Attention { channel: stint.channel.clone(), unread, wakes: waking, capped });
        }
    }
    found.sort_by(|a, b| a.channel.cmp(&b.channel));
    Ok(found)
}

impl<E: Engine> ConversationStore for E {
    fn sqlite_memory(&self) -> Option<bazaar_types::SqliteMemory> {
        self.memory()
    }

    fn create_room(&self, room: NewRoom) -> Result<Channel> {
        if room.name.trim().is_empty() || room.name.len() > CHANNEL_NAME_BYTES_MAX {
            return Err(ConversationError::NameInvalid { len: room.name.len(), max: CHANNEL_NAME_BYTES_MAX });
        }
        if room.sealed && !room.private {
            return Err(ConversationError::SealedPublicRoom);
        }
        let id = ChannelId::random(self.entropy());
        self.write(move |tx, now| {
            let kind = if room.private { ChannelKind::PrivateRoom } else { ChannelKind::PublicRoom };
            let sealed = room.sealed && tx.sealing_key(&room.owner)?.is_some();
            let owner = room.owner;
            let channel =
                Channel { id, kind, name: Some(room.name), created_by: owner.clone(), created_at: now, sealed };
            tx.insert_channel(&channel)?;
            open_stint(tx, &channel.id, &owner, Role::Owner, now)?;
            if room.sealed {
                let lacking = if sealed { Vec::new() } else { vec![owner.clone()] };
                write_line(tx, &channel.id, &owner, SystemLine::Sealing { sealed, lacking }, now)?;
            }
            Ok(channel)
        })
    }

    fn open_dm(&self, one: &MemberId, two: &MemberId) -> Result<Channel> {
        if one == two {
            return Err(ConversationError::DmWithSelf);
        }
        let (one, two) = (one.clone(), two.clone());
        self.write(move |tx, now| dm_of(tx, &one, &two, now))
    }

    fn notify(&self, from: &MemberId, notices: Vec<Addressed>) -> Result<Vec<Message>> {
        if notices.iter().any(|n| n.to == *from) {
            return Err(ConversationError::DmWithSelf);
        }
        let from = from.clone();
        self.write(move |tx, now| {
            let mut written = Vec::with_capacity(notices.len());
            for Addressed { to, notice, body, key } in notices {
                if let Some(first) = tx.message_by_idem(&from, &key)? {
                    written.push(first); // before dm_of: a notice already told opens nothing
                    continue;
                }
                let channel = dm_of(tx, &from, &to, now)?;
                let draft = Draft { kind: MessageKind::Notice(notice), body, mentions: vec![to], ..Draft::by(&from) };
                written.push(append(tx, &channel, draft, Some(&key), now)?);
            }
            Ok(written)
        })
    }

    fn record_room(
        &self,
        by: &MemberId,
        record: RecordRef,
        name: String,
        members: Vec<MemberId>,
    ) -> Result<(Channel, Vec<MemberId>)> {
        if name.trim().is_empty() || name.len() > CHANNEL_NAME_BYTES_MAX {
            return Err(ConversationError::NameInvalid { len: name.len(), max: CHANNEL_NAME_BYTES_MAX });
        }
        let (id, by) = (ChannelId::of_record(&record), by.clone());
        self.write(move |tx, now| {
            let channel = match tx.load_channel(&id) {
                Ok(found) => found,
                Err(ConversationError::ChannelNotFound(_)) => {
                    let kind = ChannelKind::PrivateRoom;
                    let channel =
                        Channel { id, kind, name: Some(name), created_by: by.clone(), created_at: now, sealed: false };
                    tx.insert_channel(&channel)?;
                    open_stint(tx, &channel.id, &by, Role::Owner, now)?;
                    channel
                }
                Err(other) => return Err(other),
            };
            let mut added = Vec::new();
            for member in members.into_iter().filter(|member| *member != by) {
                if tx.current_stint(&channel.id, &member)?.is_none() {
                    open_stint(tx, &channel.id, &member, Role::Member, now)?;
                    let line = SystemLine::Joined { member: member.clone(), added_by: Some(by.clone()) };
                    write_line(tx, &channel.id, &by, line, now)?;
                    added.push(member);
                }
            }
            Ok((channel, added))
        })
    }

    fn record_line(&self, by: &MemberId, channel: &ChannelId, line: SystemLine, key: String) -> Result<Message> {
        let (by, channel) = (by.clone(), channel.clone());
        self.write(move |tx, now| {
            let found = tx.load_channel(&channel)?;
            if require_stint(tx, &channel, &by)?.role != Role::Owner {
                return Err(ConversationError::NotOwner(channel.clone()));
            }
            Ok(append_once(tx, &found, Draft::line(&by, line), &key, now)?.0)
        })
    }

    fn renamed(&self, member: &MemberId, from: String, to: String, key: String) -> Result<Vec<Message>> {
        let member = member.clone();
        self.write(move |tx, now| {
            let mut written = Vec::new();
            for stint in tx.stints_of(&member, true)? {
                let channel = tx.load_channel(&stint.channel)?;
                let line = SystemLine::Renamed { member: member.clone(), from: from.clone(), to: to.clone() };
                let key = format!("{key}:{}", stint.channel);
                if let (message, true) = append_once(tx, &channel, Draft::line(&member, line), &key, now)? {
                    written.push(message);
                }
            }
            Ok(written)
        })
    }

    fn counter(&self, name: &str) -> Result<u64> {
        self.read(|tx| tx.counter(name))
    }

    fn set_counter(&self, name: &str, value: u64) -> Result<()> {
        let name = name.to_string();
        self.write(move |tx, _now| tx.set_counter(&name, value))
    }

    fn join(&self, channel: &ChannelId, member: &MemberId) -> Result<Membership> {
        let (channel, member) = (channel.clone(), member.clone());
        self.write(move |tx, now| enter(tx, now, &channel, None, &member))
    }

    fn add_member(&self, channel: &ChannelId, by: &MemberId, member: &MemberId) -> Result<Membership> {
        let (channel, by, member) = (channel.clone(), by.clone(), member.clone());
        self.write(move |tx, now| enter(tx, now, &channel, Some(&by), &member))
    }

    fn leave(&self, channel: &ChannelId, member: &MemberId) -> Result<Membership> {
        let (channel, member) = (channel.clone(), member.clone());
        self.write(move |tx, now| {
            if tx.load_channel(&channel)?.kind == ChannelKind::Dm {
                return Err(ConversationError::DirectMessage(channel.clone()));
            }
            require_stint(tx, &channel, &member)?;
            check_not_last_owner(tx, &channel, &member)?;
            close_stint(tx, &channel, &member, &member, SystemLine::Left { member: member.clone() }, now)
        })
    }

    fn remove_member(&self, channel: &ChannelId, by: &MemberId, member: &MemberId) -> Result<Membership> {
        if by == member {
            return Err(ConversationError::RemoveSelf);
        }
        let (channel, by, member) = (channel.clone(), by.clone(), member.clone());
        self.write(move |tx, now| {
            require_owner(tx, &channel, &by)?;
            require_target_stint(tx, &channel, &member)?;
            let line = SystemLine::Removed { member: member.clone(), by: by.clone() };
            close_stint(tx, &channel, &by, &member, line, now)
        })
    }

    fn set_role(&self, channel: &ChannelId, by: &MemberId, member: &MemberId, role: Role) -> Result<Membership> {
        let (channel, by, member) = (channel.clone(), by.clone(), member.clone());
        self.write(move |tx, now| {
            require_owner(tx, &channel, &by)?;
            let mut stint = require_target_stint(tx, &channel, &member)?;
            if stint.role == role {
                return Ok(stint);
            }
            if role == Role::Member {
                check_not_last_owner(tx, &channel, &member)?;
            }
            stint.role = role;
            tx.update_open_stint(&stint)?;
            let line = SystemLine::RoleChanged { member: member.clone(), role, by: by.clone() };
            write_line(tx, &channel, &by, line, now)?;
            Ok(stint)
        })
    }

    fn change(&self, directory: &dyn Directory, change: Change) -> Result<Message> {
        let (mut sealed, mut signature) = (None, None);
        let (kind, body, mentions) = match &change.what {
            ChangeKind::React { emoji, removed } => {
                check_reaction(emoji)?;
                (MessageKind::Reaction { to: change.target, removed: *removed }, emoji.clone(), Vec::new())
            }
            ChangeKind::Edit { body } => {
                check_body(body)?;
                (MessageKind::Edit { of: change.target }, body.clone(), resolve_mentions(directory, body)?)
            }
            ChangeKind::SealedEdit { sealed: envelope, signature: signed, mentions } => {
                check_shape(envelope).map_err(|refused| ConversationError::SealedInvalid(refused.to_string()))?;
                (sealed, signature) = (Some(envelope.clone()), Some(signed.clone()));
                let mentioned = resolve_handles(directory, mentions.iter().map(String::as_str))?;
                (MessageKind::Edit { of: change.target }, String::new(), mentioned)
            }
            ChangeKind::Delete => (MessageKind::Deletion { of: change.target }, String::new(), Vec::new()),
        };
        let handle = directory.handle_of(&change.author);
        self.write(move |tx, now| {
            let channel = tx.load_channel(&change.channel)?;
            let author = require_stint(tx, &channel.id, &change.author)?;
            match (&change.what, channel.sealed) {
                (ChangeKind::Edit { .. }, true) => return Err(ConversationError::SealedRequired(channel.id.clone())),
                (ChangeKind::SealedEdit { .. }, false) => return Err(ConversationError::NotSealed(channel.id.clone())),
                (ChangeKind::SealedEdit { sealed, .. }, true) => check_recipients(tx, &channel.id, sealed)?,
                _ => {}
            }
            change_target(tx, &change)?;
            let draft = Draft {
                on_behalf_of: change.on_behalf_of.clone(),
                handle,
                kind,
                body,
                mentions,
                sealed,
                signature,
                ..Draft::by(&change.author)
            };
            append_read(tx, &channel, author, draft, None, now)
        })
    }

    fn set_muted(&self, channel: &ChannelId, member: &MemberId, muted: bool) -> Result<Membership> {
        let (channel, member) = (channel.clone(), member.clone());
        self.write(move |tx, _now| change_stint(tx, &channel, &member, |stint| stint.muted = muted))
    }

    fn post(&self, directory: &dyn Directory, new: NewMessage) -> Result<Message> {
        match &new.sealed {
            None => check_body(&new.body)?,
            Some(sealed) => {
                if !new.body.is_empty() {
                    return Err(ConversationError::SealedInvalid("a sealed post carries no plaintext body".into()));
                }
                check_shape(sealed).map_err(|refused| ConversationError::SealedInvalid(refused.to_string()))?;
                if new.signature.is_none() {
                    return Err(ConversationError::SignatureRequired);
                }
            }
        }
        check_refs(&new.refs)?;
        let handles = mentioned_handles(&new.body).into_iter().chain(new.mentions.iter().map(String::as_str));
        let mentions = resolve_handles(directory, handles)?;
        let handle = directory.handle_of(&new.authored_by);
        self.write(move |tx, now| {
            if let Some(key) = &new.idem_key {
                if let Some(first) = tx.message_by_idem(&new.authored_by, key)? {
                    // A sealed retry is sealed afresh (a new content key and nonce), and
                    // the store cannot read either body: the key alone says it is the same post.
                    let same_content = match (&first.sealed, &new.sealed) {
                        (None, None) => first.body == new.body,
                        (Some(_), Some(_)) => true,
                        _ => false,
                    };
                    let same = first.channel == new.channel
                        && same_content
                        && first.reply_to.as_ref().map(|r| r.seq) == new.reply_to;
                    return if same { Ok(first) } else { Err(ConversationError::IdempotencyConflict) };
                }
            }
            let channel = tx.load_channel(&new.channel)?;
            let author = require_stint(tx, &channel.id, &new.authored_by)?;
            match (channel.sealed, &new.sealed) {
                (true, None) => return Err(ConversationError::SealedRequired(channel.id.clone())),
                (false, Some(_)) => return Err(ConversationError::NotSealed(channel.id.clone())),
                (true, Some(sealed)) => check_recipients(tx, &channel.id, sealed)?,
                (false, None) => {}
            }
            if new.by_agent && channel.kind != ChannelKind::Dm {
                check_etiquette(tx, &channel.id, &new.authored_by)?;
            }
            let reply_to = match new.reply_to {
                Some(seq) => Some(ReplyTo { seq, author: tx.reply_author(&channel.id, seq)? }),
                None => None,
            };
            let draft = Draft {
                on_behalf_of: new.on_behalf_of,
                handle,
                body: new.body,
                reply_to,
                mentions,
                sealed: new.sealed,
                signature: new.signature,
                refs: new.refs,
                ..Draft::by(&new.authored_by)
            };
            append_read(tx, &channel, author, draft, new.idem_key.as_deref(), now)
        })
    }

    fn history(
        &self,
        channel: &ChannelId,
        reader: &MemberId,
        range: HistoryRange,
        limit: usize,
    ) -> Result<Vec<Message>> {
        check_page(limit, HISTORY_PAGE_MAX)?;
        self.read(|tx| {
            tx.load_channel(channel)?;
            require_stint(tx, channel, reader)?;
            let newest_first = !matches!(range, HistoryRange::After(_));
            let mut page = tx.channel_messages(channel, range, limit)?;
            if newest_first {
                page.reverse();
            }
            Ok(page)
        })
    }

    fn inbox(&self, member: &MemberId, after_position: u64, limit: usize) -> Result<InboxPage> {
        check_page(limit, INBOX_PAGE_MAX)?;
        self.read(|tx| inbox_scan(tx, member, after_position, limit))
    }

    fn log_head(&self) -> Result<u64> {
        self.read(|tx| tx.last_position())
    }

    fn mark_read(&self, member: &MemberId, channel: &ChannelId, seq: u64) -> Result<Membership> {
        let (channel, member) = (channel.clone(), member.clone());
        self.write(move |tx, _now| {
            tx.load_channel(&channel)?;
            if seq > tx.last_seq(&channel)? {
                require_stint(tx, &channel, &member)?;
                return Err(ConversationError::SeqOutOfRange { seq });
            }
            change_stint(tx, &channel, &member, |stint| stint.read_seq = stint.read_seq.max(seq))
        })
    }

    fn attention(&self, member: &MemberId) -> Result<Vec<Attention>> {
        self.read(|tx| attention_of(tx, member))
    }

    fn channel(&self, channel: &ChannelId, reader: &MemberId) -> Result<ChannelView> {
        self.read(|tx| {
            let found = tx.load_channel(channel)?;
            if found.kind != ChannelKind::PublicRoom {
                require_stint(tx, channel, reader)?;
            }
            Ok(ChannelView { channel: found, members: tx.current_members(channel)? })
        })
    }

    fn public_rooms(&self, after: Option<&ChannelId>, limit: usize) -> Result<Vec<Channel>> {
        check_page(limit, ROOM_PAGE_MAX)?;
        self.read(|tx| tx.public_rooms(after, limit))
    }

    fn memberships_of(&self, member: &MemberId) -> Result<Vec<Membership>> {
        self.read(|tx| tx.stints_of(member, false))
    }

    fn publish_sealing_key(&self, key: SealingKey) -> Result<SealingKey> {
        check_public_key(&key.public_key).map_err(|refused| ConversationError::SealedInvalid(refused.to_string()))?;
        self.write(move |tx, now| {
            let key = SealingKey { published_at: now, ..key };
            tx.put_sealing_key(&key)?;
            Ok(key)
        })
    }

    fn sealing_key(&self, member: &MemberId) -> Result<Option<SealingKey>> {
        self.read(|tx| tx.sealing_key(member))
    }

    fn sealing_keys(&self, channel: &ChannelId, reader: &MemberId) -> Result<Vec<(MemberId, Option<SealingKey>)>> {
        self.read(|tx| {
            tx.load_channel(channel)?;
            require_stint(tx, channel, reader)?;
            let mut keys = Vec::new();
            for stint in tx.current_members(channel)? {
                let key = tx.sealing_key(&stint.member)?;
                keys.push((stint.member, key));
            }
            Ok(keys)
        })
    }
}

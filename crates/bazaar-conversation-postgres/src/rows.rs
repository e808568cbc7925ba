//! Rows to model values and the reads and writes every act shares, each
//! inside the caller's transaction.

use bazaar_conversation::model::{Channel, ChannelId, ChannelKind, Membership, Message, ReplyTo, Role};
use bazaar_conversation::ConversationError;
use bazaar_types::{MemberId, Timestamp};
use tokio_postgres::Row;

use crate::tx::{big, col, count, unavailable, Params, Result, Tx};

const CHANNEL_COLUMNS: &str = "id, kind, name, created_by, created_at, sealed";
const MEMBERSHIP_COLUMNS: &str = "channel, member, role, joined_at, joined_after, left_at, left_after, muted, read_seq";
const MESSAGE_SELECT: &str = "SELECT m.channel, c.kind, m.seq, m.position, m.authored_by, m.on_behalf_of, m.handle, \
     m.kind, m.body, m.reply_seq, m.reply_author, m.mentions, m.at, m.sealed, m.signature, m.refs \
     FROM messages m JOIN channels c ON c.id = m.channel";

fn corrupt(what: &str) -> ConversationError {
    unavailable(format!("unreadable {what}"))
}

fn channel_from_row(row: &Row) -> Result<Channel> {
    let kind: String = col(row, 1)?;
    Ok(Channel {
        id: ChannelId(col(row, 0)?),
        kind: ChannelKind::parse(&kind).ok_or_else(|| corrupt("channels.kind"))?,
        name: col(row, 2)?,
        created_by: MemberId(col(row, 3)?),
        created_at: Timestamp(col(row, 4)?),
        sealed: col(row, 5)?,
    })
}

fn membership_from_row(row: &Row) -> Result<Membership> {
    let role: String = col(row, 2)?;
    let left_after: Option<i64> = col(row, 6)?;
    Ok(Membership {
        channel: ChannelId(col(row, 0)?),
        member: MemberId(col(row, 1)?),
        role: Role::parse(&role).ok_or_else(|| corrupt("memberships.role"))?,
        joined_at: Timestamp(col(row, 3)?),
        joined_after: count(row, 4)?,
        left_at: col::<Option<i64>>(row, 5)?.map(Timestamp),
        left_after: left_after
            .map(|after| u64::try_from(after).map_err(|_| corrupt("memberships.left_after")))
            .transpose()?,
        muted: col(row, 7)?,
        read_seq: count(row, 8)?,
    })
}

fn message_from_row(row: &Row) -> Result<Message> {
    let channel_kind: String = col(row, 1)?;
    let kind: String = col(row, 7)?;
    let mentions: String = col(row, 11)?;
    let reply_seq: Option<i64> = col(row, 9)?;
    let reply_author: Option<String> = col(row, 10)?;
    let reply_to = match reply_seq.zip(reply_author) {
        Some((seq, author)) => Some(ReplyTo {
            seq: u64::try_from(seq).map_err(|_| corrupt("messages.reply_seq"))?,
            author: MemberId(author),
        }),
        None => None,
    };
    Ok(Message {
        channel: ChannelId(col(row, 0)?),
        channel_kind: ChannelKind::parse(&channel_kind).ok_or_else(|| corrupt("channels.kind"))?,
        seq: count(row, 2)?,
        position: count(row, 3)?,
        authored_by: MemberId(col(row, 4)?),
        on_behalf_of: col::<Option<String>>(row, 5)?.map(MemberId),
        handle: col(row, 6)?,
        kind: serde_json::from_str(&kind).map_err(|_| corrupt("messages.kind"))?,
        body: col(row, 8)?,
        reply_to,
        mentions: serde_json::from_str(&mentions).map_err(|_| corrupt("messages.mentions"))?,
        at: Timestamp(col(row, 12)?),
        sealed: match col::<Option<String>>(row, 13)? {
            Some(text) => Some(serde_json::from_str(&text).map_err(|_| corrupt("messages.sealed"))?),
            None => None,
        },
        signature: col(row, 14)?,
        refs: match col::<Option<String>>(row, 15)? {
            Some(text) => serde_json::from_str(&text).map_err(|_| corrupt("messages.refs"))?,
            None => Vec::new(),
        },
    })
}

// Reads inside a transaction.

pub(crate) fn load_channel(tx: &Tx<'_>, id: &ChannelId) -> Result<Channel> {
    let sql = format!("SELECT {CHANNEL_COLUMNS} FROM channels WHERE id = $1");
    match tx.query_opt(&sql, &[&id.as_str()])? {
        Some(row) => channel_from_row(&row),
        None => Err(ConversationError::ChannelNotFound(id.clone())),
    }
}

pub(crate) fn current_stint(tx: &Tx<'_>, channel: &ChannelId, member: &MemberId) -> Result<Option<Membership>> {
    let sql = format!(
        "SELECT {MEMBERSHIP_COLUMNS} FROM memberships WHERE channel = $1 AND member = $2 AND left_after IS NULL"
    );
    tx.query_opt(&sql, &[&channel.as_str(), &member.as_str()])?.as_ref().map(membership_from_row).transpose()
}

pub(crate) fn stints_of(tx: &Tx<'_>, member: &MemberId, only_current: bool) -> Result<Vec<Membership>> {
    let filter = if only_current { "AND left_after IS NULL" } else { "" };
    let sql = format!("SELECT {MEMBERSHIP_COLUMNS} FROM memberships WHERE member = $1 {filter} ORDER BY stint");
    tx.query(&sql, &[&member.as_str()])?.iter().map(membership_from_row).collect()
}

pub(crate) fn current_members(tx: &Tx<'_>, channel: &ChannelId) -> Result<Vec<Membership>> {
    let sql = format!(
        "SELECT {MEMBERSHIP_COLUMNS} FROM memberships WHERE channel = $1 AND left_after IS NULL ORDER BY stint"
    );
    tx.query(&sql, &[&channel.as_str()])?.iter().map(membership_from_row).collect()
}

pub(crate) fn public_rooms(tx: &Tx<'_>, after: Option<&ChannelId>, limit: usize) -> Result<Vec<Channel>> {
    let sql =
        format!("SELECT {CHANNEL_COLUMNS} FROM channels WHERE kind = 'public_room' AND id > $1 ORDER BY id LIMIT $2");
    let after = after.map(ChannelId::as_str).unwrap_or("");
    tx.query(&sql, &[&after, &big(limit as u64)])?.iter().map(channel_from_row).collect()
}

/// The last position handed out. Inside a write it was read under the head
/// row's lock (see `PostgresConversationStore::write`), so no post is in flight.
pub(crate) fn last_position(tx: &Tx<'_>) -> Result<u64> {
    count(&tx.query_one("SELECT last_position FROM conversation_head", &[])?, 0)
}

pub(crate) fn last_seq(tx: &Tx<'_>, channel: &ChannelId) -> Result<u64> {
    count(&tx.query_one("SELECT last_seq FROM channels WHERE id = $1", &[&channel.as_str()])?, 0)
}

pub(crate) fn query_messages(tx: &Tx<'_>, clause: &str, params: Params<'_>) -> Result<Vec<Message>> {
    let sql = format!("{MESSAGE_SELECT} {clause}");
    tx.query(&sql, params)?.iter().map(message_from_row).collect()
}

pub(crate) fn reply_author(tx: &Tx<'_>, channel: &ChannelId, seq: u64) -> Result<MemberId> {
    let row = tx.query_opt(
        "SELECT authored_by FROM messages WHERE channel = $1 AND seq = $2",
        &[&channel.as_str(), &big(seq)],
    )?;
    match row {
        Some(row) => Ok(MemberId(col(&row, 0)?)),
        None => Err(ConversationError::ReplyNotFound { seq }),
    }
}

pub(crate) fn previous_stint(tx: &Tx<'_>, channel: &ChannelId, member: &MemberId) -> Result<Option<(bool, u64)>> {
    let row = tx.query_opt(
        "SELECT muted, read_seq FROM memberships WHERE channel = $1 AND member = $2 ORDER BY stint DESC LIMIT 1",
        &[&channel.as_str(), &member.as_str()],
    )?;
    row.map(|row| Ok((col(&row, 0)?, count(&row, 1)?))).transpose()
}

pub(crate) fn open_member_count(tx: &Tx<'_>, channel: &ChannelId) -> Result<usize> {
    let row = tx.query_one(
        "SELECT COUNT(*) FROM memberships WHERE channel = $1 AND left_after IS NULL",
        &[&channel.as_str()],
    )?;
    Ok(count(&row, 0)? as usize)
}

// Writes inside a transaction.

pub(crate) fn insert_stint(tx: &Tx<'_>, stint: &Membership) -> Result<()> {
    tx.execute(
        "INSERT INTO memberships (channel, member, role, joined_at, joined_after, muted, read_seq)
         VALUES ($1, $2, $3, $4, $5, $6, $7)",
        &[
            &stint.channel.as_str(),
            &stint.member.as_str(),
            &stint.role.as_str(),
            &stint.joined_at.0,
            &big(stint.joined_after),
            &stint.muted,
            &big(stint.read_seq),
        ],
    )?;
    Ok(())
}

pub(crate) fn insert_channel(tx: &Tx<'_>, channel: &Channel) -> Result<()> {
    tx.execute(
        "INSERT INTO channels (id, kind, name, created_by, created_at, sealed) VALUES ($1, $2, $3, $4, $5, $6)",
        &[
            &channel.id.as_str(),
            &channel.kind.as_str(),
            &channel.name,
            &channel.created_by.as_str(),
            &channel.created_at.0,
            &channel.sealed,
        ],
    )?;
    Ok(())
}

/// Take the next `seq` of the channel and the next log position, bumping both
/// sequence rows; the caller holds the head row's lock already.
pub(crate) fn next_numbers(tx: &Tx<'_>, channel: &ChannelId) -> Result<(u64, u64)> {
    let seq = tx.query_one(
        "UPDATE channels SET last_seq = last_seq + 1 WHERE id = $1 RETURNING last_seq",
        &[&channel.as_str()],
    )?;
    let position =
        tx.query_one("UPDATE conversation_head SET last_position = last_position + 1 RETURNING last_position", &[])?;
    Ok((count(&seq, 0)?, count(&position, 0)?))
}

pub(crate) fn insert_message(tx: &Tx<'_>, message: &Message, idem_key: Option<&str>) -> Result<()> {
    let kind = serde_json::to_string(&message.kind).map_err(unavailable)?;
    let mentions = serde_json::to_string(&message.mentions).map_err(unavailable)?;
    let sealed = message.sealed.as_ref().map(serde_json::to_string).transpose().map_err(unavailable)?;
    let refs =
        (!message.refs.is_empty()).then(|| serde_json::to_string(&message.refs)).transpose().map_err(unavailable)?;
    tx.execute(
        "INSERT INTO messages (position, channel, seq, authored_by, on_behalf_of, handle, kind, body,
                               reply_seq, reply_author, mentions, at, ref_seq, idem_key, sealed, signature, refs)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17)",
        &[
            &big(message.position),
            &message.channel.as_str(),
            &big(message.seq),
            &message.authored_by.as_str(),
            &message.on_behalf_of.as_ref().map(MemberId::as_str),
            &message.handle,
            &kind,
            &message.body,
            &message.reply_to.as_ref().map(|r| big(r.seq)),
            &message.reply_to.as_ref().map(|r| r.author.as_str()),
            &mentions,
            &message.at.0,
            &message.kind.refers_to().map(big),
            &idem_key,
            &sealed,
            &message.signature,
            &refs,
        ],
    )?;
    Ok(())
}

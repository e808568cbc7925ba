//! The conversation plane as the server holds it: the store (blocking, so
//! every call runs on the blocking pool, never on a request's task), the
//! log's head, which channels each member's live streams follow (a post
//! wakes only the streams of members following its channel), who is
//! listening by which transport, and the mapping of the store's refusals to
//! problem+json.

use crate::cluster::Signal;
use crate::problem::Problem;
use axum::http::StatusCode;
use bazaar_conversation::meter::{day_of, Metered};
use bazaar_conversation::{ChannelId, ConversationError, Message, PlaneStore};
use bazaar_types::limits::{RECENT_MESSAGES_MAX, STREAM_CONNECTIONS_MAX, STREAM_CONNECTIONS_PER_MEMBER_MAX};
use bazaar_types::{Clock, MemberId};
use serde::Serialize;
use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use tokio::sync::watch;

/// Every transport the meter counts (and shows, even when zero).
pub const METERED: [&str; 4] = ["websocket", "sse", "poll", "webhook"];

/// A store the server can share across the blocking pool.
pub type SharedStore = Arc<dyn PlaneStore + Send + Sync>;

/// The transports a member can listen on (polling is not listening).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, PartialOrd, Ord)]
#[serde(rename_all = "snake_case")]
pub enum Transport {
    Websocket,
    Sse,
    /// An enabled webhook endpoint.
    Webhook,
}

pub struct Plane {
    store: SharedStore,
    /// The highest log position this node has written or seen: a woken
    /// stream reads up to it from its own cursor; the webhook sender waits on it.
    log: watch::Sender<u64>,
    /// The channels each member's live streams follow, and their wake signal.
    followers: Mutex<Followers>,
    listening: Mutex<Listeners>,
    /// The messages this node committed most recently, by position (see `window`).
    recent: Mutex<std::collections::BTreeMap<u64, Arc<Message>>>,
    /// Per member, how many times its memberships changed on this node: a
    /// stream's cached stints are good only while this stands still.
    epochs: Mutex<HashMap<MemberId, u64>>,
    /// Whether webhook targets in loopback and private ranges are allowed (tests only).
    private_webhooks: std::sync::atomic::AtomicBool,
    /// Deliveries counted since the last flush to the store's meter, by
    /// member, UTC day and transport.
    meter: Mutex<HashMap<(MemberId, i64, &'static str), u64>>,
    clock: Arc<dyn Clock>,
    /// The other nodes, told of each commit here (`publish_to`); none on a lone node.
    cluster: std::sync::OnceLock<Arc<dyn crate::cluster::Cluster>>,
}

impl Listeners {
    fn streams_of(&self, member: &MemberId) -> usize {
        self.by_member.get(member).map(|by| by.values().sum()).unwrap_or(0)
    }
}

/// Which channels the live streams on this node follow, by member. A
/// member's streams share one wake signal; a message wakes the members
/// following its channel, and a membership change wakes the member.
#[derive(Default)]
struct Followers {
    members: HashMap<MemberId, Followed>,
    by_channel: HashMap<ChannelId, HashSet<MemberId>>,
}

struct Followed {
    channels: Vec<ChannelId>,
    wake: watch::Sender<u64>,
    streams: usize,
}

impl Followers {
    fn unindex(&mut self, member: &MemberId, channels: &[ChannelId]) {
        for channel in channels {
            if let Some(members) = self.by_channel.get_mut(channel) {
                members.remove(member);
                if members.is_empty() {
                    self.by_channel.remove(channel);
                }
            }
        }
    }

    fn wake(&self, member: &MemberId, position: u64) {
        if let Some(followed) = self.members.get(member) {
            followed.wake.send_replace(position);
        }
    }
}

/// Open streams per member and transport, and their total.
#[derive(Default)]
struct Listeners {
    total: usize,
    by_member: HashMap<MemberId, HashMap<Transport, usize>>,
}

impl Plane {
    pub fn new(store: SharedStore, clock: Arc<dyn Clock>) -> Plane {
        Plane {
            store,
            log: watch::channel(0).0,
            followers: Mutex::default(),
            listening: Mutex::default(),
            recent: Mutex::default(),
            epochs: Mutex::default(),
            private_webhooks: Default::default(),
            meter: Mutex::default(),
            clock,
            cluster: Default::default(),
        }
    }

    /// The plane's SQLite connections and their configured memory, when the plane is on SQLite.
    pub fn sqlite_memory(&self) -> Option<bazaar_store::SqliteMemory> {
        self.store.sqlite_memory()
    }

    /// The plane's in-memory structures, for `/metrics`: each a length read
    /// under its lock. `membership_epochs` keeps one counter per member whose
    /// memberships changed on this node (the ledger's members bound it), and
    /// `meter_pending` what was delivered since the last meter flush.
    pub fn caches(&self) -> Vec<bazaar_store::CacheGauge> {
        let gauge = |cache, entries: usize, max: Option<usize>| bazaar_store::CacheGauge {
            cache,
            entries: entries as u64,
            entries_max: max.map(|m| m as u64),
        };
        let recent = self.recent.lock().expect("recent mutex").len();
        let epochs = self.epochs.lock().expect("epochs mutex").len();
        let meter = self.meter.lock().expect("meter mutex").len();
        let followed = self.followers.lock().expect("followers mutex").members.len();
        let streams = self.listening.lock().expect("listening mutex").total;
        vec![
            gauge("conversation_recent_messages", recent, Some(RECENT_MESSAGES_MAX)),
            gauge("conversation_membership_epochs", epochs, None),
            gauge("conversation_meter_pending", meter, None),
            gauge("conversation_followed_members", followed, Some(STREAM_CONNECTIONS_MAX)),
            gauge("conversation_streams", streams, Some(STREAM_CONNECTIONS_MAX)),
        ]
    }

    /// Lets webhooks reach loopback and private addresses: for tests and
    /// closed networks only (`bazaar serve --allow-private-webhooks`).
    pub fn allow_private_webhooks(&self, allow: bool) {
        self.private_webhooks.store(allow, std::sync::atomic::Ordering::SeqCst);
    }

    pub fn private_webhooks_allowed(&self) -> bool {
        self.private_webhooks.load(std::sync::atomic::Ordering::SeqCst)
    }

    /// Runs `act` against the store on the blocking pool.
    pub async fn call<T: Send + 'static>(
        &self,
        act: impl FnOnce(&dyn PlaneStore) -> Result<T, ConversationError> + Send + 'static,
    ) -> Result<T, Problem> {
        let store = self.store.clone();
        let outcome = tokio::task::spawn_blocking(move || act(store.as_ref()))
            .await
            .map_err(|error| Problem::new(StatusCode::INTERNAL_SERVER_ERROR, "internal", error.to_string()))?;
        outcome.map_err(problem)
    }

    /// Says the log reached `position` (the webhook sender wakes); wakes no stream.
    pub fn advanced(&self, position: u64) {
        self.log.send_if_modified(|last| {
            let moved = position > *last;
            *last = (*last).max(position);
            moved
        });
    }

    /// Says a message at `position` was written in `channel`: the log
    /// advances and the streams of members following the channel wake.
    pub fn advanced_in(&self, channel: &ChannelId, position: u64) {
        // The head moves before the index is read, so a stream that starts
        // following the channel after this read still finds the message by the head.
        self.advanced(position);
        let followers = self.followers.lock().expect("followers mutex");
        for member in followers.by_channel.get(channel).into_iter().flatten() {
            followers.wake(member, position);
        }
    }

    /// A wake signal for one of `member`'s streams, counted until the guard drops.
    pub fn follow(self: &Arc<Self>, member: &MemberId) -> (watch::Receiver<u64>, Following) {
        let mut followers = self.followers.lock().expect("followers mutex");
        let followed = followers.members.entry(member.clone()).or_insert_with(|| Followed {
            channels: Vec::new(),
            wake: watch::channel(0).0,
            streams: 0,
        });
        followed.streams += 1;
        let wake = followed.wake.subscribe();
        (wake, Following { plane: self.clone(), member: member.clone() })
    }

    /// Sets the channels `member`'s streams follow (those it is in now, as
    /// its streams last read them). When a channel is new to the set, the
    /// member's streams wake once more: a post in it may have landed between
    /// their read and now, when nothing followed it yet.
    pub fn following(&self, member: &MemberId, channels: Vec<ChannelId>) {
        let head = self.head();
        let mut followers = self.followers.lock().expect("followers mutex");
        let Some(followed) = followers.members.get_mut(member) else { return };
        let added = channels.iter().any(|channel| !followed.channels.contains(channel));
        let before = std::mem::replace(&mut followed.channels, channels.clone());
        followers.unindex(member, &before);
        for channel in channels {
            followers.by_channel.entry(channel).or_default().insert(member.clone());
        }
        if added {
            followers.wake(member, head);
        }
    }

    /// Keeps a committed message for live streams to deliver from memory,
    /// then wakes them. Call only after the message's transaction committed.
    pub fn published(&self, message: &Message) {
        self.kept(message);
        if let Some(cluster) = self.cluster.get() {
            cluster.publish(Signal::Message { channel: message.channel.clone(), position: message.position });
        }
    }

    /// [`Plane::published`] for messages committed together: each kept and its streams woken, and the other
    /// nodes told once for all of them.
    pub fn published_all(&self, messages: &[Message]) {
        for message in messages {
            self.kept(message);
        }
        if let (Some(cluster), false) = (self.cluster.get(), messages.is_empty()) {
            let messages = messages.iter().map(|m| (m.channel.clone(), m.position)).collect();
            cluster.publish(Signal::Messages { messages });
        }
    }

    /// A committed message kept for live streams, and its streams woken.
    fn kept(&self, message: &Message) {
        {
            let mut recent = self.recent.lock().expect("recent mutex");
            recent.insert(message.position, Arc::new(message.clone()));
            while recent.len() > RECENT_MESSAGES_MAX {
                recent.pop_first();
            }
        }
        self.advanced_in(&message.channel, message.position);
    }

    /// Tells `cluster` of every message and membership change committed here from now on.
    pub fn publish_to(&self, cluster: Arc<dyn crate::cluster::Cluster>) {
        let _ = self.cluster.set(cluster);
    }

    /// Every message at positions `after + 1 ..= head`, if this node holds
    /// them all; `None` at the first gap (a message committed elsewhere, a
    /// line not kept here, or one older than the window).
    pub fn window(&self, after: u64, head: u64) -> Option<Vec<Arc<Message>>> {
        let recent = self.recent.lock().expect("recent mutex");
        let found: Vec<Arc<Message>> = recent.range(after + 1..=head).map(|(_, m)| m.clone()).collect();
        let complete = found.len() as u64 == head.saturating_sub(after)
            && found.iter().zip(after + 1..).all(|(message, position)| message.position == position);
        complete.then_some(found)
    }

    /// Says `members`' memberships changed (joined, left, added, a DM opened):
    /// their streams reload their stints before delivering from memory again.
    /// Call after the change committed and before anything that depends on it is published.
    /// Their streams wake to reload.
    pub fn memberships_changed<'a>(&self, members: impl IntoIterator<Item = &'a MemberId>) {
        let members: Vec<&MemberId> = members.into_iter().collect();
        if let Some(cluster) = self.cluster.get() {
            cluster.publish(Signal::Memberships { members: members.iter().map(|m| (*m).clone()).collect() });
        }
        self.note_memberships(members);
    }

    /// [`Plane::memberships_changed`] for a change another node committed (told, not retold).
    pub fn memberships_changed_elsewhere(&self, members: &[MemberId]) {
        self.note_memberships(members.iter().collect());
    }

    /// Wakes every stream on this node to read the store again from its
    /// cursor and reload its stints: the log reached `last` without a signal saying so.
    pub fn resync(&self, last: u64) {
        self.advanced(last);
        let followers = self.followers.lock().expect("followers mutex");
        {
            let mut epochs = self.epochs.lock().expect("epochs mutex");
            for member in followers.members.keys() {
                *epochs.entry(member.clone()).or_default() += 1;
            }
        }
        for member in followers.members.keys() {
            followers.wake(member, last);
        }
    }

    fn note_memberships(&self, members: Vec<&MemberId>) {
        {
            let mut epochs = self.epochs.lock().expect("epochs mutex");
            for member in &members {
                *epochs.entry((*member).clone()).or_default() += 1;
            }
        }
        let head = *self.log.borrow();
        let followers = self.followers.lock().expect("followers mutex");
        for member in members {
            followers.wake(member, head);
        }
    }

    pub fn epoch(&self, member: &MemberId) -> u64 {
        self.epochs.lock().expect("epochs mutex").get(member).copied().unwrap_or(0)
    }

    /// A receiver that wakes when the log advances past what it last saw.
    pub fn watch_log(&self) -> watch::Receiver<u64> {
        self.log.subscribe()
    }

    /// The highest log position this node has written or seen.
    pub fn head(&self) -> u64 {
        *self.log.borrow()
    }

    /// Counts a stream opened by `member`, or refuses past the limits. The
    /// stream is counted until the returned guard drops.
    pub fn listen(self: &Arc<Self>, member: &MemberId, transport: Transport) -> Result<Listening, Problem> {
        let mut listening = self.listening.lock().expect("listening mutex");
        let mine = listening.streams_of(member);
        if listening.total >= STREAM_CONNECTIONS_MAX {
            let problem = Problem::retry_later(
                StatusCode::SERVICE_UNAVAILABLE,
                "streams_full",
                format!("This node holds {STREAM_CONNECTIONS_MAX} streams already; retry shortly or poll the inbox."),
            );
            return Err(problem);
        }
        if mine >= STREAM_CONNECTIONS_PER_MEMBER_MAX {
            return Err(Problem::new(
                StatusCode::TOO_MANY_REQUESTS,
                "too_many_streams",
                format!("A member may hold {STREAM_CONNECTIONS_PER_MEMBER_MAX} streams at once; close one first."),
            ));
        }
        *listening.by_member.entry(member.clone()).or_default().entry(transport).or_default() += 1;
        listening.total += 1;
        Ok(Listening { plane: self.clone(), member: member.clone(), transport })
    }

    /// Counts `events` delivered to `member` by `transport` (`websocket`,
    /// `sse`, `poll`, `webhook`) today, for the meter.
    pub fn count(&self, member: &MemberId, transport: &'static str, events: usize) {
        if events == 0 {
            return;
        }
        let day = day_of(self.clock.now());
        let mut meter = self.meter.lock().expect("meter mutex");
        *meter.entry((member.clone(), day, transport)).or_default() += events as u64;
    }

    /// Everything counted since the last take, to add to the store.
    pub fn take_counts(&self) -> Vec<Metered> {
        let taken = std::mem::take(&mut *self.meter.lock().expect("meter mutex"));
        taken
            .into_iter()
            .map(|((member, day, transport), events)| Metered { member, day, transport: transport.into(), events })
            .collect()
    }

    /// Puts back counts a flush could not write, to try again.
    pub fn recount(&self, counts: Vec<Metered>) {
        let mut meter = self.meter.lock().expect("meter mutex");
        for count in counts {
            let transport = METERED.iter().find(|t| **t == count.transport);
            if let Some(transport) = transport {
                *meter.entry((count.member, count.day, transport)).or_default() += count.events;
            }
        }
    }

    /// What `member` was delivered on `day` and is not in the store yet.
    pub fn unflushed(&self, member: &MemberId, day: i64) -> Vec<(&'static str, u64)> {
        let meter = self.meter.lock().expect("meter mutex");
        meter.iter().filter(|((who, d, _), _)| who == member && *d == day).map(|((_, _, t), n)| (*t, *n)).collect()
    }

    /// How many live streams `member` holds on this node.
    pub fn streams_of(&self, member: &MemberId) -> usize {
        self.listening.lock().expect("listening mutex").streams_of(member)
    }

    /// The transports `member` listens on now, in a fixed order.
    pub fn transports_of(&self, member: &MemberId) -> Vec<Transport> {
        let listening = self.listening.lock().expect("listening mutex");
        let mut found: Vec<Transport> = listening
            .by_member
            .get(member)
            .map(|by| by.iter().filter(|(_, n)| **n > 0).map(|(t, _)| *t).collect())
            .unwrap_or_default();
        found.sort();
        found
    }
}

/// One stream following its member's channels, until it drops.
pub struct Following {
    plane: Arc<Plane>,
    member: MemberId,
}

impl Drop for Following {
    fn drop(&mut self) {
        let mut followers = self.plane.followers.lock().expect("followers mutex");
        let Some(followed) = followers.members.get_mut(&self.member) else { return };
        followed.streams = followed.streams.saturating_sub(1);
        if followed.streams == 0 {
            let channels = std::mem::take(&mut followed.channels);
            followers.members.remove(&self.member);
            followers.unindex(&self.member, &channels);
        }
    }
}

/// One open stream, counted while it lives.
pub struct Listening {
    plane: Arc<Plane>,
    member: MemberId,
    transport: Transport,
}

impl Drop for Listening {
    fn drop(&mut self) {
        let mut listening = self.plane.listening.lock().expect("listening mutex");
        listening.total = listening.total.saturating_sub(1);
        if let Some(by) = listening.by_member.get_mut(&self.member) {
            if let Some(n) = by.get_mut(&self.transport) {
                *n = n.saturating_sub(1);
            }
            by.retain(|_, n| *n > 0);
            if by.is_empty() {
                listening.by_member.remove(&self.member);
            }
        }
    }
}

/// The HTTP status of each of the conversation store's refusal codes (`ConversationError::code`).
pub const CONVERSATION_CODES: &[(&str, StatusCode)] = &[
    ("channel_not_found", StatusCode::NOT_FOUND),
    ("reply_not_found", StatusCode::NOT_FOUND),
    ("webhook_not_found", StatusCode::NOT_FOUND),
    ("delivery_not_found", StatusCode::NOT_FOUND),
    ("message_not_found", StatusCode::NOT_FOUND),
    ("member_not_in_channel", StatusCode::NOT_FOUND),
    ("not_member", StatusCode::FORBIDDEN),
    ("not_owner", StatusCode::FORBIDDEN),
    ("private_room", StatusCode::FORBIDDEN),
    ("not_author", StatusCode::FORBIDDEN),
    ("already_member", StatusCode::CONFLICT),
    ("direct_message", StatusCode::CONFLICT),
    ("channel_full", StatusCode::CONFLICT),
    ("too_many_webhooks", StatusCode::CONFLICT),
    ("last_owner", StatusCode::CONFLICT),
    ("message_deleted", StatusCode::CONFLICT),
    ("passkey_exists", StatusCode::CONFLICT),
    ("too_many_passkeys", StatusCode::CONFLICT),
    ("sealed_required", StatusCode::CONFLICT),
    ("not_sealed", StatusCode::CONFLICT),
    ("sealed_recipients", StatusCode::CONFLICT),
    ("sealing_key_required", StatusCode::CONFLICT),
    ("idempotency_conflict", StatusCode::UNPROCESSABLE_ENTITY),
    ("etiquette_limit", StatusCode::TOO_MANY_REQUESTS),
    ("unavailable", StatusCode::SERVICE_UNAVAILABLE),
    ("dm_with_self", StatusCode::BAD_REQUEST),
    ("name_invalid", StatusCode::BAD_REQUEST),
    ("body_empty", StatusCode::BAD_REQUEST),
    ("body_too_long", StatusCode::BAD_REQUEST),
    ("too_many_mentions", StatusCode::BAD_REQUEST),
    ("seq_out_of_range", StatusCode::BAD_REQUEST),
    ("page_invalid", StatusCode::BAD_REQUEST),
    ("remove_self", StatusCode::BAD_REQUEST),
    ("target_invalid", StatusCode::BAD_REQUEST),
    ("reaction_invalid", StatusCode::BAD_REQUEST),
    ("webhook_url_invalid", StatusCode::BAD_REQUEST),
    ("sealed_invalid", StatusCode::BAD_REQUEST),
    ("sealed_public_room", StatusCode::BAD_REQUEST),
    ("signature_required", StatusCode::BAD_REQUEST),
    ("signature_invalid", StatusCode::BAD_REQUEST),
    ("refs_invalid", StatusCode::BAD_REQUEST),
    ("body_name_invalid", StatusCode::BAD_REQUEST),
];

/// The problem a conversation store's refusal is answered with: its own code, at the status
/// [`CONVERSATION_CODES`] gives it.
pub fn problem(error: ConversationError) -> Problem {
    use ConversationError as E;
    let code = error.code();
    let status = CONVERSATION_CODES.iter().find(|(known, _)| *known == code).map(|(_, status)| *status);
    debug_assert!(status.is_some(), "the conversation code {code} is not in CONVERSATION_CODES");
    let status = status.unwrap_or(StatusCode::BAD_REQUEST);
    if let E::Unavailable(detail) = &error {
        tracing::warn!(%detail, "conversation store unavailable");
        let problem = Problem::retry_later(
            status,
            error.code(),
            "The conversation store is unavailable; retry shortly.".to_string(),
        );
        return problem;
    }
    Problem::new(status, error.code(), error.to_string())
}

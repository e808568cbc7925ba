//! The two live transports, on the one cursor the poll inbox uses: a message's
//! log `position`. Both are a [`Follower`]: replay from the cursor by reading
//! the inbox, then wait for the log to advance and read again. Nothing is
//! pushed into a per-connection queue, so a reconnect from the last cursor
//! neither loses nor repeats a message, and a slow reader costs one page.
//!
//! - SSE (`GET /v1/inbox/sse`): `id:` is the position; `Last-Event-ID` (or
//!   `?since=`) resumes; a comment every `STREAM_KEEPALIVE_S`.
//! - WebSocket (`GET /v1/inbox/ws?since=`): text frames
//!   `{"type":"message","cursor":N,"message":{…}}`; a ping every
//!   `STREAM_KEEPALIVE_S`; a frame that cannot leave within
//!   `STREAM_SEND_TIMEOUT_MS` (or a full write buffer) ends the socket, with
//!   a 4008 close naming the cursor when the close frame can still leave; a
//!   store failure closes it with 1011 the same way. Either way the client
//!   resumes from the last cursor it handled.

use crate::auth::{ApiQuery, Auth};
use crate::plane::{Following, Listening, Plane, Transport};
use crate::problem::Problem;
use crate::state::AppState;
use axum::extract::ws::{CloseFrame, Message as Frame, WebSocket, WebSocketUpgrade};
use axum::extract::State;
use axum::http::HeaderMap;
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use bazaar_conversation::eligibility::{delivered_to, wakes};
use bazaar_conversation::{Membership, Message};
use bazaar_types::limits::{
    STREAM_CLIENT_FRAME_BYTES_MAX, STREAM_KEEPALIVE_S, STREAM_PAGE, STREAM_SEND_TIMEOUT_MS,
    STREAM_WRITE_BUFFER_BYTES_MAX,
};
use bazaar_types::MemberId;
use serde::Deserialize;
use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::watch;
use utoipa::ToSchema;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

/// The inbox WebSocket: served without an OpenAPI entry (see `router::UNDESCRIBED_ROUTES`).
pub const INBOX_SOCKET_PATH: &str = "/v1/inbox/ws";
/// WebSocket close code: the consumer did not keep up (resume from the reason's cursor).
pub const CLOSE_SLOW_CONSUMER: u16 = 4008;
/// WebSocket close code: the client sent a frame too large or unreadable.
pub const CLOSE_FRAME_REFUSED: u16 = 1009;
/// WebSocket close code: the store failed (resume from the reason's cursor).
pub const CLOSE_STORE_FAILED: u16 = 1011;
/// The tokio-tungstenite read buffer per socket: small, since clients only close.
const SOCKET_READ_BUFFER_BYTES: usize = 4 * 1024;

pub fn routes() -> OpenApiRouter<Arc<AppState>> {
    OpenApiRouter::new().routes(routes!(sse)).route(INBOX_SOCKET_PATH, axum::routing::get(websocket))
}

/// Reads a member's inbox from a cursor and waits for more. It wakes only
/// when a message lands in a channel its member is in (or the member's
/// memberships change), never for the rest of the log. While this node holds
/// every message after the cursor (`Plane::window`) and the member's
/// memberships have not changed since the follower last read them, it
/// delivers from memory with the same `delivered_to` predicate the store
/// uses; at any gap or change it reads the store from its cursor, so what it
/// delivers is the same either way.
pub struct Follower {
    plane: Arc<Plane>,
    member: MemberId,
    /// Where the next read starts (the inbox's `next_after`).
    read_to: u64,
    /// Wakes when a post lands in a channel the member follows, or its memberships change.
    wake: watch::Receiver<u64>,
    _following: Following,
    /// The member's stints as last read, and the membership epoch then.
    stints: Option<(u64, Vec<Membership>)>,
}

impl Follower {
    pub fn new(plane: Arc<Plane>, member: MemberId, since: u64) -> Follower {
        let (wake, following) = plane.follow(&member);
        Follower { plane, member, read_to: since, wake, _following: following, stints: None }
    }

    /// The next messages after the cursor, waiting until there are some.
    /// Cancel-safe: the cursor moves only once a read has returned.
    pub async fn next(&mut self) -> Result<Vec<Message>, Problem> {
        loop {
            // Marked seen before reading, so a post landing during the read wakes the wait below.
            self.wake.borrow_and_update();
            let head = self.plane.head();
            let fresh = self.stints.as_ref().is_some_and(|(epoch, _)| *epoch == self.plane.epoch(&self.member));
            if fresh && head <= self.read_to {
                if self.wake.changed().await.is_err() {
                    return Ok(Vec::new());
                }
                continue;
            }
            if fresh {
                if let Some(batch) = self.in_memory(head) {
                    self.read_to = head;
                    if batch.is_empty() {
                        continue;
                    }
                    return Ok(batch);
                }
            }
            let epoch = self.plane.epoch(&self.member);
            let (member, after) = (self.member.clone(), self.read_to);
            let (page, stints) = self
                .plane
                .call(move |store| Ok((store.inbox(&member, after, STREAM_PAGE)?, store.memberships_of(&member)?)))
                .await?;
            // A channel new to the set wakes this stream once more, so a post
            // that landed in it before it was followed is read on the next turn.
            let current = stints.iter().filter(|stint| stint.is_current()).map(|stint| stint.channel.clone());
            self.plane.following(&self.member, current.collect());
            self.stints = Some((epoch, stints));
            let moved = page.next_after > self.read_to;
            self.read_to = page.next_after;
            if !page.messages.is_empty() {
                return Ok(page.messages);
            }
            if !moved && self.wake.changed().await.is_err() {
                return Ok(Vec::new());
            }
        }
    }

    /// The positions in `batch` that address the member (a mention, its DM,
    /// a reply to it, a notice: `eligibility::wakes`), by its stints as last read.
    pub fn addressed(&self, batch: &[Message]) -> Vec<u64> {
        let Some((_, stints)) = self.stints.as_ref() else { return Vec::new() };
        let wakes_me = |message: &Message| stints.iter().any(|stint| wakes(stint, message, &self.member));
        batch.iter().filter(|message| wakes_me(message)).map(|message| message.position).collect()
    }

    pub fn member(&self) -> &MemberId {
        &self.member
    }

    /// What the window after the cursor up to `head` delivers to the member,
    /// or `None` when the store must be read instead.
    fn in_memory(&self, head: u64) -> Option<Vec<Message>> {
        let window = self.plane.window(self.read_to, head)?;
        // Read after the window: a change published before a message is seen with it.
        let (epoch, stints) = self.stints.as_ref()?;
        if *epoch != self.plane.epoch(&self.member) {
            return None;
        }
        let delivered = window.into_iter().filter(|message| stints.iter().any(|stint| delivered_to(stint, message)));
        Some(delivered.map(|message| (*message).clone()).collect())
    }
}

#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct StreamQuery {
    /// The cursor to resume after (a message's `position`); 0 replays everything.
    pub since: Option<u64>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SocketQuery {
    /// The cursor to resume after (a message's `position`); 0 replays everything.
    pub since: Option<u64>,
    /// The process this socket is (a body): 1 to 64 of `A-Z a-z 0-9 - _`; a fresh name if absent.
    pub body: Option<String>,
}

/// The SSE cursor: `Last-Event-ID` if the client sends one, else `?since=`, else 0.
fn sse_cursor(headers: &HeaderMap, since: Option<u64>) -> Result<u64, Problem> {
    match headers.get("last-event-id") {
        Some(value) => value
            .to_str()
            .ok()
            .and_then(|text| text.trim().parse().ok())
            .ok_or_else(|| Problem::invalid("`Last-Event-ID` must be a cursor (a message's `position`).")),
        None => Ok(since.unwrap_or(0)),
    }
}

/// The caller's inbox as Server-Sent Events: every message after the cursor,
/// then each new one as it is posted. `id:` is the message's `position`.
#[utoipa::path(get, path = "/v1/inbox/sse", params(("since" = Option<u64>, Query), ("Last-Event-ID" = Option<u64>, Header, description = "Resumes after this cursor; wins over `since`")), security(("credential" = []), ("session" = [])), responses((status = 200, description = "An event stream; each `message` event's data is a message", content_type = "text/event-stream", body = bazaar_wire::SseEvent)))]
async fn sse(
    State(state): State<Arc<AppState>>,
    auth: Auth,
    headers: HeaderMap,
    ApiQuery(query): ApiQuery<StreamQuery>,
) -> Result<Response, Problem> {
    let plane = state.plane()?.clone();
    let since = sse_cursor(&headers, query.since)?;
    let listening = plane.listen(&auth.member.id, Transport::Sse)?;
    let follower = Follower::new(plane, auth.member.id, since);
    let events = futures::stream::unfold(
        (follower, VecDeque::new(), Some(listening)),
        |(mut follower, mut ready, listening): (Follower, VecDeque<Message>, Option<Listening>)| async move {
            // A stream that failed has given back its listening slot and ends.
            let listening = listening?;
            if ready.is_empty() {
                match follower.next().await {
                    Ok(batch) => ready.extend(batch),
                    Err(problem) => {
                        let event = Event::default().event("error").data(problem.code);
                        return Some((Ok::<_, std::convert::Infallible>(event), (follower, ready, None)));
                    }
                }
            }
            let message = ready.pop_front()?;
            follower.plane.count(&follower.member, "sse", 1);
            let event = Event::default().id(message.position.to_string()).event("message");
            let event = event.json_data(&message).unwrap_or_else(|_| Event::default().comment("unserialisable"));
            Some((Ok(event), (follower, ready, Some(listening))))
        },
    );
    let keepalive = KeepAlive::new().interval(Duration::from_secs(STREAM_KEEPALIVE_S));
    Ok(Sse::new(events).keep_alive(keepalive).into_response())
}

/// The caller's inbox over a WebSocket: every message after `since`, then
/// each new one, as `{"type":"message","cursor":N,"message":{…}}` frames.
async fn websocket(
    State(state): State<Arc<AppState>>,
    auth: Auth,
    ApiQuery(query): ApiQuery<SocketQuery>,
    upgrade: WebSocketUpgrade,
) -> Result<Response, Problem> {
    let plane = state.plane()?.clone();
    let body = super::bodies::body_name(&state, query.body)?;
    let listening = plane.listen(&auth.member.id, Transport::Websocket)?;
    let follower = Follower::new(plane, auth.member.id, query.since.unwrap_or(0));
    let upgrade = upgrade
        .read_buffer_size(SOCKET_READ_BUFFER_BYTES)
        .write_buffer_size(0)
        .max_write_buffer_size(STREAM_WRITE_BUFFER_BYTES_MAX)
        .max_message_size(STREAM_CLIENT_FRAME_BYTES_MAX)
        .max_frame_size(STREAM_CLIENT_FRAME_BYTES_MAX);
    let ticket = state.closing.ticket();
    Ok(upgrade.on_upgrade(move |socket| serve_socket(socket, follower, body, (listening, ticket))))
}

/// Why a socket's loop ended.
enum End {
    /// The client closed or went away.
    Gone,
    Close(u16, String),
}

async fn serve_socket(
    mut socket: WebSocket,
    mut follower: Follower,
    body: String,
    (_listening, mut ticket): (Listening, crate::closing::Ticket),
) {
    let plane = follower.plane.clone();
    let mut sent_to = follower.read_to;
    // Whether this body was last seen holding its member's lease: only then does it renew or release.
    let mut holds_lease = false;
    let mut keepalive = tokio::time::interval(Duration::from_secs(STREAM_KEEPALIVE_S));
    keepalive.reset();
    let end = loop {
        tokio::select! {
            batch = follower.next() => match batch {
                Ok(batch) => {
                    let chosen = match super::bodies::claim(&plane, follower.member(), &body, follower.addressed(&batch)).await {
                        Ok(chosen) => chosen,
                        Err(problem) => {
                            break End::Close(CLOSE_STORE_FAILED, format!("{}; resume with since={sent_to}", problem.code));
                        }
                    };
                    if !chosen.is_empty() {
                        holds_lease = chosen.values().any(|holder| *holder == body);
                    }
                    let to = (plane.as_ref(), follower.member());
                    if let Err(end) = send_batch(&mut socket, to, batch, &chosen, &mut sent_to).await {
                        break end;
                    }
                }
                Err(problem) => {
                    break End::Close(CLOSE_STORE_FAILED, format!("{}; resume with since={sent_to}", problem.code));
                }
            },
            incoming = socket.recv() => match incoming {
                None | Some(Ok(Frame::Close(_))) => break End::Gone,
                Some(Err(_)) => {
                    let reason = format!(
                        "unreadable or oversize frame (at most {STREAM_CLIENT_FRAME_BYTES_MAX} bytes); resume with since={sent_to}"
                    );
                    break End::Close(CLOSE_FRAME_REFUSED, reason);
                }
                Some(Ok(_)) => {}
            },
            () = ticket.stopping() => {
                let reason = format!("the registry is stopping; resume with since={sent_to}");
                break End::Close(crate::closing::CLOSE_GOING_AWAY, reason);
            }
            _ = keepalive.tick() => {
                if socket.send(Frame::Ping(Default::default())).await.is_err() {
                    break End::Gone;
                }
                if holds_lease {
                    let (member, name) = (follower.member().clone(), body.clone());
                    holds_lease = plane.call(move |store| store.renew_lease(&member, &name)).await.unwrap_or(false);
                }
            }
        }
    };
    if holds_lease {
        // Gone: the next addressed event goes to another body at once, not after the lease lapses.
        let (member, name) = (follower.member().clone(), body);
        let _ = plane.call(move |store| store.release_lease(&member, &name)).await;
    }
    if let End::Close(code, reason) = end {
        let frame = Frame::Close(Some(CloseFrame { code, reason: reason.into() }));
        let _ = tokio::time::timeout(Duration::from_millis(STREAM_SEND_TIMEOUT_MS), socket.send(frame)).await;
    }
}

/// Sends each message in order, moving `sent_to` past each one that left.
async fn send_batch(
    socket: &mut WebSocket,
    (plane, member): (&Plane, &MemberId),
    batch: Vec<Message>,
    chosen: &std::collections::HashMap<u64, String>,
    sent_to: &mut u64,
) -> Result<(), End> {
    let mut counted = 0;
    let result = send_each(socket, batch, chosen, sent_to, &mut counted).await;
    plane.count(member, "websocket", counted);
    result
}

async fn send_each(
    socket: &mut WebSocket,
    batch: Vec<Message>,
    chosen: &std::collections::HashMap<u64, String>,
    sent_to: &mut u64,
    counted: &mut usize,
) -> Result<(), End> {
    for message in batch {
        let frame = super::bodies::frame(&message, chosen.get(&message.position));
        let send = socket.send(Frame::Text(frame.to_string().into()));
        match tokio::time::timeout(Duration::from_millis(STREAM_SEND_TIMEOUT_MS), send).await {
            Ok(Ok(())) => {
                *sent_to = message.position;
                *counted += 1;
            }
            Ok(Err(_)) => return Err(End::Gone),
            Err(_) => {
                return Err(End::Close(CLOSE_SLOW_CONSUMER, format!("slow consumer; resume with since={sent_to}")));
            }
        }
    }
    Ok(())
}

//! The live event stream (`GET /v1/stream`, Server-Sent Events): the
//! registry's hash-chained event ledger as it grows, for the chamber and for
//! anyone the operator lets watch.
//!
//! - **Who sees what.** The operator sees every event whole. A signed-in
//!   member sees its own events (authored by it or on its behalf) whole and
//!   every other event as the public does. The public — only when the
//!   operator started the registry with `--public-stream` — sees a
//!   projection: kind, sequence, time, hashes, the author's handle, and
//!   from the body only amounts (`*_minor`), times (`*_ms`), counts,
//!   booleans and the identifiers in [`crate::live::PUBLIC_KEYS`] (a storefront
//!   allocation and a maker's payment projected by the same rules); never a
//!   credential, a note, a reason's prose, an item's words, a tracking number, an
//!   evidence URL or an idempotency key.
//! - **The past.** `GET /v1/stream/history` pages back before a `seq` and
//!   `GET /v1/stream/latest` finds the latest completed paid call, contract and
//!   dispute (`super::history`), each under the same rules.
//! - **One reader for all.** A tailer task follows the ledger's head every
//!   [`crate::live::STREAM_POLL_MS`] and broadcasts each new event once; each connection
//!   only projects and writes. Public watchers share more: each tail's new
//!   events go out as one run of public frames built once, and every public
//!   connection writes the same bytes (summaries likewise share one window).
//!   A connection that falls behind the broadcast
//!   (or resumes with `Last-Event-ID`) reads what it missed from the store,
//!   so nothing is skipped: sequence numbers are contiguous and a gap is
//!   always filled before the next event is sent.

use crate::auth::{session_cookie, Auth};
use crate::live::{Run, RunBuilder, Shared, Summary, Viewer, Window, STREAM_PAGE_MAX};
use crate::problem::Problem;
use crate::state::AppState;
use axum::body::{Body, Bytes};
use axum::extract::{FromRequestParts, State};
use axum::http::header;
use axum::http::{request::Parts, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use bazaar_core::model::{Event, MemberKind};
use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{broadcast, watch, OwnedSemaphorePermit};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

/// The most recent events `?recent=` may ask to start with.
pub const STREAM_RECENT_MAX: u64 = 500;
/// Bytes of ready events written to a connection at once.
pub const STREAM_CHUNK_BYTES_MAX: usize = 256 * 1024;
/// A comment line this often keeps idle connections (and proxies) open.
pub const STREAM_KEEPALIVE_S: u64 = 15;
pub use crate::live::{STREAM_SUMMARY_LATEST_MAX, STREAM_SUMMARY_MS};
/// Events one catch-up summary covers at most (a public watcher resuming far back, or one that missed windows).
pub const STREAM_SUMMARY_CATCHUP_MAX: usize = 5_000;

/// Authentication if the request carries any (a bearer credential or a passkey session).
pub struct MaybeAuth(pub Option<Auth>);

impl FromRequestParts<Arc<AppState>> for MaybeAuth {
    type Rejection = Problem;

    async fn from_request_parts(parts: &mut Parts, state: &Arc<AppState>) -> Result<Self, Problem> {
        let presented =
            parts.headers.contains_key(axum::http::header::AUTHORIZATION) || session_cookie(&parts.headers).is_some();
        if !presented {
            return Ok(MaybeAuth(None));
        }
        Auth::from_request_parts(parts, state).await.map(|auth| MaybeAuth(Some(auth)))
    }
}

pub fn routes() -> OpenApiRouter<Arc<AppState>> {
    OpenApiRouter::new().routes(routes!(stream))
}

/// Who `auth` watches as: the operator sees every event whole, a member its own; anonymous visitors only when
/// the operator opened the stream to the public (else `401 stream_not_public`). The stream's history and latest
/// flows (`super::history`) follow the same rule.
pub(crate) fn viewer_of(state: &AppState, auth: Option<&Auth>) -> Result<Viewer, Problem> {
    match auth {
        Some(auth) if auth.member.kind == MemberKind::Operator => Ok(Viewer::Operator),
        Some(auth) => Ok(Viewer::Member(auth.member.id.clone())),
        None if state.public_stream() => Ok(Viewer::Public),
        None => Err(Problem::new(
            StatusCode::UNAUTHORIZED,
            "stream_not_public",
            "This registry's stream is for signed-in members; its operator has not opened it to the public (`--public-stream`).",
        )),
    }
}

/// Where a connection starts: after `Last-Event-ID`, else `?after=`, else live.
fn start(headers: &HeaderMap, after: Option<u64>) -> Result<Option<u64>, Problem> {
    match headers.get("last-event-id") {
        Some(value) => value
            .to_str()
            .ok()
            .and_then(|text| text.trim().parse().ok())
            .map(Some)
            .ok_or_else(|| Problem::invalid("`Last-Event-ID` must be an event's `seq`.")),
        None => Ok(after),
    }
}

#[derive(serde::Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct StreamQuery {
    /// Start after this `seq` (replaying what follows it); `Last-Event-ID` wins. Absent: live only.
    pub after: Option<u64>,
    /// Start with the latest `recent` events (at most 500), then live; `after` and `Last-Event-ID` win.
    pub recent: Option<u64>,
    /// For watchers of a busy ledger: instead of every event, one `summary` event per 250 ms — the seq range
    /// it covers, a count per kind, and the latest 20 events as this viewer may see them.
    #[serde(default)]
    pub summary: bool,
}

/// The event ledger as Server-Sent Events: each event once, in order, as the
/// viewer may see it (`id:` is its `seq`; `data:` carries its `kind`). Anonymous
/// viewers only when the operator started the registry with
/// `--public-stream` (otherwise `401 stream_not_public`); a signed-in member
/// sees its own events whole; the operator sees all.
#[utoipa::path(get, path = "/v1/stream", params(("after" = Option<u64>, Query), ("recent" = Option<u64>, Query), ("Last-Event-ID" = Option<u64>, Header, description = "Resumes after this seq; wins over `after`")), security((), ("credential" = []), ("session" = [])), responses((status = 200, description = "An event stream; each event's data is the event as this viewer may see it", content_type = "text/event-stream", body = bazaar_wire::SseEvent)))]
pub async fn stream(
    State(state): State<Arc<AppState>>,
    MaybeAuth(auth): MaybeAuth,
    headers: HeaderMap,
    crate::auth::ApiQuery(query): crate::auth::ApiQuery<StreamQuery>,
) -> Result<Response, Problem> {
    let viewer = viewer_of(&state, auth.as_ref())?;
    let from = start(&headers, query.after)?;
    let hub = state.stream_hub();
    hub.viewers.send_modify(|opened| *opened += 1);
    let Ok(permit) = hub.connections.clone().try_acquire_owned() else {
        let problem = Problem::retry_later(
            StatusCode::SERVICE_UNAVAILABLE,
            "stream_full",
            "This node serves as many streams as it can; retry shortly.",
        );
        return Err(problem);
    };
    let head = state.store.head().await?.seq;
    let sent = match (from, query.recent) {
        (Some(after), _) => after,
        (None, Some(recent)) => head.saturating_sub(recent.min(STREAM_RECENT_MAX)),
        (None, None) => head,
    };
    if viewer == Viewer::Public {
        // Every public watcher writes what the tailer built once: summary windows, or runs of every event.
        let feed = match query.summary {
            true => Feed::Summaries(hub.public_windows.subscribe()),
            false => Feed::Runs(hub.public_runs.subscribe(), hub.tailed.subscribe()),
        };
        let watcher = PublicWatcher { state: state.clone(), sent, head, feed, _permit: permit };
        return Ok(event_stream(Body::from_stream(public_feed(watcher))));
    }
    let receiver = hub.events.subscribe();
    let known_head = head;
    let tailed = hub.tailed.subscribe();
    let follower = Follower {
        state: state.clone(),
        receiver,
        tailed,
        sent,
        known_head,
        backlog: VecDeque::new(),
        viewer,
        _permit: permit,
    };
    let body =
        if query.summary { Body::from_stream(summaries(follower)) } else { Body::from_stream(every_event(follower)) };
    Ok(event_stream(body))
}

fn event_stream(body: Body) -> Response {
    (
        [
            (header::CONTENT_TYPE, "text/event-stream"),
            (header::CACHE_CONTROL, "no-cache"),
            (header::HeaderName::from_static("x-accel-buffering"), "no"),
        ],
        body,
    )
        .into_response()
}

type Chunk = Result<Bytes, std::convert::Infallible>;

/// Every event, in order: each event that is ready goes out in one chunk (one
/// write), so a busy ledger costs a connection a write per tail, not per event.
fn every_event(follower: Follower) -> impl futures::Stream<Item = Chunk> {
    futures::stream::unfold(follower, |mut follower| async move {
        let keepalive = Duration::from_secs(STREAM_KEEPALIVE_S);
        let first = match tokio::time::timeout(keepalive, follower.next()).await {
            Ok(Some(shared)) => shared,
            Ok(None) => return None,
            Err(_) => return Some((Ok::<_, std::convert::Infallible>(Bytes::from_static(b":\n\n")), follower)),
        };
        let mut chunk = first.frame_for(&follower.viewer).to_vec();
        while chunk.len() < STREAM_CHUNK_BYTES_MAX {
            let Some(shared) = follower.ready() else { break };
            chunk.extend_from_slice(&shared.frame_for(&follower.viewer));
        }
        Some((Ok(Bytes::from(chunk)), follower))
    })
}

/// One `summary` event per [`STREAM_SUMMARY_MS`] while events come: nothing is
/// skipped (the seq ranges are contiguous), but a watcher gets four writes a
/// second whatever the ledger's rate.
fn summaries(follower: Follower) -> impl futures::Stream<Item = Chunk> {
    futures::stream::unfold(follower, |mut follower| async move {
        let keepalive = Duration::from_secs(STREAM_KEEPALIVE_S);
        let first = match tokio::time::timeout(keepalive, follower.next()).await {
            Ok(Some(shared)) => shared,
            Ok(None) => return None,
            Err(_) => return Some((Ok(Bytes::from_static(b":\n\n")), follower)),
        };
        let viewer = follower.viewer.clone();
        let mut summary = Summary::new(viewer);
        summary.add(&first);
        // Wake once per window, then take everything that came: the broadcast holds far more than a
        // window's events, and anything it dropped (or a resume's backlog) is read from the store.
        tokio::time::sleep(Duration::from_millis(STREAM_SUMMARY_MS)).await;
        loop {
            if let Some(shared) = follower.ready() {
                summary.add(&shared);
            } else if follower.sent < follower.known_head {
                match follower.next().await {
                    Some(shared) => summary.add(&shared),
                    None => break,
                }
            } else {
                break;
            }
        }
        Some((Ok(summary.frame()), follower))
    })
}

/// What a public connection follows: the tailer's shared summary windows, or its shared runs of every event
/// with how far the tailer got (it sends a tick's runs before its mark).
enum Feed {
    Summaries(watch::Receiver<Option<Arc<Window>>>),
    Runs(broadcast::Receiver<Arc<Run>>, watch::Receiver<u64>),
}

/// One shared piece of a public feed, or how far the tailer got.
enum Piece {
    Window(Arc<Window>),
    Run(Arc<Run>),
    /// The tailer has seen the ledger up to here: what no run carried (it skipped events while it started, or this
    /// connection lagged) is read from the store.
    Mark(u64),
}

impl Piece {
    fn from(&self) -> u64 {
        match self {
            Piece::Window(window) => window.from,
            Piece::Run(run) => run.from,
            Piece::Mark(mark) => *mark + 1,
        }
    }

    fn to(&self) -> u64 {
        match self {
            Piece::Window(window) => window.to,
            Piece::Run(run) => run.to,
            Piece::Mark(mark) => *mark,
        }
    }

    /// The shared bytes that continue a connection whose last `seq` is `sent` (`from <= sent + 1`): a run is
    /// sliced without a copy; a window is whole or not at all.
    fn after(&self, sent: u64) -> Option<Bytes> {
        match self {
            Piece::Window(window) => (window.from == sent + 1).then(|| window.frame.clone()),
            Piece::Run(run) => Some(run.after(sent)),
            Piece::Mark(_) => None,
        }
    }
}

/// A public watcher: every window or run is built once by the tailer and shared; this connection only writes it,
/// and reads from the store what came before its first piece or between two it missed.
struct PublicWatcher {
    state: Arc<AppState>,
    /// The last `seq` covered (or the start).
    sent: u64,
    /// The head when it connected: what is before it is caught up from the store at once.
    head: u64,
    feed: Feed,
    _permit: OwnedSemaphorePermit,
}

impl PublicWatcher {
    /// The events after `sent` up to `upto`, read from the store: one summary of at most
    /// [`STREAM_SUMMARY_CATCHUP_MAX`] of them, or their public frames built as one run
    /// ([`crate::live::STREAM_RUN_BYTES_MAX`]); `None` when the store has nothing there or cannot be read.
    async fn catch_up(&mut self, upto: u64) -> Option<Bytes> {
        let summarise = matches!(self.feed, Feed::Summaries(_));
        let mut summary = Summary::new(Viewer::Public);
        let mut frames = RunBuilder::default();
        let mut read = 0;
        while self.sent < upto && read < STREAM_SUMMARY_CATCHUP_MAX && !frames.full() {
            let page = self.state.store.events(self.sent, STREAM_PAGE_MAX).await.ok()?;
            if page.is_empty() {
                break;
            }
            for event in page {
                if event.seq > upto || event.seq != self.sent + 1 {
                    break;
                }
                self.sent = event.seq;
                read += 1;
                let shared = Arc::new(Shared::new(event));
                if summarise {
                    summary.add(&shared);
                } else {
                    frames.add(&shared);
                }
            }
        }
        match summarise {
            true => (!summary.is_empty()).then(|| summary.frame()),
            false => frames.take().map(|run| run.frame),
        }
    }

    /// The feed's next piece; `None` once the tailer is gone. A run the connection was too slow to take is
    /// skipped here and read from the store as a gap.
    async fn next_piece(&mut self) -> Option<Piece> {
        loop {
            match &mut self.feed {
                Feed::Summaries(windows) => {
                    windows.changed().await.ok()?;
                    if let Some(window) = windows.borrow_and_update().clone() {
                        return Some(Piece::Window(window));
                    }
                }
                // Runs first: a tick's runs are sent before its mark, so a mark is only read from the store when no
                // run carried those events.
                Feed::Runs(runs, tailed) => tokio::select! {
                    biased;
                    received = runs.recv() => match received {
                        Ok(run) => return Some(Piece::Run(run)),
                        Err(broadcast::error::RecvError::Lagged(_)) => {}
                        Err(broadcast::error::RecvError::Closed) => return None,
                    },
                    changed = tailed.changed() => {
                        changed.ok()?;
                        return Some(Piece::Mark(*tailed.borrow_and_update()));
                    }
                },
            }
        }
    }
}

/// A public feed: the connection's own catch-up from the store first, then the tailer's shared pieces, each
/// written as it is (contiguous: a piece that does not continue where the last frame ended is preceded by a
/// catch-up of the gap; a window that began before this connection's place is replaced by one, a run is sliced).
fn public_feed(watcher: PublicWatcher) -> impl futures::Stream<Item = Chunk> {
    futures::stream::unfold((watcher, None::<Piece>), |(mut watcher, mut target)| async move {
        if watcher.sent < watcher.head {
            let head = watcher.head;
            if let Some(frame) = watcher.catch_up(head).await {
                return Some((Ok(frame), (watcher, target)));
            }
            watcher.head = watcher.sent;
        }
        loop {
            let piece = match target.take() {
                Some(piece) => piece,
                None => {
                    let keepalive = Duration::from_secs(STREAM_KEEPALIVE_S);
                    match tokio::time::timeout(keepalive, watcher.next_piece()).await {
                        Err(_) => return Some((Ok(Bytes::from_static(b":\n\n")), (watcher, None))),
                        Ok(None) => return None,
                        Ok(Some(piece)) => piece,
                    }
                }
            };
            if piece.to() <= watcher.sent {
                continue;
            }
            if let Piece::Mark(mark) = piece {
                // Events the tailer saw but no run carried: from the store (in chunks, the mark kept until done).
                match watcher.catch_up(mark).await {
                    Some(frame) => return Some((Ok(frame), (watcher, Some(piece)))),
                    None => continue,
                }
            }
            if piece.from() <= watcher.sent + 1 {
                if let Some(bytes) = piece.after(watcher.sent) {
                    watcher.sent = piece.to();
                    return Some((Ok(bytes), (watcher, None)));
                }
            }
            // A gap before the piece (filled from the store, then the piece is looked at again), or a window that
            // began before this connection's place (its rest is read from the store instead). A store that cannot
            // fill it leaves the piece for the next one.
            let upto = if piece.from() > watcher.sent + 1 { piece.from() - 1 } else { piece.to() };
            if let Some(frame) = watcher.catch_up(upto).await {
                return Some((Ok(frame), (watcher, Some(piece))));
            }
        }
    })
}

/// One connection's place in the ledger.
struct Follower {
    state: Arc<AppState>,
    receiver: broadcast::Receiver<Arc<Shared>>,
    /// How far the tailer got: events it skipped (it started, or nobody
    /// listened for a moment) are read from the store, never missed.
    tailed: watch::Receiver<u64>,
    /// The last `seq` sent (or the start).
    sent: u64,
    /// The highest `seq` known to exist: until `sent` reaches it, read the store.
    known_head: u64,
    backlog: VecDeque<Event>,
    viewer: Viewer,
    _permit: OwnedSemaphorePermit,
}

impl Follower {
    /// The next event from the backlog, if it continues the sequence (anything older is dropped).
    fn next_in_backlog(&mut self) -> Option<Arc<Shared>> {
        while let Some(event) = self.backlog.pop_front() {
            if event.seq == self.sent + 1 {
                self.sent = event.seq;
                return Some(Arc::new(Shared::new(event)));
            }
        }
        None
    }

    /// A broadcast event: the next one to send, or `None` — already sent
    /// (skipped), or past a gap (the gap is noted, to be read from the store).
    fn accept(&mut self, shared: Arc<Shared>) -> Option<Arc<Shared>> {
        let seq = shared.event.seq;
        if seq == self.sent + 1 {
            self.sent = seq;
            self.known_head = self.known_head.max(seq);
            return Some(shared);
        }
        if seq > self.sent {
            self.known_head = seq;
        }
        None
    }

    /// The next event if it is ready now (in the backlog or the broadcast), without waiting or reading the store.
    fn ready(&mut self) -> Option<Arc<Shared>> {
        loop {
            if let Some(next) = self.next_in_backlog() {
                return Some(next);
            }
            if self.sent < self.known_head {
                return None;
            }
            match self.receiver.try_recv() {
                Ok(shared) => {
                    if let Some(next) = self.accept(shared) {
                        return Some(next);
                    }
                }
                Err(broadcast::error::TryRecvError::Lagged(_)) => self.known_head = u64::MAX,
                Err(_) => return None,
            }
        }
    }

    /// The next event after `sent`, from the backlog, the broadcast, or (to fill a gap) the store.
    async fn next(&mut self) -> Option<Arc<Shared>> {
        loop {
            if self.sent < self.known_head && self.backlog.is_empty() {
                // Behind (resumed from earlier, joined mid-page, or lagged): read what was missed.
                let page = self.state.store.events(self.sent, STREAM_PAGE_MAX).await.ok()?;
                if page.is_empty() {
                    self.known_head = self.sent;
                }
                self.backlog.extend(page);
            }
            // What the backlog and the broadcast already hold comes first; only then does the tailer's mark count.
            if let Some(next) = self.ready() {
                return Some(next);
            }
            if self.sent < self.known_head {
                continue;
            }
            let tailed = *self.tailed.borrow_and_update();
            if tailed > self.sent {
                self.known_head = tailed;
                continue;
            }
            tokio::select! {
                received = self.receiver.recv() => match received {
                    Ok(shared) => {
                        if let Some(next) = self.accept(shared) {
                            return Some(next);
                        }
                    }
                    Err(broadcast::error::RecvError::Lagged(_)) => self.known_head = u64::MAX,
                    Err(broadcast::error::RecvError::Closed) => return None,
                },
                changed = self.tailed.changed() => {
                    if changed.is_err() {
                        return None;
                    }
                }
            }
        }
    }
}

//! One relay connection: text frames in, the session's answers out, and the
//! live feed matched against the connection's subscriptions. Bad input is
//! answered (`NOTICE`, `OK false`, `CLOSED`), never punished by a drop; a
//! connection that stops reading is closed after [`SEND_TIMEOUT_MS`].

use crate::state::AppState;
use axum::extract::ws::{Message as Frame, WebSocket, WebSocketUpgrade};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use bazaar_relay::limits::{MESSAGE_BYTES_MAX, PUBLISHES_IN_FLIGHT_PER_CONNECTION};
use bazaar_relay::relay::ConnectionPlace;
use bazaar_relay::session::Work;
use bazaar_relay::{message, Relay, Session};
use futures::stream::FuturesUnordered;
use futures::{SinkExt, StreamExt};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::broadcast::error::RecvError;

/// A connection whose frames cannot be written for this long is closed.
pub const SEND_TIMEOUT_MS: u64 = 10_000;
/// Pings keep idle connections (and their NAT mappings) open.
pub const PING_EVERY_S: u64 = 30;
/// Frames larger than this end the connection at the WebSocket layer; frames
/// between [`MESSAGE_BYTES_MAX`] and this get a `NOTICE` and the connection stays.
const FRAME_BYTES_HARD_MAX: usize = 4 * MESSAGE_BYTES_MAX;

pub(super) fn upgrade(state: &AppState, relay: Arc<Relay>, upgrade: WebSocketUpgrade) -> Response {
    let Some(place) = relay.admit_connection() else {
        return crate::problem::Problem::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "relay_full",
            format!("The relay holds {} connections, its most; retry shortly.", bazaar_relay::limits::CONNECTIONS_MAX),
        )
        .into_response();
    };
    let challenge = state.random_b64(16);
    let ticket = state.closing.ticket();
    upgrade
        .max_message_size(FRAME_BYTES_HARD_MAX)
        .max_frame_size(FRAME_BYTES_HARD_MAX)
        .on_upgrade(move |socket| serve(socket, relay, Session::new(challenge), (place, ticket)))
}

async fn send_all(socket: &mut WebSocket, frames: Vec<String>) -> bool {
    if frames.is_empty() {
        return true;
    }
    let send = async {
        for frame in frames {
            socket.feed(Frame::Text(frame.into())).await?;
        }
        socket.flush().await
    };
    matches!(tokio::time::timeout(Duration::from_millis(SEND_TIMEOUT_MS), send).await, Ok(Ok(())))
}

/// Whether a frame may open a subscription: the live feed must be joined
/// before its stored events are read, so nothing committed between the two is missed.
fn may_subscribe(text: &str) -> bool {
    text.get(..text.len().min(16)).is_some_and(|start| start.contains("REQ"))
}

async fn serve(
    mut socket: WebSocket,
    relay: Arc<Relay>,
    mut session: Session,
    (_place, mut ticket): (ConnectionPlace, crate::closing::Ticket),
) {
    if !send_all(&mut socket, session.greeting(&relay)).await {
        return;
    }
    // Joined only while the connection has subscriptions: a publisher pays nothing for the feed.
    let mut live: Option<tokio::sync::broadcast::Receiver<Arc<bazaar_relay::Live>>> = None;
    let mut ping = tokio::time::interval(Duration::from_secs(PING_EVERY_S));
    ping.reset();
    // Events published on this connection and waiting for their commit: the
    // connection keeps reading meanwhile, so a pipelining client's events
    // share group commits. `OK`s go out as commits finish.
    let mut publishing = FuturesUnordered::new();
    loop {
        let frames = tokio::select! {
            incoming = socket.recv(), if publishing.len() < PUBLISHES_IN_FLIGHT_PER_CONNECTION => match incoming {
                None | Some(Err(_)) | Some(Ok(Frame::Close(_))) => break,
                Some(Ok(Frame::Text(text))) => {
                    if live.is_none() && may_subscribe(&text) {
                        live = Some(relay.live());
                    }
                    match session.take(&relay, &text).await {
                        Work::Reply(frames) => frames,
                        Work::Publish(publish) => {
                            let relay = relay.clone();
                            publishing.push(async move { publish.run(&relay).await });
                            Vec::new()
                        }
                    }
                }
                Some(Ok(Frame::Binary(_))) => vec![message::notice("binary frames are not read; send NIP-01 JSON as text")],
                Some(Ok(_)) => Vec::new(),
            },
            item = async { live.as_mut().expect("guarded").recv().await }, if live.is_some() => match item {
                Ok(item) => session.live(&item, relay.now()),
                Err(RecvError::Lagged(missed)) => session.lagged(missed),
                Err(RecvError::Closed) => break,
            },
            Some(ok) = publishing.next(), if !publishing.is_empty() => vec![ok],
            // Stopping: the answers to events already accepted go out first, then a close frame.
            () = ticket.stopping(), if publishing.is_empty() => {
                let close = Frame::Close(Some(axum::extract::ws::CloseFrame {
                    code: crate::closing::CLOSE_GOING_AWAY,
                    reason: "the relay is stopping; reconnect".into(),
                }));
                let _ = tokio::time::timeout(Duration::from_millis(SEND_TIMEOUT_MS), socket.send(close)).await;
                break;
            }
            _ = ping.tick() => {
                if socket.send(Frame::Ping(Default::default())).await.is_err() {
                    break;
                }
                Vec::new()
            }
        };
        if !session.has_subscriptions() {
            live = None;
        }
        if !send_all(&mut socket, frames).await {
            break;
        }
    }
}

//! `bazaar-bench talk`: the conversation plane measured against a running
//! `bazaar serve`, side by side with a bare tokio-tungstenite broadcast
//! server as the physical reference.
//!
//! - Fanout: one room of `subscribers` members, each with one WebSocket on
//!   the inbox; posts one at a time; for each post, the time from sending
//!   the POST to the frame reaching the last socket. The reference server
//!   does the least a socket server can: one `tokio::sync::broadcast` of the
//!   same frame to the same number of sockets.
//! - Ingest: `ingest_clients` members post as fast as they can for
//!   `ingest_s` seconds to a room of their own; messages committed per second.
//! - Idle: `idle` inbox WebSockets held open with nothing posted; the
//!   server's resident memory before and after, per connection.

use anyhow::{bail, Context, Result};
use futures::{SinkExt, StreamExt};
use serde::Serialize;
use serde_json::{json, Value};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::Message as Frame;

/// How long one post may take to reach every socket before the run fails.
pub const FANOUT_TIMEOUT_S: u64 = 30;
/// Live streams one member may hold (the server's `STREAM_CONNECTIONS_PER_MEMBER_MAX`).
pub const STREAMS_PER_MEMBER: usize = bazaar_types::limits::STREAM_CONNECTIONS_PER_MEMBER_MAX;

/// A member on the registry under test.
#[derive(Clone)]
pub struct Member {
    pub credential: String,
    pub handle: String,
}

/// Latency figures in milliseconds.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Latency {
    pub samples: usize,
    pub p50_ms: f64,
    pub p99_ms: f64,
    pub max_ms: f64,
}

pub fn latency(mut samples: Vec<Duration>) -> Latency {
    samples.sort();
    let at = |q: f64| {
        let index = ((samples.len() as f64 * q).ceil() as usize).clamp(1, samples.len()) - 1;
        samples[index].as_secs_f64() * 1000.0
    };
    if samples.is_empty() {
        return Latency::default();
    }
    Latency { samples: samples.len(), p50_ms: at(0.50), p99_ms: at(0.99), max_ms: at(1.0) }
}

/// The HTTP side of the registry under test.
pub struct Registry {
    pub url: String,
    pub http: reqwest::Client,
    pub operator: String,
}

impl Registry {
    async fn call(&self, credential: &str, method: reqwest::Method, path: &str, body: Value) -> Result<Value> {
        let response =
            self.http.request(method, format!("{}{path}", self.url)).bearer_auth(credential).json(&body).send().await?;
        let status = response.status();
        let body: Value = response.json().await.unwrap_or(Value::Null);
        if !status.is_success() {
            bail!("{path}: {status} {body}");
        }
        Ok(body)
    }

    /// `count` owners, enrolled by the operator.
    pub async fn people(&self, prefix: &str, count: usize) -> Result<Vec<Member>> {
        let mut people = Vec::with_capacity(count);
        for n in 0..count {
            let key = bazaar_sdk::generate_key();
            let handle = format!("{prefix}-{n}");
            let body = json!({"public_key": hex::encode(key.verifying_key().to_bytes()), "handle": handle});
            let made = self.call(&self.operator, reqwest::Method::POST, "/v1/owners", body).await?;
            let credential = made["credential"].as_str().context("a credential")?.to_string();
            people.push(Member { credential, handle });
        }
        Ok(people)
    }

    /// A public room of `owner` that every one of `members` joins; its id
    /// and the log position after the last join line.
    pub async fn room(&self, owner: &Member, members: &[Member], name: &str) -> Result<(String, u64)> {
        let room = self.call(&owner.credential, reqwest::Method::POST, "/v1/rooms", json!({"name": name})).await?;
        let id = room["id"].as_str().context("a room id")?.to_string();
        let mut head = 0;
        for member in members {
            let path = format!("/v1/channels/{id}/join");
            let joined = self.call(&member.credential, reqwest::Method::POST, &path, json!({})).await?;
            head = joined["joined_after"].as_u64().context("joined_after")? + 1;
        }
        Ok((id, head))
    }

    pub async fn post(&self, member: &Member, room: &str, body: &str) -> Result<u64> {
        let path = format!("/v1/channels/{room}/messages");
        let said = self.call(&member.credential, reqwest::Method::POST, &path, json!({ "body": body })).await?;
        said["position"].as_u64().context("a position")
    }
}

type Socket = tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

/// An inbox WebSocket of `member` from `since`.
pub async fn inbox_socket(url: &str, member: &Member, since: u64) -> Result<Socket> {
    let url = format!("{}/v1/inbox/ws?since={since}", url.replace("http://", "ws://"));
    let mut request = url.into_client_request()?;
    request.headers_mut().insert("authorization", format!("Bearer {}", member.credential).parse()?);
    Ok(tokio_tungstenite::connect_async(request).await?.0)
}

/// Arrival times of each cursor, per socket.
type Arrivals = Arc<Mutex<HashMap<u64, Vec<Instant>>>>;

/// Reads `socket` until it closes, noting when each `cursor` arrives.
fn record(mut socket: Socket, arrivals: Arrivals) {
    tokio::spawn(async move {
        while let Some(Ok(frame)) = socket.next().await {
            if let Frame::Text(text) = frame {
                let cursor = serde_json::from_str::<Value>(&text).ok().and_then(|v| v["cursor"].as_u64());
                if let Some(cursor) = cursor {
                    arrivals.lock().expect("arrivals").entry(cursor).or_default().push(Instant::now());
                }
            }
        }
    });
}

/// Waits until `expected` sockets have seen `cursor`; the last arrival.
async fn last_arrival(arrivals: &Arrivals, cursor: u64, expected: usize) -> Result<Instant> {
    let deadline = Instant::now() + Duration::from_secs(FANOUT_TIMEOUT_S);
    loop {
        if let Some(seen) = arrivals.lock().expect("arrivals").get(&cursor) {
            if seen.len() >= expected {
                return Ok(*seen.iter().max().expect("non-empty"));
            }
        }
        if Instant::now() > deadline {
            bail!("post {cursor} did not reach {expected} sockets within {FANOUT_TIMEOUT_S} s");
        }
        tokio::time::sleep(Duration::from_micros(200)).await;
    }
}

/// Post → last delivery, for `posts` posts to a room whose members each hold one socket.
pub async fn fanout(registry: &Registry, members: &[Member], posts: usize) -> Result<Latency> {
    let (owner, rest) = members.split_first().context("at least one member")?;
    let (room, head) = registry.room(owner, rest, "fanout").await?;
    let arrivals: Arrivals = Arc::default();
    for member in members {
        record(inbox_socket(&registry.url, member, head).await?, arrivals.clone());
    }
    // Warm-up: every socket has replayed to the head and is live.
    let first = registry.post(owner, &room, "warm-up").await?;
    last_arrival(&arrivals, first, members.len()).await?;
    let mut samples = Vec::with_capacity(posts);
    for n in 0..posts {
        let started = Instant::now();
        let cursor = registry.post(owner, &room, &format!("post {n}")).await?;
        samples.push(last_arrival(&arrivals, cursor, members.len()).await? - started);
    }
    Ok(latency(samples))
}

/// The reference: a bare tokio-tungstenite server broadcasting one frame to
/// every socket, measured the same way (the trigger to the last arrival).
pub async fn reference_fanout(sockets: usize, posts: usize) -> Result<Latency> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let address = listener.local_addr()?;
    let (sender, _) = tokio::sync::broadcast::channel::<String>(posts + 16);
    let accepting = sender.clone();
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            let mut receiver = accepting.subscribe();
            tokio::spawn(async move {
                let Ok(mut socket) = tokio_tungstenite::accept_async(stream).await else { return };
                while let Ok(frame) = receiver.recv().await {
                    if socket.send(Frame::Text(frame.into())).await.is_err() {
                        return;
                    }
                }
            });
        }
    });
    let arrivals: Arrivals = Arc::default();
    for _ in 0..sockets {
        let (socket, _) = tokio_tungstenite::connect_async(format!("ws://{address}/")).await?;
        record(socket, arrivals.clone());
    }
    while sender.receiver_count() < sockets {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let mut samples = Vec::with_capacity(posts);
    for n in 0..=posts as u64 {
        let started = Instant::now();
        let frame = json!({"type": "message", "cursor": n, "message": {"body": format!("post {n}"), "position": n}});
        sender.send(frame.to_string())?;
        let took = last_arrival(&arrivals, n, sockets).await? - started;
        if n > 0 {
            samples.push(took);
        }
    }
    Ok(latency(samples))
}

/// Messages committed per second by `posters`, each posting one at a time to a shared room, for `seconds`.
pub async fn ingest(registry: &Registry, posters: &[Member], seconds: u64) -> Result<f64> {
    let (owner, rest) = posters.split_first().context("at least one poster")?;
    let (room, _) = registry.room(owner, rest, "ingest").await?;
    let started = Instant::now();
    let until = started + Duration::from_secs(seconds);
    let tasks = posters.iter().cloned().map(|poster| {
        let (room, url, http) = (room.clone(), registry.url.clone(), registry.http.clone());
        tokio::spawn(async move {
            let registry = Registry { url, http, operator: String::new() };
            let mut posted = 0u64;
            while Instant::now() < until {
                registry.post(&poster, &room, "a message of ordinary length for the ingest run").await?;
                posted += 1;
            }
            anyhow::Ok(posted)
        })
    });
    let mut total = 0;
    for task in futures::future::join_all(tasks).await {
        total += task??;
    }
    Ok(total as f64 / started.elapsed().as_secs_f64())
}

/// The resident set of process `pid`, in KiB.
pub fn rss_kib(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|line| line.starts_with("VmRSS:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

/// Server memory per idle inbox socket, in KiB: `count` sockets held open
/// by `members` (as many per member as the server allows).
pub async fn idle(registry: &Registry, pid: u32, members: &[Member], count: usize) -> Result<(f64, Vec<Socket>)> {
    let before = rss_kib(pid).context("the server's RSS")?;
    let mut sockets = Vec::with_capacity(count);
    for n in 0..count {
        let member = &members[n / STREAMS_PER_MEMBER];
        sockets.push(inbox_socket(&registry.url, member, u64::MAX / 2).await?);
    }
    // Let every upgrade settle.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let after = rss_kib(pid).context("the server's RSS")?;
    Ok((after.saturating_sub(before) as f64 / count as f64, sockets))
}

/// The plane's own writer, without HTTP: `threads` threads posting to one
/// embedded store in `dir` for `seconds`; messages committed per second.
pub fn store_ingest(dir: &std::path::Path, threads: usize, seconds: u64) -> Result<f64> {
    use bazaar_conversation::sqlite::SqliteConversationStore;
    use bazaar_conversation::{ConversationStore, HandleBook, NewMessage, NewRoom};
    use bazaar_types::MemberId;
    struct Wall;
    impl bazaar_types::Clock for Wall {
        fn now(&self) -> bazaar_types::Timestamp {
            bazaar_types::Timestamp(0)
        }
    }
    let store = SqliteConversationStore::open(
        &dir.join("store-ingest.db"),
        Arc::new(Wall),
        Arc::new(bazaar_types::SeededEntropy::new(1)),
    )?;
    let owner = MemberId("did:key:zbench".into());
    let room =
        store.create_room(NewRoom { owner: owner.clone(), name: "ingest".into(), private: false, sealed: false })?.id;
    let until = Instant::now() + Duration::from_secs(seconds);
    let started = Instant::now();
    let total = std::sync::atomic::AtomicU64::new(0);
    std::thread::scope(|scope| {
        for _ in 0..threads {
            let (store, room, owner, total) = (&store, &room, &owner, &total);
            scope.spawn(move || {
                let book = HandleBook::default();
                while Instant::now() < until {
                    let body = "a message of ordinary length for the ingest run";
                    let new = NewMessage::text(room.clone(), owner.clone(), body);
                    if store.post(&book, new).is_ok() {
                        total.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    }
                }
            });
        }
    });
    Ok(total.into_inner() as f64 / started.elapsed().as_secs_f64())
}

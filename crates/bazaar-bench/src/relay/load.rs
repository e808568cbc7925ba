//! `bazaar-bench relay`'s load, the same bytes for every relay under test:
//!
//! - The corpus: NIP-90 job requests (kind 5905) signed before any clock
//!   starts, each `created_at` one second after the one before (all in the
//!   past hours), spread over [`TOPICS`] `t` topics.
//! - Ingest: the events over `connections` WebSockets, pipelined: up to
//!   `window` events in flight on each, the next sent as an `OK` comes back;
//!   send → `OK` timed per event, refusals counted and kept.
//! - The reader: one more WebSocket repeating `REQ` for the newest
//!   [`QUERY_LIMIT`] events of [`QUERY_TOPIC`], send → `EOSE` timed, each
//!   answer checked id by id against the corpus, then `CLOSE`.

use crate::talk::{latency, Latency};
use anyhow::{bail, Context, Result};
use bazaar_relay::jobs::{request_tags, JOB_REQUEST};
use bazaar_relay::Signer;
use futures::{SinkExt, StreamExt};
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio_tungstenite::tungstenite::{Message as Frame, Utf8Bytes};

/// Topics the requests are spread over (`["t", "topic-<k>"]`): one query selects 1/8 of them.
pub const TOPICS: usize = 8;
/// The topic the reader asks for. The ingest that runs beside the reader
/// writes only the other topics, so every answer is known in advance.
pub const QUERY_TOPIC: usize = 0;
/// Events one answer holds: the query's `limit`.
pub const QUERY_LIMIT: usize = 500;
/// Bytes of `content` per request.
pub const CONTENT_BYTES: usize = 300;
/// Keys the corpus is signed with, in turn.
pub const AUTHORS: usize = 16;
/// The workflow every request names.
pub const WORKFLOW: &str = "bench-relay/v1";
/// A connection that hears nothing for this long while it waits fails its phase.
pub const SILENCE_TIMEOUT_S: u64 = 60;
/// Most queries the reader makes in one phase, however long the ingest beside it runs.
pub const QUERIES_MAX: usize = 100_000;
/// Distinct refusal and error texts kept per phase (the counts are always complete).
pub const REASONS_KEPT: usize = 8;

pub type Socket = tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

/// One signed event, ready to send: its id and its `["EVENT", …]` frame.
#[derive(Clone)]
pub struct Wire {
    pub id: String,
    pub frame: Utf8Bytes,
}

/// Everything a run sends, signed up front.
pub struct Corpus {
    /// The timed ingest, every topic.
    pub ingest: Arc<Vec<Wire>>,
    /// The ingest beside the reader: every topic but [`QUERY_TOPIC`], all newer than `ingest`.
    pub beside: Arc<Vec<Wire>>,
    /// The ids a query for [`QUERY_TOPIC`] must answer, newest first.
    pub expected: Arc<Vec<String>>,
    /// Events of [`QUERY_TOPIC`] in `ingest` (what the queried store holds of it).
    pub topic_events: usize,
}

/// The harness's time of day: the relays judge `created_at` by their own clocks.
// reason: events must carry the real time for the relays under test to take them; nothing is replayed by seed.
#[allow(clippy::disallowed_methods)]
pub fn unix_now_s() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0)
}

/// The `REQ` filter the reader sends.
pub fn query_filter() -> serde_json::Value {
    serde_json::json!({"kinds": [JOB_REQUEST], "#t": [topic(QUERY_TOPIC)], "limit": QUERY_LIMIT})
}

fn topic(k: usize) -> String {
    format!("topic-{k}")
}

/// Signs `ingest` + `beside` requests (on every core), `created_at` ending `now`.
pub fn corpus(ingest: usize, beside: usize, seed: u64, now: u64) -> Corpus {
    let signers: Vec<Signer> = (0..AUTHORS as u64)
        .map(|n| Signer::generate(&bazaar_types::SeededEntropy::new(seed.wrapping_mul(1_000).wrapping_add(n))))
        .collect();
    let total = ingest + beside;
    let first = now.saturating_sub(total as u64);
    // The ingest cycles through every topic; the events beside the reader skip the one it reads.
    let topic_of = |i: usize| match i < ingest {
        true => i % TOPICS,
        false => 1 + (i - ingest) % (TOPICS - 1),
    };
    let threads = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1);
    let chunk = total.div_ceil(threads).max(1);
    let mut wires: Vec<Wire> = Vec::with_capacity(total);
    std::thread::scope(|scope| {
        let parts: Vec<_> = (0..total)
            .step_by(chunk)
            .map(|start| {
                let signers = &signers;
                scope.spawn(move || {
                    (start..(start + chunk).min(total))
                        .map(|i| job(&signers[i % AUTHORS], i, topic_of(i), first + i as u64))
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        for part in parts {
            wires.extend(part.join().expect("a signing thread"));
        }
    });
    let beside = wires.split_off(ingest);
    let mine: Vec<usize> = (0..ingest).filter(|&i| topic_of(i) == QUERY_TOPIC).collect();
    // Distinct created_at, rising with the index: newest first is highest index first.
    let expected = mine.iter().rev().take(QUERY_LIMIT).map(|&i| wires[i].id.clone()).collect();
    Corpus { ingest: Arc::new(wires), beside: Arc::new(beside), expected: Arc::new(expected), topic_events: mine.len() }
}

/// Request `i`: a Bazaar job (`request_tags`) plus its topic, about [`CONTENT_BYTES`] of content.
fn job(signer: &Signer, i: usize, topic_k: usize, created_at: u64) -> Wire {
    let mut tags = request_tags(WORKFLOW, false, &[], &format!("input {i}"));
    tags.push(vec!["t".into(), topic(topic_k)]);
    let mut content = format!("job {i}: summarise the attached text in three sentences; ");
    let mut n = i as u64;
    while content.len() < CONTENT_BYTES {
        n = crate::drive::splitmix64(n);
        content.push_str(&format!("{n:016x} "));
    }
    content.truncate(CONTENT_BYTES);
    let event = signer.sign(created_at, JOB_REQUEST, tags, content);
    Wire { id: event.id.to_hex(), frame: format!("[\"EVENT\",{}]", event.to_json()).into() }
}

/// Opens `count` WebSockets to `url`, with Nagle's algorithm off as browsers
/// do: with it on, a `REQ` sent right after a `CLOSE` waits for the relay's
/// delayed ACK of the `CLOSE` (40 ms on Linux), which this would time.
pub async fn connect(url: &str, count: usize) -> Result<Vec<Socket>> {
    let mut sockets = Vec::with_capacity(count);
    for _ in 0..count {
        let (socket, _) = tokio_tungstenite::connect_async_with_config(url, None, true)
            .await
            .with_context(|| format!("connecting to {url}"))?;
        sockets.push(socket);
    }
    Ok(sockets)
}

/// What one ingest phase saw.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Ingest {
    pub events: usize,
    pub connections: usize,
    pub window: usize,
    /// `OK true`, duplicates included.
    pub accepted: usize,
    /// `OK true "duplicate: …"` (none expected on a fresh store).
    pub duplicates: usize,
    /// `OK false`.
    pub refused: usize,
    /// Connections that closed, went silent or sent something unreadable.
    pub failed_connections: usize,
    /// A few refusal, `NOTICE` and error texts.
    pub reasons: Vec<String>,
    pub elapsed_s: f64,
    /// Accepted `OK`s per second of wall time (first send to last `OK`).
    pub events_per_s: f64,
    /// Send → `OK`, per event.
    pub ok: Latency,
}

/// One connection's share of an ingest.
#[derive(Default)]
struct Lane {
    accepted: usize,
    duplicates: usize,
    refused: usize,
    reasons: Vec<String>,
    ok: Vec<Duration>,
    failed: bool,
}

impl Lane {
    /// Counts one `OK` for an event this lane sent.
    fn answer(&mut self, accepted: bool, message: &str) {
        match accepted {
            true => {
                self.accepted += 1;
                self.duplicates += usize::from(message.starts_with("duplicate:"));
            }
            false => {
                self.refused += 1;
                self.note(format!("OK false: {message}"));
            }
        }
    }

    fn note(&mut self, reason: String) {
        if self.reasons.len() < REASONS_KEPT && !self.reasons.contains(&reason) {
            self.reasons.push(reason);
        }
    }
}

/// Sends every event of `events` over `sockets` (event i on socket i mod n), `window` in flight on each.
pub async fn ingest(sockets: Vec<Socket>, events: Arc<Vec<Wire>>, window: usize) -> Ingest {
    let lanes = sockets.len();
    let started = Instant::now();
    let tasks: Vec<_> = sockets
        .into_iter()
        .enumerate()
        .map(|(lane, socket)| tokio::spawn(publish(socket, events.clone(), lane, lanes, window)))
        .collect();
    let mut total = Ingest { events: events.len(), connections: lanes, window, ..Ingest::default() };
    let mut samples = Vec::with_capacity(events.len());
    for task in futures::future::join_all(tasks).await {
        let lane = task.unwrap_or_else(|error| {
            let mut lane = Lane { failed: true, ..Lane::default() };
            lane.note(format!("a publishing task failed: {error}"));
            lane
        });
        total.accepted += lane.accepted;
        total.duplicates += lane.duplicates;
        total.refused += lane.refused;
        total.failed_connections += usize::from(lane.failed);
        for reason in lane.reasons {
            if total.reasons.len() < REASONS_KEPT && !total.reasons.contains(&reason) {
                total.reasons.push(reason);
            }
        }
        samples.extend(lane.ok);
    }
    total.elapsed_s = started.elapsed().as_secs_f64();
    total.events_per_s = total.accepted as f64 / total.elapsed_s.max(1e-9);
    total.ok = latency(samples);
    total
}

/// One connection: its share of `events`, pipelined `window` deep.
async fn publish(socket: Socket, events: Arc<Vec<Wire>>, lane: usize, lanes: usize, window: usize) -> Lane {
    let mine: Vec<usize> = (lane..events.len()).step_by(lanes).collect();
    let index: HashMap<&str, usize> = mine.iter().enumerate().map(|(k, &i)| (events[i].id.as_str(), k)).collect();
    let mut sent_at: Vec<Option<Instant>> = vec![None; mine.len()];
    let mut out = Lane { ok: Vec::with_capacity(mine.len()), ..Lane::default() };
    let (mut sink, mut stream) = socket.split();
    let (mut next, mut answered) = (0, 0);
    while answered < mine.len() {
        let mut fed = false;
        while next < mine.len() && next - answered < window {
            if let Err(error) = sink.feed(Frame::Text(events[mine[next]].frame.clone())).await {
                out.note(format!("sending: {error}"));
                out.failed = true;
                return out;
            }
            sent_at[next] = Some(Instant::now());
            (next, fed) = (next + 1, true);
        }
        if fed && sink.flush().await.is_err() {
            out.note("the relay closed the connection while events were being sent".into());
            out.failed = true;
            return out;
        }
        let text = match next_text(&mut stream).await {
            Ok(text) => text,
            Err(error) => {
                out.note(format!("after {answered} of {} OKs: {error:#}", mine.len()));
                out.failed = true;
                return out;
            }
        };
        match ok_frame(&text) {
            Some((id, accepted, message)) => match index.get(id.as_str()).and_then(|&k| sent_at[k].take()) {
                Some(at) => {
                    out.ok.push(at.elapsed());
                    answered += 1;
                    out.answer(accepted, &message);
                }
                None => out.note(format!("an OK for an event not in flight here: {id}")),
            },
            None => out.note(format!("unexpected frame: {}", text.chars().take(200).collect::<String>())),
        }
    }
    let _ = sink.close().await;
    out
}

/// The next text frame, answering nothing else; an error on close, failure or silence.
async fn next_text<S>(stream: &mut S) -> Result<Utf8Bytes>
where
    S: futures::Stream<Item = Result<Frame, tokio_tungstenite::tungstenite::Error>> + Unpin,
{
    loop {
        let frame = tokio::time::timeout(Duration::from_secs(SILENCE_TIMEOUT_S), stream.next())
            .await
            .with_context(|| format!("the relay sent nothing for {SILENCE_TIMEOUT_S} s"))?;
        match frame {
            Some(Ok(Frame::Text(text))) => return Ok(text),
            Some(Ok(Frame::Close(close))) => bail!("the relay closed the connection: {close:?}"),
            Some(Ok(_)) => continue,
            Some(Err(error)) => bail!("the connection failed: {error}"),
            None => bail!("the connection ended"),
        }
    }
}

/// `["OK", id, accepted, message]`, or `None` for any other frame.
fn ok_frame(text: &str) -> Option<(String, bool, String)> {
    if verb(text) != Some("OK") {
        return None;
    }
    let (_, id, accepted, message): (String, String, bool, String) = serde_json::from_str(text).ok()?;
    Some((id, accepted, message))
}

/// A relay message's type (its first string), read without parsing the rest.
fn verb(text: &str) -> Option<&str> {
    let start = text.find('"')? + 1;
    let end = start + text[start..].find('"')?;
    text.get(..start - 1)?.trim().strip_prefix('[')?.trim().is_empty().then(|| &text[start..end])
}

/// What the reader saw beside one ingest.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Queries {
    /// Answers that reached `EOSE` while the ingest ran.
    pub answers: usize,
    /// Answers that were not exactly the expected ids, newest first.
    pub wrong: usize,
    /// The reader's connection failed (closed, silent, `CLOSED`).
    pub failed: bool,
    /// A few descriptions of wrong answers and failures.
    pub problems: Vec<String>,
    /// Pause between one answer and the next query.
    pub pause_ms: u64,
    /// Send `REQ` → `EOSE`.
    pub eose: Latency,
}

/// The part of an `EVENT` frame's event the check reads.
#[derive(Deserialize)]
struct Head {
    id: String,
}

/// One query on `socket` as subscription `sub`: send → `EOSE`, and what
/// is wrong with the answer, if anything; then `CLOSE`.
pub async fn query_once(socket: &mut Socket, sub: &str, expected: &[String]) -> Result<(Duration, Option<String>)> {
    let req = serde_json::json!(["REQ", sub, query_filter()]).to_string();
    let started = Instant::now();
    socket.send(Frame::Text(req.into())).await?;
    let mut frames = Vec::with_capacity(QUERY_LIMIT);
    loop {
        let text = next_text(socket).await?;
        match verb(&text) {
            Some("EVENT") => frames.push(text),
            Some("EOSE") if subscription(&text).as_deref() == Some(sub) => break,
            Some("EOSE") => {}
            _ => bail!("while waiting for EOSE: {}", text.chars().take(200).collect::<String>()),
        }
    }
    let took = started.elapsed();
    socket.send(Frame::Text(serde_json::json!(["CLOSE", sub]).to_string().into())).await?;
    Ok((took, check(&frames, sub, expected)))
}

/// `None` when the `EVENT` frames for `sub` carry exactly `expected`, in order.
fn check(frames: &[Utf8Bytes], sub: &str, expected: &[String]) -> Option<String> {
    let mut ids = Vec::with_capacity(frames.len());
    for text in frames {
        match serde_json::from_str::<(String, String, Head)>(text) {
            Ok((_, for_sub, head)) if for_sub == sub => ids.push(head.id),
            Ok(_) => {}
            Err(error) => return Some(format!("an unreadable EVENT frame: {error}")),
        }
    }
    if ids == expected {
        return None;
    }
    let known = ids.iter().filter(|id| expected.contains(id)).count();
    let first = ids.iter().zip(expected).position(|(a, b)| a != b).unwrap_or(ids.len().min(expected.len()));
    Some(format!(
        "{} events ({known} of the expected {}), first out of place at position {first}",
        ids.len(),
        expected.len()
    ))
}

/// The subscription id of an `EOSE` or `CLOSED` frame.
fn subscription(text: &str) -> Option<String> {
    let parts: Vec<serde_json::Value> = serde_json::from_str(text).ok()?;
    parts.get(1)?.as_str().map(str::to_string)
}

/// `count` queries on `socket` with nothing else running (subscriptions `quiet-<n>`), timed and checked.
pub async fn read_quietly(socket: &mut Socket, count: usize, expected: &[String]) -> Result<Queries> {
    let mut out = Queries::default();
    let mut samples = Vec::with_capacity(count);
    for n in 0..count {
        let (took, problem) = query_once(socket, &format!("quiet-{n}"), expected).await?;
        samples.push(took);
        out.answers += 1;
        if let Some(problem) = problem {
            out.wrong += 1;
            if out.problems.len() < REASONS_KEPT {
                out.problems.push(format!("quiet answer {n}: {problem}"));
            }
        }
    }
    out.eose = latency(samples);
    Ok(out)
}

/// Repeats the query on `socket` until `done`, pausing `pause` between answers.
pub async fn read_until(
    mut socket: Socket,
    expected: Arc<Vec<String>>,
    pause: Duration,
    done: Arc<AtomicBool>,
) -> Queries {
    let mut out = Queries { pause_ms: pause.as_millis() as u64, ..Queries::default() };
    let mut samples = Vec::new();
    let mut n = 1;
    while !done.load(Ordering::Acquire) && n <= QUERIES_MAX {
        match query_once(&mut socket, &format!("busy-{n}"), &expected).await {
            Ok((took, problem)) => {
                samples.push(took);
                out.answers += 1;
                if let Some(problem) = problem {
                    out.wrong += 1;
                    if out.problems.len() < REASONS_KEPT {
                        out.problems.push(format!("answer {n}: {problem}"));
                    }
                }
            }
            Err(error) => {
                out.failed = true;
                out.problems.push(format!("query {n}: {error:#}"));
                break;
            }
        }
        n += 1;
        if !pause.is_zero() {
            tokio::time::sleep(pause).await;
        }
    }
    out.eose = latency(samples);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn verbs_are_read_without_parsing() {
        assert_eq!(verb(r#"["OK","ab",true,""]"#), Some("OK"));
        assert_eq!(verb(r#"[ "EOSE", "s"]"#), Some("EOSE"));
        assert_eq!(verb(r#"{"OK": 1}"#), None);
        assert_eq!(ok_frame(r#"["OK","ab",false,"blocked: no"]"#), Some(("ab".into(), false, "blocked: no".into())));
        assert_eq!(ok_frame(r#"["NOTICE","x"]"#), None);
        assert_eq!(subscription(r#"["EOSE","bench-3"]"#).as_deref(), Some("bench-3"));
    }

    #[test]
    fn the_corpus_is_valid_and_its_answer_is_the_newest_of_the_topic() {
        let now = 1_800_000_000;
        let corpus = corpus(TOPICS * QUERY_LIMIT, 70, 7, now);
        assert_eq!((corpus.ingest.len(), corpus.beside.len()), (TOPICS * QUERY_LIMIT, 70));
        assert_eq!((corpus.topic_events, corpus.expected.len()), (QUERY_LIMIT, QUERY_LIMIT));
        let parse = |wire: &Wire| {
            let (verb, event): (String, bazaar_relay::Event) = serde_json::from_str(&wire.frame).unwrap();
            assert_eq!(verb, "EVENT");
            event.verify().unwrap();
            assert_eq!(event.id.to_hex(), wire.id);
            event
        };
        let events: Vec<_> = corpus.ingest.iter().map(parse).collect();
        let wanted = topic(QUERY_TOPIC);
        let mut of_topic: Vec<_> = events.iter().filter(|e| e.tag_values("t").any(|t| t == wanted)).collect();
        of_topic.sort_by_key(|e| std::cmp::Reverse(e.created_at));
        let ids: Vec<String> = of_topic.iter().map(|e| e.id.to_hex()).collect();
        assert_eq!(ids, *corpus.expected);
        assert!(events.iter().all(|e| e.kind == JOB_REQUEST && e.content.len() == CONTENT_BYTES && e.created_at < now));
        for wire in corpus.beside.iter() {
            let event = parse(wire);
            assert!(event.tag_values("t").all(|t| t != wanted));
            assert!(event.created_at > events.last().unwrap().created_at);
        }
    }
}

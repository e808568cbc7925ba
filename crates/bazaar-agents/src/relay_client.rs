//! A small NIP-01 client for the labor market's roles (`jobs`, `worker`,
//! `validator`): outbound connections only, to any relay. It publishes and
//! waits for `OK`, reads a subscription to `EOSE`, and follows it live. Frames
//! it did not ask about (NOTICEs, other subscriptions) are skipped.

use anyhow::{anyhow, bail, Context, Result};
use bazaar_relay::jobs::task::{derive, task_filters, TaskState, TaskView};
use bazaar_relay::jobs::JobRequest;
use bazaar_relay::{Event, Filter, Hex32};
use futures::{SinkExt, StreamExt};
use serde_json::{json, Value};
use std::time::Duration;
use tokio_tungstenite::tungstenite::Message;

/// How long one relay answer may take before the client gives up.
pub const ANSWER_TIMEOUT_S: u64 = 15;

type Socket = tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

pub struct RelayClient {
    socket: Socket,
    url: String,
}

/// What a subscription delivered next.
#[derive(Debug)]
pub enum Delivery {
    Event(Event),
    /// Stored events are done; live ones follow.
    EndOfStored,
    /// The relay ended the subscription, with its reason.
    Closed(String),
}

impl RelayClient {
    pub async fn connect(url: &str) -> Result<RelayClient> {
        let connect = tokio_tungstenite::connect_async(url);
        let (socket, _) = tokio::time::timeout(Duration::from_secs(ANSWER_TIMEOUT_S), connect)
            .await
            .map_err(|_| anyhow!("connecting to the relay at {url} timed out"))?
            .with_context(|| format!("connecting to the relay at {url}"))?;
        Ok(RelayClient { socket, url: url.to_string() })
    }

    pub fn url(&self) -> &str {
        &self.url
    }

    async fn send(&mut self, value: Value) -> Result<()> {
        self.socket.send(Message::text(value.to_string())).await.context("sending to the relay")
    }

    /// The next JSON frame, waiting at most `wait`; `None` when the wait ends first.
    async fn frame(&mut self, wait: Duration) -> Result<Option<Value>> {
        let deadline = tokio::time::Instant::now() + wait;
        loop {
            let next = match tokio::time::timeout_at(deadline, self.socket.next()).await {
                Err(_) => return Ok(None),
                Ok(next) => next,
            };
            match next {
                None => bail!("the relay closed the connection"),
                Some(Err(error)) => return Err(error).context("reading from the relay"),
                Some(Ok(Message::Text(text))) => return Ok(Some(serde_json::from_str(&text)?)),
                Some(Ok(Message::Close(frame))) => bail!("the relay closed the connection: {frame:?}"),
                Some(Ok(_)) => {}
            }
        }
    }

    /// Publishes `event`; returns the relay's `(accepted, message)`.
    pub async fn publish(&mut self, event: &Event) -> Result<(bool, String)> {
        self.send(json!(["EVENT", event])).await?;
        let id = event.id.to_hex();
        loop {
            let frame = self
                .frame(Duration::from_secs(ANSWER_TIMEOUT_S))
                .await?
                .ok_or_else(|| anyhow!("the relay did not answer OK within {ANSWER_TIMEOUT_S} s"))?;
            if frame[0] == "OK" && frame[1] == id.as_str() {
                return Ok((frame[2].as_bool().unwrap_or(false), frame[3].as_str().unwrap_or_default().to_string()));
            }
        }
    }

    /// Opens subscription `sub` with `filters`.
    pub async fn subscribe(&mut self, sub: &str, filters: &[Filter]) -> Result<()> {
        let mut message = vec![json!("REQ"), json!(sub)];
        message.extend(filters.iter().map(Filter::to_value));
        self.send(Value::from(message)).await
    }

    /// The next delivery on `sub` within `wait` (`None` when the wait ends).
    /// Events whose id or signature does not verify are dropped.
    pub async fn next(&mut self, sub: &str, wait: Duration) -> Result<Option<Delivery>> {
        let deadline = tokio::time::Instant::now() + wait;
        loop {
            let left = deadline.saturating_duration_since(tokio::time::Instant::now());
            let Some(frame) = self.frame(left).await? else { return Ok(None) };
            if frame[1] != sub {
                continue;
            }
            match frame[0].as_str() {
                Some("EVENT") => {
                    let Ok(event) = serde_json::from_value::<Event>(frame[2].clone()) else { continue };
                    if event.verify().is_ok() {
                        return Ok(Some(Delivery::Event(event)));
                    }
                }
                Some("EOSE") => return Ok(Some(Delivery::EndOfStored)),
                Some("CLOSED") => return Ok(Some(Delivery::Closed(frame[2].as_str().unwrap_or_default().to_string()))),
                _ => {}
            }
        }
    }

    /// Every stored event matching `filters` (to EOSE), then closes the subscription.
    pub async fn fetch(&mut self, filters: &[Filter]) -> Result<Vec<Event>> {
        let sub = "fetch";
        self.subscribe(sub, filters).await?;
        let mut events = Vec::new();
        loop {
            match self.next(sub, Duration::from_secs(ANSWER_TIMEOUT_S)).await? {
                None => bail!("the relay did not finish its stored events within {ANSWER_TIMEOUT_S} s"),
                Some(Delivery::Event(event)) => events.push(event),
                Some(Delivery::EndOfStored) => break,
                Some(Delivery::Closed(reason)) => bail!("the relay refused the request: {reason}"),
            }
        }
        self.send(json!(["CLOSE", sub])).await?;
        Ok(events)
    }
}

/// Reads the task (and, for `wait_s > 0`, follows it live until answered or the wait ends).
pub async fn follow_task(url: &str, task: &Hex32, wait_s: u64) -> Result<TaskView> {
    follow_task_until(url, task, wait_s, &|view| view.state == TaskState::Answered).await
}

/// Reads the task, then follows it on the same subscription until `done`
/// says so or `wait_s` ends: one connection, no polling.
pub async fn follow_task_until(
    url: &str,
    task: &Hex32,
    wait_s: u64,
    done: &(dyn Fn(&TaskView) -> bool + Sync),
) -> Result<TaskView> {
    let task = *task;
    let task_id = task.to_hex();
    let mut client = RelayClient::connect(url).await?;
    let sub = "task";
    client.subscribe(sub, &task_filters(&task)).await?;
    let mut events: Vec<Event> = Vec::new();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(ANSWER_TIMEOUT_S);
    loop {
        let left = deadline.saturating_duration_since(tokio::time::Instant::now());
        match client.next(sub, left).await? {
            None => bail!("the relay did not finish its stored events in time"),
            Some(Delivery::Event(event)) => events.push(event),
            Some(Delivery::EndOfStored) => break,
            Some(Delivery::Closed(reason)) => bail!("the relay refused the request: {reason}"),
        }
    }
    let request = events.iter().find(|e| e.id == task).and_then(JobRequest::from_event).ok_or_else(|| {
        anyhow!(
            "task {task_id} is not on {url}: never posted there, or its history passed the relay's retention ({} days on a Bazaar relay)",
            bazaar_relay::limits::RETENTION_S / 86_400
        )
    })?;
    let until = tokio::time::Instant::now() + Duration::from_secs(wait_s);
    while !done(&derive(&request, &events)) {
        let left = until.saturating_duration_since(tokio::time::Instant::now());
        match client.next(sub, left).await? {
            None => break,
            Some(Delivery::Event(event)) => events.push(event),
            Some(Delivery::EndOfStored) => {}
            Some(Delivery::Closed(reason)) => bail!("the relay ended the subscription: {reason}"),
        }
    }
    Ok(derive(&request, &events))
}

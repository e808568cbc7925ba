//! One connection's state: its subscriptions, the keys it authenticated
//! (NIP-42), its publish budget. It turns each text frame into the frames to
//! answer with, and each live event into the frames its subscriptions want.
//! Nothing here closes a connection: bad input is answered, never punished
//! by a drop.

use std::collections::{HashMap, HashSet};
use std::time::Instant;

use crate::event::{Event, PublicKey};
use crate::filter::Filter;
use crate::ingest::Live;
use crate::kind::AUTH;
use crate::limits::{AUTH_WINDOW_S, MESSAGE_BYTES_MAX, PUBLISH_PER_S_PER_CONNECTION, SUBSCRIPTIONS_MAX};
use crate::message::{self, ClientMessage};
use crate::relay::{Access, Relay};

/// A token bucket: [`PUBLISH_PER_S_PER_CONNECTION`] per second, as large a burst.
struct Bucket {
    tokens: f64,
    at: Instant,
}

impl Bucket {
    fn take(&mut self, now: Instant) -> bool {
        let rate = f64::from(PUBLISH_PER_S_PER_CONNECTION);
        self.tokens = (self.tokens + now.duration_since(self.at).as_secs_f64() * rate).min(rate);
        self.at = now;
        if self.tokens >= 1.0 {
            self.tokens -= 1.0;
            true
        } else {
            false
        }
    }
}

/// What a frame asks of its connection.
pub enum Work {
    /// Send these frames now.
    Reply(Vec<String>),
    /// Publish an event; its `OK` is the frame [`Publish::run`] returns.
    Publish(Box<Publish>),
}

/// An event admitted to publishing, with the keys its connection had authenticated when it arrived.
pub struct Publish {
    event: Event,
    authed: HashSet<PublicKey>,
}

impl Publish {
    /// Publishes and returns the `OK` frame.
    pub async fn run(self, relay: &Relay) -> String {
        let id = self.event.id.to_hex();
        let ack = relay.publish(self.event, &self.authed).await;
        message::ok(&id, ack.accepted, &ack.message)
    }
}

pub struct Session {
    subscriptions: HashMap<String, Vec<Filter>>,
    authed: HashSet<PublicKey>,
    challenge: String,
    bucket: Bucket,
}

impl Session {
    /// A new connection; `challenge` is its NIP-42 challenge (random, from the caller's entropy).
    pub fn new(challenge: String) -> Session {
        let rate = f64::from(PUBLISH_PER_S_PER_CONNECTION);
        Session {
            subscriptions: HashMap::new(),
            authed: HashSet::new(),
            challenge,
            bucket: Bucket { tokens: rate, at: Instant::now() },
        }
    }

    /// The frames to send when the connection opens: an `AUTH` challenge in private mode, nothing in public mode.
    pub fn greeting(&self, relay: &Relay) -> Vec<String> {
        match relay.config.access {
            Access::Public => Vec::new(),
            Access::Private { .. } => vec![message::auth_challenge(&self.challenge)],
        }
    }

    /// What one text frame asks: frames to answer now, or an event to
    /// publish, which the caller may run beside the connection's next frames
    /// (a pipelining client then has several events in one group commit).
    pub async fn take(&mut self, relay: &Relay, text: &str) -> Work {
        if text.len() > MESSAGE_BYTES_MAX {
            return Work::Reply(vec![message::notice(&format!(
                "message longer than {MESSAGE_BYTES_MAX} bytes was not read"
            ))]);
        }
        let frames = match ClientMessage::parse(text) {
            ClientMessage::Unreadable(reason) => vec![message::notice(&reason)],
            ClientMessage::Event(Err((id, invalid))) => match id {
                Some(id) => vec![message::ok(&id, false, &invalid.to_string())],
                None => vec![message::notice(&invalid.to_string())],
            },
            ClientMessage::Event(Ok(event)) => {
                if !self.bucket.take(Instant::now()) {
                    let reason = format!(
                        "rate-limited: at most {PUBLISH_PER_S_PER_CONNECTION} events per second per connection"
                    );
                    return Work::Reply(vec![message::ok(&event.id.to_hex(), false, &reason)]);
                }
                return Work::Publish(Box::new(Publish { event, authed: self.authed.clone() }));
            }
            ClientMessage::Req { sub, filters: Err(reason) } => {
                self.subscriptions.remove(&sub);
                vec![message::closed(&sub, &reason)]
            }
            ClientMessage::Req { sub, filters: Ok(filters) } => self.subscribe(relay, sub, filters).await,
            ClientMessage::Count { query, .. } => {
                vec![message::closed(&query, "unsupported: this relay does not offer COUNT (NIP-45)")]
            }
            ClientMessage::Close(sub) => {
                self.subscriptions.remove(&sub);
                Vec::new()
            }
            ClientMessage::Auth(Err((id, invalid))) => {
                vec![message::ok(id.as_deref().unwrap_or(""), false, &invalid.to_string())]
            }
            ClientMessage::Auth(Ok(event)) => {
                let id = event.id.to_hex();
                let ack = self.authenticate(relay, &event);
                vec![message::ok(&id, ack.is_ok(), &ack.err().unwrap_or_default())]
            }
        };
        Work::Reply(frames)
    }

    async fn subscribe(&mut self, relay: &Relay, sub: String, filters: Vec<Filter>) -> Vec<String> {
        if matches!(relay.config.access, Access::Private { .. }) && self.authed.is_empty() {
            return vec![message::closed(&sub, "auth-required: this relay is private; authenticate with NIP-42 first")];
        }
        if !self.subscriptions.contains_key(&sub) && self.subscriptions.len() >= SUBSCRIPTIONS_MAX {
            let reason = format!("rate-limited: at most {SUBSCRIPTIONS_MAX} open subscriptions per connection");
            return vec![message::closed(&sub, &reason)];
        }
        self.subscriptions.insert(sub.clone(), filters.clone());
        match relay.query(filters).await {
            Ok(rows) => {
                let mut frames: Vec<String> = rows.iter().map(|json| message::event_for(&sub, json)).collect();
                frames.push(message::eose(&sub));
                frames
            }
            Err(_) => {
                self.subscriptions.remove(&sub);
                vec![message::closed(&sub, "error: the relay could not read its store; subscribe again")]
            }
        }
    }

    /// NIP-42: kind 22242, signed, naming this relay and this connection's challenge, within the window.
    fn authenticate(&mut self, relay: &Relay, event: &Event) -> Result<(), String> {
        event.verify().map_err(|invalid| invalid.to_string())?;
        if event.kind != AUTH {
            return Err("invalid: AUTH takes a kind 22242 event".into());
        }
        if event.tag("challenge") != Some(self.challenge.as_str()) {
            return Err("invalid: the challenge does not match this connection's".into());
        }
        let named = event.tag("relay").map(|url| url.trim_end_matches('/'));
        if named != Some(relay.config.url.trim_end_matches('/')) {
            return Err(format!("invalid: the relay tag must name {}", relay.config.url));
        }
        if event.created_at.abs_diff(relay.now()) > AUTH_WINDOW_S {
            return Err(format!("invalid: created_at must be within {AUTH_WINDOW_S} s of the relay's clock"));
        }
        self.authed.insert(event.pubkey);
        Ok(())
    }

    /// The frames a live event produces on this connection: one per matching subscription.
    pub fn live(&self, live: &Live, now: u64) -> Vec<String> {
        if live.event.expires_at().is_some_and(|at| at <= now) {
            return Vec::new();
        }
        self.subscriptions
            .iter()
            .filter(|(_, filters)| filters.iter().any(|filter| filter.matches(&live.event)))
            .map(|(sub, _)| message::event_for(sub, &live.json))
            .collect()
    }

    /// The connection fell behind the live feed by `missed` events: every
    /// subscription is closed with the reason, so the client knows to resubscribe.
    pub fn lagged(&mut self, missed: u64) -> Vec<String> {
        let reason =
            format!("error: this connection fell {missed} events behind the live feed; subscribe again with since");
        self.subscriptions.drain().map(|(sub, _)| message::closed(&sub, &reason)).collect()
    }

    pub fn has_subscriptions(&self) -> bool {
        !self.subscriptions.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A connection may publish its budget at once, is refused beyond it
    /// (`rate-limited:`), and earns it back at the advertised rate.
    fn live(kind: u16, expires_at: Option<u64>) -> Live {
        let tags = expires_at.map(|at| vec![crate::event::tag(&["expiration", &at.to_string()])]).unwrap_or_default();
        let event = crate::event::Signer::generate(&bazaar_types::SeededEntropy::new(1)).sign(100, kind, tags, "x");
        Live::of(event)
    }

    /// Live events reach each matching subscription once, never an expired
    /// one; a connection that fell behind has every subscription closed with
    /// an `error:` reason, never silently thinned.
    #[test]
    fn live_events_match_subscriptions_and_lag_closes_them() {
        let mut session = Session::new("c".into());
        let notes = Filter { kinds: Some(vec![1]), ..Filter::default() };
        session.subscriptions.insert("notes".into(), vec![notes.clone(), notes]);
        session.subscriptions.insert("jobs".into(), vec![Filter { kinds: Some(vec![5905]), ..Filter::default() }]);
        let sent = session.live(&live(1, None), 100);
        assert_eq!(sent.len(), 1, "one frame per matching subscription: {sent:?}");
        assert!(sent[0].starts_with("[\"EVENT\",\"notes\","));
        assert!(session.live(&live(1, Some(150)), 200).is_empty(), "expired: never sent");
        let closed = session.lagged(7);
        assert_eq!(closed.len(), 2);
        assert!(closed
            .iter()
            .all(|frame| frame.starts_with("[\"CLOSED\"")
                && frame.contains("error: this connection fell 7 events behind")));
        assert!(!session.has_subscriptions());
    }

    #[test]
    fn the_publish_budget_refills_at_its_rate() {
        let start = Instant::now();
        let rate = f64::from(PUBLISH_PER_S_PER_CONNECTION);
        let mut bucket = Bucket { tokens: rate, at: start };
        let taken = (0..PUBLISH_PER_S_PER_CONNECTION * 2).filter(|_| bucket.take(start)).count();
        assert_eq!(taken, PUBLISH_PER_S_PER_CONNECTION as usize);
        let tenth = start + std::time::Duration::from_millis(100);
        let refilled = (0..PUBLISH_PER_S_PER_CONNECTION).filter(|_| bucket.take(tenth)).count();
        assert_eq!(refilled, PUBLISH_PER_S_PER_CONNECTION as usize / 10);
    }
}

//! Webhook endpoints and the durable outbox's rows: one delivery per
//! endpoint per message, written in the message's own transaction.

use bazaar_types::{MemberId, Timestamp};
use serde::Serialize;

use crate::model::Message;

/// A member's webhook endpoint. Its secrets are kept readable (the registry
/// must sign with them) and never serialised.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Endpoint {
    /// `ep_` and 32 hex characters.
    pub id: String,
    pub member: MemberId,
    pub url: String,
    #[serde(skip_serializing)]
    pub secret: String,
    /// The secret before the last rotation, still signed with until `previous_until`.
    #[serde(skip_serializing)]
    pub previous_secret: Option<String>,
    pub previous_until: Option<Timestamp>,
    pub created_at: Timestamp,
    /// Set when the receiver answered 410 Gone; nothing is sent while it is.
    pub disabled_at: Option<Timestamp>,
    pub disabled_reason: Option<String>,
}

impl Endpoint {
    /// The secrets each attempt is signed with at `now`: the current one, and
    /// the previous one while a rotation's overlap lasts.
    pub fn secrets_at(&self, now: Timestamp) -> Vec<&str> {
        let mut secrets = vec![self.secret.as_str()];
        if let (Some(previous), Some(until)) = (&self.previous_secret, self.previous_until) {
            if now < until {
                secrets.push(previous.as_str());
            }
        }
        secrets
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum DeliveryState {
    /// Waiting for its attempt (or its next retry).
    Pending,
    Delivered,
    /// Every attempt failed: on the dead-letter list until replayed.
    Dead,
}

impl DeliveryState {
    pub fn as_str(self) -> &'static str {
        match self {
            DeliveryState::Pending => "pending",
            DeliveryState::Delivered => "delivered",
            DeliveryState::Dead => "dead",
        }
    }

    pub fn parse(text: &str) -> Option<DeliveryState> {
        match text {
            "pending" => Some(DeliveryState::Pending),
            "delivered" => Some(DeliveryState::Delivered),
            "dead" => Some(DeliveryState::Dead),
            _ => None,
        }
    }
}

/// One message owed to one endpoint.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Delivery {
    pub id: u64,
    pub endpoint: String,
    /// The message's log position (its cursor).
    pub position: u64,
    pub state: DeliveryState,
    /// Attempts made so far.
    pub attempts: u32,
    pub next_attempt_at: Timestamp,
    /// Another node (or this one) is attempting it until then.
    #[serde(skip_serializing)]
    pub leased_until: Option<Timestamp>,
    pub last_status: Option<u16>,
    pub last_error: Option<String>,
    pub updated_at: Timestamp,
}

impl Delivery {
    /// The `webhook-id`: the same on every attempt and replay, unique per
    /// endpoint and message, with no `.` in it.
    pub fn webhook_id(&self) -> String {
        format!("msg_{}_{}", self.endpoint.trim_start_matches("ep_"), self.position)
    }
}

/// A delivery claimed for an attempt, with what it needs to be sent.
#[derive(Clone, Debug)]
pub struct Due {
    pub delivery: Delivery,
    pub endpoint: Endpoint,
    pub message: Message,
}

/// How an attempt ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Attempt {
    /// A 2xx answer.
    Delivered { status: u16 },
    /// Anything else but 410: no answer, a timeout, a redirect, 4xx, 5xx.
    Failed { status: Option<u16>, error: String },
    /// 410 Gone: the endpoint is disabled.
    Gone,
}

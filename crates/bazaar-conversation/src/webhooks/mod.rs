//! Webhooks, as the store keeps them: endpoints with their secrets, the
//! outbox a post fills in its own transaction (see `Rows::enqueue_deliveries`),
//! claims with a lease so one attempt is in flight per delivery across nodes,
//! strict order per endpoint, the retry schedule, 410 disabling, and the
//! dead-letter list with replay. The HTTP sending is the server's; the
//! signing is [`sign`]'s.

pub mod sign;

use bazaar_types::limits::{WEBHOOK_DELIVERIES_PAGE_MAX, WEBHOOK_ENDPOINTS_PER_MEMBER_MAX, WEBHOOK_URL_BYTES_MAX};
use bazaar_types::{MemberId, Timestamp};

use crate::compose::check_page;
use crate::delivery::{Attempt, Delivery, DeliveryState, Due, Endpoint};
use crate::engine::{Engine, OutboxRows};
use crate::store::{ConversationError, Result};

/// The webhook half of the conversation store; every [`Engine`] is one.
pub trait WebhookStore {
    /// Registers an endpoint for the member, with a fresh `whsec_` secret.
    /// The URL's safety is the caller's to check first.
    fn add_webhook(&self, member: &MemberId, url: &str) -> Result<Endpoint>;
    fn webhooks(&self, member: &MemberId) -> Result<Vec<Endpoint>>;
    /// Removes the endpoint and every delivery it was owed.
    fn remove_webhook(&self, member: &MemberId, id: &str) -> Result<()>;
    /// A new secret; the old one is still signed with for `overlap_ms`.
    fn rotate_webhook_secret(&self, member: &MemberId, id: &str, overlap_ms: i64) -> Result<Endpoint>;
    /// Claims up to `limit` deliveries due now, at most one per endpoint (the
    /// oldest it is owed, so each endpoint receives in log order), leased for
    /// `lease_ms` so no other claimer attempts them meanwhile.
    fn claim_deliveries(&self, lease_ms: i64, limit: usize) -> Result<Vec<Due>>;
    /// Records how an attempt ended: delivered, retried on the schedule,
    /// dead-lettered after the last attempt, or the endpoint disabled on 410.
    fn finish_delivery(&self, id: u64, attempt: Attempt) -> Result<Delivery>;
    /// An endpoint's deliveries in one state, oldest first.
    fn deliveries(
        &self,
        member: &MemberId,
        endpoint: &str,
        state: DeliveryState,
        limit: usize,
    ) -> Result<Vec<Delivery>>;
    /// Puts every dead delivery of the endpoint back in line, with fresh attempts; how many.
    fn replay_dead(&self, member: &MemberId, endpoint: &str) -> Result<u64>;
}

/// Random hex characters after `ep_` in an endpoint id.
const ENDPOINT_ID_BYTES: usize = 16;

fn owned_endpoint(tx: &impl OutboxRows, member: &MemberId, id: &str) -> Result<Endpoint> {
    match tx.load_endpoint(id)? {
        Some(endpoint) if endpoint.member == *member => Ok(endpoint),
        _ => Err(ConversationError::WebhookNotFound(id.to_string())),
    }
}

fn later(now: Timestamp, ms: i64) -> Timestamp {
    Timestamp(now.0.saturating_add(ms))
}

impl<E: Engine> WebhookStore for E {
    fn add_webhook(&self, member: &MemberId, url: &str) -> Result<Endpoint> {
        if url.is_empty() || url.len() > WEBHOOK_URL_BYTES_MAX {
            return Err(ConversationError::WebhookUrlInvalid(format!("1 to {WEBHOOK_URL_BYTES_MAX} bytes")));
        }
        let mut bytes = [0u8; ENDPOINT_ID_BYTES];
        self.entropy().fill(&mut bytes);
        let id = format!("ep_{}", hex::encode(bytes));
        let secret = sign::new_secret(self.entropy());
        let (member, url) = (member.clone(), url.to_string());
        self.write(move |tx, now| {
            if tx.endpoints_of(&member)?.len() >= WEBHOOK_ENDPOINTS_PER_MEMBER_MAX {
                return Err(ConversationError::TooManyWebhooks { max: WEBHOOK_ENDPOINTS_PER_MEMBER_MAX });
            }
            let endpoint = Endpoint {
                id,
                member: member.clone(),
                url,
                secret,
                previous_secret: None,
                previous_until: None,
                created_at: now,
                disabled_at: None,
                disabled_reason: None,
            };
            tx.insert_endpoint(&endpoint)?;
            Ok(endpoint)
        })
    }

    fn webhooks(&self, member: &MemberId) -> Result<Vec<Endpoint>> {
        self.read(|tx| tx.endpoints_of(member))
    }

    fn remove_webhook(&self, member: &MemberId, id: &str) -> Result<()> {
        let (member, id) = (member.clone(), id.to_string());
        self.write(move |tx, _now| {
            owned_endpoint(tx, &member, &id)?;
            tx.delete_endpoint(&id)
        })
    }

    fn rotate_webhook_secret(&self, member: &MemberId, id: &str, overlap_ms: i64) -> Result<Endpoint> {
        let secret = sign::new_secret(self.entropy());
        let (member, id) = (member.clone(), id.to_string());
        self.write(move |tx, now| {
            let mut endpoint = owned_endpoint(tx, &member, &id)?;
            endpoint.previous_secret = Some(std::mem::replace(&mut endpoint.secret, secret));
            endpoint.previous_until = Some(later(now, overlap_ms));
            tx.update_endpoint(&endpoint)?;
            Ok(endpoint)
        })
    }

    fn claim_deliveries(&self, lease_ms: i64, limit: usize) -> Result<Vec<Due>> {
        self.write(move |tx, now| {
            let mut claimed = Vec::new();
            for mut delivery in tx.due_deliveries(now, limit)? {
                let endpoint = tx.load_endpoint(&delivery.endpoint)?.ok_or_else(|| {
                    ConversationError::Unavailable(format!("delivery {} names no endpoint", delivery.id))
                })?;
                delivery.leased_until = Some(later(now, lease_ms));
                tx.update_delivery(&delivery)?;
                let message = tx.message_at(delivery.position)?;
                claimed.push(Due { delivery, endpoint, message });
            }
            Ok(claimed)
        })
    }

    fn finish_delivery(&self, id: u64, attempt: Attempt) -> Result<Delivery> {
        self.write(move |tx, now| {
            let mut delivery = tx.load_delivery(id)?.ok_or(ConversationError::DeliveryNotFound(id))?;
            if delivery.state != DeliveryState::Pending {
                return Ok(delivery);
            }
            delivery.attempts += 1;
            delivery.leased_until = None;
            delivery.updated_at = now;
            match attempt {
                Attempt::Delivered { status } => {
                    delivery.state = DeliveryState::Delivered;
                    delivery.last_status = Some(status);
                    delivery.last_error = None;
                }
                Attempt::Gone => {
                    // The delivery waits, in order, for the endpoint to be replaced.
                    delivery.last_status = Some(410);
                    delivery.last_error = Some("410 Gone: endpoint disabled".into());
                    let mut endpoint = tx
                        .load_endpoint(&delivery.endpoint)?
                        .ok_or_else(|| ConversationError::Unavailable(format!("delivery {id} names no endpoint")))?;
                    endpoint.disabled_at = Some(now);
                    endpoint.disabled_reason = Some("the receiver answered 410 Gone".into());
                    tx.update_endpoint(&endpoint)?;
                }
                Attempt::Failed { status, error } => {
                    delivery.last_status = status;
                    delivery.last_error = Some(error);
                    match sign::retry_delay_s(delivery.attempts) {
                        Some(delay) => delivery.next_attempt_at = later(now, (delay * 1000) as i64),
                        None => delivery.state = DeliveryState::Dead,
                    }
                }
            }
            tx.update_delivery(&delivery)?;
            Ok(delivery)
        })
    }

    fn deliveries(
        &self,
        member: &MemberId,
        endpoint: &str,
        state: DeliveryState,
        limit: usize,
    ) -> Result<Vec<Delivery>> {
        check_page(limit, WEBHOOK_DELIVERIES_PAGE_MAX)?;
        self.read(|tx| {
            owned_endpoint(tx, member, endpoint)?;
            tx.deliveries_of(endpoint, state, limit)
        })
    }

    fn replay_dead(&self, member: &MemberId, endpoint: &str) -> Result<u64> {
        let (member, endpoint) = (member.clone(), endpoint.to_string());
        self.write(move |tx, now| {
            owned_endpoint(tx, &member, &endpoint)?;
            tx.requeue_dead(&endpoint, now)
        })
    }
}

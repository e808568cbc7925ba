//! Coalescing concurrent money calls into batches, the way TigerBeetle's
//! client batches transfers: a call is sent at once when no batch of its
//! kind is in flight; while `COALESCE_IN_FLIGHT_MAX` are, calls queue and
//! leave together in the next batch (at most `COALESCE_ITEMS_MAX` items).
//! There is no timer: at low load every call leaves alone and immediately;
//! under load a call waits at most for one batch's round trip. Each item is
//! answered exactly as its single call would be (the registry runs each
//! item with the single call's semantics), so callers cannot tell but for
//! the throughput.

use crate::answer::{Answer, SdkError};
use serde_json::Value;
use std::sync::{Arc, Mutex};
use tokio::sync::oneshot;

/// Items one coalesced batch carries at most (the registry accepts up to 1,000).
pub const COALESCE_ITEMS_MAX: usize = 256;
/// Batches of one kind in flight at once from one client; more calls queue.
pub const COALESCE_IN_FLIGHT_MAX: usize = 4;

/// What sends one batch: a client, with its node and credential.
pub trait Sender: Clone + Send + Sync + 'static {
    /// `POST path {"items": items}`, answered `{"results": [...]}`.
    fn send_batch(
        &self,
        path: &'static str,
        items: Vec<Value>,
    ) -> impl std::future::Future<Output = Result<Answer, SdkError>> + Send;
}

/// A queued call: its batch item and where its answer goes.
type Pending = (Value, oneshot::Sender<Result<Answer, SdkError>>);

/// One kind of batch: its path and what queues for it.
pub(crate) struct Lane {
    path: &'static str,
    state: Mutex<LaneState>,
}

#[derive(Default)]
struct LaneState {
    queue: Vec<Pending>,
    in_flight: usize,
}

impl Lane {
    pub(crate) fn new(path: &'static str) -> Arc<Lane> {
        Arc::new(Lane { path, state: Mutex::default() })
    }

    /// Sends `item` (a batch item: the single call's body and its `idempotency_key`) in the next batch.
    pub(crate) async fn submit<S: Sender>(self: &Arc<Self>, client: &S, item: Value) -> Result<Answer, SdkError> {
        let (reply, answer) = oneshot::channel();
        let batch = {
            let mut state = self.state.lock().expect("lane mutex");
            state.queue.push((item, reply));
            take(&mut state)
        };
        if let Some(batch) = batch {
            tokio::spawn(self.clone().send(client.clone(), batch));
        }
        answer.await.unwrap_or_else(|_| Err(SdkError::Batch("the batch was dropped before answering".into())))
    }

    /// Sends `batch`, answers its items, then sends what queued meanwhile.
    async fn send<S: Sender>(self: Arc<Self>, client: S, mut batch: Vec<Pending>) {
        loop {
            let items: Vec<Value> = batch.iter().map(|(item, _)| item.clone()).collect();
            let sent = client.send_batch(self.path, items).await;
            answer(batch, sent);
            let next = {
                let mut state = self.state.lock().expect("lane mutex");
                state.in_flight -= 1;
                take(&mut state)
            };
            match next {
                Some(next) => batch = next,
                None => return,
            }
        }
    }
}

/// The next batch to send, if a slot is free and anything waits (counting it in flight).
fn take(state: &mut LaneState) -> Option<Vec<Pending>> {
    if state.queue.is_empty() || state.in_flight >= COALESCE_IN_FLIGHT_MAX {
        return None;
    }
    state.in_flight += 1;
    let n = state.queue.len().min(COALESCE_ITEMS_MAX);
    Some(state.queue.drain(..n).collect())
}

/// Hands each item its own answer: `{status, replayed, body}` as the single call would have answered.
fn answer(batch: Vec<Pending>, sent: Result<Answer, SdkError>) {
    let results = match sent {
        Ok(answer) => answer.body["results"].as_array().cloned().unwrap_or_default(),
        Err(error) => {
            let shared = error.to_string();
            let status = error.status();
            for (_, reply) in batch {
                let _ = reply.send(Err(match status {
                    // The whole batch was refused (e.g. unauthenticated): each item is refused the same way.
                    Some(_) => SdkError::Problem {
                        status: status.unwrap_or(500),
                        code: error.code().unwrap_or("unknown").to_string(),
                        detail: shared.clone(),
                        body: Value::Null,
                    },
                    None => SdkError::Batch(shared.clone()),
                }));
            }
            return;
        }
    };
    let mut results = results.into_iter();
    for (_, reply) in batch {
        let Some(result) = results.next() else {
            let _ = reply.send(Err(SdkError::Batch("the registry answered fewer items than it was sent".into())));
            continue;
        };
        let status = result["status"].as_u64().unwrap_or(500) as u16;
        let body = result["body"].clone();
        let _ = reply.send(if status >= 400 {
            Err(SdkError::problem(status, body))
        } else {
            Ok(Answer { body, replayed: result["replayed"].as_bool().unwrap_or(false) })
        });
    }
}

//! The load: complete paid calls (token → verify → settle, each a fresh
//! order) from N concurrent clients for a fixed time or count. The same code
//! drives every target; they share one wire format.

use crate::limits::{ATTEMPTS_MAX, PRICE_MINOR, REPLAY_PROBES, RETRY_BASE_MS};
use serde::Serialize;
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// A member the harness acts as.
#[derive(Clone, Debug)]
pub struct Party {
    pub id: String,
    pub credential: String,
}

/// A server set up for paid calls.
#[derive(Clone)]
pub struct Target {
    pub base: String,
    /// Every node's base URL when the target is several nodes (call `n` goes to node `n % len`, all three of
    /// its requests); empty for one server.
    pub nodes: Arc<Vec<String>>,
    pub buyers: Arc<Vec<Party>>,
    pub merchants: Arc<Vec<Party>>,
}

/// One phase of load.
#[derive(Clone, Debug)]
pub struct Plan {
    /// Order ids are `<tag>-<n>`; each phase uses its own tag.
    pub tag: String,
    pub concurrency: usize,
    pub duration: Duration,
    pub calls_max: u64,
    /// Paid calls per batch: 1 is token → verify → settle per call; more is one `POST /v1/tokens/batch` for one
    /// buyer then one `POST /v1/settlements/batch` for one merchant, each carrying this many calls.
    pub batch: usize,
    /// Open loop: paid calls start at this fixed rate (per second) whatever the answers' pace, and each call's
    /// latency counts from when it was due (coordinated-omission-safe); `None` is the closed loop.
    pub rate: Option<u64>,
    /// Percent of settles sent twice at the same moment (a duplicate storm); both answers must name one settlement.
    pub duplicate_pct: u8,
}

/// A settled order, kept to re-send its settle after the run.
#[derive(Clone, Debug)]
pub struct Settled {
    pub merchant: usize,
    pub token: String,
    pub order_id: String,
    pub settlement_id: String,
}

/// What one phase did.
#[derive(Default, Debug)]
pub struct Outcome {
    pub elapsed: Duration,
    /// Paid calls that completed (settle answered 200).
    pub calls_ok: u64,
    /// Calls that failed; their settle was never acknowledged.
    pub calls_failed: u64,
    /// Settles whose outcome is unknown (transport error or 5xx after every attempt).
    pub settles_unknown: u64,
    /// Settles answered with `Idempotent-Replayed` (only after a retry).
    pub settles_replayed: u64,
    pub retries: u64,
    /// Failures by `route status code`.
    pub errors: BTreeMap<String, u64>,
    /// Open loop: calls not started because `OPEN_LOOP_IN_FLIGHT_MAX` were already running (the rate is past
    /// what the server carries).
    pub backlog_refused: u64,
    /// Settles sent twice at once (duplicate storm), and pairs whose answers named two settlements (must be 0).
    pub duplicates_sent: u64,
    pub duplicates_diverged: u64,
    /// Whole paid call and settle alone, in microseconds, one per completed call.
    pub call_us: Vec<u32>,
    pub settle_us: Vec<u32>,
    pub settled: Vec<Settled>,
}

impl Outcome {
    fn merge(&mut self, other: Outcome) {
        self.calls_ok += other.calls_ok;
        self.calls_failed += other.calls_failed;
        self.settles_unknown += other.settles_unknown;
        self.settles_replayed += other.settles_replayed;
        self.retries += other.retries;
        self.backlog_refused += other.backlog_refused;
        self.duplicates_sent += other.duplicates_sent;
        self.duplicates_diverged += other.duplicates_diverged;
        for (kind, count) in other.errors {
            *self.errors.entry(kind).or_default() += count;
        }
        self.call_us.extend(other.call_us);
        self.settle_us.extend(other.settle_us);
        let room = REPLAY_PROBES.saturating_sub(self.settled.len());
        self.settled.extend(other.settled.into_iter().take(room));
    }
}

/// The HTTP client every phase uses: keep-alive, one idle connection per client.
pub fn http_client(concurrency: usize) -> reqwest::Client {
    reqwest::Client::builder()
        .timeout(Duration::from_secs(crate::limits::REQUEST_TIMEOUT_S))
        .pool_max_idle_per_host(concurrency)
        .tcp_nodelay(true)
        .build()
        .expect("reqwest client builds")
}

/// Runs one phase to its deadline or its call count, whichever comes first.
pub async fn run(http: &reqwest::Client, target: &Target, plan: &Plan) -> Outcome {
    if let Some(rate) = plan.rate {
        return open_loop(http, target, plan, rate).await;
    }
    let next = Arc::new(AtomicU64::new(0));
    let started = Instant::now();
    let deadline = started + plan.duration;
    let tasks: Vec<_> = (0..plan.concurrency)
        .map(|_| {
            let (http, target, plan, next) = (http.clone(), target.clone(), plan.clone(), next.clone());
            tokio::spawn(async move { client_loop(&http, &target, &plan, &next, deadline).await })
        })
        .collect();
    let mut outcome = Outcome::default();
    for task in tasks {
        match task.await {
            Ok(part) => outcome.merge(part),
            Err(error) => *outcome.errors.entry(format!("client task: {error}")).or_default() += 1,
        }
    }
    outcome.elapsed = started.elapsed();
    outcome
}

/// The open loop: call `n` is due at `start + n / rate`; it starts then (a task of its own) unless
/// `OPEN_LOOP_IN_FLIGHT_MAX` calls are running, and its latency counts from when it was due, so a server that
/// falls behind shows it in the tail instead of slowing the arrivals (no coordinated omission).
async fn open_loop(http: &reqwest::Client, target: &Target, plan: &Plan, rate: u64) -> Outcome {
    let started = tokio::time::Instant::now();
    let deadline = started + plan.duration;
    let slots = Arc::new(tokio::sync::Semaphore::new(crate::limits::OPEN_LOOP_IN_FLIGHT_MAX));
    let mut running = tokio::task::JoinSet::new();
    let mut outcome = Outcome::default();
    for n in 0..plan.calls_max {
        let due = started + Duration::from_nanos(n * 1_000_000_000 / rate.max(1));
        if due >= deadline {
            break;
        }
        tokio::time::sleep_until(due).await;
        while let Some(done) = running.try_join_next() {
            if let Ok(part) = done {
                outcome.merge(part);
            }
        }
        let Ok(slot) = slots.clone().try_acquire_owned() else {
            outcome.backlog_refused += 1;
            continue;
        };
        let (http, target, plan) = (http.clone(), target.clone(), plan.clone());
        running.spawn(async move {
            let _slot = slot;
            let mut out = Outcome::default();
            one_call(&http, &target, &plan, n, due.into_std(), &mut out).await;
            out
        });
    }
    while let Some(done) = running.join_next().await {
        match done {
            Ok(part) => outcome.merge(part),
            Err(error) => *outcome.errors.entry(format!("call task: {error}")).or_default() += 1,
        }
    }
    outcome.elapsed = started.elapsed();
    outcome
}

/// Paid call `n`, timed from `due`, into `out`.
async fn one_call(http: &reqwest::Client, target: &Target, plan: &Plan, n: u64, due: Instant, out: &mut Outcome) {
    // Spread calls over buyers and merchants so no single row is hot by design.
    let mix = splitmix64(n);
    let buyer = &target.buyers[(mix % target.buyers.len() as u64) as usize];
    let merchant_index = ((mix >> 32) % target.merchants.len() as u64) as usize;
    let merchant = &target.merchants[merchant_index];
    let order_id = format!("{}-{n}", plan.tag);
    let twice = (mix >> 16) % 100 < u64::from(plan.duplicate_pct);
    let base =
        if target.nodes.is_empty() { &target.base } else { &target.nodes[(n % target.nodes.len() as u64) as usize] };
    match paid_call(http, base, buyer, merchant, &order_id, twice, out).await {
        Ok((token, settle_elapsed, settlement_id)) => {
            out.calls_ok += 1;
            out.call_us.push(micros(due.elapsed()));
            out.settle_us.push(micros(settle_elapsed));
            if out.settled.len() < REPLAY_PROBES {
                out.settled.push(Settled { merchant: merchant_index, token, order_id, settlement_id });
            }
        }
        Err(failure) => {
            out.calls_failed += 1;
            out.settles_unknown += failure.settle_unknown as u64;
            *out.errors.entry(failure.kind).or_default() += 1;
        }
    }
}

async fn client_loop(
    http: &reqwest::Client,
    target: &Target,
    plan: &Plan,
    next: &AtomicU64,
    deadline: Instant,
) -> Outcome {
    let mut out = Outcome::default();
    if plan.batch > 1 {
        while Instant::now() < deadline {
            let first = next.fetch_add(plan.batch as u64, Ordering::Relaxed);
            if first >= plan.calls_max {
                break;
            }
            batched_calls(http, target, plan, first, &mut out).await;
        }
        return out;
    }
    while Instant::now() < deadline {
        let n = next.fetch_add(1, Ordering::Relaxed);
        if n >= plan.calls_max {
            break;
        }
        one_call(http, target, plan, n, Instant::now(), &mut out).await;
    }
    out
}

struct Failure {
    kind: String,
    settle_unknown: bool,
}

/// `plan.batch` paid calls from order `first` on: one token batch for one buyer, one settlement batch for one
/// merchant (verify is a receipt check and is not part of the batched path). Each item counts as one call.
async fn batched_calls(http: &reqwest::Client, target: &Target, plan: &Plan, first: u64, out: &mut Outcome) {
    let mix = splitmix64(first);
    let buyer = &target.buyers[(mix % target.buyers.len() as u64) as usize];
    let merchant_index = ((mix >> 32) % target.merchants.len() as u64) as usize;
    let merchant = &target.merchants[merchant_index];
    let orders: Vec<String> = (first..first + plan.batch as u64).map(|n| format!("{}-{n}", plan.tag)).collect();
    let started = Instant::now();
    let items: Vec<Value> = orders
        .iter()
        .map(|order| json!({"merchant": merchant.id, "max_amount_minor": PRICE_MINOR, "order_id": order, "resource": "bench"}))
        .collect();
    let issued =
        match send(http, &target.base, "/v1/tokens/batch", &buyer.credential, &json!({"items": items}), out).await {
            Ok(answer) => answer,
            Err(error) => {
                out.calls_failed += plan.batch as u64;
                *out.errors.entry(error.kind).or_default() += plan.batch as u64;
                return;
            }
        };
    let results = issued.body["results"].as_array().cloned().unwrap_or_default();
    let mut settles = Vec::new();
    for (order, result) in orders.iter().zip(&results) {
        match result["body"]["token"].as_str() {
            Some(token) => settles.push((order.clone(), token.to_string())),
            None => {
                out.calls_failed += 1;
                let code = result["body"]["code"].as_str().unwrap_or("unknown");
                *out.errors.entry(format!("/v1/tokens/batch item {} {code}", result["status"])).or_default() += 1;
            }
        }
    }
    let items: Vec<Value> = settles
        .iter()
        .map(|(order, token)| json!({"token": token, "amount_minor": PRICE_MINOR, "order_id": order}))
        .collect();
    let settle_started = Instant::now();
    let settled =
        match send(http, &target.base, "/v1/settlements/batch", &merchant.credential, &json!({"items": items}), out)
            .await
        {
            Ok(answer) => answer,
            Err(error) => {
                out.calls_failed += settles.len() as u64;
                out.settles_unknown += settles.len() as u64 * error.maybe_applied as u64;
                *out.errors.entry(error.kind).or_default() += settles.len() as u64;
                return;
            }
        };
    let (call_us, settle_us) = (micros(started.elapsed()), micros(settle_started.elapsed()));
    let results = settled.body["results"].as_array().cloned().unwrap_or_default();
    for ((order, token), result) in settles.into_iter().zip(&results) {
        if result["status"] == 200 {
            out.calls_ok += 1;
            out.call_us.push(call_us);
            out.settle_us.push(settle_us);
            out.settles_replayed += (result["replayed"] == true) as u64;
            if out.settled.len() < REPLAY_PROBES {
                let settlement_id = result["body"]["settlement_id"].as_str().unwrap_or_default().to_string();
                out.settled.push(Settled { merchant: merchant_index, token, order_id: order, settlement_id });
            }
        } else {
            out.calls_failed += 1;
            let code = result["body"]["code"].as_str().unwrap_or("unknown");
            *out.errors.entry(format!("/v1/settlements/batch item {} {code}", result["status"])).or_default() += 1;
        }
    }
}

/// token → verify → settle. Returns the token, settle's own time and the settlement id.
async fn paid_call(
    http: &reqwest::Client,
    base: &str,
    buyer: &Party,
    merchant: &Party,
    order_id: &str,
    twice: bool,
    out: &mut Outcome,
) -> Result<(String, Duration, String), Failure> {
    let request =
        json!({"merchant": merchant.id, "max_amount_minor": PRICE_MINOR, "order_id": order_id, "resource": "bench"});
    let issued =
        send(http, base, "/v1/tokens", &buyer.credential, &request, out).await.map_err(|e| e.failure(false))?;
    let token = issued.body["token"].as_str().unwrap().to_string();
    let verified = send(http, base, "/v1/tokens/verify", &merchant.credential, &json!({"token": token}), out)
        .await
        .map_err(|e| e.failure(false))?;
    if verified.body["genuine"] != json!(true) {
        return Err(Failure { kind: format!("verify not genuine: {}", verified.body), settle_unknown: false });
    }
    let settle_started = Instant::now();
    let request = json!({"token": token, "amount_minor": PRICE_MINOR, "order_id": order_id});
    let settled = if twice {
        // The duplicate storm: the same settle twice at once (a 409 in flight is retried by `send`).
        let mut other = Outcome::default();
        let (first, second) = tokio::join!(
            send(http, base, "/v1/settlements", &merchant.credential, &request, out),
            send(http, base, "/v1/settlements", &merchant.credential, &request, &mut other)
        );
        out.retries += other.retries;
        out.duplicates_sent += 1;
        let (first, second) = (first.map_err(|e| e.failure(true))?, second.map_err(|e| e.failure(true))?);
        if first.body["settlement_id"] != second.body["settlement_id"] {
            out.duplicates_diverged += 1;
        }
        out.settles_replayed += second.replayed as u64;
        first
    } else {
        send(http, base, "/v1/settlements", &merchant.credential, &request, out).await.map_err(|e| {
            let unknown = e.maybe_applied;
            e.failure(unknown)
        })?
    };
    let elapsed = settle_started.elapsed();
    out.settles_replayed += settled.replayed as u64;
    Ok((token, elapsed, settled.body["settlement_id"].as_str().unwrap_or_default().to_string()))
}

pub struct Answer {
    pub status: u16,
    pub replayed: bool,
    pub body: Value,
}

pub struct SendError {
    kind: String,
    /// The server may have applied it (transport error or 5xx).
    maybe_applied: bool,
}

impl SendError {
    fn failure(self, settle_unknown: bool) -> Failure {
        Failure { kind: self.kind, settle_unknown }
    }
}

/// POSTs `body`, retrying transport errors, 5xx and `idempotency_in_flight`
/// with the same request (so the same derived idempotency key).
pub async fn send(
    http: &reqwest::Client,
    base: &str,
    path: &str,
    credential: &str,
    body: &Value,
    out: &mut Outcome,
) -> Result<Answer, SendError> {
    let bytes = serde_json::to_vec(body).expect("values serialize");
    let mut attempt = 0;
    loop {
        attempt += 1;
        let result = http
            .post(format!("{base}{path}"))
            .bearer_auth(credential)
            .header(reqwest::header::CONTENT_TYPE, "application/json")
            .body(bytes.clone())
            .send()
            .await;
        let (error, retryable) = match result {
            Ok(response) => {
                let status = response.status().as_u16();
                let replayed = response.headers().contains_key("idempotent-replayed");
                let body: Value = match response.bytes().await {
                    Ok(bytes) => serde_json::from_slice(&bytes).unwrap_or(Value::Null),
                    Err(_) => Value::Null,
                };
                if status < 400 {
                    return Ok(Answer { status, replayed, body });
                }
                let code = body["code"].as_str().unwrap_or("unknown").to_string();
                let retryable = status >= 500 || code == "idempotency_in_flight";
                (SendError { kind: format!("{path} {status} {code}"), maybe_applied: status >= 500 }, retryable)
            }
            Err(error) => {
                let kind = if error.is_timeout() { "timeout" } else { "transport" };
                (SendError { kind: format!("{path} {kind}"), maybe_applied: true }, true)
            }
        };
        if !retryable || attempt >= ATTEMPTS_MAX {
            return Err(error);
        }
        out.retries += 1;
        tokio::time::sleep(Duration::from_millis(RETRY_BASE_MS << (attempt - 1))).await;
    }
}

/// Re-sends the settle of orders already settled; each must come back 200,
/// marked replayed, with the original settlement id.
pub async fn replay_probes(http: &reqwest::Client, target: &Target, settled: &[Settled]) -> (usize, Vec<String>) {
    let mut ok = 0;
    let mut problems = Vec::new();
    let mut scratch = Outcome::default();
    for probe in settled {
        let merchant = &target.merchants[probe.merchant];
        let request = json!({"token": probe.token, "amount_minor": PRICE_MINOR, "order_id": probe.order_id});
        match send(http, &target.base, "/v1/settlements", &merchant.credential, &request, &mut scratch).await {
            Ok(answer) if answer.replayed && answer.body["settlement_id"] == json!(probe.settlement_id) => ok += 1,
            Ok(answer) => problems.push(format!(
                "{}: {} replayed={} body={}",
                probe.order_id, answer.status, answer.replayed, answer.body
            )),
            Err(error) => problems.push(format!("{}: {}", probe.order_id, error.kind)),
        }
    }
    (ok, problems)
}

fn micros(elapsed: Duration) -> u32 {
    elapsed.as_micros().min(u32::MAX as u128) as u32
}

/// A well-mixed 64-bit hash of the call number.
pub fn splitmix64(n: u64) -> u64 {
    let mut z = n.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// Percentile (0–100) of `samples` in milliseconds; sorts in place.
pub fn percentile_ms(samples: &mut [u32], p: f64) -> Option<f64> {
    if samples.is_empty() {
        return None;
    }
    samples.sort_unstable();
    let rank = ((p / 100.0) * samples.len() as f64).ceil().max(1.0) as usize;
    Some(samples[rank.min(samples.len()) - 1] as f64 / 1000.0)
}

#[derive(Serialize, Debug, Default, Clone, Copy)]
pub struct Latency {
    pub p50_ms: Option<f64>,
    pub p99_ms: Option<f64>,
    pub p999_ms: Option<f64>,
}

pub fn latency(samples: &mut [u32]) -> Latency {
    Latency {
        p50_ms: percentile_ms(samples, 50.0),
        p99_ms: percentile_ms(samples, 99.0),
        p999_ms: percentile_ms(samples, 99.9),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_are_nearest_rank() {
        let mut samples: Vec<u32> = (1..=100).map(|ms| ms * 1000).collect();
        assert_eq!(percentile_ms(&mut samples, 50.0), Some(50.0));
        assert_eq!(percentile_ms(&mut samples, 99.0), Some(99.0));
        assert_eq!(percentile_ms(&mut [], 99.0), None);
        assert_eq!(percentile_ms(&mut [7000], 99.0), Some(7.0));
    }

    #[test]
    fn calls_spread_over_buyers() {
        let mut seen = [0u32; 64];
        for n in 0..64_000 {
            seen[(splitmix64(n) % 64) as usize] += 1;
        }
        assert!(seen.iter().all(|&c| (800..1200).contains(&c)), "{seen:?}");
    }
}

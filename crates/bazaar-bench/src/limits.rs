//! Every count, duration and concurrency the harness uses, with its ceiling.
//! Flags are checked against these before anything starts.

use bazaar_types::limits::{AMOUNT_MINOR_MAX, ESCROW_THRESHOLD_MINOR};

/// Concurrent clients driving paid calls.
pub const CONCURRENCY_DEFAULT: usize = 64;
pub const CONCURRENCY_MAX: usize = 1024;
/// Paid calls per batch at most (the server's `BATCH_ITEMS_MAX`).
pub const BATCH_MAX: usize = 1_000;
/// `bazaar serve` nodes in the `cluster` target: by default, and at most.
pub const CLUSTER_NODES_DEFAULT: usize = 3;
pub const NODES_MAX: usize = 8;
/// Open loop: calls running at once at most; an arrival past it is counted as refused, not queued.
pub const OPEN_LOOP_IN_FLIGHT_MAX: usize = 4_096;
/// Open loop: arrivals per second at most.
pub const RATE_MAX: u64 = 200_000;
/// Length of the measured phase, per target.
pub const DURATION_S_DEFAULT: u64 = 10;
pub const DURATION_S_MAX: u64 = 300;
/// Length of the unmeasured warm-up phase, per target.
pub const WARMUP_S_DEFAULT: u64 = 1;
pub const WARMUP_S_MAX: u64 = 60;
/// Paid calls in one phase against one target, whatever the duration.
pub const CALLS_MAX: u64 = 2_000_000;
/// Buyer agents set up on each target.
pub const BUYERS_DEFAULT: usize = 64;
pub const BUYERS_MAX: usize = 1024;
/// Merchant agents set up on each target.
pub const MERCHANTS_DEFAULT: usize = 4;
pub const MERCHANTS_MAX: usize = 64;
/// Price of one paid call, in minor units.
pub const PRICE_MINOR: u64 = 100;
/// What each buyer is funded with (and its budget): enough to pay for every
/// call of both phases alone, so no call is ever refused for funds.
pub const FUND_PER_BUYER_MINOR: u64 = PRICE_MINOR * CALLS_MAX * 2;
/// Connections in the baseline peer's pool.
pub const BASELINE_POOL_DEFAULT: usize = 16;
pub const BASELINE_POOL_MAX: usize = 64;
/// Attempts per request on transport errors, 5xx and in-flight answers (same request each time).
pub const ATTEMPTS_MAX: u32 = 5;
/// First retry delay; it doubles each attempt.
pub const RETRY_BASE_MS: u64 = 20;
/// One HTTP request gives up after this long.
pub const REQUEST_TIMEOUT_S: u64 = 30;
/// A server must print its `listening on` line within this long.
pub const SERVER_START_TIMEOUT_S: u64 = 60;
/// A server gets this long to exit after SIGTERM before it is killed.
pub const SERVER_STOP_TIMEOUT_S: u64 = 15;
/// `bazaar audit` must finish within this long.
pub const AUDIT_TIMEOUT_S: u64 = 300;
/// Setup requests in flight at once.
pub const SETUP_PARALLELISM: usize = 16;
/// Settled orders re-sent after the run; each must come back as a replay.
pub const REPLAY_PROBES: usize = 16;
/// PostgreSQL backends publish their statistics at most once a second; wait this long before reading them.
pub const STATS_SETTLE_MS: u64 = 1_200;
/// Tokens issued by the baseline live this long (as Bazaar's default).
pub const BASELINE_TOKEN_TTL_MS: i64 = 15 * 60 * 1000;

const _: () = assert!(PRICE_MINOR <= ESCROW_THRESHOLD_MINOR);
const _: () = assert!(FUND_PER_BUYER_MINOR * BUYERS_MAX as u64 <= AMOUNT_MINOR_MAX);
const _: () = assert!(FUND_PER_BUYER_MINOR <= i64::MAX as u64);
const _: () = assert!(WARMUP_S_MAX <= DURATION_S_MAX);

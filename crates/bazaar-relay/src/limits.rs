//! Every limit the relay enforces, by name. NIP-11's `limitation` object is
//! built from these, so what is advertised is what is enforced.

/// Largest WebSocket text message the relay reads (NIP-11 `max_message_length`).
pub const MESSAGE_BYTES_MAX: usize = 262_144;
/// Largest event `content`, in bytes (NIP-11 `max_content_length`).
pub const CONTENT_BYTES_MAX: usize = 131_072;
/// Most tags on one event (NIP-11 `max_event_tags`).
pub const EVENT_TAGS_MAX: usize = 1_000;
/// Most strings in one tag (name included).
pub const TAG_VALUES_MAX: usize = 16;
/// Most open subscriptions on one connection (NIP-11 `max_subscriptions`).
pub const SUBSCRIPTIONS_MAX: usize = 32;
/// Longest subscription id, in characters (NIP-01; NIP-11 `max_subid_length`).
pub const SUBSCRIPTION_ID_CHARS_MAX: usize = 64;
/// Most filters in one `REQ`.
pub const FILTERS_PER_REQ_MAX: usize = 16;
/// Most values in one filter list (`ids`, `authors`, `kinds`, a tag list).
pub const FILTER_VALUES_MAX: usize = 1_000;
/// Largest `limit` honoured; a larger one is clamped (NIP-11 `max_limit`).
pub const QUERY_LIMIT_MAX: usize = 1_000;
/// Events answered for a filter without a `limit` (NIP-11 `default_limit`).
pub const QUERY_LIMIT_DEFAULT: usize = 500;
/// How far ahead of the relay's clock an event's `created_at` may be, in
/// seconds (NIP-11 `created_at_upper_limit` is now plus this).
pub const CREATED_AT_FUTURE_S_MAX: u64 = 900;
/// How long the relay keeps job history (and every regular event): 30 days.
/// Older events are refused on publish and purged by the sweeper; a
/// replaceable or addressable event's latest version is kept regardless.
pub const RETENTION_S: u64 = 30 * 86_400;
/// Events one connection may publish per second (token bucket, this many
/// per second with a burst of as many); beyond it, `OK false "rate-limited: …"`.
pub const PUBLISH_PER_S_PER_CONNECTION: u32 = 5_000;
/// Events one connection may have waiting for their `OK` at once: a client
/// that pipelines gets them into the same group commit; past this, the
/// relay reads the connection's next frame only as an `OK` goes out.
pub const PUBLISHES_IN_FLIGHT_PER_CONNECTION: usize = 256;
/// Most events one group commit writes.
pub const INGEST_GROUP_MAX: usize = 1_024;
/// Events waiting for the relay's writer; one more is answered `OK false "error: …"` at once rather than
/// queue. Every connection with every publish in flight fits; nothing is allocated for the bound.
pub const INGEST_QUEUE_MAX: usize = CONNECTIONS_MAX * PUBLISHES_IN_FLIGHT_PER_CONNECTION;
/// Events queued for live subscribers before a slow connection misses some
/// (it then gets `CLOSED "error: …"` for its live subscriptions, never silence).
pub const FANOUT_BUFFER: usize = 16_384;
/// How far a NIP-42 `AUTH` event's `created_at` may be from the relay's clock, in seconds.
pub const AUTH_WINDOW_S: u64 = 600;
/// Open relay connections per process.
pub const CONNECTIONS_MAX: usize = 10_000;
/// Read connections the embedded event store opens at most; a read past them
/// waits for one to come back (reads run on the blocking pool, which has far
/// more threads than this). Each is kept open for the next read.
pub const STORE_READERS_MAX: usize = 4;
/// Page cache of the event store's writer connection, in KiB.
pub const WRITER_PAGE_CACHE_KIB: u64 = 16 * 1024;
/// Page cache of each of the event store's read connections, in KiB.
pub const READER_PAGE_CACHE_KIB: u64 = 4 * 1024;
/// Page cache the event store's connections may fill together, in KiB (32 MiB).
pub const PAGE_CACHE_KIB_TOTAL: u64 = WRITER_PAGE_CACHE_KIB + STORE_READERS_MAX as u64 * READER_PAGE_CACHE_KIB;
/// File bytes each SQLite connection of the event store may memory-map: none.
/// A mapped page counts in the resident set once per mapping, so five
/// connections mapping a growing file made RSS grow with the file (the
/// ledger's store made the same change, measured in BENCHMARKS.md).
pub const MMAP_BYTES_MAX: u64 = 0;

const _: () = assert!(QUERY_LIMIT_DEFAULT <= QUERY_LIMIT_MAX);
const _: () = assert!(CONTENT_BYTES_MAX < MESSAGE_BYTES_MAX);
const _: () = assert!(RETENTION_S >= 30 * 86_400, "job history is kept at least 30 days");

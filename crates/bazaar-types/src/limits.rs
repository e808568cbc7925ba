//! Every limit in Bazaar, in one place. Nothing is unbounded and 0 never means
//! "unlimited". Related limits are tied together with compile-time asserts.

/// Payment tokens live this long unless the buyer asks for less.
pub const TOKEN_TTL_S_MAX: u64 = 15 * 60;
/// The shortest token lifetime a buyer may ask for.
pub const TOKEN_TTL_S_MIN: u64 = 5;
/// Invite codes die this long after they are issued.
pub const INVITE_TTL_S: u64 = 24 * 60 * 60;
/// An invite code as presented; longer ones are refused unread.
pub const INVITE_CODE_LEN_MAX: usize = 128;
/// Random bytes in secrets and ids the registry draws (before base64url).
pub const CREDENTIAL_RANDOM_BYTES: usize = 32;
pub const INVITE_RANDOM_BYTES: usize = 24;
pub const TOKEN_ID_RANDOM_BYTES: usize = 18;
/// Idempotency records are kept at least this long (longer than any token lives).
pub const IDEMPOTENCY_RETENTION_S: u64 = 24 * 60 * 60;
/// `Idempotency-Key` header length, as Stripe allows.
pub const IDEMPOTENCY_KEY_LEN_MAX: usize = 255;
/// Handles: 3..=32 chars of `[a-z0-9-]`.
pub const HANDLE_LEN_MIN: usize = 3;
pub const HANDLE_LEN_MAX: usize = 32;
/// Order ids chosen by merchants.
pub const ORDER_ID_LEN_MAX: usize = 128;
/// The resource a token is for (usually a URL).
pub const RESOURCE_LEN_MAX: usize = 2048;
/// A whole token string.
pub const TOKEN_LEN_MAX: usize = 4096;
/// Any JSON request body.
pub const REQUEST_BODY_BYTES_MAX: usize = 64 * 1024;
/// A single amount in one request. Far above any paid call; keeps sums far from u64::MAX.
pub const AMOUNT_MINOR_MAX: u64 = 1_000_000_000_000;
/// Commands folded into one storage transaction by the group-commit writer.
pub const WRITE_BATCH_MAX: usize = 512;
/// Commands waiting for the writer; a full queue answers 503 rather than grow.
pub const WRITE_QUEUE_MAX: usize = 8192;
/// Rows on one page of any list endpoint.
pub const PAGE_LIMIT_MAX: usize = 500;
/// Expired holds voided by one sweeper pass.
pub const SWEEP_BATCH_MAX: usize = 256;
/// How often the sweeper runs.
pub const SWEEP_INTERVAL_MS: u64 = 1_000;
/// Protocol fee charged on each settlement, in basis points.
pub const PROTOCOL_FEE_BPS: u32 = 100;
/// Paid-call orders above this many minor units must ride escrow.
pub const ESCROW_THRESHOLD_MINOR: u64 = 100_000;
/// HTTP requests one node works on at once; beyond it a request is answered
/// 503 `overloaded` at once instead of queueing.
pub const HTTP_REQUESTS_IN_FLIGHT_MAX: usize = 1024;
/// Open connections one remote (non-loopback) IP address may hold on one
/// node; the next is closed as soon as it is accepted. Loopback is exempt: a
/// reverse proxy on the same host speaks for every client (it must cap them).
pub const HTTP_CONNECTIONS_PER_IP_MAX: usize = 256;
/// Seconds a connection may take to send a request's whole header, and to send
/// the next request's first byte once idle between requests (slow-client and
/// idle-connection timeout, HTTP/1.1).
pub const HTTP_HEADER_READ_TIMEOUT_S: u64 = 15;
/// Seconds an HTTP/2 connection may stay idle (no stream open) before it is closed.
pub const HTTP2_IDLE_TIMEOUT_S: u64 = 60;
/// Bytes of request line and headers one request may send (HTTP/1.1 read
/// buffer; HTTP/2 header list). Past it the connection gets 431 or is closed.
pub const HTTP_HEADER_BYTES_MAX: usize = 64 * 1024;
/// Headers one HTTP/1.1 request may send.
pub const HTTP_HEADERS_MAX: usize = 100;
/// Seconds a TLS handshake may take before the connection is dropped.
pub const TLS_HANDSHAKE_TIMEOUT_S: u64 = 10;
/// Requests per second one credential (or passkey session) may make on one
/// node, sustained; `HTTP_RATE_BURST_S` seconds of it may come at once. Past
/// it: 429 `rate_limited` with `Retry-After`.
pub const HTTP_RATE_PER_CREDENTIAL_PER_S: u32 = 2_000;
/// Requests per second one remote (non-loopback) IP address may make on one
/// node, sustained, whatever credentials it uses. Loopback is exempt.
pub const HTTP_RATE_PER_IP_PER_S: u32 = 4_000;
/// Seconds of a rate that may arrive at once (the bucket's depth).
pub const HTTP_RATE_BURST_S: u32 = 2;
/// Seconds a client is told to wait when its idempotency key is in flight.
pub const RETRY_AFTER_S: u64 = 1;
/// Work receipts kept by the merchant middleware, per response body.
pub const WORK_RECEIPT_BYTES_MAX: usize = 1024 * 1024;
/// How long the merchant middleware keeps a work receipt: 30 days, longer
/// than a paid call stays disputable through every phase and an appeal with
/// the default windows (7 + 2 + 3 + 3 + 2 = 17 days), so the answer a buyer
/// got is there for as long as it could be questioned. A retry of an order
/// after that runs the handler again (the settlement itself never repeats).
pub const WORK_RECEIPT_RETENTION_S: u64 = 30 * 24 * 60 * 60;
/// Receipts stored between two prunes of the expired ones (and one prune when the route opens).
pub const WORK_RECEIPT_PRUNE_EVERY: u64 = 1024;

// ---- bounties (the labor market's rewards) -----------------------------------

/// How long after funding a bounty only an accepted outcome may take it; after
/// that its poster may withdraw it if no accepted outcome was presented.
pub const BOUNTY_CLAIM_S: u64 = 7 * 24 * 60 * 60;
pub const BOUNTY_CLAIM_S_MIN: u64 = 60;
pub const BOUNTY_CLAIM_S_MAX: u64 = 90 * 24 * 60 * 60;
const _: () = assert!(BOUNTY_CLAIM_S_MIN <= BOUNTY_CLAIM_S && BOUNTY_CLAIM_S <= BOUNTY_CLAIM_S_MAX);

/// A priority lease's period: from a minute to thirty days. Nothing renews it.
pub const LEASE_S_MIN: u64 = 60;
pub const LEASE_S_MAX: u64 = 30 * 24 * 60 * 60;
/// An escrowed guest hire's milestone falls due this long after agreement.
pub const HIRE_DUE_S: u64 = 7 * 24 * 60 * 60;

// ---- escrow, disputes, stake ------------------------------------------------

/// Milestones in one contract.
pub const CONTRACT_MILESTONES_MAX: usize = 16;
/// A milestone's description.
pub const MILESTONE_DESCRIPTION_LEN_MAX: usize = 500;
/// How long a buyer has to accept a delivered milestone before it is released
/// automatically, unless the contract names another window within the bounds below.
pub const REVIEW_WINDOW_S: u64 = 3 * 24 * 60 * 60;
pub const REVIEW_WINDOW_S_MIN: u64 = 60;
pub const REVIEW_WINDOW_S_MAX: u64 = 30 * 24 * 60 * 60;
/// How long after an undelivered milestone's due date its buyer must wait
/// before reclaiming its hold. Two days, the default `DISPUTE_ANSWER_S`: a
/// `not_delivered` dispute gives a late seller that long to answer before a
/// default refund, and reclaiming must never be a quicker way to the same
/// refund; it also covers a delivery that is late by a day across time zones.
pub const MILESTONE_RECLAIM_GRACE_S: u64 = 2 * 24 * 60 * 60;
/// Default phase deadlines for disputes; a registry may set its own within
/// `DISPUTE_WINDOW_S_MIN..=DISPUTE_WINDOW_S_MAX`.
/// After a paid call settles or a milestone is released, the buyer may file this long.
pub const DISPUTE_CLAIM_WINDOW_S: u64 = 7 * 24 * 60 * 60;
/// Filed: the respondent must answer (add evidence) within this, or lose by default.
pub const DISPUTE_ANSWER_S: u64 = 2 * 24 * 60 * 60;
/// Evidence: both sides add evidence until this passes.
pub const DISPUTE_EVIDENCE_S: u64 = 3 * 24 * 60 * 60;
/// Ruling: the arbiter rules within this, or is replaced.
pub const DISPUTE_RULING_S: u64 = 3 * 24 * 60 * 60;
/// Appeal: the losing side may appeal once within this.
pub const DISPUTE_APPEAL_S: u64 = 2 * 24 * 60 * 60;
pub const DISPUTE_WINDOW_S_MIN: u64 = 1;
pub const DISPUTE_WINDOW_S_MAX: u64 = 90 * 24 * 60 * 60;
/// An appeal bond is this share of the disputed amount, and at least `APPEAL_BOND_MIN_MINOR`.
pub const APPEAL_BOND_BPS: u32 = 1_000;
pub const APPEAL_BOND_MIN_MINOR: u64 = 100;
/// Evidence items in one dispute (both sides, both rounds); each side may add half.
pub const EVIDENCE_PER_DISPUTE_MAX: usize = 64;
/// A URL given with evidence.
pub const EVIDENCE_URL_LEN_MAX: usize = 2048;
/// Free text: reasons for a ruling, a dispute's note.
pub const REASONS_LEN_MAX: usize = 2000;
/// Stake asked to unlock waits this long before it can be withdrawn (and stays slashable).
pub const STAKE_COOLDOWN_S: u64 = 7 * 24 * 60 * 60;
/// Documents (contracts, disputes) one sweeper pass advances.
pub const SWEEP_DOCS_MAX: usize = 128;
/// Nesting depth of a passport (a signed credential) that is signed or verified.
pub const PASSPORT_DEPTH_MAX: usize = 32;
/// Largest integer a passport may carry: JavaScript's `Number.MAX_SAFE_INTEGER`, so that every
/// verifier parses and canonicalises it to the same digits. Money travels as decimal strings.
pub const PASSPORT_INTEGER_MAX: u64 = (1 << 53) - 1;

const _: () = assert!(REVIEW_WINDOW_S_MIN <= REVIEW_WINDOW_S && REVIEW_WINDOW_S <= REVIEW_WINDOW_S_MAX);
const _: () = assert!(MILESTONE_RECLAIM_GRACE_S >= DISPUTE_ANSWER_S);
const _: () = assert!(DISPUTE_WINDOW_S_MIN <= DISPUTE_ANSWER_S && DISPUTE_ANSWER_S <= DISPUTE_WINDOW_S_MAX);
const _: () = assert!(DISPUTE_WINDOW_S_MIN <= DISPUTE_CLAIM_WINDOW_S && DISPUTE_CLAIM_WINDOW_S <= DISPUTE_WINDOW_S_MAX);
const _: () = assert!(DISPUTE_WINDOW_S_MIN <= DISPUTE_EVIDENCE_S && DISPUTE_EVIDENCE_S <= DISPUTE_WINDOW_S_MAX);
const _: () = assert!(DISPUTE_WINDOW_S_MIN <= DISPUTE_RULING_S && DISPUTE_RULING_S <= DISPUTE_WINDOW_S_MAX);
const _: () = assert!(DISPUTE_WINDOW_S_MIN <= DISPUTE_APPEAL_S && DISPUTE_APPEAL_S <= DISPUTE_WINDOW_S_MAX);
const _: () = assert!(APPEAL_BOND_BPS <= 10_000);

const _: () = assert!(TOKEN_TTL_S_MIN < TOKEN_TTL_S_MAX);
const _: () = assert!(IDEMPOTENCY_RETENTION_S > TOKEN_TTL_S_MAX);
const _: () = assert!(ESCROW_THRESHOLD_MINOR < AMOUNT_MINOR_MAX);
const _: () = assert!(WRITE_BATCH_MAX <= WRITE_QUEUE_MAX);
const _: () = assert!(PROTOCOL_FEE_BPS <= 10_000);
const _: () = assert!(HANDLE_LEN_MIN <= HANDLE_LEN_MAX);
// base64url of the random part plus its 4-character prefix fits the length limit.
const _: () = assert!(4 + INVITE_RANDOM_BYTES.div_ceil(3) * 4 <= INVITE_CODE_LEN_MAX);
const _: () = assert!(TOKEN_ID_RANDOM_BYTES >= 16);

// ---- reputation, passports, federation ---------------------------------------

/// Work older than this does not count towards reputation at all.
pub const REPUTATION_WINDOW_DAYS: i64 = 365;
/// Reputation decays by half every this many days of age.
pub const REPUTATION_HALF_LIFE_DAYS: i64 = 180;
/// Successes one counterparty owner can add to a member's reputation per ISO
/// week (failures are never capped).
pub const REPUTATION_SUCCESSES_PER_OWNER_WEEK: u64 = 1;
/// Events one reputation catch-up reads per page.
pub const REPUTATION_EVENTS_PAGE_MAX: usize = 2_000;
/// A node writes its reputation fold down in the store each time it has folded
/// this many events past the last snapshot; a node starting up folds forward
/// from that snapshot, so at most this many events (plus those since) instead
/// of the whole ledger.
pub const REPUTATION_SNAPSHOT_EVERY_EVENTS: u64 = 50_000;
/// A trust passport is valid this long after it is issued.
pub const PASSPORT_VALIDITY_S: u64 = 24 * 60 * 60;
/// Passports one subject may be issued per UTC day (each is recorded on the ledger).
pub const PASSPORTS_PER_SUBJECT_DAY_MAX: u32 = 24;
/// A passport document as presented for import or verification.
pub const PASSPORT_BYTES_MAX: usize = 16 * 1024;
/// Imported passports one member may hold: one per issuing registry, so one per peer.
pub const IMPORTED_PASSPORTS_MAX: usize = FEDERATION_PEERS_MAX;
/// Peer registries one registry recognises.
pub const FEDERATION_PEERS_MAX: usize = 64;
/// A federation weight is in basis points of a local unit (10 000 = counts like local work).
pub const FEDERATION_WEIGHT_BPS_MAX: u32 = 10_000;
/// Registry signing keys kept in the published history.
pub const REGISTRY_KEYS_MAX: usize = 64;
/// A signed server-to-server request older or newer than this (by the receiver's clock) is refused.
pub const FEDERATION_SKEW_S_MAX: u64 = 5 * 60;
/// A peer's URL.
pub const PEER_URL_LEN_MAX: usize = 512;
/// How long an HTTP call to a peer registry may take.
pub const FEDERATION_HTTP_TIMEOUT_MS: u64 = 5_000;

const _: () = assert!(REPUTATION_HALF_LIFE_DAYS > 0 && REPUTATION_HALF_LIFE_DAYS <= REPUTATION_WINDOW_DAYS);
const _: () = assert!(REPUTATION_SUCCESSES_PER_OWNER_WEEK >= 1);
const _: () = assert!(PASSPORT_INTEGER_MAX < i64::MAX as u64);

// ---- storefront market ----------------------------------------------------------

/// Proposals one seller may make on one request for quote: the first and two revisions.
pub const OFFER_ATTEMPTS_MAX: u32 = 3;
/// Units one request for quote may ask for.
pub const RFQ_QUANTITY_MAX: u64 = 1_000_000;

const _: () = assert!(OFFER_ATTEMPTS_MAX >= 1);
/// A listing's stock-keeping unit, chosen by its seller.
pub const LISTING_SKU_LEN_MAX: usize = 64;
pub const LISTING_TITLE_LEN_MAX: usize = 200;
pub const LISTING_DESCRIPTION_LEN_MAX: usize = 4_000;
/// Tags on one listing, each `[a-z0-9-]`, at most `LISTING_TAG_LEN_MAX` chars.
pub const LISTING_TAGS_MAX: usize = 16;
pub const LISTING_TAG_LEN_MAX: usize = 32;
/// A BCP 47 language tag (`en`, `es-MX`, `hi`…).
pub const LANGUAGE_TAG_LEN_MAX: usize = 35;
/// Days of notice or lead time a listing may ask for.
pub const LISTING_DAYS_MAX: u32 = 365;
/// A search query as sent, and the terms kept from it.
pub const SEARCH_QUERY_LEN_MAX: usize = 256;
pub const SEARCH_TERMS_MAX: usize = 8;
pub const SEARCH_TERM_LEN_MAX: usize = 32;
/// Listings one search returns.
pub const SEARCH_RESULTS_MAX: usize = 50;
/// Distinct queries the server tallies in memory between flushes (searches are
/// counted off the money writer). Past it a search is still answered, but not
/// counted, and the flush is brought forward. One flush writes at most this many rows.
pub const SEARCH_TALLY_QUERIES_MAX: usize = 4_096;
/// How often the search tally is flushed to the store: what a crash can lose.
pub const SEARCH_FLUSH_INTERVAL_MS: u64 = 1_000;
/// Sellers one request for quote invites (the best-matching listings).
pub const RFQ_SELLERS_MAX: usize = 32;
/// Makers' shares in one order.
pub const ORDER_LINES_MAX: usize = 32;
/// Buyers one merchant's pilot may invite (its terms' `invited_buyers`).
pub const TERMS_INVITED_MAX: usize = 1_000;
/// A proof of shipment: the courier receipt's SHA-256 in hex, and a tracking number.
pub const RECEIPT_SHA256_HEX_LEN: usize = 64;
pub const TRACKING_LEN_MAX: usize = 64;
/// A courier receipt's image as uploaded (JPEG, PNG or WebP), stored by its SHA-256.
pub const RECEIPT_IMAGE_BYTES_MAX: usize = 512 * 1024;

const _: () = assert!(ORDER_LINES_MAX >= RFQ_SELLERS_MAX);

// The conversation plane (`bazaar-conversation`): its own store and sequencer.

/// A message body in UTF-8 bytes; longer posts are refused (`body_too_long`), never cut.
pub const MESSAGE_BODY_BYTES_MAX: usize = 4_096;
/// A reaction (an emoji or a short token) in UTF-8 bytes.
pub const REACTION_BYTES_MAX: usize = 64;
/// Distinct members one message may mention (`@handle`, resolved at send time).
pub const MESSAGE_MENTIONS_MAX: usize = 16;
/// Members one channel may hold at once (a direct message holds two).
pub const CHANNEL_MEMBERS_MAX: usize = 1_000;
/// Members a sealed channel may hold at once: every post carries the content
/// key wrapped for each of them (80 bytes of base64 apiece).
pub const SEALED_CHANNEL_MEMBERS_MAX: usize = 64;
/// How long a body's lease on answering its member's addressed events lasts
/// unrenewed (a live WebSocket renews it at every keepalive ping).
pub const BODY_LEASE_TTL_S: u64 = 30;
/// A body's name (`?body=` on the inbox WebSocket) in bytes.
pub const BODY_NAME_BYTES_MAX: usize = 64;
/// How often a node adds the deliveries it counted to the meter (a crash loses at most this much counting).
pub const METER_FLUSH_S: u64 = 10;
/// Record references one message may carry.
pub const MESSAGE_REFS_MAX: usize = 8;
/// A record reference's id in bytes.
pub const RECORD_ID_BYTES_MAX: usize = 128;
/// Passkeys one person may register.
pub const PASSKEYS_PER_MEMBER_MAX: usize = 10;
/// How long a browser session lasts after a passkey sign-in.
pub const SESSION_TTL_S: u64 = 12 * 60 * 60;
/// How long a passkey registration or sign-in may take between its start and finish.
pub const PASSKEY_CEREMONY_TTL_S: u64 = 300;
/// A room's display name in UTF-8 bytes.
pub const CHANNEL_NAME_BYTES_MAX: usize = 64;
/// Messages one history page returns.
pub const HISTORY_PAGE_MAX: usize = 200;
/// Messages one inbox page returns.
pub const INBOX_PAGE_MAX: usize = 500;
/// Live streams (WebSocket and SSE together) one member may hold open at once.
pub const STREAM_CONNECTIONS_PER_MEMBER_MAX: usize = 8;
/// Live streams one node holds at once; past it a new one gets 503 `streams_full`.
pub const STREAM_CONNECTIONS_MAX: usize = 20_000;
/// Messages a live stream reads from the store at a time (one inbox page).
pub const STREAM_PAGE: usize = 100;
/// How long one WebSocket frame may take to leave before the consumer is
/// called slow and closed with its last cursor (close code 4008).
pub const STREAM_SEND_TIMEOUT_MS: u64 = 5_000;
/// Bytes a WebSocket may have waiting to be written before a send fails.
pub const STREAM_WRITE_BUFFER_BYTES_MAX: usize = 256 * 1024;
/// A frame a client may send on the inbox WebSocket (it only ever needs to close).
pub const STREAM_CLIENT_FRAME_BYTES_MAX: usize = 4 * 1024;
/// Seconds between keepalives on an idle stream (an SSE comment, a WebSocket ping).
pub const STREAM_KEEPALIVE_S: u64 = 20;
/// Distinct `@handle` words one message may hold; each is looked up before the
/// post, so a body cannot make the registry read without bound.
pub const MESSAGE_MENTION_CANDIDATES_MAX: usize = 64;
/// Webhook endpoints one member may register.
pub const WEBHOOK_ENDPOINTS_PER_MEMBER_MAX: usize = 4;
/// A webhook URL's length in bytes.
pub const WEBHOOK_URL_BYTES_MAX: usize = 2_048;
/// Deliveries one page of an endpoint's list (such as its dead letters) returns.
pub const WEBHOOK_DELIVERIES_PAGE_MAX: usize = 200;
/// Deliveries one pass of the sender claims (at most one per endpoint).
pub const WEBHOOK_CLAIM_MAX: usize = 64;
/// How long one attempt may take, connect to last byte (the spec asks 15–30 s).
pub const WEBHOOK_ATTEMPT_TIMEOUT_MS: u64 = 15_000;
/// How long a claimed delivery is reserved for its attempt; past it, another node may try.
pub const WEBHOOK_LEASE_MS: i64 = 60_000;
/// How long a rotated-out secret still signs deliveries beside the new one.
pub const WEBHOOK_ROTATION_OVERLAP_MS: i64 = 24 * 3600 * 1000;
/// Bytes of a receiver's answer kept for the delivery log.
pub const WEBHOOK_ERROR_BYTES_MAX: usize = 256;
/// The sender's pass interval when nothing is posted (retries come due on it).
pub const WEBHOOK_TICK_MS: u64 = 1_000;
/// Ledger events the notifier reads per pass (it reads again at once when a pass is full).
pub const NOTIFIER_BATCH: usize = 200;
/// Page cache of each SQLite connection of the embedded conversation plane (a writer and two
/// readers), in KiB: SQLite's own default, named. Nothing is memory-mapped.
pub const CONVERSATION_PAGE_CACHE_KIB: u64 = 2 * 1024;
/// Conversation acts the embedded writer commits in one transaction at most.
pub const GROUP_COMMIT_MAX: usize = 256;
/// Conversation acts waiting for the embedded writer; one more is answered `unavailable` rather than queue.
pub const CONVERSATION_WRITE_QUEUE_MAX: usize = 4096;
const _: () = assert!(GROUP_COMMIT_MAX <= CONVERSATION_WRITE_QUEUE_MAX);
/// Committed messages a node keeps in memory for its live streams to deliver
/// without a read; a stream further behind reads the store.
pub const RECENT_MESSAGES_MAX: usize = 4_096;
/// Text messages an agent may post to a room since it was last addressed
/// there (mentioned, or replied to); one more is `etiquette_limit`. People
/// and DMs are not limited.
pub const AGENT_UNADDRESSED_POSTS_MAX: usize = 5;
/// Messages of a room's recent history the etiquette check reads.
pub const ETIQUETTE_SCAN: usize = 200;
/// Messages after a read mark the attention query reads per channel; past
/// it the channel's figures are those of the first this many, marked `capped`
/// (shown as "1000+"), so attention costs a bounded read whatever the backlog.
pub const ATTENTION_SCAN_MAX: usize = 1_000;
/// Public rooms listed per page.
pub const ROOM_PAGE_MAX: usize = 200;
/// Log entries one inbox read looks at before it answers: messages of channels
/// the member has left are skipped, and a page may come back short (with its
/// cursor advanced) rather than scan without end.
pub const INBOX_SCAN_MAX: usize = 8 * INBOX_PAGE_MAX;

const _: () = assert!(INBOX_SCAN_MAX >= INBOX_PAGE_MAX);
const _: () = assert!(STREAM_PAGE <= INBOX_PAGE_MAX);
const _: () = assert!(WEBHOOK_LEASE_MS as u64 > WEBHOOK_ATTEMPT_TIMEOUT_MS);
const _: () = assert!(MESSAGE_MENTION_CANDIDATES_MAX >= MESSAGE_MENTIONS_MAX);
const _: () = assert!(MESSAGE_MENTIONS_MAX <= CHANNEL_MEMBERS_MAX);
// Every mention is `@` and a handle, so the body can always carry the most mentions allowed.
const _: () = assert!(MESSAGE_MENTIONS_MAX * (HANDLE_LEN_MAX + 2) <= MESSAGE_BODY_BYTES_MAX);
const _: () = assert!(CHANNEL_MEMBERS_MAX >= 2);
const _: () = assert!(SEALED_CHANNEL_MEMBERS_MAX >= 2 && SEALED_CHANNEL_MEMBERS_MAX <= CHANNEL_MEMBERS_MAX);

//! The HTTP edge of a Bazaar registry: the only crate that knows HTTP.
//!
//! It authenticates callers, turns JSON requests into core commands, applies
//! idempotency-key semantics (scope, fingerprint, in-flight detection,
//! `Idempotent-Replayed`), maps refusals to problem+json, and serves the API
//! description at `/openapi.json`. It is organised like the core, by
//! capability: [`identity`], [`pay`], [`escrow`], [`dispute`], [`federation`],
//! [`market`] and [`x402`] each own their routes (with their OpenAPI entries)
//! and their share of the sweeper's work; [`registry`] holds the
//! registry-wide routes, and [`conversation`] the conversation plane's
//! (rooms, DMs, the inbox and its live transports). Beneath them sit
//! [`state`] (the shared [`AppState`]), [`exec`] (the handlers' toolbox),
//! [`auth`], [`problem`], [`keyring`], [`metrics`], [`search_tally`],
//! [`plane`] (the conversation store as the server holds it) and [`contract`]
//! (every JSON answer checked against its `bazaar-wire` type, in tests); above them, [`router`]
//! merges the capabilities' routes and [`sweeper`] asks each for due work.
//!
//! ## Map
//!
//! (What this crate holds, file by file; `ARCHITECTURE.md` keeps the one-line summary.)
//!
//! the only crate that knows HTTP, organised like the core
//! by capability. Each of `identity` (owners, invites, agents, credentials,
//! members, handles, me), `pay` (mint, fund, budgets, tokens, verify, void,
//! settlements, events, and the token and settlement batches — each item
//! through its single call's own checked function, grouped by order and key
//! by `exec::run_batch`), `escrow` (contracts), `dispute` (disputes, stake),
//! `federation` (`reputation`: reputation reads, passports, imports; `peers`:
//! key history and rotation, the signed card and recognition list, peers,
//! guests; `settle`: the server-to-server settle endpoint and the
//! merchant-side relay; `netting`: corridor netting statements — the
//! operator's proposal, the peer-to-peer record, the list; `recovery`: the operators' records of relays stuck
//! past `RELAY_RETRY_WINDOW_S` and their retry; `s2s`: registry signatures; `peer_client`: every
//! outbound call to a peer), `bounty` (a job's reward: fund with the signed
//! job, release with the verdict, enrollment and review — every signature
//! checked here —, withdraw, and an agent's earnings), `hire` (service
//! authorizations: authorize, pay with an `Idempotency-Key`, revoke, read;
//! guest hires: agree — opening the guest DM —, accept with a verified
//! result, read; leases: buy with the identity's enrollment, receipt, read
//! with the status now), `spending` (the owner's view of one agent across
//! those capabilities, in ledger units), `live` (what is live and needs no HTTP state:
//! the stream's `Hub` — one tailer per node, each event broadcast once with
//! its public frame built once, and each public summary window built once
//! for every public watcher —, what each viewer may see of an event, and
//! the `AttackRunner` and `StoryRunner` seams the binary fills; `state` holds these, so `chamber`
//! and `state` do not import each other), `chamber` (the live chamber: `stream` —
//! `GET /v1/stream`, SSE of the event ledger projected per viewer, one tailer
//! per node broadcasting each event once, connections filling any gap from
//! the store by contiguous `seq` —, `attacks` — the "try to break it"
//! routes, running the catalogue the `bazaar` binary attaches
//! (`AttackRunner`; the server knows no attack itself), rate-capped per
//! node and per visitor —, `runs` — the story, pilot, federation and AI-agent
//! run buttons (operator only, one at a time, `StoryRunner`) —, and the static pages,
//! each with the shared `NAV` and `BASE_CSS` inserted once: `chamber.html`
//! (`/chamber`, on stream summaries), `story.html` (the market story),
//! `break.html`, `ledger.html` (the chain verified in the browser),
//! `maker.html` (the maker's phone), `owner.html` (owners), `adoption.html`,
//! `reprice.html` (Discover), `architecture.html`, `claims.html` and
//! `rooms.html` (channels, and sealed DMs through `vault.js`, the browser's
//! sealing vault, with `vendor/hpke.js`, the @hpke packages bundled by
//! `scripts/vendor-hpke`, inlined), built only on public routes), `reprice` (Discover: a month of orders as CSV → per-call price list,
//! escrow threshold, margins; pure, shared by `bazaar reprice` and `POST
//! /v1/reprice`), `terms` (a merchant's own terms, `PUT/GET
//! /v1/agents/{agent}/terms`), `ledger` (accounts: every balance for the operator,
//! `GET /v1/accounts`, and one account's transfers for the operator, its
//! holder or the holder's owner, a bounded scan of the transfer log), `market` (listings, search and unmet demand;
//! `rfq`; `orders` with proofs, receipt images and the `/approve/{id}` page,
//! `assets/approve.html`), `x402` (the facilitator for scheme `apt` on network
//! `bzr:<16 hex>`) and `registry` (`/healthz`, `/metrics`, the card,
//! `/passport/verify`) exposes `routes()`, as does `conversation` (the
//! conversation plane's edge: `rest` — rooms,
//! DMs, membership, posts, history, the poll inbox, attention; `stream` — SSE
//! and the WebSocket, both a `Follower` reading from its own cursor — from
//! the plane's window of recent messages while it is gap-free and the
//! member's memberships unchanged, else from the store — so no
//! per-connection queue exists; `webhooks` — endpoint routes,
//! SSRF target checks, and the sender that claims due deliveries from the
//! plane's outbox and posts them signed; `bodies` — a socket's body name,
//! the claim that names one answerer per addressed event, `GET /v1/answers`;
//! `meter` — `GET /v1/meter` and the node's flush of the delivery counts
//! `plane` keeps; `sealing` — sealing-key routes and
//! the check of every signed post against its author's `did:key`; `notices` — the notifier, reading
//! the event ledger after commit and writing each member's typed notices
//! into its DM with the registry, keyed by ledger seq and member, a pass's notices in one plane write
//! (`ConversationStore::notify`) with its lag as `bazaar_notifier_behind_events`, and keeping
//! a room per dispute with its phases as lines; beneath `state` sits `plane` —
//! the attached conversation store, run on the blocking pool, the watch that
//! moves with the log (the webhook sender waits on it), which channels each
//! member's live streams follow — a post wakes only the streams of members in
//! its channel, a membership change the member's own —, the window of recently committed
//! messages and each member's membership epoch, who listens by which transport,
//! refusal codes to problem+json), built with `utoipa-axum` so a
//! route is registered from its `#[utoipa::path]` and cannot exist without
//! its OpenAPI entry, and the capabilities with timed work expose
//! `due(state, now)`. Below them: `state` (`AppState`, `boot`, the in-flight
//! idempotency claims, `decode_token` remembering verified signatures within
//! `VERIFIED_TOKENS_MAX`), `exec` (key rules, `execute`, `receipt`,
//! `execute_shaped`, `resolve`, `load_doc`, idempotency pruning), `auth`
//! (bearer credentials, `ApiJson`), `problem` (RFC 9457; `ProblemDetails` and
//! the named error-response sets routes list), `contract` (the
//! answers' bodies are `bazaar-wire` types, one crate for the whole wire
//! contract; `checked` wraps a router so each JSON answer must read strictly
//! into the type its `/openapi.json` entry names, or it becomes a 500
//! `contract_misfit`; every server test runs with it), `entropy` (the
//! one OS randomness source), `keyring` (genesis seed plus rotated seeds in the
//! store's `meta` table, the published history), `metrics`, `search_tally`
//! (searches counted in memory, flushed off the writer), `reputation_fold`
//! (the node's reputation fold: taken up from the store's snapshot, caught up
//! on reads, written down every `REPUTATION_SNAPSHOT_EVERY_EVENTS`), `front` (the front page at `/`),
//! `passport_page` and `compromises_page` (`docs/compromises.md` rendered at `/compromises`),
//! `relying_party` (the WebAuthn relying party from the public URL), `people` (passkeys with `webauthn-rs`: registration and usernameless
//! sign-in ceremonies, the session cookie, the `/account` page; `auth`
//! accepts a live session in place of a bearer credential and refuses a
//! session's state-changing request from another `Origin`), `relay` (the
//! relay's edge: `/relay` — the NIP-01 WebSocket (`socket`: one task per
//! connection, joining the live feed only while it has subscriptions and
//! before it reads stored events), the NIP-11 document with CORS, the client
//! page — on the registry's port and, with `--relay-port`, its own;
//! `jobs` — `GET /v1/jobs/{task_id}[?wait_s]`; the purger; the MCP tools
//! `bazaar_ask`/`bazaar_wait` are in `mcp`).
//! Above them: `router` (merges every `routes()`, serves `/openapi.json`,
//! nests `mcp` — the storefront's MCP server, rmcp over streamable HTTP —
//! at `/mcp`; `UNDESCRIBED_ROUTES` names the routes left out of the
//! description on purpose), `closing` (a stopping node as its WebSockets see it: each holds a ticket, a stop
//! closes them with 1001, `bazaar serve` waits for them to end) and `sweeper` (asks `pay`, `escrow`, `dispute`,
//! `federation` and `exec` for due work: expired holds, auto-release, default
//! rulings, arbiter replacement, execution after the appeal window, relay
//! retries, keys another node rotated to, idempotency records past 24 h; and
//! flushes the search tally; on a cluster only on the node holding its
//! lease). `cluster` is the seam several nodes plug into (`Cluster`:
//! `publish` a `Signal` after a commit, cross-node in-flight `claim`/`release`,
//! `holds` a lease; no implementation here) and `fanout` a node's part in it
//! (`receive` applies another node's signal to the plane's followers or the
//! relay's live feed; `forward_relay`; the reconciler that wakes streams when
//! the shared log moved without a signal; `runs_here` for leased work).

pub mod auth;
pub mod bounty;
pub mod chamber;
pub mod closing;
pub mod cluster;
pub mod compromises_page;
pub mod contract;
pub mod conversation;
pub mod dispute;
pub mod edge;
pub mod entropy;
pub mod escrow;
pub mod exec;
pub mod fanout;
pub mod federation;
pub mod front;
pub mod hire;
pub mod identity;
pub mod keyring;
pub mod ledger;
pub mod live;
pub mod market;
pub mod mcp;
pub mod metrics;
pub mod page;
pub mod passport_page;
pub mod pay;
pub mod people;
pub mod plane;
pub mod problem;
pub mod refusals;
pub mod registry;
pub mod relay;
pub mod relying_party;
pub mod reprice;
pub mod reputation_fold;
pub mod router;
pub mod search_tally;
pub mod spending;
pub mod state;
pub mod sweeper;
pub mod terms;
pub mod x402;

pub use bazaar_core::model::{DESK_ID, OPERATOR_ID};
pub use entropy::{new_secret_credential, random_b64, OsEntropy};
pub use router::router;
pub use state::{boot, boot_with_entropy, AppState, Booted, VERIFIED_TOKENS_MAX};
pub use sweeper::{shutdown, spawn_sweeper, sweep_once};

/// The network unit's name, as published in the registry card.
pub const NETWORK_UNIT: &str = "BNU";

//! What is live across the registry and needs nothing of its HTTP state:
//! the event stream's hub (one tailer per node following the ledger's head
//! and broadcasting each new event once, with its public frame built once,
//! and each tick's public frames as one run every public watcher shares)
//! and what each viewer may see of an event; and the seam through which the
//! `bazaar` binary gives the chamber its attack catalogue. The chamber's
//! routes (`chamber`) use these; `state` holds them.

use bazaar_core::model::Event;
use bazaar_store::Store;
use bazaar_types::MemberId;
use bytes::Bytes;
use futures::future::BoxFuture;
use serde_json::{json, Map, Value};
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};
use tokio::sync::{broadcast, watch, Semaphore};

/// How often the tailer looks at the ledger's head.
pub const STREAM_POLL_MS: u64 = 100;
/// Events read from the store per page (backfill and tail).
pub const STREAM_PAGE_MAX: usize = 500;
/// Events the broadcast keeps for a slow connection before it must read the store.
pub const STREAM_BROADCAST_MAX: usize = 4_096;
/// Public runs (each tail's events as one shared chunk) kept for a slow public connection before it must read the
/// store: at one tail per [`STREAM_POLL_MS`], several seconds.
pub const STREAM_RUNS_MAX: usize = 64;
/// Bytes of public frames in one run: a busier tail is cut into several runs.
pub const STREAM_RUN_BYTES_MAX: usize = 256 * 1024;
/// `?summary=true`: one `summary` event per this window instead of every event.
pub const STREAM_SUMMARY_MS: u64 = 250;
/// The latest events a summary carries whole (as the viewer may see them).
pub const STREAM_SUMMARY_LATEST_MAX: usize = 20;
/// Open streams per node; past it, `503 stream_full`.
pub const STREAM_CONNECTIONS_MAX: usize = 1_024;
/// Body fields the public may see when their value is a string.
pub const PUBLIC_KEYS: &[&str] = &[
    "authored_handle",
    "handle",
    "merchant",
    "merchant_handle",
    "settlement_id",
    "buyer",
    "seller",
    "arbiter",
    "member",
    "agent",
    "owner",
    "contract",
    "dispute",
    "order",
    "order_id",
    "token",
    "jti",
    "listing",
    "rfq",
    "share",
    "phase",
    "decision",
    "state",
    "code",
    "op",
    // A chamber press's refusal names the attack from the public catalogue.
    "attack",
    "kind",
    "reason",
    "subject",
    "bounty",
    "job",
    "worker",
    "destination",
    "hire",
    "hirer",
    "specialist",
    "pay_to",
    "lease",
    "authorization",
    "claimant",
    "winner",
    "respondent",
    "link",
];
/// Number fields the public may see besides `*_minor` and `*_ms`: counts and positions, never secrets.
const PUBLIC_COUNTS: &[&str] = &[
    "milestone",
    "milestones",
    "index",
    "round",
    "version",
    "share",
    "shares",
    "quantity",
    "attempt",
    "invited",
    "filled",
    "unfilled",
    "units",
];
/// Amounts named without the `_minor` suffix inside the nested documents below (an allocation's lines, a
/// ruling): the public sees each of them elsewhere too (the offers' unit prices, the order's and its contracts'
/// totals, the execution's refund and slash).
const PUBLIC_AMOUNTS: &[&str] = &["amount", "unit_price", "total", "refund", "slash"];
/// Objects (or lists of objects) the public sees projected by the same rules, field by field: a storefront's
/// allocation and its lines, a maker's payment for her share, a dispute's ruling — amounts, counts, codes and
/// identifiers only (a ruling's reasons are prose, and stay out).
const PUBLIC_NESTED: &[&str] = &["allocation", "lines", "payment", "ruling"];

/// The tailer and what it broadcasts; one per registry process.
pub struct Hub {
    pub(crate) events: broadcast::Sender<Arc<Shared>>,
    /// The last `seq` the tailer has seen (broadcast, or skipped while nobody listened).
    pub(crate) tailed: watch::Sender<u64>,
    pub(crate) connections: Arc<Semaphore>,
    /// The latest public summary window, built once by the tailer for every public watcher of summaries
    /// (`None` until the first); windows follow one another without a gap while anyone watches them.
    pub(crate) public_windows: watch::Sender<Option<Arc<Window>>>,
    /// Each tail's new events as the public sees them, one shared chunk for every public watcher of every event:
    /// a level watcher writes the run's bytes as they are (no copy, no projection, no per-event wake-up).
    pub(crate) public_runs: broadcast::Sender<Arc<Run>>,
    /// Streams opened on this node since it started (`bazaar demo --serve` waits for the first viewer).
    pub viewers: watch::Sender<u64>,
    /// The latest completed flows, found at most once per [`LATEST_REFRESH_MS`] (`GET /v1/stream/latest`).
    pub(crate) latest: tokio::sync::Mutex<Option<Arc<Latest>>>,
}

/// One public summary window: the seq range it covers and its whole SSE frame, shared by every public watcher.
pub struct Window {
    pub from: u64,
    pub to: u64,
    pub frame: Bytes,
}

/// Consecutive events' public frames as one chunk: `frame` holds the frames of `from..=to` back to back, and
/// `starts[i]` is where the frame of `from + i` begins, so a watcher that already has the first few slices the rest.
pub struct Run {
    pub from: u64,
    pub to: u64,
    pub frame: Bytes,
    starts: Vec<u32>,
}

impl Run {
    /// The frames after `sent` (`from - 1 <= sent < to`), without a copy.
    pub fn after(&self, sent: u64) -> Bytes {
        let skip = sent.saturating_add(1).saturating_sub(self.from) as usize;
        match self.starts.get(skip) {
            Some(&start) => self.frame.slice(start as usize..),
            None => Bytes::new(),
        }
    }
}

/// Builds runs as the tailer reads events (and a public connection's catch-up from the store).
#[derive(Default)]
pub(crate) struct RunBuilder {
    from: u64,
    to: u64,
    bytes: Vec<u8>,
    starts: Vec<u32>,
}

impl RunBuilder {
    pub(crate) fn add(&mut self, shared: &Shared) {
        if self.starts.is_empty() {
            self.from = shared.event.seq;
        }
        self.to = shared.event.seq;
        self.starts.push(self.bytes.len() as u32);
        self.bytes.extend_from_slice(&shared.frame_for(&Viewer::Public));
    }

    pub(crate) fn full(&self) -> bool {
        self.bytes.len() >= STREAM_RUN_BYTES_MAX
    }

    /// The run built so far (if any), leaving the builder empty.
    pub(crate) fn take(&mut self) -> Option<Run> {
        if self.starts.is_empty() {
            return None;
        }
        let built = std::mem::take(self);
        Some(Run { from: built.from, to: built.to, frame: Bytes::from(built.bytes), starts: built.starts })
    }
}

/// What one summary window saw, as one viewer may see it. Only the latest events are projected, when the
/// frame is built: a busy window counts hundreds of events and shows twenty.
pub(crate) struct Summary {
    pub(crate) from: u64,
    pub(crate) to: u64,
    viewer: Viewer,
    /// (kind, events) in first-seen order: a handful of kinds, so a scan beats a map and allocates once per kind.
    counts: Vec<(String, u64)>,
    latest: std::collections::VecDeque<Arc<Shared>>,
}

impl Summary {
    pub(crate) fn new(viewer: Viewer) -> Summary {
        Summary {
            from: 0,
            to: 0,
            viewer,
            counts: Vec::new(),
            latest: std::collections::VecDeque::with_capacity(STREAM_SUMMARY_LATEST_MAX),
        }
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.counts.is_empty()
    }

    /// Counts events, which arrive in order: the first sets `from`.
    pub(crate) fn add(&mut self, shared: &Arc<Shared>) {
        if self.is_empty() {
            self.from = shared.event.seq;
        }
        self.to = shared.event.seq;
        match self.counts.iter_mut().find(|(kind, _)| *kind == shared.event.kind) {
            Some((_, n)) => *n += 1,
            None => self.counts.push((shared.event.kind.clone(), 1)),
        }
        if self.latest.len() == STREAM_SUMMARY_LATEST_MAX {
            self.latest.pop_front();
        }
        self.latest.push_back(shared.clone());
    }

    /// `id: <to>\nevent: summary\ndata: {from_seq, to_seq, counts, latest: [event data…]}`; each latest
    /// event's data is cut from its own frame (`data: …\n\n`), not serialised again.
    pub(crate) fn frame(&self) -> Bytes {
        let counts: Map<String, Value> = self.counts.iter().map(|(kind, n)| (kind.clone(), (*n).into())).collect();
        let counts = Value::Object(counts);
        let mut out = format!(
            "id: {}\nevent: summary\ndata: {{\"from_seq\":{},\"to_seq\":{},\"counts\":{counts},\"latest\":[",
            self.to, self.from, self.to
        )
        .into_bytes();
        for (n, shared) in self.latest.iter().enumerate() {
            if n > 0 {
                out.push(b',');
            }
            let frame = shared.frame_for(&self.viewer);
            let start = frame.windows(6).position(|w| w == b"data: ").map_or(0, |at| at + 6);
            out.extend_from_slice(&frame[start..frame.len().saturating_sub(2)]);
        }
        out.extend_from_slice(b"]}\n\n");
        Bytes::from(out)
    }
}

impl Hub {
    /// Starts the tailer (once) for `state`.
    pub fn start(store: &Arc<dyn Store>) -> Arc<Hub> {
        let (events, _) = broadcast::channel(STREAM_BROADCAST_MAX);
        let connections = Arc::new(Semaphore::new(STREAM_CONNECTIONS_MAX));
        let public_windows = watch::channel(None).0;
        let (public_runs, _) = broadcast::channel(STREAM_RUNS_MAX);
        let hub = Arc::new(Hub {
            events,
            tailed: watch::channel(0).0,
            connections,
            public_windows,
            public_runs,
            viewers: watch::channel(0).0,
            latest: tokio::sync::Mutex::new(None),
        });
        tokio::spawn(tail(Arc::downgrade(store), hub.clone()));
        hub
    }
}

/// Events looked at, back from the head, to find the latest completed flows: a flow older than this is not shown.
pub const LATEST_SCAN_MAX: u64 = 20_000;
/// The latest flows are looked for again at most this often, however fast the head moves (the stream tells the rest).
pub const LATEST_REFRESH_MS: u64 = 1_000;

/// The latest completed paid call, contract and dispute in the last [`LATEST_SCAN_MAX`] events, each as the
/// events that tell it, oldest first (whole: each viewer is shown its own projection).
pub struct Latest {
    /// The head when they were looked for.
    pub head: u64,
    /// The lowest `seq` looked at.
    pub scanned_from: u64,
    /// The settlement and the token it settled (when the token is in the window).
    pub paid_call: Option<Vec<Event>>,
    /// A contract whose every milestone was released or resolved by a dispute: its creation, releases and executions.
    pub contract: Option<Vec<Event>>,
    /// An executed dispute: every phase, filed to executed.
    pub dispute: Option<Vec<Event>>,
    found_at: Instant,
}

impl Hub {
    /// The latest completed flows, looked for again when the head moved and [`LATEST_REFRESH_MS`] passed.
    pub async fn latest(&self, store: &dyn Store) -> Result<Arc<Latest>, bazaar_store::StoreError> {
        let mut cached = self.latest.lock().await;
        let head = store.head().await?.seq;
        if let Some(latest) = cached.as_ref() {
            let fresh = latest.found_at.elapsed() < Duration::from_millis(LATEST_REFRESH_MS);
            if latest.head == head || fresh {
                return Ok(latest.clone());
            }
        }
        let found = Arc::new(find_latest(store, head).await?);
        *cached = Some(found.clone());
        Ok(found)
    }
}

/// A body's string field.
fn text<'a>(event: &'a Event, key: &str) -> Option<&'a str> {
    event.body.get(key).and_then(Value::as_str)
}

/// The contract and milestone an executed dispute resolved, when its subject was a milestone.
fn resolved_milestone(event: &Event) -> Option<(&str, u64)> {
    let subject = event.body.get("subject")?;
    let contract = subject.get("contract").and_then(Value::as_str)?;
    Some((contract, subject.get("index").and_then(Value::as_u64)?))
}

/// What a backward scan has seen of one contract: the milestones that ended, the last end, its events.
#[derive(Default)]
struct ContractSeen {
    ended: std::collections::BTreeSet<u64>,
    last_end: u64,
    events: Vec<Event>,
}

/// A walk back from the head: each flow's events as they are met (newest first, so each is put in front).
#[derive(Default)]
struct Scan {
    /// The latest settlement's token id and events; whole once its token is met.
    paid: Option<(String, Vec<Event>)>,
    paid_done: bool,
    /// The latest executed dispute's id and events; whole once its filing is met.
    dispute: Option<(String, Vec<Event>)>,
    dispute_done: bool,
    /// Contracts with an ended milestone whose creation is not met yet.
    contracts: std::collections::HashMap<String, ContractSeen>,
    /// The completed contract that ended last so far: its last end and its events.
    contract: Option<(u64, Vec<Event>)>,
}

impl Scan {
    fn see(&mut self, event: &Event) {
        self.see_paid_call(event);
        self.see_dispute(event);
        self.see_contract(event);
    }

    fn see_paid_call(&mut self, event: &Event) {
        if self.paid_done {
            return;
        }
        match (&mut self.paid, event.kind.as_str()) {
            (None, "settlement.posted") => {
                self.paid = text(event, "jti").map(|jti| (jti.to_string(), vec![event.clone()]));
            }
            (Some((jti, events)), "token.issued") if text(event, "jti") == Some(jti.as_str()) => {
                events.insert(0, event.clone());
                self.paid_done = true;
            }
            _ => {}
        }
    }

    fn see_dispute(&mut self, event: &Event) {
        let kind = event.kind.as_str();
        if self.dispute_done || !kind.starts_with("dispute.") {
            return;
        }
        match (&mut self.dispute, text(event, "dispute")) {
            (None, Some(id)) if kind == "dispute.executed" => {
                self.dispute = Some((id.to_string(), vec![event.clone()]))
            }
            (Some((wanted, events)), Some(id)) if id == wanted => {
                events.insert(0, event.clone());
                self.dispute_done = kind == "dispute.filed";
            }
            _ => {}
        }
    }

    fn see_contract(&mut self, event: &Event) {
        let ended = match event.kind.as_str() {
            "milestone.released" => text(event, "contract").zip(event.body.get("milestone").and_then(Value::as_u64)),
            "dispute.executed" => resolved_milestone(event),
            "contract.created" => {
                let id = text(event, "contract").unwrap_or_default();
                let milestones = event.body.get("milestones").and_then(Value::as_u64).unwrap_or(0);
                let Some(mut seen) = self.contracts.remove(id) else { return };
                let newer = self.contract.as_ref().is_none_or(|(end, _)| seen.last_end > *end);
                if milestones > 0 && seen.ended.len() as u64 == milestones && newer {
                    seen.events.insert(0, event.clone());
                    self.contract = Some((seen.last_end, seen.events));
                }
                return;
            }
            _ => None,
        };
        if let Some((id, index)) = ended {
            let seen = self.contracts.entry(id.to_string()).or_default();
            seen.ended.insert(index);
            seen.last_end = seen.last_end.max(event.seq);
            seen.events.insert(0, event.clone());
        }
    }

    /// Each flow is whole, and no contract still open in the scan could have ended later than the one found.
    fn done(&self) -> bool {
        let contract_done =
            self.contract.as_ref().is_some_and(|(end, _)| self.contracts.values().all(|seen| seen.last_end < *end));
        self.paid_done && self.dispute_done && contract_done
    }
}

/// Walks back from `head` (at most [`LATEST_SCAN_MAX`] events) collecting the latest completed flows.
async fn find_latest(store: &dyn Store, head: u64) -> Result<Latest, bazaar_store::StoreError> {
    let floor = head.saturating_sub(LATEST_SCAN_MAX);
    let mut scan = Scan::default();
    let mut upper = head;
    while upper > floor && !scan.done() {
        let after = upper.saturating_sub(STREAM_PAGE_MAX as u64).max(floor);
        for event in store.events(after, (upper - after) as usize).await?.iter().rev() {
            scan.see(event);
        }
        upper = after;
    }
    Ok(Latest {
        head,
        scanned_from: upper + 1,
        paid_call: scan.paid.map(|(_, events)| events),
        contract: scan.contract.map(|(_, events)| events),
        dispute: scan.dispute.map(|(_, events)| events),
        found_at: Instant::now(),
    })
}

/// Follows the head and broadcasts each new event once, while anyone listens.
async fn tail(store: Weak<dyn Store>, hub: Arc<Hub>) {
    let mut cursor = None;
    // The public summary window being filled, and when its first event came.
    let mut window: Option<(Summary, Instant)> = None;
    loop {
        tokio::time::sleep(Duration::from_millis(STREAM_POLL_MS)).await;
        if store.strong_count() == 0 {
            return;
        }
        let summaries_watched = hub.public_windows.receiver_count() > 0;
        let runs_watched = hub.public_runs.receiver_count() > 0;
        if hub.events.receiver_count() == 0 && !summaries_watched && !runs_watched {
            // Nobody listens: no reads at all. A newcomer reads its own start
            // from the store, and the next tick starts again from the head.
            cursor = None;
            window = None;
            continue;
        }
        let Some(store) = store.upgrade() else { return };
        let Ok(head) = store.head().await else { continue };
        let from = cursor.unwrap_or(head.seq);
        let mut at = from;
        let mut run = RunBuilder::default();
        while at < head.seq {
            let Ok(page) = store.events(at, STREAM_PAGE_MAX).await else { break };
            let Some(last) = page.last() else { break };
            at = last.seq;
            for event in page {
                let shared = Arc::new(Shared::new(event));
                if summaries_watched {
                    let (summary, _) = window.get_or_insert_with(|| (Summary::new(Viewer::Public), Instant::now()));
                    summary.add(&shared);
                }
                if runs_watched {
                    run.add(&shared);
                    if run.full() {
                        let _ = hub.public_runs.send(Arc::new(run.take().expect("a full run has events")));
                    }
                }
                let _ = hub.events.send(shared);
            }
        }
        if let Some(run) = run.take() {
            let _ = hub.public_runs.send(Arc::new(run));
        }
        cursor = Some(at);
        hub.tailed.send_replace(at);
        if !summaries_watched {
            window = None;
        } else if window.as_ref().is_some_and(|(_, first)| first.elapsed() >= Duration::from_millis(STREAM_SUMMARY_MS))
        {
            if let Some((summary, _)) = window.take() {
                let built = Window { from: summary.from, to: summary.to, frame: summary.frame() };
                hub.public_windows.send_replace(Some(Arc::new(built)));
            }
        }
    }
}

/// An event as every connection shares it: the public projection is
/// serialised once, by the first connection that needs it, for all of them.
pub struct Shared {
    pub event: Event,
    public: std::sync::OnceLock<Bytes>,
}

/// `id: <seq>\ndata: <json>\n\n` (compact JSON has no newline).
fn frame(seq: u64, data: &Value) -> Bytes {
    Bytes::from(format!("id: {seq}\ndata: {data}\n\n"))
}

impl Shared {
    pub fn new(event: Event) -> Shared {
        Shared { event, public: std::sync::OnceLock::new() }
    }

    /// The whole SSE frame for `viewer`: `id:` (the seq) and `data:` (the
    /// event as it may see it), of the default type `message` so a browser's
    /// `onmessage` sees every kind. The public frame is built once.
    pub fn frame_for(&self, viewer: &Viewer) -> Bytes {
        if whole_for(&self.event, viewer) {
            return frame(self.event.seq, &project(&self.event, viewer));
        }
        self.public.get_or_init(|| frame(self.event.seq, &project(&self.event, &Viewer::Public))).clone()
    }
}

/// Whether `viewer` sees `event` whole: the operator always, a member its own events.
fn whole_for(event: &Event, viewer: &Viewer) -> bool {
    match viewer {
        Viewer::Operator => true,
        Viewer::Member(me) => &event.authored_by == me || &event.on_behalf_of == me,
        Viewer::Public => false,
    }
}

/// Who is watching.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Viewer {
    Public,
    Member(MemberId),
    Operator,
}

/// The event as `viewer` may see it.
pub fn project(event: &Event, viewer: &Viewer) -> Value {
    let whole = whole_for(event, viewer);
    let by = event.body.get("authored_handle").cloned().unwrap_or(Value::Null);
    if !whole {
        // Lean, for many watchers: the previous hash is the previous event's
        // `hash`, and the author's handle is `by`, so neither is sent twice.
        return json!({"seq": event.seq, "kind": event.kind, "at_ms": event.at, "hash": event.hash, "by": by,
            "detail": "public", "body": public_body(&event.body)});
    }
    json!({
        "seq": event.seq,
        "kind": event.kind,
        "at_ms": event.at,
        "hash": event.hash,
        "prev_hash": event.prev_hash,
        "by": by,
        "detail": "whole",
        "body": event.body,
    })
}

/// The public's share of a body: allowlisted identifiers, amounts, times, counts and flags, and the
/// allowlisted nested objects ([`PUBLIC_NESTED`]) projected the same way.
fn public_body(body: &Value) -> Value {
    let mut kept = Map::new();
    for (key, value) in body.as_object().into_iter().flatten() {
        let name = key.as_str();
        let projected = match value {
            Value::String(_) => (name != "authored_handle" && PUBLIC_KEYS.contains(&name)).then(|| value.clone()),
            Value::Number(_) => (name.ends_with("_minor")
                || name.ends_with("_ms")
                || PUBLIC_COUNTS.contains(&name)
                || PUBLIC_AMOUNTS.contains(&name))
            .then(|| value.clone()),
            Value::Bool(_) => Some(value.clone()),
            Value::Object(_) if PUBLIC_NESTED.contains(&name) => Some(public_body(value)),
            Value::Array(items) if PUBLIC_NESTED.contains(&name) => {
                Some(Value::Array(items.iter().filter(|item| item.is_object()).map(public_body).collect()))
            }
            _ => None,
        };
        if let Some(projected) = projected {
            kept.insert(key.clone(), projected);
        }
    }
    Value::Object(kept)
}

/// The binary's attack catalogue, for the chamber's "try to break it":
/// names with the refusal each must meet, and a runner.
pub trait AttackRunner: Send + Sync {
    /// (name, expected refusal code) for every attack.
    fn catalogue(&self) -> Vec<(String, String)>;
    /// Runs one attack through the public API; its verdict (code, and whether balances and the ledger stayed put).
    fn run(&self, name: String) -> BoxFuture<'static, Result<bazaar_wire::chamber::AttackVerdict, String>>;
}

/// The chamber's runs, which the `bazaar` binary attaches: the scripted
/// cushion-cover story and the AI buyer agent, each against this registry
/// through its public API and MCP server, each ending at an order's approval
/// link — neither can pay.
pub trait StoryRunner: Send + Sync {
    /// Runs the scripted story with a fresh cast up to the order waiting for its approval.
    fn story(&self) -> BoxFuture<'static, Result<bazaar_wire::chamber::StoryReport, String>>;
    /// Runs the pilot's proof with a fresh cast: a hundred paid calls, a buyer crash mid-retry, charged once.
    fn pilot(&self) -> BoxFuture<'static, Result<bazaar_wire::chamber::PilotProof, String>>;
    /// Runs the federation phase with a fresh cast: a stranger's agent from a peer registry (started beside this
    /// one on the first run) pays here once and places an escrowed order, with no manual onboarding.
    fn federation(&self) -> BoxFuture<'static, Result<bazaar_wire::chamber::FederationProof, String>>;
    /// The configured model's name; `None` when no model is configured.
    fn agent_model(&self) -> Option<String>;
    /// Runs the AI buyer agent on `request` (words) with a fresh cast; `Err` when it could not start.
    fn agent(&self, request: String) -> BoxFuture<'static, Result<bazaar_wire::chamber::AgentReport, String>>;
}

/// Attack runs a node starts in any sliding minute.
pub const ATTACKS_PER_MINUTE_MAX: usize = 20;
/// Attack runs one visitor starts in any sliding minute.
pub const ATTACKS_PER_VISITOR_PER_MINUTE: usize = 5;

/// How many presses may start in any sliding minute: on the node, and per visitor.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AttackLimits {
    pub per_minute: usize,
    pub per_visitor_per_minute: usize,
}

impl AttackLimits {
    /// [`ATTACKS_PER_MINUTE_MAX`] and [`ATTACKS_PER_VISITOR_PER_MINUTE`]; what every registry runs with
    /// unless a test sets others (`AppState::limit_attacks`).
    pub const fn standard() -> AttackLimits {
        AttackLimits { per_minute: ATTACKS_PER_MINUTE_MAX, per_visitor_per_minute: ATTACKS_PER_VISITOR_PER_MINUTE }
    }
}

/// Attack runs started in the last minute, and the one running now.
#[derive(Default)]
pub struct Limiter {
    pub(crate) started: Mutex<Vec<Instant>>,
    pub(crate) running: tokio::sync::Mutex<()>,
    /// Runs started in the last minute per visitor (see `chamber::attacks::visitor_of`).
    pub(crate) visitors: Mutex<std::collections::HashMap<String, Vec<Instant>>>,
}

/// Whether `visitor` has room for one more run in the sliding minute (and the table room for one more
/// visitor, at most `tracked_max`); records it if so.
pub(crate) fn admit_visitor(limiter: &Limiter, visitor: &str, per_minute: usize, tracked_max: usize) -> bool {
    let mut visitors = limiter.visitors.lock().expect("limiter lock");
    if !visitors.contains_key(visitor) && visitors.len() >= tracked_max {
        visitors.retain(|_, runs| runs.iter().any(|at| at.elapsed() < Duration::from_secs(60)));
        if visitors.len() >= tracked_max {
            return false;
        }
    }
    let runs = visitors.entry(visitor.to_string()).or_default();
    runs.retain(|at| at.elapsed() < Duration::from_secs(60));
    if runs.len() >= per_minute {
        return false;
    }
    runs.push(Instant::now());
    true
}

/// Whether `started` has room for one more run in the sliding minute; records it if so.
pub(crate) fn admit(started: &Mutex<Vec<Instant>>, per_minute: usize) -> bool {
    let mut started = started.lock().expect("limiter lock");
    started.retain(|at| at.elapsed() < Duration::from_secs(60));
    if started.len() >= per_minute {
        return false;
    }
    started.push(Instant::now());
    true
}

#[cfg(test)]
mod tests {
    use super::*;
    use bazaar_types::Timestamp;

    fn shared(seq: u64) -> Shared {
        let member = MemberId(format!("did:bazaar:m{seq}"));
        Shared::new(Event {
            seq,
            prev_hash: String::new(),
            hash: format!("h{seq}"),
            kind: "minted".into(),
            body: json!({"amount_minor": seq}),
            authored_by: member.clone(),
            on_behalf_of: member,
            at: Timestamp(seq as i64),
        })
    }

    /// A run is every event's public frame back to back, and a connection part-way through it gets the rest of
    /// the same bytes: each later frame whole, none before.
    #[test]
    fn a_run_slices_at_frame_boundaries() {
        let events: Vec<Shared> = (5..=8).map(shared).collect();
        let mut builder = RunBuilder::default();
        for event in &events {
            builder.add(event);
        }
        let run = builder.take().expect("four events");
        assert!(builder.take().is_none(), "taking empties the builder");
        let frames: Vec<Bytes> = events.iter().map(|e| e.frame_for(&Viewer::Public)).collect();
        assert_eq!((run.from, run.to), (5, 8));
        assert_eq!(run.after(4), Bytes::from(frames.concat()));
        assert_eq!(run.after(6), Bytes::from(frames[2..].concat()));
        assert!(run.after(8).is_empty());
        assert!(run.frame.starts_with(b"id: 5\ndata: {"));
    }
}

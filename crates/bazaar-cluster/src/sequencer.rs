//! One sequencer per registry (docs/design/sequencer.md): the node holding
//! the ledger's lease in PostgreSQL runs the only writer that may commit; every
//! other node forwards its commands there by NATS core request/reply, so one
//! group commit folds the whole cluster's traffic. [`Sequenced`] is the
//! [`Store`] every node's server sees: reads go to PostgreSQL as before,
//! `submit` goes to the local writer while this node leads and over NATS
//! while it does not, with the same answer either way.

use async_nats::client::RequestErrorKind;
use async_trait::async_trait;
use bazaar_core::apply::Applied;
use bazaar_core::chain::ChainHead;
use bazaar_core::command::Command;
use bazaar_core::model::*;
use bazaar_store::{CacheGauge, FoldSnapshot, SearchCount, SqliteMemory, Store, StoreError, TokenView};
use bazaar_store_postgres::{PostgresStore, SequencerLease, Standing};
use bazaar_types::{AccountId, MemberId, OrderId, Timestamp, TokenId};
use futures::StreamExt;
use std::collections::HashSet;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};
use tokio::sync::{mpsc, oneshot};

/// How long a lease lasts by the database's clock without a renewal.
pub const SEQUENCER_LEASE: Duration = Duration::from_secs(3);
/// How often the sequencer renews (and every other node tries to take) the lease.
pub const SEQUENCER_RENEW: Duration = Duration::from_secs(1);
/// A renewal that has not answered this long is given up, and the node steps
/// down: it must stop before the lease can lapse in the database.
pub const RENEW_DEADLINE: Duration = Duration::from_millis(1_500);
const _: () = assert!(SEQUENCER_RENEW.as_millis() + RENEW_DEADLINE.as_millis() < SEQUENCER_LEASE.as_millis());
/// How long a forwarding node waits for the sequencer's answer to one command.
pub const FORWARD_TIMEOUT: Duration = Duration::from_secs(5);
/// How long a command may wait in all for a sequencer to take it (during a
/// takeover) before the caller is told to retry with the same key.
pub const LEADER_WAIT: Duration = Duration::from_secs(12);
/// Forwarded commands one NATS message carries at most.
pub const FORWARD_BATCH_MAX: usize = 256;
/// Batches a node has in flight to the sequencer at once: while they are, the
/// commands that come meanwhile wait and go together, one message for many.
pub const FORWARD_IN_FLIGHT_MAX: usize = 2;
/// The longest the commands waiting are held for a batch in flight to finish: past it they go anyway, so a
/// sequencer that stopped answering (and holds both batches until `FORWARD_TIMEOUT`) never holds up the
/// commands that its successor could take.
pub const FORWARD_GATHER_MAX: Duration = Duration::from_millis(20);
/// Bytes of commands one forwarding request carries at most, under NATS's default 1 MiB `max_payload`
/// (a receipt image, the largest command, is ≤ 512 KiB: ≈ 683 KiB as base64url).
pub const FORWARD_BYTES_MAX: usize = 896 * 1024;
/// Commands waiting to be forwarded; past it a write is answered `store_busy`.
pub const FORWARD_QUEUE_MAX: usize = 16_384;
/// The NATS queue group sequencers subscribe in: one delivery per command.
const QUEUE_GROUP: &str = "sequencer";
/// Pause between attempts while no sequencer answers.
const NO_SEQUENCER_BACKOFF: Duration = Duration::from_millis(50);

/// Counters of the forwarding path, for `/metrics`-style reporting and tests.
#[derive(Default)]
pub struct ForwardStats {
    /// Commands this node sent to another node's sequencer.
    pub forwarded: AtomicU64,
    /// Commands this node, as sequencer, took from other nodes (in however many messages).
    pub served: AtomicU64,
    /// Attempts sent again: no sequencer, a fenced one, or a lost answer under an idempotency key.
    pub resent: AtomicU64,
    /// Times this node became the sequencer.
    pub takeovers: AtomicU64,
}

/// The store of a node in a cluster. See the module's documentation.
pub struct Sequenced {
    inner: Arc<PostgresStore>,
    /// Idempotency keys this node, as sequencer, is applying now: a duplicate
    /// arriving meanwhile (from any node) is answered `InFlight` (409).
    inflight: Mutex<HashSet<(String, String)>>,
    lease: Arc<SequencerLease>,
    nats: async_nats::Client,
    subject: String,
    /// The queue of commands to forward, drained in batches by `forward_forever`.
    forwards: mpsc::Sender<Forwarded>,
    pub stats: Arc<ForwardStats>,
}

/// A command waiting to be forwarded, and where its attempt's outcome goes.
type Forwarded = (Command, oneshot::Sender<Attempt>);

/// The subject a registry's sequencer takes commands on.
pub fn subject(cluster: &str) -> String {
    format!("bazaar.ledger.{cluster}")
}

impl Sequenced {
    /// Wraps `inner` (opened with `PostgresStore::connect_sequenced`), starts
    /// the lease loop, and returns once the first round has run: a node
    /// starting alone leads before it boots.
    pub async fn start(inner: PostgresStore, lease: SequencerLease, nats: async_nats::Client) -> Arc<Sequenced> {
        let (forwards, queue) = mpsc::channel(FORWARD_QUEUE_MAX);
        let stats: Arc<ForwardStats> = Arc::default();
        let subject = subject(lease.cluster());
        tokio::spawn(forward_forever(nats.clone(), subject.clone(), queue, stats.clone()));
        let sequenced = Arc::new(Sequenced {
            inner: Arc::new(inner),
            inflight: Mutex::default(),
            subject,
            lease: Arc::new(lease),
            nats,
            forwards,
            stats,
        });
        let mut lead = Leadership::default();
        lead.round(&sequenced).await;
        tokio::spawn(lead_forever(Arc::downgrade(&sequenced), lead));
        sequenced
    }

    /// Whether this node is the sequencer now.
    pub fn leading(&self) -> bool {
        self.lease.epoch().is_some()
    }

    /// Gives the lease up (on a clean shutdown), so another node takes over at once.
    pub async fn release(&self) {
        self.lease.release().await;
    }

    /// Applies `command` on this node's writer, as the sequencer: at most one command per idempotency key
    /// at a time, whichever node it came from.
    async fn apply(&self, command: Command) -> Result<Applied, StoreError> {
        let _claim = match &command.idem {
            Some(idem) => {
                let key = (idem.scope.clone(), idem.key.clone());
                if !self.inflight.lock().expect("in-flight keys").insert(key.clone()) {
                    return Err(StoreError::InFlight);
                }
                Some(InFlightKey { node: self, key })
            }
            None => None,
        };
        self.inner.submit(command).await
    }

    /// Sends `command` to the sequencer (in a batch with whatever else this node forwards meanwhile) and
    /// waits for its answer.
    async fn forward(&self, command: &Command) -> Attempt {
        let (reply, answer) = oneshot::channel();
        if self.forwards.try_send((command.clone(), reply)).is_err() {
            return Attempt::Final(Box::new(Err(StoreError::Busy)));
        }
        answer.await.unwrap_or_else(|_| Attempt::Unknown("the forwarding task stopped".into()))
    }
}

/// Drains the forwarding queue: one NATS request per batch of the commands waiting, at most
/// `FORWARD_IN_FLIGHT_MAX` batches in flight. Ends when the node's store is dropped.
async fn forward_forever(
    nats: async_nats::Client,
    subject: String,
    mut queue: mpsc::Receiver<Forwarded>,
    stats: Arc<ForwardStats>,
) {
    let permits = Arc::new(tokio::sync::Semaphore::new(FORWARD_IN_FLIGHT_MAX));
    while let Some(first) = queue.recv().await {
        // Waiting here (briefly) for a batch in flight is what lets the next one gather.
        let permit = tokio::time::timeout(FORWARD_GATHER_MAX, permits.clone().acquire_owned()).await.ok();
        let mut batch = vec![first];
        while batch.len() < FORWARD_BATCH_MAX {
            match queue.try_recv() {
                Ok(next) => batch.push(next),
                Err(_) => break,
            }
        }
        stats.forwarded.fetch_add(batch.len() as u64, Ordering::Relaxed);
        // 0 until the server's INFO has been read.
        let limit = match nats.server_info().max_payload {
            0 => FORWARD_BYTES_MAX,
            server => FORWARD_BYTES_MAX.min(server),
        };
        let mut requests = pack(batch, limit).into_iter();
        // The first request holds the slot; any others (a batch over the byte budget) go beside it.
        if let Some(first) = requests.next() {
            tokio::spawn(send_and_answer(nats.clone(), subject.clone(), first, permit));
        }
        for request in requests {
            tokio::spawn(send_and_answer(nats.clone(), subject.clone(), request, None));
        }
    }
}

/// One forwarding request: the JSON array of its commands' encodings, and where each answer goes.
struct Request {
    body: Vec<u8>,
    replies: Vec<oneshot::Sender<Attempt>>,
}

/// Encodes each command once and packs them, in order, into requests of at most `limit` bytes. A command
/// that cannot be encoded, or is over `limit` alone, is answered at once.
fn pack(batch: Vec<Forwarded>, limit: usize) -> Vec<Request> {
    let mut requests: Vec<Request> = Vec::new();
    for (command, reply) in batch {
        let encoded = match serde_json::to_vec(&command) {
            Ok(encoded) if encoded.len() + 2 <= limit => encoded,
            Ok(encoded) => {
                let detail =
                    format!("a command of {} bytes is over the {limit} one forwarded message carries", encoded.len());
                let _ = reply.send(Attempt::Final(Box::new(Err(StoreError::Unavailable(detail)))));
                continue;
            }
            Err(error) => {
                let _ = reply
                    .send(Attempt::Final(Box::new(Err(StoreError::Corrupt(format!("encoding a command: {error}"))))));
                continue;
            }
        };
        match requests.last_mut() {
            Some(last) if last.body.len() + 1 + encoded.len() < limit => {
                last.body.push(b',');
                last.body.extend_from_slice(&encoded);
                last.replies.push(reply);
            }
            _ => {
                let mut body = Vec::with_capacity(encoded.len() + 2);
                body.push(b'[');
                body.extend_from_slice(&encoded);
                requests.push(Request { body, replies: vec![reply] });
            }
        }
    }
    for request in &mut requests {
        request.body.push(b']');
    }
    requests
}

async fn send_and_answer(
    nats: async_nats::Client,
    subject: String,
    request: Request,
    _permit: Option<Result<tokio::sync::OwnedSemaphorePermit, tokio::sync::AcquireError>>,
) {
    let attempts = send_batch(&nats, subject, request.body, request.replies.len()).await;
    for (reply, attempt) in request.replies.into_iter().zip(attempts) {
        let _ = reply.send(attempt);
    }
}

/// One NATS request carrying `count` commands (`body`, a JSON array); one attempt's outcome per command,
/// in order.
async fn send_batch(nats: &async_nats::Client, subject: String, body: Vec<u8>, count: usize) -> Vec<Attempt> {
    let all = |attempt: &dyn Fn() -> Attempt| (0..count).map(|_| attempt()).collect();
    let request = async_nats::Request::new().payload(body.into()).timeout(Some(FORWARD_TIMEOUT));
    match nats.send_request(subject, request).await {
        Ok(message) => match serde_json::from_slice::<Vec<Result<Applied, StoreError>>>(&message.payload) {
            Ok(answers) if answers.len() == count => answers
                .into_iter()
                .map(|answer| match answer {
                    // Refused before anything was written: the lease moved on.
                    Err(StoreError::Fenced(_)) => Attempt::NotRun,
                    answer => Attempt::Final(Box::new(answer)),
                })
                .collect(),
            Ok(answers) => {
                let detail = format!("{} answers from the sequencer for {count} commands", answers.len());
                all(&|| Attempt::Unknown(detail.clone()))
            }
            Err(error) => all(&|| Attempt::Unknown(format!("an unreadable answer from the sequencer: {error}"))),
        },
        Err(error) if error.kind() == RequestErrorKind::NoResponders => all(&|| Attempt::NotRun),
        Err(error) => all(&|| Attempt::Unknown(error.to_string())),
    }
}

/// A key in [`Sequenced::inflight`], removed when dropped (the command answered, or its task ended).
struct InFlightKey<'a> {
    node: &'a Sequenced,
    key: (String, String),
}

impl Drop for InFlightKey<'_> {
    fn drop(&mut self) {
        self.node.inflight.lock().expect("in-flight keys").remove(&self.key);
    }
}

/// What one attempt at a command came to.
enum Attempt {
    Final(Box<Result<Applied, StoreError>>),
    /// Provably not run (no sequencer, or a fenced one): safe to send again.
    NotRun,
    /// Sent, and no answer came back: it may have committed.
    Unknown(String),
}

#[async_trait]
impl Store for Sequenced {
    async fn submit(&self, command: Command) -> Result<Applied, StoreError> {
        let deadline = Instant::now() + LEADER_WAIT;
        loop {
            let attempt = if self.leading() {
                match self.apply(command.clone()).await {
                    Err(StoreError::Fenced(_)) => {
                        // A later epoch holds the ledger: stop trying here; the lease loop follows it.
                        self.lease.step_down();
                        Attempt::NotRun
                    }
                    answer => Attempt::Final(Box::new(answer)),
                }
            } else {
                self.forward(&command).await
            };
            match attempt {
                Attempt::Final(answer) => return *answer,
                // The idempotency record, committed with the effects, answers a resend once.
                Attempt::Unknown(detail) if command.idem.is_none() => {
                    return Err(StoreError::Unavailable(format!(
                        "the sequencer did not answer ({detail}); the command may have run"
                    )))
                }
                Attempt::Unknown(_) | Attempt::NotRun => {}
            }
            if Instant::now() >= deadline {
                return Err(StoreError::Unavailable(format!(
                    "no ledger sequencer answered within {} s",
                    LEADER_WAIT.as_secs()
                )));
            }
            self.stats.resent.fetch_add(1, Ordering::Relaxed);
            tokio::time::sleep(NO_SEQUENCER_BACKOFF).await;
        }
    }

    fn writer_stats(&self) -> bazaar_store::writer::WriterStats {
        bazaar_store::writer::WriterStats {
            sequencer: Some(self.leading()),
            forwarded: self.stats.forwarded.load(Ordering::Relaxed),
            ..self.inner.writer_stats()
        }
    }

    fn caches(&self) -> Vec<CacheGauge> {
        self.inner.caches()
    }

    fn sqlite_memory(&self) -> Vec<SqliteMemory> {
        self.inner.sqlite_memory()
    }
    async fn registry_key_seed(&self, candidate: [u8; 32]) -> Result<[u8; 32], StoreError> {
        self.inner.registry_key_seed(candidate).await
    }

    async fn registry_keys(&self) -> Result<Vec<String>, StoreError> {
        self.inner.registry_keys().await
    }

    async fn add_registry_key(&self, n: u32, record: String) -> Result<bool, StoreError> {
        self.inner.add_registry_key(n, record).await
    }

    async fn head(&self) -> Result<ChainHead, StoreError> {
        self.inner.head().await
    }

    async fn member(&self, id: &MemberId) -> Result<Option<Member>, StoreError> {
        self.inner.member(id).await
    }

    async fn member_by_handle(&self, handle: &str) -> Result<Option<Member>, StoreError> {
        self.inner.member_by_handle(handle).await
    }

    async fn agents_of(&self, owner: &MemberId, limit: usize) -> Result<Vec<Member>, StoreError> {
        self.inner.agents_of(owner, limit).await
    }

    async fn credential(&self, hash: &str) -> Result<Option<Credential>, StoreError> {
        self.inner.credential(hash).await
    }

    async fn authenticate(&self, hash: &str) -> Result<Option<(Credential, Member)>, StoreError> {
        self.inner.authenticate(hash).await
    }

    async fn credentials_of(&self, member: &MemberId) -> Result<Vec<Credential>, StoreError> {
        self.inner.credentials_of(member).await
    }

    async fn account(&self, id: &AccountId) -> Result<Option<Account>, StoreError> {
        self.inner.account(id).await
    }

    async fn budget(&self, agent: &MemberId) -> Result<Option<Budget>, StoreError> {
        self.inner.budget(agent).await
    }

    async fn token(&self, jti: &TokenId) -> Result<Option<TokenView>, StoreError> {
        self.inner.token(jti).await
    }

    async fn settlement_by_order(
        &self,
        merchant: &MemberId,
        order: &OrderId,
    ) -> Result<Option<Settlement>, StoreError> {
        self.inner.settlement_by_order(merchant, order).await
    }

    async fn expired_tokens(&self, now: Timestamp, limit: usize) -> Result<Vec<(TokenId, MemberId)>, StoreError> {
        self.inner.expired_tokens(now, limit).await
    }

    async fn events(&self, after: u64, limit: usize) -> Result<Vec<Event>, StoreError> {
        self.inner.events(after, limit).await
    }

    async fn transfers(&self, after: i64, limit: usize) -> Result<Vec<(i64, Transfer)>, StoreError> {
        self.inner.transfers(after, limit).await
    }

    async fn holds(&self, after: &str, limit: usize) -> Result<Vec<Hold>, StoreError> {
        self.inner.holds(after, limit).await
    }

    async fn accounts(&self, after: &str, limit: usize) -> Result<Vec<Account>, StoreError> {
        self.inner.accounts(after, limit).await
    }

    async fn prune_idempotency(&self, before: Timestamp, limit: usize) -> Result<usize, StoreError> {
        self.inner.prune_idempotency(before, limit).await
    }

    async fn doc(&self, kind: DocKind, id: &str) -> Result<Option<DocRow>, StoreError> {
        self.inner.doc(kind, id).await
    }

    async fn blob(&self, sha256: &str) -> Result<Option<Blob>, StoreError> {
        self.inner.blob(sha256).await
    }

    async fn docs_by_party(
        &self,
        kind: DocKind,
        party: &MemberId,
        after: &str,
        limit: usize,
    ) -> Result<Vec<DocRow>, StoreError> {
        self.inner.docs_by_party(kind, party, after, limit).await
    }

    async fn search_listings(&self, terms: &[String], limit: usize) -> Result<Vec<DocRow>, StoreError> {
        self.inner.search_listings(terms, limit).await
    }

    async fn record_searches(&self, searches: &[SearchCount]) -> Result<(), StoreError> {
        self.inner.record_searches(searches).await
    }

    async fn unmet_searches(&self, limit: usize) -> Result<Vec<(String, u64, Timestamp)>, StoreError> {
        self.inner.unmet_searches(limit).await
    }

    async fn fold_snapshot(&self, name: &str) -> Result<Option<FoldSnapshot>, StoreError> {
        self.inner.fold_snapshot(name).await
    }

    async fn save_fold_snapshot(&self, snapshot: &FoldSnapshot) -> Result<(), StoreError> {
        self.inner.save_fold_snapshot(snapshot).await
    }

    async fn due_docs(&self, now: Timestamp, limit: usize) -> Result<Vec<(DocKind, String)>, StoreError> {
        self.inner.due_docs(now, limit).await
    }
}

/// The lease loop's memory between rounds: whether this node serves forwarded commands now.
#[derive(Default)]
struct Leadership {
    serving: Option<tokio::task::JoinHandle<()>>,
    /// The epoch this node last led at.
    epoch: Option<i64>,
}

impl Leadership {
    /// One round: renew or take the lease, then serve forwarded commands exactly while leading.
    async fn round(&mut self, node: &Arc<Sequenced>) {
        let standing = if node.leading() {
            match tokio::time::timeout(RENEW_DEADLINE, node.lease.hold(SEQUENCER_LEASE)).await {
                Ok(standing) => standing,
                Err(_) => {
                    node.lease.step_down();
                    Err(StoreError::Unavailable("renewing the sequencer lease timed out".into()))
                }
            }
        } else {
            // A takeover may wait for the old sequencer's open batch to end.
            node.lease.hold(SEQUENCER_LEASE).await
        };
        if let Ok(Standing::Leading { epoch }) = standing {
            if self.epoch.replace(epoch) != Some(epoch) {
                node.stats.takeovers.fetch_add(1, Ordering::Relaxed);
            }
        }
        match standing {
            Ok(Standing::Leading { .. }) if self.serving.as_ref().is_some_and(|s| !s.is_finished()) => {}
            // A queue group: while an old sequencer has not yet dropped its subscription, each command still
            // reaches exactly one of the two, never both (an old one's `Fenced` could otherwise race the new
            // one's commit, and a command without a key would be sent again after it ran).
            Ok(Standing::Leading { epoch }) => {
                match node.nats.queue_subscribe(node.subject.clone(), QUEUE_GROUP.into()).await {
                    Ok(subscriber) => {
                        tracing::info!(epoch, subject = %node.subject, "serving the cluster's ledger commands");
                        self.serving = Some(tokio::spawn(serve(Arc::downgrade(node), subscriber)));
                    }
                    Err(error) => {
                        // Leading without a subscription would strand every other node's commands.
                        tracing::warn!(%error, "subscribing for forwarded commands failed; stepping down");
                        node.lease.release().await;
                    }
                }
            }
            Ok(Standing::Following { .. }) | Err(_) => {
                if let Err(error) = &standing {
                    tracing::warn!(%error, "the sequencer lease round failed; not leading");
                }
                if let Some(serving) = self.serving.take() {
                    serving.abort(); // Drops the subscription: NATS stops routing here.
                }
            }
        }
    }
}

async fn lead_forever(node: Weak<Sequenced>, mut lead: Leadership) {
    loop {
        tokio::time::sleep(SEQUENCER_RENEW).await;
        let Some(node) = node.upgrade() else {
            if let Some(serving) = lead.serving.take() {
                serving.abort();
            }
            return;
        };
        lead.round(&node).await;
    }
}

/// Takes forwarded commands to this node's writer, each in its own task so they
/// queue together and one group commit folds them.
async fn serve(node: Weak<Sequenced>, mut subscriber: async_nats::Subscriber) {
    while let Some(message) = subscriber.next().await {
        let (Some(node), Some(reply)) = (node.upgrade(), message.reply) else { continue };
        tokio::spawn(async move {
            let answers = match serde_json::from_slice::<Vec<Command>>(&message.payload) {
                // All at once: they queue together and one group commit folds them.
                Ok(commands) => {
                    node.stats.served.fetch_add(commands.len() as u64, Ordering::Relaxed);
                    futures::future::join_all(commands.into_iter().map(|c| node.apply(c))).await
                }
                Err(error) => vec![Err(StoreError::Corrupt(format!(
                    "forwarded commands this node cannot read (nodes of different builds?): {error}"
                )))],
            };
            let body = serde_json::to_vec(&answers).expect("answers serialize");
            if let Err(error) = node.nats.publish(reply, body.into()).await {
                // The forwarding node times out and resends under the same keys.
                tracing::warn!(%error, "an answer to forwarded commands was not sent");
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bazaar_core::command::Op;
    use bazaar_core::identity;
    use bazaar_core::model::{Member, MemberKind};
    use bazaar_types::{MemberId, Timestamp};

    fn command(code_hash: &str) -> Command {
        let (id, handle) = (MemberId("did:owner".into()), "owner".to_string());
        let actor = Member { id, kind: MemberKind::Owner, owner: None, handle, created_at: Timestamp(0) };
        let op = Op::Identity(identity::Op::IssueInvite { code_hash: code_hash.into(), expires_at: Timestamp(1) });
        Command { actor, idem: None, op }
    }

    fn forwarded(code_hash: &str) -> (Forwarded, oneshot::Receiver<Attempt>) {
        let (reply, answer) = oneshot::channel();
        ((command(code_hash), reply), answer)
    }

    #[test]
    fn commands_are_packed_in_order_under_the_byte_budget_and_an_oversized_one_is_answered() {
        let one = serde_json::to_vec(&command("a")).unwrap().len();
        // Room for two commands per request, not three.
        let limit = 2 * one + 3 + one / 2;
        let (mut batch, mut answers) = (Vec::new(), Vec::new());
        for name in ["a", "b", "c", "d", "e"] {
            let (item, answer) = forwarded(name);
            batch.push(item);
            answers.push(answer);
        }
        let (big, mut big_answer) = forwarded(&"z".repeat(limit));
        batch.insert(2, big);
        let requests = pack(batch, limit);
        assert_eq!(requests.iter().map(|r| r.replies.len()).collect::<Vec<_>>(), vec![2, 2, 1]);
        let mut order = Vec::new();
        for request in &requests {
            assert!(request.body.len() <= limit, "{} > {limit}", request.body.len());
            let commands: Vec<Command> = serde_json::from_slice(&request.body).expect("a JSON array of commands");
            for command in commands {
                let Op::Identity(identity::Op::IssueInvite { code_hash, .. }) = command.op else { panic!() };
                order.push(code_hash);
            }
        }
        assert_eq!(order, ["a", "b", "c", "d", "e"], "in order, none lost");
        match big_answer.try_recv().map(|attempt| match attempt {
            Attempt::Final(answer) => Some(*answer),
            _ => None,
        }) {
            Ok(Some(Err(StoreError::Unavailable(detail)))) => assert!(detail.contains("over the")),
            _ => panic!("the oversized command is answered at once"),
        }
        assert!(answers.iter_mut().all(|a| a.try_recv().is_err()), "the others wait for the sequencer");
    }

    #[test]
    fn a_receipt_image_travels_as_base64url() {
        let op = bazaar_core::market::Op::ProveShipment {
            share: bazaar_core::market::order::ShareId { order: bazaar_types::MarketOrderId("ord_x".into()), index: 0 },
            buyer: MemberId("did:b".into()),
            seller: MemberId("did:s".into()),
            receipt_sha256: "h".into(),
            tracking: "t".into(),
            receipt: Some(("image/png".into(), vec![0, 255, 7, 8, 9])),
        };
        let text = serde_json::to_string(&op).unwrap();
        assert!(text.contains("\"AP8HCAk\""), "{text}");
        let back: bazaar_core::market::Op = serde_json::from_str(&text).unwrap();
        assert_eq!(serde_json::to_string(&back).unwrap(), text);
    }
}

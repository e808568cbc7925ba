//! The state every handler shares ([`AppState`]), and [`boot`], which opens a
//! registry on a store: its signing keys, the in-flight idempotency claims, the
//! verified-token cache and the search tally live here. It names no capability.

use crate::{keyring, metrics};
use bazaar_core::apply::Config;
use bazaar_core::command::{Command, Op};
use bazaar_core::crypto::{did_key, sha256_hex};
use bazaar_core::model::{Member, MemberKind, OPERATOR_ID};
use bazaar_core::refusal::Code;
use bazaar_core::token::{TokenClaims, TokenError};
use bazaar_core::{dispute, federation, identity};
use bazaar_store::{Store, StoreError};
use bazaar_types::{Clock, Entropy, MemberId, Timestamp};
use ed25519_dalek::SigningKey;
use std::collections::HashSet;
use std::sync::{Arc, Mutex};

/// Shared by every request handler.
pub struct AppState {
    pub store: Arc<dyn Store>,
    pub clock: Arc<dyn Clock>,
    pub config: Config,
    /// The signing key in use and every key this registry ever signed with.
    keys: std::sync::RwLock<keyring::KeyRing>,
    genesis_seed: [u8; 32],
    /// The registry's identity: the DID of its first key, kept across rotations.
    pub registry: MemberId,
    /// This node's base URL as peers reach it (published in the card), if known.
    pub public_url: std::sync::RwLock<Option<String>>,
    /// The WebAuthn relying party, built from `public_url` when passkeys are first used.
    pub relying_parties: crate::relying_party::RelyingParties,
    /// The reputation fold, caught up from the event ledger on each read and snapshotted in the store.
    pub reputation: crate::reputation_fold::Fold,
    /// HTTP client for peer registries (bounded by `FEDERATION_HTTP_TIMEOUT_MS`).
    pub http: reqwest::Client,
    pub metrics: metrics::Metrics,
    /// Idempotency keys whose first request is still running on this node.
    inflight: Mutex<HashSet<(String, String)>>,
    /// Token strings whose signature already verified, so verify-then-settle
    /// checks each signature once. Bounded; oldest evicted first.
    verified: Mutex<VerifiedTokens>,
    /// One permit per request being worked on (`HTTP_REQUESTS_IN_FLIGHT_MAX`).
    pub(crate) requests: tokio::sync::Semaphore,
    /// Request rates per credential and per remote address (`limit_rates`; the standard ones unless set).
    edge: std::sync::OnceLock<crate::edge::Edge>,
    /// Reverse proxies whose `X-Forwarded-For` names the client (`trust_proxies`; none unless set).
    trusted_proxies: std::sync::OnceLock<Vec<std::net::IpAddr>>,
    /// Searches counted since the last flush: kept off the money writer.
    pub searches: crate::search_tally::SearchTally,
    /// Where credentials, codes, token ids and key seeds come from.
    pub entropy: Arc<dyn Entropy>,
    /// The conversation plane, once its store is attached (`attach_conversation`).
    conversation: std::sync::OnceLock<Arc<crate::plane::Plane>>,
    /// The labor market's relay, once attached (`attach_relay`).
    relay: std::sync::OnceLock<Arc<bazaar_relay::Relay>>,
    /// The live event stream's tailer, started by the first stream opened.
    stream: std::sync::OnceLock<Arc<crate::live::Hub>>,
    /// Whether anonymous visitors may watch the stream (`--public-stream`).
    public_stream: std::sync::atomic::AtomicBool,
    /// The attack catalogue the chamber's "try to break it" runs, when the binary provides one.
    attacks: std::sync::OnceLock<Arc<dyn crate::live::AttackRunner>>,
    pub(crate) attack_limiter: crate::live::Limiter,
    /// How many attack presses may start a minute (`limit_attacks`; the standard ones until set).
    attack_limits: std::sync::OnceLock<crate::live::AttackLimits>,
    runs: std::sync::OnceLock<Arc<dyn crate::live::StoryRunner>>,
    /// One chamber run (story or agent) at a time per node.
    pub(crate) run_lock: tokio::sync::Mutex<()>,
    /// The other nodes sharing this registry's stores, when it runs as one of several (`attach_cluster`).
    cluster: std::sync::OnceLock<Arc<dyn crate::cluster::Cluster>>,
    /// The node stopping, as its live sockets (WebSockets) learn of it.
    pub closing: crate::closing::Closing,
}

impl AppState {
    /// The caches kept here, for `/metrics`: each a length read under its lock
    /// (the reputation fold's skipped while it catches up; the stream's and the
    /// edge's zero until first used).
    pub(crate) fn caches(&self) -> Vec<bazaar_store::CacheGauge> {
        use crate::live::{STREAM_BROADCAST_MAX, STREAM_CONNECTIONS_MAX};
        use bazaar_types::limits::{HTTP_REQUESTS_IN_FLIGHT_MAX, SEARCH_TALLY_QUERIES_MAX};
        let gauge = |cache, entries: u64, max: Option<usize>| bazaar_store::CacheGauge {
            cache,
            entries,
            entries_max: max.map(|m| m as u64),
        };
        let verified = self.verified.lock().expect("verified mutex").claims.len() as u64;
        let inflight = self.inflight.lock().expect("inflight mutex").len() as u64;
        let (streams, broadcast) = self.stream.get().map_or((0, 0), |hub| {
            (STREAM_CONNECTIONS_MAX.saturating_sub(hub.connections.available_permits()), hub.events.len())
        });
        let mut caches = vec![
            gauge("verified_tokens", verified, Some(VERIFIED_TOKENS_MAX)),
            gauge("idempotency_in_flight", inflight, Some(HTTP_REQUESTS_IN_FLIGHT_MAX)),
            gauge("search_tally", self.searches.len() as u64, Some(SEARCH_TALLY_QUERIES_MAX)),
            gauge("chamber_streams", streams as u64, Some(STREAM_CONNECTIONS_MAX)),
            gauge("chamber_broadcast", broadcast as u64, Some(STREAM_BROADCAST_MAX)),
        ];
        if let Some(fold) = self.reputation.stats() {
            caches.push(gauge("reputation_fold", fold.entries, None));
        }
        // Pruned of idle callers every `RATE_PRUNE_EVERY` checks: no fixed bound.
        let (credentials, addresses) = self.edge.get().map_or((0, 0), |edge| edge.tracked());
        caches.push(gauge("rate_buckets_credential", credentials as u64, None));
        caches.push(gauge("rate_buckets_ip", addresses as u64, None));
        caches
    }
}

/// Token strings already verified against the registry key, and their claims.
#[derive(Default)]
struct VerifiedTokens {
    claims: std::collections::HashMap<String, TokenClaims>,
    order: std::collections::VecDeque<String>,
}

/// Verified token strings remembered per node.
pub const VERIFIED_TOKENS_MAX: usize = 4096;

/// What `boot` returns: the state, and the operator credential if this start created the registry.
pub struct Booted {
    pub state: Arc<AppState>,
    pub operator_credential: Option<String>,
    /// The dispute desk's credential, if this start created the desk.
    pub desk_credential: Option<String>,
}

/// Opens the registry on `store`: keeps (or creates) its key and bootstraps it on first start.
/// `operator_credential` is used only on first start; if absent, one is drawn and returned.
pub async fn boot(
    store: Arc<dyn Store>,
    clock: Arc<dyn Clock>,
    config: Config,
    operator_credential: Option<String>,
) -> Result<Booted, StoreError> {
    boot_with_entropy(store, clock, config, operator_credential, Arc::new(crate::entropy::OsEntropy)).await
}

/// [`boot`] with the randomness injected (a seeded source in tests).
pub async fn boot_with_entropy(
    store: Arc<dyn Store>,
    clock: Arc<dyn Clock>,
    config: Config,
    operator_credential: Option<String>,
    entropy: Arc<dyn Entropy>,
) -> Result<Booted, StoreError> {
    let mut candidate = [0u8; 32];
    entropy.fill(&mut candidate);
    let seed = store.registry_key_seed(candidate).await?;
    let registry = MemberId(did_key(&SigningKey::from_bytes(&seed).verifying_key()));
    let ring = keyring::KeyRing::load(&seed, &store.registry_keys().await?)?;
    let http = reqwest::Client::builder()
        .timeout(std::time::Duration::from_millis(bazaar_types::limits::FEDERATION_HTTP_TIMEOUT_MS))
        .build()
        .map_err(|e| StoreError::Unavailable(format!("http client: {e}")))?;
    let state = Arc::new(AppState {
        store,
        clock,
        config,
        keys: std::sync::RwLock::new(ring),
        genesis_seed: seed,
        registry: registry.clone(),
        public_url: Default::default(),
        relying_parties: Default::default(),
        reputation: Default::default(),
        http,
        metrics: Default::default(),
        inflight: Default::default(),
        verified: Default::default(),
        requests: tokio::sync::Semaphore::new(bazaar_types::limits::HTTP_REQUESTS_IN_FLIGHT_MAX),
        edge: Default::default(),
        trusted_proxies: Default::default(),
        searches: Default::default(),
        entropy,
        conversation: Default::default(),
        relay: Default::default(),
        stream: Default::default(),
        public_stream: Default::default(),
        attacks: Default::default(),
        runs: Default::default(),
        run_lock: Default::default(),
        cluster: Default::default(),
        attack_limiter: Default::default(),
        attack_limits: Default::default(),
        closing: Default::default(),
    });
    let credential = operator_credential.unwrap_or_else(|| state.new_secret_credential());
    let op = Op::Identity(identity::Op::Bootstrap {
        registry: registry.clone(),
        operator: MemberId(OPERATOR_ID.into()),
        operator_credential_hash: sha256_hex(credential.as_bytes()),
    });
    let applied = state.store.submit(Command { actor: state.registry_actor(), idem: None, op }).await?;
    let operator_credential = match applied.outcome {
        Ok(_) => Some(credential),
        Err(refusal) if refusal.code == Code::MemberExists => None,
        Err(refusal) => return Err(StoreError::Corrupt(format!("bootstrap refused: {refusal:?}"))),
    };
    // The dispute desk (the default arbiter); registries older than it get it on their next start.
    let desk_credential = state.new_secret_credential();
    let operator = state.store.member(&MemberId(OPERATOR_ID.into())).await?.expect("bootstrapped above");
    let op = Op::Dispute(dispute::Op::CreateDesk { credential_hash: sha256_hex(desk_credential.as_bytes()) });
    let applied = state.store.submit(Command { actor: operator, idem: None, op }).await?;
    let desk_credential = match applied.outcome {
        Ok(_) => Some(desk_credential),
        Err(refusal) if refusal.code == Code::MemberExists => None,
        Err(refusal) => return Err(StoreError::Corrupt(format!("dispute desk refused: {refusal:?}"))),
    };
    Ok(Booted { state, operator_credential, desk_credential })
}

impl AppState {
    /// A fresh bearer credential from this registry's entropy.
    pub fn new_secret_credential(&self) -> String {
        crate::entropy::new_secret_credential(self.entropy.as_ref())
    }

    /// A credential for someone else to hand over (an invite's, an owner's
    /// reissue): it must be rotated before any other act.
    pub fn new_enrollment_credential(&self) -> String {
        crate::entropy::new_enrollment_credential(self.entropy.as_ref())
    }

    /// `bytes` random bytes from this registry's entropy, base64url.
    pub fn random_b64(&self, bytes: usize) -> String {
        crate::entropy::random_b64(self.entropy.as_ref(), bytes)
    }

    /// Gives the registry its conversation plane: its own store, apart from
    /// the ledger's. Once only; a second store is refused (`false`).
    pub fn attach_conversation(&self, store: crate::plane::SharedStore) -> bool {
        let plane = Arc::new(crate::plane::Plane::new(store, self.clock.clone()));
        if let Some(cluster) = self.cluster.get() {
            plane.publish_to(cluster.clone());
        }
        self.conversation.set(plane).is_ok()
    }

    /// The conversation plane, or 503 `conversation_unavailable` on a registry
    /// started without one.
    pub fn plane(&self) -> Result<&Arc<crate::plane::Plane>, crate::problem::Problem> {
        self.conversation.get().ok_or_else(|| {
            crate::problem::Problem::new(
                axum::http::StatusCode::SERVICE_UNAVAILABLE,
                "conversation_unavailable",
                "This registry runs without a conversation plane.",
            )
        })
    }

    /// Gives the registry its relay: its own store and writer, apart from the
    /// ledger's. Once only; a second relay is refused (`false`).
    pub fn attach_relay(&self, relay: Arc<bazaar_relay::Relay>) -> bool {
        self.relay.set(relay).is_ok()
    }

    /// The relay, or 503 `relay_unavailable` on a registry started without one.
    pub fn relay(&self) -> Result<&Arc<bazaar_relay::Relay>, crate::problem::Problem> {
        self.relay.get().ok_or_else(|| {
            crate::problem::Problem::new(
                axum::http::StatusCode::SERVICE_UNAVAILABLE,
                "relay_unavailable",
                "This registry runs without the labor market's relay.",
            )
        })
    }

    /// The WebAuthn relying party for this registry's public URL.
    pub fn relying_party(&self) -> Result<Arc<crate::relying_party::RelyingParty>, crate::problem::Problem> {
        self.relying_parties.get(self.public_url.read().expect("url lock").clone())
    }

    /// The live stream's hub, its tailer started on first use.
    pub fn stream_hub(&self) -> Arc<crate::live::Hub> {
        self.stream.get_or_init(|| crate::live::Hub::start(&self.store)).clone()
    }

    /// Opens (or closes) the live stream to anonymous visitors: the operator's `--public-stream`.
    pub fn set_public_stream(&self, open: bool) {
        self.public_stream.store(open, std::sync::atomic::Ordering::Relaxed);
    }

    /// Sets the edge's request rates (`bazaar serve --rate-per-credential/--rate-per-ip`);
    /// false if requests were already served under the standard ones.
    pub fn limit_rates(&self, limits: crate::edge::RateLimits) -> bool {
        self.edge.set(crate::edge::Edge::new(limits)).is_ok()
    }

    /// Names the reverse proxies whose `X-Forwarded-For` this registry believes (`bazaar serve
    /// --trusted-proxy`); false if already set.
    pub fn trust_proxies(&self, proxies: Vec<std::net::IpAddr>) -> bool {
        self.trusted_proxies.set(proxies).is_ok()
    }

    /// The trusted proxies (none by default).
    pub fn trusted_proxies(&self) -> &[std::net::IpAddr] {
        self.trusted_proxies.get().map_or(&[], Vec::as_slice)
    }

    /// The edge's rate buckets.
    pub fn edge(&self) -> &crate::edge::Edge {
        self.edge.get_or_init(|| crate::edge::Edge::new(crate::edge::RateLimits::standard()))
    }

    /// Gives the chamber an attack catalogue to run (the `bazaar` binary's); once.
    pub fn attach_attacks(&self, runner: Arc<dyn crate::live::AttackRunner>) -> bool {
        self.attacks.set(runner).is_ok()
    }

    pub fn attacks(&self) -> Option<&Arc<dyn crate::live::AttackRunner>> {
        self.attacks.get()
    }

    /// Sets how many attack presses may start a minute (a test's many presses); false if presses
    /// were already admitted under the standard limits.
    pub fn limit_attacks(&self, limits: crate::live::AttackLimits) -> bool {
        self.attack_limits.set(limits).is_ok()
    }

    /// The attack presses' limits now.
    pub(crate) fn attack_limits(&self) -> crate::live::AttackLimits {
        *self.attack_limits.get_or_init(crate::live::AttackLimits::standard)
    }

    /// Gives the chamber its story and agent runs (the `bazaar` binary's); once.
    pub fn attach_runs(&self, runner: Arc<dyn crate::live::StoryRunner>) -> bool {
        self.runs.set(runner).is_ok()
    }

    pub fn runs(&self) -> Option<&Arc<dyn crate::live::StoryRunner>> {
        self.runs.get()
    }

    pub fn public_stream(&self) -> bool {
        self.public_stream.load(std::sync::atomic::Ordering::Relaxed)
    }

    pub fn now(&self) -> Timestamp {
        self.clock.now()
    }

    /// Checks a token's shape and signature (see `bazaar_core::token::decode`),
    /// remembering strings that verified: the same bytes under the same key
    /// verify the same way every time.
    pub fn decode_token(&self, token: &str) -> Result<TokenClaims, TokenError> {
        if let Some(claims) = self.verified.lock().expect("verified mutex").claims.get(token) {
            return Ok(claims.clone());
        }
        let claims = keyring::decode_token_among(token, &self.keys.read().expect("keys lock").public)?;
        self.remember_token(token, &claims);
        Ok(claims)
    }

    /// Remembers `token` as verified with `claims`: called with every token this node signs, so the
    /// verify and settle that follow on this node cost a lookup, not an Ed25519 verification. Keyed by
    /// the whole string, signature included; offline verifiers still check the signature.
    pub fn remember_token(&self, token: &str, claims: &TokenClaims) {
        let mut verified = self.verified.lock().expect("verified mutex");
        if verified.claims.insert(token.to_string(), claims.clone()).is_none() {
            verified.order.push_back(token.to_string());
        }
        while verified.order.len() > VERIFIED_TOKENS_MAX {
            if let Some(oldest) = verified.order.pop_front() {
                verified.claims.remove(&oldest);
            }
        }
    }

    /// The key this registry signs with now.
    pub fn signing_key(&self) -> SigningKey {
        self.keys.read().expect("keys lock").current.clone()
    }

    /// Every key this registry ever signed with, oldest first (published).
    pub fn key_history(&self) -> Vec<bazaar_core::federation::KeyEntry> {
        self.keys.read().expect("keys lock").history.clone()
    }

    /// Picks up keys another node rotated to.
    pub async fn refresh_keys(&self) -> Result<(), StoreError> {
        let records = self.store.registry_keys().await?;
        if records.len() + 1 != self.keys.read().expect("keys lock").history.len() {
            let ring = keyring::KeyRing::load(&self.genesis_seed, &records)?;
            *self.keys.write().expect("keys lock") = ring;
        }
        Ok(())
    }

    /// Rotates to a fresh signing key: stored first, then recorded on the
    /// event ledger, then used. Old keys stay in the published history.
    pub async fn rotate_key(self: &Arc<Self>) -> Result<bazaar_core::federation::KeyEntry, StoreError> {
        self.refresh_keys().await?;
        let (record, entry, n) = {
            let ring = self.keys.read().expect("keys lock");
            ring.next(&self.registry, self.now(), self.entropy.as_ref())
        };
        if n as usize >= bazaar_types::limits::REGISTRY_KEYS_MAX {
            return Err(StoreError::Constraint("key history full".into()));
        }
        if !self.store.add_registry_key(n, record).await? {
            return Err(StoreError::Constraint("another node rotated the key at the same time; retry".into()));
        }
        self.refresh_keys().await?;
        let op = Op::Federation(federation::Op::RecordKey { entry: entry.clone() });
        self.store.submit(Command { actor: self.registry_actor(), idem: None, op }).await?;
        Ok(entry)
    }

    pub fn registry_actor(&self) -> Member {
        Member {
            id: self.registry.clone(),
            kind: MemberKind::Registry,
            owner: None,
            handle: "registry".into(),
            created_at: Timestamp(0),
        }
    }

    /// Marks a key in flight on this node; `None` if it already is (the caller answers 409). Across the nodes of a
    /// cluster the ledger's sequencer answers a key in flight anywhere (`StoreError::InFlight`).
    pub(crate) fn claim(self: &Arc<Self>, scope: &str, key: &str) -> Option<InflightGuard> {
        let entry = (scope.to_string(), key.to_string());
        if !self.inflight.lock().expect("inflight mutex").insert(entry.clone()) {
            return None;
        }
        Some(InflightGuard { state: self.clone(), entry })
    }

    /// Joins this node to a cluster: its plane publishes what it commits, and
    /// leases go through `cluster`. Once per process.
    pub fn attach_cluster(&self, cluster: Arc<dyn crate::cluster::Cluster>) -> bool {
        if let Some(plane) = self.conversation.get() {
            plane.publish_to(cluster.clone());
        }
        self.cluster.set(cluster).is_ok()
    }

    /// The cluster this node is one of, if any.
    pub fn cluster(&self) -> Option<&Arc<dyn crate::cluster::Cluster>> {
        self.cluster.get()
    }
}

pub(crate) struct InflightGuard {
    state: Arc<AppState>,
    entry: (String, String),
}

impl Drop for InflightGuard {
    fn drop(&mut self) {
        self.state.inflight.lock().expect("inflight mutex").remove(&self.entry);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bazaar_types::{Amount, ManualClock, OrderId, TokenId};

    fn claims(n: usize) -> TokenClaims {
        TokenClaims {
            v: 1,
            iss: "did:key:zReg".into(),
            jti: TokenId(format!("tok_{n}")),
            sub: "did:key:zB".into(),
            aud: "did:key:zM".into(),
            max: Amount(1),
            ord: OrderId(format!("o{n}")),
            res: "r".into(),
            iat_ms: Timestamp(0),
            exp_ms: Timestamp(1),
            via: None,
        }
    }

    #[tokio::test]
    async fn verified_tokens_are_remembered_within_a_bound_and_forgeries_never() {
        let dir = std::env::temp_dir().join(format!("bazaar-verified-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let clock = Arc::new(ManualClock::new(Timestamp(0)));
        let config = Config::standard();
        let store =
            Arc::new(bazaar_store_sqlite::SqliteStore::open(dir.join("v.db"), config.clone(), clock.clone()).unwrap());
        let state = boot(store, clock, config, Some("op".into())).await.unwrap().state;
        let forger = SigningKey::from_bytes(&[9u8; 32]);
        let forged = bazaar_core::token::encode(&claims(0), &forger);
        for _ in 0..2 {
            assert_eq!(state.decode_token(&forged), Err(TokenError::BadSignature));
        }
        for n in 0..VERIFIED_TOKENS_MAX + 10 {
            let token = bazaar_core::token::encode(&claims(n), &state.signing_key());
            assert_eq!(state.decode_token(&token), Ok(claims(n)));
            assert_eq!(state.decode_token(&token), Ok(claims(n)), "a remembered token decodes the same");
        }
        let verified = state.verified.lock().unwrap();
        assert_eq!(verified.claims.len(), VERIFIED_TOKENS_MAX);
        assert_eq!(verified.order.len(), VERIFIED_TOKENS_MAX);
        assert!(!verified.claims.contains_key(&forged));
        drop(verified);
        std::fs::remove_dir_all(&dir).ok();
    }
}

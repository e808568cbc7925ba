//! A small typed client over the registry's HTTP API. Every money-moving call
//! takes an idempotency key; retries must reuse it.

use base64::Engine;
use bazaar_wire as wire;
use ed25519_dalek::{Signer, SigningKey};
use serde_json::{json, Value};
use std::time::Duration;

/// Idle keep-alive connections the client keeps per host.
pub const IDLE_CONNECTIONS_MAX: usize = 64;
/// Requests give up after this long.
pub const REQUEST_TIMEOUT_S: u64 = 30;
/// Attempts `pay` makes on transport errors and 5xx/409-in-flight answers.
pub const PAY_ATTEMPTS_MAX: u32 = 5;
/// First retry delay; it doubles each attempt.
pub const RETRY_BASE_MS: u64 = 50;
/// A replayed token this close to expiry (or past it) is renewed before use.
pub const TOKEN_RENEW_MARGIN_MS: i64 = 5_000;
/// A replayed token that can no longer pay is renewed under this key followed by its jti (`renew:<jti>`).
pub const RENEW_KEY_PREFIX: &str = "renew:";
/// Merchant refusals that leave the buyer's token useless for this call: `pay` voids it at once, so its hold is
/// released instead of waiting out the token's life (`clients/conformance/contract.json`, `buyer`).
pub const VOID_ON_CODES: [&str; 4] =
    [crate::answer::MERCHANT_UNAUTHENTICATED, "amount_exceeds_token", "not_audience", "order_mismatch"];

/// Paths whose requests the registry keys by their own content (the order),
/// so sending one again is always safe.
pub const NATURALLY_KEYED: [&str; 4] = ["/v1/tokens", "/v1/settlements", "/v1/tokens/batch", "/v1/settlements/batch"];

pub use crate::answer::{Answer, Body, SdkError};

/// A registry's nodes as one client sees them: every URL, and the one in use.
/// Clones of a client share it, so a failover is seen by all of them.
struct Nodes {
    urls: Vec<String>,
    current: std::sync::atomic::AtomicUsize,
}

#[derive(Clone)]
pub struct Client {
    nodes: std::sync::Arc<Nodes>,
    http: reqwest::Client,
    credential: Option<String>,
    /// When coalescing: the batches tokens and settlements ride in (one set per credential).
    lanes: Option<std::sync::Arc<Lanes>>,
}

/// A coalesced batch goes out as any other call of this client (its node, its credential, its failover).
impl crate::coalesce::Sender for Client {
    async fn send_batch(&self, path: &'static str, items: Vec<Value>) -> Result<Answer, SdkError> {
        self.raw(reqwest::Method::POST, path, Some(json!({ "items": items })), None).await
    }
}

/// See [`Client::coalescing`].
struct Lanes {
    tokens: std::sync::Arc<crate::coalesce::Lane>,
    settlements: std::sync::Arc<crate::coalesce::Lane>,
}

impl Lanes {
    fn new() -> std::sync::Arc<Lanes> {
        std::sync::Arc::new(Lanes {
            tokens: crate::coalesce::Lane::new("/v1/tokens/batch"),
            settlements: crate::coalesce::Lane::new("/v1/settlements/batch"),
        })
    }
}

impl Client {
    pub fn new(base: impl Into<String>, credential: Option<String>) -> Client {
        Client::with_nodes(vec![base.into()], credential)
    }

    /// A client of a registry served by several nodes (`bazaar serve` on one
    /// PostgreSQL and one NATS): it uses one at a time and moves to the next
    /// when a node cannot be reached. A request is sent again to the next
    /// node only when it is safe: it never reached the node (connection
    /// refused), or it is a read, or it carries an idempotency key. Panics on an empty list.
    pub fn with_nodes(urls: Vec<String>, credential: Option<String>) -> Client {
        assert!(!urls.is_empty(), "a client needs at least one registry URL");
        let http = reqwest::Client::builder()
            .timeout(Duration::from_secs(REQUEST_TIMEOUT_S))
            .pool_max_idle_per_host(IDLE_CONNECTIONS_MAX)
            .build()
            .expect("reqwest client builds");
        let urls = urls.into_iter().map(|url| url.trim_end_matches('/').to_string()).collect();
        let nodes = std::sync::Arc::new(Nodes { urls, current: Default::default() });
        Client { nodes, http, credential, lanes: None }
    }

    /// This client, with concurrent `issue_token` and `settle` calls coalesced
    /// into `POST /v1/tokens/batch` and `/v1/settlements/batch` (see
    /// [`crate::coalesce`]): same answers, fewer requests under load.
    pub fn coalescing(&self) -> Client {
        Client { lanes: Some(Lanes::new()), ..self.clone() }
    }

    pub fn credential(&self) -> Option<&str> {
        self.credential.as_deref()
    }

    /// The node in use now.
    pub fn base(&self) -> &str {
        let at = self.nodes.current.load(std::sync::atomic::Ordering::Relaxed);
        &self.nodes.urls[at % self.nodes.urls.len()]
    }

    /// Every node this client knows.
    pub fn nodes(&self) -> &[String] {
        &self.nodes.urls
    }

    /// Moves to the node after `from` (unless another request already moved on).
    fn fail_over(&self, from: usize) {
        let next = (from + 1) % self.nodes.urls.len();
        let _ = self.nodes.current.compare_exchange(
            from,
            next,
            std::sync::atomic::Ordering::Relaxed,
            std::sync::atomic::Ordering::Relaxed,
        );
    }

    pub fn with_credential(&self, credential: impl Into<String>) -> Client {
        // A batch carries one credential: another credential gets lanes of its own.
        let lanes = self.lanes.as_ref().map(|_| Lanes::new());
        Client { credential: Some(credential.into()), lanes, ..self.clone() }
    }

    pub fn http(&self) -> &reqwest::Client {
        &self.http
    }

    /// Sends one request and reads its answer as `T`: a `bazaar_wire` type, or `serde_json::Value` for a
    /// route this SDK has no method for (the escape hatch); `body` is sent as JSON ([`Body::json`]).
    /// problem+json answers become [`SdkError::Problem`]; a success that does not read as `T` is
    /// [`SdkError::Answer`].
    pub async fn call<T: serde::de::DeserializeOwned>(
        &self,
        method: reqwest::Method,
        path: &str,
        body: Option<Body>,
        idempotency_key: Option<&str>,
    ) -> Result<Answer<T>, SdkError> {
        self.raw(method, path, body.map(|body| body.0), idempotency_key).await?.typed()
    }

    /// Sends a request built on [`Client::http`] (for bodies and headers `call`
    /// does not make) and reads its answer as `T`; problem+json answers become [`SdkError::Problem`].
    pub async fn send<T: serde::de::DeserializeOwned>(
        &self,
        request: reqwest::RequestBuilder,
    ) -> Result<Answer<T>, SdkError> {
        self.send_raw(request).await?.typed()
    }

    /// [`Client::call`] with the answer as JSON: what the typed methods read from.
    pub(crate) async fn raw(
        &self,
        method: reqwest::Method,
        path: &str,
        body: Option<Value>,
        idempotency_key: Option<&str>,
    ) -> Result<Answer, SdkError> {
        // Safe to send again elsewhere whatever happened to the first: reads, keyed requests and the
        // calls the registry keys by their order itself.
        let resendable = method == reqwest::Method::GET || idempotency_key.is_some() || NATURALLY_KEYED.contains(&path);
        let mut tries = self.nodes.urls.len();
        loop {
            let at = self.nodes.current.load(std::sync::atomic::Ordering::Relaxed) % self.nodes.urls.len();
            let mut request = self.http.request(method.clone(), format!("{}{path}", self.nodes.urls[at]));
            if let Some(credential) = &self.credential {
                request = request.bearer_auth(credential);
            }
            if let Some(key) = idempotency_key {
                request = request.header("idempotency-key", key);
            }
            if let Some(body) = &body {
                request = request.json(body);
            }
            match self.send_raw(request).await {
                Err(SdkError::Transport(error)) if tries > 1 && (error.is_connect() || resendable) => {
                    tries -= 1;
                    self.fail_over(at);
                }
                answer => return answer,
            }
        }
    }

    async fn send_raw(&self, request: reqwest::RequestBuilder) -> Result<Answer, SdkError> {
        let response = request.send().await?;
        let status = response.status().as_u16();
        let replayed = response.headers().get("idempotent-replayed").is_some();
        let body: Value = response.json().await.unwrap_or(Value::Null);
        if status >= 400 {
            return Err(SdkError::problem(status, body));
        }
        Ok(Answer { body, replayed })
    }

    /// A GET whose answer is the wire type `T`.
    async fn get_as<T: serde::de::DeserializeOwned>(&self, path: &str) -> Result<T, SdkError> {
        crate::answer::typed(self.get(path).await?)
    }

    /// A POST whose answer is the wire type `T`.
    async fn post_as<T: serde::de::DeserializeOwned>(
        &self,
        path: &str,
        body: Value,
        key: Option<&str>,
    ) -> Result<T, SdkError> {
        crate::answer::typed(self.post(path, body, key).await?)
    }

    async fn get(&self, path: &str) -> Result<Value, SdkError> {
        Ok(self.raw(reqwest::Method::GET, path, None, None).await?.body)
    }

    async fn post(&self, path: &str, body: Value, key: Option<&str>) -> Result<Value, SdkError> {
        Ok(self.raw(reqwest::Method::POST, path, Some(body), key).await?.body)
    }

    /// The registry's card (read it; verify its signature over the JSON as served, from [`Client::call`]).
    pub async fn well_known(&self) -> Result<wire::registry::RegistryCard, SdkError> {
        self.get_as("/.well-known/bazaar").await
    }

    pub async fn me(&self) -> Result<wire::identity::Me, SdkError> {
        self.get_as("/v1/me").await
    }

    pub async fn member(&self, who: &str) -> Result<wire::identity::Member, SdkError> {
        self.get_as(&format!("/v1/members/{who}")).await
    }

    /// Operator: register an owner by its public key. The answer holds its credential (shown once).
    pub async fn create_owner(&self, key: &SigningKey, handle: &str) -> Result<wire::identity::Enrolled, SdkError> {
        let public = hex::encode(key.verifying_key().as_bytes());
        self.post_as("/v1/owners", json!({"public_key": public, "handle": handle}), None).await
    }

    pub async fn issue_invite(&self) -> Result<String, SdkError> {
        let body = self.raw(reqwest::Method::POST, "/v1/invites", None, None).await?.body;
        Ok(body["invite_code"].as_str().unwrap_or_default().to_string())
    }

    /// Agent's first act: redeem an invite with its own key, then rotate the
    /// credential the invite gave (it does nothing else until rotated).
    /// Returns the answer with the rotated credential, which only this agent has seen.
    pub async fn redeem_invite(
        &self,
        invite_code: &str,
        key: &SigningKey,
        handle: &str,
    ) -> Result<wire::identity::Enrolled, SdkError> {
        let message = format!("bazaar-invite-v1\n{invite_code}\n{handle}");
        let proof = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(key.sign(message.as_bytes()).to_bytes());
        let body = json!({"invite_code": invite_code, "public_key": hex::encode(key.verifying_key().as_bytes()), "handle": handle, "proof": proof});
        let mut joined: wire::identity::Enrolled = self.post_as("/v1/agents", body, None).await?;
        joined.credential = self.with_credential(joined.credential.clone()).rotate_credential().await?;
        Ok(joined)
    }

    /// Owner: gives `agent` one more credential limited to `scopes` (leave out
    /// `pay` for one that cannot move money), already rotated: the credential to hand it.
    pub async fn issue_scoped_credential(&self, agent: &str, scopes: &[&str]) -> Result<String, SdkError> {
        let body = json!({ "scopes": scopes });
        let issued = self.post(&format!("/v1/agents/{agent}/credentials"), body, None).await?;
        let issued = issued["credential"].as_str().unwrap_or_default().to_string();
        self.with_credential(issued).rotate_credential().await
    }

    /// Revokes this client's credential; it stops working at once.
    pub async fn revoke_credential(&self) -> Result<wire::identity::Revoked, SdkError> {
        crate::answer::typed(self.raw(reqwest::Method::POST, "/v1/credentials/revoke", None, None).await?.body)
    }

    pub async fn rotate_credential(&self) -> Result<String, SdkError> {
        let body = self.raw(reqwest::Method::POST, "/v1/credentials/rotate", None, None).await?.body;
        Ok(body["credential"].as_str().unwrap_or_default().to_string())
    }

    pub async fn set_budget(
        &self,
        agent: &str,
        per_call: u64,
        per_day: u64,
        total: u64,
    ) -> Result<wire::pay::Budget, SdkError> {
        let body = json!({"per_call_max_minor": per_call, "per_day_max_minor": per_day, "total_max_minor": total});
        let path = format!("/v1/agents/{agent}/budget");
        crate::answer::typed(self.raw(reqwest::Method::PUT, &path, Some(body), None).await?.body)
    }

    pub async fn mint(&self, owner: &str, amount: u64, key: &str) -> Result<wire::pay::Minted, SdkError> {
        self.post_as("/v1/mint", json!({"owner": owner, "amount_minor": amount}), Some(key)).await
    }

    pub async fn fund(&self, agent: &str, amount: u64, key: &str) -> Result<wire::pay::Funded, SdkError> {
        self.post_as(&format!("/v1/agents/{agent}/fund"), json!({"amount_minor": amount}), Some(key)).await
    }

    /// Buyer: a token for one order. Asking again for the same (merchant, order) returns the same token.
    pub async fn issue_token(
        &self,
        merchant: &str,
        max_amount: u64,
        order_id: &str,
        resource: &str,
    ) -> Result<Answer<wire::pay::TokenIssued>, SdkError> {
        let body =
            json!({"merchant": merchant, "max_amount_minor": max_amount, "order_id": order_id, "resource": resource});
        match &self.lanes {
            Some(lanes) => lanes.tokens.submit(self, body).await?.typed(),
            None => self.raw(reqwest::Method::POST, "/v1/tokens", Some(body), None).await?.typed(),
        }
    }

    /// A receipt check, never a work order: a settled token still says `genuine: true`.
    pub async fn verify(&self, token: &str) -> Result<wire::pay::TokenCheck, SdkError> {
        self.post_as("/v1/tokens/verify", json!({"token": token}), None).await
    }

    /// Merchant: settle exactly once. With `key = None` the registry derives the key from the order.
    pub async fn settle(
        &self,
        token: &str,
        amount: u64,
        order_id: &str,
        key: Option<&str>,
    ) -> Result<Answer<wire::pay::SettlementReceipt>, SdkError> {
        let mut body = json!({"token": token, "amount_minor": amount, "order_id": order_id});
        match &self.lanes {
            Some(lanes) => {
                if let Some(key) = key {
                    body["idempotency_key"] = json!(key);
                }
                lanes.settlements.submit(self, body).await?.typed()
            }
            None => self.raw(reqwest::Method::POST, "/v1/settlements", Some(body), key).await?.typed(),
        }
    }

    pub async fn void(&self, jti: &str) -> Result<wire::pay::Voided, SdkError> {
        self.post_as(&format!("/v1/tokens/{jti}/void"), json!(null), None).await
    }

    pub async fn events(&self, after: u64, limit: usize) -> Result<wire::pay::EventPage, SdkError> {
        self.get_as(&format!("/v1/events?after={after}&limit={limit}")).await
    }

    /// Buyer: get (or re-get) the order's token and call a paid URL with it,
    /// retrying transport errors and 5xx with the same token. The merchant's
    /// work receipt makes every retry safe. A replayed token that is voided (a
    /// refusal voided it), expired or about to expire is renewed under
    /// `renew:<jti>`; a settled one is used as it is.
    pub async fn pay(
        &self,
        url: &str,
        merchant: &str,
        max_amount: u64,
        order_id: &str,
    ) -> Result<PaidResponse, SdkError> {
        self.pay_via(url, merchant, None, max_amount, order_id).await
    }

    /// [`Client::pay`] a merchant on a peer registry (`registry` is its DID,
    /// `merchant` the merchant's DID): this registry holds the funds, the
    /// merchant settles through its own registry, which relays here.
    pub async fn pay_via(
        &self,
        url: &str,
        merchant: &str,
        registry: Option<&str>,
        max_amount: u64,
        order_id: &str,
    ) -> Result<PaidResponse, SdkError> {
        let mut request =
            json!({"merchant": merchant, "max_amount_minor": max_amount, "order_id": order_id, "resource": url});
        if let Some(registry) = registry {
            request["registry"] = json!(registry);
        }
        let mut issued =
            self.retrying(|| self.raw(reqwest::Method::POST, "/v1/tokens", Some(request.clone()), None)).await?;
        // The order's derived key replays the first token, even once it has expired or was voided (a merchant's
        // refusal voids it). Then ask again under a key naming the dead token, and check that answer the same way
        // if it is a replay too: one key per dead token, so every retry of the order finds the same chain.
        while issued.replayed && !self.usable(&issued.body).await {
            let jti = issued.body["jti"].as_str().unwrap_or_default().to_string();
            let key = format!("{RENEW_KEY_PREFIX}{jti}");
            let body = request.clone();
            issued =
                self.retrying(|| self.raw(reqwest::Method::POST, "/v1/tokens", Some(body.clone()), Some(&key))).await?;
            if issued.body["jti"].as_str() == Some(jti.as_str()) {
                break;
            }
        }
        let token = issued.body["token"].as_str().unwrap_or_default().to_string();
        let mut attempt = 0;
        loop {
            attempt += 1;
            let result = self.http.post(url).header(crate::PAYMENT_HEADER, &token).send().await;
            let answered = match result {
                Ok(response) => {
                    let status = response.status().as_u16();
                    let replayed = response.headers().get(crate::WORK_RECEIPT_HEADER).is_some();
                    let settlement = response
                        .headers()
                        .get(crate::SETTLEMENT_HEADER)
                        .and_then(|v| v.to_str().ok())
                        .map(str::to_string);
                    let body = response.text().await;
                    body.map(|body| PaidResponse {
                        status,
                        body,
                        settlement,
                        replayed,
                        attempts: attempt,
                        token: token.clone(),
                    })
                }
                Err(error) => Err(error),
            };
            let refusal = answered.as_ref().ok().and_then(PaidResponse::refusal);
            // A merchant whose own credential is refused answers the same to every retry.
            let final_answer =
                refusal.as_ref().and_then(SdkError::code) == Some(crate::answer::MERCHANT_UNAUTHENTICATED);
            let retryable = match &answered {
                Ok(paid) => !final_answer && (paid.status >= 500 || paid.status == 409),
                Err(_) => true,
            };
            if !retryable || attempt >= PAY_ATTEMPTS_MAX {
                if refusal.as_ref().and_then(SdkError::code).is_some_and(|code| VOID_ON_CODES.contains(&code)) {
                    self.void_quietly(issued.body["jti"].as_str().unwrap_or_default()).await;
                }
                return Ok(answered?);
            }
            tokio::time::sleep(Duration::from_millis(RETRY_BASE_MS << (attempt - 1))).await;
        }
    }

    /// Whether a replayed token can still pay (`clients/conformance/contract.json`, `buyer.renew_rule`): its
    /// state by verify — a receipt check, asked only of replays — settled (used as it is: the merchant answers the
    /// order from its work receipt) or open and not expiring within [`TOKEN_RENEW_MARGIN_MS`]. Voided or expired
    /// is not; if verify cannot answer, the expiry alone decides.
    async fn usable(&self, issued: &Value) -> bool {
        let token = issued["token"].as_str().unwrap_or_default();
        let check = json!({ "token": token });
        let state =
            self.retrying(|| self.raw(reqwest::Method::POST, "/v1/tokens/verify", Some(check.clone()), None)).await;
        match state.as_ref().map(|a| a.body["state"].as_str().unwrap_or_default()) {
            Ok("settled") => true,
            Ok("voided" | "expired") => false,
            _ => issued["expires_at_ms"].as_i64().unwrap_or(0) > crate::clock::now_ms() + TOKEN_RENEW_MARGIN_MS,
        }
    }

    /// Voids a token a paid call can no longer use, so its hold is released now rather than when it expires. A
    /// failure here (the token settled or expired meanwhile, the registry unreachable) leaves it to expire.
    async fn void_quietly(&self, jti: &str) {
        if jti.is_empty() {
            return;
        }
        if let Err(error) = self.void(jti).await {
            tracing::debug!(%error, jti, "the token was not voided; it expires on its own");
        }
    }
}

/// Reputation, passports, the registry's keys and federation.
impl Client {
    /// Public: a DID's or handle's figures, stake, imports and combined score.
    pub async fn reputation(&self, who: &str) -> Result<wire::federation::Reputation, SdkError> {
        self.get_as(&format!("/v1/reputation/{who}")).await
    }

    /// A signed TrustPassport for the caller, or for `subject` (an agent the caller owns).
    pub async fn passport(&self, subject: Option<&str>) -> Result<wire::federation::Passport, SdkError> {
        let body = match subject {
            Some(subject) => json!({"subject": subject}),
            None => json!({}),
        };
        self.post_as("/v1/passports", body, None).await
    }

    /// Public: asks the registry to check a passport (its own or a recognised peer's).
    pub async fn verify_passport(
        &self,
        passport: &wire::federation::Passport,
    ) -> Result<wire::federation::PassportValid, SdkError> {
        self.post_as("/v1/passports/verify", json!({"passport": passport}), None).await
    }

    /// Presents a peer registry's passport here, signed by its subject's key.
    /// `audience` is this registry's DID (from [`Client::well_known`]).
    pub async fn import_passport(
        &self,
        passport: &wire::federation::Passport,
        subject_key: &SigningKey,
        audience: &str,
    ) -> Result<wire::federation::PassportImported, SdkError> {
        self.import_passport_at(passport, subject_key, audience, crate::clock::now_ms()).await
    }

    /// [`Client::import_passport`] with the presentation time given (milliseconds,
    /// within the registry's allowed clock skew of its own clock).
    pub async fn import_passport_at(
        &self,
        passport: &wire::federation::Passport,
        subject_key: &SigningKey,
        audience: &str,
        at: i64,
    ) -> Result<wire::federation::PassportImported, SdkError> {
        let message = format!("bazaar-passport-presentation-v1\n{audience}\n{}\n{at}", passport.id);
        let signature =
            base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(subject_key.sign(message.as_bytes()).to_bytes());
        let body = json!({"passport": passport, "presented_at_ms": at, "signature": signature});
        self.post_as("/v1/reputation/import", body, None).await
    }

    /// An agent of `home` (a registry this one recognises) joins here as a guest,
    /// signing with its own key; returns a client holding its new credential.
    pub async fn join_as_guest(&self, key: &SigningKey, home: &str, audience: &str) -> Result<Client, SdkError> {
        self.join_as_guest_at(key, home, audience, crate::clock::now_ms()).await
    }

    /// [`Client::join_as_guest`] with the signing time given.
    pub async fn join_as_guest_at(
        &self,
        key: &SigningKey,
        home: &str,
        audience: &str,
        at: i64,
    ) -> Result<Client, SdkError> {
        let did = crate::did_of(key);
        let message = format!("bazaar-guest-v1\n{audience}\n{did}\n{home}\n{at}");
        let signature =
            base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(key.sign(message.as_bytes()).to_bytes());
        let body = json!({"did": did, "home": home, "presented_at_ms": at, "signature": signature});
        let joined = self.post("/v1/federation/guests", body, None).await?;
        Ok(self.with_credential(joined["credential"].as_str().unwrap_or_default()))
    }

    pub async fn key_history(&self) -> Result<wire::federation::KeyHistory, SdkError> {
        self.get_as("/.well-known/bazaar-keys").await
    }

    /// Operator: rotate the registry's signing key.
    pub async fn rotate_key(&self) -> Result<wire::federation::KeyRotated, SdkError> {
        self.post_as("/v1/registry/keys/rotate", json!(null), None).await
    }

    /// Operator: recognise a peer registry by URL and DID, with a weight and corridor terms.
    pub async fn add_peer(
        &self,
        url: &str,
        did: &str,
        weight_bps: u32,
        terms: (u32, u64, u64),
    ) -> Result<wire::federation::PeerAdded, SdkError> {
        let (fee_bps, per_call_max_minor, outstanding_max_minor) = terms;
        let body = json!({"url": url, "did": did, "weight_bps": weight_bps, "fee_bps": fee_bps,
            "per_call_max_minor": per_call_max_minor, "outstanding_max_minor": outstanding_max_minor});
        self.post_as("/v1/federation/peers", body, None).await
    }

    pub async fn peers(&self) -> Result<wire::federation::PeerList, SdkError> {
        self.get_as("/v1/federation/peers").await
    }

    /// Operator: relays this registry stopped retrying (`relay_stuck`), with their state now.
    pub async fn relay_recovery(&self) -> Result<wire::federation::RecoveryPage, SdkError> {
        self.get_as("/v1/federation/recovery").await
    }

    /// Operator: net `amount` of the corridor with `peer` (`paid_by` "us" or "peer"), under the statement id
    /// `id` (the same call again resends it); answers `{netting, answered}`.
    pub async fn net_corridor(
        &self,
        peer: &str,
        paid_by: &str,
        amount: u64,
        id: &str,
        reference: &str,
    ) -> Result<wire::federation::NettingSent, SdkError> {
        let body = json!({"peer": peer, "paid_by": paid_by, "amount_minor": amount, "id": id, "reference": reference});
        self.post_as("/v1/federation/netting", body, None).await
    }

    /// Operator: the netting statements this registry holds.
    pub async fn netting(&self) -> Result<wire::federation::NettingPage, SdkError> {
        self.get_as("/v1/federation/netting").await
    }

    /// Operator: retry a stuck relay now; answers the relay after that attempt.
    pub async fn retry_relay(&self, jti: &str) -> Result<wire::federation::RelayRetried, SdkError> {
        crate::answer::typed(
            self.raw(reqwest::Method::POST, &format!("/v1/federation/relays/{jti}/retry"), None, None).await?.body,
        )
    }

    pub async fn recognition(&self) -> Result<wire::federation::RecognitionList, SdkError> {
        self.get_as("/.well-known/bazaar-recognition").await
    }
}

/// The storefront: listings, search, unmet demand.
impl Client {
    /// Seller's agent: list (or relist, same `sku`) a product.
    pub async fn put_listing(&self, listing: &wire::market::ListingRequest) -> Result<wire::market::Listing, SdkError> {
        let body = serde_json::to_value(listing).expect("a listing serializes");
        crate::answer::typed(self.raw(reqwest::Method::PUT, "/v1/listings", Some(body), None).await?.body)
    }

    pub async fn listing(&self, id: &str) -> Result<wire::market::Listing, SdkError> {
        self.get_as(&format!("/v1/listings/{id}")).await
    }

    /// Full-text search; the query is counted for demand.
    pub async fn search(&self, query: &str) -> Result<wire::market::SearchResults, SdkError> {
        let mut url = reqwest::Url::parse("http://x/v1/search").expect("static URL");
        url.query_pairs_mut().append_pair("q", query);
        self.get_as(&format!("/v1/search?{}", url.query().unwrap_or_default())).await
    }

    /// A maker: proves shipment of her share with the courier receipt's image
    /// (`content_type` JPEG, PNG or WebP) and a tracking number; she is paid on it.
    pub async fn prove_shipment(
        &self,
        order: &str,
        share: u32,
        tracking: &str,
        content_type: &str,
        image: Vec<u8>,
    ) -> Result<wire::market::SharePaid, SdkError> {
        let request = self
            .http
            .post(format!("{}/v1/orders/{order}/shares/{share}/proof", self.base()))
            .query(&[("tracking", tracking)])
            .bearer_auth(self.credential.as_deref().unwrap_or_default())
            .header("content-type", content_type)
            .body(image);
        crate::answer::typed(self.send_raw(request).await?.body)
    }

    /// Searches that found nothing, most frequent first.
    pub async fn unmet_searches(&self) -> Result<wire::market::UnmetSearches, SdkError> {
        self.get_as("/v1/searches/unmet").await
    }
}

/// Escrowed contracts, disputes and stake. Calls that move money take a key;
/// where the registry derives one (release, file, rule, …) `None` is safe to retry.
impl Client {
    /// Buyer: opens and funds a contract. `milestones` are (amount, description, due_at_ms).
    pub async fn create_contract(
        &self,
        seller: &str,
        arbiter: Option<&str>,
        milestones: &[(u64, &str, i64)],
        terms: &str,
        review_window_s: Option<u64>,
        key: &str,
    ) -> Result<Answer<wire::escrow::Contract>, SdkError> {
        let milestones: Vec<Value> = milestones
            .iter()
            .map(|(amount, description, due)| json!({"amount_minor": amount, "description": description, "due_at_ms": due}))
            .collect();
        let terms_sha256 = hex_sha256(terms.as_bytes());
        let body = json!({"seller": seller, "arbiter": arbiter, "milestones": milestones,
            "terms_sha256": terms_sha256, "review_window_s": review_window_s});
        self.raw(reqwest::Method::POST, "/v1/contracts", Some(body), Some(key)).await?.typed()
    }

    pub async fn contract(&self, id: &str) -> Result<wire::escrow::Contract, SdkError> {
        self.get_as(&format!("/v1/contracts/{id}")).await
    }

    /// `act` is accept, decline or cancel.
    pub async fn contract_act(&self, id: &str, act: &str) -> Result<Answer<wire::escrow::Contract>, SdkError> {
        self.raw(reqwest::Method::POST, &format!("/v1/contracts/{id}/{act}"), None, None).await?.typed()
    }

    pub async fn deliver(
        &self,
        id: &str,
        milestone: u32,
        evidence: &[u8],
    ) -> Result<Answer<wire::escrow::MilestoneDelivered>, SdkError> {
        let body = json!({"evidence_sha256": hex_sha256(evidence)});
        self.raw(reqwest::Method::POST, &format!("/v1/contracts/{id}/milestones/{milestone}/deliver"), Some(body), None)
            .await?
            .typed()
    }

    /// Buyer: releases a delivered milestone. `key = None` uses the registry's
    /// derived key, so a retry replays the first receipt.
    pub async fn release(
        &self,
        id: &str,
        milestone: u32,
        key: Option<&str>,
    ) -> Result<Answer<wire::escrow::MilestoneReleased>, SdkError> {
        self.raw(reqwest::Method::POST, &format!("/v1/contracts/{id}/milestones/{milestone}/release"), None, key)
            .await?
            .typed()
    }

    /// Buyer: takes back an undelivered milestone's hold once its due date plus
    /// the registry's grace has passed (before that: `reclaim_too_early`, with
    /// `reclaimable_at_ms` in the facts). `key = None` uses the registry's
    /// default key (`reclaim:{id}:{milestone}`).
    pub async fn reclaim(
        &self,
        id: &str,
        milestone: u32,
        key: Option<&str>,
    ) -> Result<Answer<wire::escrow::MilestoneReclaimed>, SdkError> {
        self.raw(reqwest::Method::POST, &format!("/v1/contracts/{id}/milestones/{milestone}/reclaim"), None, key)
            .await?
            .typed()
    }

    /// Buyer: disputes a paid call ([`wire::dispute::DisputeSubject::Call`]) or a
    /// milestone ([`wire::dispute::DisputeSubject::Milestone`]).
    pub async fn file_dispute(
        &self,
        subject: wire::dispute::DisputeSubject,
        reason: &str,
        claimed: u64,
        note: &str,
    ) -> Result<Answer<wire::dispute::Dispute>, SdkError> {
        let body = json!({"subject": subject, "reason": reason, "claimed_minor": claimed, "note": note});
        self.raw(reqwest::Method::POST, "/v1/disputes", Some(body), None).await?.typed()
    }

    pub async fn dispute(&self, id: &str) -> Result<wire::dispute::Dispute, SdkError> {
        self.get_as(&format!("/v1/disputes/{id}")).await
    }

    /// Disputes naming `party` (DID or handle), or the caller.
    pub async fn disputes(&self, party: Option<&str>) -> Result<wire::dispute::DisputePage, SdkError> {
        match party {
            Some(party) => self.get_as(&format!("/v1/disputes?party={party}")).await,
            None => self.get_as("/v1/disputes").await,
        }
    }

    /// Adds evidence: hashes `content`, signs `bazaar-evidence-v1.<dispute>.<sha256>` with `key`.
    pub async fn add_evidence(
        &self,
        dispute: &str,
        key: &SigningKey,
        content: &[u8],
        url: Option<&str>,
    ) -> Result<Answer<wire::dispute::EvidenceAdded>, SdkError> {
        let sha256 = hex_sha256(content);
        let message = format!("bazaar-evidence-v1.{dispute}.{sha256}");
        let signature =
            base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(key.sign(message.as_bytes()).to_bytes());
        let body = json!({"sha256": sha256, "url": url, "signature": signature});
        self.raw(reqwest::Method::POST, &format!("/v1/disputes/{dispute}/evidence"), Some(body), None).await?.typed()
    }

    /// Arbiter: `decision` is refund_full, refund_partial or reject.
    pub async fn rule(
        &self,
        dispute: &str,
        decision: &str,
        refund: u64,
        slash: u64,
        reasons: &str,
    ) -> Result<Answer<wire::dispute::RulingAnswer>, SdkError> {
        let body = json!({"decision": decision, "refund_minor": refund, "slash_minor": slash, "reasons": reasons});
        self.raw(reqwest::Method::POST, &format!("/v1/disputes/{dispute}/ruling"), Some(body), None).await?.typed()
    }

    pub async fn appeal(&self, dispute: &str) -> Result<Answer<wire::dispute::Dispute>, SdkError> {
        self.raw(reqwest::Method::POST, &format!("/v1/disputes/{dispute}/appeal"), None, None).await?.typed()
    }

    pub async fn execute_dispute(
        &self,
        dispute: &str,
        key: Option<&str>,
    ) -> Result<Answer<wire::dispute::DisputeOutcome>, SdkError> {
        self.raw(reqwest::Method::POST, &format!("/v1/disputes/{dispute}/execute"), None, key).await?.typed()
    }

    pub async fn stake_lock(&self, amount: u64, key: &str) -> Result<Answer<wire::dispute::StakeLocked>, SdkError> {
        self.raw(reqwest::Method::POST, "/v1/stake", Some(json!({"amount_minor": amount})), Some(key)).await?.typed()
    }

    pub async fn stake_unlock(
        &self,
        amount: u64,
        key: &str,
    ) -> Result<Answer<wire::dispute::StakeUnlocking>, SdkError> {
        self.raw(reqwest::Method::POST, "/v1/stake/unlock", Some(json!({"amount_minor": amount})), Some(key))
            .await?
            .typed()
    }

    pub async fn stake_withdraw(&self, key: &str) -> Result<Answer<wire::dispute::StakeWithdrawn>, SdkError> {
        self.raw(reqwest::Method::POST, "/v1/stake/withdraw", None, Some(key)).await?.typed()
    }

    pub async fn stake(&self, member: &str) -> Result<wire::dispute::Stake, SdkError> {
        self.get_as(&format!("/v1/stake/{member}")).await
    }

    /// Buys at `price`: a bare paid call when the price is within the registry's
    /// escrow threshold, else an escrowed contract with one milestone (due
    /// `ESCROW_DUE_S` after the end of today, UTC) whose key is derived from the
    /// order, so a retry the same day finds the same contract. The threshold is
    /// read from `/.well-known/bazaar`.
    pub async fn purchase(&self, url: &str, merchant: &str, price: u64, order_id: &str) -> Result<Purchase, SdkError> {
        let card = self.well_known().await?;
        let threshold = card.escrow_threshold_minor;
        if price <= threshold {
            return Ok(Purchase::Paid(self.pay(url, merchant, price, order_id).await?));
        }
        // Rounded to the UTC day so a retry sends the same body (and so replays);
        // a retry on a later day is refused `idempotency_conflict` instead.
        let day_ms = 86_400_000;
        let due = (crate::clock::now_ms() / day_ms + 1) * day_ms + ESCROW_DUE_S as i64 * 1000;
        let description = format!("order {order_id}: {url}");
        let terms = format!("bazaar-order-v1\n{merchant}\n{order_id}\n{url}\n{price}");
        let key = format!("order:{merchant}:{order_id}");
        let milestones = [(price, description.as_str(), due)];
        let answer = self.retrying(|| self.create_contract(merchant, None, &milestones, &terms, None, &key)).await?;
        Ok(Purchase::Escrowed(answer.body))
    }

    /// Retries `call` while the answer is retryable: transport errors, 5xx, or
    /// `idempotency_in_flight` — always with the same request (and so the same key).
    pub async fn retrying<F, Fut, T>(&self, call: F) -> Result<Answer<T>, SdkError>
    where
        F: Fn() -> Fut,
        Fut: std::future::Future<Output = Result<Answer<T>, SdkError>>,
    {
        let mut attempt = 0;
        loop {
            attempt += 1;
            let result = call().await;
            let retryable = match &result {
                Err(SdkError::Transport(_) | SdkError::Batch(_)) => true,
                Err(SdkError::Problem { status, code, .. }) => *status >= 500 || code == "idempotency_in_flight",
                Err(SdkError::Answer { .. }) | Ok(_) => false,
            };
            if !retryable || attempt >= PAY_ATTEMPTS_MAX {
                return result;
            }
            tokio::time::sleep(Duration::from_millis(RETRY_BASE_MS << (attempt - 1))).await;
        }
    }
}

/// Bounties: a job's reward on the labor market. Every call has a key the
/// registry derives (from the job, the verdict), so each is safe to retry.
impl Client {
    /// Posting agent: funds the reward of `job` (the signed, unpublished job
    /// request whose `reward` tag names `amount` and this agent).
    pub async fn fund_bounty(
        &self,
        job: &wire::nostr::SignedEvent,
        amount: u64,
        claim_s: Option<u64>,
    ) -> Result<Answer<wire::bounty::Bounty>, SdkError> {
        let body = json!({"job": job, "amount_minor": amount, "claim_s": claim_s});
        self.raw(reqwest::Method::POST, "/v1/bounties", Some(body), None).await?.typed()
    }

    pub async fn bounty(&self, id: &str) -> Result<wire::bounty::Bounty, SdkError> {
        self.get_as(&format!("/v1/bounties/{id}")).await
    }

    /// Anyone: presents the validator's verdict with the worker's enrollment and review.
    pub async fn release_bounty(
        &self,
        id: &str,
        verdict: &wire::nostr::SignedEvent,
        enrollment: &wire::nostr::SignedEvent,
        review: &wire::nostr::SignedEvent,
    ) -> Result<Answer<wire::bounty::Reward>, SdkError> {
        let body = json!({"verdict": verdict, "enrollment": enrollment, "review": review});
        self.raw(reqwest::Method::POST, &format!("/v1/bounties/{id}/release"), Some(body), None).await?.typed()
    }

    /// Poster: takes an unclaimed reward back after its claim window.
    pub async fn withdraw_bounty(&self, id: &str) -> Result<Answer<wire::bounty::Bounty>, SdkError> {
        self.raw(reqwest::Method::POST, &format!("/v1/bounties/{id}/withdraw"), None, None).await?.typed()
    }

    /// An agent's ledger-confirmed earnings (DID or handle).
    pub async fn earnings(&self, agent: &str) -> Result<wire::bounty::Earnings, SdkError> {
        self.get_as(&format!("/v1/agents/{agent}/earnings")).await
    }
}

/// Service payments: an owner's exact authorization and the one payment it allows.
impl Client {
    /// Owner: authorizes `agent` to pay `specialist` exactly `amount` (0 = sponsored) to `pay_to` for `task`.
    pub async fn authorize_service(
        &self,
        agent: &str,
        task: &str,
        specialist: &str,
        pay_to: &str,
        amount: u64,
    ) -> Result<Answer<wire::hire::ServiceAuthorization>, SdkError> {
        let body =
            json!({"agent": agent, "task": task, "specialist": specialist, "pay_to": pay_to, "amount_minor": amount});
        self.raw(reqwest::Method::POST, "/v1/service-authorizations", Some(body), None).await?.typed()
    }

    pub async fn service_authorization(&self, id: &str) -> Result<wire::hire::ServiceAuthorization, SdkError> {
        self.get_as(&format!("/v1/service-authorizations/{id}")).await
    }

    /// Hiring agent: pays against authorization `id` with exactly these terms,
    /// under `key` (one key per attempt; the same key only to repeat that attempt).
    pub async fn pay_service(
        &self,
        id: &str,
        task: &str,
        specialist: &str,
        pay_to: &str,
        amount: u64,
        key: &str,
    ) -> Result<Answer<wire::hire::ServicePayment>, SdkError> {
        let body = json!({"task": task, "specialist": specialist, "pay_to": pay_to, "amount_minor": amount});
        self.raw(reqwest::Method::POST, &format!("/v1/service-authorizations/{id}/pay"), Some(body), Some(key))
            .await?
            .typed()
    }

    /// Owner: revokes an unpaid authorization.
    pub async fn revoke_service(&self, id: &str) -> Result<Answer<wire::hire::ServiceAuthorization>, SdkError> {
        self.raw(reqwest::Method::POST, &format!("/v1/service-authorizations/{id}/revoke"), None, None).await?.typed()
    }
}

/// Guest hires: terms locked at agreement, paid only on a verified response.
impl Client {
    /// Hirer agent: agrees a fixed-price hire from the specialist's signed offer.
    pub async fn agree_hire(
        &self,
        specialist: &str,
        task: &str,
        price: u64,
        pay_to: &str,
        offer_signature: &str,
        escrow: bool,
    ) -> Result<Answer<wire::hire::Hire>, SdkError> {
        let body = json!({"specialist": specialist, "task": task, "price_minor": price, "pay_to": pay_to,
            "offer_signature": offer_signature, "escrow": escrow});
        self.raw(reqwest::Method::POST, "/v1/hires", Some(body), None).await?.typed()
    }

    pub async fn hire(&self, id: &str) -> Result<wire::hire::Hire, SdkError> {
        self.get_as(&format!("/v1/hires/{id}")).await
    }

    /// Hirer agent: accepts the specialist's signed result (with its enrollment) and pays.
    pub async fn accept_hire(
        &self,
        id: &str,
        result: &wire::nostr::SignedEvent,
        enrollment: &wire::nostr::SignedEvent,
    ) -> Result<Answer<wire::hire::HirePayment>, SdkError> {
        let body = json!({"result": result, "enrollment": enrollment});
        self.raw(reqwest::Method::POST, &format!("/v1/hires/{id}/accept"), Some(body), None).await?.typed()
    }
}

/// Priority leases: prepaid queue priority for the payer's own task identity.
impl Client {
    /// Payer agent: buys priority at `worker` for the identity `enrollment` binds to this agent.
    pub async fn buy_lease(
        &self,
        worker: &str,
        pay_to: &str,
        price: u64,
        period_s: u64,
        enrollment: &wire::nostr::SignedEvent,
        key: &str,
    ) -> Result<Answer<wire::hire::Lease>, SdkError> {
        let body = json!({"worker": worker, "pay_to": pay_to, "price_minor": price, "period_s": period_s, "identity": enrollment});
        self.raw(reqwest::Method::POST, "/v1/leases", Some(body), Some(key)).await?.typed()
    }

    pub async fn lease(&self, id: &str) -> Result<wire::hire::Lease, SdkError> {
        self.get_as(&format!("/v1/leases/{id}")).await
    }

    /// The owner's view of one agent's spending (ledger units): authorizations, hires, leases, bounties, earnings.
    pub async fn spending(&self, agent: &str) -> Result<wire::owner::Spending, SdkError> {
        self.get_as(&format!("/v1/agents/{agent}/spending")).await
    }

    /// Worker (or its owner): publishes the lease's receipt.
    pub async fn receipt_lease(&self, id: &str) -> Result<Answer<wire::hire::Lease>, SdkError> {
        self.raw(reqwest::Method::POST, &format!("/v1/leases/{id}/receipt"), None, None).await?.typed()
    }
}

/// The bytes a specialist signs (with its agent key) to offer one task at one
/// price, paid to one account — what `agree_hire`'s `offer_signature` covers.
pub fn hire_offer_statement(specialist: &str, task: &str, pay_to: &str, price: u64) -> String {
    format!("bazaar-hire-offer-v1\n{specialist}\n{task}\n{pay_to}\n{price}")
}

/// A milestone opened by [`Client::purchase`] is due this long after it is opened.
pub const ESCROW_DUE_S: u64 = 7 * 24 * 60 * 60;

/// What [`Client::purchase`] did.
#[derive(Debug, Clone)]
pub enum Purchase {
    /// At or below the threshold: paid per call.
    Paid(PaidResponse),
    /// Above it: an escrowed contract, funded and offered to the merchant.
    Escrowed(wire::escrow::Contract),
}

fn hex_sha256(bytes: &[u8]) -> String {
    use sha2::Digest;
    hex::encode(sha2::Sha256::digest(bytes))
}

/// What a paid call returned.
#[derive(Debug, Clone)]
pub struct PaidResponse {
    pub status: u16,
    pub body: String,
    pub settlement: Option<String>,
    /// The merchant answered from its work receipt (the work had already run).
    pub replayed: bool,
    pub attempts: u32,
    pub token: String,
}

impl PaidResponse {
    /// The merchant's refusal, if it refused the call (an answer of 400 or more with no settlement: the work did
    /// not run), as the [`SdkError::Problem`] its problem+json names; `None` for an answer of the paid work.
    pub fn refusal(&self) -> Option<SdkError> {
        if self.status < 400 || self.settlement.is_some() {
            return None;
        }
        Some(SdkError::problem(self.status, serde_json::from_str(&self.body).unwrap_or(Value::Null)))
    }

    /// The answer, or the merchant's refusal as an error (as `reqwest`'s `error_for_status`). Where the amount was
    /// the problem, [`SdkError::price_minor`] is the route's price.
    pub fn error_for_refusal(self) -> Result<PaidResponse, SdkError> {
        match self.refusal() {
            Some(error) => Err(error),
            None => Ok(self),
        }
    }
}

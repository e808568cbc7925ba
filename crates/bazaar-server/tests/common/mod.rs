//! What the conversation tests share: a registry with its conversation plane
//! on embedded stores (or its ledger on PostgreSQL), served on 127.0.0.1, and
//! people calling it.

#![allow(dead_code)]

use bazaar_conversation::sqlite::SqliteConversationStore;
use bazaar_sdk::{generate_key, Client};
use bazaar_server::{boot, router, AppState};
use bazaar_store::conformance::EPOCH;
use bazaar_store::Store;
use bazaar_types::{Clock, ManualClock, SeededEntropy, Timestamp};
use serde_json::{json, Value};
use std::sync::Arc;

pub struct Registry {
    pub url: String,
    pub state: Arc<AppState>,
    pub clock: Arc<ManualClock>,
    pub operator: Client,
    pub http: reqwest::Client,
    _dir: TempDir,
}

struct TempDir(std::path::PathBuf);
impl Drop for TempDir {
    fn drop(&mut self) {
        std::fs::remove_dir_all(&self.0).ok();
    }
}

pub async fn registry() -> Registry {
    registry_at(EPOCH).await
}

/// A registry whose ledger is on PostgreSQL at `url` (a fresh schema), its conversation plane on SQLite.
pub async fn registry_on_postgres(url: &str) -> Registry {
    let clock = Arc::new(ManualClock::new(EPOCH));
    let config = bazaar_core::apply::Config::standard();
    let store = bazaar_store_postgres::PostgresStore::connect(url, config.clone(), clock.clone()).await.unwrap();
    serve_registry(Arc::new(store), clock, config).await
}

/// A registry whose clock starts at `start`.
pub async fn registry_at(start: Timestamp) -> Registry {
    let clock = Arc::new(ManualClock::new(start));
    let config = bazaar_core::apply::Config::standard();
    let dir = fresh_dir();
    let store: Arc<dyn Store> =
        Arc::new(bazaar_store_sqlite::SqliteStore::open(dir.join("r.db"), config.clone(), clock.clone()).unwrap());
    serve_registry(store, clock, config).await
}

/// A fresh directory for one registry's files.
fn fresh_dir() -> std::path::PathBuf {
    static COUNTER: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = COUNTER.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    let dir = std::env::temp_dir().join(format!("bazaar-conv-{}-{n}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Boots a registry on `store` with a conversation plane on SQLite, served on 127.0.0.1.
async fn serve_registry(
    store: Arc<dyn Store>,
    clock: Arc<ManualClock>,
    config: bazaar_core::apply::Config,
) -> Registry {
    static PLANES: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = PLANES.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    let dir = fresh_dir();
    let booted = boot(store, clock.clone(), config, Some("operator-secret".into())).await.unwrap();
    let plane_clock: Arc<dyn Clock> = clock.clone();
    let plane = SqliteConversationStore::open(&dir.join("c.db"), plane_clock, Arc::new(SeededEntropy::new(n))).unwrap();
    assert!(booted.state.attach_conversation(Arc::new(plane)));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let app = bazaar_server::contract::checked(router(booted.state.clone()));
    // With each connection's peer address, as `bazaar serve`'s accept loop gives it (the edge's per-address rate).
    let app = app.into_make_service_with_connect_info::<std::net::SocketAddr>();
    tokio::spawn(async move { axum::serve(listener, app).await });
    let operator = Client::new(&url, Some("operator-secret".into()));
    Registry { url, state: booted.state, clock, operator, http: reqwest::Client::new(), _dir: TempDir(dir) }
}

/// A person on the registry: its credential and DID.
pub struct Person {
    pub credential: String,
    pub id: String,
    /// Its identity key (its DID is this key's `did:key`).
    pub key: ed25519_dalek::SigningKey,
}

pub async fn person(r: &Registry, handle: &str) -> Person {
    let key = generate_key();
    let made = r.operator.create_owner(&key, handle).await.unwrap();
    Person { credential: made.credential.clone(), id: made.id.clone(), key }
}

pub async fn agent_of(r: &Registry, owner: &Person, handle: &str) -> Person {
    let owner_client = r.operator.with_credential(&owner.credential);
    let invite = owner_client.issue_invite().await.unwrap();
    let key = generate_key();
    let made = owner_client.with_credential("none").redeem_invite(&invite, &key, handle).await.unwrap();
    Person { credential: made.credential.clone(), id: made.id.clone(), key }
}

/// A buyer agent and a shop agent of one owner, the buyer funded with `amount` and allowed to spend all of it.
pub async fn buyer_and_shop(r: &Registry, amount: u64) -> (Person, Person) {
    let owner = person(r, "owner").await;
    let (buyer, shop) = (agent_of(r, &owner, "buyer").await, agent_of(r, &owner, "shop").await);
    r.operator.mint(&owner.id, amount, "mint").await.unwrap();
    let owner_client = r.operator.with_credential(&owner.credential);
    owner_client.fund("buyer", amount, "fund").await.unwrap();
    owner_client.set_budget("buyer", amount, amount, amount).await.unwrap();
    (buyer, shop)
}

impl Registry {
    /// The directory holding the registry's and the plane's database files.
    pub fn dir(&self) -> &std::path::Path {
        &self._dir.0
    }

    /// A call as `who`: the status and the JSON body.
    pub async fn call(&self, who: &Person, method: reqwest::Method, path: &str, body: Option<Value>) -> (u16, Value) {
        let mut request = self.http.request(method, format!("{}{path}", self.url)).bearer_auth(&who.credential);
        if let Some(body) = body {
            request = request.json(&body);
        }
        let response = request.send().await.unwrap();
        let status = response.status().as_u16();
        (status, response.json().await.unwrap_or(Value::Null))
    }

    pub async fn get(&self, who: &Person, path: &str) -> (u16, Value) {
        self.call(who, reqwest::Method::GET, path, None).await
    }

    pub async fn post(&self, who: &Person, path: &str, body: Value) -> (u16, Value) {
        self.call(who, reqwest::Method::POST, path, Some(body)).await
    }

    pub async fn say(&self, who: &Person, channel: &str, body: &str) -> Value {
        let (status, message) =
            self.post(who, &format!("/v1/channels/{channel}/messages"), json!({"body": body})).await;
        assert_eq!(status, 201, "{message}");
        message
    }

    pub async fn room(&self, owner: &Person, name: &str, private: bool) -> String {
        let (status, room) = self.post(owner, "/v1/rooms", json!({"name": name, "private": private})).await;
        assert_eq!(status, 201, "{room}");
        room["id"].as_str().unwrap().to_string()
    }

    /// Every position in `who`'s inbox, read by polling.
    pub async fn polled(&self, who: &Person) -> Vec<u64> {
        let (mut after, mut all) = (0, Vec::new());
        loop {
            let (status, page) = self.get(who, &format!("/v1/inbox?after={after}&limit=7")).await;
            assert_eq!(status, 200, "{page}");
            let next = page["next_after"].as_u64().unwrap();
            all.extend(page["messages"].as_array().unwrap().iter().map(|m| m["position"].as_u64().unwrap()));
            if next == after {
                return all;
            }
            after = next;
        }
    }
}

/// How deep [`schema_example`] follows a request schema.
const SCHEMA_DEPTH_MAX: usize = 6;

/// A value for `schema` (resolved against `doc`'s components), plausible enough to pass the
/// extractor; a plain string is `{merchant_id}`, for the caller to fill (the fuzz seeds, the
/// authorization matrix's bodies).
pub fn schema_example(doc: &Value, schema: &Value, depth: usize) -> Value {
    if depth > SCHEMA_DEPTH_MAX {
        return Value::Null;
    }
    if let Some(reference) = schema["$ref"].as_str() {
        let name = reference.rsplit('/').next().unwrap_or_default();
        return schema_example(doc, &doc["components"]["schemas"][name], depth + 1);
    }
    for key in ["oneOf", "anyOf", "allOf"] {
        if let Some(first) = schema[key].as_array().and_then(|all| all.iter().find(|s| s["type"] != "null")) {
            return schema_example(doc, first, depth + 1);
        }
    }
    if let Some(first) = schema["enum"].as_array().and_then(|all| all.first()) {
        return first.clone();
    }
    let kind = match &schema["type"] {
        Value::Array(kinds) => kinds.iter().find(|k| *k != "null").cloned().unwrap_or_default(),
        other => other.clone(),
    };
    match kind.as_str().unwrap_or(if schema["properties"].is_object() { "object" } else { "" }) {
        "object" => {
            let fields = schema["properties"].as_object().into_iter().flatten();
            Value::Object(fields.map(|(name, field)| (name.clone(), schema_example(doc, field, depth + 1))).collect())
        }
        "array" => json!([schema_example(doc, &schema["items"], depth + 1)]),
        "integer" => json!(schema["minimum"].as_i64().unwrap_or(1).max(1)),
        "number" => json!(1),
        "boolean" => json!(true),
        "string" => match schema["format"].as_str() {
            Some("uri") => json!("https://shop.example/fuzz"),
            _ => json!("{merchant_id}"),
        },
        _ => json!({}),
    }
}

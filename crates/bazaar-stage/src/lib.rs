//! The stage the demo's chapters, the attack catalogue and the integration tests play on: embedded
//! registries served on 127.0.0.1 (their data directories kept private by `data_dir`), owners and agents
//! enrolled through invites, any router served on a free port, the demo's `OffsetClock` that moves deadlines
//! forward without waiting days, and narration helpers. The demo's chapters import this crate and never each
//! other, so one can change without reading the others; `bazaar demo` composes them.

pub mod data_dir;

use crate::data_dir::{CONVERSATION_FILE, RELAY_FILE, SQLITE_FILE};
use anyhow::{Context, Result};
use axum::Router;
use bazaar_core::apply::Config;
use bazaar_sdk::clock::SystemClock;
use bazaar_sdk::{generate_key, Client, SdkError};
use bazaar_store::Store;
use bazaar_types::{Clock, Timestamp};
use std::path::Path;
use std::sync::Arc;

/// A registry on an embedded store in `dir`, served on 127.0.0.1 with its sweeper running.
pub struct LocalRegistry {
    pub state: Arc<bazaar_server::AppState>,
    pub url: String,
    pub operator_credential: String,
    /// The dispute desk's credential, when this start created the registry.
    pub desk_credential: Option<String>,
    /// The registry's clock: the wall clock plus whatever the caller advanced.
    pub clock: Arc<OffsetClock>,
}

impl LocalRegistry {
    /// A client holding the operator credential.
    pub fn operator(&self) -> Client {
        Client::new(&self.url, Some(self.operator_credential.clone()))
    }
}

/// Opens (or creates) an embedded registry in `dir` and serves it. A fresh one
/// takes `operator_credential`, or draws one.
pub async fn embedded_registry(dir: &Path, operator_credential: Option<String>) -> Result<LocalRegistry> {
    embedded_registry_with(dir, operator_credential, Config::standard()).await
}

/// [`embedded_registry`] with the registry's settings (short dispute windows in tests).
pub async fn embedded_registry_with(
    dir: &Path,
    operator_credential: Option<String>,
    config: bazaar_core::apply::Config,
) -> Result<LocalRegistry> {
    embedded_on_clock(dir, Arc::new(OffsetClock::default()), operator_credential, config).await
}

/// A second embedded registry in `dir` (created) on the same clock as `peer`,
/// so signed requests and validity windows agree between the two (the stories
/// move their clock ahead).
pub async fn peer_registry(
    peer: &LocalRegistry,
    dir: &Path,
    operator_credential: Option<String>,
) -> Result<LocalRegistry> {
    std::fs::create_dir_all(dir)?;
    embedded_on_clock(dir, peer.clock.clone(), operator_credential, bazaar_core::apply::Config::standard()).await
}

/// An embedded registry in `dir` on `clock` (a peer started beside a served registry passes a clock that follows it).
pub async fn embedded_on_clock(
    dir: &Path,
    offset: Arc<OffsetClock>,
    operator_credential: Option<String>,
    config: bazaar_core::apply::Config,
) -> Result<LocalRegistry> {
    let path = crate::data_dir::private_file(dir, SQLITE_FILE)?;
    let store: Arc<dyn Store> = Arc::new(bazaar_store_sqlite::SqliteStore::open(path, config.clone(), offset.clone())?);
    let local = local_registry(store, offset.clone(), config, operator_credential).await?;
    // The conversation plane beside it, on its own file (notices are written
    // when a caller runs the notifier; the demo and tests drive it).
    let plane = bazaar_conversation::sqlite::SqliteConversationStore::open(
        &crate::data_dir::private_file(dir, CONVERSATION_FILE)?,
        offset,
        local.state.entropy.clone(),
    )?;
    local.state.attach_conversation(Arc::new(plane));
    // And the labor market's relay, on its own file too.
    let relay_store = bazaar_relay::sqlite::SqliteEventStore::open(&crate::data_dir::private_file(dir, RELAY_FILE)?)?;
    let relay_url = relay_url(&local.url, None);
    let relay = bazaar_relay::Relay::start(
        Arc::new(relay_store),
        local.clock.clone(),
        bazaar_relay::RelayConfig::public(relay_url),
    )?;
    local.state.attach_relay(Arc::new(relay));
    Ok(local)
}

/// Serves a registry on `store` (whose writer reads `clock`) on 127.0.0.1, with its sweeper.
pub async fn local_registry(
    store: Arc<dyn Store>,
    offset: Arc<OffsetClock>,
    config: bazaar_core::apply::Config,
    operator_credential: Option<String>,
) -> Result<LocalRegistry> {
    let clock: Arc<dyn Clock> = offset.clone();
    let booted = bazaar_server::boot(store, clock, config, operator_credential.clone()).await?;
    let desk_credential = booted.desk_credential.clone();
    let operator_credential = booted.operator_credential.or(operator_credential).context("an operator credential")?;
    bazaar_server::spawn_sweeper(booted.state.clone());
    let mut router = bazaar_server::router(booted.state.clone());
    if bazaar_server::contract::check_requested() {
        router = bazaar_server::contract::checked(router);
    }
    let url = serve(router).await?;
    *booted.state.public_url.write().expect("url lock") = Some(url.clone());
    Ok(LocalRegistry { state: booted.state, url, operator_credential, desk_credential, clock: offset })
}

/// Creates an owner and one agent enrolled through an invite; returns their clients.
pub async fn enroll_pair(operator: &Client, owner_handle: &str, agent_handle: &str) -> Result<(Client, Client)> {
    enroll_pair_with_key(operator, owner_handle, agent_handle, &generate_key()).await
}

/// [`enroll_pair`] with the agent's key chosen by the caller (to sign evidence later).
pub async fn enroll_pair_with_key(
    operator: &Client,
    owner_handle: &str,
    agent_handle: &str,
    agent_key: &ed25519_dalek::SigningKey,
) -> Result<(Client, Client)> {
    let owner_key = generate_key();
    let created = operator.create_owner(&owner_key, owner_handle).await?;
    let owner = operator.with_credential(created.credential.as_str());
    let invite = owner.issue_invite().await?;
    let enrolled = operator.with_credential("").redeem_invite(&invite, agent_key, agent_handle).await?;
    Ok((owner, operator.with_credential(enrolled.credential.as_str())))
}

/// The DID of the member `client` speaks for.
pub async fn member_id(client: &Client) -> Result<String> {
    Ok(client.me().await?.member.id)
}

/// Serves `router` on 127.0.0.1 and an OS-chosen port; returns its base URL.
pub async fn serve(router: Router) -> Result<String> {
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", 0)).await?;
    let address = listener.local_addr()?;
    tokio::spawn(async move { axum::serve(listener, router).await });
    Ok(format!("http://{address}"))
}

/// [`serve`], stopped when the returned sender is dropped (a run that serves a route for its own length).
pub async fn serve_until_dropped(router: Router) -> Result<(String, tokio::sync::oneshot::Sender<()>)> {
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", 0)).await?;
    let address = listener.local_addr()?;
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    tokio::spawn(async move {
        axum::serve(listener, router)
            .with_graceful_shutdown(async {
                stopped.await.ok();
            })
            .await
    });
    Ok((format!("http://{address}"), stop))
}

/// The code a refused request came back with, or `ACCEPTED` when the registry
/// let it through: the chapters narrate refusals they expect, so an acceptance
/// must read as the surprise it is.
pub fn refusal_code<T>(answer: Result<T, SdkError>) -> String {
    answer.err().and_then(|e| e.code().map(str::to_string)).unwrap_or_else(|| "ACCEPTED".into())
}

/// How the narration reports an audit.
pub fn audit_word(ok: bool) -> &'static str {
    if ok {
        "passed"
    } else {
        "FAILED"
    }
}

/// The wall clock plus an offset the demo moves forward to show deadlines
/// passing (review windows, dispute phases) without waiting days.
#[derive(Debug, Default)]
pub struct OffsetClock(std::sync::atomic::AtomicI64);

impl OffsetClock {
    /// A clock that reads `now_ms` now and runs on with the wall clock from there (a peer registry started
    /// beside one whose clock was moved ahead).
    pub fn reading(now_ms: i64) -> OffsetClock {
        OffsetClock(std::sync::atomic::AtomicI64::new(now_ms - SystemClock.now().0))
    }

    pub fn advance_s(&self, seconds: u64) {
        self.0.fetch_add(seconds as i64 * 1000, std::sync::atomic::Ordering::SeqCst);
    }
}

impl Clock for OffsetClock {
    fn now(&self) -> Timestamp {
        Timestamp(SystemClock.now().0 + self.0.load(std::sync::atomic::Ordering::SeqCst))
    }
}

/// The relay's WebSocket URL: on its own port when given, else `/relay` under the registry's URL.
pub fn relay_url(public_url: &str, relay_port: Option<u16>) -> String {
    let ws = public_url.replacen("https://", "wss://", 1).replacen("http://", "ws://", 1);
    let base = ws.trim_end_matches('/');
    match relay_port {
        Some(port) => {
            let host_end = base.find("://").map_or(0, |i| i + 3);
            let authority = &base[host_end..];
            let host = authority.split('/').next().unwrap_or(authority);
            let host = host.rsplit_once(':').map_or(host, |(h, _)| h);
            format!("{}{host}:{port}/", &base[..host_end])
        }
        None => format!("{base}{}", bazaar_server::relay::RELAY_PATH),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_relay_url_follows_the_public_url_and_its_own_port() {
        assert_eq!(relay_url("http://127.0.0.1:8080", None), "ws://127.0.0.1:8080/relay");
        assert_eq!(relay_url("https://bazaar.example/", None), "wss://bazaar.example/relay");
        assert_eq!(relay_url("https://bazaar.example:8443/base", Some(7447)), "wss://bazaar.example:7447/");
        assert_eq!(relay_url("http://127.0.0.1:8080", Some(7447)), "ws://127.0.0.1:7447/");
    }
}

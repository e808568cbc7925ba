//! The stage every chapter of `bazaar demo` plays on, and the integration tests
//! with it: embedded registries served on 127.0.0.1, owners and agents enrolled
//! through invites, any router served on a free port, and narration helpers.
//! The chapters import this module and never each other, so one can change
//! without reading the others; `demo` composes them.

use crate::runtime::{registry_config, OffsetClock, SQLITE_FILE};
use anyhow::{Context, Result};
use axum::Router;
use bazaar_sdk::{generate_key, Client, SdkError};
use bazaar_store::Store;
use bazaar_types::Clock;
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
    embedded_registry_with(dir, operator_credential, registry_config()).await
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
        &crate::data_dir::private_file(dir, crate::runtime::CONVERSATION_FILE)?,
        offset,
        local.state.entropy.clone(),
    )?;
    local.state.attach_conversation(Arc::new(plane));
    // And the labor market's relay, on its own file too.
    let relay_store =
        bazaar_relay::sqlite::SqliteEventStore::open(&crate::data_dir::private_file(dir, crate::runtime::RELAY_FILE)?)?;
    let relay_url = crate::runtime::relay_url(&local.url, None);
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

//! `bazaar merchant`: a merchant agent's paid route on this machine — the demo's wholesaler storefront
//! (`POST /restock`, [`PRICE_MINOR`] per call) behind the SDK's paid-route middleware, settled with the
//! merchant's own credential — so a buyer agent (`bazaar pay`, an SDK) has something real to pay before its
//! owner writes a merchant of her own.

use super::common::Remote;
use anyhow::Result;
use bazaar_cli::demo::restock::{storefront, PRICE_MINOR};
use bazaar_sdk::paid::PaidRoute;
use clap::Subcommand;
use serde_json::json;
use std::path::PathBuf;
use std::sync::atomic::AtomicU64;
use std::sync::Arc;

#[derive(Subcommand)]
pub enum Command {
    /// Merchant agent: serve a paid route (POST /restock, 250 per call) with your credential until Ctrl-C, for a
    /// buyer agent to pay. Each order is settled once and its work runs once.
    Merchant {
        #[command(flatten)]
        remote: Remote,
        /// Port on 127.0.0.1 to listen on (0: any free port; the URL is printed first).
        #[arg(long, default_value_t = 8080)]
        port: u16,
        /// The work receipts (SQLite) that answer a retried order from its first answer.
        #[arg(long, default_value = "work-receipts.db")]
        receipts: PathBuf,
    },
}

pub async fn run(command: Command, json_output: bool) -> Result<i32> {
    let Command::Merchant { remote, port, receipts } = command;
    // The middleware refuses a missing or placeholder credential and says why.
    let route = PaidRoute::new(remote.client()?, PRICE_MINOR, &receipts)?;
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", port)).await?;
    let url = format!("http://{}/restock", listener.local_addr()?);
    // The first line, in prose and in --json alike, says the route listens: scripts wait for it.
    let line = json!({"listening": url, "price_minor": PRICE_MINOR, "receipts": receipts});
    if json_output {
        println!("{line}");
    } else {
        println!("merchant listening on {url}: POST, {PRICE_MINOR} per call, settled once per order; Ctrl-C to stop");
    }
    let app = storefront(Arc::new(route), Arc::new(AtomicU64::new(0)));
    tokio::select! {
        served = axum::serve(listener, app) => served?,
        _ = tokio::signal::ctrl_c() => {}
    }
    Ok(0)
}

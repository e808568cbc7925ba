//! A sample merchant: a wholesaler storefront whose `/restock` route costs 250
//! minor units per call, behind the SDK's paid-route middleware.
//!
//! ```text
//! BAZAAR_REGISTRY=http://127.0.0.1:7878 BAZAAR_CREDENTIAL=<merchant agent credential> \
//!   cargo run -p bazaar-sdk --example wholesaler -- 8080
//! bazaar pay http://127.0.0.1:8080/restock --merchant <merchant handle> --max 250 --order order-1
//! ```
//!
//! The handler runs once per settlement; a retry of a paid order gets the
//! stored work receipt (`Bazaar-Work-Receipt: replayed`).

use axum::routing::post;
use axum::{Extension, Json, Router};
use bazaar_sdk::paid::{paid, PaidRoute, Settled};
use bazaar_sdk::Client;
use serde_json::json;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

const PRICE_MINOR: u64 = 250;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let registry = std::env::var("BAZAAR_REGISTRY").unwrap_or_else(|_| "http://127.0.0.1:7878".into());
    let credential =
        std::env::var("BAZAAR_CREDENTIAL").map_err(|_| "set BAZAAR_CREDENTIAL to the merchant agent's credential")?;
    let port: u16 = std::env::args().nth(1).map(|p| p.parse()).transpose()?.unwrap_or(8080);
    let route =
        PaidRoute::new(Client::new(registry, Some(credential)), PRICE_MINOR, std::path::Path::new("work-receipts.db"))?;
    let picked = Arc::new(AtomicU64::new(0));
    let app = Router::new()
        .route(
            "/restock",
            post(move |Extension(settled): Extension<Settled>| {
                let picked = picked.clone();
                async move {
                    // The paid work: runs once per settlement, after the money is real.
                    let total = picked.fetch_add(12, Ordering::SeqCst) + 12;
                    Json(json!({"order": settled.order_id, "settlement": settled.settlement_id, "picked": 12, "picked_total": total}))
                }
            }),
        )
        .route_layer(axum::middleware::from_fn_with_state(Arc::new(route), paid));
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", port)).await?;
    println!("wholesaler listening on http://{}/restock", listener.local_addr()?);
    axum::serve(listener, app).await?;
    Ok(())
}

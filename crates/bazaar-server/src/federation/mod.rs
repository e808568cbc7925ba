//! Federation over HTTP: reputation reads and trust passports
//! ([`reputation`]), this registry's keys, card, peers and guests
//! ([`peers`]), cross-registry settlement ([`settle`]) and the relays it
//! stopped retrying ([`recovery`]), corridor netting ([`netting`]), the signatures
//! registries exchange ([`s2s`]) and the outbound calls this registry makes to
//! its peers ([`peer_client`]). See `bazaar_core::federation`.

pub mod netting;
pub mod peer_client;
pub mod peers;
pub mod recovery;
pub mod reputation;
pub mod s2s;
pub mod settle;

pub use peers::card;
pub use s2s::{FEDERATION_NET_PATH, FEDERATION_SETTLE_PATH, S2S_HEADER};
pub use settle::{settle_foreign, verify_foreign};

use crate::exec::due_ids;
use crate::state::AppState;
use axum::routing::post;
use bazaar_core::federation::Relay;
use bazaar_core::kernel::docs::decode;
use bazaar_core::model::DocKind;
use bazaar_core::refusal::{Code, Refusal};
use bazaar_store::StoreError;
use bazaar_types::limits::FEDERATION_SKEW_S_MAX;
use bazaar_types::Timestamp;
use std::sync::Arc;
use utoipa_axum::router::OpenApiRouter;

/// Federation's routes. The server-to-server settle route has no OpenAPI
/// entry on purpose (see `crate::router::UNDESCRIBED_ROUTES`).
pub fn routes() -> OpenApiRouter<Arc<AppState>> {
    OpenApiRouter::new()
        .merge(reputation::routes())
        .merge(peers::routes())
        .merge(recovery::routes())
        .merge(netting::routes())
        .route(FEDERATION_SETTLE_PATH, post(settle::federation_settle))
        .route(s2s::FEDERATION_NET_PATH, post(netting::federation_net))
}

/// Refuses a signed presentation (a passport's, a guest's) made further than
/// `FEDERATION_SKEW_S_MAX` from this registry's clock: a signature alone does
/// not say when, so an old one could be replayed.
pub(crate) fn check_presented_at(now_ms: i64, presented_at_ms: i64) -> Result<(), Refusal> {
    // `abs_diff`: `presented_at_ms` is the caller's, any i64; a difference must not overflow.
    if now_ms.abs_diff(presented_at_ms) > FEDERATION_SKEW_S_MAX * 1000 {
        return Err(Refusal::new(Code::RequestStale, "`presented_at_ms` is too far from this registry's clock.")
            .with(serde_json::json!({"now_ms": now_ms, "skew_s_max": FEDERATION_SKEW_S_MAX})));
    }
    Ok(())
}

/// The sweeper's share: retries relayed settlements whose retry time came,
/// then picks up keys another node of this registry rotated to. Returns how
/// many relays went through.
pub async fn due(state: &Arc<AppState>, now: Timestamp) -> Result<usize, StoreError> {
    let mut advanced = 0;
    for id in due_ids(state, DocKind::Relay, now).await? {
        let Some(row) = state.store.doc(DocKind::Relay, &id).await? else { continue };
        // Retried one at a time: each is a call to a peer registry.
        if settle::relay_attempt(state, &decode::<Relay>(&row)?).await.is_ok() {
            advanced += 1;
        }
    }
    if advanced > 0 {
        state.metrics.add("bazaar_documents_advanced_total", String::new(), advanced as f64);
    }
    state.refresh_keys().await?;
    Ok(advanced)
}

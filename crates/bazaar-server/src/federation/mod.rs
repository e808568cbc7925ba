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

/// Refuses anyone but the operator; `what` finishes "Only the operator …".
pub(crate) fn operator_only(auth: &crate::auth::Auth, what: &str) -> Result<(), crate::problem::Problem> {
    if auth.member.kind != bazaar_core::model::MemberKind::Operator {
        return Err(Refusal::new(Code::NotPermitted, format!("Only the operator {what}.")).into());
    }
    Ok(())
}

/// `?after=<id>&limit=` over the operator's own documents of one kind.
#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OperatorPage {
    #[serde(default)]
    pub after: String,
    pub limit: Option<usize>,
}

/// A page of the operator's documents of kind `T::KIND` by id (at most
/// `PAGE_LIMIT_MAX`), and the id to pass as `after` for the next one.
pub(crate) async fn operator_docs<T: bazaar_core::kernel::docs::Document>(
    state: &AppState,
    page: &OperatorPage,
) -> Result<(Vec<T>, Option<String>), crate::problem::Problem> {
    use bazaar_types::limits::PAGE_LIMIT_MAX;
    let limit = page.limit.unwrap_or(PAGE_LIMIT_MAX).clamp(1, PAGE_LIMIT_MAX);
    let operator = bazaar_types::MemberId(bazaar_core::model::OPERATOR_ID.into());
    let rows = state.store.docs_by_party(T::KIND, &operator, &page.after, limit).await?;
    let next = rows.last().map(|row| row.id.clone());
    Ok((rows.iter().map(decode::<T>).collect::<Result<_, _>>()?, next))
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

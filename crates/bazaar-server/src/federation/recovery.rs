//! Relays the sweeper stopped retrying (`RELAY_RETRY_WINDOW_S` without an
//! answer from the buyer's registry): the operators' recovery records, and
//! the operator's retry of one.

use super::settle::relay_attempt;
use crate::auth::{ApiQuery, Auth};
use crate::exec;
use crate::problem::{errors, Problem};
use crate::schemas::federation as schema;
use crate::state::AppState;
use axum::extract::{Path, State};
use axum::Json;
use bazaar_core::command::Op;
use bazaar_core::federation::{self, Recovery, Relay};
use bazaar_core::kernel::docs::decode;
use bazaar_core::model::{DocKind, MemberKind, OPERATOR_ID};
use bazaar_core::refusal::{Code, Refusal};
use bazaar_types::limits::PAGE_LIMIT_MAX;
use bazaar_types::{MemberId, TokenId};
use serde::Deserialize;
use serde_json::{json, Value};
use std::sync::Arc;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

pub fn routes() -> OpenApiRouter<Arc<AppState>> {
    OpenApiRouter::new().routes(routes!(list_recovery)).routes(routes!(retry_relay))
}

fn operator_only(auth: &Auth) -> Result<(), Problem> {
    if auth.member.kind != MemberKind::Operator {
        return Err(Refusal::new(Code::NotPermitted, "Only the operator reads and retries stuck relays.").into());
    }
    Ok(())
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RecoveryQuery {
    #[serde(default)]
    pub after: String,
    pub limit: Option<usize>,
}

/// Operator only: every relay that ever stuck, by token id, with its state now.
#[utoipa::path(get, path = "/v1/federation/recovery", params(("after" = Option<String>, Query), ("limit" = Option<usize>, Query)), security(("credential" = []), ("session" = [])), responses((status = 200, description = "Recovery records", body = schema::RecoveryPage), errors::Invalid, errors::Unauthenticated, errors::Forbidden, errors::Unavailable))]
pub async fn list_recovery(
    State(state): State<Arc<AppState>>,
    auth: Auth,
    ApiQuery(query): ApiQuery<RecoveryQuery>,
) -> Result<Json<Value>, Problem> {
    operator_only(&auth)?;
    let limit = query.limit.unwrap_or(PAGE_LIMIT_MAX).clamp(1, PAGE_LIMIT_MAX);
    let operator = MemberId(OPERATOR_ID.into());
    let rows = state.store.docs_by_party(DocKind::Recovery, &operator, &query.after, limit).await?;
    let records = rows.iter().map(decode::<Recovery>).collect::<Result<Vec<_>, _>>()?;
    let next = records.last().map(|r| r.jti.to_string());
    Ok(Json(json!({"recovery": records, "next_after": next})))
}

/// Operator only: make a stuck relay pending again and call the buyer's
/// registry once now; the sweeper retries it for another window after that.
#[utoipa::path(post, path = "/v1/federation/relays/{jti}/retry", security(("credential" = []), ("session" = [])), responses((status = 200, description = "The relay after the attempt", body = schema::RelayRetried), errors::Unauthenticated, errors::Forbidden, errors::NotFound, errors::Conflict, errors::Unavailable))]
pub async fn retry_relay(
    State(state): State<Arc<AppState>>,
    auth: Auth,
    Path(jti): Path<String>,
) -> Result<Json<Value>, Problem> {
    operator_only(&auth)?;
    let op = Op::Federation(federation::Op::RelayRetry { jti: TokenId(jti.clone()) });
    exec::receipt(&state, auth.member, op).await?;
    let missing = || Refusal::new(Code::TokenNotFound, "No relay for this token.");
    let attempt = relay_attempt(&state, &exec::load_doc::<Relay>(&state, &jti, missing).await?).await;
    // The attempt's own answer (settled, refused, or still no answer) is in the relay now.
    let relay = exec::load_doc::<Relay>(&state, &jti, missing).await?;
    let answered = match attempt {
        Ok(_) => json!(null),
        Err(refusal) => json!(refusal.code.as_str()),
    };
    Ok(Json(json!({"relay": relay.view(), "attempt": answered})))
}

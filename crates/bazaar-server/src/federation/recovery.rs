//! Relays the sweeper stopped retrying (`RELAY_RETRY_WINDOW_S` without an
//! answer from the buyer's registry): the operators' recovery records, and
//! the operator's retry of one.

use super::settle::relay_attempt;
use super::{operator_docs, operator_only, OperatorPage};
use crate::auth::{ApiQuery, Auth};
use crate::exec;
use crate::problem::Problem;
use crate::state::AppState;
use axum::extract::{Path, State};
use axum::Json;
use bazaar_core::command::Op;
use bazaar_core::federation::{self, Recovery, Relay};
use bazaar_core::refusal::{Code, Refusal};
use bazaar_types::TokenId;
use bazaar_wire::federation as schema;
use serde_json::{json, Value};
use std::sync::Arc;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

pub fn routes() -> OpenApiRouter<Arc<AppState>> {
    OpenApiRouter::new().routes(routes!(list_recovery)).routes(routes!(retry_relay))
}

const WHAT: &str = "reads and retries stuck relays";

/// Operator only: every relay that ever stuck, by token id, with its state now.
#[utoipa::path(get, path = "/v1/federation/recovery", params(("after" = Option<String>, Query), ("limit" = Option<usize>, Query)), security(("credential" = []), ("session" = [])), responses((status = 200, description = "Recovery records", body = schema::RecoveryPage)))]
pub async fn list_recovery(
    State(state): State<Arc<AppState>>,
    auth: Auth,
    ApiQuery(page): ApiQuery<OperatorPage>,
) -> Result<Json<Value>, Problem> {
    operator_only(&auth, WHAT)?;
    let (records, next) = operator_docs::<Recovery>(&state, &page).await?;
    Ok(Json(json!({"recovery": records, "next_after": next})))
}

/// Operator only: make a stuck relay pending again and call the buyer's
/// registry once now; the sweeper retries it for another window after that.
#[utoipa::path(post, path = "/v1/federation/relays/{jti}/retry", security(("credential" = []), ("session" = [])), responses((status = 200, description = "The relay after the attempt", body = schema::RelayRetried)))]
pub async fn retry_relay(
    State(state): State<Arc<AppState>>,
    auth: Auth,
    Path(jti): Path<String>,
) -> Result<Json<Value>, Problem> {
    operator_only(&auth, WHAT)?;
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

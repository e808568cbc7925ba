//! A merchant's own terms (`bazaar-core::pay::terms`): its escrow threshold
//! (at most the registry's) and a pilot's invited buyers. Set by the merchant
//! agent or its owner; read by any member (they are part of the merchant's
//! card: what a buyer needs before asking for a token).

use crate::auth::{ApiJson, Auth};
use crate::exec::{execute, resolve, resolve_id};
use crate::problem::Problem;
use crate::state::AppState;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::Response;
use axum::Json;
use bazaar_core::command::Op;
use bazaar_core::kernel::docs::decode;
use bazaar_core::model::DocKind;
use bazaar_core::pay::{self, terms::MerchantTerms};
use bazaar_core::refusal::{Code, Refusal};
use bazaar_types::limits::TERMS_INVITED_MAX;
use bazaar_types::Amount;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use std::sync::Arc;
use utoipa::ToSchema;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

pub fn routes() -> OpenApiRouter<Arc<AppState>> {
    OpenApiRouter::new().routes(routes!(set_terms, get_terms))
}

#[derive(Deserialize, Serialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct TermsRequest {
    /// Tokens above this must ride an escrowed contract; at most the registry's threshold. Absent: the registry's.
    pub escrow_threshold_minor: Option<u64>,
    /// A pilot: only these buyers (handles or DIDs) get tokens, contracts and shares. Absent or null: open to all.
    pub invited_buyers: Option<Vec<String>>,
}

pub use bazaar_wire::pay::Terms;

pub use bazaar_wire::pay::StoredTerms;

/// The merchant agent or its owner: sets the merchant's own terms, replacing any before.
/// Terms apply to tokens, contracts and orders asked for afterwards.
#[utoipa::path(put, path = "/v1/agents/{agent}/terms", request_body = TermsRequest, security(("credential" = []), ("session" = [])), responses((status = 200, description = "The terms as stored", body = StoredTerms)))]
async fn set_terms(
    State(state): State<Arc<AppState>>,
    auth: Auth,
    Path(agent): Path<String>,
    ApiJson(body): ApiJson<TermsRequest>,
) -> Result<Response, Problem> {
    let merchant = resolve_id(&state, &agent).await?;
    let invited = match body.invited_buyers {
        None => None,
        Some(list) if list.len() > TERMS_INVITED_MAX => {
            return Err(Refusal::new(Code::TermsInvalid, "Too many invited buyers.")
                .with(json!({"invited": list.len(), "max": TERMS_INVITED_MAX}))
                .into());
        }
        Some(list) => {
            let mut ids = Vec::with_capacity(list.len());
            for who in &list {
                ids.push(resolve_id(&state, who).await?);
            }
            Some(ids)
        }
    };
    let op =
        Op::Pay(pay::Op::SetTerms { merchant, escrow_threshold: body.escrow_threshold_minor.map(Amount), invited });
    Ok(execute(&state, auth.member, None, op, StatusCode::OK).await)
}

/// Any member: a merchant's terms — its own, or the registry's defaults (`own: false`).
#[utoipa::path(get, path = "/v1/agents/{agent}/terms", security(("credential" = []), ("session" = [])), responses((status = 200, description = "The merchant's terms", body = Terms)))]
async fn get_terms(
    State(state): State<Arc<AppState>>,
    _auth: Auth,
    Path(agent): Path<String>,
) -> Result<Json<Value>, Problem> {
    let merchant = resolve(&state, &agent).await?;
    let registry = state.config.escrow_threshold;
    let stored = state.store.doc(DocKind::Terms, merchant.id.as_str()).await?;
    let terms = stored.map(|row| decode::<MerchantTerms>(&row)).transpose()?;
    Ok(Json(match terms {
        Some(t) => json!({"merchant": t.merchant, "escrow_threshold_minor": t.threshold(registry),
            "registry_escrow_threshold_minor": registry, "invited_buyers": t.invited_buyers, "own": true,
            "set_by": t.set_by, "set_at": t.set_at.ms()}),
        None => json!({"merchant": merchant.id, "escrow_threshold_minor": registry,
            "registry_escrow_threshold_minor": registry, "invited_buyers": null, "own": false}),
    }))
}

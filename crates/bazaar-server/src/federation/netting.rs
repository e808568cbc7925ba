//! Netting a corridor over HTTP (see `bazaar_core::federation::netting`): the
//! operator proposes a statement this registry signs and sends it to the peer
//! (`POST /v1/federation/netting`), the peer checks the signature, signs and
//! records it (`POST /v1/federation/net`, server to server), and its signed
//! answer is recorded here; the operator lists the statements.

use super::peer_client::{refusal_of, signed_call};
use super::peers::peer_of;
use super::s2s::FEDERATION_NET_PATH;
use super::settle::{s2s_peer, signed_answer};
use super::{operator_docs, operator_only, OperatorPage};
use crate::auth::{ApiJson, ApiQuery, Auth};
use crate::exec::{self, execute};
use crate::problem::Problem;
use crate::state::AppState;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;
use axum::Json;
use bazaar_core::command::{Op, Receipt};
use bazaar_core::crypto::{did_key, sign};
use bazaar_core::federation::{
    self, verify_statement, Netting, NettingAnswer, NettingState, NettingStatement, Peer, RegistrySignature,
};
use bazaar_core::kernel::docs::decode;
use bazaar_core::model::DocKind;
use bazaar_core::refusal::{Code, Refusal};
use bazaar_types::{Amount, MemberId};
use bazaar_wire::federation as schema;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use std::sync::Arc;
use utoipa::ToSchema;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

/// The operator's routes, each with its OpenAPI entry. The server-to-server
/// route (`FEDERATION_NET_PATH`) is added beside the settle route, undescribed.
pub fn routes() -> OpenApiRouter<Arc<AppState>> {
    OpenApiRouter::new().routes(routes!(propose, list))
}

/// Who paid the other, off the ledger.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize, Serialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum PaidBy {
    /// This registry paid the peer (it held what it owed in `corridor:<peer>`).
    Us,
    /// The peer paid this registry.
    Peer,
}

#[derive(Deserialize, Serialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct NettingRequest {
    /// The peer registry's DID.
    pub peer: String,
    pub paid_by: PaidBy,
    #[schema(minimum = 1)]
    pub amount_minor: u64,
    /// The operators' reference for the payment (a wire's, say): at most 200 characters.
    #[serde(default)]
    pub reference: String,
    /// The statement's id, chosen by the operator (1 to 64 of `A-Za-z0-9_-`;
    /// the wire's reference, say): it makes the request idempotent. The same
    /// request again sends the stored statement again (to learn the peer's
    /// answer after it was lost); another payment under a used id is refused.
    pub id: String,
}

/// What a proposer sends its peer.
#[derive(Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct PresentedStatement {
    pub statement: NettingStatement,
    pub signature: RegistrySignature,
}

const WHAT: &str = "nets a corridor";

/// This registry's signature over `statement`, with its current key.
fn our_signature(state: &AppState, statement: &NettingStatement) -> RegistrySignature {
    let key = state.signing_key();
    RegistrySignature {
        registry: state.registry.clone(),
        key: did_key(&key.verifying_key()),
        sig: sign(&key, &statement.message()),
    }
}

/// The statement the request asks for: the stored one if its id is taken by
/// the very same payment (a resend), else a fresh one written now.
async fn statement_for(state: &AppState, request: &NettingRequest) -> Result<NettingStatement, Problem> {
    let peer = MemberId(request.peer.clone());
    let (payer, payee) = match request.paid_by {
        PaidBy::Us => (state.registry.clone(), peer),
        PaidBy::Peer => (peer, state.registry.clone()),
    };
    let fresh = NettingStatement {
        id: request.id.clone(),
        payer,
        payee,
        amount_minor: Amount(request.amount_minor),
        proposed_at_ms: state.now(),
        reference: request.reference.clone(),
    };
    if let Some(row) = state.store.doc(DocKind::Netting, &fresh.id).await? {
        let stored = decode::<Netting>(&row)?.statement;
        fn payment(s: &NettingStatement) -> (&MemberId, &MemberId, Amount, &String) {
            (&s.payer, &s.payee, s.amount_minor, &s.reference)
        }
        if payment(&stored) == payment(&fresh) {
            return Ok(stored);
        }
    }
    Ok(fresh)
}

/// Operator only: net part of a corridor. The statement is signed here,
/// proposed (nothing moves), sent to the peer, and — once the peer answers
/// with its signature — recorded here, moving `corridor:<peer>` by the amount.
/// With no answer it stays `proposed`: send it again with its `id`.
#[utoipa::path(post, path = "/v1/federation/netting", request_body = NettingRequest, security(("credential" = []), ("session" = [])), responses((status = 200, description = "The statement after the peer's answer (or `proposed` without one)", body = schema::NettingSent)))]
pub async fn propose(
    State(state): State<Arc<AppState>>,
    auth: Auth,
    ApiJson(request): ApiJson<NettingRequest>,
) -> Result<Json<Value>, Problem> {
    operator_only(&auth, WHAT)?;
    let peer = peer_of(&state, &request.peer).await?.ok_or_else(|| {
        Refusal::new(Code::NettingInvalid, "The other party is not a registry this one recognises.")
            .with(json!({"peer": request.peer}))
    })?;
    let statement = statement_for(&state, &request).await?;
    let signature = our_signature(&state, &statement);
    let op = Op::Federation(federation::Op::ProposeNetting {
        registry: state.registry.clone(),
        statement: statement.clone(),
        signature: signature.clone(),
    });
    let proposed: Netting = match exec::receipt(&state, auth.member, op).await? {
        Receipt::Federation(federation::Receipt::NettingStatus(status)) => status.netting,
        other => return Err(exec::unexpected(&other)),
    };
    let answered = proposed.state != NettingState::Proposed || send(&state, &peer, &proposed).await?;
    let netting = exec::load_doc::<Netting>(&state, &statement.id, || {
        Refusal::new(Code::NettingNotFound, "No netting statement with this id.")
    })
    .await?;
    Ok(Json(json!({"netting": netting, "answered": answered})))
}

/// Sends a proposed statement and records the peer's signed answer; false if it gave none.
async fn send(state: &Arc<AppState>, peer: &Peer, netting: &Netting) -> Result<bool, Problem> {
    let presented =
        PresentedStatement { statement: netting.statement.clone(), signature: netting.signatures[0].clone() };
    let body = serde_json::to_vec(&presented).expect("statements serialize");
    let answer = match signed_call(state, peer, FEDERATION_NET_PATH, body).await {
        None => return Ok(false),
        Some((status, json)) if status.is_success() => {
            let theirs = json["signatures"]
                .as_array()
                .and_then(|all| all.iter().find(|s| s["registry"] == json!(peer.did)))
                .and_then(|s| serde_json::from_value::<RegistrySignature>(s.clone()).ok());
            match theirs {
                Some(sig) if verify_statement(&netting.statement, &sig, &peer.keys).is_ok() => {
                    NettingAnswer::Recorded(sig)
                }
                _ => {
                    tracing::warn!(peer = %peer.did, id = %netting.statement.id, "a peer recorded a netting statement without a signature that checks; treated as no answer");
                    return Ok(false);
                }
            }
        }
        Some((_, json)) => NettingAnswer::Refused(refusal_of(&json, Code::NettingInvalid)),
    };
    let op = Op::Federation(federation::Op::ConfirmNetting {
        id: netting.statement.id.clone(),
        peer: peer.did.clone(),
        answer,
    });
    let applied = exec::as_registry(state, op).await?;
    applied.outcome?;
    Ok(true)
}

/// Operator only: the netting statements this registry holds, by id.
#[utoipa::path(get, path = "/v1/federation/netting", params(("after" = Option<String>, Query), ("limit" = Option<usize>, Query)), security(("credential" = []), ("session" = [])), responses((status = 200, description = "Netting statements", body = schema::NettingPage)))]
pub async fn list(
    State(state): State<Arc<AppState>>,
    auth: Auth,
    ApiQuery(page): ApiQuery<OperatorPage>,
) -> Result<Json<Value>, Problem> {
    operator_only(&auth, WHAT)?;
    let (statements, next) = operator_docs::<Netting>(&state, &page).await?;
    Ok(Json(json!({"netting": statements, "next_after": next})))
}

/// Server to server: a peer presents a statement it signed. Its signature is
/// checked against its key history at the statement's time, this registry
/// signs too, and the statement is recorded once (a resend answers the
/// record). The answer is signed.
pub async fn federation_net(
    State(state): State<Arc<AppState>>,
    headers: HeaderMap,
    body: Bytes,
) -> Result<Response, Problem> {
    let (member, peer) = s2s_peer(&state, &headers, FEDERATION_NET_PATH, &body).await?;
    let presented: PresentedStatement =
        serde_json::from_slice(&body).map_err(|e| Problem::invalid(format!("request body: {e}")))?;
    let PresentedStatement { statement, signature } = presented;
    // The request is the peer's (its s2s signature checked); a statement it did not sign is invalid content.
    if signature.registry != peer.did {
        return Err(Refusal::new(Code::NettingInvalid, "The statement is signed by another registry.").into());
    }
    verify_statement(&statement, &signature, &peer.keys)
        .map_err(|why| Refusal::new(Code::NettingInvalid, format!("The statement's signature: {why}.")))?;
    let ours = our_signature(&state, &statement);
    let op = Op::Federation(federation::Op::RecordNetting {
        registry: state.registry.clone(),
        statement,
        signatures: vec![signature, ours],
    });
    let response = execute(&state, member, None, op, StatusCode::OK).await;
    Ok(signed_answer(&state, FEDERATION_NET_PATH, response).await)
}

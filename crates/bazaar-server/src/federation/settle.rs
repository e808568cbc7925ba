//! Cross-registry settlement. On the buyer's registry: a peer relays the
//! settlement of a token this registry issued (signed server-to-server). On
//! the merchant's registry: settling or verifying a peer's token, and each
//! attempt to relay it to its issuer, recorded on the ledger.

use super::peer_client::{call_issuer, refresh_peer};
use super::peers::peer_of;
use super::s2s::{check_s2s, parse_s2s, s2s_header, FEDERATION_SETTLE_PATH, S2S_HEADER};
use crate::exec::{self, execute};
use crate::problem::Problem;
use crate::state::AppState;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use bazaar_core::command::{Idem, Op};
use bazaar_core::crypto::sha256_hex;
use bazaar_core::federation;
use bazaar_core::federation::{Peer, Relay, RelayResult, RelayState, RELAY_RETRY_WINDOW_S};
use bazaar_core::kernel::docs::decode;
use bazaar_core::model::{DocKind, Member};
use bazaar_core::refusal::{Code, Refusal};
use bazaar_core::token::{self, TokenClaims};
use bazaar_types::limits::*;
use bazaar_types::{Amount, OrderId};
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use std::sync::Arc;

/// The peer registry (as a member) behind a signed request.
pub(crate) async fn s2s_peer(
    state: &AppState,
    headers: &HeaderMap,
    path: &str,
    body: &[u8],
) -> Result<(Member, Peer), Problem> {
    let header = headers.get(S2S_HEADER);
    let sig = header.and_then(|v| v.to_str().ok()).and_then(parse_s2s).ok_or_else(|| {
        Refusal::new(Code::RequestSignatureInvalid, "Send Bazaar-Registry-Signature: registry=…,key=…,ts=…,sig=…")
    })?;
    let peer = peer_of(state, &sig.registry).await?.ok_or_else(|| {
        Refusal::new(Code::PeerUnknown, "This registry does not recognise the calling registry.")
            .with(json!({"registry": sig.registry}))
    })?;
    // `abs_diff`: `ts` is the caller's, any i64; a difference must not overflow.
    if state.now().ms().abs_diff(sig.ts) > FEDERATION_SKEW_S_MAX * 1000 {
        return Err(
            Refusal::new(Code::RequestStale, "The request's timestamp is too far from this registry's clock.").into()
        );
    }
    let registry = match check_s2s(header, &peer.keys, "POST", path, body) {
        Ok(registry) => registry,
        Err(refusal) => match refresh_peer(state, &peer).await {
            Some(fresh) => check_s2s(header, &fresh.keys, "POST", path, body)?,
            None => return Err(refusal.into()),
        },
    };
    if registry != peer.did.as_str() {
        return Err(Refusal::new(Code::RequestSignatureInvalid, "The signature names another registry.").into());
    }
    let member = state
        .store
        .member(&peer.did)
        .await?
        .ok_or_else(|| Refusal::new(Code::PeerUnknown, "No member for the peer."))?;
    Ok((member, peer))
}

#[derive(Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct RelayedSettleRequest {
    pub token: String,
    pub amount_minor: u64,
    pub order_id: String,
}

/// Server-to-server: a peer relays the settlement of a token this registry
/// issued. Idempotent by token id; the response is signed.
pub async fn federation_settle(
    State(state): State<Arc<AppState>>,
    headers: HeaderMap,
    body: Bytes,
) -> Result<Response, Problem> {
    let (member, _peer) = s2s_peer(&state, &headers, FEDERATION_SETTLE_PATH, &body).await?;
    let request: RelayedSettleRequest =
        serde_json::from_slice(&body).map_err(|e| Problem::invalid(format!("request body: {e}")))?;
    let amount = bazaar_core::validate::amount(request.amount_minor, "amount_minor")?;
    let claims = state.decode_token(&request.token).map_err(|error| match error {
        token::TokenError::Malformed => Refusal::new(Code::TokenMalformed, "`token` is not an apt_ token."),
        token::TokenError::BadSignature => Refusal::new(
            Code::TokenSignatureInvalid,
            "The token's signature does not verify against this registry's keys.",
        ),
    })?;
    // Kept with its refusals: a peer asking again learns the answer it lost, whatever it was.
    let idem = Idem::sent(format!("{}:settle_relayed", member.id), claims.jti.to_string(), sha256_hex(&body));
    let op = Op::Federation(federation::Op::SettleRelayed { claims, amount, order_id: OrderId(request.order_id) });
    let response = execute(&state, member, Some(idem), op, StatusCode::OK).await;
    Ok(signed_answer(&state, FEDERATION_SETTLE_PATH, response).await)
}

/// `response` with this registry's `Bazaar-Registry-Signature` over its body, as a peer checks an answer.
pub(crate) async fn signed_answer(state: &AppState, path: &str, response: Response) -> Response {
    let (mut parts, inner) = response.into_parts();
    let bytes = axum::body::to_bytes(inner, REQUEST_BODY_BYTES_MAX).await.unwrap_or_default();
    let signature = s2s_header(state, "RESPONSE", path, &bytes);
    parts.headers.insert(S2S_HEADER, HeaderValue::from_str(&signature).expect("ascii header"));
    Response::from_parts(parts, axum::body::Body::from(bytes))
}

/// A merchant settles a token a peer registry issued: open (or find) the relay, then call the issuer.
pub async fn settle_foreign(
    state: &Arc<AppState>,
    merchant: Member,
    text: &str,
    claims: TokenClaims,
    amount: Amount,
    order_id: &str,
) -> Result<Response, Problem> {
    let peer = peer_of(state, claims.iss.as_str()).await?.ok_or_else(|| {
        Refusal::new(Code::PeerUnknown, "This token was issued by a registry this one does not recognise.")
            .with(json!({"issuer": claims.iss}))
    })?;
    if claims.via.as_ref() != Some(&state.registry) {
        return Err(
            Refusal::new(Code::PeerUnknown, "This token was not issued for settlement through this registry.").into()
        );
    }
    let verified = match crate::keyring::decode_token_with(text, &peer.keys) {
        Ok(claims) => Ok(claims),
        Err(_) => match refresh_peer(state, &peer).await {
            Some(fresh) => crate::keyring::decode_token_with(text, &fresh.keys),
            None => Err(token::TokenError::BadSignature),
        },
    }
    .map_err(|_| {
        Refusal::new(Code::TokenSignatureInvalid, "The token's signature does not verify against its issuer's keys.")
    })?;
    if verified != claims {
        return Err(Refusal::new(Code::TokenSignatureInvalid, "The token changed after signing.").into());
    }
    if claims.ord.as_str() != order_id {
        return Err(Refusal::new(Code::OrderMismatch, "The token was issued for a different order id.")
            .with(json!({"token_order_id": claims.ord, "order_id": order_id}))
            .into());
    }
    let op = Op::Federation(federation::Op::RelayOpen { claims: claims.clone(), token: text.to_string(), amount });
    let view = exec::receipt(state, merchant, op).await?;
    let row = state.store.doc(DocKind::Relay, claims.jti.as_str()).await?.ok_or_else(|| {
        Problem::new(StatusCode::INTERNAL_SERVER_ERROR, "internal", format!("relay vanished: {view:?}"))
    })?;
    let relay = decode::<Relay>(&row)?;
    let outcome = match relay.state {
        // A stuck relay is not retried by the sweeper, but a merchant's request still makes one attempt.
        RelayState::Pending | RelayState::Stuck => relay_attempt(state, &relay).await,
        RelayState::Settled => settled_view(state, &relay).await,
        RelayState::Failed => {
            Err(Refusal::new(Code::RelayFailed, "The buyer's registry refused this settlement.").with(relay.view()))
        }
    };
    match outcome {
        Ok(body) => Ok((StatusCode::OK, Json(body)).into_response()),
        Err(refusal) => Err(refusal.into()),
    }
}

/// Verify (a receipt check, never a work order) of a peer's token at the
/// merchant's registry: genuine if a recognised issuer's key signed it for
/// settlement here; its state is the relay's, or `unsettled` if none was opened
/// (only the issuer knows whether it is still open).
pub async fn verify_foreign(
    state: &AppState,
    caller: &Member,
    text: &str,
    claims: TokenClaims,
) -> Result<bazaar_wire::pay::TokenCheck, Problem> {
    use bazaar_wire::pay::{ForeignTokenCheck, NotGenuine, TokenCheck};
    let not_genuine = |reason: &str| Ok(TokenCheck::NotGenuine(NotGenuine { genuine: false, reason: reason.into() }));
    if caller.id != claims.aud {
        return Err(Refusal::new(Code::NotAudience, "Only the token's merchant (audience) verifies it here.").into());
    }
    let Some(peer) = peer_of(state, claims.iss.as_str()).await? else {
        return not_genuine("issued by a registry this one does not recognise");
    };
    if claims.via.as_ref() != Some(&state.registry) {
        return not_genuine("not issued for settlement through this registry");
    }
    if crate::keyring::decode_token_with(text, &peer.keys).is_err() {
        return not_genuine("the signature does not verify against the issuer's keys");
    }
    let relay = state.store.doc(DocKind::Relay, claims.jti.as_str()).await?.map(|r| decode::<Relay>(&r)).transpose()?;
    let token_state = match &relay {
        Some(relay) if relay.state == RelayState::Settled => "settled",
        Some(relay) if relay.state == RelayState::Failed => "refused",
        Some(relay) if relay.state == RelayState::Stuck => "stuck",
        Some(_) => "settling",
        None => "unsettled",
    };
    Ok(TokenCheck::Foreign(ForeignTokenCheck {
        genuine: true,
        state: token_state.into(),
        work_order: false,
        issuer: claims.iss.to_string(),
        claims: crate::exec::wire(&claims)?,
        relay: relay.map(|r| r.view()),
    }))
}

async fn settled_view(state: &AppState, relay: &Relay) -> Result<Value, Refusal> {
    let settlement = state
        .store
        .settlement_by_order(&relay.merchant, &relay.order_id)
        .await
        .map_err(|e| Refusal::new(Code::RelayPending, e.to_string()))?
        .ok_or_else(|| Refusal::new(Code::RelayPending, "settled relay without settlement"))?;
    let mut body = bazaar_core::pay::settlement_view(&settlement);
    body["via"] = json!(relay.issuer);
    body["issuer_receipt"] = relay.receipt.clone().unwrap_or(Value::Null);
    Ok(body)
}

/// One call to the issuing registry for a pending relay, and its answer recorded.
pub async fn relay_attempt(state: &Arc<AppState>, relay: &Relay) -> Result<Value, Refusal> {
    let peer = match peer_of(state, relay.issuer.as_str()).await {
        Ok(Some(peer)) => peer,
        _ => return Err(Refusal::new(Code::PeerUnknown, "The issuing registry is no longer recognised.")),
    };
    let body = serde_json::to_vec(&RelayedSettleRequest {
        token: relay.token.clone(),
        amount_minor: relay.amount.0,
        order_id: relay.order_id.to_string(),
    })
    .expect("requests serialize");
    let result = call_issuer(state, &peer, body).await;
    if let RelayResult::Unreachable = &result {
        tracing::warn!(jti = %relay.jti, issuer = %relay.issuer, "relayed settlement: issuer did not answer; will retry");
    }
    let op = Op::Federation(federation::Op::RelayFinish {
        jti: relay.jti.clone(),
        merchant: relay.merchant.clone(),
        issuer: relay.issuer.clone(),
        result,
    });
    let applied =
        exec::as_registry(state, op).await.map_err(|e| Refusal::new(Code::RelayPending, format!("storage: {e}")))?;
    applied.outcome?;
    // Answer by the relay's state now: this attempt's result, or an earlier one's.
    let row = state.store.doc(DocKind::Relay, relay.jti.as_str()).await.ok().flatten();
    let stored = row.map(|r| decode::<Relay>(&r)).transpose();
    let stored = stored.map_err(|e| Refusal::new(Code::RelayPending, format!("storage: {e}")))?;
    match stored {
        Some(done) if done.state == RelayState::Settled => settled_view(state, &done).await,
        Some(done) if done.state == RelayState::Failed => {
            let why = done.failure.as_ref().map(|f| format!("{}: {}", f.code.as_str(), f.detail)).unwrap_or_default();
            Err(Refusal::new(Code::RelayFailed, format!("The buyer's registry refused this settlement ({why}).")).with(done.view()))
        }
        Some(stuck) if stuck.state == RelayState::Stuck => Err(Refusal::new(
            Code::RelayStuck,
            format!("The buyer's registry has not answered for {} h; this registry stopped retrying and told its operator (a recovery record). Retrying this request makes one more attempt.", RELAY_RETRY_WINDOW_S / 3600),
        )
        .with(stuck.view())),
        Some(pending) => Err(Refusal::new(
            Code::RelayPending,
            "The buyer's registry did not answer; the settlement is pending and this registry retries it. Retry the same request later.",
        )
        .with(pending.view())),
        None => Err(Refusal::new(Code::RelayPending, "relay missing")),
    }
}

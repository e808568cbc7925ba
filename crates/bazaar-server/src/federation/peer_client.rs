//! The outbound peer client: every HTTP call this registry makes to a peer
//! registry — fetching and checking its signed card (and so its key history),
//! refreshing a peer that rotated its key, and relaying a settlement to the
//! registry that issued the token. Inbound handlers live beside it.

use super::s2s::{check_s2s, s2s_header, FEDERATION_SETTLE_PATH, S2S_HEADER};
use crate::exec;
use crate::problem::Problem;
use crate::state::AppState;
use axum::http::StatusCode;
use bazaar_core::command::Op;
use bazaar_core::federation;
use bazaar_core::federation::{verify_history, KeyEntry, Peer, RelayResult};
use bazaar_core::refusal::{Code, Refusal};
use bazaar_core::vc;
use bazaar_types::MemberId;
use serde_json::Value;

/// Checks a peer's signed card: proof, its DID, and its key history; returns the history.
pub fn verify_card(card: &Value, did: &str, now_ms: i64) -> Result<Vec<KeyEntry>, Refusal> {
    let invalid = |detail: String| Refusal::new(Code::PeerInvalid, detail);
    let verified = vc::verify_eddsa_jcs_2022(card).map_err(|e| invalid(format!("the card's signature: {e}")))?;
    vc::check_validity(card, now_ms).map_err(|e| invalid(format!("the card: {e}")))?;
    if card["id"].as_str() != Some(did) {
        return Err(invalid(format!("the card at that URL is for {}, not {did}", card["id"])));
    }
    let keys: Vec<KeyEntry> =
        serde_json::from_value(card["keys"].clone()).map_err(|e| invalid(format!("the card's keys: {e}")))?;
    verify_history(did, &keys).map_err(invalid)?;
    if keys.last().map(|k| k.did.as_str()) != Some(verified.issuer_did.as_str()) {
        return Err(invalid("the card is not signed by the registry's current key".into()));
    }
    Ok(keys)
}

pub(crate) async fn fetch_json(state: &AppState, url: &str) -> Result<Value, Problem> {
    let unreachable = |e: String| Refusal::new(Code::PeerUnreachable, format!("{url}: {e}"));
    let response = state.http.get(url).send().await.map_err(|e| unreachable(e.to_string()))?;
    if !response.status().is_success() {
        return Err(unreachable(format!("answered {}", response.status())).into());
    }
    Ok(response.json::<Value>().await.map_err(|e| unreachable(e.to_string()))?)
}

/// Fetches a peer's card again after it may have rotated its key; stores the
/// longer history (it may only grow) and returns the updated peer.
pub async fn refresh_peer(state: &AppState, peer: &Peer) -> Option<Peer> {
    let card = fetch_json(state, &format!("{}/.well-known/bazaar", peer.url)).await.ok()?;
    let keys = verify_card(&card, peer.did.as_str(), state.now().ms()).ok()?;
    if keys.len() <= peer.keys.len() {
        return None;
    }
    if keys[..peer.keys.len()].iter().map(|k| &k.did).ne(peer.keys.iter().map(|k| &k.did)) {
        tracing::warn!(peer = %peer.did, "a peer's key history does not extend the stored one; ignored (re-add the peer to accept it)");
        return None;
    }
    let operator = state.store.member(&MemberId(bazaar_core::model::OPERATOR_ID.into())).await.ok()??;
    let updated = Peer { keys, ..peer.clone() };
    let op = Op::Federation(federation::Op::AddPeer { peer: updated.clone() });
    exec::receipt(state, operator, op).await.ok()?;
    tracing::info!(peer = %peer.did, keys = updated.keys.len(), "a peer rotated its key; its history was refreshed");
    Some(updated)
}

/// A signed POST of `body` to a peer's server-to-server `path`, and its answer
/// if the peer answered one it signed: `None` for no answer (unreachable, a
/// 5xx, a request still in flight there, or an unsigned or badly signed answer).
pub(crate) async fn signed_call(
    state: &AppState,
    peer: &Peer,
    path: &str,
    body: Vec<u8>,
) -> Option<(StatusCode, Value)> {
    let signature = s2s_header(state, "POST", path, &body);
    let sent = state
        .http
        .post(format!("{}{path}", peer.url))
        .header(S2S_HEADER, signature)
        .header("content-type", "application/json")
        .body(body)
        .send()
        .await;
    let response = sent.ok()?;
    let status = response.status();
    let header = response.headers().get(S2S_HEADER).cloned();
    let bytes = response.bytes().await.ok()?;
    if status.is_server_error() || status == StatusCode::CONFLICT && is_in_flight(&bytes) {
        return None;
    }
    let signed = check_s2s(header.as_ref(), &peer.keys, "RESPONSE", path, &bytes).is_ok()
        || match refresh_peer(state, peer).await {
            Some(fresh) => check_s2s(header.as_ref(), &fresh.keys, "RESPONSE", path, &bytes).is_ok(),
            None => false,
        };
    if !signed {
        tracing::warn!(peer = %peer.did, %status, "a peer's answer is not signed by its keys; treated as no answer");
        return None;
    }
    Some((status, serde_json::from_slice::<Value>(&bytes).ok()?))
}

/// A peer's problem+json answer as a refusal (its code if this build knows it).
pub(crate) fn refusal_of(json: &Value, unknown: Code) -> Refusal {
    let code = json["code"].as_str().unwrap_or_default();
    let code = Code::ALL.iter().copied().find(|c| c.as_str() == code).unwrap_or(unknown);
    let detail = json["detail"].as_str().unwrap_or("refused").to_string();
    Refusal::new(code, detail).with(json.get("facts").cloned().unwrap_or(Value::Null))
}

pub(crate) async fn call_issuer(state: &AppState, peer: &Peer, body: Vec<u8>) -> RelayResult {
    match signed_call(state, peer, FEDERATION_SETTLE_PATH, body).await {
        None => RelayResult::Unreachable,
        Some((status, json)) if status.is_success() => RelayResult::Settled(json),
        Some((_, json)) => RelayResult::Refused(refusal_of(&json, Code::RelayFailed)),
    }
}

fn is_in_flight(bytes: &[u8]) -> bool {
    serde_json::from_slice::<Value>(bytes).is_ok_and(|v| v["code"] == Code::IdempotencyInFlight.as_str())
}

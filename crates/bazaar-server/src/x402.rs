//! The registry as an x402 v2 facilitator for its own off-chain scheme.
//!
//! Scheme `apt` on network `bzr:<16 hex of SHA-256 of the registry DID>` (not
//! `bazaar`, which names an x402 discovery extension); asset `BNU`; `payTo` is
//! the merchant agent's DID; the payment payload is `{"token": "apt_…"}`, a
//! token the buyer's agent got from `POST /v1/tokens` for that merchant and
//! resource. The merchant calls `/x402/verify` and `/x402/settle` with its own
//! bearer credential (x402 clients send it through `createAuthHeaders`).
//! Business failures are `200` with `isValid: false` / `success: false` and a
//! reason, as the reference facilitator answers; settling is exactly once per
//! order, like `POST /v1/settlements`.

use crate::auth::{ApiJson, Auth};
use crate::exec::{idem_for, KeyRule};
use crate::problem::Problem;
use crate::state::AppState;
use axum::extract::State;
use axum::Json;
use bazaar_core::command::{Command, Op, Receipt};
use bazaar_core::model::TokenState;
use bazaar_core::pay;
use bazaar_core::token::TokenClaims;
use bazaar_types::{Amount, OrderId};
use bazaar_wire::registry as schema;
use serde::Deserialize;
use serde_json::{json, Value};
use std::sync::Arc;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

/// The scheme name this registry's facilitator speaks.
pub const SCHEME: &str = "apt";
pub const ASSET: &str = crate::NETWORK_UNIT;

/// The facilitator's routes, each with its OpenAPI entry.
pub fn routes() -> OpenApiRouter<Arc<AppState>> {
    OpenApiRouter::new().routes(routes!(supported)).routes(routes!(verify)).routes(routes!(settle))
}

/// This registry's x402 network id (CAIP-2: namespace `bzr`, a 16-hex reference).
pub fn network(state: &AppState) -> String {
    format!("bzr:{}", &bazaar_core::crypto::sha256_hex(state.registry.as_str().as_bytes())[..16])
}

/// Public: the kinds this facilitator verifies and settles.
#[utoipa::path(get, path = "/x402/supported", responses((status = 200, description = "x402 v2 supported kinds", body = schema::X402Supported)))]
pub async fn supported(State(state): State<Arc<AppState>>) -> Json<Value> {
    Json(json!({
        "kinds": [{"x402Version": 2, "scheme": SCHEME, "network": network(&state),
            "extra": {"registry": state.registry, "asset": ASSET}}],
        "extensions": [],
        "signers": {},
    }))
}

#[derive(Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct FacilitatorRequest {
    #[serde(default)]
    pub x402_version: Option<u32>,
    #[schema(value_type = Object)]
    pub payment_payload: Value,
    #[schema(value_type = Object)]
    pub payment_requirements: Value,
}

/// Why a payment is not valid: an x402 reason code and a sentence.
struct Invalid(&'static str, String);

/// The claims of a payment that passed every check this merchant can make before settling.
async fn check(state: &AppState, auth: &Auth, body: &FacilitatorRequest) -> Result<(TokenClaims, Amount), Invalid> {
    let version = body.x402_version.or(body.payment_payload["x402Version"].as_u64().map(|v| v as u32));
    if version != Some(2) {
        return Err(Invalid("invalid_x402_version", "Only x402 version 2 is supported.".into()));
    }
    let req = &body.payment_requirements;
    if req["scheme"] != SCHEME {
        return Err(Invalid("unsupported_scheme", format!("This facilitator speaks scheme `{SCHEME}`.")));
    }
    if req["network"].as_str() != Some(network(state).as_str()) {
        return Err(Invalid("invalid_network", format!("This facilitator settles on `{}`.", network(state))));
    }
    if req["asset"] != ASSET {
        return Err(Invalid("invalid_payment_requirements", format!("The asset is `{ASSET}`.")));
    }
    let amount = req["amount"]
        .as_str()
        .and_then(|a| a.parse::<u64>().ok())
        .filter(|a| *a > 0)
        .ok_or_else(|| Invalid("invalid_payment_requirements", "`amount` is a positive integer string.".into()))?;
    let token = body.payment_payload["payload"]["token"]
        .as_str()
        .ok_or_else(|| Invalid("invalid_payload", "The payload is {\"token\": \"apt_…\"}.".into()))?;
    let claims = state
        .decode_token(token)
        .map_err(|_| Invalid("invalid_payload", "The token is not one this registry signed.".into()))?;
    if claims.aud != auth.member.id || req["payTo"].as_str() != Some(claims.aud.as_str()) {
        return Err(Invalid(
            "wrong_merchant",
            "The token was minted for another merchant than the one paid (and calling).".into(),
        ));
    }
    let resource = body.payment_payload["resource"]["url"].as_str();
    if resource.is_some_and(|url| url != claims.res) {
        return Err(Invalid("wrong_resource", "The token was minted for another resource.".into()));
    }
    if amount > claims.max.0 {
        return Err(Invalid("insufficient_funds", "The token's maximum is below the amount.".into()));
    }
    let view = state.store.token(&claims.jti).await.ok().flatten();
    match view.map(|v| TokenState::of(&v.hold, state.now())) {
        Some(TokenState::Open) | Some(TokenState::Settled) => {}
        _ => return Err(Invalid("invalid_transaction_state", "The token is expired, voided or unknown.".into())),
    }
    Ok((claims, Amount(amount)))
}

/// The merchant (its bearer credential): would this payment settle?
#[utoipa::path(post, path = "/x402/verify", request_body = FacilitatorRequest, security(("credential" = []), ("session" = [])), responses((status = 200, description = "{isValid, payer} or {isValid: false, invalidReason}", body = schema::X402Verified)))]
pub async fn verify(
    State(state): State<Arc<AppState>>,
    auth: Auth,
    ApiJson(body): ApiJson<FacilitatorRequest>,
) -> Result<Json<schema::X402Verified>, Problem> {
    let verified = schema::X402Verified { is_valid: false, payer: None, invalid_reason: None, invalid_message: None };
    Ok(Json(match check(&state, &auth, &body).await {
        Ok((claims, _)) => schema::X402Verified { is_valid: true, payer: Some(claims.sub.to_string()), ..verified },
        Err(Invalid(reason, message)) => schema::X402Verified {
            invalid_reason: Some(reason.to_string()),
            invalid_message: Some(message),
            ..verified
        },
    }))
}

/// The merchant: settle this payment, exactly once per order.
#[utoipa::path(post, path = "/x402/settle", operation_id = "x402_settle", request_body = FacilitatorRequest, security(("credential" = []), ("session" = [])), responses((status = 200, description = "{success, transaction, network, payer, amount}", body = schema::X402Settled)))]
pub async fn settle(
    State(state): State<Arc<AppState>>,
    auth: Auth,
    ApiJson(body): ApiJson<FacilitatorRequest>,
) -> Result<Json<schema::X402Settled>, Problem> {
    let network = network(&state);
    let failed = |reason: &str, message: String| schema::X402Settled {
        success: false,
        transaction: String::new(),
        network: network.clone(),
        payer: None,
        amount: None,
        error_reason: Some(reason.to_string()),
        error_message: Some(message),
    };
    let settled = |transaction: &str, payer: String, amount: String| schema::X402Settled {
        success: true,
        transaction: transaction.to_string(),
        network: network.clone(),
        payer: Some(payer),
        amount: Some(amount),
        error_reason: None,
        error_message: None,
    };
    let (claims, amount) = match check(&state, &auth, &body).await {
        Ok(checked) => checked,
        Err(Invalid(reason, message)) => return Ok(Json(failed(reason, message))),
    };
    let request =
        json!({"token": body.payment_payload["payload"]["token"], "amount_minor": amount, "order_id": claims.ord});
    let key = KeyRule::DefaultTo(pay::settle_key(&claims.jti));
    let idem = idem_for(&auth.member, "settle", &axum::http::HeaderMap::new(), key, &request)?;
    let op = Op::Pay(pay::Op::Settle { claims: claims.clone(), amount, order_id: OrderId(claims.ord.to_string()) });
    crate::exec::spending_allowed(&op)?;
    let applied = state.store.submit(Command { actor: auth.member.clone(), idem, op }).await?;
    Ok(Json(match applied.outcome {
        Ok(Receipt::Pay(pay::Receipt::Settled(receipt))) => {
            settled(&receipt.settlement.row.settlement_id, claims.sub.to_string(), amount.0.to_string())
        }
        // A settlement recorded before receipts were tagged replays as its JSON.
        Ok(receipt) => settled(
            receipt.to_json()["settlement_id"].as_str().unwrap_or_default(),
            claims.sub.to_string(),
            amount.0.to_string(),
        ),
        // A settled token replays its settlement: the same transaction.
        Err(refusal) if refusal.code.as_str() == "token_settled" => settled(
            refusal.facts["settlement_id"].as_str().unwrap_or_default(),
            claims.sub.to_string(),
            refusal.facts["amount_minor"].as_u64().unwrap_or(amount.0).to_string(),
        ),
        Err(refusal) => failed("invalid_transaction_state", format!("{}: {}", refusal.code.as_str(), refusal.detail)),
    }))
}

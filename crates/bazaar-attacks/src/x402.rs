//! x402's attacks: the registry's facilitator settling a token minted for another merchant or resource.

use super::{snapshot, Attempt, Cast, Measured, PRICE_MINOR};
use anyhow::Result;
use bazaar_sdk::Body;
use serde_json::{json, Value};

/// The merchant settles, through the registry's x402 facilitator, a token the
/// buyer minted for another merchant (or for another resource of this one).
pub(super) async fn x402_foreign_token(cast: &Cast, other_resource: bool) -> Result<Measured> {
    let card = cast.operator.well_known().await?;
    let network = card.x402.network;
    let merchant_did = cast.merchant.me().await?.member.id;
    let resource = "https://shop.example/forecast";
    let (payee, minted_for) = if other_resource {
        (cast.merchant_handle.clone(), "https://shop.example/other")
    } else {
        (cast.other_handle.clone(), resource)
    };
    let token = cast.buyer.issue_token(&payee, PRICE_MINOR, "x402-1", minted_for).await?;
    let request = json!({"x402Version": 2,
        "paymentPayload": {"x402Version": 2, "resource": {"url": resource}, "payload": {"token": token.body.token}},
        "paymentRequirements": {"scheme": "apt", "network": network, "amount": PRICE_MINOR.to_string(), "asset": "BNU",
            "payTo": merchant_did, "maxTimeoutSeconds": 900}});
    let tried = if other_resource {
        "settle an x402 payment with a token minted for another resource"
    } else {
        "settle an x402 payment with a token minted for another merchant"
    };
    measured!(cast, tried, async {
        Ok(cast
            .merchant
            .call::<Value>(reqwest::Method::POST, "/x402/settle", Some(Body::json(request.clone())), None)
            .await?
            .body)
    })
}

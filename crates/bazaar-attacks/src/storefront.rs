//! The storefront's attacks: offers outside a listing's terms, an agent approving its own order, a proof for
//! another maker's share, a share proved twice.

use super::{snapshot, Attempt, Cast, Measured};
use anyhow::{Context, Result};
use bazaar_sdk::wire::market::SharePaid;
use bazaar_sdk::{Body, Client, SdkError};
use serde_json::{json, Value};

/// Units per maker and the buyer's cap in the storefront attacks (within the cast's per-call ceiling).
pub(super) const SHARE_UNITS: u64 = 2;
pub(super) const UNIT_PRICE_MINOR: u64 = 200;

/// Lists a product for `maker` whose words are unique to this cast; returns the listing id.
pub(super) async fn list_for(cast: &Cast, maker: &Client, sku: &str) -> Result<String> {
    let listing = bazaar_sdk::wire::market::ListingRequest {
        sku: sku.into(),
        title: format!("widget {}", cast.tag),
        list_price_minor: 220,
        floor_minor: 180,
        max_discount_bps: 1000,
        capacity_per_day: 1,
        capacity_max: 5,
        lead_time_days: 1,
        notice_days: 2,
        language: "en".into(),
        ..Default::default()
    };
    Ok(maker.put_listing(&listing).await?.id)
}

/// The buyer's request for `SHARE_UNITS × makers` widgets of this cast, due in 10 days.
pub(super) async fn open_rfq(cast: &Cast, quantity: u64) -> Result<String> {
    let deadline = bazaar_sdk::clock::now_ms() + 10 * 86_400_000;
    let ask = json!({"item": format!("widget {}", cast.tag), "quantity": quantity,
        "max_unit_price_minor": UNIT_PRICE_MINOR + 20, "deadline_ms": deadline});
    let key = format!("rfq-{}", cast.tag);
    let rfq = cast.buyer.call::<Value>(reqwest::Method::POST, "/v1/rfqs", Some(Body::json(ask)), Some(&key)).await?;
    rfq.body["id"].as_str().map(str::to_string).context("rfq id")
}

pub(super) async fn propose(
    maker: &Client,
    rfq: &str,
    listing: &str,
    price: u64,
    quantity: u64,
) -> Result<Value, SdkError> {
    let body = json!({"listing": listing, "unit_price_minor": price, "quantity": quantity});
    Ok(maker
        .call::<Value>(reqwest::Method::POST, &format!("/v1/rfqs/{rfq}/offers"), Some(Body::json(body)), None)
        .await?
        .body)
}

#[derive(Clone, Copy)]
pub(super) enum OfferAttack {
    BelowFloor,
    AboveCap,
    BeyondCapacity,
    FourthRevision,
}

pub(super) async fn offer_attack(cast: &Cast, kind: OfferAttack) -> Result<Measured> {
    let listing = list_for(cast, &cast.merchant, "w-1").await?;
    let rfq = open_rfq(cast, SHARE_UNITS * 5).await?;
    let (tried, price, quantity) = match kind {
        OfferAttack::BelowFloor => ("offer below the maker's own lowest price", 100, SHARE_UNITS),
        OfferAttack::AboveCap => ("offer above the buyer's cap", UNIT_PRICE_MINOR + 50, SHARE_UNITS),
        OfferAttack::BeyondCapacity => ("offer more than the maker can make by the deadline", UNIT_PRICE_MINOR, 9),
        OfferAttack::FourthRevision => {
            for price in [100, 110, 120] {
                let _ = propose(&cast.merchant, &rfq, &listing, price, SHARE_UNITS).await;
            }
            ("revise a refused offer a fourth time", UNIT_PRICE_MINOR, SHARE_UNITS)
        }
    };
    measured!(cast, tried, async { propose(&cast.merchant, &rfq, &listing, price, quantity).await })
}

/// An order from this cast's buyer: one or two makers' shares, the owner's
/// policy making it wait for a person. Returns (order id, shares by maker).
pub(super) async fn placed_order(cast: &Cast, makers: &[&Client]) -> Result<String> {
    let mut listings = Vec::new();
    for (n, maker) in makers.iter().enumerate() {
        listings.push(list_for(cast, maker, &format!("w-{n}")).await?);
    }
    let rfq = open_rfq(cast, SHARE_UNITS * makers.len() as u64).await?;
    for (maker, listing) in makers.iter().zip(&listings) {
        propose(maker, &rfq, listing, UNIT_PRICE_MINOR, SHARE_UNITS).await?;
    }
    cast.buyer.call::<Value>(reqwest::Method::POST, &format!("/v1/rfqs/{rfq}/close"), None, None).await?;
    let buyer_handle = format!("buy-{}", cast.tag);
    let policy = json!({"approval_above_minor": 0});
    let path = format!("/v1/agents/{buyer_handle}/order-policy");
    cast.owner.call::<Value>(reqwest::Method::PUT, &path, Some(Body::json(policy)), None).await?;
    let key = format!("order-{}", cast.tag);
    let order = cast
        .buyer
        .call::<Value>(reqwest::Method::POST, "/v1/orders", Some(Body::json(json!({"rfq": rfq}))), Some(&key))
        .await?;
    order.body["id"].as_str().map(str::to_string).context("order id")
}

pub(super) async fn agent_self_approval(cast: &Cast) -> Result<Measured> {
    let order = placed_order(cast, &[&cast.merchant]).await?;
    measured!(cast, "the buyer agent approves its own order", async {
        Ok(cast
            .buyer
            .call::<Value>(reqwest::Method::POST, &format!("/v1/orders/{order}/approve"), None, None)
            .await?
            .body)
    })
}

pub(super) async fn prove(maker: &Client, order: &str, share: u32, tracking: &str) -> Result<SharePaid, SdkError> {
    maker.prove_shipment(order, share, tracking, "image/jpeg", format!("receipt {order} {share}").into_bytes()).await
}

/// Which share in `order` is `maker`'s.
pub(super) async fn share_of(cast: &Cast, order: &str, maker: &Client) -> Result<u32> {
    let me = maker.me().await?.member.id;
    let shown = cast.buyer.call::<Value>(reqwest::Method::GET, &format!("/v1/orders/{order}"), None, None).await?.body;
    let lines = shown["lines"].as_array().context("lines")?;
    let index = lines.iter().position(|l| l["seller"] == me.as_str()).context("the maker has a share")?;
    Ok(index as u32)
}

pub(super) async fn approved_order(cast: &Cast) -> Result<String> {
    let order = placed_order(cast, &[&cast.merchant, &cast.other_merchant]).await?;
    cast.owner.call::<Value>(reqwest::Method::POST, &format!("/v1/orders/{order}/approve"), None, None).await?;
    Ok(order)
}

pub(super) async fn proof_for_another(cast: &Cast) -> Result<Measured> {
    let order = approved_order(cast).await?;
    let theirs = share_of(cast, &order, &cast.merchant).await?;
    measured!(cast, "a maker submits proof of shipment for another maker's share", async {
        prove(&cast.other_merchant, &order, theirs, "TRACK-OTHER").await
    })
}

pub(super) async fn share_twice(cast: &Cast) -> Result<Measured> {
    let order = approved_order(cast).await?;
    let mine = share_of(cast, &order, &cast.merchant).await?;
    prove(&cast.merchant, &order, mine, "TRACK-1").await?;
    measured!(cast, "a maker is paid for the same share twice", async {
        prove(&cast.merchant, &order, mine, "TRACK-2").await
    })
}

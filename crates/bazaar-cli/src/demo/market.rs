//! The storefront chapter of `bazaar demo`: a hotel's buyer agent asks for 40
//! hand-embroidered cushion covers at no more than 3000 each, due in 30 days.
//! Five makers list them with different floors, capacities, notice and
//! languages. Code checks every offer: one refused below her floor and revised,
//! one refused above the cap and revised, one who cannot meet the notice. The
//! allocation fills the order cheapest first across four makers. The order
//! waits for the owner's approval on the link (the agent's own attempt is
//! refused); each maker is told in her language (one in English, for want of
//! a translation), uploads her courier receipt and is paid on that proof.

use anyhow::{ensure, Context, Result};
use bazaar_sdk::{Body, Client, SdkError};
use bazaar_stage::{enroll_pair, member_id, refusal_code, LocalRegistry};
use serde::Serialize;
use serde_json::{json, Value};

pub const QUANTITY: u64 = 40;
pub const CAP_MINOR: u64 = 3_000;
/// The owner's policy: orders above this wait for a person.
pub const APPROVAL_ABOVE_MINOR: u64 = 50_000;

struct Maker {
    handle: &'static str,
    language: &'static str,
    list: u64,
    floor: u64,
    discount_bps: u32,
    per_day: u64,
    max: u64,
    notice_days: u32,
    /// The proposals she makes, in order: (unit price, units).
    proposals: &'static [(u64, u64)],
}

const MAKERS: &[Maker] = &[
    Maker {
        handle: "amara",
        language: "hi",
        list: 3_200,
        floor: 2_400,
        discount_bps: 2_000,
        per_day: 2,
        max: 20,
        notice_days: 7,
        proposals: &[(2_500, 20), (2_600, 20)],
    },
    Maker {
        handle: "lucia",
        language: "es-MX",
        list: 3_000,
        floor: 2_800,
        discount_bps: 1_000,
        per_day: 1,
        max: 12,
        notice_days: 5,
        proposals: &[(2_850, 12)],
    },
    Maker {
        handle: "chloe",
        language: "fr",
        list: 2_900,
        floor: 2_000,
        discount_bps: 1_000,
        per_day: 3,
        max: 30,
        notice_days: 45,
        proposals: &[(2_400, 20)],
    },
    Maker {
        handle: "priya",
        language: "hi",
        list: 2_900,
        floor: 2_200,
        discount_bps: 2_500,
        per_day: 1,
        max: 8,
        notice_days: 3,
        proposals: &[(3_100, 8), (2_750, 8)],
    },
    Maker {
        handle: "nomvula",
        language: "zu",
        list: 3_100,
        floor: 2_600,
        discount_bps: 1_000,
        per_day: 2,
        max: 10,
        notice_days: 10,
        proposals: &[(2_800, 10)],
    },
];

#[derive(Debug, Serialize)]
pub struct MarketReport {
    /// (maker, unit price, units, code or "valid") for every proposal.
    pub proposals: Vec<(String, u64, u64, String)>,
    pub allocation: Value,
    pub agent_approval_code: String,
    pub order: Value,
    /// (maker, language, fell back to English, paid net).
    pub paid: Vec<(String, String, bool, u64)>,
    pub unmet: Value,
}

/// A maker's agent and her listing's id and DID, in the order of [`MAKERS`].
pub(crate) struct Listed {
    client: Client,
    listing: String,
    did: String,
}

/// The story up to the order waiting at its approval link: the cast, the request and its order.
pub struct Staged {
    makers: Vec<Listed>,
    pub hotel: Client,
    pub buyer: Client,
    pub rfq_id: String,
    pub unmet: Value,
    pub proposals: Vec<(String, u64, u64, String)>,
    pub allocation: Value,
}

/// Enrols the cast (every handle and key ends in `suffix`, so the story runs again on one registry),
/// lists, asks, collects the offers and closes the request: everything before the order.
pub async fn stage(operator: &Client, now_ms: i64, suffix: &str, say: &(dyn Fn(String) + Sync)) -> Result<Staged> {
    let makers = list_makers(operator, suffix, say).await?;
    let (hotel, buyer) = hotel(operator, suffix).await?;
    let (rfq_id, unmet) = search_and_ask(now_ms, &buyer, suffix, say).await?;
    let proposals = collect_offers(&makers, &rfq_id, suffix, say).await?;
    let closed =
        buyer.call::<Value>(reqwest::Method::POST, &format!("/v1/rfqs/{rfq_id}/close"), None, None).await?.body;
    let allocation = closed["allocation"].clone();
    Ok(Staged { makers, hotel, buyer, rfq_id, unmet, proposals, allocation })
}

/// The staged request's allocation ordered by the agent: the order, waiting for a person.
pub async fn place_order(staged: &Staged, suffix: &str) -> Result<Value> {
    let key = format!("order-cushions-1{suffix}");
    let body = json!({"rfq": staged.rfq_id});
    let order =
        staged.buyer.call::<Value>(reqwest::Method::POST, "/v1/orders", Some(Body::json(body)), Some(&key)).await?.body;
    ensure!(order["state"] == "awaiting_approval", "the order should wait for approval: {order}");
    Ok(order)
}

pub async fn market_story(local: &LocalRegistry, say: &(dyn Fn(String) + Sync)) -> Result<MarketReport> {
    say("\n— the storefront: forty cushion covers —".into());
    let operator = local.operator();
    let now = bazaar_types::Clock::now(local.clock.as_ref()).ms();
    let staged = stage(&operator, now, "", say).await?;
    let Staged { makers, buyer, unmet, proposals, allocation, .. } = &staged;
    say(format!(
        "allocation, cheapest valid offer first: {} — {} filled, {} unfilled, total {}",
        allocation["lines"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|l| format!("{} × {}", l["units"], l["unit_price"]))
            .collect::<Vec<_>>()
            .join(", "),
        allocation["filled"],
        allocation["unfilled"],
        allocation["total"]
    ));
    let (order_id, approved, agent_approval_code) = order_and_approve(local, &staged, say).await?;
    let paid = ship_and_pay(makers, &order_id, &approved, say).await?;
    let order = buyer.call::<Value>(reqwest::Method::GET, &format!("/v1/orders/{order_id}"), None, None).await?.body;
    say(format!(
        "order {}: {}; paid {} to makers, {} in fees; tracking on the order: {}",
        order_id,
        order["state"].as_str().unwrap_or_default(),
        order["paid_net"],
        order["fees"],
        order["lines"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|l| l["proof"]["tracking"].as_str())
            .collect::<Vec<_>>()
            .join(", ")
    ));
    Ok(MarketReport {
        proposals: proposals.clone(),
        allocation: allocation.clone(),
        agent_approval_code,
        order,
        paid,
        unmet: unmet.clone(),
    })
}

/// Each maker enrolls and lists her cushion covers.
pub(crate) async fn list_makers(operator: &Client, suffix: &str, say: &(dyn Fn(String) + Sync)) -> Result<Vec<Listed>> {
    let mut makers = Vec::new();
    for maker in MAKERS {
        let handle = format!("{}{suffix}", maker.handle);
        let (_, client) = enroll_pair(operator, &format!("{handle}-home"), &handle).await?;
        let listing = bazaar_sdk::wire::market::ListingRequest {
            sku: "cushion-cover".into(),
            title: "Hand-embroidered cushion cover".into(),
            description: "Cotton, 45 × 45 cm, embroidered by hand.".into(),
            tags: ["cushion", "embroidery", "textile"].map(String::from).to_vec(),
            list_price_minor: maker.list,
            floor_minor: maker.floor,
            max_discount_bps: maker.discount_bps,
            capacity_per_day: maker.per_day,
            capacity_max: maker.max,
            lead_time_days: 2,
            notice_days: maker.notice_days,
            language: maker.language.into(),
        };
        let listed = client.put_listing(&listing).await?;
        say(format!(
            "  {:<8} ({:<5}) lists at {}, lowest {}, {} a day up to {}, needs {} days' notice",
            maker.handle,
            maker.language,
            maker.list,
            listed.lowest_price_minor,
            maker.per_day,
            maker.max,
            maker.notice_days
        ));
        let did = member_id(&client).await?;
        makers.push(Listed { client, listing: listed.id, did });
    }
    Ok(makers)
}

/// The hotel and its funded procurement agent, whose orders above
/// [`APPROVAL_ABOVE_MINOR`] wait for a person.
pub(crate) async fn hotel(operator: &Client, suffix: &str) -> Result<(Client, Client)> {
    let agent = format!("hotel-procurement{suffix}");
    let (hotel, buyer) = enroll_pair(operator, &format!("seaside-hotel{suffix}"), &agent).await?;
    operator.mint(&member_id(&hotel).await?, 150_000, &format!("market-mint{suffix}")).await?;
    hotel.fund(&agent, 150_000, &format!("market-fund{suffix}")).await?;
    hotel.set_budget(&agent, 150_000, 150_000, 150_000).await?;
    let policy = json!({"approval_above_minor": APPROVAL_ABOVE_MINOR});
    hotel
        .call::<Value>(
            reqwest::Method::PUT,
            &format!("/v1/agents/{agent}/order-policy"),
            Some(Body::json(policy)),
            None,
        )
        .await?;
    Ok((hotel, buyer))
}

/// The agent searches (once for something nobody sells) and asks for quotes;
/// returns the request's id and the unmet demand.
async fn search_and_ask(
    now: i64,
    buyer: &Client,
    suffix: &str,
    say: &(dyn Fn(String) + Sync),
) -> Result<(String, Value)> {
    let found = buyer.search("embroidered cushion covers").await?;
    buyer.search("linen napkins").await?;
    let unmet = buyer.unmet_searches().await?;
    say(format!(
        "the hotel's agent searches: {} listings for \"embroidered cushion covers\"; nobody sells \"linen napkins\" (unmet demand: {})",
        found.listings.len(),
        unmet.unmet.len()
    ));
    let ask = json!({"item": "hand-embroidered cushion covers", "quantity": QUANTITY,
        "max_unit_price_minor": CAP_MINOR, "deadline_ms": now + 30 * 86_400_000});
    let key = format!("cushions-1{suffix}");
    let rfq = buyer.call::<Value>(reqwest::Method::POST, "/v1/rfqs", Some(Body::json(ask)), Some(&key)).await?.body;
    let rfq_id = rfq["id"].as_str().context("rfq id")?.to_string();
    say(format!(
        "it asks for {QUANTITY} at no more than {CAP_MINOR} each, due in 30 days: {} makers invited",
        rfq["invited"].as_array().map_or(0, |i| i.len())
    ));
    Ok((rfq_id, crate::wire_json(&unmet)))
}

/// Every maker's proposals in turn, each checked by the registry.
pub(crate) async fn collect_offers(
    makers: &[Listed],
    rfq_id: &str,
    suffix: &str,
    say: &(dyn Fn(String) + Sync),
) -> Result<Vec<(String, u64, u64, String)>> {
    let mut proposals = Vec::new();
    for (maker, Listed { client, listing, .. }) in MAKERS.iter().zip(makers) {
        for (price, units) in maker.proposals {
            let body = json!({"listing": listing, "unit_price_minor": price, "quantity": units});
            let answer = client
                .call::<Value>(
                    reqwest::Method::POST,
                    &format!("/v1/rfqs/{rfq_id}/offers"),
                    Some(Body::json(body)),
                    None,
                )
                .await;
            let verdict = match &answer {
                Ok(_) => "valid".to_string(),
                Err(SdkError::Problem { code, .. }) => code.clone(),
                Err(error) => anyhow::bail!("{}: {error}", maker.handle),
            };
            let numbers = match &answer {
                Err(SdkError::Problem { body, .. }) => numbers_of(&body["facts"]),
                _ => String::new(),
            };
            say(format!("  {:<8} offers {units} at {price}: {verdict}{numbers}", maker.handle));
            proposals.push((format!("{}{suffix}", maker.handle), *price, *units, verdict));
        }
    }
    Ok(proposals)
}

/// The agent orders the allocation; its own approval is refused and the owner
/// approves. Returns the order's id, the approved order and the refusal code.
async fn order_and_approve(
    local: &LocalRegistry,
    staged: &Staged,
    say: &(dyn Fn(String) + Sync),
) -> Result<(String, Value, String)> {
    let (hotel, buyer) = (&staged.hotel, &staged.buyer);
    let order = place_order(staged, "").await?;
    let order_id = order["id"].as_str().context("order id")?.to_string();
    let approve = format!("/v1/orders/{order_id}/approve");
    let agent_approval_code = refusal_code(buyer.call::<Value>(reqwest::Method::POST, &approve, None, None).await);
    say(format!(
        "the order ({} > {APPROVAL_ABOVE_MINOR}) waits for a person at {}{}; the agent's own approval is refused: {agent_approval_code}",
        order["total"], local.url, order["approval_url"].as_str().unwrap_or_default()
    ));
    let approved = hotel.call::<Value>(reqwest::Method::POST, &approve, None, None).await?.body;
    say(format!(
        "the hotel's owner approves on the link: one authorization holds {} on the agent's budget",
        approved["total"]
    ));
    Ok((order_id, approved, agent_approval_code))
}

/// Each allocated maker is told in her language, proves her shipment and is
/// paid on that proof: (maker, language, fell back to English, paid net).
async fn ship_and_pay(
    makers: &[Listed],
    order_id: &str,
    approved: &Value,
    say: &(dyn Fn(String) + Sync),
) -> Result<Vec<(String, String, bool, u64)>> {
    let mut paid = Vec::new();
    for line in approved["lines"].as_array().into_iter().flatten() {
        let seller = line["seller"].as_str().unwrap_or_default();
        let Some((maker, Listed { client, .. })) = MAKERS.iter().zip(makers).find(|(_, m)| m.did == seller) else {
            continue;
        };
        let note = &line["notification"];
        say(format!(
            "  {} is told in {}{}: \"{}\"",
            maker.handle,
            note["language"].as_str().unwrap_or_default(),
            if note["fallback"] == true { " (no translation yet: English)" } else { "" },
            note["text"].as_str().unwrap_or_default()
        ));
        let share = line["index"].as_u64().unwrap_or_default();
        let tracking = format!("TRK{}{share:03}", maker.handle.to_uppercase());
        let receipt = format!("courier receipt photo for {} share {share}", maker.handle).into_bytes();
        let body = client
            .prove_shipment(order_id, share as u32, &tracking, "image/jpeg", receipt)
            .await
            .with_context(|| format!("{}'s proof", maker.handle))?;
        let net = body.payment["net_minor"].as_u64().unwrap_or_default();
        say(format!("  {} uploads her courier receipt ({tracking}) and is paid {net} on that proof", maker.handle));
        let language = note["language"].as_str().unwrap_or_default().to_string();
        paid.push((maker.handle.to_string(), language, note["fallback"] == true, net));
    }
    Ok(paid)
}

/// The numbers a refusal carries, as a short parenthesis.
fn numbers_of(facts: &Value) -> String {
    let mut parts = Vec::new();
    for key in ["lowest_price_minor", "max_unit_price_minor", "notice_days", "days_left", "deliverable"] {
        if let Some(value) = facts.get(key) {
            parts.push(format!("{key} {value}"));
        }
    }
    if parts.is_empty() {
        String::new()
    } else {
        format!(" ({})", parts.join(", "))
    }
}

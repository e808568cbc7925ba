//! The federation chapter of `bazaar demo`, after the restock story and the
//! escrowed order on the same registry (A):
//!
//! 1. the wholesaler asks A for a trust passport and it is verified offline
//!    against A's published key history; one changed number breaks it;
//! 2. a second registry (B) starts; each operator recognises the other;
//! 3. A's procurement agent, which B has never seen, pays a translator agent on
//!    B per call: A holds the funds, the translator settles through B, B relays
//!    to A; a retry is charged nothing; A's corridor account for B and B's for
//!    A mirror each other;
//! 4. the translator carries B's passport to A, where it counts at B's weight,
//!    shown apart from A's local figures; both audits pass.

use anyhow::{ensure, Result};
use axum::routing::post;
use axum::{Extension, Json, Router};
use bazaar_core::federation::verify_passport;
use bazaar_core::reputation::PPM;
use bazaar_sdk::paid::{paid, PaidRoute, Settled};
use bazaar_sdk::{did_of, generate_key, Client};
use bazaar_stage::{audit_word, enroll_pair_with_key, member_id, peer_registry, serve, LocalRegistry};
use serde::Serialize;
use serde_json::{json, Value};
use std::sync::Arc;

/// The translator's price per call on registry B.
pub const TRANSLATE_MINOR: u64 = 300;
/// How much each registry counts the other's passports, in basis points.
pub const PEER_WEIGHT_BPS: u32 = 5_000;
/// B's fee on settlements relayed from A's buyers.
pub const CORRIDOR_FEE_BPS: u32 = 100;
/// Corridor limits each side grants the other.
const PER_CALL_MAX_MINOR: u64 = 10_000;
const OUTSTANDING_MAX_MINOR: u64 = 1_000_000;

#[derive(Debug, Serialize)]
pub struct FederationReport {
    pub passport: Value,
    pub passport_valid: bool,
    pub tampered_code: String,
    pub cross_status: u16,
    pub cross_retry_replayed: bool,
    /// `corridor:<B>` on A and `corridor:<A>` on B.
    pub corridor_on_a: i128,
    pub corridor_on_b: i128,
    pub translator_received_minor: i128,
    pub buyer_known_to_b: bool,
    pub imported: Value,
    pub audits_ok: bool,
}

/// What the cross-registry call showed.
struct Crossed {
    translator: Client,
    translator_key: ed25519_dalek::SigningKey,
    cross_status: u16,
    cross_retry_replayed: bool,
    corridor_on_a: i128,
    corridor_on_b: i128,
    translator_received_minor: i128,
    buyer_known_to_b: bool,
}

pub async fn federation_story(
    a: &LocalRegistry,
    wholesaler: &Client,
    buyer: &Client,
    dir: &std::path::Path,
    say: &(dyn Fn(String) + Sync),
) -> Result<FederationReport> {
    say("\n— passports and a second registry (on the story's clock, which the escrow chapter moved days ahead) —"
        .into());
    let (passport, tampered_code) = check_passport(a, wholesaler, say).await?;
    let b = recognise_peer(a, dir, say).await?;
    let crossed = pay_across(a, &b, buyer, dir, say).await?;
    let imported = import_passport(a, &crossed, say).await?;
    let report_a = bazaar_store::audit::audit(a.state.store.as_ref(), &|_| {}).await?;
    let report_b = bazaar_store::audit::audit(b.state.store.as_ref(), &|_| {}).await?;
    say(format!(
        "audit A: {} ({} passport(s) rechecked); audit B: {} ({} passport(s) rechecked)",
        audit_word(report_a.ok),
        report_a.passports_checked,
        audit_word(report_b.ok),
        report_b.passports_checked
    ));
    Ok(FederationReport {
        passport,
        passport_valid: true,
        tampered_code,
        cross_status: crossed.cross_status,
        cross_retry_replayed: crossed.cross_retry_replayed,
        corridor_on_a: crossed.corridor_on_a,
        corridor_on_b: crossed.corridor_on_b,
        translator_received_minor: crossed.translator_received_minor,
        buyer_known_to_b: crossed.buyer_known_to_b,
        imported,
        audits_ok: report_a.ok && report_b.ok,
    })
}

/// Step 1: a passport for the wholesaler, checked offline; returns it and the code
/// the copy with a raised score is refused with.
async fn check_passport(
    a: &LocalRegistry,
    wholesaler: &Client,
    say: &(dyn Fn(String) + Sync),
) -> Result<(Value, String)> {
    // Read as signed JSON: the offline check runs over the document as issued.
    let passport = serde_json::to_value(wholesaler.passport(None).await?)?;
    let registry_a = a.state.registry.to_string();
    // The story's clock (it ran days ahead during the escrow chapter); B shares it.
    let now = bazaar_types::Clock::now(a.clock.as_ref()).ms();
    let info = verify_passport(&passport, now, &[(registry_a.clone(), a.state.key_history())])
        .map_err(|r| anyhow::anyhow!("the wholesaler's passport: {}", r.detail))?;
    let figures = &passport["credentialSubject"];
    say(format!(
        "the wholesaler's trust passport (VC 2.0, eddsa-jcs-2022, valid until {}): {} calls settled, counted as {} weighted successes — one buyer owner adds at most one a week — score {} bps, lower bound {} bps, {} distinct buyer owner(s); computed at ledger seq {}",
        passport["validUntil"].as_str().unwrap_or(""),
        figures["settledCount"], two_decimals(info.figures.weighted_success_ppm), figures["scoreBps"],
        figures["scoreLowerBoundBps"], figures["distinctBuyerOwners"], info.as_of_seq
    ));
    let mut tampered = passport.clone();
    tampered["credentialSubject"]["scoreBps"] = json!(10_000);
    let tampered_code = verify_passport(&tampered, now, &[(registry_a, a.state.key_history())])
        .err()
        .map(|r| r.code.as_str().to_string())
        .unwrap_or_else(|| "ACCEPTED".into());
    say(format!("verified offline against A's key history: valid; with the score raised to 10000: {tampered_code}"));
    Ok((passport, tampered_code))
}

/// Step 2: registry B starts on A's clock, and each operator recognises the other.
async fn recognise_peer(
    a: &LocalRegistry,
    dir: &std::path::Path,
    say: &(dyn Fn(String) + Sync),
) -> Result<LocalRegistry> {
    let b = peer_registry(a, &dir.join("registry-b"), None).await?;
    let registry_b = b.state.registry.to_string();
    let terms = (CORRIDOR_FEE_BPS, PER_CALL_MAX_MINOR, OUTSTANDING_MAX_MINOR);
    let a_terms = (0, PER_CALL_MAX_MINOR, OUTSTANDING_MAX_MINOR);
    a.operator().add_peer(&b.url, &registry_b, PEER_WEIGHT_BPS, a_terms).await?;
    b.operator().add_peer(&a.url, &a.state.registry.to_string(), PEER_WEIGHT_BPS, terms).await?;
    say(format!(
        "registry B {} on {}; each operator checked the other's signed card and recognised it (weight {PEER_WEIGHT_BPS} bps; B takes {CORRIDOR_FEE_BPS} bps on relayed settlements)",
        registry_b, b.url
    ));
    Ok(b)
}

/// Step 3: a translator on B, paid per call by A's procurement agent, once and then
/// again with the same order; the corridors on both sides are read back.
async fn pay_across(
    a: &LocalRegistry,
    b: &LocalRegistry,
    buyer: &Client,
    dir: &std::path::Path,
    say: &(dyn Fn(String) + Sync),
) -> Result<Crossed> {
    let (registry_a, registry_b) = (a.state.registry.to_string(), b.state.registry.to_string());
    let translator_key = generate_key();
    let (_, translator) = enroll_pair_with_key(&b.operator(), "lingua", "translator", &translator_key).await?;
    let translator_did = did_of(&translator_key);
    let route = PaidRoute::new(translator.clone(), TRANSLATE_MINOR, &dir.join("translator-receipts.db"))?;
    let shop = serve(paid_front("/translate", Arc::new(route), ("menu", "carte du jour"))).await?;
    let buyer_known_to_b = b.operator().member(&member_id(buyer).await?).await.is_ok();
    let url = format!("{shop}/translate");
    let paid = buyer.pay_via(&url, &translator_did, Some(&registry_b), TRANSLATE_MINOR, "menu-0001").await?;
    ensure!(paid.status == 200, "cross-registry call failed: {} {}", paid.status, paid.body);
    let retry = buyer.pay_via(&url, &translator_did, Some(&registry_b), TRANSLATE_MINOR, "menu-0001").await?;
    let report_a = bazaar_store::audit::audit(a.state.store.as_ref(), &|_| {}).await?;
    let report_b = bazaar_store::audit::audit(b.state.store.as_ref(), &|_| {}).await?;
    let corridor_on_a = report_a.corridors.get(&format!("corridor:{registry_b}")).copied().unwrap_or(0);
    let corridor_on_b = report_b.corridors.get(&format!("corridor:{registry_a}")).copied().unwrap_or(0);
    let translator_received_minor = translator.me().await?.balance_minor.unwrap_or(0) as i128;
    say(format!(
        "procurement (on A, never seen by B: {}) paid the translator on B {TRANSLATE_MINOR} for one call: A held and debited the buyer, the translator settled through B, B relayed to A over signed requests; a retry of the same order was answered from the work receipt ({})",
        if buyer_known_to_b { "it was" } else { "no member there" },
        if retry.replayed { "replayed, charged nothing" } else { "NOT replayed" }
    ));
    say(format!(
        "corridors: A's corridor:B = {corridor_on_a}, B's corridor:A = {corridor_on_b} (they mirror); translator received {translator_received_minor}"
    ));
    Ok(Crossed {
        translator,
        translator_key,
        cross_status: paid.status,
        cross_retry_replayed: retry.replayed,
        corridor_on_a,
        corridor_on_b,
        translator_received_minor,
        buyer_known_to_b,
    })
}

/// Step 4: the translator's passport from B counts at A at B's weight; returns A's imports.
async fn import_passport(a: &LocalRegistry, crossed: &Crossed, say: &(dyn Fn(String) + Sync)) -> Result<Value> {
    let passport_b = crossed.translator.passport(None).await?;
    let at = bazaar_types::Clock::now(a.clock.as_ref()).ms();
    let operator_a = a.operator();
    let registry_a = a.state.registry.to_string();
    operator_a.with_credential("").import_passport_at(&passport_b, &crossed.translator_key, &registry_a, at).await?;
    let reputation = operator_a.reputation(&did_of(&crossed.translator_key)).await?;
    say(format!(
        "the translator presented B's passport to A (signed with its own key): A shows it apart from local figures — local {} settled, imported from B at {} bps, combined score {} bps",
        reputation.local.settled_count,
        reputation.imported.first().map_or(Value::Null, |imported| imported.weight_bps.into()),
        reputation.combined.score_bps
    ));
    Ok(serde_json::to_value(reputation.imported)?)
}

/// A fixed-point figure in parts per million of one job, shown with two
/// decimals and rounded half up: `980_000` reads `0.98`. Successes decay with
/// age and are capped per buyer owner, so the figure is rarely whole and its
/// integer part alone would read as nothing counted.
fn two_decimals(ppm: u64) -> String {
    let hundredths = ppm.saturating_add(PPM / 200) / (PPM / 100);
    format!("{}.{:02}", hundredths / 100, hundredths % 100)
}

/// A merchant's one paid route at `path` behind the SDK's settle-then-work-once middleware, answering the
/// order, the settlement and `work` (what the merchant made).
pub fn paid_front(path: &str, route: Arc<PaidRoute>, work: (&'static str, &'static str)) -> Router {
    Router::new()
        .route(
            path,
            post(move |Extension(settled): Extension<Settled>| async move {
                Json(json!({"order": settled.order_id, work.0: work.1, "settlement": settled.settlement_id}))
            }),
        )
        .route_layer(axum::middleware::from_fn_with_state(route, paid))
}

#[cfg(test)]
mod tests {
    use super::two_decimals;

    #[test]
    fn weighted_figures_show_two_decimals_not_their_integer_part() {
        for (ppm, shown) in [
            (0, "0.00"),
            (4_999, "0.00"),
            (5_000, "0.01"),
            (980_000, "0.98"),
            (984_999, "0.98"),
            (985_000, "0.99"),
            (999_999, "1.00"),
            (1_000_000, "1.00"),
            (2_345_678, "2.35"),
            (12_000_000, "12.00"),
        ] {
            assert_eq!(two_decimals(ppm), shown, "{ppm} ppm");
        }
    }
}

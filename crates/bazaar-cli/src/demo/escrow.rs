//! The escrow chapter of `bazaar demo`: a hotel group's buying agent orders
//! linen above the escrow threshold, so the order rides a contract with three
//! milestones. One is released by the buyer, one releases itself when the
//! review window passes, and one is disputed through all four phases — filed,
//! evidence, a ruling for the mill, an appeal with a bond, a second ruling
//! that splits the milestone and slashes the mill's stake — then executed once.
//! The demo moves the registry's clock forward instead of waiting days.

use anyhow::{ensure, Context, Result};
use bazaar_sdk::{generate_key, Client};
use bazaar_stage::{enroll_pair_with_key, member_id, refusal_code, LocalRegistry};
use bazaar_types::limits::{DISPUTE_EVIDENCE_S, REVIEW_WINDOW_S};
use bazaar_types::AccountId;
use ed25519_dalek::SigningKey;
use serde::Serialize;
use serde_json::Value;

/// The three milestones, in minor units: cut, weave, hem and ship.
pub const MILESTONES_MINOR: [u64; 3] = [60_000, 80_000, 100_000];
/// What the second ruling refunds of the disputed milestone, and the stake it slashes.
pub const REFUND_MINOR: u64 = 60_000;
pub const SLASH_MINOR: u64 = 5_000;
/// Stake the mill locks before it takes the order.
pub const STAKE_MINOR: u64 = 50_000;

/// Where every unit of the escrowed order went.
#[derive(Debug, Serialize)]
pub struct EscrowReport {
    pub contract: String,
    pub total_minor: u64,
    pub released_net_minor: u64,
    pub fees_minor: u64,
    pub refunded_minor: u64,
    pub held_minor: u64,
    pub bare_token_code: String,
    pub auto_released: bool,
    pub dispute: String,
    pub phases: Vec<String>,
    pub frozen: Value,
    pub outcome: Value,
    pub stake_after_minor: i64,
    pub insurance_minor: i128,
    pub second_execution_code: String,
}

/// The hotel's buyer and the mill, each an agent with the key it signs evidence with.
struct Parties {
    operator: Client,
    desk: Client,
    buyer: Client,
    buyer_key: SigningKey,
    mill: Client,
    mill_key: SigningKey,
}

/// What the dispute over the third milestone came to.
struct Disputed {
    dispute: String,
    frozen: Value,
    outcome: Value,
    second_execution_code: String,
}

pub async fn escrow_story(local: &LocalRegistry, say: &(dyn Fn(String) + Sync)) -> Result<EscrowReport> {
    let parties = cast(local, say).await?;
    let (contract, bare_token_code) = open_contract(&parties, say).await?;
    let auto_released = release_two(local, &parties, &contract, say).await?;
    let disputed = dispute_the_third(local, &parties, &contract, say).await?;
    account_for(local, &parties.buyer, contract, bare_token_code, auto_released, disputed, say).await
}

/// Enrolls both sides, funds the buyer and the mill's stake, and locks the stake.
async fn cast(local: &LocalRegistry, say: &(dyn Fn(String) + Sync)) -> Result<Parties> {
    let operator = local.operator();
    let desk = operator.with_credential(local.desk_credential.clone().context("a fresh registry has a desk")?);
    let (buyer_key, mill_key) = (generate_key(), generate_key());
    let (hotel, buyer) = enroll_pair_with_key(&operator, "hotel-group", "hotel-buyer", &buyer_key).await?;
    let (mill_owner, mill) = enroll_pair_with_key(&operator, "mill-owner", "linen-mill", &mill_key).await?;
    let total: u64 = MILESTONES_MINOR.iter().sum();
    for (owner, agent, amount) in [(&hotel, "hotel-buyer", total + 60_000), (&mill_owner, "linen-mill", STAKE_MINOR)] {
        operator.mint(&member_id(owner).await?, amount, &format!("escrow-mint-{agent}")).await?;
        owner.fund(agent, amount, &format!("escrow-fund-{agent}")).await?;
    }
    // An appeal bond and a stake lock count against the agent's ceilings like any hold: the buyer's day has room
    // for its milestones and a bond, the mill's for its stake.
    hotel.set_budget("hotel-buyer", total, total + 60_000, total + 60_000).await?;
    mill_owner.set_budget("linen-mill", STAKE_MINOR, STAKE_MINOR, STAKE_MINOR).await?;
    mill.stake_lock(STAKE_MINOR, "mill-stake").await?;
    say(format!("\nescrow: `linen-mill` locks {STAKE_MINOR} of stake; `hotel-buyer` orders linen for {total}"));
    Ok(Parties { operator, desk, buyer, buyer_key, mill, mill_key })
}

/// A bare token above the threshold is refused; the order rides a contract the mill accepts.
async fn open_contract(parties: &Parties, say: &(dyn Fn(String) + Sync)) -> Result<(String, String)> {
    let Parties { buyer, mill, .. } = parties;
    let total: u64 = MILESTONES_MINOR.iter().sum();
    let card = buyer.well_known().await?;
    let bare_token_code = refusal_code(buyer.issue_token("linen-mill", total, "linen-1", "https://mill/linen").await);
    say(format!(
        "  a bare token for {total} is refused ({bare_token_code}): above the threshold of {}, orders ride a contract",
        card.escrow_threshold_minor
    ));
    let due = bazaar_sdk::clock::now_ms() + 30 * 86_400_000;
    let names = ["cut", "weave", "hem and ship"];
    let specs: Vec<(u64, &str, i64)> = MILESTONES_MINOR.iter().zip(names).map(|(a, n)| (*a, n, due)).collect();
    let created =
        buyer.create_contract("linen-mill", None, &specs, "200 sets, 300 thread count", None, "linen-1").await?;
    let contract = created.body.id.clone();
    say(format!(
        "  contract {contract}: milestones {MILESTONES_MINOR:?} held on the buyer's budget; arbiter: the dispute desk"
    ));
    mill.contract_act(&contract, "accept").await?;
    Ok((contract, bare_token_code))
}

/// Milestone 0 is released by the buyer; milestone 1 releases itself when the
/// review window passes. Returns whether it did.
async fn release_two(
    local: &LocalRegistry,
    parties: &Parties,
    contract: &str,
    say: &(dyn Fn(String) + Sync),
) -> Result<bool> {
    let Parties { buyer, mill, .. } = parties;
    mill.deliver(contract, 0, b"cut: 200 sets").await?;
    let first = buyer.release(contract, 0, None).await?;
    say(format!("  milestone 0 delivered and released by the buyer: {} to the mill", first.body.net_minor));

    mill.deliver(contract, 1, b"woven").await?;
    local.clock.advance_s(REVIEW_WINDOW_S + 60);
    bazaar_server::sweep_once(&local.state).await?;
    let after = buyer.contract(contract).await?;
    let auto_released = after.milestones.get(1).is_some_and(|milestone| milestone.state == "released");
    say(format!(
        "  milestone 1 delivered; the buyer stays silent; {} days later it {}",
        REVIEW_WINDOW_S / 86_400,
        if auto_released { "releases by itself" } else { "is STILL HELD" }
    ));
    Ok(auto_released)
}

/// Milestone 2 through all four phases: filed, evidence, a ruling for the mill,
/// an appeal, a second ruling that splits it and slashes stake; executed once.
async fn dispute_the_third(
    local: &LocalRegistry,
    parties: &Parties,
    contract: &str,
    say: &(dyn Fn(String) + Sync),
) -> Result<Disputed> {
    let Parties { operator, desk, buyer, buyer_key, mill, mill_key } = parties;
    mill.deliver(contract, 2, b"hemmed and shipped").await?;
    let subject = bazaar_sdk::wire::dispute::DisputeSubject::Milestone { contract: contract.to_string(), index: 2 };
    let filed = buyer.file_dispute(subject, "not_as_described", MILESTONES_MINOR[2], "hems unfinished").await?;
    let dispute = filed.body.id.clone();
    let frozen = filed.body.frozen.clone();
    say(format!("  milestone 2: the buyer disputes it — filed {dispute}; frozen {frozen}"));
    buyer.add_evidence(&dispute, buyer_key, b"photo: unfinished hems", Some("https://hotel/hems.jpg")).await?;
    mill.add_evidence(&dispute, mill_key, b"courier receipt and QA sheet", None).await?;
    say("  evidence: both sides add signed, hashed items; the mill's answer opens the evidence phase".into());
    local.clock.advance_s(DISPUTE_EVIDENCE_S + 60);
    bazaar_server::sweep_once(&local.state).await?;
    let ruling1 = desk.rule(&dispute, "reject", 0, 0, "QA sheet shows finished hems").await?;
    say(format!(
        "  ruling: the desk rejects the claim; appeal window until {}",
        crate::wire_json(&ruling1.body)["deadline"]
    ));
    let appealed = buyer.appeal(&dispute).await?;
    say(format!(
        "  appeal: the buyer appeals once with a bond of {}; the new arbiter is {}",
        crate::wire_json(&appealed.body.appeal)["bond"],
        crate::wire_json(&appealed.body.arbiter)
    ));
    let outcome = operator
        .rule(&dispute, "refund_partial", REFUND_MINOR, SLASH_MINOR, "photos show a third of the hems unfinished")
        .await?
        .body;
    let outcome = crate::wire_json(&outcome);
    say(format!(
        "  final ruling and execution: refund {} to the buyer, {} released to the mill, {} of stake slashed ({} to insurance), bond returned: {}",
        outcome["refunded_minor"], outcome["released_minor"], outcome["slashed_minor"],
        outcome["slash_to_insurance_minor"], outcome["bond"]["returned"]
    ));
    let second_execution_code = refusal_code(buyer.execute_dispute(&dispute, Some("again")).await);
    say(format!("  a second execution is refused: {second_execution_code}"));
    Ok(Disputed { dispute, frozen, outcome, second_execution_code })
}

/// Where every unit of the order went, checked to add up.
async fn account_for(
    local: &LocalRegistry,
    buyer: &Client,
    contract: String,
    bare_token_code: String,
    auto_released: bool,
    disputed: Disputed,
    say: &(dyn Fn(String) + Sync),
) -> Result<EscrowReport> {
    let record = buyer.dispute(&disputed.dispute).await?;
    let phases: Vec<String> =
        record.timeline.iter().map(|step| step["phase"].as_str().unwrap_or("").to_string()).collect();
    let c = buyer.contract(&contract).await?;
    let stake = buyer.stake("linen-mill").await?;
    let insurance = local.state.store.account(&AccountId::insurance()).await?.map(|a| a.balance()).unwrap_or(0);
    let Disputed { dispute, frozen, outcome, second_execution_code } = disputed;
    let report = EscrowReport {
        contract,
        total_minor: c.total,
        released_net_minor: c.released_net,
        fees_minor: c.fees,
        refunded_minor: c.refunded,
        held_minor: c.held_minor,
        bare_token_code,
        auto_released,
        dispute,
        phases,
        frozen,
        outcome,
        stake_after_minor: stake.balance_minor,
        insurance_minor: insurance,
        second_execution_code,
    };
    say(format!(
        "  where the {} went: {} to the mill, {} in fees, {} back to the buyer, {} still held",
        report.total_minor, report.released_net_minor, report.fees_minor, report.refunded_minor, report.held_minor
    ));
    say(format!(
        "  the mill's stake: {} of {STAKE_MINOR} left; insurance holds {}; dispute phases: {}",
        report.stake_after_minor,
        report.insurance_minor,
        report.phases.join(" → ")
    ));
    ensure!(
        report.released_net_minor + report.fees_minor + report.refunded_minor + report.held_minor == report.total_minor,
        "escrow does not add up"
    );
    Ok(report)
}

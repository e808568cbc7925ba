//! The refusal rails (`bazaar attack`, the chamber's "try to break it" buttons). Each attack runs against a
//! registry through its public HTTP API, exactly as a real client would, and must be refused with its expected
//! code while nothing it touches changes: the parties' balances stay put and the event ledger grows by at most
//! the `refusal.recorded` event of the refusal itself. Where no registry is named (a chamber press, `bazaar
//! attack` without `--registry`) the attacks run in a [`scratch`] registry started for them and deleted after;
//! against a named registry they leave their casts behind ([`left_behind`]).
//!
//! [`CATALOGUE`] lists every attack; each family's are in a module of its own: `pay` (tokens and settlement),
//! `conversation` (rooms, sealing, webhooks), `escrow` (escrow, disputes, stake), `reputation` (passports,
//! federation, scores), `storefront`, `x402`, `hire` (the spending discipline: authorizations, hires, leases)
//! and `labor` (the labor market's relay and evidence fetch). A new attack goes in its family's module and
//! one row of the catalogue.

mod labor;
pub mod scratch;

use anyhow::{bail, ensure, Context, Result};
use bazaar_core::refusal::Code;
use bazaar_sdk::{generate_key, Client, SdkError};
use bazaar_stage::enroll_pair;
use futures::future::BoxFuture;
use serde::Serialize;
use serde_json::{json, Value};

/// Each attack's cast gets this much, with ceilings that leave room to refuse.
const FUNDS_MINOR: u64 = 10_000;
/// Members every cast enrolls ([`cast`]: three owners, each with one agent).
const CAST_MEMBERS: usize = 6;
const PER_CALL_MAX_MINOR: u64 = 1_000;
const PRICE_MINOR: u64 = 250;
/// Quarter-intervals the expired-token attack waits for the sweeper (about 5 sweeps).
const SWEEP_WAITS_MAX: usize = 20;
/// Dispute attacks that must outwait a phase do so only on registries whose
/// windows are this short (serve with `--answer-window-s 2` and friends);
/// on others they are skipped, with the reason ([`Unmet`]).
pub const PHASE_WAIT_S_MAX: u64 = 30;

/// Why an attack was not run here: a setting of this registry it cannot meet
/// (a dispute phase longer than `PHASE_WAIT_S_MAX` to outwait, webhooks to
/// loopback refused). The run goes on with the other attacks.
#[derive(Debug)]
pub struct Unmet(pub String);

impl std::fmt::Display for Unmet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Unmet {}
/// A milestone's price in the escrow attacks.
const MILESTONE_MINOR: u64 = 400;
/// Stake the merchant locks in the stake attack.
const STAKE_MINOR: u64 = 100;
/// Purchases in the reputation-farming attacks.
const SELF_DEALS: usize = 5;
const TINY_BUYS: usize = 10;

/// The parties an attack plays with, freshly enrolled for it.
pub struct Cast {
    /// The registry under attack (its relay is at `/relay`).
    pub registry: String,
    pub operator: Client,
    pub owner: Client,
    pub buyer: Client,
    pub merchant: Client,
    pub merchant_handle: String,
    pub merchant_key: ed25519_dalek::SigningKey,
    pub other_merchant: Client,
    pub other_handle: String,
    tag: String,
}

/// What an attack attempted, as a real client sees it.
pub struct Attempt {
    pub tried: String,
    pub result: Result<Value, SdkError>,
}

type Run = for<'a> fn(&'a Cast) -> BoxFuture<'a, Result<Measured>>;

/// What an attack must meet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Expect {
    /// A refusal with this code; its HTTP status follows from the code.
    Refused(Code),
    /// Nothing to refuse (the payments are real), but the reputation the
    /// attacker farmed does not count: its score does not rise.
    NotCounted,
    /// An x402 facilitator answer: `200` with `success: false` and this `errorReason`.
    X402(&'static str),
    /// A refusal by the conversation plane: its code and HTTP status.
    Plane(&'static str, u16),
    /// A refusal by a webhook receiver checking a delivery as Standard
    /// Webhooks asks (`bazaar_conversation::webhooks::sign::verify`), as a 401.
    Receiver(&'static str),
    /// A refusal by the labor market's relay: `OK false` with this machine-readable prefix.
    Relay(&'static str),
    /// A refusal by the validator's evidence fetch (`bazaar_agents::labor::fetch`), by its code.
    Fetch(&'static str),
}

impl Expect {
    pub fn as_str(self) -> &'static str {
        match self {
            Expect::Refused(code) => code.as_str(),
            Expect::NotCounted => "not_counted",
            Expect::X402(reason) => reason,
            Expect::Plane(code, _) => code,
            Expect::Receiver(code) => code,
            Expect::Relay(prefix) => prefix,
            Expect::Fetch(code) => code,
        }
    }
}

/// The "status" of a refusal that is not an HTTP answer (a relay's `OK` frame, the validator's fetch).
const NOT_HTTP: u16 = 0;

/// The status a webhook receiver answers a refused delivery with.
const RECEIVER_REFUSAL_STATUS: u16 = 401;
/// How long the webhook attacks wait for the registry to deliver to their receiver.
const DELIVERY_WAIT_S: u64 = 15;
/// The registry's refusal of a webhook URL; for the webhook attacks' loopback receiver, a registry that
/// refuses private targets (started without `--allow-private-webhooks`).
const WEBHOOK_URL_REFUSED: &str = "webhook_url_invalid";

/// One named attack and what it must meet.
pub struct Attack {
    pub name: &'static str,
    pub expect: Expect,
    run: Run,
}

/// Every attack, by name.
pub const CATALOGUE: &[Attack] = &[
    Attack {
        name: "private-room-read",
        expect: Expect::Plane("not_member", 403),
        run: |c| Box::pin(conversation::private_room_read(c)),
    },
    Attack {
        name: "agent-etiquette",
        expect: Expect::Plane("etiquette_limit", 429),
        run: |c| Box::pin(conversation::agent_etiquette(c)),
    },
    Attack {
        name: "sealed-plaintext-post",
        expect: Expect::Plane("sealed_required", 409),
        run: |c| Box::pin(conversation::sealed_plaintext_post(c)),
    },
    Attack {
        name: "forged-message-signature",
        expect: Expect::Plane("signature_invalid", 400),
        run: |c| Box::pin(conversation::forged_message_signature(c)),
    },
    Attack {
        name: "webhook-replay",
        expect: Expect::Receiver("webhook_timestamp_outside_tolerance"),
        run: |c| Box::pin(conversation::webhook_replay(c)),
    },
    Attack {
        name: "webhook-forged-signature",
        expect: Expect::Receiver("webhook_signature_invalid"),
        run: |c| Box::pin(conversation::webhook_forgery(c)),
    },
    Attack {
        name: "spend-with-non-paying-credential",
        expect: Expect::Plane("credential_cannot_spend", 403),
        run: |c| Box::pin(pay::spend_without_pay(c)),
    },
    Attack {
        name: "payment-without-exact-authorization",
        expect: Expect::Refused(Code::AuthorizationMismatch),
        run: |c| Box::pin(hire::payment_without_exact_authorization(c)),
    },
    Attack {
        name: "second-payment-while-uncertain",
        expect: Expect::Refused(Code::AuthorizationUsed),
        run: |c| Box::pin(hire::second_payment_while_uncertain(c)),
    },
    Attack {
        name: "changed-terms-after-agreement",
        expect: Expect::Refused(Code::HireExists),
        run: |c| Box::pin(hire::changed_terms_after_agreement(c)),
    },
    Attack {
        name: "accept-and-pay-without-verified-response",
        expect: Expect::Refused(Code::ResponseNotVerified),
        run: |c| Box::pin(hire::accept_without_verified_response(c)),
    },
    Attack {
        name: "lease-for-another-identity",
        expect: Expect::Refused(Code::LeaseIdentityMismatch),
        run: |c| Box::pin(hire::lease_for_another_identity(c)),
    },
    Attack {
        name: "relay-unnamed-worker-result",
        expect: Expect::Relay("restricted"),
        run: |c| Box::pin(labor::unnamed_worker_result(c)),
    },
    Attack { name: "relay-forged-event", expect: Expect::Relay("invalid"), run: |c| Box::pin(labor::forged_event(c)) },
    Attack {
        name: "relay-resubmitted-deleted-event",
        expect: Expect::Relay("blocked"),
        run: |c| Box::pin(labor::resubmitted_deleted(c)),
    },
    Attack {
        name: "relay-older-replaceable-event",
        expect: Expect::Relay("invalid"),
        run: |c| Box::pin(labor::older_replaceable(c)),
    },
    Attack {
        name: "evidence-off-allowlist",
        expect: Expect::Fetch("off_allowlist"),
        run: |c| Box::pin(labor::evidence_off_allowlist(c)),
    },
    Attack {
        name: "evidence-redirect-to-private-address",
        expect: Expect::Fetch("private_address"),
        run: |c| Box::pin(labor::redirect_to_private(c)),
    },
    Attack {
        name: "second-settlement",
        expect: Expect::Refused(Code::OrderAlreadySettled),
        run: |c| Box::pin(pay::second_settlement(c)),
    },
    Attack {
        name: "replayed-token",
        expect: Expect::Refused(Code::TokenSettled),
        run: |c| Box::pin(pay::replayed_token(c)),
    },
    Attack {
        name: "expired-token",
        expect: Expect::Refused(Code::TokenExpired),
        run: |c| Box::pin(pay::expired_token(c)),
    },
    Attack {
        name: "over-ceiling",
        expect: Expect::Refused(Code::BudgetPerCallExceeded),
        run: |c| Box::pin(pay::over_ceiling(c)),
    },
    Attack {
        name: "other-merchant",
        expect: Expect::Refused(Code::NotAudience),
        run: |c| Box::pin(pay::other_merchant(c)),
    },
    Attack {
        name: "forged-token",
        expect: Expect::Refused(Code::TokenSignatureInvalid),
        run: |c| Box::pin(pay::forged_token(c)),
    },
    Attack { name: "invite-reuse", expect: Expect::Refused(Code::InviteUsed), run: |c| Box::pin(pay::invite_reuse(c)) },
    Attack {
        name: "double-release",
        expect: Expect::Refused(Code::MilestoneAlreadyReleased),
        run: |c| Box::pin(escrow::double_release(c)),
    },
    Attack {
        name: "release-disputed",
        expect: Expect::Refused(Code::MilestoneDisputed),
        run: |c| Box::pin(escrow::release_disputed(c)),
    },
    Attack {
        name: "dispute-unpaid",
        expect: Expect::Refused(Code::NotDisputable),
        run: |c| Box::pin(escrow::dispute_unpaid(c)),
    },
    Attack {
        name: "dispute-foreign",
        expect: Expect::Refused(Code::NotParty),
        run: |c| Box::pin(escrow::dispute_foreign(c)),
    },
    Attack {
        name: "evidence-stranger",
        expect: Expect::Refused(Code::NotParty),
        run: |c| Box::pin(escrow::evidence_stranger(c)),
    },
    Attack {
        name: "party-rules",
        expect: Expect::Refused(Code::PartyCannotRule),
        run: |c| Box::pin(escrow::party_rules(c)),
    },
    Attack {
        name: "second-execution",
        expect: Expect::Refused(Code::DisputeExecuted),
        run: |c| Box::pin(escrow::second_execution(c)),
    },
    Attack {
        name: "stake-withdraw",
        expect: Expect::Refused(Code::StakeDisputeOpen),
        run: |c| Box::pin(escrow::stake_withdraw(c)),
    },
    Attack {
        name: "late-appeal",
        expect: Expect::Refused(Code::AppealWindowClosed),
        run: |c| Box::pin(escrow::late_appeal(c)),
    },
    Attack {
        name: "tampered-passport",
        expect: Expect::Refused(Code::PassportProofInvalid),
        run: |c| Box::pin(reputation::tampered_passport(c)),
    },
    Attack {
        name: "unrecognised-issuer",
        expect: Expect::Refused(Code::PassportIssuerUnknown),
        run: |c| Box::pin(reputation::unrecognised_issuer(c)),
    },
    Attack {
        name: "passport-other-agent",
        expect: Expect::Refused(Code::PassportSubjectMismatch),
        run: |c| Box::pin(reputation::passport_other_agent(c)),
    },
    Attack {
        name: "replayed-relay",
        expect: Expect::Refused(Code::PeerUnknown),
        run: |c| Box::pin(reputation::replayed_relay(c)),
    },
    Attack { name: "self-dealing", expect: Expect::NotCounted, run: |c| Box::pin(reputation::self_dealing(c)) },
    Attack { name: "tiny-buys", expect: Expect::NotCounted, run: |c| Box::pin(reputation::tiny_buys(c)) },
    Attack {
        name: "offer-below-floor",
        expect: Expect::Refused(Code::OfferBelowFloor),
        run: |c| Box::pin(storefront::offer_attack(c, storefront::OfferAttack::BelowFloor)),
    },
    Attack {
        name: "offer-above-cap",
        expect: Expect::Refused(Code::OfferAboveCap),
        run: |c| Box::pin(storefront::offer_attack(c, storefront::OfferAttack::AboveCap)),
    },
    Attack {
        name: "offer-beyond-capacity",
        expect: Expect::Refused(Code::OfferBeyondCapacity),
        run: |c| Box::pin(storefront::offer_attack(c, storefront::OfferAttack::BeyondCapacity)),
    },
    Attack {
        name: "fourth-revision",
        expect: Expect::Refused(Code::OfferRevisionLimit),
        run: |c| Box::pin(storefront::offer_attack(c, storefront::OfferAttack::FourthRevision)),
    },
    Attack {
        name: "agent-self-approval",
        expect: Expect::Refused(Code::ApprovalByPerson),
        run: |c| Box::pin(storefront::agent_self_approval(c)),
    },
    Attack {
        name: "proof-for-another",
        expect: Expect::Refused(Code::NotParty),
        run: |c| Box::pin(storefront::proof_for_another(c)),
    },
    Attack {
        name: "share-captured-twice",
        expect: Expect::Refused(Code::SharePaid),
        run: |c| Box::pin(storefront::share_twice(c)),
    },
    Attack {
        name: "x402-other-merchant",
        expect: Expect::X402("wrong_merchant"),
        run: |c| Box::pin(x402::x402_foreign_token(c, false)),
    },
    Attack {
        name: "x402-other-resource",
        expect: Expect::X402("wrong_resource"),
        run: |c| Box::pin(x402::x402_foreign_token(c, true)),
    },
];

impl Attack {
    pub fn expect_status(&self) -> u16 {
        match self.expect {
            Expect::Refused(code) => bazaar_server::problem::status_of(code).as_u16(),
            Expect::NotCounted | Expect::X402(_) => 200,
            Expect::Plane(_, status) => status,
            Expect::Receiver(_) => RECEIVER_REFUSAL_STATUS,
            Expect::Relay(_) | Expect::Fetch(_) => NOT_HTTP,
        }
    }
}

/// The verdict on one attack.
#[derive(Debug, Serialize)]
pub struct Verdict {
    pub name: String,
    pub tried: String,
    pub status: u16,
    pub code: String,
    pub refused_as_expected: bool,
    pub balances_unchanged: bool,
    /// Events appended during the attempt, all of them `refusal.recorded`.
    pub events_appended: Vec<String>,
    pub ledger_unchanged: bool,
    /// Not run on this registry, and why (see [`Unmet`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub skipped: Option<String>,
}

impl Verdict {
    pub fn held(&self) -> bool {
        self.skipped.is_none() && self.refused_as_expected && self.balances_unchanged && self.ledger_unchanged
    }

    fn skipped(name: &str, reason: String) -> Verdict {
        Verdict {
            name: name.into(),
            tried: String::new(),
            status: 0,
            code: String::new(),
            refused_as_expected: false,
            balances_unchanged: true,
            events_appended: Vec::new(),
            ledger_unchanged: true,
            skipped: Some(reason),
        }
    }
}

/// Runs the named attacks (or all) against `registry` with the operator's credential.
pub async fn run(
    registry: &str,
    operator_credential: &str,
    names: &[String],
    say: &dyn Fn(String),
) -> Result<Vec<Verdict>> {
    let chosen: Vec<&Attack> = if names.is_empty() {
        CATALOGUE.iter().collect()
    } else {
        names
            .iter()
            .map(|n| {
                CATALOGUE
                    .iter()
                    .find(|a| a.name == n)
                    .with_context(|| format!("no attack named {n}; see `bazaar attack --list`"))
            })
            .collect::<Result<_>>()?
    };
    let operator = Client::new(registry, Some(operator_credential.to_string()));
    let mut verdicts = Vec::new();
    for attack in chosen {
        let cast = cast(&operator, attack.name).await?;
        let verdict = match judge(attack, &cast).await {
            Ok(verdict) => verdict,
            Err(error) => match error.downcast::<Unmet>() {
                Ok(Unmet(reason)) => {
                    say(format!("{:<18} skipped: {reason}", attack.name));
                    verdicts.push(Verdict::skipped(attack.name, reason));
                    continue;
                }
                Err(error) => return Err(error),
            },
        };
        say(format!(
            "{:<18} tried: {}\n{:<18} refused: {} {} — {}; balances {}; event ledger {}",
            attack.name,
            verdict.tried,
            "",
            verdict.status,
            verdict.code,
            if verdict.refused_as_expected { "as expected" } else { "UNEXPECTED" },
            if verdict.balances_unchanged { "unchanged" } else { "CHANGED" },
            if verdict.ledger_unchanged { "unchanged but for the refusal" } else { "CHANGED" },
        ));
        verdicts.push(verdict);
    }
    Ok(verdicts)
}

async fn cast(operator: &Client, attack: &str) -> Result<Cast> {
    let tag = format!(
        "{}-{}",
        attack.chars().filter(char::is_ascii_alphanumeric).take(10).collect::<String>(),
        &bazaar_server::random_b64(&bazaar_server::OsEntropy, 6).to_lowercase().replace(['-', '_'], "x")
    );
    let (owner, buyer) = enroll_pair(operator, &format!("own-{tag}"), &format!("buy-{tag}")).await?;
    let merchant_key = generate_key();
    let (merchant_owner, merchant) =
        bazaar_stage::enroll_pair_with_key(operator, &format!("sown-{tag}"), &format!("shop-{tag}"), &merchant_key)
            .await?;
    // A stake lock counts against the merchant's own budget: room for the one the stake attacks make.
    merchant_owner.set_budget(&format!("shop-{tag}"), 0, STAKE_MINOR, STAKE_MINOR).await?;
    let (_, other_merchant) = enroll_pair(operator, &format!("oown-{tag}"), &format!("rival-{tag}")).await?;
    let owner_id = owner.me().await?.member.id;
    operator.mint(&owner_id, FUNDS_MINOR, &format!("attack-mint-{tag}")).await?;
    owner.fund(&format!("buy-{tag}"), FUNDS_MINOR, &format!("attack-fund-{tag}")).await?;
    owner.set_budget(&format!("buy-{tag}"), PER_CALL_MAX_MINOR, FUNDS_MINOR, FUNDS_MINOR).await?;
    Ok(Cast {
        registry: operator.base().to_string(),
        operator: operator.clone(),
        owner,
        buyer,
        merchant,
        merchant_handle: format!("shop-{tag}"),
        merchant_key,
        other_merchant,
        other_handle: format!("rival-{tag}"),
        tag,
    })
}

/// What "nothing changed" is measured against.
#[derive(PartialEq, Debug)]
pub struct Balances(Vec<Value>);

async fn balances(cast: &Cast) -> Result<Balances> {
    let mut out = Vec::new();
    for party in [&cast.owner, &cast.buyer, &cast.merchant, &cast.other_merchant] {
        let me = party.me().await?;
        out.push(json!([me.balance_minor, me.available_minor, me.budget.map(|budget| budget.spent_total_minor)]));
    }
    let stake = cast.merchant.stake(&cast.merchant_handle).await?;
    out.push(json!([stake.balance_minor, stake.frozen_minor, stake.open_disputes]));
    Ok(Balances(out))
}

async fn head(cast: &Cast) -> Result<u64> {
    let health: Value =
        cast.operator.http().get(format!("{}/healthz", cast.operator.base())).send().await?.json().await?;
    health["event_seq"].as_u64().context("healthz has event_seq")
}

async fn judge(attack: &Attack, cast: &Cast) -> Result<Verdict> {
    // The attack's honest setup (a first settlement, say) runs before its
    // snapshot; only the attempt itself is measured.
    let (before, head_before, attempt) = (attack.run)(cast).await?;
    let after = balances(cast).await?;
    let head_after = head(cast).await?;
    let page = cast.operator.events(head_before, bazaar_types::limits::PAGE_LIMIT_MAX).await?;
    let appended: Vec<String> = page.events.iter().map(|event| event.kind.clone()).collect();
    let (status, code) = match &attempt.result {
        Err(SdkError::Problem { status, code, .. }) => (*status, code.clone()),
        Err(error) => bail!("{}: transport failed: {error}", attack.name),
        Ok(body) if attack.expect == Expect::NotCounted && body["gained"] == false => (200, "not_counted".to_string()),
        Ok(body) if matches!(attack.expect, Expect::X402(_)) && body["success"] == false => {
            (200, body["errorReason"].as_str().unwrap_or_default().to_string())
        }
        Ok(body) => (200, format!("ACCEPTED: {body}")),
    };
    Ok(Verdict {
        name: attack.name.to_string(),
        tried: attempt.tried,
        status,
        refused_as_expected: status == attack.expect_status() && code == attack.expect.as_str(),
        code,
        balances_unchanged: before == after,
        ledger_unchanged: head_after == head_before + appended.len() as u64
            && appended.iter().all(|k| k == "refusal.recorded"),
        events_appended: appended,
        skipped: None,
    })
}

/// An attack's body: honest setup, then the snapshot, then the attempt.
pub type Measured = (Balances, u64, Attempt);

pub async fn snapshot(cast: &Cast) -> Result<(Balances, u64)> {
    Ok((balances(cast).await?, head(cast).await?))
}

async fn token(cast: &Cast, order: &str, max: u64) -> Result<String> {
    let answer = cast.buyer.issue_token(&cast.merchant_handle, max, order, "https://shop/restock").await?;
    Ok(answer.body.token)
}

async fn paid_order(cast: &Cast, order: &str) -> Result<String> {
    let token = token(cast, order, PRICE_MINOR).await?;
    cast.merchant.settle(&token, PRICE_MINOR, order, None).await?;
    Ok(token)
}

// Each attack returns the snapshot taken after its honest setup, and the attempt.
macro_rules! measured {
    ($cast:expr, $tried:expr, $attempt:expr) => {{
        let (balances, head) = snapshot($cast).await?;
        // Whatever the attempt answers, as the JSON it came as.
        let result = $attempt.await.map(|answer| bazaar_sdk::wire::wire_json(&answer));
        Ok((balances, head, Attempt { tried: $tried.to_string(), result }))
    }};
}

// The families' attacks use `measured!`, so they come after it.
mod conversation;
mod escrow;
mod hire;
mod pay;
mod reputation;
mod storefront;
mod x402;

/// Fails unless every verdict held.
/// Every attack ran and held (a skipped one counts as not held).
pub fn ensure_all_held(verdicts: &[Verdict]) -> Result<()> {
    let failed: Vec<&str> = verdicts.iter().filter(|v| !v.held()).map(|v| v.name.as_str()).collect();
    ensure!(failed.is_empty(), "attacks not refused cleanly: {}", failed.join(", "));
    Ok(())
}

/// The catalogue as the live chamber's "try to break it" buttons: each press
/// runs its attack with a fresh cast in a [`scratch`] registry started for it
/// and deleted after, exactly as `bazaar attack NAME` without `--registry`
/// would; the live registry's press route records the refusal it met.
pub struct ChamberAttacks;

impl bazaar_server::chamber::attacks::AttackRunner for ChamberAttacks {
    fn catalogue(&self) -> Vec<(String, String)> {
        CATALOGUE.iter().map(|a| (a.name.to_string(), a.expect.as_str().to_string())).collect()
    }

    fn run(
        &self,
        name: String,
    ) -> futures::future::BoxFuture<'static, std::result::Result<bazaar_sdk::wire::chamber::AttackVerdict, String>>
    {
        let deadline = std::time::Duration::from_secs(bazaar_server::chamber::attacks::ATTACK_RUN_TIMEOUT_S);
        Box::pin(async move {
            let ran = scratch::run(vec![name], |_| {}, Some(deadline)).await.map_err(|e| format!("{e:#}"))?;
            let verdict = ran.into_iter().next().ok_or("the attack gave no verdict")?;
            if let Some(reason) = verdict.skipped {
                return Err(format!("not run in the scratch registry: {reason}"));
            }
            Ok(bazaar_sdk::wire::chamber::AttackVerdict {
                name: verdict.name,
                tried: verdict.tried,
                status: verdict.status,
                code: verdict.code,
                refused_as_expected: verdict.refused_as_expected,
                balances_unchanged: verdict.balances_unchanged,
                events_appended: verdict.events_appended,
                ledger_unchanged: verdict.ledger_unchanged,
                // The registry that served the press sets it when it records the refusal.
                recorded: false,
            })
        })
    }
}

/// What running `attacks` attacks against a named registry leaves on it, said before they run: each
/// enrolls a cast of its own and mints it units, and nothing is removed after.
pub fn left_behind(attacks: usize) -> String {
    format!(
        "Each attack runs with a cast of its own, enrolled on this registry and kept there: for these {attacks} \
         attacks at least {} members (three owners and three agents each, more for some), {} units minted to them, \
         and whatever the attacks' honest setup made (payments, rooms, webhooks, listings, orders, contracts, \
         disputes, stake), all on the event ledger for good. Run `bazaar attack` without --registry to run them in \
         a scratch registry that is deleted after.",
        attacks * CAST_MEMBERS,
        attacks as u64 * FUNDS_MINOR,
    )
}

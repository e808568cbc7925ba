//! `bazaar attack`: the refusal rails. Each attack runs against a registry
//! through its public HTTP API, exactly as a real client would, and must be
//! refused with its expected code while nothing it touches changes: the
//! parties' balances stay put and the event ledger grows by at most the
//! `refusal.recorded` event of the refusal itself. Where no registry is named
//! (a chamber press, `bazaar attack` without `--registry`) the attacks run in a
//! [`scratch`] registry started for them and deleted after; against a named
//! registry they leave their casts behind ([`left_behind`]).
//!
//! Later capabilities (escrow, disputes, passports, the market) add their
//! attacks to [`CATALOGUE`]; the labor market's (relay and evidence fetch) are in `market`,
//! the spending discipline's (authorizations, hires, leases) in `hire`.

mod market;
pub mod scratch;

use crate::story::enroll_pair;
use anyhow::{bail, ensure, Context, Result};
use bazaar_conversation::sealing::{seal, sign_message, Content};
use bazaar_core::refusal::Code;
use bazaar_sdk::wire::{federation::Reputation, market::SharePaid};
use bazaar_sdk::{generate_key, Body, Client, SdkError};
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
    /// A refusal by the validator's evidence fetch (`bazaar_cli::market::fetch`), by its code.
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
        run: |c| Box::pin(private_room_read(c)),
    },
    Attack {
        name: "agent-etiquette",
        expect: Expect::Plane("etiquette_limit", 429),
        run: |c| Box::pin(agent_etiquette(c)),
    },
    Attack {
        name: "sealed-plaintext-post",
        expect: Expect::Plane("sealed_required", 409),
        run: |c| Box::pin(sealed_plaintext_post(c)),
    },
    Attack {
        name: "forged-message-signature",
        expect: Expect::Plane("signature_invalid", 400),
        run: |c| Box::pin(forged_message_signature(c)),
    },
    Attack {
        name: "webhook-replay",
        expect: Expect::Receiver("webhook_timestamp_outside_tolerance"),
        run: |c| Box::pin(webhook_replay(c)),
    },
    Attack {
        name: "webhook-forged-signature",
        expect: Expect::Receiver("webhook_signature_invalid"),
        run: |c| Box::pin(webhook_forgery(c)),
    },
    Attack {
        name: "spend-with-non-paying-credential",
        expect: Expect::Plane("credential_cannot_spend", 403),
        run: |c| Box::pin(spend_without_pay(c)),
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
        run: |c| Box::pin(market::unnamed_worker_result(c)),
    },
    Attack { name: "relay-forged-event", expect: Expect::Relay("invalid"), run: |c| Box::pin(market::forged_event(c)) },
    Attack {
        name: "relay-resubmitted-deleted-event",
        expect: Expect::Relay("blocked"),
        run: |c| Box::pin(market::resubmitted_deleted(c)),
    },
    Attack {
        name: "relay-older-replaceable-event",
        expect: Expect::Relay("invalid"),
        run: |c| Box::pin(market::older_replaceable(c)),
    },
    Attack {
        name: "evidence-off-allowlist",
        expect: Expect::Fetch("off_allowlist"),
        run: |c| Box::pin(market::evidence_off_allowlist(c)),
    },
    Attack {
        name: "evidence-redirect-to-private-address",
        expect: Expect::Fetch("private_address"),
        run: |c| Box::pin(market::redirect_to_private(c)),
    },
    Attack {
        name: "second-settlement",
        expect: Expect::Refused(Code::OrderAlreadySettled),
        run: |c| Box::pin(second_settlement(c)),
    },
    Attack {
        name: "replayed-token",
        expect: Expect::Refused(Code::TokenSettled),
        run: |c| Box::pin(replayed_token(c)),
    },
    Attack { name: "expired-token", expect: Expect::Refused(Code::TokenExpired), run: |c| Box::pin(expired_token(c)) },
    Attack {
        name: "over-ceiling",
        expect: Expect::Refused(Code::BudgetPerCallExceeded),
        run: |c| Box::pin(over_ceiling(c)),
    },
    Attack { name: "other-merchant", expect: Expect::Refused(Code::NotAudience), run: |c| Box::pin(other_merchant(c)) },
    Attack {
        name: "forged-token",
        expect: Expect::Refused(Code::TokenSignatureInvalid),
        run: |c| Box::pin(forged_token(c)),
    },
    Attack { name: "invite-reuse", expect: Expect::Refused(Code::InviteUsed), run: |c| Box::pin(invite_reuse(c)) },
    Attack {
        name: "double-release",
        expect: Expect::Refused(Code::MilestoneAlreadyReleased),
        run: |c| Box::pin(double_release(c)),
    },
    Attack {
        name: "release-disputed",
        expect: Expect::Refused(Code::MilestoneDisputed),
        run: |c| Box::pin(release_disputed(c)),
    },
    Attack {
        name: "dispute-unpaid",
        expect: Expect::Refused(Code::NotDisputable),
        run: |c| Box::pin(dispute_unpaid(c)),
    },
    Attack { name: "dispute-foreign", expect: Expect::Refused(Code::NotParty), run: |c| Box::pin(dispute_foreign(c)) },
    Attack {
        name: "evidence-stranger",
        expect: Expect::Refused(Code::NotParty),
        run: |c| Box::pin(evidence_stranger(c)),
    },
    Attack { name: "party-rules", expect: Expect::Refused(Code::PartyCannotRule), run: |c| Box::pin(party_rules(c)) },
    Attack {
        name: "second-execution",
        expect: Expect::Refused(Code::DisputeExecuted),
        run: |c| Box::pin(second_execution(c)),
    },
    Attack {
        name: "stake-withdraw",
        expect: Expect::Refused(Code::StakeDisputeOpen),
        run: |c| Box::pin(stake_withdraw(c)),
    },
    Attack {
        name: "late-appeal",
        expect: Expect::Refused(Code::AppealWindowClosed),
        run: |c| Box::pin(late_appeal(c)),
    },
    Attack {
        name: "tampered-passport",
        expect: Expect::Refused(Code::PassportProofInvalid),
        run: |c| Box::pin(tampered_passport(c)),
    },
    Attack {
        name: "unrecognised-issuer",
        expect: Expect::Refused(Code::PassportIssuerUnknown),
        run: |c| Box::pin(unrecognised_issuer(c)),
    },
    Attack {
        name: "passport-other-agent",
        expect: Expect::Refused(Code::PassportSubjectMismatch),
        run: |c| Box::pin(passport_other_agent(c)),
    },
    Attack { name: "replayed-relay", expect: Expect::Refused(Code::PeerUnknown), run: |c| Box::pin(replayed_relay(c)) },
    Attack { name: "self-dealing", expect: Expect::NotCounted, run: |c| Box::pin(self_dealing(c)) },
    Attack { name: "tiny-buys", expect: Expect::NotCounted, run: |c| Box::pin(tiny_buys(c)) },
    Attack {
        name: "offer-below-floor",
        expect: Expect::Refused(Code::OfferBelowFloor),
        run: |c| Box::pin(offer_attack(c, OfferAttack::BelowFloor)),
    },
    Attack {
        name: "offer-above-cap",
        expect: Expect::Refused(Code::OfferAboveCap),
        run: |c| Box::pin(offer_attack(c, OfferAttack::AboveCap)),
    },
    Attack {
        name: "offer-beyond-capacity",
        expect: Expect::Refused(Code::OfferBeyondCapacity),
        run: |c| Box::pin(offer_attack(c, OfferAttack::BeyondCapacity)),
    },
    Attack {
        name: "fourth-revision",
        expect: Expect::Refused(Code::OfferRevisionLimit),
        run: |c| Box::pin(offer_attack(c, OfferAttack::FourthRevision)),
    },
    Attack {
        name: "agent-self-approval",
        expect: Expect::Refused(Code::ApprovalByPerson),
        run: |c| Box::pin(agent_self_approval(c)),
    },
    Attack {
        name: "proof-for-another",
        expect: Expect::Refused(Code::NotParty),
        run: |c| Box::pin(proof_for_another(c)),
    },
    Attack {
        name: "share-captured-twice",
        expect: Expect::Refused(Code::SharePaid),
        run: |c| Box::pin(share_twice(c)),
    },
    Attack {
        name: "x402-other-merchant",
        expect: Expect::X402("wrong_merchant"),
        run: |c| Box::pin(x402_foreign_token(c, false)),
    },
    Attack {
        name: "x402-other-resource",
        expect: Expect::X402("wrong_resource"),
        run: |c| Box::pin(x402_foreign_token(c, true)),
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
        crate::story::enroll_pair_with_key(operator, &format!("sown-{tag}"), &format!("shop-{tag}"), &merchant_key)
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
        let result = $attempt.await.map(|answer| crate::wire_json(&answer));
        Ok((balances, head, Attempt { tried: $tried.to_string(), result }))
    }};
}

// The spending discipline's attacks use `measured!`, so they come after it.
mod hire;

// The conversation plane's attacks: they move no money, so balances and the
// event ledger must not move at all.

async fn room(owner: &Client, name: &str, private: bool) -> Result<String> {
    let body = json!({"name": name, "private": private});
    let room = owner.call::<Value>(reqwest::Method::POST, "/v1/rooms", Some(Body::json(body)), None).await?.body;
    room["id"].as_str().map(str::to_string).context("a room id")
}

async fn private_room_read(cast: &Cast) -> Result<Measured> {
    let secret = room(&cast.owner, "negotiation", true).await?;
    let path = format!("/v1/channels/{secret}/messages");
    cast.owner
        .call::<Value>(reqwest::Method::POST, &path, Some(Body::json(json!({"body": "our floor is 2,400"}))), None)
        .await?;
    measured!(cast, "read a private room's history as a member of the registry who is not in it", async {
        cast.other_merchant.call::<Value>(reqwest::Method::GET, &path, None, None).await.map(|a| a.body)
    })
}

async fn agent_etiquette(cast: &Cast) -> Result<Measured> {
    let lobby = room(&cast.owner, "lobby", false).await?;
    cast.buyer.call::<Value>(reqwest::Method::POST, &format!("/v1/channels/{lobby}/join"), None, None).await?;
    let path = format!("/v1/channels/{lobby}/messages");
    for n in 0..bazaar_types::limits::AGENT_UNADDRESSED_POSTS_MAX {
        let body = json!({"body": format!("buy now, offer {n}")});
        cast.buyer.call::<Value>(reqwest::Method::POST, &path, Some(Body::json(body)), None).await?;
    }
    measured!(cast, "an agent posts to a room once more without anyone addressing it", async {
        let body = json!({"body": "buy now, one more time"});
        cast.buyer.call::<Value>(reqwest::Method::POST, &path, Some(Body::json(body)), None).await.map(|a| a.body)
    })
}

/// Two members of the cast who published sealing keys, and their sealed DM:
/// the merchant and a fresh agent of the buyer's owner.
async fn sealed_dm(cast: &Cast) -> Result<(String, Client, ed25519_dalek::SigningKey)> {
    let invite = cast.owner.issue_invite().await?;
    let peer_key = generate_key();
    let peer = cast.owner.redeem_invite(&invite, &peer_key, &format!("peer-{}", cast.tag)).await?;
    let peer = cast.owner.with_credential(peer.credential.as_str());
    for (client, key) in [(&cast.merchant, &cast.merchant_key), (&peer, &peer_key)] {
        let me = client.me().await?;
        let member = bazaar_types::MemberId(me.member.id.clone());
        crate::sealed::publish_sealing_key(client, key, &member).await?;
    }
    let with = json!({"with": format!("peer-{}", cast.tag)});
    let dm = cast.merchant.call::<Value>(reqwest::Method::POST, "/v1/dms", Some(Body::json(with)), None).await?.body;
    let id = dm["id"].as_str().context("a DM id")?.to_string();
    Ok((id, peer, peer_key))
}

async fn sealed_plaintext_post(cast: &Cast) -> Result<Measured> {
    let (dm, _, _) = sealed_dm(cast).await?;
    let path = format!("/v1/channels/{dm}/messages");
    measured!(cast, "post plaintext into a sealed DM, where the registry would store it readable", async {
        let body = json!({"body": "our floor is 2,400"});
        cast.merchant.call::<Value>(reqwest::Method::POST, &path, Some(Body::json(body)), None).await.map(|a| a.body)
    })
}

async fn forged_message_signature(cast: &Cast) -> Result<Measured> {
    let (dm, _, peer_key) = sealed_dm(cast).await?;
    let me = cast.merchant.me().await?;
    let merchant = bazaar_types::MemberId(me.member.id.clone());
    let channel = bazaar_conversation::ChannelId(dm.clone());
    let to = crate::sealed::sealing_keys(&cast.merchant, &channel).await?;
    let sealed = seal(&channel, &merchant, "I agree to 1,900", &to)?;
    // Signed by the peer's key, but posted as the merchant: a handoff the merchant never wrote.
    let signature = sign_message(&peer_key, &channel, &merchant, &Content::Sealed(&sealed));
    let path = format!("/v1/channels/{dm}/messages");
    measured!(cast, "post a sealed message whose signature is by someone other than its author", async {
        let body = json!({"sealed": sealed, "signature": signature});
        cast.merchant.call::<Value>(reqwest::Method::POST, &path, Some(Body::json(body)), None).await.map(|a| a.body)
    })
}

/// A genuine delivery to the merchant's webhook, captured on a loopback
/// receiver the attack runs: what an eavesdropper on an `http` endpoint, or
/// anyone with the receiver's logs, could keep. The registry must allow
/// loopback targets (`bazaar serve --allow-private-webhooks`).
struct Captured {
    secret: String,
    id: String,
    timestamp: i64,
    signature: String,
    body: Vec<u8>,
}

async fn capture_delivery(cast: &Cast) -> Result<Captured> {
    type Kept = std::sync::Arc<std::sync::Mutex<Option<(axum::http::HeaderMap, axum::body::Bytes)>>>;
    let kept: Kept = Default::default();
    let keeper = kept.clone();
    let receiver = axum::Router::new().route(
        "/hook",
        axum::routing::post(move |headers: axum::http::HeaderMap, body: axum::body::Bytes| async move {
            keeper.lock().expect("kept").get_or_insert((headers, body));
            axum::http::StatusCode::OK
        }),
    );
    let url = format!("{}/hook", crate::story::serve(receiver).await?);
    let endpoint = match cast
        .merchant
        .call::<Value>(reqwest::Method::POST, "/v1/webhooks", Some(Body::json(json!({"url": url}))), None)
        .await
    {
        Err(SdkError::Problem { code, .. }) if code == WEBHOOK_URL_REFUSED => {
            return Err(Unmet(format!(
                "it registers a webhook on a loopback receiver it runs, which this registry refuses ({code}); run it \
                 against a registry started with --allow-private-webhooks"
            ))
            .into())
        }
        endpoint => endpoint.context("registering a loopback webhook")?,
    };
    let secret = endpoint.body["secret"].as_str().context("the endpoint's secret")?.to_string();
    let dm = cast
        .buyer
        .call::<Value>(reqwest::Method::POST, "/v1/dms", Some(Body::json(json!({"with": cast.merchant_handle}))), None)
        .await?;
    let dm = dm.body["id"].as_str().context("a DM id")?.to_string();
    let path = format!("/v1/channels/{dm}/messages");
    cast.buyer
        .call::<Value>(reqwest::Method::POST, &path, Some(Body::json(json!({"body": "the invoice is attached"}))), None)
        .await?;
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(DELIVERY_WAIT_S);
    loop {
        if let Some((headers, body)) = kept.lock().expect("kept").clone() {
            let header = |name: &str| headers.get(name).and_then(|v| v.to_str().ok()).unwrap_or_default().to_string();
            return Ok(Captured {
                secret,
                id: header("webhook-id"),
                timestamp: header("webhook-timestamp").parse().context("webhook-timestamp")?,
                signature: header("webhook-signature"),
                body: body.to_vec(),
            });
        }
        ensure!(
            std::time::Instant::now() < deadline,
            "no delivery reached the loopback receiver in {DELIVERY_WAIT_S} s"
        );
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
}

/// The receiver's verdict on a delivery arriving at `now_s`, as a client sees an HTTP answer.
fn received(captured: &Captured, signature: &str, body: &[u8], now_s: i64) -> Result<Value, SdkError> {
    use bazaar_conversation::webhooks::sign::verify;
    match verify(&[&captured.secret], &captured.id, captured.timestamp, signature, body, now_s) {
        Ok(()) => Ok(json!({"accepted": true})),
        Err(refused) => Err(SdkError::Problem {
            status: RECEIVER_REFUSAL_STATUS,
            code: refused.code().to_string(),
            detail: refused.to_string(),
            body: Value::Null,
        }),
    }
}

async fn webhook_replay(cast: &Cast) -> Result<Measured> {
    let captured = capture_delivery(cast).await?;
    // The genuine delivery is accepted when it arrives; the same bytes ten minutes later are not.
    ensure!(received(&captured, &captured.signature, &captured.body, captured.timestamp).is_ok());
    let later = captured.timestamp + 2 * bazaar_conversation::webhooks::sign::TOLERANCE_S;
    measured!(cast, "replay a captured webhook delivery to its receiver ten minutes later", async {
        received(&captured, &captured.signature, &captured.body, later)
    })
}

async fn webhook_forgery(cast: &Cast) -> Result<Measured> {
    let captured = capture_delivery(cast).await?;
    let forged_body = String::from_utf8_lossy(&captured.body).replace("the invoice is attached", "pay to my account");
    let now = captured.timestamp;
    measured!(cast, "deliver a forged body under a captured signature, and one signed with a guessed secret", async {
        let guessed = bazaar_conversation::webhooks::sign::sign(
            "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw",
            &captured.id,
            now,
            forged_body.as_bytes(),
        )
        .unwrap_or_default();
        received(&captured, &captured.signature, forged_body.as_bytes(), now)
            .and_then(|_| received(&captured, &guessed, forged_body.as_bytes(), now))
    })
}

async fn spend_without_pay(cast: &Cast) -> Result<Measured> {
    // The owner hands its agent a job-run credential: jobs, read, talk — no `pay`.
    let buyer = format!("buy-{}", cast.tag);
    let job_run = cast.owner.issue_scoped_credential(&buyer, &["jobs", "read", "talk"]).await?;
    let agent = cast.buyer.with_credential(job_run);
    ensure!(agent.me().await.is_ok(), "the job-run credential still reads");
    measured!(cast, "ask for a payment token with a credential issued without the pay scope", async {
        agent
            .issue_token(&cast.merchant_handle, PRICE_MINOR, "job-run-order", "https://shop/restock")
            .await
            .map(|a| a.body)
    })
}

async fn second_settlement(cast: &Cast) -> Result<Measured> {
    paid_order(cast, "order-1").await?;
    // The buyer is tricked into a second token for the paid order; the merchant settles it too.
    let key = format!("second-{}", cast.tag);
    let body = json!({"merchant": cast.merchant_handle, "max_amount_minor": PRICE_MINOR, "order_id": "order-1", "resource": "https://shop/restock"});
    let second =
        cast.buyer.call::<Value>(reqwest::Method::POST, "/v1/tokens", Some(Body::json(body)), Some(&key)).await?;
    let second = second.body["token"].as_str().unwrap_or_default().to_string();
    let (balances_before, head_before) = snapshot(cast).await?;
    let result = cast
        .merchant
        .settle(&second, PRICE_MINOR, "order-1", Some("a-fresh-key"))
        .await
        .map(|a| crate::wire_json(&a.body));
    Ok((
        balances_before,
        head_before,
        Attempt { tried: "settle a second token for an order already paid, under a fresh key".into(), result },
    ))
}

async fn replayed_token(cast: &Cast) -> Result<Measured> {
    let token = paid_order(cast, "order-1").await?;
    measured!(cast, "settle an already-settled token again under a fresh Idempotency-Key", async {
        cast.merchant.settle(&token, PRICE_MINOR, "order-1", Some("fresh-key")).await.map(|a| a.body)
    })
}

async fn expired_token(cast: &Cast) -> Result<Measured> {
    let ttl_s = bazaar_types::limits::TOKEN_TTL_S_MIN;
    let body = json!({"merchant": cast.merchant_handle, "max_amount_minor": PRICE_MINOR, "order_id": "order-1", "resource": "r", "ttl_s": ttl_s});
    let answer = cast.buyer.call::<Value>(reqwest::Method::POST, "/v1/tokens", Some(Body::json(body)), None).await?;
    let token = answer.body["token"].as_str().unwrap_or_default().to_string();
    // Wait out the shortest lifetime a token can have, then for the sweeper to
    // release its hold, so the snapshot is taken after the registry's own work.
    let available = cast.buyer.me().await?.available_minor;
    tokio::time::sleep(std::time::Duration::from_secs(ttl_s)).await;
    for _ in 0..SWEEP_WAITS_MAX {
        if cast.buyer.me().await?.available_minor != available {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(bazaar_types::limits::SWEEP_INTERVAL_MS / 4)).await;
    }
    measured!(cast, format!("settle a token after its {ttl_s} s lifetime ran out"), async {
        cast.merchant.settle(&token, PRICE_MINOR, "order-1", None).await.map(|a| a.body)
    })
}

async fn over_ceiling(cast: &Cast) -> Result<Measured> {
    measured!(
        cast,
        format!("ask for a token of {} against a per-call ceiling of {PER_CALL_MAX_MINOR}", PER_CALL_MAX_MINOR + 1),
        async {
            cast.buyer.issue_token(&cast.merchant_handle, PER_CALL_MAX_MINOR + 1, "order-1", "r").await.map(|a| a.body)
        }
    )
}

async fn other_merchant(cast: &Cast) -> Result<Measured> {
    let token = token(cast, "order-1", PRICE_MINOR).await?;
    measured!(cast, "a rival merchant settles a token addressed to another merchant", async {
        cast.other_merchant.settle(&token, PRICE_MINOR, "order-1", None).await.map(|a| a.body)
    })
}

async fn forged_token(cast: &Cast) -> Result<Measured> {
    use base64::Engine;
    let token = token(cast, "order-1", PRICE_MINOR).await?;
    let (payload, signature) = token.trim_start_matches("apt_").split_once('.').context("token shape")?;
    let b64 = base64::engine::general_purpose::URL_SAFE_NO_PAD;
    let mut claims: Value = serde_json::from_slice(&b64.decode(payload)?)?;
    claims["max"] = json!(PER_CALL_MAX_MINOR * 5);
    let forged = format!("apt_{}.{signature}", b64.encode(serde_json::to_vec(&claims)?));
    measured!(cast, "raise a token's max amount and keep its signature", async {
        cast.merchant.settle(&forged, PER_CALL_MAX_MINOR * 5, "order-1", None).await.map(|a| a.body)
    })
}

async fn invite_reuse(cast: &Cast) -> Result<Measured> {
    let invite = cast.owner.issue_invite().await?;
    cast.owner.redeem_invite(&invite, &generate_key(), &format!("first-{}", cast.tag)).await?;
    measured!(cast, "redeem an invite code a second time", async {
        let joined = cast.owner.redeem_invite(&invite, &generate_key(), &format!("second-{}", cast.tag)).await?;
        Ok(serde_json::to_value(joined).expect("an enrolment serialises"))
    })
}

// ---- escrow, disputes, stake -------------------------------------------------------

/// A funded, accepted one-milestone contract from the buyer to the merchant,
/// delivered; `arbiter` defaults to the dispute desk.
async fn delivered_contract(cast: &Cast, arbiter: Option<&str>) -> Result<String> {
    let due = crate::runtime_now_ms() + 86_400_000;
    let key = format!("contract-{}", cast.tag);
    let created = cast
        .buyer
        .create_contract(&cast.merchant_handle, arbiter, &[(MILESTONE_MINOR, "restock", due)], "terms", None, &key)
        .await?;
    let id = created.body.id.clone();
    cast.merchant.contract_act(&id, "accept").await?;
    cast.merchant.deliver(&id, 0, b"delivery note").await?;
    Ok(id)
}

async fn milestone_dispute(cast: &Cast, contract: &str) -> Result<String> {
    let subject = bazaar_sdk::wire::dispute::DisputeSubject::Milestone { contract: contract.to_string(), index: 0 };
    let filed = cast.buyer.file_dispute(subject, "not_as_described", MILESTONE_MINOR, "wrong colour").await?;
    Ok(filed.body.id)
}

async fn call_dispute(cast: &Cast, order: &str) -> Result<String> {
    paid_order(cast, order).await?;
    let subject = bazaar_sdk::wire::dispute::DisputeSubject::Call {
        merchant: cast.merchant_handle.to_string(),
        order_id: order.to_string(),
    };
    let filed = cast.buyer.file_dispute(subject, "not_delivered", PRICE_MINOR, "nothing came back").await?;
    Ok(filed.body.id)
}

/// Waits until the dispute leaves `phase` (the sweeper acts on deadlines), if
/// the registry's deadline is near enough to wait for.
async fn outwait(cast: &Cast, client: &Client, dispute: &str, phase: &str) -> Result<Value> {
    use bazaar_sdk::wire::dispute::Dispute;
    let started = std::time::Instant::now();
    loop {
        let record: Dispute = client.dispute(dispute).await?;
        if record.phase != phase {
            return Ok(crate::wire_json(&record));
        }
        let deadline = record.deadline.unwrap_or(i64::MAX);
        let wait_ms = deadline.saturating_sub(crate::runtime_now_ms());
        if wait_ms > (PHASE_WAIT_S_MAX * 1000) as i64 {
            return Err(Unmet(format!(
                "it outwaits the {phase} phase, whose deadline is {} s away; run it against a registry with \
                 short windows (serve --answer-window-s 2 --evidence-window-s 2 --appeal-window-s 2)",
                wait_ms / 1000
            ))
            .into());
        }
        ensure!(started.elapsed().as_secs() <= 2 * PHASE_WAIT_S_MAX, "the sweeper did not advance {dispute}");
        let _ = cast;
        tokio::time::sleep(std::time::Duration::from_millis(bazaar_types::limits::SWEEP_INTERVAL_MS / 2)).await;
    }
}

async fn double_release(cast: &Cast) -> Result<Measured> {
    let id = delivered_contract(cast, None).await?;
    cast.buyer.release(&id, 0, None).await?;
    measured!(cast, "release a milestone that was already released, under a fresh key", async {
        cast.buyer.release(&id, 0, Some("another-key")).await.map(|a| a.body)
    })
}

async fn release_disputed(cast: &Cast) -> Result<Measured> {
    let id = delivered_contract(cast, None).await?;
    milestone_dispute(cast, &id).await?;
    measured!(cast, "release a milestone while a dispute on it is open", async {
        cast.buyer.release(&id, 0, None).await.map(|a| a.body)
    })
}

async fn dispute_unpaid(cast: &Cast) -> Result<Measured> {
    let subject = bazaar_sdk::wire::dispute::DisputeSubject::Call {
        merchant: cast.merchant_handle.to_string(),
        order_id: "never-paid".to_string(),
    };
    measured!(cast, "dispute an order that was never paid", async {
        cast.buyer.file_dispute(subject, "not_delivered", PRICE_MINOR, "").await.map(|a| a.body)
    })
}

async fn dispute_foreign(cast: &Cast) -> Result<Measured> {
    paid_order(cast, "order-1").await?;
    let subject = bazaar_sdk::wire::dispute::DisputeSubject::Call {
        merchant: cast.merchant_handle.to_string(),
        order_id: "order-1".to_string(),
    };
    measured!(cast, "dispute a paid call someone else bought (to freeze a rival's funds)", async {
        cast.other_merchant.file_dispute(subject, "not_delivered", PRICE_MINOR, "").await.map(|a| a.body)
    })
}

async fn evidence_stranger(cast: &Cast) -> Result<Measured> {
    let dispute = call_dispute(cast, "order-1").await?;
    let stranger_key = generate_key();
    measured!(cast, "add evidence to a dispute one is not party to", async {
        cast.other_merchant.add_evidence(&dispute, &stranger_key, b"fake receipt", None).await.map(|a| a.body)
    })
}

async fn party_rules(cast: &Cast) -> Result<Measured> {
    let dispute = call_dispute(cast, "order-1").await?;
    measured!(cast, "the respondent rules on its own dispute (reject the claim)", async {
        cast.merchant.rule(&dispute, "reject", 0, 0, "I did nothing wrong").await.map(|a| a.body)
    })
}

async fn second_execution(cast: &Cast) -> Result<Measured> {
    let dispute = call_dispute(cast, "order-1").await?;
    // The merchant stays silent: past the answer deadline the sweeper executes a default ruling.
    let record = outwait(cast, &cast.buyer, &dispute, "filed").await?;
    ensure!(record["phase"] == "executed", "expected a default execution, got {}", record["phase"]);
    measured!(cast, "execute a dispute's ruling a second time", async {
        cast.buyer.execute_dispute(&dispute, Some("again")).await.map(|a| a.body)
    })
}

async fn stake_withdraw(cast: &Cast) -> Result<Measured> {
    paid_order(cast, "order-0").await?;
    cast.merchant.stake_lock(STAKE_MINOR, &format!("lock-{}", cast.tag)).await?;
    cast.merchant.stake_unlock(STAKE_MINOR, &format!("unlock-{}", cast.tag)).await?;
    call_dispute(cast, "order-1").await?;
    measured!(cast, "withdraw stake while a dispute against the merchant is open", async {
        cast.merchant.stake_withdraw(&format!("withdraw-{}", cast.tag)).await.map(|a| a.body)
    })
}

async fn late_appeal(cast: &Cast) -> Result<Measured> {
    // The rival merchant's agent is a neutral arbiter for this contract.
    let arbiter = cast.other_merchant.me().await?.member.id;
    let id = delivered_contract(cast, Some(&arbiter)).await?;
    let dispute = milestone_dispute(cast, &id).await?;
    cast.merchant.add_evidence(&dispute, &cast.merchant_key, b"signed delivery receipt", None).await?;
    outwait(cast, &cast.buyer, &dispute, "evidence").await?;
    cast.other_merchant.rule(&dispute, "reject", 0, 0, "delivery receipt is signed").await?;
    outwait(cast, &cast.buyer, &dispute, "appealable").await?;
    measured!(cast, "appeal a ruling after the appeal window closed", async {
        cast.buyer.appeal(&dispute).await.map(|a| a.body)
    })
}

/// Fails unless every verdict held.
/// Every attack ran and held (a skipped one counts as not held).
pub fn ensure_all_held(verdicts: &[Verdict]) -> Result<()> {
    let failed: Vec<&str> = verdicts.iter().filter(|v| !v.held()).map(|v| v.name.as_str()).collect();
    ensure!(failed.is_empty(), "attacks not refused cleanly: {}", failed.join(", "));
    Ok(())
}

// ---- reputation, passports, federation ---------------------------------------------

async fn merchant_passport(cast: &Cast) -> Result<bazaar_sdk::wire::federation::Passport> {
    paid_order(cast, "order-1").await?;
    Ok(cast.merchant.passport(None).await?)
}

async fn tampered_passport(cast: &Cast) -> Result<Measured> {
    let mut passport = merchant_passport(cast).await?;
    passport.credential_subject.figures.score_bps = 9_999;
    measured!(cast, "raise the score in a genuine passport and present it", async {
        cast.merchant.verify_passport(&passport).await
    })
}

async fn unrecognised_issuer(cast: &Cast) -> Result<Measured> {
    // A passport-shaped credential signed by a key no registry this one recognises holds.
    let rogue = generate_key();
    let mut passport = serde_json::to_value(merchant_passport(cast).await?)?;
    passport.as_object_mut().context("passport object")?.remove("proof");
    let rogue_did = bazaar_sdk::did_of(&rogue);
    passport["issuer"] = json!(rogue_did);
    passport["credentialSubject"]["scoreBps"] = json!(10_000);
    let method = bazaar_core::vc::did_key_verification_method(&rogue.verifying_key());
    let created = passport["validFrom"].as_str().unwrap_or_default().to_string();
    let forged: bazaar_sdk::wire::federation::Passport =
        serde_json::from_value(bazaar_core::vc::sign_eddsa_jcs_2022(&passport, &rogue, &method, &created)?)?;
    let audience = cast.operator.well_known().await?.did;
    measured!(cast, "import a passport signed by an unrecognised issuer", async {
        cast.merchant.import_passport(&forged, &cast.merchant_key, &audience).await
    })
}

async fn passport_other_agent(cast: &Cast) -> Result<Measured> {
    let passport = merchant_passport(cast).await?;
    let audience = cast.operator.well_known().await?.did;
    measured!(cast, "present another agent's genuine passport as one's own", async {
        cast.buyer.import_passport(&passport, &generate_key(), &audience).await
    })
}

async fn replayed_relay(cast: &Cast) -> Result<Measured> {
    // A settlement relay for a genuine token, signed by a registry this one does not recognise.
    let token = token(cast, "order-1", PRICE_MINOR).await?;
    let rogue = generate_key();
    let rogue_did = bazaar_sdk::did_of(&rogue);
    let body = serde_json::to_vec(&json!({"token": token, "amount_minor": PRICE_MINOR, "order_id": "order-1"}))?;
    let ts = crate::runtime_now_ms();
    let message = bazaar_core::federation::s2s_message(&rogue_did, "POST", "/v1/federation/settle", ts, &body);
    let sig = bazaar_core::crypto::sign(&rogue, &message);
    let header = format!("registry={rogue_did},key={rogue_did},ts={ts},sig={sig}");
    let url = format!("{}/v1/federation/settle", cast.operator.base());
    measured!(cast, "relay a settlement of this registry's token from an unrecognised registry", async {
        let request = cast
            .operator
            .http()
            .post(&url)
            .header("bazaar-registry-signature", &header)
            .header("content-type", "application/json")
            .body(body.clone());
        Ok(cast.operator.send::<Value>(request).await?.body)
    })
}

/// Reads a member's reputation and says whether the score rose from `before`.
async fn gained(cast: &Cast, who: &str, before: &Reputation) -> Result<Value, SdkError> {
    let after = cast.operator.reputation(who).await?;
    let (before, after) = (&before.local, &after.local);
    let rose = after.score_bps > before.score_bps || after.weighted_success_ppm > before.weighted_success_ppm;
    Ok(json!({"gained": rose, "before": before, "after": after}))
}

async fn self_dealing(cast: &Cast) -> Result<Measured> {
    // The buyer's owner enrolls a second agent as a shop and buys from it: wash trading.
    let twin_handle = format!("twin-{}", cast.tag);
    let invite = cast.owner.issue_invite().await?;
    let twin = cast.owner.redeem_invite(&invite, &generate_key(), &twin_handle).await?;
    let twin = cast.owner.with_credential(twin.credential.as_str());
    let before = cast.operator.reputation(&twin_handle).await?;
    for n in 0..SELF_DEALS {
        let order = format!("wash-{n}");
        let token = cast.buyer.issue_token(&twin_handle, PRICE_MINOR, &order, "https://twin/wash").await?;
        twin.settle(token.body.token.as_str(), PRICE_MINOR, &order, None).await?;
    }
    measured!(cast, "buy from an agent of one's own owner to farm its reputation", async {
        gained(cast, &twin_handle, &before).await
    })
}

async fn tiny_buys(cast: &Cast) -> Result<Measured> {
    // One buyer after one genuine purchase: many more tiny buys the same week.
    paid_order(cast, "first").await?;
    let before = cast.operator.reputation(&cast.merchant_handle).await?;
    for n in 0..TINY_BUYS {
        let order = format!("tiny-{n}");
        let token = token(cast, &order, 1).await?;
        cast.merchant.settle(&token, 1, &order, None).await?;
    }
    measured!(cast, "inflate a merchant's count with many one-unit buys from one counterparty", async {
        gained(cast, &cast.merchant_handle, &before).await
    })
}

// ---- the storefront -------------------------------------------------------------------

/// Units per maker and the buyer's cap in the storefront attacks (within the cast's per-call ceiling).
const SHARE_UNITS: u64 = 2;
const UNIT_PRICE_MINOR: u64 = 200;

/// Lists a product for `maker` whose words are unique to this cast; returns the listing id.
async fn list_for(cast: &Cast, maker: &Client, sku: &str) -> Result<String> {
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
async fn open_rfq(cast: &Cast, quantity: u64) -> Result<String> {
    let deadline = crate::runtime_now_ms() + 10 * 86_400_000;
    let ask = json!({"item": format!("widget {}", cast.tag), "quantity": quantity,
        "max_unit_price_minor": UNIT_PRICE_MINOR + 20, "deadline_ms": deadline});
    let key = format!("rfq-{}", cast.tag);
    let rfq = cast.buyer.call::<Value>(reqwest::Method::POST, "/v1/rfqs", Some(Body::json(ask)), Some(&key)).await?;
    rfq.body["id"].as_str().map(str::to_string).context("rfq id")
}

async fn propose(maker: &Client, rfq: &str, listing: &str, price: u64, quantity: u64) -> Result<Value, SdkError> {
    let body = json!({"listing": listing, "unit_price_minor": price, "quantity": quantity});
    Ok(maker
        .call::<Value>(reqwest::Method::POST, &format!("/v1/rfqs/{rfq}/offers"), Some(Body::json(body)), None)
        .await?
        .body)
}

#[derive(Clone, Copy)]
enum OfferAttack {
    BelowFloor,
    AboveCap,
    BeyondCapacity,
    FourthRevision,
}

async fn offer_attack(cast: &Cast, kind: OfferAttack) -> Result<Measured> {
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
async fn placed_order(cast: &Cast, makers: &[&Client]) -> Result<String> {
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

async fn agent_self_approval(cast: &Cast) -> Result<Measured> {
    let order = placed_order(cast, &[&cast.merchant]).await?;
    measured!(cast, "the buyer agent approves its own order", async {
        Ok(cast
            .buyer
            .call::<Value>(reqwest::Method::POST, &format!("/v1/orders/{order}/approve"), None, None)
            .await?
            .body)
    })
}

async fn prove(maker: &Client, order: &str, share: u32, tracking: &str) -> Result<SharePaid, SdkError> {
    maker.prove_shipment(order, share, tracking, "image/jpeg", format!("receipt {order} {share}").into_bytes()).await
}

/// Which share in `order` is `maker`'s.
async fn share_of(cast: &Cast, order: &str, maker: &Client) -> Result<u32> {
    let me = maker.me().await?.member.id;
    let shown = cast.buyer.call::<Value>(reqwest::Method::GET, &format!("/v1/orders/{order}"), None, None).await?.body;
    let lines = shown["lines"].as_array().context("lines")?;
    let index = lines.iter().position(|l| l["seller"] == me.as_str()).context("the maker has a share")?;
    Ok(index as u32)
}

async fn approved_order(cast: &Cast) -> Result<String> {
    let order = placed_order(cast, &[&cast.merchant, &cast.other_merchant]).await?;
    cast.owner.call::<Value>(reqwest::Method::POST, &format!("/v1/orders/{order}/approve"), None, None).await?;
    Ok(order)
}

async fn proof_for_another(cast: &Cast) -> Result<Measured> {
    let order = approved_order(cast).await?;
    let theirs = share_of(cast, &order, &cast.merchant).await?;
    measured!(cast, "a maker submits proof of shipment for another maker's share", async {
        prove(&cast.other_merchant, &order, theirs, "TRACK-OTHER").await
    })
}

async fn share_twice(cast: &Cast) -> Result<Measured> {
    let order = approved_order(cast).await?;
    let mine = share_of(cast, &order, &cast.merchant).await?;
    prove(&cast.merchant, &order, mine, "TRACK-1").await?;
    measured!(cast, "a maker is paid for the same share twice", async {
        prove(&cast.merchant, &order, mine, "TRACK-2").await
    })
}

// ---- x402 -----------------------------------------------------------------------------

/// The merchant settles, through the registry's x402 facilitator, a token the
/// buyer minted for another merchant (or for another resource of this one).
async fn x402_foreign_token(cast: &Cast, other_resource: bool) -> Result<Measured> {
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

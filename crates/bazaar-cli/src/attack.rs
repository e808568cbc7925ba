//! `bazaar attack`: the refusal rails. Each attack runs against a registry
//! through its public HTTP API, exactly as a real client would, and must be
//! refused with its expected code while nothing it touches changes: the
//! parties' balances stay put and the event ledger grows by at most the
//! `refusal.recorded` event of the refusal itself.
//!
//! Later capabilities (escrow, disputes, passports, the market) add their
//! attacks to [`CATALOGUE`].

use crate::demo::enroll_pair;
use anyhow::{bail, ensure, Context, Result};
use bazaar_core::refusal::Code;
use bazaar_sdk::{generate_key, Client, SdkError};
use futures::future::BoxFuture;
use serde::Serialize;
use serde_json::{json, Value};

/// Each attack's cast gets this much, with ceilings that leave room to refuse.
const FUNDS_MINOR: u64 = 10_000;
const PER_CALL_MAX_MINOR: u64 = 1_000;
const PRICE_MINOR: u64 = 250;
/// Quarter-intervals the expired-token attack waits for the sweeper (about 5 sweeps).
const SWEEP_WAITS_MAX: usize = 20;

/// The parties an attack plays with, freshly enrolled for it.
pub struct Cast {
    pub operator: Client,
    pub owner: Client,
    pub buyer: Client,
    pub merchant: Client,
    pub merchant_handle: String,
    pub other_merchant: Client,
    tag: String,
}

/// What an attack attempted, as a real client sees it.
pub struct Attempt {
    pub tried: String,
    pub result: Result<Value, SdkError>,
}

type Run = for<'a> fn(&'a Cast) -> BoxFuture<'a, Result<Measured>>;

/// One named attack and the refusal it must meet.
pub struct Attack {
    pub name: &'static str,
    /// The refusal it must meet; its HTTP status follows from the code.
    pub expect: Code,
    run: Run,
}

/// Every attack, by name.
pub const CATALOGUE: &[Attack] = &[
    Attack { name: "second-settlement", expect: Code::OrderAlreadySettled, run: |c| Box::pin(second_settlement(c)) },
    Attack { name: "replayed-token", expect: Code::TokenSettled, run: |c| Box::pin(replayed_token(c)) },
    Attack { name: "expired-token", expect: Code::TokenExpired, run: |c| Box::pin(expired_token(c)) },
    Attack { name: "over-ceiling", expect: Code::BudgetPerCallExceeded, run: |c| Box::pin(over_ceiling(c)) },
    Attack { name: "other-merchant", expect: Code::NotAudience, run: |c| Box::pin(other_merchant(c)) },
    Attack { name: "forged-token", expect: Code::TokenSignatureInvalid, run: |c| Box::pin(forged_token(c)) },
    Attack { name: "invite-reuse", expect: Code::InviteUsed, run: |c| Box::pin(invite_reuse(c)) },
];

impl Attack {
    pub fn expect_status(&self) -> u16 {
        bazaar_server::problem::status_of(self.expect).as_u16()
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
}

impl Verdict {
    pub fn held(&self) -> bool {
        self.refused_as_expected && self.balances_unchanged && self.ledger_unchanged
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
        let verdict = judge(attack, &cast).await?;
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
        &bazaar_server::random_b64(6).to_lowercase().replace(['-', '_'], "x")
    );
    let (owner, buyer) = enroll_pair(operator, &format!("own-{tag}"), &format!("buy-{tag}")).await?;
    let (_, merchant) = enroll_pair(operator, &format!("sown-{tag}"), &format!("shop-{tag}")).await?;
    let (_, other_merchant) = enroll_pair(operator, &format!("oown-{tag}"), &format!("rival-{tag}")).await?;
    let owner_id = owner.me().await?["member"]["id"].as_str().unwrap_or_default().to_string();
    operator.mint(&owner_id, FUNDS_MINOR, &format!("attack-mint-{tag}")).await?;
    owner.fund(&format!("buy-{tag}"), FUNDS_MINOR, &format!("attack-fund-{tag}")).await?;
    owner.set_budget(&format!("buy-{tag}"), PER_CALL_MAX_MINOR, FUNDS_MINOR, FUNDS_MINOR).await?;
    Ok(Cast {
        operator: operator.clone(),
        owner,
        buyer,
        merchant,
        merchant_handle: format!("shop-{tag}"),
        other_merchant,
        tag,
    })
}

/// What "nothing changed" is measured against.
#[derive(PartialEq, Debug)]
struct Balances(Vec<Value>);

async fn balances(cast: &Cast) -> Result<Balances> {
    let mut out = Vec::new();
    for party in [&cast.owner, &cast.buyer, &cast.merchant, &cast.other_merchant] {
        let me = party.me().await?;
        out.push(json!([me["balance_minor"], me["available_minor"], me["budget"]["spent_total_minor"]]));
    }
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
    let appended: Vec<String> =
        page["events"].as_array().into_iter().flatten().map(|e| e["kind"].as_str().unwrap_or("").to_string()).collect();
    let (status, code) = match &attempt.result {
        Err(SdkError::Problem { status, code, .. }) => (*status, code.clone()),
        Err(error) => bail!("{}: transport failed: {error}", attack.name),
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
    })
}

/// An attack's body: honest setup, then the snapshot, then the attempt.
type Measured = (Balances, u64, Attempt);

async fn snapshot(cast: &Cast) -> Result<(Balances, u64)> {
    Ok((balances(cast).await?, head(cast).await?))
}

async fn token(cast: &Cast, order: &str, max: u64) -> Result<String> {
    let answer = cast.buyer.issue_token(&cast.merchant_handle, max, order, "https://shop/restock").await?;
    answer.body["token"].as_str().map(str::to_string).context("token in answer")
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
        let result = $attempt.await;
        Ok((balances, head, Attempt { tried: $tried.to_string(), result }))
    }};
}

async fn second_settlement(cast: &Cast) -> Result<Measured> {
    paid_order(cast, "order-1").await?;
    // The buyer is tricked into a second token for the paid order; the merchant settles it too.
    let key = format!("second-{}", cast.tag);
    let body = json!({"merchant": cast.merchant_handle, "max_amount_minor": PRICE_MINOR, "order_id": "order-1", "resource": "https://shop/restock"});
    let second = cast.buyer.call(reqwest::Method::POST, "/v1/tokens", Some(body), Some(&key)).await?;
    let second = second.body["token"].as_str().unwrap_or_default().to_string();
    let (balances_before, head_before) = snapshot(cast).await?;
    let result = cast.merchant.settle(&second, PRICE_MINOR, "order-1", Some("a-fresh-key")).await.map(|a| a.body);
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
    let answer = cast.buyer.call(reqwest::Method::POST, "/v1/tokens", Some(body), None).await?;
    let token = answer.body["token"].as_str().unwrap_or_default().to_string();
    // Wait out the shortest lifetime a token can have, then for the sweeper to
    // release its hold, so the snapshot is taken after the registry's own work.
    let available = cast.buyer.me().await?["available_minor"].clone();
    tokio::time::sleep(std::time::Duration::from_secs(ttl_s)).await;
    for _ in 0..SWEEP_WAITS_MAX {
        if cast.buyer.me().await?["available_minor"] != available {
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
        cast.owner.redeem_invite(&invite, &generate_key(), &format!("second-{}", cast.tag)).await
    })
}

/// Fails unless every verdict held.
pub fn ensure_all_held(verdicts: &[Verdict]) -> Result<()> {
    let failed: Vec<&str> = verdicts.iter().filter(|v| !v.held()).map(|v| v.name.as_str()).collect();
    ensure!(failed.is_empty(), "attacks not refused cleanly: {}", failed.join(", "));
    Ok(())
}

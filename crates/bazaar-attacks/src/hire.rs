//! The spending discipline's attacks, for `bazaar attack`: a payment off
//! the owner's exact authorization, a second payment for a task whose first
//! looked lost, a hire re-agreed on changed terms, "accept and pay" with a
//! result the hired specialist never signed, and a lease bought for someone
//! else's task identity. The cast's merchant plays the specialist (and the
//! worker), the buyer the hiring agent, the buyer's owner the owner.

use anyhow::Result;
use bazaar_relay::jobs::JOB_RESULT;
use bazaar_relay::Signer;

use super::{snapshot, Attempt, Cast, Measured, PRICE_MINOR};

fn task(cast: &Cast, n: u8) -> String {
    let digest = bazaar_core::crypto::sha256_hex(format!("{}-{n}", cast.tag).as_bytes());
    digest[..64].to_string()
}

async fn id_of(client: &bazaar_sdk::Client) -> Result<String> {
    Ok(client.me().await?.member.id)
}

fn json_of(event: &bazaar_relay::Event) -> Result<bazaar_sdk::wire::nostr::SignedEvent> {
    Ok(event.into())
}

/// The owner authorizes its agent to pay the merchant exactly `PRICE_MINOR` for a task; returns its id.
async fn authorized(cast: &Cast, task: &str) -> Result<(String, String, String)> {
    let (buyer, merchant) = (id_of(&cast.buyer).await?, id_of(&cast.merchant).await?);
    let found = cast.owner.authorize_service(&buyer, task, &merchant, &merchant, PRICE_MINOR).await?.body;
    Ok((found.id, merchant.clone(), merchant))
}

pub(super) async fn payment_without_exact_authorization(cast: &Cast) -> Result<Measured> {
    let task = task(cast, 1);
    let (id, specialist, pay_to) = authorized(cast, &task).await?;
    measured!(cast, "pay a specialist more than the owner authorized for the task", async {
        cast.buyer.pay_service(&id, &task, &specialist, &pay_to, 3 * PRICE_MINOR, "more").await.map(|a| a.body)
    })
}

pub(super) async fn second_payment_while_uncertain(cast: &Cast) -> Result<Measured> {
    let task = task(cast, 2);
    let (id, specialist, pay_to) = authorized(cast, &task).await?;
    // The first payment went through; its answer was lost on the way back.
    cast.buyer.pay_service(&id, &task, &specialist, &pay_to, PRICE_MINOR, "first").await?;
    measured!(cast, "pay the same task again under a fresh key, as if the first had failed", async {
        cast.buyer.pay_service(&id, &task, &specialist, &pay_to, PRICE_MINOR, "again").await.map(|a| a.body)
    })
}

/// The merchant's signed offer for `task` at `price`, paid to itself.
fn offer(cast: &Cast, merchant: &str, task: &str, price: u64) -> String {
    let statement = bazaar_sdk::hire_offer_statement(merchant, task, merchant, price);
    bazaar_core::crypto::sign(&cast.merchant_key, statement.as_bytes())
}

pub(super) async fn changed_terms_after_agreement(cast: &Cast) -> Result<Measured> {
    let (task, merchant) = (task(cast, 3), id_of(&cast.merchant).await?);
    let agreed = offer(cast, &merchant, &task, PRICE_MINOR);
    cast.buyer.agree_hire(&merchant, &task, PRICE_MINOR, &merchant, &agreed, false).await?;
    // The specialist announces a higher price afterwards, signed like the first.
    let dearer = offer(cast, &merchant, &task, 3 * PRICE_MINOR);
    measured!(cast, "re-agree a hire on the specialist's later, dearer terms", async {
        cast.buyer.agree_hire(&merchant, &task, 3 * PRICE_MINOR, &merchant, &dearer, false).await.map(|a| a.body)
    })
}

pub(super) async fn accept_without_verified_response(cast: &Cast) -> Result<Measured> {
    let (task, merchant) = (task(cast, 4), id_of(&cast.merchant).await?);
    let signature = offer(cast, &merchant, &task, PRICE_MINOR);
    let hire = cast.buyer.agree_hire(&merchant, &task, PRICE_MINOR, &merchant, &signature, false).await?.body;
    let id = hire.id;
    // A "result" for the task from a key the specialist never enrolled, with its own enrollment.
    let stranger = Signer::generate(&bazaar_server::OsEntropy);
    let stranger_identity = bazaar_sdk::generate_key();
    let now = bazaar_sdk::clock::unix_now();
    let result = stranger.sign(now, JOB_RESULT, vec![vec!["e".into(), task.clone()]], "done, trust me");
    let enrollment = bazaar_agents::labor::identity::enroll(&stranger, &stranger_identity, now);
    let (result, enrollment) = (json_of(&result)?, json_of(&enrollment)?);
    measured!(cast, "accept and pay a hire with a result the hired specialist never signed", async {
        cast.buyer.accept_hire(&id, &result, &enrollment).await.map(|a| a.body)
    })
}

pub(super) async fn lease_for_another_identity(cast: &Cast) -> Result<Measured> {
    let merchant = id_of(&cast.merchant).await?;
    // The merchant's own task identity, bound to the merchant's DID: not the buyer's.
    let theirs = Signer::generate(&bazaar_server::OsEntropy);
    let enrollment =
        json_of(&bazaar_agents::labor::identity::enroll(&theirs, &cast.merchant_key, bazaar_sdk::clock::unix_now()))?;
    measured!(cast, "buy queue priority for a task identity that belongs to someone else", async {
        let key = format!("lease-{}", cast.tag);
        cast.buyer.buy_lease(&merchant, &merchant, PRICE_MINOR, 3_600, &enrollment, &key).await.map(|a| a.body)
    })
}

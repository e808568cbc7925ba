//! The Federation phase of the chamber's adoption page, run live: a stranger's
//! agent from a peer registry completes a first paid call and an escrowed
//! order here with zero manual onboarding.
//!
//! The registry the chamber serves is A. On the first run a second embedded
//! registry (B) starts beside it in the same process, on a clock that reads
//! A's, and the two operators recognise each other once (that is operators'
//! work, done once per peer, not onboarding of anyone). Then, with a fresh cast
//! each run:
//!
//! 1. an atelier on A sells a paid route (the SDK's settle-then-work-once
//!    middleware);
//! 2. a buyer agent on B, which A has never seen, pays it for one call: B holds
//!    and debits the buyer, the atelier settles through A, A relays to B; a
//!    retry of the same order is answered from the work receipt;
//! 3. the same agent joins A as a guest by its own signature (no invite, no
//!    owner here), funds its guest account through the corridor, and opens an
//!    escrowed order with the atelier, which accepts and delivers; the guest
//!    releases the milestone;
//! 4. the proof is read back: what A knew of the stranger before, each step's
//!    status, the balances on both registries, the corridors mirroring each
//!    other, and B's audit.

use super::federation::{paid_front, CORRIDOR_FEE_BPS, PEER_WEIGHT_BPS};
use anyhow::{ensure, Context, Result};
use bazaar_sdk::paid::PaidRoute;
use bazaar_sdk::wire::chamber::{EscrowShown, FederationProof, GuestShown, PeerShown, StrangerCall};
use bazaar_sdk::{did_of, generate_key, Body, Client};
use bazaar_stage::OffsetClock;
use bazaar_stage::{
    embedded_on_clock, enroll_pair, enroll_pair_with_key, member_id, serve_until_dropped, LocalRegistry,
};
use serde_json::{json, Value};
use std::path::Path;
use std::sync::Arc;

/// The atelier's price per call on A.
pub const STRANGER_CALL_MINOR: u64 = 300;
/// What the stranger moves into its guest account at A through the corridor.
pub const STRANGER_FUNDING_MINOR: u64 = 2_000;
/// The escrowed order's one milestone.
pub const STRANGER_MILESTONE_MINOR: u64 = 1_500;
/// What the stranger's owner gives it on B.
const STRANGER_FUNDS_MINOR: u64 = 10_000;
/// Corridor limits each side grants the other.
const PER_CALL_MAX_MINOR: u64 = 10_000;
const OUTSTANDING_MAX_MINOR: u64 = 1_000_000;
/// The milestone is due this long after the order.
const MILESTONE_DUE_MS: i64 = 7 * 86_400_000;

/// The peer registry the runs pay from, started once per served registry.
pub struct Peer {
    pub registry: LocalRegistry,
    pub did: String,
    /// The served registry's DID, as its card gives it.
    pub here_did: String,
}

/// Starts B in `dir` on a clock reading `here_now_ms`, and has each operator
/// recognise the other (A takes [`CORRIDOR_FEE_BPS`] on settlements relayed
/// from B's buyers).
pub async fn start_peer(here: &Client, here_now_ms: i64, dir: &Path) -> Result<Peer> {
    std::fs::create_dir_all(dir)?;
    let clock = Arc::new(OffsetClock::reading(here_now_ms));
    let registry = embedded_on_clock(dir, clock, None, bazaar_core::apply::Config::standard()).await?;
    let did = registry.state.registry.to_string();
    let here_did = here.well_known().await?.did;
    let a_terms = (CORRIDOR_FEE_BPS, PER_CALL_MAX_MINOR, OUTSTANDING_MAX_MINOR);
    here.add_peer(&registry.url, &did, PEER_WEIGHT_BPS, a_terms).await.context("recognising the peer here")?;
    let b_terms = (0, PER_CALL_MAX_MINOR, OUTSTANDING_MAX_MINOR);
    registry.operator().add_peer(here.base(), &here_did, PEER_WEIGHT_BPS, b_terms).await?;
    Ok(Peer { registry, did, here_did })
}

/// One run with a fresh cast (`suffix`); `here` is A's operator, `now_ms` A's clock.
pub async fn stranger_run(
    here: &Client,
    peer: &Peer,
    now_ms: i64,
    suffix: &str,
    dir: &Path,
) -> Result<FederationProof> {
    std::fs::create_dir_all(dir)?;
    let b = &peer.registry;
    let (_, atelier) = enroll_pair(here, &format!("atelier-owner{suffix}"), &format!("atelier{suffix}")).await?;
    let atelier_did = member_id(&atelier).await?;
    let route = PaidRoute::new(atelier.clone(), STRANGER_CALL_MINOR, &dir.join("atelier-receipts.db"))?;
    let (shop, _stop) =
        serve_until_dropped(paid_front("/atelier", Arc::new(route), ("pattern", "linen, cross-stitch"))).await?;

    let key = generate_key();
    let handle = format!("far-buyer{suffix}");
    let (owner, stranger) = enroll_pair_with_key(&b.operator(), &format!("far-owner{suffix}"), &handle, &key).await?;
    b.operator().mint(&member_id(&owner).await?, STRANGER_FUNDS_MINOR, &format!("far-mint{suffix}")).await?;
    owner.fund(&handle, STRANGER_FUNDS_MINOR, &format!("far-fund{suffix}")).await?;
    owner.set_budget(&handle, PER_CALL_MAX_MINOR, STRANGER_FUNDS_MINOR, STRANGER_FUNDS_MINOR).await?;
    let did = did_of(&key);
    let unknown_here = here.member(&did).await.err().and_then(|e| e.status()) == Some(404);

    // 1. The first paid call, relayed, and its retry.
    let url = format!("{shop}/atelier");
    let order = format!("far-call{suffix}");
    let call = stranger.pay_via(&url, &atelier_did, Some(&peer.here_did), STRANGER_CALL_MINOR, &order).await?;
    ensure!(call.status == 200, "the stranger's paid call: {} {}", call.status, call.body);
    let retry = stranger.pay_via(&url, &atelier_did, Some(&peer.here_did), STRANGER_CALL_MINOR, &order).await?;

    // 2. Joining here as a guest, by its own signature.
    let guest = Client::new(here.base(), None).join_as_guest_at(&key, &peer.did, &peer.here_did, now_ms).await?;
    let joined_as = member_id(&guest).await?;

    // 3. Funding the guest account through the corridor, then the escrowed order.
    let funding_order = format!("far-funding{suffix}");
    let body = json!({"merchant": did, "registry": peer.here_did, "max_amount_minor": STRANGER_FUNDING_MINOR,
        "order_id": funding_order, "resource": "guest funding"});
    let token = stranger.call::<Value>(reqwest::Method::POST, "/v1/tokens", Some(Body::json(body)), None).await?;
    let token = token.body["token"].as_str().context("the funding token")?.to_string();
    guest.settle(&token, STRANGER_FUNDING_MINOR, &funding_order, None).await?;
    let milestones = [(STRANGER_MILESTONE_MINOR, "forty embroidered cushion covers", now_ms + MILESTONE_DUE_MS)];
    let terms = "forty cushion covers, linen, embroidered; delivered within a week";
    let created =
        guest.create_contract(&atelier_did, None, &milestones, terms, None, &format!("far-order{suffix}")).await?;
    let contract = created.body.id.clone();
    atelier.contract_act(&contract, "accept").await?;
    atelier.deliver(&contract, 0, b"courier receipt: 40 covers").await?;
    guest.release(&contract, 0, None).await?;
    let contract_state = guest.contract(&contract).await?.state;

    // 4. The proof.
    let balance = |c: Client| async move { Ok::<_, anyhow::Error>(c.me().await?.balance_minor.unwrap_or(0)) };
    let path = format!("/v1/accounts/corridor:{}/transfers?limit=1", peer.did);
    let corridor_here = here.call::<Value>(reqwest::Method::GET, &path, None, None).await?.body;
    let corridor_here: i64 = corridor_here["account"]["balance"].as_str().unwrap_or("0").parse().unwrap_or(0);
    let audit_b = bazaar_store::audit::audit(b.state.store.as_ref(), &|_| {}).await?;
    let corridor_b = audit_b.corridors.get(&format!("corridor:{}", peer.here_did)).copied().unwrap_or(0);
    let guest_balance = balance(guest.clone()).await?;
    Ok(FederationProof {
        run: "federation".into(),
        cast: suffix.to_string(),
        peer: PeerShown { did: peer.did.clone(), url: b.url.clone() },
        stranger: did,
        unknown_here_before: unknown_here,
        call: StrangerCall { order, status: call.status, settlement: call.settlement, retry_replayed: retry.replayed },
        guest: GuestShown { joined_as, funded_minor: STRANGER_FUNDING_MINOR, balance_minor: guest_balance },
        escrow: EscrowShown { contract, milestone_minor: STRANGER_MILESTONE_MINOR, state: contract_state },
        stranger_on_peer_minor: balance(stranger).await?,
        stranger_paid_minor: STRANGER_CALL_MINOR + STRANGER_FUNDING_MINOR,
        stranger_funds_minor: STRANGER_FUNDS_MINOR,
        atelier_received_minor: balance(atelier).await?,
        corridor_here_minor: corridor_here.to_string(),
        corridor_on_peer_minor: corridor_b.to_string(),
        peer_audit_ok: audit_b.ok,
    })
}

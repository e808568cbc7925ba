//! Bounties over HTTP: a job's reward funded when the job is posted, released
//! to the worker's reward destination on the validator's **accepted** verdict,
//! withdrawn by the poster after the claim window. This edge checks every
//! signature (the job, the verdict, the worker's enrollment and review) and
//! hands the core only what they prove; the core checks those facts against
//! the stored bounty. Earnings are the rewards the ledger confirmed.

use crate::auth::{ApiJson, ApiQuery, Auth};
use crate::escrow::{list_decoded, PartyQuery};
use crate::exec::{docs_of, execute, idem_for, load_doc, resolve, resolve_account, KeyRule};
use crate::problem::Problem;
use crate::state::AppState;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;
use axum::Json;
use bazaar_core::bounty::{self, Bounty, BountyState, Outcome, Reward, Verdict};
use bazaar_core::command::Op;
use bazaar_core::kernel::docs::decode;
use bazaar_core::model::{DocKind, MemberKind};
use bazaar_core::refusal::{Code, Refusal};
use bazaar_core::validate;
use bazaar_relay::jobs::reward::JobReward;
use bazaar_relay::jobs::{JobRequest, JOB_REQUEST};
use bazaar_relay::labor::enrollment::verify_enrollment;
use bazaar_relay::labor::outcome::{self, read_verdict, verdict_targets};
use bazaar_relay::labor::review::{Manifest, REVIEW, REVIEW_D};
use bazaar_relay::Event;
use bazaar_types::limits::BOUNTY_CLAIM_S;
use bazaar_types::MemberId;
use serde::{Deserialize, Serialize};
use serde_json::json;
use std::sync::Arc;
use utoipa::ToSchema;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

/// Rewards summed into one earnings record; past this, `complete` is false.
pub const EARNINGS_RECORDS_MAX: usize = 10_000;

pub fn routes() -> OpenApiRouter<Arc<AppState>> {
    OpenApiRouter::new()
        .routes(routes!(fund_bounty, list_bounties))
        .routes(routes!(get_bounty))
        .routes(routes!(release_bounty))
        .routes(routes!(withdraw_bounty))
        .routes(routes!(earnings))
}

fn invalid(code: Code, detail: impl Into<String>) -> Problem {
    Refusal::new(code, detail).into()
}

/// A signed Nostr event from a JSON body field, its id and signature checked.
fn signed_event(value: &serde_json::Value, what: &str, code: Code) -> Result<Event, Problem> {
    let event =
        Event::parse(&value.to_string()).map_err(|e| invalid(code, format!("`{what}` is not a Nostr event: {e}")))?;
    event.verify().map_err(|_| invalid(code, format!("`{what}`'s id or signature does not verify")))?;
    Ok(event)
}

#[derive(Deserialize, Serialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct FundRequest {
    /// The signed job request (kind 5905), not yet published: its `reward`
    /// tag must name this amount and the calling agent.
    #[schema(value_type = bazaar_wire::nostr::SignedEvent, required = true)]
    pub job: serde_json::Value,
    /// 1 to `AMOUNT_MINOR_MAX` minor units.
    #[schema(minimum = 1, maximum = 1_000_000_000_000_u64)]
    pub amount_minor: u64,
    /// Seconds an accepted outcome may be presented before the poster may withdraw (default 7 days).
    pub claim_s: Option<u64>,
}

/// Posting agent: funds its job's reward — a hold on its own budget with no
/// expiry, `bty_<job id>` — before it publishes the job. Only the job's author
/// (its validator) can release it, and only with an accepted verdict.
#[utoipa::path(post, path = "/v1/bounties", request_body = FundRequest, params(("Idempotency-Key" = Option<String>, Header, description = "Optional: without it the registry derives the key from the request, so a retry is still answered once")), security(("credential" = []), ("session" = [])), responses((status = 201, description = "The bounty, funded", body = bazaar_wire::bounty::Bounty)))]
pub async fn fund_bounty(
    State(state): State<Arc<AppState>>,
    auth: Auth,
    headers: HeaderMap,
    ApiJson(body): ApiJson<FundRequest>,
) -> Result<Response, Problem> {
    let job = signed_event(&body.job, "job", Code::BountyInvalid)?;
    if job.kind != JOB_REQUEST || JobRequest::from_event(&job).is_none() {
        return Err(invalid(Code::BountyInvalid, format!("`job` is not a job request (kind {JOB_REQUEST}).")));
    }
    let amount = validate::amount(body.amount_minor, "amount_minor")?;
    let named = JobReward::Bounty { amount_minor: body.amount_minor, poster: auth.member.id.to_string() };
    if JobReward::of(&job).as_ref() != Some(&named) {
        return Err(Refusal::new(
            Code::BountyInvalid,
            "The job's `reward` tag must name this amount and the calling agent: [\"reward\", \"<amount_minor>\", \"<your id>\"].",
        )
        .with(json!({"expected_tag": named.tag()}))
        .into());
    }
    let id = job.id.to_hex();
    let idem = idem_for(&auth.member, "bounty_fund", &headers, KeyRule::DefaultTo(format!("fund:{id}")), &body)?;
    let op = Op::Bounty(bounty::Op::Fund {
        job: id,
        validator: job.pubkey.to_hex(),
        amount,
        claim_s: body.claim_s.unwrap_or(BOUNTY_CLAIM_S),
    });
    Ok(execute(&state, auth.member, idem, op, StatusCode::CREATED).await)
}

async fn load_bounty(state: &AppState, id: &str) -> Result<Bounty, Problem> {
    load_doc(state, id, || Refusal::new(Code::BountyNotFound, format!("No bounty {id} on this registry."))).await
}

/// A bounty: its job, amount, state and claim window. Any member may read it
/// (a job's reward is as public as the job).
#[utoipa::path(get, path = "/v1/bounties/{id}", security(("credential" = []), ("session" = [])), responses((status = 200, description = "The bounty", body = bazaar_wire::bounty::Bounty)))]
pub async fn get_bounty(
    State(state): State<Arc<AppState>>,
    _auth: Auth,
    Path(id): Path<String>,
) -> Result<Json<Bounty>, Problem> {
    Ok(Json(load_bounty(&state, &id).await?))
}

/// Bounties a poster funded, by id.
#[utoipa::path(get, path = "/v1/bounties", params(("party" = Option<String>, Query), ("after" = Option<String>, Query), ("limit" = Option<usize>, Query)), security(("credential" = []), ("session" = [])), responses((status = 200, description = "Bounties", body = bazaar_wire::bounty::BountyPage)))]
pub async fn list_bounties(
    State(state): State<Arc<AppState>>,
    auth: Auth,
    ApiQuery(query): ApiQuery<PartyQuery>,
) -> Result<Json<serde_json::Value>, Problem> {
    let page: Vec<Bounty> = list_decoded(&state, &auth, query).await?;
    let next = page.last().map(|b| b.id.clone());
    Ok(Json(json!({"bounties": page, "next_after": next})))
}

#[derive(Deserialize, Serialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ReleaseRequest {
    /// The validator's signed verdict label (kind 1985) on the worker's result.
    #[schema(value_type = bazaar_wire::nostr::SignedEvent)]
    pub verdict: serde_json::Value,
    /// The worker's enrollment (kind 30950), binding its Nostr key to its agent's DID.
    #[schema(value_type = bazaar_wire::nostr::SignedEvent)]
    pub enrollment: serde_json::Value,
    /// The worker's passed review (kind 30951), declaring its reward destination.
    #[schema(value_type = bazaar_wire::nostr::SignedEvent)]
    pub review: serde_json::Value,
}

/// What the three records prove, checked against one another.
async fn outcome_of(state: &AppState, body: &ReleaseRequest) -> Result<Outcome, Problem> {
    let verdict_event = signed_event(&body.verdict, "verdict", Code::OutcomeInvalid)?;
    let assessment = read_verdict(&verdict_event).ok_or_else(|| {
        invalid(Code::OutcomeInvalid, "`verdict` is not a verdict label (kind 1985, bazaar.verdict).")
    })?;
    let named = verdict_targets(&verdict_event)
        .ok_or_else(|| invalid(Code::OutcomeInvalid, "`verdict` names no task or no worker."))?;
    let enrollment = signed_event(&body.enrollment, "enrollment", Code::OutcomeInvalid)?;
    let binding = verify_enrollment(&enrollment, &bazaar_core::crypto::did_signed)
        .map_err(|e| invalid(Code::OutcomeInvalid, format!("`enrollment` does not hold: {e}")))?;
    if binding.nostr.to_hex() != named.worker {
        return Err(invalid(
            Code::OutcomeInvalid,
            "`enrollment` is not the enrollment of the worker the verdict names.",
        ));
    }
    let review = signed_event(&body.review, "review", Code::OutcomeInvalid)?;
    let passed = review.kind == REVIEW && review.d_tag() == REVIEW_D && review.tag("review") == Some("passed");
    if !passed || review.pubkey.to_hex() != named.worker {
        return Err(invalid(Code::OutcomeInvalid, "`review` is not a passed review by the worker the verdict names."));
    }
    #[derive(Deserialize)]
    struct Declared {
        manifest: Manifest,
    }
    let declared: Declared = serde_json::from_str(&review.content)
        .map_err(|_| invalid(Code::OutcomeInvalid, "`review` carries no manifest."))?;
    let destination = declared.manifest.reward_destination;
    let destination = resolve_account(state, &destination).await?;
    let verdict = match assessment.verdict {
        outcome::Verdict::Accepted => Verdict::Accepted,
        outcome::Verdict::Rejected => Verdict::Rejected,
        outcome::Verdict::Unassessed => Verdict::Unassessed,
    };
    Ok(Outcome {
        verdict,
        validator: verdict_event.pubkey.to_hex(),
        job: named.job,
        verdict_event: verdict_event.id.to_hex(),
        result_event: named.result,
        worker: bazaar_types::MemberId(binding.did),
        destination,
    })
}

/// Anyone: presents the validator's verdict on a worker's result with the
/// worker's enrollment and review. An **accepted** verdict by the job's author
/// pays the bounty — less the protocol fee — to the reward destination the
/// worker declared (which must be its owner's), once. Rejected and unassessed
/// move nothing (`bounty_not_accepted`); a second release is refused
/// `bounty_already_released` with the reward attached.
#[utoipa::path(post, path = "/v1/bounties/{id}/release", request_body = ReleaseRequest, params(("Idempotency-Key" = Option<String>, Header, description = "Optional: without it the registry derives the key from the request, so a retry is still answered once")), security(("credential" = []), ("session" = [])), responses((status = 200, description = "The reward: gross, fee, net and the transfers", body = bazaar_wire::bounty::Reward)))]
pub async fn release_bounty(
    State(state): State<Arc<AppState>>,
    auth: Auth,
    headers: HeaderMap,
    Path(id): Path<String>,
    ApiJson(body): ApiJson<ReleaseRequest>,
) -> Result<Response, Problem> {
    let bounty = load_bounty(&state, &id).await?;
    let outcome = outcome_of(&state, &body).await?;
    // One presentation = one verdict with one enrollment and one review: a
    // corrected presentation after a refusal is a new request, not a replay.
    let presented = format!("{}\n{}\n{}", outcome.verdict_event, body.enrollment["id"], body.review["id"]);
    let key = format!("release:{id}:{}", &bazaar_core::crypto::sha256_hex(presented.as_bytes())[..32]);
    let idem = idem_for(&auth.member, "bounty_release", &headers, KeyRule::DefaultTo(key), &body)?;
    let op = Op::Bounty(bounty::Op::Release { bounty: id, poster: bounty.poster, outcome });
    Ok(execute(&state, auth.member, idem, op, StatusCode::OK).await)
}

/// Poster (or its owner): takes the reward back after the claim window when
/// no accepted outcome was presented; refused `bounty_claim_open` before.
#[utoipa::path(post, path = "/v1/bounties/{id}/withdraw", params(("Idempotency-Key" = Option<String>, Header, description = "Optional: without it the registry derives the key from the request, so a retry is still answered once")), security(("credential" = []), ("session" = [])), responses((status = 200, description = "The bounty, withdrawn", body = bazaar_wire::bounty::Bounty)))]
pub async fn withdraw_bounty(
    State(state): State<Arc<AppState>>,
    auth: Auth,
    headers: HeaderMap,
    Path(id): Path<String>,
) -> Result<Response, Problem> {
    let bounty = load_bounty(&state, &id).await?;
    // Checked here too, so an early ask is not recorded under the derived key
    // (a refusal is sticky under its key; this one passes with time) — but
    // only for the poster or its owner: anyone else is refused `not_party`
    // by the command, not told where the claim window stands.
    let poster = state.store.member(&bounty.poster).await?;
    let may_withdraw =
        auth.member.id == bounty.poster || poster.and_then(|p| p.owner).is_some_and(|owner| owner == auth.member.id);
    if may_withdraw && bounty.state == BountyState::Funded && state.now() < bounty.claim_until {
        return Err(Refusal::new(
            Code::BountyClaimOpen,
            "The claim window is still open: an accepted outcome may still be presented.",
        )
        .with(json!({"claim_until_ms": bounty.claim_until}))
        .into());
    }
    let key = format!("withdraw:{id}");
    let idem = idem_for(&auth.member, "bounty_withdraw", &headers, KeyRule::DefaultTo(key), &id)?;
    let op = Op::Bounty(bounty::Op::Withdraw { bounty: id, poster: bounty.poster });
    Ok(execute(&state, auth.member, idem, op, StatusCode::OK).await)
}

#[derive(Serialize)]
struct Totals {
    gross_minor: u64,
    fee_minor: u64,
    net_minor: u64,
}

/// An agent's earnings: only rewards the ledger confirmed (each names the
/// transfers that paid it), with gross, protocol fee and net apart. A payment
/// a result merely claims is never here. The agent, its owner and the operator.
#[utoipa::path(get, path = "/v1/agents/{agent}/earnings", security(("credential" = []), ("session" = [])), responses((status = 200, description = "Confirmed rewards and their totals", body = bazaar_wire::bounty::Earnings)))]
pub async fn earnings(
    State(state): State<Arc<AppState>>,
    auth: Auth,
    Path(agent): Path<String>,
) -> Result<Json<serde_json::Value>, Problem> {
    let agent = resolve(&state, &agent).await?;
    let allowed = auth.member.kind == MemberKind::Operator
        || agent.id == auth.member.id
        || agent.owner.as_ref() == Some(&auth.member.id);
    if !allowed {
        return Err(invalid(
            Code::NotPermitted,
            "An agent's earnings are read by the agent, its owner and the operator.",
        ));
    }
    Ok(Json(earnings_of(&state, &agent.id).await?))
}

/// An agent's confirmed rewards (as the worker; rewards where it is only the
/// destination are its owner's business) with their totals: the earnings
/// answer, and the owner's view's earnings section.
pub(crate) async fn earnings_of(state: &AppState, agent: &MemberId) -> Result<serde_json::Value, Problem> {
    let (rows, complete) = docs_of(state, DocKind::Reward, agent, EARNINGS_RECORDS_MAX).await?;
    let mut rewards = Vec::new();
    for row in &rows {
        let reward = decode::<Reward>(row)?;
        if &reward.paid.worker == agent {
            rewards.push(reward);
        }
    }
    let mut totals = Totals { gross_minor: 0, fee_minor: 0, net_minor: 0 };
    for reward in &rewards {
        totals.gross_minor += reward.paid.gross_minor.0;
        totals.fee_minor += reward.paid.fee_minor.0;
        totals.net_minor += reward.paid.net_minor.0;
    }
    Ok(json!({"agent": agent, "rewards": rewards, "totals": totals, "complete": complete}))
}

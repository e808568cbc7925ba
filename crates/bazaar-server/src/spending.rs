//! The owner's view of one agent's spending discipline, read across
//! capabilities: its balance and budget; the service authorizations it holds
//! with their payments; its guest hires with their locked terms; its leases
//! with their status now; the bounties it funded; and its confirmed earnings.
//! Every figure here is in **ledger units** (minor), and says so; a worker's
//! model-usage meter and its payment journal live on the worker's machine,
//! in their own asset, and `bazaar spending --state-dir` adds them beside.

use crate::auth::Auth;
use crate::exec::resolve;
use crate::problem::{errors, Problem};
use crate::state::AppState;
use axum::extract::{Path, State};
use axum::Json;
use bazaar_core::hire::Lease;
use bazaar_core::model::{DocKind, MemberKind};
use bazaar_core::refusal::{Code, Refusal};
use bazaar_types::{AccountId, MemberId};
use bazaar_wire::OpenObject;
use serde_json::{json, Value};
use std::sync::Arc;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

/// Records of one kind in one view; past this, that section says `complete: false`.
pub const SPENDING_RECORDS_MAX: usize = 1_000;

pub fn routes() -> OpenApiRouter<Arc<AppState>> {
    OpenApiRouter::new().routes(routes!(spending)).routes(routes!(my_agents))
}

/// Agents one owner's page lists at most.
pub const AGENTS_LISTED_MAX: usize = 200;

/// An owner: its agents, each with its balance, what is held, its budget's ceilings and what it spent, and
/// its locked stake — the owners' page reads this. A member without agents gets an empty list.
#[utoipa::path(get, path = "/v1/me/agents", security(("credential" = []), ("session" = [])), responses((status = 200, description = "The caller's agents", body = OpenObject), errors::Unauthenticated, errors::Unavailable))]
async fn my_agents(State(state): State<Arc<AppState>>, auth: Auth) -> Result<Json<Value>, Problem> {
    let agents = state.store.agents_of(&auth.member.id, AGENTS_LISTED_MAX).await?;
    let mut listed = Vec::with_capacity(agents.len());
    for agent in &agents {
        let account = state.store.account(&AccountId::of_member(&agent.id)).await?;
        let stake = state.store.account(&AccountId::stake_of(&agent.id)).await?;
        let budget = state.store.budget(&agent.id).await?.map(|b| bazaar_core::pay::budget_view(&b, state.now()));
        listed.push(json!({
            "id": agent.id, "handle": agent.handle,
            "balance_minor": account.as_ref().map(|a| a.balance() as i64),
            "available_minor": account.as_ref().map(|a| a.available() as i64),
            "held_minor": account.as_ref().map(|a| a.debits_pending),
            "budget": budget,
            "stake_minor": stake.as_ref().map_or(0, |a| a.balance() as i64),
        }));
    }
    Ok(Json(json!({"agents": listed, "complete": agents.len() < AGENTS_LISTED_MAX})))
}

/// Every document of `kind` naming `party` (up to the cap), as stored.
async fn all_of(state: &AppState, kind: DocKind, party: &MemberId) -> Result<(Vec<Value>, bool), Problem> {
    let (rows, complete) = crate::exec::docs_of(state, kind, party, SPENDING_RECORDS_MAX).await?;
    Ok((rows.into_iter().map(|r| r.body).collect(), complete))
}

fn section(records: Vec<Value>, complete: bool) -> Value {
    json!({"records": records, "complete": complete})
}

/// The owner's view of one agent: balance, budget, service authorizations and
/// payments, guest hires with their locked terms, leases with their status
/// now, bounties funded, and confirmed earnings — all in ledger units. The
/// agent, its owner and the operator.
#[utoipa::path(get, path = "/v1/agents/{agent}/spending", security(("credential" = []), ("session" = [])), responses((status = 200, description = "The view, in ledger units", body = OpenObject), errors::Unauthenticated, errors::Forbidden, errors::NotFound, errors::Unavailable))]
pub async fn spending(
    State(state): State<Arc<AppState>>,
    auth: Auth,
    Path(agent): Path<String>,
) -> Result<Json<Value>, Problem> {
    let agent = resolve(&state, &agent).await?;
    let allowed = auth.member.kind == MemberKind::Operator
        || agent.id == auth.member.id
        || agent.owner.as_ref() == Some(&auth.member.id);
    if !allowed || agent.kind != MemberKind::Agent {
        return Err(Refusal::new(
            Code::NotPermitted,
            "An agent's spending is read by the agent, its owner and the operator.",
        )
        .into());
    }
    let id = &agent.id;
    let account = state.store.account(&AccountId::of_member(id)).await?;
    let budget = state.store.budget(id).await?;
    let (authorizations, a_done) = all_of(&state, DocKind::ServiceAuthorization, id).await?;
    let authorizations: Vec<Value> = authorizations.into_iter().filter(|a| a["agent"] == json!(id)).collect();
    let (hires, h_done) = all_of(&state, DocKind::Hire, id).await?;
    let (leases, l_done) = all_of(&state, DocKind::Lease, id).await?;
    let now = state.now();
    let leases: Vec<Value> = leases
        .into_iter()
        .map(|mut body| {
            if let Ok(lease) = serde_json::from_value::<Lease>(body.clone()) {
                body["status"] = json!(lease.status(now));
            }
            body
        })
        .collect();
    let (bounties, b_done) = all_of(&state, DocKind::Bounty, id).await?;
    let earnings = crate::bounty::earnings_of(&state, id).await?;
    let uncertain: Vec<&Value> = leases.iter().filter(|l| l["status"] == "recovery").collect();
    Ok(Json(json!({
        "agent": id,
        "asset": "ledger units (minor)",
        "balance": account.as_ref().map(|a| json!({"available_minor": a.available() as i64, "pending_minor": a.debits_pending})),
        "budget": budget,
        "service_authorizations": section(authorizations, a_done),
        "hires": section(hires, h_done),
        "leases": section(leases.clone(), l_done),
        "leases_in_recovery": uncertain.len(),
        "bounties_funded": section(bounties, b_done),
        "earnings": earnings,
        "not_here": "the model-usage meter and the payment journal are on the worker's machine: `bazaar spending --state-dir`",
    })))
}

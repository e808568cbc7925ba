//! The owner's view of one agent's spending discipline, read across
//! capabilities: its balance and budget; the service authorizations it holds
//! with their payments; its guest hires with their locked terms; its leases
//! with their status now; the bounties it funded; and its confirmed earnings.
//! Every figure here is in **ledger units** (minor), and says so; a worker's
//! model-usage meter and its payment journal live on the worker's machine,
//! in their own asset, and `bazaar spending --state-dir` adds them beside.

use crate::auth::Auth;
use crate::exec::resolve;
use crate::problem::Problem;
use crate::state::AppState;
use axum::extract::{Path, State};
use axum::Json;
use bazaar_core::hire::Lease;
use bazaar_core::model::{DocKind, MemberKind};
use bazaar_core::refusal::{Code, Refusal};
use bazaar_types::{AccountId, MemberId};
use bazaar_wire as wire;
use bazaar_wire::hire::ServiceAuthorization;
use bazaar_wire::owner::{
    AuthorizationRecords, BountyRecords, HireRecords, LeaseRecords, OwnedAgent, OwnedAgents, Spending, SpendingBalance,
};
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
#[utoipa::path(get, path = "/v1/me/agents", security(("credential" = []), ("session" = [])), responses((status = 200, description = "The caller's agents", body = OwnedAgents)))]
async fn my_agents(State(state): State<Arc<AppState>>, auth: Auth) -> Result<Json<OwnedAgents>, Problem> {
    let agents = state.store.agents_of(&auth.member.id, AGENTS_LISTED_MAX).await?;
    let mut listed = Vec::with_capacity(agents.len());
    for agent in &agents {
        let purse = crate::identity::purse_of(&state, &agent.id).await?;
        let stake = state.store.account(&AccountId::stake_of(&agent.id)).await?;
        listed.push(OwnedAgent {
            id: agent.id.to_string(),
            handle: agent.handle.clone(),
            balance_minor: purse.balance_minor,
            available_minor: purse.available_minor,
            held_minor: purse.held_minor,
            budget: purse.budget,
            stake_minor: stake.as_ref().map_or(0, |a| a.balance() as i64),
        });
    }
    Ok(Json(OwnedAgents { agents: listed, complete: agents.len() < AGENTS_LISTED_MAX }))
}

/// Every document of `kind` naming `party` (up to the cap), as its wire type; and whether that was all.
async fn all_of<T: serde::de::DeserializeOwned>(
    state: &AppState,
    kind: DocKind,
    party: &MemberId,
) -> Result<(Vec<T>, bool), Problem> {
    let (rows, complete) = crate::exec::docs_of(state, kind, party, SPENDING_RECORDS_MAX).await?;
    let records = rows.iter().map(|row| crate::exec::wire(&row.body)).collect::<Result<_, _>>()?;
    Ok((records, complete))
}

/// The owner's view of one agent: balance, budget, service authorizations and
/// payments, guest hires with their locked terms, leases with their status
/// now, bounties funded, and confirmed earnings — all in ledger units. The
/// agent, its owner and the operator.
#[utoipa::path(get, path = "/v1/agents/{agent}/spending", security(("credential" = []), ("session" = [])), responses((status = 200, description = "The view, in ledger units", body = Spending)))]
pub async fn spending(
    State(state): State<Arc<AppState>>,
    auth: Auth,
    Path(agent): Path<String>,
) -> Result<Json<Spending>, Problem> {
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
    let purse = crate::identity::purse_of(&state, id).await?;
    let (authorizations, a_done) = all_of::<ServiceAuthorization>(&state, DocKind::ServiceAuthorization, id).await?;
    let authorizations = authorizations.into_iter().filter(|a| a.agent == id.as_str()).collect();
    let (hires, h_done) = all_of(&state, DocKind::Hire, id).await?;
    let now = state.now();
    let (leases, l_done) = crate::exec::docs_of(&state, DocKind::Lease, id, SPENDING_RECORDS_MAX).await?;
    let leases = leases
        .iter()
        .map(|row| {
            let lease: Lease = crate::exec::wire(&row.body)?;
            crate::exec::wire::<wire::hire::Lease>(&crate::hire::lease_view(&lease, now))
        })
        .collect::<Result<Vec<_>, _>>()?;
    let in_recovery = leases.iter().filter(|l| l.status == "recovery").count() as u64;
    let (bounties, b_done) = all_of(&state, DocKind::Bounty, id).await?;
    Ok(Json(Spending {
        agent: id.to_string(),
        asset: "ledger units (minor)".into(),
        balance: (purse.available_minor.zip(purse.held_minor))
            .map(|(available_minor, pending_minor)| SpendingBalance { available_minor, pending_minor }),
        budget: purse.budget,
        service_authorizations: AuthorizationRecords { records: authorizations, complete: a_done },
        hires: HireRecords { records: hires, complete: h_done },
        leases: LeaseRecords { records: leases, complete: l_done },
        leases_in_recovery: in_recovery,
        bounties_funded: BountyRecords { records: bounties, complete: b_done },
        earnings: crate::exec::wire(&crate::bounty::earnings_of(&state, id).await?)?,
        not_here:
            "the model-usage meter and the payment journal are on the worker's machine: `bazaar spending --state-dir`"
                .into(),
    }))
}

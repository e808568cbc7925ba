//! "Run the story" and "run an AI buyer agent": the chamber's two run
//! buttons. The runs live in the `bazaar` binary (they drive this registry's
//! public API and MCP server with a fresh cast, as any client would); the
//! binary attaches them and these routes start them. Only the operator may
//! press (the AI run spends the operator's model key); one run at a time per
//! node; each ends at an order's approval link, never a payment.

use crate::auth::Auth;
use crate::chamber::stream::MaybeAuth;
use crate::problem::Problem;
use crate::state::AppState;
use axum::extract::State;
use axum::http::StatusCode;
use axum::Json;
use bazaar_core::model::MemberKind;
use bazaar_wire::chamber::{AgentReport, FederationProof, PilotProof, RunsAvailable, StoryReport};
use serde::Deserialize;
use std::sync::Arc;
use std::time::Duration;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

/// One chamber run gives up after this long.
pub const RUN_TIMEOUT_S: u64 = 300;
/// Characters of a request in words the AI agent accepts.
pub const AGENT_REQUEST_CHARS_MAX: usize = 2_000;
/// What the AI agent is asked when the operator gives no words of its own.
pub const DEFAULT_AGENT_REQUEST: &str = "We need 40 hand-embroidered cushion covers for the hotel's lounge, \
    at no more than 3000 each, delivered within 30 days. Find the makers, get quotes and place the order.";

pub fn routes() -> OpenApiRouter<Arc<AppState>> {
    OpenApiRouter::new()
        .routes(routes!(available))
        .routes(routes!(run_story))
        .routes(routes!(run_pilot))
        .routes(routes!(run_federation))
        .routes(routes!(run_agent))
}

fn unavailable() -> Problem {
    Problem::new(
        StatusCode::NOT_FOUND,
        "runs_unavailable",
        "This registry's binary has not given the chamber its runs (it needs the operator's credential: `bazaar demo --serve`, or `serve` with it).",
    )
}

fn operator_only(auth: &Auth) -> Result<(), Problem> {
    if auth.member.kind == MemberKind::Operator {
        return Ok(());
    }
    Err(Problem::new(
        StatusCode::FORBIDDEN,
        "not_permitted",
        "Only the operator runs the stories here: a run enrols a fresh cast and the AI run spends the operator's model key.",
    ))
}

async fn one_run<T>(
    state: &AppState,
    run: futures::future::BoxFuture<'static, Result<T, String>>,
) -> Result<Json<T>, Problem> {
    let Ok(_running) = state.run_lock.try_lock() else {
        let problem = Problem::retry_later(
            StatusCode::TOO_MANY_REQUESTS,
            "run_in_progress",
            "One run at a time here; try again when it ends.",
        );
        return Err(problem);
    };
    match tokio::time::timeout(Duration::from_secs(RUN_TIMEOUT_S), run).await {
        Ok(Ok(report)) => Ok(Json(report)),
        Ok(Err(error)) => Err(Problem::new(StatusCode::SERVICE_UNAVAILABLE, "run_failed", error)),
        Err(_) => Err(Problem::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "run_failed",
            format!("The run did not finish within {RUN_TIMEOUT_S} s."),
        )),
    }
}

/// What the run buttons can do here: whether the runs are attached and which model the AI agent uses (none: the
/// button says so). Anyone may ask; pressing needs the operator.
#[utoipa::path(get, path = "/v1/chamber/runs", security((), ("credential" = []), ("session" = [])), responses((status = 200, description = "The runs available", body = RunsAvailable)))]
async fn available(State(state): State<Arc<AppState>>, auth: MaybeAuth) -> Json<RunsAvailable> {
    let runner = state.runs();
    let operator = auth.0.as_ref().is_some_and(|a| a.member.kind == MemberKind::Operator);
    Json(RunsAvailable {
        story: runner.is_some(),
        agent_model: runner.and_then(|r| r.agent_model()),
        signed_in_as_operator: operator,
        default_request: DEFAULT_AGENT_REQUEST.to_string(),
    })
}

/// Operator: runs the scripted cushion-cover story against this registry with a fresh cast, up to the order
/// waiting at its approval link (the report holds the link and the throwaway hotel owner's credential).
#[utoipa::path(post, path = "/v1/chamber/runs/story", security(("credential" = []), ("session" = [])), responses((status = 200, description = "The run's report", body = StoryReport)))]
async fn run_story(State(state): State<Arc<AppState>>, auth: Auth) -> Result<Json<StoryReport>, Problem> {
    operator_only(&auth)?;
    let runner = state.runs().ok_or_else(unavailable)?.clone();
    one_run(&state, runner.story()).await
}

/// Operator: the pilot phase's proof, live — a hundred paid calls through the SDK's paid-route middleware with a
/// fresh cast (the buyer crashes mid-retry and re-sends one order five times; the merchant crashes twice), read
/// back through the public API: one settlement per order, the work run once per order, balances summing to zero.
#[utoipa::path(post, path = "/v1/chamber/runs/pilot", security(("credential" = []), ("session" = [])), responses((status = 200, description = "The run's proof", body = PilotProof)))]
async fn run_pilot(State(state): State<Arc<AppState>>, auth: Auth) -> Result<Json<PilotProof>, Problem> {
    operator_only(&auth)?;
    let runner = state.runs().ok_or_else(unavailable)?.clone();
    one_run(&state, runner.pilot()).await
}

/// Operator: the federation phase's proof, live — a second embedded registry beside this one (started and
/// recognised both ways on the first run), a buyer agent there that this registry has never seen paying a merchant
/// here once (a retry answered from the work receipt), then joining here as a guest by its own signature, funding
/// its guest account through the corridor and placing an escrowed order that is delivered and released.
#[utoipa::path(post, path = "/v1/chamber/runs/federation", security(("credential" = []), ("session" = [])), responses((status = 200, description = "The run's proof", body = FederationProof)))]
async fn run_federation(State(state): State<Arc<AppState>>, auth: Auth) -> Result<Json<FederationProof>, Problem> {
    operator_only(&auth)?;
    let runner = state.runs().ok_or_else(unavailable)?.clone();
    one_run(&state, runner.federation()).await
}

#[derive(Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct AgentRequest {
    /// The request in words; absent: the hotel's cushion covers.
    pub request: Option<String>,
}

/// Operator: runs the AI buyer agent (the configured model choosing the storefront's MCP tools) on a request in
/// words with a fresh cast, up to the approval link. `503 agent_model_unconfigured` without a model.
#[utoipa::path(post, path = "/v1/chamber/runs/agent", request_body = AgentRequest, security(("credential" = []), ("session" = [])), responses((status = 200, description = "The run's report: each tool call and how it ended", body = AgentReport)))]
async fn run_agent(
    State(state): State<Arc<AppState>>,
    auth: Auth,
    crate::auth::ApiJson(body): crate::auth::ApiJson<AgentRequest>,
) -> Result<Json<AgentReport>, Problem> {
    operator_only(&auth)?;
    let runner = state.runs().ok_or_else(unavailable)?.clone();
    if runner.agent_model().is_none() {
        return Err(Problem::new(
            StatusCode::NOT_FOUND,
            "agent_model_unconfigured",
            "No model is configured for the AI buyer agent: start the registry with --agent-model-url and --agent-model (a local llama.cpp or Ollama server works).",
        ));
    }
    let request = body.request.unwrap_or_else(|| DEFAULT_AGENT_REQUEST.to_string());
    if request.trim().is_empty() || request.chars().count() > AGENT_REQUEST_CHARS_MAX {
        return Err(Problem::invalid(format!("`request` is 1 to {AGENT_REQUEST_CHARS_MAX} characters of words.")));
    }
    one_run(&state, runner.agent(request)).await
}

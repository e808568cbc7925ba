//! "Try to break it": the attack catalogue as the chamber's buttons. The
//! catalogue and its runner live in the `bazaar` binary (they drive a
//! registry's public API as any client would, in a scratch registry the
//! runner starts for the press and deletes after); the binary attaches them
//! here, and these routes list and run them. Anyone who may watch the chamber
//! may run one — at most one at a time per node and [`ATTACKS_PER_MINUTE_MAX`]
//! a minute. This registry keeps one thing of a press: the refusal the attack
//! met, as one `refusal.recorded` its own writer appends (`chamber::Op`).

use crate::chamber::stream::MaybeAuth;
use crate::exec::as_registry;
use crate::problem::Problem;
use crate::state::AppState;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::Json;
use bazaar_core::chamber;
use bazaar_core::command::Op;
use bazaar_wire::chamber::{Attack, AttackCatalogue, AttackVerdict};
use std::sync::Arc;
use std::time::Duration;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

pub use crate::live::{AttackLimits, ATTACKS_PER_MINUTE_MAX, ATTACKS_PER_VISITOR_PER_MINUTE};

/// One attack run gives up after this long.
pub const ATTACK_RUN_TIMEOUT_S: u64 = 60;
/// Visitors the per-visitor cap keeps track of at once; past it (after forgetting idle ones) runs wait.
pub const ATTACK_VISITORS_TRACKED_MAX: usize = 10_000;

/// Who pressed: a signed-in member by its id; an anonymous visitor by its
/// address as the edge tells it (`edge::ClientAddress`: the connection's peer,
/// or through a `--trusted-proxy` the address that proxy forwarded). Behind an
/// untrusted proxy every visitor shares the proxy's allowance (the per-node cap
/// holds either way); `X-Forwarded-For` from anyone else is never believed.
fn visitor_of(auth: &MaybeAuth, client: Option<crate::edge::ClientAddress>) -> String {
    if let Some(auth) = &auth.0 {
        return format!("member:{}", auth.member.id);
    }
    match client {
        Some(crate::edge::ClientAddress(address)) => format!("ip:{address}"),
        None => "ip:direct".to_string(),
    }
}

pub use crate::live::AttackRunner;

pub fn routes() -> OpenApiRouter<Arc<AppState>> {
    OpenApiRouter::new().routes(routes!(catalogue)).routes(routes!(run))
}

fn unavailable() -> Problem {
    Problem::new(
        StatusCode::NOT_FOUND,
        "attacks_unavailable",
        "This registry's operator has not given the chamber its attack catalogue (`bazaar demo --serve` does).",
    )
}

/// Who may press the buttons: anyone who may watch the chamber's stream.
fn may_watch(state: &AppState, auth: &MaybeAuth) -> Result<(), Problem> {
    if auth.0.is_some() || state.public_stream() {
        return Ok(());
    }
    Err(Problem::new(
        StatusCode::UNAUTHORIZED,
        "stream_not_public",
        "Sign in, or ask the operator to open the chamber to the public.",
    ))
}

/// The attack catalogue: each attack's name and the refusal it must meet.
#[utoipa::path(get, path = "/v1/chamber/attacks", security((), ("credential" = []), ("session" = [])), responses((status = 200, description = "The catalogue", body = AttackCatalogue)))]
pub async fn catalogue(State(state): State<Arc<AppState>>, auth: MaybeAuth) -> Result<Json<AttackCatalogue>, Problem> {
    may_watch(&state, &auth)?;
    let runner = state.attacks().ok_or_else(unavailable)?;
    let attacks = runner.catalogue().into_iter().map(|(name, expect)| Attack { name, expect }).collect();
    Ok(Json(AttackCatalogue { attacks, per_minute_max: state.attack_limits().per_minute as u64 }))
}

/// Runs one attack in a scratch registry and answers its verdict: the
/// refusal it met, and whether the parties' balances and the event ledger
/// (but for the refusal's own record) stayed as they were there. This registry
/// records the refusal (`recorded`), and nothing else of the press. One at a
/// time per node, at most 20 a minute and 5 a minute per visitor (`429 attack_rate_limited`).
#[utoipa::path(post, path = "/v1/chamber/attacks/{name}", security((), ("credential" = []), ("session" = [])), responses((status = 200, description = "The verdict", body = AttackVerdict)))]
pub async fn run(
    State(state): State<Arc<AppState>>,
    auth: MaybeAuth,
    client: Option<axum::Extension<crate::edge::ClientAddress>>,
    Path(name): Path<String>,
) -> Result<Json<AttackVerdict>, Problem> {
    may_watch(&state, &auth)?;
    let runner = state.attacks().ok_or_else(unavailable)?.clone();
    let Some((_, expect)) = runner.catalogue().into_iter().find(|(known, _)| known == &name) else {
        return Err(Problem::new(
            StatusCode::NOT_FOUND,
            "attack_not_found",
            format!("No attack named {name:?} in the catalogue."),
        ));
    };
    let limits = state.attack_limits();
    let limited = || {
        Problem::retry_later(
            StatusCode::TOO_MANY_REQUESTS,
            "attack_rate_limited",
            format!(
                "Attacks here are run one at a time and at most {} a minute; try again shortly.",
                limits.per_minute
            ),
        )
    };
    let Ok(_running) = state.attack_limiter.running.try_lock() else { return Err(limited()) };
    let visitor = visitor_of(&auth, client.map(|axum::Extension(client)| client));
    if !crate::live::admit_visitor(
        &state.attack_limiter,
        &visitor,
        limits.per_visitor_per_minute,
        ATTACK_VISITORS_TRACKED_MAX,
    ) {
        return Err(Problem::retry_later(
            StatusCode::TOO_MANY_REQUESTS,
            "attack_rate_limited",
            format!(
                "You have run {} attacks in the last minute here; try again shortly.",
                limits.per_visitor_per_minute
            ),
        ));
    }
    if !crate::live::admit(&state.attack_limiter.started, limits.per_minute) {
        return Err(limited());
    }
    let mut verdict =
        match tokio::time::timeout(Duration::from_secs(ATTACK_RUN_TIMEOUT_S), runner.run(name.clone())).await {
            Ok(Ok(verdict)) => verdict,
            Ok(Err(error)) => return Err(Problem::new(StatusCode::SERVICE_UNAVAILABLE, "attack_failed", error)),
            Err(_) => {
                return Err(Problem::new(
                    StatusCode::SERVICE_UNAVAILABLE,
                    "attack_failed",
                    format!("The attack did not finish within {ATTACK_RUN_TIMEOUT_S} s."),
                ))
            }
        };
    verdict.recorded = record_refusal(&state, &name, &expect, &verdict).await?;
    Ok(Json(verdict))
}

/// Appends the one record this registry keeps of a press — the refusal the attack met in its scratch
/// registry — when the verdict says it was refused with the code the catalogue expects; an attack that
/// was not refused as expected leaves nothing here (its verdict says so). Whether it recorded.
async fn record_refusal(state: &AppState, name: &str, expect: &str, verdict: &AttackVerdict) -> Result<bool, Problem> {
    if !verdict.refused_as_expected || verdict.code != expect {
        return Ok(false);
    }
    let (code, status) = (verdict.code.clone(), verdict.status);
    let op = chamber::Op::RecordAttackRefusal { attack: name.to_string(), code, status };
    as_registry(state, Op::Chamber(op)).await?.outcome?;
    Ok(true)
}

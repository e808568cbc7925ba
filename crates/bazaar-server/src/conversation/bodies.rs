//! Bodies over HTTP: a WebSocket names the process it is (`?body=daemon`),
//! and for each event that addresses the member (`eligibility::wakes`) the
//! plane's store chooses exactly one body to answer it
//! (`bazaar_conversation::bodies`). Every body's frame says which
//! (`answer_by`); `GET /v1/answers` lists the choices.

use crate::auth::{ApiQuery, Auth};
use crate::plane::Plane;
use crate::problem::Problem;
use crate::state::AppState;
use axum::extract::State;
use axum::response::{IntoResponse, Response};
use axum::Json;
use bazaar_conversation::bodies::check_body_name;
use bazaar_conversation::Message;
use bazaar_types::MemberId;
use serde::Deserialize;
use std::collections::HashMap;
use std::sync::Arc;
use utoipa::ToSchema;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

/// Random bytes in the name of a body that did not name itself.
const BODY_RANDOM_BYTES: usize = 6;

pub fn routes() -> OpenApiRouter<Arc<AppState>> {
    OpenApiRouter::new().routes(routes!(answers))
}

/// The body a socket is: the name it gave, checked, or a fresh one.
pub fn body_name(state: &AppState, asked: Option<String>) -> Result<String, Problem> {
    match asked {
        Some(name) => {
            check_body_name(&name).map_err(crate::plane::problem)?;
            Ok(name)
        }
        None => Ok(format!("b-{}", state.random_b64(BODY_RANDOM_BYTES))),
    }
}

/// Who answers each of `addressed` (positions of messages that address
/// `member`), claimed for `body`: the store decides once per event.
pub async fn claim(
    plane: &Plane,
    member: &MemberId,
    body: &str,
    addressed: Vec<u64>,
) -> Result<HashMap<u64, String>, Problem> {
    if addressed.is_empty() {
        return Ok(HashMap::new());
    }
    let (member, body) = (member.clone(), body.to_string());
    plane
        .call(move |store| {
            let mut chosen = HashMap::new();
            for position in addressed {
                chosen.insert(position, store.claim_answer(&member, position, &body)?.body);
            }
            Ok(chosen)
        })
        .await
}

/// A WebSocket frame for `message`, naming the body that answers it when it addresses the member.
pub fn frame(message: &Message, answer_by: Option<&String>) -> serde_json::Value {
    let mut frame = serde_json::json!({ "type": "message", "cursor": message.position, "message": message });
    if let Some(body) = answer_by {
        frame["answer_by"] = serde_json::json!(body);
    }
    frame
}

#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct AnswersQuery {
    /// A log position: answers for events after it.
    pub after: Option<u64>,
    pub limit: Option<usize>,
}

/// Which of the caller's bodies was chosen to answer each event that
/// addressed it, oldest first (written once per event, when a body first saw it).
#[utoipa::path(get, path = "/v1/answers", params(("after" = Option<u64>, Query), ("limit" = Option<usize>, Query)), security(("credential" = []), ("session" = [])), responses((status = 200, description = "Answers", body = [bazaar_wire::conversation::Answer])))]
async fn answers(
    State(state): State<Arc<AppState>>,
    auth: Auth,
    ApiQuery(query): ApiQuery<AnswersQuery>,
) -> Result<Response, Problem> {
    let (me, after) = (auth.member.id, query.after.unwrap_or(0));
    let limit = query.limit.unwrap_or(super::rest::PAGE_DEFAULT);
    let found = state.plane()?.call(move |store| store.answers(&me, after, limit)).await?;
    Ok(Json(found).into_response())
}

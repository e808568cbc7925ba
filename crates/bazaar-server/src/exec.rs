//! The toolbox every capability's handlers share: the idempotency-key rules
//! ([`idem_for`]), [`execute`] (submit one command and answer with its
//! outcome), [`receipt`] for handlers that shape their own answer,
//! [`resolve`]/[`resolve_id`] for members named by DID or handle, and
//! [`load_doc`] for documents named by id. It names no capability, so every
//! capability can use it without a cycle.

use crate::problem::Problem;
use crate::state::AppState;
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use bazaar_core::apply::Applied;
use bazaar_core::command::{Command, Idem, Op, Receipt};
use bazaar_core::crypto::sha256_hex;
use bazaar_core::kernel::docs::{decode, Document};
use bazaar_core::model::DocKind;
use bazaar_core::model::Member;
use bazaar_core::refusal::{Code, Refusal};
use bazaar_core::validate;
use bazaar_store::StoreError;
use bazaar_types::limits::{IDEMPOTENCY_RETENTION_S, SWEEP_BATCH_MAX, SWEEP_DOCS_MAX};
use bazaar_types::{MemberId, Timestamp};
use serde::Serialize;
use std::sync::Arc;

pub const IDEMPOTENCY_KEY: &str = "idempotency-key";
pub const IDEMPOTENT_REPLAYED: &str = "idempotent-replayed";

/// How a request's idempotency key is found.
pub(crate) enum KeyRule {
    /// Money-moving: the caller must send `Idempotency-Key`.
    Required,
    /// Money-moving with a natural key (the order) used when the caller sends none.
    DefaultTo(String),
}

pub(crate) fn idem_for(
    actor: &Member,
    op_name: &str,
    headers: &HeaderMap,
    rule: KeyRule,
    request: &impl Serialize,
) -> Result<Option<Idem>, Problem> {
    let sent = headers.get(IDEMPOTENCY_KEY).map(|v| v.to_str().map(str::to_string));
    let (key, keeps_refusals) = match (sent, rule) {
        (Some(Err(_)), _) => {
            return Err(Refusal::new(Code::IdempotencyKeyInvalid, "`Idempotency-Key` must be printable ASCII.").into())
        }
        (Some(Ok(key)), _) => (key, true),
        // A derived key keeps only successes: a refusal never pins the order (see `Idem::keeps_refusals`).
        (None, KeyRule::DefaultTo(key)) => (key, false),
        (None, KeyRule::Required) => {
            return Err(Refusal::new(
                Code::IdempotencyKeyRequired,
                "This request moves money: send an `Idempotency-Key` header (a UUID is fine) and reuse it on retries.",
            )
            .into())
        }
    };
    validate::idempotency_key(&key)?;
    let body =
        serde_json::to_string(&serde_json::to_value(request).expect("requests serialize")).expect("values serialize");
    Ok(Some(Idem {
        scope: format!("{}:{op_name}", actor.id),
        key,
        fingerprint: sha256_hex(format!("{op_name}\n{body}").as_bytes()),
        keeps_refusals,
    }))
}

/// Submits one command and answers: refusals as problem+json, replays marked.
pub(crate) async fn execute(
    state: &Arc<AppState>,
    actor: Member,
    idem: Option<Idem>,
    op: Op,
    success: StatusCode,
) -> Response {
    answer(state, actor, idem, op, success, |success, receipt| (success, Json(receipt)).into_response()).await
}

/// [`execute`], with the success body built from the receipt by `shape` (a
/// replay's stored receipt is shaped the same way): how an edge adds what is
/// not ledger state, such as a link, without re-reading its own response.
pub(crate) async fn execute_shaped(
    state: &Arc<AppState>,
    actor: Member,
    idem: Option<Idem>,
    op: Op,
    success: StatusCode,
    shape: fn(serde_json::Value) -> serde_json::Value,
) -> Response {
    let respond = move |success, receipt: Receipt| (success, Json(shape(receipt.to_json()))).into_response();
    answer(state, actor, idem, op, success, respond).await
}

/// Submits one command and answers with `respond(success, receipt)` or the refusal as problem+json,
/// replays marked.
async fn answer(
    state: &Arc<AppState>,
    actor: Member,
    idem: Option<Idem>,
    op: Op,
    success: StatusCode,
    respond: impl FnOnce(StatusCode, Receipt) -> Response,
) -> Response {
    let _guard = match &idem {
        Some(idem) => match state.claim(&idem.scope, &idem.key) {
            Some(guard) => Some(guard),
            None => {
                return Problem::from(Refusal::new(
                    Code::IdempotencyInFlight,
                    "A request with this Idempotency-Key is still running; retry after the delay in Retry-After.",
                ))
                .into_response()
            }
        },
        None => None,
    };
    if let Err(refused) = spending_allowed(&op) {
        return refused.into_response();
    }
    let op_name = op.name();
    let applied = match state.store.submit(Command { actor, idem, op }).await {
        Ok(applied) => applied,
        Err(error) => return Problem::from(error).into_response(),
    };
    if applied.replayed {
        state.metrics.add("bazaar_idempotent_replays_total", format!("op=\"{op_name}\""), 1.0);
    }
    let mut response = match applied.outcome {
        Ok(receipt) => {
            if op_name == "settle" {
                state.metrics.add("bazaar_settlements_total", String::new(), 1.0);
            }
            respond(success, receipt)
        }
        Err(refusal) => {
            state.metrics.add("bazaar_refusals_total", format!("code=\"{}\"", refusal.code.as_str()), 1.0);
            Problem::from(refusal).into_response()
        }
    };
    if applied.replayed {
        response.headers_mut().insert(IDEMPOTENT_REPLAYED, HeaderValue::from_static("true"));
    }
    response
}

/// Submits one command without an idempotency key and returns its receipt, a
/// refusal or a store error as the problem to answer: for handlers that shape
/// their own answer from the receipt.
pub(crate) async fn receipt(state: &AppState, actor: Member, op: Op) -> Result<Receipt, Problem> {
    spending_allowed(&op)?;
    let applied = state.store.submit(Command { actor, idem: None, op }).await?;
    Ok(applied.outcome?)
}

/// The problem for a receipt its command cannot answer (a fresh command's receipt is always its own variant).
pub(crate) fn unexpected(receipt: &Receipt) -> Problem {
    Problem::new(StatusCode::INTERNAL_SERVER_ERROR, "internal", format!("unexpected receipt: {receipt:?}"))
}

/// A money-moving command needs a credential that may spend: one issued
/// without the `pay` scope is refused `credential_cannot_spend`, whatever the
/// route (REST, MCP, x402), before the command reaches the writer.
pub(crate) fn spending_allowed(op: &Op) -> Result<(), Problem> {
    if op.moves_money() && !crate::auth::may_spend_here() {
        return Err(Problem::new(
            StatusCode::FORBIDDEN,
            "credential_cannot_spend",
            "This credential was issued without the `pay` scope: it cannot move money. Use a credential that may pay.",
        ));
    }
    Ok(())
}

/// Submits one command as the registry itself (the sweeper's and the relay's
/// housekeeping): no idempotency key, the outcome left to the caller.
pub(crate) async fn as_registry(state: &AppState, op: Op) -> Result<Applied, StoreError> {
    state.store.submit(Command { actor: state.registry_actor(), idem: None, op }).await
}

/// The id behind a DID or handle. A DID is taken as given: every command that
/// names a member loads it and refuses `member_not_found` itself, so only
/// handles cost a read here.
pub(crate) async fn resolve_id(state: &AppState, who: &str) -> Result<MemberId, Problem> {
    if who.starts_with("did:") {
        return Ok(MemberId(who.into()));
    }
    Ok(resolve(state, who).await?.id)
}

pub(crate) async fn resolve(state: &AppState, who: &str) -> Result<Member, Problem> {
    let found = if who.starts_with("did:") {
        state.store.member(&MemberId(who.into())).await?
    } else {
        state.store.member_by_handle(who).await?
    };
    found.ok_or_else(|| {
        Refusal::new(
            Code::MemberNotFound,
            format!("No member `{who}` on this registry; use a DID or a current handle."),
        )
        .into()
    })
}

/// The document `id` of type `T`, or the refusal `missing` makes when there is none.
/// An account named in a request: a member's DID or handle, optionally as `acct:<member>`.
pub(crate) async fn resolve_account(state: &AppState, text: &str) -> Result<MemberId, Problem> {
    resolve_id(state, text.strip_prefix("acct:").unwrap_or(text)).await
}

/// Every document of `kind` naming `party`, in id order, up to `max`; and
/// whether that was all of them.
pub(crate) async fn docs_of(
    state: &AppState,
    kind: DocKind,
    party: &MemberId,
    max: usize,
) -> Result<(Vec<bazaar_core::model::DocRow>, bool), Problem> {
    let (mut found, mut after) = (Vec::new(), String::new());
    loop {
        let rows = state.store.docs_by_party(kind, party, &after, bazaar_types::limits::PAGE_LIMIT_MAX).await?;
        let Some(last) = rows.last() else { return Ok((found, true)) };
        after = last.id.clone();
        found.extend(rows);
        if found.len() >= max {
            found.truncate(max);
            return Ok((found, false));
        }
    }
}

pub(crate) async fn load_doc<T: Document>(
    state: &AppState,
    id: &str,
    missing: impl FnOnce() -> Refusal,
) -> Result<T, Problem> {
    let row = state.store.doc(T::KIND, id).await?.ok_or_else(missing)?;
    Ok(decode::<T>(&row)?)
}

/// The ids of documents of `kind` due at `now` (the sweeper's work
/// list is shared by every kind; each capability takes its own from it).
pub(crate) async fn due_ids(state: &AppState, kind: DocKind, now: Timestamp) -> Result<Vec<String>, StoreError> {
    let due = state.store.due_docs(now, SWEEP_DOCS_MAX).await?;
    Ok(due.into_iter().filter(|(k, _)| *k == kind).map(|(_, id)| id).collect())
}

/// Counts the advances that applied (logging refusals) into `bazaar_documents_advanced_total`.
pub(crate) fn count_advanced(
    state: &AppState,
    applied: Vec<Result<bazaar_core::apply::Applied, StoreError>>,
) -> Result<usize, StoreError> {
    let mut advanced = 0;
    for applied in applied {
        match applied?.outcome {
            Ok(_) => advanced += 1,
            Err(refusal) => tracing::warn!(code = refusal.code.as_str(), detail = %refusal.detail, "advance refused"),
        }
    }
    if advanced > 0 {
        state.metrics.add("bazaar_documents_advanced_total", String::new(), advanced as f64);
    }
    Ok(advanced)
}

/// The sweeper's share for idempotency: prunes records older than
/// `IDEMPOTENCY_RETENTION_S`. Returns how many it pruned.
pub async fn due(state: &Arc<AppState>, now: Timestamp) -> Result<usize, StoreError> {
    let cutoff = Timestamp(now.ms().saturating_sub(IDEMPOTENCY_RETENTION_S as i64 * 1000));
    let pruned = state.store.prune_idempotency(cutoff, SWEEP_BATCH_MAX).await?;
    if pruned > 0 {
        state.metrics.add("bazaar_idempotency_pruned_total", String::new(), pruned as f64);
    }
    Ok(pruned)
}

/// Items one batch call (`/v1/tokens/batch`, `/v1/settlements/batch`) carries at most.
pub const BATCH_ITEMS_MAX: usize = 1_000;
/// A batch call's body at most: a thousand of the largest single requests fit.
pub const BATCH_BODY_BYTES_MAX: usize = 4 * 1024 * 1024;

type Routed = (
    Vec<(String, utoipa::openapi::RefOr<utoipa::openapi::schema::Schema>)>,
    utoipa::openapi::path::Paths,
    axum::routing::MethodRouter<Arc<AppState>>,
);

/// A batch route takes a body up to [`BATCH_BODY_BYTES_MAX`], past the default for single requests.
pub(crate) fn batch_limited((schemas, paths, route): Routed) -> Routed {
    (schemas, paths, route.layer(axum::extract::DefaultBodyLimit::max(BATCH_BODY_BYTES_MAX)))
}

/// One item of a batch call: the body of its single call, and the `Idempotency-Key` that call would carry.
pub(crate) trait BatchItem {
    type Request;
    /// What the item acts on (its order, its key): items sharing one run in the batch's order.
    fn touches(&self) -> Vec<String>;
    fn split(self) -> (Option<String>, Self::Request);
}

/// A batch call answered: 1 to [`BATCH_ITEMS_MAX`] items, each through `single` — the single call's own
/// function, with the headers it would have carried — as `{"results": [{status, replayed, body}, …]}` in order.
pub(crate) async fn answer_batch<T, F, Fut>(items: Vec<T>, single: F) -> Result<Json<serde_json::Value>, Problem>
where
    T: BatchItem,
    F: Fn(HeaderMap, T::Request) -> Fut,
    Fut: std::future::Future<Output = Result<Response, Problem>>,
{
    if items.is_empty() || items.len() > BATCH_ITEMS_MAX {
        return Err(Problem::invalid(format!("`items` holds 1 to {BATCH_ITEMS_MAX} requests.")));
    }
    let single = &single;
    let results = run_batch(items, T::touches, |item| async move {
        let (key, request) = item.split();
        let mut headers = HeaderMap::new();
        if let Some(key) = key {
            match HeaderValue::from_str(&key) {
                Ok(value) => headers.insert(IDEMPOTENCY_KEY, value),
                Err(_) => {
                    let refusal =
                        Refusal::new(Code::IdempotencyKeyInvalid, "`idempotency_key` must be printable ASCII.");
                    return Problem::from(refusal).into_response();
                }
            };
        }
        single(headers, request).await.unwrap_or_else(IntoResponse::into_response)
    })
    .await;
    Ok(Json(serde_json::json!({"results": results})))
}

/// One item of a batch answered as its single call would be: the status, whether it was replayed from an
/// idempotency record, and the body (the receipt, or the problem+json refusal).
async fn item_answer(response: Response) -> serde_json::Value {
    let status = response.status().as_u16();
    let replayed = response.headers().contains_key(IDEMPOTENT_REPLAYED);
    let bytes = axum::body::to_bytes(response.into_body(), usize::MAX).await.unwrap_or_default();
    let body: serde_json::Value = serde_json::from_slice(&bytes).unwrap_or(serde_json::Value::Null);
    serde_json::json!({"status": status, "replayed": replayed, "body": body})
}

/// Runs a batch's items with exactly their single calls' semantics, answering in the items' order. Items that
/// share any of their `touches` (the order they act on, the idempotency key they carry) run one after another in
/// the order given — so a duplicate inside a batch is a replay of the first, and two items on one order meet
/// each other as they would sent in that order — and the other items run concurrently, so the writer commits
/// them together. Sharp edge: when concurrent items together pass one of the buyer's ceilings, which of them
/// is refused is not fixed by their order in the batch.
async fn run_batch<T, F, Fut>(items: Vec<T>, touches: impl Fn(&T) -> Vec<String>, run: F) -> Vec<serde_json::Value>
where
    F: Fn(T) -> Fut,
    Fut: std::future::Future<Output = Response>,
{
    let count = items.len();
    // Union-find over the items: two items that touch one thing share a root.
    let mut parent: Vec<usize> = (0..count).collect();
    fn root(parent: &mut [usize], mut at: usize) -> usize {
        while parent[at] != at {
            parent[at] = parent[parent[at]];
            at = parent[at];
        }
        at
    }
    let mut first_toucher: std::collections::HashMap<String, usize> = std::collections::HashMap::new();
    for (index, item) in items.iter().enumerate() {
        for key in touches(item) {
            match first_toucher.get(&key) {
                Some(&other) => {
                    let (a, b) = (root(&mut parent, index), root(&mut parent, other));
                    parent[a.max(b)] = a.min(b);
                }
                None => {
                    first_toucher.insert(key, index);
                }
            }
        }
    }
    let mut groups: std::collections::BTreeMap<usize, Vec<(usize, T)>> = std::collections::BTreeMap::new();
    for (index, item) in items.into_iter().enumerate() {
        let group = root(&mut parent, index);
        groups.entry(group).or_default().push((index, item));
    }
    let run = &run;
    let answered = futures::future::join_all(groups.into_values().map(|members| async move {
        let mut out = Vec::with_capacity(members.len());
        for (index, item) in members {
            out.push((index, item_answer(run(item).await).await));
        }
        out
    }))
    .await;
    let mut results = vec![serde_json::Value::Null; count];
    for (index, answer) in answered.into_iter().flatten() {
        results[index] = answer;
    }
    results
}

/// `value` as the wire type `T` that states its shape: for a core value whose serialised form the
/// wire contract types (a token's claims, a settlement's facts). A value that does not convert is an
/// internal error: the contract and the core disagree.
pub(crate) fn wire<T: serde::de::DeserializeOwned>(value: &impl serde::Serialize) -> Result<T, Problem> {
    serde_json::to_value(value).and_then(serde_json::from_value).map_err(|error| {
        tracing::error!(%error, "a core value does not convert to its wire type");
        Problem::new(
            axum::http::StatusCode::INTERNAL_SERVER_ERROR,
            "internal",
            "The registry hit an internal error; the operator has been told.",
        )
    })
}

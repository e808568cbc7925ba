//! The ledger as accounts: every account's balance (operator), and one
//! account's history as the transfers that moved it (operator, the account's
//! holder, or the holder's owner). The hash-chained events themselves are
//! `GET /v1/events`; the chamber's ledger explorer reads all three.

use crate::auth::{ApiQuery, Auth};
use crate::problem::Problem;
use crate::state::AppState;
use axum::extract::{Path, State};
use axum::Json;
use bazaar_core::model::{Account, MemberKind};
use bazaar_core::refusal::{Code, Refusal};
use bazaar_types::limits::PAGE_LIMIT_MAX;
use bazaar_types::{AccountId, MemberId};
use bazaar_wire::pay as schema;
use serde::Deserialize;
use serde_json::{json, Value};
use std::sync::Arc;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

/// Transfers one history request reads at most while looking for the account's
/// own (the transfer log has no per-account index); the answer's `next_after`
/// continues from where it stopped.
pub const HISTORY_SCAN_MAX: usize = 20_000;
/// Transfers read from the store per step of that scan.
const HISTORY_SCAN_STEP: usize = 1_000;

pub fn routes() -> OpenApiRouter<Arc<AppState>> {
    OpenApiRouter::new().routes(routes!(accounts)).routes(routes!(history))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AccountsQuery {
    #[serde(default)]
    pub after: String,
    pub limit: Option<usize>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HistoryQuery {
    #[serde(default)]
    pub after: i64,
    pub limit: Option<usize>,
}

fn balance_json(a: &Account) -> Value {
    json!({"id": a.id.as_str(), "balance": a.balance().to_string(), "available": a.available().to_string(),
           "pending": a.debits_pending, "credits_posted": a.credits_posted, "debits_posted": a.debits_posted})
}

/// Operator only: every account's balance, a page at a time in account-id order.
#[utoipa::path(get, path = "/v1/accounts", params(("after" = Option<String>, Query, description = "The last account id of the previous page"), ("limit" = Option<usize>, Query)), security(("credential" = []), ("session" = [])), responses((status = 200, description = "Accounts with their balances", body = schema::AccountPage)))]
async fn accounts(
    State(state): State<Arc<AppState>>,
    auth: Auth,
    ApiQuery(query): ApiQuery<AccountsQuery>,
) -> Result<Json<Value>, Problem> {
    if auth.member.kind != MemberKind::Operator {
        return Err(Refusal::new(Code::NotPermitted, "Only the operator reads every account's balance.").into());
    }
    let limit = query.limit.unwrap_or(PAGE_LIMIT_MAX).clamp(1, PAGE_LIMIT_MAX);
    let page = state.store.accounts(&query.after, limit).await?;
    let next_after = if page.len() == limit { page.last().map(|a| a.id.as_str().to_string()) } else { None };
    Ok(Json(json!({"accounts": page.iter().map(balance_json).collect::<Vec<_>>(), "next_after": next_after})))
}

/// The member an account belongs to (`acct:`, `stake:` and `corridor:` accounts); none for the system's own.
fn holder_of(account: &str) -> Option<MemberId> {
    ["acct:", "stake:", "corridor:"].iter().find_map(|prefix| account.strip_prefix(prefix)).map(|m| MemberId(m.into()))
}

/// One account's history: the transfers that debited or credited it, in commit order, with its balance now.
/// The operator reads any account; a member its own; an owner its agents'.
#[utoipa::path(get, path = "/v1/accounts/{account}/transfers", operation_id = "account_transfers", params(("account" = String, Path), ("after" = Option<i64>, Query, description = "`next_after` of the previous page"), ("limit" = Option<usize>, Query)), security(("credential" = []), ("session" = [])), responses((status = 200, description = "The account and the transfers that moved it", body = schema::AccountHistory)))]
async fn history(
    State(state): State<Arc<AppState>>,
    auth: Auth,
    Path(account): Path<String>,
    ApiQuery(query): ApiQuery<HistoryQuery>,
) -> Result<Json<Value>, Problem> {
    let id = AccountId(account.clone());
    let found = state.store.account(&id).await?;
    let allowed = auth.member.kind == MemberKind::Operator
        || match holder_of(&account) {
            Some(holder) if holder == auth.member.id => true,
            Some(holder) => {
                state.store.member(&holder).await?.is_some_and(|m| m.owner.as_ref() == Some(&auth.member.id))
            }
            None => false,
        };
    if !allowed {
        return Err(Refusal::new(
            Code::NotPermitted,
            "Only the operator, the account's holder or its owner reads its history.",
        )
        .into());
    }
    let account_row = found.ok_or_else(|| Refusal::new(Code::AccountNotFound, "No such account."))?;
    let limit = query.limit.unwrap_or(PAGE_LIMIT_MAX).clamp(1, PAGE_LIMIT_MAX);
    let (mut after, mut scanned, mut rows) = (query.after, 0usize, Vec::new());
    let exhausted = 'scan: loop {
        let step = state.store.transfers(after, HISTORY_SCAN_STEP).await?;
        for (position, t) in step.iter() {
            after = *position;
            scanned += 1;
            if t.debit == id || t.credit == id {
                rows.push(json!({"position": position, "id": t.id.as_str(), "kind": t.kind.as_str(),
                    "direction": if t.debit == id { "debit" } else { "credit" },
                    "counterparty": if t.debit == id { t.credit.as_str() } else { t.debit.as_str() },
                    "amount": t.amount.0, "link": t.link, "authored_by": t.authored_by.as_str(),
                    "on_behalf_of": t.on_behalf_of.as_str(), "at": t.at.ms()}));
                if rows.len() == limit {
                    break 'scan false;
                }
            }
        }
        if step.len() < HISTORY_SCAN_STEP {
            break true;
        }
        if scanned >= HISTORY_SCAN_MAX {
            break false;
        }
    };
    Ok(Json(json!({"account": balance_json(&account_row), "transfers": rows,
                   "next_after": if exhausted { None } else { Some(after) }})))
}

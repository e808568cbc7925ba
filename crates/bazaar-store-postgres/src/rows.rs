//! Row mapping between PostgreSQL rows and the core's model: the column lists
//! every query selects, one decoder per row type, and the numeric conversions.
//!
//! Decoders take the index of their first column so one joined row can hold
//! several records side by side.

use bazaar_core::model::*;
use bazaar_store::{packed, StoreError};
use bazaar_types::{AccountId, Amount, HoldId, MemberId, OrderId, Timestamp, TokenId, TransferId};
use tokio_postgres::types::FromSql;
use tokio_postgres::Row;

pub const MEMBER_COLUMNS: &str = "id, kind, owner, handle, created_at";
pub const HANDLE_COLUMNS: &str = "handle, member, retired, since";
pub const CREDENTIAL_COLUMNS: &str = "hash, member, created_at, revoked_at, scopes";
/// Columns in [`CREDENTIAL_COLUMNS`], the offset of what is joined after it.
pub const CREDENTIAL_WIDTH: usize = 5;
pub const INVITE_COLUMNS: &str = "code_hash, owner, expires_at, used_by, used_at";
pub const ACCOUNT_COLUMNS: &str = "id, allow_negative, debits_posted, credits_posted, debits_pending";
pub const BUDGET_COLUMNS: &str = "agent, per_call_max, per_day_max, total_max, spent_total, day, spent_day";
pub const HOLD_COLUMNS: &str = "id, account, amount, created_at, expires_at, state, posted_amount, resolved_at";
pub const TOKEN_COLUMNS: &str = "jti, buyer, merchant, max_amount, order_id, resource, hold, issued_at, expires_at";
pub const SETTLEMENT_COLUMNS: &str = "id, jti, buyer, merchant, order_id, amount, fee, net, settled_at";
pub const TRANSFER_COLUMNS: &str = "pos, id, debit, credit, amount, kind, hold, link, authored_by, on_behalf_of, at";
pub const EVENT_COLUMNS: &str = "seq, prev_hash, hash, kind, body, authored_by, on_behalf_of, at";
pub const IDEM_COLUMNS: &str = "scope, key, fingerprint, outcome, created_at, receipt_tag";
pub const DOC_COLUMNS: &str = "kind, id, body, due_at, parties";

/// Columns per record, for decoding joined rows.
pub const TOKEN_WIDTH: usize = 9;
pub const HOLD_WIDTH: usize = 8;

fn corrupt(what: impl std::fmt::Display) -> StoreError {
    StoreError::Corrupt(what.to_string())
}

/// One typed column; a type or NULL mismatch means the stored data is not ours.
pub fn get<'a, T: FromSql<'a>>(r: &'a Row, i: usize) -> Result<T, StoreError> {
    r.try_get(i).map_err(|e| corrupt(format!("column {i}: {e}")))
}

fn amount(r: &Row, i: usize) -> Result<Amount, StoreError> {
    Ok(Amount(unsigned(r, i)?))
}

fn unsigned(r: &Row, i: usize) -> Result<u64, StoreError> {
    u64::try_from(get::<i64>(r, i)?).map_err(|_| corrupt(format!("column {i}: negative value")))
}

fn ts(r: &Row, i: usize) -> Result<Timestamp, StoreError> {
    Ok(Timestamp(get(r, i)?))
}

fn ts_opt(r: &Row, i: usize) -> Result<Option<Timestamp>, StoreError> {
    Ok(get::<Option<i64>>(r, i)?.map(Timestamp))
}

/// PostgreSQL stores BIGINT; every amount is far below `i64::MAX`
/// (`AMOUNT_MINOR_MAX`), and a value that is not refuses the write.
pub fn int(value: u64) -> Result<i64, StoreError> {
    i64::try_from(value).map_err(|_| StoreError::Constraint(format!("value {value} exceeds the BIGINT range")))
}

/// A caller's `u64`/`usize` bound as a BIGINT parameter, saturating.
pub fn bound(value: impl TryInto<i64>) -> i64 {
    value.try_into().unwrap_or(i64::MAX)
}

pub fn member(r: &Row, o: usize) -> Result<Member, StoreError> {
    let kind: &str = get(r, o + 1)?;
    Ok(Member {
        id: MemberId(get(r, o)?),
        kind: MemberKind::parse(kind).ok_or_else(|| corrupt("member kind"))?,
        owner: get::<Option<String>>(r, o + 2)?.map(MemberId),
        handle: get(r, o + 3)?,
        created_at: ts(r, o + 4)?,
    })
}

pub fn handle(r: &Row, o: usize) -> Result<HandleRow, StoreError> {
    Ok(HandleRow {
        handle: get(r, o)?,
        member: MemberId(get(r, o + 1)?),
        retired: get(r, o + 2)?,
        since: ts(r, o + 3)?,
    })
}

pub fn credential(r: &Row, o: usize) -> Result<Credential, StoreError> {
    Ok(Credential {
        hash: get(r, o)?,
        member: MemberId(get(r, o + 1)?),
        created_at: ts(r, o + 2)?,
        revoked_at: ts_opt(r, o + 3)?,
        scopes: get(r, o + 4)?,
    })
}

pub fn invite(r: &Row, o: usize) -> Result<Invite, StoreError> {
    Ok(Invite {
        code_hash: get(r, o)?,
        owner: MemberId(get(r, o + 1)?),
        expires_at: ts(r, o + 2)?,
        used_by: get::<Option<String>>(r, o + 3)?.map(MemberId),
        used_at: ts_opt(r, o + 4)?,
    })
}

pub fn account(r: &Row, o: usize) -> Result<Account, StoreError> {
    Ok(Account {
        id: AccountId(get(r, o)?),
        allow_negative: get(r, o + 1)?,
        debits_posted: unsigned(r, o + 2)?,
        credits_posted: unsigned(r, o + 3)?,
        debits_pending: unsigned(r, o + 4)?,
    })
}

pub fn budget(r: &Row, o: usize) -> Result<Budget, StoreError> {
    Ok(Budget {
        agent: MemberId(get(r, o)?),
        per_call_max: amount(r, o + 1)?,
        per_day_max: amount(r, o + 2)?,
        total_max: amount(r, o + 3)?,
        spent_total: amount(r, o + 4)?,
        day: get(r, o + 5)?,
        spent_day: amount(r, o + 6)?,
    })
}

pub fn hold(r: &Row, o: usize) -> Result<Hold, StoreError> {
    let state: &str = get(r, o + 5)?;
    Ok(Hold {
        id: HoldId(get(r, o)?),
        account: AccountId(get(r, o + 1)?),
        amount: amount(r, o + 2)?,
        created_at: ts(r, o + 3)?,
        expires_at: ts(r, o + 4)?,
        state: HoldState::parse(state).ok_or_else(|| corrupt("hold state"))?,
        posted_amount: amount(r, o + 6)?,
        resolved_at: ts_opt(r, o + 7)?,
    })
}

pub fn token(r: &Row, o: usize) -> Result<TokenRecord, StoreError> {
    Ok(TokenRecord {
        jti: TokenId(get(r, o)?),
        buyer: MemberId(get(r, o + 1)?),
        merchant: MemberId(get(r, o + 2)?),
        max_amount: amount(r, o + 3)?,
        order_id: OrderId(get(r, o + 4)?),
        resource: get(r, o + 5)?,
        hold: HoldId(get(r, o + 6)?),
        issued_at: ts(r, o + 7)?,
        expires_at: ts(r, o + 8)?,
    })
}

pub fn settlement(r: &Row, o: usize) -> Result<Settlement, StoreError> {
    Ok(Settlement {
        id: get(r, o)?,
        jti: TokenId(get(r, o + 1)?),
        buyer: MemberId(get(r, o + 2)?),
        merchant: MemberId(get(r, o + 3)?),
        order_id: OrderId(get(r, o + 4)?),
        amount: amount(r, o + 5)?,
        fee: amount(r, o + 6)?,
        net: amount(r, o + 7)?,
        settled_at: ts(r, o + 8)?,
    })
}

/// A transfer with its commit position (the first column).
pub fn transfer(r: &Row, o: usize) -> Result<(i64, Transfer), StoreError> {
    let kind: &str = get(r, o + 5)?;
    Ok((
        get(r, o)?,
        Transfer {
            id: TransferId(get(r, o + 1)?),
            debit: AccountId(get(r, o + 2)?),
            credit: AccountId(get(r, o + 3)?),
            amount: amount(r, o + 4)?,
            kind: TransferKind::parse(kind).ok_or_else(|| corrupt("transfer kind"))?,
            hold: get::<Option<String>>(r, o + 6)?.map(HoldId),
            link: get(r, o + 7)?,
            authored_by: MemberId(get(r, o + 8)?),
            on_behalf_of: MemberId(get(r, o + 9)?),
            at: ts(r, o + 10)?,
        },
    ))
}

/// An event as the `events` view gives it; the body is stored packed (`bazaar_store::packed`, migration 0013).
pub fn event(r: &Row, o: usize) -> Result<Event, StoreError> {
    let stored: &[u8] = get(r, o + 4)?;
    let body = packed::unpack_body(stored).map_err(|e| StoreError::Corrupt(format!("event body: {e}")))?;
    Ok(Event {
        seq: unsigned(r, o)?,
        prev_hash: get(r, o + 1)?,
        hash: get(r, o + 2)?,
        kind: get(r, o + 3)?,
        body,
        authored_by: MemberId(get(r, o + 5)?),
        on_behalf_of: MemberId(get(r, o + 6)?),
        at: ts(r, o + 7)?,
    })
}

pub fn idem(r: &Row, o: usize) -> Result<IdempotencyRecord, StoreError> {
    Ok(IdempotencyRecord {
        scope: get(r, o)?,
        key: get(r, o + 1)?,
        fingerprint: get(r, o + 2)?,
        outcome: get(r, o + 3)?,
        created_at: ts(r, o + 4)?,
        tag: get(r, o + 5)?,
    })
}

/// A document's (kind, id).
pub fn doc_key(r: &Row, o: usize) -> Result<(DocKind, String), StoreError> {
    let kind: &str = get(r, o)?;
    Ok((DocKind::parse(kind).ok_or_else(|| corrupt("document kind"))?, get(r, o + 1)?))
}

pub fn doc(r: &Row, o: usize) -> Result<DocRow, StoreError> {
    let (kind, id) = doc_key(r, o)?;
    let body: &str = get(r, o + 2)?;
    let parties: Vec<String> =
        serde_json::from_str(get(r, o + 4)?).map_err(|_| corrupt(format!("{} {id}: parties", kind.as_str())))?;
    Ok(DocRow {
        kind,
        body: serde_json::from_str(body).map_err(|_| corrupt(format!("{} {id}: body", kind.as_str())))?,
        id,
        due_at: ts_opt(r, o + 3)?,
        parties: parties.into_iter().map(MemberId).collect(),
    })
}

pub fn blob(r: &Row, o: usize) -> Result<Blob, StoreError> {
    let sha256: String = get(r, o)?;
    let parties: Vec<String> =
        serde_json::from_str(get(r, o + 3)?).map_err(|_| corrupt(format!("blob {sha256}: parties")))?;
    Ok(Blob {
        content_type: get(r, o + 1)?,
        bytes: get(r, o + 2)?,
        parties: parties.into_iter().map(MemberId).collect(),
        created_at: Timestamp(get(r, o + 4)?),
        sha256,
    })
}

/// A document's body as stored: its JSON text.
pub fn doc_body(d: &DocRow) -> Result<String, StoreError> {
    serde_json::to_string(&d.body).map_err(|e| corrupt(format!("{} {}: body: {e}", d.kind.as_str(), d.id)))
}

/// A document's party list as stored in `docs.parties`: a JSON array of ids, in order.
pub fn doc_parties(d: &DocRow) -> String {
    serde_json::Value::from(d.parties.iter().map(|p| p.0.as_str()).collect::<Vec<_>>()).to_string()
}

/// Decodes every row of a result with `f`, starting at column 0.
pub fn all<T>(rows: &[Row], f: fn(&Row, usize) -> Result<T, StoreError>) -> Result<Vec<T>, StoreError> {
    rows.iter().map(|r| f(r, 0)).collect()
}

/// Decodes the single row of a result, if any.
pub fn optional<T>(row: Option<Row>, f: fn(&Row, usize) -> Result<T, StoreError>) -> Result<Option<T>, StoreError> {
    row.map(|r| f(&r, 0)).transpose()
}

/// Length of a registry key seed in bytes.
pub const SEED_LEN: usize = 32;

pub fn seed_decode(text: &str) -> Result<[u8; SEED_LEN], StoreError> {
    let mut out = [0u8; SEED_LEN];
    hex::decode_to_slice(text, &mut out).map_err(|_| corrupt("registry key seed"))?;
    Ok(out)
}

//! Row mapping between SQLite and the core's model, and the batch load/write.

use bazaar_core::chain::ChainHead;
use bazaar_core::command::Keys;
use bazaar_core::model::*;
use bazaar_core::state::{Changes, Snapshot};
use bazaar_store::packed;
use bazaar_types::{AccountId, Amount, HoldId, MemberId, OrderId, Timestamp, TokenId, TransferId};
use rusqlite::types::ValueRef;
use rusqlite::{params, Connection, OptionalExtension, Row};
use std::collections::HashMap;

pub const MEMBER_SELECT: &str = "SELECT id, kind, owner, handle, created_at FROM members";
pub const CREDENTIAL_SELECT: &str = "SELECT hash, member, created_at, revoked_at, scopes FROM credentials";
pub const ACCOUNT_SELECT: &str =
    "SELECT id, allow_negative, debits_posted, credits_posted, debits_pending FROM accounts";
pub const BUDGET_SELECT: &str =
    "SELECT agent, per_call_max, per_day_max, total_max, spent_total, day, spent_day FROM budgets";
pub const HOLD_SELECT: &str =
    "SELECT id, account, amount, created_at, expires_at, state, posted_amount, resolved_at FROM holds";
pub const TOKEN_SELECT: &str =
    "SELECT jti, buyer, merchant, max_amount, order_id, resource, hold, issued_at, expires_at FROM tokens";
pub const SETTLEMENT_SELECT: &str =
    "SELECT id, jti, buyer, merchant, order_id, amount, fee, net, settled_at FROM settlements";
pub const TRANSFER_SELECT: &str =
    "SELECT pos, id, debit, credit, amount, kind, hold, link, authored_by, on_behalf_of, at FROM transfers";
pub const EVENT_SELECT: &str = "SELECT seq, prev_hash, hash, kind, body, authored_by, on_behalf_of, at FROM events";
pub const DOC_SELECT: &str = "SELECT kind, id, body, due_at, parties FROM docs";

fn bad(column: usize, what: &str) -> rusqlite::Error {
    rusqlite::Error::FromSqlConversionFailure(column, rusqlite::types::Type::Text, what.to_string().into())
}

fn amount(r: &Row, i: usize) -> rusqlite::Result<Amount> {
    Ok(Amount(u64::try_from(r.get::<_, i64>(i)?).map_err(|_| bad(i, "negative amount"))?))
}

fn ts(r: &Row, i: usize) -> rusqlite::Result<Timestamp> {
    Ok(Timestamp(r.get(i)?))
}

fn u(r: &Row, i: usize) -> rusqlite::Result<u64> {
    u64::try_from(r.get::<_, i64>(i)?).map_err(|_| bad(i, "negative counter"))
}

/// SQLite stores i64; every amount is far below `i64::MAX` (`AMOUNT_MINOR_MAX`).
fn i(value: u64) -> i64 {
    i64::try_from(value).expect("amounts fit in i64")
}

pub fn member_row(r: &Row) -> rusqlite::Result<Member> {
    let kind: String = r.get(1)?;
    Ok(Member {
        id: MemberId(r.get(0)?),
        kind: MemberKind::parse(&kind).ok_or_else(|| bad(1, "member kind"))?,
        owner: r.get::<_, Option<String>>(2)?.map(MemberId),
        handle: r.get(3)?,
        created_at: ts(r, 4)?,
    })
}

/// A credential (columns 0..4) joined with its member (columns 4..9).
pub fn credential_and_member_row(r: &Row) -> rusqlite::Result<(Credential, Member)> {
    let kind: String = r.get(5)?;
    let member = Member {
        id: MemberId(r.get(4)?),
        kind: MemberKind::parse(&kind).ok_or_else(|| bad(5, "member kind"))?,
        owner: r.get::<_, Option<String>>(6)?.map(MemberId),
        handle: r.get(7)?,
        created_at: ts(r, 8)?,
    };
    Ok((Credential { scopes: r.get(9)?, ..credential_columns(r)? }, member))
}

pub fn credential_row(r: &Row) -> rusqlite::Result<Credential> {
    Ok(Credential { scopes: r.get(4)?, ..credential_columns(r)? })
}

/// The first four columns of a credential (its scopes come from where the query put them).
fn credential_columns(r: &Row) -> rusqlite::Result<Credential> {
    Ok(Credential {
        hash: r.get(0)?,
        member: MemberId(r.get(1)?),
        created_at: ts(r, 2)?,
        revoked_at: r.get::<_, Option<i64>>(3)?.map(Timestamp),
        scopes: None,
    })
}

fn invite_row(r: &Row) -> rusqlite::Result<Invite> {
    Ok(Invite {
        code_hash: r.get(0)?,
        owner: MemberId(r.get(1)?),
        expires_at: ts(r, 2)?,
        used_by: r.get::<_, Option<String>>(3)?.map(MemberId),
        used_at: r.get::<_, Option<i64>>(4)?.map(Timestamp),
    })
}

fn handle_row(r: &Row) -> rusqlite::Result<HandleRow> {
    Ok(HandleRow { handle: r.get(0)?, member: MemberId(r.get(1)?), retired: r.get(2)?, since: ts(r, 3)? })
}

pub fn account_row(r: &Row) -> rusqlite::Result<Account> {
    Ok(Account {
        id: AccountId(r.get(0)?),
        allow_negative: r.get(1)?,
        debits_posted: u(r, 2)?,
        credits_posted: u(r, 3)?,
        debits_pending: u(r, 4)?,
    })
}

pub fn budget_row(r: &Row) -> rusqlite::Result<Budget> {
    Ok(Budget {
        agent: MemberId(r.get(0)?),
        per_call_max: amount(r, 1)?,
        per_day_max: amount(r, 2)?,
        total_max: amount(r, 3)?,
        spent_total: amount(r, 4)?,
        day: r.get(5)?,
        spent_day: amount(r, 6)?,
    })
}

pub fn hold_row(r: &Row) -> rusqlite::Result<Hold> {
    let state: String = r.get(5)?;
    Ok(Hold {
        id: HoldId(r.get(0)?),
        account: AccountId(r.get(1)?),
        amount: amount(r, 2)?,
        created_at: ts(r, 3)?,
        expires_at: ts(r, 4)?,
        state: HoldState::parse(&state).ok_or_else(|| bad(5, "hold state"))?,
        posted_amount: amount(r, 6)?,
        resolved_at: r.get::<_, Option<i64>>(7)?.map(Timestamp),
    })
}

pub fn token_row(r: &Row) -> rusqlite::Result<TokenRecord> {
    Ok(TokenRecord {
        jti: TokenId(r.get(0)?),
        buyer: MemberId(r.get(1)?),
        merchant: MemberId(r.get(2)?),
        max_amount: amount(r, 3)?,
        order_id: OrderId(r.get(4)?),
        resource: r.get(5)?,
        hold: HoldId(r.get(6)?),
        issued_at: ts(r, 7)?,
        expires_at: ts(r, 8)?,
    })
}

pub fn settlement_row(r: &Row) -> rusqlite::Result<Settlement> {
    Ok(Settlement {
        id: r.get(0)?,
        jti: TokenId(r.get(1)?),
        buyer: MemberId(r.get(2)?),
        merchant: MemberId(r.get(3)?),
        order_id: OrderId(r.get(4)?),
        amount: amount(r, 5)?,
        fee: amount(r, 6)?,
        net: amount(r, 7)?,
        settled_at: ts(r, 8)?,
    })
}

/// Columns start at 1: column 0 is the position.
pub fn transfer_row(r: &Row) -> rusqlite::Result<Transfer> {
    let kind: String = r.get(5)?;
    Ok(Transfer {
        id: TransferId(r.get(1)?),
        debit: AccountId(r.get(2)?),
        credit: AccountId(r.get(3)?),
        amount: amount(r, 4)?,
        kind: TransferKind::parse(&kind).ok_or_else(|| bad(5, "transfer kind"))?,
        hold: r.get::<_, Option<String>>(6)?.map(HoldId),
        link: r.get(7)?,
        authored_by: MemberId(r.get(8)?),
        on_behalf_of: MemberId(r.get(9)?),
        at: ts(r, 10)?,
    })
}

/// An event as the `events` view gives it: the body is JSON text on rows written before migration 0012 and a
/// packed body (`bazaar_store::packed`) after.
pub fn event_row(r: &Row) -> rusqlite::Result<Event> {
    let body = match r.get_ref(4)? {
        ValueRef::Text(text) => serde_json::from_slice(text).map_err(|_| bad(4, "event body"))?,
        ValueRef::Blob(packed) => packed::unpack_body(packed).map_err(|e| bad(4, &format!("event body: {e}")))?,
        _ => return Err(bad(4, "event body")),
    };
    Ok(Event {
        seq: u(r, 0)?,
        prev_hash: r.get(1)?,
        hash: r.get(2)?,
        kind: r.get(3)?,
        body,
        authored_by: MemberId(r.get(5)?),
        on_behalf_of: MemberId(r.get(6)?),
        at: ts(r, 7)?,
    })
}

pub fn blob_row(r: &Row) -> rusqlite::Result<Blob> {
    let parties: String = r.get(3)?;
    Ok(Blob {
        sha256: r.get(0)?,
        content_type: r.get(1)?,
        bytes: r.get(2)?,
        parties: serde_json::from_str(&parties)
            .map_err(|e| rusqlite::Error::FromSqlConversionFailure(3, rusqlite::types::Type::Text, e.into()))?,
        created_at: Timestamp(r.get(4)?),
    })
}

pub fn doc_row(r: &Row) -> rusqlite::Result<DocRow> {
    let (kind, id) = doc_key_row(r)?;
    let body: String = r.get(2)?;
    let parties: String = r.get(4)?;
    let parties: Vec<String> = serde_json::from_str(&parties).map_err(|_| bad(4, "document parties"))?;
    Ok(DocRow {
        kind,
        id,
        body: serde_json::from_str(&body).map_err(|_| bad(2, "document body"))?,
        due_at: r.get::<_, Option<i64>>(3)?.map(Timestamp),
        parties: parties.into_iter().map(MemberId).collect(),
    })
}

/// A document's (kind, id).
pub fn doc_key_row(r: &Row) -> rusqlite::Result<(DocKind, String)> {
    let kind: String = r.get(0)?;
    Ok((DocKind::parse(&kind).ok_or_else(|| bad(0, "document kind"))?, r.get(1)?))
}

/// A document's party list as stored in `docs.parties`: a JSON array of ids, in order.
fn parties_json(d: &DocRow) -> String {
    serde_json::Value::from(d.parties.iter().map(|p| p.0.as_str()).collect::<Vec<_>>()).to_string()
}

fn idem_row(r: &Row) -> rusqlite::Result<IdempotencyRecord> {
    Ok(IdempotencyRecord {
        scope: r.get(0)?,
        key: r.get(1)?,
        fingerprint: r.get(2)?,
        outcome: r.get(3)?,
        created_at: ts(r, 4)?,
        tag: r.get(5)?,
    })
}

fn one<T>(
    conn: &Connection,
    sql: &str,
    key: impl rusqlite::Params,
    f: fn(&Row) -> rusqlite::Result<T>,
) -> rusqlite::Result<Option<T>> {
    conn.prepare_cached(sql)?.query_row(key, f).optional()
}

/// The members, handles, credentials and invites a batch names.
fn load_members(conn: &Connection, keys: &Keys, s: &mut Snapshot) -> rusqlite::Result<()> {
    for id in &keys.members {
        if let Some(row) = one(conn, &format!("{MEMBER_SELECT} WHERE id = ?1"), [&id.0], member_row)? {
            s.members.insert(id.clone(), row);
        }
    }
    for handle in &keys.handles {
        if let Some(row) =
            one(conn, "SELECT handle, member, retired, since FROM handles WHERE handle = ?1", [handle], handle_row)?
        {
            s.handles.insert(handle.clone(), row);
        }
    }
    for hash in &keys.credentials {
        if let Some(row) = one(conn, &format!("{CREDENTIAL_SELECT} WHERE hash = ?1"), [hash], credential_row)? {
            s.credentials.insert(hash.clone(), row);
        }
    }
    for hash in &keys.invites {
        let sql = "SELECT code_hash, owner, expires_at, used_by, used_at FROM invites WHERE code_hash = ?1";
        if let Some(row) = one(conn, sql, [hash], invite_row)? {
            s.invites.insert(hash.clone(), row);
        }
    }
    Ok(())
}

pub fn load_snapshot(conn: &Connection, keys: &Keys) -> rusqlite::Result<Snapshot> {
    let head =
        conn.query_row("SELECT seq, hash FROM chain_head", [], |r| Ok(ChainHead { seq: u(r, 0)?, hash: r.get(1)? }))?;
    let mut s = Snapshot::empty(head);
    load_members(conn, keys, &mut s)?;
    for id in &keys.accounts {
        if let Some(row) = one(conn, &format!("{ACCOUNT_SELECT} WHERE id = ?1"), [&id.0], account_row)? {
            s.accounts.insert(id.clone(), row);
        }
    }
    for agent in &keys.budgets {
        if let Some(row) = one(conn, &format!("{BUDGET_SELECT} WHERE agent = ?1"), [&agent.0], budget_row)? {
            s.budgets.insert(agent.clone(), row);
        }
    }
    for id in &keys.holds {
        if let Some(row) = one(conn, &format!("{HOLD_SELECT} WHERE id = ?1"), [&id.0], hold_row)? {
            s.holds.insert(id.clone(), row);
        }
    }
    for jti in &keys.tokens {
        if let Some(row) = one(conn, &format!("{TOKEN_SELECT} WHERE jti = ?1"), [&jti.0], token_row)? {
            s.tokens.insert(jti.clone(), row);
        }
    }
    for jti in &keys.settlements_by_token {
        if let Some(row) = one(conn, &format!("{SETTLEMENT_SELECT} WHERE jti = ?1"), [&jti.0], settlement_row)? {
            s.settlements_by_token.insert(jti.clone(), row);
        }
    }
    for (merchant, order) in &keys.settlements_by_order {
        let sql = format!("{SETTLEMENT_SELECT} WHERE merchant = ?1 AND order_id = ?2");
        if let Some(row) = one(conn, &sql, [&merchant.0, &order.0], settlement_row)? {
            s.settlements_by_order.insert((merchant.clone(), order.clone()), row);
        }
    }
    for (scope, key) in &keys.idem {
        let sql = "SELECT scope, key, fingerprint, outcome, created_at, receipt_tag FROM idempotency WHERE scope = ?1 AND key = ?2";
        if let Some(row) = one(conn, sql, [scope, key], idem_row)? {
            s.idem.insert((scope.clone(), key.clone()), row);
        }
    }
    for (kind, id) in &keys.docs {
        let sql = format!("{DOC_SELECT} WHERE kind = ?1 AND id = ?2");
        if let Some(row) = one(conn, &sql, [kind.as_str(), id.as_str()], doc_row)? {
            s.docs.insert((*kind, id.clone()), row);
        }
    }
    for sha256 in &keys.blobs {
        if one(conn, "SELECT 1 FROM blobs WHERE sha256 = ?1", [sha256], |_| Ok(()))?.is_some() {
            s.blobs.insert(sha256.clone());
        }
    }
    Ok(s)
}

/// A write the adapter itself refuses, reported like a constraint SQLite enforced.
fn refused(message: String) -> rusqlite::Error {
    rusqlite::Error::SqliteFailure(
        rusqlite::ffi::Error { code: rusqlite::ErrorCode::ConstraintViolation, extended_code: 0 },
        Some(message),
    )
}

/// Names the writer has learned the numbers of (`names`, migration 0012). A name's number never changes, so a
/// number learned stays right; one learned inside a transaction that then rolls back may not exist, so those are
/// forgotten ([`Names::rolled_back`]). The writer writes the compact rows with these numbers itself rather than
/// through the views' `INSTEAD OF` triggers (which stay for operators' own inserts).
#[derive(Default)]
pub struct Names {
    known: HashMap<String, i64>,
    /// Learned in the open transaction.
    pending: Vec<String>,
}

/// Names kept in [`Names`]; past this the cache starts over (a registry's names are its members, accounts and
/// event kinds: a few per member).
pub const NAMES_CACHED_MAX: usize = 100_000;

impl Names {
    /// `name`'s number, stored in `names` first if it is new.
    pub fn number(&mut self, conn: &Connection, name: &str) -> rusqlite::Result<i64> {
        if let Some(&n) = self.known.get(name) {
            return Ok(n);
        }
        conn.prepare_cached("INSERT OR IGNORE INTO names (name) VALUES (?1)")?.execute([name])?;
        let n = conn.prepare_cached("SELECT n FROM names WHERE name = ?1")?.query_row([name], |r| r.get(0))?;
        if self.known.len() >= NAMES_CACHED_MAX {
            self.known.clear();
        }
        self.known.insert(name.to_string(), n);
        self.pending.push(name.to_string());
        Ok(n)
    }

    /// The open transaction committed: what it learned stands.
    pub fn committed(&mut self) {
        self.pending.clear();
    }

    /// The open transaction rolled back: names it stored are gone again.
    pub fn rolled_back(&mut self) {
        for name in self.pending.drain(..) {
            self.known.remove(&name);
        }
    }
}

pub fn write_changes(conn: &Connection, names: &mut Names, c: &Changes) -> rusqlite::Result<()> {
    write_members(conn, c)?;
    write_balances(conn, c)?;
    write_holds(conn, names, c)?;
    write_payments(conn, names, c)?;
    write_records(conn, names, c)?;
    Ok(())
}

/// Writes the members, their handles, credentials and invites.
fn write_members(conn: &Connection, c: &Changes) -> rusqlite::Result<()> {
    for m in &c.insert_members {
        conn.prepare_cached("INSERT INTO members VALUES (?1, ?2, ?3, ?4, ?5)")?.execute(params![
            m.id.0,
            m.kind.as_str(),
            m.owner.as_ref().map(|o| &o.0),
            m.handle,
            m.created_at.0
        ])?;
    }
    for m in &c.update_members {
        conn.prepare_cached("UPDATE members SET handle = ?2 WHERE id = ?1")?.execute(params![m.id.0, m.handle])?;
    }
    for h in &c.retire_handles {
        conn.prepare_cached("UPDATE handles SET retired = 1 WHERE handle = ?1")?.execute([h])?;
    }
    for h in &c.insert_handles {
        conn.prepare_cached("INSERT INTO handles VALUES (?1, ?2, ?3, ?4)")?
            .execute(params![h.handle, h.member.0, h.retired, h.since.0])?;
    }
    for x in &c.upsert_credentials {
        conn.prepare_cached("INSERT INTO credentials (hash, member, created_at, revoked_at, scopes) VALUES (?1, ?2, ?3, ?4, ?5) ON CONFLICT (hash) DO UPDATE SET revoked_at = excluded.revoked_at")?
            .execute(params![x.hash, x.member.0, x.created_at.0, x.revoked_at.map(|t| t.0), x.scopes])?;
    }
    for x in &c.upsert_invites {
        conn.prepare_cached(
            "INSERT INTO invites VALUES (?1, ?2, ?3, ?4, ?5) ON CONFLICT (code_hash) DO UPDATE SET used_by = excluded.used_by, used_at = excluded.used_at",
        )?
        .execute(params![x.code_hash, x.owner.0, x.expires_at.0, x.used_by.as_ref().map(|m| &m.0), x.used_at.map(|t| t.0)])?;
    }
    Ok(())
}

/// Writes the accounts and budgets a batch touched.
fn write_balances(conn: &Connection, c: &Changes) -> rusqlite::Result<()> {
    for a in &c.upsert_accounts {
        conn.prepare_cached(
            "INSERT INTO accounts VALUES (?1, ?2, ?3, ?4, ?5) ON CONFLICT (id) DO UPDATE SET
             debits_posted = excluded.debits_posted, credits_posted = excluded.credits_posted, debits_pending = excluded.debits_pending",
        )?
        .execute(params![a.id.0, a.allow_negative, i(a.debits_posted), i(a.credits_posted), i(a.debits_pending)])?;
    }
    for b in &c.upsert_budgets {
        conn.prepare_cached(
            "INSERT INTO budgets VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7) ON CONFLICT (agent) DO UPDATE SET
             per_call_max = excluded.per_call_max, per_day_max = excluded.per_day_max, total_max = excluded.total_max,
             spent_total = excluded.spent_total, day = excluded.day, spent_day = excluded.spent_day",
        )?
        .execute(params![
            b.agent.0,
            i(b.per_call_max.0),
            i(b.per_day_max.0),
            i(b.total_max.0),
            i(b.spent_total.0),
            b.day,
            i(b.spent_day.0)
        ])?;
    }
    Ok(())
}

/// Writes new holds, and holds resolving (each once: only a pending hold changes, and `holds_resolve_once` refuses
/// any change to a resolved one in the database itself).
fn write_holds(conn: &Connection, names: &mut Names, c: &Changes) -> rusqlite::Result<()> {
    for h in &c.insert_holds {
        let account = names.number(conn, &h.account.0)?;
        conn.prepare_cached("INSERT INTO hold_rows VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)")?.execute(params![
            h.id.0,
            account,
            i(h.amount.0),
            h.created_at.0,
            h.expires_at.0,
            h.state.as_str(),
            i(h.posted_amount.0),
            h.resolved_at.map(|t| t.0)
        ])?;
    }
    for h in &c.resolve_holds {
        let at = h.resolved_at.expect("resolved holds carry a time").0;
        let changed = conn
            .prepare_cached(
                "UPDATE hold_rows SET state = ?2, posted_amount = ?3, resolved_at = ?4 WHERE id = ?1 AND state = 'pending'",
            )?
            .execute(params![h.id.0, h.state.as_str(), i(h.posted_amount.0), at])?;
        if changed != 1 {
            return Err(refused(format!("hold {} is not pending", h.id)));
        }
    }
    Ok(())
}

/// Writes tokens, settlements and transfers.
fn write_payments(conn: &Connection, names: &mut Names, c: &Changes) -> rusqlite::Result<()> {
    for t in &c.insert_tokens {
        // A token's hold is `hold_` and its id, and is not stored (migration 0012).
        if t.hold != bazaar_core::pay::hold_id_for(&t.jti) {
            return Err(refused(format!("token {}'s hold {} is not hold_ and its id", t.jti, t.hold)));
        }
        let (buyer, merchant) = (names.number(conn, &t.buyer.0)?, names.number(conn, &t.merchant.0)?);
        conn.prepare_cached("INSERT INTO token_rows VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)")?.execute(params![
            t.jti.0,
            buyer,
            merchant,
            i(t.max_amount.0),
            t.order_id.0,
            t.resource,
            t.issued_at.0,
            t.expires_at.0
        ])?;
    }
    for s in &c.insert_settlements {
        let (buyer, merchant) = (names.number(conn, &s.buyer.0)?, names.number(conn, &s.merchant.0)?);
        // A settlement's id is stored only when it is not `stl_` and its token's.
        let id = (s.id != Settlement::id_for(&s.jti)).then_some(s.id.as_str());
        conn.prepare_cached("INSERT INTO settlement_rows VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)")?.execute(
            params![s.jti.0, id, buyer, merchant, s.order_id.0, i(s.amount.0), i(s.fee.0), i(s.net.0), s.settled_at.0],
        )?;
    }
    for t in &c.insert_transfers {
        let (debit, credit) = (names.number(conn, &t.debit.0)?, names.number(conn, &t.credit.0)?);
        let (by, on_behalf_of) = (names.number(conn, &t.authored_by.0)?, names.number(conn, &t.on_behalf_of.0)?);
        conn.prepare_cached(
            "INSERT INTO transfer_rows (id, debit, credit, amount, kind, hold, link, authored_by, on_behalf_of, at)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)",
        )?
        .execute(params![
            t.id.0,
            debit,
            credit,
            i(t.amount.0),
            t.kind.as_str(),
            t.hold.as_ref().map(|h| &h.0),
            t.link,
            by,
            on_behalf_of,
            t.at.0
        ])?;
    }
    Ok(())
}

/// Writes idempotency records, documents, blobs, and the events with the chain head.
fn write_records(conn: &Connection, names: &mut Names, c: &Changes) -> rusqlite::Result<()> {
    for r in &c.insert_idem {
        let sql = "INSERT INTO idempotency (scope, key, fingerprint, outcome, created_at, receipt_tag) \
            VALUES (?1, ?2, ?3, ?4, ?5, ?6)";
        conn.prepare_cached(sql)?.execute(params![r.scope, r.key, r.fingerprint, r.outcome, r.created_at.0, r.tag])?;
    }
    for d in &c.insert_docs {
        let body = serde_json::to_string(&d.body).map_err(|e| rusqlite::Error::ToSqlConversionFailure(e.into()))?;
        conn.prepare_cached("INSERT INTO docs VALUES (?1, ?2, ?3, ?4, ?5)")?.execute(params![
            d.kind.as_str(),
            d.id,
            body,
            d.due_at.map(|t| t.0),
            parties_json(d)
        ])?;
        let parties: std::collections::BTreeSet<&str> = d.parties.iter().map(|p| p.0.as_str()).collect();
        for party in parties {
            conn.prepare_cached("INSERT INTO doc_parties VALUES (?1, ?2, ?3)")?.execute(params![
                d.kind.as_str(),
                party,
                d.id
            ])?;
        }
    }
    for d in &c.update_docs {
        let body = serde_json::to_string(&d.body).map_err(|e| rusqlite::Error::ToSqlConversionFailure(e.into()))?;
        let changed = conn
            .prepare_cached("UPDATE docs SET body = ?3, due_at = ?4 WHERE kind = ?1 AND id = ?2")?
            .execute(params![d.kind.as_str(), d.id, body, d.due_at.map(|t| t.0)])?;
        if changed != 1 {
            return Err(refused(format!("{} {} is not stored", d.kind.as_str(), d.id)));
        }
    }
    for b in &c.insert_blobs {
        let parties =
            serde_json::to_string(&b.parties).map_err(|e| rusqlite::Error::ToSqlConversionFailure(e.into()))?;
        conn.prepare_cached("INSERT INTO blobs VALUES (?1, ?2, ?3, ?4, ?5, ?6)")?.execute(params![
            b.sha256,
            b.content_type,
            b.bytes.len() as i64,
            b.bytes,
            parties,
            b.created_at.0
        ])?;
    }
    for e in &c.insert_events {
        // `prev_hash` is the hash of the event before and is not stored (migration 0012).
        let hash = packed::hash_bytes(&e.hash).ok_or_else(|| refused(format!("event {}'s hash", e.seq)))?;
        let kind = names.number(conn, &e.kind)?;
        let (by, on_behalf_of) = (names.number(conn, &e.authored_by.0)?, names.number(conn, &e.on_behalf_of.0)?);
        conn.prepare_cached("INSERT INTO event_rows VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)")?.execute(params![
            i(e.seq),
            &hash[..],
            kind,
            packed::pack_body(&e.body.to_string()),
            by,
            on_behalf_of,
            e.at.0
        ])?;
    }
    if let Some(last) = c.insert_events.last() {
        conn.prepare_cached("UPDATE chain_head SET seq = ?1, hash = ?2 WHERE id = 1")?
            .execute(params![i(last.seq), last.hash])?;
    }
    Ok(())
}

//! The read path: one filter as one SQL statement, as the SQLite engine's
//! `select` builds it, with lists bound as arrays (`= ANY($n)`). With a tag
//! filter the query is driven from the tag index (in time order per value),
//! else from the events table; newest first, ties by lowest id (BYTEA
//! compares bytewise, as SQLite blobs do).

use bazaar_relay::store::{unavailable, Result};
use bazaar_relay::{EventId, Filter, Hex32};
use tokio_postgres::types::ToSql;

use crate::connection::{big, col, unsigned, Connection};

type Param = Box<dyn ToSql + Sync>;

/// A statement being built and the values its `$n` placeholders stand for.
#[derive(Default)]
struct Select {
    sql: String,
    params: Vec<Param>,
}

impl Select {
    /// Binds `value` and says its placeholder.
    fn bind(&mut self, value: impl ToSql + Sync + 'static) -> String {
        self.params.push(Box::new(value));
        format!("${}", self.params.len())
    }

    /// Appends `clause`, in which `{}` is replaced by `value`'s placeholder.
    fn and(&mut self, clause: &str, value: impl ToSql + Sync + 'static) {
        let placeholder = self.bind(value);
        self.sql.push_str(&clause.replace("{}", &placeholder));
    }
}

fn tag_values(values: &[String]) -> Vec<Vec<u8>> {
    values.iter().map(|value| value.as_bytes().to_vec()).collect()
}

/// One filter as SQL. With several values for the first tag, one event may
/// meet the tag index more than once: `DISTINCT ON` answers it once, so the
/// limit counts events, not index rows.
fn select(filter: &Filter, now: u64, limit: usize) -> Select {
    let mut select = Select::default();
    let time_column = if let Some((letter, values)) = filter.tags.first() {
        let name = select.bind(letter.to_string());
        let values = select.bind(tag_values(values));
        select.sql = format!(
            "SELECT DISTINCT ON (t.created_at, e.id) e.created_at, e.id, e.json \
             FROM relay_tags t JOIN relay_events e ON e.seq = t.event_seq \
             WHERE t.name = {name} AND t.value = ANY({values})"
        );
        "t.created_at"
    } else {
        select.sql = "SELECT e.created_at, e.id, e.json FROM relay_events e WHERE TRUE".to_string();
        "e.created_at"
    };
    select.and(" AND (e.expires_at IS NULL OR e.expires_at > {})", big(now));
    if let Some(ids) = &filter.ids {
        select.and(" AND e.id = ANY({})", ids.iter().map(|id| id.0.to_vec()).collect::<Vec<_>>());
    }
    if let Some(authors) = &filter.authors {
        select.and(" AND e.pubkey = ANY({})", authors.iter().map(|key| key.0.to_vec()).collect::<Vec<_>>());
    }
    if let Some(kinds) = &filter.kinds {
        select.and(" AND e.kind = ANY({})", kinds.iter().map(|kind| i32::from(*kind)).collect::<Vec<_>>());
    }
    if let Some(since) = filter.since {
        select.and(&format!(" AND {time_column} >= {{}}"), big(since));
    }
    if let Some(until) = filter.until {
        select.and(&format!(" AND {time_column} <= {{}}"), big(until));
    }
    for (letter, values) in filter.tags.iter().skip(1) {
        let name = select.bind(letter.to_string());
        let values = select.bind(tag_values(values));
        select.sql.push_str(&format!(
            " AND EXISTS (SELECT 1 FROM relay_tags x WHERE x.event_seq = e.seq AND x.name = {name} AND x.value = ANY({values}))"
        ));
    }
    let limit = select.bind(big(limit as u64));
    select.sql.push_str(&format!(" ORDER BY {time_column} DESC, e.id LIMIT {limit}"));
    select
}

/// The stored, unexpired events one filter matches, up to its limit: (created_at, id, json).
pub(crate) fn run_filter(connection: &Connection, filter: &Filter, now: u64) -> Result<Vec<(u64, EventId, String)>> {
    if filter.is_empty_set() || filter.limit() == 0 {
        return Ok(Vec::new());
    }
    let select = select(filter, now, filter.limit());
    let params: Vec<&(dyn ToSql + Sync)> = select.params.iter().map(|param| param.as_ref()).collect();
    let rows = connection.query(&select.sql, &params)?;
    rows.iter()
        .map(|row| {
            let id: Vec<u8> = col(row, 1)?;
            let id = Hex32(id.try_into().map_err(|_| unavailable("a stored id is not 32 bytes"))?);
            Ok((unsigned(col(row, 0)?), id, col(row, 2)?))
        })
        .collect()
}

//! A blocking face on one tokio-postgres transaction: each statement is run on
//! the store's private runtime, so the engine's code reads like the SQLite one.

use bazaar_conversation::ConversationError;
use tokio::runtime::Runtime;
use tokio_postgres::types::{FromSql, ToSql};
use tokio_postgres::{Row, Transaction};

pub(crate) type Result<T> = std::result::Result<T, ConversationError>;
pub(crate) type Params<'p> = &'p [&'p (dyn ToSql + Sync)];

/// Every failure of the database itself: the edge reports it as `unavailable`.
pub(crate) fn unavailable(error: impl std::fmt::Display) -> ConversationError {
    ConversationError::Unavailable(error.to_string())
}

/// One open transaction and the runtime that drives its connection.
pub struct Tx<'a> {
    pub(crate) runtime: &'a Runtime,
    pub(crate) inner: Transaction<'a>,
}

impl Tx<'_> {
    pub(crate) fn query(&self, sql: &str, params: Params<'_>) -> Result<Vec<Row>> {
        self.runtime.block_on(self.inner.query(sql, params)).map_err(unavailable)
    }

    pub(crate) fn query_opt(&self, sql: &str, params: Params<'_>) -> Result<Option<Row>> {
        self.runtime.block_on(self.inner.query_opt(sql, params)).map_err(unavailable)
    }

    pub(crate) fn query_one(&self, sql: &str, params: Params<'_>) -> Result<Row> {
        self.runtime.block_on(self.inner.query_one(sql, params)).map_err(unavailable)
    }

    pub(crate) fn execute(&self, sql: &str, params: Params<'_>) -> Result<u64> {
        self.runtime.block_on(self.inner.execute(sql, params)).map_err(unavailable)
    }

    pub(crate) fn commit(self) -> Result<()> {
        self.runtime.block_on(self.inner.commit()).map_err(unavailable)
    }

    /// Best effort: a failed rollback leaves the connection to end the transaction.
    pub(crate) fn rollback(self) {
        let _ = self.runtime.block_on(self.inner.rollback());
    }
}

/// Column `index` of `row`, or `unavailable` when its type is not the expected one.
pub(crate) fn col<'r, T: FromSql<'r>>(row: &'r Row, index: usize) -> Result<T> {
    row.try_get(index).map_err(unavailable)
}

/// A `seq` or `position` from a `BIGINT` column the schema keeps non-negative.
pub(crate) fn count(row: &Row, index: usize) -> Result<u64> {
    let value: i64 = col(row, index)?;
    u64::try_from(value).map_err(|_| unavailable(format!("negative counter {value} in column {index}")))
}

/// A `seq`, `position` or limit as a `BIGINT` parameter; past `i64::MAX` it
/// saturates, which no stored counter reaches, so comparisons stay right.
pub(crate) fn big(value: u64) -> i64 {
    i64::try_from(value).unwrap_or(i64::MAX)
}

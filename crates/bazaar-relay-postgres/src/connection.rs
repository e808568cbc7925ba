//! One PostgreSQL connection with the current-thread Tokio runtime that drives
//! it, and a blocking face on its transactions, so the engine's code reads
//! like the SQLite one. Each connection has a runtime of its own: the writer
//! and the readers never wait on each other's runtime, only on the database.

use bazaar_pg::Database;
use bazaar_relay::store::{unavailable, Result};
use tokio::runtime::Runtime;
use tokio_postgres::types::{FromSql, ToSql};
use tokio_postgres::{Client, Row, Statement, ToStatement, Transaction};

pub(crate) type Params<'p> = &'p [&'p (dyn ToSql + Sync)];

/// An open connection; dropping it drops its runtime, which closes the socket.
pub(crate) struct Connection {
    runtime: Runtime,
    client: Client,
}

impl Connection {
    /// Brings the relay's schema up to date on this connection (`bazaar_pg::Migrations::run`).
    pub(crate) fn migrate(&mut self, plan: &bazaar_pg::Migrations) -> Result<()> {
        self.runtime.block_on(plan.run(&mut self.client)).map(|_| ()).map_err(unavailable)
    }

    pub(crate) fn open(database: &Database) -> Result<Connection> {
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().map_err(unavailable)?;
        let (client, connection) = runtime.block_on(database.connect()).map_err(unavailable)?;
        // A broken connection surfaces as an error on the next statement, and as `is_closed`.
        runtime.spawn(connection);
        Ok(Connection { runtime, client })
    }

    /// Whether the server or the network ended the connection (it is then replaced).
    pub(crate) fn is_closed(&self) -> bool {
        self.client.is_closed()
    }

    pub(crate) fn prepare(&self, sql: &str) -> Result<Statement> {
        self.runtime.block_on(self.client.prepare(sql)).map_err(unavailable)
    }

    /// One statement outside any transaction (reads: each sees its own snapshot).
    pub(crate) fn query(&self, sql: &str, params: Params<'_>) -> Result<Vec<Row>> {
        self.runtime.block_on(self.client.query(sql, params)).map_err(unavailable)
    }

    pub(crate) fn query_opt(&self, sql: &str, params: Params<'_>) -> Result<Option<Row>> {
        self.runtime.block_on(self.client.query_opt(sql, params)).map_err(unavailable)
    }

    /// A read-committed transaction: each statement sees what committed before it began.
    pub(crate) fn transaction(&mut self) -> Result<Tx<'_>> {
        let inner = self.runtime.block_on(self.client.transaction()).map_err(unavailable)?;
        Ok(Tx { runtime: &self.runtime, inner })
    }
}

/// One open transaction and the runtime that drives its connection.
pub(crate) struct Tx<'a> {
    runtime: &'a Runtime,
    inner: Transaction<'a>,
}

impl Tx<'_> {
    pub(crate) fn query<S: ?Sized + ToStatement>(&self, statement: &S, params: Params<'_>) -> Result<Vec<Row>> {
        self.runtime.block_on(self.inner.query(statement, params)).map_err(unavailable)
    }

    pub(crate) fn query_one<S: ?Sized + ToStatement>(&self, statement: &S, params: Params<'_>) -> Result<Row> {
        self.runtime.block_on(self.inner.query_one(statement, params)).map_err(unavailable)
    }

    pub(crate) fn query_opt<S: ?Sized + ToStatement>(&self, statement: &S, params: Params<'_>) -> Result<Option<Row>> {
        self.runtime.block_on(self.inner.query_opt(statement, params)).map_err(unavailable)
    }

    pub(crate) fn execute<S: ?Sized + ToStatement>(&self, statement: &S, params: Params<'_>) -> Result<u64> {
        self.runtime.block_on(self.inner.execute(statement, params)).map_err(unavailable)
    }

    pub(crate) fn commit(self) -> Result<()> {
        self.runtime.block_on(self.inner.commit()).map_err(unavailable)
    }

    /// Best effort: a failed rollback leaves the server to end the transaction.
    pub(crate) fn rollback(self) {
        let _ = self.runtime.block_on(self.inner.rollback());
    }

    /// Commits when `outcome` is a value, rolls back when it is an error.
    pub(crate) fn finish<T>(self, outcome: Result<T>) -> Result<T> {
        match outcome {
            Ok(value) => self.commit().map(|()| value),
            Err(error) => {
                self.rollback();
                Err(error)
            }
        }
    }
}

/// Column `index` of `row`, or `unavailable` when its type is not the expected one.
pub(crate) fn col<'r, T: FromSql<'r>>(row: &'r Row, index: usize) -> Result<T> {
    row.try_get(index).map_err(unavailable)
}

/// A time or bound (unix seconds, or a count) as a `BIGINT`; past `i64::MAX`
/// it saturates (admission keeps `created_at` near now; an `expiration` tag may
/// say anything), so comparisons stay right.
pub(crate) fn big(value: u64) -> i64 {
    i64::try_from(value).unwrap_or(i64::MAX)
}

/// A `BIGINT` time the engine wrote from a `u64`, back.
pub(crate) fn unsigned(value: i64) -> u64 {
    u64::try_from(value).unwrap_or(0)
}

//! One migration runner for every PostgreSQL plane (the ledger, the conversation plane, the relay): a
//! plane's numbered SQL files, applied once each and in order, recorded in the plane's own table, all in
//! one transaction holding the plane's advisory lock, so nodes starting together do not race — the second
//! waits for the first, then finds nothing left to do — and a process that dies half way leaves nothing
//! applied (the lock is transaction-scoped, released by COMMIT, ROLLBACK or the connection's end).
//!
//! Never edit a landed file; add a new one. Each runs inside the migration transaction, so none may need
//! to run outside one (no `CREATE INDEX CONCURRENTLY`).

use tokio_postgres::Client;

/// A plane's migrations.
#[derive(Clone, Copy, Debug)]
pub struct Migrations {
    /// The table that records applied files, one per plane (`schema_migrations` for the ledger). A constant
    /// of the plane's code, never input: it is spelled into the SQL.
    pub table: &'static str,
    /// The advisory lock key taken while migrating, one per plane.
    pub lock_key: i64,
    /// `(name, sql)`, in the order they apply.
    pub files: &'static [(&'static str, &'static str)],
}

impl Migrations {
    /// Applies every file not yet recorded, in one transaction; answers the names applied now.
    pub async fn run(&self, client: &mut Client) -> Result<Vec<&'static str>, tokio_postgres::Error> {
        assert!(
            !self.table.is_empty() && self.table.bytes().all(|b| b.is_ascii_lowercase() || b == b'_'),
            "a migration table is a plain lower-case name"
        );
        let table = self.table;
        let tx = client.transaction().await?;
        tx.execute("SELECT pg_advisory_xact_lock($1)", &[&self.lock_key]).await?;
        tx.batch_execute(&format!(
            "CREATE TABLE IF NOT EXISTS {table} (name TEXT PRIMARY KEY, applied_at BIGINT NOT NULL)"
        ))
        .await?;
        let mut applied = Vec::new();
        for (name, sql) in self.files {
            if tx.query_opt(&format!("SELECT 1 FROM {table} WHERE name = $1"), &[name]).await?.is_some() {
                continue;
            }
            tx.batch_execute(sql).await?;
            tx.execute(
                &format!("INSERT INTO {table} (name, applied_at) VALUES ($1, extract(epoch FROM now())::bigint)"),
                &[name],
            )
            .await?;
            tracing::info!(table, migration = name, "applied migration");
            applied.push(*name);
        }
        tx.commit().await?;
        Ok(applied)
    }
}

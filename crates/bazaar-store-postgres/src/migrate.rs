//! Schema migrations: the numbered files in `migrations/`, applied once each
//! and recorded in `schema_migrations`, all in one transaction holding an
//! advisory lock so nodes starting together do not race.

use crate::{connect_client, pg_error};
use bazaar_pg::Database;
use bazaar_store::StoreError;

/// Migrations, in order. Never edit a landed one; add a new file.
/// Each runs inside the migration transaction, so none may need to run
/// outside one (no `CREATE INDEX CONCURRENTLY`).
const MIGRATIONS: &[(&str, &str)] = &[
    ("0001_foundation", include_str!("../migrations/0001_foundation.sql")),
    ("0002_idempotency_created_at", include_str!("../migrations/0002_idempotency_created_at.sql")),
    ("0003_holds_resolve_once", include_str!("../migrations/0003_holds_resolve_once.sql")),
    ("0004_events_hash_not_unique", include_str!("../migrations/0004_events_hash_not_unique.sql")),
    ("0005_documents", include_str!("../migrations/0005_documents.sql")),
    ("0006_market", include_str!("../migrations/0006_market.sql")),
    ("0007_blobs", include_str!("../migrations/0007_blobs.sql")),
    ("0008_credential_scopes", include_str!("../migrations/0008_credential_scopes.sql")),
    ("0009_members_by_owner", include_str!("../migrations/0009_members_by_owner.sql")),
    ("0010_settle_keys_name_the_token", include_str!("../migrations/0010_settle_keys_name_the_token.sql")),
    ("0011_fold_snapshots", include_str!("../migrations/0011_fold_snapshots.sql")),
    ("0012_sequencer", include_str!("../migrations/0012_sequencer.sql")),
    ("0013_compact_ledger_rows", include_str!("../migrations/0013_compact_ledger_rows.sql")),
    ("0014_receipt_tags", include_str!("../migrations/0014_receipt_tags.sql")),
];

/// The advisory lock key every node takes while migrating ("bazaar" then 1).
const MIGRATION_LOCK_KEY: i64 = 0x6261_7a61_6172_0001;
/// `application_name` of the migration connection.
const MIGRATION_APPLICATION_NAME: &str = "bazaar-migrate";

/// Applies every migration not yet recorded. Safe to run from several nodes
/// at once: the second waits for the first, then finds nothing left to do.
pub async fn run(database: &Database) -> Result<(), StoreError> {
    let mut client = connect_client(database, MIGRATION_APPLICATION_NAME).await?;
    let tx = client.transaction().await.map_err(pg_error)?;
    // Transaction-scoped: released by COMMIT or ROLLBACK, even if this
    // process dies half way.
    tx.execute("SELECT pg_advisory_xact_lock($1)", &[&MIGRATION_LOCK_KEY]).await.map_err(pg_error)?;
    tx.batch_execute(
        "CREATE TABLE IF NOT EXISTS schema_migrations (name TEXT PRIMARY KEY, applied_at BIGINT NOT NULL)",
    )
    .await
    .map_err(pg_error)?;
    for (name, sql) in MIGRATIONS {
        let done =
            tx.query_opt("SELECT 1 FROM schema_migrations WHERE name = $1", &[name]).await.map_err(pg_error)?.is_some();
        if done {
            continue;
        }
        tx.batch_execute(sql).await.map_err(pg_error)?;
        tx.execute(
            "INSERT INTO schema_migrations (name, applied_at) VALUES ($1, extract(epoch FROM now())::bigint)",
            &[name],
        )
        .await
        .map_err(pg_error)?;
        tracing::info!(migration = name, "applied migration");
    }
    tx.commit().await.map_err(pg_error)
}

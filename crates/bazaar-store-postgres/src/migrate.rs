//! The ledger's schema migrations: the numbered files in `migrations/`, recorded in `schema_migrations`,
//! applied by the runner every PostgreSQL plane shares (`bazaar_pg::Migrations`).

use crate::{connect_client, pg_error};
use bazaar_pg::{Database, Migrations};
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
    let plan = Migrations { table: "schema_migrations", lock_key: MIGRATION_LOCK_KEY, files: MIGRATIONS };
    plan.run(&mut client).await.map(|_| ()).map_err(pg_error)
}

//! Leases in PostgreSQL: one row per named piece of work, held by one node
//! until its `expires_at` (the database's clock) passes without a renewal.
//! A node that lost its connection holds nothing until it reconnects.

use std::time::Duration;
use tokio::sync::Mutex;
use tokio_postgres::Client;

/// `application_name` of the lease connection, as `pg_stat_activity` shows it.
const APPLICATION_NAME: &str = "bazaar-leases";
/// The advisory lock taken while creating the table, so nodes starting together do not race.
const SCHEMA_LOCK_KEY: i64 = 0x6261_7a61_6172_0002;

const SCHEMA: &str = "CREATE TABLE IF NOT EXISTS bazaar_leases (
    name TEXT PRIMARY KEY,
    holder TEXT NOT NULL,
    expires_at TIMESTAMPTZ NOT NULL
)";

/// Takes the lease if it is free, expired or already ours, and (re)sets its expiry.
const HOLD: &str = "INSERT INTO bazaar_leases (name, holder, expires_at)
    VALUES ($1, $2, now() + make_interval(secs => $3))
    ON CONFLICT (name) DO UPDATE SET holder = EXCLUDED.holder, expires_at = EXCLUDED.expires_at
    WHERE bazaar_leases.holder = EXCLUDED.holder OR bazaar_leases.expires_at < now()
    RETURNING holder";

pub(crate) struct Leases {
    url: String,
    node: String,
    client: Mutex<Option<Client>>,
}

async fn connect(url: &str) -> Result<Client, String> {
    // The same URL, TLS modes included, as the stores use (`bazaar-pg`).
    let mut database = bazaar_pg::Database::from_url(url).map_err(|e| e.to_string())?;
    database.config_mut().application_name(APPLICATION_NAME);
    let (client, connection) = database.connect().await.map_err(|e| e.to_string())?;
    tokio::spawn(connection);
    Ok(client)
}

impl Leases {
    pub(crate) async fn open(url: &str, node: &str) -> Result<Leases, String> {
        let mut client = connect(url).await?;
        let tx = client.transaction().await.map_err(|e| e.to_string())?;
        tx.execute("SELECT pg_advisory_xact_lock($1)", &[&SCHEMA_LOCK_KEY]).await.map_err(|e| e.to_string())?;
        tx.batch_execute(SCHEMA).await.map_err(|e| e.to_string())?;
        tx.commit().await.map_err(|e| e.to_string())?;
        Ok(Leases { url: url.into(), node: node.into(), client: Mutex::new(Some(client)) })
    }

    /// Whether this node holds `name` for the next `ttl`.
    pub(crate) async fn hold(&self, name: &str, ttl: Duration) -> bool {
        let mut client = self.client.lock().await;
        if client.as_ref().is_none_or(Client::is_closed) {
            match connect(&self.url).await {
                Ok(fresh) => *client = Some(fresh),
                Err(error) => {
                    tracing::warn!(%error, "reconnecting the lease connection; holding no lease meanwhile");
                    *client = None;
                    return false;
                }
            }
        }
        let Some(connected) = client.as_ref() else { return false };
        let seconds = ttl.as_secs_f64();
        match connected.query_opt(HOLD, &[&name, &self.node, &seconds]).await {
            Ok(row) => row.is_some(),
            Err(error) => {
                tracing::warn!(%error, lease = name, "renewing a lease failed; not holding it");
                false
            }
        }
    }
}

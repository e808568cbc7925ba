//! The ledger's sequencer lease and the fence that enforces it
//! (docs/design/sequencer.md). One row, `ledger_sequencer`, names the node
//! whose writer may commit and the epoch it was granted; a takeover raises the
//! epoch and writes it into `chain_head` in the same transaction; the writer's
//! engine compares the two under the chain head's row lock before every batch.
//! Times are the database's clock, never a node's.

use crate::{connect_client, pg_error};
use bazaar_pg::Database;
use bazaar_store::StoreError;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::Mutex;
use tokio_postgres::Client;

/// `application_name` of the lease connection, as `pg_stat_activity` shows it.
const APPLICATION_NAME: &str = "bazaar-sequencer";
/// Longest a takeover waits for the chain head's lock: an old sequencer's open
/// batch ends within `IDLE_IN_TRANSACTION_MS` at the latest.
const TAKEOVER_LOCK_TIMEOUT_MS: u64 = crate::IDLE_IN_TRANSACTION_MS + 2_000;

/// The epoch this node's writer may commit at; 0 while it may commit nothing.
/// Cheap to clone: every clone is the same cell.
#[derive(Clone, Default, Debug)]
pub struct Fence(Arc<AtomicI64>);

impl Fence {
    /// The epoch held, if this node is the sequencer.
    pub fn epoch(&self) -> Option<i64> {
        Some(self.0.load(Ordering::SeqCst)).filter(|epoch| *epoch > 0)
    }

    /// Whether a batch may commit over a chain head carrying `stored`.
    pub(crate) fn check(&self, stored: i64) -> Result<(), StoreError> {
        match self.epoch() {
            None => Err(StoreError::Fenced("this node holds no sequencer lease".into())),
            Some(held) if held != stored => {
                Err(StoreError::Fenced(format!("epoch {held} was superseded by epoch {stored}")))
            }
            Some(_) => Ok(()),
        }
    }

    fn set(&self, epoch: i64) {
        self.0.store(epoch, Ordering::SeqCst);
    }

    fn clear(&self) {
        self.0.store(0, Ordering::SeqCst);
    }
}

/// Where this node stands after one round of [`SequencerLease::hold`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Standing {
    /// This node's writer commits, at `epoch`.
    Leading { epoch: i64 },
    /// Another node holds the lease (or it is free and was just missed).
    Following { holder: Option<String>, epoch: i64 },
}

/// The lease as one node sees it: its own connection, its name and its fence.
pub struct SequencerLease {
    database: Database,
    node: String,
    cluster: String,
    fence: Fence,
    client: Mutex<Option<Client>>,
}

const RENEW: &str = "UPDATE ledger_sequencer SET expires_at = clock_timestamp() + make_interval(secs => $3) \
    WHERE id = 1 AND holder = $1 AND epoch = $2 AND expires_at >= clock_timestamp() RETURNING epoch";
/// Free, lapsed, or still recorded as this very process's (a renewal that timed out here may have landed
/// there): taken at the next epoch, which fences any batch of an earlier one.
const TAKE: &str = "UPDATE ledger_sequencer \
    SET holder = $1, epoch = epoch + 1, expires_at = clock_timestamp() + make_interval(secs => $2) \
    WHERE id = 1 AND (expires_at < clock_timestamp() OR holder = $1) RETURNING epoch";
/// The lease's expiry restarts once the chain head is fenced, however long that waited.
const TAKEN: &str = "UPDATE ledger_sequencer SET expires_at = clock_timestamp() + make_interval(secs => $2) \
    WHERE id = 1 AND epoch = $1";
const FENCE_CHAIN: &str = "UPDATE chain_head SET epoch = $1 WHERE id = 1";
const WHO: &str = "SELECT holder, epoch FROM ledger_sequencer WHERE id = 1";
const RELEASE: &str =
    "UPDATE ledger_sequencer SET expires_at = '-infinity' WHERE id = 1 AND holder = $1 AND epoch = $2";

/// `node` and a value no other lease of this or another process has: the standard library's randomly
/// keyed hasher (its keys come from the operating system) over the process id and a count of leases opened.
fn holder_name(node: &str) -> String {
    use std::hash::BuildHasher;
    static OPENED: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let nonce = std::collections::hash_map::RandomState::new()
        .hash_one((std::process::id(), OPENED.fetch_add(1, Ordering::Relaxed)));
    format!("{node}#{nonce:016x}")
}

async fn connect(database: &Database) -> Result<Client, StoreError> {
    let client = connect_client(database, APPLICATION_NAME).await?;
    client.batch_execute(&format!("SET lock_timeout = '{TAKEOVER_LOCK_TIMEOUT_MS}ms'")).await.map_err(pg_error)?;
    Ok(client)
}

impl SequencerLease {
    pub(crate) async fn open(database: Database, node: &str, fence: Fence) -> Result<SequencerLease, StoreError> {
        let client = connect(&database).await?;
        let row = client.query_one("SELECT cluster FROM ledger_sequencer WHERE id = 1", &[]).await.map_err(pg_error)?;
        let cluster: String = crate::rows::get(&row, 0)?;
        let holder = holder_name(node);
        Ok(SequencerLease { database, node: holder, cluster, fence, client: Mutex::new(Some(client)) })
    }

    /// A random name for this registry's ledger, the same on every node sharing the database.
    pub fn cluster(&self) -> &str {
        &self.cluster
    }

    /// This process's name in the lease row: `<node>#<nonce>`, so two processes started with one
    /// `--node-id` never both renew one epoch.
    pub fn node(&self) -> &str {
        &self.node
    }

    /// The epoch this node's writer commits at, if it is the sequencer.
    pub fn epoch(&self) -> Option<i64> {
        self.fence.epoch()
    }

    /// Renews the lease if this node holds it, else takes it if it has
    /// expired, for `ttl` by the database's clock. On any error this node
    /// holds nothing (its writer refuses every batch) until a later round.
    pub async fn hold(&self, ttl: Duration) -> Result<Standing, StoreError> {
        let result = self.round(ttl).await;
        if !matches!(result, Ok(Standing::Leading { .. })) {
            self.fence.clear();
        }
        result
    }

    async fn round(&self, ttl: Duration) -> Result<Standing, StoreError> {
        let mut slot = self.client.lock().await;
        if slot.as_ref().is_none_or(Client::is_closed) {
            *slot = None;
            *slot = Some(connect(&self.database).await?);
        }
        let client = slot.as_mut().expect("connected above");
        let seconds = ttl.as_secs_f64();
        if let Some(epoch) = self.fence.epoch() {
            if client.query_opt(RENEW, &[&self.node, &epoch, &seconds]).await.map_err(pg_error)?.is_some() {
                return Ok(Standing::Leading { epoch });
            }
            // Lost: expired, or taken. Stop committing before anything else.
            self.fence.clear();
            tracing::warn!(node = %self.node, epoch, "the sequencer lease was lost");
        }
        let tx = client.transaction().await.map_err(pg_error)?;
        let Some(row) = tx.query_opt(TAKE, &[&self.node, &seconds]).await.map_err(pg_error)? else {
            let row = tx.query_one(WHO, &[]).await.map_err(pg_error)?;
            return Ok(Standing::Following { holder: row.get(0), epoch: row.get(1) });
        };
        let epoch: i64 = row.get(0);
        // Waits for any batch the old sequencer has open; after this no batch of an earlier epoch commits.
        tx.execute(FENCE_CHAIN, &[&epoch]).await.map_err(pg_error)?;
        tx.execute(TAKEN, &[&epoch, &seconds]).await.map_err(pg_error)?;
        tx.commit().await.map_err(pg_error)?;
        self.fence.set(epoch);
        tracing::info!(node = %self.node, epoch, "this node is the ledger's sequencer");
        Ok(Standing::Leading { epoch })
    }

    /// Stops committing at once (the caller saw the lease lapse by its own clock).
    pub fn step_down(&self) {
        self.fence.clear();
    }

    /// Gives the lease up on a clean shutdown, so the next node need not wait for it to expire.
    pub async fn release(&self) {
        let Some(epoch) = self.fence.epoch() else { return };
        self.fence.clear();
        let slot = self.client.lock().await;
        if let Some(client) = slot.as_ref() {
            if let Err(error) = client.execute(RELEASE, &[&self.node, &epoch]).await {
                tracing::warn!(%error, "releasing the sequencer lease; it expires by itself");
            }
        }
    }
}

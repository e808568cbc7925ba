//! The write path: one batch in one read-committed transaction, each event
//! taken in order exactly as the SQLite engine's `write_one` takes it, and the
//! purge. Statements are prepared once per writer connection.
//!
//! Sequencing. In one process, writes come one at a time through the
//! writer's mutex. Across nodes sharing the database, a batch first takes
//! transaction-scoped advisory locks: the writers' lock shared, then every
//! key it may read or change (each event's id, each replaceable or
//! addressable address, and each deletion's targets) exclusive, sorted, so
//! two batches touching one key run one after the other and never deadlock;
//! read committed then lets the later one see the earlier one's rows. A batch
//! with more than [`KEYS_MAX`] keys, and every purge chunk, takes the writers'
//! lock exclusive instead (PostgreSQL's lock table is shared and bounded), and
//! so runs alone. One crossing is not fully covered: a stored version removed
//! by its address (replaced, or deleted by `a`) and the same row deleted by
//! id are guarded by different keys, so two nodes crossing on two such rows
//! in opposite orders can deadlock; PostgreSQL detects it and fails one batch
//! whole (`Unavailable`, nothing half-written). The unique index on `id`
//! stays the last word: an insert that meets the same event committed by
//! another node does nothing and answers `Duplicate`, never an error.

use bazaar_relay::kind::{class, Class, DELETION};
use bazaar_relay::store::{deletion_targets, indexed_tags, is_job_request, replaces, unavailable, Result, Written};
use bazaar_relay::{Encoded, Event, EventId, Hex32, PublicKey};
use sha2::{Digest, Sha256};
use tokio_postgres::Statement;

use crate::connection::{big, col, unsigned, Connection, Tx};

/// Rows one purge transaction removes at most, so the writer is never held long.
pub(crate) const PURGE_CHUNK: u64 = 5_000;

/// What `write_one` needs to know of the store about one event, in one round
/// trip: whether its id is stored, whether it is tombstoned, whether its
/// address is covered by an `a` deletion, and the stored version of its
/// address. `$4` (the d column) is NULL for a regular event, so the last two
/// find nothing.
const STATE: &str = "
SELECT
    EXISTS (SELECT 1 FROM relay_events WHERE id = $1),
    EXISTS (SELECT 1 FROM relay_deleted WHERE id = $1 AND pubkey = $2),
    EXISTS (SELECT 1 FROM relay_deleted_addresses
            WHERE kind = $3 AND pubkey = $2 AND d_tag = $4 AND until >= $5),
    current.seq, current.id, current.created_at
FROM (SELECT 1) AS one
LEFT JOIN LATERAL (
    SELECT seq, id, created_at FROM relay_events
    WHERE pubkey = $2 AND kind = $3 AND d_tag = $4
    ORDER BY created_at DESC, id LIMIT 1
) AS current ON TRUE";

const INSERT_EVENT: &str = "
INSERT INTO relay_events (id, pubkey, created_at, kind, d_tag, expires_at, json)
VALUES ($1, $2, $3, $4, $5, $6, $7)
ON CONFLICT (id) DO NOTHING
RETURNING seq";

const INSERT_TAGS: &str = "
INSERT INTO relay_tags (name, value, created_at, event_seq)
SELECT name, value, $3, $4 FROM unnest($1::text[], $2::bytea[]) AS tag (name, value)
ON CONFLICT DO NOTHING";

/// Removes a stored version (its tags go with it: `ON DELETE CASCADE`).
const REMOVE: &str = "DELETE FROM relay_events WHERE seq = $1";

/// NIP-09 by id: removes the author's own targets (never a deletion) and tombstones every target.
const DELETE_IDS: &str = "
WITH removed AS (
    DELETE FROM relay_events WHERE id = ANY($1::bytea[]) AND pubkey = $2 AND kind <> $3
)
INSERT INTO relay_deleted (id, pubkey)
SELECT target, $2 FROM unnest($1::bytea[]) AS target
ON CONFLICT DO NOTHING";

/// NIP-09 by address: removes the author's versions created at or before the
/// deletion and remembers the newest such bound per address.
const DELETE_ADDRESSES: &str = "
WITH targets AS (
    SELECT DISTINCT kind, d FROM unnest($2::integer[], $3::bytea[]) AS target (kind, d)
), removed AS (
    DELETE FROM relay_events e USING targets t
    WHERE e.pubkey = $1 AND e.kind = t.kind AND e.d_tag = t.d AND e.created_at <= $4
)
INSERT INTO relay_deleted_addresses (kind, pubkey, d_tag, until)
SELECT kind, $1, d, $4 FROM targets
ON CONFLICT (kind, pubkey, d_tag)
DO UPDATE SET until = GREATEST(relay_deleted_addresses.until, EXCLUDED.until)";

/// The writers' lock, in the two-key advisory space so no one-key lock below
/// can be it: "baza", "r" then 0xD1.
const WRITERS_LOCK: (i32, i32) = (0x6261_7a61, 0x0072_00d1);
/// Most keys a batch locks one by one; past it the batch takes the writers' lock exclusive.
pub(crate) const KEYS_MAX: usize = 512;

const LOCK_WRITERS_SHARED: &str = "SELECT pg_advisory_xact_lock_shared($1, $2)";
const LOCK_WRITERS: &str = "SELECT pg_advisory_xact_lock($1, $2)";
/// One scan of the array, in its (sorted) order.
const LOCK_KEYS: &str = "SELECT pg_advisory_xact_lock(key) FROM unnest($1::bigint[]) AS key";

/// The writer's statements, prepared on its connection.
pub(crate) struct Statements {
    state: Statement,
    insert_event: Statement,
    insert_tags: Statement,
    remove: Statement,
    delete_ids: Statement,
    delete_addresses: Statement,
    lock_writers_shared: Statement,
    lock_writers: Statement,
    lock_keys: Statement,
}

impl Statements {
    pub(crate) fn prepare(connection: &Connection) -> Result<Statements> {
        Ok(Statements {
            state: connection.prepare(STATE)?,
            insert_event: connection.prepare(INSERT_EVENT)?,
            insert_tags: connection.prepare(INSERT_TAGS)?,
            remove: connection.prepare(REMOVE)?,
            delete_ids: connection.prepare(DELETE_IDS)?,
            delete_addresses: connection.prepare(DELETE_ADDRESSES)?,
            lock_writers_shared: connection.prepare(LOCK_WRITERS_SHARED)?,
            lock_writers: connection.prepare(LOCK_WRITERS)?,
            lock_keys: connection.prepare(LOCK_KEYS)?,
        })
    }
}

/// The d column: NULL for regular events, empty for replaceable ones, the d tag for addressable ones.
fn d_column(event: &Event) -> Option<&[u8]> {
    match class(event.kind) {
        Class::Replaceable => Some(b"".as_slice()),
        Class::Addressable => Some(event.d_tag().as_bytes()),
        Class::Regular | Class::Ephemeral => None,
    }
}

/// An advisory lock key for an event id: its first eight bytes (already a hash).
fn id_key(id: &EventId) -> i64 {
    let mut bytes = [0u8; 8];
    bytes.copy_from_slice(&id.0[..8]);
    i64::from_be_bytes(bytes)
}

/// An advisory lock key for an address (author, kind, d tag).
fn address_key(pubkey: &PublicKey, kind: u16, d: &[u8]) -> i64 {
    let digest = Sha256::new()
        .chain_update(b"bazaar-relay address\0")
        .chain_update(pubkey.0)
        .chain_update(kind.to_be_bytes())
        .chain_update(d)
        .finalize();
    let mut bytes = [0u8; 8];
    bytes.copy_from_slice(&digest[..8]);
    i64::from_be_bytes(bytes)
}

/// Every key a batch may read or change, sorted and once each.
fn lock_keys(events: &[Encoded]) -> Vec<i64> {
    let mut keys = Vec::with_capacity(events.len() * 2);
    for Encoded { event, .. } in events {
        keys.push(id_key(&event.id));
        if let Some(d) = d_column(event) {
            keys.push(address_key(&event.pubkey, event.kind, d));
        }
        if event.kind == DELETION {
            let targets = deletion_targets(event);
            keys.extend(targets.ids.iter().map(id_key));
            keys.extend(targets.addresses.iter().map(|(kind, d)| address_key(&event.pubkey, *kind, d.as_bytes())));
        }
    }
    keys.sort_unstable();
    keys.dedup();
    keys
}

/// Writes a batch in `tx`, in order; the caller commits.
pub(crate) fn write_batch(tx: &Tx<'_>, statements: &Statements, events: &[Encoded]) -> Result<Vec<Written>> {
    let keys = lock_keys(events);
    if keys.len() > KEYS_MAX {
        tx.execute(&statements.lock_writers, &[&WRITERS_LOCK.0, &WRITERS_LOCK.1])?;
    } else {
        tx.execute(&statements.lock_writers_shared, &[&WRITERS_LOCK.0, &WRITERS_LOCK.1])?;
        tx.execute(&statements.lock_keys, &[&keys])?;
    }
    events.iter().map(|event| write_one(tx, statements, event)).collect()
}

/// Takes the writers' lock exclusive: no batch of any node runs beside `tx` (a purge chunk).
pub(crate) fn lock_writers(tx: &Tx<'_>) -> Result<()> {
    tx.execute(LOCK_WRITERS, &[&WRITERS_LOCK.0, &WRITERS_LOCK.1]).map(drop)
}

fn write_one(tx: &Tx<'_>, statements: &Statements, Encoded { event, json }: &Encoded) -> Result<Written> {
    let id = &event.id.0[..];
    let pubkey = &event.pubkey.0[..];
    let kind = i32::from(event.kind);
    let created_at = big(event.created_at);
    let d_tag = d_column(event);
    let state = tx.query_one(&statements.state, &[&id, &pubkey, &kind, &d_tag, &created_at])?;
    if col::<bool>(&state, 0)? {
        return Ok(Written::Duplicate);
    }
    if col::<bool>(&state, 1)? || col::<bool>(&state, 2)? {
        return Ok(Written::Deleted);
    }
    if let Some(seq) = col::<Option<i64>>(&state, 3)? {
        let stored_id: Vec<u8> = col(&state, 4)?;
        let stored_id = Hex32(stored_id.try_into().map_err(|_| unavailable("a stored id is not 32 bytes"))?);
        let stored_at = unsigned(col(&state, 5)?);
        if !replaces((event.created_at, &event.id), (stored_at, &stored_id)) {
            return Ok(Written::Superseded);
        }
        tx.execute(&statements.remove, &[&seq])?;
    }
    if event.kind == DELETION {
        apply_deletion(tx, statements, event)?;
    }
    let expires_at = event.expires_at().map(big);
    let params: [&(dyn tokio_postgres::types::ToSql + Sync); 7] =
        [&id, &pubkey, &created_at, &kind, &d_tag, &expires_at, json];
    let Some(inserted) = tx.query_opt(&statements.insert_event, &params)? else {
        // Another node committed this very event after our state query: its row stands.
        return Ok(Written::Duplicate);
    };
    let seq: i64 = col(&inserted, 0)?;
    let tags = indexed_tags(event);
    if !tags.is_empty() {
        let names: Vec<&str> = tags.iter().map(|(name, _)| *name).collect();
        let values: Vec<&[u8]> = tags.iter().map(|(_, value)| value.as_bytes()).collect();
        tx.execute(&statements.insert_tags, &[&names, &values, &created_at, &seq])?;
    }
    Ok(Written::Stored)
}

/// NIP-09: removes the author's own targets (never a deletion) and remembers
/// them, so a target that arrives later, or again, is refused.
fn apply_deletion(tx: &Tx<'_>, statements: &Statements, deletion: &Event) -> Result<()> {
    let targets = deletion_targets(deletion);
    let pubkey = &deletion.pubkey.0[..];
    if !targets.ids.is_empty() {
        let ids: Vec<&[u8]> = targets.ids.iter().map(|id| &id.0[..]).collect();
        tx.execute(&statements.delete_ids, &[&ids, &pubkey, &i32::from(DELETION)])?;
    }
    if !targets.addresses.is_empty() {
        let kinds: Vec<i32> = targets.addresses.iter().map(|(kind, _)| i32::from(*kind)).collect();
        let ds: Vec<&[u8]> = targets.addresses.iter().map(|(_, d)| d.as_bytes()).collect();
        tx.execute(&statements.delete_addresses, &[&pubkey, &kinds, &ds, &big(deletion.created_at)])?;
    }
    Ok(())
}

/// Which events a purge chunk removes.
#[derive(Clone, Copy)]
pub(crate) enum Doomed {
    /// Expired at or before the bound (unix seconds).
    Expired,
    /// Regular events created before the bound; job requests among them are remembered.
    PastRetention,
}

/// Removes up to [`PURGE_CHUNK`] events `doomed` by `bound`, remembering job
/// requests' ids (for age only) as purged at `now`; says how many went.
pub(crate) fn purge_chunk(tx: &Tx<'_>, doomed: Doomed, bound: u64, now: u64) -> Result<u64> {
    let condition = match doomed {
        Doomed::Expired => "expires_at IS NOT NULL AND expires_at <= $1",
        Doomed::PastRetention => "d_tag IS NULL AND created_at < $1",
    };
    let sql = format!(
        "DELETE FROM relay_events WHERE seq IN (SELECT seq FROM relay_events WHERE {condition} LIMIT {PURGE_CHUNK}) \
         RETURNING id, kind"
    );
    let rows = tx.query(sql.as_str(), &[&big(bound)])?;
    if matches!(doomed, Doomed::PastRetention) {
        let mut jobs: Vec<Vec<u8>> = Vec::new();
        for row in &rows {
            if u16::try_from(col::<i32>(row, 1)?).is_ok_and(is_job_request) {
                jobs.push(col(row, 0)?);
            }
        }
        if !jobs.is_empty() {
            tx.execute(
                "INSERT INTO relay_purged_jobs (id, purged_at) SELECT id, $2 FROM unnest($1::bytea[]) AS id \
                 ON CONFLICT DO NOTHING",
                &[&jobs, &big(now)],
            )?;
        }
    }
    Ok(rows.len() as u64)
}

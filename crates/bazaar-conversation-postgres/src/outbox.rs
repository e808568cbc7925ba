//! The webhook endpoints and outbox rows on PostgreSQL, each inside the
//! caller's transaction (the acts are `bazaar_conversation::webhooks`).

use bazaar_conversation::delivery::{Delivery, DeliveryState, Endpoint};
use bazaar_conversation::model::ChannelId;
use bazaar_types::{MemberId, Timestamp};
use tokio_postgres::Row;

use crate::tx::{big, col, count, unavailable, Result, Tx};

const ENDPOINT_COLUMNS: &str =
    "id, member, url, secret, previous_secret, previous_until, created_at, disabled_at, disabled_reason";
const DELIVERY_COLUMNS: &str = "d.id, d.endpoint, d.position, d.state, d.attempts, d.next_attempt_at, \
     d.leased_until, d.last_status, d.last_error, d.updated_at";

fn endpoint_from_row(row: &Row) -> Result<Endpoint> {
    Ok(Endpoint {
        id: col(row, 0)?,
        member: MemberId(col(row, 1)?),
        url: col(row, 2)?,
        secret: col(row, 3)?,
        previous_secret: col(row, 4)?,
        previous_until: col::<Option<i64>>(row, 5)?.map(Timestamp),
        created_at: Timestamp(col(row, 6)?),
        disabled_at: col::<Option<i64>>(row, 7)?.map(Timestamp),
        disabled_reason: col(row, 8)?,
    })
}

fn delivery_from_row(row: &Row) -> Result<Delivery> {
    let state: String = col(row, 3)?;
    let attempts: i32 = col(row, 4)?;
    let last_status: Option<i32> = col(row, 7)?;
    Ok(Delivery {
        id: count(row, 0)?,
        endpoint: col(row, 1)?,
        position: count(row, 2)?,
        state: DeliveryState::parse(&state).ok_or_else(|| unavailable("unreadable webhook_deliveries.state"))?,
        attempts: u32::try_from(attempts).map_err(unavailable)?,
        next_attempt_at: Timestamp(col(row, 5)?),
        leased_until: col::<Option<i64>>(row, 6)?.map(Timestamp),
        last_status: last_status.map(u16::try_from).transpose().map_err(unavailable)?,
        last_error: col(row, 8)?,
        updated_at: Timestamp(col(row, 9)?),
    })
}

pub(crate) fn enqueue_deliveries(tx: &Tx<'_>, channel: &ChannelId, position: u64, now: Timestamp) -> Result<()> {
    tx.execute(
        "INSERT INTO webhook_deliveries (endpoint, position, state, attempts, next_attempt_at, updated_at)
         SELECT e.id, $2, 'pending', 0, $3, $3 FROM webhook_endpoints e
         JOIN memberships m ON m.member = e.member AND m.channel = $1 AND m.left_after IS NULL
         WHERE e.disabled_at IS NULL",
        &[&channel.as_str(), &big(position), &now.0],
    )?;
    Ok(())
}

pub(crate) fn insert_endpoint(tx: &Tx<'_>, endpoint: &Endpoint) -> Result<()> {
    let sql = format!("INSERT INTO webhook_endpoints ({ENDPOINT_COLUMNS}) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)");
    tx.execute(
        &sql,
        &[
            &endpoint.id,
            &endpoint.member.as_str(),
            &endpoint.url,
            &endpoint.secret,
            &endpoint.previous_secret,
            &endpoint.previous_until.map(|t| t.0),
            &endpoint.created_at.0,
            &endpoint.disabled_at.map(|t| t.0),
            &endpoint.disabled_reason,
        ],
    )?;
    Ok(())
}

pub(crate) fn load_endpoint(tx: &Tx<'_>, id: &str) -> Result<Option<Endpoint>> {
    let sql = format!("SELECT {ENDPOINT_COLUMNS} FROM webhook_endpoints WHERE id = $1");
    tx.query_opt(&sql, &[&id])?.as_ref().map(endpoint_from_row).transpose()
}

pub(crate) fn endpoints_of(tx: &Tx<'_>, member: &MemberId) -> Result<Vec<Endpoint>> {
    let sql = format!("SELECT {ENDPOINT_COLUMNS} FROM webhook_endpoints WHERE member = $1 ORDER BY created_at, id");
    tx.query(&sql, &[&member.as_str()])?.iter().map(endpoint_from_row).collect()
}

pub(crate) fn update_endpoint(tx: &Tx<'_>, endpoint: &Endpoint) -> Result<()> {
    tx.execute(
        "UPDATE webhook_endpoints SET secret = $2, previous_secret = $3, previous_until = $4,
                disabled_at = $5, disabled_reason = $6 WHERE id = $1",
        &[
            &endpoint.id,
            &endpoint.secret,
            &endpoint.previous_secret,
            &endpoint.previous_until.map(|t| t.0),
            &endpoint.disabled_at.map(|t| t.0),
            &endpoint.disabled_reason,
        ],
    )?;
    Ok(())
}

pub(crate) fn delete_endpoint(tx: &Tx<'_>, id: &str) -> Result<()> {
    tx.execute("DELETE FROM webhook_deliveries WHERE endpoint = $1", &[&id])?;
    tx.execute("DELETE FROM webhook_endpoints WHERE id = $1", &[&id])?;
    Ok(())
}

pub(crate) fn due_deliveries(tx: &Tx<'_>, now: Timestamp, limit: usize) -> Result<Vec<Delivery>> {
    let sql = format!(
        "SELECT {DELIVERY_COLUMNS} FROM webhook_deliveries d JOIN webhook_endpoints e ON e.id = d.endpoint
         WHERE e.disabled_at IS NULL AND d.state = 'pending'
           AND d.position = (SELECT MIN(x.position) FROM webhook_deliveries x
                             WHERE x.endpoint = d.endpoint AND x.state = 'pending')
           AND d.next_attempt_at <= $1 AND (d.leased_until IS NULL OR d.leased_until <= $1)
         ORDER BY d.next_attempt_at, d.id LIMIT $2"
    );
    tx.query(&sql, &[&now.0, &big(limit as u64)])?.iter().map(delivery_from_row).collect()
}

pub(crate) fn load_delivery(tx: &Tx<'_>, id: u64) -> Result<Option<Delivery>> {
    let sql = format!("SELECT {DELIVERY_COLUMNS} FROM webhook_deliveries d WHERE d.id = $1");
    tx.query_opt(&sql, &[&big(id)])?.as_ref().map(delivery_from_row).transpose()
}

pub(crate) fn update_delivery(tx: &Tx<'_>, delivery: &Delivery) -> Result<()> {
    let attempts = i32::try_from(delivery.attempts).map_err(unavailable)?;
    tx.execute(
        "UPDATE webhook_deliveries SET state = $2, attempts = $3, next_attempt_at = $4, leased_until = $5,
                last_status = $6, last_error = $7, updated_at = $8 WHERE id = $1",
        &[
            &big(delivery.id),
            &delivery.state.as_str(),
            &attempts,
            &delivery.next_attempt_at.0,
            &delivery.leased_until.map(|t| t.0),
            &delivery.last_status.map(i32::from),
            &delivery.last_error,
            &delivery.updated_at.0,
        ],
    )?;
    Ok(())
}

pub(crate) fn deliveries_of(tx: &Tx<'_>, endpoint: &str, state: DeliveryState, limit: usize) -> Result<Vec<Delivery>> {
    let sql = format!(
        "SELECT {DELIVERY_COLUMNS} FROM webhook_deliveries d WHERE d.endpoint = $1 AND d.state = $2
         ORDER BY d.position LIMIT $3"
    );
    tx.query(&sql, &[&endpoint, &state.as_str(), &big(limit as u64)])?.iter().map(delivery_from_row).collect()
}

pub(crate) fn requeue_dead(tx: &Tx<'_>, endpoint: &str, now: Timestamp) -> Result<u64> {
    tx.execute(
        "UPDATE webhook_deliveries SET state = 'pending', attempts = 0, next_attempt_at = $2,
                leased_until = NULL, updated_at = $2 WHERE endpoint = $1 AND state = 'dead'",
        &[&endpoint, &now.0],
    )
}

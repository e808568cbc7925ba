//! The meter: per member per UTC day, how many events reached it by each
//! transport (websocket, sse, poll, webhook). The server counts deliveries as
//! they leave and adds them here in batches; nothing is counted for a
//! connection that delivers nothing, so idle connections cost no work.

use bazaar_types::{MemberId, Timestamp};

use crate::engine::{Engine, MeterRows};
pub use crate::model::Metered;
use crate::store::Result;

/// Milliseconds in a UTC day.
const DAY_MS: i64 = 86_400_000;

/// The UTC day (days since 1970-01-01) an instant falls on.
pub fn day_of(at: Timestamp) -> i64 {
    at.0.div_euclid(DAY_MS)
}

pub trait MeterStore {
    /// Adds each count to its (member, day, transport) total, in one transaction.
    fn add_to_meter(&self, counts: Vec<Metered>) -> Result<()>;
    /// The member's totals on `day`, by transport name.
    fn meter(&self, member: &MemberId, day: i64) -> Result<Vec<Metered>>;
}

impl<E: Engine> MeterStore for E {
    fn add_to_meter(&self, counts: Vec<Metered>) -> Result<()> {
        if counts.is_empty() {
            return Ok(());
        }
        self.write(move |tx, _now| {
            for count in &counts {
                tx.add_meter(count)?;
            }
            Ok(())
        })
    }

    fn meter(&self, member: &MemberId, day: i64) -> Result<Vec<Metered>> {
        self.read(|tx| tx.meter_of(member, day))
    }
}

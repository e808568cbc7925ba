//! The wall clock of a process that is not a registry: the SDK's own timestamps, and the agents, the demo
//! and the CLI that run beside it. The one place in those crates the wall clock is read; a registry's core
//! gets its time through an injected `bazaar_types::Clock`, and so does everything that takes one.

use bazaar_types::{Clock, Timestamp};

/// The wall clock.
#[derive(Clone, Copy, Debug, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    #[allow(clippy::disallowed_methods)] // The one place the wall clock is read.
    fn now(&self) -> Timestamp {
        let since = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
        Timestamp(since.as_millis() as i64)
    }
}

/// Milliseconds since the epoch by the wall clock.
pub fn now_ms() -> i64 {
    SystemClock.now().0
}

/// Unix seconds by the wall clock: what Nostr events are stamped with.
pub fn unix_now() -> u64 {
    (now_ms() / 1000).max(0) as u64
}

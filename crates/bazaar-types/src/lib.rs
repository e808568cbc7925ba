//! Ids, amounts, time and limits shared by every Bazaar crate. No I/O lives here.
//!
//! Money is an integer count of minor units (`Amount`); ids are newtypes so two
//! strings cannot be swapped; every limit is a named `*_MAX` constant in `limits`.
//!
//! ## Map
//!
//! (What this crate holds, file by file; `ARCHITECTURE.md` keeps the one-line summary.)
//!
//! `Amount` (checked minor units), `Timestamp`, id newtypes
//! (`MemberId`, `AccountId`, `TokenId`, …) and document ids (`ContractId`,
//! `DisputeId`, `ListingId`, `RfqId`, `MarketOrderId`: each reads as a `&str`
//! for the store, none converts into another; a storefront share is
//! `market::order::ShareId`, its order and index), the `Clock` trait and
//! `ManualClock`, the `Entropy` trait and `SeededEntropy`, `SqliteMemory` (one SQLite database's connections and
//! configured page cache and map, as the ledger, the relay and the conversation plane each report it for
//! `/metrics`), and `limits` — every `*_MAX` constant with compile-time
//! asserts relating them.

pub mod durable;
pub mod limits;
pub mod net;

use serde::{Deserialize, Serialize};
use std::fmt;

/// An amount of the network unit in minor units. Arithmetic is checked: an
/// overflow is a refusal, never a wrap.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Amount(pub u64);

impl Amount {
    pub const ZERO: Amount = Amount(0);
    pub fn minor(self) -> u64 {
        self.0
    }
    pub fn checked_add(self, other: Amount) -> Option<Amount> {
        self.0.checked_add(other.0).map(Amount)
    }
    pub fn checked_sub(self, other: Amount) -> Option<Amount> {
        self.0.checked_sub(other.0).map(Amount)
    }
    /// The fee on `self` at `bps` basis points, rounded down (the payer never
    /// pays more than the published rate).
    pub fn fee_bps(self, bps: u32) -> Amount {
        assert!(bps <= 10_000);
        Amount(((self.0 as u128 * bps as u128) / 10_000) as u64)
    }
}

impl fmt::Display for Amount {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

/// Milliseconds since the Unix epoch, UTC. Produced only by an injected clock.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Timestamp(pub i64);

impl Timestamp {
    /// A deadline that never comes (holds that only a decision resolves).
    pub const NEVER: Timestamp = Timestamp(i64::MAX);
    pub fn ms(self) -> i64 {
        self.0
    }
    pub fn plus_s(self, seconds: u64) -> Timestamp {
        Timestamp(self.0.saturating_add((seconds as i64).saturating_mul(1000)))
    }
    /// The UTC day number (days since the epoch) this instant falls in.
    pub fn utc_day(self) -> i64 {
        self.0.div_euclid(86_400_000)
    }
}

macro_rules! string_id {
    ($(#[$doc:meta])* $name:ident) => {
        $(#[$doc])*
        #[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
        #[serde(transparent)]
        pub struct $name(pub String);
        impl $name {
            pub fn as_str(&self) -> &str { &self.0 }
        }
        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result { f.write_str(&self.0) }
        }
        impl From<&str> for $name {
            fn from(s: &str) -> Self { $name(s.to_string()) }
        }
    };
}

string_id!(
    /// A member's identity: a `did:key` for agents and owners, `did:bazaar:operator` for the operator.
    MemberId
);
string_id!(
    /// A ledger account. Member accounts are named after the member; system accounts start with `sys:`.
    AccountId
);
string_id!(
    /// A payment token's unique id (`jti`).
    TokenId
);
string_id!(
    /// A hold (pending transfer) id.
    HoldId
);
string_id!(
    /// An immutable transfer id.
    TransferId
);
string_id!(
    /// A merchant-chosen order id.
    OrderId
);

/// A document id: a [`string_id!`] that also reads as a `&str` (documents are
/// keyed by text in the store), while two kinds of id still cannot be swapped.
macro_rules! doc_id {
    ($(#[$doc:meta])* $name:ident) => {
        string_id!($(#[$doc])* $name);
        impl std::ops::Deref for $name {
            type Target = str;
            fn deref(&self) -> &str { &self.0 }
        }
        impl From<$name> for String {
            fn from(id: $name) -> String { id.0 }
        }
    };
}

doc_id!(
    /// An escrowed contract: `ctr_` + 32 hex chars derived from its parties and the buyer's key.
    ContractId
);
doc_id!(
    /// A dispute: derived from its subject, so a subject is disputed once.
    DisputeId
);
doc_id!(
    /// A storefront listing: `lst_` + 32 hex chars of its seller and SKU.
    ListingId
);
doc_id!(
    /// A request for quote: `rfq_` + 32 hex chars of its buyer and key.
    RfqId
);
doc_id!(
    /// A storefront order (`ord_…`); not a merchant's [`OrderId`] for a paid call.
    MarketOrderId
);

impl AccountId {
    pub fn issuance() -> AccountId {
        AccountId("sys:issuance".into())
    }
    pub fn fees() -> AccountId {
        AccountId("sys:fees".into())
    }
    pub fn of_member(member: &MemberId) -> AccountId {
        AccountId(format!("acct:{member}"))
    }
    /// Where a merchant's locked stake sits: never spendable, never funds a release.
    pub fn stake_of(member: &MemberId) -> AccountId {
        AccountId(format!("stake:{member}"))
    }
    /// Receives slashed stake beyond what made a claimant whole.
    pub fn insurance() -> AccountId {
        AccountId("sys:insurance".into())
    }
    /// What this registry and a peer registry owe each other: on the buyer's
    /// registry it grows with what the peer's merchants earned here; on the
    /// merchant's registry it goes negative by the same amount.
    pub fn corridor(peer: &MemberId) -> AccountId {
        AccountId(format!("corridor:{peer}"))
    }
    pub fn is_corridor(&self) -> bool {
        self.0.starts_with("corridor:")
    }
}

/// The source of "now". Production uses the system clock in the runtime
/// module; tests and the demo use a clock they move by hand.
pub trait Clock: Send + Sync {
    fn now(&self) -> Timestamp;
}

/// The source of randomness (credentials, invite codes, token ids, key
/// seeds), injected like the clock so a test or a seeded simulator controls
/// it. Production uses the operating system's source, in one module of the
/// server; `rand`'s ambient generators are banned elsewhere by `clippy.toml`.
pub trait Entropy: Send + Sync {
    fn fill(&self, bytes: &mut [u8]);
}

/// A deterministic source for tests and simulations: splitmix64 from a seed.
/// Never for secrets.
#[derive(Debug)]
pub struct SeededEntropy(std::sync::Mutex<u64>);

impl SeededEntropy {
    pub fn new(seed: u64) -> Self {
        SeededEntropy(std::sync::Mutex::new(seed))
    }
}

impl Entropy for SeededEntropy {
    fn fill(&self, bytes: &mut [u8]) {
        let mut state = self.0.lock().expect("entropy lock");
        for chunk in bytes.chunks_mut(8) {
            *state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
            let mut z = *state;
            z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
            z ^= z >> 31;
            chunk.copy_from_slice(&z.to_le_bytes()[..chunk.len()]);
        }
    }
}

/// A clock that only moves when told to. Shared by tests, the demo and the simulator.
#[derive(Debug, Default)]
pub struct ManualClock(std::sync::atomic::AtomicI64);

impl ManualClock {
    pub fn new(start: Timestamp) -> Self {
        ManualClock(std::sync::atomic::AtomicI64::new(start.0))
    }
    pub fn advance_s(&self, seconds: u64) {
        self.0.fetch_add(seconds as i64 * 1000, std::sync::atomic::Ordering::SeqCst);
    }
    pub fn advance_ms(&self, ms: i64) {
        self.0.fetch_add(ms, std::sync::atomic::Ordering::SeqCst);
    }
    pub fn set(&self, at: Timestamp) {
        self.0.store(at.0, std::sync::atomic::Ordering::SeqCst);
    }
}

impl Clock for ManualClock {
    fn now(&self) -> Timestamp {
        Timestamp(self.0.load(std::sync::atomic::Ordering::SeqCst))
    }
}

/// One SQLite database's connections and what each may hold in memory as
/// configured (`PRAGMA cache_size`, `PRAGMA mmap_size`, read back at open), for
/// `/metrics`: the ledger's, the relay's and the conversation plane's alike.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SqliteMemory {
    pub db: &'static str,
    /// Connections open now.
    pub connections: u64,
    /// Page cache all of the database's connections may fill together, in bytes.
    pub cache_size_bytes: u64,
    /// File bytes each connection may map at most (resident pages count in RSS as file-backed, once per mapping).
    pub mmap_size_bytes: u64,
}

impl SqliteMemory {
    /// A connection's page cache in bytes from what SQLite answers for `PRAGMA cache_size` (KiB when
    /// negative, pages when positive) and `PRAGMA page_size`.
    pub fn cache_bytes(cache_size: i64, page_size: i64) -> u64 {
        match cache_size < 0 {
            true => cache_size.unsigned_abs() * 1024,
            false => cache_size as u64 * page_size.max(0) as u64,
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_sqlite_cache_size_is_kib_when_negative_and_pages_when_positive() {
        assert_eq!(super::SqliteMemory::cache_bytes(-2_048, 4_096), 2 * 1024 * 1024);
        assert_eq!(super::SqliteMemory::cache_bytes(100, 4_096), 409_600);
    }

    use super::*;

    #[test]
    fn fee_rounds_down_and_never_exceeds_amount() {
        assert_eq!(Amount(999).fee_bps(100), Amount(9));
        assert_eq!(Amount(100).fee_bps(100), Amount(1));
        assert_eq!(Amount(u64::MAX).fee_bps(10_000), Amount(u64::MAX));
    }

    #[test]
    fn utc_day_splits_at_midnight() {
        assert_eq!(Timestamp(86_399_999).utc_day(), 0);
        assert_eq!(Timestamp(86_400_000).utc_day(), 1);
    }
}

//! The one source of decisions in a run: [`SeededEntropy`] from the seed, read
//! as numbers. Everything the simulator chooses — the next request, its
//! actor, which fault fires — is drawn from it in one fixed order, so a seed
//! replays bit for bit.

use bazaar_types::{Entropy, SeededEntropy};
use std::sync::{Arc, Mutex};

/// Parts per thousand: how fault probabilities are written.
pub const PER_MILLE: u64 = 1_000;

pub struct Rng(SeededEntropy);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(SeededEntropy::new(seed))
    }

    pub fn next_u64(&mut self) -> u64 {
        let mut bytes = [0u8; 8];
        self.0.fill(&mut bytes);
        u64::from_le_bytes(bytes)
    }

    /// A number in `0..n` (`n > 0`).
    pub fn below(&mut self, n: u64) -> u64 {
        assert!(n > 0, "below(0)");
        self.next_u64() % n
    }

    /// A number in `low..=high`.
    pub fn between(&mut self, low: u64, high: u64) -> u64 {
        low + self.below(high - low + 1)
    }

    /// True `per_mille` times in a thousand.
    pub fn chance(&mut self, per_mille: u64) -> bool {
        self.below(PER_MILLE) < per_mille
    }

    /// An index into a non-empty slice of `len`.
    pub fn index(&mut self, len: usize) -> usize {
        self.below(len as u64) as usize
    }

    pub fn pick<'a, T>(&mut self, items: &'a [T]) -> Option<&'a T> {
        if items.is_empty() {
            None
        } else {
            Some(&items[self.index(items.len())])
        }
    }

    /// Fisher–Yates, from this stream.
    pub fn shuffle<T>(&mut self, items: &mut [T]) {
        for i in (1..items.len()).rev() {
            let j = self.index(i + 1);
            items.swap(i, j);
        }
    }
}

/// The run's generator, shared with the fault-injecting engine on the
/// writer's thread. The simulator waits for every batch it submits, so the two
/// threads never draw at once and the order of draws is fixed.
pub type SharedRng = Arc<Mutex<Rng>>;

pub fn lock(rng: &SharedRng) -> std::sync::MutexGuard<'_, Rng> {
    rng.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

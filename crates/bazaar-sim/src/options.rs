//! What a run is told: its seed and length, the registry's settings (short
//! phase windows so a few hundred steps see every deadline pass), and how
//! likely each fault is.

use crate::fault::{EngineFaults, Plant};
use crate::flows::Flow;
use bazaar_core::apply::Config;
use bazaar_core::dispute::Windows;
use bazaar_types::limits::IDEMPOTENCY_RETENTION_S;
use bazaar_types::{Amount, Timestamp};

/// 2026-01-01T00:00:00Z.
pub const START: Timestamp = Timestamp(1_767_225_600_000);
/// The protocol fee the simulated registries charge, in basis points.
pub const FEE_BPS: u32 = 100;
/// Requests delivered together (one batch), at most, before a duplicate is added.
pub const GROUP_MAX: u64 = 4;
/// A small clock step, in seconds, at most.
pub const TICK_S_MAX: u64 = 120;
/// A clock jump, in seconds, at least and at most (minutes to hours: phase deadlines, expiries).
pub const JUMP_S: (u64, u64) = (300, 2 * 3_600);
/// A long jump past the idempotency retention, so the sweeper prunes records.
pub const LONG_JUMP_S: u64 = IDEMPOTENCY_RETENTION_S + 3_600;

/// Phase windows of minutes, so short runs see every deadline pass.
pub fn windows() -> Windows {
    Windows {
        claim_s: 12 * 3_600,
        answer_s: 900,
        evidence_s: 1_200,
        ruling_s: 1_200,
        appeal_s: 600,
        stake_cooldown_s: 1_800,
    }
}

pub fn config() -> Config {
    Config {
        fee_bps: FEE_BPS,
        escrow_threshold: Amount(bazaar_types::limits::ESCROW_THRESHOLD_MINOR),
        windows: windows(),
    }
}

/// How likely each fault is, in parts per thousand (engine faults per call, the rest per step or per answer).
#[derive(Clone, Copy, Debug)]
pub struct Faults {
    /// The `--faults` name that gives these (for the replay command); "custom" for others.
    pub profile: &'static str,
    pub engine: EngineFaults,
    /// An answer committed but lost on its way back; the client retries with the same key.
    pub lost_reply: u64,
    /// One request of a delivered group sent twice.
    pub duplicate: u64,
    /// A group taken from the pending requests out of order.
    pub reorder: u64,
    /// A step that is a clock jump of minutes to hours.
    pub clock_jump: u64,
    /// A clock jump that is a long one, past the idempotency retention.
    pub long_jump: u64,
    /// A step that is a crash and restart (of the home registry, or of the peer).
    pub crash: u64,
    /// A call from the peer registry to the home registry that never gets there.
    pub peer_down: u64,
    /// A call that got there (home settled) but whose answer came too late for the peer.
    pub peer_late: u64,
    /// How the clients' requests are shared among the flows (relative weights). Part of the
    /// profile, since what a fault can reach depends on what is in flight.
    pub flows: [(Flow, u64); 8],
}

/// The standard mix of requests.
pub const FLOWS_STANDARD: [(Flow, u64); 8] = [
    (Flow::Pay, 20),
    (Flow::Escrow, 15),
    (Flow::Dispute, 15),
    (Flow::Stake, 8),
    (Flow::Relay, 16),
    (Flow::Market, 16),
    (Flow::Hire, 12),
    (Flow::Bounty, 8),
];

impl Faults {
    pub const NONE: Faults = Faults {
        profile: "none",
        engine: EngineFaults::NONE,
        lost_reply: 0,
        duplicate: 0,
        reorder: 0,
        clock_jump: 0,
        long_jump: 0,
        crash: 0,
        peer_down: 0,
        peer_late: 0,
        flows: FLOWS_STANDARD,
    };

    pub fn standard() -> Faults {
        Faults {
            profile: "standard",
            engine: EngineFaults {
                begin_unavailable: 20,
                load_unavailable: 20,
                commit_fails: 30,
                crash_before_commit: 10,
            },
            lost_reply: 80,
            duplicate: 80,
            reorder: 300,
            clock_jump: 30,
            long_jump: 30,
            crash: 25,
            peer_down: 150,
            peer_late: 100,
            flows: FLOWS_STANDARD,
        }
    }
}

#[derive(Clone, Debug)]
pub struct Options {
    pub seed: u64,
    pub steps: usize,
    pub faults: Faults,
    pub plant: Option<Plant>,
    /// Print every trace line to stderr as it is written.
    pub verbose: bool,
}

impl Faults {
    /// The standard faults, with the peer registry down or late most of the time, long clock jumps
    /// frequent and most requests relayed: relays outlive the home registry's idempotency records.
    pub fn peer_trouble() -> Faults {
        Faults {
            profile: "peer-trouble",
            peer_late: 700,
            peer_down: 400,
            long_jump: 700,
            clock_jump: 100,
            flows: [
                (Flow::Pay, 10),
                (Flow::Escrow, 5),
                (Flow::Dispute, 5),
                (Flow::Stake, 5),
                (Flow::Relay, 70),
                (Flow::Market, 5),
                (Flow::Hire, 5),
                (Flow::Bounty, 5),
            ],
            ..Faults::standard()
        }
    }
}

impl Options {
    pub fn new(seed: u64, steps: usize) -> Options {
        Options { seed, steps, faults: Faults::standard(), plant: None, verbose: false }
    }
}

//! The composer's entry point: applies a batch of commands to a snapshot, in
//! order, and returns each command's outcome plus the rows to write. The
//! kernel's driver does the idempotency and the writes; `command::run`
//! dispatches each command to its capability.

use crate::command::Command;
use crate::kernel::state::{Changes, Snapshot};
use bazaar_types::{Amount, Timestamp};

/// One command's outcome as the composer answers it: a tagged [`crate::command::Receipt`] or a refusal.
pub type Applied = crate::kernel::batch::Applied<crate::command::Receipt>;

/// Registry-wide settings: the kernel's money policies and each capability's own.
#[derive(Clone, Debug)]
pub struct Config {
    pub fee_bps: u32,
    pub escrow_threshold: Amount,
    /// Dispute phase deadlines and the stake cooldown.
    pub windows: crate::dispute::Windows,
}

impl Config {
    /// The published defaults: `PROTOCOL_FEE_BPS`, `ESCROW_THRESHOLD_MINOR` and the standard windows.
    pub fn standard() -> Config {
        let kernel = crate::kernel::config::Config::standard();
        Config {
            fee_bps: kernel.fee_bps,
            escrow_threshold: kernel.escrow_threshold,
            windows: crate::dispute::Windows::standard(),
        }
    }

    /// The part of the settings the kernel sees.
    pub fn kernel(&self) -> crate::kernel::config::Config {
        crate::kernel::config::Config { fee_bps: self.fee_bps, escrow_threshold: self.escrow_threshold }
    }
}

pub fn apply_batch(
    snap: &mut Snapshot,
    config: &Config,
    commands: &[Command],
    now: Timestamp,
) -> (Vec<Applied>, Changes) {
    let kernel = config.kernel();
    crate::kernel::batch::apply_batch(snap, &kernel, commands, now, |batch, command| {
        crate::command::run(batch, command, &config.windows)
    })
}

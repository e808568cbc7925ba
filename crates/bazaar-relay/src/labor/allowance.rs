//! Model-usage allowances: a meter, not money. Usage is what a worker's
//! engine reports, in the engine's own asset (e.g. USD as the engine
//! estimates it), counted here in millionths; it is never ledger units and
//! never an invoice.
//!
//! One task at a time reserves what is left of the day's allowance before
//! its model starts; usage arrives as cumulative figures and each increase is
//! charged to the day it arrives in (work whose delivery then fails
//! included); completion releases what was not used; a failure before the
//! model started settles at zero. At the allowance the task is to be
//! cancelled — but a call already in flight can overshoot it.
//!
//! What is not known is never guessed: an attempt interrupted (a crash, a
//! restart) or one whose engine never reported usage keeps its reservation as
//! **pending**, across restarts and UTC midnight, and blocks new work until
//! the owner reconciles it — records the missing cost, then clears it. Nothing
//! but the owner's record turns an unknown cost into a number.

use serde::{Deserialize, Serialize};

/// Millionths of the allowance's asset.
pub type Micros = u64;

/// Seconds in a UTC day.
const DAY_S: u64 = 86_400;

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Reservation {
    pub task: String,
    /// What was left of the day's allowance when the task began.
    pub reserved: Micros,
    /// The engine's cumulative usage so far.
    pub used: Micros,
    pub model_started: bool,
    /// Whether the engine reported any usage at all.
    pub reported: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PendingWhy {
    /// The worker stopped with the task running.
    Interrupted,
    /// The model ran but the engine reported no usage.
    Unmetered,
}

/// A reservation whose cost is not known: it blocks new work until reconciled.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Pending {
    pub task: String,
    pub reserved: Micros,
    /// Usage reported before it stopped (already charged); the rest is unknown.
    pub used_known: Micros,
    pub why: PendingWhy,
    /// The owner's record of what the engine really cost beyond `used_known`; `None` until recorded.
    pub missing_cost: Option<Micros>,
}

/// Why a task may not start.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refused {
    #[error("an attempt of task {0} has an unknown cost: the owner must record it and clear it first")]
    PendingReconciliation(String),
    #[error("task {0} is running: one task at a time")]
    Busy(String),
    #[error("today's allowance is spent ({spent} of {daily} millionths)")]
    Exhausted { spent: Micros, daily: Micros },
}

/// Why an owner's reconciliation was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Reconcile {
    #[error("nothing is pending")]
    NothingPending,
    #[error("record the missing cost before clearing: an unknown cost is never cleared as zero")]
    CostNotRecorded,
}

/// After a usage report: go on, or cancel the task (the allowance is reached).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Metered {
    Continue,
    Cancel,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Allowance {
    pub asset: String,
    pub daily: Micros,
    /// The UTC day `spent` counts (unix seconds / 86,400).
    pub day: u64,
    pub spent: Micros,
    pub active: Option<Reservation>,
    pub pending: Option<Pending>,
}

impl Allowance {
    pub fn new(asset: impl Into<String>, daily: Micros, now_s: u64) -> Allowance {
        Allowance { asset: asset.into(), daily, day: now_s / DAY_S, spent: 0, active: None, pending: None }
    }

    /// A new UTC day starts with nothing spent; a reservation or a pending attempt carries over.
    fn roll(&mut self, now_s: u64) {
        let day = now_s / DAY_S;
        if day > self.day {
            self.day = day;
            self.spent = 0;
        }
    }

    /// What is left today (never below zero, even after an overshoot).
    pub fn remaining(&mut self, now_s: u64) -> Micros {
        self.roll(now_s);
        self.daily.saturating_sub(self.spent)
    }

    /// Reserves what is left today for `task`.
    pub fn reserve(&mut self, task: &str, now_s: u64) -> Result<Micros, Refused> {
        if let Some(pending) = &self.pending {
            return Err(Refused::PendingReconciliation(pending.task.clone()));
        }
        if let Some(active) = &self.active {
            return Err(Refused::Busy(active.task.clone()));
        }
        let reserved = self.remaining(now_s);
        if reserved == 0 {
            return Err(Refused::Exhausted { spent: self.spent, daily: self.daily });
        }
        self.active = Some(Reservation { task: task.into(), reserved, used: 0, model_started: false, reported: false });
        Ok(reserved)
    }

    fn active_for(&mut self, task: &str) -> Option<&mut Reservation> {
        self.active.as_mut().filter(|r| r.task == task)
    }

    pub fn model_started(&mut self, task: &str) {
        if let Some(active) = self.active_for(task) {
            active.model_started = true;
        }
    }

    /// The engine's cumulative usage for `task`; each increase is charged now.
    pub fn usage(&mut self, task: &str, cumulative: Micros, now_s: u64) -> Metered {
        self.roll(now_s);
        let Some(active) = self.active.as_mut().filter(|r| r.task == task) else { return Metered::Continue };
        let delta = cumulative.saturating_sub(active.used);
        active.used = active.used.max(cumulative);
        active.reported = true;
        active.model_started = true;
        self.spent = self.spent.saturating_add(delta);
        if active.used >= active.reserved {
            Metered::Cancel
        } else {
            Metered::Continue
        }
    }

    /// The task ended (delivered, or failed after its model ran): what it used
    /// stays spent and the rest is released — unless the model ran and the
    /// engine never said what it cost, which leaves the attempt pending.
    pub fn complete(&mut self, task: &str) {
        let Some(active) = self.active.take_if(|r| r.task == task) else { return };
        if active.model_started && !active.reported {
            self.pending = Some(Pending {
                task: active.task,
                reserved: active.reserved,
                used_known: 0,
                why: PendingWhy::Unmetered,
                missing_cost: None,
            });
        }
    }

    /// The task failed. Before its model started it settles at zero; after, as [`Allowance::complete`].
    pub fn fail(&mut self, task: &str) {
        match self.active.as_ref() {
            Some(active) if active.task == task && !active.model_started => self.active = None,
            _ => self.complete(task),
        }
    }

    /// On (re)start: a task the worker was running when it stopped is pending, its cost unknown.
    pub fn interrupted(&mut self) {
        if let Some(active) = self.active.take() {
            if !active.model_started {
                return;
            }
            self.pending = Some(Pending {
                task: active.task,
                reserved: active.reserved,
                used_known: active.used,
                why: PendingWhy::Interrupted,
                missing_cost: None,
            });
        }
    }

    /// The owner records what the pending attempt cost beyond what was reported; it is charged to today.
    pub fn reconcile(&mut self, missing_cost: Micros, now_s: u64) -> Result<(), Reconcile> {
        self.roll(now_s);
        let pending = self.pending.as_mut().ok_or(Reconcile::NothingPending)?;
        let already = pending.missing_cost.unwrap_or(0);
        self.spent = self.spent.saturating_add(missing_cost.saturating_sub(already));
        pending.missing_cost = Some(missing_cost.max(already));
        Ok(())
    }

    /// Clears a pending attempt whose cost the owner has recorded.
    pub fn clear(&mut self) -> Result<Pending, Reconcile> {
        match &self.pending {
            None => Err(Reconcile::NothingPending),
            Some(pending) if pending.missing_cost.is_none() => Err(Reconcile::CostNotRecorded),
            Some(_) => Ok(self.pending.take().expect("checked")),
        }
    }
}

/// Parses a decimal amount (`0.0042`) into millionths, exactly; more than six decimals are refused.
pub fn micros(decimal: &str) -> Option<Micros> {
    let (whole, fraction) = decimal.split_once('.').unwrap_or((decimal, ""));
    if whole.is_empty() && fraction.is_empty()
        || fraction.len() > 6
        || !whole.bytes().chain(fraction.bytes()).all(|b| b.is_ascii_digit())
    {
        return None;
    }
    let whole: u64 = if whole.is_empty() { 0 } else { whole.parse().ok()? };
    let fraction: u64 = format!("{fraction:0<6}").parse().ok()?;
    whole.checked_mul(1_000_000)?.checked_add(fraction)
}

/// Millionths as a decimal string (`4200` → `0.0042`).
pub fn decimal(micros: Micros) -> String {
    let text = format!("{}.{:06}", micros / 1_000_000, micros % 1_000_000);
    text.trim_end_matches('0').trim_end_matches('.').to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    const NOON: u64 = 20_000 * DAY_S + 43_200;

    #[test]
    fn decimals_are_exact() {
        assert_eq!(micros("0.0042"), Some(4_200));
        assert_eq!(micros("5"), Some(5_000_000));
        assert_eq!(micros("1.5"), Some(1_500_000));
        assert_eq!(micros(".25"), Some(250_000));
        for bad in ["", ".", "1.0000001", "-1", "1e3", "1,5", "x"] {
            assert_eq!(micros(bad), None, "{bad}");
        }
        assert_eq!(decimal(4_200), "0.0042");
        assert_eq!(decimal(5_000_000), "5");
    }

    #[test]
    fn a_task_reserves_what_is_left_is_charged_as_usage_arrives_and_releases_the_rest() {
        let mut a = Allowance::new("USD", 1_000_000, NOON);
        assert_eq!(a.reserve("t1", NOON), Ok(1_000_000));
        assert_eq!(a.reserve("t2", NOON), Err(Refused::Busy("t1".into())));
        a.model_started("t1");
        assert_eq!(a.usage("t1", 300_000, NOON), Metered::Continue);
        assert_eq!(a.usage("t1", 250_000, NOON), Metered::Continue, "cumulative: a lower figure charges nothing");
        a.complete("t1");
        assert_eq!((a.spent, a.remaining(NOON)), (300_000, 700_000));
        assert_eq!(a.reserve("t2", NOON), Ok(700_000));
        assert_eq!(a.usage("t2", 900_000, NOON), Metered::Cancel, "at the allowance the task is cancelled");
        a.complete("t2");
        assert_eq!((a.spent, a.remaining(NOON)), (1_200_000, 0), "an overshoot is recorded, never hidden");
        assert_eq!(a.reserve("t3", NOON), Err(Refused::Exhausted { spent: 1_200_000, daily: 1_000_000 }));
        assert_eq!(a.reserve("t3", NOON + DAY_S), Ok(1_000_000), "a new UTC day");
    }

    #[test]
    fn unknown_costs_block_until_recorded_and_cleared() {
        let mut a = Allowance::new("USD", 1_000_000, NOON);
        a.reserve("t1", NOON).unwrap();
        a.fail("t1");
        assert_eq!(a.reserve("t2", NOON), Ok(1_000_000), "a failure before the model starts settles at zero");
        a.model_started("t2");
        a.complete("t2");
        let pending = a.pending.clone().unwrap();
        assert_eq!((pending.why, pending.missing_cost), (PendingWhy::Unmetered, None));
        assert!(matches!(a.reserve("t3", NOON + DAY_S), Err(Refused::PendingReconciliation(_))), "across midnight too");
        assert_eq!(a.clear(), Err(Reconcile::CostNotRecorded));
        a.reconcile(120_000, NOON + DAY_S).unwrap();
        assert_eq!(a.spent, 120_000, "the recorded cost is charged");
        a.clear().unwrap();
        assert_eq!(a.reserve("t3", NOON + DAY_S), Ok(880_000));
        a.model_started("t3");
        a.usage("t3", 10_000, NOON + DAY_S);
        a.interrupted();
        let pending = a.pending.clone().unwrap();
        assert_eq!((pending.why, pending.used_known, pending.missing_cost), (PendingWhy::Interrupted, 10_000, None));
    }
}

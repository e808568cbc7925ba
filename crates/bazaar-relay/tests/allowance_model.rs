//! The model test of model-usage allowances: random sequences of reserve,
//! usage (cumulative), complete, fail, crash (restart), midnight, reconcile
//! and clear, checked after every step against a shadow that knows only the
//! rules: a reservation is never more than the day's allowance nor less than
//! one unit; a pending attempt blocks new work; an unknown cost becomes a
//! number only by the owner's record, and a pending attempt leaves only by
//! the owner's clear after that record; what is spent today is exactly what
//! was charged today.

use bazaar_relay::labor::allowance::{Allowance, Micros, Refused};
use proptest::prelude::*;

const DAILY: Micros = 1_000_000;
const START_S: u64 = 20_000 * 86_400 + 3_600;

#[derive(Debug, Clone)]
enum Step {
    Reserve,
    ModelStarted,
    Usage(Micros),
    Complete,
    Fail,
    Crash,
    Later(u64),
    Midnight,
    Reconcile(Micros),
    Clear,
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        3 => Just(Step::Reserve),
        2 => Just(Step::ModelStarted),
        4 => (0u64..1_400_000).prop_map(Step::Usage),
        2 => Just(Step::Complete),
        1 => Just(Step::Fail),
        1 => Just(Step::Crash),
        1 => (1u64..20_000).prop_map(Step::Later),
        1 => Just(Step::Midnight),
        1 => (0u64..500_000).prop_map(Step::Reconcile),
        1 => Just(Step::Clear),
    ]
}

/// What the rules say, kept beside the real thing.
#[derive(Default)]
struct Shadow {
    /// Charged on the current day.
    spent_today: Micros,
    /// Whether the pending attempt's cost was recorded by the owner.
    recorded: bool,
    tasks: u64,
}

fn run(steps: &[Step]) {
    let mut now = START_S;
    let mut a = Allowance::new("USD", DAILY, now);
    let mut shadow = Shadow::default();
    for step in steps {
        let day_before = now / 86_400;
        let pending_before = a.pending.clone();
        let used_before = a.active.as_ref().map_or(0, |r| r.used);
        match step {
            Step::Reserve => {
                shadow.tasks += 1;
                let result = a.reserve(&format!("t{}", shadow.tasks), now);
                if pending_before.is_some() {
                    assert!(matches!(result, Err(Refused::PendingReconciliation(_))), "pending blocks work");
                }
                if let Ok(reserved) = result {
                    assert!((1..=DAILY).contains(&reserved), "reserved {reserved}");
                    assert_eq!(reserved, DAILY.saturating_sub(shadow.spent_today));
                }
            }
            Step::ModelStarted => {
                if let Some(task) = a.active.as_ref().map(|r| r.task.clone()) {
                    a.model_started(&task);
                }
            }
            Step::Usage(cumulative) => {
                if let Some(task) = a.active.as_ref().map(|r| r.task.clone()) {
                    a.usage(&task, *cumulative, now);
                    shadow.spent_today += cumulative.saturating_sub(used_before);
                }
            }
            Step::Complete | Step::Fail => {
                if let Some(task) = a.active.as_ref().map(|r| r.task.clone()) {
                    if matches!(step, Step::Complete) {
                        a.complete(&task)
                    } else {
                        a.fail(&task)
                    }
                }
            }
            Step::Crash => {
                let json = serde_json::to_string(&a).unwrap();
                a = serde_json::from_str(&json).unwrap();
                a.interrupted();
            }
            Step::Later(seconds) => now += seconds,
            Step::Midnight => now = (now / 86_400 + 1) * 86_400,
            Step::Reconcile(cost) => {
                let before = a.pending.as_ref().and_then(|p| p.missing_cost).unwrap_or(0);
                if a.reconcile(*cost, now).is_ok() {
                    if now / 86_400 != day_before {
                        shadow.spent_today = 0;
                    }
                    shadow.spent_today += cost.saturating_sub(before);
                    shadow.recorded = true;
                }
            }
            Step::Clear => {
                let cleared = a.clear().is_ok();
                assert_eq!(cleared, pending_before.as_ref().is_some_and(|p| p.missing_cost.is_some()));
                if cleared {
                    shadow.recorded = false;
                }
            }
        }
        if now / 86_400 != day_before && !matches!(step, Step::Reconcile(_)) {
            // The next charge or reservation rolls the day: nothing carried over.
            shadow.spent_today = 0;
            a.remaining(now);
        }
        check(&mut a, &shadow, pending_before.as_ref(), now);
    }
}

fn check(
    a: &mut Allowance,
    shadow: &Shadow,
    pending_before: Option<&bazaar_relay::labor::allowance::Pending>,
    now: u64,
) {
    assert_eq!(a.spent, shadow.spent_today, "spent today is exactly what was charged today");
    assert_eq!(a.remaining(now), DAILY.saturating_sub(shadow.spent_today));
    if let Some(active) = &a.active {
        assert!(active.reserved >= 1 && active.reserved <= DAILY);
        assert!(a.pending.is_none(), "no task runs while an attempt is pending");
    }
    match (&a.pending, pending_before) {
        (Some(now_pending), _) => {
            assert_eq!(
                now_pending.missing_cost.is_some(),
                shadow.recorded,
                "an unknown cost becomes a number only by the owner's record"
            );
        }
        (None, Some(before)) => {
            assert!(before.missing_cost.is_some(), "a pending attempt leaves only after its cost is recorded")
        }
        (None, None) => {}
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn allowances_keep_their_rules(steps in proptest::collection::vec(step(), 1..80)) {
        run(&steps);
    }
}

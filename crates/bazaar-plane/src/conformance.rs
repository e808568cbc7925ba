//! The conformance skeleton every plane's suite runs on (the ledger's `bazaar_store::conformance`, the
//! conversation plane's and the relay's): a suite is a list of named cases, each run on a store of its
//! own, in order, with its name printed before it runs. Every case runs even when an earlier one fails,
//! and the suite then fails naming each case that did, with its message, so one run of an engine shows
//! everything it breaks rather than the first thing.

use futures::FutureExt;
use std::future::Future;
use std::panic::AssertUnwindSafe;

/// One case's failure: its name and what it panicked with.
fn failure(name: &str, payload: &(dyn std::any::Any + Send)) -> String {
    let message = payload
        .downcast_ref::<String>()
        .map(String::as_str)
        .or_else(|| payload.downcast_ref::<&str>().copied())
        .unwrap_or("(a panic without a message)");
    format!("{name}: {message}")
}

fn conclude(plane: &str, ran: usize, failed: &[String]) {
    assert!(ran > 0, "the {plane} conformance suite has no cases");
    assert!(failed.is_empty(), "{plane} conformance: {} of {ran} cases failed:\n{}", failed.len(), failed.join("\n"));
}

/// Runs each `(name, case)` through `run` (which opens the case's store and runs it).
pub fn run<C>(plane: &str, cases: impl IntoIterator<Item = (&'static str, C)>, mut run: impl FnMut(C)) {
    let mut ran = 0;
    let mut failed = Vec::new();
    for (name, case) in cases {
        eprintln!("{plane} conformance: {name}");
        ran += 1;
        if let Err(payload) = std::panic::catch_unwind(AssertUnwindSafe(|| run(case))) {
            failed.push(failure(name, payload.as_ref()));
        }
    }
    conclude(plane, ran, &failed);
}

/// [`run`] for a suite whose cases are async.
pub async fn run_async<C, F: Future<Output = ()>>(
    plane: &str,
    cases: impl IntoIterator<Item = (&'static str, C)>,
    mut run: impl FnMut(C) -> F,
) {
    let mut ran = 0;
    let mut failed = Vec::new();
    for (name, case) in cases {
        eprintln!("{plane} conformance: {name}");
        ran += 1;
        // A case may fail while its future is made, or while it runs.
        let outcome = match std::panic::catch_unwind(AssertUnwindSafe(|| run(case))) {
            Ok(future) => AssertUnwindSafe(future).catch_unwind().await,
            Err(payload) => Err(payload),
        };
        if let Err(payload) = outcome {
            failed.push(failure(name, payload.as_ref()));
        }
    }
    conclude(plane, ran, &failed);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cases() -> Vec<(&'static str, u32)> {
        vec![("first", 1), ("second_fails", 2), ("third", 3), ("fourth_fails", 4)]
    }

    fn case(n: u32, seen: &mut Vec<u32>) {
        seen.push(n);
        assert!(n % 2 == 1, "case {n} is even");
    }

    /// Every case runs although two fail, and the failure names both, with their messages.
    #[test]
    fn every_case_runs_and_each_failure_is_named() {
        let mut seen = Vec::new();
        let outcome = std::panic::catch_unwind(AssertUnwindSafe(|| run("test", cases(), |n| case(n, &mut seen))));
        assert_eq!(seen, vec![1, 2, 3, 4]);
        let payload = outcome.expect_err("two cases failed");
        let text = payload.downcast_ref::<String>().unwrap();
        assert!(text.contains("2 of 4 cases failed"), "{text}");
        assert!(text.contains("second_fails: case 2 is even") && text.contains("fourth_fails: case 4 is even"));
        assert!(!text.contains("first") && !text.contains("third"), "{text}");
    }

    #[test]
    fn the_async_runner_does_the_same_and_a_clean_suite_passes() {
        let mut seen = Vec::new();
        // Odd cases fail while their future is made, even ones while it runs: both are caught.
        let later = std::sync::Mutex::new(Vec::new());
        let outcome = std::panic::catch_unwind(AssertUnwindSafe(|| {
            futures::executor::block_on(run_async("test", cases(), |n| {
                if n % 2 == 1 {
                    seen.push(n);
                    assert!(n == 1, "case {n} fails early");
                }
                let later = &later;
                async move {
                    if n % 2 == 0 {
                        case(n, &mut later.lock().unwrap_or_else(std::sync::PoisonError::into_inner));
                    }
                }
            }))
        }));
        let later = later.into_inner().unwrap_or_else(std::sync::PoisonError::into_inner);
        assert_eq!((seen, later), (vec![1, 3], vec![2, 4]));
        let payload = outcome.expect_err("three cases failed");
        let text = payload.downcast_ref::<String>().unwrap();
        assert!(text.contains("3 of 4 cases failed") && text.contains("third: case 3 fails early"), "{text}");
        run("test", vec![("only", 1)], |n| assert_eq!(n, 1));
        let empty = std::panic::catch_unwind(|| run("test", Vec::<(&str, u32)>::new(), |_| {}));
        assert!(empty.is_err(), "an empty suite fails");
    }
}

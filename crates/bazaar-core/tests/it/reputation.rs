//! Reputation arithmetic (`bazaar-rep-v1`) as table tests, the fold over real
//! event shapes, and a property test: adding a failure never raises a score.

use bazaar_core::chain::{append, ChainHead};
use bazaar_core::model::Event;
use bazaar_core::reputation::{
    combine, compute, decay_ppm, score_bps, Figures, Imported, Ledger, SnapshotError, Work, PPM, SNAPSHOT_FORMAT,
};
use bazaar_types::{MemberId, Timestamp};
use proptest::prelude::*;
use serde_json::json;

const DAY: i64 = 86_400_000;
/// A Wednesday at noon, far from the epoch.
const NOW: i64 = 20_000 * DAY + DAY / 2;

fn m(id: &str) -> MemberId {
    MemberId::from(id)
}

fn job(buyer_owner: &str, days_ago: i64, quality_bps: u32) -> (MemberId, Work) {
    (
        m(buyer_owner),
        Work { buyer: m(buyer_owner), amount_minor: 1_000, at: Timestamp(NOW - days_ago * DAY), quality_bps },
    )
}

fn figures(jobs: Vec<(MemberId, Work)>) -> Figures {
    compute(&m("seller-owner"), jobs, &[], Timestamp(NOW))
}

#[test]
fn no_work_scores_one_half_with_a_zero_lower_bound() {
    let f = figures(vec![]);
    assert_eq!((f.settled_count, f.score_bps, f.score_lower_bound_bps), (0, 5_000, 0));
    assert_eq!(f.formula, "bazaar-rep-v1");
}

#[test]
fn one_fresh_success_from_each_of_three_owners() {
    let f = figures(vec![job("a", 0, 10_000), job("b", 0, 10_000), job("c", 0, 10_000)]);
    assert_eq!(f.weighted_success_ppm, 3 * PPM);
    assert_eq!(f.weighted_failure_ppm, 0);
    assert_eq!(f.score_bps, 8_000, "(3+1)/(3+0+2)");
    assert_eq!((f.distinct_buyer_owners, f.top_buyer_share_bps), (3, 3_333));
    assert_eq!(f.settled_volume_minor, "3000");
}

#[test]
fn self_dealing_is_excluded() {
    let f = figures(vec![job("seller-owner", 0, 10_000), job("seller-owner", 1, 10_000), job("a", 0, 10_000)]);
    assert_eq!(f.excluded_same_owner, 2);
    assert_eq!(f.settled_count, 1);
    assert_eq!(f.weighted_success_ppm, PPM);
    assert_eq!(f.distinct_buyer_owners, 1);
}

#[test]
fn one_owner_adds_at_most_one_success_per_iso_week() {
    // Forty tiny buys in one week from one owner count once; the raw count says forty.
    let many: Vec<_> = (0..40).map(|_| job("a", 0, 10_000)).collect();
    let f = figures(many);
    assert_eq!(f.settled_count, 40);
    assert_eq!(f.weighted_success_ppm, PPM);
    assert_eq!(f.score_bps, score_bps(PPM, 0));
    assert_eq!(f.top_buyer_share_bps, 10_000);
    // The same owner in two different weeks counts twice (the older one decayed).
    let f = figures(vec![job("a", 0, 10_000), job("a", 14, 10_000)]);
    assert_eq!(f.weighted_success_ppm, PPM + decay_ppm(14));
}

#[test]
fn failures_are_never_capped() {
    let f = figures((0..5).map(|_| job("a", 0, 0)).collect());
    assert_eq!(f.weighted_failure_ppm, 5 * PPM);
    assert_eq!(f.failure_count, 5);
    assert_eq!(f.score_bps, score_bps(0, 5 * PPM));
}

#[test]
fn decay_halves_every_half_life_and_the_window_drops_old_work() {
    assert_eq!(decay_ppm(0), 1_000_000);
    assert_eq!(decay_ppm(90), 707_107);
    assert_eq!(decay_ppm(180), 500_000);
    assert_eq!(decay_ppm(365), 245_233);
    let f = figures(vec![job("a", 180, 10_000)]);
    assert_eq!(f.weighted_success_ppm, 500_000);
    let f = figures(vec![job("a", 366, 10_000)]);
    assert_eq!((f.settled_count, f.weighted_success_ppm), (0, 0), "beyond the 365-day window");
}

#[test]
fn a_lost_dispute_lowers_the_score() {
    let clean = figures(vec![job("a", 0, 10_000), job("b", 0, 10_000)]);
    let lost = figures(vec![job("a", 0, 10_000), job("b", 0, 0)]);
    let split = figures(vec![job("a", 0, 10_000), job("b", 0, 6_000)]);
    assert!(lost.score_bps < split.score_bps && split.score_bps < clean.score_bps);
    assert!(lost.score_lower_bound_bps < clean.score_lower_bound_bps);
    assert_eq!(split.weighted_failure_ppm, 400_000);
}

fn chain() -> (ChainHead, Vec<Event>) {
    (ChainHead::genesis(), Vec::new())
}

fn push(state: &mut (ChainHead, Vec<Event>), kind: &str, body: serde_json::Value, at_days_ago: i64) {
    let event = append(&mut state.0, kind, body, &m("x"), &m("x"), Timestamp(NOW - at_days_ago * DAY));
    state.1.push(event);
}

fn fold(events: &[Event]) -> Ledger {
    let mut ledger = Ledger::new();
    for event in events {
        ledger.observe(event);
    }
    ledger
}

/// The events a registry writes: two owners, a merchant agent, buyers, calls, a milestone, a dispute, stake.
fn story() -> (ChainHead, Vec<Event>) {
    let mut c = chain();
    push(&mut c, "owner.created", json!({"id": "own-s", "kind": "owner", "owner": null, "handle": "h"}), 30);
    push(&mut c, "owner.created", json!({"id": "own-b", "kind": "owner", "owner": null, "handle": "h"}), 30);
    push(&mut c, "agent.enrolled", json!({"id": "seller", "kind": "agent", "owner": "own-s", "handle": "seller"}), 30);
    push(&mut c, "agent.enrolled", json!({"id": "twin", "kind": "agent", "owner": "own-s", "handle": "twin"}), 30);
    push(&mut c, "agent.enrolled", json!({"id": "buyer", "kind": "agent", "owner": "own-b", "handle": "buyer"}), 30);
    for (i, buyer) in ["buyer", "twin", "buyer"].iter().enumerate() {
        push(
            &mut c,
            "settlement.posted",
            json!({"buyer": buyer, "merchant": "seller", "order_id": format!("o{i}"), "amount_minor": 500}),
            20 - i as i64 * 7,
        );
    }
    push(&mut c, "stake.locked", json!({"member": "seller", "locked_minor": 50_000}), 20);
    push(
        &mut c,
        "contract.created",
        json!({"contract": "ctr_1", "buyer": "buyer", "seller": "seller", "arbiter": "desk", "total_minor": 9_000, "milestones": 1}),
        5,
    );
    push(
        &mut c,
        "milestone.released",
        json!({"contract": "ctr_1", "milestone": 0, "amount_minor": 9_000, "seller": "seller"}),
        1,
    );
    c
}

#[test]
fn the_fold_reads_registry_events() {
    let c = story();
    let ledger = fold(&c.1);
    let f = ledger.figures(&m("seller"), Timestamp(NOW));
    assert_eq!(f.excluded_same_owner, 1, "the twin agent's purchase is self-dealing");
    assert_eq!(f.settled_count, 3, "two calls and one milestone from own-b");
    assert_eq!(f.settled_volume_minor, "10000");
    assert_eq!(f.distinct_buyer_owners, 1);
    assert_eq!(ledger.seq, c.1.len() as u64);
    assert_eq!(ledger.head, c.0.hash);
}

#[test]
fn stake_never_enters_the_score_and_a_lost_dispute_lowers_it() {
    let c = story();
    let before = fold(&c.1).figures(&m("seller"), Timestamp(NOW));
    let mut staked = c.clone();
    push(&mut staked, "stake.locked", json!({"member": "seller", "locked_minor": 9_000_000}), 0);
    let ledger = fold(&staked.1);
    assert_eq!(ledger.figures(&m("seller"), Timestamp(NOW)), before, "stake changes no figure");
    assert_eq!(ledger.stake(&m("seller")).locked_minor, "9050000");

    let mut disputed = c.clone();
    let subject = json!({"type": "milestone", "contract": "ctr_1", "index": 0});
    push(
        &mut disputed,
        "dispute.filed",
        json!({"dispute": "dsp_1", "respondent": "seller", "claimant": "buyer", "subject": subject}),
        0,
    );
    push(
        &mut disputed,
        "dispute.executed",
        json!({"dispute": "dsp_1", "respondent": "seller", "claimant": "buyer", "subject": subject, "winner": "claimant",
            "refunded_minor": 9_000, "released_minor": 0, "slashed_minor": 2_000}),
        0,
    );
    let ledger = fold(&disputed.1);
    let after = ledger.figures(&m("seller"), Timestamp(NOW));
    assert!(after.score_bps < before.score_bps, "{} !< {}", after.score_bps, before.score_bps);
    assert_eq!((after.disputes_filed, after.disputes_lost, after.refunds), (1, 1, 1));
    assert_eq!(after.failure_count, 1);
    let stake = ledger.stake(&m("seller"));
    assert_eq!((stake.slashed_minor.as_str(), stake.slash_count), ("2000", 1));
    assert_eq!(stake.locked_minor, "48000");
}

#[test]
fn imported_reputation_counts_at_its_weight() {
    let local = figures(vec![job("a", 0, 10_000)]);
    let import = Imported {
        registry: "did:key:zPeer".into(),
        weight_bps: 5_000,
        weighted_success_ppm: 4 * PPM,
        weighted_failure_ppm: 2 * PPM,
        score_bps: 0,
        valid_until_ms: 0,
    };
    let combined = combine(&local, &[import]);
    assert_eq!(combined.weighted_success_ppm, 3 * PPM);
    assert_eq!(combined.weighted_failure_ppm, PPM);
    assert_eq!(combined.score_bps, score_bps(3 * PPM, PPM));
}

fn arb_job() -> impl Strategy<Value = (MemberId, Work)> {
    (0usize..4, 0i64..400, prop_oneof![Just(10_000u32), 0u32..=10_000], 1u64..5_000).prop_map(
        |(owner, days, q, amount)| {
            let owner = ["seller-owner", "a", "b", "c"][owner];
            (m(owner), Work { buyer: m(owner), amount_minor: amount, at: Timestamp(NOW - days * DAY), quality_bps: q })
        },
    )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// A new failed job, anywhere in time, from anyone, never raises either score.
    #[test]
    fn adding_a_failure_never_raises_the_score(jobs in prop::collection::vec(arb_job(), 0..40), failure in arb_job()) {
        let before = figures(jobs.clone());
        let mut more = jobs;
        more.push((failure.0, Work { quality_bps: 0, ..failure.1 }));
        let after = figures(more);
        prop_assert!(after.score_bps <= before.score_bps, "{} > {}", after.score_bps, before.score_bps);
        prop_assert!(after.score_lower_bound_bps <= before.score_lower_bound_bps);
    }

    /// A dispute that refunds part of an existing job never raises either score.
    #[test]
    fn lowering_a_jobs_quality_never_raises_the_score(
        jobs in prop::collection::vec(arb_job(), 1..40), pick in any::<prop::sample::Index>(), q in 0u32..=10_000,
    ) {
        let before = figures(jobs.clone());
        let mut worse = jobs;
        let i = pick.index(worse.len());
        worse[i].1.quality_bps = worse[i].1.quality_bps.min(q);
        let after = figures(worse);
        prop_assert!(after.score_bps <= before.score_bps);
        prop_assert!(after.score_lower_bound_bps <= before.score_lower_bound_bps);
    }

    /// The fold is deterministic and order of equal-time work does not matter.
    #[test]
    fn figures_do_not_depend_on_input_order(jobs in prop::collection::vec(arb_job(), 0..30)) {
        let mut reversed = jobs.clone();
        reversed.reverse();
        prop_assert_eq!(figures(jobs), figures(reversed));
    }
}

/// One event of the kinds the fold reads, over a small cast so they collide: enrolments, calls, contracts and
/// releases, disputes filed and executed on either, stake, passports.
const WINNERS: [&str; 3] = ["claimant", "respondent", "split"];

fn arb_event() -> impl Strategy<Value = (String, serde_json::Value, i64)> {
    let who = |i: usize| ["s1", "s2", "b1", "b2"][i % 4].to_string();
    (0usize..9, 0usize..4, 0usize..4, 0u32..6, 1u64..5_000, 0i64..400).prop_map(move |(kind, a, b, n, amount, days)| {
        let subject = if n % 2 == 0 {
            json!({"type": "call", "merchant": who(a), "order_id": format!("o{n}")})
        } else {
            json!({"type": "milestone", "contract": format!("ctr_{n}"), "index": 0})
        };
        let (kind, body) = match kind {
            0 => ("agent.enrolled", json!({"id": who(a), "kind": "agent", "owner": format!("own-{}", b % 2), "handle": "h"})),
            1 => ("settlement.posted", json!({"buyer": who(b), "merchant": who(a), "order_id": format!("o{n}"), "amount_minor": amount})),
            2 => ("contract.created", json!({"contract": format!("ctr_{n}"), "buyer": who(b), "seller": who(a), "arbiter": "desk", "total_minor": amount, "milestones": 1})),
            3 => ("milestone.released", json!({"contract": format!("ctr_{n}"), "milestone": 0, "amount_minor": amount, "seller": who(a)})),
            4 => ("dispute.filed", json!({"dispute": format!("dsp_{n}"), "respondent": who(a), "claimant": who(b), "subject": subject})),
            5 => ("dispute.executed", json!({"dispute": format!("dsp_{n}"), "respondent": who(a), "claimant": who(b), "subject": subject,
                "winner": WINNERS[b % 3], "refunded_minor": amount / 2, "released_minor": amount / 3, "slashed_minor": amount % 7})),
            6 => ("stake.locked", json!({"member": who(a), "locked_minor": amount})),
            7 => ("stake.withdrawn", json!({"member": who(a), "withdrawn_minor": amount / 4})),
            _ => ("passport.issued", json!({"subject": who(a)})),
        };
        (kind.to_string(), body, days)
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    /// Folding from a snapshot taken at any seq, written down and read back, ends in the same fold (and so the same
    /// figures for everyone) as folding the whole ledger from genesis.
    #[test]
    fn a_fold_taken_up_from_a_snapshot_matches_the_fold_from_genesis(
        events in prop::collection::vec(arb_event(), 1..60),
        cut in 0usize..60,
    ) {
        let mut c = chain();
        // Ledger order is time order: the oldest first.
        let mut events = events;
        events.sort_by_key(|e| std::cmp::Reverse(e.2));
        for (kind, body, days) in events {
            push(&mut c, &kind, body, days);
        }
        let cut = cut.min(c.1.len());
        let whole = fold(&c.1);
        let works = c.1.iter().filter(|e| e.kind == "settlement.posted" || e.kind == "dispute.filed").count();
        prop_assert!(works == 0 || whole.entries() > 0, "the generated bodies decode as the fold's inputs");
        let written = fold(&c.1[..cut]).snapshot();
        let mut resumed = Ledger::restore(&written).expect("a snapshot reads back");
        prop_assert_eq!(resumed.seq, cut as u64);
        for event in &c.1[cut..] {
            resumed.observe(event);
        }
        prop_assert_eq!(&resumed, &whole);
        for member in ["s1", "s2", "b1", "b2"] {
            prop_assert_eq!(resumed.figures(&m(member), Timestamp(NOW)), whole.figures(&m(member), Timestamp(NOW)));
            prop_assert_eq!(resumed.stake(&m(member)), whole.stake(&m(member)));
        }
    }
}

#[test]
fn a_snapshot_of_another_formula_or_shape_is_refused_so_the_node_folds_from_genesis() {
    let written = fold(&story().1).snapshot();
    let text = String::from_utf8(written.clone()).unwrap();
    assert!(text.contains(SNAPSHOT_FORMAT) && text.contains("bazaar-rep-v1"), "{text}");
    let older = text.replace("bazaar-rep-v1", "bazaar-rep-v0");
    assert!(matches!(Ledger::restore(older.as_bytes()), Err(SnapshotError::Stale { .. })));
    let reshaped = text.replace(SNAPSHOT_FORMAT, "bazaar-rep-fold-v0");
    assert!(matches!(Ledger::restore(reshaped.as_bytes()), Err(SnapshotError::Stale { .. })));
    assert!(matches!(Ledger::restore(&written[..written.len() / 2]), Err(SnapshotError::Undecodable(_))));
    assert_eq!(Ledger::restore(&written).unwrap(), fold(&story().1));
}

//! The storefront's rules as table tests (every offer check, its order, its
//! numbers) and allocation as properties: never more than offered or
//! requested, no cheaper valid offer left unused while a dearer one is used,
//! deterministic whatever the order offers arrive in.

use bazaar_core::market::{allocate, check_offer, Proposal, Request, Terms, ValidOffer};
use bazaar_types::{Amount, MemberId, Timestamp};
use proptest::prelude::*;

const DAY: i64 = 86_400_000;
const NOW: Timestamp = Timestamp(1_800_000_000_000);

/// A maker: list 3200, floor 2400, at most 20 % off (so her lowest price is 2560), 2 a day, 20 at most.
fn maker() -> Terms {
    Terms {
        list_price: Amount(3_200),
        floor: Amount(2_400),
        max_discount_bps: 2_000,
        capacity_per_day: 2,
        capacity_max: 20,
        lead_time_days: 3,
        notice_days: 7,
    }
}

fn request(days: i64) -> Request {
    Request { quantity: 40, max_unit_price: Amount(3_000), deadline: Timestamp(NOW.ms() + days * DAY) }
}

fn check(terms: &Terms, request: &Request, price: u64, quantity: u64, attempts: u32, committed: u64) -> String {
    match check_offer(terms, request, &Proposal { unit_price: Amount(price), quantity }, attempts, committed, NOW) {
        Ok(()) => "ok".into(),
        Err(refusal) => refusal.code,
    }
}

#[test]
fn lowest_price_is_the_higher_of_floor_and_discounted_list() {
    assert_eq!(maker().lowest_price(), Amount(2_560), "3200 less 20 % = 2560 > floor 2400");
    let high_floor = Terms { floor: Amount(2_700), ..maker() };
    assert_eq!(high_floor.lowest_price(), Amount(2_700));
    let no_discount = Terms { max_discount_bps: 0, ..maker() };
    assert_eq!(no_discount.lowest_price(), Amount(3_200));
}

#[test]
fn deliverable_counts_making_days_less_lead_time_capped_and_committed() {
    let terms = maker();
    let deadline = Timestamp(NOW.ms() + 30 * DAY);
    assert_eq!(terms.deliverable(NOW, deadline, 0), 20, "2/day × 27 days = 54, capped at 20");
    assert_eq!(terms.deliverable(NOW, deadline, 15), 5);
    assert_eq!(terms.deliverable(NOW, Timestamp(NOW.ms() + 8 * DAY), 0), 10, "2/day × (8 − 3) days");
    assert_eq!(terms.deliverable(NOW, Timestamp(NOW.ms() + 2 * DAY), 0), 0, "lead time longer than the time left");
}

#[test]
fn each_rule_refuses_with_its_code() {
    let terms = maker();
    let table: &[(&str, Request, u64, u64, u32, u64, &str)] = &[
        ("a valid offer", request(30), 2_800, 12, 0, 0, "ok"),
        ("fewer units than requested is fine", request(30), 2_560, 1, 0, 0, "ok"),
        ("exactly the lowest price", request(30), 2_560, 10, 0, 0, "ok"),
        ("exactly the cap", request(30), 3_000, 10, 0, 0, "ok"),
        ("below the floor", request(30), 2_559, 10, 0, 0, "offer_below_floor"),
        ("above the cap", request(30), 3_001, 10, 0, 0, "offer_above_cap"),
        ("beyond capacity", request(30), 2_800, 21, 0, 0, "offer_beyond_capacity"),
        ("beyond what is left after commitments", request(30), 2_800, 6, 0, 15, "offer_beyond_capacity"),
        ("more than requested", Request { quantity: 5, ..request(30) }, 2_800, 6, 0, 0, "offer_beyond_capacity"),
        ("zero units", request(30), 2_800, 0, 0, 0, "offer_beyond_capacity"),
        ("the notice she needs", request(6), 2_800, 2, 0, 0, "offer_notice_too_short"),
        ("deadline passed", request(0), 2_800, 2, 0, 0, "offer_deadline_passed"),
        ("second revision still allowed", request(30), 2_800, 12, 2, 0, "ok"),
        ("a fourth proposal", request(30), 2_800, 12, 3, 0, "offer_revision_limit"),
    ];
    for (what, request, price, quantity, attempts, committed, expected) in table {
        assert_eq!(check(&terms, request, *price, *quantity, *attempts, *committed), *expected, "{what}");
    }
}

#[test]
fn the_first_failing_rule_wins_in_a_fixed_order() {
    let terms = maker();
    // Below floor AND beyond capacity AND notice too short: notice is checked first.
    assert_eq!(check(&terms, &request(6), 100, 99, 0, 0), "offer_notice_too_short");
    // Above the cap AND beyond capacity: price first.
    assert_eq!(check(&terms, &request(30), 9_999, 99, 0, 0), "offer_above_cap");
    // Out of attempts beats everything.
    assert_eq!(check(&terms, &request(0), 100, 99, 3, 0), "offer_revision_limit");
}

#[test]
fn refusals_carry_the_numbers_involved() {
    let refusal = check_offer(&maker(), &request(30), &Proposal { unit_price: Amount(2_000), quantity: 5 }, 0, 0, NOW)
        .unwrap_err();
    assert_eq!(refusal.facts["lowest_price_minor"], 2_560);
    assert_eq!(refusal.facts["unit_price_minor"], 2_000);
    assert_eq!(refusal.facts["floor_minor"], 2_400);
}

fn offer(id: &str, seller: &str, price: u64, quantity: u64, seq: u64) -> ValidOffer {
    ValidOffer { offer_id: id.into(), seller: MemberId::from(seller), unit_price: Amount(price), quantity, seq }
}

#[test]
fn cheapest_first_then_earliest_then_seller() {
    let offers = [
        offer("o1", "did:key:zC", 2_800, 10, 5),
        offer("o2", "did:key:zA", 2_600, 10, 9),
        offer("o3", "did:key:zB", 2_800, 30, 4),
        offer("o4", "did:key:zD", 2_600, 10, 9),
    ];
    let allocation = allocate(40, &offers);
    let order: Vec<(&str, u64)> = allocation.lines.iter().map(|l| (l.offer_id.as_str(), l.units)).collect();
    assert_eq!(order, [("o2", 10), ("o4", 10), ("o3", 20)], "same price and seq: seller DID decides");
    assert_eq!((allocation.filled, allocation.unfilled), (40, 0));
    assert_eq!(allocation.total, Amount(10 * 2_600 + 10 * 2_600 + 20 * 2_800));
    let short = allocate(100, &offers);
    assert_eq!((short.filled, short.unfilled), (60, 40), "the remainder is reported");
}

fn arb_offers() -> impl Strategy<Value = Vec<ValidOffer>> {
    prop::collection::vec((0usize..5, 1u64..6, 0u64..30, 0u64..20), 0..12).prop_map(|rows| {
        rows.into_iter()
            .enumerate()
            .map(|(i, (seller, price, quantity, seq))| {
                offer(&format!("o{i}"), &format!("did:key:z{seller}"), 100 * price, quantity, seq)
            })
            .collect()
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn allocation_respects_quantities_and_prices(quantity in 0u64..80, offers in arb_offers()) {
        let allocation = allocate(quantity, &offers);
        let offered: u64 = offers.iter().map(|o| o.quantity).sum();
        prop_assert_eq!(allocation.filled, quantity.min(offered));
        prop_assert_eq!(allocation.filled + allocation.unfilled, quantity);
        prop_assert_eq!(allocation.lines.iter().map(|l| l.units).sum::<u64>(), allocation.filled);
        for line in &allocation.lines {
            let source = offers.iter().find(|o| o.offer_id == line.offer_id).unwrap();
            prop_assert!(line.units <= source.quantity && line.units > 0, "never more than offered");
            prop_assert_eq!(line.unit_price, source.unit_price, "pay as bid");
            prop_assert_eq!(line.amount.0, line.units * line.unit_price.0);
        }
        prop_assert_eq!(allocation.total.0, allocation.lines.iter().map(|l| l.amount.0).sum::<u64>());
        // No cheaper offer left (partly) unused while a dearer one is used.
        if let Some(dearest) = allocation.lines.iter().map(|l| l.unit_price).max() {
            for o in &offers {
                let used = allocation.lines.iter().find(|l| l.offer_id == o.offer_id).map_or(0, |l| l.units);
                if o.unit_price < dearest {
                    prop_assert_eq!(used, o.quantity, "cheaper offer {} not used in full", o.offer_id);
                }
            }
        }
    }

    #[test]
    fn allocation_is_deterministic_in_any_arrival_order(quantity in 0u64..80, offers in arb_offers(), seed in any::<u64>()) {
        let mut shuffled = offers.clone();
        // A cheap deterministic shuffle.
        let n = shuffled.len();
        for i in 0..n {
            let j = ((seed.wrapping_mul(6364136223846793005).wrapping_add(i as u64)) % n as u64) as usize;
            shuffled.swap(i, j);
        }
        prop_assert_eq!(allocate(quantity, &offers), allocate(quantity, &shuffled));
    }
}

#[test]
fn makers_are_told_in_their_language_or_in_english() {
    use bazaar_core::order::{share_message, LANGUAGES};
    for language in LANGUAGES {
        let (text, fallback) = share_message(language, 12, "cushion covers", Amount(31_200), "2026-12-30");
        assert!(!fallback, "{language} has a translation");
        assert!(text.contains("12") && text.contains("31200") && text.contains("2026-12-30"), "{language}: {text}");
    }
    let (spanish, _) = share_message("es-MX", 1, "x", Amount(1), "d");
    assert!(spanish.starts_with("Nuevo pedido"), "a regional tag uses its language");
    let (german, fallback) = share_message("de", 1, "x", Amount(1), "d");
    assert!(fallback, "no German yet");
    assert!(german.starts_with("New order"), "falls back to English");
}

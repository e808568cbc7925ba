//! Commands whose new document takes its id from the Idempotency-Key (a lease, a contract, a
//! request for quote, an order, an escrowed hire's contract). Sent again under the same key once the key's
//! record has been pruned (after `IDEMPOTENCY_RETENTION_S`), each must be refused with its own
//! code and nothing written but the refusal's record, and the writer must go on: a lease bought again this way met its
//! stored document as if new, and the invariant that failed stopped the writer — the registry
//! wrote nothing more (found by `bazaar-sim --seed 50 --steps 400 --faults peer-trouble`).

use bazaar_core::command::{Command, Op};
use bazaar_core::crypto::{sha256_hex, sign};
use bazaar_core::escrow::{self, MilestoneSpec};
use bazaar_core::hire::{self, offer_statement, LeaseOrder, Offer};
use bazaar_core::market::{self, Request};
use bazaar_sim::cast::{command, Cast};
use bazaar_sim::fault::{EngineFaults, FaultCounts, Shared};
use bazaar_sim::options::START;
use bazaar_sim::registry::Registry;
use bazaar_sim::rng::Rng;
use bazaar_store::Store;
use bazaar_types::limits::IDEMPOTENCY_RETENTION_S;
use bazaar_types::{Amount, Clock, ManualClock};
use futures::executor::block_on;
use std::sync::{Arc, Mutex};

/// A scratch directory, removed when the test is done with it.
struct Scratch(std::path::PathBuf);

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// One registry with the simulator's cast set up, on a fresh file in its own scratch directory.
fn registry(name: &str) -> (Registry, Cast, Arc<ManualClock>, Scratch) {
    let dir = std::env::temp_dir().join(format!("bazaar-sim-keys-{}-{name}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let shared = Shared::new(
        Arc::new(Mutex::new(Rng::new(1))),
        Arc::new(Mutex::new(FaultCounts::new())),
        EngineFaults::NONE,
        None,
    );
    let mut registry = Registry::new(dir.join("registry.sqlite"), shared);
    let clock = Arc::new(ManualClock::new(START));
    registry.open(&clock).unwrap();
    let cast = Cast::new(START);
    for batch in cast.setup(START) {
        for answer in registry.submit_group(batch).unwrap() {
            assert!(answer.unwrap().outcome.is_ok(), "setup");
        }
    }
    (registry, cast, clock, Scratch(dir))
}

/// Submits `command` alone: its outcome, as a code (`ok` for success).
fn submit(registry: &Registry, command: &Command) -> String {
    let mut answers = registry.submit_group(vec![command.clone()]).unwrap_or_else(|stopped| panic!("{stopped}"));
    match answers.pop().unwrap().unwrap().outcome {
        Ok(_) => "ok".into(),
        Err(refusal) => refusal.code.as_str().to_string(),
    }
}

/// `command`, accepted once, then — its key's record pruned — refused with `code`, the ledger
/// unchanged but for the refusal's record.
fn once_then_refused_after_pruning(registry: &Registry, clock: &ManualClock, command: &Command, code: &str) {
    let what = command.op.name();
    assert_eq!(submit(registry, command), "ok", "{what}: the first time");
    clock.advance_s(IDEMPOTENCY_RETENTION_S + 60);
    let cutoff = bazaar_types::Timestamp(clock.now().ms() - IDEMPOTENCY_RETENTION_S as i64 * 1_000);
    assert!(registry.prune_idempotency(cutoff, 10_000).unwrap() > 0, "{what}: the record was pruned");
    let head = block_on(registry.store().head()).unwrap();
    assert_eq!(submit(registry, command), code, "{what}: the same key, its record gone");
    let written = block_on(registry.store().events(head.seq, 10)).unwrap();
    let kinds: Vec<&str> = written.iter().map(|e| e.kind.as_str()).collect();
    assert_eq!(kinds, ["refusal.recorded"], "{what}: the refusal is recorded (its key was sent), nothing else");
}

fn audit_passes(registry: &Registry) {
    let audit = block_on(bazaar_store::audit::audit(registry.store(), &|_| {})).unwrap();
    assert!(audit.ok, "{:?}", audit.problems);
}

/// Each command, in turn, as [`once_then_refused_after_pruning`] says.
fn check_each(name: &str, commands: impl Fn(&Cast) -> Vec<(Command, &'static str)>) {
    let (registry, cast, clock, _scratch) = registry(name);
    for (command, code) in commands(&cast) {
        once_then_refused_after_pruning(&registry, &clock, &command, code);
    }
    audit_passes(&registry);
}

#[test]
fn a_lease_bought_again_under_a_pruned_key_is_refused_and_the_writer_goes_on() {
    check_each("lease", |cast| {
        let (payer, worker) = (&cast.agents[0], &cast.agents[2]);
        let order = LeaseOrder {
            worker: worker.id.clone(),
            pay_to: worker.id.clone(),
            price: Amount(100),
            period_s: 3_600,
            identity: sha256_hex(b"identity"),
            identity_of: payer.id.clone(),
        };
        vec![(command(payer, Some("lease-1".into()), Op::Hire(hire::Op::BuyLease { order })), "lease_exists")]
    });
}

#[test]
fn every_other_document_named_by_its_key_is_refused_again_under_a_pruned_key() {
    check_each("others", |cast| {
        let (buyer, seller) = (&cast.agents[0], &cast.agents[2]);
        let milestones =
            vec![MilestoneSpec { amount: Amount(500), description: "part".into(), due_at: START.plus_s(7 * 86_400) }];
        let contract = Op::Escrow(escrow::Op::CreateContract {
            seller: seller.id.clone(),
            arbiter: cast.desk.id.clone(),
            milestones,
            terms_hash: sha256_hex(b"terms"),
            review_window_s: 600,
        });
        let request = Request { quantity: 2, max_unit_price: Amount(1_000), deadline: START.plus_s(30 * 86_400) };
        let rfq = Op::Market(market::Op::CreateRfq { item: "mugs".into(), request, invited: Vec::new() });
        let (task, price) = (sha256_hex(b"task"), Amount(300));
        let statement = offer_statement(&seller.id, &task, &seller.id, price);
        let offer = Offer {
            specialist: seller.id.clone(),
            task,
            price,
            pay_to: seller.id.clone(),
            signature: sign(&cast.agent_keys[2], statement.as_bytes()),
            conversation: None,
            escrow: true,
        };
        vec![
            (command(buyer, Some("contract-1".into()), contract), "contract_exists"),
            (command(buyer, Some("rfq-1".into()), rfq), "rfq_invalid"),
            (command(buyer, Some("hire-1".into()), Op::Hire(hire::Op::Agree { offer })), "hire_exists"),
        ]
    });
}

#[test]
fn an_order_placed_again_under_a_pruned_key_is_refused() {
    let (registry, cast, clock, _scratch) = registry("order");
    let (buyer, seller) = (&cast.agents[0], &cast.agents[2]);
    let key = |k: &str| Some(k.to_string());
    let terms = market::Terms {
        list_price: Amount(1_000),
        floor: Amount(600),
        max_discount_bps: 2_000,
        capacity_per_day: 5,
        capacity_max: 40,
        lead_time_days: 1,
        notice_days: 2,
    };
    let spec = market::ListingSpec {
        sku: "mug".into(),
        title: "Mug".into(),
        description: String::new(),
        tags: Vec::new(),
        terms,
        language: "en".into(),
    };
    let listing = market::listing_id(&seller.id, &spec.sku);
    let request = Request { quantity: 2, max_unit_price: Amount(1_000), deadline: START.plus_s(30 * 86_400) };
    let rfq = market::rfq_id(&buyer.id, "rfq-o");
    let invited = vec![(seller.id.clone(), listing.clone())];
    let proposal = market::Proposal { unit_price: Amount(900), quantity: 2 };
    for command in [
        command(seller, key("list"), Op::Market(market::Op::PutListing { spec })),
        command(buyer, key("rfq-o"), Op::Market(market::Op::CreateRfq { item: "mugs".into(), request, invited })),
        command(
            seller,
            key("offer"),
            Op::Market(market::Op::MakeOffer { rfq: rfq.clone(), listing, proposal, committed: 0 }),
        ),
        command(buyer, key("close"), Op::Market(market::Op::CloseRfq { rfq: rfq.clone() })),
    ] {
        assert_eq!(submit(&registry, &command), "ok", "setting up: {}", command.op.name());
    }
    let closed = bazaar_sim::flows::read_doc::<market::Rfq>(registry.store(), &rfq).unwrap().unwrap();
    let order = command(buyer, key("order-1"), Op::Market(market::Op::order_for(&closed, false)));
    once_then_refused_after_pruning(&registry, &clock, &order, "order_exists");
    audit_passes(&registry);
}

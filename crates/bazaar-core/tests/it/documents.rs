//! Typed documents: every stored body carries its version, bodies written
//! before versions existed read as version 1, and a body this build cannot
//! read is refused with its kind, id and version — in a batch, it stops the
//! writer instead of being guessed at. And event bodies written by this
//! build decode back into their capability's types.

use bazaar_core::apply::{apply_batch, Config};
use bazaar_core::chain::ChainHead;
use bazaar_core::command::{Command, Idem, Op};
use bazaar_core::dispute::{self, Stake};
use bazaar_core::kernel::docs::{decode, encode, Document, VERSION_FIELD};
use bazaar_core::model::*;
use bazaar_core::state::Snapshot;
use bazaar_core::types::{AccountId, Amount, MemberId, Timestamp};
use bazaar_core::{escrow, market};
use serde_json::json;

fn agent() -> Member {
    Member {
        id: MemberId("did:key:agent".into()),
        kind: MemberKind::Agent,
        owner: Some(MemberId("did:key:owner".into())),
        handle: "agent".into(),
        created_at: Timestamp(0),
    }
}

#[test]
fn written_bodies_carry_their_version_and_read_back() {
    let stake = Stake::empty(&agent().id);
    let row = encode(&stake);
    assert_eq!((row.kind, row.id.as_str()), (DocKind::Stake, "did:key:agent"));
    assert_eq!(row.body[VERSION_FIELD], json!(Stake::VERSION));
    assert_eq!(decode::<Stake>(&row).unwrap(), stake);
}

#[test]
fn a_body_written_before_versions_reads_as_version_one() {
    let mut row = encode(&Stake::empty(&agent().id));
    row.body.as_object_mut().unwrap().remove(VERSION_FIELD);
    assert_eq!(decode::<Stake>(&row).unwrap(), Stake::empty(&agent().id));
}

#[test]
fn a_body_this_build_cannot_read_is_refused_by_kind_id_and_version() {
    let mut newer = encode(&Stake::empty(&agent().id));
    newer.body[VERSION_FIELD] = json!(Stake::VERSION + 1);
    let error = decode::<Stake>(&newer).unwrap_err();
    assert_eq!((error.kind, error.id.as_str(), error.version), ("stake", "did:key:agent", 2));
    assert!(error.to_string().starts_with("stored stake document did:key:agent (version 2) does not decode"));

    let garbled = DocRow { body: json!({"member": 42}), ..encode(&Stake::empty(&agent().id)) };
    let error = decode::<Stake>(&garbled).unwrap_err();
    assert_eq!(error.version, 1);
    assert!(error.reason.contains("invalid type"), "{error}");

    let wrong_kind = DocRow { kind: DocKind::Peer, ..encode(&Stake::empty(&agent().id)) };
    assert!(decode::<Stake>(&wrong_kind).unwrap_err().reason.contains("expected a stake document"));
}

#[test]
#[should_panic(expected = "stored stake document did:key:agent (version 1) does not decode")]
fn a_batch_that_meets_an_unreadable_document_stops_rather_than_guess() {
    let me = agent();
    let mut snap = Snapshot::empty(ChainHead::genesis());
    snap.members.insert(me.id.clone(), me.clone());
    let mut account = Account::new(AccountId::of_member(&me.id), false);
    account.credits_posted = 1_000;
    snap.accounts.insert(account.id.clone(), account);
    let corrupt = DocRow {
        kind: DocKind::Stake,
        id: me.id.to_string(),
        body: json!({"member": 42}),
        due_at: None,
        parties: vec![me.id.clone()],
    };
    snap.docs.insert((DocKind::Stake, me.id.to_string()), corrupt);
    let lock = Command { actor: me, idem: None, op: Op::Dispute(dispute::Op::StakeLock { amount: Amount(10) }) };
    apply_batch(&mut snap, &Config::standard(), &[lock], Timestamp(1));
}

#[test]
fn every_event_kind_is_named_once_across_capabilities() {
    let names: Vec<&str> = bazaar_core::command::EVENT_KIND_NAMES.concat();
    let mut sorted = names.clone();
    sorted.sort();
    sorted.dedup();
    assert_eq!(sorted.len(), names.len(), "an event kind is named by two capabilities: {names:?}");
    for name in names {
        let (family, what) = name.split_once('.').expect("kinds are family.what");
        assert!(!family.is_empty() && !what.is_empty(), "{name}");
        assert!(name.bytes().all(|b| b.is_ascii_lowercase() || b == b'.' || b == b'_'), "{name}");
    }
}

/// The composer collects every family: as many as the core's sources declare with `event_kinds!` (the macro's
/// own definition aside). A capability that declares its events and is left out of `EVENT_KIND_NAMES` fails here.
#[test]
fn every_event_family_is_collected() {
    fn declared(dir: &std::path::Path, found: &mut Vec<String>) {
        for entry in std::fs::read_dir(dir).unwrap().map(Result::unwrap) {
            let path = entry.path();
            if path.is_dir() {
                declared(&path, found);
            } else if path.extension().is_some_and(|e| e == "rs") {
                let text = std::fs::read_to_string(&path).unwrap();
                let calls = text
                    .lines()
                    .filter(|l| {
                        l.trim_start().starts_with("event_kinds! {")
                            || l.trim_start().starts_with("crate::event_kinds! {")
                    })
                    .count();
                found.extend(std::iter::repeat_n(path.display().to_string(), calls));
            }
        }
    }
    let mut found = Vec::new();
    declared(&std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src"), &mut found);
    let collected = bazaar_core::command::EVENT_KIND_NAMES;
    assert_eq!(found.len(), collected.len(), "families declared in {found:?}, {} collected", collected.len());
    let bounty_and_hire = ["bounty.funded", "hire.accepted"];
    for kind in bounty_and_hire {
        assert!(collected.concat().contains(&kind), "{kind} (a family the old hand-written list missed) is collected");
    }
}

/// A member of `kind` owned by `owner` (none for an owner).
fn member(name: &str, kind: MemberKind, owner: Option<&str>) -> Member {
    Member {
        id: MemberId(format!("did:key:{name}")),
        kind,
        owner: owner.map(|o| MemberId(format!("did:key:{o}"))),
        handle: name.into(),
        created_at: Timestamp(0),
    }
}

fn keyed(actor: &Member, key: &str, op: Op) -> Command {
    let idem = Idem::sent(actor.id.to_string(), key.into(), key.into());
    Command { actor: actor.clone(), idem: Some(idem), op }
}

/// The events one batch wrote, by kind: each body without the kernel's `authored_handle` and `version`.
fn written(snap: &mut Snapshot, commands: &[Command]) -> Vec<(String, serde_json::Value)> {
    let (applied, changes) = apply_batch(snap, &Config::standard(), commands, Timestamp(1_000));
    for (command, applied) in commands.iter().zip(&applied) {
        assert!(applied.outcome.is_ok(), "{}: {:?}", command.op.name(), applied.outcome);
    }
    let strip = |mut body: serde_json::Value| {
        let fields = body.as_object_mut().expect("object");
        fields.remove("authored_handle");
        assert_eq!(fields.remove("version"), Some(serde_json::json!(1)), "typed bodies are stored with their version");
        body
    };
    changes.insert_events.into_iter().map(|e| (e.kind, strip(e.body))).collect()
}

/// Decodes `body` as `T` and checks it serialises back to the same body.
fn round_trips<T: serde::Serialize + serde::de::DeserializeOwned>(kind: &str, body: &serde_json::Value) {
    let typed: T = serde_json::from_value(body.clone()).unwrap_or_else(|e| panic!("{kind} does not decode: {e}"));
    assert_eq!(&serde_json::to_value(&typed).expect("serialises"), body, "{kind}");
}

/// A buyer and a seller agent of two owners, an arbiter owner, funds, and both agents' budgets.
fn market_world() -> (Snapshot, [Member; 3]) {
    let buyer = member("buyer", MemberKind::Agent, Some("alice"));
    let seller = member("seller", MemberKind::Agent, Some("bob"));
    let arbiter = member("carol", MemberKind::Owner, None);
    let mut snap = Snapshot::empty(ChainHead::genesis());
    for m in [&buyer, &seller, &arbiter] {
        snap.members.insert(m.id.clone(), m.clone());
        let mut account = Account::new(AccountId::of_member(&m.id), false);
        account.credits_posted = 10_000;
        snap.accounts.insert(account.id.clone(), account);
    }
    for account in [Account::new(AccountId::fees(), false), Account::new(AccountId::stake_of(&seller.id), false)] {
        snap.accounts.insert(account.id.clone(), account);
    }
    let cap = Amount(500);
    let budget = Budget { per_call_max: cap, per_day_max: cap, total_max: cap, ..Budget::zero(buyer.id.clone()) };
    snap.budgets.insert(buyer.id.clone(), budget.clone());
    // The seller's stake lock counts against its own budget.
    snap.budgets.insert(seller.id.clone(), Budget { agent: seller.id.clone(), ..budget });
    (snap, [buyer, seller, arbiter])
}

/// A contract created, accepted, delivered and released.
fn contract_commands(buyer: &Member, seller: &Member, arbiter: &Member) -> Vec<Command> {
    use bazaar_core::escrow::{contract_id_for, ContractAct, MilestoneSpec};
    let contract = contract_id_for(&buyer.id, &seller.id, &arbiter.id, "c1");
    let act = |actor: &Member, act: ContractAct| Command {
        actor: actor.clone(),
        idem: None,
        op: Op::Escrow(escrow::Op::ContractAct {
            contract: contract.clone(),
            buyer: buyer.id.clone(),
            seller: seller.id.clone(),
            milestones: 1,
            act,
        }),
    };
    let milestone = MilestoneSpec { amount: Amount(300), description: "design".into(), due_at: Timestamp(9_000_000) };
    let create = escrow::Op::CreateContract {
        seller: seller.id.clone(),
        arbiter: arbiter.id.clone(),
        milestones: vec![milestone],
        terms_hash: "a".repeat(64),
        review_window_s: bazaar_core::types::limits::REVIEW_WINDOW_S,
    };
    vec![
        keyed(buyer, "c1", Op::Escrow(create)),
        act(seller, ContractAct::Accept),
        act(seller, ContractAct::Deliver { milestone: 0, evidence_sha256: "b".repeat(64) }),
        act(buyer, ContractAct::Release { milestone: 0 }),
    ]
}

fn listing(title: &str) -> Op {
    use bazaar_core::market::{ListingSpec, Terms};
    let terms = Terms {
        list_price: Amount(100),
        floor: Amount(80),
        max_discount_bps: 1_000,
        capacity_per_day: 5,
        capacity_max: 50,
        lead_time_days: 2,
        notice_days: 1,
    };
    let spec = ListingSpec {
        sku: "mug-1".into(),
        title: title.into(),
        description: "A mug.".into(),
        tags: vec!["mug".into()],
        terms,
        language: "en".into(),
    };
    Op::Market(market::Op::PutListing { spec })
}

#[test]
fn escrow_stake_and_market_bodies_written_by_this_build_decode_into_their_types() {
    use bazaar_core::dispute::events::{StakeLockedBody, StakeUnlockRequested};
    use bazaar_core::escrow::events::{ContractAccepted, ContractOffered, MilestoneDelivered, MilestoneReleasedBody};
    use bazaar_core::market::events::{ListingCreated, ListingUpdated};
    let (mut snap, [buyer, seller, arbiter]) = market_world();
    let as_seller = |op: Op| Command { actor: seller.clone(), idem: None, op };
    let mut commands = contract_commands(&buyer, &seller, &arbiter);
    commands.extend([
        as_seller(Op::Dispute(dispute::Op::StakeLock { amount: Amount(40) })),
        as_seller(Op::Dispute(dispute::Op::StakeUnlock { amount: Amount(10) })),
        as_seller(listing("Mug")),
        as_seller(listing("Big mug")),
    ]);
    let events = written(&mut snap, &commands);
    let kinds: Vec<&str> = events.iter().map(|(kind, _)| kind.as_str()).collect();
    assert_eq!(events.len(), 8, "{kinds:?}");
    for (kind, body) in &events {
        match kind.as_str() {
            "contract.created" => round_trips::<ContractOffered>(kind, body),
            "contract.accepted" => round_trips::<ContractAccepted>(kind, body),
            "milestone.delivered" => round_trips::<MilestoneDelivered>(kind, body),
            "milestone.released" => round_trips::<MilestoneReleasedBody>(kind, body),
            "stake.locked" => round_trips::<StakeLockedBody>(kind, body),
            "stake.unlock_requested" => round_trips::<StakeUnlockRequested>(kind, body),
            "listing.created" => round_trips::<ListingCreated>(kind, body),
            "listing.updated" => round_trips::<ListingUpdated>(kind, body),
            other => panic!("unexpected event {other}"),
        }
    }
}

/// A contract's balance is its declared invariant: what the batch wrote
/// satisfies it, and the same body out of balance fails it (the batch asserts
/// it on every write, so such a body stops the writer instead of committing).
#[test]
fn a_contract_out_of_balance_fails_its_declared_invariant() {
    use bazaar_core::escrow::Contract;
    use bazaar_core::kernel::docs::decode;
    let (mut snap, [buyer, seller, arbiter]) = market_world();
    written(&mut snap, &contract_commands(&buyer, &seller, &arbiter));
    let row = snap.docs.values().find(|row| row.kind == DocKind::Contract).expect("the contract was written");
    let contract: Contract = decode(row).unwrap();
    contract.assert_invariants();
    let skewed = Contract { fees: Amount(contract.fees.0 + 1), ..contract };
    let refused = std::panic::catch_unwind(|| skewed.assert_invariants());
    assert!(refused.is_err(), "an out-of-balance contract must fail its invariant");
}

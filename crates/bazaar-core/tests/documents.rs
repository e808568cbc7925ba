//! Typed documents: every stored body carries its version, bodies written
//! before versions existed read as version 1, and a body this build cannot
//! read is refused with its kind, id and version — in a batch, it stops the
//! writer instead of being guessed at.

use bazaar_core::apply::{apply_batch, Config};
use bazaar_core::chain::ChainHead;
use bazaar_core::command::{Command, Op};
use bazaar_core::dispute::{self, Stake};
use bazaar_core::kernel::docs::{decode, encode, Document, VERSION_FIELD};
use bazaar_core::model::*;
use bazaar_core::state::Snapshot;
use bazaar_core::types::{AccountId, Amount, MemberId, Timestamp};
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
    use bazaar_core::kernel::batch::{EventKind, KernelEvent};
    let mut names: Vec<&str> = Vec::new();
    names.extend(KernelEvent::ALL.iter().map(|k| k.as_str()));
    names.extend(bazaar_core::identity::IdentityEvent::ALL.iter().map(|k| k.as_str()));
    names.extend(bazaar_core::pay::PayEvent::ALL.iter().map(|k| k.as_str()));
    names.extend(bazaar_core::escrow::EscrowEvent::ALL.iter().map(|k| k.as_str()));
    names.extend(bazaar_core::dispute::DisputeEvent::ALL.iter().map(|k| k.as_str()));
    names.extend(bazaar_core::reputation::ReputationEvent::ALL.iter().map(|k| k.as_str()));
    names.extend(bazaar_core::federation::FederationEvent::ALL.iter().map(|k| k.as_str()));
    names.extend(bazaar_core::market::MarketEvent::ALL.iter().map(|k| k.as_str()));
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

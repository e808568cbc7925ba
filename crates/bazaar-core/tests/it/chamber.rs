//! The chamber's one command: only the registry records an attack press's refusal, as exactly one
//! `refusal.recorded` that names the attack and its code and moves nothing; anyone else, or a name or
//! code that is not plain text, is refused and writes nothing.

use bazaar_core::apply::{apply_batch, Config};
use bazaar_core::chain::ChainHead;
use bazaar_core::chamber::{self, ATTACK_TEXT_MAX};
use bazaar_core::command::{Command, Op};
use bazaar_core::model::{Member, MemberKind};
use bazaar_core::refusal::Code;
use bazaar_core::state::Snapshot;
use bazaar_types::{MemberId, Timestamp};
use serde_json::json;

fn member(kind: MemberKind) -> Member {
    Member {
        id: MemberId(format!("did:key:z{kind:?}")),
        kind,
        owner: None,
        handle: "someone".into(),
        created_at: Timestamp(0),
    }
}

fn record(actor: Member, attack: &str, code: &str) -> Command {
    let op = chamber::Op::RecordAttackRefusal { attack: attack.into(), code: code.into(), status: 422 };
    Command { actor, idem: None, op: Op::Chamber(op) }
}

#[test]
fn the_registry_records_one_refusal_that_names_the_attack_and_moves_nothing() {
    let registry = member(MemberKind::Registry);
    let mut snap = Snapshot::empty(ChainHead::genesis());
    snap.members.insert(registry.id.clone(), registry.clone());
    let command = record(registry, "over-ceiling", "budget_per_call_exceeded");
    assert!(!command.op.moves_money());
    let (applied, changes) = apply_batch(&mut snap, &Config::standard(), &[command], Timestamp(1));
    let receipt = applied[0].outcome.as_ref().map(|receipt| receipt.to_json());
    assert_eq!(receipt, Ok(json!({"attack": "over-ceiling", "code": "budget_per_call_exceeded"})));
    assert_eq!(changes.insert_events.len(), 1);
    let event = &changes.insert_events[0];
    assert_eq!(event.kind, "refusal.recorded");
    assert_eq!(event.body["op"], "record_attack_refusal");
    assert_eq!(
        (&event.body["attack"], &event.body["code"]),
        (&json!("over-ceiling"), &json!("budget_per_call_exceeded"))
    );
    assert_eq!((&event.body["status"], &event.body["met_in"]), (&json!(422), &json!("scratch")));
    assert!(changes.insert_transfers.is_empty() && changes.insert_members.is_empty());
}

#[test]
fn anyone_but_the_registry_or_text_that_is_not_plain_is_refused_and_writes_nothing() {
    let registry = member(MemberKind::Registry);
    let operator = member(MemberKind::Operator);
    let mut snap = Snapshot::empty(ChainHead::genesis());
    for who in [&registry, &operator] {
        snap.members.insert(who.id.clone(), who.clone());
    }
    let long = "a".repeat(ATTACK_TEXT_MAX + 1);
    let cases = [
        (record(operator, "over-ceiling", "budget_per_call_exceeded"), Code::NotPermitted),
        (record(registry.clone(), "", "budget_per_call_exceeded"), Code::InvalidRequest),
        (record(registry.clone(), &long, "budget_per_call_exceeded"), Code::InvalidRequest),
        (record(registry.clone(), "over-ceiling", "<script>"), Code::InvalidRequest),
        (record(registry, "Over Ceiling", "budget_per_call_exceeded"), Code::InvalidRequest),
    ];
    for (command, code) in cases {
        let (applied, changes) = apply_batch(&mut snap, &Config::standard(), &[command], Timestamp(1));
        assert_eq!(applied[0].outcome.as_ref().unwrap_err().code, code);
        assert!(changes.insert_events.is_empty());
    }
}

//! Typed event bodies: each body this build writes decodes into its
//! capability's body type, names the kind it was stored under, and serialises
//! back to exactly the stored JSON — so the types are the stored contract, not
//! a guess at it. Also: a relayed settlement (federation's body) still reads as
//! pay's `SettlementPosted`, which reputation folds.

use crate::common;

use bazaar_core::apply::Config;
use bazaar_core::command::{Command, Op};
use bazaar_core::federation::{self, events as fed, KeyEntry, Peer, Terms};
use bazaar_core::identity::events as identity;
use bazaar_core::kernel::batch::{EventBody, EventKind};
use bazaar_core::model::*;
use bazaar_core::pay::events as pay;
use bazaar_core::pay::token::TokenClaims;
use bazaar_core::types::{Amount, MemberId, Timestamp};
use common::{create_owner, registry_member, unkeyed, Db};
use serde::de::DeserializeOwned;
use serde::Serialize;

const NOW: Timestamp = Timestamp(1_700_000_000_000);

/// The stored body less what the kernel adds, decoded as `B`; checks the kind and the round trip.
fn read<B: EventBody + Serialize + DeserializeOwned>(db: &Db, kind: &str) -> B {
    let event = db.events.iter().find(|e| e.kind == kind).unwrap_or_else(|| panic!("no {kind} event"));
    let mut stored = event.body.clone();
    let fields = stored.as_object_mut().expect("bodies are objects");
    fields.remove("authored_handle").expect("the kernel stamps it");
    assert_eq!(fields.remove("version"), Some(serde_json::json!(B::VERSION)), "{kind} is stored with its version");
    let body: B = serde_json::from_value(stored.clone()).unwrap_or_else(|e| panic!("{kind}: {e}"));
    assert_eq!(body.kind().as_str(), kind);
    assert_eq!(serde_json::to_value(&body).unwrap(), stored, "{kind} does not round-trip");
    body
}

fn run(db: &mut Db, commands: Vec<Command>) -> Vec<serde_json::Value> {
    let applied = db.apply_as_adapter(&Config::standard(), &commands, NOW);
    applied.into_iter().map(|a| a.outcome.expect("succeeds").to_json()).collect()
}

/// A registry with an owner, a buyer and a merchant agent, a paid call settled, and a peer.
fn world() -> (Db, Vec<serde_json::Value>) {
    let mut db = Db::new();
    let registry = registry_member(&ed25519_dalek::SigningKey::from_bytes(&[7; 32]), NOW);
    let operator = db.bootstrap(&Config::standard(), &registry, &MemberId::from("did:key:operator"), NOW);
    let owner_id = MemberId::from("did:key:owner");
    db.setup(&Config::standard(), vec![create_owner(&operator, 0, &owner_id)], NOW);
    let (buyer, merchant) = (MemberId::from("did:key:buyer"), MemberId::from("did:key:merchant"));
    db.enroll(&Config::standard(), &owner_id, 1, &buyer, NOW);
    db.enroll(&Config::standard(), &owner_id, 2, &merchant, NOW);
    let owner = db.rows.members[&owner_id].clone();
    let pay_op = |op| Op::Pay(op);
    let mut answers = run(
        &mut db,
        vec![
            unkeyed(&operator, pay_op(bazaar_core::pay::Op::Mint { owner: owner_id.clone(), amount: Amount(1_000) })),
            unkeyed(&owner, pay_op(bazaar_core::pay::Op::Fund { agent: buyer.clone(), amount: Amount(500) })),
            unkeyed(
                &owner,
                pay_op(bazaar_core::pay::Op::SetBudget {
                    agent: buyer.clone(),
                    per_call_max: Amount(200),
                    per_day_max: Amount(400),
                    total_max: Amount(400),
                }),
            ),
        ],
    );
    let claims = TokenClaims {
        v: 1,
        iss: registry.id.clone(),
        jti: "tok_1".into(),
        sub: buyer.clone(),
        aud: merchant.clone(),
        max: Amount(150),
        ord: "order-1".into(),
        res: "https://shop/restock".into(),
        iat_ms: NOW,
        exp_ms: NOW.plus_s(900),
        via: None,
    };
    let (buyer, merchant) = (db.rows.members[&buyer].clone(), db.rows.members[&merchant].clone());
    let issue = bazaar_core::pay::Op::IssueToken { claims: claims.clone(), token: "apt_test".into() };
    answers.extend(run(&mut db, vec![unkeyed(&buyer, Op::Pay(issue))]));
    let settle = bazaar_core::pay::Op::Settle { claims, amount: Amount(120), order_id: "order-1".into() };
    answers.extend(run(&mut db, vec![unkeyed(&merchant, Op::Pay(settle))]));
    let peer = Peer {
        did: MemberId::from("did:key:peer"),
        url: "https://peer.example".into(),
        handle: "peer-1".into(),
        weight_bps: 5_000,
        terms: Terms { fee_bps: 50, per_call_max_minor: Amount(100), outstanding_max_minor: Amount(1_000) },
        keys: vec![KeyEntry { did: "did:key:peer".into(), from_ms: 0, until_ms: None, sig: None }],
        added_at: NOW,
    };
    let entry = KeyEntry { did: "did:key:next".into(), from_ms: NOW.0, until_ms: None, sig: Some("sig".into()) };
    answers.extend(run(
        &mut db,
        vec![
            unkeyed(&operator, Op::Federation(federation::Op::AddPeer { peer })),
            unkeyed(&registry, Op::Federation(federation::Op::RecordKey { entry })),
        ],
    ));
    (db, answers)
}

#[test]
fn identity_bodies_round_trip() {
    let (db, _) = world();
    let created: identity::RegistryCreated = read(&db, "registry.created");
    assert_eq!(created.fee_bps, Config::standard().fee_bps);
    let owner: identity::OwnerCreated = read(&db, "owner.created");
    assert_eq!((owner.member.kind, owner.member.owner), (MemberKind::Owner, None));
    let agent: identity::AgentEnrolled = read(&db, "agent.enrolled");
    assert_eq!(agent.member.owner, Some(MemberId::from("did:key:owner")));
    let _: identity::InviteIssued = read(&db, "invite.issued");
}

#[test]
fn pay_bodies_round_trip_and_the_settle_answer_is_unchanged() {
    let (db, answers) = world();
    let minted: pay::TransferMinted = read(&db, "transfer.minted");
    assert_eq!(minted.legs.amount_minor, Amount(1_000));
    let _: pay::TransferFunded = read(&db, "transfer.funded");
    let _: pay::BudgetSet = read(&db, "budget.set");
    let issued: pay::TokenIssued = read(&db, "token.issued");
    assert_eq!((issued.token.merchant_handle.as_deref(), issued.token.via), (Some("agent-2"), None));
    let posted: pay::SettlementPosted = read(&db, "settlement.posted");
    let posting = posted.posting.clone().expect("pay's settlement says how it posted");
    assert_eq!((posted.paid.amount_minor, posting.released_minor), (Amount(120), Amount(30)));
    assert_eq!(posted.corridor, None);
    // The settle answer is still the stored body, less the author's handle.
    assert_eq!(answers[4], serde_json::to_value(&posted).unwrap());
    assert_eq!(answers[3]["token"], "apt_test");
}

#[test]
fn federation_bodies_round_trip() {
    let (db, _) = world();
    let added: fed::PeerRecognised = read(&db, "federation.peer_added");
    assert_eq!((added.peer.keys, added.peer.updated), (1, false));
    let rotated: fed::KeyRotated = read(&db, "registry.key_rotated");
    assert_eq!(rotated.sig.as_deref(), Some("sig"));
}

#[test]
fn a_relayed_settlement_reads_as_pay_settlement_posted() {
    let (db, _) = world();
    let local: pay::SettlementPosted = read(&db, "settlement.posted");
    let relayed = fed::RelaySettled {
        settlement: pay::SettlementFacts { paid: local.paid.clone(), row: local.row.clone().unwrap() },
        relayed: fed::Relayed {
            via: MemberId::from("did:key:peer"),
            transfers: vec!["tr_tok_1_relay_pay".into()],
            issuer_receipt: serde_json::json!({"corridor_minor": 120}),
        },
    };
    assert_eq!(relayed.kind().as_str(), "settlement.posted");
    let read: pay::SettlementPosted = serde_json::from_value(serde_json::to_value(&relayed).unwrap()).unwrap();
    assert_eq!((read.paid, read.row, read.posting, read.corridor), (local.paid, local.row, None, None));
}

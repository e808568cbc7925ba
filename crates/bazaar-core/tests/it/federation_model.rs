//! Cross-registry settlement on two in-memory ledgers (A: the buyer's registry,
//! B: the merchant's), driven through `apply_batch` as the two HTTP edges would,
//! under random interleavings: tokens issued, relays opened, requests to A lost
//! on the way there or their answers lost on the way back, retries, expiries,
//! and B's sweeper finishing what is pending. After every step both ledgers
//! audit clean; at quiescence each token settled at most once on each side,
//! A settled exactly what B settled, and A's `corridor:B` is the negation of
//! B's `corridor:A`.

use crate::common;

use bazaar_core::apply::{apply_batch, Applied, Config};
use bazaar_core::command::{Command, Idem, Op};
use bazaar_core::crypto::{did_key, sha256_hex};
use bazaar_core::federation::{
    KeyEntry, Netting, NettingAnswer, NettingState, NettingStatement, Peer, RegistrySignature, Relay, RelayResult,
    RelayState, Terms,
};
use bazaar_core::kernel::docs::decode;
use bazaar_core::model::{DocKind, Member, MemberKind, OPERATOR_ID};
use bazaar_core::token::TokenClaims;
use bazaar_core::{federation, identity, pay};
use bazaar_types::{AccountId, Amount, MemberId, OrderId, Timestamp, TokenId};
use common::Db;
use ed25519_dalek::SigningKey;
use proptest::prelude::*;

const START: Timestamp = Timestamp(1_800_000_000_000);
const FUNDS: u64 = 100_000;
const FEE_BPS: u32 = 200;

fn member(id: &str, kind: MemberKind, owner: Option<&str>) -> Member {
    Member { id: MemberId::from(id), kind, owner: owner.map(MemberId::from), handle: String::new(), created_at: START }
}

/// One registry's ledger and the clock its writer reads.
struct Side {
    db: Db,
    registry: Member,
    operator: Member,
}

impl Side {
    fn run(&mut self, command: Command, now: Timestamp) -> Applied {
        let mut snap = self.db.rows.clone();
        let (mut results, changes) = apply_batch(&mut snap, &Config::standard(), &[command], now);
        self.db.fold(changes);
        results.remove(0)
    }

    fn ok(&mut self, actor: &Member, op: Op, now: Timestamp) -> serde_json::Value {
        let name = op.name();
        let applied = self.run(Command { actor: actor.clone(), idem: None, op }, now);
        applied.outcome.unwrap_or_else(|r| panic!("{name}: {r:?}")).to_json()
    }

    fn balance(&self, account: &AccountId) -> i128 {
        self.db.rows.accounts.get(account).map(|a| a.balance()).unwrap_or(0)
    }

    fn member(&self, id: &str) -> Member {
        self.db.rows.members[&MemberId::from(id)].clone()
    }
}

/// A registry's signature as the edge would attach it (the core records signatures; the edges check them).
fn signed_by(registry: &MemberId) -> RegistrySignature {
    RegistrySignature { registry: registry.clone(), key: registry.to_string(), sig: format!("sig-of-{registry}") }
}

fn registry(seed: u8) -> Side {
    let key = SigningKey::from_bytes(&[seed; 32]);
    let registry = member(&did_key(&key.verifying_key()), MemberKind::Registry, None);
    let mut side =
        Side { db: Db::new(), registry: registry.clone(), operator: member(OPERATOR_ID, MemberKind::Operator, None) };
    let op = Op::Identity(identity::Op::Bootstrap {
        registry: registry.id.clone(),
        operator: MemberId::from(OPERATOR_ID),
        operator_credential_hash: format!("op-{seed}"),
    });
    side.ok(&registry, op, START);
    side.operator = side.member(OPERATOR_ID);
    side
}

fn recognise(side: &mut Side, peer: &Side, handle: &str) {
    let peer = Peer {
        did: peer.registry.id.clone(),
        url: format!("http://{handle}.example"),
        handle: handle.into(),
        weight_bps: 5_000,
        terms: Terms { fee_bps: FEE_BPS, per_call_max_minor: Amount(1_000), outstanding_max_minor: Amount(FUNDS * 10) },
        keys: vec![KeyEntry { did: peer.registry.id.to_string(), from_ms: 0, until_ms: None, sig: None }],
        added_at: START,
    };
    let operator = side.operator.clone();
    side.ok(&operator, Op::Federation(federation::Op::AddPeer { peer }), START);
}

/// An owner and an agent on `side`; the agent is funded and budgeted when `funds > 0`.
fn agent(side: &mut Side, name: &str, funds: u64) -> Member {
    let operator = side.operator.clone();
    let owner_id = format!("did:key:z-owner-{name}");
    side.ok(
        &operator,
        Op::Identity(identity::Op::CreateOwner {
            id: MemberId(owner_id.clone()),
            handle: format!("{name}-owner"),
            credential_hash: format!("c-o-{name}"),
        }),
        START,
    );
    let owner = side.member(&owner_id);
    side.ok(
        &owner,
        Op::Identity(identity::Op::IssueInvite { code_hash: format!("i-{name}"), expires_at: START.plus_s(3_600) }),
        START,
    );
    let agent_id = format!("did:key:z-agent-{name}");
    let stranger = member(&agent_id, MemberKind::Agent, None);
    let redeem = Op::Identity(identity::Op::RedeemInvite {
        code_hash: format!("i-{name}"),
        agent: MemberId(agent_id.clone()),
        handle: name.into(),
        credential_hash: format!("c-a-{name}"),
    });
    side.ok(&stranger, redeem, START);
    if funds > 0 {
        side.ok(&operator, Op::Pay(pay::Op::Mint { owner: owner.id.clone(), amount: Amount(funds) }), START);
        side.ok(&owner, Op::Pay(pay::Op::Fund { agent: MemberId(agent_id.clone()), amount: Amount(funds) }), START);
        let budget = Op::Pay(pay::Op::SetBudget {
            agent: MemberId(agent_id.clone()),
            per_call_max: Amount(1_000),
            per_day_max: Amount(funds),
            total_max: Amount(funds),
        });
        side.ok(&owner, budget, START);
    }
    side.member(&agent_id)
}

#[derive(Clone, Debug)]
enum Step {
    /// The buyer asks A for the token of order `n` (amount from the order number).
    Issue(usize),
    /// The merchant presents order `n`'s token at B (opens or finds the relay).
    Present(usize),
    /// B calls A for order `n`'s pending relay; the request may be lost going, or the answer coming back.
    Call { order: usize, lose_request: bool, lose_answer: bool },
    /// Time passes (tokens may expire; A's sweeper voids their holds).
    Wait(u64),
    /// A's operator nets `amount` of what A owes B (a wire sent); B's answer may be lost on the way back.
    Net { amount: u64, lose_answer: bool },
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        3 => (0usize..6).prop_map(Step::Issue),
        3 => (0usize..6).prop_map(Step::Present),
        4 => (0usize..6, any::<bool>(), any::<bool>()).prop_map(|(order, lose_request, lose_answer)| Step::Call { order, lose_request, lose_answer }),
        1 => (1u64..400).prop_map(Step::Wait),
        // Past the retry window: relays still unanswered stick at their next unanswered attempt.
        1 => Just(Step::Wait(federation::RELAY_RETRY_WINDOW_S + 1)),
        1 => (1u64..800, any::<bool>()).prop_map(|(amount, lose_answer)| Step::Net { amount, lose_answer }),
    ]
}

struct World {
    a: Side,
    b: Side,
    buyer: Member,
    merchant_on_b: Member,
    peer_b_on_a: Member,
    now: Timestamp,
    tokens: std::collections::HashMap<usize, TokenClaims>,
    nettings: u64,
}

fn world() -> World {
    let mut a = registry(1);
    let mut b = registry(2);
    recognise(&mut a, &b, "peer-b");
    recognise(&mut b, &a, "peer-a");
    let buyer = agent(&mut a, "buyer", FUNDS);
    let merchant_on_b = agent(&mut b, "shop", 0);
    let peer_b_on_a = a.member(b.registry.id.as_str());
    World { a, b, buyer, merchant_on_b, peer_b_on_a, now: START, tokens: Default::default(), nettings: 0 }
}

impl World {
    fn amount(order: usize) -> Amount {
        Amount(100 + 37 * order as u64)
    }

    fn apply(&mut self, step: &Step) {
        match step {
            Step::Issue(order) => {
                if self.tokens.contains_key(order) {
                    return;
                }
                let claims = TokenClaims {
                    v: 1,
                    iss: self.a.registry.id.clone(),
                    jti: TokenId(format!("tok_{order}")),
                    sub: self.buyer.id.clone(),
                    aud: self.merchant_on_b.id.clone(),
                    max: World::amount(*order),
                    ord: OrderId(format!("o-{order}")),
                    res: "r".into(),
                    iat_ms: self.now,
                    exp_ms: self.now.plus_s(900),
                    via: Some(self.b.registry.id.clone()),
                };
                let op = Op::issue_token(claims.clone(), format!("apt_{order}"));
                let buyer = self.buyer.clone();
                if self.a.run(Command { actor: buyer, idem: None, op }, self.now).outcome.is_ok() {
                    self.tokens.insert(*order, claims);
                }
            }
            Step::Present(order) => {
                let Some(claims) = self.tokens.get(order).cloned() else { return };
                let op = Op::Federation(federation::Op::RelayOpen {
                    claims: claims.clone(),
                    token: format!("apt_{order}"),
                    amount: claims.max,
                });
                let merchant = self.merchant_on_b.clone();
                let _ = self.b.run(Command { actor: merchant, idem: None, op }, self.now);
            }
            Step::Call { order, lose_request, lose_answer } => {
                let Some(claims) = self.tokens.get(order).cloned() else { return };
                self.call(&claims, *lose_request, *lose_answer);
            }
            Step::Net { amount, lose_answer } => self.net(*amount, *lose_answer),
            Step::Wait(seconds) => {
                self.now = self.now.plus_s(*seconds);
                let expired: Vec<(TokenId, MemberId)> = self
                    .a
                    .db
                    .rows
                    .tokens
                    .values()
                    .filter(|t| {
                        let hold = &self.a.db.rows.holds[&t.hold];
                        hold.state == bazaar_core::model::HoldState::Pending && hold.expires_at <= self.now
                    })
                    .map(|t| (t.jti.clone(), t.buyer.clone()))
                    .collect();
                let registry = self.a.registry.clone();
                for (jti, buyer) in expired {
                    self.a.ok(&registry, Op::Pay(pay::Op::ExpireHold { jti, buyer }), self.now);
                }
            }
        }
    }

    /// One attempt of B's relay for this token, as the edge makes it.
    fn call(&mut self, claims: &TokenClaims, lose_request: bool, lose_answer: bool) {
        let pending = self
            .b
            .db
            .rows
            .docs
            .get(&(DocKind::Relay, claims.jti.to_string()))
            .map(|row| decode::<Relay>(row).unwrap())
            .filter(|r| matches!(r.state, RelayState::Pending | RelayState::Stuck));
        let Some(relay) = pending else { return };
        let result = if lose_request {
            RelayResult::Unreachable
        } else {
            // A's edge: the peer's request under idempotency key = token id.
            let op = Op::Federation(federation::Op::SettleRelayed {
                claims: claims.clone(),
                amount: relay.amount,
                order_id: relay.order_id.clone(),
            });
            let idem = Idem::sent(
                format!("{}:settle_relayed", self.peer_b_on_a.id),
                claims.jti.to_string(),
                sha256_hex(format!("{}:{}", relay.amount.0, relay.order_id).as_bytes()),
            );
            let answer = self.a.run(Command { actor: self.peer_b_on_a.clone(), idem: Some(idem), op }, self.now);
            match (lose_answer, answer.outcome) {
                (true, _) => RelayResult::Unreachable,
                (false, Ok(receipt)) => RelayResult::Settled(receipt.to_json()),
                (false, Err(refusal)) => RelayResult::Refused(refusal),
            }
        };
        let op = Op::Federation(federation::Op::RelayFinish {
            jti: claims.jti.clone(),
            merchant: relay.merchant.clone(),
            issuer: relay.issuer.clone(),
            result,
        });
        let registry = self.b.registry.clone();
        self.b.ok(&registry, op, self.now);
    }

    /// A's operator proposes netting `amount` of what A owes B (A signed it), and A sends it to B.
    fn net(&mut self, amount: u64, lose_answer: bool) {
        self.nettings += 1;
        let statement = NettingStatement {
            id: format!("net_{}", self.nettings),
            payer: self.a.registry.id.clone(),
            payee: self.b.registry.id.clone(),
            amount_minor: Amount(amount),
            proposed_at_ms: self.now,
            reference: format!("wire {}", self.nettings),
        };
        let (operator, registry) = (self.a.operator.clone(), self.a.registry.id.clone());
        let signature = signed_by(&registry);
        let op = Op::Federation(federation::Op::ProposeNetting { registry, statement: statement.clone(), signature });
        if self.a.run(Command { actor: operator, idem: None, op }, self.now).outcome.is_ok() {
            self.send_netting(&statement, lose_answer);
        }
    }

    /// A sends a proposed statement to B (B records it once, or answers its record) and records B's answer,
    /// unless the answer is lost.
    fn send_netting(&mut self, statement: &NettingStatement, lose_answer: bool) {
        let peer_a_on_b = self.b.member(self.a.registry.id.as_str());
        let signatures = vec![signed_by(&self.a.registry.id), signed_by(&self.b.registry.id)];
        let registry = self.b.registry.id.clone();
        let op = Op::Federation(federation::Op::RecordNetting { registry, statement: statement.clone(), signatures });
        let answer = match self.b.run(Command { actor: peer_a_on_b, idem: None, op }, self.now).outcome {
            Ok(_) => NettingAnswer::Recorded(signed_by(&self.b.registry.id)),
            Err(refusal) => NettingAnswer::Refused(refusal),
        };
        if lose_answer {
            return;
        }
        let op = Op::Federation(federation::Op::ConfirmNetting {
            id: statement.id.clone(),
            peer: self.b.registry.id.clone(),
            answer,
        });
        let registry = self.a.registry.clone();
        self.a.ok(&registry, op, self.now);
    }

    /// Units netted by the statements `side` holds as recorded.
    fn netted(side: &Side) -> u64 {
        side.db
            .rows
            .docs
            .values()
            .filter(|d| d.kind == DocKind::Netting)
            .map(|row| decode::<Netting>(row).unwrap())
            .filter(|n| n.state == NettingState::Recorded)
            .map(|n| n.statement.amount_minor.0)
            .sum()
    }

    /// B's relay, as it stands.
    fn relay(&self, claims: &TokenClaims) -> Option<Relay> {
        let row = self.b.db.rows.docs.get(&(DocKind::Relay, claims.jti.to_string()))?;
        Some(decode::<Relay>(row).unwrap())
    }

    /// B's sweeper: every pending relay retried until A answers (no more losses); B's operator
    /// retries the stuck ones first, as its recovery records tell it to.
    fn quiesce(&mut self) {
        // A's operator sends again every statement still proposed (its answer was lost).
        let proposed: Vec<NettingStatement> = self
            .a
            .db
            .rows
            .docs
            .values()
            .filter(|d| d.kind == DocKind::Netting)
            .map(|row| decode::<Netting>(row).unwrap())
            .filter(|n| n.state == NettingState::Proposed)
            .map(|n| n.statement)
            .collect();
        for statement in proposed {
            self.send_netting(&statement, false);
        }
        for _ in 0..3 {
            let orders: Vec<usize> = self.tokens.keys().copied().collect();
            for order in orders {
                let claims = self.tokens[&order].clone();
                if self.relay(&claims).is_some_and(|r| r.state == RelayState::Stuck) {
                    let operator = self.b.operator.clone();
                    self.b.ok(
                        &operator,
                        Op::Federation(federation::Op::RelayRetry { jti: claims.jti.clone() }),
                        self.now,
                    );
                }
                self.call(&claims, false, false);
            }
        }
    }

    fn check(&self, quiet: bool) {
        self.a.db.audit();
        self.b.db.audit();
        let corridor_a = self.a.balance(&AccountId::corridor(&self.b.registry.id));
        let corridor_b = self.b.balance(&AccountId::corridor(&self.a.registry.id));
        // What each side settled for these tokens: at most once per token (the maps are keyed by token).
        let settled_a: u64 = self.a.db.rows.settlements_by_token.values().map(|s| s.amount.0).sum();
        let settled_b: u64 = self.b.db.rows.settlements_by_token.values().map(|s| s.amount.0).sum();
        let (netted_a, netted_b) = (World::netted(&self.a), World::netted(&self.b));
        assert_eq!(corridor_a, settled_a as i128 - netted_a as i128, "A's corridor: what A settled for B, less netted");
        assert_eq!(corridor_b, netted_b as i128 - settled_b as i128, "B's corridor: what B credited, less netted");
        assert!(settled_b <= settled_a, "B never credits what A has not settled");
        assert!(netted_a <= netted_b, "A records a netting only after B has");
        let buyer = self.a.balance(&AccountId::of_member(&self.buyer.id));
        assert_eq!(buyer, FUNDS as i128 - settled_a as i128, "the buyer paid once per settled token");
        if quiet {
            assert_eq!(netted_a, netted_b, "at quiescence both sides recorded every statement");
            assert_eq!(corridor_a, -corridor_b, "at quiescence the corridors mirror");
            for relay in self
                .b
                .db
                .rows
                .docs
                .values()
                .filter(|d| d.kind == DocKind::Relay)
                .map(|row| decode::<Relay>(row).unwrap())
            {
                let on_a = self.a.db.rows.settlements_by_token.contains_key(&relay.jti);
                let on_b = self.b.db.rows.settlements_by_token.contains_key(&relay.jti);
                assert_eq!(on_a, on_b, "{}: settled on one side only", relay.jti);
                assert_eq!(relay.state == RelayState::Settled, on_b);
            }
            let merchant = self.b.balance(&AccountId::of_member(&self.merchant_on_b.id));
            let fees = self.b.balance(&AccountId::fees());
            assert_eq!(merchant + fees, settled_b as i128, "B paid out exactly what came through the corridor");
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(96))]

    #[test]
    fn corridors_mirror_and_each_side_settles_once(steps in prop::collection::vec(step(), 1..60)) {
        let mut world = world();
        for step in &steps {
            world.apply(step);
            world.check(false);
        }
        world.quiesce();
        world.check(true);
    }
}

/// The scenario spelled out: the answer to the first call is lost, the retry replays A's settlement.
#[test]
fn a_lost_answer_is_replayed_not_settled_twice() {
    let mut world = world();
    world.apply(&Step::Issue(0));
    world.apply(&Step::Present(0));
    world.apply(&Step::Call { order: 0, lose_request: false, lose_answer: true });
    world.check(false);
    assert_eq!(world.a.db.rows.settlements_by_token.len(), 1, "A settled");
    assert_eq!(world.b.db.rows.settlements_by_token.len(), 0, "B has not heard");
    world.apply(&Step::Call { order: 0, lose_request: false, lose_answer: false });
    world.check(true);
    assert_eq!(world.b.db.rows.settlements_by_token.len(), 1);
    assert_eq!(world.a.balance(&AccountId::corridor(&world.b.registry.id)), World::amount(0).0 as i128);
}

/// The answer to the first call is lost and B cannot reach A again until A has pruned the call's
/// idempotency record (a day later): A then refuses `token_settled` with its original settlement
/// attached, which B must record as this relay settled — not failed, with the buyer's money in the
/// corridor and the merchant never paid. (Found by bazaar-sim.)
#[test]
fn a_relay_retried_after_the_issuer_forgot_the_call_settles_once() {
    let mut world = world();
    world.apply(&Step::Issue(0));
    world.apply(&Step::Present(0));
    world.apply(&Step::Call { order: 0, lose_request: false, lose_answer: true });
    assert_eq!(world.a.db.rows.settlements_by_token.len(), 1, "A settled");
    world.a.db.rows.idem.clear();
    world.apply(&Step::Call { order: 0, lose_request: false, lose_answer: false });
    world.check(true);
    assert_eq!(world.b.db.rows.settlements_by_token.len(), 1, "B paid its merchant");
    // A `token_settled` whose attached settlement is not this relay's (another amount) still fails it.
    world.apply(&Step::Issue(1));
    world.apply(&Step::Present(1));
    world.apply(&Step::Call { order: 1, lose_request: false, lose_answer: true });
    let claims = world.tokens[&1].clone();
    let relay = world.b.db.rows.docs.get(&(DocKind::Relay, claims.jti.to_string()));
    let relay = decode::<Relay>(relay.expect("relay of order 1")).unwrap();
    let op = Op::Federation(federation::Op::SettleRelayed {
        claims: claims.clone(),
        amount: relay.amount,
        order_id: relay.order_id.clone(),
    });
    let actor = world.peer_b_on_a.clone();
    let mut refusal = world.a.run(Command { actor, idem: None, op }, world.now).outcome.unwrap_err();
    assert_eq!(refusal.code.as_str(), "token_settled");
    refusal.facts["amount_minor"] = serde_json::json!(relay.amount.0 - 1);
    let finish = Op::Federation(federation::Op::RelayFinish {
        jti: relay.jti.clone(),
        merchant: relay.merchant.clone(),
        issuer: relay.issuer.clone(),
        result: RelayResult::Refused(refusal),
    });
    let registry = world.b.registry.clone();
    let shown = world.b.ok(&registry, finish, world.now);
    assert_eq!(shown["state"], "failed", "another amount's settlement is not this relay's: {shown}");
}

/// A relay A does not answer for `RELAY_RETRY_WINDOW_S` sticks: no longer due for the sweeper, a recovery
/// record for B's operator, no money moved on B. Only the operator retries it (another window), and once A
/// answers it settles once and the record says so. Retrying a relay that is not stuck is refused.
#[test]
fn a_relay_unanswered_past_the_window_sticks_for_the_operator_and_settles_once_retried() {
    use bazaar_core::federation::{Recovery, RELAY_RETRY_WINDOW_S};
    let mut world = world();
    world.apply(&Step::Issue(0));
    world.apply(&Step::Present(0));
    let claims = world.tokens[&0].clone();
    let due = |world: &World| world.b.db.rows.docs[&(DocKind::Relay, claims.jti.to_string())].due_at;
    let recovery = |world: &World| {
        world.b.db.rows.docs.get(&(DocKind::Recovery, claims.jti.to_string())).map(|r| decode::<Recovery>(r).unwrap())
    };
    world.apply(&Step::Call { order: 0, lose_request: false, lose_answer: true });
    assert_eq!(world.a.db.rows.settlements_by_token.len(), 1, "A settled; B never heard");
    world.apply(&Step::Wait(RELAY_RETRY_WINDOW_S - 10));
    world.apply(&Step::Call { order: 0, lose_request: true, lose_answer: false });
    assert_eq!(world.relay(&claims).unwrap().state, RelayState::Pending, "inside the window: retried");
    assert!(due(&world).is_some());
    world.apply(&Step::Wait(20));
    world.apply(&Step::Call { order: 0, lose_request: true, lose_answer: false });
    let stuck = world.relay(&claims).unwrap();
    assert_eq!(stuck.state, RelayState::Stuck);
    assert_eq!(due(&world), None, "the sweeper no longer retries it");
    let record = recovery(&world).expect("a recovery record for the operator");
    assert_eq!((record.state, record.attempts, record.stuck_at), (RelayState::Stuck, 3, world.now));
    assert_eq!(
        world.b.db.rows.docs[&(DocKind::Recovery, claims.jti.to_string())].parties,
        vec![world.b.operator.id.clone()]
    );
    assert_eq!(world.b.db.rows.settlements_by_token.len(), 0, "nothing moved on B");
    world.check(false);
    // Another unanswered attempt (a merchant's retry) leaves it stuck and not due.
    world.apply(&Step::Call { order: 0, lose_request: true, lose_answer: false });
    assert_eq!((world.relay(&claims).unwrap().state, due(&world)), (RelayState::Stuck, None));

    let retry = || Op::Federation(federation::Op::RelayRetry { jti: claims.jti.clone() });
    let merchant = world.merchant_on_b.clone();
    let refused = world.b.run(Command { actor: merchant, idem: None, op: retry() }, world.now);
    assert_eq!(refused.outcome.unwrap_err().code.as_str(), "not_permitted", "only the operator retries");
    let operator = world.b.operator.clone();
    world.b.ok(&operator, retry(), world.now);
    assert_eq!(world.relay(&claims).unwrap().state, RelayState::Pending);
    assert_eq!(due(&world), Some(world.now), "due again now");
    assert_eq!((recovery(&world).unwrap().state, recovery(&world).unwrap().retried), (RelayState::Pending, 1));
    let again = world.b.run(Command { actor: operator.clone(), idem: None, op: retry() }, world.now);
    assert_eq!(again.outcome.unwrap_err().code.as_str(), "relay_not_stuck");
    // A answers at last (it replays or, having pruned the call, names its settlement): settled once.
    world.apply(&Step::Call { order: 0, lose_request: false, lose_answer: false });
    world.check(true);
    assert_eq!(world.relay(&claims).unwrap().state, RelayState::Settled);
    let record = recovery(&world).unwrap();
    assert_eq!((record.state, record.resolved_at), (RelayState::Settled, Some(world.now)));
    assert_eq!(world.b.db.rows.settlements_by_token.len(), 1, "B paid its merchant once");
}

/// A's corridor terms for B bound each token and what A may come to owe B.
#[test]
fn corridor_limits_are_enforced_when_the_token_is_issued() {
    let mut world = world();
    let buyer = world.buyer.clone();
    let claims = |n: u64, max: u64, world: &World| TokenClaims {
        v: 1,
        iss: world.a.registry.id.clone(),
        jti: TokenId(format!("tok_limit_{n}")),
        sub: world.buyer.id.clone(),
        aud: world.merchant_on_b.id.clone(),
        max: Amount(max),
        ord: OrderId(format!("limit-{n}")),
        res: "r".into(),
        iat_ms: world.now,
        exp_ms: world.now.plus_s(900),
        via: Some(world.b.registry.id.clone()),
    };
    // Per call: the terms allow 1 000.
    let op = Op::issue_token(claims(0, 1_001, &world), "t".into());
    let refused = world.a.run(Command { actor: buyer.clone(), idem: None, op }, world.now).outcome.unwrap_err();
    assert_eq!(refused.code.as_str(), "corridor_limit");
    // Outstanding: a peer A recognises with a small outstanding limit.
    let mut tight = decode::<Peer>(&world.a.db.rows.docs[&(DocKind::Peer, world.b.registry.id.to_string())]).unwrap();
    tight.terms.outstanding_max_minor = Amount(150);
    let operator = world.a.operator.clone();
    world.a.ok(&operator, Op::Federation(federation::Op::AddPeer { peer: tight }), world.now);
    world.apply(&Step::Issue(0));
    world.apply(&Step::Present(0));
    world.apply(&Step::Call { order: 0, lose_request: false, lose_answer: false });
    assert_eq!(world.a.balance(&AccountId::corridor(&world.b.registry.id)), 100, "A owes B 100 now");
    let op = Op::issue_token(claims(1, 51, &world), "t".into());
    let refused = world.a.run(Command { actor: buyer.clone(), idem: None, op }, world.now).outcome.unwrap_err();
    assert_eq!(refused.code.as_str(), "corridor_limit", "100 owed + 51 > 150");
    let op = Op::issue_token(claims(2, 50, &world), "t".into());
    assert!(world.a.run(Command { actor: buyer, idem: None, op }, world.now).outcome.is_ok(), "100 + 50 fits");
    world.check(false);
}

/// A peer weight above 10 000 bps and a relay from an unrecognised registry are refused.
#[test]
fn peers_are_checked() {
    let mut world = world();
    let mut heavy = decode::<Peer>(&world.a.db.rows.docs[&(DocKind::Peer, world.b.registry.id.to_string())]).unwrap();
    heavy.weight_bps = 10_001;
    let operator = world.a.operator.clone();
    let applied = world.a.run(
        Command { actor: operator, idem: None, op: Op::Federation(federation::Op::AddPeer { peer: heavy }) },
        world.now,
    );
    assert_eq!(applied.outcome.unwrap_err().code.as_str(), "peer_invalid");
    world.apply(&Step::Issue(0));
    let claims = world.tokens[&0].clone();
    // The buyer itself (not a peer) tries to settle the relayed token at A.
    let op = Op::Federation(federation::Op::SettleRelayed {
        claims: claims.clone(),
        amount: claims.max,
        order_id: claims.ord.clone(),
    });
    let buyer = world.buyer.clone();
    let applied = world.a.run(Command { actor: buyer, idem: None, op }, world.now);
    assert_eq!(applied.outcome.unwrap_err().code.as_str(), "peer_unknown");
    world.check(false);
}

/// Netting spelled out: A owes B what it settled for B's merchant; A's operator nets part of it, B records it
/// first and A after B's answer, so both corridors move by the same amount and still mirror. A lost answer is
/// sent again and B answers from its record (its corridor moves once); B refuses more than it is owed on its
/// own books (a relay whose answer it never got) and then nothing moves on either side; an id is one
/// statement; only the operator proposes, and only between this registry and a peer.
#[test]
fn a_netting_statement_moves_both_corridors_once_and_never_past_what_is_owed() {
    let mut world = world();
    for order in 0..3 {
        world.apply(&Step::Issue(order));
        world.apply(&Step::Present(order));
        world.apply(&Step::Call { order, lose_request: false, lose_answer: false });
    }
    let owed = (0..3).map(|o| World::amount(o).0).sum::<u64>();
    let corridor_a = |w: &World| w.a.balance(&AccountId::corridor(&w.b.registry.id));
    let corridor_b = |w: &World| w.b.balance(&AccountId::corridor(&w.a.registry.id));
    assert_eq!((corridor_a(&world), corridor_b(&world)), (owed as i128, -(owed as i128)));

    world.apply(&Step::Net { amount: 100, lose_answer: true });
    assert_eq!(corridor_b(&world), 100 - owed as i128, "B recorded the statement");
    assert_eq!(corridor_a(&world), owed as i128, "A has not heard B's answer yet");
    world.check(false);
    world.quiesce();
    world.check(true);
    assert_eq!((corridor_a(&world), corridor_b(&world)), (owed as i128 - 100, 100 - owed as i128));
    let stored = |side: &Side, id: &str| decode::<Netting>(&side.db.rows.docs[&(DocKind::Netting, id.into())]).unwrap();
    let on_a = stored(&world.a, "net_1");
    assert_eq!((on_a.state, on_a.signatures.len()), (NettingState::Recorded, 2), "both signatures on A");
    assert_eq!(stored(&world.b, "net_1").signatures.len(), 2, "both signatures on B");
    assert!(world.a.db.transfers.iter().any(|t| t.id.0 == "tr_net_net_1"), "A's leg is one transfer");
    // A resend after it was recorded on both sides moves nothing.
    let statement = on_a.statement.clone();
    world.send_netting(&statement, false);
    assert_eq!((corridor_a(&world), corridor_b(&world)), (owed as i128 - 100, 100 - owed as i128));

    // More than the rest on A's own books: refused at proposal.
    world.apply(&Step::Net { amount: owed, lose_answer: false });
    assert!(!world.a.db.rows.docs.contains_key(&(DocKind::Netting, "net_2".into())), "never proposed");
    // A settles a fourth token whose answer B never gets: A owes more on its books than B is owed on its own.
    world.apply(&Step::Issue(3));
    world.apply(&Step::Present(3));
    world.apply(&Step::Call { order: 3, lose_request: false, lose_answer: true });
    let rest_b = -corridor_b(&world) as u64;
    world.apply(&Step::Net { amount: rest_b + 1, lose_answer: false });
    let refused = stored(&world.a, "net_3");
    assert_eq!(refused.state, NettingState::Refused, "B refused it: {refused:?}");
    assert_eq!(refused.failure.unwrap().code.as_str(), "netting_exceeds_corridor");
    assert!(!world.b.db.rows.docs.contains_key(&(DocKind::Netting, "net_3".into())), "nothing recorded on B");
    assert_eq!(-corridor_b(&world) as u64, rest_b, "nothing moved on B");
    world.check(false);

    // One id, one statement; the operator proposes; the statement names this registry and a peer.
    let (operator, registry) = (world.a.operator.clone(), world.a.registry.id.clone());
    let propose = |statement: NettingStatement| {
        Op::Federation(federation::Op::ProposeNetting {
            registry: registry.clone(),
            statement,
            signature: signed_by(&registry),
        })
    };
    let code = |world: &mut World, actor: &Member, op: Op| {
        world.a.run(Command { actor: actor.clone(), idem: None, op }, world.now).outcome.unwrap_err().code.as_str()
    };
    let other = NettingStatement { amount_minor: Amount(5), ..statement.clone() };
    assert_eq!(code(&mut world, &operator, propose(other)), "netting_exists");
    let small = NettingStatement { id: "net_x".into(), amount_minor: Amount(1), ..statement.clone() };
    let buyer = world.buyer.clone();
    assert_eq!(code(&mut world, &buyer, propose(small.clone())), "not_permitted");
    let stranger = NettingStatement { payee: MemberId::from("did:key:z-stranger"), ..small.clone() };
    assert_eq!(code(&mut world, &operator, propose(stranger)), "netting_invalid");
    let neither =
        NettingStatement { payer: MemberId::from("did:key:z-x"), payee: MemberId::from("did:key:z-y"), ..small };
    assert_eq!(code(&mut world, &operator, propose(neither)), "netting_invalid");
    world.quiesce();
    world.check(true);
}

//! Federation: a second registry (the peer, "B") where a merchant sells to the
//! home registry's buyers through a corridor. The buyer's token is issued at
//! home; the merchant presents it at B, which opens a relay and calls home's
//! settle-relayed as the server's peer client does — a call that may not get
//! there (the peer is down), or whose answer comes too late (home settled, B
//! did not hear) — and records the answer; B's sweeper retries what is pending.
//! Home's operator now and then nets part of what home owes B (a netting
//! statement: home proposes, B records, home records B's answer, which may be
//! lost; the operator sends a statement still proposed again).

use crate::cast::{command, key_of, Cast};
use crate::rng::Rng;
use bazaar_core::command::{Command, Idem, Op};
use bazaar_core::crypto::{did_key, sha256_hex};
use bazaar_core::federation::{
    self, KeyEntry, NettingAnswer, NettingStatement, Peer, RegistrySignature, Relay, RelayResult, Terms,
};
use bazaar_core::model::{Member, MemberKind, OPERATOR_ID};
use bazaar_core::token::{self, TokenClaims};
use bazaar_core::{identity, pay};
use bazaar_types::{Amount, MemberId, OrderId, Timestamp, TokenId};

const PEER_REGISTRY_SEED: u8 = 43;
const PEER_OWNER_SEED: u8 = 30;
const SHOP_SEED: u8 = 31;
/// The corridor's terms, both ways: B's fee on relayed settlements, the largest token, the most owed.
pub const CORRIDOR_FEE_BPS: u32 = 150;
pub const CORRIDOR_CALL_MAX_MINOR: u64 = 20_000;
pub const CORRIDOR_OUTSTANDING_MAX_MINOR: u64 = 50_000_000;
/// A relayed token's maximum, in minor units, at least and at most.
const RELAYED_MINOR: (u64, u64) = (100, CORRIDOR_CALL_MAX_MINOR);
/// A relayed token's time to live, in seconds, at least and at most.
const RELAYED_TTL_S: (u64, u64) = (600, 3_600);
/// Relayed tokens the merchant picks among when presenting (the most recent).
const PRESENT_RECENT_MAX: usize = 6;
/// Of the relay flow's requests, this many in a hundred are home's operator netting the corridor.
const NETTING_PER_HUNDRED: u64 = 6;
/// A netting statement's amount, in minor units, at least and at most (more than is owed is refused).
const NETTED_MINOR: (u64, u64) = (50, 30_000);

/// The peer registry's members, and how each registry knows the other.
#[derive(Clone)]
pub struct PeerCast {
    pub registry: Member,
    pub operator: Member,
    pub owner: Member,
    pub shop: Member,
    /// The peer registry as the home registry stores it (a member of kind `peer`).
    pub peer_at_home: Member,
    /// The home registry as the peer stores it (a member of kind `peer`).
    pub home_at_peer: Member,
}

fn member(id: MemberId, kind: MemberKind, owner: Option<MemberId>, handle: &str, at: Timestamp) -> Member {
    Member { id, kind, owner, handle: handle.into(), created_at: at }
}

fn id_of(seed: u8) -> MemberId {
    MemberId(did_key(&key_of(seed).verifying_key()))
}

/// How `registry` is recognised by the other side.
fn peer_record(registry: &MemberId, handle: &str, at: Timestamp) -> Peer {
    Peer {
        did: registry.clone(),
        url: format!("http://{handle}.sim"),
        handle: handle.into(),
        weight_bps: 5_000,
        terms: Terms {
            fee_bps: CORRIDOR_FEE_BPS,
            per_call_max_minor: Amount(CORRIDOR_CALL_MAX_MINOR),
            outstanding_max_minor: Amount(CORRIDOR_OUTSTANDING_MAX_MINOR),
        },
        keys: vec![KeyEntry { did: registry.to_string(), from_ms: 0, until_ms: None, sig: None }],
        added_at: at,
    }
}

impl PeerCast {
    pub fn new(home: &Cast, at: Timestamp) -> PeerCast {
        let registry = member(id_of(PEER_REGISTRY_SEED), MemberKind::Registry, None, "registry", at);
        let operator = member(MemberId(OPERATOR_ID.into()), MemberKind::Operator, None, "operator", at);
        let owner = member(id_of(PEER_OWNER_SEED), MemberKind::Owner, None, "shop-owner", at);
        let shop = member(id_of(SHOP_SEED), MemberKind::Agent, Some(owner.id.clone()), "shop", at);
        let peer_at_home = member(registry.id.clone(), MemberKind::Peer, None, "", at);
        let home_at_peer = member(home.registry.id.clone(), MemberKind::Peer, None, "", at);
        PeerCast { registry, operator, owner, shop, peer_at_home, home_at_peer }
    }

    /// The peer registry's setup batches: bootstrap, the shop's owner and agent, and home recognised.
    pub fn setup(&self, home: &Cast, at: Timestamp) -> Vec<Vec<Command>> {
        let bootstrap = Op::Identity(identity::Op::Bootstrap {
            registry: self.registry.id.clone(),
            operator: self.operator.id.clone(),
            operator_credential_hash: "peer-op-cred".into(),
        });
        let owner = Op::Identity(identity::Op::CreateOwner {
            id: self.owner.id.clone(),
            handle: self.owner.handle.clone(),
            credential_hash: format!("c-{}", self.owner.id),
        });
        let recognise = Op::Federation(federation::Op::AddPeer { peer: peer_record(&home.registry.id, "home", at) });
        let invite =
            Op::Identity(identity::Op::IssueInvite { code_hash: "shop-invite".into(), expires_at: at.plus_s(3_600) });
        let redeem = Op::Identity(identity::Op::RedeemInvite {
            code_hash: "shop-invite".into(),
            agent: self.shop.id.clone(),
            handle: self.shop.handle.clone(),
            credential_hash: format!("c-{}", self.shop.id),
        });
        let stranger = member(self.shop.id.clone(), MemberKind::Agent, None, "", at);
        vec![
            vec![command(&self.registry, None, bootstrap)],
            vec![command(&self.operator, None, owner), command(&self.operator, None, recognise)],
            vec![command(&self.owner, None, invite), command(&stranger, None, redeem)],
        ]
    }

    /// The home registry's batch that recognises the peer.
    pub fn recognised_at_home(&self, home: &Cast, at: Timestamp) -> Vec<Command> {
        let op = Op::Federation(federation::Op::AddPeer { peer: peer_record(&self.registry.id, "peer", at) });
        vec![command(&home.operator, None, op)]
    }
}

/// What the relay flow remembers: the relayed tokens issued (and asked for), and the netting statements proposed.
#[derive(Default)]
pub struct Relays {
    next: u64,
    pub tokens: Vec<TokenClaims>,
    pub nettings: Vec<String>,
}

/// Where a request goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Side {
    Home,
    Peer,
}

impl Relays {
    /// A home buyer asks for a token to pay the shop through the corridor, or the shop presents one at B.
    pub fn next(&mut self, rng: &mut Rng, home: &Cast, peer: &PeerCast, now: Timestamp) -> (Side, Command) {
        self.next += 1;
        let key = Some(format!("r-{}", self.next));
        if rng.below(100) < NETTING_PER_HUNDRED {
            let statement = NettingStatement {
                id: format!("net_{:06}", self.next),
                payer: home.registry.id.clone(),
                payee: peer.registry.id.clone(),
                amount_minor: Amount(rng.between(NETTED_MINOR.0, NETTED_MINOR.1)),
                proposed_at_ms: now,
                reference: format!("wire {}", self.next),
            };
            self.nettings.push(statement.id.clone());
            let registry = home.registry.id.clone();
            let signature = signed_by(&registry);
            let op = Op::Federation(federation::Op::ProposeNetting { registry, statement, signature });
            return (Side::Home, command(&home.operator, key, op));
        }
        let present = rng.below(100) < 50;
        let latest = rng.below(10) < 7;
        let claims = if latest {
            self.tokens.last().cloned()
        } else {
            crate::flows::recent_of(rng, &self.tokens, PRESENT_RECENT_MAX)
        };
        match claims.filter(|_| present) {
            Some(claims) => {
                let token = token::encode(&claims, &home.registry_key);
                let op =
                    Op::Federation(federation::Op::RelayOpen { claims: claims.clone(), token, amount: claims.max });
                (Side::Peer, command(&peer.shop, key, op))
            }
            None => {
                let buyer = &home.agents[crate::cast::TRADERS[rng.index(crate::cast::TRADERS.len())]];
                let claims = TokenClaims {
                    v: 1,
                    iss: home.registry.id.clone(),
                    jti: TokenId(format!("tok_relay_{:06}", self.next)),
                    sub: buyer.id.clone(),
                    aud: peer.shop.id.clone(),
                    max: Amount(rng.between(RELAYED_MINOR.0, RELAYED_MINOR.1)),
                    ord: OrderId(format!("relay-order-{}", self.next)),
                    res: "https://shop.peer.sim/call".into(),
                    iat_ms: now,
                    exp_ms: now.plus_s(rng.between(RELAYED_TTL_S.0, RELAYED_TTL_S.1)),
                    via: Some(peer.registry.id.clone()),
                };
                let token = token::encode(&claims, &home.registry_key);
                self.tokens.push(claims.clone());
                (Side::Home, command(buyer, key, Op::issue_token(claims, token)))
            }
        }
    }
}

/// The home registry's settle-relayed for `relay`, as its edge builds it from the peer's
/// signed request: idempotent by token id, the fingerprint over the request.
pub fn settle_relayed(relay: &Relay, claims: &TokenClaims, peer: &PeerCast) -> Command {
    let fingerprint = sha256_hex(format!("{}|{}|{}", relay.token, relay.amount.0, relay.order_id).as_bytes());
    let idem = Idem::sent(format!("{}:settle_relayed", peer.peer_at_home.id), claims.jti.to_string(), fingerprint);
    let op = Op::Federation(federation::Op::SettleRelayed {
        claims: claims.clone(),
        amount: relay.amount,
        order_id: relay.order_id.clone(),
    });
    Command { actor: peer.peer_at_home.clone(), idem: Some(idem), op }
}

/// B records the issuer's answer (or its silence).
pub fn relay_finish(relay: &Relay, result: RelayResult, peer: &PeerCast) -> Command {
    let op = Op::Federation(federation::Op::RelayFinish {
        jti: relay.jti.clone(),
        merchant: relay.merchant.clone(),
        issuer: relay.issuer.clone(),
        result,
    });
    command(&peer.registry, None, op)
}

/// A registry's signature as its edge attaches it (the core stores signatures; the edges check them).
pub fn signed_by(registry: &MemberId) -> RegistrySignature {
    RegistrySignature { registry: registry.clone(), key: registry.to_string(), sig: format!("sig-{registry}") }
}

/// B records a netting statement home presents (home, as B knows it, is the actor).
pub fn record_netting(statement: &NettingStatement, home: &Cast, peer: &PeerCast) -> Command {
    let signatures = vec![signed_by(&home.registry.id), signed_by(&peer.registry.id)];
    let op = Op::Federation(federation::Op::RecordNetting {
        registry: peer.registry.id.clone(),
        statement: statement.clone(),
        signatures,
    });
    command(&peer.home_at_peer, None, op)
}

/// Home records B's answer to a statement it proposed.
pub fn confirm_netting(statement: &NettingStatement, answer: NettingAnswer, home: &Cast, peer: &PeerCast) -> Command {
    let op = Op::Federation(federation::Op::ConfirmNetting {
        id: statement.id.clone(),
        peer: peer.registry.id.clone(),
        answer,
    });
    command(&home.registry, None, op)
}

/// The peer's operator makes a stuck relay pending again.
pub fn relay_retry(jti: &str, peer: &PeerCast) -> Command {
    let op = Op::Federation(federation::Op::RelayRetry { jti: bazaar_types::TokenId(jti.to_string()) });
    command(&peer.operator, None, op)
}

/// Settle, void and fund on the peer are not needed: the shop only sells. Funding the shop's
/// owner keeps B's ledger non-trivial for the audit.
pub fn mint_at_peer(peer: &PeerCast, amount: u64) -> Command {
    command(&peer.operator, None, Op::Pay(pay::Op::Mint { owner: peer.owner.id.clone(), amount: Amount(amount) }))
}

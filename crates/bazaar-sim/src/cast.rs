//! Who takes part in a run: the registry, the operator, the dispute desk,
//! three owners and their agents (four traders and an independent arbiter),
//! each agent with the Ed25519 key behind its `did:key`; and the commands
//! that bring them to life, built as the core's model tests build them.

use bazaar_core::command::{Command, Idem, Op};
use bazaar_core::crypto::{did_key, sha256_hex};
use bazaar_core::model::{Member, MemberKind, DESK_ID, OPERATOR_ID};
use bazaar_core::{dispute, identity, pay};
use bazaar_types::{Amount, MemberId, Timestamp};
use ed25519_dalek::SigningKey;

/// The agents that buy and sell, by index into [`Cast::agents`].
pub const TRADERS: [usize; 4] = [0, 1, 2, 3];
/// The independent arbiter: agent 4, owned by the third owner.
pub const ARBITER: usize = 4;
/// Which owner (index into [`Cast::owners`]) owns each agent.
pub const AGENT_OWNERS: [usize; 5] = [0, 0, 1, 1, 2];
/// Units minted for each owner at the start.
pub const OPENING_MINT_MINOR: u64 = 5_000_000;
/// Units each agent is funded with at the start.
pub const OPENING_FUND_MINOR: u64 = 600_000;
/// Every agent's ceilings at the start: per call, per day, in total.
pub const OPENING_CEILINGS_MINOR: [u64; 3] = [90_000, 2_000_000, 20_000_000];
const REGISTRY_SEED: u8 = 42;
const OWNER_SEEDS: [u8; 3] = [1, 2, 3];
const AGENT_SEEDS: [u8; 5] = [10, 11, 12, 13, 14];

/// A trader of another owner than `agent`'s: a specialist, a worker, a seller.
pub fn other_owners_trader(rng: &mut crate::rng::Rng, agent: usize) -> usize {
    let others: Vec<usize> = TRADERS.iter().copied().filter(|&t| AGENT_OWNERS[t] != AGENT_OWNERS[agent]).collect();
    others[rng.index(others.len())]
}

pub fn key_of(seed: u8) -> SigningKey {
    SigningKey::from_bytes(&[seed; 32])
}

fn id_of(seed: u8) -> MemberId {
    MemberId(did_key(&key_of(seed).verifying_key()))
}

#[derive(Clone)]
pub struct Cast {
    pub registry_key: SigningKey,
    pub registry: Member,
    pub operator: Member,
    pub desk: Member,
    pub owners: Vec<Member>,
    pub agents: Vec<Member>,
    pub agent_keys: Vec<SigningKey>,
}

/// The fingerprint the edge would hash: the operation and its request.
pub fn fingerprint(op: &Op) -> String {
    sha256_hex(format!("{}\n{op:?}", op.name()).as_bytes())
}

/// A command under an idempotency key (`None`: unkeyed, as the sweeper sends).
pub fn command(actor: &Member, key: Option<String>, op: Op) -> Command {
    let idem = key.map(|key| Idem::sent(format!("{}:{}", actor.id, op.name()), key, fingerprint(&op)));
    Command { actor: actor.clone(), idem, op }
}

fn member(id: MemberId, kind: MemberKind, owner: Option<MemberId>, handle: &str, at: Timestamp) -> Member {
    Member { id, kind, owner, handle: handle.into(), created_at: at }
}

impl Cast {
    /// The members as they will be stored once [`Cast::setup`] has run at `at`.
    pub fn new(at: Timestamp) -> Cast {
        let registry_key = key_of(REGISTRY_SEED);
        let registry = member(id_of(REGISTRY_SEED), MemberKind::Registry, None, "registry", at);
        let operator = member(MemberId(OPERATOR_ID.into()), MemberKind::Operator, None, "operator", at);
        let desk = member(MemberId(DESK_ID.into()), MemberKind::Agent, Some(operator.id.clone()), "desk", at);
        let owners: Vec<Member> = OWNER_SEEDS
            .iter()
            .enumerate()
            .map(|(i, &s)| member(id_of(s), MemberKind::Owner, None, &format!("owner-{i}"), at))
            .collect();
        let agents = AGENT_SEEDS
            .iter()
            .zip(AGENT_OWNERS)
            .enumerate()
            .map(|(n, (&s, o))| {
                member(id_of(s), MemberKind::Agent, Some(owners[o].id.clone()), &format!("agent-{n}"), at)
            })
            .collect();
        let agent_keys = AGENT_SEEDS.iter().map(|&s| key_of(s)).collect();
        Cast { registry_key, registry, operator, desk, owners, agents, agent_keys }
    }

    pub fn owner_of(&self, agent: usize) -> &Member {
        &self.owners[AGENT_OWNERS[agent]]
    }

    /// The member with this id, if it is one of the cast.
    pub fn find(&self, id: &MemberId) -> Option<&Member> {
        [&self.registry, &self.operator, &self.desk]
            .into_iter()
            .chain(&self.owners)
            .chain(&self.agents)
            .find(|m| &m.id == id)
    }

    pub fn agent_index(&self, id: &MemberId) -> Option<usize> {
        self.agents.iter().position(|m| &m.id == id)
    }

    /// The batches that bring the cast to life, in order; each must succeed in full.
    pub fn setup(&self, at: Timestamp) -> Vec<Vec<Command>> {
        let bootstrap = Op::Identity(identity::Op::Bootstrap {
            registry: self.registry.id.clone(),
            operator: self.operator.id.clone(),
            operator_credential_hash: "op-cred".into(),
        });
        let mut people = vec![command(
            &self.operator,
            None,
            Op::Dispute(dispute::Op::CreateDesk { credential_hash: "desk-cred".into() }),
        )];
        for o in &self.owners {
            let op = Op::Identity(identity::Op::CreateOwner {
                id: o.id.clone(),
                handle: o.handle.clone(),
                credential_hash: format!("c-{}", o.id),
            });
            people.push(command(&self.operator, None, op));
        }
        let mut batches = vec![vec![command(&self.registry, None, bootstrap)], people];
        for (n, agent) in self.agents.iter().enumerate() {
            let code_hash = format!("invite-{n}");
            let invite =
                Op::Identity(identity::Op::IssueInvite { code_hash: code_hash.clone(), expires_at: at.plus_s(3_600) });
            let redeem = Op::Identity(identity::Op::RedeemInvite {
                code_hash,
                agent: agent.id.clone(),
                handle: agent.handle.clone(),
                credential_hash: format!("c-{}", agent.id),
            });
            let stranger = member(agent.id.clone(), MemberKind::Agent, None, "", at);
            batches.push(vec![command(self.owner_of(n), None, invite), command(&stranger, None, redeem)]);
        }
        let mut money: Vec<Command> = self
            .owners
            .iter()
            .map(|o| {
                command(
                    &self.operator,
                    None,
                    Op::Pay(pay::Op::Mint { owner: o.id.clone(), amount: Amount(OPENING_MINT_MINOR) }),
                )
            })
            .collect();
        for (n, agent) in self.agents.iter().enumerate() {
            let owner = self.owner_of(n);
            money.push(command(
                owner,
                None,
                Op::Pay(pay::Op::Fund { agent: agent.id.clone(), amount: Amount(OPENING_FUND_MINOR) }),
            ));
            let [per_call_max, per_day_max, total_max] = OPENING_CEILINGS_MINOR.map(Amount);
            money.push(command(
                owner,
                None,
                Op::Pay(pay::Op::SetBudget { agent: agent.id.clone(), per_call_max, per_day_max, total_max }),
            ));
        }
        batches.push(money);
        batches
    }
}

//! Commands: every state change in Bazaar is one of these, applied by the
//! single writer in batches. A command names the rows it needs ([`Keys`]) so an
//! adapter can load them all before [`crate::apply::apply_batch`] runs.

use crate::model::Member;
use crate::refusal::Refusal;
use crate::token::TokenClaims;
use bazaar_types::{AccountId, Amount, HoldId, MemberId, OrderId, Timestamp, TokenId};
use std::collections::BTreeSet;

/// The result of one command, as stored under an idempotency key and as
/// replayed: a JSON receipt or a refusal.
pub type Outcome = Result<serde_json::Value, Refusal>;

/// An idempotency key in its scope (the caller and the operation), with the
/// fingerprint of the request it first came with.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Idem {
    pub scope: String,
    pub key: String,
    pub fingerprint: String,
}

#[derive(Clone, Debug)]
pub struct Command {
    /// Who asks. `authored_by` is `actor.id`; `on_behalf_of` is its principal.
    pub actor: Member,
    pub idem: Option<Idem>,
    pub op: Op,
}

#[derive(Clone, Debug)]
pub enum Op {
    /// First start: the registry, its system accounts and the operator.
    Bootstrap {
        registry: MemberId,
        operator: MemberId,
        operator_credential_hash: String,
    },
    CreateOwner {
        id: MemberId,
        handle: String,
        credential_hash: String,
    },
    IssueInvite {
        code_hash: String,
        expires_at: Timestamp,
    },
    RedeemInvite {
        code_hash: String,
        agent: MemberId,
        handle: String,
        credential_hash: String,
    },
    RotateCredential {
        old_hash: String,
        new_hash: String,
    },
    RevokeCredential {
        member: MemberId,
        hash: String,
    },
    Rename {
        member: MemberId,
        handle: String,
    },
    SetBudget {
        agent: MemberId,
        per_call_max: Amount,
        per_day_max: Amount,
        total_max: Amount,
    },
    Mint {
        owner: MemberId,
        amount: Amount,
    },
    Fund {
        agent: MemberId,
        amount: Amount,
    },
    IssueToken {
        claims: TokenClaims,
        token: String,
    },
    Settle {
        claims: TokenClaims,
        amount: Amount,
        order_id: OrderId,
    },
    VoidToken {
        jti: TokenId,
        buyer: MemberId,
    },
    ExpireHold {
        jti: TokenId,
        buyer: MemberId,
    },
}

impl Op {
    /// A stable name, used in idempotency scopes and metrics.
    pub fn name(&self) -> &'static str {
        match self {
            Op::Bootstrap { .. } => "bootstrap",
            Op::CreateOwner { .. } => "create_owner",
            Op::IssueInvite { .. } => "issue_invite",
            Op::RedeemInvite { .. } => "redeem_invite",
            Op::RotateCredential { .. } => "rotate_credential",
            Op::RevokeCredential { .. } => "revoke_credential",
            Op::Rename { .. } => "rename",
            Op::SetBudget { .. } => "set_budget",
            Op::Mint { .. } => "mint",
            Op::Fund { .. } => "fund",
            Op::IssueToken { .. } => "issue_token",
            Op::Settle { .. } => "settle",
            Op::VoidToken { .. } => "void_token",
            Op::ExpireHold { .. } => "expire_hold",
        }
    }
}

pub fn hold_id_for(jti: &TokenId) -> HoldId {
    HoldId(format!("hold_{jti}"))
}

/// The rows a batch needs, by table.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Keys {
    pub members: BTreeSet<MemberId>,
    pub handles: BTreeSet<String>,
    pub credentials: BTreeSet<String>,
    pub invites: BTreeSet<String>,
    pub accounts: BTreeSet<AccountId>,
    pub budgets: BTreeSet<MemberId>,
    pub holds: BTreeSet<HoldId>,
    pub tokens: BTreeSet<TokenId>,
    pub settlements_by_token: BTreeSet<TokenId>,
    pub settlements_by_order: BTreeSet<(MemberId, OrderId)>,
    pub idem: BTreeSet<(String, String)>,
    pub docs: BTreeSet<(crate::model::DocKind, String)>,
}

impl Keys {
    pub fn add(&mut self, command: &Command) {
        self.members.insert(command.actor.id.clone());
        if let Some(idem) = &command.idem {
            self.idem.insert((idem.scope.clone(), idem.key.clone()));
        }
        match &command.op {
            Op::Bootstrap { registry, operator, operator_credential_hash } => {
                self.members.insert(registry.clone());
                self.members.insert(operator.clone());
                self.credentials.insert(operator_credential_hash.clone());
                self.accounts.insert(AccountId::issuance());
                self.accounts.insert(AccountId::fees());
            }
            Op::CreateOwner { id, handle, credential_hash } => {
                self.members.insert(id.clone());
                self.handles.insert(handle.clone());
                self.credentials.insert(credential_hash.clone());
            }
            Op::IssueInvite { code_hash, .. } => {
                self.invites.insert(code_hash.clone());
            }
            Op::RedeemInvite { code_hash, agent, handle, credential_hash } => {
                self.invites.insert(code_hash.clone());
                self.members.insert(agent.clone());
                self.handles.insert(handle.clone());
                self.credentials.insert(credential_hash.clone());
            }
            Op::RotateCredential { old_hash, new_hash } => {
                self.credentials.insert(old_hash.clone());
                self.credentials.insert(new_hash.clone());
            }
            Op::RevokeCredential { member, hash } => {
                self.members.insert(member.clone());
                self.credentials.insert(hash.clone());
            }
            Op::Rename { member, handle } => {
                self.members.insert(member.clone());
                self.handles.insert(handle.clone());
            }
            Op::SetBudget { agent, .. } => {
                self.members.insert(agent.clone());
                self.budgets.insert(agent.clone());
            }
            Op::Mint { owner, .. } => {
                self.members.insert(owner.clone());
                self.accounts.insert(AccountId::issuance());
                self.accounts.insert(AccountId::of_member(owner));
            }
            Op::Fund { agent, .. } => {
                self.members.insert(agent.clone());
                self.accounts.insert(AccountId::of_member(&command.actor.id));
                self.accounts.insert(AccountId::of_member(agent));
            }
            Op::IssueToken { claims, .. } => {
                self.members.insert(claims.aud.clone());
                self.accounts.insert(AccountId::of_member(&claims.sub));
                self.budgets.insert(claims.sub.clone());
                self.tokens.insert(claims.jti.clone());
            }
            Op::Settle { claims, order_id, .. } => {
                self.add_token_rows(&claims.jti, &claims.sub);
                self.accounts.insert(AccountId::of_member(&claims.aud));
                self.accounts.insert(AccountId::fees());
                self.settlements_by_order.insert((claims.aud.clone(), order_id.clone()));
                self.settlements_by_order.insert((claims.aud.clone(), claims.ord.clone()));
            }
            Op::VoidToken { jti, buyer } | Op::ExpireHold { jti, buyer } => {
                self.add_token_rows(jti, buyer);
            }
        }
    }

    fn add_token_rows(&mut self, jti: &TokenId, buyer: &MemberId) {
        self.members.insert(buyer.clone());
        self.tokens.insert(jti.clone());
        self.holds.insert(hold_id_for(jti));
        self.settlements_by_token.insert(jti.clone());
        self.accounts.insert(AccountId::of_member(buyer));
        self.budgets.insert(buyer.clone());
    }
}

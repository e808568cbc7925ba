//! Commands: every state change in Bazaar is one of these, applied by the
//! single writer in batches. A command names the rows it needs ([`Keys`]) so an
//! adapter can load them all before [`crate::apply::apply_batch`] runs.

use crate::dispute::{dispute_id_for, DisputeAct, ReasonCode, Subject};
use crate::escrow::{contract_id_for, milestone_hold, ContractAct, MilestoneSpec};
use crate::model::{DocKind, Member};
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
    /// The registry's dispute desk: an agent of the operator, the default arbiter.
    CreateDesk {
        credential_hash: String,
    },
    /// The buyer (the actor) opens an escrowed contract. Its id is derived from
    /// the parties and the command's idempotency key, which is required.
    CreateContract {
        seller: MemberId,
        arbiter: MemberId,
        milestones: Vec<MilestoneSpec>,
        terms_hash: String,
        review_window_s: u64,
    },
    /// Anything done to an existing contract. `buyer`, `seller` and
    /// `milestones` are read from the stored contract by the edge so the rows
    /// can be loaded; the core checks they still match.
    ContractAct {
        contract: String,
        buyer: MemberId,
        seller: MemberId,
        milestones: u32,
        act: ContractAct,
    },
    FileDispute {
        subject: Subject,
        /// The buyer of the subject, read by the edge; the core checks it.
        claimant: MemberId,
        respondent: MemberId,
        reason: ReasonCode,
        claimed: Amount,
        note: String,
    },
    DisputeAct {
        dispute: String,
        subject: Subject,
        claimant: MemberId,
        respondent: MemberId,
        act: DisputeAct,
    },
    StakeLock {
        amount: Amount,
    },
    /// Starts the cooldown on `amount` of the actor's stake.
    StakeUnlock {
        amount: Amount,
    },
    /// Moves unlocked stake back to the balance after the cooldown.
    StakeWithdraw,
    /// The operator recognises (or updates) a peer registry.
    AddPeer {
        peer: crate::federation::Peer,
    },
    /// The registry records a new signing key on the event ledger.
    RecordKey {
        entry: crate::federation::KeyEntry,
    },
    /// The registry records the figures of a passport it signed.
    RecordPassport {
        issued: crate::reputation::IssuedFigures,
        credential_id: String,
        valid_until_ms: i64,
    },
    /// The registry stores reputation imported from a verified peer passport.
    ImportPassport {
        record: crate::federation::ImportRecord,
    },
    /// A peer registry (the actor) relays the settlement of a token this registry issued.
    SettleRelayed {
        claims: TokenClaims,
        amount: Amount,
        order_id: OrderId,
    },
    /// The merchant (the actor) presents a peer registry's token for settlement.
    RelayOpen {
        claims: TokenClaims,
        token: String,
        amount: Amount,
    },
    /// The registry enrolls an agent of a peer registry as a guest (its DID
    /// signature checked by the edge), or gives a returning guest a new credential.
    EnrollGuest {
        agent: MemberId,
        handle: String,
        credential_hash: String,
        home: MemberId,
    },
    /// A seller's agent (the actor) lists a product, or relists the same SKU.
    PutListing {
        spec: crate::market::ListingSpec,
    },
    /// A buyer's agent (the actor) opens a request for quote; the edge names the
    /// sellers whose listings matched. Its id derives from the required key.
    CreateRfq {
        item: String,
        request: crate::market::Request,
        invited: Vec<(MemberId, String)>,
    },
    /// A seller's agent (the actor) proposes a price on a request with one of
    /// its listings; `committed` is what it already promised before the deadline.
    MakeOffer {
        rfq: String,
        listing: String,
        proposal: crate::market::Proposal,
        committed: u64,
    },
    /// The buyer closes its request; the allocation is fixed.
    CloseRfq {
        rfq: String,
    },
    /// An owner (the actor) sets when its agent's orders need a person's approval.
    SetOrderPolicy {
        agent: MemberId,
        approval_above: Amount,
    },
    /// The buyer's agent (the actor) orders a closed request's allocation. The
    /// edge names the listings and the share count so their rows load.
    CreateOrder {
        rfq: String,
        listings: Vec<String>,
        lines: u32,
        /// Each share's maker, in allocation order (for the escrowed contracts' rows).
        sellers: Vec<MemberId>,
        /// Wait for the owner's approval whatever its policy says.
        require_approval: bool,
    },
    /// The buyer's owner approves (or declines) an order waiting for it.
    DecideOrder {
        order: String,
        buyer: MemberId,
        lines: u32,
        sellers: Vec<MemberId>,
        approve: bool,
    },
    /// A maker (the actor) proves shipment of her share and is paid for it.
    ProveShipment {
        order: String,
        buyer: MemberId,
        line: u32,
        receipt_sha256: String,
        tracking: String,
        /// The receipt image itself (content type, bytes), stored by its hash with the payment.
        receipt: Option<(String, Vec<u8>)>,
    },
    /// The buyer agent or its owner cancels a share before it ships.
    CancelShare {
        order: String,
        buyer: MemberId,
        seller: MemberId,
        line: u32,
    },
    /// The registry counts a search (its normalised query and hits) for demand.
    RecordSearch {
        query: String,
        hits: u64,
    },
    /// The registry records the issuer's answer to a relayed settlement.
    RelayFinish {
        jti: TokenId,
        merchant: MemberId,
        issuer: MemberId,
        result: crate::federation::RelayResult,
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
            Op::CreateDesk { .. } => "create_desk",
            Op::CreateContract { .. } => "create_contract",
            Op::ContractAct { act, .. } => act.name(),
            Op::FileDispute { .. } => "file_dispute",
            Op::DisputeAct { act, .. } => act.name(),
            Op::StakeLock { .. } => "stake_lock",
            Op::StakeUnlock { .. } => "stake_unlock",
            Op::StakeWithdraw => "stake_withdraw",
            Op::AddPeer { .. } => "add_peer",
            Op::RecordKey { .. } => "record_key",
            Op::RecordPassport { .. } => "record_passport",
            Op::ImportPassport { .. } => "import_passport",
            Op::SettleRelayed { .. } => "settle_relayed",
            Op::RelayOpen { .. } => "relay_open",
            Op::RelayFinish { .. } => "relay_finish",
            Op::EnrollGuest { .. } => "enroll_guest",
            Op::PutListing { .. } => "put_listing",
            Op::RecordSearch { .. } => "record_search",
            Op::CreateRfq { .. } => "create_rfq",
            Op::MakeOffer { .. } => "make_offer",
            Op::CloseRfq { .. } => "close_rfq",
            Op::SetOrderPolicy { .. } => "set_order_policy",
            Op::CreateOrder { .. } => "create_order",
            Op::DecideOrder { .. } => "decide_order",
            Op::ProveShipment { .. } => "prove_shipment",
            Op::CancelShare { .. } => "cancel_share",
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
                if let Some(via) = &claims.via {
                    self.docs.insert((DocKind::Peer, via.to_string()));
                    self.accounts.insert(AccountId::corridor(via));
                }
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
            Op::CreateDesk { credential_hash } => {
                self.members.insert(MemberId(crate::model::DESK_ID.into()));
                self.handles.insert(crate::model::DESK_HANDLE.into());
                self.credentials.insert(credential_hash.clone());
            }
            Op::CreateContract { seller, arbiter, milestones, .. } => {
                let buyer = &command.actor.id;
                self.members.insert(seller.clone());
                self.members.insert(arbiter.clone());
                self.accounts.insert(AccountId::of_member(buyer));
                self.budgets.insert(buyer.clone());
                if let Some(idem) = &command.idem {
                    let id = contract_id_for(buyer, seller, arbiter, &idem.key);
                    for index in 0..milestones.len().min(crate::types::limits::CONTRACT_MILESTONES_MAX) {
                        self.holds.insert(milestone_hold(&id, index as u32));
                    }
                    self.docs.insert((DocKind::Contract, id));
                }
            }
            Op::ContractAct { contract, buyer, seller, milestones, .. } => {
                self.add_contract_rows(contract, buyer, seller, *milestones);
            }
            Op::FileDispute { subject, claimant, respondent, .. }
            | Op::DisputeAct { subject, claimant, respondent, .. } => {
                let id = dispute_id_for(subject);
                self.docs.insert((DocKind::Dispute, id.clone()));
                self.members.insert(claimant.clone());
                self.members.insert(respondent.clone());
                self.accounts.insert(AccountId::of_member(claimant));
                self.accounts.insert(AccountId::of_member(respondent));
                self.accounts.insert(AccountId::stake_of(respondent));
                self.accounts.insert(AccountId::insurance());
                self.accounts.insert(AccountId::fees());
                self.budgets.insert(claimant.clone());
                self.docs.insert((DocKind::Stake, respondent.to_string()));
                for hold in crate::dispute::dispute_holds(&id) {
                    self.holds.insert(hold);
                }
                match subject {
                    Subject::Call { merchant, order_id } => {
                        self.settlements_by_order.insert((merchant.clone(), order_id.clone()));
                    }
                    Subject::Milestone { contract, index } => {
                        self.docs.insert((DocKind::Contract, contract.clone()));
                        self.holds.insert(milestone_hold(contract, *index));
                    }
                }
            }
            Op::AddPeer { peer } => {
                self.members.insert(peer.did.clone());
                self.handles.insert(peer.handle.clone());
                self.docs.insert((DocKind::Peer, peer.did.to_string()));
                self.accounts.insert(AccountId::corridor(&peer.did));
            }
            Op::RecordKey { .. } | Op::RecordPassport { .. } => {}
            Op::ImportPassport { record } => {
                self.docs.insert((DocKind::Peer, record.imported.registry.clone()));
                self.docs.insert((
                    DocKind::Import,
                    crate::federation::import_id(&record.subject, &record.imported.registry),
                ));
            }
            Op::SettleRelayed { claims, order_id, .. } => {
                self.add_token_rows(&claims.jti, &claims.sub);
                self.docs.insert((DocKind::Peer, command.actor.id.to_string()));
                self.accounts.insert(AccountId::corridor(&command.actor.id));
                self.accounts.insert(AccountId::fees());
                self.settlements_by_order.insert((claims.aud.clone(), order_id.clone()));
                self.settlements_by_order.insert((claims.aud.clone(), claims.ord.clone()));
            }
            Op::RelayOpen { claims, .. } => {
                self.docs.insert((DocKind::Relay, claims.jti.to_string()));
                self.docs.insert((DocKind::Peer, claims.iss.to_string()));
                self.settlements_by_order.insert((claims.aud.clone(), claims.ord.clone()));
            }
            Op::PutListing { spec } => {
                self.docs.insert((DocKind::Listing, crate::market::listing_id(&command.actor.id, &spec.sku)));
            }
            Op::RecordSearch { .. } => {}
            Op::CreateRfq { .. } => {
                if let Some(idem) = &command.idem {
                    self.docs.insert((DocKind::Rfq, crate::market::rfq_id(&command.actor.id, &idem.key)));
                }
            }
            Op::MakeOffer { rfq, listing, .. } => {
                self.docs.insert((DocKind::Rfq, rfq.clone()));
                self.docs.insert((DocKind::Listing, listing.clone()));
            }
            Op::CloseRfq { rfq } => {
                self.docs.insert((DocKind::Rfq, rfq.clone()));
            }
            Op::SetOrderPolicy { agent, .. } => {
                self.members.insert(agent.clone());
                self.docs.insert((DocKind::Policy, agent.to_string()));
            }
            Op::CreateOrder { rfq, listings, lines, sellers, .. } => {
                let buyer = &command.actor.id;
                self.docs.insert((DocKind::Rfq, rfq.clone()));
                self.docs.insert((DocKind::Policy, buyer.to_string()));
                for listing in listings.iter().take(crate::types::limits::ORDER_LINES_MAX) {
                    self.docs.insert((DocKind::Listing, listing.clone()));
                }
                self.accounts.insert(AccountId::of_member(buyer));
                self.budgets.insert(buyer.clone());
                if let Some(idem) = &command.idem {
                    let id = crate::order::order_id(buyer, &idem.key);
                    self.add_order_holds(&id, *lines);
                    self.add_share_contracts(&id, buyer, sellers);
                    self.docs.insert((DocKind::Order, id));
                }
            }
            Op::DecideOrder { order, buyer, lines, sellers, .. } => {
                self.docs.insert((DocKind::Order, order.clone()));
                self.accounts.insert(AccountId::of_member(buyer));
                self.budgets.insert(buyer.clone());
                self.add_order_holds(order, *lines);
                self.add_share_contracts(order, buyer, sellers);
            }
            Op::ProveShipment { order, buyer, line, receipt_sha256, .. } => {
                self.docs.insert((DocKind::Order, order.clone()));
                self.docs.insert((DocKind::Blob, receipt_sha256.to_ascii_lowercase()));
                self.accounts.insert(AccountId::of_member(buyer));
                self.accounts.insert(AccountId::of_member(&command.actor.id));
                self.accounts.insert(AccountId::fees());
                self.budgets.insert(buyer.clone());
                self.holds.insert(crate::order::line_hold(order, *line));
                self.add_share_contract(order, buyer, &command.actor.id, *line);
            }
            Op::CancelShare { order, buyer, seller, line } => {
                self.docs.insert((DocKind::Order, order.clone()));
                self.accounts.insert(AccountId::of_member(buyer));
                self.budgets.insert(buyer.clone());
                self.holds.insert(crate::order::line_hold(order, *line));
                self.add_share_contract(order, buyer, seller, *line);
            }
            Op::EnrollGuest { agent, handle, credential_hash, home } => {
                self.members.insert(agent.clone());
                self.handles.insert(handle.clone());
                self.credentials.insert(credential_hash.clone());
                self.budgets.insert(agent.clone());
                self.docs.insert((DocKind::Peer, home.to_string()));
            }
            Op::RelayFinish { jti, merchant, issuer, .. } => {
                self.docs.insert((DocKind::Relay, jti.to_string()));
                self.docs.insert((DocKind::Peer, issuer.to_string()));
                self.accounts.insert(AccountId::corridor(issuer));
                self.accounts.insert(AccountId::of_member(merchant));
                self.accounts.insert(AccountId::fees());
                self.settlements_by_token.insert(jti.clone());
            }
            Op::StakeLock { .. } | Op::StakeUnlock { .. } | Op::StakeWithdraw => {
                let me = &command.actor.id;
                self.accounts.insert(AccountId::of_member(me));
                self.accounts.insert(AccountId::stake_of(me));
                self.docs.insert((DocKind::Stake, me.to_string()));
            }
        }
    }

    fn add_contract_rows(&mut self, contract: &str, buyer: &MemberId, seller: &MemberId, milestones: u32) {
        self.docs.insert((DocKind::Contract, contract.to_string()));
        self.members.insert(buyer.clone());
        self.members.insert(seller.clone());
        self.accounts.insert(AccountId::of_member(buyer));
        self.accounts.insert(AccountId::of_member(seller));
        self.accounts.insert(AccountId::fees());
        self.budgets.insert(buyer.clone());
        let count = (milestones as usize).min(crate::types::limits::CONTRACT_MILESTONES_MAX) as u32;
        for index in 0..count {
            self.holds.insert(milestone_hold(contract, index));
        }
    }

    /// The escrowed contract (and its milestone hold) a share rides above the threshold.
    fn add_share_contract(&mut self, order: &str, buyer: &MemberId, seller: &MemberId, index: u32) {
        let contract = crate::order::share_contract(order, buyer, seller, index);
        self.holds.insert(milestone_hold(&contract, 0));
        self.docs.insert((DocKind::Contract, contract));
        self.accounts.insert(AccountId::of_member(seller));
    }

    fn add_share_contracts(&mut self, order: &str, buyer: &MemberId, sellers: &[MemberId]) {
        for (index, seller) in sellers.iter().take(crate::types::limits::ORDER_LINES_MAX).enumerate() {
            self.add_share_contract(order, buyer, seller, index as u32);
        }
    }

    fn add_order_holds(&mut self, order: &str, lines: u32) {
        for index in 0..lines.min(crate::types::limits::ORDER_LINES_MAX as u32) {
            self.holds.insert(crate::order::line_hold(order, index));
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

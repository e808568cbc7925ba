//! The state machine: applies a batch of commands to a snapshot, in order,
//! and returns each command's outcome plus the rows to write.
//!
//! Every handler checks everything first and only then writes, so a refusal
//! leaves no trace except its idempotency record (and the event saying so).

use crate::chain;
use crate::command::{hold_id_for, Command, Op, Outcome};
use crate::model::*;
use crate::refusal::{Code, Refusal};
use crate::state::{Changes, Dirty, Snapshot};
use crate::token::TokenClaims;
use bazaar_types::{AccountId, Amount, HoldId, MemberId, OrderId, Timestamp, TokenId, TransferId};
use serde_json::json;

/// Registry-wide settings the core needs.
#[derive(Clone, Debug)]
pub struct Config {
    pub fee_bps: u32,
    pub escrow_threshold: Amount,
    /// Dispute phase deadlines and the stake cooldown.
    pub windows: crate::dispute::Windows,
}

impl Config {
    /// The published defaults: `PROTOCOL_FEE_BPS` and `ESCROW_THRESHOLD_MINOR`.
    pub fn standard() -> Config {
        use bazaar_types::limits::{ESCROW_THRESHOLD_MINOR, PROTOCOL_FEE_BPS};
        Config {
            fee_bps: PROTOCOL_FEE_BPS,
            escrow_threshold: Amount(ESCROW_THRESHOLD_MINOR),
            windows: crate::dispute::Windows::standard(),
        }
    }
}

#[derive(Clone, Debug, PartialEq)]
pub struct Applied {
    pub outcome: Outcome,
    /// The outcome came from an idempotency record, not from running the command.
    pub replayed: bool,
}

pub fn apply_batch(
    snap: &mut Snapshot,
    config: &Config,
    commands: &[Command],
    now: Timestamp,
) -> (Vec<Applied>, Changes) {
    let mut batch = Batch { snap, config, now, changes: Changes::default(), dirty: Dirty::default() };
    let results = commands.iter().map(|c| batch.apply_one(c)).collect();
    let changes = batch.finish();
    (results, changes)
}

pub(crate) struct Batch<'a> {
    pub(crate) snap: &'a mut Snapshot,
    pub(crate) config: &'a Config,
    pub(crate) now: Timestamp,
    pub(crate) changes: Changes,
    dirty: Dirty,
}

pub(crate) type Step = Result<serde_json::Value, Refusal>;

pub(crate) fn refuse<T>(code: Code, detail: impl Into<String>) -> Result<T, Refusal> {
    Err(Refusal::new(code, detail))
}

impl Batch<'_> {
    fn apply_one(&mut self, command: &Command) -> Applied {
        if let Some(idem) = &command.idem {
            if let Some(record) = self.snap.idem.get(&(idem.scope.clone(), idem.key.clone())) {
                if record.fingerprint != idem.fingerprint {
                    let refusal = Refusal::new(
                        Code::IdempotencyConflict,
                        "This Idempotency-Key was first used with a different request; use a new key for a new request.",
                    );
                    return Applied { outcome: Err(refusal), replayed: false };
                }
                let outcome: Outcome = serde_json::from_str(&record.outcome).expect("stored outcomes parse");
                return Applied { outcome, replayed: true };
            }
        }
        let outcome = self.run(command);
        if let Some(idem) = &command.idem {
            let record = IdempotencyRecord {
                scope: idem.scope.clone(),
                key: idem.key.clone(),
                fingerprint: idem.fingerprint.clone(),
                outcome: serde_json::to_string(&outcome).expect("outcomes serialize"),
                created_at: self.now,
            };
            self.snap.idem.insert((record.scope.clone(), record.key.clone()), record.clone());
            self.changes.insert_idem.push(record);
            if let Err(refusal) = &outcome {
                let body = json!({"op": command.op.name(), "code": refusal.code, "key": idem.key});
                self.event(command, "refusal.recorded", body);
            }
        }
        Applied { outcome, replayed: false }
    }

    fn run(&mut self, command: &Command) -> Step {
        match &command.op {
            Op::Bootstrap { registry, operator, operator_credential_hash } => {
                self.bootstrap(command, registry, operator, operator_credential_hash)
            }
            Op::CreateOwner { id, handle, credential_hash } => self.create_owner(command, id, handle, credential_hash),
            Op::IssueInvite { code_hash, expires_at } => self.issue_invite(command, code_hash, *expires_at),
            Op::RedeemInvite { code_hash, agent, handle, credential_hash } => {
                self.redeem_invite(command, code_hash, agent, handle, credential_hash)
            }
            Op::RotateCredential { old_hash, new_hash } => self.rotate_credential(command, old_hash, new_hash),
            Op::RevokeCredential { member, hash } => self.revoke_credential(command, member, hash),
            Op::Rename { member, handle } => self.rename(command, member, handle),
            Op::SetBudget { agent, per_call_max, per_day_max, total_max } => {
                self.set_budget(command, agent, [*per_call_max, *per_day_max, *total_max])
            }
            Op::Mint { owner, amount } => self.mint(command, owner, *amount),
            Op::Fund { agent, amount } => self.fund(command, agent, *amount),
            Op::IssueToken { claims, token } => self.issue_token(command, claims, token),
            Op::Settle { claims, amount, order_id } => self.settle(command, claims, *amount, order_id),
            Op::VoidToken { jti, buyer } => self.end_hold(command, jti, buyer, HoldState::Voided),
            Op::ExpireHold { jti, buyer } => self.end_hold(command, jti, buyer, HoldState::Expired),
            Op::CreateDesk { credential_hash } => self.create_desk(command, credential_hash),
            Op::CreateContract { seller, arbiter, milestones, terms_hash, review_window_s } => {
                self.create_contract(command, seller, arbiter, milestones, terms_hash, *review_window_s)
            }
            Op::ContractAct { contract, buyer, seller, act, .. } => {
                self.contract_act(command, contract, buyer, seller, act)
            }
            Op::FileDispute { subject, claimant, respondent, reason, claimed, note } => {
                self.file_dispute(command, subject, (claimant, respondent), *reason, *claimed, note)
            }
            Op::DisputeAct { dispute, claimant, respondent, act, .. } => {
                self.dispute_act(command, dispute, claimant, respondent, act)
            }
            Op::StakeLock { amount } => self.stake_lock(command, *amount),
            Op::StakeUnlock { amount } => self.stake_unlock(command, *amount),
            Op::StakeWithdraw => self.stake_withdraw(command),
            Op::AddPeer { peer } => self.add_peer(command, peer),
            Op::RecordKey { entry } => self.record_key(command, entry),
            Op::RecordPassport { issued, credential_id, valid_until_ms } => {
                self.record_passport(command, issued, credential_id, *valid_until_ms)
            }
            Op::ImportPassport { record } => self.import_passport(command, record),
            Op::SettleRelayed { claims, amount, order_id } => self.settle_relayed(command, claims, *amount, order_id),
            Op::RelayOpen { claims, token, amount } => self.relay_open(command, claims, token, *amount),
            Op::RelayFinish { jti, result, .. } => self.relay_finish(command, jti, result),
            Op::EnrollGuest { agent, handle, credential_hash, home } => {
                self.enroll_guest(command, agent, handle, credential_hash, home)
            }
            Op::PutListing { spec } => self.put_listing(command, spec),
            Op::RecordSearch { query, hits } => self.record_search(command, query, *hits),
            Op::CreateRfq { item, request, invited } => self.create_rfq(command, item, request, invited),
            Op::MakeOffer { rfq, listing, proposal, committed } => {
                self.make_offer(command, rfq, listing, proposal, *committed)
            }
            Op::CloseRfq { rfq } => self.close_rfq(command, rfq),
            Op::SetOrderPolicy { agent, approval_above } => self.set_order_policy(command, agent, *approval_above),
            Op::CreateOrder { rfq, require_approval, .. } => self.create_order(command, rfq, *require_approval),
            Op::DecideOrder { order, buyer, approve, .. } => {
                self.order_for(order, buyer).and_then(|_| self.decide_order(command, order, *approve))
            }
            Op::ProveShipment { order, buyer, line, receipt_sha256, tracking, receipt } => self
                .order_for(order, buyer)
                .and_then(|_| self.prove_shipment(command, order, *line, receipt_sha256, tracking, receipt.as_ref())),
            Op::CancelShare { order, buyer, line, .. } => {
                self.order_for(order, buyer).and_then(|_| self.cancel_share(command, order, *line))
            }
        }
    }

    // ---- identity -------------------------------------------------------

    fn bootstrap(
        &mut self,
        command: &Command,
        registry: &MemberId,
        operator: &MemberId,
        credential_hash: &str,
    ) -> Step {
        if command.actor.kind != MemberKind::Registry || &command.actor.id != registry {
            return refuse(Code::NotPermitted, "Only the registry bootstraps itself.");
        }
        if self.snap.members.contains_key(registry) {
            return refuse(Code::MemberExists, "This registry is already set up.");
        }
        let registry_member = Member {
            id: registry.clone(),
            kind: MemberKind::Registry,
            owner: None,
            handle: "registry".into(),
            created_at: self.now,
        };
        let operator_member = Member {
            id: operator.clone(),
            kind: MemberKind::Operator,
            owner: None,
            handle: "operator".into(),
            created_at: self.now,
        };
        self.insert_member(registry_member);
        self.insert_member(operator_member);
        self.put_credential(Credential {
            hash: credential_hash.to_string(),
            member: operator.clone(),
            created_at: self.now,
            revoked_at: None,
        });
        self.put_account(Account::new(AccountId::issuance(), true));
        self.put_account(Account::new(AccountId::fees(), false));
        let body = json!({"registry": registry, "operator": operator,
            "fee_bps": self.config.fee_bps, "escrow_threshold_minor": self.config.escrow_threshold});
        self.event(command, "registry.created", body.clone());
        Ok(body)
    }

    fn create_desk(&mut self, command: &Command, credential_hash: &str) -> Step {
        if command.actor.kind != MemberKind::Operator {
            return refuse(Code::NotPermitted, "Only the operator sets up the dispute desk.");
        }
        let id = MemberId(DESK_ID.into());
        self.check_new_member(&id, DESK_HANDLE, credential_hash)?;
        let member = Member {
            id: id.clone(),
            kind: MemberKind::Agent,
            owner: Some(command.actor.id.clone()),
            handle: DESK_HANDLE.into(),
            created_at: self.now,
        };
        self.put_budget(Budget::zero(id));
        self.enroll(command, member, credential_hash, "desk.created")
    }

    fn create_owner(&mut self, command: &Command, id: &MemberId, handle: &str, credential_hash: &str) -> Step {
        if command.actor.kind != MemberKind::Operator {
            return refuse(Code::NotPermitted, "Only the registry operator creates owners.");
        }
        self.check_new_member(id, handle, credential_hash)?;
        let member = Member {
            id: id.clone(),
            kind: MemberKind::Owner,
            owner: None,
            handle: handle.into(),
            created_at: self.now,
        };
        self.enroll(command, member, credential_hash, "owner.created")
    }

    fn issue_invite(&mut self, command: &Command, code_hash: &str, expires_at: Timestamp) -> Step {
        if command.actor.kind != MemberKind::Owner {
            return refuse(Code::NotPermitted, "Only an owner invites agents.");
        }
        if self.snap.invites.contains_key(code_hash) {
            return refuse(Code::InvalidRequest, "This invite code already exists; draw a new one.");
        }
        let invite = Invite {
            code_hash: code_hash.into(),
            owner: command.actor.id.clone(),
            expires_at,
            used_by: None,
            used_at: None,
        };
        self.put_invite(invite);
        let body = json!({"owner": command.actor.id, "expires_at_ms": expires_at});
        self.event(command, "invite.issued", body.clone());
        Ok(body)
    }

    fn redeem_invite(
        &mut self,
        command: &Command,
        code_hash: &str,
        agent: &MemberId,
        handle: &str,
        credential_hash: &str,
    ) -> Step {
        let Some(invite) = self.snap.invites.get(code_hash).cloned() else {
            return refuse(Code::InviteNotFound, "No such invite code; ask your owner for a new one.");
        };
        if invite.used_at.is_some() {
            return refuse(
                Code::InviteUsed,
                "This invite code was already used; each code works once. Ask your owner for a new one.",
            );
        }
        if self.now >= invite.expires_at {
            return refuse(Code::InviteExpired, "This invite code has expired; ask your owner for a new one.");
        }
        self.check_new_member(agent, handle, credential_hash)?;
        let member = Member {
            id: agent.clone(),
            kind: MemberKind::Agent,
            owner: Some(invite.owner.clone()),
            handle: handle.into(),
            created_at: self.now,
        };
        self.put_invite(Invite { used_by: Some(agent.clone()), used_at: Some(self.now), ..invite });
        self.put_budget(Budget::zero(agent.clone()));
        // The agent authors its own enrollment, on behalf of the owner who invited it.
        let enrolling = Command { actor: member.clone(), idem: None, op: command.op.clone() };
        self.enroll(&enrolling, member, credential_hash, "agent.enrolled")
    }

    /// Everything enrolment needs, checked before anything is written.
    pub(crate) fn check_new_member(&self, id: &MemberId, handle: &str, credential_hash: &str) -> Result<(), Refusal> {
        crate::validate::handle(handle)?;
        if self.snap.credentials.contains_key(credential_hash) {
            return refuse(Code::InvalidRequest, "Credential collision; retry.");
        }
        if self.snap.members.contains_key(id) {
            return refuse(Code::MemberExists, "A member with this key is already registered.");
        }
        self.check_handle_free(handle)
    }

    fn check_handle_free(&self, handle: &str) -> Result<(), Refusal> {
        match self.snap.handles.get(handle) {
            Some(row) if row.retired => {
                refuse(Code::HandleReserved, "This handle was retired and stays reserved forever; pick another.")
            }
            Some(_) => refuse(Code::HandleTaken, "This handle is taken; pick another."),
            None => Ok(()),
        }
    }

    /// Writes a new member; `check_new_member` ran first.
    pub(crate) fn enroll(&mut self, command: &Command, member: Member, credential_hash: &str, kind: &str) -> Step {
        assert!(!self.snap.credentials.contains_key(credential_hash));
        self.put_credential(Credential {
            hash: credential_hash.into(),
            member: member.id.clone(),
            created_at: self.now,
            revoked_at: None,
        });
        self.put_account(Account::new(AccountId::of_member(&member.id), false));
        let body = json!({"id": member.id, "kind": member.kind, "owner": member.owner, "handle": member.handle});
        self.insert_member(member);
        self.event(command, kind, body.clone());
        Ok(body)
    }

    fn rotate_credential(&mut self, command: &Command, old_hash: &str, new_hash: &str) -> Step {
        let old = match self.snap.credentials.get(old_hash) {
            Some(c) if c.member == command.actor.id && c.revoked_at.is_none() => c.clone(),
            _ => return refuse(Code::Unauthenticated, "Rotate with the credential you are signed in with."),
        };
        if self.snap.credentials.contains_key(new_hash) {
            return refuse(Code::InvalidRequest, "Credential collision; retry.");
        }
        self.put_credential(Credential { revoked_at: Some(self.now), ..old });
        self.put_credential(Credential {
            hash: new_hash.into(),
            member: command.actor.id.clone(),
            created_at: self.now,
            revoked_at: None,
        });
        let body = json!({"member": command.actor.id});
        self.event(command, "credential.rotated", body.clone());
        Ok(body)
    }

    fn revoke_credential(&mut self, command: &Command, member: &MemberId, hash: &str) -> Step {
        let target = self.member(member)?;
        self.check_self_or_owner(command, &target)?;
        let credential = match self.snap.credentials.get(hash) {
            Some(c) if &c.member == member => c.clone(),
            _ => return refuse(Code::InvalidRequest, "No such credential for this member."),
        };
        if credential.revoked_at.is_none() {
            self.put_credential(Credential { revoked_at: Some(self.now), ..credential });
        }
        let body = json!({"member": member});
        self.event(command, "credential.revoked", body.clone());
        Ok(body)
    }

    fn rename(&mut self, command: &Command, member: &MemberId, handle: &str) -> Step {
        crate::validate::handle(handle)?;
        let target = self.member(member)?;
        self.check_self_or_owner(command, &target)?;
        self.check_handle_free(handle)?;
        let old = target.handle.clone();
        self.changes.retire_handles.push(old.clone());
        self.snap.handles.insert(
            old.clone(),
            HandleRow { handle: old.clone(), member: member.clone(), retired: true, since: self.now },
        );
        self.put_new_handle(HandleRow {
            handle: handle.into(),
            member: member.clone(),
            retired: false,
            since: self.now,
        });
        self.snap.members.insert(member.clone(), Member { handle: handle.into(), ..target });
        self.dirty.members.insert(member.clone());
        let body = json!({"member": member, "from": old, "to": handle});
        self.event(command, "member.renamed", body.clone());
        Ok(body)
    }

    fn check_self_or_owner(&self, command: &Command, target: &Member) -> Result<(), Refusal> {
        if command.actor.id == target.id || target.owner.as_ref() == Some(&command.actor.id) {
            Ok(())
        } else {
            refuse(Code::NotOwner, "Only the member itself or its owner may do this.")
        }
    }

    pub(crate) fn member(&self, id: &MemberId) -> Result<Member, Refusal> {
        self.snap
            .members
            .get(id)
            .cloned()
            .ok_or_else(|| Refusal::new(Code::MemberNotFound, format!("No member {id} on this registry.")))
    }

    /// The agent `id`, which must belong to the actor.
    fn owned_agent(&self, command: &Command, id: &MemberId) -> Result<Member, Refusal> {
        let agent = self.member(id)?;
        if agent.kind != MemberKind::Agent {
            return refuse(Code::NotAnAgent, "Budgets belong to agents; this member is not an agent.");
        }
        if agent.owner.as_ref() != Some(&command.actor.id) {
            return refuse(Code::NotOwner, "Only the agent's owner may do this; an agent never sets its own budget.");
        }
        Ok(agent)
    }

    // ---- money ----------------------------------------------------------

    fn set_budget(&mut self, command: &Command, agent: &MemberId, ceilings: [Amount; 3]) -> Step {
        self.owned_agent(command, agent)?;
        let [per_call_max, per_day_max, total_max] = ceilings;
        let current = self.snap.budgets.get(agent).cloned().unwrap_or_else(|| Budget::zero(agent.clone()));
        let budget = Budget { per_call_max, per_day_max, total_max, ..current };
        self.put_budget(budget.clone());
        let body = budget_view(&budget, self.now);
        self.event(command, "budget.set", body.clone());
        Ok(body)
    }

    fn mint(&mut self, command: &Command, owner: &MemberId, amount: Amount) -> Step {
        if command.actor.kind != MemberKind::Operator {
            return refuse(Code::NotPermitted, "Only the registry operator mints units.");
        }
        let target = self.member(owner)?;
        if target.kind != MemberKind::Owner {
            return refuse(
                Code::NotPermitted,
                "Units are minted into an owner's account only; owners fund their agents.",
            );
        }
        let legs = [(AccountId::issuance(), AccountId::of_member(owner), amount, TransferKind::Issuance)];
        self.post_linked(command, "transfer.minted", &legs, json!({"owner": owner}))
    }

    fn fund(&mut self, command: &Command, agent: &MemberId, amount: Amount) -> Step {
        self.owned_agent(command, agent)?;
        let source = AccountId::of_member(&command.actor.id);
        self.check_available(&source, amount)?;
        let legs = [(source, AccountId::of_member(agent), amount, TransferKind::Funding)];
        self.post_linked(command, "transfer.funded", &legs, json!({"agent": agent}))
    }

    pub(crate) fn check_available(&self, account: &AccountId, amount: Amount) -> Result<(), Refusal> {
        let available = self.snap.accounts.get(account).map(Account::available).unwrap_or(0);
        if available < amount.0 as i128 {
            return Err(Refusal::new(
                Code::InsufficientFunds,
                "The account does not hold enough available units; fund it first.",
            )
            .with(json!({"available_minor": available as i64, "needed_minor": amount})));
        }
        Ok(())
    }

    /// Posts all legs or none. The caller checked every debit; the asserts here
    /// catch a bug, not a user error.
    fn post_linked(
        &mut self,
        command: &Command,
        kind: &str,
        legs: &[(AccountId, AccountId, Amount, TransferKind)],
        extra: serde_json::Value,
    ) -> Step {
        let seq = self.snap.head.seq + 1;
        let link = format!("lnk_{seq}");
        let mut ids = Vec::new();
        for (index, (debit, credit, amount, transfer_kind)) in legs.iter().enumerate() {
            let id = TransferId(format!("tr_{seq}_{index}"));
            self.post_transfer(Transfer {
                id: id.clone(),
                debit: debit.clone(),
                credit: credit.clone(),
                amount: *amount,
                kind: *transfer_kind,
                hold: None,
                link: link.clone(),
                authored_by: command.actor.id.clone(),
                on_behalf_of: command.actor.principal().clone(),
                at: self.now,
            });
            ids.push(id);
        }
        let total: u64 = legs.iter().map(|l| l.2 .0).sum();
        let mut body = json!({"transfers": ids, "link": link, "amount_minor": total});
        merge(&mut body, extra);
        self.event(command, kind, body.clone());
        Ok(body)
    }

    pub(crate) fn post_transfer(&mut self, transfer: Transfer) {
        assert!(transfer.amount.0 > 0);
        assert!(transfer.debit != transfer.credit);
        let mut debit = self.snap.accounts.get(&transfer.debit).cloned().expect("debit account loaded");
        let mut credit = self.snap.accounts.get(&transfer.credit).cloned().expect("credit account loaded");
        debit.debits_posted = debit.debits_posted.checked_add(transfer.amount.0).expect("no overflow");
        credit.credits_posted = credit.credits_posted.checked_add(transfer.amount.0).expect("no overflow");
        assert!(debit.allow_negative || debit.available() >= 0, "overdraft on {}", debit.id);
        self.put_account(debit);
        self.put_account(credit);
        self.changes.insert_transfers.push(transfer);
    }

    fn issue_token(&mut self, command: &Command, claims: &TokenClaims, token: &str) -> Step {
        if command.actor.kind != MemberKind::Agent || command.actor.id != claims.sub {
            return refuse(Code::NotPermitted, "Only an agent asks for payment tokens, and only on its own budget.");
        }
        let merchant_handle = match &claims.via {
            // A merchant on a peer registry: that registry vouches for it when it settles.
            Some(via) => {
                self.check_corridor_token(claims, via)?;
                serde_json::Value::Null
            }
            None => {
                let merchant = self.member(&claims.aud)?;
                if merchant.kind != MemberKind::Agent {
                    return refuse(Code::NotAnAgent, "Payment tokens are addressed to merchant agents.");
                }
                json!(merchant.handle)
            }
        };
        // Paying oneself is refused, except moving one's own funds to one's guest account on a peer.
        if claims.aud == claims.sub && claims.via.is_none() {
            return refuse(Code::NotPermitted, "An agent cannot pay itself.");
        }
        if claims.max > self.config.escrow_threshold {
            return Err(Refusal::new(
                Code::EscrowRequired,
                "Orders above the escrow threshold must ride an escrowed contract, not a bare token.",
            )
            .with(json!({"max_minor": claims.max, "escrow_threshold_minor": self.config.escrow_threshold})));
        }
        let budget = self.snap.budgets.get(&claims.sub).cloned().unwrap_or_else(|| Budget::zero(claims.sub.clone()));
        check_ceilings(&budget, claims.max, self.now)?;
        let account = AccountId::of_member(&claims.sub);
        self.check_available(&account, claims.max)?;
        if self.snap.tokens.contains_key(&claims.jti) {
            return refuse(Code::InvalidRequest, "Token id collision; retry.");
        }
        let hold = Hold {
            id: hold_id_for(&claims.jti),
            account: account.clone(),
            amount: claims.max,
            created_at: self.now,
            expires_at: claims.exp_ms,
            state: HoldState::Pending,
            posted_amount: Amount::ZERO,
            resolved_at: None,
        };
        let mut buyer = self.snap.accounts[&account].clone();
        buyer.debits_pending = buyer.debits_pending.checked_add(claims.max.0).expect("no overflow");
        assert!(buyer.available() >= 0);
        self.put_account(buyer);
        self.put_budget(spend(budget, claims.max, self.now));
        let record = TokenRecord {
            jti: claims.jti.clone(),
            buyer: claims.sub.clone(),
            merchant: claims.aud.clone(),
            max_amount: claims.max,
            order_id: claims.ord.clone(),
            resource: claims.res.clone(),
            hold: hold.id.clone(),
            issued_at: self.now,
            expires_at: claims.exp_ms,
        };
        self.snap.holds.insert(hold.id.clone(), hold.clone());
        self.changes.insert_holds.push(hold);
        self.snap.tokens.insert(record.jti.clone(), record.clone());
        self.changes.insert_tokens.push(record);
        let body = json!({"jti": claims.jti, "hold": hold_id_for(&claims.jti), "buyer": claims.sub, "merchant": claims.aud,
            "merchant_handle": merchant_handle, "via": claims.via, "max_amount_minor": claims.max, "order_id": claims.ord,
            "resource": claims.res, "expires_at_ms": claims.exp_ms});
        self.event(command, "token.issued", body.clone());
        let mut receipt = body;
        merge(&mut receipt, json!({"token": token}));
        Ok(receipt)
    }

    fn settle(&mut self, command: &Command, claims: &TokenClaims, amount: Amount, order_id: &OrderId) -> Step {
        if command.actor.id != claims.aud {
            return refuse(
                Code::NotAudience,
                "This token is addressed to another merchant; only its audience may settle it.",
            );
        }
        if claims.via.is_some() {
            return refuse(Code::NotAudience, "This token is settled through the merchant's own registry.");
        }
        self.settle_checked(command, claims, amount, order_id, None)
    }

    /// The buyer's registry settles a token its peer relayed: the units go to the corridor.
    fn settle_relayed(&mut self, command: &Command, claims: &TokenClaims, amount: Amount, order_id: &OrderId) -> Step {
        if command.actor.kind != MemberKind::Peer || claims.via.as_ref() != Some(&command.actor.id) {
            return refuse(Code::PeerUnknown, "Only the registry this token names may relay its settlement.");
        }
        self.peer(&command.actor.id)?;
        self.settle_checked(command, claims, amount, order_id, Some(command.actor.id.clone()))
    }

    fn settle_checked(
        &mut self,
        command: &Command,
        claims: &TokenClaims,
        amount: Amount,
        order_id: &OrderId,
        corridor: Option<MemberId>,
    ) -> Step {
        let Some(record) = self.snap.tokens.get(&claims.jti).cloned() else {
            return refuse(Code::TokenNotFound, "This registry never issued this token.");
        };
        assert!(record.buyer == claims.sub && record.merchant == claims.aud && record.max_amount == claims.max);
        if &record.order_id != order_id {
            return Err(Refusal::new(
                Code::OrderMismatch,
                "The token was issued for a different order id; settle the order it names.",
            )
            .with(json!({"token_order_id": record.order_id, "order_id": order_id})));
        }
        if let Some(original) = self.snap.settlements_by_token.get(&claims.jti) {
            return Err(Refusal::new(
                Code::TokenSettled,
                "This token was already settled; a token pays once. The original settlement is attached.",
            )
            .with(settlement_view(original)));
        }
        if let Some(original) = self.snap.settlements_by_order.get(&(claims.aud.clone(), order_id.clone())) {
            return Err(Refusal::new(Code::OrderAlreadySettled, "This order was already settled with another token; it is paid once. The original settlement is attached.")
                .with(settlement_view(original)));
        }
        let hold = self.snap.holds.get(&record.hold).cloned().expect("every token has a hold");
        match hold.state {
            HoldState::Pending if self.now < hold.expires_at => {}
            HoldState::Pending | HoldState::Expired => {
                return refuse(Code::TokenExpired, "The token expired; ask the buyer for a new one.")
            }
            HoldState::Voided => return refuse(Code::TokenVoided, "The buyer voided this token; ask for a new one."),
            HoldState::Posted => unreachable!("a posted hold always has a settlement"),
        }
        if amount.0 == 0 || amount > record.max_amount {
            return Err(Refusal::new(Code::AmountExceedsToken, "Settle between 1 and the token's maximum amount.")
                .with(json!({"amount_minor": amount, "max_amount_minor": record.max_amount})));
        }
        Ok(self.post_settlement(command, &record, hold, amount, corridor))
    }

    fn post_settlement(
        &mut self,
        command: &Command,
        record: &TokenRecord,
        hold: Hold,
        amount: Amount,
        corridor: Option<MemberId>,
    ) -> serde_json::Value {
        // A relayed settlement pays the whole amount into the corridor; the
        // merchant's registry takes its fee on its own side.
        let fee = if corridor.is_some() { Amount::ZERO } else { amount.fee_bps(self.config.fee_bps) };
        let net = amount.checked_sub(fee).expect("fee never exceeds amount");
        let released = hold.amount.checked_sub(amount).expect("amount within hold");
        let buyer_account = hold.account.clone();
        // Remove the whole hold from pending, then post the legs against the posted balance.
        let mut buyer = self.snap.accounts[&buyer_account].clone();
        buyer.debits_pending = buyer.debits_pending.checked_sub(hold.amount.0).expect("pending covers hold");
        self.put_account(buyer);
        let seq = self.snap.head.seq + 1;
        let link = format!("lnk_{seq}");
        let legs = [
            (
                corridor.as_ref().map(AccountId::corridor).unwrap_or_else(|| AccountId::of_member(&record.merchant)),
                net,
                TransferKind::Payment,
                "pay",
            ),
            (AccountId::fees(), fee, TransferKind::Fee, "fee"),
        ];
        let mut transfer_ids = Vec::new();
        for (credit, leg_amount, kind, suffix) in legs {
            if leg_amount.0 == 0 {
                continue;
            }
            let id = TransferId(format!("tr_{}_{suffix}", record.jti));
            self.post_transfer(Transfer {
                id: id.clone(),
                debit: buyer_account.clone(),
                credit,
                amount: leg_amount,
                kind,
                hold: Some(hold.id.clone()),
                link: link.clone(),
                authored_by: command.actor.id.clone(),
                on_behalf_of: command.actor.principal().clone(),
                at: self.now,
            });
            transfer_ids.push(id);
        }
        self.resolve_hold(hold, HoldState::Posted, amount, Some(&record.buyer));
        let settlement = Settlement {
            id: format!("stl_{}", record.jti),
            jti: record.jti.clone(),
            buyer: record.buyer.clone(),
            merchant: record.merchant.clone(),
            order_id: record.order_id.clone(),
            amount,
            fee,
            net,
            settled_at: self.now,
        };
        self.record_settlement(settlement.clone());
        let mut body = settlement_view(&settlement);
        merge(
            &mut body,
            json!({"transfers": transfer_ids, "link": link, "released_minor": released, "event_seq": seq}),
        );
        if let Some(peer) = &corridor {
            merge(&mut body, json!({"corridor": peer, "corridor_minor": amount}));
        }
        self.event(command, "settlement.posted", body.clone());
        body
    }

    fn end_hold(&mut self, command: &Command, jti: &TokenId, buyer: &MemberId, end: HoldState) -> Step {
        let allowed = match end {
            HoldState::Expired => command.actor.kind == MemberKind::Registry,
            _ => {
                let buyer_owner = self.snap.members.get(buyer).and_then(|m| m.owner.as_ref());
                &command.actor.id == buyer || buyer_owner == Some(&command.actor.id)
            }
        };
        if !allowed {
            return refuse(
                Code::NotPermitted,
                "Only the buyer or its owner voids a token; only the registry expires holds.",
            );
        }
        let Some(record) = self.snap.tokens.get(jti).filter(|t| &t.buyer == buyer).cloned() else {
            return refuse(Code::TokenNotFound, "No such token for this buyer.");
        };
        let hold = self.snap.holds.get(&record.hold).cloned().expect("every token has a hold");
        match hold.state {
            HoldState::Pending => {}
            HoldState::Posted => {
                return refuse(Code::TokenSettled, "The token was already settled; it can no longer be voided.")
            }
            HoldState::Voided => return refuse(Code::TokenVoided, "The token was already voided."),
            HoldState::Expired => {
                return refuse(Code::TokenExpired, "The token already expired and its hold was released.")
            }
        }
        if end == HoldState::Expired && self.now < hold.expires_at {
            return refuse(Code::NotPermitted, "The hold has not expired yet.");
        }
        let mut account = self.snap.accounts[&hold.account].clone();
        account.debits_pending = account.debits_pending.checked_sub(hold.amount.0).expect("pending covers hold");
        self.put_account(account);
        let released = hold.amount;
        self.resolve_hold(hold, end, Amount::ZERO, Some(buyer));
        let kind = if end == HoldState::Expired { "hold.expired" } else { "hold.voided" };
        let body = json!({"jti": jti, "hold": record.hold, "released_minor": released, "state": end});
        self.event(command, kind, body.clone());
        Ok(body)
    }

    /// Marks a pending hold resolved and gives the unposted part back to the budget.
    fn resolve_hold(&mut self, hold: Hold, end: HoldState, posted: Amount, budget_of: Option<&MemberId>) {
        assert!(hold.state == HoldState::Pending);
        assert!(end != HoldState::Pending);
        assert!(posted <= hold.amount);
        let released = hold.amount.checked_sub(posted).expect("posted within hold");
        if let Some(budget) = budget_of.and_then(|b| self.snap.budgets.get(b)).cloned() {
            self.put_budget(unspend(budget, released, hold.created_at.utc_day()));
        }
        let resolved = Hold { state: end, posted_amount: posted, resolved_at: Some(self.now), ..hold };
        self.snap.holds.insert(resolved.id.clone(), resolved.clone());
        self.changes.resolve_holds.push(resolved);
    }

    // ---- holds and plain transfers shared by escrow and disputes ---------

    /// Opens a pending hold on `account`; the caller checked it is available.
    pub(crate) fn open_hold(&mut self, id: HoldId, account: AccountId, amount: Amount, expires_at: Timestamp) {
        let mut debited = self.snap.accounts.get(&account).cloned().expect("held account loaded");
        debited.debits_pending = debited.debits_pending.checked_add(amount.0).expect("no overflow");
        self.put_account(debited);
        let hold = Hold {
            id,
            account,
            amount,
            created_at: self.now,
            expires_at,
            state: HoldState::Pending,
            posted_amount: Amount::ZERO,
            resolved_at: None,
        };
        assert!(!self.snap.holds.contains_key(&hold.id), "hold ids are never reused");
        self.snap.holds.insert(hold.id.clone(), hold.clone());
        self.changes.insert_holds.push(hold);
    }

    /// Resolves a pending hold: posts `legs` (credit, amount, kind, id) from its
    /// account, all in one link, and returns the rest to the account. No legs
    /// (or all zero) voids it. `budget_of` gets the unposted part back.
    pub(crate) fn post_hold(
        &mut self,
        command: &Command,
        hold: Hold,
        legs: &[(AccountId, Amount, TransferKind, TransferId)],
        budget_of: Option<&MemberId>,
    ) -> (String, Vec<TransferId>) {
        let posted: u64 = legs.iter().map(|l| l.1 .0).sum();
        assert!(posted <= hold.amount.0, "a hold posts at most its amount");
        let mut account = self.snap.accounts[&hold.account].clone();
        account.debits_pending = account.debits_pending.checked_sub(hold.amount.0).expect("pending covers hold");
        self.put_account(account);
        let link = format!("lnk_{}", self.snap.head.seq + 1);
        let mut ids = Vec::new();
        for (credit, amount, kind, id) in legs {
            if amount.0 == 0 {
                continue;
            }
            self.post_transfer(Transfer {
                id: id.clone(),
                debit: hold.account.clone(),
                credit: credit.clone(),
                amount: *amount,
                kind: *kind,
                hold: Some(hold.id.clone()),
                link: link.clone(),
                authored_by: command.actor.id.clone(),
                on_behalf_of: command.actor.principal().clone(),
                at: self.now,
            });
            ids.push(id.clone());
        }
        let end = if posted > 0 { HoldState::Posted } else { HoldState::Voided };
        self.resolve_hold(hold, end, Amount(posted), budget_of);
        (link, ids)
    }

    /// One transfer with no hold; the caller checked the debit is available.
    pub(crate) fn post_plain(
        &mut self,
        command: &Command,
        id: TransferId,
        debit: AccountId,
        credit: AccountId,
        amount: Amount,
        kind: TransferKind,
    ) {
        let link = format!("lnk_{}", self.snap.head.seq + 1);
        self.post_transfer(Transfer {
            id,
            debit,
            credit,
            amount,
            kind,
            hold: None,
            link,
            authored_by: command.actor.id.clone(),
            on_behalf_of: command.actor.principal().clone(),
            at: self.now,
        });
    }

    /// Creates an account that may not exist yet (stake, insurance on an older registry).
    pub(crate) fn ensure_account(&mut self, id: AccountId) {
        if !self.snap.accounts.contains_key(&id) {
            self.put_account(Account::new(id, false));
        }
    }

    pub(crate) fn put_doc(&mut self, row: DocRow, new: bool) {
        let key = (row.kind, row.id.clone());
        if new {
            assert!(!self.snap.docs.contains_key(&key), "new documents are new");
            self.dirty.docs_new.insert(key.clone());
        }
        self.dirty.docs.insert(key.clone());
        self.snap.docs.insert(key, row);
    }

    // ---- writes ---------------------------------------------------------

    pub(crate) fn event(&mut self, command: &Command, kind: &str, mut body: serde_json::Value) {
        merge(&mut body, json!({"authored_handle": command.actor.handle}));
        let event =
            chain::append(&mut self.snap.head, kind, body, &command.actor.id, command.actor.principal(), self.now);
        self.changes.insert_events.push(event);
    }

    pub(crate) fn record_settlement(&mut self, settlement: Settlement) {
        self.snap.settlements_by_token.insert(settlement.jti.clone(), settlement.clone());
        self.snap
            .settlements_by_order
            .insert((settlement.merchant.clone(), settlement.order_id.clone()), settlement.clone());
        self.changes.insert_settlements.push(settlement);
    }

    pub(crate) fn add_member(&mut self, member: Member) {
        self.insert_member(member);
    }

    fn insert_member(&mut self, member: Member) {
        self.put_new_handle(HandleRow {
            handle: member.handle.clone(),
            member: member.id.clone(),
            retired: false,
            since: self.now,
        });
        self.dirty.members_new.insert(member.id.clone());
        self.snap.members.insert(member.id.clone(), member);
    }

    fn put_new_handle(&mut self, row: HandleRow) {
        self.changes.insert_handles.push(row.clone());
        self.snap.handles.insert(row.handle.clone(), row);
    }

    pub(crate) fn put_credential(&mut self, credential: Credential) {
        self.dirty.credentials.insert(credential.hash.clone());
        self.snap.credentials.insert(credential.hash.clone(), credential);
    }

    fn put_invite(&mut self, invite: Invite) {
        self.dirty.invites.insert(invite.code_hash.clone());
        self.snap.invites.insert(invite.code_hash.clone(), invite);
    }

    pub(crate) fn put_account(&mut self, account: Account) {
        assert!(account.allow_negative || account.available() >= 0);
        self.dirty.accounts.insert(account.id.clone());
        self.snap.accounts.insert(account.id.clone(), account);
    }

    pub(crate) fn put_budget(&mut self, budget: Budget) {
        self.dirty.budgets.insert(budget.agent.clone());
        self.snap.budgets.insert(budget.agent.clone(), budget);
    }

    fn finish(mut self) -> Changes {
        let snap = &*self.snap;
        let dirty = std::mem::take(&mut self.dirty);
        let mut changes = self.changes;
        changes.insert_members = dirty.members_new.iter().map(|id| snap.members[id].clone()).collect();
        changes.update_members =
            dirty.members.difference(&dirty.members_new).map(|id| snap.members[id].clone()).collect();
        changes.upsert_credentials = dirty.credentials.iter().map(|h| snap.credentials[h].clone()).collect();
        changes.upsert_invites = dirty.invites.iter().map(|h| snap.invites[h].clone()).collect();
        changes.upsert_accounts = dirty.accounts.iter().map(|id| snap.accounts[id].clone()).collect();
        changes.upsert_budgets = dirty.budgets.iter().map(|id| snap.budgets[id].clone()).collect();
        changes.insert_docs = dirty.docs_new.iter().map(|k| snap.docs[k].clone()).collect();
        changes.update_docs = dirty.docs.difference(&dirty.docs_new).map(|k| snap.docs[k].clone()).collect();
        changes
    }
}

/// Refuses a hold of `amount` that would cross a ceiling, naming the ceiling.
pub fn check_ceilings(budget: &Budget, amount: Amount, now: Timestamp) -> Result<(), Refusal> {
    let today = budget.spent_on(now.utc_day());
    let checks = [
        (amount, budget.per_call_max, Code::BudgetPerCallExceeded, "per-call"),
        (
            today.checked_add(amount).unwrap_or(Amount(u64::MAX)),
            budget.per_day_max,
            Code::BudgetPerDayExceeded,
            "per-day",
        ),
        (
            budget.spent_total.checked_add(amount).unwrap_or(Amount(u64::MAX)),
            budget.total_max,
            Code::BudgetTotalExceeded,
            "total",
        ),
    ];
    for (would_be, ceiling, code, name) in checks {
        if would_be > ceiling {
            return Err(Refusal::new(code, format!("This would exceed the agent's {name} ceiling; its owner can raise the ceiling.")).with(
                json!({"ceiling": name, "ceiling_minor": ceiling, "would_be_minor": would_be, "requested_minor": amount}),
            ));
        }
    }
    Ok(())
}

pub(crate) fn spend(mut budget: Budget, amount: Amount, now: Timestamp) -> Budget {
    let day = now.utc_day();
    budget.spent_day = budget.spent_on(day).checked_add(amount).expect("checked against ceiling");
    budget.day = day;
    budget.spent_total = budget.spent_total.checked_add(amount).expect("checked against ceiling");
    budget
}

fn unspend(mut budget: Budget, released: Amount, hold_day: i64) -> Budget {
    budget.spent_total = budget.spent_total.checked_sub(released).expect("released was spent");
    if budget.day == hold_day {
        budget.spent_day = budget.spent_day.checked_sub(released).expect("released was spent today");
    }
    budget
}

pub fn budget_view(budget: &Budget, now: Timestamp) -> serde_json::Value {
    json!({"agent": budget.agent, "per_call_max_minor": budget.per_call_max, "per_day_max_minor": budget.per_day_max,
        "total_max_minor": budget.total_max, "spent_total_minor": budget.spent_total,
        "spent_today_minor": budget.spent_on(now.utc_day())})
}

pub fn settlement_view(s: &Settlement) -> serde_json::Value {
    json!({"settlement_id": s.id, "jti": s.jti, "buyer": s.buyer, "merchant": s.merchant, "order_id": s.order_id,
        "amount_minor": s.amount, "fee_minor": s.fee, "net_minor": s.net, "settled_at_ms": s.settled_at})
}

fn merge(into: &mut serde_json::Value, extra: serde_json::Value) {
    if let (Some(target), serde_json::Value::Object(source)) = (into.as_object_mut(), extra) {
        target.extend(source);
    }
}

//! What the parties, the arbiter and the sweeper do to an open dispute, one
//! function per act: evidence, a ruling, an appeal, execution of the final
//! ruling, and the sweeper's advance past a deadline.

use super::events::{ArbiterReplaced, DisputeAppealed, DisputeRuled, EvidenceAdded, RulingOpened};
use super::phases::*;
use super::receipts::{EvidenceAccepted, Executed, NotAdvanced, Receipt};
use crate::crypto::{public_key_from_did, verify};
use crate::kernel::batch::{refuse, Batch};
use crate::kernel::model::*;
use crate::kernel::refusal::{Code, Refusal};
use crate::kernel::request::Caller;
use bazaar_types::limits::{EVIDENCE_PER_DISPUTE_MAX, EVIDENCE_URL_LEN_MAX, REASONS_LEN_MAX};
use bazaar_types::{AccountId, Amount, DisputeId, MemberId, Timestamp};
use serde_json::json;

impl Batch<'_> {
    pub(crate) fn dispute_act(
        &mut self,
        command: &Caller<'_>,
        id: &DisputeId,
        (claimant, respondent): (&MemberId, &MemberId),
        act: &DisputeAct,
        windows: &Windows,
    ) -> Result<Receipt, Refusal> {
        let Some(dispute) = self.dispute(id) else {
            return refuse(Code::DisputeNotFound, format!("No dispute {id} on this registry."));
        };
        if &dispute.claimant != claimant || &dispute.respondent != respondent {
            return refuse(Code::InvalidRequest, "The dispute's parties do not match the request; read it again.");
        }
        match act {
            DisputeAct::Evidence { sha256, url, signature } => {
                self.add_evidence(command, dispute, (sha256, url.as_deref(), signature), windows).map(Receipt::Evidence)
            }
            DisputeAct::Rule { decision, refund, slash, reasons } => {
                self.rule(command, dispute, *decision, (*refund, *slash), reasons, windows)
            }
            DisputeAct::Appeal => self.appeal(command, dispute, windows).map(Receipt::from),
            DisputeAct::Execute => self.execute_final(command, dispute).map(Receipt::from),
            DisputeAct::Advance => self.advance_dispute(command, dispute, windows),
        }
    }

    /// The side the caller acts for, if it is a party (or a party's owner).
    fn side_of(&self, command: &Caller<'_>, dispute: &Dispute) -> Option<Side> {
        if self.acts_for(command, &dispute.claimant) {
            Some(Side::Claimant)
        } else if self.acts_for(command, &dispute.respondent) {
            Some(Side::Respondent)
        } else {
            None
        }
    }

    fn add_evidence(
        &mut self,
        command: &Caller<'_>,
        mut dispute: Dispute,
        (sha256, url, signature): (&str, Option<&str>, &str),
        windows: &Windows,
    ) -> Result<EvidenceAccepted, Refusal> {
        let Some(side) = self.side_of(command, &dispute) else {
            return refuse(Code::NotParty, "Only the parties to a dispute (or their owners) add evidence.");
        };
        let open =
            matches!(dispute.phase, Phase::Filed | Phase::Evidence) && dispute.deadline.is_none_or(|d| self.now < d);
        if !open {
            return Err(Refusal::new(Code::EvidenceClosed, "The evidence phase of this dispute has closed.")
                .with(json!({"phase": dispute.phase})));
        }
        if !crate::escrow::is_sha256_hex(sha256) {
            return refuse(Code::InvalidRequest, "`sha256` is 64 lowercase hex chars.");
        }
        if url.is_some_and(|u| u.is_empty() || u.len() > EVIDENCE_URL_LEN_MAX) {
            return refuse(Code::InvalidRequest, "`url` is 1 to 2048 bytes.");
        }
        // Each side has its half of the limit, so neither can fill it to keep the other from answering.
        let per_side = EVIDENCE_PER_DISPUTE_MAX / 2;
        if dispute.evidence.iter().filter(|e| e.side == side).count() >= per_side {
            return Err(Refusal::new(Code::EvidenceLimit, "This side has added as much evidence as it may.")
                .with(json!({"max": EVIDENCE_PER_DISPUTE_MAX, "max_per_side": per_side})));
        }
        let message = evidence_message(&dispute.id, sha256);
        let signed = public_key_from_did(command.actor.id.as_str())
            .ok()
            .is_some_and(|key| verify(&key, &message, signature).is_ok());
        if !signed {
            return refuse(
                Code::EvidenceSignatureInvalid,
                "Sign `bazaar-evidence-v1.<dispute>.<sha256>` with the key of the member adding it.",
            );
        }
        let item = Evidence {
            seq: dispute.evidence.len() as u32 + 1,
            author: command.actor.id.clone(),
            side,
            sha256: sha256.to_string(),
            url: url.map(str::to_string),
            signature: signature.to_string(),
            at: self.now,
        };
        dispute.evidence.push(item.clone());
        if side == Side::Respondent && !dispute.responded {
            dispute.responded = true;
            if dispute.phase == Phase::Filed {
                let deadline = self.now.plus_s(windows.evidence_s);
                dispute.enter(Phase::Evidence, self.now, Some(deadline), "the respondent answered");
            }
        }
        self.update_dispute(&dispute);
        let added = EvidenceAdded { dispute: dispute.id.clone(), evidence: item.clone(), phase: dispute.phase };
        self.emit(command, &added);
        Ok(EvidenceAccepted { dispute: dispute.id, evidence: item, phase: dispute.phase })
    }

    /// Who may rule now, and whether the ruling asked for is one the rules allow.
    fn check_ruling(
        &self,
        command: &Caller<'_>,
        dispute: &Dispute,
        decision: Decision,
        (refund, slash): (Amount, Amount),
        reasons: &str,
    ) -> Result<Amount, Refusal> {
        let parties = [&dispute.claimant, &dispute.respondent];
        let principals: Vec<&MemberId> =
            parties.iter().filter_map(|p| self.snap.members.get(*p)).map(|m| m.principal()).collect();
        if parties.contains(&&command.actor.id) || principals.contains(&command.actor.principal()) {
            return refuse(Code::PartyCannotRule, "Nobody rules on a case they (or their owner) are party to.");
        }
        if dispute.phase != Phase::Ruling {
            return Err(Refusal::new(Code::DisputePhase, "This dispute is not waiting for a ruling.")
                .with(json!({"phase": dispute.phase})));
        }
        if dispute.arbiter.as_ref() != Some(&command.actor.id) {
            return Err(Refusal::new(Code::NotArbiter, "Only the assigned arbiter rules.")
                .with(json!({"arbiter": dispute.arbiter})));
        }
        let refund = match decision {
            Decision::RefundFull => dispute.claimed,
            Decision::Reject => Amount::ZERO,
            Decision::RefundPartial if refund.0 > 0 && refund < dispute.claimed => refund,
            Decision::RefundPartial => {
                return Err(Refusal::new(Code::RulingInvalid, "A partial refund is between 1 and the claim less 1.")
                    .with(json!({"refund_minor": refund, "claimed_minor": dispute.claimed})))
            }
        };
        if decision == Decision::Reject && slash.0 > 0 {
            return refuse(Code::RulingInvalid, "A rejected claim slashes nothing.");
        }
        if slash.0 > bazaar_types::limits::AMOUNT_MINOR_MAX || reasons.is_empty() || reasons.len() > REASONS_LEN_MAX {
            return refuse(Code::RulingInvalid, "A ruling gives reasons (1 to 2000 bytes) and a bounded slash.");
        }
        Ok(refund)
    }

    fn rule(
        &mut self,
        command: &Caller<'_>,
        mut dispute: Dispute,
        decision: Decision,
        (refund, slash): (Amount, Amount),
        reasons: &str,
        windows: &Windows,
    ) -> Result<Receipt, Refusal> {
        let refund = self.check_ruling(command, &dispute, decision, (refund, slash), reasons)?;
        let ruling = Ruling {
            round: dispute.round,
            arbiter: Some(command.actor.id.clone()),
            decision,
            refund,
            slash,
            reasons: reasons.to_string(),
            at: self.now,
        };
        dispute.rulings.push(ruling.clone());
        self.emit(command, &DisputeRuled { dispute: dispute.id.clone(), ruling, by_default: false });
        if dispute.round == 1 {
            let deadline = self.now.plus_s(windows.appeal_s);
            dispute.enter(Phase::Appealable, self.now, Some(deadline), "ruled; open to one appeal");
            self.update_dispute(&dispute);
            Ok(Receipt::from(dispute))
        } else {
            Ok(Receipt::from(self.execute(command, dispute)))
        }
    }

    fn appeal(&mut self, command: &Caller<'_>, mut dispute: Dispute, windows: &Windows) -> Result<Dispute, Refusal> {
        let Some(side) = self.side_of(command, &dispute) else {
            return refuse(Code::NotParty, "Only a party to the dispute appeals.");
        };
        let lapsed = dispute.phase == Phase::Executed && dispute.appeal.is_none();
        let closes = dispute.deadline.filter(|_| dispute.phase == Phase::Appealable);
        if lapsed || closes.is_some_and(|d| self.now >= d) {
            return Err(Refusal::new(Code::AppealWindowClosed, "The appeal window has closed.")
                .with(json!({"phase": dispute.phase, "closed_at_ms": closes})));
        }
        if dispute.phase != Phase::Appealable || dispute.appeal.is_some() {
            return Err(Refusal::new(Code::DisputePhase, "There is no ruling open to appeal.")
                .with(json!({"phase": dispute.phase, "appealed": dispute.appeal.is_some()})));
        }
        let ruling = dispute.rulings.last().expect("appealable has a ruling").clone();
        let lost = match side {
            Side::Claimant => ruling.refund < dispute.claimed,
            Side::Respondent => ruling.refund.0 > 0 || ruling.slash.0 > 0,
        };
        if !lost {
            return refuse(Code::NotPermitted, "Only a side the ruling went against may appeal.");
        }
        let party = match side {
            Side::Claimant => dispute.claimant.clone(),
            Side::Respondent => dispute.respondent.clone(),
        };
        let bond = appeal_bond(dispute.claimed);
        let account = AccountId::of_member(&party);
        // An agent appealing for itself commits its own money: the bond counts
        // against its budget like a token's hold. Its owner appealing for it
        // spends as an owner, who has no budget.
        let budgeted = command.actor.kind == MemberKind::Agent;
        if budgeted {
            self.commit_from_budget(&party, bond)?;
        } else {
            self.check_available(&account, bond)?;
        }
        let [_, _, bond_hold] = dispute_holds(&dispute.id);
        self.open_hold(bond_hold, account, bond, Timestamp::NEVER);
        dispute.appeal = Some(Appeal { by: party, side, bond, at: self.now, budgeted });
        dispute.round = 2;
        self.assign_arbiter(&mut dispute, windows.ruling_s, "appealed; a new arbiter rules");
        self.update_dispute(&dispute);
        let appealed =
            DisputeAppealed { dispute: dispute.id.clone(), side, bond_minor: bond, arbiter: dispute.arbiter.clone() };
        self.emit(command, &appealed);
        Ok(dispute)
    }

    fn execute_final(&mut self, command: &Caller<'_>, dispute: Dispute) -> Result<Executed, Refusal> {
        if dispute.phase == Phase::Executed {
            return Err(Refusal::new(
                Code::DisputeExecuted,
                "This dispute's ruling was already executed; it runs once. The outcome is attached.",
            )
            .with(dispute.outcome.clone().unwrap_or_default()));
        }
        let final_ruling = dispute.phase == Phase::Appealable && dispute.deadline.is_some_and(|d| self.now >= d);
        if !final_ruling {
            return Err(Refusal::new(Code::DisputePhase, "There is no final ruling to execute yet.")
                .with(json!({"phase": dispute.phase, "deadline_ms": dispute.deadline})));
        }
        Ok(self.execute(command, dispute))
    }

    /// The sweeper: a phase whose deadline passed moves on.
    fn advance_dispute(
        &mut self,
        command: &Caller<'_>,
        mut dispute: Dispute,
        windows: &Windows,
    ) -> Result<Receipt, Refusal> {
        if command.actor.kind != MemberKind::Registry {
            return refuse(Code::NotPermitted, "Only the registry's sweeper advances disputes.");
        }
        let due = dispute.deadline.is_some_and(|d| self.now >= d);
        if !due || dispute.phase == Phase::Executed {
            return Ok(Receipt::NotAdvanced(NotAdvanced {
                dispute: dispute.id,
                phase: dispute.phase,
                advanced: false,
            }));
        }
        match dispute.phase {
            Phase::Filed if dispute.responded => unreachable!("an answer moves the dispute to evidence"),
            Phase::Filed => Ok(Receipt::from(self.rule_by_default(command, dispute))),
            Phase::Evidence => {
                self.assign_arbiter(&mut dispute, windows.ruling_s, "evidence closed; the arbiter rules");
                self.update_dispute(&dispute);
                self.emit(command, &RulingOpened { dispute: dispute.id.clone(), arbiter: dispute.arbiter.clone() });
                Ok(Receipt::from(dispute))
            }
            Phase::Ruling => {
                let missed = dispute.arbiter.clone();
                let note = "the arbiter missed its deadline and was replaced";
                self.assign_arbiter(&mut dispute, windows.ruling_s, note);
                self.update_dispute(&dispute);
                let replaced =
                    ArbiterReplaced { dispute: dispute.id.clone(), missed, arbiter: dispute.arbiter.clone() };
                self.emit(command, &replaced);
                Ok(Receipt::from(dispute))
            }
            Phase::Appealable => Ok(Receipt::from(self.execute(command, dispute))),
            Phase::Executed => unreachable!("checked above"),
        }
    }

    /// A respondent silent past its deadline loses by default: a full refund, executed at once.
    fn rule_by_default(&mut self, command: &Caller<'_>, mut dispute: Dispute) -> Executed {
        let ruling = Ruling {
            round: 1,
            arbiter: None,
            decision: Decision::RefundFull,
            refund: dispute.claimed,
            slash: Amount::ZERO,
            reasons: "The respondent did not answer before the deadline: default for the claimant.".into(),
            at: self.now,
        };
        dispute.rulings.push(ruling.clone());
        self.emit(command, &DisputeRuled { dispute: dispute.id.clone(), ruling, by_default: true });
        self.execute(command, dispute)
    }
}

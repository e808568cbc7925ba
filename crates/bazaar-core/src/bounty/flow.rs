//! The bounty's documents and its three commands.

use super::events::{BountyFunded, BountyReleased, BountyWithdrawn, RewardPaid};
use crate::kernel::batch::{refuse, Batch};
use crate::kernel::ledger::{PaidOut, PayOut};
use crate::kernel::model::*;
use crate::kernel::refusal::{Code, Refusal};
use crate::kernel::request::Caller;
use crate::validate::is_hex64;
use bazaar_types::limits::{AMOUNT_MINOR_MAX, BOUNTY_CLAIM_S_MAX, BOUNTY_CLAIM_S_MIN};
use bazaar_types::{AccountId, Amount, HoldId, MemberId, Timestamp};
use serde::{Deserialize, Serialize};
use serde_json::json;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum BountyState {
    /// Held on the poster, waiting for an accepted outcome.
    Funded,
    /// Paid to one worker's reward destination.
    Released,
    /// Returned to the poster after the claim window.
    Withdrawn,
}

/// A job's reward as stored.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Bounty {
    pub id: String,
    /// The job's Nostr event id.
    pub job: String,
    /// The job's author: the only key whose verdict releases the reward.
    pub validator: String,
    pub poster: MemberId,
    pub amount: Amount,
    pub hold: HoldId,
    pub state: BountyState,
    pub funded_at: Timestamp,
    pub claim_until: Timestamp,
    pub resolved_at: Option<Timestamp>,
    /// The worker paid, once released.
    pub worker: Option<MemberId>,
    pub refunded: Amount,
}

crate::document!(Bounty, Bounty, version 1,
    id = |b| b.id.clone(),
    parties = |b| vec![b.poster.clone()],
    invariants = |b| assert!(
        match b.state {
            BountyState::Funded => b.worker.is_none() && b.refunded == Amount::ZERO,
            BountyState::Released => b.worker.is_some() && b.refunded == Amount::ZERO,
            BountyState::Withdrawn => b.worker.is_none() && b.refunded == b.amount,
        },
        "bounty {} out of shape", b.id
    ),
);

/// A bounty paid out: a worker's earning, as the ledger confirmed it (its
/// transfers committed in the same transaction as this record).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Reward {
    pub id: String,
    #[serde(flatten)]
    pub paid: RewardPaid,
}

crate::document!(Reward, Reward, version 1,
    id = |r| r.id.clone(),
    parties = |r| crate::kernel::docs::parties_with(vec![r.paid.worker.clone()], [r.paid.destination.clone()]),
    invariants = |r| assert_eq!(
        r.paid.net_minor.0 + r.paid.fee_minor.0, r.paid.gross_minor.0, "reward {} out of balance", r.id
    ),
);

/// A validator's verdict, as its signed label says.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    Accepted,
    Rejected,
    Unassessed,
}

/// What the edge proved from the signed records it was shown.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Outcome {
    pub verdict: Verdict,
    /// The verdict's author (x-only public key, hex).
    pub validator: String,
    /// The job the verdict names.
    pub job: String,
    pub verdict_event: String,
    pub result_event: Option<String>,
    /// The worker's agent, from its enrollment (both keys signed the binding).
    pub worker: MemberId,
    /// The reward destination the worker's latest review declares.
    pub destination: MemberId,
}

/// `bty_` + the job's id: one bounty per job.
pub fn bounty_id(job: &str) -> String {
    format!("bty_{job}")
}

pub fn bounty_hold(bounty: &str) -> HoldId {
    HoldId(format!("hold_{bounty}"))
}

pub fn reward_id(bounty: &str) -> String {
    format!("rwd_{}", bounty.trim_start_matches("bty_"))
}

impl Batch<'_> {
    pub(crate) fn fund_bounty(
        &mut self,
        caller: &Caller<'_>,
        job: &str,
        validator: &str,
        amount: Amount,
        claim_s: u64,
    ) -> Result<Bounty, Refusal> {
        let poster = caller.actor.clone();
        if poster.kind != MemberKind::Agent {
            return refuse(Code::NotPermitted, "Only an agent funds a bounty, on its own budget.");
        }
        if !is_hex64(job) || !is_hex64(validator) {
            return refuse(
                Code::BountyInvalid,
                "`job` and `validator` are 64 lowercase hex chars (a Nostr id and key).",
            );
        }
        if amount.0 == 0 || amount.0 > AMOUNT_MINOR_MAX {
            return Err(Refusal::new(Code::AmountInvalid, "A bounty is at least 1 minor unit.")
                .with(json!({"amount_minor": amount, "max": AMOUNT_MINOR_MAX})));
        }
        if !(BOUNTY_CLAIM_S_MIN..=BOUNTY_CLAIM_S_MAX).contains(&claim_s) {
            return Err(Refusal::new(Code::BountyInvalid, "The claim window is outside the registry's bounds.")
                .with(json!({"claim_s": claim_s, "min": BOUNTY_CLAIM_S_MIN, "max": BOUNTY_CLAIM_S_MAX})));
        }
        let id = bounty_id(job);
        self.not_stored::<Bounty>(&id, Code::BountyExists, "This job already carries a bounty; it is attached.")?;
        let account = AccountId::of_member(&poster.id);
        self.check_available(&account, amount)?;
        let budget = self.snap.budgets.get(&poster.id).cloned().unwrap_or_else(|| Budget::zero(poster.id.clone()));
        crate::kernel::ledger::check_ceilings(&budget, amount, self.now)?;
        self.put_budget(crate::kernel::ledger::spend(budget, amount, self.now));
        let hold = bounty_hold(&id);
        self.open_hold(hold.clone(), account, amount, Timestamp::NEVER);
        let bounty = Bounty {
            id: id.clone(),
            job: job.to_string(),
            validator: validator.to_string(),
            poster: poster.id.clone(),
            amount,
            hold,
            state: BountyState::Funded,
            funded_at: self.now,
            claim_until: self.now.plus_s(claim_s),
            resolved_at: None,
            worker: None,
            refunded: Amount::ZERO,
        };
        self.insert(&bounty);
        let funded = BountyFunded {
            bounty: id,
            job: job.to_string(),
            poster: poster.id.clone(),
            amount_minor: amount,
            claim_until_ms: bounty.claim_until,
        };
        self.emit(caller, &funded);
        Ok(bounty)
    }

    /// The stored bounty, still funded; a released one is refused with its reward attached.
    fn funded_bounty(&self, id: &str, poster: &MemberId) -> Result<Bounty, Refusal> {
        let Some(bounty) = self.load::<Bounty>(id) else {
            return refuse(Code::BountyNotFound, format!("No bounty {id} on this registry."));
        };
        if &bounty.poster != poster {
            return refuse(Code::InvalidRequest, "The bounty's poster does not match the request; read it again.");
        }
        match bounty.state {
            BountyState::Funded => Ok(bounty),
            BountyState::Released => {
                let reward = self.load::<Reward>(&reward_id(id));
                Err(Refusal::new(
                    Code::BountyAlreadyReleased,
                    "This bounty was already paid; it pays once. The reward is attached.",
                )
                .with(serde_json::to_value(reward).expect("rewards serialize")))
            }
            BountyState::Withdrawn => Err(Refusal::new(
                Code::BountyState,
                "This bounty was withdrawn by its poster after its claim window; nothing is left to pay.",
            )
            .with(json!({"state": bounty.state, "resolved_at_ms": bounty.resolved_at}))),
        }
    }

    pub(crate) fn release_bounty(
        &mut self,
        caller: &Caller<'_>,
        id: &str,
        poster: &MemberId,
        outcome: &Outcome,
    ) -> Result<Reward, Refusal> {
        let mut bounty = self.funded_bounty(id, poster)?;
        if outcome.job != bounty.job || outcome.validator != bounty.validator {
            return Err(Refusal::new(
                Code::OutcomeInvalid,
                "This verdict is not the job's validator's verdict on this job; only that releases the bounty.",
            )
            .with(json!({"job": bounty.job, "validator": bounty.validator})));
        }
        if outcome.verdict != Verdict::Accepted {
            return Err(Refusal::new(
                Code::BountyNotAccepted,
                "Only an accepted outcome releases a bounty; rejected and unassessed release nothing. An unassessed job can be assessed again.",
            )
            .with(json!({"verdict": outcome.verdict, "verdict_event": outcome.verdict_event})));
        }
        self.check_destination(&outcome.worker, &outcome.destination)?;
        let hold = self.snap.holds.get(&bounty.hold).cloned().expect("bounty holds are loaded");
        let destination = AccountId::of_member(&outcome.destination);
        self.ensure_account(destination.clone());
        let ids = format!("tr_{id}");
        let out = PayOut {
            payee: destination,
            amount: bounty.amount,
            kind: TransferKind::Reward,
            ids: &ids,
            suffix: "rwd",
            fee_bps: self.config.fee_bps,
        };
        let PaidOut { net, fee, link, transfers } = self.pay_out(caller, hold, out, Some(&bounty.poster));
        let paid = RewardPaid {
            bounty: bounty.id.clone(),
            job: bounty.job.clone(),
            worker: outcome.worker.clone(),
            destination: outcome.destination.clone(),
            gross_minor: bounty.amount,
            fee_minor: fee,
            net_minor: net,
            transfers,
            link,
            verdict_event: outcome.verdict_event.clone(),
            result_event: outcome.result_event.clone(),
            released_at_ms: self.now,
        };
        bounty.state = BountyState::Released;
        bounty.worker = Some(outcome.worker.clone());
        bounty.resolved_at = Some(self.now);
        self.update(&bounty);
        let reward = Reward { id: reward_id(id), paid: paid.clone() };
        self.insert(&reward);
        self.emit(caller, &BountyReleased { paid });
        Ok(reward)
    }

    /// The destination is the worker's owner or another agent of that owner.
    fn check_destination(&self, worker: &MemberId, destination: &MemberId) -> Result<(), Refusal> {
        let worker_member = self.member(worker)?;
        if worker_member.kind != MemberKind::Agent {
            return refuse(Code::NotAnAgent, "A bounty is paid for an enrolled agent's work.");
        }
        if !worker_member.owner_holds(&self.member(destination)?) {
            return Err(Refusal::new(
                Code::RewardDestinationInvalid,
                "The reward destination is not an account the worker's owner holds (the owner or one of its agents).",
            )
            .with(json!({"worker": worker, "destination": destination})));
        }
        Ok(())
    }

    pub(crate) fn withdraw_bounty(
        &mut self,
        caller: &Caller<'_>,
        id: &str,
        poster: &MemberId,
    ) -> Result<Bounty, Refusal> {
        let actor = &caller.actor;
        let owner = self.snap.members.get(poster).and_then(|m| m.owner.clone());
        if &actor.id != poster && Some(&actor.id) != owner.as_ref() {
            return refuse(Code::NotParty, "Only the bounty's poster (or its owner) withdraws it.");
        }
        let mut bounty = self.funded_bounty(id, poster)?;
        if self.now < bounty.claim_until {
            return Err(Refusal::new(
                Code::BountyClaimOpen,
                "The claim window is still open: an accepted outcome may still be presented.",
            )
            .with(json!({"claim_until_ms": bounty.claim_until})));
        }
        let hold = self.snap.holds.get(&bounty.hold).cloned().expect("bounty holds are loaded");
        self.post_hold(caller, hold, &[], Some(&bounty.poster));
        bounty.state = BountyState::Withdrawn;
        bounty.refunded = bounty.amount;
        bounty.resolved_at = Some(self.now);
        self.update(&bounty);
        let withdrawn = BountyWithdrawn {
            bounty: bounty.id.clone(),
            job: bounty.job.clone(),
            poster: bounty.poster.clone(),
            refunded_minor: bounty.amount,
        };
        self.emit(caller, &withdrawn);
        Ok(bounty)
    }
}

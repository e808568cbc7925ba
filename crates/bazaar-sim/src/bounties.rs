//! Bounties: a trader funds the reward of a job it posts (a hold on its own
//! budget), anyone presents the validator's verdict on a worker's result (an
//! accepted one pays the worker's reward destination once; a rejected or
//! unassessed one moves nothing), and the poster (or its owner) takes an
//! unclaimed reward back after the claim window. Requests are built as the
//! server's bounty routes build them, with the facts the edge proves from the
//! signed records (the job's author, the verdict, the worker's enrollment and
//! review) handed to the core as given.

use crate::cast::{command, other_owners_trader, Cast, TRADERS};
use crate::flows::{recent_docs, WRONG_PER_MILLE};
use crate::rng::Rng;
use bazaar_core::bounty::{self, bounty_id, Bounty, BountyState, Outcome, Verdict};
use bazaar_core::command::{Command, Op};
use bazaar_core::crypto::sha256_hex;
use bazaar_store::{Store, StoreError};
use bazaar_types::{Amount, MemberId};

/// A reward, in minor units, at least and at most.
const REWARD_MINOR: (u64, u64) = (100, 20_000);
/// A claim window, in seconds, at least and at most (within the core's bounds).
const CLAIM_S: (u64, u64) = (60, 1_800);
/// Bounties the workload picks among (the most recent).
const RECENT_MAX: usize = 12;

#[derive(Default)]
pub struct Bounties {
    next: u64,
    /// Bounties funded (or asked to be).
    pub ids: Vec<String>,
}

/// The validator key of a trader's jobs: 64 hex, one per trader.
fn validator_key(trader: usize) -> String {
    sha256_hex(format!("validator {trader}").as_bytes())
}

impl Bounties {
    fn fresh(&mut self, what: &str) -> String {
        self.next += 1;
        sha256_hex(format!("{what} {}", self.next).as_bytes())
    }

    pub fn next(&mut self, rng: &mut Rng, cast: &Cast, store: &dyn Store) -> Result<Option<Command>, StoreError> {
        let funded = recent_docs::<Bounty, _>(store, &self.ids, RECENT_MAX, |b| b.state == BountyState::Funded)?;
        let roll = rng.below(100);
        let Some(b) = rng.pick(&funded).filter(|_| roll >= 35).cloned() else {
            return Ok(Some(self.fund(rng, cast)));
        };
        let key = Some(self.fresh("key"));
        let poster = cast.agent_index(&b.poster).expect("a cast poster");
        if roll >= 80 {
            // The poster (a quarter of the time its owner) asks for the reward back; early, it is refused.
            let right = if rng.below(4) == 0 { cast.owner_of(poster) } else { &cast.agents[poster] };
            let op = Op::Bounty(bounty::Op::Withdraw { bounty: b.id.clone(), poster: b.poster.clone() });
            return Ok(Some(command(right, key, op)));
        }
        Ok(Some(self.present(rng, cast, &b, poster, key)))
    }

    /// A trader posts a job with a reward, funded now.
    fn fund(&mut self, rng: &mut Rng, cast: &Cast) -> Command {
        let poster = TRADERS[rng.index(TRADERS.len())];
        let job = self.fresh("job");
        self.ids.push(bounty_id(&job));
        let amount = Amount(rng.between(REWARD_MINOR.0, REWARD_MINOR.1));
        let claim_s = rng.between(CLAIM_S.0, CLAIM_S.1);
        let op = Op::Bounty(bounty::Op::Fund { job, validator: validator_key(poster), amount, claim_s });
        command(&cast.agents[poster], Some(self.fresh("key")), op)
    }

    /// Someone (any trader) presents a verdict on a worker of another owner: mostly the job's validator's
    /// accepted one; sometimes rejected or unassessed (moves nothing), or by another key (refused).
    fn present(&mut self, rng: &mut Rng, cast: &Cast, b: &Bounty, poster: usize, key: Option<String>) -> Command {
        let worker = other_owners_trader(rng, poster);
        let destination: MemberId =
            if rng.below(4) == 0 { cast.owner_of(worker).id.clone() } else { cast.agents[worker].id.clone() };
        let verdict = match rng.below(10) {
            0 => Verdict::Rejected,
            1 => Verdict::Unassessed,
            _ => Verdict::Accepted,
        };
        let validator = if rng.chance(WRONG_PER_MILLE) { validator_key(worker) } else { b.validator.clone() };
        let outcome = Outcome {
            verdict,
            validator,
            job: b.job.clone(),
            verdict_event: self.fresh("verdict"),
            result_event: Some(self.fresh("result")),
            worker: cast.agents[worker].id.clone(),
            destination,
        };
        let presenter = &cast.agents[TRADERS[rng.index(TRADERS.len())]];
        let op = Op::Bounty(bounty::Op::Release { bounty: b.id.clone(), poster: b.poster.clone(), outcome });
        command(presenter, key, op)
    }
}

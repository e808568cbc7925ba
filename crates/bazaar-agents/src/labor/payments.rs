//! The hiring agent's payment journal (`<state-dir>/payments.json`): every
//! service payment attempt is saved, durably, **before** money can move, and
//! its outcome after. An attempt is
//!
//! - *confirmed* — the registry answered with the payment (gross, fee, net);
//! - *refused* — the registry answered with a refusal below 500: nothing
//!   moved, and a new attempt may follow;
//! - *uncertain* — no answer (a transport failure or timeout after sending),
//!   an answer of 500 or more, or an attempt found still *saved* when the
//!   journal is opened (the process stopped in between).
//!
//! An uncertain attempt blocks every further payment for its task, across
//! restarts, and is **never retried by itself**: it is a recovery record the
//! owner resolves (`paid` or `not paid`) after reading the registry's record
//! of the authorization (`GET /v1/service-authorizations/{id}` says whether
//! it paid). The registry pays an authorization at most once whatever
//! happens here; the journal is what keeps the agent from even asking twice.

use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::worker::write_durably;

/// The journal's file in the hiring agent's state directory.
pub const PAYMENTS_FILE: &str = "payments.json";

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AttemptState {
    /// Written before the call; found like this at open, it becomes uncertain.
    Saved,
    Confirmed,
    Refused,
    Uncertain,
    /// The owner read the ledger and found it paid.
    ResolvedPaid,
    /// The owner read the ledger and found nothing moved.
    ResolvedNotPaid,
}

/// One attempt to pay for one task, as saved.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Attempt {
    /// Also the attempt's `Idempotency-Key`.
    pub id: String,
    pub task: String,
    pub authorization: String,
    pub specialist: String,
    pub pay_to: String,
    pub amount_minor: u64,
    pub state: AttemptState,
    pub saved_at: u64,
    pub settled_at: Option<u64>,
    /// The registry's payment (gross, fee, net, transfers) once confirmed.
    pub payment: Option<Value>,
    /// The refusal's code, or what made the outcome uncertain.
    pub why: Option<String>,
    /// The owner's note when resolving.
    pub resolution: Option<String>,
}

impl Attempt {
    /// Still unresolved: blocks another payment for the task.
    pub fn blocks(&self) -> bool {
        matches!(self.state, AttemptState::Saved | AttemptState::Uncertain)
    }
    pub fn paid(&self) -> bool {
        matches!(self.state, AttemptState::Confirmed | AttemptState::ResolvedPaid)
    }
}

/// What [`Journal::pay`] did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PayOutcome {
    /// Paid now: the registry's payment.
    Paid(Value),
    /// Paid before (confirmed or resolved as paid): nothing was sent.
    AlreadyPaid(Attempt),
    /// An earlier attempt is uncertain: nothing was sent; the owner must resolve it.
    Blocked(Attempt),
    /// The registry refused: nothing moved.
    Refused { code: String, detail: String },
    /// The outcome is unknown: recorded for recovery, never retried by itself.
    Uncertain(Attempt),
}

/// The exact terms being paid, from the owner's authorization.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Order<'a> {
    pub authorization: &'a str,
    pub task: &'a str,
    pub specialist: &'a str,
    pub pay_to: &'a str,
    pub amount_minor: u64,
}

#[derive(Default, Serialize, Deserialize)]
struct Saved {
    attempts: Vec<Attempt>,
}

pub struct Journal {
    path: PathBuf,
    attempts: Vec<Attempt>,
}

impl Journal {
    /// Opens (or starts) the journal. An attempt still *saved* — the process
    /// stopped between saving it and recording its outcome — becomes uncertain.
    pub fn open(state_dir: &Path) -> Result<Journal> {
        std::fs::create_dir_all(state_dir)?;
        let path = state_dir.join(PAYMENTS_FILE);
        let saved: Saved = match std::fs::read_to_string(&path) {
            Ok(text) => serde_json::from_str(&text).with_context(|| format!("reading {}", path.display()))?,
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => Saved::default(),
            Err(error) => return Err(error).with_context(|| format!("reading {}", path.display())),
        };
        let mut journal = Journal { path, attempts: saved.attempts };
        let mut changed = false;
        for attempt in journal.attempts.iter_mut().filter(|a| a.state == AttemptState::Saved) {
            attempt.state = AttemptState::Uncertain;
            attempt.why = Some("found saved at restart: the call may have been sent".into());
            changed = true;
        }
        if changed {
            journal.save()?;
        }
        Ok(journal)
    }

    /// Reads the journal as it is, for the owner's view: nothing is created or
    /// changed (a worker may be running against it). An attempt still *saved*
    /// shows as saved: in flight, or left by a process that stopped.
    pub fn inspect(state_dir: &Path) -> Result<Journal> {
        let path = state_dir.join(PAYMENTS_FILE);
        let saved: Saved = match std::fs::read_to_string(&path) {
            Ok(text) => serde_json::from_str(&text).with_context(|| format!("reading {}", path.display()))?,
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => Saved::default(),
            Err(error) => return Err(error).with_context(|| format!("reading {}", path.display())),
        };
        Ok(Journal { path, attempts: saved.attempts })
    }

    fn save(&self) -> Result<()> {
        let saved = Saved { attempts: self.attempts.clone() };
        write_durably(&self.path, serde_json::to_string_pretty(&saved)?.as_bytes())
    }

    pub fn attempts(&self) -> &[Attempt] {
        &self.attempts
    }

    /// The recovery records: uncertain attempts waiting for the owner.
    pub fn recovery(&self) -> Vec<&Attempt> {
        self.attempts.iter().filter(|a| a.blocks()).collect()
    }

    /// Pays `order` once: never while an attempt for its task is unresolved,
    /// never again once paid, and with the attempt saved before the call.
    pub async fn pay(&mut self, registry: &bazaar_sdk::Client, order: &Order<'_>) -> Result<PayOutcome> {
        if let Some(blocking) = self.attempts.iter().find(|a| a.task == order.task && a.blocks()) {
            return Ok(PayOutcome::Blocked(blocking.clone()));
        }
        if let Some(paid) = self.attempts.iter().find(|a| a.task == order.task && a.paid()) {
            return Ok(PayOutcome::AlreadyPaid(paid.clone()));
        }
        let now = bazaar_sdk::clock::unix_now();
        let number = self.attempts.iter().filter(|a| a.task == order.task).count() + 1;
        let attempt = Attempt {
            id: format!("svc-{}-{}-{number}", order.authorization, now),
            task: order.task.to_string(),
            authorization: order.authorization.to_string(),
            specialist: order.specialist.to_string(),
            pay_to: order.pay_to.to_string(),
            amount_minor: order.amount_minor,
            state: AttemptState::Saved,
            saved_at: now,
            settled_at: None,
            payment: None,
            why: None,
            resolution: None,
        };
        self.attempts.push(attempt.clone());
        self.save()?;
        let answer = registry
            .pay_service(
                order.authorization,
                order.task,
                order.specialist,
                order.pay_to,
                order.amount_minor,
                &attempt.id,
            )
            .await;
        let index = self.attempts.len() - 1;
        let slot = &mut self.attempts[index];
        slot.settled_at = Some(bazaar_sdk::clock::unix_now());
        let outcome = match answer {
            Ok(answer) => {
                slot.state = AttemptState::Confirmed;
                // The journal keeps the payment as the JSON the registry answered.
                let payment = bazaar_sdk::wire::wire_json(&answer.body);
                slot.payment = Some(payment.clone());
                PayOutcome::Paid(payment)
            }
            Err(bazaar_sdk::SdkError::Problem { status, code, detail, .. }) if status < 500 => {
                slot.state = AttemptState::Refused;
                slot.why = Some(code.clone());
                PayOutcome::Refused { code, detail }
            }
            Err(error) => {
                slot.state = AttemptState::Uncertain;
                slot.why = Some(error.to_string());
                PayOutcome::Uncertain(slot.clone())
            }
        };
        self.save()?;
        Ok(outcome)
    }

    /// The owner's resolution of the task's unresolved attempt, after reading
    /// the ledger; `payment` is the registry's record of it when it paid.
    pub fn resolve(&mut self, task: &str, paid: bool, payment: Option<Value>, note: &str) -> Result<Attempt> {
        let Some(attempt) = self.attempts.iter_mut().find(|a| a.task == task && a.blocks()) else {
            bail!("no unresolved payment attempt for task {task}");
        };
        attempt.state = if paid { AttemptState::ResolvedPaid } else { AttemptState::ResolvedNotPaid };
        attempt.payment = payment.filter(|_| paid);
        attempt.resolution = Some(note.to_string());
        let resolved = attempt.clone();
        self.save()?;
        Ok(resolved)
    }
}

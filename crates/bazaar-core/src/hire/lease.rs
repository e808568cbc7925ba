//! Priority leases: a payer buys queue priority at a worker for its own task
//! identity, for a stated period, prepaid in full at purchase. No renewal
//! (a new period is a new purchase), no delivery guarantee (priority orders
//! the worker's queue; it promises no answer). Bought only for the payer's
//! own identity: the edge proves the identity (a Nostr key) is bound to the
//! payer's DID by its enrollment, and the core refuses any other. A lease
//! whose transfer is confirmed but whose receipt the worker has not
//! published is a **recovery case**, never active priority.

use super::events::{HirePayment, LeaseBought, LeaseReceipted};
use crate::crypto::sha256_hex;
use crate::kernel::batch::{refuse, Batch};
use crate::kernel::model::*;
use crate::kernel::refusal::{Code, Refusal};
use crate::kernel::request::Caller;
use crate::validate::is_hex64;
use bazaar_types::limits::{AMOUNT_MINOR_MAX, LEASE_S_MAX, LEASE_S_MIN};
use bazaar_types::{Amount, MemberId, Timestamp};
use serde::{Deserialize, Serialize};
use serde_json::json;

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Lease {
    pub id: String,
    /// The paying agent.
    pub payer: MemberId,
    /// The task identity (x-only Nostr key) whose jobs get priority: the payer's own.
    pub identity: String,
    pub worker: MemberId,
    pub pay_to: MemberId,
    pub price_minor: Amount,
    pub starts_at: Timestamp,
    pub ends_at: Timestamp,
    pub payment: HirePayment,
    /// When the worker published its receipt; until then the lease is a recovery case.
    pub receipt_at: Option<Timestamp>,
}

/// How a lease reads at a moment.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LeaseStatus {
    /// Receipted and within its period: the worker serves this identity first.
    Active,
    /// Receipted and past its period. Nothing renews it.
    Ended,
    /// Paid, but the worker never published a receipt: the owner's to recover; never priority.
    Recovery,
}

impl Lease {
    pub fn status(&self, now: Timestamp) -> LeaseStatus {
        match self.receipt_at {
            None => LeaseStatus::Recovery,
            Some(_) if now < self.ends_at => LeaseStatus::Active,
            Some(_) => LeaseStatus::Ended,
        }
    }
}

crate::document!(Lease, Lease, version 1,
    id = |l| l.id.clone(),
    parties = |l| crate::kernel::docs::parties_with(vec![l.payer.clone(), l.worker.clone()], [l.pay_to.clone()]),
    invariants = |l| assert!(
        l.payment.gross_minor == l.price_minor && l.starts_at < l.ends_at,
        "lease {} out of shape", l.id
    ),
);

/// `lse_` + 32 hex over the payer, the worker and the purchase's idempotency key.
pub fn lease_id(payer: &MemberId, worker: &MemberId, key: &str) -> String {
    let digest = sha256_hex(format!("bazaar-lease-v1\n{payer}\n{worker}\n{key}").as_bytes());
    format!("lse_{}", &digest[..32])
}

/// What the payer asks for, with the identity's owner as the edge proved it.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct LeaseOrder {
    pub worker: MemberId,
    pub pay_to: MemberId,
    pub price: Amount,
    pub period_s: u64,
    pub identity: String,
    /// The DID the identity's enrollment binds it to.
    pub identity_of: MemberId,
}

impl Batch<'_> {
    pub(crate) fn buy_lease(&mut self, caller: &Caller<'_>, order: &LeaseOrder) -> Result<Lease, Refusal> {
        let payer = caller.actor.clone();
        if payer.kind != MemberKind::Agent {
            return refuse(
                Code::NotPermitted,
                "Only an agent buys a lease, for its own task identity, on its own budget.",
            );
        }
        let Some(idem) = caller.idem else {
            return refuse(Code::IdempotencyKeyRequired, "Buying a lease needs an Idempotency-Key.");
        };
        // The lease's id is the key's: once the key's record is pruned, the same key names a lease
        // already bought. Asked before anything moves, so a late retry is told, never charged again.
        let id = lease_id(&payer.id, &order.worker, &idem.key);
        self.not_stored::<Lease>(
            &id,
            Code::LeaseExists,
            "A lease was bought under this Idempotency-Key; it is attached. Send a new key to buy another.",
        )?;
        if !is_hex64(&order.identity) || order.identity_of != payer.id {
            return Err(Refusal::new(
                Code::LeaseIdentityMismatch,
                "Priority belongs to the paying agent's own task identity; this identity is bound to someone else.",
            )
            .with(json!({"payer": payer.id, "identity": order.identity, "identity_of": order.identity_of})));
        }
        if !(LEASE_S_MIN..=LEASE_S_MAX).contains(&order.period_s) {
            return Err(Refusal::new(Code::InvalidRequest, "The lease period is outside the registry's bounds.")
                .with(json!({"period_s": order.period_s, "min": LEASE_S_MIN, "max": LEASE_S_MAX})));
        }
        if order.price.0 == 0 || order.price.0 > AMOUNT_MINOR_MAX {
            return refuse(Code::AmountInvalid, "A lease is prepaid: at least 1 minor unit.");
        }
        let worker = self.member(&order.worker)?;
        if worker.kind != MemberKind::Agent || worker.id == payer.id {
            return refuse(Code::NotAnAgent, "A lease is bought at another agent's queue.");
        }
        if !worker.owner_holds(&self.member(&order.pay_to)?) {
            return Err(Refusal::new(
                Code::PayToInvalid,
                "`pay_to` must be the worker, its owner or one of its owner's agents.",
            )
            .with(json!({"worker": order.worker, "pay_to": order.pay_to})));
        }
        let (fee, net, linked) = self.pay_from_agent(caller, &payer.id, &order.pay_to, order.price)?;
        let payment = HirePayment {
            gross_minor: order.price,
            fee_minor: fee,
            net_minor: net,
            transfers: linked.transfers,
            link: linked.link,
            contract: None,
        };
        let lease = Lease {
            id: id.clone(),
            payer: payer.id.clone(),
            identity: order.identity.clone(),
            worker: order.worker.clone(),
            pay_to: order.pay_to.clone(),
            price_minor: order.price,
            starts_at: self.now,
            ends_at: self.now.plus_s(order.period_s),
            payment,
            receipt_at: None,
        };
        self.insert(&lease);
        self.emit(caller, &LeaseBought { lease: lease.clone() });
        Ok(lease)
    }

    /// The worker (or its owner) publishes its receipt: from now the lease is priority, until it ends.
    pub(crate) fn receipt_lease(&mut self, caller: &Caller<'_>, id: &str) -> Result<Lease, Refusal> {
        let Some(mut lease) = self.load::<Lease>(id) else {
            return refuse(Code::LeaseNotFound, format!("No lease {id} on this registry."));
        };
        let owner = self.snap.members.get(&lease.worker).and_then(|m| m.owner.clone());
        if caller.actor.id != lease.worker && Some(&caller.actor.id) != owner.as_ref() {
            return refuse(Code::NotParty, "Only the leased worker (or its owner) publishes the lease's receipt.");
        }
        if lease.receipt_at.is_some() {
            return Ok(lease);
        }
        lease.receipt_at = Some(self.now);
        self.update(&lease);
        self.emit(caller, &LeaseReceipted { lease: id.to_string(), worker: lease.worker.clone(), at_ms: self.now });
        Ok(lease)
    }
}

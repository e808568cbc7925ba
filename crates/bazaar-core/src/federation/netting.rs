//! Netting a corridor: the operators of two registries settle some of what one
//! owes the other off the ledger (a wire, a bank transfer), and both record it
//! as one signed statement, so each corridor account moves back toward zero by
//! the same amount and `corridor:B` on A stays the negation of `corridor:A` on B.
//!
//! The proposer's operator writes the statement and its registry signs it
//! ([`Op::ProposeNetting`](super::Op::ProposeNetting): nothing moves yet). The
//! counterparty checks the proposer's signature at its edge, checks the amount
//! against its own corridor, signs the same statement and records it, moving
//! its corridor ([`Op::RecordNetting`](super::Op::RecordNetting)). Its signed
//! answer comes back and the proposer records the move on its side
//! ([`Op::ConfirmNetting`](super::Op::ConfirmNetting)). A statement whose
//! answer was lost stays `proposed` until the operator sends it again (same id):
//! the counterparty answers from its record, never recording twice.
//!
//! Money (per registry): the payer — the registry whose corridor account holds
//! what it owes — moves `amount` from `corridor:<payee>` to `sys:issuance` (the
//! units left its ledger); the payee moves `amount` from `sys:issuance` to
//! `corridor:<payer>` (units came in from outside). Σ balances stays 0 on each.

use super::events;
use crate::kernel::batch::{refuse, Batch};
use crate::kernel::model::{Account, MemberKind, TransferKind};
use crate::kernel::refusal::{Code, Refusal};
use crate::kernel::request::Caller;
use bazaar_types::{AccountId, Amount, MemberId, Timestamp, TransferId};
use serde::{Deserialize, Serialize};
use serde_json::json;

/// A statement id's longest form (`[A-Za-z0-9_-]`).
pub const NETTING_ID_CHARS_MAX: usize = 64;
/// The operators' free-text reference (the wire's, say), in characters.
pub const NETTING_REFERENCE_CHARS_MAX: usize = 200;

/// What both registries sign: one off-ledger payment between them.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct NettingStatement {
    pub id: String,
    /// The registry that paid (its corridor account held what it owed).
    pub payer: MemberId,
    pub payee: MemberId,
    pub amount_minor: Amount,
    /// The proposer's clock when it wrote the statement; its signing key must
    /// have been current then.
    pub proposed_at_ms: Timestamp,
    pub reference: String,
}

impl NettingStatement {
    /// The bytes each registry signs (the reference by its SHA-256, so any text fits on one line).
    pub fn message(&self) -> Vec<u8> {
        let reference = crate::crypto::sha256_hex(self.reference.as_bytes());
        format!(
            "bazaar-netting-v1\n{}\n{}\n{}\n{}\n{}\n{reference}",
            self.id, self.payer, self.payee, self.amount_minor.0, self.proposed_at_ms.0
        )
        .into_bytes()
    }

    /// The other registry of the two, seen from `us`; `None` if the statement does not name us.
    pub fn counterparty(&self, us: &MemberId) -> Option<&MemberId> {
        match (&self.payer == us, &self.payee == us) {
            (true, false) => Some(&self.payee),
            (false, true) => Some(&self.payer),
            _ => None,
        }
    }

    /// The id and reference as a registry accepts them.
    pub fn check_shape(&self) -> Result<(), Refusal> {
        let id_ok = !self.id.is_empty()
            && self.id.len() <= NETTING_ID_CHARS_MAX
            && self.id.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
        if !id_ok {
            return refuse(Code::NettingInvalid, "`id` is 1 to 64 of A-Z a-z 0-9 _ -.");
        }
        if self.reference.chars().count() > NETTING_REFERENCE_CHARS_MAX {
            return refuse(Code::NettingInvalid, "`reference` is at most 200 characters.");
        }
        if self.amount_minor.0 == 0 {
            return refuse(Code::NettingInvalid, "`amount_minor` is at least 1.");
        }
        if self.payer == self.payee {
            return refuse(Code::NettingInvalid, "The payer and the payee are two registries.");
        }
        Ok(())
    }
}

/// Checks `signature` over `statement` against `history` (the signer's key
/// history): the key must have been current at `proposed_at_ms`. Anyone
/// holding both registries' key histories can check a stored statement so.
pub fn verify_statement(
    statement: &NettingStatement,
    signature: &RegistrySignature,
    history: &[super::KeyEntry],
) -> Result<(), String> {
    let entry = super::key_valid_at(history, &signature.key, statement.proposed_at_ms.0)
        .ok_or("signed by a key the registry did not hold when the statement was written")?;
    let public = crate::crypto::public_key_from_did(&entry.did).map_err(|e| format!("the key: {e:?}"))?;
    crate::crypto::verify(&public, &statement.message(), &signature.sig)
        .map_err(|_| "the signature does not verify".to_string())
}

/// One registry's signature over [`NettingStatement::message`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RegistrySignature {
    pub registry: MemberId,
    /// The signing key's did:key (current at `proposed_at_ms` in its history).
    pub key: String,
    pub sig: String,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum NettingState {
    /// Signed here and sent; the counterparty's answer has not been recorded.
    Proposed,
    /// Both signed; this registry's corridor moved.
    Recorded,
    /// The counterparty refused it; nothing moved on either side.
    Refused,
}

/// A netting statement as one registry holds it (keyed by statement id; the operator's).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Netting {
    pub statement: NettingStatement,
    /// The registry that proposed it.
    pub proposed_by: MemberId,
    /// The proposer's, then the counterparty's.
    pub signatures: Vec<RegistrySignature>,
    pub state: NettingState,
    pub recorded_at: Option<Timestamp>,
    pub transfer: Option<TransferId>,
    pub failure: Option<Refusal>,
}

crate::document!(Netting, Netting, version 1,
    id = |n| n.statement.id.clone(),
    parties = |_n| vec![MemberId(crate::kernel::model::OPERATOR_ID.into())],
);

/// What the counterparty answered a sent statement with.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum NettingAnswer {
    /// Recorded there, with its signature (checked by the edge against its keys).
    Recorded(RegistrySignature),
    /// Refused there for good: nothing moved there.
    Refused(Refusal),
}

/// What [`Batch::admit`] found: the statement already stored, or a new one for this registry.
enum Admitted {
    Stored(Box<Netting>),
    New { us: MemberId },
}

impl Netting {
    fn new(
        statement: &NettingStatement,
        proposed_by: MemberId,
        signatures: Vec<RegistrySignature>,
        state: NettingState,
    ) -> Netting {
        Netting {
            statement: statement.clone(),
            proposed_by,
            signatures,
            state,
            recorded_at: None,
            transfer: None,
            failure: None,
        }
    }
}

/// A netting statement's state, as answered.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct NettingStatus {
    #[serde(flatten)]
    pub netting: Netting,
}

impl Batch<'_> {
    /// The operator proposes a statement its registry signed: checked against
    /// this side's corridor, stored `proposed`; nothing moves. The same
    /// statement again answers the stored one (a resend); another under the
    /// same id is refused.
    pub(crate) fn propose_netting(
        &mut self,
        command: &Caller<'_>,
        registry: &MemberId,
        statement: &NettingStatement,
        signature: &RegistrySignature,
    ) -> Result<NettingStatus, Refusal> {
        self.require(command, MemberKind::Operator, "the operator")?;
        let us = match self.admit(registry, statement, |batch, peer| match peer {
            Some(peer) if batch.exists::<super::Peer>(peer.as_str()) => Ok(()),
            Some(peer) => {
                Err(Refusal::new(Code::NettingInvalid, "The other party is not a registry this one recognises.")
                    .with(json!({"peer": peer})))
            }
            None => refuse(Code::NettingInvalid, "A statement names this registry as the payer or the payee."),
        })? {
            Admitted::Stored(netting) => return Ok(NettingStatus { netting: *netting }),
            Admitted::New { us } => us,
        };
        let netting = Netting::new(statement, us, vec![signature.clone()], NettingState::Proposed);
        self.insert(&netting);
        self.emit(command, &events::NettingProposed { netting: netting.clone() });
        Ok(NettingStatus { netting })
    }

    /// On the counterparty: the proposing peer (the actor) presents a
    /// statement both have signed (the edge checked the proposer's signature
    /// and added this registry's). Recorded once: a resend answers the record.
    pub(crate) fn record_netting(
        &mut self,
        command: &Caller<'_>,
        registry: &MemberId,
        statement: &NettingStatement,
        signatures: &[RegistrySignature],
    ) -> Result<NettingStatus, Refusal> {
        if command.actor.kind != MemberKind::Peer {
            return refuse(Code::PeerUnknown, "Only a recognised peer registry presents a netting statement.");
        }
        let caller = &command.actor.id;
        let us = match self.admit(registry, statement, |batch, peer| match peer {
            Some(peer) if peer == caller => batch.peer(peer).map(drop),
            _ => refuse(Code::NettingInvalid, "The statement is not between this registry and the caller."),
        })? {
            Admitted::Stored(netting) => return Ok(NettingStatus { netting: *netting }),
            Admitted::New { us } => us,
        };
        let mut netting = Netting::new(statement, caller.clone(), signatures.to_vec(), NettingState::Recorded);
        self.post_netting(command, &us, &mut netting);
        self.insert(&netting);
        self.emit(command, &events::CorridorNetted { netting: netting.clone() });
        Ok(NettingStatus { netting })
    }

    /// On the proposer: the counterparty's answer. Recorded there → move this
    /// side's corridor by the same amount (whatever its balance is now: the
    /// other side has moved, so this one must); refused there → refused here.
    /// A statement already answered answers as it stands.
    pub(crate) fn confirm_netting(
        &mut self,
        command: &Caller<'_>,
        id: &str,
        answer: &NettingAnswer,
    ) -> Result<NettingStatus, Refusal> {
        self.require(command, MemberKind::Registry, "the registry")?;
        let Some(mut netting) = self.load::<Netting>(id) else {
            return refuse(Code::NettingNotFound, "No netting statement with this id.");
        };
        if netting.state != NettingState::Proposed {
            return Ok(NettingStatus { netting });
        }
        let us = command.actor.id.clone();
        match answer {
            NettingAnswer::Recorded(signature) => {
                netting.signatures.push(signature.clone());
                netting.state = NettingState::Recorded;
                self.post_netting(command, &us, &mut netting);
                self.update(&netting);
                self.emit(command, &events::CorridorNetted { netting: netting.clone() });
            }
            NettingAnswer::Refused(refusal) => {
                netting.state = NettingState::Refused;
                netting.failure = Some(refusal.clone());
                self.update(&netting);
                self.emit(command, &events::NettingRefused { netting: netting.clone() });
            }
        }
        Ok(NettingStatus { netting })
    }

    /// A statement as both sides take it in: the stored one if this very
    /// statement holds its id (a resend); else, once its shape, its other
    /// party (`check_peer`, given the counterparty if it names `registry`)
    /// and this side's corridor allow it, new, with this registry's id.
    fn admit(
        &self,
        registry: &MemberId,
        statement: &NettingStatement,
        check_peer: impl FnOnce(&Self, Option<&MemberId>) -> Result<(), Refusal>,
    ) -> Result<Admitted, Refusal> {
        if let Some(stored) = self.same_statement(statement)? {
            return Ok(Admitted::Stored(Box::new(stored)));
        }
        statement.check_shape()?;
        let us = self.registry_id(registry)?;
        check_peer(self, statement.counterparty(&us))?;
        self.check_netting_amount(&us, statement)?;
        Ok(Admitted::New { us })
    }

    /// The stored statement under this id if it is this very one; a refusal if another holds the id.
    fn same_statement(&self, statement: &NettingStatement) -> Result<Option<Netting>, Refusal> {
        match self.load::<Netting>(&statement.id) {
            Some(stored) if &stored.statement == statement => Ok(Some(stored)),
            Some(stored) => Err(Refusal::new(Code::NettingExists, "Another statement already has this id.")
                .with(json!({"statement": stored.statement}))),
            None => Ok(None),
        }
    }

    /// `registry` (named by the edge) if it is this registry's own member.
    fn registry_id(&self, registry: &MemberId) -> Result<MemberId, Refusal> {
        match self.snap.members.get(registry) {
            Some(member) if member.kind == MemberKind::Registry => Ok(member.id.clone()),
            _ => refuse(Code::NettingInvalid, "The statement's registry is not this one."),
        }
    }

    /// A statement nets at most what this side's corridor says is owed that way.
    fn check_netting_amount(&self, us: &MemberId, statement: &NettingStatement) -> Result<(), Refusal> {
        let peer = statement.counterparty(us).expect("checked by the caller");
        let balance = self.snap.accounts.get(&AccountId::corridor(peer)).map(Account::balance).unwrap_or(0);
        // The payer's corridor account holds what it owes (positive); the payee's is what it is owed (negative).
        let owed = if &statement.payer == us { balance } else { -balance };
        if (statement.amount_minor.0 as i128) > owed {
            return Err(Refusal::new(
                Code::NettingExceedsCorridor,
                "The corridor does not owe that much in that direction on this registry.",
            )
            .with(json!({"amount_minor": statement.amount_minor, "owed_minor": owed.max(0) as i64,
                "corridor_balance_minor": balance as i64})));
        }
        Ok(())
    }

    /// Posts this side's leg: payer corridor → issuance, or issuance → payee's view of the payer's corridor.
    fn post_netting(&mut self, command: &Caller<'_>, us: &MemberId, netting: &mut Netting) {
        let statement = &netting.statement;
        let peer = statement.counterparty(us).expect("checked by the caller").clone();
        let (debit, credit) = if &statement.payer == us {
            (AccountId::corridor(&peer), AccountId::issuance())
        } else {
            (AccountId::issuance(), AccountId::corridor(&peer))
        };
        let id = TransferId(format!("tr_net_{}", statement.id));
        self.ensure_account(debit.clone());
        self.ensure_account(credit.clone());
        self.post_plain(command, id.clone(), debit, credit, statement.amount_minor, TransferKind::Netting);
        netting.transfer = Some(id);
        netting.recorded_at = Some(self.now);
    }
}

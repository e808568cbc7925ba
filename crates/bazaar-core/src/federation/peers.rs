//! Federation: the registry's key history, the peers it recognises, passports
//! it issued or imported, and cross-registry settlements.
//!
//! A cross-registry paid call moves units on two ledgers under one token id:
//!
//! ```text
//! registry A (buyer's)                       registry B (merchant's)
//!   IssueToken{via: B}: hold on the buyer      RelayOpen: a `relay` document, pending
//!   SettleRelayed (B's signed request):  <──   (B calls A; the sweeper retries)
//!     buyer hold → corridor:B             ──>  RelayFinish: corridor:A → merchant + fee
//! ```
//!
//! Each side is exactly once on its own: A's settlement is unique by token and
//! by (merchant, order) as for local calls; B's relay document is keyed by the
//! token id and its settlement row is unique by token. Afterwards A's
//! `corridor:B` balance is the negation of B's `corridor:A`.

use super::events::{self, PeerFacts, RelayFacts, Relayed};
use super::receipts::{
    GuestJoined, GuestReturned, ImportStored, KeyRecorded, PassportRecorded, PeerRecorded, Receipt, RelayPaid,
    RelayStatus,
};
use crate::crypto;
use crate::kernel::batch::{refuse, Batch};
use crate::kernel::model::{Account, MemberKind, Settlement, TransferKind};
use crate::kernel::refusal::{Code, Refusal};
use crate::kernel::request::Caller;
use crate::pay::events::SettlementFacts;
use crate::pay::token::TokenClaims;
use crate::reputation::events::PassportIssued;
use crate::reputation::{Imported, IssuedFigures};
use bazaar_types::limits::{FEDERATION_WEIGHT_BPS_MAX, REGISTRY_KEYS_MAX};
use bazaar_types::{AccountId, Amount, MemberId, OrderId, Timestamp, TokenId, TransferId};
use serde::{Deserialize, Serialize};
use serde_json::json;

/// What a corridor between two registries allows: published in the signed recognition list.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Terms {
    /// Fee the merchant's registry takes on relayed settlements, in basis points.
    pub fee_bps: u32,
    /// The largest single cross-registry token.
    pub per_call_max_minor: Amount,
    /// The most this registry may owe the peer (its `corridor:` balance) after a settlement.
    pub outstanding_max_minor: Amount,
}

/// One signing key in a registry's history. The first is the registry's own
/// DID; each later one is signed by its predecessor over [`rotation_message`].
pub use bazaar_wire::federation::KeyEntry;

/// What the outgoing key signs to hand over to the next one.
pub fn rotation_message(registry: &str, next_did: &str, from_ms: i64) -> Vec<u8> {
    format!("bazaar-key-rotation-v1\n{registry}\n{next_did}\n{from_ms}").into_bytes()
}

/// Checks a published key history: it starts at the registry's own DID, each
/// key is signed by the one before, and the periods follow each other.
pub fn verify_history(registry: &str, history: &[KeyEntry]) -> Result<(), String> {
    let Some(first) = history.first() else { return Err("the key history is empty".into()) };
    if first.did != registry {
        return Err("the key history does not start with the registry's own DID".into());
    }
    if history.len() > REGISTRY_KEYS_MAX {
        return Err(format!("more than {REGISTRY_KEYS_MAX} keys"));
    }
    for pair in history.windows(2) {
        let (old, new) = (&pair[0], &pair[1]);
        let old_key = crypto::public_key_from_did(&old.did).map_err(|e| format!("{}: {e}", old.did))?;
        crypto::public_key_from_did(&new.did).map_err(|e| format!("{}: {e}", new.did))?;
        let sig = new.sig.as_deref().ok_or_else(|| format!("{} is not signed by its predecessor", new.did))?;
        crypto::verify(&old_key, &rotation_message(registry, &new.did, new.from_ms), sig)
            .map_err(|_| format!("{}: the predecessor's signature does not verify", new.did))?;
        if old.until_ms != Some(new.from_ms) || new.from_ms < old.from_ms {
            return Err(format!("{}: periods do not follow each other", new.did));
        }
    }
    if history.last().is_some_and(|k| k.until_ms.is_some()) {
        return Err("the last key in the history must be current".into());
    }
    Ok(())
}

/// The key with DID `did` that was current at `at_ms`, if any. Credentials
/// carry whole seconds, so periods are compared at second granularity: the
/// second in which a rotation happened belongs to both keys. A peer publishes
/// the periods, so any `i64` is read without overflow (saturating at the ends).
pub fn key_valid_at<'a>(history: &'a [KeyEntry], did: &str, at_ms: i64) -> Option<&'a KeyEntry> {
    let floor = |ms: i64| ms.div_euclid(1000).saturating_mul(1000);
    let ceil = |ms: i64| ms.saturating_add(999).div_euclid(1000).saturating_mul(1000);
    history.iter().find(|k| {
        k.did == did && floor(k.from_ms) <= at_ms && k.until_ms.is_none_or(|until| at_ms < ceil(until).max(until))
    })
}

/// A registry this one recognises, as its operator added it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Peer {
    pub did: MemberId,
    pub url: String,
    pub handle: String,
    /// How much the peer's passports count here, in basis points of local work.
    pub weight_bps: u32,
    pub terms: Terms,
    /// The peer's key history as last fetched and verified.
    pub keys: Vec<KeyEntry>,
    pub added_at: Timestamp,
}

/// A member's imported reputation from one issuer, as stored.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ImportRecord {
    pub subject: MemberId,
    pub imported: Imported,
    pub credential_id: String,
    pub imported_at: Timestamp,
}

pub fn import_id(subject: &MemberId, registry: &str) -> String {
    format!("imp:{subject}:{registry}")
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RelayState {
    Pending,
    Settled,
    Failed,
    /// The issuer did not answer for `RELAY_RETRY_WINDOW_S`: the sweeper no
    /// longer retries it and a [`Recovery`] record names it to the operators.
    /// No money has moved on this side; the issuer may or may not have settled.
    Stuck,
}

/// A settlement this registry relays to the buyer's registry. Keyed by token id.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Relay {
    pub jti: TokenId,
    /// The buyer's registry, which issued the token.
    pub issuer: MemberId,
    pub buyer: MemberId,
    pub merchant: MemberId,
    pub order_id: OrderId,
    pub amount: Amount,
    /// The signed token, kept so the sweeper can retry without the merchant.
    pub token: String,
    pub state: RelayState,
    pub attempts: u32,
    pub opened_at: Timestamp,
    #[serde(default)]
    pub receipt: Option<serde_json::Value>,
    #[serde(default)]
    pub failure: Option<Refusal>,
    /// When the current retry window began: the operator's last retry of a
    /// stuck relay (`opened_at` until then).
    #[serde(default)]
    pub retry_from: Option<Timestamp>,
}

/// A relay the sweeper stopped retrying, for the operators
/// (`GET /v1/federation/recovery`): written when the relay sticks, brought up
/// to date when an operator retries it and when the issuer finally answers.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Recovery {
    pub jti: TokenId,
    pub issuer: MemberId,
    pub merchant: MemberId,
    pub order_id: OrderId,
    pub amount: Amount,
    pub opened_at: Timestamp,
    pub stuck_at: Timestamp,
    /// Attempts made when it stuck.
    pub attempts: u32,
    /// The relay's state now: `stuck`, `pending` after a retry, or how it ended.
    pub state: RelayState,
    pub retried: u32,
    pub resolved_at: Option<Timestamp>,
}

impl Relay {
    /// The relay as answered and attached to refusals (its token left out).
    pub fn view(&self) -> serde_json::Value {
        serde_json::to_value(RelayFacts::from(self)).expect("relays serialize")
    }

    fn status(&self) -> RelayStatus {
        RelayStatus { relay: RelayFacts::from(self) }
    }
}

/// What the buyer's registry answered a relayed settlement with.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum RelayResult {
    /// Its settlement receipt (the units it moved to `corridor:<us>`).
    Settled(serde_json::Value),
    /// A refusal that will not change on retry (expired, voided, settled elsewhere).
    Refused(Refusal),
    /// No answer: try again later.
    Unreachable,
}

/// Seconds between relay retries by the sweeper, doubling per attempt up to the cap.
pub const RELAY_RETRY_S: u64 = 2;
pub const RELAY_RETRY_S_MAX: u64 = 60;
/// How long a pending relay is retried without an answer before it is stuck
/// (and its recovery record written): 24 h from opening, or from the operator's retry.
pub const RELAY_RETRY_WINDOW_S: u64 = 24 * 60 * 60;

/// Guests' handles: this prefix and the first hex digits of the SHA-256 of their DID.
pub const GUEST_HANDLE_PREFIX: &str = "guest-";

crate::document!(Peer, Peer, version 1,
    id = |p| p.did.to_string(),
    parties = |_p| vec![MemberId(crate::kernel::model::OPERATOR_ID.into())],
);

crate::document!(ImportRecord, Import, version 1,
    id = |r| import_id(&r.subject, &r.imported.registry),
    parties = |r| vec![r.subject.clone()],
);

// A relay's next retry is kept on the row (`due_at`), not in its body.
crate::document!(Relay, Relay, version 1, id = |r| r.jti.to_string(), parties = |r| vec![r.merchant.clone()]);

crate::document!(Recovery, Recovery, version 1,
    id = |r| r.jti.to_string(),
    parties = |_r| vec![MemberId(crate::kernel::model::OPERATOR_ID.into())],
);

pub fn guest_handle(did: &str) -> String {
    format!("{GUEST_HANDLE_PREFIX}{}", &crypto::sha256_hex(did.as_bytes())[..16])
}

/// What an agent of a peer registry signs to join this one as a guest.
pub fn guest_message(audience: &str, did: &str, home: &str, at_ms: i64) -> Vec<u8> {
    format!("bazaar-guest-v1\n{audience}\n{did}\n{home}\n{at_ms}").into_bytes()
}

impl Batch<'_> {
    /// An agent of a recognised peer joins without an invite: no owner here,
    /// ceilings equal to what the corridor may carry, funded only through it.
    pub(crate) fn enroll_guest(
        &mut self,
        command: &Caller<'_>,
        agent: &MemberId,
        handle: &str,
        credential_hash: &str,
        home: &MemberId,
    ) -> Result<Receipt, Refusal> {
        self.require(command, MemberKind::Registry, "the registry")?;
        let peer = self.peer(home)?;
        if let Some(existing) = self.snap.members.get(agent).cloned() {
            if existing.kind != MemberKind::Agent || existing.handle != guest_handle(agent.as_str()) {
                return refuse(Code::MemberExists, "That DID is already a member here; sign in with its credential.");
            }
            if self.snap.credentials.contains_key(credential_hash) {
                return refuse(Code::InvalidRequest, "Credential collision; retry.");
            }
            self.put_credential(crate::kernel::model::Credential {
                hash: credential_hash.to_string(),
                member: agent.clone(),
                created_at: self.now,
                revoked_at: None,
                scopes: None,
            });
            let (id, handle, home) = (agent.clone(), existing.handle, home.clone());
            let added = events::GuestCredentialAdded { id, handle, home, returning: true };
            self.emit(command, &added);
            let events::GuestCredentialAdded { id, handle, home, .. } = added;
            return Ok(GuestReturned { id, handle, home, returning: true }.into());
        }
        self.check_new_member(agent, handle, credential_hash)?;
        let member = crate::kernel::model::Member {
            id: agent.clone(),
            kind: MemberKind::Agent,
            owner: None,
            handle: handle.to_string(),
            created_at: self.now,
        };
        let ceiling = peer.terms.outstanding_max_minor;
        let budget = crate::kernel::model::Budget {
            per_call_max: ceiling,
            per_day_max: ceiling,
            total_max: ceiling,
            ..crate::kernel::model::Budget::zero(agent.clone())
        };
        self.put_budget(budget);
        let actor = member.clone();
        let enrolling = Caller { actor: &actor, idem: None };
        let member = self.enroll_as(&enrolling, member, credential_hash, |member| events::GuestEnrolled { member });
        Ok(GuestJoined { member, home: home.clone(), ceiling_minor: ceiling, returning: false }.into())
    }

    pub(super) fn require(&self, command: &Caller<'_>, kind: MemberKind, what: &str) -> Result<(), Refusal> {
        if command.actor.kind != kind {
            return refuse(Code::NotPermitted, format!("Only {what} may do this."));
        }
        Ok(())
    }

    pub(crate) fn peer(&self, did: &MemberId) -> Result<Peer, Refusal> {
        match self.load::<Peer>(did.as_str()) {
            Some(peer) => Ok(peer),
            None => Err(Refusal::new(Code::PeerUnknown, format!("{did} is not a registry this one recognises."))
                .with(json!({"registry": did}))),
        }
    }

    pub(crate) fn add_peer(&mut self, command: &Caller<'_>, peer: &Peer) -> Result<PeerRecorded, Refusal> {
        self.require(command, MemberKind::Operator, "the operator")?;
        if peer.weight_bps > FEDERATION_WEIGHT_BPS_MAX {
            return refuse(Code::PeerInvalid, format!("`weight_bps` is at most {FEDERATION_WEIGHT_BPS_MAX}."));
        }
        if peer.terms.fee_bps > 10_000 {
            return refuse(Code::PeerInvalid, "`fee_bps` is at most 10000.");
        }
        let existing = self.exists::<Peer>(peer.did.as_str());
        match self.snap.members.get(&peer.did) {
            Some(member) if member.kind != MemberKind::Peer => {
                return refuse(Code::PeerInvalid, "That DID is a member of this registry, not a peer registry.")
            }
            Some(_) => {}
            None => {
                if self.snap.handles.contains_key(&peer.handle) {
                    return refuse(Code::HandleTaken, "A peer's handle is taken; it is derived from its DID.");
                }
                let member = crate::kernel::model::Member {
                    id: peer.did.clone(),
                    kind: MemberKind::Peer,
                    owner: None,
                    handle: peer.handle.clone(),
                    created_at: self.now,
                };
                self.insert_member(member);
            }
        }
        let corridor = AccountId::corridor(&peer.did);
        if !self.snap.accounts.contains_key(&corridor) {
            self.put_account(Account::new(corridor, true));
        }
        let peer = Peer { added_at: if existing { peer.added_at } else { self.now }, ..peer.clone() };
        self.upsert(&peer);
        let facts = PeerFacts {
            peer: peer.did.clone(),
            url: peer.url.clone(),
            weight_bps: peer.weight_bps,
            terms: peer.terms.clone(),
            keys: peer.keys.len(),
            updated: existing,
        };
        self.emit(command, &events::PeerRecognised { peer: facts.clone() });
        Ok(PeerRecorded { peer: facts })
    }

    pub(crate) fn record_key(&mut self, command: &Caller<'_>, entry: &KeyEntry) -> Result<KeyRecorded, Refusal> {
        self.require(command, MemberKind::Registry, "the registry")?;
        let (did, from_ms, sig) = (entry.did.clone(), entry.from_ms, entry.sig.clone());
        self.emit(command, &events::KeyRotated { did: did.clone(), from_ms, sig: sig.clone() });
        Ok(KeyRecorded { did, from_ms, sig })
    }

    pub(crate) fn record_passport(
        &mut self,
        command: &Caller<'_>,
        issued: &IssuedFigures,
        id: &str,
        until: i64,
    ) -> Result<PassportRecorded, Refusal> {
        self.require(command, MemberKind::Registry, "the registry")?;
        if issued.as_of_seq > self.snap.head.seq {
            return refuse(Code::InvalidRequest, "A passport cannot be computed at a sequence beyond the head.");
        }
        let passport = PassportIssued { issued: issued.clone(), credential_id: id.to_string(), valid_until_ms: until };
        self.emit(command, &passport);
        Ok(PassportRecorded { issued: passport.issued, credential_id: passport.credential_id, valid_until_ms: until })
    }

    pub(crate) fn import_passport(
        &mut self,
        command: &Caller<'_>,
        record: &ImportRecord,
    ) -> Result<ImportStored, Refusal> {
        self.require(command, MemberKind::Registry, "the registry")?;
        let issuer = MemberId(record.imported.registry.clone());
        let peer = self.peer(&issuer)?;
        let record = ImportRecord {
            imported: Imported { weight_bps: peer.weight_bps as u64, ..record.imported.clone() },
            imported_at: self.now,
            ..record.clone()
        };
        self.upsert(&record);
        self.emit(command, &events::PassportImported { record: record.clone() });
        Ok(ImportStored { record })
    }

    /// On the merchant's registry: the merchant presents a peer's token. Opens
    /// (or finds) the relay document; the edge then calls the issuer.
    pub(crate) fn relay_open(
        &mut self,
        command: &Caller<'_>,
        claims: &TokenClaims,
        token: &str,
        amount: Amount,
    ) -> Result<RelayStatus, Refusal> {
        if command.actor.id != claims.aud {
            return refuse(
                Code::NotAudience,
                "This token is addressed to another merchant; only its audience may settle it.",
            );
        }
        self.peer(&claims.iss)?;
        if let Some(relay) = self.load::<Relay>(claims.jti.as_str()) {
            if relay.amount != amount || relay.order_id != claims.ord {
                return Err(Refusal::new(
                    Code::TokenSettled,
                    "This token is already being settled for another amount.",
                )
                .with(relay.view()));
            }
            return Ok(relay.status());
        }
        if let Some(original) = self.snap.settlements_by_order.get(&(claims.aud.clone(), claims.ord.clone())) {
            return Err(Refusal::new(Code::OrderAlreadySettled, "This order was already settled; it is paid once.")
                .with(crate::pay::settlement_view(original)));
        }
        if amount.0 == 0 || amount > claims.max {
            return Err(Refusal::new(Code::AmountExceedsToken, "Settle between 1 and the token's maximum amount.")
                .with(json!({"amount_minor": amount, "max_amount_minor": claims.max})));
        }
        let relay = Relay {
            jti: claims.jti.clone(),
            issuer: claims.iss.clone(),
            buyer: claims.sub.clone(),
            merchant: claims.aud.clone(),
            order_id: claims.ord.clone(),
            amount,
            token: token.to_string(),
            state: RelayState::Pending,
            attempts: 0,
            opened_at: self.now,
            receipt: None,
            failure: None,
            retry_from: None,
        };
        self.insert_due(&relay, Some(self.now.plus_s(RELAY_RETRY_S)));
        self.emit(command, &events::RelayOpened { relay: RelayFacts::from(&relay) });
        Ok(relay.status())
    }

    /// On the merchant's registry: the issuer answered (or did not).
    pub(crate) fn relay_finish(
        &mut self,
        command: &Caller<'_>,
        jti: &TokenId,
        result: &RelayResult,
    ) -> Result<Receipt, Refusal> {
        self.require(command, MemberKind::Registry, "the registry")?;
        let Some(mut relay) = self.load::<Relay>(jti.as_str()) else {
            return refuse(Code::TokenNotFound, "No relay for this token.");
        };
        if !matches!(relay.state, RelayState::Pending | RelayState::Stuck) {
            return Ok(relay.status().into());
        }
        match result {
            // Both outcomes are recorded (the retry schedule, the failure), so
            // they succeed as commands; the edge answers the merchant by the state.
            RelayResult::Unreachable => {
                relay.attempts += 1;
                let window_from = relay.retry_from.unwrap_or(relay.opened_at);
                if relay.state == RelayState::Stuck {
                    self.update_due(&relay, None);
                } else if self.now >= window_from.plus_s(RELAY_RETRY_WINDOW_S) {
                    self.stick(command, &mut relay);
                } else {
                    let wait = (RELAY_RETRY_S << relay.attempts.min(5)).min(RELAY_RETRY_S_MAX);
                    self.update_due(&relay, Some(self.now.plus_s(wait)));
                }
                Ok(relay.status().into())
            }
            // The issuer settled this very relay on an earlier call whose answer was lost, and has
            // since forgotten that call (its idempotency record expired): it refuses `token_settled`
            // with that settlement attached. The money is in the corridor; pay the merchant.
            RelayResult::Refused(refusal) if settled_earlier(&relay, refusal) => {
                let mut receipt = refusal.facts.clone();
                receipt["corridor_minor"] = json!(relay.amount);
                Ok(self.relay_settled(command, relay, &receipt)?.into())
            }
            RelayResult::Refused(refusal) => {
                relay.state = RelayState::Failed;
                relay.failure = Some(refusal.clone());
                self.update_due(&relay, None);
                self.resolve_recovery(&relay);
                self.emit(command, &events::RelayFailed { relay: RelayFacts::from(&relay) });
                Ok(relay.status().into())
            }
            RelayResult::Settled(receipt) => Ok(self.relay_settled(command, relay, receipt)?.into()),
        }
    }

    /// The issuer settled: pay the merchant out of the corridor, less this registry's fee.
    fn relay_settled(
        &mut self,
        command: &Caller<'_>,
        mut relay: Relay,
        receipt: &serde_json::Value,
    ) -> Result<RelayPaid, Refusal> {
        let corridor_minor = receipt.get("corridor_minor").and_then(|v| v.as_u64()).unwrap_or(0);
        if corridor_minor != relay.amount.0 {
            return Err(Refusal::new(Code::RelayFailed, "The buyer's registry settled a different amount.")
                .with(json!({"relay": relay.view(), "receipt": receipt})));
        }
        let peer = self.peer(&relay.issuer)?;
        let fee = relay.amount.fee_bps(peer.terms.fee_bps);
        let net = relay.amount.checked_sub(fee).expect("fee within amount");
        let corridor = AccountId::corridor(&relay.issuer);
        let mut transfers = Vec::new();
        for (credit, leg, kind, suffix) in [
            (AccountId::of_member(&relay.merchant), net, TransferKind::Payment, "pay"),
            (AccountId::fees(), fee, TransferKind::Fee, "fee"),
        ] {
            if leg.0 > 0 {
                self.ensure_account(credit.clone());
                let id = TransferId(format!("tr_{}_relay_{suffix}", relay.jti));
                self.post_plain(command, id.clone(), corridor.clone(), credit, leg, kind);
                transfers.push(id);
            }
        }
        let token = (&relay.jti, &relay.buyer, &relay.merchant, &relay.order_id);
        let settlement = Settlement::of(token, relay.amount, fee, self.now);
        self.record_settlement(settlement.clone());
        relay.state = RelayState::Settled;
        relay.attempts += 1;
        relay.receipt = Some(receipt.clone());
        self.update_due(&relay, None);
        self.resolve_recovery(&relay);
        let settlement = SettlementFacts::from(&settlement);
        let relayed = Relayed { via: relay.issuer.clone(), transfers, issuer_receipt: receipt.clone() };
        self.emit(command, &events::RelaySettled { settlement: settlement.clone(), relayed: relayed.clone() });
        Ok(RelayPaid { settlement, relayed })
    }
}

impl Batch<'_> {
    /// The retry window ran out: stop retrying and tell the operators.
    fn stick(&mut self, command: &Caller<'_>, relay: &mut Relay) {
        relay.state = RelayState::Stuck;
        self.update_due(relay, None);
        let mut record = Recovery {
            jti: relay.jti.clone(),
            issuer: relay.issuer.clone(),
            merchant: relay.merchant.clone(),
            order_id: relay.order_id.clone(),
            amount: relay.amount,
            opened_at: relay.opened_at,
            stuck_at: self.now,
            attempts: relay.attempts,
            state: RelayState::Stuck,
            retried: 0,
            resolved_at: None,
        };
        match self.load::<Recovery>(relay.jti.as_str()) {
            Some(earlier) => {
                record.retried = earlier.retried;
                self.update(&record);
            }
            None => self.insert(&record),
        }
        self.emit(command, &events::RelayStuck { relay: RelayFacts::from(&*relay) });
    }

    /// A relay that once stuck has ended: its recovery record says how.
    fn resolve_recovery(&mut self, relay: &Relay) {
        if let Some(mut record) = self.load::<Recovery>(relay.jti.as_str()) {
            record.state = relay.state;
            record.resolved_at = Some(self.now);
            self.update(&record);
        }
    }

    /// The operator retries a stuck relay: pending again, retried by the
    /// sweeper from now on for another `RELAY_RETRY_WINDOW_S`.
    pub(crate) fn relay_retry(&mut self, command: &Caller<'_>, jti: &TokenId) -> Result<RelayStatus, Refusal> {
        self.require(command, MemberKind::Operator, "the operator")?;
        let Some(mut relay) = self.load::<Relay>(jti.as_str()) else {
            return refuse(Code::TokenNotFound, "No relay for this token.");
        };
        if relay.state != RelayState::Stuck {
            return Err(Refusal::new(Code::RelayNotStuck, "Only a stuck relay is retried by hand.").with(relay.view()));
        }
        relay.state = RelayState::Pending;
        relay.retry_from = Some(self.now);
        self.update_due(&relay, Some(self.now));
        if let Some(mut record) = self.load::<Recovery>(jti.as_str()) {
            record.state = RelayState::Pending;
            record.retried += 1;
            self.update(&record);
        }
        self.emit(command, &events::RelayRetried { relay: RelayFacts::from(&relay) });
        Ok(relay.status())
    }
}

/// A `token_settled` refusal whose attached original settlement is this relay's own: the same
/// token, order, merchant and amount.
fn settled_earlier(relay: &Relay, refusal: &Refusal) -> bool {
    let original = &refusal.facts;
    refusal.code == Code::TokenSettled
        && original["jti"] == json!(relay.jti)
        && original["order_id"] == json!(relay.order_id)
        && original["merchant"] == json!(relay.merchant)
        && original["amount_minor"] == json!(relay.amount)
}

// ---- passports -----------------------------------------------------------------

/// The W3C VC 2.0 base context, first in every credential.
pub const VC_CONTEXT: &str = "https://www.w3.org/ns/credentials/v2";
/// Bazaar's own terms (passport figures, registry cards, recognition lists).
pub const BAZAAR_CONTEXT: &str = "https://bazaar.dev/ns/passport/v1";
pub const PASSPORT_TYPE: &str = "TrustPassport";

/// A passport whose proof, validity window and issuer all checked out.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PassportInfo {
    /// The registry (its genesis DID) whose key signed it.
    pub registry: String,
    /// The signing key's DID (the credential's `issuer`).
    pub key: String,
    pub subject: MemberId,
    pub id: String,
    pub figures: crate::reputation::Figures,
    pub valid_from_ms: i64,
    pub valid_until_ms: i64,
    pub as_of_seq: u64,
}

/// The refusal code for a credential the `vc` module turned down.
pub fn code_of(error: &crate::vc::VcError) -> Code {
    let code = error.code();
    Code::ALL.iter().copied().find(|c| c.as_str() == code).unwrap_or(Code::PassportMalformed)
}

/// Verifies a trust passport offline: the eddsa-jcs-2022 proof, the validity
/// window at `now_ms`, the type, and that the signing key belongs to one of
/// `registries` (each given with its published key history) and was current
/// at `validFrom`.
pub fn verify_passport(
    doc: &serde_json::Value,
    now_ms: i64,
    registries: &[(String, Vec<KeyEntry>)],
) -> Result<PassportInfo, Refusal> {
    let fail = |error: crate::vc::VcError| Refusal::new(code_of(&error), error.to_string());
    let verified = crate::vc::verify_eddsa_jcs_2022(doc).map_err(fail)?;
    let is_passport =
        doc.get("type").and_then(|t| t.as_array()).is_some_and(|types| types.iter().any(|t| t == PASSPORT_TYPE));
    if !is_passport {
        return refuse(Code::PassportMalformed, "This credential is not a TrustPassport.");
    }
    crate::vc::check_validity(doc, now_ms).map_err(fail)?;
    let valid_from_ms = doc["validFrom"].as_str().and_then(crate::vc::ms_from_rfc3339).unwrap_or(0);
    let valid_until_ms = doc["validUntil"].as_str().and_then(crate::vc::ms_from_rfc3339).unwrap_or(0);
    let registry = registries
        .iter()
        .find(|(_, history)| key_valid_at(history, &verified.issuer_did, valid_from_ms).is_some())
        .map(|(registry, _)| registry.clone())
        .ok_or_else(|| {
            Refusal::new(
                Code::PassportIssuerUnknown,
                "The passport was signed by a key no recognised registry held when it was issued.",
            )
            .with(json!({"issuer": verified.issuer_did}))
        })?;
    let subject = &doc["credentialSubject"];
    let figures: crate::reputation::Figures = serde_json::from_value(subject.clone())
        .map_err(|e| Refusal::new(Code::PassportMalformed, format!("credentialSubject: {e}")))?;
    let subject_id = subject["id"].as_str().ok_or_else(|| Refusal::new(Code::PassportMalformed, "no subject id"))?;
    Ok(PassportInfo {
        registry,
        key: verified.issuer_did,
        subject: MemberId::from(subject_id),
        id: doc["id"].as_str().unwrap_or_default().to_string(),
        figures,
        valid_from_ms,
        valid_until_ms,
        as_of_seq: subject["asOf"]["ledgerSeq"].as_u64().unwrap_or(0),
    })
}

/// What the subject of a passport signs to present it to `audience` (a registry DID).
pub fn presentation_message(audience: &str, credential_id: &str, at_ms: i64) -> Vec<u8> {
    format!("bazaar-passport-presentation-v1\n{audience}\n{credential_id}\n{at_ms}").into_bytes()
}

/// What a registry signs on a server-to-server request or response.
pub fn s2s_message(registry: &str, method: &str, path: &str, at_ms: i64, body: &[u8]) -> Vec<u8> {
    format!("bazaar-s2s-v1\n{registry}\n{method}\n{path}\n{at_ms}\n{}", crypto::sha256_hex(body)).into_bytes()
}

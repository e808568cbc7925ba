//! Federation: the registry's key history, peer registries and their
//! corridors, passports issued and imported, guests from peers, and the relay
//! of a cross-registry settlement. Uses identity, pay and reputation.

mod corridor;
pub mod events;
pub mod netting;
mod peers;
pub mod receipts;
pub use receipts::Receipt;

pub use netting::{verify_statement, Netting, NettingAnswer, NettingState, NettingStatement, RegistrySignature};
pub use peers::*;

use crate::kernel::batch::Batch;
use crate::kernel::keys::Keys;
use crate::kernel::model::DocKind;
use crate::kernel::refusal::Refusal;
use crate::kernel::request::Caller;
use crate::pay::token::TokenClaims;
use crate::pay::{token_issue_rows, token_rows};
use bazaar_types::{AccountId, Amount, MemberId, OrderId, TokenId};

crate::event_kinds! {
    /// What federation writes on the event ledger.
    FederationEvent {
        GuestEnrolled => "guest.enrolled",
        GuestCredentialAdded => "guest.credential_added",
        PeerAdded => "federation.peer_added",
        PeerUpdated => "federation.peer_updated",
        KeyRotated => "registry.key_rotated",
        PassportImported => "passport.imported",
        RelayOpened => "relay.opened",
        RelayFailed => "relay.failed",
        RelayStuck => "relay.stuck",
        RelayRetried => "relay.retried",
        NettingProposed => "netting.proposed",
        CorridorNetted => "corridor.netted",
        NettingRefused => "netting.refused",
    }
}

#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
pub enum Op {
    /// The operator recognises (or updates) a peer registry.
    AddPeer { peer: Peer },
    /// The registry records a new signing key on the event ledger.
    RecordKey { entry: KeyEntry },
    /// The registry records the figures of a passport it signed.
    RecordPassport { issued: crate::reputation::IssuedFigures, credential_id: String, valid_until_ms: i64 },
    /// The registry stores reputation imported from a verified peer passport.
    ImportPassport { record: ImportRecord },
    /// A buyer agent asks for a token for a merchant on a peer registry (`claims.via` names it).
    IssueToken { claims: TokenClaims, token: String },
    /// A peer registry (the actor) relays the settlement of a token this registry issued.
    SettleRelayed { claims: TokenClaims, amount: Amount, order_id: OrderId },
    /// The merchant (the actor) presents a peer registry's token for settlement.
    RelayOpen { claims: TokenClaims, token: String, amount: Amount },
    /// The registry records the issuer's answer to a relayed settlement.
    RelayFinish { jti: TokenId, merchant: MemberId, issuer: MemberId, result: RelayResult },
    /// The operator makes a stuck relay pending again (its recovery record counts the retry).
    RelayRetry { jti: TokenId },
    /// The operator proposes a netting statement `registry` (this one) signed; nothing moves yet.
    ProposeNetting { registry: MemberId, statement: NettingStatement, signature: RegistrySignature },
    /// A peer (the actor) presents a netting statement; recorded here with both signatures.
    RecordNetting { registry: MemberId, statement: NettingStatement, signatures: Vec<RegistrySignature> },
    /// The registry records the counterparty's answer to a statement it proposed.
    ConfirmNetting { id: String, peer: MemberId, answer: NettingAnswer },
    /// The registry enrolls an agent of a peer registry as a guest (its DID
    /// signature checked by the edge), or gives a returning guest a new credential.
    EnrollGuest { agent: MemberId, handle: String, credential_hash: String, home: MemberId },
}

impl Op {
    /// A stable name, used in idempotency scopes and metrics.
    /// Whether the command moves money: tokens and settlements across the corridor.
    pub fn moves_money(&self) -> bool {
        match self {
            Op::AddPeer { .. }
            | Op::RecordKey { .. }
            | Op::RecordPassport { .. }
            | Op::ImportPassport { .. }
            | Op::EnrollGuest { .. } => false,
            Op::IssueToken { .. } | Op::SettleRelayed { .. } | Op::RelayOpen { .. } | Op::RelayFinish { .. } => true,
            // Schedules a retry; moves nothing by itself.
            Op::RelayRetry { .. } | Op::ProposeNetting { .. } => false,
            Op::RecordNetting { .. } | Op::ConfirmNetting { .. } => true,
        }
    }

    pub fn name(&self) -> &'static str {
        match self {
            Op::AddPeer { .. } => "add_peer",
            Op::RecordKey { .. } => "record_key",
            Op::RecordPassport { .. } => "record_passport",
            Op::ImportPassport { .. } => "import_passport",
            // The same scope as a local token: one key, one token, wherever the merchant is.
            Op::IssueToken { .. } => "issue_token",
            Op::SettleRelayed { .. } => "settle_relayed",
            Op::RelayOpen { .. } => "relay_open",
            Op::RelayFinish { .. } => "relay_finish",
            Op::RelayRetry { .. } => "relay_retry",
            Op::ProposeNetting { .. } => "propose_netting",
            Op::RecordNetting { .. } => "record_netting",
            Op::ConfirmNetting { .. } => "confirm_netting",
            Op::EnrollGuest { .. } => "enroll_guest",
        }
    }

    /// The rows this command needs.
    pub fn keys(&self, keys: &mut Keys, caller: &Caller<'_>) {
        match self {
            Op::AddPeer { peer } => {
                keys.members.insert(peer.did.clone());
                keys.handles.insert(peer.handle.clone());
                keys.doc(DocKind::Peer, peer.did.to_string());
                keys.accounts.insert(AccountId::corridor(&peer.did));
            }
            Op::RecordKey { .. } | Op::RecordPassport { .. } => {}
            Op::ImportPassport { record } => {
                keys.doc(DocKind::Peer, record.imported.registry.clone());
                keys.doc(DocKind::Import, import_id(&record.subject, &record.imported.registry));
            }
            Op::IssueToken { claims, .. } => {
                token_issue_rows(keys, claims);
                if let Some(via) = &claims.via {
                    keys.doc(DocKind::Peer, via.to_string());
                    keys.accounts.insert(AccountId::corridor(via));
                }
            }
            Op::SettleRelayed { claims, order_id, .. } => {
                token_rows(keys, &claims.jti, &claims.sub);
                keys.doc(DocKind::Peer, caller.actor.id.to_string());
                keys.accounts.insert(AccountId::corridor(&caller.actor.id));
                keys.accounts.insert(AccountId::fees());
                keys.settlements_by_order.insert((claims.aud.clone(), order_id.clone()));
                keys.settlements_by_order.insert((claims.aud.clone(), claims.ord.clone()));
            }
            Op::RelayOpen { claims, .. } => {
                keys.doc(DocKind::Relay, claims.jti.to_string());
                keys.doc(DocKind::Peer, claims.iss.to_string());
                keys.settlements_by_order.insert((claims.aud.clone(), claims.ord.clone()));
            }
            Op::RelayFinish { jti, merchant, issuer, .. } => {
                keys.doc(DocKind::Relay, jti.to_string());
                keys.doc(DocKind::Recovery, jti.to_string());
                keys.doc(DocKind::Peer, issuer.to_string());
                keys.accounts.insert(AccountId::corridor(issuer));
                keys.accounts.insert(AccountId::of_member(merchant));
                keys.accounts.insert(AccountId::fees());
                keys.settlements_by_token.insert(jti.clone());
            }
            Op::RelayRetry { jti } => {
                keys.doc(DocKind::Relay, jti.to_string());
                keys.doc(DocKind::Recovery, jti.to_string());
            }
            Op::ProposeNetting { registry, statement, .. } | Op::RecordNetting { registry, statement, .. } => {
                keys.members.insert(registry.clone());
                keys.doc(DocKind::Netting, statement.id.clone());
                for side in [&statement.payer, &statement.payee] {
                    keys.doc(DocKind::Peer, side.to_string());
                    keys.accounts.insert(AccountId::corridor(side));
                }
                keys.accounts.insert(AccountId::issuance());
            }
            Op::ConfirmNetting { id, peer, .. } => {
                keys.doc(DocKind::Netting, id.clone());
                keys.accounts.insert(AccountId::corridor(peer));
                keys.accounts.insert(AccountId::issuance());
            }
            Op::EnrollGuest { agent, handle, credential_hash, home } => {
                keys.members.insert(agent.clone());
                keys.handles.insert(handle.clone());
                keys.credentials.insert(credential_hash.clone());
                keys.budgets.insert(agent.clone());
                keys.doc(DocKind::Peer, home.to_string());
            }
        }
    }

    pub(crate) fn apply(&self, batch: &mut Batch<'_>, caller: &Caller<'_>) -> Result<receipts::Receipt, Refusal> {
        Ok(match self {
            Op::AddPeer { peer } => batch.add_peer(caller, peer)?.into(),
            Op::RecordKey { entry } => batch.record_key(caller, entry)?.into(),
            Op::RecordPassport { issued, credential_id, valid_until_ms } => {
                batch.record_passport(caller, issued, credential_id, *valid_until_ms)?.into()
            }
            Op::ImportPassport { record } => batch.import_passport(caller, record)?.into(),
            Op::IssueToken { claims, token } => batch.issue_corridor_token(caller, claims, token)?.into(),
            Op::SettleRelayed { claims, amount, order_id } => {
                batch.settle_relayed(caller, claims, *amount, order_id)?.into()
            }
            Op::RelayOpen { claims, token, amount } => batch.relay_open(caller, claims, token, *amount)?.into(),
            Op::RelayFinish { jti, result, .. } => batch.relay_finish(caller, jti, result)?,
            Op::RelayRetry { jti } => batch.relay_retry(caller, jti)?.into(),
            Op::ProposeNetting { registry, statement, signature } => {
                batch.propose_netting(caller, registry, statement, signature)?.into()
            }
            Op::RecordNetting { registry, statement, signatures } => {
                batch.record_netting(caller, registry, statement, signatures)?.into()
            }
            Op::ConfirmNetting { id, answer, .. } => batch.confirm_netting(caller, id, answer)?.into(),
            Op::EnrollGuest { agent, handle, credential_hash, home } => {
                batch.enroll_guest(caller, agent, handle, credential_hash, home)?
            }
        })
    }
}

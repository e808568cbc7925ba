//! The corridor between two registries, on the buyer's side: a token for a
//! merchant on a peer registry (the corridor's limits apply) and the peer's
//! relayed settlement of it, paid into the corridor account.

use crate::kernel::batch::{refuse, Batch};
use crate::kernel::model::{Account, MemberKind};
use crate::kernel::refusal::{Code, Refusal};
use crate::kernel::request::Caller;
use crate::pay::receipts::{Settled, TokenGranted};
use crate::pay::token::TokenClaims;
use bazaar_types::{AccountId, Amount, MemberId, OrderId};
use serde_json::json;

impl Batch<'_> {
    /// A token for a merchant on a peer registry: that registry vouches for the
    /// merchant when it relays the settlement.
    pub(crate) fn issue_corridor_token(
        &mut self,
        command: &Caller<'_>,
        claims: &TokenClaims,
        token: &str,
    ) -> Result<TokenGranted, Refusal> {
        self.check_token_buyer(command, claims)?;
        let Some(via) = &claims.via else {
            return refuse(Code::InvalidRequest, "A token through a corridor names the merchant's registry.");
        };
        self.check_corridor_token(claims, via)?;
        self.hold_for_token(command, claims, token, None)
    }

    /// The buyer's registry settles a token its peer relayed: the units go to the corridor.
    pub(crate) fn settle_relayed(
        &mut self,
        command: &Caller<'_>,
        claims: &TokenClaims,
        amount: Amount,
        order_id: &OrderId,
    ) -> Result<Settled, Refusal> {
        if command.actor.kind != MemberKind::Peer || claims.via.as_ref() != Some(&command.actor.id) {
            return refuse(Code::PeerUnknown, "Only the registry this token names may relay its settlement.");
        }
        self.peer(&command.actor.id)?;
        self.settle_checked(command, claims, amount, order_id, Some(command.actor.id.clone()))
    }

    /// A token for a merchant on a peer registry: the corridor's limits apply.
    pub(crate) fn check_corridor_token(&self, claims: &TokenClaims, via: &MemberId) -> Result<(), Refusal> {
        let peer = self.peer(via)?;
        if claims.max > peer.terms.per_call_max_minor {
            return Err(Refusal::new(Code::CorridorLimit, "The corridor to that registry allows smaller calls.")
                .with(json!({"max_minor": claims.max, "per_call_max_minor": peer.terms.per_call_max_minor})));
        }
        let owed = self.snap.accounts.get(&AccountId::corridor(via)).map(Account::balance).unwrap_or(0);
        if owed + claims.max.0 as i128 > peer.terms.outstanding_max_minor.0 as i128 {
            return Err(Refusal::new(
                Code::CorridorLimit,
                "The corridor to that registry is at its outstanding limit.",
            )
            .with(
                json!({"outstanding_minor": owed as i64, "outstanding_max_minor": peer.terms.outstanding_max_minor}),
            ));
        }
        Ok(())
    }
}

//! Refusals: every way a command can be turned down, each with a stable code.
//! The HTTP edge maps a code's [`Class`] to a status; the code string never changes.

use serde::{Deserialize, Serialize};

/// How a refusal reads to a client; the edge turns this into an HTTP status.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Class {
    Invalid,
    Unauthenticated,
    Forbidden,
    NotFound,
    Conflict,
    Unprocessable,
    Gone,
    /// Another system (a peer registry) did not answer; retrying later is safe.
    Unavailable,
    /// Too many requests of this kind for now; retry later.
    TooMany,
}

macro_rules! codes {
    ($($variant:ident => $text:literal, $class:ident;)*) => {
        /// Stable machine codes. Add new ones; never rename one.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
        #[serde(rename_all = "snake_case")]
        pub enum Code { $($variant,)* }
        impl Code {
            pub fn as_str(self) -> &'static str { match self { $(Code::$variant => $text,)* } }
            pub fn class(self) -> Class { match self { $(Code::$variant => Class::$class,)* } }
            pub const ALL: &'static [Code] = &[$(Code::$variant,)*];
        }
    };
}

codes! {
    InvalidRequest => "invalid_request", Invalid;
    AmountInvalid => "amount_invalid", Invalid;
    HandleInvalid => "handle_invalid", Invalid;
    PublicKeyInvalid => "public_key_invalid", Invalid;
    TokenMalformed => "token_malformed", Invalid;
    IdempotencyKeyRequired => "idempotency_key_required", Invalid;
    IdempotencyKeyInvalid => "idempotency_key_invalid", Invalid;
    Unauthenticated => "unauthenticated", Unauthenticated;
    TokenSignatureInvalid => "token_signature_invalid", Invalid;
    ProofInvalid => "proof_invalid", Unauthenticated;
    NotOwner => "not_owner", Forbidden;
    NotAudience => "not_audience", Forbidden;
    NotPermitted => "not_permitted", Forbidden;
    MemberNotFound => "member_not_found", NotFound;
    TokenNotFound => "token_not_found", NotFound;
    InviteNotFound => "invite_not_found", NotFound;
    MemberExists => "member_exists", Conflict;
    HandleTaken => "handle_taken", Conflict;
    HandleReserved => "handle_reserved", Conflict;
    InviteUsed => "invite_used", Gone;
    InviteExpired => "invite_expired", Gone;
    TokenExpired => "token_expired", Gone;
    TokenVoided => "token_voided", Gone;
    TokenSettled => "token_settled", Conflict;
    OrderAlreadySettled => "order_already_settled", Conflict;
    OrderMismatch => "order_mismatch", Unprocessable;
    AmountExceedsToken => "amount_exceeds_token", Unprocessable;
    InsufficientFunds => "insufficient_funds", Unprocessable;
    BudgetPerCallExceeded => "budget_per_call_exceeded", Unprocessable;
    BudgetPerDayExceeded => "budget_per_day_exceeded", Unprocessable;
    BudgetTotalExceeded => "budget_total_exceeded", Unprocessable;
    EscrowRequired => "escrow_required", Unprocessable;
    NotAnAgent => "not_an_agent", Unprocessable;
    IdempotencyConflict => "idempotency_conflict", Unprocessable;
    IdempotencyInFlight => "idempotency_in_flight", Conflict;
    MilestonesInvalid => "milestones_invalid", Invalid;
    ArbiterInvalid => "arbiter_invalid", Unprocessable;
    ContractNotFound => "contract_not_found", NotFound;
    ContractExists => "contract_exists", Conflict;
    ContractState => "contract_state", Conflict;
    NotParty => "not_party", Forbidden;
    MilestoneNotFound => "milestone_not_found", NotFound;
    MilestoneState => "milestone_state", Conflict;
    MilestoneAlreadyReleased => "milestone_already_released", Conflict;
    MilestoneDisputed => "milestone_disputed", Conflict;
    MilestoneDelivered => "milestone_delivered", Conflict;
    MilestoneAlreadyReclaimed => "milestone_already_reclaimed", Conflict;
    ReclaimTooEarly => "reclaim_too_early", Conflict;
    DisputeNotFound => "dispute_not_found", NotFound;
    DisputeExists => "dispute_exists", Conflict;
    NotDisputable => "not_disputable", Unprocessable;
    ClaimWindowClosed => "claim_window_closed", Gone;
    EvidenceClosed => "evidence_closed", Conflict;
    EvidenceLimit => "evidence_limit", Unprocessable;
    EvidenceSignatureInvalid => "evidence_signature_invalid", Invalid;
    NotArbiter => "not_arbiter", Forbidden;
    PartyCannotRule => "party_cannot_rule", Forbidden;
    RulingInvalid => "ruling_invalid", Invalid;
    DisputePhase => "dispute_phase", Conflict;
    AppealWindowClosed => "appeal_window_closed", Gone;
    DisputeExecuted => "dispute_executed", Conflict;
    StakeDisputeOpen => "stake_dispute_open", Conflict;
    StakeCooldown => "stake_cooldown", Conflict;
    StakeNotUnlocked => "stake_not_unlocked", Conflict;
    PassportMalformed => "passport_malformed", Invalid;
    PassportProofInvalid => "passport_proof_invalid", Unprocessable;
    PassportCryptosuite => "passport_cryptosuite", Unprocessable;
    PassportProofPurpose => "passport_proof_purpose", Unprocessable;
    PassportVerificationMethod => "passport_verification_method", Unprocessable;
    PassportContext => "passport_context", Unprocessable;
    PassportIssuerMismatch => "passport_issuer_mismatch", Unprocessable;
    PassportNotYetValid => "passport_not_yet_valid", Unprocessable;
    PassportExpired => "passport_expired", Gone;
    PassportIssuerUnknown => "passport_issuer_unknown", Forbidden;
    PassportSubjectMismatch => "passport_subject_mismatch", Forbidden;
    PresentationInvalid => "presentation_invalid", Unauthenticated;
    PeerInvalid => "peer_invalid", Unprocessable;
    PeerUnknown => "peer_unknown", Forbidden;
    PeerUnreachable => "peer_unreachable", Unavailable;
    RequestSignatureInvalid => "request_signature_invalid", Unauthenticated;
    RequestStale => "request_stale", Unauthenticated;
    CorridorLimit => "corridor_limit", Unprocessable;
    RelayPending => "relay_pending", Unavailable;
    RelayFailed => "relay_failed", Unprocessable;
    RelayStuck => "relay_stuck", Conflict;
    RelayNotStuck => "relay_not_stuck", Conflict;
    NettingInvalid => "netting_invalid", Unprocessable;
    NettingExists => "netting_exists", Conflict;
    NettingNotFound => "netting_not_found", NotFound;
    NettingExceedsCorridor => "netting_exceeds_corridor", Unprocessable;
    KeyHistoryFull => "key_history_full", Unprocessable;
    PassportLimit => "passport_limit", TooMany;
    ListingInvalid => "listing_invalid", Invalid;
    ListingNotFound => "listing_not_found", NotFound;
    RfqInvalid => "rfq_invalid", Invalid;
    RfqNotFound => "rfq_not_found", NotFound;
    RfqClosed => "rfq_closed", Conflict;
    RfqOrdered => "rfq_ordered", Conflict;
    OfferRevisionLimit => "offer_revision_limit", Unprocessable;
    OfferDeadlinePassed => "offer_deadline_passed", Unprocessable;
    OfferNoticeTooShort => "offer_notice_too_short", Unprocessable;
    OfferAboveCap => "offer_above_cap", Unprocessable;
    OfferBelowFloor => "offer_below_floor", Unprocessable;
    OfferBeyondCapacity => "offer_beyond_capacity", Unprocessable;
    OrderNotFound => "order_not_found", NotFound;
    OrderExists => "order_exists", Conflict;
    OrderInvalid => "order_invalid", Invalid;
    OrderState => "order_state", Conflict;
    ApprovalByPerson => "approval_by_person", Forbidden;
    SharePaid => "share_paid", Conflict;
    BountyNotFound => "bounty_not_found", NotFound;
    BountyExists => "bounty_exists", Conflict;
    BountyInvalid => "bounty_invalid", Invalid;
    BountyNotAccepted => "bounty_not_accepted", Conflict;
    BountyAlreadyReleased => "bounty_already_released", Conflict;
    BountyState => "bounty_state", Conflict;
    BountyClaimOpen => "bounty_claim_open", Conflict;
    OutcomeInvalid => "outcome_invalid", Unprocessable;
    RewardDestinationInvalid => "reward_destination_invalid", Unprocessable;
    AuthorizationNotFound => "authorization_not_found", NotFound;
    AuthorizationExists => "authorization_exists", Conflict;
    AuthorizationMismatch => "authorization_mismatch", Unprocessable;
    AuthorizationUsed => "authorization_used", Conflict;
    AuthorizationRevoked => "authorization_revoked", Gone;
    ServiceSponsored => "service_sponsored", Conflict;
    PayToInvalid => "pay_to_invalid", Unprocessable;
    HireNotFound => "hire_not_found", NotFound;
    HireExists => "hire_exists", Conflict;
    HirePaid => "hire_paid", Conflict;
    OfferSignatureInvalid => "offer_signature_invalid", Unprocessable;
    ResponseNotVerified => "response_not_verified", Unprocessable;
    LeaseNotFound => "lease_not_found", NotFound;
    LeaseExists => "lease_exists", Conflict;
    LeaseIdentityMismatch => "lease_identity_mismatch", Forbidden;
    AccountNotFound => "account_not_found", NotFound;
    TermsInvalid => "terms_invalid", Unprocessable;
    BuyerNotInvited => "buyer_not_invited", Forbidden;
}

/// A command turned down: a stable code, a sentence saying what to do, and the
/// numbers involved.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Refusal {
    pub code: Code,
    pub detail: String,
    #[serde(default, skip_serializing_if = "serde_json::Value::is_null")]
    pub facts: serde_json::Value,
}

impl Refusal {
    pub fn new(code: Code, detail: impl Into<String>) -> Refusal {
        Refusal { code, detail: detail.into(), facts: serde_json::Value::Null }
    }
    pub fn with(mut self, facts: serde_json::Value) -> Refusal {
        self.facts = facts;
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_are_unique_and_snake_case() {
        let mut seen = std::collections::HashSet::new();
        for code in Code::ALL {
            assert!(seen.insert(code.as_str()), "duplicate {}", code.as_str());
            assert!(code.as_str().chars().all(|c| c.is_ascii_lowercase() || c == '_'));
            let json = serde_json::to_value(code).unwrap();
            assert_eq!(json, serde_json::Value::String(code.as_str().into()));
        }
    }
}

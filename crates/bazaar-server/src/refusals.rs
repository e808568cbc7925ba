//! Every refusal code the API can answer, and which codes each operation can answer.
//!
//! Three tables name codes: the core's [`Code`] (commands), the conversation plane's
//! ([`crate::plane::CONVERSATION_CODES`]) and the edge's own ([`EDGE_CODES`]: authentication, admission,
//! storage, the planes' HTTP-only refusals). [`catalogue`] merges them with the statuses each is answered
//! with. An operation's codes are the edge's [`shared_codes`] for its shape (every operation, a secured one,
//! one with parameters, a body or an `Idempotency-Key`) plus its own list in [`ROUTE_CODES`].
//! [`declare`] writes them into the description: each error response of an operation lists its codes in
//! `x-codes` (and in its description), and a status no code of the operation is answered with is not
//! declared. With the contract check on (the `contract` module), a problem whose code its response does not
//! list is a `contract_misfit`, so every test that meets an undeclared code fails and names it.

use crate::problem::{status_of, ProblemDetails, PROBLEM_CONTENT_TYPE};
use bazaar_core::kernel::refusal::Code;
use std::collections::{BTreeMap, BTreeSet};
use utoipa::openapi::path::{Operation, PathItem};
use utoipa::openapi::{ContentBuilder, Ref, RefOr, ResponseBuilder};
use utoipa::ToSchema;

/// The extension on an error response that lists the codes it is answered with.
pub const CODES_EXTENSION: &str = "x-codes";

/// The header a write's idempotency key rides in, as the description names it.
pub const IDEMPOTENCY_KEY_HEADER: &str = "Idempotency-Key";

/// The codes the edge answers itself (not a command's refusal, not the conversation store's), with the
/// statuses each is answered with and when.
pub const EDGE_CODES: &[(&str, &[u16], &str)] = &[
    ("invalid_request", &[400, 415], "a malformed request (415: a JSON body without `Content-Type: application/json`)"),
    ("body_too_large", &[413], "a body over the request limit"),
    ("method_not_allowed", &[405], "a method the route does not take"),
    ("route_not_found", &[404], "no such route"),
    ("internal", &[500], "an internal error; the operator has been told"),
    ("contract_misfit", &[500], "an answer outside its contract (only with the contract check on)"),
    ("overloaded", &[503], "too many requests in flight"),
    ("store_busy", &[503], "the store is at capacity"),
    ("store_unavailable", &[503], "the store is unavailable"),
    ("writer_stopped", &[503], "the ledger writer stopped on a broken invariant"),
    ("write_conflict", &[409], "a concurrent write collided"),
    ("rate_limited", &[429], "this credential's or address's requests per second"),
    ("rotation_required", &[403], "an enrollment credential before it rotates"),
    ("credential_cannot_spend", &[403], "a credential without the `pay` scope on a route that moves money"),
    ("credential_cannot_talk", &[403], "a credential without the `talk` scope on the conversation plane"),
    ("session_not_credential", &[403], "a passkey session where only a credential may act"),
    ("origin_refused", &[403], "a write on a session without this registry's `Origin`"),
    ("credential_not_found", &[404], "no such credential of the caller's"),
    ("scope_unknown", &[400], "a credential scope that does not exist"),
    ("passkeys_for_people", &[403], "passkeys are for people, not agents"),
    ("passkeys_unavailable", &[503], "passkeys are not configured on this registry"),
    ("passkey_invalid", &[400], "a passkey ceremony's answer that does not verify"),
    ("passkey_unknown", &[400], "a passkey this registry does not know"),
    ("ceremony_invalid", &[400, 404], "no such passkey ceremony, or it expired"),
    ("agent_model_unconfigured", &[404], "the chamber's model-backed buyer is not configured"),
    ("attack_failed", &[503], "the chamber's attack could not run"),
    ("attack_not_found", &[404], "no such attack in the catalogue"),
    ("attack_rate_limited", &[429], "attacks run at most at their rate"),
    ("attacks_unavailable", &[404], "the chamber's attacks are not enabled"),
    ("run_failed", &[503], "the chamber's run could not start"),
    ("run_in_progress", &[429], "a chamber run is in progress"),
    ("runs_unavailable", &[404], "the chamber's runs are not enabled"),
    ("stream_full", &[503], "the chamber's stream has as many watchers as it takes"),
    ("stream_not_public", &[401], "the chamber is not public: sign in"),
    ("streams_full", &[503], "the conversation plane has as many streams as it takes"),
    ("too_many_streams", &[429], "this member has as many streams open as it may"),
    ("relay_full", &[503], "the relay has as many sockets as it takes"),
    ("reprice_row_invalid", &[422], "a reprice row that does not read"),
    ("task_id_invalid", &[400], "a task id is 64 lowercase hex characters"),
    ("task_not_found", &[404], "no such task on the relay"),
    ("task_past_retention", &[410], "the task was purged after the retention"),
    ("wait_too_long", &[400], "a long poll's wait over its limit"),
    ("sealing_key_not_found", &[404], "the member has published no sealing key"),
];

/// Every code the API can answer, with the statuses it is answered with.
pub fn catalogue() -> &'static BTreeMap<&'static str, BTreeSet<u16>> {
    static CATALOGUE: std::sync::OnceLock<BTreeMap<&'static str, BTreeSet<u16>>> = std::sync::OnceLock::new();
    CATALOGUE.get_or_init(|| {
        let mut all: BTreeMap<&'static str, BTreeSet<u16>> = BTreeMap::new();
        for code in Code::ALL {
            all.entry(code.as_str()).or_default().insert(status_of(*code).as_u16());
        }
        for (code, status) in crate::plane::CONVERSATION_CODES {
            all.entry(code).or_default().insert(status.as_u16());
        }
        for (code, statuses, _) in EDGE_CODES {
            all.entry(code).or_default().extend(statuses.iter().copied());
        }
        all
    })
}

/// The codes any operation of this shape can answer, from the edge alone: admission, rate, storage and
/// internal errors for every one; a credential's refusals for a secured one; a malformed parameter or body;
/// the `Idempotency-Key` rules for one that takes the header.
pub fn shared_codes(operation: &Operation) -> Vec<(&'static str, u16)> {
    let mut codes = vec![("rate_limited", 429), ("overloaded", 503), ("internal", 500)];
    codes.extend([("store_busy", 503), ("store_unavailable", 503), ("writer_stopped", 503)]);
    if operation.request_body.is_some() {
        // Any write can collide with a concurrent one in the store.
        codes.push(("write_conflict", 409));
    }
    let parameters = operation.parameters.as_deref().unwrap_or_default();
    if !parameters.is_empty() || operation.request_body.is_some() {
        codes.push(("invalid_request", 400));
    }
    if operation.request_body.is_some() {
        codes.extend([("invalid_request", 415), ("body_too_large", 413)]);
    }
    if operation.security.as_ref().is_some_and(|s| !s.is_empty()) {
        codes.extend([("unauthenticated", 401), ("rotation_required", 403), ("origin_refused", 403)]);
        codes.extend([("credential_cannot_spend", 403), ("credential_cannot_talk", 403)]);
        codes.push(("session_not_credential", 403));
    }
    if let Some(key) = parameters.iter().find(|p| p.name.eq_ignore_ascii_case(IDEMPOTENCY_KEY_HEADER)) {
        if key.required == utoipa::openapi::Required::True {
            codes.push(("idempotency_key_required", 400));
        }
        codes.push(("idempotency_key_invalid", 400));
        codes.extend([("idempotency_in_flight", 409), ("idempotency_conflict", 422), ("write_conflict", 409)]);
    }
    codes
}

/// The codes each operation answers beyond [`shared_codes`], keyed `"method path"` as the description
/// names it: first recorded over a whole test run (`BAZAAR_CONTRACT_RECORD`, docs/testing.md), then
/// completed by reading the commands (a passport's verification can fail each way a credential can). A route that can answer a code not listed here fails the contract check in the test that
/// meets it (`contract_misfit: code … is not among the codes …`).
pub const ROUTE_CODES: &[(&str, &[&str])] = &[
    ("get /v1/accounts", &["not_permitted"]),
    ("get /v1/accounts/{account}/transfers", &["account_not_found", "not_permitted"]),
    (
        "post /v1/agents",
        &[
            "handle_invalid",
            "handle_reserved",
            "handle_taken",
            "invite_expired",
            "invite_not_found",
            "invite_used",
            "member_exists",
            "proof_invalid",
            "public_key_invalid",
        ],
    ),
    ("put /v1/agents/{agent}/budget", &["amount_invalid", "member_not_found", "not_owner"]),
    ("get /v1/agents/{agent}/credentials", &["member_not_found", "not_owner"]),
    ("post /v1/agents/{agent}/credentials", &["member_not_found", "not_owner", "scope_unknown"]),
    ("post /v1/agents/{agent}/credentials/reissue", &["member_not_found", "not_owner"]),
    ("post /v1/agents/{agent}/credentials/{id}/revoke", &["credential_not_found", "member_not_found", "not_owner"]),
    ("get /v1/agents/{agent}/earnings", &["member_not_found", "not_permitted"]),
    (
        "post /v1/agents/{agent}/fund",
        &[
            "amount_invalid",
            "idempotency_conflict",
            "idempotency_in_flight",
            "idempotency_key_invalid",
            "idempotency_key_required",
            "insufficient_funds",
            "member_not_found",
            "not_owner",
            "write_conflict",
        ],
    ),
    ("put /v1/agents/{agent}/order-policy", &["member_not_found", "not_owner"]),
    ("get /v1/agents/{agent}/spending", &["member_not_found", "not_permitted"]),
    ("get /v1/agents/{agent}/terms", &["member_not_found"]),
    ("put /v1/agents/{agent}/terms", &["member_not_found", "not_owner", "terms_invalid"]),
    ("get /v1/answers", &["page_invalid"]),
    ("get /v1/blobs/{sha256}", &["order_not_found"]),
    ("get /v1/bounties", &["member_not_found"]),
    (
        "post /v1/bounties",
        &[
            "amount_invalid",
            "bounty_exists",
            "bounty_invalid",
            "idempotency_conflict",
            "idempotency_in_flight",
            "idempotency_key_invalid",
            "write_conflict",
        ],
    ),
    ("get /v1/bounties/{id}", &["bounty_not_found"]),
    (
        "post /v1/bounties/{id}/release",
        &[
            "bounty_already_released",
            "bounty_not_accepted",
            "bounty_not_found",
            "bounty_state",
            "idempotency_conflict",
            "idempotency_in_flight",
            "idempotency_key_invalid",
            "outcome_invalid",
            "reward_destination_invalid",
            "write_conflict",
        ],
    ),
    (
        "post /v1/bounties/{id}/withdraw",
        &[
            "bounty_already_released",
            "bounty_claim_open",
            "bounty_not_found",
            "idempotency_conflict",
            "idempotency_in_flight",
            "idempotency_key_invalid",
            "not_party",
            "write_conflict",
        ],
    ),
    ("get /v1/chamber/attacks", &["attacks_unavailable"]),
    (
        "post /v1/chamber/attacks/{name}",
        &["attack_not_found", "attack_rate_limited", "attacks_unavailable", "stream_not_public"],
    ),
    ("post /v1/chamber/runs/agent", &["agent_model_unconfigured", "not_permitted", "runs_unavailable"]),
    ("post /v1/chamber/runs/federation", &["not_permitted", "runs_unavailable"]),
    ("post /v1/chamber/runs/pilot", &["not_permitted", "runs_unavailable"]),
    ("post /v1/chamber/runs/story", &["not_permitted", "runs_unavailable"]),
    ("get /v1/channels", &["member_not_found", "not_owner"]),
    ("get /v1/channels/{channel}", &["channel_not_found", "not_member"]),
    ("post /v1/channels/{channel}/join", &["already_member", "channel_not_found", "not_member", "private_room"]),
    ("post /v1/channels/{channel}/leave", &["channel_not_found", "direct_message", "last_owner", "not_member"]),
    (
        "post /v1/channels/{channel}/members",
        &["already_member", "channel_not_found", "member_not_found", "not_member", "not_owner", "sealing_key_required"],
    ),
    (
        "delete /v1/channels/{channel}/members/{member}",
        &["channel_not_found", "member_not_found", "member_not_in_channel", "not_member", "not_owner", "remove_self"],
    ),
    (
        "put /v1/channels/{channel}/members/{member}/role",
        &["channel_not_found", "member_not_found", "not_member", "not_owner"],
    ),
    ("get /v1/channels/{channel}/messages", &["channel_not_found", "member_not_found", "not_member", "page_invalid"]),
    (
        "post /v1/channels/{channel}/messages",
        &[
            "body_empty",
            "body_too_long",
            "channel_not_found",
            "etiquette_limit",
            "idempotency_conflict",
            "idempotency_in_flight",
            "idempotency_key_invalid",
            "not_member",
            "not_sealed",
            "refs_invalid",
            "reply_not_found",
            "sealed_required",
            "signature_invalid",
            "too_many_mentions",
            "write_conflict",
        ],
    ),
    (
        "delete /v1/channels/{channel}/messages/{seq}",
        &["channel_not_found", "message_deleted", "message_not_found", "not_author", "not_member", "target_invalid"],
    ),
    (
        "patch /v1/channels/{channel}/messages/{seq}",
        &[
            "body_empty",
            "channel_not_found",
            "message_deleted",
            "message_not_found",
            "not_author",
            "not_member",
            "sealed_required",
            "signature_required",
            "target_invalid",
        ],
    ),
    (
        "post /v1/channels/{channel}/messages/{seq}/reactions",
        &[
            "channel_not_found",
            "message_deleted",
            "message_not_found",
            "not_member",
            "reaction_invalid",
            "target_invalid",
        ],
    ),
    ("put /v1/channels/{channel}/mute", &["channel_not_found", "not_member"]),
    ("post /v1/channels/{channel}/read", &["channel_not_found", "not_member", "seq_out_of_range", "write_conflict"]),
    ("get /v1/channels/{channel}/sealing-keys", &["channel_not_found", "not_member"]),
    ("get /v1/contracts", &["member_not_found"]),
    (
        "post /v1/contracts",
        &[
            "amount_invalid",
            "buyer_not_invited",
            "idempotency_conflict",
            "idempotency_in_flight",
            "idempotency_key_invalid",
            "idempotency_key_required",
            "member_not_found",
            "milestones_invalid",
            "not_permitted",
            "write_conflict",
        ],
    ),
    ("get /v1/contracts/{id}", &["contract_not_found", "not_party"]),
    ("post /v1/contracts/{id}/accept", &["contract_not_found", "contract_state", "not_party"]),
    ("post /v1/contracts/{id}/cancel", &["contract_not_found", "contract_state", "not_party"]),
    ("post /v1/contracts/{id}/decline", &["contract_not_found", "contract_state", "not_party"]),
    ("post /v1/contracts/{id}/milestones/{index}/deliver", &["contract_not_found", "milestone_state", "not_party"]),
    (
        "post /v1/contracts/{id}/milestones/{index}/reclaim",
        &["contract_not_found", "milestone_already_reclaimed", "milestone_state", "not_party", "reclaim_too_early"],
    ),
    (
        "post /v1/contracts/{id}/milestones/{index}/release",
        &["contract_not_found", "milestone_already_released", "milestone_disputed", "milestone_state", "not_party"],
    ),
    ("get /v1/disputes", &["member_not_found"]),
    (
        "post /v1/disputes",
        &[
            "amount_invalid",
            "dispute_exists",
            "idempotency_conflict",
            "idempotency_in_flight",
            "idempotency_key_invalid",
            "member_not_found",
            "not_disputable",
            "not_party",
            "write_conflict",
        ],
    ),
    ("get /v1/disputes/{id}", &["dispute_not_found", "not_party"]),
    (
        "post /v1/disputes/{id}/appeal",
        &[
            "appeal_window_closed",
            "dispute_not_found",
            "dispute_phase",
            "idempotency_conflict",
            "idempotency_in_flight",
            "idempotency_key_invalid",
            "not_party",
            "write_conflict",
        ],
    ),
    (
        "post /v1/disputes/{id}/evidence",
        &[
            "dispute_not_found",
            "evidence_closed",
            "idempotency_conflict",
            "idempotency_in_flight",
            "idempotency_key_invalid",
            "not_party",
            "write_conflict",
        ],
    ),
    (
        "post /v1/disputes/{id}/execute",
        &[
            "dispute_executed",
            "dispute_not_found",
            "dispute_phase",
            "idempotency_conflict",
            "idempotency_in_flight",
            "idempotency_key_invalid",
            "write_conflict",
        ],
    ),
    (
        "post /v1/disputes/{id}/ruling",
        &[
            "idempotency_conflict",
            "idempotency_in_flight",
            "idempotency_key_invalid",
            "not_arbiter",
            "party_cannot_rule",
            "ruling_invalid",
            "write_conflict",
        ],
    ),
    ("post /v1/dms", &["dm_with_self", "member_not_found"]),
    ("get /v1/events", &["not_permitted"]),
    ("post /v1/federation/guests", &["peer_unknown", "proof_invalid", "public_key_invalid", "request_stale"]),
    ("get /v1/federation/netting", &["not_permitted"]),
    (
        "post /v1/federation/netting",
        &["netting_exceeds_corridor", "netting_exists", "netting_invalid", "not_permitted"],
    ),
    ("post /v1/federation/peers", &["amount_invalid", "not_permitted", "peer_invalid"]),
    ("get /v1/federation/recovery", &["not_permitted"]),
    ("post /v1/federation/relays/{jti}/retry", &["not_permitted", "relay_not_stuck", "token_not_found"]),
    ("get /v1/hires", &["member_not_found"]),
    (
        "post /v1/hires",
        &[
            "amount_invalid",
            "hire_exists",
            "idempotency_conflict",
            "idempotency_in_flight",
            "idempotency_key_invalid",
            "member_not_found",
            "not_permitted",
            "offer_signature_invalid",
            "pay_to_invalid",
            "write_conflict",
        ],
    ),
    ("get /v1/hires/{id}", &["hire_not_found", "not_party"]),
    (
        "post /v1/hires/{id}/accept",
        &[
            "hire_not_found",
            "hire_paid",
            "idempotency_conflict",
            "idempotency_in_flight",
            "idempotency_key_invalid",
            "milestone_disputed",
            "not_permitted",
            "response_not_verified",
            "write_conflict",
        ],
    ),
    ("get /v1/inbox", &["page_invalid"]),
    ("get /v1/inbox/sse", &["too_many_streams"]),
    ("post /v1/invites", &["not_permitted"]),
    ("get /v1/jobs/{task_id}", &["task_id_invalid", "task_not_found", "task_past_retention", "wait_too_long"]),
    ("get /v1/leases", &["member_not_found"]),
    (
        "post /v1/leases",
        &[
            "amount_invalid",
            "budget_per_call_exceeded",
            "idempotency_conflict",
            "idempotency_in_flight",
            "idempotency_key_invalid",
            "idempotency_key_required",
            "lease_identity_mismatch",
            "member_not_found",
            "not_permitted",
            "write_conflict",
        ],
    ),
    ("get /v1/leases/{id}", &["lease_not_found", "not_party"]),
    (
        "post /v1/leases/{id}/receipt",
        &[
            "idempotency_conflict",
            "idempotency_in_flight",
            "idempotency_key_invalid",
            "lease_not_found",
            "not_party",
            "write_conflict",
        ],
    ),
    ("put /v1/listings", &["listing_invalid", "not_permitted"]),
    ("get /v1/listings/{id}", &["listing_not_found"]),
    ("get /v1/members/{member}", &["member_not_found"]),
    (
        "put /v1/members/{member}/handle",
        &["handle_invalid", "handle_reserved", "handle_taken", "member_not_found", "not_owner"],
    ),
    ("get /v1/members/{member}/sealing-key", &["member_not_found", "sealing_key_not_found"]),
    (
        "post /v1/mint",
        &[
            "amount_invalid",
            "idempotency_conflict",
            "idempotency_in_flight",
            "idempotency_key_invalid",
            "idempotency_key_required",
            "member_not_found",
            "not_permitted",
            "write_conflict",
        ],
    ),
    ("get /v1/orders", &["member_not_found", "not_owner"]),
    (
        "post /v1/orders",
        &[
            "buyer_not_invited",
            "idempotency_conflict",
            "idempotency_in_flight",
            "idempotency_key_invalid",
            "idempotency_key_required",
            "not_party",
            "not_permitted",
            "order_invalid",
            "rfq_invalid",
            "rfq_not_found",
            "rfq_ordered",
            "write_conflict",
        ],
    ),
    ("get /v1/orders/{id}", &["not_party", "order_not_found"]),
    (
        "post /v1/orders/{id}/approve",
        &["approval_by_person", "budget_per_call_exceeded", "not_party", "order_not_found"],
    ),
    ("post /v1/orders/{id}/decline", &["approval_by_person", "not_party", "order_not_found", "order_state"]),
    ("post /v1/orders/{id}/shares/{share}/cancel", &["milestone_state", "not_party", "order_not_found", "order_state"]),
    ("post /v1/orders/{id}/shares/{share}/proof", &["milestone_state", "not_party", "order_not_found", "share_paid"]),
    (
        "post /v1/owners",
        &["handle_invalid", "handle_reserved", "handle_taken", "member_exists", "not_permitted", "public_key_invalid"],
    ),
    (
        "post /v1/passkeys/register/finish",
        &["ceremony_invalid", "passkey_exists", "passkey_invalid", "passkeys_unavailable", "too_many_passkeys"],
    ),
    ("post /v1/passkeys/register/start", &["passkeys_for_people", "passkeys_unavailable"]),
    (
        "post /v1/passkeys/sign-in/finish",
        &["ceremony_invalid", "passkey_invalid", "passkey_unknown", "passkeys_unavailable"],
    ),
    ("post /v1/passkeys/sign-in/start", &["passkeys_unavailable"]),
    ("post /v1/passports", &["member_not_found", "not_permitted", "passport_limit"]),
    (
        "post /v1/passports/verify",
        &[
            "passport_context",
            "passport_cryptosuite",
            "passport_expired",
            "passport_issuer_mismatch",
            "passport_issuer_unknown",
            "passport_malformed",
            "passport_not_yet_valid",
            "passport_proof_invalid",
            "passport_proof_purpose",
            "passport_verification_method",
        ],
    ),
    ("post /v1/registry/keys/rotate", &["not_permitted"]),
    ("post /v1/reprice", &["reprice_row_invalid", "stream_not_public"]),
    (
        "post /v1/reputation/import",
        &[
            "passport_context",
            "passport_cryptosuite",
            "passport_expired",
            "passport_issuer_mismatch",
            "passport_issuer_unknown",
            "passport_limit",
            "passport_malformed",
            "passport_not_yet_valid",
            "passport_proof_invalid",
            "passport_proof_purpose",
            "passport_subject_mismatch",
            "passport_verification_method",
            "presentation_invalid",
            "request_stale",
        ],
    ),
    ("get /v1/reputation/{member}", &["member_not_found"]),
    (
        "post /v1/rfqs",
        &[
            "idempotency_conflict",
            "idempotency_in_flight",
            "idempotency_key_invalid",
            "idempotency_key_required",
            "not_permitted",
            "rfq_invalid",
            "write_conflict",
        ],
    ),
    ("get /v1/rfqs/{id}", &["not_party", "rfq_not_found"]),
    ("get /v1/rfqs/{id}/allocation", &["not_party", "rfq_not_found"]),
    ("post /v1/rfqs/{id}/close", &["not_party", "rfq_not_found"]),
    (
        "post /v1/rfqs/{id}/offers",
        &[
            "not_party",
            "offer_above_cap",
            "offer_below_floor",
            "offer_beyond_capacity",
            "offer_notice_too_short",
            "offer_revision_limit",
            "rfq_closed",
            "rfq_not_found",
        ],
    ),
    ("get /v1/rooms", &["page_invalid"]),
    ("post /v1/rooms", &["name_invalid", "sealed_public_room"]),
    ("put /v1/sealing-key", &["signature_invalid"]),
    ("get /v1/service-authorizations", &["member_not_found"]),
    (
        "post /v1/service-authorizations",
        &[
            "amount_invalid",
            "authorization_exists",
            "idempotency_conflict",
            "idempotency_in_flight",
            "idempotency_key_invalid",
            "member_not_found",
            "not_owner",
            "pay_to_invalid",
            "write_conflict",
        ],
    ),
    ("get /v1/service-authorizations/{id}", &["authorization_not_found", "not_party"]),
    (
        "post /v1/service-authorizations/{id}/pay",
        &[
            "authorization_mismatch",
            "authorization_revoked",
            "authorization_used",
            "budget_per_call_exceeded",
            "idempotency_conflict",
            "idempotency_in_flight",
            "idempotency_key_invalid",
            "idempotency_key_required",
            "not_permitted",
            "service_sponsored",
            "write_conflict",
        ],
    ),
    (
        "post /v1/service-authorizations/{id}/revoke",
        &[
            "authorization_not_found",
            "authorization_revoked",
            "idempotency_conflict",
            "idempotency_in_flight",
            "idempotency_key_invalid",
            "not_owner",
            "write_conflict",
        ],
    ),
    (
        "post /v1/settlements",
        &[
            "amount_exceeds_token",
            "amount_invalid",
            "idempotency_conflict",
            "idempotency_in_flight",
            "idempotency_key_invalid",
            "not_audience",
            "order_already_settled",
            "order_mismatch",
            "relay_failed",
            "relay_pending",
            "relay_stuck",
            "token_expired",
            "token_malformed",
            "token_settled",
            "token_signature_invalid",
            "token_voided",
            "write_conflict",
        ],
    ),
    ("post /v1/stake", &["amount_invalid", "budget_per_day_exceeded", "idempotency_key_required", "not_permitted"]),
    (
        "post /v1/stake/unlock",
        &[
            "amount_invalid",
            "idempotency_conflict",
            "idempotency_in_flight",
            "idempotency_key_invalid",
            "idempotency_key_required",
            "insufficient_funds",
            "write_conflict",
        ],
    ),
    (
        "post /v1/stake/withdraw",
        &[
            "idempotency_conflict",
            "idempotency_in_flight",
            "idempotency_key_invalid",
            "idempotency_key_required",
            "stake_cooldown",
            "stake_dispute_open",
            "stake_not_unlocked",
            "write_conflict",
        ],
    ),
    ("get /v1/stake/{member}", &["member_not_found"]),
    ("get /v1/stream", &["stream_not_public"]),
    ("get /v1/stream/latest", &["stream_not_public"]),
    (
        "post /v1/tokens",
        &[
            "amount_invalid",
            "budget_per_call_exceeded",
            "budget_per_day_exceeded",
            "buyer_not_invited",
            "escrow_required",
            "idempotency_conflict",
            "idempotency_in_flight",
            "idempotency_key_invalid",
            "member_not_found",
            "not_permitted",
            "write_conflict",
        ],
    ),
    ("post /v1/tokens/verify", &["not_audience"]),
    ("post /v1/tokens/{jti}/void", &["not_permitted", "token_not_found", "token_voided"]),
    ("post /v1/webhooks", &["too_many_webhooks", "webhook_url_invalid"]),
    ("delete /v1/webhooks/{id}", &["webhook_not_found"]),
    ("get /v1/webhooks/{id}/deliveries", &["page_invalid", "webhook_not_found"]),
    ("post /v1/webhooks/{id}/replay", &["webhook_not_found"]),
    ("post /v1/webhooks/{id}/rotate", &["webhook_not_found"]),
    ("post /x402/settle", &["idempotency_conflict", "idempotency_in_flight", "write_conflict"]),
];

/// The codes of `method path`, each with the statuses it is answered with.
pub fn codes_of(method: &str, path: &str, operation: &Operation) -> BTreeMap<u16, BTreeSet<&'static str>> {
    let key = format!("{method} {path}");
    let mut by_status: BTreeMap<u16, BTreeSet<&'static str>> = BTreeMap::new();
    for (code, status) in shared_codes(operation) {
        by_status.entry(status).or_default().insert(code);
    }
    let own = ROUTE_CODES.iter().filter(|(op, _)| *op == key).flat_map(|(_, codes)| codes.iter());
    for code in own {
        for status in catalogue().get(code).into_iter().flatten() {
            by_status.entry(*status).or_default().insert(code);
        }
    }
    by_status
}

/// Writes every operation's codes into `openapi`: each error status the operation can answer is a
/// problem+json response whose `x-codes` lists the codes (and whose description names them); an error
/// response the operation declared but can answer with no code is dropped.
pub fn declare(openapi: &mut utoipa::openapi::OpenApi) {
    for (path, item) in openapi.paths.paths.iter_mut() {
        for (method, operation) in operations(item) {
            let codes = codes_of(method, path, operation);
            let responses = &mut operation.responses.responses;
            responses.retain(|status, _| !status.starts_with(['4', '5']));
            for (status, codes) in codes {
                responses.insert(status.to_string(), response(status, &codes));
            }
        }
    }
}

fn response(status: u16, codes: &BTreeSet<&'static str>) -> RefOr<utoipa::openapi::Response> {
    let listed: Vec<String> = codes.iter().map(|code| format!("`{code}`")).collect();
    let reason = axum::http::StatusCode::from_u16(status).ok().and_then(|s| s.canonical_reason()).unwrap_or("Error");
    let description = format!("{reason}: {}", listed.join(", "));
    let content = ContentBuilder::new().schema(Some(Ref::from_schema_name(ProblemDetails::name()))).build();
    let mut extensions = utoipa::openapi::extensions::Extensions::default();
    extensions.insert(CODES_EXTENSION.to_string(), serde_json::json!(codes));
    ResponseBuilder::new()
        .description(description)
        .content(PROBLEM_CONTENT_TYPE, content)
        .extensions(Some(extensions))
        .build()
        .into()
}

pub(crate) fn operations(item: &mut PathItem) -> impl Iterator<Item = (&'static str, &mut Operation)> {
    let PathItem { get, put, post, delete, options, head, patch, trace, .. } = item;
    let methods = ["get", "put", "post", "delete", "options", "head", "patch", "trace"];
    methods
        .into_iter()
        .zip([get, put, post, delete, options, head, patch, trace])
        .filter_map(|(m, o)| Some((m, o.as_mut()?)))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The three tables agree: a code two of them name is answered with the same status by both, and the
    /// core's codes are the core's table exactly.
    #[test]
    fn the_tables_of_codes_do_not_contradict_one_another() {
        for (code, status) in crate::plane::CONVERSATION_CODES {
            if let Some(core) = Code::ALL.iter().find(|c| c.as_str() == *code) {
                assert_eq!(status_of(*core), *status, "{code}: the core and the conversation plane differ");
            }
        }
        for (code, statuses, _) in EDGE_CODES {
            // The edge answers a core code only where it adds a status (`invalid_request` as 415).
            if let Some(core) = Code::ALL.iter().find(|c| c.as_str() == *code) {
                let core_status = status_of(*core).as_u16();
                assert!(statuses.contains(&core_status) && statuses.len() > 1, "{code} is the core's; list it once");
            }
            let conversation = crate::plane::CONVERSATION_CODES.iter().any(|(c, _)| c == code);
            assert!(!conversation, "{code} is the conversation plane's; do not list it again");
            assert!(!statuses.is_empty() && statuses.iter().all(|s| (400..600).contains(s)), "{code}");
        }
    }
}

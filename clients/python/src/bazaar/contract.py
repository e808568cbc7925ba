"""The wire contract (``clients/conformance/contract.json``); the conformance suite checks these values."""

import re

PAYMENT_HEADER = "bazaar-payment"
SETTLEMENT_HEADER = "bazaar-settlement"
WORK_RECEIPT_HEADER = "bazaar-work-receipt"
IDEMPOTENCY_KEY_HEADER = "idempotency-key"
IDEMPOTENT_REPLAYED_HEADER = "idempotent-replayed"
X402_PAYMENT_REQUIRED = "payment-required"
X402_PAYMENT_SIGNATURE = "payment-signature"
X402_PAYMENT_RESPONSE = "payment-response"

#: Attempts a paid call (or any retried call) makes on transport errors, 5xx and 409 in flight.
RETRY_ATTEMPTS_MAX = 5
#: The first retry's delay; it doubles each attempt.
RETRY_BASE_MS = 50
#: A replayed token this close to expiry (or past it) is renewed before use.
TOKEN_RENEW_MARGIN_MS = 5_000
# A replayed token that can no longer pay is renewed under this key followed by its jti (``renew:<jti>``).
RENEW_KEY_PREFIX = "renew:"
#: The largest paid response the merchant middleware keeps as a work receipt.
WORK_RECEIPT_BYTES_MAX = 1024 * 1024
#: How long the merchant middleware keeps a work receipt (30 days, longer than a paid call stays disputable);
#: older ones are pruned. A retry of an order after that runs the work again (the settlement never repeats).
WORK_RECEIPT_RETENTION_S = 30 * 24 * 60 * 60
#: Receipts stored between two prunes of the expired ones (and one prune when the store opens).
WORK_RECEIPT_PRUNE_EVERY = 1024
#: An escrowed purchase's milestone is due this long after the end of today (UTC).
ESCROW_DUE_S = 7 * 24 * 60 * 60
#: The longest a registry token lives (what an x402 offer's ``maxTimeoutSeconds`` says).
TOKEN_TTL_S_MAX = 15 * 60
#: Requests give up after this long.
REQUEST_TIMEOUT_S = 30.0
#: Calls the registry keys by their order itself: safe to send again to another node even without a key.
NATURALLY_KEYED = ("/v1/tokens", "/v1/settlements", "/v1/tokens/batch", "/v1/settlements/batch")
#: Items one coalesced batch carries at most (``Client.coalescing``; the registry accepts up to 1,000).
COALESCE_ITEMS_MAX = 256
#: Batches of one kind a coalescing client has in flight at once; more calls wait for the next batch.
COALESCE_IN_FLIGHT_MAX = 4

ALREADY_PAID_CODES = ("token_settled", "order_already_settled")

#: The code a merchant answers (503) when the registry refuses the merchant's own credential: the merchant is at
#: fault, not the buyer. Final for the call: the buyer's client does not retry it.
MERCHANT_UNAUTHENTICATED = "merchant_unauthenticated"
MERCHANT_UNAUTHENTICATED_STATUS = 503
#: Merchant answers that leave the buyer's token useless for this call: the buyer's client voids it at once, so its
#: hold is released instead of waiting out the token's life.
VOID_ON_CODES = (MERCHANT_UNAUTHENTICATED, "amount_exceeds_token", "not_audience", "order_mismatch")
#: What a merchant middleware raises when it is made with a credential it cannot use.
MERCHANT_CREDENTIAL_INVALID = "merchant_credential_invalid"
#: An invite's (or owner-issued) credential: it can only rotate, so a merchant cannot run on it.
ENROLLMENT_CREDENTIAL_PREFIX = "bzi_"
#: The placeholder shapes a merchant credential may not have: all capitals, digits and underscores
#: (``MERCHANT_CREDENTIAL``), or wrapped in ``<…>``, ``{…}``, ``${…}``.
_PLACEHOLDER_WRAPS = (("<", ">"), ("{", "}"), ("${", "}"))


def merchant_credential_problem(credential: object) -> "str | None":
    """Why a merchant cannot run on ``credential`` (``contract.json``, ``merchant_credential``), or None."""
    if credential is None:
        return "no credential was given"
    if not isinstance(credential, str) or not credential.strip():
        return "the credential is blank"
    if any(c.isspace() for c in credential):
        return "the credential contains whitespace (a stray newline from a file or an unquoted variable?)"
    if credential.startswith(ENROLLMENT_CREDENTIAL_PREFIX):
        return "this is an enrollment credential (bzi_…): rotate it first (POST /v1/credentials/rotate)"
    if re.fullmatch(r"[A-Z][A-Z0-9_]*", credential) or any(
        credential.startswith(a) and credential.endswith(b) for a, b in _PLACEHOLDER_WRAPS
    ):
        return f"`{credential}` is a placeholder, not a credential"
    return None

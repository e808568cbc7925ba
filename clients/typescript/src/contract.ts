// The wire contract (clients/conformance/contract.json); the conformance suite checks these values.

export const PAYMENT_HEADER = "bazaar-payment";
export const SETTLEMENT_HEADER = "bazaar-settlement";
export const WORK_RECEIPT_HEADER = "bazaar-work-receipt";
export const IDEMPOTENCY_KEY_HEADER = "idempotency-key";
export const IDEMPOTENT_REPLAYED_HEADER = "idempotent-replayed";
export const X402_PAYMENT_REQUIRED = "payment-required";
export const X402_PAYMENT_SIGNATURE = "payment-signature";
export const X402_PAYMENT_RESPONSE = "payment-response";

/** Attempts a paid call (or any retried call) makes on transport errors, 5xx and 409 in flight. */
export const RETRY_ATTEMPTS_MAX = 5;
/** The first retry's delay; it doubles each attempt. */
export const RETRY_BASE_MS = 50;
/** A replayed token this close to expiry (or past it) is renewed before use. */
export const TOKEN_RENEW_MARGIN_MS = 5_000;
/** A replayed token that can no longer pay is renewed under this key followed by its jti (`renew:<jti>`). */
export const RENEW_KEY_PREFIX = "renew:";
/** The largest paid response the merchant middleware keeps as a work receipt. */
export const WORK_RECEIPT_BYTES_MAX = 1024 * 1024;
/**
 * How long the merchant middleware keeps a work receipt (30 days, longer than a paid call stays disputable);
 * older ones are pruned. A retry of an order after that runs the work again (the settlement never repeats).
 */
export const WORK_RECEIPT_RETENTION_S = 30 * 24 * 60 * 60;
/** Receipts stored between two prunes of the expired ones (and one prune when the store opens). */
export const WORK_RECEIPT_PRUNE_EVERY = 1024;
/** An escrowed purchase's milestone is due this long after the end of today (UTC). */
export const ESCROW_DUE_S = 7 * 24 * 60 * 60;
/** Requests give up after this long. */
export const REQUEST_TIMEOUT_MS = 30_000;
/** Calls the registry keys by their order itself: safe to send again to another node even without a key. */
export const NATURALLY_KEYED: readonly string[] = ["/v1/tokens", "/v1/settlements", "/v1/tokens/batch", "/v1/settlements/batch"];
/** Items one coalesced batch carries at most (`Client.coalescing`; the registry accepts up to 1,000). */
export const COALESCE_ITEMS_MAX = 256;
/** Batches of one kind a coalescing client has in flight at once; more calls wait for the next batch. */
export const COALESCE_IN_FLIGHT_MAX = 4;

export const ALREADY_PAID_CODES: readonly string[] = ["token_settled", "order_already_settled"];

/**
 * The code a merchant answers (503) when the registry refuses the merchant's own credential: the merchant is at
 * fault, not the buyer. Final for the call: the buyer's client does not retry it.
 */
export const MERCHANT_UNAUTHENTICATED = "merchant_unauthenticated";
export const MERCHANT_UNAUTHENTICATED_STATUS = 503;
/**
 * Merchant answers that leave the buyer's token useless for this call: the buyer's client voids it at once, so its
 * hold is released instead of waiting out the token's life.
 */
export const VOID_ON_CODES: readonly string[] = [MERCHANT_UNAUTHENTICATED, "amount_exceeds_token", "not_audience", "order_mismatch"];
/** What a merchant middleware throws when it is made with a credential it cannot use. */
export const MERCHANT_CREDENTIAL_INVALID = "merchant_credential_invalid";
/** An invite's (or owner-issued) credential: it can only rotate, so a merchant cannot run on it. */
export const ENROLLMENT_CREDENTIAL_PREFIX = "bzi_";
/** The placeholder shapes a merchant credential may not have: wrapped in `<…>`, `{…}`, `${…}`. */
const PLACEHOLDER_WRAPS: ReadonlyArray<[string, string]> = [["<", ">"], ["{", "}"], ["${", "}"]];

/** Why a merchant cannot run on `credential` (contract.json, `merchant_credential`), or undefined. */
export function merchantCredentialProblem(credential: unknown): string | undefined {
  if (credential === undefined || credential === null) return "no credential was given";
  if (typeof credential !== "string" || credential.trim() === "") return "the credential is blank";
  if (/\s/.test(credential)) return "the credential contains whitespace (a stray newline from a file or an unquoted variable?)";
  if (credential.startsWith(ENROLLMENT_CREDENTIAL_PREFIX)) {
    return "this is an enrollment credential (bzi_…): rotate it first (POST /v1/credentials/rotate)";
  }
  if (/^[A-Z][A-Z0-9_]*$/.test(credential) || PLACEHOLDER_WRAPS.some(([a, b]) => credential.startsWith(a) && credential.endsWith(b))) {
    return `\`${credential}\` is a placeholder, not a credential`;
  }
  return undefined;
}

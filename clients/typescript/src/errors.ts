// Every refusal from a registry (or a merchant) is RFC 9457 problem+json with a stable `code`.

/** Anything this SDK throws. */
export class BazaarError extends Error {}

/** The registry (or merchant) could not be reached, or the connection broke before an answer. */
export class TransportError extends BazaarError {}

/** A problem+json answer: `status`, the stable `code`, the `detail` for people, and `facts`. */
export class ProblemError extends BazaarError {
  readonly status: number;
  readonly code: string;
  readonly detail: string;
  readonly body: Record<string, unknown>;

  constructor(status: number, code: string, detail: string, body: Record<string, unknown>) {
    super(`${status} ${code}: ${detail}`);
    this.status = status;
    this.code = code;
    this.detail = detail;
    this.body = body;
  }

  /** The machine-readable facts some refusals carry (e.g. the settlement an order already has). */
  get facts(): Record<string, unknown> {
    const facts = this.body["facts"];
    return facts && typeof facts === "object" ? (facts as Record<string, unknown>) : {};
  }

  /** Whether the same request, with the same idempotency key, may be sent again. */
  get retryable(): boolean {
    return this.status >= 500 || this.code === "idempotency_in_flight";
  }

  /** The paid route's price, where a merchant's refusal is about the amount (`facts.price_minor`). */
  get priceMinor(): number | undefined {
    const price = this.facts["price_minor"];
    return typeof price === "number" ? price : undefined;
  }
}

/** A 4xx refusal: sending the same request again gets the same answer. */
export class RefusedError extends ProblemError {}
/** A 5xx answer: retrying the same request with the same key is safe. */
export class UnavailableError extends ProblemError {}
/** One of the agent's ceilings (per call, per day, total) set by its owner would be passed. */
export class BudgetExceeded extends RefusedError {}
/** The order is above the escrow threshold: it rides an escrowed contract (`Client.purchase`). */
export class EscrowRequired extends RefusedError {}
/** The token, or the order, has been settled; `facts` names the settlement. */
export class AlreadySettled extends RefusedError {}
/** The token is malformed, forged, expired, voided, for another merchant, or too small. */
export class TokenRefused extends RefusedError {}
/**
 * The token allows less than the paid route costs (`amount_exceeds_token`): `priceMinor` is the route's price,
 * `maxAmountMinor` what the token allowed. Ask again with a new order id and at least the price.
 */
export class TokenTooSmall extends TokenRefused {
  get maxAmountMinor(): number | undefined {
    const value = this.facts["max_amount_minor"];
    return typeof value === "number" ? value : undefined;
  }
}
/**
 * The merchant's own registry credential was refused (`merchant_unauthenticated`): the merchant is misconfigured,
 * not the buyer. Final for this call (not retried); the buyer's client voids the token.
 */
export class MerchantUnauthenticated extends ProblemError {
  override get retryable(): boolean {
    return false;
  }
}
/**
 * A merchant middleware was made without a usable credential (missing, blank, a placeholder such as
 * `MERCHANT_CREDENTIAL`, or an enrollment credential not yet rotated); `code` is `merchant_credential_invalid`.
 * Thrown when the merchant is made, never at a buyer's request.
 */
export class MerchantMisconfigured extends BazaarError {
  readonly code = "merchant_credential_invalid";
}

const BY_CODE: Record<string, typeof RefusedError> = {
  budget_per_call_exceeded: BudgetExceeded,
  budget_per_day_exceeded: BudgetExceeded,
  budget_total_exceeded: BudgetExceeded,
  escrow_required: EscrowRequired,
  token_settled: AlreadySettled,
  order_already_settled: AlreadySettled,
  token_malformed: TokenRefused,
  token_signature_invalid: TokenRefused,
  token_expired: TokenRefused,
  token_voided: TokenRefused,
  token_not_found: TokenRefused,
  not_audience: TokenRefused,
  amount_exceeds_token: TokenTooSmall,
};

/** The typed error for an answer with `status` and (problem+json) `body`. */
export function problem(status: number, body: unknown): ProblemError {
  const data = body && typeof body === "object" ? (body as Record<string, unknown>) : {};
  const code = typeof data["code"] === "string" ? data["code"] : "unknown";
  const detail = typeof data["detail"] === "string" ? data["detail"] : "";
  if (code === "merchant_unauthenticated") return new MerchantUnauthenticated(status, code, detail, data);
  if (status >= 500) return new UnavailableError(status, code, detail, data);
  const Kind = BY_CODE[code] ?? RefusedError;
  return new Kind(status, code, detail, data);
}

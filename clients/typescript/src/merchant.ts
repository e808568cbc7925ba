// The merchant side of a paid call, whatever carries it (an Express route, a Fetch handler): verify → settle once
// → run the work once per settlement → keep its receipt → answer; a retry gets the stored answer.
//
// Verify is a receipt check, never a work order: it only says the token is genuine and what state it is in. The
// money is real when the settlement is; the work runs after that, at most once per settlement.
//
// Sharp edge, the same as in the Rust and Python SDKs: the receipt is written right after the handler returns. If
// the process dies inside that window, the settlement exists without a receipt and the next retry runs the
// handler again. Handlers whose effects must never repeat should make them idempotent on the settlement id they
// are handed (`Settled.settlementId`).

import type { Client, Json } from "./client.js";
import type * as wire from "./wire.js";
import * as contract from "./contract.js";
import { MerchantMisconfigured, ProblemError, TransportError } from "./errors.js";
import type { ReceiptStore, WorkReceipt } from "./receipts.js";

/** What the paid handler is handed: the settlement it runs for. */
export interface Settled {
  settlementId: string;
  orderId: string;
  buyer: string;
  amountMinor: number;
}

/** An answer: status, headers, body. */
export interface Answered {
  status: number;
  headers: Record<string, string>;
  body: Uint8Array;
}

/** Where a test may make the merchant "crash": after settling (work not yet run), or after the receipt is kept. */
export type FaultPoint = "after_settle" | "before_answer";
/** Returning true at a point answers 503 there, as a crash would. */
export type FaultHook = (point: FaultPoint, orderId: string) => boolean;

/** The claims of an `apt_` token, unchecked (the registry checks the signature when it settles). */
export function claimsUnverified(token: string): Json | undefined {
  if (!token.startsWith("apt_") || !token.includes(".")) return undefined;
  const encoded = token.slice(4).split(".", 1)[0] ?? "";
  try {
    const claims: unknown = JSON.parse(Buffer.from(encoded, "base64url").toString("utf8"));
    return claims && typeof claims === "object" ? (claims as Json) : undefined;
  } catch {
    return undefined;
  }
}

export function problemAnswer(status: number, code: string, detail: string, facts?: Json): Answered {
  const problem: Json = { type: `https://bazaar.dev/problems/${code}`, title: code.replace(/_/g, " "), status, code, detail };
  if (facts && Object.keys(facts).length > 0) problem["facts"] = facts;
  return { status, headers: { "content-type": "application/problem+json" }, body: new TextEncoder().encode(JSON.stringify(problem)) };
}

/** The buyer's answer when verify or settle did not succeed, naming the party at fault. */
function failure(error: unknown, priceMinor: number): Answered {
  if (error instanceof ProblemError) {
    if (error.status === 401 || error.code === "rotation_required") {
      // The registry refused the merchant's own credential: nothing the buyer sent is wrong.
      const detail =
        `The registry refused this merchant's own credential (${error.code}): the merchant must fix its configuration. ` +
        "Your token was not settled; void it to release its hold (Bazaar's clients do).";
      return problemAnswer(contract.MERCHANT_UNAUTHENTICATED_STATUS, contract.MERCHANT_UNAUTHENTICATED, detail);
    }
    const status = error.status >= 500 || error.status === 409 ? 503 : 402;
    const facts: Json = { ...error.facts };
    let detail = error.detail;
    if (error.code === "amount_exceeds_token") {
      facts["price_minor"] = priceMinor;
      detail = `This costs ${priceMinor} minor units; the token allows at most ${String(facts["max_amount_minor"])}. Pay with a token for ${priceMinor}.`;
    }
    return problemAnswer(status, error.code, detail, facts);
  }
  return problemAnswer(503, "registry_unreachable", `The registry could not be reached: ${String(error)}`);
}

function stored(receipt: WorkReceipt, settlementId: string, replayed: boolean): Answered {
  const headers: Record<string, string> = { [contract.SETTLEMENT_HEADER]: settlementId };
  if (receipt.contentType) headers["content-type"] = receipt.contentType;
  if (replayed) headers[contract.WORK_RECEIPT_HEADER] = "replayed";
  return { status: receipt.status, headers, body: receipt.body };
}

export class Merchant {
  readonly client: Client;
  readonly receipts: ReceiptStore;
  private readonly fault: FaultHook | undefined;
  /** One queue per settlement, so concurrent retries run the work once. */
  private readonly running = new Map<string, Promise<unknown>>();

  /**
   * `client` carries the merchant's credential; `receipts` keeps work receipts (e.g. `new SqliteReceiptStore(path)`).
   * A merchant refuses to be made without a usable credential (`MerchantMisconfigured`): missing, blank, a
   * placeholder such as `MERCHANT_CREDENTIAL`, or an enrollment credential not yet rotated — else every buyer would
   * be refused for the merchant's mistake.
   */
  constructor(client: Client, receipts: ReceiptStore, options: { fault?: FaultHook } = {}) {
    const problem = contract.merchantCredentialProblem(client.credential);
    if (problem !== undefined) {
      throw new MerchantMisconfigured(
        `${contract.MERCHANT_CREDENTIAL_INVALID}: a merchant needs its own registry credential, and ${problem}. ` +
          "Enrol the merchant agent (new Client(url).redeemInvite(...)) and pass the credential it got.",
      );
    }
    this.client = client;
    this.receipts = receipts;
    this.fault = options.fault;
  }

  /**
   * One paid request. `work` runs at most once per settlement; it may answer a refusal of its own (an `Answered`
   * with `refusal: true`), which is sent and not kept.
   */
  async paid(token: string | undefined | null, priceMinor: number, work: (settled: Settled) => Promise<WorkReceipt | Answered>): Promise<Answered> {
    if (!token) {
      const detail = `This costs ${priceMinor} minor units: send a registry token in the \`Bazaar-Payment\` header.`;
      return problemAnswer(402, "payment_required", detail, { price_minor: priceMinor });
    }
    const claims = claimsUnverified(token);
    if (!claims || typeof claims["ord"] !== "string" || typeof claims["jti"] !== "string") {
      return problemAnswer(402, "token_malformed", "The payment token is not an apt_ token.");
    }
    const orderId = claims["ord"];
    let receipt: wire.Settlement;
    try {
      // A receipt check: genuine and its state. Never the signal to work.
      await this.client.verify(token);
      receipt = await this.settle(token, priceMinor, orderId);
    } catch (error) {
      if (error instanceof ProblemError || error instanceof TransportError) return failure(error, priceMinor);
      throw error;
    }
    const settled: Settled = {
      settlementId: receipt.settlement_id,
      orderId,
      buyer: receipt.buyer,
      amountMinor: receipt.amount_minor,
    };
    return this.once(settled.settlementId, async () => {
      const kept = await this.receipts.get(settled.settlementId);
      if (kept) return stored(kept, settled.settlementId, true);
      if (this.fault?.("after_settle", orderId)) return problemAnswer(503, "merchant_crashed", "Simulated crash after settle.");
      const made = await work(settled);
      if ("headers" in made) return made;
      await this.receipts.put(settled.settlementId, orderId, made);
      if (this.fault?.("before_answer", orderId)) return problemAnswer(503, "merchant_crashed", "Simulated crash before answering.");
      return stored(made, settled.settlementId, false);
    });
  }

  /** Runs `task` after every earlier task for the same settlement. */
  private async once(settlementId: string, task: () => Promise<Answered>): Promise<Answered> {
    const before = this.running.get(settlementId) ?? Promise.resolve();
    const mine = before.then(task, task);
    const tail = mine.catch(() => undefined);
    this.running.set(settlementId, tail);
    try {
      return await mine;
    } finally {
      if (this.running.get(settlementId) === tail) this.running.delete(settlementId);
    }
  }

  private async settle(token: string, price: number, orderId: string): Promise<wire.Settlement> {
    // The registry keys a settle by its token (`token:<jti>`): a refused earlier token for this order never blocks
    // this one, and one settlement per order stays the registry's uniqueness.
    try {
      return (await this.client.settle(token, price, orderId)).body;
    } catch (error) {
      if (error instanceof ProblemError && contract.ALREADY_PAID_CODES.includes(error.code)) {
        // Paid before (a retry, a replay, another token for the order): answer from its receipt, which the
        // refusal's facts carry (refusal facts are not yet typed in the API description).
        return error.facts as unknown as wire.Settlement;
      }
      throw error;
    }
  }
}

// Concurrent token and settlement calls coalesced into batches, as the Rust SDK's `coalesce` module does it.
//
// A call is sent at once when fewer than `COALESCE_IN_FLIGHT_MAX` batches of its kind are in flight; otherwise it
// waits, and the calls that waited leave together in the next batch (at most `COALESCE_ITEMS_MAX` items). There is
// no timer: at low load every call leaves alone and at once; under load a call waits at most one batch's round
// trip. The registry runs each item with its single call's meaning, so each item is answered (or rejected) exactly
// as its single call would be: the caller cannot tell but for the throughput.

import { COALESCE_IN_FLIGHT_MAX, COALESCE_ITEMS_MAX } from "./contract.js";
import { BazaarError, ProblemError, TransportError, problem } from "./errors.js";

type Json = Record<string, unknown>;

/** An item's answer: its body, and whether the registry replayed it. */
export interface ItemAnswer {
  body: Json;
  replayed: boolean;
}

/** What sends one batch: `POST path {"items": items}` through a client (its node, credential and failover). */
export type SendBatch = (path: string, items: Json[]) => Promise<{ body: Json }>;

interface Pending {
  item: Json;
  resolve: (answer: ItemAnswer) => void;
  reject: (error: unknown) => void;
}

/** One kind of batch (`POST /v1/tokens/batch` or `/v1/settlements/batch`): its path and what waits for it. */
export class Lane {
  private queue: Pending[] = [];
  private inFlight = 0;

  constructor(readonly path: string) {}

  /** Sends `item` (the single call's body, with its `idempotency_key` if it has one) in the next batch. */
  submit(send: SendBatch, item: Json): Promise<ItemAnswer> {
    return new Promise<ItemAnswer>((resolve, reject) => {
      this.queue.push({ item, resolve, reject });
      const batch = this.take();
      if (batch) void this.send(send, batch);
    });
  }

  /** The next batch, if a slot is free and anything waits (counting it in flight). */
  private take(): Pending[] | undefined {
    if (this.queue.length === 0 || this.inFlight >= COALESCE_IN_FLIGHT_MAX) return undefined;
    this.inFlight += 1;
    return this.queue.splice(0, COALESCE_ITEMS_MAX);
  }

  /** Sends `batch`, answers its items, then sends what waited meanwhile. */
  private async send(send: SendBatch, first: Pending[]): Promise<void> {
    for (let batch: Pending[] | undefined = first; batch; batch = this.take()) {
      try {
        const sent = await send(this.path, batch.map((pending) => pending.item));
        answer(batch, sent.body["results"]);
      } catch (error) {
        refuse(batch, error);
      } finally {
        this.inFlight -= 1;
      }
    }
  }
}

/** Hands each item its own answer (`{status, replayed, body}`) as the single call would have answered. */
function answer(batch: Pending[], results: unknown): void {
  const answers = Array.isArray(results) ? results : [];
  batch.forEach((pending, index) => {
    const result = answers[index] as { status?: unknown; replayed?: unknown; body?: unknown } | undefined;
    if (result === undefined || result === null || typeof result !== "object") {
      pending.reject(new TransportError("the registry answered fewer items than it was sent"));
      return;
    }
    const status = typeof result.status === "number" ? result.status : 500;
    if (status >= 400) {
      pending.reject(problem(status, result.body));
    } else {
      const body = result.body !== null && typeof result.body === "object" ? (result.body as Json) : {};
      pending.resolve({ body, replayed: result.replayed === true });
    }
  });
}

/**
 * The whole batch failed: a refusal of the batch (e.g. unauthenticated) is each item's refusal; a transport failure
 * is each item's transport failure (retry as after one).
 */
function refuse(batch: Pending[], error: unknown): void {
  for (const pending of batch) {
    if (error instanceof ProblemError) pending.reject(problem(error.status, error.body));
    else if (error instanceof BazaarError) pending.reject(new TransportError(`transport (batch): ${error.message}`));
    else pending.reject(new TransportError(`the batch was not sent: ${String(error)}`));
  }
}

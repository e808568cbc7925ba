// Paid routes for Express and for any Fetch-API server (Hono, Bun.serve, Deno.serve, Node with a Fetch adapter).

import * as contract from "./contract.js";
import { type Answered, type Merchant, type Settled, problemAnswer } from "./merchant.js";
import type { WorkReceipt } from "./receipts.js";

/** The few Express types the middleware touches (so the package does not depend on Express). */
interface ExpressRequest {
  get(name: string): string | undefined;
}
interface ExpressResponse {
  statusCode: number;
  locals: Record<string, unknown>;
  getHeader(name: string): unknown;
  setHeader(name: string, value: string): unknown;
  write: (...args: never[]) => boolean;
  end: (...args: never[]) => unknown;
  headersSent: boolean;
}
type Next = (error?: unknown) => void;

function chunkBytes(chunk: unknown, encoding?: unknown): Uint8Array {
  if (chunk === undefined || chunk === null || typeof chunk === "function") return new Uint8Array();
  if (typeof chunk === "string") return Buffer.from(chunk, typeof encoding === "string" ? (encoding as BufferEncoding) : "utf8");
  return new Uint8Array(chunk as ArrayBufferLike);
}

/**
 * Express middleware for one paid route: `app.post("/work", paidExpress(merchant, 300), handler)`. The handler
 * runs at most once per settlement (`res.locals.bazaar` is its `Settled`); its response is kept as the work
 * receipt and sent after it is kept; a retried order is answered from the receipt.
 */
export function paidExpress(merchant: Merchant, priceMinor: number) {
  return (req: ExpressRequest, res: ExpressResponse, next: Next): void => {
    const send = (answer: Answered) => {
      res.statusCode = answer.status;
      for (const [name, value] of Object.entries(answer.headers)) res.setHeader(name, value);
      res.setHeader("content-length", String(answer.body.byteLength));
      (res.end as (body: Uint8Array) => unknown)(answer.body);
    };
    const originalWrite = res.write;
    const originalEnd = res.end;
    const work = (settled: Settled) =>
      new Promise<WorkReceipt | Answered>((resolve) => {
        res.locals["bazaar"] = settled;
        const chunks: Uint8Array[] = [];
        let size = 0;
        const take = (chunk: unknown, encoding?: unknown) => {
          const bytes = chunkBytes(chunk, encoding);
          size += bytes.byteLength;
          chunks.push(bytes);
        };
        (res as { write: unknown }).write = (chunk: unknown, encoding?: unknown) => {
          take(chunk, encoding);
          return true;
        };
        (res as { end: unknown }).end = (chunk?: unknown, encoding?: unknown) => {
          take(chunk, encoding);
          res.write = originalWrite;
          res.end = originalEnd;
          if (size > contract.WORK_RECEIPT_BYTES_MAX) {
            resolve(problemAnswer(500, "work_receipt_too_large", "The paid response exceeded the work-receipt limit."));
            return res;
          }
          const contentType = res.getHeader("content-type");
          resolve({ status: res.statusCode, contentType: contentType === undefined ? null : String(contentType), body: Buffer.concat(chunks) });
          return res;
        };
        next();
      });
    merchant.paid(req.get(contract.PAYMENT_HEADER), priceMinor, work).then(send, (error: unknown) => next(error));
  };
}

/**
 * Wraps a Fetch-API handler into a paid one: `Bun.serve({ fetch: paidFetch(merchant, 300, handler) })`, or a
 * Hono route `app.post("/work", (c) => paidFetch(merchant, 300, handler)(c.req.raw))`. `handler` gets the request
 * and its `Settled`, and runs at most once per settlement.
 */
export function paidFetch(merchant: Merchant, priceMinor: number, handler: (request: Request, settled: Settled) => Promise<Response> | Response) {
  return async (request: Request): Promise<Response> => {
    const answer = await merchant.paid(request.headers.get(contract.PAYMENT_HEADER), priceMinor, async (settled) => {
      const response = await handler(request, settled);
      const body = new Uint8Array(await response.arrayBuffer());
      if (body.byteLength > contract.WORK_RECEIPT_BYTES_MAX) {
        return problemAnswer(500, "work_receipt_too_large", "The paid response exceeded the work-receipt limit.");
      }
      return { status: response.status, contentType: response.headers.get("content-type"), body };
    });
    const body = answer.body.byteLength ? new Uint8Array(answer.body).buffer : null;
    return new Response(body, { status: answer.status, headers: answer.headers });
  };
}

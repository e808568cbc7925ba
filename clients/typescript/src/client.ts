// The buyer's (and anyone's) client over a registry's HTTP API. Every money-moving call carries an idempotency
// key — one the registry derives from the order where it can (tokens, settlements), one this client derives
// otherwise (escrowed purchases) — so every retry is the same request and is charged at most once.

import { Lane } from "./coalesce.js";
import * as contract from "./contract.js";
import { BazaarError, ProblemError, TransportError, problem } from "./errors.js";
import { type Key, inviteProof } from "./keys.js";
import type * as wire from "./wire.js";

export type Json = Record<string, unknown>;

/**
 * A JSON answer, and whether the registry replayed it from an idempotency record. `T` is the answer's wire type
 * (`wire.ts`, generated from the registry's API description); the body is the registry's JSON as it came.
 */
export interface Answer<T = Json> {
  body: T;
  replayed: boolean;
}

/** What a paid call came back with: the merchant's answer, and how it was paid. */
export interface PaidResponse {
  status: number;
  body: Uint8Array;
  headers: Headers;
  token: string;
  attempts: number;
  /** The settlement the merchant's middleware named (`Bazaar-Settlement`). */
  settlement: string | null;
  /** The merchant answered from its work receipt: the work did not run again. */
  replayed: boolean;
}

/** A purchase: a paid call within the threshold, or the escrowed contract above it. */
export type Purchase = { kind: "paid"; paid: PaidResponse } | { kind: "escrowed"; contract: wire.Contract };

export interface TokenOptions {
  registry?: string;
  ttlS?: number;
  idempotencyKey?: string;
}

/** A batch item: the single call's body, with the key the single call would send as a header. */
function keyed(body: Json, idempotencyKey: string | undefined): Json {
  return idempotencyKey === undefined ? body : { ...body, idempotency_key: idempotencyKey };
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

function retryable(error: unknown): boolean {
  if (error instanceof TransportError) return true;
  return error instanceof ProblemError && error.retryable;
}

async function sha256Hex(text: string): Promise<string> {
  const digest = await crypto.subtle.digest("SHA-256", new TextEncoder().encode(text));
  return [...new Uint8Array(digest)].map((b) => b.toString(16).padStart(2, "0")).join("");
}

/**
 * A paid call the merchant refused (an answer of 400 or more with no settlement: the work did not run) as the typed
 * error its problem+json `code` names.
 */
export function merchantRefusal(status: number, body: Uint8Array): ProblemError {
  let data: unknown = null;
  try {
    data = JSON.parse(new TextDecoder().decode(body));
  } catch {
    data = null;
  }
  return problem(status, data);
}

/** A registry's nodes as one client (and its `withCredential` copies) sees them: every URL, and the one in use. */
export class Nodes {
  readonly urls: readonly string[];
  current = 0;

  constructor(urls: readonly string[]) {
    if (urls.length === 0) throw new Error("a client needs at least one registry URL");
    this.urls = urls.map((url) => url.replace(/\/$/, ""));
  }

  /** Moves past `failed`, unless another request already moved on. */
  failOver(failed: number): void {
    if (this.current === failed) this.current = (failed + 1) % this.urls.length;
  }
}

/** Codes of a connection that never reached the node (refused, unresolvable, timed out connecting). */
const NEVER_REACHED = ["ECONNREFUSED", "ENOTFOUND", "EAI_AGAIN", "UND_ERR_CONNECT_TIMEOUT", "EHOSTUNREACH", "ENETUNREACH"];

/** Whether `error` (what `fetch` threw) says the request never reached the node: safe to send anywhere. */
function neverReached(error: unknown): boolean {
  const cause = (error as { cause?: { code?: unknown } } | null)?.cause;
  return typeof cause?.code === "string" && NEVER_REACHED.includes(cause.code);
}

/**
 * A client for one registry, speaking for the holder of `credential` (or for nobody).
 *
 * `verify` is a receipt check, never a work order: a consumed token still verifies as genuine.
 */
export class Client {
  readonly credential: string | undefined;
  private readonly doFetch: typeof fetch;
  private readonly nodes: Nodes;
  /** When coalescing: the lanes tokens and settlements wait in (one pair per credential). */
  private readonly lanes: { tokens: Lane; settlements: Lane } | undefined;

  /**
   * `baseUrl` is one registry URL, or every node's URL of a registry served by several nodes: the client uses one
   * at a time and moves to the next when a node cannot be reached (as the Rust SDK's `Client::with_nodes` does).
   */
  constructor(
    baseUrl: string | readonly string[],
    credential?: string,
    options: { fetch?: typeof fetch; nodes?: Nodes; coalescing?: boolean } = {},
  ) {
    this.nodes = options.nodes ?? new Nodes(typeof baseUrl === "string" ? [baseUrl] : baseUrl);
    this.credential = credential;
    this.doFetch = options.fetch ?? globalThis.fetch.bind(globalThis);
    this.lanes = options.coalescing ? { tokens: new Lane("/v1/tokens/batch"), settlements: new Lane("/v1/settlements/batch") } : undefined;
  }

  /** The node in use. */
  get baseUrl(): string {
    return this.nodes.urls[this.nodes.current]!;
  }

  /** Every node's URL, in the order the client tries them. */
  get nodeUrls(): readonly string[] {
    return this.nodes.urls;
  }

  /**
   * The same registry (its nodes, and the one in use), speaking for another credential. A coalescing client's copy
   * coalesces too, in batches of its own (a batch carries one credential).
   */
  withCredential(credential: string): Client {
    return new Client(this.nodes.urls, credential, { fetch: this.doFetch, nodes: this.nodes, coalescing: this.lanes !== undefined });
  }

  /**
   * This client (same credential and nodes), with concurrent `issueToken` and `settle` calls coalesced into
   * `POST /v1/tokens/batch` and `/v1/settlements/batch` (`coalesce.ts`): each call is answered, or rejected, exactly
   * as alone; under load there are fewer requests.
   */
  coalescing(): Client {
    return new Client(this.nodes.urls, this.credential, { fetch: this.doFetch, nodes: this.nodes, coalescing: true });
  }

  /** `items` as one batch request through this client. */
  private readonly sendBatch = (path: string, items: Json[]) => this.call("POST", path, { items });

  /** One request; a problem+json answer throws the typed `ProblemError`. */
  async call<T = Json>(method: string, path: string, body?: unknown, idempotencyKey?: string): Promise<Answer<T>> {
    const headers: Record<string, string> = {};
    if (this.credential) headers["authorization"] = `Bearer ${this.credential}`;
    if (idempotencyKey !== undefined) headers[contract.IDEMPOTENCY_KEY_HEADER] = idempotencyKey;
    if (body !== undefined) headers["content-type"] = "application/json";
    // Safe to send again to another node whatever happened to the first: reads, keyed requests and the calls the
    // registry keys by their order itself. Anything else moves on only when it never reached the node.
    const resendable = method === "GET" || idempotencyKey !== undefined || contract.NATURALLY_KEYED.includes(path);
    let response: Response;
    for (let tries = this.nodes.urls.length; ; tries--) {
      const at = this.nodes.current;
      try {
        response = await this.doFetch(`${this.nodes.urls[at]}${path}`, {
          method,
          headers,
          body: body === undefined ? undefined : JSON.stringify(body),
          signal: AbortSignal.timeout(contract.REQUEST_TIMEOUT_MS),
        });
        break;
      } catch (error) {
        if (tries > 1 && (neverReached(error) || resendable)) {
          this.nodes.failOver(at);
          continue;
        }
        throw new TransportError(`${method} ${path}: ${String(error)}`);
      }
    }
    const text = await response.text().catch(() => "");
    let data: unknown = null;
    try {
      data = text ? JSON.parse(text) : null;
    } catch {
      data = null;
    }
    if (response.status >= 400) throw problem(response.status, data);
    const replayed = response.headers.get(contract.IDEMPOTENT_REPLAYED_HEADER) !== null;
    const json = data && typeof data === "object" && !Array.isArray(data) ? (data as Json) : { items: data };
    return { body: json as T, replayed };
  }

  /** Sends `call` again while the answer is retryable (transport, 5xx, 409 in flight): same request, same key. */
  async retrying<T>(call: () => Promise<Answer<T>>): Promise<Answer<T>> {
    for (let attempt = 1; ; attempt++) {
      try {
        return await call();
      } catch (error) {
        if (!retryable(error) || attempt >= contract.RETRY_ATTEMPTS_MAX) throw error;
      }
      await sleep(contract.RETRY_BASE_MS * 2 ** (attempt - 1));
    }
  }

  private async get<T = Json>(path: string): Promise<T> {
    return (await this.call<T>("GET", path)).body;
  }

  /** The registry's signed card: its DID, fee, escrow threshold, limits. */
  wellKnown(): Promise<Json> {
    return this.get("/.well-known/bazaar");
  }

  me(): Promise<wire.Me> {
    return this.get("/v1/me");
  }

  /** This member's balance in minor units of the network unit. */
  async balance(): Promise<number> {
    const value = (await this.me())["balance_minor"];
    return typeof value === "number" ? value : 0;
  }

  /** Operator: register an owner (a person) by her public key. The answer's `credential` is shown once. */
  async createOwner(key: Key, handle: string): Promise<wire.Enrolled> {
    return (await this.call<wire.Enrolled>("POST", "/v1/owners", { public_key: key.publicKeyHex, handle })).body;
  }

  /** Operator: create `amountMinor` units in an owner's account (`owner` is her DID). */
  async mint(owner: string, amountMinor: number, idempotencyKey: string): Promise<wire.Minted> {
    return (await this.call<wire.Minted>("POST", "/v1/mint", { owner, amount_minor: amountMinor }, idempotencyKey)).body;
  }

  /** Owner: a single-use invite code (`inv_…`, 24 h) to hand to one new agent. */
  async issueInvite(): Promise<string> {
    return (await this.call<wire.Invite>("POST", "/v1/invites")).body.invite_code;
  }

  /**
   * An agent's enrolment, from any client (no credential needed): redeem `inviteCode` with the agent's own `key`
   * (signing `bazaar-invite-v1\n<code>\n<handle>`), then rotate the enrollment credential the invite gave — the
   * agent's first act. The answer (`id`, `handle`, `owner`) carries the rotated `credential`, which nobody else has
   * seen.
   */
  async redeemInvite(inviteCode: string, key: Key, handle: string): Promise<wire.Enrolled> {
    const body = { invite_code: inviteCode, public_key: key.publicKeyHex, handle, proof: inviteProof(key, inviteCode, handle) };
    const anyone = new Client(this.nodes.urls, undefined, { fetch: this.doFetch, nodes: this.nodes });
    const joined = (await anyone.call<wire.Enrolled>("POST", "/v1/agents", body)).body;
    joined.credential = await this.withCredential(joined.credential).rotateCredential();
    return joined;
  }

  /** Replaces this client's credential with a new one (returned); the old one stops working at once. */
  async rotateCredential(): Promise<string> {
    return (await this.call<wire.Rotated>("POST", "/v1/credentials/rotate")).body.credential;
  }

  /** Revokes this client's credential. */
  async revokeCredential(): Promise<wire.Revoked> {
    return (await this.call<wire.Revoked>("POST", "/v1/credentials/revoke")).body;
  }

  /** Owner: move units from the owner's account to the agent's. */
  async fund(agent: string, amountMinor: number, idempotencyKey: string): Promise<wire.Funded> {
    return (await this.call<wire.Funded>("POST", `/v1/agents/${agent}/fund`, { amount_minor: amountMinor }, idempotencyKey)).body;
  }

  /** Owner: the agent's ceilings in minor units. */
  async setBudget(agent: string, perCall: number, perDay: number, total: number): Promise<wire.Budget> {
    const body = { per_call_max_minor: perCall, per_day_max_minor: perDay, total_max_minor: total };
    return (await this.call<wire.Budget>("PUT", `/v1/agents/${agent}/budget`, body)).body;
  }

  /** Buyer: a payment token for one order. Asking again for the same (merchant, order) gives the same token. */
  issueToken(merchant: string, maxAmountMinor: number, orderId: string, resource: string, options: TokenOptions = {}): Promise<Answer<wire.TokenIssued>> {
    const body: Json = { merchant, max_amount_minor: maxAmountMinor, order_id: orderId, resource };
    if (options.registry !== undefined) body["registry"] = options.registry;
    if (options.ttlS !== undefined) body["ttl_s"] = options.ttlS;
    if (this.lanes) return this.lanes.tokens.submit(this.sendBatch, keyed(body, options.idempotencyKey)) as Promise<Answer<wire.TokenIssued>>;
    return this.call<wire.TokenIssued>("POST", "/v1/tokens", body, options.idempotencyKey);
  }

  /**
   * A receipt check, never a work order: whether the token is genuine and its state (a settled token still says
   * `genuine: true`). Only `settle` makes the money real.
   */
  async verify(token: string): Promise<wire.TokenCheck> {
    return (await this.call<wire.TokenCheck>("POST", "/v1/tokens/verify", { token })).body;
  }

  /** Merchant: settle exactly once. Without a key the registry derives one from the order. */
  settle(token: string, amountMinor: number, orderId: string, idempotencyKey?: string): Promise<Answer<wire.SettlementReceipt>> {
    const body: Json = { token, amount_minor: amountMinor, order_id: orderId };
    if (this.lanes) return this.lanes.settlements.submit(this.sendBatch, keyed(body, idempotencyKey)) as Promise<Answer<wire.SettlementReceipt>>;
    return this.call<wire.SettlementReceipt>("POST", "/v1/settlements", body, idempotencyKey);
  }

  /** Buyer (or its owner): void an unsettled token and release its hold. */
  async void(jti: string): Promise<wire.Voided> {
    return (await this.call<wire.Voided>("POST", `/v1/tokens/${jti}/void`)).body;
  }

  /**
   * Buyer: get (or get again) the order's token and call the paid `url` with it, retrying transport errors, 5xx
   * and 409 with the same token. The merchant settles once and keeps a work receipt, so every retry is safe.
   *
   * A refusal at the merchant throws the typed `ProblemError` its code names (e.g. `TokenTooSmall` with the route's
   * `priceMinor`); where the token is of no more use to this call (`contract.VOID_ON_CODES`: the merchant's own
   * credential refused, the token too small, for another merchant or order) it is voided first, releasing its hold.
   * Asking again for the order replays that token: a replay is checked with `verify`, and one voided, expired or
   * about to expire is renewed under `renew:<jti>` (a settled one is used as it is), so the order can still be paid
   * once.
   */
  async pay(
    url: string,
    merchant: string,
    maxAmountMinor: number,
    orderId: string,
    options: { registry?: string; method?: string; body?: BodyInit; headers?: Record<string, string> } = {},
  ): Promise<PaidResponse> {
    const issued = await this.orderToken(merchant, maxAmountMinor, orderId, url, { registry: options.registry });
    const paymentToken = String(issued.body["token"] ?? "");
    for (let attempt = 1; ; attempt++) {
      let response: Response | undefined;
      let failure: unknown;
      try {
        response = await this.doFetch(url, {
          method: options.method ?? "POST",
          headers: { ...(options.headers ?? {}), [contract.PAYMENT_HEADER]: paymentToken },
          body: options.body,
        });
      } catch (error) {
        failure = error;
      }
      const refused = response !== undefined && response.status >= 400 && response.headers.get(contract.SETTLEMENT_HEADER) === null;
      const body = response === undefined ? new Uint8Array() : new Uint8Array(await response.arrayBuffer().catch(() => new ArrayBuffer(0)));
      const refusal = refused && response !== undefined ? merchantRefusal(response.status, body) : undefined;
      const final = refusal !== undefined && !refusal.retryable;
      const retry = !final && (response === undefined || response.status >= 500 || response.status === 409);
      if (!retry || attempt >= contract.RETRY_ATTEMPTS_MAX) {
        if (response === undefined) throw new TransportError(`${url}: ${String(failure)}`);
        if (refusal !== undefined) {
          if (contract.VOID_ON_CODES.includes(refusal.code)) await this.voidQuietly(String(issued.body["jti"] ?? ""));
          throw refusal;
        }
        return {
          status: response.status,
          body,
          headers: response.headers,
          token: paymentToken,
          attempts: attempt,
          settlement: response.headers.get(contract.SETTLEMENT_HEADER),
          replayed: response.headers.get(contract.WORK_RECEIPT_HEADER) !== null,
        };
      }
      await sleep(contract.RETRY_BASE_MS * 2 ** (attempt - 1));
    }
  }

  /**
   * The order's token, usable: asked for under the order's derived key, which replays the order's first token even
   * once it is dead (expired, or voided by a merchant's refusal). A replay — only a replay — is checked (`usable`);
   * a dead one is asked for again under a key naming it (`renew:<jti>`), and that answer checked the same way if it
   * is a replay too: one key per dead token, so every retry of the order finds the same chain
   * (`clients/conformance/contract.json`, `buyer.renew_rule`).
   */
  async orderToken(merchant: string, maxAmountMinor: number, orderId: string, resource: string, options: { registry?: string } = {}): Promise<Answer<wire.TokenIssued>> {
    let issued = await this.retrying(() => this.issueToken(merchant, maxAmountMinor, orderId, resource, options));
    while (issued.replayed && !(await this.usable(issued.body))) {
      const jti = issued.body.jti;
      const idempotencyKey = `${contract.RENEW_KEY_PREFIX}${jti}`;
      issued = await this.retrying(() => this.issueToken(merchant, maxAmountMinor, orderId, resource, { ...options, idempotencyKey }));
      if (issued.body.jti === jti) break;
    }
    return issued;
  }

  /**
   * Whether a replayed token can still pay: its state by `verify` — a receipt check — settled (used as it is: the
   * merchant answers the order from its work receipt) or open and not expiring within `TOKEN_RENEW_MARGIN_MS`.
   * Voided or expired is not; if verify cannot answer, the expiry alone decides.
   */
  private async usable(issued: wire.TokenIssued): Promise<boolean> {
    let state: unknown;
    try {
      const check = (await this.retrying(() => this.call<wire.TokenCheck>("POST", "/v1/tokens/verify", { token: issued.token }))).body;
      state = "state" in check ? check.state : undefined;
    } catch (error) {
      if (!(error instanceof BazaarError)) throw error;
    }
    if (state === "settled") return true;
    if (state === "voided" || state === "expired") return false;
    return issued.expires_at_ms > Date.now() + contract.TOKEN_RENEW_MARGIN_MS;
  }

  /**
   * Voids a token this call can no longer use, so its hold is released now rather than when it expires. A failure
   * here (the token settled or expired meanwhile, the registry unreachable) leaves it to expire.
   */
  private async voidQuietly(jti: string): Promise<void> {
    if (!jti) return;
    try {
      await this.void(jti);
    } catch (error) {
      if (!(error instanceof BazaarError)) throw error;
    }
  }

  /** Buyer: open and fund an escrowed contract; `milestones` are [amount, description, dueAtMs]. */
  async createContract(
    seller: string,
    milestones: Array<[number, string, number]>,
    terms: string,
    idempotencyKey: string,
    options: { arbiter?: string; reviewWindowS?: number } = {},
  ): Promise<Answer<wire.Contract>> {
    const body = {
      seller,
      arbiter: options.arbiter ?? null,
      milestones: milestones.map(([amount, description, due]) => ({ amount_minor: amount, description, due_at_ms: due })),
      terms_sha256: await sha256Hex(terms),
      review_window_s: options.reviewWindowS ?? null,
    };
    return this.call<wire.Contract>("POST", "/v1/contracts", body, idempotencyKey);
  }

  contract(id: string): Promise<wire.Contract> {
    return this.get(`/v1/contracts/${id}`);
  }

  /**
   * Buys at `priceMinor`: a paid call within the registry's escrow threshold, else an escrowed contract with one
   * milestone due a week after the end of today (UTC), under a key derived from the order — a retry the same day
   * finds the same contract.
   */
  async purchase(url: string, merchant: string, priceMinor: number, orderId: string): Promise<Purchase> {
    const card = await this.wellKnown();
    const threshold = card["escrow_threshold_minor"];
    if (typeof threshold === "number" && priceMinor <= threshold) {
      return { kind: "paid", paid: await this.pay(url, merchant, priceMinor, orderId) };
    }
    const dayMs = 86_400_000;
    const due = (Math.floor(Date.now() / dayMs) + 1) * dayMs + contract.ESCROW_DUE_S * 1000;
    const description = `order ${orderId}: ${url}`;
    const terms = `bazaar-order-v1\n${merchant}\n${orderId}\n${url}\n${priceMinor}`;
    const key = `order:${merchant}:${orderId}`;
    const answer = await this.retrying(() => this.createContract(merchant, [[priceMinor, description, due]], terms, key));
    return { kind: "escrowed", contract: answer.body };
  }
}

// The TypeScript SDK's conformance driver (clients/conformance/scenario.json).
//
//   node driver.mjs WORLD.json SCENARIO.json
//
// Serves the SDK's Express merchant middleware on 127.0.0.1 for the world's price at /work, runs each step of the
// scenario with the SDK (from its built dist/), and prints one JSON line: {"sdk", "steps": [{"name", "observed"}]}.
import { readFileSync, mkdtempSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import express from "express";
import * as bazaar from "../dist/index.js";

const [worldFile, scenarioFile] = process.argv.slice(2);
const world = JSON.parse(readFileSync(worldFile, "utf8"));
const scenario = JSON.parse(readFileSync(scenarioFile, "utf8"));
const { contract } = bazaar;

const buyer = new bazaar.Client(world.registry, world.buyer);
const clients = {
  buyer,
  poor_buyer: buyer.withCredential(world.poor_buyer),
  merchant: buyer.withCredential(world.merchant),
  other_merchant: buyer.withCredential(world.other_merchant),
  nobody: buyer.withCredential("not-a-credential"),
};

// The merchant: Express behind paidExpress, counting its paid work; faults fire once per order.
let runs = 0;
const faults = new Map();
const fired = new Set();
const fault = (point, order) => {
  if (faults.get(order) === point && !fired.has(order)) {
    fired.add(order);
    return true;
  }
  return false;
};
const receipts = new bazaar.SqliteReceiptStore(join(mkdtempSync(join(tmpdir(), "bazaar-ts-")), "receipts.db"));
const revocableReceipts = new bazaar.SqliteReceiptStore(join(mkdtempSync(join(tmpdir(), "bazaar-ts-")), "receipts.db"));

/** Express behind paidExpress for `merchant`, charging `shop.price` (the world's unless a step says); its URL. */
async function serveShop(merchant) {
  const app = express();
  const byPrice = new Map();
  const charging = (req, res, next) => {
    if (!byPrice.has(shop.price)) byPrice.set(shop.price, bazaar.paidExpress(merchant, shop.price));
    return byPrice.get(shop.price)(req, res, next);
  };
  app.post("/work", charging, (_req, res) => {
    runs += 1;
    const settled = res.locals.bazaar;
    res.json({ order: settled.orderId, run: runs, settlement: settled.settlementId });
  });
  const server = await new Promise((resolve) => {
    const listening = app.listen(0, "127.0.0.1", () => resolve(listening));
  });
  const shop = { server, url: `http://127.0.0.1:${server.address().port}/work`, price: world.price_minor };
  return shop;
}
const shop = await serveShop(new bazaar.Merchant(clients.merchant, receipts, { fault }));
const revocable = await serveShop(new bazaar.Merchant(buyer.withCredential(world.revocable), revocableReceipts));
const shopUrl = shop.url;

const refusal = (error) => {
  if (error instanceof bazaar.ProblemError) {
    return { status: error.status, code: error.code, error_class: error.constructor.name, price_minor: error.priceMinor ?? null };
  }
  throw error;
};

/** What the buyer's registry holds on its budget, and its balance. */
const purse = async () => {
  const me = await buyer.me();
  return { held: me.held_minor, balance: Number(me.balance_minor ?? 0) };
};

const MONEY_ROUTES = ["/v1/tokens", "/v1/tokens/batch", "/v1/settlements", "/v1/settlements/batch"];

/** Requests the registry has answered on each money route, from its /metrics. */
async function requestsServed() {
  const text = await (await fetch(`${world.registry.replace(/\/$/, "")}/metrics`)).text();
  const counts = Object.fromEntries(MONEY_ROUTES.map((route) => [route, 0]));
  for (const line of text.split("\n")) {
    const match = /^bazaar_http_requests_total\{route="([^"]+)",status="\d+"\} (\S+)$/.exec(line);
    if (match && match[1] in counts) counts[match[1]] += Number(match[2]);
  }
  return counts;
}

/** The scenario's `batch` op: tokens, settlements and replays all at once from coalescing clients. */
async function batch(args) {
  const orders = Array.from({ length: args.orders }, (_, i) => `${args.prefix}${i + 1}`);
  const all = [...orders, `${args.prefix}over`];
  const before = await requestsServed();
  const purseBefore = await purse();
  const buying = buyer.coalescing();
  const selling = clients.merchant.coalescing();
  const issued = await Promise.allSettled(all.map((order) => buying.issueToken(world.merchant_did, price, order, shopUrl)));
  const ok = issued.filter((a) => a.status === "fulfilled").map((a) => a.value);
  const tokens = issued.map((a) => (a.status === "fulfilled" ? a.value.body.token : ""));
  const last = all.length - 1;
  const settled = await Promise.allSettled(all.map((order, at) => selling.settle(tokens[at], at === last ? price + 1 : price, order)));
  const again = await Promise.allSettled(orders.slice(0, 2).map((order, at) => selling.settle(tokens[at], price, order)));
  if (issued[last].status === "fulfilled") await buyer.void(issued[last].value.body.jti);
  const purseAfter = await purse();
  const after = await requestsServed();
  const calls = issued.length + settled.length + again.length;
  const batches = MONEY_ROUTES.filter((r) => r.endsWith("/batch")).reduce((n, r) => n + after[r] - before[r], 0);
  return {
    issued: ok.length,
    distinct_tokens: new Set(ok.map((a) => a.body.jti)).size,
    settled: settled.slice(0, last).filter((a) => a.status === "fulfilled").length,
    refused_code: settled[last].status === "rejected" ? settled[last].reason.code ?? null : null,
    again_replayed: again.every((second, at) => second.status === "fulfilled" && settled[at].status === "fulfilled"
      && second.value.replayed && second.value.body.settlement_id === settled[at].value.body.settlement_id),
    charged_minor: purseBefore.balance - purseAfter.balance,
    held_released: purseAfter.held === purseBefore.held,
    single_calls: ["/v1/tokens", "/v1/settlements"].reduce((n, r) => n + after[r] - before[r], 0),
    batched: batches > 0 && batches < calls,
  };
}

/** Which credentials a merchant refuses to be made with, and the code it says. */
function merchantStart(credentials) {
  let code = null;
  const refused = credentials.map((given) => {
    const credential = given === "@merchant" ? world.merchant : (given ?? undefined);
    try {
      new bazaar.Merchant(new bazaar.Client(world.registry, credential), new bazaar.MemoryReceiptStore());
      return false;
    } catch (error) {
      if (!(error instanceof bazaar.MerchantMisconfigured)) throw error;
      code ??= error.code;
      return true;
    }
  });
  return { refused, code };
}

/** A key made here, saved and read back; the world's invite redeemed with it and rotated; the fixed key. */
async function enrol() {
  const key = bazaar.generateKey();
  const keyFile = join(mkdtempSync(join(tmpdir(), "bazaar-ts-key-")), "joiner.key");
  key.save(keyFile);
  const joined = await new bazaar.Client(world.registry).redeemInvite(world.invite, key, world.joiner_handle);
  const me = await new bazaar.Client(world.registry, String(joined.credential)).me();
  const vector = world.key_vector;
  const fixed = bazaar.Key.fromSeed(Buffer.from(vector.seed_hex, "hex"));
  const proof = bazaar.inviteProof(fixed, vector.invite_code, vector.handle);
  return {
    enrolled_as_key: me.member?.id === key.did,
    kind: me.member?.kind,
    owner_is_inviter: me.member?.owner === world.invite_owner,
    credential_rotated: String(joined.credential).startsWith("bzc_"),
    key_file_mode: (statSync(keyFile).mode & 0o777).toString(8),
    key_file_round_trips: bazaar.Key.load(keyFile).did === key.did,
    same_key_proof_and_did_as_rust: fixed.did === vector.did && fixed.publicKeyHex === vector.public_key_hex && proof === vector.proof,
  };
}

async function raw(payment) {
  const headers = typeof payment === "string" ? { [contract.PAYMENT_HEADER]: payment } : {};
  const response = await fetch(shopUrl, { method: "POST", headers });
  const observed = { status: response.status, replayed: response.headers.get(contract.WORK_RECEIPT_HEADER) !== null };
  const body = await response.json().catch(() => ({}));
  if (response.status >= 400) observed.code = body.code;
  return observed;
}

const merchantDid = world.merchant_did;
const price = world.price_minor;
let lastToken = "";
const contracts = new Map();
const steps = [];
for (const step of scenario.steps) {
  const args = step.args ?? {};
  let observed;
  try {
    switch (step.op) {
      case "constants":
        observed = {
          headers: {
            payment: contract.PAYMENT_HEADER,
            settlement: contract.SETTLEMENT_HEADER,
            work_receipt: contract.WORK_RECEIPT_HEADER,
            idempotency_key: contract.IDEMPOTENCY_KEY_HEADER,
            idempotent_replayed: contract.IDEMPOTENT_REPLAYED_HEADER,
            x402_payment_required: contract.X402_PAYMENT_REQUIRED,
            x402_payment_signature: contract.X402_PAYMENT_SIGNATURE,
            x402_payment_response: contract.X402_PAYMENT_RESPONSE,
          },
          retry_attempts_max: contract.RETRY_ATTEMPTS_MAX,
          retry_base_ms: contract.RETRY_BASE_MS,
          token_renew_margin_ms: contract.TOKEN_RENEW_MARGIN_MS,
          work_receipt_bytes_max: contract.WORK_RECEIPT_BYTES_MAX,
          work_receipt_retention_s: contract.WORK_RECEIPT_RETENTION_S,
          work_receipt_prune_every: contract.WORK_RECEIPT_PRUNE_EVERY,
          escrow_due_s: contract.ESCROW_DUE_S,
          merchant_unauthenticated: [contract.MERCHANT_UNAUTHENTICATED_STATUS, contract.MERCHANT_UNAUTHENTICATED],
          merchant_credential_invalid: contract.MERCHANT_CREDENTIAL_INVALID,
          void_on_codes: [...contract.VOID_ON_CODES],
          coalesce_items_max: contract.COALESCE_ITEMS_MAX,
          coalesce_in_flight_max: contract.COALESCE_IN_FLIGHT_MAX,
        };
        break;
      case "pay": {
        if (args.fault) faults.set(args.order, args.fault);
        const to = args.shop === "revocable" ? revocable : shop;
        const merchant = world[args.to ?? (to === shop ? "merchant_did" : "revocable_did")];
        to.price = args.price ?? price;
        const before = await purse();
        try {
          const paid = await buyer.pay(to.url, merchant, args.amount ?? price, args.order);
          observed = { status: paid.status, replayed: paid.replayed, settled: paid.settlement !== null, retried: paid.attempts > 1, raised: false, same_token: paid.token === lastToken };
          lastToken = paid.token;
        } catch (error) {
          observed = { ...refusal(error), raised: true };
        } finally {
          to.price = price;
        }
        const after = await purse();
        observed.held_released = after.held === before.held;
        observed.charged_minor = before.balance - after.balance;
        break;
      }
      case "merchant_start":
        observed = merchantStart(args.credentials);
        break;
      case "enrol":
        observed = await enrol();
        break;
      case "revoke_merchant":
        await buyer.withCredential(world.revocable).revokeCredential();
        observed = { status: 200 };
        break;
      case "verify_last": {
        const verified = await buyer.verify(lastToken);
        observed = { genuine: verified.genuine, state: verified.state, work_order: verified.work_order };
        break;
      }
      case "settle_last": {
        const claims = bazaar.claimsUnverified(lastToken) ?? {};
        await clients.merchant.settle(lastToken, price, String(claims.ord), args.key);
        observed = { status: 200 };
        break;
      }
      case "replay_last":
        observed = await raw(lastToken);
        break;
      case "merchant_raw":
        observed = await raw(args.payment);
        break;
      case "merchant_tampered": {
        const issued = await buyer.issueToken(merchantDid, price, args.order, shopUrl);
        const token = String(issued.body.token);
        const at = token.lastIndexOf(".");
        const signature = token.slice(at + 1);
        observed = await raw(`${token.slice(0, at)}.${signature[0] === "A" ? "B" : "A"}${signature.slice(1)}`);
        break;
      }
      case "purchase": {
        const bought = await buyer.purchase(shopUrl, merchantDid, world.escrow_price_minor, args.order);
        if (bought.kind !== "escrowed") throw new Error("expected an escrowed purchase");
        const id = String(bought.contract.id);
        observed = { escrowed: true, state: bought.contract.state, same_contract: contracts.get(args.order) === id };
        if (!contracts.has(args.order)) contracts.set(args.order, id);
        break;
      }
      case "token": {
        const who = clients[args.as ?? "buyer"];
        const amount = args.amount === "escrow" ? world.escrow_price_minor : args.amount;
        await who.issueToken(merchantDid, amount, args.order, shopUrl);
        observed = { status: 200 };
        break;
      }
      case "token_then_settle": {
        const issued = await buyer.issueToken(merchantDid, args.amount, args.order, shopUrl);
        if (args.void_first) await buyer.void(String(issued.body.jti));
        await clients[args.by ?? "merchant"].settle(String(issued.body.token), args.settle, args.settle_order ?? args.order);
        observed = { status: 200 };
        break;
      }
      case "me":
        await clients[args.as].me();
        observed = { status: 200 };
        break;
      case "token_twice_with_key":
        await buyer.issueToken(merchantDid, price, "k-1", shopUrl, { idempotencyKey: args.key });
        await buyer.issueToken(merchantDid, price, "k-2", shopUrl, { idempotencyKey: args.key });
        observed = { status: 200 };
        break;
      case "expired_settle": {
        const issued = await buyer.issueToken(merchantDid, price, args.order, shopUrl, { ttlS: args.ttl_s });
        await new Promise((resolve) => setTimeout(resolve, args.ttl_s * 1000 + 1500));
        await clients.merchant.settle(String(issued.body.token), price, args.order);
        observed = { status: 200 };
        break;
      }
      case "balance":
        observed = { balance_minor: await buyer.balance() };
        break;
      case "failover": {
        const spread = new bazaar.Client([world.dead_node, world.registry], world.buyer);
        await spread.me();
        const paid = await spread.pay(shop.url, merchantDid, price, args.order);
        observed = { read: 200, status: paid.status, settled: paid.settlement !== null, moved_on: spread.baseUrl === world.registry.replace(/\/$/, "") };
        break;
      }
      case "batch":
        observed = await batch(args);
        break;
      default:
        observed = { unsupported_op: step.op };
    }
  } catch (error) {
    observed = refusal(error);
  }
  observed.work_runs = runs;
  steps.push({ name: step.name, observed });
}
shop.server.close();
revocable.server.close();
receipts.close();
revocableReceipts.close();
console.log(JSON.stringify({ sdk: typeof Bun === "undefined" ? "typescript" : "typescript-on-bun", steps }));
process.exit(0);

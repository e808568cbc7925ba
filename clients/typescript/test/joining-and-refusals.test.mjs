// Keys and enrolment (the invite statement's exact bytes, the key file), the merchant's refusal to start on a
// credential it cannot use, and refusals at the merchant that name the party at fault: the buyer throws the typed
// error (with the route's price where the amount is the problem) and voids a token it can no longer use.
// Run after the build: `node --test test/`. Against a real registry, the conformance scenario
// (clients/conformance/scenario.json) holds the same behaviour for all three SDKs.
import { test } from "node:test";
import assert from "node:assert/strict";
import { createPublicKey, verify } from "node:crypto";
import { mkdtempSync, readFileSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import * as bazaar from "../dist/index.js";

const REGISTRY = "http://registry.test";
const SHOP = "http://shop.test/translate";
const PRICE = 300;
const BASE58 = "123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz";

function b58decode(text) {
  let n = 0n;
  for (const c of text) n = n * 58n + BigInt(BASE58.indexOf(c));
  return Buffer.from(n.toString(16).padStart(2, "0").replace(/^(.(..)*)$/, "0$1"), "hex");
}

const tokenFor = (order) => `apt_${Buffer.from(JSON.stringify({ ord: order, jti: "tok_1" })).toString("base64url")}.c2ln`;

const problem = (status, code, facts) =>
  new Response(JSON.stringify({ status, code, detail: code, ...(facts ? { facts } : {}) }), {
    status,
    headers: { "content-type": "application/problem+json" },
  });

test("the invite statement is the registry's bytes", () => {
  assert.equal(new TextDecoder().decode(bazaar.inviteStatement("inv_abc", "menu-bot")), "bazaar-invite-v1\ninv_abc\nmenu-bot");
});

test("the proof is an unpadded base64url signature the public key verifies", () => {
  const key = bazaar.Key.fromSeed(new Uint8Array(32).fill(7));
  const proof = bazaar.inviteProof(key, "inv_abc", "menu-bot");
  assert.doesNotMatch(proof, /[=+/]/);
  const spki = Buffer.concat([Buffer.from("302a300506032b6570032100", "hex"), Buffer.from(key.publicKey)]);
  const publicKey = createPublicKey({ key: spki, format: "der", type: "spki" });
  assert.ok(verify(null, Buffer.from("bazaar-invite-v1\ninv_abc\nmenu-bot"), publicKey, Buffer.from(proof, "base64url")));
});

test("the did is the multicodec public key in base58btc", () => {
  const key = bazaar.generateKey();
  assert.match(key.did, /^did:key:z6Mk/);
  assert.deepEqual(b58decode(key.did.slice("did:key:z".length)), Buffer.concat([Buffer.from([0xed, 0x01]), Buffer.from(key.publicKey)]));
});

test("the key file is hex, 0600, never overwritten, and reads back", (t) => {
  const dir = mkdtempSync(join(tmpdir(), "bazaar-key-"));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  const path = join(dir, "agent.key");
  const key = bazaar.generateKey();
  key.save(path);
  assert.equal(statSync(path).mode & 0o777, 0o600);
  assert.equal(readFileSync(path, "utf8"), Buffer.from(key.seed).toString("hex"));
  assert.equal(bazaar.Key.load(path).did, key.did);
  assert.throws(() => bazaar.generateKey().save(path), /EEXIST/);
});

test("a merchant refuses to start on a credential it cannot use, and says why", () => {
  const refused = [undefined, "", "   ", "MERCHANT_CREDENTIAL", "<merchant credential>", "${MERCHANT_CREDENTIAL}", "{{credential}}", "bzi_not-rotated", "bzc_abc\n"];
  for (const credential of refused) {
    assert.throws(
      () => new bazaar.Merchant(new bazaar.Client(REGISTRY, credential), new bazaar.MemoryReceiptStore()),
      (error) => error instanceof bazaar.MerchantMisconfigured && error.code === "merchant_credential_invalid" && /merchant needs its own registry credential/.test(error.message),
      String(credential),
    );
  }
  for (const credential of ["bzc_Zm9vYmFy", "op-secret", "12345"]) assert.equal(bazaar.contract.merchantCredentialProblem(credential), undefined);
});

/** Pays through a mock registry (one token, voidable) and a mock merchant answering `shop`; the outcome and calls. */
async function pay(shop) {
  const calls = [];
  const fetch = async (input, init = {}) => {
    const url = new URL(String(input));
    calls.push(`${init.method ?? "GET"} ${url.pathname}`);
    if (url.href === SHOP) return shop();
    if (url.pathname === "/v1/tokens") return Response.json({ token: tokenFor("o-1"), jti: "tok_1", expires_at_ms: 2 ** 52 }, { status: 201 });
    if (url.pathname === "/v1/tokens/tok_1/void") return Response.json({ jti: "tok_1", state: "voided" });
    return problem(404, "not_found");
  };
  const buyer = new bazaar.Client(REGISTRY, "bzc_buyer", { fetch });
  try {
    return { outcome: await buyer.pay(SHOP, "did:key:zShop", 200, "o-1"), calls };
  } catch (error) {
    return { outcome: error, calls };
  }
}

test("an under-priced token throws TokenTooSmall with the price, and is voided", async () => {
  const facts = { amount_minor: PRICE, max_amount_minor: 200, price_minor: PRICE };
  const { outcome, calls } = await pay(() => problem(402, "amount_exceeds_token", facts));
  assert.ok(outcome instanceof bazaar.TokenTooSmall, String(outcome));
  assert.deepEqual([outcome.priceMinor, outcome.maxAmountMinor, outcome.status], [PRICE, 200, 402]);
  assert.ok(calls.includes("POST /v1/tokens/tok_1/void"));
});

test("a merchant whose credential is refused is named once, and the token voided", async () => {
  const { outcome, calls } = await pay(() => problem(503, "merchant_unauthenticated"));
  assert.ok(outcome instanceof bazaar.MerchantUnauthenticated, String(outcome));
  assert.equal(outcome.retryable, false);
  assert.equal(calls.filter((c) => c === "POST /translate").length, 1, "final: not retried");
  assert.ok(calls.includes("POST /v1/tokens/tok_1/void"));
});

test("a token for another merchant throws TokenRefused and is voided; a consumed one is not voided", async () => {
  const audience = await pay(() => problem(402, "not_audience"));
  assert.ok(audience.outcome instanceof bazaar.TokenRefused && !(audience.outcome instanceof bazaar.TokenTooSmall));
  assert.ok(audience.calls.includes("POST /v1/tokens/tok_1/void"));
  const voided = await pay(() => problem(402, "token_voided"));
  assert.ok(voided.outcome instanceof bazaar.TokenRefused);
  assert.ok(!voided.calls.includes("POST /v1/tokens/tok_1/void"));
});

test("the paid work's own error answer is returned, not thrown", async () => {
  const { outcome } = await pay(() => Response.json({ error: "no such dish" }, { status: 404, headers: { [bazaar.contract.SETTLEMENT_HEADER]: "stl_1" } }));
  assert.deepEqual([outcome.status, outcome.settlement], [404, "stl_1"]);
});

/** One paid request at a Merchant whose registry answers `registry`; the answer's status and body. */
async function answer(registry) {
  const merchant = new bazaar.Merchant(new bazaar.Client(REGISTRY, "bzc_merchant", { fetch: async (input) => registry(new URL(String(input))) }), new bazaar.MemoryReceiptStore());
  const answered = await merchant.paid(tokenFor("o-1"), PRICE, async () => assert.fail("the work must not run"));
  return [answered.status, JSON.parse(new TextDecoder().decode(answered.body))];
}

test("a refused merchant credential is merchant_unauthenticated", async () => {
  const [status, body] = await answer(() => problem(401, "unauthenticated"));
  assert.deepEqual([status, body.code], [503, "merchant_unauthenticated"]);
  assert.match(body.detail, /merchant must fix/);
});

test("an amount refusal carries the route's price and the registry's facts", async () => {
  const [status, body] = await answer((url) =>
    url.pathname === "/v1/tokens/verify" ? Response.json({ genuine: true, state: "open" }) : problem(422, "amount_exceeds_token", { amount_minor: PRICE, max_amount_minor: 200 }),
  );
  assert.deepEqual([status, body.code], [402, "amount_exceeds_token"]);
  assert.deepEqual(body.facts, { amount_minor: PRICE, max_amount_minor: 200, price_minor: PRICE });
  assert.match(body.detail, new RegExp(`costs ${PRICE}`));
});

/** Pays with the order's first token replayed (or fresh) in `state`; renewal under `renew:tok_1` gives tok_2. */
async function payReplayed({ replayed, state, expiresAtMs = 2 ** 52 }) {
  const calls = [];
  const token = (jti) => `apt_${Buffer.from(JSON.stringify({ ord: "o-1", jti })).toString("base64url")}.c2ln`;
  const fetch = async (input, init = {}) => {
    const url = new URL(String(input));
    const key = init.headers?.[bazaar.contract.IDEMPOTENCY_KEY_HEADER];
    calls.push(`${init.method ?? "GET"} ${url.pathname}${key ? ` ${key}` : ""}`);
    if (url.href === SHOP) {
      return Response.json({ paid: true }, { headers: { [bazaar.contract.SETTLEMENT_HEADER]: "stl_1" } });
    }
    if (url.pathname === "/v1/tokens" && key === "renew:tok_1") {
      return Response.json({ token: token("tok_2"), jti: "tok_2", expires_at_ms: 2 ** 52 }, { status: 201 });
    }
    if (url.pathname === "/v1/tokens") {
      const headers = replayed ? { [bazaar.contract.IDEMPOTENT_REPLAYED_HEADER]: "true" } : {};
      return Response.json({ token: token("tok_1"), jti: "tok_1", expires_at_ms: expiresAtMs }, { status: 201, headers });
    }
    if (url.pathname === "/v1/tokens/verify") return Response.json({ genuine: true, state, work_order: false });
    return problem(404, "not_found");
  };
  const paid = await new bazaar.Client(REGISTRY, "bzc_buyer", { fetch }).pay(SHOP, "did:key:zShop", PRICE, "o-1");
  return { jti: bazaar.claimsUnverified(paid.token)?.jti, calls };
}

test("a replayed voided token is renewed under the key naming it", async () => {
  const { jti, calls } = await payReplayed({ replayed: true, state: "voided" });
  assert.equal(jti, "tok_2");
  assert.deepEqual(calls.slice(0, 3), ["POST /v1/tokens", "POST /v1/tokens/verify", "POST /v1/tokens renew:tok_1"]);
});

test("a replayed token about to expire is renewed", async () => {
  const { jti } = await payReplayed({ replayed: true, state: "open", expiresAtMs: 0 });
  assert.equal(jti, "tok_2");
});

test("a replayed settled token is used as it is; a fresh token is not checked", async () => {
  const settled = await payReplayed({ replayed: true, state: "settled", expiresAtMs: 0 });
  assert.equal(settled.jti, "tok_1");
  assert.ok(!settled.calls.includes("POST /v1/tokens renew:tok_1"));
  const fresh = await payReplayed({ replayed: false, state: "voided" });
  assert.equal(fresh.jti, "tok_1");
  assert.deepEqual(fresh.calls, ["POST /v1/tokens", "POST /translate"]);
});

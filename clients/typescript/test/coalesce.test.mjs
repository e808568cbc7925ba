// Coalescing: a client from `client.coalescing()` sends concurrent tokens and settlements in batches, and each call
// is answered (or rejected) exactly as its single call would be. The Rust SDK's `coalesce` module behaves the same;
// the conformance scenario's `batch` step holds all three SDKs to it against a real registry.
// Run after the build: `node --test test/`.
import { test } from "node:test";
import assert from "node:assert/strict";
import * as bazaar from "../dist/index.js";

const { COALESCE_IN_FLIGHT_MAX, COALESCE_ITEMS_MAX } = bazaar.contract;
const json = (status, body) => new Response(JSON.stringify(body), { status, headers: { "content-type": "application/json" } });

/**
 * A registry answering batches item by item: a token per order; a settlement of order `dup` is refused as settled,
 * one of order `again` is a replay. `refuseAll` answers every batch 401; `short` drops the last result.
 */
function registry({ refuseAll = false, short = false } = {}) {
  const requests = [];
  const item = (path, it) => {
    const order = it.order_id;
    if (path.startsWith("/v1/tokens")) return { status: 200, replayed: false, body: { jti: `jti-${order}`, token: `apt_${order}`, key: it.idempotency_key ?? null } };
    if (order === "dup") return { status: 409, replayed: false, body: { status: 409, code: "order_already_settled", detail: "settled", facts: { id: "stl_1" } } };
    return { status: 200, replayed: order === "again", body: { id: `stl_${order}`, amount_minor: it.amount_minor } };
  };
  const doFetch = async (url, init) => {
    const { pathname } = new URL(url);
    const body = init.body ? JSON.parse(init.body) : null;
    const items = body?.items ?? [body];
    requests.push({ path: pathname, n: items.length, credential: init.headers.authorization });
    if (refuseAll) return json(401, { type: "about:blank", status: 401, code: "unauthenticated", detail: "no such credential" });
    if (!pathname.endsWith("/batch")) return json(200, item(pathname, body).body);
    const results = items.map((it) => item(pathname, it));
    return json(200, { results: short ? results.slice(0, -1) : results });
  };
  const client = (credential = "bzc_buyer") => new bazaar.Client("http://registry.test", credential, { fetch: doFetch });
  return { requests, client };
}

const tokens = (client, orders) => Promise.allSettled(orders.map((o) => client.issueToken("did:m", 300, o, "https://shop.test/work")));
const sizes = (requests) => requests.map((r) => r.n).sort((a, b) => a - b);

test("concurrent tokens leave in batches, each answered as its own call", async () => {
  const r = registry();
  const orders = Array.from({ length: 10 }, (_, i) => `o-${i}`);
  const answers = await tokens(r.client().coalescing(), orders);
  assert.deepEqual(answers.map((a) => a.value.body.jti), orders.map((o) => `jti-${o}`));
  assert.ok(answers.every((a) => a.value.replayed === false));
  assert.ok(r.requests.every((q) => q.path === "/v1/tokens/batch"));
  // The first COALESCE_IN_FLIGHT_MAX calls leave at once, alone; the rest waited and leave together.
  assert.deepEqual(sizes(r.requests), [...Array(COALESCE_IN_FLIGHT_MAX).fill(1), 6]);
});

test("a batch carries at most COALESCE_ITEMS_MAX items", async () => {
  const r = registry();
  const count = COALESCE_IN_FLIGHT_MAX + COALESCE_ITEMS_MAX + 3;
  const answers = await tokens(r.client().coalescing(), Array.from({ length: count }, (_, i) => `o-${i}`));
  assert.ok(answers.every((a) => a.status === "fulfilled"));
  assert.equal(Math.max(...sizes(r.requests)), COALESCE_ITEMS_MAX);
  assert.equal(sizes(r.requests).reduce((a, b) => a + b, 0), count);
});

test("an item refused rejects with its own typed error and its neighbours are answered", async () => {
  const r = registry();
  const client = r.client("bzc_merchant").coalescing();
  const [a, b, dup, again] = await Promise.allSettled([
    client.settle("apt_a", 300, "a", "k-a"),
    client.settle("apt_b", 300, "b"),
    client.settle("apt_dup", 300, "dup"),
    client.settle("apt_again", 300, "again"),
  ]);
  assert.deepEqual([a.value.body.id, b.value.body.id], ["stl_a", "stl_b"]);
  assert.ok(dup.reason instanceof bazaar.AlreadySettled, String(dup.reason));
  assert.deepEqual(dup.reason.facts, { id: "stl_1" });
  assert.equal(again.value.replayed, true, "a replay is still a replay");
  assert.ok(r.requests.every((q) => q.path === "/v1/settlements/batch"));
});

test("the key a single call sends as a header rides in its item", async () => {
  const r = registry();
  const answer = await r.client().coalescing().issueToken("did:m", 300, "o-1", "https://shop.test/work", { idempotencyKey: "k-1" });
  assert.equal(answer.body.key, "k-1");
});

test("a refused batch is each call's refusal, each its own error", async () => {
  const r = registry({ refuseAll: true });
  const answers = await tokens(r.client().coalescing(), ["o-1", "o-2", "o-3", "o-4", "o-5", "o-6"]);
  assert.ok(answers.every((a) => a.reason instanceof bazaar.ProblemError && a.reason.code === "unauthenticated"));
  assert.equal(new Set(answers.map((a) => a.reason)).size, answers.length);
});

test("an answer with fewer results fails the items left in transport", async () => {
  const r = registry({ short: true });
  const answers = await tokens(r.client().coalescing(), Array.from({ length: 6 }, (_, i) => `o-${i}`));
  // Four batches of one (each short by its one item) and one of two (its second item short).
  assert.equal(answers.filter((a) => a.reason instanceof bazaar.TransportError).length, 5);
});

test("a plain client sends single calls; a copy for another credential coalesces on its own", async () => {
  const r = registry();
  await tokens(r.client(), ["o-1"]);
  assert.deepEqual(r.requests.map((q) => q.path), ["/v1/tokens"]);
  r.requests.length = 0;
  const mine = r.client().coalescing();
  const other = mine.withCredential("bzc_other");
  await Promise.all([mine, other, mine, other, mine, other, mine, other, mine, other, mine, other].map((c, i) => c.issueToken("did:m", 300, `o-${i}`, "r")));
  assert.ok(r.requests.every((q) => q.path === "/v1/tokens/batch"));
  for (const credential of ["Bearer bzc_buyer", "Bearer bzc_other"]) {
    assert.deepEqual(sizes(r.requests.filter((q) => q.credential === credential)), [1, 1, 1, 1, 2], credential);
  }
});

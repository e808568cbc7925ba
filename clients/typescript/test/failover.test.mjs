// Failover across a registry's nodes: a client given every node's URL uses one at a time and moves to the next
// when a node cannot be reached. A request goes again to the next node only when that is safe: it never reached
// the node (connection refused), or it is a read, or it carries an idempotency key (or is one the registry keys by
// its order). The Rust SDK's `Client::with_nodes` behaves the same (crates/bazaar-cli/tests/it/cluster.rs).
// Run after the build: `node --test test/`.
import { test } from "node:test";
import assert from "node:assert/strict";
import * as bazaar from "../dist/index.js";

const DOWN = "http://node-a.test";
const UP = "http://node-b.test";

/** Two nodes: `node-a` refuses connections (or, with `drop`, takes the request and drops the connection). */
function nodes(drop = false) {
  const seen = [];
  const doFetch = async (url, init) => {
    const { host, pathname } = new URL(url);
    seen.push(`${init.method} ${host} ${pathname}`);
    if (host === "node-a.test") {
      const cause = drop ? { code: "ECONNRESET" } : { code: "ECONNREFUSED" };
      throw new TypeError("fetch failed", { cause });
    }
    return new Response(JSON.stringify({ status: "ok", event_seq: 7 }), { status: 200, headers: { "content-type": "application/json" } });
  };
  return { seen, client: new bazaar.Client([DOWN, UP], "bzc_x", { fetch: doFetch }) };
}

test("a node that refuses connections is passed over and the next one kept", async () => {
  const { seen, client } = nodes();
  await client.call("GET", "/healthz");
  await client.call("GET", "/healthz");
  assert.deepEqual(seen, ["GET node-a.test /healthz", "GET node-b.test /healthz", "GET node-b.test /healthz"]);
  assert.equal(client.baseUrl, UP);
  assert.equal(client.withCredential("bzc_y").baseUrl, UP, "a copy shares the nodes and the one in use");
});

test("an unkeyed write that never reached a node goes to the next", async () => {
  const { seen, client } = nodes();
  await client.call("POST", "/v1/rooms", { name: "ops" });
  assert.deepEqual(seen, ["POST node-a.test /v1/rooms", "POST node-b.test /v1/rooms"]);
});

test("an unkeyed write a node may have taken is not sent again", async () => {
  const { seen, client } = nodes(true);
  await assert.rejects(client.call("POST", "/v1/rooms", { name: "ops" }), bazaar.TransportError);
  assert.deepEqual(seen, ["POST node-a.test /v1/rooms"], "sent once: it may have been done");
});

test("a keyed write and a settlement go again to the next node", async () => {
  const first = nodes(true);
  await first.client.call("POST", "/v1/mint", { owner: "o", amount_minor: 1 }, "mint-1");
  const second = nodes(true);
  await second.client.call("POST", "/v1/settlements", { token: "apt_x", amount_minor: 1, order_id: "o" });
  assert.deepEqual(first.seen, ["POST node-a.test /v1/mint", "POST node-b.test /v1/mint"]);
  assert.deepEqual(second.seen, ["POST node-a.test /v1/settlements", "POST node-b.test /v1/settlements"]);
});

test("one URL is still a client and none is refused", () => {
  assert.deepEqual(new bazaar.Client("http://one.test/").nodeUrls, ["http://one.test"]);
  assert.throws(() => new bazaar.Client([]), /at least one registry URL/);
});

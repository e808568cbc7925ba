// The work-receipt stores prune on the Rust SDK's policy: older than the retention is gone on open, on `prune`
// and on every Nth put; a fresh receipt stays. Run after the build: `node --test test/`.
import { test } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createRequire } from "node:module";
import { MemoryReceiptStore, SqliteReceiptStore, contract } from "../dist/index.js";

const Database = createRequire(import.meta.url)("better-sqlite3");
const DAY_MS = 86_400_000;
const RETENTION_MS = contract.WORK_RECEIPT_RETENTION_S * 1000;
const receipt = { status: 200, contentType: "text/plain", body: new TextEncoder().encode("done") };

function clock() {
  const c = { ms: 1_800_000_000_000 };
  c.now = () => c.ms;
  return c;
}

function tempDb(t) {
  const dir = mkdtempSync(join(tmpdir(), "bazaar-receipts-"));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  return join(dir, "receipts.db");
}

function ids(path) {
  const db = new Database(path, { readonly: true });
  try {
    return db.prepare("SELECT settlement_id FROM work_receipts ORDER BY settlement_id").all().map((r) => r.settlement_id);
  } finally {
    db.close();
  }
}

test("the constants are Rust's", () => {
  assert.equal(contract.WORK_RECEIPT_RETENTION_S, 2_592_000);
  assert.equal(contract.WORK_RECEIPT_PRUNE_EVERY, 1024);
});

test("memory: prune drops only receipts past the retention", () => {
  const c = clock();
  const store = new MemoryReceiptStore({ now: c.now });
  store.put("old", "o-1", receipt);
  c.ms += 2 * DAY_MS;
  store.put("recent", "o-2", receipt);
  c.ms += RETENTION_MS - DAY_MS; // "old" is 31 days old, "recent" 29
  assert.equal(store.prune(contract.WORK_RECEIPT_RETENTION_S), 1);
  assert.equal(store.get("old"), undefined);
  assert.deepEqual(store.get("recent"), receipt);
});

test("memory: every Nth put prunes", () => {
  const c = clock();
  const store = new MemoryReceiptStore({ pruneEvery: 3, now: c.now });
  store.put("old", "o-1", receipt);
  c.ms += RETENTION_MS + DAY_MS;
  store.put("new-1", "o-2", receipt);
  assert.notEqual(store.get("old"), undefined, "the 2nd put does not prune");
  store.put("new-2", "o-3", receipt);
  assert.equal(store.get("old"), undefined, "the 3rd put prunes");
  assert.deepEqual(store.get("new-2"), receipt);
});

test("memory: by default the 1024th put prunes", () => {
  const c = clock();
  const store = new MemoryReceiptStore({ now: c.now });
  store.put("old", "o", receipt);
  c.ms += RETENTION_MS + DAY_MS;
  for (let i = 0; i < contract.WORK_RECEIPT_PRUNE_EVERY - 2; i++) store.put(`n-${i}`, "o", receipt);
  assert.notEqual(store.get("old"), undefined);
  store.put("last", "o", receipt);
  assert.equal(store.get("old"), undefined);
});

test("sqlite: prune and opening drop receipts past the retention", (t) => {
  const path = tempDb(t);
  const c = clock();
  const start = c.ms;
  const store = new SqliteReceiptStore(path, { now: c.now });
  for (const [id, ageDays] of [["old", 31], ["recent", 29], ["new", 0]]) {
    c.ms = start - ageDays * DAY_MS;
    store.put(id, "o", receipt);
  }
  c.ms = start;
  assert.equal(store.prune(contract.WORK_RECEIPT_RETENTION_S), 1);
  assert.deepEqual(ids(path), ["new", "recent"]);
  assert.deepEqual(store.get("recent"), receipt);
  store.close();
  // Opening the store prunes too: two days on, "recent" is past its retention.
  c.ms += 2 * DAY_MS;
  const reopened = new SqliteReceiptStore(path, { now: c.now });
  assert.deepEqual(ids(path), ["new"]);
  assert.equal(reopened.get("recent"), undefined);
  reopened.close();
});

test("sqlite: opening prunes with the real clock, and created_at is indexed", (t) => {
  const path = tempDb(t);
  new SqliteReceiptStore(path).close();
  const db = new Database(path);
  db.prepare(
    "INSERT INTO work_receipts VALUES ('old', 'o', 200, NULL, x'00', CAST(strftime('%s','now') AS INTEGER) - ?)",
  ).run(contract.WORK_RECEIPT_RETENTION_S + 86_400);
  const plan = db.prepare("EXPLAIN QUERY PLAN DELETE FROM work_receipts WHERE created_at < 1").all();
  db.close();
  assert.match(plan.map((r) => r.detail).join(" "), /work_receipts_created/);
  new SqliteReceiptStore(path).close();
  assert.deepEqual(ids(path), []);
});

test("sqlite: every Nth put prunes", (t) => {
  const path = tempDb(t);
  const c = clock();
  const store = new SqliteReceiptStore(path, { pruneEvery: 3, now: c.now });
  store.put("old", "o-1", receipt);
  c.ms += RETENTION_MS + DAY_MS;
  store.put("new-1", "o-2", receipt);
  assert.deepEqual(ids(path), ["new-1", "old"], "the 2nd put does not prune");
  store.put("new-2", "o-3", receipt);
  assert.deepEqual(ids(path), ["new-1", "new-2"], "the 3rd put prunes");
  store.close();
});

// Work receipts: the merchant's record of each paid response, keyed by its settlement. A retried or replayed
// order whose settlement has a receipt is answered from it and the paid work does not run again — also after the
// merchant process restarted, since the default store is an SQLite file written with `synchronous = FULL`.
// Any object with `get` and `put` (`ReceiptStore`) can replace it.
//
// Both stores here prune on the same policy as the Rust and Python SDKs: a receipt is kept
// `WORK_RECEIPT_RETENTION_S` (30 days) and then deleted — when the store opens and every
// `WORK_RECEIPT_PRUNE_EVERY` (1,024) receipts stored. A retry of an order after that runs the work again; the
// settlement itself never repeats. A store of your own keeps its own retention.

import { createRequire } from "node:module";
import { WORK_RECEIPT_PRUNE_EVERY, WORK_RECEIPT_RETENTION_S } from "./contract.js";

export interface WorkReceipt {
  status: number;
  contentType: string | null;
  body: Uint8Array;
}

/** Where receipts live. `put` keeps the first receipt of a settlement and ignores later ones. */
export interface ReceiptStore {
  get(settlementId: string): WorkReceipt | undefined | Promise<WorkReceipt | undefined>;
  put(settlementId: string, orderId: string, receipt: WorkReceipt): void | Promise<void>;
}

/** How often a store prunes, and its clock (ms since the epoch, like `Date.now`); both for tests. */
export interface ReceiptStoreOptions {
  /** Puts between two prunes; default `WORK_RECEIPT_PRUNE_EVERY`. */
  pruneEvery?: number;
  /** Default `Date.now`. */
  now?: () => number;
}

function settings(options: ReceiptStoreOptions): { pruneEvery: number; nowS: () => number } {
  const pruneEvery = options.pruneEvery ?? WORK_RECEIPT_PRUNE_EVERY;
  if (!Number.isInteger(pruneEvery) || pruneEvery < 1) throw new RangeError("pruneEvery must be an integer of at least 1");
  const now = options.now ?? Date.now;
  return { pruneEvery, nowS: () => Math.floor(now() / 1000) };
}

/**
 * Receipts in this process only: a restart forgets them (tests, or work that is harmless to repeat). Pruned like
 * the SQLite store: every `pruneEvery` puts, receipts older than the retention are dropped.
 */
export class MemoryReceiptStore implements ReceiptStore {
  private readonly receipts = new Map<string, { receipt: WorkReceipt; createdAt: number }>();
  private readonly pruneEvery: number;
  private readonly nowS: () => number;
  private puts = 0;

  constructor(options: ReceiptStoreOptions = {}) {
    ({ pruneEvery: this.pruneEvery, nowS: this.nowS } = settings(options));
  }

  get(settlementId: string): WorkReceipt | undefined {
    return this.receipts.get(settlementId)?.receipt;
  }

  put(settlementId: string, _orderId: string, receipt: WorkReceipt): void {
    if (!this.receipts.has(settlementId)) this.receipts.set(settlementId, { receipt, createdAt: this.nowS() });
    this.puts += 1;
    if (this.puts % this.pruneEvery === 0) this.prune(WORK_RECEIPT_RETENTION_S);
  }

  /** Deletes the receipts stored more than `olderThanS` seconds ago; returns how many. */
  prune(olderThanS: number = WORK_RECEIPT_RETENTION_S): number {
    const cutoff = this.nowS() - olderThanS;
    let deleted = 0;
    for (const [id, kept] of this.receipts) {
      if (kept.createdAt < cutoff) {
        this.receipts.delete(id);
        deleted += 1;
      }
    }
    return deleted;
  }
}

interface Statement {
  get(...params: unknown[]): unknown;
  run(...params: unknown[]): unknown;
}
interface Database {
  exec(sql: string): unknown;
  prepare(sql: string): Statement;
  close(): unknown;
}

const SCHEMA =
  "CREATE TABLE IF NOT EXISTS work_receipts (settlement_id TEXT PRIMARY KEY, order_id TEXT NOT NULL, " +
  "status INTEGER NOT NULL, content_type TEXT, body BLOB NOT NULL, created_at INTEGER NOT NULL)";
const INDEX = "CREATE INDEX IF NOT EXISTS work_receipts_created ON work_receipts (created_at)";

/** Opens `path` with Bun's built-in SQLite on Bun, else with the `better-sqlite3` package (a peer dependency). */
function open(path: string): Database {
  const require = createRequire(import.meta.url);
  if (typeof (globalThis as { Bun?: unknown }).Bun !== "undefined") {
    const { Database: BunDatabase } = require("bun:sqlite") as { Database: new (path: string) => Database & { query(sql: string): Statement } };
    const db = new BunDatabase(path);
    return { exec: (sql) => db.exec(sql), prepare: (sql) => db.query(sql), close: () => db.close() };
  }
  let BetterSqlite: new (path: string) => Database;
  try {
    BetterSqlite = require("better-sqlite3") as new (path: string) => Database;
  } catch {
    throw new Error("SqliteReceiptStore needs the better-sqlite3 package on Node (npm install better-sqlite3@12), or run on Bun; or pass a ReceiptStore of your own.");
  }
  return new BetterSqlite(path);
}

/**
 * Receipts in an SQLite file (WAL, `synchronous = FULL`): they survive a crash once `put` returns. Receipts older
 * than the retention are deleted when the store opens and every `pruneEvery` puts (`created_at` is indexed).
 */
export class SqliteReceiptStore implements ReceiptStore {
  private readonly db: Database;
  private readonly select: Statement;
  private readonly insert: Statement;
  private readonly deleteOlder: Statement;
  private readonly pruneEvery: number;
  private readonly nowS: () => number;
  private puts = 0;

  constructor(path: string, options: ReceiptStoreOptions = {}) {
    ({ pruneEvery: this.pruneEvery, nowS: this.nowS } = settings(options));
    this.db = open(path);
    this.db.exec("PRAGMA journal_mode = WAL");
    this.db.exec("PRAGMA synchronous = FULL");
    this.db.exec(SCHEMA);
    this.db.exec(INDEX);
    this.select = this.db.prepare("SELECT status, content_type, body FROM work_receipts WHERE settlement_id = ?");
    this.insert = this.db.prepare("INSERT OR IGNORE INTO work_receipts VALUES (?, ?, ?, ?, ?, ?)");
    this.deleteOlder = this.db.prepare("DELETE FROM work_receipts WHERE created_at < ?");
    this.prune(WORK_RECEIPT_RETENTION_S);
  }

  get(settlementId: string): WorkReceipt | undefined {
    const row = this.select.get(settlementId) as { status: number; content_type: string | null; body: Uint8Array } | undefined | null;
    if (!row) return undefined;
    return { status: Number(row.status), contentType: row.content_type, body: new Uint8Array(row.body) };
  }

  put(settlementId: string, orderId: string, receipt: WorkReceipt): void {
    this.insert.run(settlementId, orderId, receipt.status, receipt.contentType, Buffer.from(receipt.body), this.nowS());
    this.puts += 1;
    if (this.puts % this.pruneEvery === 0) this.prune(WORK_RECEIPT_RETENTION_S);
  }

  /** Deletes the receipts stored more than `olderThanS` seconds ago; returns how many. */
  prune(olderThanS: number = WORK_RECEIPT_RETENTION_S): number {
    const result = this.deleteOlder.run(this.nowS() - olderThanS) as { changes?: number | bigint } | undefined;
    return Number(result?.changes ?? 0);
  }

  close(): void {
    this.db.close();
  }
}

// Work receipts: the merchant's record of each paid response, keyed by its settlement. A retried or replayed
// order whose settlement has a receipt is answered from it and the paid work does not run again — also after the
// merchant process restarted, since the default store is an SQLite file written with `synchronous = FULL`.
// Any object with `get` and `put` (`ReceiptStore`) can replace it.

import { createRequire } from "node:module";

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

/** Receipts in this process only: a restart forgets them (tests, or work that is harmless to repeat). */
export class MemoryReceiptStore implements ReceiptStore {
  private readonly receipts = new Map<string, WorkReceipt>();

  get(settlementId: string): WorkReceipt | undefined {
    return this.receipts.get(settlementId);
  }

  put(settlementId: string, _orderId: string, receipt: WorkReceipt): void {
    if (!this.receipts.has(settlementId)) this.receipts.set(settlementId, receipt);
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

/** Receipts in an SQLite file (WAL, `synchronous = FULL`): they survive a crash once `put` returns. */
export class SqliteReceiptStore implements ReceiptStore {
  private readonly db: Database;
  private readonly select: Statement;
  private readonly insert: Statement;

  constructor(path: string) {
    this.db = open(path);
    this.db.exec("PRAGMA journal_mode = WAL");
    this.db.exec("PRAGMA synchronous = FULL");
    this.db.exec(SCHEMA);
    this.select = this.db.prepare("SELECT status, content_type, body FROM work_receipts WHERE settlement_id = ?");
    this.insert = this.db.prepare("INSERT OR IGNORE INTO work_receipts VALUES (?, ?, ?, ?, ?, ?)");
  }

  get(settlementId: string): WorkReceipt | undefined {
    const row = this.select.get(settlementId) as { status: number; content_type: string | null; body: Uint8Array } | undefined | null;
    if (!row) return undefined;
    return { status: Number(row.status), contentType: row.content_type, body: new Uint8Array(row.body) };
  }

  put(settlementId: string, orderId: string, receipt: WorkReceipt): void {
    this.insert.run(settlementId, orderId, receipt.status, receipt.contentType, Buffer.from(receipt.body), Math.floor(Date.now() / 1000));
  }

  close(): void {
    this.db.close();
  }
}

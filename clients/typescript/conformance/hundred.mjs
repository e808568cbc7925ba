// The hundred-paid-calls story with the TypeScript SDK, with real crashes.
//
//   node hundred.mjs WORLD.json                 the buyer: supervises the merchant process and pays 100 orders
//   node hundred.mjs merchant WORLD.json PORT   the merchant process (started by the buyer)
//
// The merchant is a separate process: a Fetch-API handler behind `paidFetch` (served by node:http through a small
// Request/Response adapter), SQLite receipts, and each run of its paid work counted in an SQLite file. It kills
// itself (process.exit) right after settling orders 42 and 77, before the work and before answering — once each;
// the buyer's supervisor starts it again on the same port. The buyer pays orders 1..100; for order 17 a buyer
// process is killed mid-request (the merchant holds that order's first answer for a moment) and the order is
// re-sent five times. Prints one JSON line with what it saw.
import { spawn } from "node:child_process";
import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { createServer, connect } from "node:net";
import { createServer as createHttpServer } from "node:http";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { createRequire } from "node:module";
import * as bazaar from "../dist/index.js";

const ORDERS = 100;
const CRASHED_BUYER_ORDER = 17;
const RESENDS = 5;
const KILLED_MERCHANT_ORDERS = [42, 77];
const ORDER_DEADLINE_MS = 60_000;
const here = fileURLToPath(import.meta.url);
const orderId = (n) => `ts-hundred-${String(n).padStart(3, "0")}`;
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
const Database = createRequire(import.meta.url)("better-sqlite3");

function merchant(world, port) {
  const workDir = world.work_dir;
  const runs = new Database(join(workDir, "ts-work.db"));
  runs.pragma("synchronous = FULL");
  runs.exec("CREATE TABLE IF NOT EXISTS runs (n INTEGER PRIMARY KEY, order_id TEXT NOT NULL)");
  const insert = runs.prepare("INSERT INTO runs (order_id) VALUES (?)");
  const held = join(workDir, `ts-held-${orderId(CRASHED_BUYER_ORDER)}`);
  const killed = new Set(KILLED_MERCHANT_ORDERS.map(orderId));
  const fault = (point, order) => {
    if (point === "after_settle" && killed.has(order)) {
      const marker = join(workDir, `ts-killed-${order}`);
      if (!existsSync(marker)) {
        writeFileSync(marker, "");
        process.exit(137); // settled; the work has not run and nothing is answered
      }
    }
    return false;
  };
  const client = new bazaar.Client(world.registry, world.merchant);
  const shop = new bazaar.Merchant(client, new bazaar.SqliteReceiptStore(join(workDir, "ts-receipts.db")), { fault });
  const handler = bazaar.paidFetch(shop, world.price_minor, async (_request, settled) => {
    if (settled.orderId === orderId(CRASHED_BUYER_ORDER) && !existsSync(held)) {
      writeFileSync(held, "");
      await sleep(1000); // long enough for the buyer to be killed mid-request
    }
    insert.run(settled.orderId);
    return Response.json({ order: settled.orderId });
  });
  // node:http → Fetch Request → the paid handler → node:http.
  createHttpServer(async (req, res) => {
    const chunks = [];
    for await (const chunk of req) chunks.push(chunk);
    const headers = new Headers();
    for (const [name, value] of Object.entries(req.headers)) if (typeof value === "string") headers.set(name, value);
    const body = chunks.length ? Buffer.concat(chunks) : undefined;
    const request = new Request(`http://127.0.0.1:${port}${req.url}`, { method: req.method, headers, body });
    const response = await handler(request);
    res.writeHead(response.status, Object.fromEntries(response.headers));
    res.end(Buffer.from(await response.arrayBuffer()));
  }).listen(port, "127.0.0.1");
}

class Supervisor {
  constructor(worldFile, port) {
    Object.assign(this, { worldFile, port, starts: 0, child: undefined });
  }

  async ensure() {
    if (this.child && this.child.exitCode === null && this.child.signalCode === null) return;
    this.starts += 1;
    this.child = spawn(process.execPath, [here, "merchant", this.worldFile, String(this.port)], { stdio: "inherit" });
    const deadline = Date.now() + 20_000;
    while (Date.now() < deadline) {
      const up = await new Promise((resolve) => {
        const socket = connect(this.port, "127.0.0.1", () => { socket.end(); resolve(true); });
        socket.on("error", () => resolve(false));
      });
      if (up) return;
      await sleep(50);
    }
    throw new Error("the merchant did not start");
  }

  stop() {
    if (this.child && this.child.exitCode === null) this.child.kill("SIGTERM");
  }
}

async function payUntilAnswered(buyer, supervisor, url, world, order) {
  const deadline = Date.now() + ORDER_DEADLINE_MS;
  for (;;) {
    await supervisor.ensure();
    try {
      const paid = await buyer.pay(url, world.merchant_did, world.price_minor, order);
      if (paid.status === 200) return paid;
    } catch (error) {
      // The merchant is down (killed mid-request): start it again and re-send.
      if (!(error instanceof bazaar.TransportError || error instanceof bazaar.UnavailableError)) throw error;
    }
    if (Date.now() > deadline) throw new Error(`order ${order} never answered`);
    await sleep(100);
  }
}

async function buyerRun(worldFile) {
  const world = JSON.parse(readFileSync(worldFile, "utf8"));
  const port = await new Promise((resolve) => {
    const probe = createServer().listen(0, "127.0.0.1", () => { const p = probe.address().port; probe.close(() => resolve(p)); });
  });
  const supervisor = new Supervisor(worldFile, port);
  const url = `http://127.0.0.1:${port}/work`;
  const client = new bazaar.Client(world.registry, world.buyer);
  let replayed = 0;
  let sends = 0;
  try {
    for (let n = 1; n <= ORDERS; n++) {
      const order = orderId(n);
      if (n === CRASHED_BUYER_ORDER) {
        // A buyer process that dies mid-request: it asked for the token and sent it; the answer never came.
        await supervisor.ensure();
        const code = `import(${JSON.stringify(new URL("../dist/index.js", import.meta.url).href)}).then((b) => new b.Client(process.argv[1], process.argv[2]).pay(process.argv[3], process.argv[4], Number(process.argv[5]), process.argv[6]))`;
        const crashing = spawn(process.execPath, ["-e", code, world.registry, world.buyer, url, world.merchant_did, String(world.price_minor), order], { stdio: "inherit" });
        await sleep(600);
        crashing.kill("SIGKILL");
        sends += 1;
        for (let i = 0; i < RESENDS; i++) {
          const paid = await payUntilAnswered(client, supervisor, url, world, order);
          sends += 1;
          if (paid.replayed) replayed += 1;
        }
        continue;
      }
      const paid = await payUntilAnswered(client, supervisor, url, world, order);
      if (paid.replayed) replayed += 1;
    }
  } finally {
    supervisor.stop();
  }
  const runs = new Database(join(world.work_dir, "ts-work.db"), { readonly: true });
  const counted = runs.prepare("SELECT COUNT(*) AS n, COUNT(DISTINCT order_id) AS d FROM runs").get();
  return {
    sdk: "typescript",
    orders: ORDERS,
    work_runs: counted.n,
    distinct_work_orders: counted.d,
    merchant_starts: supervisor.starts,
    sends_of_crashed_order: sends,
    replayed_answers: replayed,
    balance_minor: await client.balance(),
  };
}

if (process.argv[2] === "merchant") {
  merchant(JSON.parse(readFileSync(process.argv[3], "utf8")), Number(process.argv[4]));
} else {
  console.log(JSON.stringify(await buyerRun(process.argv[2])));
  process.exit(0);
}

// Drives the ledger explorer (`GET /chamber/ledger`) in Debian's headless Chromium.
//
//   node ledger.mjs BASE_URL OPERATOR_CREDENTIAL [SCREENSHOT_DIR]
//
// Opens the ledger on the registry at BASE_URL, signs in with the operator's credential, waits for the
// in-browser chain check, reads the balances, downloads the CSV, opens one account's history and scans the
// page with axe-core. Then it starts a test double on 127.0.0.1 that serves the same registry but alters one
// number in one event of `/v1/events`, opens the ledger through it and reads what the check says.
//
// One JSON line on stdout: {"ok", "verdict", "rows", "sum", "csv_lines", "csv_header", "account",
// "history", "axe", "tampered_seq", "tampered_verdict", "tampered_rows", "overflow_px", "problems"}.
import { readFile } from "node:fs/promises";
import { createServer } from "node:http";
import { seriousViolations } from "./axe.mjs";
import { launch } from "./chromium.mjs";

const [base, operator, shots] = process.argv.slice(2);
if (!base || !operator) {
  console.error("usage: node ledger.mjs BASE_URL OPERATOR_CREDENTIAL [SCREENSHOT_DIR]");
  process.exit(2);
}
const problems = [];
const report = { ok: false, problems };

// The test double: the real registry behind it, except that one event's first number is one more.
let tamperedSeq = null;
function tamper(page) {
  for (const event of page.events) {
    for (const [key, value] of Object.entries(event.body)) {
      if (tamperedSeq === null && typeof value === "number") {
        event.body[key] = value + 1;
        tamperedSeq = event.seq;
      }
    }
    if (tamperedSeq !== null) break;
  }
  return page;
}
const double = createServer(async (request, response) => {
  const headers = { ...request.headers };
  delete headers.host;
  const answer = await fetch(base + request.url, { method: request.method, headers });
  let body = Buffer.from(await answer.arrayBuffer());
  if (request.url.startsWith("/v1/events") && answer.ok) {
    body = Buffer.from(JSON.stringify(tamper(JSON.parse(body.toString("utf8")))));
  }
  const out = {};
  answer.headers.forEach((value, name) => { if (name !== "content-length" && name !== "content-encoding") out[name] = value; });
  response.writeHead(answer.status, out);
  response.end(body);
});
await new Promise((done) => double.listen(0, "127.0.0.1", done));
const doubleBase = `http://127.0.0.1:${double.address().port}`;

function watch(page, expectErrors) {
  page.on("console", (message) => {
    if (message.type() === "error" && !expectErrors) problems.push(`console: ${message.text()}`);
  });
  page.on("pageerror", (error) => problems.push(`page error: ${error.message}`));
}

async function signIn(page, at) {
  await page.goto(`${at}/chamber/ledger`, { waitUntil: "load" });
  await page.waitForSelector("#signin:not([hidden])", { timeout: 10_000 });
  await page.fill("#credential", operator);
  await page.click("#signin button[type=submit]");
  await page.waitForFunction(() => ["verified", "broken"].includes(document.getElementById("verdict").dataset.state), null, { timeout: 30_000 });
}

const browser = await launch();
try {
  const context = await browser.newContext({ viewport: { width: 1280, height: 900 }, acceptDownloads: true });
  const page = await context.newPage();
  watch(page, true); // the first load is refused (401) until the operator signs in
  await signIn(page, base);
  report.verdict = await page.textContent("#verdict");
  report.rows = await page.$$eval("#events tr", (rows) => rows.map((r) => r.dataset.check));
  report.sum = await page.textContent("#sum");
  const [download] = await Promise.all([page.waitForEvent("download"), page.click("#csv")]);
  const csv = await readFile(await download.path(), "utf8");
  const lines = csv.trimEnd().split("\r\n");
  report.csv_header = lines[0];
  report.csv_lines = lines.length;
  // One account's history: its link filters the events to those that name it.
  // One account's history: the first member account holding units; its transfers add up to its balance.
  report.account = await page.$$eval("#accounts tr", (rows) => rows
    .map((r) => [r.querySelector("a").textContent, r.children[1].textContent])
    .find(([id, balance]) => id.startsWith("acct:") && balance !== "0")[0]);
  await page.click(`#accounts a:text-is("${report.account}")`);
  await page.waitForFunction(() => document.getElementById("history-note").dataset.agrees !== undefined, null, { timeout: 10_000 });
  report.history = await page.textContent("#history-note");
  report.history_agrees = await page.$eval("#history-note", (n) => n.dataset.agrees === "true");
  report.history_rows = await page.$$eval("#history-rows tr", (rows) => rows.length);
  report.hash = await page.evaluate(() => location.hash);
  if (shots) await page.screenshot({ path: `${shots}/ledger-desktop.png`, fullPage: true });
  report.axe = await seriousViolations(page);

  // The same page served by the test double.
  const bent = await context.newPage();
  watch(bent, true);
  await signIn(bent, doubleBase);
  report.tampered_seq = tamperedSeq;
  report.tampered_verdict = await bent.textContent("#verdict");
  report.tampered_rows = await bent.$$eval("#events tr", (rows) => rows.map((r) => [Number(r.id.slice(4)), r.dataset.check]));

  const phone = await browser.newContext({ viewport: { width: 390, height: 844 }, colorScheme: "dark" });
  const small = await phone.newPage();
  watch(small, true);
  await signIn(small, base);
  report.overflow_px = await small.evaluate(() => document.documentElement.scrollWidth - document.documentElement.clientWidth);
  if (shots) await small.screenshot({ path: `${shots}/ledger-phone-dark.png`, fullPage: true });
  report.ok = problems.length === 0 && report.axe.length === 0 && report.overflow_px <= 0;
} catch (error) {
  problems.push(`driver: ${error.message}`);
} finally {
  await browser.close();
  double.close();
}
console.log(JSON.stringify(report));
process.exit(report.ok ? 0 : 1);

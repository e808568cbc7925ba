// Drives the live chamber (`GET /chamber`) in Debian's headless Chromium.
//
//   node chamber.mjs BASE_URL CAST_FILE [SCREENSHOT_DIR]
//
// CAST_FILE holds {"buyer": credential, "merchant": credential, "merchant_handle": handle} of a funded buyer
// agent and a merchant agent on the registry at BASE_URL, whose stream is public. The driver opens the
// chamber, waits until it follows the stream, makes one paid call through the registry's public API (a token,
// then its settlement), and reads the flow and the feed the page filled from the live stream. It checks the
// keyboard reaches the navigation, scans /chamber and /chamber/claims with axe-core, and looks at the chamber
// at phone width and in dark mode (screenshots into SCREENSHOT_DIR when given).
//
// One JSON line on stdout: {"ok", "status", "steps": {id: {done, text}}, "clock", "feed": [kinds], "link",
// "focus", "axe": {path: [{id, impact, nodes}]}, "overflow_px", "problems"}. Exits 1 when ok is false.
import { readFile } from "node:fs/promises";
import { seriousViolations } from "./axe.mjs";
import { launch } from "./chromium.mjs";

const [base, castFile, shots] = process.argv.slice(2);
if (!base || !castFile) {
  console.error("usage: node chamber.mjs BASE_URL CAST_FILE [SCREENSHOT_DIR]");
  process.exit(2);
}
const cast = JSON.parse(await readFile(castFile, "utf8"));
const origin = new URL(base).origin;
const problems = [];
const report = { ok: false, steps: {}, feed: [], axe: {}, problems };

function watch(page) {
  page.on("console", (message) => {
    if (message.type() === "error") problems.push(`console: ${message.text()}`);
  });
  page.on("pageerror", (error) => problems.push(`page error: ${error.message}`));
  page.on("request", (request) => {
    if (!request.url().startsWith(origin) && !request.url().startsWith("data:")) {
      problems.push(`asked another origin: ${request.url()}`);
    }
  });
}

async function call(path, credential, body, key) {
  const answer = await fetch(base + path, {
    method: "POST",
    headers: { "content-type": "application/json", authorization: `Bearer ${credential}`, "idempotency-key": key },
    body: JSON.stringify(body),
  });
  const json = await answer.json();
  if (!answer.ok) throw new Error(`${path}: ${answer.status} ${JSON.stringify(json)}`);
  return json;
}

let lastOrder = null;
async function paidCall() {
  const order = `chamber-${Date.now()}`;
  lastOrder = order;
  const issued = await call("/v1/tokens", cast.buyer,
    { merchant: cast.merchant_handle, max_amount_minor: 300, order_id: order, resource: "https://shop/linen" }, `${order}-t`);
  await call("/v1/settlements", cast.merchant, { token: issued.token, amount_minor: 300, order_id: order }, `${order}-s`);
}

// An escrowed contract with the merchant, and a dispute on the paid call: both through the public API.
async function escrowAndDispute() {
  const due = Date.now() + 7 * 24 * 3600 * 1000;
  await call("/v1/contracts", cast.buyer, {
    seller: cast.merchant_handle,
    milestones: [{ amount_minor: 200, description: "hemming", due_at_ms: due }, { amount_minor: 200, description: "delivery", due_at_ms: due }],
    terms_sha256: "a".repeat(64),
  }, `contract-${lastOrder}`);
  await call("/v1/disputes", cast.buyer, {
    subject: { type: "call", merchant: cast.merchant_handle, order_id: lastOrder },
    reason: "not_as_described", claimed_minor: 300, note: "the linen never came",
  }, `dispute-${lastOrder}`);
}

async function axe(page, path) {
  await page.goto(base + path, { waitUntil: "load" });
  report.axe[path] = await seriousViolations(page);
}

const browser = await launch();
try {
  const context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
  const page = await context.newPage();
  watch(page);
  await page.goto(base + "/chamber", { waitUntil: "load" });
  await page.waitForFunction(() => document.getElementById("status").textContent.startsWith("live"), null, { timeout: 10_000 });
  report.status = await page.textContent("#status");
  await paidCall();
  await page.waitForSelector('#step-settle[data-done="true"]', { timeout: 10_000 });
  for (const id of ["step-token", "step-verify", "step-settle", "step-work", "step-ledger"]) {
    report.steps[id] = await page.$eval(`#${id}`, (node) => ({ done: node.dataset.done === "true", text: node.textContent.trim() }));
  }
  report.clock = await page.textContent("#token-clock");
  report.feed = await page.$$eval("#feed li code", (nodes) => nodes.map((n) => n.textContent));
  report.link = await page.$eval("#feed li a", (a) => a.getAttribute("href"));
  await escrowAndDispute();
  await page.waitForSelector('#escrow-held[data-done="true"]', { timeout: 10_000 });
  await page.waitForSelector("#dispute li", { timeout: 10_000 });
  report.escrow = await page.textContent("#escrow-held");
  report.dispute = await page.$$eval("#dispute li", (nodes) => nodes.map((n) => n.textContent));
  await page.keyboard.press("Tab");
  report.focus = await page.evaluate(() => `${document.activeElement.tagName} ${document.activeElement.textContent}`);
  if (shots) await page.screenshot({ path: `${shots}/chamber-desktop.png`, fullPage: true });
  await axe(page, "/chamber");
  await axe(page, "/chamber/claims");
  // Try to break it: three attacks, one after another, each refused with nothing kept.
  await page.goto(base + "/chamber/break", { waitUntil: "load" });
  await page.waitForSelector("button[data-attack]", { timeout: 10_000 });
  report.attacks_listed = await page.$$eval("button[data-attack]", (b) => b.length);
  report.attacks = [];
  for (const name of ["replayed-token", "second-settlement", "payment-without-exact-authorization"]) {
    await page.click(`button[data-attack="${name}"]`);
    await page.waitForFunction((n) => {
      const first = document.querySelector("#results li");
      return first && first.querySelector("strong").textContent === n && first.dataset.held !== undefined;
    }, name, { timeout: 60_000 });
    report.attacks.push(await page.$eval("#results li", (li) => ({ held: li.dataset.held === "true", text: li.textContent })));
  }
  await axe(page, "/chamber/break");
  // How it is built: the latest paid call traced to its events and the merchant's reputation.
  await page.goto(base + "/chamber/architecture", { waitUntil: "load" });
  await page.waitForFunction(() => document.getElementById("trace-status").textContent.startsWith("Traced"), null, { timeout: 10_000 });
  report.trace = await page.$$eval("#trace li", (items) => items.map((li) => ({ done: li.dataset.done === "true", text: li.textContent, links: [...li.querySelectorAll("a")].map((a) => a.getAttribute("href")) })));
  report.axe["/chamber/architecture"] = await seriousViolations(page);

  const phone = await browser.newContext({ viewport: { width: 390, height: 844 }, colorScheme: "dark" });
  const small = await phone.newPage();
  watch(small);
  await small.goto(base + "/chamber", { waitUntil: "load" });
  await small.waitForSelector("#feed li", { timeout: 10_000 });
  report.overflow_px = await small.evaluate(() => document.documentElement.scrollWidth - document.documentElement.clientWidth);
  if (shots) {
    // Every page at phone width (dark) and at desktop width (light), for a reviewer.
    await small.screenshot({ path: `${shots}/chamber-phone-dark.png`, fullPage: true });
    for (const [name, path] of [["claims", "/chamber/claims"], ["break", "/chamber/break"], ["architecture", "/chamber/architecture"]]) {
      await small.goto(base + path, { waitUntil: "load" });
      await small.screenshot({ path: `${shots}/${name}-phone-dark.png`, fullPage: true });
      await page.goto(base + path, { waitUntil: "load" });
      await page.screenshot({ path: `${shots}/${name}-desktop.png`, fullPage: true });
    }
  }
  const stepsDone = Object.values(report.steps).filter((s) => s.done).length;
  const axeClean = Object.values(report.axe).every((v) => v.length === 0);
  report.ok = problems.length === 0 && stepsDone >= 3 && axeClean && report.overflow_px <= 0;
} catch (error) {
  problems.push(`driver: ${error.message}`);
} finally {
  await browser.close();
}
console.log(JSON.stringify(report));
process.exit(report.ok ? 0 : 1);

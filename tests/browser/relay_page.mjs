// Drives the relay's page (`GET /relay` as a browser asks for it) in Debian's headless Chromium.
//
//   node relay_page.mjs BASE_URL TASK_EVENT_FILE
//
// TASK_EVENT_FILE holds a job request (kind 5905) already on the relay. The driver opens BASE_URL/relay,
// waits for the board to list that task with its state, selects it with the keyboard, reads the evidence
// chain the page verified, then pastes the event into "Check an event" as it is, with its content altered
// and with its signature altered.
//
// One JSON line on stdout: {"ok":..., "board":{id:state}, "checked":{id:text}, "state":...,
// "chain":[{step,event,id,sig,text}], "checks":{...}, "ms_per_event":..., "problems":[...]}. Exits 1 when ok
// is false: the page logged an error (a CSP refusal, say), asked another origin for anything, or a step
// timed out.
import { readFile } from "node:fs/promises";
import { launch } from "./chromium.mjs";

const [base, eventFile] = process.argv.slice(2);
if (!base || !eventFile) {
  console.error("usage: node relay_page.mjs BASE_URL TASK_EVENT_FILE");
  process.exit(2);
}
const eventText = await readFile(eventFile, "utf8");
const event = JSON.parse(eventText);
const origin = new URL(base).origin;
const problems = [];
const report = { ok: false, board: {}, checked: {}, state: null, chain: [], checks: {}, problems };

const browser = await launch();
try {
  const page = await browser.newPage();
  watch(page);
  const response = await page.goto(base + "/relay", { waitUntil: "load" });
  report.content_type = response.headers()["content-type"];
  report.title = await page.title();
  await readBoard(page);
  await readChain(page);
  await checkPastes(page);
  report.ms_per_event = await timeVerification(page);
  if (process.env.RELAY_PAGE_SCREENSHOT) {
    await page.screenshot({ path: process.env.RELAY_PAGE_SCREENSHOT, fullPage: true });
  }
} catch (error) {
  problems.push("step failed: " + error.message.split("\n")[0]);
} finally {
  await browser.close();
}
report.ok = problems.length === 0;
console.log(JSON.stringify(report));
process.exitCode = report.ok ? 0 : 1;

function watch(page) {
  // Chromium asks for /favicon.ico on its own; the registry has none, and that is not the page's doing.
  const isFavicon = (address) => new URL(address).pathname === "/favicon.ico";
  page.on("pageerror", (error) => problems.push("page error: " + error.message));
  page.on("console", (message) => {
    if (message.type() === "error" && !isFavicon(message.location().url || base)) {
      problems.push("console error: " + message.text());
    }
  });
  page.on("request", (request) => {
    if (new URL(request.url()).origin !== origin) problems.push("request to another origin: " + request.url());
  });
  page.on("websocket", (socket) => {
    const url = new URL(socket.url());
    if (url.host !== new URL(base).host || url.pathname !== "/relay") problems.push("socket to " + socket.url());
  });
}

/** Waits until the board lists the task with a state, and records every row's state. */
async function readBoard(page) {
  const cell = `#board-rows tr[data-task="${event.id}"] td.state`;
  await page.waitForFunction((selector) => {
    const state = document.querySelector(selector);
    return state && state.textContent === "answered";
  }, cell, { timeout: 15_000 });
  const rows = await page.$$eval("#board-rows tr[data-task]", (trs) =>
    trs.map((tr) => [tr.dataset.task, tr.children[4].textContent, tr.children[0].textContent, tr.children[5].textContent]),
  );
  for (const [id, state, shown, checked] of rows) {
    report.board[id] = state;
    report.checked[id] = checked;
    if (!id.startsWith(shown.replace("…", ""))) problems.push(`row ${id} shows ${shown}`);
  }
}

/** Selects the task with the keyboard (its row's button) and reads the chain once the verdict is shown. */
async function readChain(page) {
  const button = page.locator(`#board-rows tr[data-task="${event.id}"]`).getByRole("button");
  await button.focus();
  await page.keyboard.press("Enter");
  await page.waitForSelector('#chain > li[data-step="verdict"]', { timeout: 15_000 });
  report.state = (await page.textContent("#task-state")).trim();
  report.selected = await page.getAttribute(`#board-rows tr[data-task="${event.id}"]`, "aria-current");
  report.chain = await page.$$eval("#chain > li[data-step]", (items) =>
    items.map((li) => ({
      step: li.dataset.step,
      event: li.dataset.event,
      id: li.querySelector(".check-id").textContent,
      sig: li.querySelector(".check-sig").textContent,
      text: li.textContent.replace(/\s+/g, " ").trim(),
    })),
  );
}

/** Pastes the event as signed, with its content altered, and with its signature altered; reads each verdict. */
async function checkPastes(page) {
  const flipped = (event.sig[0] === "0" ? "1" : "0") + event.sig.slice(1);
  const cases = {
    valid: eventText,
    content_altered: JSON.stringify({ ...event, content: event.content + " (edited)" }),
    sig_altered: JSON.stringify({ ...event, sig: flipped }),
    not_json: "{",
  };
  const box = page.getByLabel("Event JSON");
  const checkButton = page.getByRole("button", { name: "Check", exact: true });
  for (const [name, text] of Object.entries(cases)) {
    await box.fill(text);
    await checkButton.click();
    await page.waitForSelector("#check-result[data-valid]", { timeout: 10_000 });
    const shown = (await page.textContent("#check-result")).trim();
    const valid = await page.getAttribute("#check-result", "data-valid");
    if ((valid === "true") !== (shown === "valid")) problems.push(`data-valid=${valid} but the result says ${shown}`);
    report.checks[name] = shown;
  }
}

/** Milliseconds the page's verifier takes per event in this browser, one event at a time. */
async function timeVerification(page) {
  return page.evaluate(async (text) => {
    const event = JSON.parse(text);
    const rounds = 40;
    const started = performance.now();
    for (let i = 0; i < rounds; i++) await window.relayPage.verifyEvent(event);
    return Math.round(((performance.now() - started) / rounds) * 100) / 100;
  }, eventText);
}

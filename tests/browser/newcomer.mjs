// What a newcomer meets after `bazaar demo --serve`, in Debian's headless Chromium. Two phases, one per run:
//
//   node newcomer.mjs panels CHAMBER_URL PANEL_FILL_S
//     Opens the printed URL (CHAMBER_URL) as a newcomer would, while the demo waits for its first viewer,
//     and times each story panel (the paid call, the contract, the dispute) until it fills; each must within
//     PANEL_FILL_S seconds.
//   node newcomer.mjs walk BASE_URL OPERATOR_CREDENTIAL MEMBER_CREDENTIAL [SCREENSHOT_DIR]
//     Walks every page (PAGES) as an anonymous visitor, as a signed-in member and as the operator, at 1280 and
//     390 px: each page is read once its readiness condition holds and no call of its own is in flight, and
//     fails on a `?` placeholder, `undefined`, `NaN`, a console error, a page error or horizontal overflow.
//     Screenshots of every chamber page at both widths (the first screen), as the anonymous visitor sees it, go
//     to SCREENSHOT_DIR.
//
// One JSON line: panels — {"ok", "panels": {name: {seconds, text}}, "problems"}; walk — {"ok", "visited",
// "screenshots", "problems"}. Exits 1 when ok is false.
import { drive } from "./driver.mjs";

const WIDTHS = [1280, 390];
/** How long one page may take to become ready before the walk says so. */
const PAGE_READY_MS = 30_000;
/** Polls of the in-flight counter, this far apart, that must all see nothing in flight. */
const QUIET_POLLS = 3;
const QUIET_POLL_MS = 50;

// Every page a visitor reaches from the navigation.
const PAGES = ["/", "/chamber", "/chamber/story", "/chamber/break", "/chamber/ledger", "/chamber/maker", "/chamber/owner",
  "/chamber/adoption", "/chamber/reprice", "/chamber/architecture", "/chamber/claims", "/chamber/rooms",
  "/passport/verify", "/relay", "/compromises", "/account"];

/**
 * Whether the page at `path` has drawn what it loads first (run in the page, so it holds its own helpers; the
 * pages' CSP allows no string evaluation). Pages with nothing to load are ready once loaded.
 */
function isReady(path) {
  const shown = (id) => { const node = document.getElementById(id); return Boolean(node) && !node.hidden; };
  const said = (id) => { const node = document.getElementById(id); return Boolean(node) && node.textContent.trim().length > 0; };
  const text = (id) => document.getElementById(id).textContent;
  switch (path) {
    case "/chamber": return text("status").startsWith("live") && shown("flow-when") && shown("escrow-when") && shown("dispute-when");
    case "/chamber/story": return said("agent-note") && document.getElementById("s-payments").dataset.filled === "true" && document.querySelectorAll("#unmet li").length > 0;
    case "/chamber/break": return document.querySelectorAll("button[data-attack]").length > 0;
    case "/chamber/ledger": return shown("signin") || ["verified", "broken"].includes(document.getElementById("verdict").dataset.state);
    case "/chamber/maker": return shown("signin") || shown("choose") || document.getElementById("shares").children.length > 0;
    case "/chamber/owner": return shown("signin") || text("status").startsWith("Signed in");
    case "/chamber/adoption": return shown("signin") || said("production-summary");
    case "/chamber/architecture": return !text("trace-status").startsWith("Reading");
    case "/chamber/rooms": return said("status");
    case "/relay": return document.getElementById("connection").dataset.state === "open" && (document.getElementById("board-rows").children.length > 0 || shown("board-empty"));
    default: return document.readyState === "complete";
  }
}

/** Whether the chamber's story panel `name` shows a completed flow and when it happened. */
function panelFilled(name) {
  const shown = (id) => !document.getElementById(id).hidden;
  switch (name) {
    case "paid_call": return document.getElementById("step-settle").dataset.done === "true" && shown("flow-when");
    case "contract": return document.getElementById("escrow-released").dataset.done === "true" && shown("escrow-when");
    default: return [...document.querySelectorAll("#dispute li")].some((li) => li.textContent.startsWith("Executed")) && shown("dispute-when");
  }
}

/** A `?` standing for a value (after a space, a bracket or a sign; never a question's own mark), `undefined`, `NaN`. */
const PLACEHOLDER = /(?:^|[\s(\[×:,=])\?(?=$|[\s)\],.;:])|\bundefined\b|\bNaN\b/m;

/** Counts the page's calls in flight, leaving out streams that never end (SSE, WebSocket). */
function trackCalls(page) {
  const inFlight = new Set();
  const endless = (request) => (request.headers().accept || "").includes("text/event-stream") || request.url().includes("/v1/stream?");
  page.on("request", (request) => { if (!endless(request)) inFlight.add(request); });
  page.on("requestfinished", (request) => inFlight.delete(request));
  page.on("requestfailed", (request) => inFlight.delete(request));
  return inFlight;
}

async function quiet(inFlight) {
  for (let calm = 0; calm < QUIET_POLLS;) {
    await new Promise((resolve) => setTimeout(resolve, QUIET_POLL_MS));
    calm = inFlight.size === 0 ? calm + 1 : 0;
  }
}

async function panels({ args, browser, report, problems }) {
  const [url, fillS] = args;
  const limitMs = Number(fillS) * 1000;
  const page = await browser.newPage({ viewport: { width: 1280, height: 900 } });
  page.on("console", (message) => { if (message.type() === "error") problems.push(`console on /chamber: ${message.text()}`); });
  page.on("pageerror", (error) => problems.push(`page error on /chamber: ${error.message}`));
  const opened = Date.now();
  await page.goto(url, { waitUntil: "load" });
  report.panels = {};
  const panelOf = { paid_call: "flow", contract: "escrow", dispute: "dispute" };
  for (const [name, panel] of Object.entries(panelOf)) {
    try {
      await page.waitForFunction(panelFilled, name, { timeout: Math.max(1, limitMs - (Date.now() - opened)) });
      report.panels[name] = { seconds: (Date.now() - opened) / 1000, text: await page.$eval(`#${panel}-when`, (n) => n.textContent) };
    } catch (_) {
      problems.push(`the ${name} panel did not fill within ${fillS} s`);
    }
  }
  return Object.keys(report.panels).length === 3;
}

async function walk({ args, browser, report, problems }) {
  const [base, operator, member, shots] = args;
  const roles = { anonymous: null, member, operator };
  report.visited = 0;
  report.screenshots = [];
  for (const [role, credential] of Object.entries(roles)) {
    for (const width of WIDTHS) {
      const context = await browser.newContext({ viewport: { width, height: width > 600 ? 900 : 844 } });
      // Signed in as a page's own form would leave it: the credential kept in this tab under each page's key.
      if (credential) {
        await context.addInitScript((c) => { for (const key of ["bazaar.operator", "bazaar.owner", "bazaar.member"]) sessionStorage.setItem(key, c); }, credential);
      }
      const page = await context.newPage();
      const inFlight = trackCalls(page);
      let at = "";
      page.on("console", (message) => { if (message.type() === "error") problems.push(`${role} ${width}px ${at}: console: ${message.text()}`); });
      page.on("pageerror", (error) => problems.push(`${role} ${width}px ${at}: page error: ${error.message}`));
      for (const path of PAGES) {
        at = path;
        const answer = await page.goto(base + path, { waitUntil: "load" });
        if (!answer || answer.status() !== 200) { problems.push(`${role} ${width}px ${path}: status ${answer && answer.status()}`); continue; }
        try {
          await page.waitForFunction(isReady, path, { timeout: PAGE_READY_MS });
        } catch (_) {
          problems.push(`${role} ${width}px ${path}: not ready within ${PAGE_READY_MS / 1000} s`);
        }
        await quiet(inFlight);
        const seen = await page.evaluate(() => ({
          text: document.body.innerText,
          overflow: document.documentElement.scrollWidth - document.documentElement.clientWidth,
        }));
        const placeholder = seen.text.match(PLACEHOLDER);
        if (placeholder) {
          const around = seen.text.slice(Math.max(0, placeholder.index - 60), placeholder.index + 40).replace(/\s+/g, " ");
          problems.push(`${role} ${width}px ${path}: a placeholder in "${around}"`);
        }
        if (seen.overflow > 0) problems.push(`${role} ${width}px ${path}: overflows by ${seen.overflow} px`);
        if (shots && role === "anonymous" && path.startsWith("/chamber")) {
          const name = `${path.replace(/^\//, "").replaceAll("/", "-")}-${width}.png`;
          await page.screenshot({ path: `${shots}/${name}` });
          report.screenshots.push(name);
        }
        report.visited += 1;
      }
      await context.close();
    }
  }
  return report.visited === Object.keys(roles).length * WIDTHS.length * PAGES.length;
}

const phase = process.argv[2];
process.argv.splice(2, 1);
if (phase === "panels") await drive("newcomer.mjs panels CHAMBER_URL PANEL_FILL_S", 2, panels);
else await drive("newcomer.mjs walk BASE_URL OPERATOR_CREDENTIAL MEMBER_CREDENTIAL [SCREENSHOT_DIR]", 3, walk);

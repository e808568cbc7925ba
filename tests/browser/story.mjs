// Drives the market story (`GET /chamber/story`) in Debian's headless Chromium: signs in with the operator's
// credential, presses "Run the story", waits for each section to fill from the live stream, follows the
// approval link the run ends at, approves there with the throwaway hotel owner's credential, and waits for the
// order section to say it was approved. Reads the AI agent button's note, scans the page with axe-core and
// looks at it at phone width.
//
//   node story.mjs BASE_URL OPERATOR_CREDENTIAL [SCREENSHOT_DIR]
//
// One JSON line: {"ok", "sections": {id: filled}, "request", "makers", "offers": [verdicts], "allocation",
// "order", "phones", "link", "decision", "agent_note", "agent_disabled", "axe", "overflow_px", "problems"}.
import { seriousViolations } from "./axe.mjs";
import { drive, phoneFit, watchErrors } from "./driver.mjs";


await drive("story.mjs BASE_URL OPERATOR_CREDENTIAL [SCREENSHOT_DIR]", 2, async ({ args, browser, report, problems }) => {
  const [base, operator, shots] = args;
  const context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
  const page = await context.newPage();
  watchErrors(page, problems);
  await page.goto(`${base}/chamber/story`, { waitUntil: "load" });
  await page.waitForSelector("#signin:not([hidden])", { timeout: 10_000 });
  report.agent_note = await page.textContent("#agent-note");
  report.agent_disabled = await page.$eval("#run-agent", (b) => b.disabled);
  await page.fill("#credential", operator);
  await page.click("#signin button[type=submit]");
  await page.click("#run-story");
  await page.waitForSelector("#approval-link", { timeout: 120_000 });
  for (const id of ["s-request", "s-makers", "s-offers", "s-allocation", "s-order", "s-phones"]) {
    await page.waitForSelector(`#${id}[data-filled="true"]`, { timeout: 15_000 }).catch(() => {});
  }
  await page.waitForFunction(() => document.querySelectorAll("#offers li").length >= 7, null, { timeout: 15_000 }).catch(() => {});
  report.sections = await page.$$eval("section.step", (s) => Object.fromEntries(s.map((n) => [n.id, n.dataset.filled === "true"])));
  report.request = await page.textContent("#s-request");
  report.makers = await page.$$eval("#makers tr", (rows) => rows.map((r) => [...r.children].map((c) => c.textContent)));
  report.offers = await page.$$eval("#offers li", (items) => items.map((li) => li.dataset.verdict));
  report.allocation = await page.textContent("#allocation");
  report.order = await page.textContent("#order");
  report.phones = await page.$$eval("#phones a", (links) => links.map((a) => a.getAttribute("href")));
  report.link = await page.getAttribute("#approval-link", "href");
  const hotel = await page.textContent("#run-status code");
  if (shots) await page.screenshot({ path: `${shots}/story-desktop.png`, fullPage: true });

  // A person approves on the link.
  const approve = await context.newPage();
  await approve.goto(report.link, { waitUntil: "load" });
  await approve.fill("#credential", hotel);
  await approve.click("#load");
  await approve.waitForFunction(() => !document.getElementById("approve").disabled, null, { timeout: 10_000 });
  await approve.click("#approve");
  await page.waitForSelector("#decision", { timeout: 15_000 });
  report.decision = await page.$eval("#decision", (p) => ({ state: p.dataset.state, text: p.textContent }));

  report.axe = await seriousViolations(page);
  const phone = await browser.newContext({ viewport: { width: 390, height: 844 }, colorScheme: "dark" });
  const small = await phone.newPage();
  await small.goto(`${base}/chamber/story`, { waitUntil: "load" });
  await small.evaluate((c) => sessionStorage.setItem("bazaar.operator", c), operator);
  await small.reload({ waitUntil: "load" });
  await small.waitForSelector('#s-order[data-filled="true"]', { timeout: 15_000 }).catch(() => {});
  report.overflow_px = await phoneFit(small, shots && `${shots}/story-phone-dark.png`);
  return problems.length === 0 && report.axe.length === 0 && report.overflow_px <= 0;
});

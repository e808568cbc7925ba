// Drives the adoption page (`GET /chamber/adoption`) in Debian's headless Chromium: signs in as the operator,
// reads the production phase's disputes from the ledger, runs the pilot's proof and the federation proof, scans with
// axe-core.
//
//   node adoption.mjs BASE_URL OPERATOR_CREDENTIAL [SCREENSHOT_DIR]
//
// One JSON line: {"ok", "disputes": [[cells]], "production", "pilot", "pilot_proved", "federation": [lines],
// "federation_proved", "axe", "problems"}.
import { seriousViolations } from "./axe.mjs";
import { drive, watchErrors } from "./driver.mjs";

await drive("adoption.mjs BASE_URL OPERATOR_CREDENTIAL [SCREENSHOT_DIR]", 2, async ({ args, browser, report, problems }) => {
  const [base, operator, shots] = args;
  const page = await browser.newPage();
  watchErrors(page, problems);
  await page.goto(`${base}/chamber/adoption`, { waitUntil: "load" });
  await page.waitForSelector("#signin:not([hidden])", { timeout: 10_000 });
  await page.fill("#credential", operator);
  await page.click("#signin button[type=submit]");
  await page.waitForFunction(() => document.getElementById("production-summary").textContent.length > 0, null, { timeout: 15_000 });
  report.disputes = await page.$$eval("#disputes tr", (rows) => rows.map((r) => [...r.children].map((c) => c.textContent)));
  report.production = await page.textContent("#production-summary");
  await page.click("#run-pilot");
  await page.waitForFunction(() => document.getElementById("pilot").dataset.proved !== undefined, null, { timeout: 120_000 });
  report.pilot = await page.textContent("#pilot-proof");
  report.pilot_proved = await page.$eval("#pilot", (s) => s.dataset.proved === "true");
  await page.click("#run-federation");
  await page.waitForFunction(() => document.getElementById("federation").dataset.proved !== undefined, null, { timeout: 120_000 });
  report.federation = await page.$$eval("#federation-proof li", (items) => items.map((li) => li.textContent));
  report.federation_proved = await page.$eval("#federation", (s) => s.dataset.proved === "true");
  if (shots) await page.screenshot({ path: `${shots}/adoption-desktop.png`, fullPage: true });
  report.axe = await seriousViolations(page);
  return report.axe.length === 0;
});

// Drives the Discover page (`GET /chamber/reprice`) in Debian's headless Chromium: uploads a month of orders
// and reads the price list and margins; uploads a broken file and reads the refusal; scans with axe-core.
//
//   node reprice.mjs BASE_URL ORDERS_CSV BROKEN_CSV
//
// One JSON line: {"ok", "prices": [[cells]], "margins": [text], "error", "result_hidden", "axe", "problems"}.
import { seriousViolations } from "./axe.mjs";
import { drive, watchErrors } from "./driver.mjs";

await drive("reprice.mjs BASE_URL ORDERS_CSV BROKEN_CSV", 3, async ({ args, browser, report, problems }) => {
  const [base, orders, broken] = args;
  const page = await browser.newPage();
  watchErrors(page, problems);
  await page.goto(`${base}/chamber/reprice`, { waitUntil: "load" });
  await page.setInputFiles("#file", orders);
  await page.click("#form button[type=submit]");
  await page.waitForSelector("#result:not([hidden])", { timeout: 10_000 });
  report.prices = await page.$$eval("#prices tr", (rows) => rows.map((r) => [...r.children].map((c) => c.textContent)));
  report.margins = await page.$$eval("#margins li", (items) => items.map((li) => li.textContent));
  report.axe = await seriousViolations(page);
  await page.setInputFiles("#file", broken);
  await page.click("#form button[type=submit]");
  await page.waitForFunction(() => document.getElementById("error").textContent.length > 0, null, { timeout: 10_000 });
  report.error = await page.textContent("#error");
  report.result_hidden = await page.$eval("#result", (r) => r.hidden);
  return report.axe.length === 0;
});

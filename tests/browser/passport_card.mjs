// The passport page's card in Debian's headless Chromium: paste a passport, verify it, read its figures as
// inputs, change the first one and check again.
//
//   node passport_card.mjs BASE_URL PASSPORT_FILE
//
// One JSON line: {"ok", "first", "fields": [paths], "changed", "second", "problems"}.
import { readFile } from "node:fs/promises";
import { seriousViolations } from "./axe.mjs";
import { drive, watchErrors } from "./driver.mjs";

await drive("passport_card.mjs BASE_URL PASSPORT_FILE", 2, async ({ args, browser, report, problems }) => {
  const [base, file] = args;
  const page = await browser.newPage();
  watchErrors(page, problems);
  await page.goto(`${base}/passport/verify`, { waitUntil: "load" });
  await page.fill("#passport", await readFile(file, "utf8"));
  await page.click("#verify");
  await page.waitForSelector("#card:not([hidden])", { timeout: 10_000 });
  report.first = await page.textContent("#result");
  report.fields = await page.$$eval("#figures label", (labels) => labels.map((l) => l.firstChild.textContent));
  const input = await page.$("#figures input");
  report.changed = report.fields[0];
  await input.fill(String(Number(await input.inputValue()) + 1));
  await page.click("#again");
  await page.waitForFunction(() => document.getElementById("result").textContent.startsWith("INVALID"), null, { timeout: 10_000 });
  report.second = await page.textContent("#result");
  report.axe = await seriousViolations(page);
  return report.axe.length === 0;
});

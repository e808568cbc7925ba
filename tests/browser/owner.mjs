// Drives the owners' page (`GET /chamber/owner`) in Debian's headless Chromium: signs in with the owner's
// credential, reads its agents (balances, budgets, stake), the order waiting for its approval and its agents'
// disputes, approves the order there, scans the page with axe-core and looks at it at phone width.
//
//   node owner.mjs BASE_URL OWNER_CREDENTIAL [SCREENSHOT_DIR]
//
// One JSON line: {"ok", "agents": [[cells]], "approvals": [text], "disputes": [text], "approved", "after",
// "axe", "overflow_px", "problems"}.
import { seriousViolations } from "./axe.mjs";
import { drive, phoneFit, watchErrors } from "./driver.mjs";

await drive("owner.mjs BASE_URL OWNER_CREDENTIAL [SCREENSHOT_DIR]", 2, async ({ args, browser, report, problems }) => {
  const [base, credential, shots] = args;
  const context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
  const page = await context.newPage();
  watchErrors(page, problems);
  await page.goto(`${base}/chamber/owner`, { waitUntil: "load" });
  await page.waitForSelector("#signin:not([hidden])", { timeout: 10_000 });
  await page.fill("#credential", credential);
  await page.click("#credential-form button[type=submit]");
  await page.waitForFunction(() => document.getElementById("status").textContent.startsWith("Signed in"), null, { timeout: 10_000 });
  await page.waitForSelector("#disputes .card", { timeout: 10_000 });
  report.agents = await page.$$eval("#agents tr", (rows) => rows.map((r) => [...r.children].map((c) => c.textContent)));
  report.approvals = await page.$$eval("#approvals .card", (cards) => cards.map((c) => c.textContent));
  report.approval_links = await page.$$eval("#approvals .card a", (links) => links.map((a) => a.getAttribute("href")));
  report.dispute_links = await page.$$eval("#disputes .card a", (links) => links.map((a) => a.getAttribute("href")));
  report.disputes = await page.$$eval("#disputes .card", (cards) => cards.map((c) => c.textContent));
  if (shots) await page.screenshot({ path: `${shots}/owner-desktop.png`, fullPage: true });
  await page.click('#approvals button[data-act="approve"]');
  await page.waitForFunction(() => document.getElementById("status").textContent.startsWith("Approved"), null, { timeout: 10_000 });
  report.approved = await page.textContent("#status");
  report.after = await page.textContent("#approvals");
  report.axe = await seriousViolations(page);
  const phone = await browser.newContext({ viewport: { width: 390, height: 844 }, colorScheme: "dark" });
  const small = await phone.newPage();
  await small.goto(`${base}/chamber/owner`, { waitUntil: "load" });
  await small.fill("#credential", credential);
  await small.click("#credential-form button[type=submit]");
  await small.waitForSelector("#disputes .card", { timeout: 10_000 });
  report.overflow_px = await phoneFit(small, shots && `${shots}/owner-phone-dark.png`);
  return problems.length === 0 && report.axe.length === 0 && report.overflow_px <= 0;
});

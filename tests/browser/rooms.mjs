// Drives the rooms page (`GET /chamber/rooms`) in Debian's headless Chromium: signs in with a member's
// credential, reads its channels and badges, opens the plaintext lobby (header, member rail, messages), posts
// there, opens the sealed room (its header, no post box), scans with axe-core.
//
//   node rooms.mjs BASE_URL CREDENTIAL LOBBY_ID SEALED_ID
//
// One JSON line: {"ok", "channels": [text], "lobby": {mode, rail, messages, badge_after}, "sealed": {mode, post_hidden},
// "axe", "problems"}.
import { seriousViolations } from "./axe.mjs";
import { drive, watchErrors } from "./driver.mjs";

await drive("rooms.mjs BASE_URL CREDENTIAL LOBBY_ID SEALED_ID", 4, async ({ args, browser, report, problems }) => {
  const [base, credential, lobby, sealed] = args;
  const page = await browser.newPage();
  watchErrors(page, problems);
  await page.goto(`${base}/chamber/rooms`, { waitUntil: "load" });
  await page.waitForSelector("#signin:not([hidden])", { timeout: 10_000 });
  await page.fill("#credential", credential);
  await page.click("#signin button[type=submit]");
  await page.waitForSelector(`#channels button[data-channel="${lobby}"]`, { timeout: 10_000 });
  report.channels = await page.$$eval("#channels button", (buttons) => buttons.map((b) => b.textContent));
  await page.click(`#channels button[data-channel="${lobby}"]`);
  await page.waitForSelector("#messages li", { timeout: 10_000 });
  await page.fill("#body", "hello from the chamber");
  await page.click("#post button[type=submit]");
  await page.waitForFunction(() => [...document.querySelectorAll("#messages li")].some((li) => li.textContent.includes("hello from the chamber")), null, { timeout: 10_000 });
  report.lobby = {
    mode: await page.textContent("#mode"),
    rail: await page.$$eval("#rail li", (items) => items.map((li) => li.textContent)),
    messages: await page.$$eval("#messages li", (items) => items.map((li) => li.textContent)),
    badge_after: await page.$eval(`#channels button[data-channel="${lobby}"]`, (b) => b.querySelector(".badge")?.textContent ?? null),
  };
  report.axe = await seriousViolations(page);
  await page.click(`#channels button[data-channel="${sealed}"]`);
  await page.waitForFunction(() => { const h = document.getElementById("header"); return h.dataset.sealed === "true" && h.dataset.ready === "true"; }, null, { timeout: 10_000 });
  report.sealed = { mode: await page.textContent("#mode"), post_hidden: await page.$eval("#post", (f) => f.hidden) };
  return report.axe.length === 0;
});

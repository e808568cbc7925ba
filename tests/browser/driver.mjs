// What every chamber driver shares: its arguments, one headless Chromium, a report that collects problems,
// and one JSON line on stdout at the end (exit 1 unless the body says the run was ok).
import { launch } from "./chromium.mjs";

/**
 * Runs `body({args, browser, report, problems})` with at least `needed` arguments (else prints `usage`, exits 2).
 * `body` returns whether the run is ok; a thrown error is a problem, never a pass.
 */
export async function drive(usage, needed, body) {
  const args = process.argv.slice(2);
  if (args.length < needed) {
    console.error(`usage: node ${usage}`);
    process.exit(2);
  }
  const problems = [];
  const report = { ok: false, problems };
  const browser = await launch();
  try {
    report.ok = Boolean(await body({ args, browser, report, problems })) && problems.length === 0;
  } catch (error) {
    problems.push(`driver: ${error.message}`);
    report.ok = false;
  } finally {
    await browser.close();
  }
  console.log(JSON.stringify(report));
  process.exit(report.ok ? 0 : 1);
}

/** Page errors (uncaught exceptions) become problems. */
export function watchErrors(page, problems) {
  page.on("pageerror", (error) => problems.push(`page error: ${error.message}`));
}

/** How far the page overflows a phone's width (≤ 0: it fits), after a screenshot when `path` is given. */
export async function phoneFit(page, path) {
  const overflow = await page.evaluate(() => document.documentElement.scrollWidth - document.documentElement.clientWidth);
  if (path) await page.screenshot({ path, fullPage: true });
  return overflow;
}

// axe-core as every chamber driver runs it: the serious and critical violations on the page as it stands.
import { readFile } from "node:fs/promises";
import { createRequire } from "node:module";

const source = await readFile(createRequire(import.meta.url).resolve("axe-core/axe.min.js"), "utf8");

/** [{id, impact, nodes, help}] for each serious or critical violation on `page` now. */
export async function seriousViolations(page) {
  // Evaluated through the DevTools protocol, not added as a <script>: the pages'
  // Content-Security-Policy allows only their own scripts (by hash), and rightly
  // refuses an injected inline one.
  await page.evaluate(source);
  const found = await page.evaluate(async () => (await globalThis.axe.run()).violations);
  return found
    .filter((v) => v.impact === "serious" || v.impact === "critical")
    .map((v) => ({ id: v.id, impact: v.impact, nodes: v.nodes.length, help: v.help }));
}

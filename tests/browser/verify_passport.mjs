// Drives the registry's passport verifier page in Debian's headless Chromium.
//
//   node verify_passport.mjs URL PASSPORT_FILE...           paste each file, press Verify, print the result line
//   node verify_passport.mjs URL --proof-only PASSPORT_FILE...  run the page's own proof check and print
//                                                            "PROOF VALID <hashData hex>" or "INVALID: <code> <hex>"
//
// One line per file on stdout. Exits non-zero if the page logged an error (a CSP refusal, say), made a
// network request after it loaded, or showed a result whose text and data-valid disagree.
import { readFile } from "node:fs/promises";
import { launch } from "./chromium.mjs";

const [url, ...rest] = process.argv.slice(2);
const proofOnly = rest[0] === "--proof-only";
const files = proofOnly ? rest.slice(1) : rest;
if (!url || files.length === 0) {
  console.error("usage: node verify_passport.mjs URL [--proof-only] PASSPORT_FILE...");
  process.exit(2);
}

const browser = await launch();
const problems = [];
// Chromium asks for /favicon.ico on its own; the registry has none, and that is not the page's doing.
const isFavicon = (address) => new URL(address).pathname === "/favicon.ico";
try {
  const page = await browser.newPage();
  page.on("pageerror", (error) => problems.push("page error: " + error.message));
  page.on("console", (message) => {
    if (message.type() === "error" && !isFavicon(message.location().url || url)) {
      problems.push("console error: " + message.text());
    }
  });
  await page.goto(url, { waitUntil: "load" });
  page.on("request", (request) => {
    if (!isFavicon(request.url())) problems.push("request after load: " + request.url());
  });
  for (const file of files) {
    const text = await readFile(file, "utf8");
    console.log(proofOnly ? await checkProof(page, text) : await pasteAndVerify(page, text));
  }
} finally {
  await browser.close();
}
if (problems.length > 0) {
  console.error(problems.join("\n"));
  process.exitCode = 1;
}

async function pasteAndVerify(page, text) {
  await page.fill("#passport", text);
  await page.click("#verify");
  await page.waitForSelector("#result[data-valid]", { timeout: 10_000 });
  const shown = (await page.textContent("#result")).trim();
  const valid = await page.getAttribute("#result", "data-valid");
  if ((valid === "true") !== (shown === "VALID")) problems.push(`data-valid=${valid} but the result says ${shown}`);
  return shown;
}

async function checkProof(page, text) {
  return page.evaluate(async (text) => {
    const verifier = window.passportVerifier;
    const passport = JSON.parse(text);
    const hash = Array.from(await verifier.hashData(passport), (b) => b.toString(16).padStart(2, "0")).join("");
    try {
      await verifier.verifyProof(passport);
      return "PROOF VALID " + hash;
    } catch (error) {
      return "INVALID: " + error.code + " " + hash;
    }
  }, text);
}

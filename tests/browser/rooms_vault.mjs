// Drives the rooms page's sealing vault (`GET /chamber/rooms`) in Debian's headless Chromium: a member signs in,
// opens a sealed DM (its messages show sealed), is refused another member's key, imports her own key locked by a
// passphrase, reads the sealed message in plaintext with its signature checked, writes a sealed reply; after a
// reload the vault is locked, a wrong passphrase is refused and the right one opens both messages; then the vault
// is forgotten and locked again with a passkey (a virtual authenticator with the PRF extension), and after a
// reload the passkey alone opens it. Scans with axe-core.
//
//   node rooms_vault.mjs BASE_URL CREDENTIAL DM_ID SEED_HEX OTHER_SEED_HEX PASSPHRASE REPLY
//
// BASE_URL must be http://localhost:PORT (WebAuthn refuses IP addresses). One JSON line: {"ok", "before",
// "wrong_key", "opened", "reloaded_locked", "wrong_passphrase", "reopened", "passkey_opened", "axe", "problems"}.
import { seriousViolations } from "./axe.mjs";
import { drive, watchErrors } from "./driver.mjs";

await drive("rooms_vault.mjs BASE_URL CREDENTIAL DM_ID SEED_HEX OTHER_SEED_HEX PASSPHRASE REPLY", 7, async ({ args, browser, report, problems }) => {
  const [base, credential, dm, seed, otherSeed, passphrase, reply] = args;
  const context = await browser.newContext();
  const page = await context.newPage();
  watchErrors(page, problems);
  const cdp = await context.newCDPSession(page);
  await cdp.send("WebAuthn.enable");
  await cdp.send("WebAuthn.addVirtualAuthenticator", {
    options: { protocol: "ctap2", ctap2Version: "ctap2_1", transport: "internal", hasResidentKey: true,
      hasUserVerification: true, isUserVerified: true, automaticPresenceSimulation: true, hasPrf: true },
  });
  const status = async (words) => {
    await page.waitForFunction((w) => document.getElementById("status").textContent.includes(w), words, { timeout: 30_000 })
      .catch(async () => { throw new Error(`waited for "${words}", the page says "${await page.textContent("#status")}"`); });
    return page.textContent("#status");
  };
  const messages = () => page.$$eval("#messages li", (items) => items.map((li) => li.textContent));
  const openDm = async () => {
    await page.waitForSelector(`#channels button[data-channel="${dm}"]`, { timeout: 10_000 });
    await page.click(`#channels button[data-channel="${dm}"]`);
    await page.waitForFunction(() => { const h = document.getElementById("header"); return h.dataset.sealed === "true" && h.dataset.ready === "true"; }, null, { timeout: 10_000 });
  };
  const opened = async (count) => {
    await page.waitForFunction((n) => document.querySelectorAll("#messages li[data-opened=true]").length >= n, count, { timeout: 30_000 });
    return messages();
  };

  await page.goto(`${base}/chamber/rooms`, { waitUntil: "load" });
  await page.waitForSelector("#signin:not([hidden])", { timeout: 10_000 });
  await page.fill("#credential", credential);
  await page.click("#signin button[type=submit]");
  await openDm();
  report.before = { messages: await messages(), create_shown: await page.$eval("#vault-create", (f) => !f.hidden), post_hidden: await page.$eval("#post", (f) => f.hidden) };

  await page.fill("#vault-seed", otherSeed);
  await page.fill("#vault-new-passphrase", passphrase);
  await page.click("#vault-create button[type=submit]");
  report.wrong_key = await status("not the member signed in here");

  await page.fill("#vault-seed", seed);
  await page.fill("#vault-new-passphrase", passphrase);
  await page.click("#vault-create button[type=submit]");
  await opened(1);
  await page.fill("#body", reply);
  await page.click("#post button[type=submit]");
  report.opened = await opened(2);
  report.axe = await seriousViolations(page);

  await page.reload({ waitUntil: "load" });
  await openDm();
  report.reloaded_locked = {
    unlock_shown: await page.$eval("#vault-unlock", (f) => !f.hidden),
    messages: await messages(),
    post_hidden: await page.$eval("#post", (f) => f.hidden),
  };
  await page.fill("#vault-passphrase", `${passphrase}-not`);
  await page.click("#vault-unlock button[type=submit]");
  report.wrong_passphrase = await status("Wrong passphrase");
  await page.fill("#vault-passphrase", passphrase);
  await page.click("#vault-unlock button[type=submit]");
  report.reopened = await opened(2);

  // A passkey for this site (what her sign-in passkey would be), then the vault locked by its PRF instead.
  await page.evaluate(async () => {
    await navigator.credentials.create({ publicKey: {
      challenge: crypto.getRandomValues(new Uint8Array(32)), rp: { name: "Bazaar", id: location.hostname },
      user: { id: crypto.getRandomValues(new Uint8Array(16)), name: "vault", displayName: "vault" },
      pubKeyCredParams: [{ type: "public-key", alg: -7 }], authenticatorSelection: { residentKey: "required", userVerification: "required" },
      extensions: { prf: {} } } });
  });
  await page.click("#vault-forget");
  await status("vault is gone");
  await page.waitForSelector("#vault-create:not([hidden])", { timeout: 10_000 });
  await page.fill("#vault-seed", seed);
  await page.click("#vault-create-passkey");
  await opened(2);
  await page.reload({ waitUntil: "load" });
  await openDm();
  await page.waitForSelector("#vault-unlock-passkey:not([hidden])", { timeout: 10_000 });
  await page.click("#vault-unlock-passkey");
  report.passkey_opened = await opened(2);
  return report.axe.length === 0;
});

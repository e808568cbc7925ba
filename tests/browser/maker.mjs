// The maker's phone (`GET /chamber/maker`) in Debian's headless Chromium at phone size, with a CDP virtual
// authenticator: the maker (the person who owns the seller agent) registers a passkey on /account with her
// owner credential, opens her phone page, signs in with the passkey alone, reads her share in her language,
// "photographs" her courier receipt (a PNG set on the capture input) and sends it as proof, then reads her
// payment. axe-core scans the page.
//
//   node maker.mjs BASE_URL OWNER_CREDENTIAL AGENT_HANDLE [SCREENSHOT_DIR]
//
// BASE_URL must be http://localhost:PORT (WebAuthn refuses IP addresses). One JSON line on stdout:
// {"ok", "lang", "held", "capture", "accept", "paid", "paid_note", "axe", "overflow_px", "problems"}.
import { seriousViolations } from "./axe.mjs";
import { drive, phoneFit, watchErrors } from "./driver.mjs";

// A 1×1 PNG: the "photograph" of the courier receipt.
const receipt = Buffer.from("iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==", "base64");

await drive("maker.mjs BASE_URL OWNER_CREDENTIAL AGENT_HANDLE [SCREENSHOT_DIR]", 3, async ({ args, browser, report, problems }) => {
  const [base, credential, agent, shots] = args;
  const context = await browser.newContext({ viewport: { width: 390, height: 844 }, isMobile: true, hasTouch: true });
  const page = await context.newPage();
  watchErrors(page, problems);
  const cdp = await context.newCDPSession(page);
  await cdp.send("WebAuthn.enable", { enableUI: false });
  await cdp.send("WebAuthn.addVirtualAuthenticator", {
    options: { protocol: "ctap2", ctap2Version: "ctap2_1", transport: "internal", hasResidentKey: true,
      hasUserVerification: true, isUserVerified: true, automaticPresenceSimulation: true },
  });
  await page.goto(`${base}/account`, { waitUntil: "load" });
  await page.fill("#credential", credential);
  await page.click("#register");
  await page.waitForFunction(() => document.getElementById("status").textContent.includes("Passkey registered"), null, { timeout: 15_000 });

  await page.goto(`${base}/chamber/maker?agent=${encodeURIComponent(agent)}`, { waitUntil: "load" });
  await page.waitForSelector("#signin:not([hidden])", { timeout: 10_000 });
  await page.click("#sign-in");
  await page.waitForSelector(".share", { timeout: 15_000 });
  report.lang = await page.evaluate(() => document.documentElement.lang);
  report.held = await page.textContent(".share");
  const input = await page.$(".share input[type=file]");
  report.capture = await input.getAttribute("capture");
  report.accept = await input.getAttribute("accept");
  if (shots) await page.screenshot({ path: `${shots}/maker-phone-held.png`, fullPage: true });
  await page.fill(".share input[type=text]", "TRK-PHONE-1");
  await input.setInputFiles({ name: "receipt.png", mimeType: "image/png", buffer: receipt });
  await page.click(".share button[type=submit]");
  await page.waitForSelector('.share[data-state="paid"]', { timeout: 15_000 });
  report.paid = await page.textContent(".share .paid");
  report.paid_note = await page.textContent('.share[data-state="paid"] .muted');
  report.overflow_px = await phoneFit(page, shots && `${shots}/maker-phone-paid.png`);
  report.axe = await seriousViolations(page);
  return problems.length === 0 && report.axe.length === 0 && report.overflow_px <= 0;
});

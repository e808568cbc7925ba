// Passkeys in Debian's headless Chromium with a CDP virtual authenticator
// (resident keys, user verification): register on /account with the owner's
// credential, sign in usernameless on /approve/{order}, approve the order with
// the session alone, try a cross-origin request with the session, sign out.
//
//   node passkey.mjs BASE_URL OWNER_CREDENTIAL ORDER_ID
//
// BASE_URL must be http://localhost:PORT (WebAuthn refuses IP addresses).
// Prints one JSON object on stdout; exits non-zero on any failure or page error.
import { launch } from "./chromium.mjs";

const [base, credential, order] = process.argv.slice(2);
if (!base || !credential || !order) {
  console.error("usage: node passkey.mjs BASE_URL OWNER_CREDENTIAL ORDER_ID");
  process.exit(2);
}
const browser = await launch();
const problems = [];
try {
  const context = await browser.newContext();
  const page = await context.newPage();
  page.on("pageerror", (error) => problems.push("page error: " + error.message));
  const cdp = await context.newCDPSession(page);
  await cdp.send("WebAuthn.enable", { enableUI: false });
  const { authenticatorId } = await cdp.send("WebAuthn.addVirtualAuthenticator", {
    options: {
      protocol: "ctap2", ctap2Version: "ctap2_1", transport: "internal",
      hasResidentKey: true, hasUserVerification: true, isUserVerified: true, automaticPresenceSimulation: true,
    },
  });
  const status = async (expected) => {
    await page.waitForFunction((words) => document.getElementById("status").textContent.includes(words), expected, { timeout: 15_000 })
      .catch(async () => { throw new Error(`waited for "${expected}", the page says "${await page.textContent("#status")}"`); });
    return page.textContent("#status");
  };

  await page.goto(base + "/account", { waitUntil: "load" });
  await page.fill("#credential", credential);
  await page.click("#register");
  const registered = await status("Passkey registered");
  const stored = (await cdp.send("WebAuthn.getCredentials", { authenticatorId })).credentials;

  await page.goto(base + "/approve/" + encodeURIComponent(order), { waitUntil: "load" });
  await page.click("#passkey");
  const signedIn = await status("Signed in as");
  await page.waitForFunction(() => !document.getElementById("approve").disabled, null, { timeout: 15_000 });
  const cookie = (await context.cookies()).find((c) => c.name === "bazaar_session");
  await page.click("#approve");
  const approved = await status("Approved");

  // The session from another origin: refused, whatever the cookie.
  const foreign = await context.request.post(base + "/v1/orders/" + encodeURIComponent(order) + "/decline", {
    headers: { origin: "http://attacker.example" },
  });
  const foreignBody = await foreign.json().catch(() => ({}));

  await page.goto(base + "/account", { waitUntil: "load" });
  const meSignedIn = await page.evaluate(() => fetch("/v1/me").then((r) => r.status));
  await page.click("#sign-out");
  await status("Signed out");
  const meAfter = await page.evaluate(() => fetch("/v1/me").then((r) => r.status));

  console.log(JSON.stringify({
    registered, signed_in: signedIn, approved,
    resident_credentials: stored.filter((c) => c.isResidentCredential).length,
    cookie: cookie && { http_only: cookie.httpOnly, same_site: cookie.sameSite, secure: cookie.secure, path: cookie.path },
    foreign: { status: foreign.status(), code: foreignBody.code },
    me_signed_in: meSignedIn, me_after_sign_out: meAfter,
  }));
} catch (error) {
  problems.push(error.message);
} finally {
  await browser.close();
}
if (problems.length) {
  console.error(problems.join("\n"));
  process.exit(1);
}

// The NIP-90 job flow against Bazaar's Nostr relay, driven by the unmodified npm `nostr-tools`
// client (nothing here speaks the wire protocol by hand), so the suite checks the relay against a
// client nobody here wrote.
//
//   node jobs.mjs post  <ws-url> <state-file>   publish a directed job and play it through
//   node jobs.mjs wait  <ws-url> <state-file>   a fresh process, no asker secret: read the job back
//   node jobs.mjs nip11 <ws-url>                the relay information document
//
// Prints exactly one JSON line on stdout: {"ok":true,...} and exit status 0, or
// {"ok":false,"step":"...","error":"..."} and exit status 1 at the first failed expectation.
// Every await has a 10 s limit. Anything else (NOTICEs, warnings) goes to stderr.
import WebSocket from "ws";
import { readFileSync, writeFileSync } from "node:fs";
import { Relay, useWebSocketImplementation as useRelayWebSocket } from "nostr-tools/relay";
import { useWebSocketImplementation as usePoolWebSocket } from "nostr-tools/pool";
import { finalizeEvent, generateSecretKey, getPublicKey, verifyEvent } from "nostr-tools/pure";
// The same functions as @noble/hashes/utils.js, re-exported by nostr-tools (a direct dependency).
import { bytesToHex, hexToBytes } from "nostr-tools/utils";

// Node 20 has no global WebSocket.
useRelayWebSocket(WebSocket);
usePoolWebSocket(WebSocket);

const TIMEOUT_MS = 10_000;
const JOB_KIND = 5905;
const RESULT_KIND = 6905;
const FEEDBACK_KIND = 7000;
const WORKFLOW = "brief-script-delivery/v1";
const PROMPT = "Write a two-line script";
const RESULT_CONTENT = "Line one.\nLine two.";

// stdout carries the one JSON line; nostr-tools logs NOTICEs with console.debug, so every other
// console output is moved to stderr.
for (const name of ["log", "info", "debug"]) console[name] = (...args) => console.error(...args);

let step = "start";
let finished = false;
const notices = [];

function emit(result, code) {
  if (finished) return;
  finished = true;
  process.stdout.write(JSON.stringify(result) + "\n", () => process.exit(code));
  // If the write callback never comes (a closed pipe), leave anyway.
  setTimeout(() => process.exit(code), 1000).unref();
}

class Failure extends Error {}

function describe(err) {
  if (err instanceof Error) {
    const text = err.message || err.name || String(err);
    // fetch's "fetch failed" carries the reason (ECONNREFUSED, ...) in its cause.
    return err.cause ? `${text}: ${describe(err.cause)}` : text;
  }
  if (typeof err === "string") return err;
  try {
    return JSON.stringify(err);
  } catch {
    return String(err);
  }
}

function fail(error) {
  const out = { ok: false, step, error: describe(error) };
  if (notices.length) out.notices = notices;
  emit(out, 1);
}

function succeed(details) {
  const out = { ok: true, ...details };
  if (notices.length) out.notices = notices;
  emit(out, 0);
}

process.on("unhandledRejection", (err) => fail(`unhandled rejection: ${describe(err)}`));
process.on("uncaughtException", (err) => fail(`uncaught exception: ${describe(err)}`));

function expect(condition, message) {
  if (!condition) throw new Failure(message);
}

// Every await goes through this: a relay that never answers fails the step, it does not hang.
function within(promise, what, ms = TIMEOUT_MS) {
  let handle;
  const timer = new Promise((_, reject) => {
    handle = setTimeout(() => reject(new Failure(`timed out after ${ms / 1000} s ${what}`)), ms);
  });
  return Promise.race([promise, timer]).finally(() => clearTimeout(handle));
}

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
const now = () => Math.floor(Date.now() / 1000);

// Waits until the clock is past `previous` (at most about a second), so created_at strictly increases.
async function secondAfter(previous) {
  while (now() <= previous) await within(sleep(50), "waiting for the clock");
  return now();
}

// The checks use a JSON copy: finalizeEvent marks the object it signs as verified (a symbol that an
// object spread copies), and verifyEvent trusts that mark.
const plain = (event) => JSON.parse(JSON.stringify(event));
const verified = (event) => verifyEvent(plain(event));
const tagValues = (event, name) => event.tags.filter((t) => t[0] === name).map((t) => t[1]);
const short = (id) => id.slice(0, 12);

async function connect(url) {
  step = "connect";
  // nostr-tools' own connect timeout is only a backstop: when it fires it closes the socket
  // while it is still connecting, which makes ws throw an uncaught error.
  const relay = await within(Relay.connect(url, { timeout: TIMEOUT_MS + 1_000 }), `connecting to ${url}`);
  relay.onnotice = (message) => {
    notices.push(message);
    console.error(`NOTICE from ${url}: ${message}`);
  };
  // Our own 10 s limits fire first; nostr-tools' would otherwise answer a missing EOSE after
  // 4.4 s by calling oneose anyway, and a missing OK with a generic "publish timed out".
  relay.baseEoseTimeout = 3_600_000;
  relay.publishTimeout = TIMEOUT_MS + 1_000;
  return relay;
}

// relay.publish resolves with the OK message when the relay says true, and rejects with
// Error(message) when it says false (or the connection closes, or nostr-tools' own timer fires).
async function publishAccepted(relay, event, what) {
  try {
    const message = await within(relay.publish(event), `waiting for OK to ${what}`);
    return message ?? "";
  } catch (err) {
    if (err instanceof Failure) throw err;
    if (!relay.connected) throw new Failure(`${what}: the connection closed before OK (${describe(err)})`);
    throw new Failure(`${what}: relay refused (OK false): ${describe(err)}`);
  }
}

async function publishRefused(relay, event, what, prefix) {
  let message;
  try {
    message = await within(relay.publish(event), `waiting for OK to ${what}`);
  } catch (err) {
    if (err instanceof Failure) throw err;
    const reason = describe(err);
    if (!relay.connected) throw new Failure(`${what}: the connection closed before OK (${reason})`);
    expect(reason.startsWith(prefix), `${what}: refused, but the reason ${JSON.stringify(reason)} does not start with ${JSON.stringify(prefix)}`);
    return reason;
  }
  throw new Failure(`${what}: relay accepted it (OK true, ${JSON.stringify(message ?? "")}), expected OK false "${prefix} ..."`);
}

// A subscription that keeps what arrives before and after EOSE. Only a real EOSE from the relay
// ends the stored part (see baseEoseTimeout above); events that fail nostr-tools' own check
// (signature, or not matching the filters) are kept apart and count as a failure.
function open(relay, filters, label) {
  expect(relay.connected, `the connection to the relay is closed before subscribing ${label}`);
  const s = { stored: [], live: [], invalid: [], eosed: false, closedReason: null, waiters: [] };
  let eoseDone;
  let eoseFailed;
  s.eose = new Promise((resolve, reject) => {
    eoseDone = resolve;
    eoseFailed = reject;
  });
  s.eose.catch(() => {}); // awaited later; a CLOSED before then must not count as unhandled
  s.sub = relay.subscribe(filters, {
    label,
    onevent(event) {
      (s.eosed ? s.live : s.stored).push(event);
      s.waiters = s.waiters.filter((w) => !(w.match(event) && (w.resolve(event), true)));
    },
    oninvalidevent(event) {
      s.invalid.push(event);
    },
    oneose() {
      s.eosed = true;
      eoseDone();
    },
    onclose(reason) {
      s.closedReason = reason;
      eoseFailed(new Failure(`subscription ${label} closed by the relay before EOSE: ${reason}`));
      for (const w of s.waiters) w.reject(new Failure(`subscription ${label} closed: ${reason}`));
      s.waiters = [];
    },
  });
  s.untilEose = () => within(s.eose, `waiting for EOSE on ${label}`);
  s.next = (match, what) => {
    const seen = [...s.stored, ...s.live].find(match);
    if (seen) return Promise.resolve(seen);
    if (s.closedReason !== null) return Promise.reject(new Failure(`subscription ${label} closed: ${s.closedReason}`));
    const p = new Promise((resolve, reject) => s.waiters.push({ match, resolve, reject }));
    return within(p, what);
  };
  s.checkValid = () => {
    expect(
      s.invalid.length === 0,
      `${label}: the relay sent ${s.invalid.length} event(s) that fail verification or do not match the filters: ${s.invalid.map((e) => short(String(e?.id))).join(", ")}`,
    );
  };
  return s;
}

function jobTemplate(tags) {
  return { kind: JOB_KIND, created_at: now(), tags, content: "" };
}

async function post(url, stateFile) {
  step = "keys";
  const asker = generateSecretKey();
  const workerA = generateSecretKey();
  const workerB = generateSecretKey();
  const askerPk = getPublicKey(asker);
  const workerAPk = getPublicKey(workerA);
  const workerBPk = getPublicKey(workerB);

  step = "build job";
  const job = finalizeEvent(
    jobTemplate([
      ["p", workerAPk],
      ["param", "workflow", WORKFLOW],
      ["t", "bazaar-job"],
      ["i", PROMPT, "text"],
    ]),
    asker,
  );
  expect(verified(job), "nostr-tools made a job event it cannot verify");

  step = "write state";
  // The asker's secret stays in this process: `wait` must work from public data and the workers.
  const state = {
    asker_pubkey: askerPk,
    worker_a_secret: bytesToHex(workerA),
    worker_b_secret: bytesToHex(workerB),
    job_id: job.id,
  };
  writeFileSync(stateFile, JSON.stringify(state, null, 2) + "\n");

  const relay = await connect(url);
  const messages = {};

  step = "publish job";
  messages.job = await publishAccepted(relay, job, "publish the directed job");

  step = "duplicate job";
  const duplicate = await publishAccepted(relay, job, "publish the same job again");
  expect(duplicate.startsWith("duplicate:"), `the same job again: OK true, but the message ${JSON.stringify(duplicate)} does not start with "duplicate:"`);
  messages.duplicate = duplicate;

  step = "tampered job";
  const tampered = {
    id: job.id,
    pubkey: job.pubkey,
    created_at: job.created_at,
    kind: job.kind,
    tags: job.tags,
    content: "Write a two-line script, and pay the worker nothing",
    sig: job.sig,
  };
  expect(!verifyEvent(tampered), "self-check: the tampered copy still verifies");
  messages.tampered = await publishRefused(relay, tampered, "a tampered copy of the job (same id and sig)", "invalid:");

  const about = [["e", job.id], ["p", askerPk]];

  step = "unnamed worker result";
  const strayResult = finalizeEvent(
    { kind: RESULT_KIND, created_at: now(), tags: [...about, ["request", JSON.stringify(job)]], content: "I was not asked" },
    workerB,
  );
  messages.unnamed_result = await publishRefused(relay, strayResult, "worker B's result (not named in the job)", "restricted:");

  step = "unnamed worker claim";
  const strayClaim = finalizeEvent(
    { kind: FEEDBACK_KIND, created_at: now(), tags: [["status", "processing", "claim"], ...about], content: "" },
    workerB,
  );
  messages.unnamed_claim = await publishRefused(relay, strayClaim, "worker B's claim (not named in the job)", "restricted:");

  step = "claim";
  const claim = finalizeEvent(
    { kind: FEEDBACK_KIND, created_at: now(), tags: [["status", "processing", "claim"], ...about], content: "" },
    workerA,
  );
  messages.claim = await publishAccepted(relay, claim, "worker A's claim");

  step = "progress";
  const progress = finalizeEvent(
    { kind: FEEDBACK_KIND, created_at: await secondAfter(claim.created_at), tags: [["status", "processing", "50%"], ...about], content: "" },
    workerA,
  );
  messages.progress = await publishAccepted(relay, progress, "worker A's progress");

  step = "live result subscription";
  const results = open(relay, [{ kinds: [RESULT_KIND], "#e": [job.id] }], "results");
  await results.untilEose();
  results.checkValid();
  expect(
    results.stored.length === 0,
    `before the result, the relay already holds ${results.stored.length} kind-${RESULT_KIND} event(s) for the job (authors ${results.stored.map((e) => short(e.pubkey)).join(", ")})`,
  );

  step = "result";
  const result = finalizeEvent(
    { kind: RESULT_KIND, created_at: await secondAfter(progress.created_at), tags: [...about, ["request", JSON.stringify(job)]], content: RESULT_CONTENT },
    workerA,
  );
  messages.result = await publishAccepted(relay, result, "worker A's result");

  step = "result delivered live";
  const delivered = await results.next((e) => e.id === result.id, "for the result on the live subscription");
  results.checkValid();
  expect(results.live.some((e) => e.id === result.id), "the result came before EOSE, not live");
  expect(delivered.content === RESULT_CONTENT, `the live result's content is ${JSON.stringify(delivered.content)}`);
  expect(verified(delivered), "the live result does not verify");
  results.sub.close();

  step = "write state";
  writeFileSync(stateFile, JSON.stringify({ ...state, result_id: result.id }, null, 2) + "\n");

  step = "limit 0";
  // A job for this kind is stored now, so an empty answer shows limit 0 at work.
  const fresh = open(relay, [{ kinds: [JOB_KIND], limit: 0 }], "limit0");
  await fresh.untilEose();
  fresh.checkValid();
  expect(fresh.stored.length === 0, `limit 0: the relay sent ${fresh.stored.length} stored event(s) before EOSE`);

  step = "limit 0 stays live";
  const openJob = finalizeEvent(
    jobTemplate([
      ["param", "workflow", WORKFLOW],
      ["t", "bazaar-job"],
      ["i", PROMPT, "text"],
    ]),
    asker,
  );
  messages.undirected_job = await publishAccepted(relay, openJob, "publish an undirected job");
  const arrived = await fresh.next((e) => e.id === openJob.id, "for the new job on the limit-0 subscription");
  fresh.checkValid();
  expect(verified(arrived), "the job delivered on the limit-0 subscription does not verify");
  expect(fresh.closedReason === null, `the limit-0 subscription was closed: ${fresh.closedReason}`);
  fresh.sub.close();

  // The canonical id covers every escape class: NIP-01's short escapes, other C0
  // controls (\u00xx), DEL, "/" and U+2028 verbatim, astral characters. nostr-tools
  // hashes JSON.stringify's bytes; the relay recomputes from parsed values.
  step = "escapes";
  const tricky = finalizeEvent(
    { kind: 1, created_at: Math.floor(Date.now() / 1000), content: 'q"b\\n\nr\rt\tb\bf\f \u0000\u001f\u007f / \u2028 🧵 é',
      tags: [["t", "escapes/\u2028\u0001"]] },
    asker,
  );
  messages.escapes = await publishAccepted(relay, tricky, "publish an event with every escape class");

  step = "close";
  relay.close();
  succeed({
    phase: "post",
    job_id: job.id,
    result_id: result.id,
    undirected_job_id: openJob.id,
    asker: askerPk,
    worker_a: workerAPk,
    worker_b: workerBPk,
    messages,
  });
}

// answered: a result from an author the job names in its p tags; claimed: a "processing" status
// from a named author; otherwise pending.
function deriveState(job, events) {
  const named = new Set(tagValues(job, "p"));
  const about = (e) => tagValues(e, "e").includes(job.id);
  if (events.some((e) => e.kind === RESULT_KIND && about(e) && named.has(e.pubkey))) return "answered";
  if (events.some((e) => e.kind === FEEDBACK_KIND && about(e) && named.has(e.pubkey) && tagValues(e, "status").includes("processing"))) {
    return "claimed";
  }
  return "pending";
}

function readState(stateFile) {
  step = "read state";
  const state = JSON.parse(readFileSync(stateFile, "utf8"));
  for (const key of ["asker_pubkey", "worker_a_secret", "worker_b_secret", "job_id"]) {
    expect(typeof state[key] === "string" && /^[0-9a-f]{64}$/.test(state[key]), `state file: ${key} is not 64 lowercase hex characters`);
  }
  const extra = Object.keys(state).filter((k) => k.startsWith("asker") && k !== "asker_pubkey");
  expect(extra.length === 0, `state file holds more about the asker than the public key: ${extra.join(", ")}`);
  return state;
}

async function wait(url, stateFile) {
  const state = readState(stateFile);
  const workerAPk = getPublicKey(hexToBytes(state.worker_a_secret));
  const workerBPk = getPublicKey(hexToBytes(state.worker_b_secret));
  const jobId = state.job_id;

  const relay = await connect(url);

  step = "read job";
  const read = open(relay, [{ ids: [jobId] }, { kinds: [FEEDBACK_KIND, RESULT_KIND], "#e": [jobId] }], "job");
  await read.untilEose();
  read.checkValid();
  read.sub.close();
  const byId = new Map();
  for (const e of read.stored) byId.set(e.id, e);
  const events = [...byId.values()];

  step = "verify";
  for (const e of events) expect(verified(e), `event ${e.id} (kind ${e.kind}) does not verify`);

  step = "job";
  const job = byId.get(jobId);
  expect(job, "the relay did not return the job for {ids:[job_id]}");
  expect(job.kind === JOB_KIND, `the job has kind ${job.kind}`);
  expect(job.pubkey === state.asker_pubkey, "the job's author is not the asker");
  expect(tagValues(job, "p").includes(workerAPk), "the job does not name worker A");

  step = "state";
  const derived = deriveState(job, events);
  const results = events.filter((e) => e.kind === RESULT_KIND);
  const feedback = events.filter((e) => e.kind === FEEDBACK_KIND);
  expect(derived === "answered", `derived state is ${derived}, expected answered`);
  expect(!events.some((e) => e.pubkey === workerBPk), `the relay returned ${events.filter((e) => e.pubkey === workerBPk).length} event(s) by worker B, who is not named`);
  expect(results.length === 1, `${results.length} results, expected exactly 1`);
  const [result] = results;
  expect(result.pubkey === workerAPk, "the result is not worker A's");
  expect(result.content === RESULT_CONTENT, `the result's content is ${JSON.stringify(result.content)}`);
  expect(!state.result_id || result.id === state.result_id, "the result is not the one `post` published");
  let request;
  try {
    request = JSON.parse(tagValues(result, "request")[0] ?? "null");
  } catch {
    request = null;
  }
  expect(request?.id === jobId, "the result's request tag does not carry the job");
  expect(feedback.length === 2, `${feedback.length} feedback events, expected 2 (claim and progress)`);
  expect(feedback.every((e) => e.pubkey === workerAPk), "feedback from someone other than worker A");
  const statuses = feedback.map((e) => e.tags.find((t) => t[0] === "status")?.slice(1).join(" ")).sort();
  expect(JSON.stringify(statuses) === JSON.stringify(["processing 50%", "processing claim"]), `feedback statuses are ${JSON.stringify(statuses)}`);

  step = "since";
  // Both filters match the result; whatever the relay sends, dedupe by id leaves it once.
  const since = result.created_at;
  const again = open(relay, [{ ids: [result.id], since }, { kinds: [RESULT_KIND], "#e": [jobId], since }], "since");
  await again.untilEose();
  again.checkValid();
  again.sub.close();
  const sinceIds = [...new Set(again.stored.map((e) => e.id))];
  expect(
    sinceIds.length === 1 && sinceIds[0] === result.id,
    `since ${since}: after dedupe got ${sinceIds.length} event(s) (${sinceIds.map(short).join(", ")}), expected the result once`,
  );

  step = "close";
  relay.close();
  succeed({
    phase: "wait",
    state: derived,
    results: results.length,
    feedback: feedback.length,
    job_id: jobId,
    result_id: result.id,
    events_sent: read.stored.length,
    since_events_sent: again.stored.length,
  });
}

async function nip11(url) {
  step = "nip11 url";
  const http = new URL(url);
  expect(http.protocol === "ws:" || http.protocol === "wss:", `not a ws:// or wss:// url: ${url}`);
  http.protocol = http.protocol === "ws:" ? "http:" : "https:";

  step = "nip11 fetch";
  const response = await within(
    fetch(http, { headers: { Accept: "application/nostr+json" }, signal: AbortSignal.timeout(TIMEOUT_MS + 1_000) }),
    `fetching ${http}`,
  );
  const body = await within(response.text(), `reading ${http}`);
  expect(response.ok, `${http} answered ${response.status}: ${body.slice(0, 200)}`);

  step = "nip11 document";
  let info;
  try {
    info = JSON.parse(body);
  } catch {
    throw new Failure(`not JSON: ${body.slice(0, 200)}`);
  }
  expect(info && typeof info === "object" && !Array.isArray(info), "the document is not a JSON object");
  const nips = info.supported_nips;
  expect(Array.isArray(nips), "supported_nips is not an array");
  const missing = [1, 9, 11, 40, 70].filter((n) => !nips.includes(n));
  expect(missing.length === 0, `supported_nips ${JSON.stringify(nips)} lacks ${missing.join(", ")}`);
  const limitation = info.limitation;
  expect(limitation && typeof limitation === "object", "no limitation object");
  for (const key of ["max_message_length", "max_subscriptions", "max_limit"]) {
    expect(Number.isInteger(limitation[key]) && limitation[key] > 0, `limitation.${key} is ${JSON.stringify(limitation[key])}, expected a positive integer`);
  }

  step = "nip11 cors";
  const origin = response.headers.get("access-control-allow-origin");
  expect(origin !== null, "no Access-Control-Allow-Origin header");

  succeed({
    phase: "nip11",
    name: info.name ?? null,
    supported_nips: nips,
    limitation: {
      max_message_length: limitation.max_message_length,
      max_subscriptions: limitation.max_subscriptions,
      max_limit: limitation.max_limit,
    },
    access_control_allow_origin: origin,
    content_type: response.headers.get("content-type"),
  });
}

async function main() {
  step = "args";
  const [phase, url, stateFile] = process.argv.slice(2);
  const usage = "usage: node jobs.mjs post|wait <ws-url> <state-file> | node jobs.mjs nip11 <ws-url>";
  expect(typeof url === "string" && /^wss?:\/\//.test(url), usage);
  if (phase === "post" || phase === "wait") expect(typeof stateFile === "string" && stateFile.length > 0, usage);
  if (phase === "post") return post(url, stateFile);
  if (phase === "wait") return wait(url, stateFile);
  if (phase === "nip11") return nip11(url);
  throw new Failure(usage);
}

main().catch(fail);

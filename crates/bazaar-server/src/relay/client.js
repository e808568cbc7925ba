// The relay page's client (`/relay` with `Accept: text/html`): reads the job board, a task and its
// evidence chain from this relay's WebSocket, and verifies every event in the browser with
// ./verify.mjs before it counts. Nothing here writes to the relay; every value from an event is
// written into the page as text, never as markup.
import { verifyEvent } from "./verify.mjs";

const JOB_REQUEST = 5905;
const JOB_RESULT = 6905;
const JOB_FEEDBACK = 7000;
const LABEL = 1985;
const BOARD_LIMIT = 50;
const WAIT_MS = 10_000;
const HEX64 = /^[0-9a-f]{64}$/;

const $ = (id) => document.getElementById(id);

// ---- events and their checks -------------------------------------------------------------------

const checks = new Map();

/** The in-browser check of one event, computed once per distinct event. */
function check(event) {
  const key = JSON.stringify(event);
  if (!checks.has(key)) checks.set(key, verifyEvent(event));
  return checks.get(key);
}

async function verifiedOnly(events) {
  const results = await Promise.all(events.map(check));
  return events.filter((_, i) => results[i].verdict === "valid");
}

const tagValues = (event, name) =>
  event.tags.filter((tag) => tag[0] === name && tag.length >= 2).map((tag) => tag[1]);
const firstTag = (event, name) => tagValues(event, name)[0];
const names = (event, id) => tagValues(event, "e").includes(id);
const param = (event, name) => {
  const tag = event.tags.find((t) => t[0] === "param" && t[1] === name && t.length >= 3);
  return tag ? tag[2] : null;
};
const workersOf = (job) => tagValues(job, "p").filter((key) => HEX64.test(key));
const eligible = (job, author) => {
  const workers = workersOf(job);
  return workers.length === 0 || workers.includes(author);
};
const byTime = (a, b) => a.created_at - b.created_at || (a.id < b.id ? -1 : a.id > b.id ? 1 : 0);
const short = (hex) => (typeof hex === "string" ? hex.slice(0, 12) + "…" : "?");
const when = (seconds) => new Date(seconds * 1000).toISOString().slice(0, 19).replace("T", " ") + " UTC";
const parentOf = (event) => {
  const tag = event.tags.find((t) => t[0] === "e" && t[3] === "parent");
  return tag ? tag[1] : null;
};

function artifactOf(event) {
  const tag = event.tags.find((t) => t[0] === "artifact" && t.length >= 3);
  return tag && HEX64.test(tag[2].toLowerCase()) ? { url: tag[1], sha256: tag[2].toLowerCase() } : null;
}

/**
 * A task's state from verified events, as the relay's read model derives it: answered when a named
 * worker (anyone, when none is named) answered; claimed when such a worker's latest feedback is
 * `processing`; else pending.
 */
function deriveState(job, related) {
  const mine = related.filter((e) => e.id !== job.id && names(e, job.id));
  const answers = mine.filter((e) => e.kind === job.kind + 1000 && eligible(job, e.pubkey));
  if (answers.length > 0) return { state: "answered", answers: answers.sort(byTime) };
  const latest = new Map();
  mine
    .filter((e) => e.kind === JOB_FEEDBACK && eligible(job, e.pubkey))
    .sort(byTime)
    .forEach((e) => latest.set(e.pubkey, e));
  const working = [...latest.values()].some((e) => firstTag(e, "status") === "processing");
  return { state: working ? "claimed" : "pending", answers: [] };
}

// ---- the relay connection ----------------------------------------------------------------------

class RelayConnection {
  constructor(url, onStatus) {
    this.url = url;
    this.onStatus = onStatus;
    this.subscriptions = new Map();
    this.counter = 0;
    this.socket = null;
    this.connect();
  }

  connect() {
    this.onStatus("connecting", "Connecting to the relay…");
    const socket = new WebSocket(this.url);
    this.socket = socket;
    socket.addEventListener("open", () => {
      this.onStatus("open", "Connected to " + this.url);
      for (const [sub, entry] of this.subscriptions) this.send(["REQ", sub, ...entry.filters]);
    });
    socket.addEventListener("message", (message) => this.receive(message.data));
    socket.addEventListener("close", () => {
      this.onStatus("closed", "Disconnected from the relay; trying again in 3 s.");
      setTimeout(() => this.connect(), 3000);
    });
  }

  send(frame) {
    if (this.socket.readyState === WebSocket.OPEN) this.socket.send(JSON.stringify(frame));
  }

  receive(data) {
    let frame;
    try {
      frame = JSON.parse(data);
    } catch (_) {
      return;
    }
    if (!Array.isArray(frame)) return;
    const entry = this.subscriptions.get(frame[1]);
    if (frame[0] === "EVENT" && entry && frame[2] && typeof frame[2] === "object") entry.onEvent(frame[2]);
    else if (frame[0] === "EOSE" && entry) entry.onEose();
    else if (frame[0] === "CLOSED" && entry) entry.onClosed(String(frame[2] || ""));
    else if (frame[0] === "AUTH") this.onStatus("closed", "This relay is private (NIP-42); this page cannot sign in.");
    else if (frame[0] === "NOTICE") console.warn("relay notice:", frame[1]);
  }

  /** A standing subscription, renewed on reconnect. */
  subscribe(sub, filters, handlers) {
    const entry = { filters, onEvent: () => {}, onEose: () => {}, onClosed: () => {}, ...handlers };
    this.subscriptions.set(sub, entry);
    this.send(["REQ", sub, ...filters]);
  }

  unsubscribe(sub) {
    if (this.subscriptions.delete(sub)) this.send(["CLOSE", sub]);
  }

  /** The stored events matching `filters`, up to EOSE. */
  fetch(filters) {
    const sub = "once-" + ++this.counter;
    const found = [];
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => finish(new Error("the relay did not answer within 10 s")), WAIT_MS);
      const finish = (error) => {
        clearTimeout(timer);
        this.unsubscribe(sub);
        if (error) reject(error);
        else resolve(found);
      };
      this.subscribe(sub, filters, {
        onEvent: (event) => found.push(event),
        onEose: () => finish(null),
        onClosed: (reason) => finish(new Error("the relay closed the query: " + reason)),
      });
    });
  }
}

// ---- small DOM helpers ---------------------------------------------------------------------------

function element(tag, text, attributes = {}) {
  const node = document.createElement(tag);
  if (text !== undefined && text !== null) node.textContent = text;
  for (const [name, value] of Object.entries(attributes)) node.setAttribute(name, value);
  return node;
}

function checkMarks(result) {
  const marks = element("div", null, { class: "checks" });
  const mark = (label, ok, cls) => {
    const attributes = { class: `${cls} ${ok ? "ok" : "bad"}`, "data-ok": String(ok) };
    marks.append(element("span", `${label} ${ok ? "✓" : "✗"}`, attributes));
  };
  mark("id", result.id, "check-id");
  mark("signature", result.sig, "check-sig");
  return marks;
}

// ---- the board -----------------------------------------------------------------------------------

const board = { jobs: new Map(), related: new Map(), rows: new Map(), selected: null, rendering: 0, live: false };

function startBoard(relay) {
  relay.subscribe("board", [{ kinds: [JOB_REQUEST], "#t": ["bazaar-job"], limit: BOARD_LIMIT }], {
    onEvent: (event) => {
      if (event.kind === JOB_REQUEST && typeof event.id === "string" && !board.jobs.has(event.id)) {
        board.jobs.set(event.id, event);
        if (board.live) watchStates(relay);
        scheduleBoard();
      }
    },
    onEose: () => {
      board.live = true;
      watchStates(relay);
      scheduleBoard();
    },
    onClosed: (reason) => showBoardProblem("The relay closed the board's subscription: " + reason),
  });
}

/** Results and feedback for every job on the board, so each row can show its state. */
function watchStates(relay) {
  const ids = newestJobs().map((job) => job.id);
  if (ids.length === 0) return;
  relay.subscribe("states", [{ kinds: [JOB_FEEDBACK, JOB_RESULT], "#e": ids, limit: 1000 }], {
    onEvent: (event) => {
      if (typeof event.id === "string") board.related.set(event.id, event);
      scheduleBoard();
    },
    onEose: scheduleBoard,
  });
}

const newestJobs = () => [...board.jobs.values()].sort((a, b) => byTime(b, a)).slice(0, BOARD_LIMIT);

let boardTimer = null;
function scheduleBoard() {
  clearTimeout(boardTimer);
  boardTimer = setTimeout(renderBoard, 50);
}

function showBoardProblem(text) {
  $("board-empty").hidden = false;
  $("board-empty").textContent = text;
}

async function renderBoard() {
  const token = ++board.rendering;
  const jobs = newestJobs();
  const related = await verifiedOnly([...board.related.values()]);
  const results = await Promise.all(jobs.map(check));
  if (token !== board.rendering) return;
  const body = $("board-rows");
  jobs.forEach((job, i) => {
    const row = board.rows.get(job.id) || newRow(job);
    board.rows.set(job.id, row);
    updateRow(row, job, results[i], related);
    // Rows already in place stay put, so a focused button keeps its focus.
    if (body.children[i] !== row) body.insertBefore(row, body.children[i] || null);
  });
  while (body.children.length > jobs.length) body.lastElementChild.remove();
  $("board-empty").hidden = jobs.length > 0;
}

function cell(...children) {
  const td = element("td");
  td.append(...children);
  return td;
}

function newRow(job) {
  const row = element("tr", null, { "data-task": job.id });
  const select = element("button", short(job.id), {
    type: "button",
    class: "select",
    "aria-label": "Show task " + job.id.slice(0, 12),
  });
  const workflow = param(job, "workflow") || "(none)";
  const parent = parentOf(job);
  const posted = element("time", when(job.created_at), { datetime: new Date(job.created_at * 1000).toISOString() });
  row.append(
    cell(select),
    cell(parent ? `${workflow} (handoff of ${short(parent)})` : workflow),
    cell(element("code", short(job.pubkey))),
    cell(posted),
    element("td", "", { class: "state" }),
    element("td", ""),
  );
  return row;
}

function updateRow(row, job, result, related) {
  const valid = result.verdict === "valid";
  const [, , , , state, checked] = row.children;
  state.textContent = valid ? deriveState(job, related).state : "not counted";
  checked.textContent = valid ? "✓ id and signature" : "✗ " + result.verdict;
  checked.className = valid ? "ok" : "bad";
  if (job.id === board.selected) row.setAttribute("aria-current", "true");
  else row.removeAttribute("aria-current");
}

// ---- one task and its evidence chain -------------------------------------------------------------

const task = { id: null, events: new Map(), extra: new Map(), timer: null, rendering: 0 };

function selectTask(relay, id) {
  if (!HEX64.test(id)) return;
  board.selected = id;
  for (const row of $("board-rows").querySelectorAll("tr")) {
    if (row.dataset.task === id) row.setAttribute("aria-current", "true");
    else row.removeAttribute("aria-current");
  }
  if (location.hash !== "#" + id) history.replaceState(null, "", "#" + id);
  task.id = id;
  task.events = new Map();
  $("task-none").hidden = true;
  $("task-view").hidden = false;
  $("task-id").textContent = id;
  $("task-state").textContent = "reading…";
  $("chain").replaceChildren();
  $("feedback").replaceChildren();
  const filters = [
    { ids: [id] },
    { kinds: [JOB_FEEDBACK, JOB_RESULT], "#e": [id], limit: 1000 },
    { kinds: [LABEL], "#e": [id], limit: 1000 },
  ];
  relay.subscribe("task", filters, {
    onEvent: (event) => {
      if (typeof event.id === "string") task.events.set(event.id, event);
      scheduleTask(relay);
    },
    onEose: () => scheduleTask(relay),
    onClosed: (reason) => ($("task-state-note").textContent = "The relay closed the task query: " + reason),
  });
}

function scheduleTask(relay) {
  clearTimeout(task.timer);
  task.timer = setTimeout(() => renderTask(relay).catch(showTaskError), 50);
}

function showTaskError(error) {
  $("task-state-note").textContent = "Could not read the chain: " + error.message;
}

/** Events by id that the task's own query does not return (handoffs and the specialists' results). */
async function fetchLinked(relay, ids) {
  const missing = ids.filter((id) => HEX64.test(id) && !task.extra.has(id) && !task.events.has(id));
  if (missing.length > 0) {
    for (const event of await relay.fetch([{ ids: missing }])) task.extra.set(event.id, event);
  }
  return (id) => task.events.get(id) || task.extra.get(id) || null;
}

async function renderTask(relay) {
  const token = ++task.rendering;
  const id = task.id;
  const all = [...task.events.values()];
  const job = all.find((e) => e.id === id && e.kind === JOB_REQUEST);
  if (!job) {
    $("task-state").textContent = "not found on this relay";
    $("chain").replaceChildren();
    return;
  }
  const related = await verifiedOnly(all);
  const jobCheck = await check(job);
  const derived = jobCheck.verdict === "valid" ? deriveState(job, related) : { state: "not counted", answers: [] };
  const linkIds = derived.answers.flatMap((r) => [firstTag(r, "handoff"), firstTag(r, "handoff-result")]);
  const lookup = await fetchLinked(relay, linkIds.filter(Boolean));
  const verdicts = all.filter((e) => e.kind === LABEL && firstTag(e, "L") === "bazaar.verdict").sort(byTime);
  const items = [await taskItem(job, jobCheck)];
  for (const result of derived.answers) items.push(...(await resultItems(job, result, lookup, verdicts)));
  const unlinked = verdicts.filter((v) => !derived.answers.some((r) => namesAs(v, r.id, "result")));
  for (const verdict of unlinked) items.push(await verdictItem(job, verdict));
  if (derived.answers.length === 0) items.push(element("li", "No result from a named worker yet."));
  const feedback = await feedbackItems(job, all);
  if (token !== task.rendering) return;
  showFacts(job, derived.state);
  $("chain").replaceChildren(...items);
  $("feedback").replaceChildren(...feedback);
}

function showFacts(job, state) {
  $("task-state").textContent = state;
  $("task-state-note").textContent =
    state === "claimed" ? "(a claim does not prove the worker is still running)" : "";
  $("task-workflow").textContent = param(job, "workflow") || "(none)";
  $("task-asker").textContent = job.pubkey;
  const workers = workersOf(job);
  $("task-workers").textContent = workers.length === 0 ? "anyone may answer" : workers.join(", ");
  const inputs = job.tags.filter((t) => t[0] === "i").map((t) => t[1]);
  $("task-input").textContent = inputs.length === 0 ? "(none)" : inputs.join(" | ");
}

const namesAs = (event, id, marker) => event.tags.some((t) => t[0] === "e" && t[1] === id && t[3] === marker);

function chainItem(step, title, event, result, details) {
  const item = element("li", null, {
    "data-step": step,
    "data-event": event.id,
    "data-verified": String(result.verdict === "valid"),
  });
  const heading = element("div");
  heading.append(element("span", title, { class: "step" }), " ", element("code", short(event.id)), " by ",
    element("code", short(event.pubkey)), " at ", element("time", when(event.created_at)));
  item.append(heading, checkMarks(result));
  for (const line of details) item.append(element("div", line, { class: "detail" }));
  return item;
}

async function taskItem(job, result) {
  const inputs = job.tags.filter((t) => t[0] === "i").map((t) => t[1]);
  return chainItem("task", "Task", job, result, [
    "Workflow: " + (param(job, "workflow") || "(none)"),
    "Input: " + (inputs.join(" | ") || "(none)"),
  ]);
}

/** A result's part of the chain: a coordinator's handoff and its specialist's result first, its verdicts last. */
async function resultItems(job, result, lookup, verdicts) {
  const items = [];
  const handoffId = firstTag(result, "handoff");
  const specialistId = firstTag(result, "handoff-result");
  const handoff = handoffId ? lookup(handoffId) : null;
  const specialist = specialistId ? lookup(specialistId) : null;
  const absent = (what, id) => element("li", `${what} ${short(id)}: not on this relay.`, { class: "bad" });
  if (handoffId) {
    items.push(handoff ? await handoffItem(handoff) : absent("Handoff", handoffId));
    items.push(specialist ? await specialistItem(specialist) : absent("Specialist's result", specialistId));
  }
  const problems = handoffId ? await linkProblems(job, result, handoff, specialist) : [];
  const artifact = artifactOf(result);
  const details = [
    artifact ? `Artifact: ${artifact.url} sha256 ${artifact.sha256}` : "Artifact: none named",
    "Content: " + (result.content || "(empty)"),
  ];
  if (handoffId) {
    details.push(problems.length === 0
      ? "Links ✓ (the handoff, the specialist's result and the artifact hash agree)"
      : "Links ✗: " + problems.join("; "));
  }
  const title = handoffId ? "Coordinator's result" : "Result";
  items.push(chainItem("result", title, result, await check(result), details));
  for (const verdict of verdicts.filter((v) => namesAs(v, result.id, "result"))) {
    items.push(await verdictItem(job, verdict));
  }
  return items;
}

async function handoffItem(handoff) {
  return chainItem("handoff", "Handoff", handoff, await check(handoff), [
    "Workflow: " + (param(handoff, "workflow") || "(none)"),
    "Specialist: " + (workersOf(handoff).map(short).join(", ") || "anyone"),
  ]);
}

async function specialistItem(result) {
  const artifact = artifactOf(result);
  return chainItem("specialist-result", "Specialist's result", result, await check(result), [
    artifact ? "Artifact hash (sha256): " + artifact.sha256 : "No artifact hash",
    artifact ? "Artifact URL: " + artifact.url : "",
  ].filter(Boolean));
}

/** What the signatures cannot prove by themselves: that the steps name each other (bazaar-relay's check_chain). */
async function linkProblems(job, result, handoff, specialist) {
  if (!handoff || !specialist) return ["a linked event is missing"];
  const problems = [];
  const valid = async (e) => (await check(e)).verdict === "valid";
  if (!(await valid(handoff)) || !(await valid(specialist))) problems.push("a linked event does not verify");
  if (handoff.kind !== JOB_REQUEST) problems.push("the handoff is not a job request");
  if (handoff.pubkey !== result.pubkey) problems.push("the handoff was not posted by the coordinator who answered");
  if (!names(handoff, job.id)) problems.push("the handoff does not name the task");
  if (workersOf(handoff).length === 0) problems.push("the handoff names no specialist");
  if (specialist.kind !== handoff.kind + 1000 || !names(specialist, handoff.id)) {
    problems.push("the specialist's result does not answer the handoff");
  }
  if (!eligible(handoff, specialist.pubkey)) {
    problems.push("the specialist's result comes from a worker the handoff does not name");
  }
  const delivered = artifactOf(specialist);
  const claimed = artifactOf(result);
  if (!delivered) problems.push("the specialist's result carries no artifact hash");
  else if (!claimed || claimed.url !== delivered.url || claimed.sha256 !== delivered.sha256) {
    problems.push("the coordinator's artifact differs from the one the specialist signed");
  }
  return problems;
}

function readVerdict(label) {
  let body = null;
  try {
    body = JSON.parse(label.content);
  } catch (_) {
    return null;
  }
  const outcome = label.tags.find((t) => t[0] === "l" && t[2] === "bazaar.verdict");
  if (!body || typeof body !== "object" || !outcome || outcome[1] !== body.verdict) return null;
  return body;
}

async function verdictItem(job, label) {
  const body = readVerdict(label);
  const who = label.pubkey === job.pubkey ? "the task's asker" : "a key other than the task's asker";
  const quality = typeof body?.quality === "number" ? `, quality ${body.quality}` : ", quality not assessed";
  const details = body
    ? [
        `Outcome: ${body.verdict}${quality}`,
        "Grounds (the observation): " + String(body.grounds ?? ""),
        "Attested by " + who,
      ]
    : ["Not a readable verdict (its label and content disagree)"];
  return chainItem("verdict", "Verdict", label, await check(label), details);
}

async function feedbackItems(job, all) {
  const feedback = all.filter((e) => e.kind === JOB_FEEDBACK && names(e, job.id)).sort(byTime);
  if (feedback.length === 0) return [element("li", "No feedback.")];
  return Promise.all(
    feedback.map(async (e) => {
      const status = e.tags.find((t) => t[0] === "status") || [];
      const counted = eligible(job, e.pubkey) || e.pubkey === job.pubkey ? "" : " (not a named worker: not counted)";
      const line = `${when(e.created_at)} ${short(e.pubkey)}: ${status[1] || "?"} ${status[2] || ""}${counted} `;
      const item = element("li", line);
      item.append(checkMarks(await check(e)));
      return item;
    }),
  );
}

// ---- check a pasted event ------------------------------------------------------------------------

async function checkPasted() {
  const out = $("check-result");
  const detail = $("check-detail");
  out.removeAttribute("data-valid");
  out.textContent = "";
  detail.textContent = "";
  let event;
  try {
    event = JSON.parse($("event-json").value);
  } catch (error) {
    out.setAttribute("data-valid", "false");
    out.textContent = "not JSON";
    detail.textContent = error.message;
    return;
  }
  const result = await verifyEvent(event);
  out.setAttribute("data-valid", String(result.verdict === "valid"));
  out.textContent = result.verdict === "malformed" ? "malformed: " + result.shape : result.verdict;
  if (result.shape === null) {
    detail.textContent = `id ${result.id ? "matches" : "does not match"} the event's fields; ` +
      `signature ${result.sig ? "verifies" : "does not verify"} for ${event.pubkey} over the stated id.`;
  }
}

// ---- start -----------------------------------------------------------------------------------------

function start() {
  const scheme = location.protocol === "https:" ? "wss:" : "ws:";
  const relay = new RelayConnection(`${scheme}//${location.host}/relay`, (state, text) => {
    $("connection").dataset.state = state;
    $("connection").textContent = text;
  });
  startBoard(relay);
  $("board-rows").addEventListener("click", (click) => {
    const row = click.target.closest("tr[data-task]");
    if (row) selectTask(relay, row.dataset.task);
  });
  $("check").addEventListener("click", () => checkPasted());
  const wanted = location.hash.slice(1);
  if (HEX64.test(wanted)) selectTask(relay, wanted);
  window.relayPage = { verifyEvent, selectTask: (id) => selectTask(relay, id) };
}

start();

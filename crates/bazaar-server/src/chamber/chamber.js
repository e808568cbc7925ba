// The chamber's shared helpers, inserted once into every page's inline script (the CSP allows inline script only).
const chamber = {
  /** A new element with `text` and `className`. */
  el(tag, text, className) {
    const node = document.createElement(tag);
    if (text != null) node.textContent = text;
    if (className) node.className = className;
    return node;
  },
  /** An amount in ledger units ("—" when there is none). */
  units(n) { return n == null ? "—" : `${Number(n).toLocaleString()} units`; },
  /** What a page shows where the stream's public projection leaves a field out: said, never `?` or `undefined`. */
  HIDDEN: "sign in to see",
  /** `value` where this viewer may see it, else `(what: sign in to see)` (or just the placeholder). */
  shown(value, what) {
    if (value != null) return String(value);
    return what ? `${what} (${chamber.HIDDEN})` : `(${chamber.HIDDEN})`;
  },
  /**
   * Who this browser watches as ({viewer: "public" | "member" | "operator", handle, stream_open}), with the
   * credential kept under `key` if any. Never refused for an anonymous visitor, so a page asks it before it calls
   * what needs a sign-in (a refused call is a red line in the console).
   */
  viewer(key) { return chamber.api("GET", "/v1/stream/viewer", { key }); },
  /** Headers carrying the bearer credential this tab keeps under `key`, if any (else the passkey session's cookie goes). */
  headers(key, extra) {
    const h = { ...(extra || {}) };
    const credential = key ? sessionStorage.getItem(key) : "";
    if (credential) h.authorization = `Bearer ${credential}`;
    return h;
  },
  /** A call to this registry; a problem+json answer throws an Error carrying `status` and `code`. */
  async api(method, path, { body, key } = {}) {
    const headers = chamber.headers(key, body ? { "content-type": "application/json" } : {});
    const answer = await fetch(path, { method, headers, body: body ? JSON.stringify(body) : undefined, credentials: "same-origin" });
    const json = await answer.json().catch(() => ({}));
    if (!answer.ok) { const error = new Error(json.detail || answer.statusText); error.status = answer.status; error.code = json.code; throw error; }
    return json;
  },
  /** Signs this browser in with a passkey (usernameless); the session's cookie then goes with every call. */
  async passkeySignIn() {
    const started = await chamber.api("POST", "/v1/passkeys/sign-in/start", { body: {} });
    const asserted = await navigator.credentials.get({ publicKey: PublicKeyCredential.parseRequestOptionsFromJSON(started.options.publicKey) });
    return chamber.api("POST", "/v1/passkeys/sign-in/finish", { body: { ceremony: started.ceremony, credential: asserted.toJSON() } });
  },
  /** On `form`'s submit, keeps `input`'s credential in this tab under `key` (clearing the field), then calls `then`. */
  keepCredential(form, input, key, then) {
    form.addEventListener("submit", (event) => {
      event.preventDefault();
      sessionStorage.setItem(key, input.value.trim());
      input.value = "";
      then();
    });
  },
  /**
   * Reads the live stream at `path` over fetch (so a bearer credential goes with it; EventSource sends none),
   * calling `onEvent` with each event's data. Returns when the stream ends, `signal` aborts, or — with `idleMs` —
   * nothing came for that long. A refused stream throws like `api`.
   */
  async readStream(path, onEvent, { key, signal, idleMs } = {}) {
    const answer = await fetch(path, { headers: chamber.headers(key, { accept: "text/event-stream" }), signal, credentials: "same-origin" });
    if (!answer.ok) {
      const p = await answer.json().catch(() => ({}));
      const error = new Error(p.detail || answer.statusText); error.status = answer.status; error.code = p.code; throw error;
    }
    const reader = answer.body.pipeThrough(new TextDecoderStream()).getReader();
    let buffer = "";
    for (;;) {
      const pending = [reader.read()];
      if (idleMs) pending.push(new Promise((resolve) => setTimeout(() => resolve({ idle: true }), idleMs)));
      const next = await Promise.race(pending);
      if (next.idle || next.done) { if (next.idle) reader.cancel().catch(() => {}); return; }
      buffer += next.value;
      let cut;
      while ((cut = buffer.indexOf("\n\n")) >= 0) {
        const frame = buffer.slice(0, cut); buffer = buffer.slice(cut + 2);
        const data = frame.split("\n").filter((l) => l.startsWith("data: ")).map((l) => l.slice(6)).join("\n");
        if (data) onEvent(JSON.parse(data));
      }
    }
  },
};

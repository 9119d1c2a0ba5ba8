// @tally/client: the live tally of a Tally poll and votes on it, for
// browsers and Node 20+ (with --experimental-websocket, or a WebSocket
// passed in), with no dependencies. The protocol is docs/api.md's.

/** The error codes of docs/api.md, and "network" for a request that got no answer. */
export const codes = Object.freeze([
  "invalid_request", "unauthorized", "poll_not_found", "quiz_not_found", "not_found", "poll_not_open",
  "poll_closed", "too_large", "invalid_option", "rate_limited", "internal", "unavailable", "edge_node",
  "records_lost", "poll_not_closed", "session_required", "session_invalid", "session_expired",
  "session_mismatch", "puzzle_failed", "upgrade_required", "too_many_polls", "result_hidden",
  "already_answered", "too_late", "quiz_ended", "idem_conflict", "network",
]);

/** A refusal from the node (or no answer): code is one of codes. */
export class TallyError extends Error {
  constructor(code, message, { status = 0, retryAfter = 0 } = {}) {
    super(message || code);
    this.name = "TallyError";
    this.code = code;
    this.status = status;
    this.retryAfter = retryAfter; // seconds, from Retry-After (429, 503)
  }
}

const uuid = () => globalThis.crypto.randomUUID();

// sendRequest sends msg with a fresh ref on an open socket and resolves
// with the node's reply (ack or error, matched by ref through pending),
// or null: the socket not open, closed first, or no reply within ms.
function sendRequest(ws, pending, msg, ms = 5000) {
  if (!ws || ws.readyState !== 1) return Promise.resolve(null); // 1: OPEN
  const ref = uuid();
  return new Promise(resolve => {
    const timer = setTimeout(() => done(null), ms);
    const done = m => { clearTimeout(timer); pending.delete(ref); resolve(m); };
    pending.set(ref, done);
    ws.send(JSON.stringify({ ...msg, ref }));
  });
}

// jitter spreads reconnects so a restarted node is not met by every
// client at once (the seeds' thundering herd): 0.5-1.5 times the delay.
const jitter = ms => ms * (0.5 + Math.random());

/**
 * A client of one node (or edge): its HTTP API and live streams.
 * @param {object} opts
 * @param {string} opts.url            the node's base URL, e.g. "https://tally.example"
 * @param {Function} [opts.fetch]      default: globalThis.fetch
 * @param {Function} [opts.WebSocket]  default: globalThis.WebSocket
 * @param {Function} [opts.EventSource] default: globalThis.EventSource (the fallback after failed sockets)
 */
export class Tally {
  constructor({ url, fetch = globalThis.fetch, WebSocket = globalThis.WebSocket, EventSource = globalThis.EventSource } = {}) {
    if (!url) throw new TypeError("Tally: url is required");
    this.url = url.replace(/\/+$/, "");
    this.fetch = fetch;
    this.WebSocket = WebSocket;
    this.EventSource = EventSource;
    this.token = null; // a voter session from session()
  }

  /** request calls the HTTP API; a refusal throws a TallyError. */
  async request(method, path, body, headers = {}) {
    const h = { ...headers };
    if (body !== undefined) h["Content-Type"] = "application/json";
    let res;
    try {
      res = await this.fetch(this.url + path, { method, headers: h, body: body === undefined ? undefined : JSON.stringify(body) });
    } catch (err) {
      throw new TallyError("network", err.message);
    }
    const data = await res.json().catch(() => ({}));
    if (!res.ok) {
      const e = data.error || {};
      throw new TallyError(e.code || "internal", e.message || res.statusText,
        { status: res.status, retryAfter: Number(res.headers.get("Retry-After")) || 0 });
    }
    return data;
  }

  /** poll is GET /v1/polls/{poll}: the definition and the live tally. */
  poll(id) { return this.request("GET", `/v1/polls/${encodeURIComponent(id)}`); }

  /** result is GET /v1/polls/{poll}/result: certified, or pending with the reason. */
  result(id) { return this.request("GET", `/v1/polls/${encodeURIComponent(id)}/result`); }

  /**
   * session earns a voter token (POST /v1/session), solving the node's
   * puzzle when it asks for one, and keeps it for the votes that follow.
   * @param {Function} [solve] (challenge, bits) => Promise<nonce string>; default: solvePuzzle
   */
  async session(solve = solvePuzzle) {
    let res = await this.request("POST", "/v1/session");
    if (res.status === "challenge") {
      res = await this.request("POST", "/v1/session", { challenge: res.challenge, nonce: await solve(res.challenge, res.bits) });
    }
    this.token = res;
    return res;
  }

  /**
   * vote sends votes over HTTP (POST /v1/polls/{poll}/votes): each
   * {option, voter, idem}; a retry with the same idem is answered
   * "duplicate" with the first vote's id, wherever it was taken.
   */
  vote(poll, votes) {
    const headers = this.token ? { "Tally-Session": this.token.token } : {};
    return this.request("POST", `/v1/polls/${encodeURIComponent(poll)}/votes`, { votes: [].concat(votes) }, headers);
  }

  /**
   * subscribe follows a poll's live tally: onChange(state) after every
   * frame that changes it (state: the snapshot's fields, totals kept up to
   * date by the diffs, final true once certified). It reconnects by itself.
   * @returns {Live}
   */
  subscribe(poll, onChange, opts = {}) { return new Live(this, poll, onChange, opts); }

  /**
   * quiz follows a quiz's stream as a participant (or a viewer, without
   * voter): onChange(frame) with each quiz frame (the question, its
   * deadline, the reveal, the top of the leaderboard), onStanding(you)
   * with the participant's own standing. One socket for the whole quiz;
   * it reconnects and joins again by itself.
   * @returns {QuizLive}
   */
  quiz(id, onChange, opts = {}) { return new QuizLive(this, id, onChange, opts); }
}

/**
 * Live is one poll's stream: a WebSocket (Server-Sent Events after three
 * failed sockets, where EventSource exists), a snapshot then diffs, a
 * resync on any gap in seq, reconnects with jittered back-off, and votes
 * sent on the socket in 400 ms batches (HTTP when it is down).
 */
export class Live {
  constructor(client, poll, onChange, { onConn = () => {}, batchMs = 400, maxDelayMs = 10_000 } = {}) {
    Object.assign(this, { client, poll, onChange, onConn, batchMs, maxDelayMs });
    this.state = null;
    this.failures = 0;
    this.closed = false;
    this.pending = new Map(); // ref → resolve
    this.outbox = [];
    this.flushing = null;
    this.connect();
  }

  connect() {
    if (this.closed) return;
    const WS = this.client.WebSocket;
    if (!WS || (this.failures >= 3 && this.client.EventSource)) return this.connectSSE();
    const ws = new WS(this.client.url.replace(/^http/, "ws") + `/v1/polls/${encodeURIComponent(this.poll)}/live`);
    this.ws = ws;
    ws.onopen = () => { this.failures = 0; this.onConn("websocket"); };
    ws.onmessage = ev => {
      const m = JSON.parse(typeof ev.data === "string" ? ev.data : new TextDecoder().decode(ev.data));
      if (m.type === "ack" || m.type === "error") {
        const done = this.pending.get(m.ref);
        if (done) done(m);
        return;
      }
      this.handle(m, () => ws.send(JSON.stringify({ type: "resync" })));
    };
    ws.onclose = () => {
      for (const done of this.pending.values()) done(null); // their votes go over HTTP
      if (this.closed) return;
      this.failures++;
      this.retry();
    };
    ws.onerror = () => {}; // onclose follows
  }

  connectSSE() {
    const es = new this.client.EventSource(this.client.url + `/v1/polls/${encodeURIComponent(this.poll)}/events`);
    this.es = es;
    es.onopen = () => this.onConn("sse");
    es.onmessage = ev => this.handle(JSON.parse(ev.data), () => { es.close(); this.retry(); });
    es.onerror = () => { es.close(); if (!this.closed) this.retry(); };
  }

  retry() {
    const delay = jitter(Math.min(this.maxDelayMs, 500 * 2 ** Math.min(this.failures, 5)));
    this.onConn("reconnecting", delay);
    this.timer = setTimeout(() => this.connect(), delay);
  }

  // handle applies one frame; resync asks for a fresh snapshot (a diff
  // that does not follow the last frame, or a hidden view that gets counts).
  handle(m, resync) {
    if (m.type === "snapshot" || m.type === "final") {
      this.state = { ...m, totals: { ...(m.totals || {}) }, final: m.type === "final", hidden: !!m.hidden };
    } else if (m.type === "diff") {
      if (!this.state || m.seq !== this.state.seq + 1 || (this.state.hidden && !m.hidden)) return resync();
      const { totals, type, ...rest } = m;
      Object.assign(this.state.totals, totals || {});
      Object.assign(this.state, rest, { hidden: !!m.hidden });
    } else if (m.type === "heartbeat" && this.state) {
      Object.assign(this.state, { votes_per_min: m.votes_per_min, viewers: m.viewers, status: m.status, tick_ms: m.tick_ms });
    } else return;
    this.onChange(this.state);
  }

  /**
   * vote queues one vote ({option, voter?, idem?}: a fresh idem when none)
   * for the next batch and resolves with its result ({idem, status,
   * vote_id}), or rejects with a TallyError. A batch goes on the socket;
   * when the socket is down or gives no answer, over HTTP with the same
   * idempotency keys, so a vote the socket did deliver answers duplicate.
   */
  vote(v) {
    const vote = { option: v.option, voter: v.voter || this.client.token?.voter, idem: v.idem || uuid() };
    return new Promise((resolve, reject) => {
      this.outbox.push({ vote, resolve, reject });
      if (!this.flushing) this.flushing = setTimeout(() => this.flush(), this.batchMs);
    });
  }

  async flush() {
    this.flushing = null;
    while (this.outbox.length) {
      const batch = this.outbox.splice(0, 10);
      const votes = batch.map(b => b.vote);
      try {
        const token = this.client.token?.token;
        const reply = await this.request({ type: "vote", token, body: { votes } });
        let res;
        if (reply?.type === "ack") res = reply.result;
        else if (reply?.type === "error" && reply.error.code !== "unavailable") throw new TallyError(reply.error.code, reply.error.message);
        else res = await this.client.vote(this.poll, votes);
        batch.forEach((b, i) => b.resolve(res.results[i]));
      } catch (err) {
        batch.forEach(b => b.reject(err instanceof TallyError ? err : new TallyError("network", err.message)));
      }
    }
  }

  request(msg, ms) { return sendRequest(this.ws, this.pending, msg, ms); }

  /** close ends the stream; queued votes still go out over HTTP. */
  close() {
    this.closed = true;
    clearTimeout(this.timer);
    this.ws?.close();
    this.es?.close();
  }
}

/**
 * QuizLive is one quiz's stream (docs/api.md, "The quiz's stream"): a
 * frame whenever the quiz changes, the participant's standing after a
 * join, answers sent on the socket and timed by the node, and a countdown
 * by the server's clock.
 */
export class QuizLive {
  constructor(client, quiz, onChange, { voter, onStanding = () => {}, onConn = () => {}, maxDelayMs = 10_000 } = {}) {
    Object.assign(this, { client, quiz, onChange, onStanding, onConn, maxDelayMs });
    this.voter = voter || client.token?.voter;
    this.frame = null;
    this.offset = 0; // server clock − local clock, ms
    this.synced = false; // offset set by a join's server_time
    this.failures = 0;
    this.closed = false;
    this.pending = new Map(); // ref → resolve
    this.connect();
  }

  connect() {
    if (this.closed) return;
    const ws = new this.client.WebSocket(this.client.url.replace(/^http/, "ws") + `/v1/quizzes/${encodeURIComponent(this.quiz)}/live`);
    this.ws = ws;
    ws.onopen = async () => {
      this.failures = 0;
      this.onConn("websocket");
      if (!this.voter) return;
      const sent = Date.now();
      const ack = await sendRequest(ws, this.pending, { type: "join", voter: this.voter });
      if (ack?.type === "ack" && ack.result?.server_time) {
        this.offset = ack.result.server_time - (sent + Date.now()) / 2;
        this.synced = true;
      }
    };
    ws.onmessage = ev => {
      const m = JSON.parse(typeof ev.data === "string" ? ev.data : new TextDecoder().decode(ev.data));
      if (m.type === "ack" || m.type === "error") {
        const done = this.pending.get(m.ref);
        if (done) done(m);
      } else if (m.type === "standing") {
        this.onStanding(m.you, m);
      } else if (m.type === "quiz" || m.type === "heartbeat") {
        // The clock: the join's server_time, then never behind a frame's;
        // without a join (a viewer), the frames' alone.
        if (m.as_of_ms) this.offset = this.synced ? Math.max(this.offset, m.as_of_ms - Date.now()) : m.as_of_ms - Date.now();
        if (m.type === "quiz") {
          this.frame = m;
          this.onChange(m);
        }
      }
    };
    ws.onclose = () => {
      for (const done of this.pending.values()) done(null);
      if (this.closed) return;
      this.failures++;
      const delay = jitter(Math.min(this.maxDelayMs, 500 * 2 ** Math.min(this.failures, 5)));
      this.onConn("reconnecting", delay);
      this.timer = setTimeout(() => this.connect(), delay);
    };
    ws.onerror = () => {};
  }

  /** now is the server's clock, as far as this stream knows it (ms). */
  now() { return Date.now() + this.offset; }

  /** remainingMs is the open question's time left by the server's clock (0: closed or none). */
  remainingMs() {
    const q = this.frame?.question;
    if (!q || q.status !== "open") return 0;
    return Math.max(0, q.closes_at - this.now());
  }

  /**
   * answer sends the participant's answer to the open question on the
   * socket ({option, name?}); it resolves with the result (elapsed_ms,
   * the node's timing) or rejects with a TallyError (too_late,
   * already_answered, …). The first answer stands.
   */
  async answer({ option, name, idem = uuid() }) {
    const q = this.frame?.question;
    if (!q) throw new TallyError("poll_not_open", "no question started yet");
    const body = { option, voter: this.voter, idem, ...(name ? { name } : {}) };
    const reply = await sendRequest(this.ws, this.pending, { type: "vote", poll: q.poll, token: this.client.token?.token, body });
    if (!reply) throw new TallyError("network", "the quiz's socket is not open");
    if (reply.type === "error") throw new TallyError(reply.error.code, reply.error.message);
    return reply.result.results[0];
  }

  close() {
    this.closed = true;
    clearTimeout(this.timer);
    this.ws?.close();
  }
}

/**
 * solvePuzzle finds a nonce such that SHA-256(challenge + ":" + nonce)
 * starts with bits zero bits (the node's proof of work), with WebCrypto.
 * In a page, prefer the node's own Worker (/pow.js) so nothing freezes.
 */
export async function solvePuzzle(challenge, bits) {
  const enc = new TextEncoder();
  for (let n = 0; ; n++) {
    const h = new Uint8Array(await globalThis.crypto.subtle.digest("SHA-256", enc.encode(`${challenge}:${n}`)));
    let zero = 0;
    for (const b of h) {
      if (b === 0) { zero += 8; continue; }
      zero += Math.clz32(b) - 24;
      break;
    }
    if (zero >= bits) return String(n);
  }
}

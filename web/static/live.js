"use strict";
// What every view shares: the API, the live stream of a poll, the voter's
// session and the batched votes.

const $ = (sel, root = document) => root.querySelector(sel);
const el = (tag, attrs = {}, ...kids) => {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (k === "class") e.className = v;
    else if (k.startsWith("on")) e.addEventListener(k.slice(2), v);
    else if (v !== undefined && v !== null && v !== false) e.setAttribute(k, v === true ? "" : v);
  }
  for (const k of kids.flat()) if (k !== null && k !== undefined && k !== "") e.append(k instanceof Node ? k : document.createTextNode(String(k)));
  return e;
};
const uuid = () => (crypto.randomUUID ? crypto.randomUUID() :
  Array.from(crypto.getRandomValues(new Uint8Array(16)), b => b.toString(16).padStart(2, "0")).join(""));

// The voter id and choices live in this browser only.
const voter = localStorage.getItem("tally.voter") || (() => { const v = uuid(); localStorage.setItem("tally.voter", v); return v; })();
const choices = JSON.parse(localStorage.getItem("tally.choices") || "{}");
const saveChoices = () => localStorage.setItem("tally.choices", JSON.stringify(choices));

async function api(method, path, body, token, extra = {}) {
  const headers = { ...extra };
  if (body !== undefined) headers["Content-Type"] = "application/json";
  if (token) headers["Authorization"] = "Bearer " + token;
  const res = await fetch(path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
  const data = await res.json().catch(() => ({}));
  if (!res.ok) {
    const err = new Error((data.error && data.error.message) || res.statusText);
    err.status = res.status;
    err.retryAfter = Number(res.headers.get("Retry-After")) || 0;
    throw err;
  }
  return data;
}

// again retries f while the node answers 429, after its Retry-After (at
// most 10 s, with jitter), a few times.
async function again(f) {
  for (let tries = 0; ; tries++) {
    try { return await f(); } catch (err) {
      if (err.status !== 429 || tries >= 5) throw err;
      const wait = Math.min(err.retryAfter || 1, 10) * 1000 * (1 + Math.random() / 2);
      await new Promise(r => setTimeout(r, wait));
    }
  }
}

// LiveStream keeps one poll's state from the WebSocket (or SSE after the
// socket failed repeatedly), reconnecting with jittered backoff. A gap in
// seq asks for a fresh snapshot. onConn hears how it is connected.
class LiveStream {
  constructor(poll, onChange, onConn = () => {}) {
    this.poll = poll; this.onChange = onChange; this.onConn = onConn; this.state = null;
    this.failures = 0; this.closed = false; this.transport = ""; this.pending = {};
    this.connect();
  }
  connect() {
    if (this.closed) return;
    if (this.failures >= 3 || !window.WebSocket) return this.connectSSE();
    const proto = location.protocol === "https:" ? "wss:" : "ws:";
    const ws = new WebSocket(`${proto}//${location.host}/v1/polls/${encodeURIComponent(this.poll)}/live`);
    this.ws = ws;
    ws.onopen = () => { this.failures = 0; this.transport = "WebSocket"; this.onConn(this.transport); };
    ws.onmessage = ev => {
      const m = JSON.parse(ev.data);
      if (m.type === "ack" || m.type === "error") { const p = this.pending[m.ref]; if (p) p.done(m); return; }
      this.handle(m, msg => ws.send(JSON.stringify(msg)));
    };
    ws.onclose = () => {
      for (const p of Object.values(this.pending)) p.done(null); // their votes go over HTTP
      if (!this.closed) { this.failures++; this.retry(); }
    };
  }
  connectSSE() {
    const es = new EventSource(`/v1/polls/${encodeURIComponent(this.poll)}/events`);
    this.es = es;
    es.onopen = () => { this.transport = "Server-Sent Events"; this.onConn(this.transport); };
    es.onmessage = ev => this.handle(JSON.parse(ev.data), () => { es.close(); this.retry(); });
    es.onerror = () => { es.close(); if (!this.closed) this.retry(); };
  }
  retry() {
    const delay = Math.min(10000, 500 * 2 ** Math.min(this.failures, 5)) * (0.5 + Math.random());
    this.transport = ""; this.onConn(t("reconnecting", { s: (delay / 1000).toFixed(1) }));
    setTimeout(() => this.connect(), delay);
  }
  handle(m, resync) {
    if (m.type === "snapshot" || m.type === "final") {
      this.state = { ...m, totals: { ...(m.totals || {}) }, final: m.type === "final", hidden: !!m.hidden };
    } else if (m.type === "diff") {
      // A diff names only the options that changed: a view without counts
      // (hidden until now) cannot apply one, so it asks for the whole frame.
      if (!this.state || m.seq !== this.state.seq + 1 || (this.state.hidden && !m.hidden)) { resync({ type: "resync" }); return; }
      Object.assign(this.state.totals, m.totals || {});
      Object.assign(this.state, { seq: m.seq, as_of_ms: m.as_of_ms, status: m.status, total: m.total, closes_at: m.closes_at,
        votes_per_min: m.votes_per_min, viewers: m.viewers, leader: m.leader, events: m.events, hidden: !!m.hidden });
      if (m.leaderboard_digest) Object.assign(this.state, { leaderboard: m.leaderboard, leaderboard_digest: m.leaderboard_digest });
    } else if (m.type === "heartbeat" && this.state) {
      Object.assign(this.state, { votes_per_min: m.votes_per_min, viewers: m.viewers, status: m.status, events: [] });
    } else return;
    if (m.regions) this.state.regions = m.regions;
    this.onChange(this.state);
  }
  // request sends msg on the socket with a fresh ref and resolves with
  // the node's reply (ack or error), or with null when the socket is not
  // open, closes first, or no reply comes within ms: the caller then sends
  // the same votes over HTTP, where their idempotency keys make a vote
  // the socket did deliver answer duplicate.
  request(msg, ms = 5000) {
    if (!this.ws || this.ws.readyState !== WebSocket.OPEN) return Promise.resolve(null);
    const ref = uuid();
    return new Promise(resolve => {
      const timer = setTimeout(() => this.pending[ref].done(null), ms);
      this.pending[ref] = { done: m => { clearTimeout(timer); delete this.pending[ref]; resolve(m); } };
      this.ws.send(JSON.stringify({ ...msg, ref }));
    });
  }
  close() { this.closed = true; if (this.ws) this.ws.close(); if (this.es) this.es.close(); }
}

// The voter session: a signed token from POST /v1/session, obtained before
// the first vote. When the node asks for a puzzle first, a Web Worker
// solves it (the page stays responsive); the token is kept for next time.
let sessionPromise = null;
function solvePuzzle(challenge, bits) {
  return new Promise((resolve, reject) => {
    const w = new Worker("/pow.js");
    w.onmessage = ev => { w.terminate(); resolve(ev.data.nonce); };
    w.onerror = err => { w.terminate(); reject(new Error("puzzle solver failed: " + err.message)); };
    w.postMessage({ challenge, bits });
  });
}
function session() {
  const saved = JSON.parse(localStorage.getItem("tally.session") || "null");
  if (saved && saved.expires_at > Date.now() + 60000) return Promise.resolve(saved);
  if (!sessionPromise) {
    sessionPromise = (async () => {
      // A busy address is paced (429): the same solution is sent again.
      let res = await again(() => api("POST", "/v1/session"));
      if (res.status === "challenge") {
        const nonce = await solvePuzzle(res.challenge, res.bits);
        const solved = { challenge: res.challenge, nonce };
        res = await again(() => api("POST", "/v1/session", solved));
      }
      localStorage.setItem("tally.session", JSON.stringify(res));
      return res;
    })().finally(() => { sessionPromise = null; });
  }
  return sessionPromise;
}

// Voting: taps are shown at once, sent in batches (400 ms window, at most
// 10 per message) on the live socket the view holds, over HTTP when it is
// down (or an edge has no full node to hand them to), and reverted with
// the reason if the server refuses them.
const outbox = [];
let flushTimer = null;
function tap(poll, option, view) {
  const previous = choices[poll];
  choices[poll] = option; saveChoices();
  view.optimistic(previous, option);
  outbox.push({ poll, vote: { option, voter, idem: uuid() }, previous, view });
  if (!flushTimer) flushTimer = setTimeout(flush, 400);
}
async function flush() {
  flushTimer = null;
  while (outbox.length) {
    const poll = outbox[0].poll;
    const batch = [];
    while (outbox.length && outbox[0].poll === poll && batch.length < 10) batch.push(outbox.shift());
    try {
      let sess = null;
      try { sess = await session(); } catch (err) { /* a node without sessions: vote without a token */ }
      const votes = batch.map(b => sess ? { ...b.vote, voter: sess.voter } : b.vote);
      const stream = batch[0].view.stream;
      const reply = stream ? await stream.request({ type: "vote", token: sess ? sess.token : undefined, body: { votes } }) : null;
      let res;
      if (reply && reply.type === "ack") res = reply.result;
      else if (reply && reply.error && reply.error.code !== "unavailable") throw new Error(reply.error.message);
      else {
        const headers = sess ? { "Tally-Session": sess.token } : {};
        res = await api("POST", `/v1/polls/${encodeURIComponent(poll)}/votes`, { votes }, undefined, headers);
      }
      const late = res.results.some(r => r.status === "late");
      batch[batch.length - 1].view.settled(late ? t("late") : "");
    } catch (err) {
      const first = batch[0];
      choices[poll] = first.previous; saveChoices();
      first.view.reverted(first.previous, t("notCounted", { reason: err.message }));
    }
  }
}

"use strict";
// Tally's page: a voter/viewer view per poll, a poll list, and a host view.
// Plain JavaScript, no build step.

const $ = (sel, root = document) => root.querySelector(sel);
const el = (tag, attrs = {}, ...kids) => {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (k === "class") e.className = v;
    else if (k.startsWith("on")) e.addEventListener(k.slice(2), v);
    else if (v !== undefined && v !== null) e.setAttribute(k, v);
  }
  for (const k of kids.flat()) e.append(k instanceof Node ? k : document.createTextNode(String(k)));
  return e;
};
const uuid = () => (crypto.randomUUID ? crypto.randomUUID() :
  Array.from(crypto.getRandomValues(new Uint8Array(16)), b => b.toString(16).padStart(2, "0")).join(""));

// The voter id and choices live in this browser only.
const voter = localStorage.getItem("tally.voter") || (() => { const v = uuid(); localStorage.setItem("tally.voter", v); return v; })();
const choices = JSON.parse(localStorage.getItem("tally.choices") || "{}");
const saveChoices = () => localStorage.setItem("tally.choices", JSON.stringify(choices));

function setConn(text) { $("#conn").textContent = text; }

async function api(method, path, body, token, extra = {}) {
  const headers = { ...extra };
  if (body !== undefined) headers["Content-Type"] = "application/json";
  if (token) headers["Authorization"] = "Bearer " + token;
  const res = await fetch(path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
  const data = await res.json().catch(() => ({}));
  if (!res.ok) throw new Error((data.error && data.error.message) || res.statusText);
  return data;
}

// LiveStream keeps one poll's state from the WebSocket (or SSE after the
// socket failed repeatedly), reconnecting with jittered backoff. A gap in
// seq asks for a fresh snapshot.
class LiveStream {
  constructor(poll, onChange) {
    this.poll = poll; this.onChange = onChange; this.state = null;
    this.failures = 0; this.closed = false; this.transport = "";
    this.connect();
  }
  connect() {
    if (this.closed) return;
    if (this.failures >= 3 || !window.WebSocket) return this.connectSSE();
    const proto = location.protocol === "https:" ? "wss:" : "ws:";
    const ws = new WebSocket(`${proto}//${location.host}/v1/polls/${encodeURIComponent(this.poll)}/live`);
    this.ws = ws; this.transport = "WebSocket";
    ws.onopen = () => { this.failures = 0; setConn("live over WebSocket"); };
    ws.onmessage = ev => this.handle(JSON.parse(ev.data), msg => ws.send(JSON.stringify(msg)));
    ws.onclose = () => { if (!this.closed) { this.failures++; this.retry(); } };
  }
  connectSSE() {
    const es = new EventSource(`/v1/polls/${encodeURIComponent(this.poll)}/events`);
    this.es = es; this.transport = "SSE";
    es.onopen = () => setConn("live over Server-Sent Events");
    es.onmessage = ev => this.handle(JSON.parse(ev.data), () => { es.close(); this.retry(); });
    es.onerror = () => { es.close(); if (!this.closed) this.retry(); };
  }
  retry() {
    const delay = Math.min(10000, 500 * 2 ** Math.min(this.failures, 5)) * (0.5 + Math.random());
    setConn(`reconnecting in ${(delay / 1000).toFixed(1)} s…`);
    setTimeout(() => this.connect(), delay);
  }
  handle(m, resync) {
    if (m.type === "snapshot" || m.type === "final") {
      this.state = { ...m, totals: { ...m.totals }, final: m.type === "final" };
    } else if (m.type === "diff") {
      if (!this.state || m.seq !== this.state.seq + 1) { resync({ type: "resync" }); return; }
      Object.assign(this.state.totals, m.totals);
      Object.assign(this.state, { seq: m.seq, as_of_ms: m.as_of_ms, status: m.status, total: m.total,
        votes_per_min: m.votes_per_min, viewers: m.viewers, leader: m.leader, events: m.events });
    } else if (m.type === "heartbeat" && this.state) {
      Object.assign(this.state, { votes_per_min: m.votes_per_min, viewers: m.viewers, status: m.status, events: [] });
    } else return;
    if (m.regions) this.state.regions = m.regions;
    this.onChange(this.state);
  }
  close() { this.closed = true; if (this.ws) this.ws.close(); if (this.es) this.es.close(); }
}

// The voter session: a signed token from POST /v1/session, obtained before
// the first vote. When the node asks for a puzzle first, a Web Worker
// solves it (the page stays responsive); the token is kept for next time.
let sessionPromise = null;
function solvePuzzle(challenge, bits) {
  return new Promise((resolve, reject) => {
    const w = new Worker("pow.js");
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
      let res = await api("POST", "/v1/session");
      if (res.status === "challenge") {
        const nonce = await solvePuzzle(res.challenge, res.bits);
        res = await api("POST", "/v1/session", { challenge: res.challenge, nonce });
      }
      localStorage.setItem("tally.session", JSON.stringify(res));
      return res;
    })().finally(() => { sessionPromise = null; });
  }
  return sessionPromise;
}
// Start early: by the first tap the token is usually there.
session().catch(() => {});

// Voting: taps are shown at once, sent in batches (400 ms window, at most
// 10 per request), and reverted with the reason if the server refuses them.
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
      const headers = sess ? { "Tally-Session": sess.token } : {};
      const res = await api("POST", `/v1/polls/${encodeURIComponent(poll)}/votes`, { votes }, undefined, headers);
      const late = res.results.some(r => r.status === "late");
      batch[batch.length - 1].view.settled(late ? "Your vote arrived after the close: it is kept, not counted." : "");
    } catch (err) {
      const first = batch[0];
      choices[poll] = first.previous; saveChoices();
      first.view.reverted(first.previous, err.message);
    }
  }
}

// PollView renders one poll for voters and viewers (and the host).
class PollView {
  constructor(root, poll, host) {
    this.root = root; this.poll = poll; this.host = host; this.adjust = {}; this.message = "";
    root.replaceChildren(el("p", {}, "Connecting…"));
    this.stream = new LiveStream(poll, s => this.render(s));
    // Frames carry the freshness vector when they are sent; between them
    // the cluster endpoint keeps it current.
    this.cluster = setInterval(() => api("GET", "/v1/cluster").then(c => {
      if (this.stream.state) { this.stream.state.regions = c.regions; this.render(this.stream.state); }
    }).catch(() => {}), 2000);
  }
  optimistic(from, to) {
    if (from === to) return;
    if (from) this.adjust[from] = (this.adjust[from] || 0) - 1;
    this.adjust[to] = (this.adjust[to] || 0) + 1;
    this.message = ""; this.render(this.stream.state);
  }
  settled(message) { this.adjust = {}; this.message = message; this.render(this.stream.state); }
  reverted(previous, reason) {
    this.adjust = {}; this.message = "Not counted: " + reason; this.render(this.stream.state);
  }
  render(s) {
    if (!s) return;
    const open = s.status === "open";
    const totals = {};
    let total = 0;
    for (const o of s.options) { totals[o.id] = Math.max(0, (s.totals[o.id] || 0) + (this.adjust[o.id] || 0)); total += totals[o.id]; }
    const mode = s.final ? "final" : (s.status === "closed" ? "closed" : "live");
    const buttons = s.options.map(o => {
      const share = total ? 100 * totals[o.id] / total : 0;
      return el("li", {}, el("button", {
        class: "option", type: "button", disabled: open ? null : "", "aria-pressed": choices[this.poll] === o.id ? "true" : "false",
        "aria-label": `${o.label}: ${totals[o.id]} votes, ${share.toFixed(0)} percent`, "data-option": o.id,
        onclick: () => tap(this.poll, o.id, this),
      }, el("span", { class: "bar", style: `width:${share}%` }), el("span", { class: "label" }, o.label),
         el("span", { class: "count" }, totals[o.id].toLocaleString())));
    });
    const ev = (s.events || []).map(e => e.kind === "leader" ? `${label(s, e.option)} takes the lead` :
      e.kind === "overtake" ? `${label(s, e.option)} overtakes ${label(s, e.passed)}` :
      `${e.total.toLocaleString()} votes!`).join(" · ");
    if (ev) this.lastEvents = ev;
    const kids = [
      el("h1", {}, s.question),
      el("div", { class: "meta" },
        el("span", { class: "badge " + (mode === "live" ? "live" : "final") }, mode),
        el("span", { id: "total" }, `${total.toLocaleString()} votes`),
        el("span", {}, `${Math.round(s.votes_per_min).toLocaleString()} votes/min`),
        el("span", {}, `${s.viewers} watching`),
        s.region ? el("span", {}, `region ${s.region}`) : "",
        open ? el("span", {}, `closes ${new Date(s.closes_at).toLocaleTimeString()}`) : ""),
      el("ul", { class: "options", "aria-label": "Options" }, buttons),
      regionsLine(s),
      el("p", { class: "error", role: "alert" }, this.message),
      el("p", { class: "events", "aria-live": "polite" }, this.lastEvents || ""),
    ];
    if (this.host) kids.push(this.host(s, totals, total));
    this.root.replaceChildren(...kids);
  }
  close() { this.stream.close(); clearInterval(this.cluster); }
}

// regionsLine shows which region serves this page and how fresh each
// region's counts are here.
function regionsLine(s) {
  const regions = Object.entries(s.regions || {}).filter(([r]) => r !== s.region).sort();
  if (!s.region) return "";
  const age = ms => ms < 1500 ? "live" : ms < 60000 ? `${(ms / 1000).toFixed(1)} s behind` : "out of touch";
  return el("p", { class: "regions", id: "regions" },
    el("span", {}, "Served by ", el("strong", {}, s.region)),
    ...regions.map(([r, ms]) => el("span", { class: ms < 3000 ? "fresh" : "stale", "data-region": r }, `${r}: ${age(ms)}`)));
}
const label = (s, id) => (s.options.find(o => o.id === id) || { label: id }).label;

// Host view: the admin token stays in this tab (sessionStorage).
function hostToken() { return sessionStorage.getItem("tally.token") || ""; }

function download(name, type, text) {
  const a = el("a", { href: URL.createObjectURL(new Blob([text], { type })), download: name });
  document.body.append(a); a.click(); a.remove();
}

function hostControls(poll) {
  return (s, totals, total) => el("section", { "aria-label": "Host controls" },
    el("h2", {}, "Host"),
    s.status === "open" ? el("button", { class: "action", type: "button", onclick: async ev => {
      try { await api("POST", `/v1/polls/${encodeURIComponent(poll)}/close`, undefined, hostToken()); }
      catch (err) { ev.target.after(el("span", { class: "error" }, " " + err.message)); }
    } }, "Close now") : el("p", {}, s.final ? "Final, certified result." : "Closed. Final totals:"),
    el("button", { class: "action secondary", type: "button", onclick: () => download(`${poll}.csv`, "text/csv",
      "option,label,votes\n" + s.options.map(o => `${o.id},"${o.label.replace(/"/g, '""')}",${totals[o.id]}`).join("\n") + `\ntotal,,${total}\n`) }, "Export CSV"),
    el("button", { class: "action secondary", type: "button", onclick: () => download(`${poll}.json`, "application/json",
      JSON.stringify({ poll, question: s.question, status: s.status, as_of_ms: s.as_of_ms, totals, total }, null, 2)) }, "Export JSON"));
}

function hostPage(root) {
  const token = el("input", { id: "token", type: "password", autocomplete: "off", value: hostToken() });
  const question = el("input", { id: "question", required: "" });
  const options = el("textarea", { id: "options", rows: "4", required: "" });
  const duration = el("input", { id: "duration", type: "number", min: "1", value: "60" });
  const out = el("p", { class: "error", role: "alert" });
  const form = el("form", { onsubmit: async ev => {
    ev.preventDefault();
    sessionStorage.setItem("tally.token", token.value);
    const opts = options.value.split("\n").map(s => s.trim()).filter(Boolean)
      .map((l, i) => ({ id: "o" + (i + 1), label: l }));
    try {
      const p = await api("POST", "/v1/polls", { question: question.value, options: opts, duration_s: Number(duration.value) }, token.value);
      location.hash = `#/host/${p.id}`;
    } catch (err) { out.textContent = err.message; }
  } },
    el("label", { for: "token" }, "Admin token"), token,
    el("label", { for: "question" }, "Question"), question,
    el("label", { for: "options" }, "Options, one per line"), options,
    el("label", { for: "duration" }, "Open for (seconds)"), duration,
    el("button", { class: "action", type: "submit" }, "Create poll"), out);
  root.replaceChildren(el("h1", {}, "Host"), form, el("h2", {}, "Polls"), pollList(id => `#/host/${id}`));
}

function pollList(href) {
  const list = el("div", { class: "polls" }, "Loading…");
  api("GET", "/v1/polls").then(({ polls }) => {
    list.replaceChildren(...(polls.length ? polls.map(p => el("a", { href: href(p.id) },
      el("strong", {}, p.question), " ", el("span", { class: "badge" }, p.status), ` ${p.total} votes`)) : ["No polls yet."]));
  }).catch(err => list.replaceChildren(err.message));
  return list;
}

let current = null;
function route() {
  if (current) { current.close(); current = null; }
  const root = $("#main");
  const parts = location.hash.replace(/^#\/?/, "").split("/").filter(Boolean).map(decodeURIComponent);
  setConn("");
  if (parts[0] === "poll" && parts[1]) current = new PollView(root, parts[1]);
  else if (parts[0] === "host" && parts[1]) current = new PollView(root, parts[1], hostControls(parts[1]));
  else if (parts[0] === "host") hostPage(root);
  else root.replaceChildren(el("h1", {}, "Polls"), pollList(id => `#/poll/${id}`));
  root.focus();
}
window.addEventListener("hashchange", route);
route();

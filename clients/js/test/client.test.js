// The client against a real node, started here: subscribe, vote, change
// of mind, retry, bad input, a seq gap, reconnect after the node
// restarts, the certified final. The node binary: $TALLY_NODE_BIN, or
// built with go (scripts/test.sh builds it once).
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { spawn, execFileSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, dirname } from "node:path";
import { fileURLToPath } from "node:url";
import { createHash } from "node:crypto";
import { Tally, TallyError, codes, solvePuzzle, joinCode } from "../index.js";

const repo = join(dirname(fileURLToPath(import.meta.url)), "..", "..", "..");
const dir = mkdtempSync(join(tmpdir(), "tally-js-"));
const port = 20000 + Math.floor(Math.random() * 20000);
const url = `http://127.0.0.1:${port}`;
let bin = process.env.TALLY_NODE_BIN;
let proc = null;

// waitFor polls cond until it holds, up to ms: the test's only wait.
async function waitFor(what, cond, ms = 20000) {
  const deadline = Date.now() + ms;
  for (;;) {
    try { if (await cond()) return; } catch { /* not yet */ }
    if (Date.now() > deadline) throw new Error(`not within ${ms} ms: ${what}`);
    await new Promise(r => setTimeout(r, 25));
  }
}

async function start() {
  proc = spawn(bin, ["--data-dir", join(dir, "data"), "--http-addr", `127.0.0.1:${port}`, "--gossip-addr", "127.0.0.1:0",
    "--nats-addr", "127.0.0.1:0", "--nats-cluster-addr", "", "--nats-gateway-addr", "", "--nats-leaf-addr", "",
    "--demo=false", "--pow-bits", "4", "--drain", "0", "--catch-up-wait", "0"], { stdio: "ignore" });
  await waitFor("the node's /readyz", async () => (await fetch(url + "/readyz")).ok);
}

async function stop() {
  const exited = new Promise(r => proc.once("exit", r));
  proc.kill("SIGTERM");
  await exited;
}

function admin(method, path, body) {
  const token = readFileSync(join(dir, "data", "admin-token"), "utf8").trim();
  return fetch(url + path, { method, headers: { Authorization: `Bearer ${token}`, "Content-Type": "application/json" },
    body: body && JSON.stringify(body) }).then(r => r.json());
}

before(async () => {
  if (!bin) {
    bin = join(dir, "tally-node");
    execFileSync("go", ["build", "-o", bin, "./cmd/node"], { cwd: repo, stdio: "inherit" });
  }
  await start();
  await admin("POST", "/v1/polls", { id: "js", question: "Which?", options: [{ id: "a", label: "A" }, { id: "b", label: "B" }],
    duration_s: 3600, grace_s: 0 });
});

after(async () => {
  if (proc && proc.exitCode === null) await stop();
  rmSync(dir, { recursive: true, force: true });
});

test("subscribe, vote on the socket, change of mind, retry, bad input, restart, final", async () => {
  let httpVotes = 0; // votes that went over HTTP, not the socket
  const client = new Tally({ url, fetch: (u, o) => { if (u.endsWith("/votes")) httpVotes++; return fetch(u, o); } });
  let state = null;
  const conns = [];
  const live = client.subscribe("js", s => { state = s; }, { onConn: c => conns.push(c) });
  try {
    await waitFor("the snapshot", () => state && state.type === "snapshot" && state.totals.a === 0);

    const sess = await client.session(); // solves the node's 4-bit puzzle
    assert.match(sess.token, /./);
    const first = await live.vote({ option: "a" });
    assert.equal(first.status, "accepted");
    await waitFor("the diff with the vote", () => state.totals.a === 1);

    // Change of mind: the same voter, a later vote — it moves, not adds.
    const second = await live.vote({ option: "b" });
    assert.equal(second.status, "accepted");
    await waitFor("the change of mind", () => state.totals.a === 0 && state.totals.b === 1 && state.total === 1);
    assert.equal(httpVotes, 0, "the votes went on the socket");

    // A retry of the same key over HTTP: the first vote's id, no change.
    const retry = await client.vote("js", { option: "b", voter: sess.voter, idem: second.idem });
    assert.equal(retry.results[0].status, "duplicate");
    assert.equal(retry.results[0].vote_id, second.vote_id);

    // Bad input: a typed error with the code of docs/api.md.
    await assert.rejects(client.vote("js", { option: "zz", voter: sess.voter, idem: "bad-1" }),
      e => e instanceof TallyError && e.code === "invalid_option" && e.status === 422);
    await assert.rejects(client.poll("nope"), e => e instanceof TallyError && e.code === "poll_not_found" && codes.includes(e.code));

    // The node restarts: the stream comes back by itself, counts intact.
    const before = conns.filter(c => c === "websocket").length;
    await stop();
    await start();
    await waitFor("the reconnect", () => conns.filter(c => c === "websocket").length > before);
    await waitFor("the snapshot after it", () => state.type === "snapshot" && state.totals.b === 1);

    // Close: the certified final, with its digest.
    await admin("POST", "/v1/polls/js/close");
    await waitFor("the final frame", () => state.final && state.status === "reconciled" && state.digest, 15000);
    assert.deepEqual(state.totals, { a: 0, b: 1 });
  } finally {
    live.close();
  }
});

test("a quiz: the question on the stream, a countdown by the server's clock, the answer timed, the first one standing, the standing", async () => {
  const quiz = await admin("POST", "/v1/quizzes", { id: "jsq", title: "JS quiz",
    questions: [{ text: "2+2?", options: [{ id: "a", label: "3" }, { id: "b", label: "4" }], correct: ["b"], limit_ms: 20000, points: 1000 }] });
  assert.equal(quiz.id, "jsq");
  const client = new Tally({ url });
  const sess = await client.session();
  let frame = null;
  let you;
  const q = client.quiz("jsq", f => { frame = f; }, { voter: sess.voter, onStanding: y => { you = y; } });
  try {
    await waitFor("the quiz's first frame", () => frame && frame.status === "ready");
    await admin("POST", "/v1/quizzes/jsq/start");
    await waitFor("the question, open", () => frame.question && frame.question.status === "open");
    const left = q.remainingMs();
    assert.ok(left > 15000 && left <= 20000, `time left ${left} ms of a 20 s question`);

    const res = await q.answer({ option: "b", name: "Ada" });
    assert.equal(res.status, "accepted");
    assert.ok(typeof res.elapsed_ms === "number" && res.elapsed_ms >= 0 && res.elapsed_ms < 20000, `the node timed it: ${JSON.stringify(res)}`);
    await assert.rejects(q.answer({ option: "a" }), e => e instanceof TallyError && e.code === "already_answered");

    await admin("POST", "/v1/quizzes/jsq/close");
    await admin("POST", "/v1/quizzes/jsq/reveal");
    await waitFor("the reveal", () => frame.question.revealed && frame.question.correct?.includes("b"), 15000);
    await waitFor("the participant's standing", () => you && you.rank === 1 && you.score > 0, 15000);
    assert.equal(q.remainingMs(), 0);
  } finally {
    q.close();
  }
});

// FetchEventSource is enough of EventSource for the test, over fetch:
// Node has none. It reads "data:" lines until closed.
class FetchEventSource {
  constructor(u) {
    this.ctl = new AbortController();
    fetch(u, { signal: this.ctl.signal, headers: { Accept: "text/event-stream" } }).then(async res => {
      if (!res.ok) throw new Error(`status ${res.status}`);
      this.onopen?.();
      const dec = new TextDecoder();
      let buf = "";
      for await (const chunk of res.body) {
        buf += dec.decode(chunk, { stream: true });
        let i;
        while ((i = buf.indexOf("\n\n")) >= 0) {
          const event = buf.slice(0, i);
          buf = buf.slice(i + 2);
          const data = event.split("\n").filter(l => l.startsWith("data:")).map(l => l.slice(5).trimStart()).join("\n");
          if (data) this.onmessage?.({ data });
        }
      }
    }).catch(() => { if (!this.ctl.signal.aborted) this.onerror?.(); });
  }
  close() { this.ctl.abort(); }
}

// A socket that never opens: the node unreachable over WebSocket (a proxy
// that strips the upgrade).
class DeadSocket {
  constructor() { this.readyState = 3; setTimeout(() => this.onclose?.(), 1); }
  send() {}
  close() {}
}

test("after three failed sockets the stream follows Server-Sent Events, and votes go over HTTP", async () => {
  await admin("POST", "/v1/polls", { id: "sse", question: "SSE?", options: [{ id: "a", label: "A" }, { id: "b", label: "B" }], duration_s: 3600 });
  const client = new Tally({ url, WebSocket: DeadSocket, EventSource: FetchEventSource });
  let state = null;
  const conns = [];
  const live = client.subscribe("sse", s => { state = s; }, { onConn: c => conns.push(c), maxDelayMs: 50 });
  try {
    await waitFor("the SSE snapshot", () => conns.includes("sse") && state && state.totals.a === 0);
    assert.equal(conns.filter(c => c === "reconnecting").length, 3, "three failed sockets, then SSE");
    const r = await live.vote({ option: "a", voter: "sse-voter" });
    assert.equal(r.status, "accepted");
    await waitFor("the vote on the SSE stream", () => state.totals.a === 1);
  } finally {
    live.close();
  }
});

test("a gap in seq asks for a snapshot, and a diff applies only on its frame", () => {
  const client = new Tally({ url, WebSocket: class { constructor() { this.readyState = 0; } send() {} close() {} } });
  let resyncs = 0;
  const live = client.subscribe("x", () => {});
  live.handle({ type: "snapshot", seq: 4, totals: { a: 1, b: 2 }, total: 3 }, () => resyncs++);
  live.handle({ type: "diff", seq: 5, totals: { a: 2 }, total: 4 }, () => resyncs++);
  assert.deepEqual(live.state.totals, { a: 2, b: 2 });
  live.handle({ type: "diff", seq: 7, totals: { b: 9 }, total: 11 }, () => resyncs++);
  assert.equal(resyncs, 1);
  assert.deepEqual(live.state.totals, { a: 2, b: 2 }, "a diff after a gap is not applied");
  live.close();
});

test("a session is kept in the storage given and reused by the next client; callers at once share one", async () => {
  const kept = new Map();
  const storage = { getItem: k => kept.get(k) ?? null, setItem: (k, v) => kept.set(k, v) };
  let asked = 0;
  const counting = (u, o) => { if (u.endsWith("/v1/session")) asked++; return fetch(u, o); };
  const first = new Tally({ url, storage, fetch: counting });
  const [a, b] = await Promise.all([first.session(), first.session()]);
  assert.equal(a, b, "two callers at once, one token");
  assert.equal(asked, 2, "one challenge and one solution");
  const next = new Tally({ url, storage, fetch: counting });
  assert.equal(next.token?.token, a.token, "the next visit finds the token");
  assert.equal((await next.session()).voter, a.voter);
  assert.equal(asked, 2, "and asks for no other");

  // A damaged or expiring entry is not used.
  kept.set("tally.session", "{not json");
  assert.equal(new Tally({ url, storage }).token, null);
  kept.set("tally.session", JSON.stringify({ ...a, expires_at: Date.now() + 1000, expires_local: undefined }));
  assert.equal(new Tally({ url, storage }).token, null);

  // The token's age is judged on the node's clock, moved onto the
  // device's: a device whose clock runs hours ahead of the node keeps its
  // token rather than earning one at every tap.
  assert.ok(a.server_time > 0 && Math.abs(a.expires_local - Date.now() - (a.expires_at - a.server_time)) < 5_000);
  const hoursOff = { ...a, expires_at: a.expires_at - 6 * 3600_000, server_time: a.server_time - 6 * 3600_000 };
  kept.set("tally.session", JSON.stringify(hoursOff));
  assert.equal(new Tally({ url, storage }).token?.token, a.token, "a token from a node whose clock is six hours behind");
});

test("the puzzle's solutions have the leading zero bits asked for", async () => {
  for (const bits of [0, 1, 8, 13]) {
    const nonce = await solvePuzzle("chal-" + bits, bits);
    assert.match(nonce, /^[0-9]+$/);
    const digest = createHash("sha256").update(`chal-${bits}:${nonce}`).digest();
    const zeros = digest.readUInt32BE(0) === 0 ? 32 + Math.clz32(digest.readUInt32BE(4)) : Math.clz32(digest.readUInt32BE(0));
    assert.ok(zeros >= bits, `${bits} bits asked, ${zeros} found (nonce ${nonce})`);
  }
});

test("a quiz without a socket is read over HTTP every turn, and answered over HTTP", async () => {
  await admin("POST", "/v1/quizzes", { id: "jsh", title: "HTTP quiz",
    questions: [{ text: "1+1?", options: [{ id: "a", label: "2" }, { id: "b", label: "3" }], correct: ["a"], limit_ms: 20000, points: 1000 }] });
  const client = new Tally({ url, WebSocket: DeadSocket });
  const sess = await client.session();
  let frame = null;
  const conns = [];
  const q = client.quiz("jsh", f => { frame = f; }, { voter: sess.voter, onConn: c => conns.push(c), maxDelayMs: 50, pollMs: 100 });
  try {
    await waitFor("the quiz read over HTTP", () => conns.includes("http") && frame && frame.status === "ready" && frame.title === "HTTP quiz");
    assert.equal(conns.filter(c => c === "reconnecting").length, 3, "three failed sockets, then HTTP");
    await admin("POST", "/v1/quizzes/jsh/start");
    await waitFor("the question, open", () => frame.question?.status === "open" && frame.question.poll === "jsh-1");
    const left = q.remainingMs();
    assert.ok(left > 15000 && left <= 20000, `time left ${left} ms`);
    const r = await q.answer({ option: "a" });
    assert.equal(r.status, "accepted");
    assert.ok(typeof r.elapsed_ms === "number" && r.elapsed_ms >= 0, JSON.stringify(r));
    await assert.rejects(q.answer({ option: "b" }), e => e instanceof TallyError && e.code === "already_answered");
  } finally {
    q.close();
  }
});

test("events belong to their frame: a snapshot repeats none, a diff without any clears them", () => {
  const client = new Tally({ url, WebSocket: class { constructor() { this.readyState = 0; } send() {} close() {} } });
  const live = client.subscribe("x", () => {});
  const milestone = [{ kind: "milestone", total: 10 }];
  live.handle({ type: "snapshot", seq: 1, totals: { a: 10 }, total: 10, events: milestone }, () => {});
  assert.deepEqual(live.state.events, [], "a snapshot is state, not news");
  live.handle({ type: "diff", seq: 2, totals: { a: 11 }, total: 11, events: milestone }, () => {});
  assert.deepEqual(live.state.events, milestone);
  live.handle({ type: "diff", seq: 3, totals: { a: 12 }, total: 12 }, () => {});
  assert.deepEqual(live.state.events, []);
  live.close();
});

test("join codes are the node's (ids.JoinCode's vectors)", () => {
  for (const [kind, id, code] of [["poll", "demo", "FZHHXA"], ["event", "final", "K24VVN"], ["quiz", "pub", "BYYGT4"], ["poll", "ñandú-2026", "776KGQ"]]) {
    assert.equal(joinCode(kind, id), code, `${kind} ${id}`);
  }
  assert.throws(() => joinCode("user", "x"), TypeError);
});

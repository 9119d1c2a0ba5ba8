// The client against a real node, started here: subscribe, vote, change
// of mind, retry, bad input, a seq gap, reconnect after the node
// restarts, the certified final; stamps, a vote whose outcome is unknown,
// a phone whose address changes between two votes (its new token keeps
// its voter, presenting the old one as "previous"), a token that expired,
// a puzzle solved across a restart. The node binary: $TALLY_NODE_BIN, or built with go
// (scripts/test.sh builds it once). The node believes X-Forwarded-For
// from loopback (--trusted-proxies), so a test can move a client to
// another address.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { spawn, execFileSync } from "node:child_process";
import { createServer } from "node:net";
import { copyFileSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, dirname } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { createHash } from "node:crypto";
import { Tally, TallyError, codes, solvePuzzle, joinCode, compareStamps, laterStamp } from "../index.js";

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
    "--demo=false", "--pow-bits", "4", "--drain", "0", "--catch-up-wait", "0", "--trusted-proxies", "127.0.0.1/32"], { stdio: "ignore" });
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
    // The client's back-off between attempts reaches 15 s (10 s, jittered
    // up to 1.5×), so on a loaded machine the attempt after the node is
    // back can come more than 20 s after the stop.
    await waitFor("the reconnect", () => conns.filter(c => c === "websocket").length > before, 60000);
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
    // The lobby: a join under a name the node refuses resolves to its
    // error (and changes nothing); under a good one the lobby names it.
    await waitFor("the socket", () => q.joinedAt != null);
    const refused = await q.join(sess.voter, "Ada\u202e");
    assert.equal(refused?.type, "error");
    assert.equal(refused.error.code, "invalid_request");
    const joined = await q.join(sess.voter, "Ada");
    assert.equal(joined?.type, "ack");
    await waitFor("the lobby's newest names", () => frame.newest?.includes("Ada"), 15000);
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

// A socket is lost however it goes: refused (Node 20's WebSocket fires an
// error and no close then), or accepted and never answered (a node that
// is stopping), which openMs gives up. Each loss is followed by another
// attempt, and close() leaves nothing behind.
test("a refused socket and a handshake that hangs are each tried again", async () => {
  const silent = createServer(() => {}); // accepts, never answers
  const held = [];
  silent.on("connection", c => held.push(c));
  await new Promise(r => silent.listen(0, "127.0.0.1", r));
  const refused = await new Promise(r => { const s = createServer(); s.listen(0, "127.0.0.1", () => { const p = s.address().port; s.close(() => r(p)); }); });
  try {
    for (const [what, port] of [["refused", refused], ["hanging", silent.address().port]]) {
      const tries = [];
      const live = new Tally({ url: `http://127.0.0.1:${port}` }).subscribe("x", () => {},
        { onConn: (c, d) => tries.push(c), maxDelayMs: 20, openMs: 200 });
      try {
        await waitFor(`three attempts at a ${what} socket`, () => tries.filter(c => c === "reconnecting").length >= 3, 10000);
      } finally {
        live.close();
      }
      assert.ok(!tries.includes("websocket"), `${what}: ${tries}`);
    }
  } finally {
    held.forEach(c => c.destroy());
    silent.close();
  }
});

// A node that freezes (SIGSTOP) sends nothing, not even its heartbeat: the
// stream notices within staleMs, reconnects by itself, and follows again
// once the node resumes.
test("a frozen node's silent stream is given up after staleMs and followed again after it resumes", async () => {
  await admin("POST", "/v1/polls", { id: "stale", question: "Stale?", options: [{ id: "a", label: "A" }, { id: "b", label: "B" }], duration_s: 3600 });
  const client = new Tally({ url });
  const conns = [];
  let state = null;
  const live = client.subscribe("stale", s => { state = s; }, { onConn: c => conns.push(c), staleMs: 1500, maxDelayMs: 200 });
  try {
    await waitFor("the stream", () => conns.includes("websocket") && state);
    // While votes arrive, each tick's diff keeps the stream alive.
    for (let i = 0; i < 10; i++) {
      await client.vote("stale", { option: "a", voter: `stale-${i}`, idem: `stale-${i}` });
      await new Promise(r => setTimeout(r, 300));
    }
    await waitFor("the votes on the stream", () => state.totals.a === 10);
    assert.ok(!conns.includes("reconnecting"), `a live stream was given up: ${conns}`);
    proc.kill("SIGSTOP");
    try {
      await waitFor("the silent stream given up", () => conns.includes("reconnecting"), 15000);
    } finally {
      proc.kill("SIGCONT");
    }
    const before = conns.filter(c => c === "websocket").length;
    await waitFor("the stream again", () => conns.filter(c => c === "websocket").length > before, 30000);
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

// memory is a storage the test holds (localStorage's three methods).
function memory() {
  const kept = new Map();
  return { kept, getItem: k => kept.get(k) ?? null, setItem: (k, v) => kept.set(k, String(v)), removeItem: k => kept.delete(k) };
}

// humanPause waits as a person does before changing their mind: the
// node's trust score shadows (takes, but does not count) a voter's vote
// that follows their previous one within 300 ms on a token issued within
// the second — as the token earned after a move always is.
const humanPause = () => new Promise(r => setTimeout(r, 1000));

// createPoll makes an open poll with options a and b.
async function createPoll(id) {
  const p = await admin("POST", "/v1/polls", { id, question: "Which?", options: [{ id: "a", label: "A" }, { id: "b", label: "B" }], duration_s: 3600 });
  assert.equal(p.id, id, JSON.stringify(p));
}

test("stamps order as numbers, wall then logical; the newest is kept, in storage too, and never goes back", () => {
  assert.equal(compareStamps("1764770000123.4", "1764770000123.10"), -1, "logical as a number, not as text");
  assert.equal(compareStamps("1764770000124.0", "1764770000123.99"), 1);
  assert.equal(compareStamps("999.0", "1000.0"), -1, "wall as a number");
  assert.equal(compareStamps("5.5", "5.5"), 0);
  assert.equal(compareStamps("garbage", "1.0"), -1);
  assert.equal(laterStamp(null, "7.1"), "7.1");
  assert.equal(laterStamp("x", "y"), null);

  const storage = memory();
  const client = new Tally({ url, storage });
  assert.equal(client.stamp("p"), null);
  client.heard("p", [{ stamp: "1764770000123.4" }, { status: "rejected" }, { stamp: "1764770000123.2" }]);
  assert.equal(client.stamp("p"), "1764770000123.4");
  client.heard("p", [{ status: "duplicate", stamp: "1764770000100.0" }]); // a duplicate's stamp is its first vote's: older
  assert.equal(client.stamp("p"), "1764770000123.4", "never backwards");
  client.heard("q", [{ stamp: "1764770000200.0" }]);
  const next = new Tally({ url, storage }); // a reload
  assert.equal(next.stamp("p"), "1764770000123.4");
  assert.equal(next.stamp("q"), "1764770000200.0");
  next.heard("p", null); // a refused stamp is dropped
  assert.equal(next.stamp("p"), null);
  assert.equal(new Tally({ url, storage }).stamp("p"), null);
  assert.equal(new Tally({ url, storage }).stamp("q"), "1764770000200.0", "other polls' stamps stay");
  storage.setItem("tally.stamps", "{damaged");
  assert.equal(new Tally({ url, storage }).stamp("q"), null);
});

test("a client whose address changes between two votes earns a new token for the same voter; its change of mind replaces its vote, stamped after it", async () => {
  await createPoll("move");
  let addr = "198.51.100.7"; // Wi-Fi
  const votes = []; // the bodies of vote requests, as sent
  const sessions = []; // the addresses of POST /v1/session
  const sessionBodies = []; // and their bodies (null: none)
  const storage = memory();
  const client = new Tally({ url, storage, headers: () => ({ "X-Forwarded-For": addr }), fetch: (u, o) => {
    if (u.endsWith("/votes")) votes.push(JSON.parse(o.body));
    if (u.endsWith("/v1/session")) {
      sessions.push(o.headers["X-Forwarded-For"]);
      sessionBodies.push(o.body === undefined ? null : JSON.parse(o.body));
    }
    return fetch(u, o);
  } });
  const first = await client.session();
  const one = (await client.vote("move", { option: "a", voter: first.voter, idem: "move-1" })).results[0];
  assert.equal(one.status, "accepted");
  assert.match(one.stamp ?? "", /^\d+\.\d+$/, `the answer carries its stamp: ${JSON.stringify(one)}`);
  assert.equal(client.stamp("move"), one.stamp);
  assert.equal(votes[0].after, undefined, "the first vote has no stamp to send");

  await humanPause();
  addr = "203.0.113.9"; // cellular: the token is another network's now
  const res = await client.vote("move", { option: "b", voter: first.voter, idem: "move-2" });
  const two = res.results[0];
  assert.equal(two.status, "accepted", "counted with no action");
  assert.notEqual(client.token.token, first.token, "a new token");
  assert.equal(client.token.voter, first.voter, "for the same voter");
  assert.equal(JSON.parse(storage.getItem("tally.session")).token, client.token.token, "kept where the old one was");
  assert.equal(storage.getItem("tally.previous"), null, "the refused token is forgotten once presented");
  assert.deepEqual(sessions.slice(2), ["203.0.113.9", "203.0.113.9"], "earned from the new network (challenge, solution)");
  assert.deepEqual(sessionBodies.slice(0, 2).map(b => b?.previous), [undefined, undefined], "the first token had none before it");
  assert.deepEqual(sessionBodies.slice(2).map(b => b?.previous), [first.token, first.token], "the refused token presented as previous");
  assert.ok(sessionBodies[3].challenge && sessionBodies[3].nonce, "with the solution, the request that issues");
  assert.equal(votes.length, 3, "the refused vote and the same vote again");
  assert.deepEqual(votes.slice(1).map(v => [v.idem, v.after]), [["move-2", one.stamp], ["move-2", one.stamp]],
    "the same key, after the first vote's stamp");
  assert.equal(compareStamps(two.stamp, one.stamp), 1, `${two.stamp} after ${one.stamp}`);
  assert.equal(client.stamp("move"), two.stamp);
  assert.deepEqual(votes.map(v => v.voter), [first.voter, first.voter, first.voter]);
  const p = await client.poll("move");
  assert.deepEqual([p.totals.a, p.totals.b], [0, 1], `one vote counted, the change of mind: ${JSON.stringify(p.totals)}`);
});

test("a token that expired, or was refused before a reload, is presented as previous: the next one keeps its voter", async () => {
  await createPoll("expired");
  const storage = memory();
  const bodies = [];
  const counting = (u, o) => { if (u.endsWith("/v1/session")) bodies.push(o.body === undefined ? {} : JSON.parse(o.body)); return fetch(u, o); };
  const first = await new Tally({ url, storage, fetch: counting }).session();
  const one = (await new Tally({ url, storage }).vote("expired", { option: "a", voter: first.voter, idem: "expired-1" })).results[0];
  assert.equal(one.status, "accepted");

  // The stored token is about to expire (by this device's clock): the
  // next visit earns another, with the old one as previous.
  storage.setItem("tally.session", JSON.stringify({ ...first, expires_local: Date.now() + 30_000 }));
  bodies.length = 0;
  const later = new Tally({ url, storage, fetch: counting });
  assert.equal(later.token, null, "not used");
  const second = await later.session();
  assert.ok(bodies.length >= 2 && bodies.every(b => b.previous === first.token), JSON.stringify(bodies)); // a 429 sends one again
  assert.equal(second.voter, first.voter);
  assert.notEqual(second.token, first.token);
  assert.equal(storage.getItem("tally.previous"), null);
  await humanPause();
  const two = (await later.vote("expired", { option: "b", voter: second.voter, idem: "expired-2" })).results[0];
  assert.equal(two.status, "accepted");
  const p = await later.poll("expired");
  assert.deepEqual([p.totals.a, p.totals.b], [0, 1], JSON.stringify(p.totals));

  // A token refused (dropped) and the page reloaded before the next one
  // was earned: the refused one is still presented.
  later.dropSession(later.token);
  assert.equal(storage.getItem("tally.session"), null);
  assert.equal(storage.getItem("tally.previous"), second.token);
  bodies.length = 0;
  const third = await new Tally({ url, storage, fetch: counting }).session();
  assert.ok(bodies.length >= 2 && bodies.every(b => b.previous === second.token), JSON.stringify(bodies));
  assert.equal(third.voter, first.voter);

  // A previous token the node did not sign is passed over: a new voter.
  const stranger = memory();
  stranger.setItem("tally.previous", "s1.not-a-token.at-all");
  const fourth = await new Tally({ url, storage: stranger }).session();
  assert.notEqual(fourth.voter, first.voter);
  assert.equal(stranger.getItem("tally.previous"), null);
});

// Recording is the runtime's WebSocket with the messages it sends kept.
function recording(sent, fake = () => false) {
  return class extends globalThis.WebSocket {
    send(data) {
      const m = JSON.parse(data);
      sent.push(m);
      if (!fake(m, this)) super.send(data);
    }
  };
}

test("on the socket too: a token refused after the address changed is replaced by one for the same voter and the vote sent again, with its stamp", async () => {
  await createPoll("move-ws");
  let addr = "198.51.100.8";
  const sent = [];
  let httpVotes = 0;
  const client = new Tally({ url, headers: () => ({ "X-Forwarded-For": addr }), WebSocket: recording(sent),
    fetch: (u, o) => { if (u.endsWith("/votes")) httpVotes++; return fetch(u, o); } });
  let state = null;
  let sockets = 0;
  const live = client.subscribe("move-ws", s => { state = s; }, { onConn: c => { if (c === "websocket") sockets++; }, maxDelayMs: 200 });
  try {
    await waitFor("the snapshot", () => state?.type === "snapshot");
    const first = await client.session();
    const one = await live.vote({ option: "a" });
    assert.equal(one.status, "accepted");
    assert.ok(one.stamp, JSON.stringify(one));

    // The phone moves: its socket breaks and comes back from the new address.
    await humanPause();
    addr = "203.0.113.10";
    live.ws.close();
    await waitFor("the socket from the new address", () => sockets === 2 && live.ws.readyState === 1);
    const two = await live.vote({ option: "b" });
    assert.equal(two.status, "accepted");
    assert.equal(httpVotes, 0, "all on the socket");
    const msgs = sent.filter(m => m.type === "vote");
    assert.equal(msgs.length, 3);
    assert.equal(msgs[1].token, first.token);
    assert.deepEqual([msgs[1].body.idem, msgs[1].body.after], [msgs[2].body.idem, one.stamp], "the same key again, after the first stamp");
    assert.equal(msgs[2].token, client.token.token);
    assert.notEqual(client.token.token, first.token);
    assert.equal(client.token.voter, first.voter, "the new token keeps the voter");
    assert.deepEqual(msgs.map(m => m.body.voter), [first.voter, first.voter, first.voter]);
    assert.equal(compareStamps(two.stamp, one.stamp), 1);
    await waitFor("the change of mind on the stream", () => state.totals.b === 1 && state.totals.a === 0 && state.total === 1);
  } finally {
    live.close();
  }
});

test("504 outcome_unknown: the same request again after Retry-After until a definitive answer, on HTTP and on the socket; bounded", async () => {
  await createPoll("unknown");
  const bodies = [];
  let unknowns = 2;
  const edge = async (u, o) => { // an edge whose full node did not answer in time, twice
    if (!u.endsWith("/votes")) return fetch(u, o);
    bodies.push(o.body);
    if (unknowns-- > 0) {
      return new Response(JSON.stringify({ error: { code: "outcome_unknown", message: "retry with the same key" } }),
        { status: 504, headers: { "Retry-After": "1", "Content-Type": "application/json" } });
    }
    return fetch(u, o);
  };
  const client = new Tally({ url, fetch: edge });
  client.heard("unknown", [{ stamp: "1000.0" }]); // an old stamp: every vote carries it
  const t0 = Date.now();
  const r = (await client.vote("unknown", { option: "a", voter: "u1", idem: "unknown-1" })).results[0];
  assert.equal(r.status, "accepted");
  assert.ok(Date.now() - t0 >= 1900, "after Retry-After each time");
  assert.equal(bodies.length, 3);
  assert.ok(bodies.every(b => b === bodies[0]), `the same body each time: ${bodies}`);
  assert.deepEqual(JSON.parse(bodies[0]), { option: "a", voter: "u1", idem: "unknown-1", after: "1000.0" });

  // Never a definitive answer: the client says so after its bound.
  unknowns = Infinity;
  client.unknownMs = 1500;
  await assert.rejects(client.vote("unknown", { option: "b", voter: "u2", idem: "unknown-2" }),
    e => e instanceof TallyError && e.code === "outcome_unknown" && /may or may not/.test(e.message));

  // A later vote answered meanwhile: the unknown one is not sent again
  // (a resend taken then would be stamped after the later vote, undoing it).
  unknowns = 1;
  client.unknownMs = 30_000;
  const earlier = client.vote("unknown", { option: "a", voter: "u4", idem: "unknown-4" });
  await waitFor("the first answer, 504", () => bodies.some(b => JSON.parse(b).idem === "unknown-4"));
  client.heard("unknown", [{ stamp: `${Date.now() + 60_000}.0` }]); // as a later vote's answer would
  const before = bodies.length;
  await assert.rejects(earlier, e => e instanceof TallyError && e.code === "outcome_unknown" && /later vote/.test(e.message));
  assert.equal(bodies.length, before, "no resend after a later vote was answered");

  // On the socket: the ack says outcome_unknown once; the same message body goes again.
  const sent = [];
  let faked = false;
  const fake = (m, ws) => {
    if (m.type !== "vote" || faked) return false;
    faked = true;
    setTimeout(() => ws.onmessage({ data: JSON.stringify({ type: "error", ref: m.ref, error: { code: "outcome_unknown", message: "retry" } }) }), 10);
    return true;
  };
  const sock = new Tally({ url, WebSocket: recording(sent, fake) });
  let state = null;
  const live = sock.subscribe("unknown", s => { state = s; });
  try {
    await waitFor("the snapshot", () => state?.type === "snapshot");
    const a = await live.vote({ option: "b", voter: "u3" });
    assert.equal(a.status, "accepted");
    const msgs = sent.filter(m => m.type === "vote");
    assert.equal(msgs.length, 2);
    assert.deepEqual(msgs[1].body, msgs[0].body, "the same body, the same key");
    assert.notEqual(msgs[1].ref, msgs[0].ref);
  } finally {
    live.close();
  }
});

test("a stamp too far ahead is refused plainly and dropped; the next vote goes without it", async () => {
  await createPoll("ahead");
  const client = new Tally({ url });
  client.heard("ahead", [{ stamp: `${Date.now() + 3_600_000}.0` }]);
  await assert.rejects(client.vote("ahead", { option: "a", voter: "ahead-1", idem: "ahead-1" }),
    e => e instanceof TallyError && e.code === "stamp_ahead" && e.status === 400);
  assert.equal(client.stamp("ahead"), null, "dropped");
  const r = (await client.vote("ahead", { option: "a", voter: "ahead-1", idem: "ahead-1" })).results[0];
  assert.equal(r.status, "accepted", "the same key again, nothing was taken");
});

test("a solution refused (the node restarted between the challenge and the solution) is followed by a new challenge; twice at most", async () => {
  const client = new Tally({ url });
  let solutions = 0;
  const acrossRestart = async (challenge, bits) => {
    if (solutions++ === 0) { await stop(); await start(); }
    return solvePuzzle(challenge, bits);
  };
  const s = await client.session(acrossRestart);
  assert.equal(s.status, "issued");
  assert.equal(solutions, 2, "one refused solution, one taken");

  // A solver whose every solution is wrong: three tries, then a plain error.
  const wrong = async (challenge, bits) => {
    for (let n = 0; ; n++) {
      const d = createHash("sha256").update(`${challenge}:${n}`).digest();
      if (Math.clz32(d.readUInt32BE(0)) < bits) return String(n);
    }
  };
  let tries = 0;
  const other = new Tally({ url });
  await assert.rejects(other.session((c, b) => { tries++; return wrong(c, b); }),
    e => e instanceof TallyError && e.code === "puzzle_failed" && /3 solutions/.test(e.message));
  assert.equal(tries, 3);
  assert.equal(other.token, null);
});

// runNode runs node with args in cwd and resolves with its exit code and
// output; it fails when the process has not exited within ms.
function runNode(args, cwd, ms = 30000) {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, args, { cwd, stdio: ["ignore", "pipe", "pipe"] });
    let stdout = "", stderr = "";
    child.stdout.on("data", d => { stdout += d; });
    child.stderr.on("data", d => { stderr += d; });
    const timer = setTimeout(() => {
      child.kill("SIGKILL");
      reject(new Error(`node ${args.join(" ")} did not exit within ${ms} ms; stdout ${JSON.stringify(stdout)}, stderr ${JSON.stringify(stderr)}`));
    }, ms);
    child.on("exit", code => { clearTimeout(timer); resolve({ code, stdout, stderr }); });
  });
}

test("subscribe on a runtime without WebSocket is a TallyError saying what to pass, not a TypeError", async () => {
  const noSocket = new Tally({ url, WebSocket: null, EventSource: null });
  assert.throws(() => noSocket.subscribe("js", () => {}), e => e instanceof TallyError && e.code === "no_websocket" &&
    codes.includes(e.code) && /--experimental-websocket/.test(e.message) && /WebSocket/.test(e.message));

  // Node itself without its WebSocket (Node 20's default; 22 and later
  // only with --no-experimental-websocket): the same error.
  const script = `
    import { Tally, TallyError } from ${JSON.stringify(pathToFileURL(join(repo, "clients", "js", "index.js")).href)};
    try {
      new Tally({ url: ${JSON.stringify(url)} }).subscribe("js", () => {});
      console.log(JSON.stringify({ subscribed: typeof WebSocket }));
    } catch (e) {
      console.log(JSON.stringify({ tally: e instanceof TallyError, code: e.code, message: e.message }));
    }`;
  const { code, stdout, stderr } = await runNode(["--no-experimental-websocket", "--input-type=module", "-e", script], dir);
  assert.equal(code, 0, stderr);
  const got = JSON.parse(stdout);
  assert.equal(got.tally, true, stdout);
  assert.equal(got.code, "no_websocket");
  assert.match(got.message, /node --experimental-websocket/);
  assert.match(got.message, /new Tally\(\{ url, WebSocket \}\)/);
  assert.doesNotMatch(got.message, /not a constructor/);
});

test("the README's Node example runs as written against a node: it votes, closes its stream and exits", async () => {
  const readme = readFileSync(join(repo, "clients", "js", "README.md"), "utf8");
  const block = [...readme.matchAll(/```js\n([\s\S]*?)```/g)].map(m => m[1]).find(b => b.includes("live.close()"));
  assert.ok(block, "README.md has a js example that closes its stream");
  assert.doesNotMatch(block, /@tally\/client/, "the example imports no registry package");
  assert.match(block, /from "\.\/tally-client\.mjs"/);
  assert.ok(block.includes('"http://localhost:8080"'), "the example names the node at http://localhost:8080");
  // The demo poll of go run ./cmd/node, on the test's node.
  await admin("POST", "/v1/polls", { id: "demo", question: "Which colour?", duration_s: 3600,
    options: [{ id: "red", label: "Red" }, { id: "green", label: "Green" }, { id: "blue", label: "Blue" }, { id: "gold", label: "Gold" }] });
  const work = mkdtempSync(join(tmpdir(), "tally-js-example-"));
  try {
    // Installed as the README says: the file copied beside the program.
    copyFileSync(join(repo, "clients", "js", "index.js"), join(work, "tally-client.mjs"));
    writeFileSync(join(work, "vote.mjs"), block.replace('"http://localhost:8080"', JSON.stringify(url)));
    const { code, stdout, stderr } = await runNode(["--experimental-websocket", "vote.mjs"], work);
    assert.equal(code, 0, `exit ${code}: ${stderr}`);
    assert.match(stdout, /^accepted \S+\/\d+$/m, stdout);
    assert.match(stdout, /^open \{/m, "it printed the tally");
    assert.match(stdout, /^open \{.*red: 1\b/m, "it printed the tally with its vote");
  } finally {
    rmSync(work, { recursive: true, force: true });
  }
  const { totals } = await fetch(url + "/v1/polls/demo").then(r => r.json());
  assert.equal(totals.red, 1);
});

// Tally's JavaScript client: the live tally of a Tally poll, votes on it
// and their receipts' check, for browsers and Node 20+ (with
// --experimental-websocket, or a WebSocket passed in; Node 22 has one),
// with no dependencies. It is on no
// package registry: copy this file, or load /client.js from a node (see
// README.md). The protocol is docs/api.md's.

/**
 * The error codes of docs/api.md, and the client's own: "network" for a
 * request that got no answer, "no_websocket" for a stream this runtime
 * cannot open.
 */
export const codes = Object.freeze([
  "invalid_request", "unauthorized", "poll_not_found", "quiz_not_found", "not_found", "poll_not_open",
  "poll_closed", "too_large", "invalid_option", "rate_limited", "internal", "unavailable", "edge_node",
  "records_lost", "poll_not_closed", "session_required", "session_invalid", "session_expired",
  "session_mismatch", "puzzle_failed", "upgrade_required", "too_many_polls", "result_hidden",
  "already_answered", "too_late", "quiz_ended", "idem_conflict", "join_code_not_found", "outcome_unknown",
  "stamp_ahead", "no_copy", "cross_site", "network", "no_websocket",
]);

/** A refusal from the node (or no answer): code is one of codes. */
export class TallyError extends Error {
  constructor(code, message, { status = 0, retryAfter = 0 } = {}) {
    super(message || code);
    this.name = "TallyError";
    this.code = code;
    this.status = status;
    this.retryAfter = retryAfter; // seconds, from Retry-After (429, 503, 504)
  }
}

// RENEW are the refusals of a voter token that a new token from this
// device and network cures (the phone moved from Wi-Fi to cellular, the
// node lost its session secret): the client earns one — presenting the
// refused token as "previous", so the new one keeps its voter — and sends
// the vote again, once.
const RENEW = new Set(["session_mismatch", "session_invalid", "session_expired"]);

// unknown reports an answer that cannot say whether the vote was taken
// (504 outcome_unknown: an edge whose full node did not answer in time):
// the same request goes again, with the same keys, for the definitive one.
const unknown = err => err?.code === "outcome_unknown" || err?.status === 504;

// notNow: a refusal for the moment (503, over HTTP or by its code on a
// socket, whose errors carry no status).
const notNow = err => err?.status === 503 || ["unavailable", "no_copy", "records_lost"].includes(err?.code);

// UNKNOWN_MS bounds how long a vote whose outcome is unknown is sent again.
const UNKNOWN_MS = 30_000;

// PUZZLE_RETRIES is how many new challenges session() asks for when a
// solution is refused (puzzle_failed: redeemed at another node, or after
// the node restarted).
const PUZZLE_RETRIES = 2;

// uuid is a random version 4 UUID. crypto.randomUUID exists only in a
// secure context (https, or localhost): a page served over plain HTTP on a
// studio's network has getRandomValues alone.
export const uuid = () => {
  if (globalThis.crypto.randomUUID && globalThis.isSecureContext !== false) return globalThis.crypto.randomUUID();
  const b = globalThis.crypto.getRandomValues(new Uint8Array(16));
  b[6] = (b[6] & 0x0f) | 0x40;
  b[8] = (b[8] & 0x3f) | 0x80;
  const h = [...b].map(x => x.toString(16).padStart(2, "0")).join("");
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20)}`;
};

// SESSION_KEY is where a voter session is kept in the storage given;
// PREVIOUS_KEY the token held before it, refused or expired, until the
// next one is issued (sent as "previous", so a reload between the two
// keeps the voter); STAMPS_KEY the newest stamp of each poll's answers,
// beside it (the newest MAX_STAMPS polls).
const SESSION_KEY = "tally.session";
const PREVIOUS_KEY = "tally.previous";
const STAMPS_KEY = "tally.stamps";
const MAX_STAMPS = 200;

// A stamp is what the node stamped a vote with, "wall.logical" in decimal
// (wall: Unix ms; logical: a counter within the millisecond).
const STAMP = /^(\d{1,20})\.(\d{1,10})$/;

// RECEIPTS_KEY + poll holds the receipts of the poll's vote answers (the
// newest MAX_RECEIPTS by stamp, oldest first); RECEIPT_POLLS_KEY the
// polls that have some, oldest first: past MAX_RECEIPT_POLLS, the oldest
// poll's receipts go.
const RECEIPTS_KEY = "tally.receipts.";
const RECEIPT_POLLS_KEY = "tally.receipt-polls";
const MAX_RECEIPTS = 5;
const MAX_RECEIPT_POLLS = 100;

// readList reads a list kept in storage: [] when missing or damaged.
function readList(storage, key) {
  try {
    const kept = JSON.parse(storage?.getItem(key) || "[]");
    return Array.isArray(kept) ? kept : [];
  } catch {
    return [];
  }
}

// cmpDigits compares two decimal strings as numbers, however long.
function cmpDigits(a, b) {
  a = a.replace(/^0+(?=\d)/, ""); b = b.replace(/^0+(?=\d)/, "");
  return a.length !== b.length ? Math.sign(a.length - b.length) : a < b ? -1 : a > b ? 1 : 0;
}

/**
 * compareStamps orders two stamps ("wall.logical"): wall first, then
 * logical, both as numbers; -1, 0 or 1. Anything that is not a stamp
 * comes before every stamp.
 */
export function compareStamps(a, b) {
  const x = STAMP.exec(a ?? ""), y = STAMP.exec(b ?? "");
  if (!x || !y) return x ? 1 : y ? -1 : 0;
  return cmpDigits(x[1], y[1]) || cmpDigits(x[2], y[2]);
}

/** laterStamp is the later of two stamps (null when neither is one). */
export function laterStamp(a, b) {
  const later = compareStamps(a, b) >= 0 ? a : b;
  return STAMP.test(later ?? "") ? later : null;
}

// readStamps reads the stamps kept in storage: [poll, stamp] pairs,
// oldest first.
function readStamps(storage) {
  try {
    const kept = JSON.parse(storage?.getItem(STAMPS_KEY) || "[]");
    return new Map(Array.isArray(kept) ? kept.filter(e => Array.isArray(e) && typeof e[0] === "string" && STAMP.test(e[1])) : []);
  } catch {
    return new Map(); // a damaged entry: the next answers set it again
  }
}

// fresh reports whether a session is good for another minute, by this
// device's clock: expires_local is expires_at moved onto it (a phone's
// clock hours off would otherwise earn a new token at every tap, and
// spend its address's budget).
const fresh = s => !!s && typeof s.token === "string" && (s.expires_local ?? s.expires_at) > Date.now() + 60_000;

// tokenLike reports whether t may be sent as "previous": a string of a
// token's size (the node's are under 128 characters; a damaged entry must
// not make the request too large, whose body is bounded at 1 KiB).
const tokenLike = t => typeof t === "string" && t.length > 0 && t.length <= 256;

const sleep = ms => new Promise(r => setTimeout(r, ms));

// paced calls f again while the node answers 429, after its Retry-After
// (at most 10 s, with jitter), up to five times.
async function paced(f) {
  for (let tries = 0; ; tries++) {
    try {
      return await f();
    } catch (err) {
      if (err.status !== 429 || tries >= 5) throw err;
      await sleep(jitter(Math.min(err.retryAfter || 1, 10) * 1000));
    }
  }
}

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

// follow sets a socket's handlers: opened on its open, and lost once when
// it is gone: on its close, on its error (Node 20's WebSocket fires error
// and no close when the connection is refused or fails before the
// handshake's answer), when it has not opened within openMs (a handshake
// that hangs, say on a node that is stopping), or when nothing arrived on
// it for staleMs once open (the node sends at least a heartbeat every
// 15 s: a frozen node or a dead path would otherwise leave a stale tally
// on screen for good). A lost socket is closed. Call follow after setting
// ws.onmessage. It returns the function that stops the waits (the
// stream's close).
function follow(ws, { opened, lost, openMs, staleMs = 40_000 }) {
  let gone = false;
  let last = Date.now();
  let watch = null;
  const stop = () => { clearTimeout(timer); clearInterval(watch); };
  const once = () => {
    stop();
    if (gone) return;
    gone = true;
    try { ws.close(); } catch { /* not open yet */ }
    lost();
  };
  const timer = setTimeout(once, openMs);
  const onmessage = ws.onmessage;
  ws.onmessage = ev => { last = Date.now(); onmessage?.(ev); };
  ws.onopen = () => {
    clearTimeout(timer);
    last = Date.now();
    watch = setInterval(() => { if (Date.now() - last > staleMs) once(); }, Math.max(staleMs / 4, 10));
    opened();
  };
  ws.onclose = once;
  ws.onerror = once;
  return stop;
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
 * @param {Storage}  [opts.storage]    where the voter session, the polls' stamps and the votes' receipts are kept between visits (e.g. localStorage); default: none
 * @param {object|Function} [opts.headers] extra headers for every request (an object, or a function returning one at each
 *                                     request); also given to a socket where its WebSocket takes headers (Node's does, a browser's does not)
 */
export class Tally {
  constructor({ url, fetch = globalThis.fetch, WebSocket = globalThis.WebSocket, EventSource = globalThis.EventSource, storage = null, headers = null } = {}) {
    if (!url) throw new TypeError("Tally: url is required");
    this.url = url.replace(/\/+$/, "");
    this.fetch = (u, o) => fetch(u, o); // a browser's fetch refuses to be called as another object's method
    this.WebSocket = WebSocket;
    this.EventSource = EventSource;
    this.storage = storage;
    this.headers = headers;
    this.token = null; // a voter session from session()
    this.previous = null; // the token held before, refused or expired: the next session() presents it
    this.earning = null; // the session() under way, shared by callers
    this.solve = solvePuzzle; // the last solver session() was given: a renewed token uses it too
    this.unknownMs = UNKNOWN_MS;
    this.stamps = readStamps(storage); // poll → the newest stamp of its answers
    this.held = new Map(); // poll → its receipts, as receipts(poll) lists them (storage may refuse them)
    try {
      const saved = JSON.parse(storage?.getItem(SESSION_KEY) || "null");
      if (fresh(saved)) this.token = saved;
      else if (tokenLike(saved?.token)) this.previous = saved.token; // expired, or nearly: its voter carries over
    } catch { /* a damaged entry: earn a new one */ }
    if (!this.previous) {
      try {
        const kept = storage?.getItem(PREVIOUS_KEY);
        if (tokenLike(kept)) this.previous = kept;
      } catch { /* storage denied */ }
    }
  }

  // extraHeaders is opts.headers as it stands now.
  extraHeaders() {
    const h = typeof this.headers === "function" ? this.headers() : this.headers;
    return h || {};
  }

  // socket opens a WebSocket to path, with the extra headers where given.
  socket(path) {
    const u = this.url.replace(/^http/, "ws") + path;
    return this.headers ? new this.WebSocket(u, { headers: this.extraHeaders() }) : new this.WebSocket(u);
  }

  /** request calls the HTTP API; a refusal throws a TallyError. */
  async request(method, path, body, headers = {}) {
    const h = { ...this.extraHeaders(), ...headers };
    // Every write is declared JSON, a body or none: the node takes no
    // other (a browser asks before sending it across sites).
    if (body !== undefined || method !== "GET") h["Content-Type"] = "application/json";
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
   * puzzle when it asks for one, and keeps it (in storage too, when given)
   * for the votes that follow. A token still good for a minute is reused;
   * callers at once share one request. A busy address is paced (429): the
   * same request goes again after Retry-After, a few times. A solution the
   * node refuses (puzzle_failed: redeemed at another node, or after a
   * restart) is followed by a new challenge, twice at most; then it throws
   * a TallyError puzzle_failed. The token held before — refused by the
   * node (another network's, no longer good) or expired — goes along as
   * "previous": the node gives the new token the same voter id, so a
   * voter whose phone changed network still has one vote that counts.
   * @param {Function} [solve] (challenge, bits) => Promise<nonce string>; default: solvePuzzle
   */
  session(solve = this.solve) {
    if (fresh(this.token)) return Promise.resolve(this.token);
    this.solve = solve;
    this.earning ??= (async () => {
      if (this.token) this.keepPrevious(this.token.token); // expired, or about to
      const previous = this.previous;
      let present = previous; // until a node refuses the field
      // ask sends one POST /v1/session with "previous" added (with the
      // puzzle on, the node reads it from the solution, which is the
      // request that issues). A node from before the field refuses it as
      // invalid_request: asked again without it, it issues a new voter
      // as it always did.
      const ask = async body => {
        const send = b => paced(() => this.request("POST", "/v1/session", b));
        if (!present) return send(body);
        try {
          return await send({ ...body, previous: present });
        } catch (err) {
          if (err.code !== "invalid_request") throw err;
          present = null;
          return send(body);
        }
      };
      let res;
      for (let attempt = 0; ; attempt++) {
        res = await ask(undefined);
        if (res.status !== "challenge") break;
        const solved = { challenge: res.challenge, nonce: await solve(res.challenge, res.bits) };
        try {
          res = await ask(solved);
          break;
        } catch (err) {
          if (err.code !== "puzzle_failed") throw err;
          if (attempt >= PUZZLE_RETRIES) {
            throw new TallyError("puzzle_failed", `the node refused ${attempt + 1} solutions of its puzzle, each to a new challenge (${err.message})`,
              { status: err.status });
          }
        }
      }
      if (res.server_time) res.expires_local = Date.now() + (res.expires_at - res.server_time);
      this.token = res;
      try { this.storage?.setItem(SESSION_KEY, JSON.stringify(res)); } catch { /* storage full or denied: kept in memory */ }
      if (this.previous === previous) this.keepPrevious(null); // presented (or the node had no use for it)
      return res;
    })().finally(() => { this.earning = null; });
    return this.earning;
  }

  // dropSession forgets the token (and its stored copy) if it is still
  // the one refused: a caller at once may have earned the next already.
  // It is kept as the previous token, for the next session() to present.
  dropSession(refused) {
    if (refused && this.token && this.token.token !== refused.token) return;
    this.keepPrevious((this.token ?? refused)?.token ?? this.previous);
    this.token = null;
    try {
      if (this.storage?.removeItem) this.storage.removeItem(SESSION_KEY);
      else this.storage?.setItem(SESSION_KEY, "null");
    } catch { /* storage denied: gone from memory all the same */ }
  }

  // keepPrevious sets the token the next session() presents as
  // "previous" (null: none), in storage too.
  keepPrevious(token) {
    this.previous = tokenLike(token) ? token : null;
    try {
      if (this.previous) this.storage?.setItem(PREVIOUS_KEY, this.previous);
      else if (this.storage?.removeItem) this.storage.removeItem(PREVIOUS_KEY);
      else if (this.storage?.getItem(PREVIOUS_KEY)) this.storage.setItem(PREVIOUS_KEY, "");
    } catch { /* storage denied: kept in memory */ }
  }

  /**
   * stamp is the newest stamp this client was answered for poll (in this
   * page or, through storage, another of the same site), or null: every
   * vote of the poll carries it as "after", so the node stamps the vote
   * after the ones this voter was told of, whatever region takes it.
   */
  stamp(poll) {
    return laterStamp(this.stamps.get(poll) ?? null, readStamps(this.storage).get(poll) ?? null);
  }

  // heard keeps the newest stamp of a poll's answers; never an older one
  // (a duplicate's stamp is its first vote's). null forgets the poll's.
  heard(poll, results) {
    const was = this.stamp(poll);
    let s = was;
    if (results === null) s = null;
    else for (const r of results || []) s = laterStamp(s, r?.stamp ?? null);
    if (s === was && (s !== null || !this.stamps.has(poll))) return;
    this.stamps.delete(poll);
    if (s) this.stamps.set(poll, s);
    while (this.stamps.size > MAX_STAMPS) this.stamps.delete(this.stamps.keys().next().value);
    if (!this.storage) return;
    // Another page's newer stamps of other polls stay.
    const kept = readStamps(this.storage);
    kept.delete(poll);
    for (const [p, v] of this.stamps) kept.set(p, laterStamp(kept.get(p) ?? null, v));
    if (!s) kept.delete(poll);
    const out = [...kept].slice(-MAX_STAMPS);
    try { this.storage.setItem(STAMPS_KEY, JSON.stringify(out)); } catch { /* storage full or denied: kept in memory */ }
  }

  /**
   * receipts are the receipts of the poll's vote answers this client was
   * given (in this page or, through storage, an earlier one of the same
   * site): the newest five by stamp, oldest first. The last is the
   * voter's latest vote: verifyReceipt checks it once the poll is
   * certified.
   */
  receipts(poll) {
    const byLeaf = new Map(); // a stored copy wins over the one in memory
    for (const r of [...(this.held.get(poll) ?? []), ...readList(this.storage, RECEIPTS_KEY + poll)]) {
      if (isObject(r) && r.poll === poll && typeof r.leaf === "string") byLeaf.set(r.leaf, r);
    }
    return [...byLeaf.values()].sort((a, b) => compareStamps(a.stamp, b.stamp)).slice(-MAX_RECEIPTS);
  }

  // keepReceipts keeps the receipts of a poll's vote answers (results).
  keepReceipts(poll, results) {
    const fresh = (results || []).map(r => r?.receipt)
      .filter(r => isObject(r) && r.poll === poll && typeof r.leaf === "string" && JSON.stringify(r).length <= 1024);
    if (!fresh.length) return;
    const all = [...this.receipts(poll), ...fresh];
    this.held.delete(poll); // and set again: the newest poll goes last
    this.held.set(poll, all);
    const kept = this.receipts(poll);
    this.held.set(poll, kept);
    while (this.held.size > MAX_RECEIPT_POLLS) this.held.delete(this.held.keys().next().value);
    if (!this.storage) return;
    try {
      const polls = readList(this.storage, RECEIPT_POLLS_KEY).filter(p => typeof p === "string" && p !== poll);
      polls.push(poll);
      for (const gone of polls.splice(0, Math.max(0, polls.length - MAX_RECEIPT_POLLS))) this.storage.removeItem?.(RECEIPTS_KEY + gone);
      this.storage.setItem(RECEIPTS_KEY + poll, JSON.stringify(kept));
      this.storage.setItem(RECEIPT_POLLS_KEY, JSON.stringify(polls));
    } catch { /* storage full or denied: kept in memory */ }
  }

  /**
   * verifyReceipt is verifyReceipt(receipt) against this node: the keys
   * and the proof fetched from it (opts as verifyReceipt's).
   */
  verifyReceipt(receipt, opts = {}) {
    return verifyReceipt(receipt, { baseUrl: this.url, fetch: this.fetch, ...opts });
  }

  /**
   * vote sends votes over HTTP (POST /v1/polls/{poll}/votes): each
   * {option, voter, idem}; a retry with the same idem is answered
   * "duplicate" with the first vote's id, wherever it was taken. Every
   * vote carries the newest stamp the client holds for the poll as its
   * "after" (unless it has one), and the answers' stamps are kept. An
   * answer 504 outcome_unknown is followed by the same request after its
   * Retry-After until a definitive answer (30 s at most, then a TallyError
   * outcome_unknown); a token refused as from another network
   * (session_mismatch, session_invalid, session_expired) is replaced by a
   * new one for the same voter (the refused token sent as "previous") and
   * the votes sent again with the same keys, once.
   */
  vote(poll, votes) {
    return this.send(poll, [].concat(votes).map(v => ({ ...v })));
  }

  // send delivers votes of one poll (objects it may change: their voter
  // after a new token, their "after"), on the socket through viaSocket
  // (payload, token) → reply or null when given, else (or when the
  // socket has no answer, or answers unavailable) over HTTP.
  async send(poll, votes, viaSocket = null) {
    const after = this.stamp(poll);
    for (const v of votes) if (after && !v.after) v.after = after;
    for (let renewed = false; ;) {
      const used = this.token;
      try {
        const res = await this.settle(poll, votes, viaSocket);
        this.heard(poll, res.results);
        this.keepReceipts(poll, res.results);
        return res;
      } catch (err) {
        // A stamp the node will not stamp after (beyond its clock's bound)
        // is dropped: the voter's next vote goes without it.
        if (err.code === "stamp_ahead") this.heard(poll, null);
        if (renewed || !RENEW.has(err.code)) throw err;
        renewed = true;
        this.dropSession(used);
        const s = await this.session();
        for (const v of votes) if (!v.voter || v.voter === used?.voter) v.voter = s.voter;
      }
    }
  }

  // settle sends the same votes again, after Retry-After, while the
  // answer is that their outcome is unknown; at most unknownMs, and not
  // once a later vote of the poll was answered meanwhile: a resend taken
  // now would be stamped after that later vote and undo it.
  // After an unknown outcome a 503 is not definitive either: the node
  // that answers it may not know yet what another did with the first
  // request (docs/api.md, 503 no_copy), so it is waited out the same way.
  async settle(poll, votes, viaSocket) {
    const deadline = Date.now() + this.unknownMs;
    const held = this.stamp(poll);
    for (let sawUnknown = false; ;) {
      try {
        return await this.sendOnce(poll, votes, viaSocket);
      } catch (err) {
        if (!unknown(err) && !(sawUnknown && notNow(err))) throw err;
        sawUnknown = true;
        if (this.stamp(poll) !== held) {
          throw new TallyError("outcome_unknown", "a later vote was answered meanwhile: this one is not sent again " +
            `(${err.message})`, { status: err.status });
        }
        const wait = Math.min(Math.max(err.retryAfter || 1, 1), 10) * 1000;
        if (Date.now() + wait > deadline) {
          throw new TallyError("outcome_unknown", `no definitive answer within ${Math.round(this.unknownMs / 1000)} s: ` +
            `the vote may or may not have been counted (${err.message})`, { status: err.status });
        }
        await sleep(wait);
      }
    }
  }

  async sendOnce(poll, votes, viaSocket) {
    const token = this.token?.token;
    const body = votes.length === 1 ? votes[0] : { votes };
    const reply = viaSocket ? await viaSocket(body, token) : null;
    if (reply?.type === "ack") return reply.result;
    if (reply?.type === "error" && reply.error.code !== "unavailable") throw new TallyError(reply.error.code, reply.error.message);
    return this.request("POST", `/v1/polls/${encodeURIComponent(poll)}/votes`, body, token ? { "Tally-Session": token } : {});
  }

  /**
   * subscribe follows a poll's live tally: onChange(state) after every
   * frame that changes it (state: the snapshot's fields, totals kept up to
   * date by the diffs, final true once certified). It reconnects by itself
   * until its close(). On a runtime with neither WebSocket nor EventSource
   * (Node 20 without --experimental-websocket, and no WebSocket option)
   * it throws a TallyError no_websocket that says what to pass.
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
  constructor(client, poll, onChange, { onConn = () => {}, batchMs = 400, maxDelayMs = 10_000, openMs = 10_000, staleMs = 40_000 } = {}) {
    if (typeof client.WebSocket !== "function" && typeof client.EventSource !== "function") {
      throw new TallyError("no_websocket", "subscribe: this runtime has no WebSocket (nor EventSource) to follow the poll with: " +
        "on Node 20 run node --experimental-websocket (Node 22 and later have one), or pass one: " +
        "new Tally({ url, WebSocket }) (for instance the ws package's)");
    }
    Object.assign(this, { client, poll, onChange, onConn, batchMs, maxDelayMs, openMs, staleMs });
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
    const ws = this.client.socket(`/v1/polls/${encodeURIComponent(this.poll)}/live`);
    this.ws = ws;
    ws.onmessage = ev => {
      const m = JSON.parse(typeof ev.data === "string" ? ev.data : new TextDecoder().decode(ev.data));
      if (m.type === "ack" || m.type === "error") {
        const done = this.pending.get(m.ref);
        if (done) done(m);
        return;
      }
      this.handle(m, () => ws.send(JSON.stringify({ type: "resync" })));
    };
    this.unfollow = follow(ws, {
      openMs: this.openMs,
      staleMs: this.staleMs,
      opened: () => { this.failures = 0; this.onConn("websocket"); },
      lost: () => {
        for (const done of this.pending.values()) done(null); // their votes go over HTTP
        if (this.closed) return;
        this.failures++;
        this.retry();
      },
    });
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
      // A snapshot is the state, not news: the events it repeats (the
      // last frame's) may be long past for a viewer who just came.
      this.state = { ...m, totals: { ...(m.totals || {}) }, final: m.type === "final", hidden: !!m.hidden, events: [] };
    } else if (m.type === "diff") {
      if (!this.state || m.seq !== this.state.seq + 1 || (this.state.hidden && !m.hidden)) return resync();
      const { totals, type, ...rest } = m;
      Object.assign(this.state.totals, totals || {});
      // events belong to the frame that carries them: a diff without any
      // clears the last one's.
      Object.assign(this.state, rest, { hidden: !!m.hidden, events: m.events || [] });
    } else if (m.type === "heartbeat" && this.state) {
      Object.assign(this.state, { votes_per_min: m.votes_per_min, viewers: m.viewers, status: m.status, tick_ms: m.tick_ms, events: [] });
    } else return;
    this.onChange(this.state);
  }

  /**
   * vote queues one vote ({option, voter?, idem?}: a fresh idem when none)
   * for the next batch and resolves with its result ({idem, status,
   * vote_id, stamp}), or rejects with a TallyError. A batch goes on the
   * socket; when the socket is down or gives no answer, over HTTP with the
   * same idempotency keys, so a vote the socket did deliver answers
   * duplicate. Stamps, unknown outcomes and refused tokens are handled as
   * Tally.vote does.
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
      try {
        const res = await this.client.send(this.poll, batch.map(b => b.vote), (body, token) => this.request({ type: "vote", token, body }));
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
    this.unfollow?.();
    this.ws?.close();
    this.es?.close();
  }
}

/**
 * QuizLive is one quiz's stream (docs/api.md, "The quiz's stream"): a
 * frame whenever the quiz changes, the participant's standing after a
 * join, answers sent on the socket and timed by the node, and a countdown
 * by the server's clock. After three failed sockets (or with no WebSocket
 * at all) it reads the quiz over HTTP every second instead, in the same
 * frame shape, and answers go over HTTP (timed from the question's opening).
 */
export class QuizLive {
  constructor(client, quiz, onChange, { voter, onStanding = () => {}, onConn = () => {}, maxDelayMs = 10_000, pollMs = 1000, openMs = 10_000, staleMs = 40_000 } = {}) {
    Object.assign(this, { client, quiz, onChange, onStanding, onConn, maxDelayMs, pollMs, openMs, staleMs });
    this.voter = voter || client.token?.voter;
    this.frame = null;
    this.offset = 0; // server clock − local clock, ms
    this.joinedAt = null; // the join's server_time: frames stamped before it do not set the clock
    this.failures = 0;
    this.closed = false;
    this.pending = new Map(); // ref → resolve
    this.connect();
  }

  connect() {
    if (this.closed) return;
    const WS = this.client.WebSocket;
    if (!WS || this.failures >= 3) return this.readOverHTTP();
    const ws = this.client.socket(`/v1/quizzes/${encodeURIComponent(this.quiz)}/live`);
    this.ws = ws;
    ws.onmessage = ev => {
      const m = JSON.parse(typeof ev.data === "string" ? ev.data : new TextDecoder().decode(ev.data));
      if (m.type === "ack" || m.type === "error") {
        const done = this.pending.get(m.ref);
        if (done) done(m);
      } else if (m.type === "standing") {
        this.onStanding(m.you, m);
      } else if (m.type === "quiz" || m.type === "heartbeat") {
        this.heard(m.as_of_ms);
        if (m.type === "quiz") {
          this.frame = m;
          this.onChange(m);
        }
      }
    };
    this.unfollow = follow(ws, {
      openMs: this.openMs,
      staleMs: this.staleMs,
      opened: () => {
        this.failures = 0;
        this.joinedAt = null;
        this.onConn("websocket");
        this.join(this.voter);
      },
      lost: () => {
        for (const done of this.pending.values()) done(null); // their answers go over HTTP
        if (this.ws === ws) this.ws = null;
        if (this.closed) return;
        this.failures++;
        const delay = jitter(Math.min(this.maxDelayMs, 500 * 2 ** Math.min(this.failures, 5)));
        this.onConn("reconnecting", delay);
        this.timer = setTimeout(() => this.connect(), delay);
      },
    });
  }

  // heard sets the clock from a time the server sent: the first frame a
  // socket gets is the hub's last, which may be older than the join, so a
  // frame stamped before the join's answer is not used.
  heard(serverMs) {
    if (!serverMs || (this.joinedAt != null && serverMs < this.joinedAt)) return;
    this.offset = serverMs - Date.now();
  }

  /**
   * join names the participant (their voter id) on the open socket, with
   * the client's voter token when it has one: the stream then sends their
   * standing, and counts them among the quiz's joined (where the node
   * requires tokens, only a join with a valid one counts). Called by
   * itself on every connect; call it again when the participant changes
   * or the token arrives. A join the node could not check yet (an edge
   * that reached no full node answers "unavailable") is sent again, on the
   * same socket, while it is open and the participant the same. name, the
   * participant's display name (1–40 characters), shows in the quiz's
   * lobby on the studio screen; it is kept for the joins after a reconnect.
   * It resolves to the node's last answer (an ack, an error such as a
   * refused name's invalid_request, or null when the socket is down).
   */
  async join(voter, name = this.name) {
    if (!voter) return;
    this.voter = voter;
    this.name = name || undefined;
    const ws = this.ws;
    for (let attempt = 0; ; attempt++) {
      const sent = Date.now();
      const token = this.client.token?.voter === voter ? this.client.token.token : undefined;
      const ack = await sendRequest(ws, this.pending, { type: "join", voter, token, name: this.name });
      if (ack?.type === "ack" && ack.result?.server_time) {
        this.joinedAt = ack.result.server_time;
        this.offset = Math.round(ack.result.server_time - (sent + Date.now()) / 2);
      }
      if (ack?.type !== "error" || ack.error?.code !== "unavailable" || attempt >= 8) return ack;
      await new Promise(r => setTimeout(r, jitter(Math.min(this.maxDelayMs, 500 * 2 ** Math.min(attempt, 4)))));
      if (this.closed || this.ws !== ws || this.voter !== voter || this.name !== (name || undefined)) return ack;
    }
  }

  // readOverHTTP follows the quiz without a socket: GET /v1/quizzes/{id}
  // and the participant's standing, every pollMs, as frames of the stream.
  readOverHTTP() {
    this.onConn("http");
    const read = async () => {
      if (this.closed) return;
      const id = encodeURIComponent(this.quiz);
      try {
        const v = await this.client.request("GET", `/v1/quizzes/${id}`);
        const lb = await this.client.request("GET", `/v1/quizzes/${id}/leaderboard?top=10` +
          (this.voter ? `&participant=${encodeURIComponent(this.voter)}` : ""));
        this.offset = v.server_time - Date.now();
        const question = v.current != null ? v.questions.find(q => q.index === v.current) : v.questions[v.questions.length - 1];
        const { questions, server_time, ...rest } = v;
        const frame = { ...rest, type: "quiz", quiz: this.quiz, as_of_ms: server_time, question,
          leaderboard: lb.standings, participants: lb.participants, leaderboard_final: lb.final };
        this.frame = frame;
        this.onChange(frame);
        if (this.voter) this.onStanding(lb.you ?? null, lb);
      } catch { /* read again at the next turn */ }
      this.timer = setTimeout(read, jitter(this.pollMs));
    };
    read();
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
   * answer sends the participant's answer to the open question ({option,
   * name?, voter?}) on the socket — over HTTP with the same idempotency key
   * when the socket is down or does not reply — and resolves with the
   * result (elapsed_ms: the node's timing) or rejects with a TallyError
   * (too_late, already_answered, …). The first answer stands. Unknown
   * outcomes and refused tokens are handled as Tally.vote does.
   */
  async answer({ option, name, voter, idem = uuid() }) {
    const q = this.frame?.question;
    if (!q) throw new TallyError("poll_not_open", "no question started yet");
    voter ||= this.client.token?.voter || this.voter;
    const body = { option, voter, idem, ...(name ? { name } : {}) };
    const res = await this.client.send(q.poll, [body], (b, token) => sendRequest(this.ws, this.pending, { type: "vote", poll: q.poll, token, body: b }));
    const r = res.results[0];
    if (r.status === "rejected") throw new TallyError(r.code || "invalid_request", r.error);
    // The answer named a new participant (or a new token renamed them):
    // follow their standing.
    if (body.voter !== this.voter) this.join(body.voter);
    return r;
  }

  close() {
    this.closed = true;
    clearTimeout(this.timer);
    this.unfollow?.();
    this.ws?.close();
  }
}

// The proof of work: a decimal nonce such that SHA-256(challenge + ":" +
// nonce) starts with bits zero bits. SHA-256 is written out here (WebCrypto
// is asynchronous per hash, far too slow for a search); in a browser the
// search runs in a Worker that is this very module, so a page never freezes.
const K = new Uint32Array([
  0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
  0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
  0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
  0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
  0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
  0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
  0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
  0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2]);
const W = new Uint32Array(64);
const rotr = (x, n) => (x >>> n) | (x << (32 - n));

// sha256Head returns the first two 32-bit words of SHA-256(bytes).
function sha256Head(bytes) {
  const len = bytes.length, blocks = (len + 9 + 63) >> 6;
  const buf = new Uint8Array(blocks * 64);
  buf.set(bytes);
  buf[len] = 0x80;
  const bitLen = len * 8;
  buf[buf.length - 4] = bitLen >>> 24; buf[buf.length - 3] = bitLen >>> 16;
  buf[buf.length - 2] = bitLen >>> 8; buf[buf.length - 1] = bitLen;
  let h0 = 0x6a09e667, h1 = 0xbb67ae85, h2 = 0x3c6ef372, h3 = 0xa54ff53a,
    h4 = 0x510e527f, h5 = 0x9b05688c, h6 = 0x1f83d9ab, h7 = 0x5be0cd19;
  for (let off = 0; off < buf.length; off += 64) {
    for (let i = 0; i < 16; i++) {
      const j = off + i * 4;
      W[i] = (buf[j] << 24) | (buf[j + 1] << 16) | (buf[j + 2] << 8) | buf[j + 3];
    }
    for (let i = 16; i < 64; i++) {
      const s0 = rotr(W[i - 15], 7) ^ rotr(W[i - 15], 18) ^ (W[i - 15] >>> 3);
      const s1 = rotr(W[i - 2], 17) ^ rotr(W[i - 2], 19) ^ (W[i - 2] >>> 10);
      W[i] = (W[i - 16] + s0 + W[i - 7] + s1) | 0;
    }
    let a = h0, b = h1, c = h2, d = h3, e = h4, f = h5, g = h6, h = h7;
    for (let i = 0; i < 64; i++) {
      const t1 = (h + (rotr(e, 6) ^ rotr(e, 11) ^ rotr(e, 25)) + ((e & f) ^ (~e & g)) + K[i] + W[i]) | 0;
      const t2 = ((rotr(a, 2) ^ rotr(a, 13) ^ rotr(a, 22)) + ((a & b) ^ (a & c) ^ (b & c))) | 0;
      h = g; g = f; f = e; e = (d + t1) | 0; d = c; c = b; b = a; a = (t1 + t2) | 0;
    }
    h0 = (h0 + a) | 0; h1 = (h1 + b) | 0; h2 = (h2 + c) | 0; h3 = (h3 + d) | 0;
    h4 = (h4 + e) | 0; h5 = (h5 + f) | 0; h6 = (h6 + g) | 0; h7 = (h7 + h) | 0;
  }
  return [h0 >>> 0, h1 >>> 0];
}

/**
 * joinCode returns the six-character code a viewer types to join a poll,
 * an event (its current poll) or a quiz, as the node resolves it at
 * GET /v1/join/{code} and /j/{code}: the first 32 bits of
 * SHA-256("tally join v1\0" + kind + "\0" + id), modulo 30^6, in base 30
 * over JOIN_ALPHABET (Go: ids.JoinCode).
 */
export const JOIN_ALPHABET = "23456789ABCDEFGHJKMNPQRSTVWXYZ";
export function joinCode(kind, id) {
  if (!["poll", "event", "quiz"].includes(kind)) throw new TypeError(`joinCode: kind is poll, event or quiz, not ${kind}`);
  let n = sha256Head(new TextEncoder().encode(`tally join v1\0${kind}\0${id}`))[0] % 729_000_000;
  let code = "";
  for (let i = 0; i < 6; i++, n = Math.floor(n / 30)) code = JOIN_ALPHABET[n % 30] + code;
  return code;
}

// leadingZeros counts the zero bits that start a digest's first 64.
function leadingZeros([w0, w1]) {
  return w0 !== 0 ? Math.clz32(w0) : 32 + Math.clz32(w1);
}

// search tries nonces from `from` for count tries; the nonce, or null.
function search(challenge, bits, from, count) {
  const prefix = new TextEncoder().encode(challenge + ":");
  const bytes = new Uint8Array(prefix.length + 20);
  bytes.set(prefix);
  const need = Math.min(bits, 64);
  for (let n = from; n < from + count; n++) {
    const digits = String(n);
    for (let i = 0; i < digits.length; i++) bytes[prefix.length + i] = digits.charCodeAt(i);
    if (need === 0 || leadingZeros(sha256Head(bytes.subarray(0, prefix.length + digits.length))) >= need) return digits;
  }
  return null;
}

// inWorker: this module runs as the puzzle's Worker (below): it answers
// {challenge, bits} with {nonce}.
const inWorker = typeof globalThis.WorkerGlobalScope !== "undefined" && globalThis instanceof globalThis.WorkerGlobalScope;
if (inWorker) {
  globalThis.onmessage = ev => globalThis.postMessage({ nonce: search(ev.data.challenge, ev.data.bits, 0, Number.MAX_SAFE_INTEGER) });
}

/**
 * solvePuzzle finds the node's proof of work: in a Worker where a page can
 * start one from this module (same origin), else here in slices of 20,000
 * hashes that give the event loop its turn between them.
 */
export function solvePuzzle(challenge, bits) {
  if (!inWorker && typeof globalThis.Worker === "function" && /^https?:/.test(import.meta.url)) {
    try {
      const w = new globalThis.Worker(import.meta.url, { type: "module" });
      return new Promise((resolve, reject) => {
        w.onmessage = ev => { w.terminate(); resolve(ev.data.nonce); };
        w.onerror = ev => { w.terminate(); ev.preventDefault?.(); solveHere(challenge, bits).then(resolve, reject); };
        w.postMessage({ challenge, bits });
      });
    } catch { /* another origin's module, or no module workers: solve here */ }
  }
  return solveHere(challenge, bits);
}

async function solveHere(challenge, bits) {
  const slice = 20_000;
  for (let from = 0; ; from += slice) {
    const nonce = search(challenge, bits, from, slice);
    if (nonce !== null) return nonce;
    await sleep(0);
  }
}

// Receipts (docs/auditing.md, "Receipts"; Go: package receipt, the
// reference this mirrors). Every vote's answer carries one: the poll, the
// vote id, the stamp, the leaf (the SHA-256 of the ledger record's
// canonical bytes) and the ledgering replica's Ed25519 signature. Once
// the poll is certified, GET /v1/polls/{poll}/proofs/{leaf} shows the
// record, its audit path in the certificate's Merkle tree (RFC 9162),
// what became of it and the certifier's signed tree head. A leaf of that
// tree is 33 bytes, the record's hash then its disposition's byte
// (DISPOSITION_CODE): the root commits to what became of each record.

const ID = /^[A-Za-z0-9._-]{1,64}$/; // ids.Valid
const HASH = /^[0-9a-f]{64}$/; // a hash, as every field writes one
const MAX_PATH = 64; // a tree of 2^64 leaves
const MAX_PROOF = 64 << 10; // receipt.MaxProofJSON
// DISPOSITION_CODE is receipt.DispositionCode: a disposition's byte in its
// record's leaf of the certificate's tree (merkle.LeafOf: the record's
// hash, then this byte), so the root commits to what became of every
// record and a proof cannot say "counted" of a vote that is not.
const DISPOSITION_CODE = { counted: 1, superseded: 2, late: 3, filtered: 4, duplicate: 5 };
const utf8 = new TextDecoder("utf-8", { fatal: true, ignoreBOM: true });

// A Refusal ends a check at its step; verifyReceipt turns it into the result.
class Refusal extends Error {
  constructor(step, message) { super(message); this.step = step; }
}
const refuse = (step, message) => { throw new Refusal(step, message); };

const isObject = x => typeof x === "object" && x !== null && !Array.isArray(x);
const hex = b => Array.from(b, x => x.toString(16).padStart(2, "0")).join("");
const unhex = s => Uint8Array.from(s.match(/../g), h => parseInt(h, 16));
const bytesOf = (...parts) => {
  const out = new Uint8Array(parts.reduce((n, p) => n + p.length, 0));
  let at = 0;
  for (const p of parts) { out.set(p, at); at += p.length; }
  return out;
};
const sha256 = async (...parts) => new Uint8Array(await globalThis.crypto.subtle.digest("SHA-256", bytesOf(...parts)));

// base64 decodes canonical standard base64 of at most max characters, as
// Go's encoding/base64.StdEncoding reads it: padded, no whitespace, the
// unused bits of the last character zero. null when s is not that.
function base64(s, max) {
  if (typeof s !== "string" || s.length > max || s.length % 4 || !/^[A-Za-z0-9+/]*={0,2}$/.test(s)) return null;
  let bin;
  try { bin = atob(s); } catch { return null; }
  if (btoa(bin) !== s) return null; // "AB==": bits atob drops, which Go refuses
  return Uint8Array.from(bin, c => c.charCodeAt(0));
}

// The fields each JSON object of a check has, by exact name: Go decodes
// a receipt and a proof with no unknown fields (receipt.Decode,
// receipt.DecodeProof), and so is this. A field whose value is
// undefined is one JSON leaves out.
const RECEIPT_FIELDS = ["poll", "vote_id", "stamp", "leaf", "sig"];
const PROOF_FIELDS = ["leaf", "index", "path", "record", "vote", "disposition", "counted", "tree_head"];
const VOTE_FIELDS = ["vote_id", "voter", "option", "stamp"];
const HEAD_FIELDS = ["poll", "size", "root", "digest", "by", "sig"];

// onlyFields refuses an object with a field not in fields.
function onlyFields(x, fields, what) {
  for (const k in x) {
    if (Object.hasOwn(x, k) && x[k] !== undefined && !fields.includes(k)) refuse("malformed", `${what} has an unknown field ${JSON.stringify(k.slice(0, 64))}`);
  }
}

// absent: a field JSON left out, or wrote null (Go leaves it zero).
const absent = x => x === undefined || x === null;

// shapeProof is what Go's decoding of a proof refuses (DecodeProof): an
// unknown field in it, its vote, its tree head or its counted proof; a
// field of another type than Go's (a vote, a tree head or a counted proof
// that is no object, a string field that is no string, a path hash that
// is no string); a record or tree head signature that is not canonical
// base64. The rest is checked where Verify checks it, with its step.
function shapeProof(p, what, depth = 0) {
  if (!isObject(p)) refuse("malformed", `${what} is not an object`);
  onlyFields(p, PROOF_FIELDS, what);
  if (!absent(p.path) && Array.isArray(p.path) && !p.path.every(h => typeof h === "string")) refuse("malformed", `${what}'s path holds something other than strings`);
  if (!absent(p.record) && !base64(p.record, 4096)) refuse("malformed", `${what}'s record is not canonical standard base64 of at most 3 KiB`);
  if (!absent(p.vote)) {
    if (!isObject(p.vote)) refuse("malformed", `${what}'s vote is not an object`);
    onlyFields(p.vote, VOTE_FIELDS, `${what}'s vote`);
    if (!VOTE_FIELDS.every(k => absent(p.vote[k]) || typeof p.vote[k] === "string")) refuse("malformed", `${what}'s vote has a field that is not a string`);
  }
  const h = p.tree_head;
  if (!absent(h)) {
    if (!isObject(h)) refuse("malformed", `${what}'s tree_head is not an object`);
    onlyFields(h, HEAD_FIELDS, `${what}'s tree_head`);
    if (!["poll", "root", "digest", "by"].every(k => absent(h[k]) || typeof h[k] === "string") ||
      !(absent(h.size) || Number.isSafeInteger(h.size) && h.size >= 0)) refuse("malformed", `${what}'s tree_head has a field of another type`);
    if (!absent(h.sig) && !base64(h.sig, 88)) refuse("malformed", `${what}'s tree_head sig is not canonical standard base64`);
  }
  if (!absent(p.counted)) {
    if (!isObject(p.counted)) refuse("malformed", `${what}'s counted is not an object`);
    if (depth < 2) shapeProof(p.counted, `${what}'s counted proof`, depth + 1); // deeper, Verify refuses the nesting
  }
}

// keyring reads the replicas' keys (GET /v1/cluster/keys's body, its
// list, or {replica: base64 key}) as Go's tally receipt verify does:
// every key 32 bytes of canonical standard base64, no replica twice, or
// the whole list is refused. null is no keys.
function keyring(list) {
  const ring = new Map();
  if (list === null) return ring;
  if (isObject(list) && Object.hasOwn(list, "keys") && (list.keys === null || Array.isArray(list.keys))) list = list.keys ?? [];
  const add = (replica, key) => {
    if (typeof replica !== "string") refuse("malformed", "the keys name a replica with something other than a string");
    const name = JSON.stringify(replica.slice(0, 64));
    if (ring.has(replica)) refuse("malformed", `the keys list replica ${name} twice`);
    const raw = base64(key, 44);
    if (!raw || raw.length !== 32) refuse("malformed", `the keys' key of replica ${name} is not 32 bytes of canonical standard base64`);
    ring.set(replica, raw);
  };
  if (Array.isArray(list)) {
    for (const k of list) {
      if (!isObject(k)) refuse("malformed", "the keys' list holds something other than {replica, public_key}");
      add(k.replica, k.public_key);
    }
  } else if (isObject(list)) {
    for (const [replica, key] of Object.entries(list)) add(replica, key);
  } else refuse("malformed", "the keys are not GET /v1/cluster/keys's body, its list, or {replica: key}");
  return ring;
}

// decimal reports whether s is a number from min to max written plainly.
const decimal = (s, min, max) => typeof s === "string" && /^(0|[1-9]\d{0,19})$/.test(s) && BigInt(s) >= min && BigInt(s) <= max;
const U32 = 2n ** 32n - 1n, I64 = 2n ** 63n - 1n, U64 = 2n ** 64n - 1n;

// signed checks an Ed25519 signature by a public key's 32 bytes (false
// when the key is unknown).
async function signed(raw, message, sig) {
  if (!raw || raw.length !== 32) return false;
  try {
    const k = await globalThis.crypto.subtle.importKey("raw", raw, { name: "Ed25519" }, false, ["verify"]);
    return await globalThis.crypto.subtle.verify({ name: "Ed25519" }, k, sig, new TextEncoder().encode(message));
  } catch (err) {
    if (err?.name === "NotSupportedError") refuse("unsupported", `this runtime cannot check Ed25519 signatures (${err.message})`);
    return false; // a key that is no curve point
  }
}

// checkReceipt is receipt.Receipt.Check: the fields, and the signature's size.
function checkReceipt(r) {
  if (!isObject(r)) refuse("malformed", "the receipt is not an object");
  onlyFields(r, RECEIPT_FIELDS, "the receipt");
  const [replica, seq, more] = typeof r.vote_id === "string" ? r.vote_id.split("/") : [];
  const [wall, logical, extra] = typeof r.stamp === "string" ? r.stamp.split(".") : [];
  const sig = base64(r.sig, 88);
  if (typeof r.poll !== "string" || !ID.test(r.poll)) refuse("malformed", "the receipt's poll is not a poll id");
  if (!ID.test(replica ?? "") || !decimal(seq, 1n, U64) || more !== undefined) refuse("malformed", "the receipt's vote_id is not REPLICA/SEQ");
  if (!decimal(wall, 1n, I64) || !decimal(logical, 0n, U32) || extra !== undefined) refuse("malformed", "the receipt's stamp is not WALL.LOGICAL");
  if (typeof r.leaf !== "string" || !HASH.test(r.leaf)) refuse("malformed", "the receipt's leaf is not 64 lowercase hex digits");
  if (!sig || sig.length !== 64) refuse("malformed", "the receipt's sig is not 64 bytes of canonical standard base64");
  return { replica, sig };
}

// decodeRecord reads what a voter checks of a ledger record's canonical
// bytes (ledger.Record.AppendBinary): the version, poll, replica, seq,
// wall, logical, voter, option and idempotency key, which start it.
function decodeRecord(b) {
  let at = 0;
  const byte = () => at < b.length ? b[at++] : refuse("record", "the record is cut short");
  const uvarint = () => { // encoding/binary's, in its shortest form only
    let v = 0n;
    for (let shift = 0n; ; shift += 7n) {
      const c = byte();
      if (shift === 63n && c > 1) refuse("record", "a number in the record overflows");
      v |= BigInt(c & 0x7f) << shift;
      if (c < 0x80) return c === 0 && shift > 0n ? refuse("record", "a number in the record is not in its shortest form") : v;
    }
  };
  const text = (max, what) => { // wire.AppendString: a length, then the bytes
    const n = uvarint();
    if (n > BigInt(Math.min(max, b.length - at))) refuse("record", `the record's ${what} is too long`);
    const s = b.subarray(at, at + Number(n));
    at += s.length;
    let out;
    try { out = utf8.decode(s); } catch { refuse("record", `the record's ${what} is not UTF-8`); }
    if (!out || /[\u0000-\u001f\u007f-\u009f]/.test(out)) refuse("record", `the record's ${what} is empty or holds a control character`);
    return out;
  };
  if (byte() !== 1) refuse("record", "the record's encoding version is not 1");
  const poll = text(64, "poll"), replica = text(64, "replica"), seq = uvarint(), wall = uvarint(), logical = uvarint();
  const voter = text(128, "voter"), option = text(64, "option"), idem = text(128, "idem");
  if (!ID.test(poll) || !ID.test(replica) || seq === 0n || wall === 0n || wall > I64 || logical > U32) refuse("record", "the record's ids or stamp are out of range");
  return { poll, voter, idem, vote: { vote_id: `${replica}/${seq}`, voter, option, stamp: `${wall}.${logical}` } };
}

// checkProof is receipt's checkProof: one record's proof against the tree
// head (its record hashes to its leaf and says what its vote says; its
// audit path leads from the leaf, the record's hash and its disposition's
// byte, to the head's root). It returns the decoded record. A path null
// (Go's JSON of a one-record tree's empty path) or left out is empty.
async function checkProof(p, head) {
  const path = isObject(p) ? p.path ?? [] : null;
  if (!isObject(p) || typeof p.leaf !== "string" || !Number.isSafeInteger(p.index) || p.index < 0 || !Array.isArray(path) ||
    typeof p.disposition !== "string") refuse("malformed", "the proof lacks its leaf, index, path or disposition");
  const record = base64(p.record, 4096);
  if (!record) refuse("malformed", "the proof's record is not base64");
  const sum = await sha256(record);
  if (!HASH.test(p.leaf) || hex(sum) !== p.leaf) refuse("record", `the record does not hash to the leaf ${p.leaf.slice(0, 64)}`);
  const rec = decodeRecord(record);
  if (rec.poll !== head.poll) refuse("record", `the record is poll ${rec.poll}'s`);
  const v = isObject(p.vote) ? p.vote : {};
  if (["vote_id", "voter", "option", "stamp"].some(k => v[k] !== rec.vote[k])) refuse("record", "the proof's vote is not what its record says");
  if (path.length > MAX_PATH) refuse("path", `a path of ${path.length} hashes`);
  if (!path.every(h => typeof h === "string" && HASH.test(h))) refuse("path", "a hash of the path is not 64 lowercase hex digits");
  // RFC 9162 §2.1.3.2: from the leaf's node up to the root.
  let fn = BigInt(p.index), sn = BigInt(head.size) - 1n;
  if (fn > sn) refuse("path", `leaf ${p.index} of a tree of ${head.size}`);
  const code = Object.hasOwn(DISPOSITION_CODE, p.disposition) ? DISPOSITION_CODE[p.disposition] : 0;
  if (!code) refuse("record", `unknown disposition ${p.disposition.slice(0, 32)}`);
  let r = await sha256([0], sum, [code]);
  for (const h of path.map(unhex)) {
    if (sn === 0n) refuse("path", "the path is longer than the tree is deep");
    if ((fn & 1n) === 1n || fn === sn) {
      r = await sha256([1], h, r);
      while ((fn & 1n) === 0n && fn !== 0n) { fn >>= 1n; sn >>= 1n; }
    } else r = await sha256([1], r, h);
    fn >>= 1n; sn >>= 1n;
  }
  if (sn !== 0n) refuse("path", "the path is shorter than the tree is deep");
  if (hex(r) !== head.root) refuse("root", `the path from leaf ${p.index} leads to another root than the certificate's ${head.root}`);
  return rec;
}

// fetchJSON GETs url, a JSON body of at most max bytes; 404 and 409 are
// the steps onStatus names ("unknown" and "pending" unless told), no
// answer or another refusal is "network".
async function fetchJSON(f, url, what, { max = MAX_PROOF, onStatus = { 404: "unknown", 409: "pending" } } = {}) {
  let res, text;
  try {
    res = await f(url, { headers: { Accept: "application/json" } });
    text = await res.text();
  } catch (err) { refuse("network", `${what}: no answer (${err?.message})`); }
  let body = null;
  try { body = text.length <= max ? JSON.parse(text) : null; } catch { /* not JSON */ }
  const said = body?.error ? ` (${body.error.code}: ${body.error.message})` : ` (HTTP ${res.status})`;
  if (onStatus[res.status] === "unknown") refuse("unknown", `${what}: the node has none${said}`);
  if (onStatus[res.status] === "pending") refuse("pending", `${what}: not until the poll is certified${said}`);
  if (!res.ok) refuse("network", `${what}: refused${said}`);
  return body ?? refuse("malformed", `${what}: not JSON of at most ${max} bytes`);
}

// MAX_RESULT bounds a certified result read (a quiz question's lists its
// answers): tally receipt verify's bound.
const MAX_RESULT = 16 << 20;

// sameHead checks that the certified result (an api.ResultView) is
// reconciled and that its tree head is the proof's h, field by field: a
// tree head signed by another key the node lists (an edge's), or of a
// certificate since withdrawn, is not the result's.
function sameHead(v, h) {
  if (!isObject(v)) refuse("malformed", "the certified result is not an object");
  if (v.status !== "reconciled") refuse("certificate", `the poll's result is not certified (status ${JSON.stringify(String(v.status).slice(0, 32))}): the proof's tree head is no certificate's`);
  if (v.poll !== h.poll) refuse("certificate", `the certified result is poll ${String(v.poll).slice(0, 64)}'s, the tree head poll ${h.poll}'s`);
  const t = isObject(v.detail) ? v.detail.tree : undefined;
  if (!isObject(t)) refuse("certificate", "the certified result holds no tree head (certified before receipts)");
  const differ = HEAD_FIELDS.filter(k => t[k] !== h[k]);
  if (differ.length) {
    const shown = differ.filter(k => k === "size" || k === "root" || k === "by")
      .map(k => `; the result's ${k} ${String(t[k]).slice(0, 64)}, the proof's ${h[k]}`).join("");
    refuse("certificate", `the proof's tree head is not the certified result's: ${differ.join(", ")} differ${differ.length === 1 ? "s" : ""}${shown}`);
  }
  if (v.digest !== h.digest) refuse("certificate", `the tree head names digest ${h.digest}, the certified result ${String(v.digest).slice(0, 64)}`);
}

/** proofPath is where a receipt's proof is served: /v1/polls/{poll}/proofs/{leaf}. */
export const proofPath = (poll, leaf) => `/v1/polls/${encodeURIComponent(poll)}/proofs/${encodeURIComponent(leaf)}`;

// resultPath is where a poll's certified result is served.
const resultPath = poll => `/v1/polls/${encodeURIComponent(poll)}/result`;

/**
 * verifyReceipt checks a vote's receipt against the certified result, step
 * by step, as receipt.Verify does: the receipt's signature by the replica
 * that ledgered the vote, the tree head's by the certifier, the record
 * (it hashes to the leaf and is the receipt's vote), its audit path from
 * the leaf (the record's hash and its disposition's byte) to the tree
 * head's root and, for a superseded vote (or a duplicate whose standing
 * copy is the voter's), the same for the voter's counted one, which is
 * another record (and, for a duplicate, not a duplicate itself). Then,
 * as tally receipt verify does, that the tree head is the certified
 * result's (GET /v1/polls/{poll}/result, or opts.result): reconciled, its
 * detail.tree the proof's tree_head field by field, and its digest the
 * tree head's. With neither baseUrl nor result, that last check cannot
 * be made: the verdict says certificate: "unchecked" ("checked" when
 * made).
 * The receipt, the proof and the keys are read as strictly as Go reads
 * them: an unknown field, a field of another type, base64 that is not
 * canonical, a replica listed twice or a key that is not 32 bytes is
 * "malformed".
 * It resolves, never rejects on what it is given or fetched, with
 * {ok: true, disposition, vote, counted?, size, root, by, certificate},
 * or with {ok: false, step, message}: step is the one that failed
 * ("malformed", "signature", "certificate", "record", "path", "root"),
 * "pending" (not certified yet: 409), "unknown" (no proof of that leaf:
 * 404), "network" (no answer, or another refusal) or "unsupported" (no
 * WebCrypto Ed25519 here: a page over plain HTTP off localhost has no
 * crypto.subtle). It throws (rejects with) a TypeError only when it has
 * no baseUrl and keys or proof is left out (undefined): a proof given as
 * null, or anything else, is a result.
 * @param {object} receipt  a vote answer's receipt
 * @param {object} [opts]
 * @param {string} [opts.baseUrl] the node to fetch the keys, the proof and the certified result from
 * @param {Function} [opts.fetch] default: globalThis.fetch
 * @param {Array|object} [opts.keys] GET /v1/cluster/keys's answer, its keys, or {replica: base64 key}
 * @param {object} [opts.proof] GET /v1/polls/{poll}/proofs/{leaf}'s answer
 * @param {object} [opts.result] GET /v1/polls/{poll}/result's answer (an api.ResultView)
 */
export async function verifyReceipt(receipt, { baseUrl, fetch: f = globalThis.fetch, keys, proof, result } = {}) {
  // Nowhere to fetch from is the caller's mistake; a keys or proof given
  // (even null) is checked for what it is.
  if (!baseUrl && (keys === undefined || proof === undefined)) throw new TypeError("verifyReceipt: baseUrl is required unless both keys and proof are given");
  const base = String(baseUrl ?? "").replace(/\/+$/, "");
  const given = x => baseUrl ? x != null : true; // with a baseUrl, null or undefined is fetched
  try {
    if (!globalThis.crypto?.subtle) refuse("unsupported", "this runtime has no WebCrypto (a page served over plain HTTP off localhost)");
    const { replica, sig } = checkReceipt(receipt);
    const ring = keyring(given(keys) ? keys : await fetchJSON(f, base + "/v1/cluster/keys", "the cluster's keys", { max: MAX_RESULT }));
    const r = receipt;
    if (!await signed(ring.get(replica), `tally receipt v1\n${r.poll}\n${r.vote_id}\n${r.stamp}\n${r.leaf}\n`, sig)) {
      refuse("signature", `the receipt is not signed by ${replica}'s key`);
    }
    const p = given(proof) ? proof : await fetchJSON(f, base + proofPath(r.poll, r.leaf), "the proof");
    shapeProof(p, "the proof");
    const h = p.tree_head;
    if (!isObject(h)) refuse("certificate", "the proof carries no tree head");
    const hsig = base64(h.sig, 88);
    if (!ID.test(h.poll ?? "") || !ID.test(h.by ?? "") || !HASH.test(h.root ?? "") || !HASH.test(h.digest ?? "") ||
      !Number.isSafeInteger(h.size) || h.size < 0 || hsig?.length !== 64) refuse("certificate", "the tree head is malformed");
    if (!await signed(ring.get(h.by), `tally tree head v1\n${h.poll}\n${h.size}\n${h.root}\n${h.digest}\n${h.by}\n`, hsig)) {
      refuse("certificate", `the tree head is not signed by ${h.by}'s key`);
    }
    if (h.poll !== r.poll) refuse("certificate", `the tree head is poll ${h.poll}'s, the receipt poll ${r.poll}'s`);
    if (p.leaf !== r.leaf) refuse("record", "the proof is for another leaf than the receipt's");
    const rec = await checkProof(p, h);
    if (rec.vote.vote_id !== r.vote_id || rec.vote.stamp !== r.stamp) refuse("record", `the record is vote ${rec.vote.vote_id} stamped ${rec.vote.stamp}, the receipt's ${r.vote_id} stamped ${r.stamp}`);
    const verdict = { ok: true, disposition: p.disposition, vote: rec.vote, size: h.size, root: h.root, by: h.by };
    // certified checks, once the proof holds, that its tree head is the
    // certified result's, when there is one to ask or given.
    const certified = async v => {
      if (!baseUrl && result === undefined) return { ...v, certificate: "unchecked" };
      sameHead(given(result) ? result : await fetchJSON(f, base + resultPath(r.poll), "the certified result",
        { max: MAX_RESULT, onStatus: { 409: "pending" } }), h);
      return { ...v, certificate: "checked" };
    };
    const c = p.counted ?? null;
    switch (p.disposition) {
      case "counted": case "late": case "filtered":
        if (c) refuse("record", `a ${p.disposition} record points at another`);
        return await certified(verdict);
      case "superseded": case "duplicate": {
        if (!c) return p.disposition === "duplicate" ? await certified(verdict) : refuse("record", "a superseded record without the voter's counted one");
        if (!isObject(c) || c.counted != null || c.tree_head != null) refuse("record", "the counted record's proof nests further");
        if (c.leaf === p.leaf || c.index === p.index) refuse("record", "the record said to count instead is the record itself");
        let other;
        try { other = await checkProof(c, h); } catch (err) {
          throw err instanceof Refusal ? new Refusal(err.step, `the voter's counted vote: ${err.message}`) : err;
        }
        if (other.voter !== rec.voter) refuse("record", "the counted record is another voter's");
        if (p.disposition === "superseded" && c.disposition !== "counted") refuse("record", `the record said to count instead is ${c.disposition}`);
        if (p.disposition === "duplicate" && (other.idem !== rec.idem || c.disposition === "duplicate")) {
          refuse("record", "the record said to stand for the key has another key, or does not stand");
        }
        return await certified({ ...verdict, counted: { ...other.vote, disposition: c.disposition } });
      }
      default: refuse("record", `unknown disposition ${String(p.disposition).slice(0, 32)}`);
    }
  } catch (err) {
    if (err instanceof Refusal) return { ok: false, step: err.step, message: err.message };
    return { ok: false, step: "malformed", message: `the receipt or its proof cannot be read (${err?.message})` };
  }
}

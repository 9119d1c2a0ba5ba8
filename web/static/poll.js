// The views of one poll: the voter's (also the embed and the host's), the
// presenter screen and the on-air overlay. Each is built once and patched
// in place on every frame, so focus stays where it is and the bars'
// transitions run.
import { t, num, plural, duration, when } from "/i18n.js";
import { el, api, choices, subscribe, tap, client } from "/live.js";
import { proofPath } from "/client.js";
import { codeLine } from "/join.js";

// shares gives each count its whole percent of total so that they add up
// to 100 (largest remainder: 44/33/22 is 45/33/22, not 44/33/22 = 99%).
export function shares(counts, total) {
  if (!total) return counts.map(() => 0);
  const raw = counts.map(n => 100 * n / total), out = raw.map(Math.floor);
  const left = 100 - out.reduce((a, b) => a + b, 0);
  const order = raw.map((r, i) => [r - out[i], i]).sort((x, y) => y[0] - x[0] || x[1] - y[1]);
  for (let k = 0; k < left && k < order.length; k++) out[order[k][1]]++;
  return out;
}

// Bars draws the options with their share; buttons when interactive. With
// limit, a poll with more options shows its top limit-1 and an "others"
// row with the rest, so a screen never holds more rows than it can show.
export class Bars {
  constructor(list, { interactive = false, onTap = null, only = null, limit = 0 } = {}) {
    this.list = list; this.interactive = interactive; this.onTap = onTap; this.only = only; this.limit = limit;
    this.items = new Map(); this.key = ""; this.wasHidden = null;
  }
  update(s, totals, total, { mine = null, open = false } = {}) {
    let options = s.options.filter(o => !this.only || this.only.includes(o.id));
    const hidden = s.hidden && !s.hostTotals;
    let rest = null;
    if (this.limit && options.length > this.limit) {
      const ranked = options.map((o, i) => [o, totals[o.id] || 0, i]).sort((x, y) => y[1] - x[1] || x[2] - y[2]);
      options = ranked.slice(0, this.limit - 1).map(r => r[0]);
      const others = ranked.slice(this.limit - 1);
      rest = { id: "\u0000others", label: t("others", { n: others.length }), n: others.reduce((a, r) => a + r[1], 0) };
    }
    const rows = rest ? [...options, rest] : options;
    const key = rows.map(o => o.id + "\u0000" + o.label).join("\u0001");
    if (key !== this.key) this.build(rows);
    const counts = rows.map(o => o === rest ? rest.n : totals[o.id] || 0);
    const pcts = shares(counts, total);
    const best = Math.max(0, ...counts.slice(0, options.length));
    const final = phase(s) === "final";
    // The reveal (hidden until now): the figures count up with the bars.
    const reveal = this.wasHidden === true && !hidden && !matchMedia("(prefers-reduced-motion: reduce)").matches;
    this.wasHidden = hidden;
    rows.forEach((o, i) => {
      const it = this.items.get(o.id), n = counts[i], pct = pcts[i];
      it.root.classList.toggle("mine", mine === o.id);
      it.root.classList.toggle("hidden-count", hidden);
      it.root.classList.toggle("lead", final && !hidden && o !== rest && best > 0 && n === best);
      if (this.interactive) {
        it.root.setAttribute("aria-pressed", mine === o.id ? "true" : "false");
        it.root.disabled = !open; // its name is its visible text: label, share, votes
      }
      it.fill.style.width = hidden ? "0%" : `${total ? 100 * n / total : 0}%`;
      if (reveal) countUp(it, n, pct);
      else if (!it.counting) {
        it.pct.textContent = hidden ? "" : `${pct}%`;
        it.count.textContent = hidden ? "" : plural("votes", n);
      }
      it.final = { n, pct };
    });
  }
  build(rows) {
    this.key = rows.map(o => o.id + "\u0000" + o.label).join("\u0001");
    this.items.clear();
    const kids = rows.map(o => {
      const pct = el("span", { class: "pct" }), count = el("span", { class: "count" });
      const fill = el("span", { class: "fill" });
      // dir=auto: Arabic or Hebrew runs right to left, punctuation where it belongs.
      // The voter's own choice says so in the option itself (shown by CSS
      // on .mine), in the page's direction: with its own dir, the row's
      // dir=auto still follows the label.
      const body = [this.interactive ? el("span", { class: "mine-tag", dir: document.documentElement.dir || "ltr" }, "✓ ", t("yourVoteTag")) : "",
        el("span", { class: "row" }, el("span", { class: "label", title: o.label }, o.label), el("span", { class: "figures", dir: document.documentElement.dir || "ltr" }, pct, count)),
        el("span", { class: "track", "aria-hidden": "true" }, fill)];
      const others = o.id === "\u0000others";
      // The whole row takes the label's direction: a right-to-left label
      // starts at the right, its figures at the left, its bar grows leftwards.
      const root = this.interactive && !others
        ? el("button", { class: "option", type: "button", dir: "auto", "data-option": o.id, onclick: () => this.onTap(o.id) }, body)
        : el("div", { class: others ? "option others" : "option", dir: "auto", "data-option": others ? null : o.id }, body);
      this.items.set(o.id, { root, pct, count, fill });
      return el("li", {}, root);
    });
    this.list.replaceChildren(...kids);
  }
}

// receiptSpreadMs is how long a page waits, at random, before it asks
// for its vote's proof: up to 30 s, so that the audience's proofs reach
// the nodes spread over half a minute (BENCHMARKS.md, "Receipts"). The
// local storage key "tally.receipt-spread-ms" sets another bound (0: at
// once; the browser tests use it).
function receiptSpreadMs() {
  let bound = 30000;
  try {
    const v = localStorage.getItem("tally.receipt-spread-ms");
    if (v !== null && /^[0-9]{1,6}$/.test(v)) bound = Number(v);
  } catch { /* no storage: the default */ }
  return Math.random() * bound;
}

// countUp runs a row's figures from zero to n (and pct) over a second.
function countUp(it, n, pct) {
  const start = performance.now();
  it.counting = true;
  const step = now => {
    const f = Math.min(1, (now - start) / 1000), ease = 1 - (1 - f) ** 3;
    const cur = it.final || { n, pct };
    it.pct.textContent = `${Math.round(cur.pct * ease)}%`;
    it.count.textContent = plural("votes", Math.round(cur.n * ease));
    if (f < 1) requestAnimationFrame(step);
    else it.counting = false;
  };
  requestAnimationFrame(step);
}

// fit shrinks a screen's type (the --fit factor its sizes are multiplied
// by) until box holds its content without scrolling and, when maxHeight is
// given, stays under it: a 300-character question or 32 options fit the
// screen instead of pushing the total and the QR code off it.
export function fit(scope, box, maxHeight = 0) {
  let f = 1;
  scope.style.setProperty("--fit", "1");
  for (let i = 0; i < 14; i++) {
    const over = box.scrollHeight > box.clientHeight + 1 || box.scrollWidth > box.clientWidth + 1 ||
      (maxHeight && box.getBoundingClientRect().height > maxHeight);
    if (!over || f < 0.3) break;
    f *= 0.88;
    scope.style.setProperty("--fit", f.toFixed(3));
  }
}

// outcome names the winner or the tie of a final result.
export function outcome(s, totals) {
  const best = Math.max(0, ...s.options.map(o => totals[o.id] || 0));
  if (!best) return "";
  const top = s.options.filter(o => (totals[o.id] || 0) === best).map(o => o.label);
  return top.length === 1 ? t("winner", { option: top[0] }) : t("tie", { options: top.join(t("and")) });
}

// phase is where the poll is, as a viewer reads it.
export function phase(s) {
  if (s.final) return "final";
  if (s.status === "scheduled") return "scheduled";
  if (s.status === "open") return "live";
  return "closed";
}

// Clock keeps the server's time from the frames' as_of_ms, so countdowns
// do not depend on the viewer's own clock being right.
class Clock {
  constructor() { this.skew = 0; }
  heard(asOf) { if (asOf) this.skew = asOf - Date.now(); }
  now() { return Date.now() + this.skew; }
}

// countdownText says when the poll opens or closes, from now.
function countdownText(s, now) {
  const p = phase(s);
  if (p === "scheduled") return t("opensIn", { d: duration(s.opens_at - now) });
  if (p === "live") return s.closes_at - now < 86400000 ? t("closesIn", { d: duration(s.closes_at - now) }) : t("closesAt", { when: when(s.closes_at) });
  return s.closes_at ? t("closedAt", { when: when(s.closes_at) }) : "";
}

// PollView is the voter's view of one poll; host adds the host's controls,
// embed drops the page's frame around it.
export class PollView {
  constructor(root, poll, { host = null } = {}) {
    this.root = root; this.poll = poll; this.host = host; this.adjust = {}; this.message = "";
    this.clock = new Clock(); this.leader = null; this.eventsUntil = 0;
    this.status = el("p", { class: "status" }, this.badge = el("span", { class: "badge" }), " ", this.countdown = el("span", { class: "countdown" }));
    this.question = el("h1", { id: "question", dir: "auto" });
    this.hint = el("p", { class: "hint", id: "hint" });
    this.list = el("ul", { class: "options", "aria-labelledby": "question" });
    // On the host's page the card shows the poll as voters see it, but
    // takes no taps: the host runs the poll there, and a vote by accident
    // would count.
    this.bars = new Bars(this.list, { interactive: !host, onTap: id => tap(this.poll, id, this) });
    this.summary = el("p", { class: "summary" }, this.total = el("span", { id: "total" }), " · ", this.viewers = el("span", { id: "viewers" }));
    this.result = el("div", { class: "result", id: "result" });
    // What became of the voter's vote, once the result is certified.
    this.receipt = el("p", { class: "receipt", id: "receipt", "aria-live": "polite" });
    this.error = el("p", { class: "error", role: "alert" });
    this.ticker = el("p", { class: "events", "aria-hidden": "true" });
    this.announce = el("p", { class: "sr-only", "aria-live": "polite", id: "announce" });
    this.details = el("details", { class: "details" }, el("summary", {}, t("details")), this.detailBody = el("div", {}));
    this.conn = "";
    root.replaceChildren(el("p", {}, t("connecting")));
    this.stream = subscribe(poll, s => this.render(s), c => { this.conn = c; this.renderDetails(); });
    this.timer = setInterval(() => this.tick(), 1000);
    // Frames carry the freshness vector when they are sent; between them
    // the cluster endpoint keeps it current.
    this.cluster = setInterval(() => api("GET", "/v1/cluster").then(c => {
      if (this.stream.state) { this.stream.state.regions = c.regions; this.renderDetails(); }
    }).catch(() => {}), 5000);
  }
  optimistic(from, to) {
    if (from === to) return;
    if (from) this.adjust[from] = (this.adjust[from] || 0) - 1;
    this.adjust[to] = (this.adjust[to] || 0) + 1;
    this.message = ""; this.render(this.stream.state);
  }
  settled(message) { this.adjust = {}; this.message = message; this.render(this.stream.state); }
  reverted(previous, reason) { this.adjust = {}; this.message = reason; this.render(this.stream.state); }
  tick() { if (this.stream.state) this.countdown.textContent = countdownText(this.stream.state, this.clock.now()); }
  render(s) {
    if (!s) return;
    if (!this.question.isConnected) {
      const kids = [this.status, this.question, this.hint, this.list, this.summary, this.result, this.receipt, this.error, this.ticker, this.announce, this.details];
      // The host's controls come first, above the poll's card.
      if (this.host) kids.unshift(this.hostPanel = el("section", { class: "host", "aria-label": t("host") }));
      this.root.replaceChildren(...kids);
    }
    this.clock.heard(s.as_of_ms);
    const p = phase(s), open = p === "live", mine = choices[this.poll];
    const source = s.hidden && this.hostTotals ? this.hostTotals : s.totals;
    const totals = {};
    let total = 0;
    for (const o of s.options) { totals[o.id] = Math.max(0, (source[o.id] || 0) + (this.adjust[o.id] || 0)); total += totals[o.id]; }
    const shown = { ...s, hostTotals: !!(s.hidden && this.hostTotals) };
    this.question.textContent = s.question;
    this.badge.textContent = t(p); this.badge.className = "badge " + p;
    this.countdown.textContent = countdownText(s, this.clock.now());
    this.bars.update(shown, totals, total, { mine, open });
    const label = id => (s.options.find(o => o.id === id) || { label: id }).label;
    this.hint.textContent = this.host ? "" : p === "scheduled" ? t("waitOpen") :
      !open ? (p === "final" ? "" : t(s.status === "closed" ? "counting" : "voteClosed")) :
      mine ? t("yourVote", { option: label(mine) }) : t("tapToVote");
    const hidden = s.hidden && !shown.hostTotals;
    this.total.textContent = hidden ? t(open || p === "scheduled" ? "hiddenResults" : "hiddenAfter") : plural("votes", total);
    this.viewers.textContent = plural("watching", s.viewers || 0);
    this.renderResult(s, totals, p, hidden);
    if (p === "final" && !hidden && !this.host) this.checkReceipt();
    this.error.textContent = this.message;
    // Events: said once when they happen, shown for ten seconds.
    const ev = hidden || p === "final" ? "" : (s.events || []).map(e => e.kind === "leader" ? t("leads", { option: label(e.option) }) :
      e.kind === "overtake" ? t("overtakes", { option: label(e.option), passed: label(e.passed) }) : t("milestone", { n: num(e.total) })).join(" · ");
    if (ev) { this.ticker.textContent = ev; this.eventsUntil = Date.now() + 10000; }
    else if (Date.now() > this.eventsUntil || p === "final") this.ticker.textContent = "";
    const leader = hidden ? null : (p === "final" ? outcome(s, totals) : s.leader ? t("leads", { option: label(s.leader) }) : null);
    if (leader && leader !== this.leader) this.announce.textContent = leader;
    this.leader = leader;
    this.renderDetails();
    if (this.host) this.host(this.hostPanel, s, totals, total, this);
  }
  renderResult(s, totals, p, hidden) {
    if (p !== "final" || hidden) { this.result.replaceChildren(); return; }
    this.result.replaceChildren(el("p", { class: "winner" }, outcome(s, totals) || plural("votes", 0)),
      s.digest ? el("p", { class: "digest" }, t("certified"), " · ", t("digest"), ": ", el("code", {}, s.digest)) : "");
  }
  // checkReceipt checks the receipt of the voter's latest vote on this
  // poll, after a random wait (receiptSpreadMs: a million pages see the
  // certificate in the same second, and each proof costs its node); it
  // checks it (the client keeps them from the votes' answers, in
  // localStorage) against the certified result, with the client's
  // verifyReceipt: the receipt's signature, the certificate's, the record
  // and its path in the certificate's tree. The proof follows the
  // certificate: while the node answers that it is not ready, or does
  // not answer, it asks again, a few times.
  async checkReceipt() {
    const receipt = client.receipts(this.poll).at(-1);
    const key = receipt && JSON.stringify(receipt); // a new one (another tab voted), or one edited: checked again
    if (!receipt || this.checked === key) return;
    this.checked = key;
    this.receipt.className = "receipt";
    this.receipt.textContent = t("receiptChecking");
    await new Promise(r => setTimeout(r, receiptSpreadMs()));
    if (this.closed || this.checked !== key) return;
    let v;
    for (let tries = 0; ; tries++) {
      v = await client.verifyReceipt(receipt);
      if (this.closed || this.checked !== key) return;
      if (!["pending", "network"].includes(v.step) || tries >= 5) break;
      await new Promise(r => setTimeout(r, 1000 * 2 ** tries));
    }
    this.showReceipt(v, receipt);
  }
  // showReceipt says in one line what the check of a receipt found.
  showReceipt(v, receipt) {
    const options = this.stream.state?.options || [];
    const label = id => (options.find(o => o.id === id) || { label: id }).label;
    const counts = v.ok && (v.disposition === "counted" || v.disposition === "superseded" ||
      (v.disposition === "duplicate" && v.counted?.disposition === "counted"));
    let line;
    if (!v.ok) line = v.step === "unknown" ? t("receiptUnknown") : t("receiptUnchecked", { why: t("receiptStep_" + v.step) });
    else if (v.disposition === "superseded") line = t("receiptSuperseded", { option: label(v.counted.option) });
    else if (counts) line = t("receiptCounted");
    else line = t({ late: "receiptLate", filtered: "receiptFiltered" }[v.disposition] || "receiptRepeat");
    // The proof itself, for whoever wants to see it (or check it again elsewhere).
    const proof = v.ok || ["certificate", "record", "path", "root"].includes(v.step)
      ? [" · ", el("a", { href: proofPath(receipt.poll, receipt.leaf), target: "_blank", rel: "noopener" }, t("receiptProof"))] : [];
    this.receipt.className = "receipt " + (counts ? "ok" : "bad");
    this.receipt.replaceChildren(line, ...proof);
  }
  renderDetails() {
    const s = this.stream.state;
    if (!s) return;
    const regions = Object.entries(s.regions || {}).filter(([r]) => r !== s.region).sort();
    const age = ([r, ms]) => ms < 1500 ? t("regionLive", { r }) : ms < 60000 ? t("regionBehind", { r, s: (ms / 1000).toFixed(1) }) : t("regionLost", { r });
    this.detailBody.replaceChildren(
      el("p", { id: "conn" }, this.conn ? t("transport", { t: this.conn }) : t("connecting")),
      s.region ? el("p", {}, t("servedBy", { r: s.region })) : "",
      regions.length ? el("ul", { class: "regions", id: "regions" }, regions.map(e => el("li", { class: e[1] < 3000 ? "fresh" : "stale", "data-region": e[0] }, age(e)))) : "",
      s.hidden ? "" : el("p", {}, t("perMinute", { n: num(Math.round(s.votes_per_min || 0)) })));
  }
  close() { this.closed = true; this.stream.close(); clearInterval(this.cluster); clearInterval(this.timer); clearInterval(this.hostTimer); }
}

// voteBase is where viewers vote: the node's --public-url, which it puts in
// the broadcaster views' page, or else this screen's own address (guessed).
export function voteBase() {
  const meta = document.querySelector('meta[name="tally-public-url"]');
  return meta ? { base: meta.content.replace(/\/+$/, ""), guessed: false } : { base: location.origin, guessed: true };
}
export const loopback = host => /^(localhost|127\.|\[::1\]|0\.0\.0\.0)/.test(host);

// PresentView is the studio's big screen: the question, the bars, the
// total, the countdown and a QR code of the voting page. Everything fits
// the screen whatever the content: the type shrinks (fit), long words
// break, labels clamp, and past eight options the top seven show with an
// "others" row; the QR code and the total always stay on screen.
export class PresentView {
  // opts.event: the screen follows an event (EventView), so its join code
  // is the event's, which always leads to the current poll.
  constructor(root, poll, opts = {}) {
    document.body.classList.add("present");
    this.root = root; this.poll = poll;
    this.clock = new Clock();
    const qr = `/v1/polls/${encodeURIComponent(poll)}/qr.png?size=512`;
    const { base, guessed } = voteBase();
    const url = `${base}/#/poll/${encodeURIComponent(poll)}`;
    const host = new URL(base).host;
    root.replaceChildren(
      this.stage = el("div", { class: "stage" },
        el("p", { class: "status" }, this.badge = el("span", { class: "badge" }), " ", this.mark = el("span", { class: "certified" })),
        this.question = el("h1", { dir: "auto" }),
        this.list = el("ul", { class: "options big", "aria-label": t("polls") }),
        el("p", { class: "summary" }, this.total = el("span", { id: "total" }), " ", this.countdown = el("span", { class: "countdown" })),
        this.result = el("p", { class: "winner", "aria-live": "polite", dir: "auto" })),
      this.qr = el("aside", { class: "qr" }, el("img", { src: qr, alt: `${t("scanToVote")}: ${url}`, width: "320", height: "320" }),
        this.scan = el("p", { class: "scan" }, t("scanToVote")), el("p", { class: "url" }, url),
        opts.event ? codeLine("event", opts.event, host) : codeLine("poll", poll, host),
        guessed ? el("p", { class: "warn", role: "note" }, loopback(host) ? t("localAddress", { host }) : t("guessedAddress")) : ""));
    this.bars = new Bars(this.list, { limit: 8 });
    this.stream = subscribe(poll, s => this.render(s));
    this.timer = setInterval(() => { if (this.stream.state) this.countdown.textContent = this.when(this.stream.state); }, 1000);
    this.onResize = () => fit(this.root, this.stage);
    addEventListener("resize", this.onResize);
  }
  when(s) { const c = countdownText(s, this.clock.now()); return c ? "· " + c : ""; }
  render(s) {
    // A quiz question's presenter is the quiz's studio screen (the most
    // picked answer is no winner, and its QR code should join the quiz).
    if (!this.checked && s.event && this.poll.startsWith(s.event + "-")) {
      this.checked = true;
      api("GET", `/v1/quizzes/${encodeURIComponent(s.event)}`).then(() => location.replace(`/present/quiz/${encodeURIComponent(s.event)}`), () => {});
    }
    this.clock.heard(s.as_of_ms);
    const p = phase(s);
    let total = 0;
    for (const o of s.options) total += s.totals[o.id] || 0;
    this.badge.textContent = t(p); this.badge.className = "badge " + p;
    this.mark.textContent = p === "final" && s.digest ? t("certifiedMark") : "";
    this.question.textContent = s.question;
    this.bars.update(s, s.totals, total);
    const open = p === "live" || p === "scheduled";
    this.total.textContent = s.hidden ? t(open ? "hiddenResults" : "hiddenAfter") : plural("votes", total);
    this.countdown.textContent = this.when(s);
    this.result.textContent = p === "final" && !s.hidden ? outcome(s, s.totals) : "";
    // After the close the code is no invitation: it says voting has closed.
    this.scan.textContent = open ? t("scanToVote") : t("votingClosed");
    this.qr.classList.toggle("closed", !open);
    fit(this.root, this.stage);
  }
  close() { this.stream.close(); clearInterval(this.timer); removeEventListener("resize", this.onResize); }
}

// OverlayView is a lower third for OBS or vMix: transparent, no
// interaction, sized from the canvas (720p and 1080p look the same),
// inside the title-safe area and at most a third of the frame high.
// ?theme=dark|light, ?options=a,b to show only those (said on the plate).
export class OverlayView {
  constructor(root, poll) {
    const q = new URLSearchParams(location.search);
    document.body.classList.add("overlay", q.get("theme") === "light" ? "light" : "dark");
    this.root = root;
    this.asked = (q.get("options") || "").split(",").map(s => s.trim()).filter(Boolean);
    this.clock = new Clock();
    root.replaceChildren(this.plate = el("div", { class: "lower-third" },
      el("p", { class: "question", dir: "auto" }, this.question = el("span", {}), " ", this.badge = el("span", { class: "badge" })),
      this.list = el("ul", { class: "options compact", "aria-label": t("polls") }),
      this.total = el("p", { class: "summary", dir: "auto" })));
    this.bars = null;
    this.stream = subscribe(poll, s => this.render(s));
    this.timer = setInterval(() => { if (this.stream.state && phase(this.stream.state) === "scheduled") this.render(this.stream.state); }, 1000);
    this.onResize = () => fit(this.root, this.plate, innerHeight / 3);
    addEventListener("resize", this.onResize);
  }
  render(s) {
    this.clock.heard(s.as_of_ms);
    if (!this.bars) {
      // Only the ids the poll has; none of them (a typo): all, and the plate says so.
      this.known = this.asked.filter(id => s.options.some(o => o.id === id));
      this.unknown = this.asked.filter(id => !this.known.includes(id));
      this.bars = new Bars(this.list, { only: this.known.length ? this.known : null, limit: 6 });
    }
    const p = phase(s);
    let total = 0;
    for (const o of s.options) total += s.totals[o.id] || 0;
    this.question.textContent = s.question;
    this.badge.textContent = t(p); this.badge.className = "badge " + p;
    const shown = this.known.length ? this.known.length : s.options.length;
    this.list.classList.toggle("cols-2", Math.min(shown, 6) > 3);
    this.list.classList.toggle("no-counts", !!s.hidden);
    this.bars.update(s, s.totals, total);
    const parts = [];
    if (p === "scheduled") parts.push(countdownText(s, this.clock.now()));
    else if (s.hidden) parts.push(t("resultsSoon"));
    else {
      if (p === "final") parts.push(outcome(s, s.totals), s.digest ? t("certifiedMark") : "");
      parts.push(plural("votes", total));
      if (this.known.length && this.known.length < s.options.length) parts.push(t("showingOf", { n: this.known.length, total: s.options.length }));
    }
    if (this.unknown.length && !this.known.length) parts.push(t("noSuchOptions", { ids: this.unknown.join(", ") }));
    this.total.textContent = parts.filter(Boolean).join(" · ");
    fit(this.root, this.plate, innerHeight / 3);
  }
  close() { this.stream.close(); clearInterval(this.timer); removeEventListener("resize", this.onResize); }
}

// EventView follows an event's current poll (/overlay/event/{event},
// /present/event/{event}), so OBS keeps one browser source for a whole
// show: the open poll that opened last, else the last one that opened,
// else the next to open. It looks every two seconds.
export class EventView {
  constructor(root, event, View) {
    this.root = root; this.event = event; this.View = View; this.poll = null; this.inner = null;
    this.look();
    this.timer = setInterval(() => this.look(), 2000);
  }
  async look() {
    let polls;
    try { ({ polls } = await api("GET", `/v1/polls?event=${encodeURIComponent(this.event)}&limit=200`)); } catch { return; }
    const by = (a, b) => b.opens_at - a.opens_at || b.id.localeCompare(a.id);
    const current = polls.filter(p => p.status === "open").sort(by)[0] || polls.filter(p => p.status !== "scheduled").sort(by)[0] ||
      polls.filter(p => p.status === "scheduled").sort((a, b) => -by(a, b))[0];
    if (!current || current.id === this.poll) return;
    this.inner?.close();
    this.poll = current.id;
    this.inner = new this.View(this.root, current.id, { event: this.event });
  }
  close() { clearInterval(this.timer); this.inner?.close(); }
}

// The views of one poll: the voter's (also the embed and the host's), the
// presenter screen and the on-air overlay. Each is built once and patched
// in place on every frame, so focus stays where it is and the bars'
// transitions run.
import { t, num, plural, duration, when } from "/i18n.js";
import { el, api, choices, subscribe, tap } from "/live.js";

// Bars draws the options with their share; buttons when interactive.
export class Bars {
  constructor(list, { interactive = false, onTap = null, only = null } = {}) {
    this.list = list; this.interactive = interactive; this.onTap = onTap; this.only = only;
    this.items = new Map(); this.key = "";
  }
  update(s, totals, total, { mine = null, open = false } = {}) {
    const options = s.options.filter(o => !this.only || this.only.includes(o.id));
    const key = options.map(o => o.id + "\u0000" + o.label).join("\u0001");
    if (key !== this.key) this.build(options);
    const hidden = s.hidden && !s.hostTotals;
    for (const o of options) {
      const it = this.items.get(o.id), n = totals[o.id] || 0, share = total ? 100 * n / total : 0;
      it.root.classList.toggle("mine", mine === o.id);
      it.root.classList.toggle("hidden-count", hidden);
      if (this.interactive) {
        it.root.setAttribute("aria-pressed", mine === o.id ? "true" : "false");
        it.root.disabled = !open; // its name is its visible text: label, share, votes
      }
      it.pct.textContent = hidden ? "" : `${Math.round(share)}%`;
      it.count.textContent = hidden ? "" : plural("votes", n);
      it.fill.style.width = hidden ? "0%" : `${share}%`;
    }
  }
  build(options) {
    this.key = options.map(o => o.id + "\u0000" + o.label).join("\u0001");
    this.items.clear();
    const kids = options.map(o => {
      const pct = el("span", { class: "pct" }), count = el("span", { class: "count" });
      const fill = el("span", { class: "fill" });
      const body = [el("span", { class: "row" }, el("span", { class: "label" }, o.label), el("span", { class: "figures" }, pct, count)),
        el("span", { class: "track", "aria-hidden": "true" }, fill)];
      const root = this.interactive
        ? el("button", { class: "option", type: "button", "data-option": o.id, onclick: () => this.onTap(o.id) }, body)
        : el("div", { class: "option", "data-option": o.id }, body);
      this.items.set(o.id, { root, pct, count, fill });
      return el("li", {}, root);
    });
    this.list.replaceChildren(...kids);
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
    this.question = el("h1", { id: "question" });
    this.hint = el("p", { class: "hint", id: "hint" });
    this.list = el("ul", { class: "options", "aria-labelledby": "question" });
    this.bars = new Bars(this.list, { interactive: true, onTap: id => tap(this.poll, id, this) });
    this.summary = el("p", { class: "summary" }, this.total = el("span", { id: "total" }), " · ", this.viewers = el("span", { id: "viewers" }));
    this.result = el("div", { class: "result", id: "result" });
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
      const kids = [this.status, this.question, this.hint, this.list, this.summary, this.result, this.error, this.ticker, this.announce, this.details];
      if (this.host) kids.push(this.hostPanel = el("section", { class: "host", "aria-label": t("host") }));
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
    this.hint.textContent = p === "scheduled" ? t("waitOpen", { d: duration(s.opens_at - this.clock.now()) }) :
      !open ? (p === "final" ? "" : t(s.status === "closed" ? "counting" : "voteClosed")) :
      mine ? t("yourVote", { option: label(mine) }) : t("tapToVote");
    const hidden = s.hidden && !shown.hostTotals;
    this.total.textContent = hidden ? t("hiddenResults") : plural("votes", total);
    this.viewers.textContent = plural("watching", s.viewers || 0);
    this.renderResult(s, totals, p, hidden);
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
  close() { this.stream.close(); clearInterval(this.cluster); clearInterval(this.timer); clearInterval(this.hostTimer); }
}

// PresentView is the studio's big screen: the question, the bars, the
// total, the countdown and a QR code of the voting page.
export class PresentView {
  constructor(root, poll) {
    document.body.classList.add("present");
    this.clock = new Clock();
    const qr = `/v1/polls/${encodeURIComponent(poll)}/qr.png?size=512`;
    const url = `${location.origin}/#/poll/${encodeURIComponent(poll)}`;
    root.replaceChildren(
      el("div", { class: "stage" },
        this.badge = el("p", { class: "badge" }),
        this.question = el("h1", {}),
        this.list = el("ul", { class: "options big", "aria-label": t("polls") }),
        el("p", { class: "summary" }, this.total = el("span", { id: "total" }), " · ", this.countdown = el("span", { class: "countdown" })),
        this.result = el("p", { class: "winner", "aria-live": "polite" })),
      el("aside", { class: "qr" }, el("img", { src: qr, alt: `${t("scanToVote")}: ${url}`, width: "320", height: "320" }),
        el("p", { class: "scan" }, t("scanToVote")), el("p", { class: "url" }, url)));
    this.bars = new Bars(this.list);
    this.stream = subscribe(poll, s => this.render(s));
    this.timer = setInterval(() => { if (this.stream.state) this.countdown.textContent = countdownText(this.stream.state, this.clock.now()); }, 1000);
  }
  render(s) {
    this.clock.heard(s.as_of_ms);
    const p = phase(s);
    let total = 0;
    for (const o of s.options) total += s.totals[o.id] || 0;
    this.badge.textContent = t(p); this.badge.className = "badge " + p;
    this.question.textContent = s.question;
    this.bars.update(s, s.totals, total);
    this.total.textContent = s.hidden ? t("hiddenResults") : plural("votes", total);
    this.countdown.textContent = countdownText(s, this.clock.now());
    this.result.textContent = p === "final" && !s.hidden ? outcome(s, s.totals) : "";
  }
  close() { this.stream.close(); clearInterval(this.timer); }
}

// OverlayView is a lower third for OBS or vMix: transparent, no
// interaction, ?theme=dark|light, ?options=a,b to show only those.
export class OverlayView {
  constructor(root, poll) {
    const q = new URLSearchParams(location.search);
    document.body.classList.add("overlay", q.get("theme") === "light" ? "light" : "dark");
    const only = (q.get("options") || "").split(",").map(s => s.trim()).filter(Boolean);
    root.replaceChildren(el("div", { class: "lower-third" },
      el("p", { class: "question" }, this.question = el("span", {}), " ", this.badge = el("span", { class: "badge" })),
      this.list = el("ul", { class: "options compact", "aria-label": t("polls") }),
      this.total = el("p", { class: "summary" })));
    this.bars = new Bars(this.list, { only: only.length ? only : null });
    this.stream = subscribe(poll, s => this.render(s));
  }
  render(s) {
    const p = phase(s);
    let total = 0;
    for (const o of s.options) total += s.totals[o.id] || 0;
    this.question.textContent = s.question;
    this.badge.textContent = t(p); this.badge.className = "badge " + p;
    this.bars.update(s, s.totals, total);
    this.total.textContent = s.hidden ? "" : (p === "final" ? outcome(s, s.totals) + " · " : "") + plural("votes", total);
  }
  close() { this.stream.close(); }
}

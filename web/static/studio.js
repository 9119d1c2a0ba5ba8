// The quiz on air: the studio screen (/present/quiz/{quiz}) and its lower
// third (/overlay/quiz/{quiz}). Both are driven by the quiz's stream alone
// (no interaction, no admin token): the lobby with the QR code to join,
// each question with its tiles and a countdown by the server's clock, the
// close, the reveal with the split and the correct tiles marked, the top
// five with who moved up, and the final podium.
import { t, num } from "/i18n.js";
import { el, client } from "/live.js";
import { fit, shares, voteBase, loopback } from "/poll.js";
import { joinCode } from "/join.js";

// Each option's tile: a colour and a shape, so colour is never the only
// cue; the same on the phones and the studio screen. White text on each
// colour meets WCAG AA (≥ 4.5:1).
export const TILES = [["#b91c1c", "▲"], ["#1d4ed8", "◆"], ["#8a5a00", "●"], ["#15803d", "■"],
  ["#7e22ce", "★"], ["#0f766e", "⬟"], ["#c2410c", "✚"], ["#be185d", "⬢"]];

// tile draws option i of a question: its shape and label on its colour,
// then anything more (the split after the reveal).
export function tile(i, label, tag = "div", attrs = {}, ...more) {
  const [colour, shape] = TILES[i % TILES.length];
  return el(tag, { ...attrs, class: "tile " + (attrs.class || ""), style: { "--tile": colour } },
    el("span", { class: "shape", "aria-hidden": "true" }, shape), el("span", { class: "label", dir: "auto" }, label), ...more);
}

// FINAL_HOLD_MS is how long the last question's reveal holds the screens
// (its split and the standings on the studio screen, the verdict on the
// phones) before the podium and the final standings, when the quiz ended
// by that question's close rather than by the host's "End": its reveal
// and its certification usually come in one frame, so without the hold
// the reveal would never show.
export const FINAL_HOLD_MS = 10_000;

// finalShown says whether the quiz is over and its final standings are up
// for the screens: ended, nothing left to reveal, counted, and — when
// every question was asked — FINAL_HOLD_MS after since (the time this
// page first saw the last reveal counted).
export function finalShown(f, since) {
  const q = asked(f);
  if (f.status !== "ended") return false;
  if (!q) return true;
  if (!q.revealed || !f.leaderboard_final) return false;
  return f.started < f.total || (since != null && Date.now() - since >= FINAL_HOLD_MS);
}

// asked is the frame's question if the host started it (a question skipped
// by "End" was never asked: it stays unseen).
export const asked = f => (f?.question && f.question.started !== false ? f.question : null);

// moves keeps the ranks of the standings before the last change, to say who moved up.
class Moves {
  constructor() { this.digest = ""; this.before = new Map(); this.now = new Map(); }
  see(f) {
    if (!f.leaderboard_digest || f.leaderboard_digest === this.digest) return;
    this.digest = f.leaderboard_digest;
    this.before = this.now;
    this.now = new Map((f.leaderboard || []).map(s => [s.participant, s.rank]));
  }
  // moved is how many places s rose (> 0) or fell (< 0) in the last change.
  moved(s) { const r = this.before.get(s.participant); return r ? r - s.rank : 0; }
}

export class QuizStudioView {
  constructor(root, id) {
    document.body.classList.add("present", "studio");
    this.root = root; this.id = id; this.moves = new Moves(); this.f = null;
    const { base, guessed } = voteBase();
    this.join = base + "/#/quiz/" + encodeURIComponent(id);
    this.host = new URL(base).host;
    // As on the poll's presenter: say when the code holds a guessed or unreachable address.
    this.warn = guessed ? el("p", { class: "warn", role: "note" }, loopback(this.host) ? t("localAddress", { host: this.host }) : t("guessedAddress")) : "";
    root.replaceChildren(this.stage = el("div", { class: "stage" }, t("connecting")));
    this.stream = client.quiz(id, f => { this.f = f; this.moves.see(f); this.render(); });
    this.timer = setInterval(() => this.tick(), 250);
    this.onResize = () => fit(this.root, this.stage);
    addEventListener("resize", this.onResize);
  }
  // phase names what the screen shows: lobby, question, closed, reveal,
  // podium. The quiz ends as its last question closes: that question
  // still has its "Time is up" and its reveal, and the podium comes once
  // the final standings are counted and the reveal has held the screen
  // for FINAL_HOLD_MS (at once when the host ended the quiz early).
  phase() {
    const f = this.f, q = asked(f);
    if (f.status === "ended" && q?.revealed && f.leaderboard_final) this.finalSince ??= Date.now();
    if (finalShown(f, this.finalSince)) return "podium";
    if (!q) return "lobby";
    if (q.status === "open") return "question";
    return q.revealed ? "reveal" : "closed";
  }
  render() {
    const f = this.f, q = asked(f), p = this.phase();
    const key = [p, q?.poll, q?.revealed, f.leaderboard_digest, p === "question" ? "" : q?.answers].join("|");
    if (key === this.key) return this.tick(); // the counts and the newest names alone: tick() keeps them
    this.key = key;
    this.clock = this.answers = this.joined = this.names = null;
    document.body.dataset.phase = p;
    const head = el("p", { class: "status" }, el("span", { class: "badge " + (p === "question" ? "live" : "closed") },
      p === "lobby" ? t("quizLobby") : p === "podium" ? t("quizEnded") : t("questionOf", { n: q.index + 1, total: f.total })),
      p === "lobby" ? "" : el("span", { class: "quiz-title", dir: "auto" }, f.title || "")); // the lobby's title is its heading
    const body = p === "lobby" ? this.lobby(f) : p === "podium" ? this.podium(f) : this.question(f, q, p);
    this.stage.replaceChildren(head, ...body);
    this.tick();
    fit(this.root, this.stage);
  }
  // lobby: the title, the QR code and the join code large, how many joined
  // and the newest names as they come.
  lobby(f) {
    this.joined = el("p", { class: "joined", role: "status" });
    this.names = el("ul", { class: "names", "aria-label": t("newestJoined") });
    this.namesKey = null;
    return [el("h1", { dir: "auto" }, f.title || t("quiz")),
      el("div", { class: "lobby" },
        el("figure", { class: "qr" }, el("img", { src: `/v1/quizzes/${encodeURIComponent(this.id)}/qr.png?size=512`, alt: `${t("scanToJoin")}: ${this.join}`, width: "512", height: "512" }),
          el("figcaption", {}, el("strong", { class: "scan" }, t("scanToJoin")), el("span", { class: "url" }, this.join), this.warn)),
        el("div", { class: "join-panel" },
          el("p", { class: "join-at" }, t("enterCodeAt", { host: this.host })),
          el("p", { class: "join-code", translate: "no" }, joinCode("quiz", this.id)),
          this.joined, this.names))];
  }
  // question: the question, the round countdown and the answers in, and
  // the tiles filling the lower part of the frame; after the close the
  // same, and after the reveal the split beside the standings.
  question(f, q, p) {
    const revealed = p === "reveal" && q.totals;
    const counts = q.options.map(o => (revealed ? q.totals[o.id] || 0 : 0));
    const sum = counts.reduce((a, b) => a + b, 0), pct = shares(counts, sum);
    this.answers = el("p", { class: "answers", role: "status" }, this.answersN = el("span", { class: "n" }), this.answersWhat = el("span", { class: "what" }));
    this.clock = el("div", { class: "clock", role: "timer" }, this.secs = el("span", { class: "secs", "aria-hidden": "true" }), this.clockLabel = el("span", { class: "sr-only" }));
    const tiles = el("ul", { class: "tiles n" + q.options.length }, ...q.options.map((o, i) => {
      const right = revealed && q.correct?.includes(o.id);
      return el("li", {}, tile(i, o.label, "div", { class: (revealed ? (right ? "right" : "wrong") : ""), "data-option": o.id },
        revealed ? el("span", { class: "split" }, el("span", { class: "bar", style: { width: `${pct[i]}%` } }), `${right ? "✓ " : ""}${pct[i]}% · ${num(counts[i])}`) : ""));
    }));
    const middle = el("div", { class: "middle" }, this.clock, p === "closed" ? el("p", { class: "time-up" }, t("timeUp")) : el("span"), this.answers);
    const out = [el("h1", { dir: "auto" }, q.text), middle];
    if (p === "reveal" && f.leaderboard?.length) out.push(el("div", { class: "results" }, tiles, this.standings(f.leaderboard.slice(0, 5), true)));
    else out.push(tiles);
    return out;
  }
  // podium: the top three on steps that rise in turn (no motion under
  // prefers-reduced-motion), then fourth and fifth.
  podium(f) {
    const top = f.leaderboard || [];
    return [el("h1", {}, t("finalStandings")), top.length ? el("ol", { class: "podium-steps" }, ...top.slice(0, 3).map((s, i) =>
      el("li", { class: "step step-" + (i + 1) }, el("span", { class: "who", dir: "auto" }, s.name || t("anonymous")),
        el("span", { class: "pts" }, t("points", { n: num(s.score) })), el("span", { class: "place" }, String(s.rank))))) : el("p", { class: "none" }, t("noAnswers")),
    top.length > 3 ? this.standings(top.slice(3, 5), false) : ""];
  }
  // standings: a ranked board, each row with its score as a bar against
  // the leader's and, after a change, who moved up or down.
  standings(list, moves) {
    const best = Math.max(1, ...list.map(s => s.score), ...(this.f.leaderboard || []).map(s => s.score));
    return el("section", { class: "standings", "aria-label": t("leaderboard") }, el("h2", {}, t("leaderboard")),
      el("ol", {}, ...list.map(s => {
        const d = moves ? this.moves.moved(s) : 0;
        return el("li", {}, el("span", { class: "place" }, String(s.rank)),
          el("span", { class: "row" }, el("span", { class: "who", dir: "auto" }, s.name || t("anonymous")),
            el("span", { class: "bar", "aria-hidden": "true" }, el("span", { style: { width: `${Math.round(100 * s.score / best)}%` } }))),
          el("span", { class: "pts" }, num(s.score)),
          d ? el("span", { class: d > 0 ? "move up" : "move down" }, (d > 0 ? "▲" : "▼") + Math.abs(d)) : el("span", { class: "move" }));
      })));
  }
  tick() {
    if (this.finalSince != null && this.f && this.phase() !== document.body.dataset.phase) return this.render(); // the hold is over
    if (this.joined) {
      this.joined.textContent = t("joined", { n: num(this.f.joined || 0) });
      const names = (this.f.newest || []).slice(0, 8), key = names.join("\u0000");
      if (key !== this.namesKey) {
        const had = new Set(this.namesKey ? this.namesKey.split("\u0000") : []);
        this.namesKey = key;
        // textContent and <bdi>: a name is text, and a right-to-left one
        // does not reorder the names around it.
        this.names.replaceChildren(...names.map(n => el("li", { class: had.has(n) ? "" : "new" }, el("bdi", {}, n))));
      }
    }
    const q = asked(this.f);
    if (!q || !this.clock) return;
    const open = q.status === "open", left = open ? this.stream.remainingMs() : 0, s = Math.ceil(left / 1000);
    this.secs.textContent = open ? String(s) : "0";
    this.secs.classList.toggle("d3", s >= 100); // three digits: smaller, inside the ring
    this.clockLabel.textContent = open ? t("secondsLeft", { s }) : t("timeUp");
    this.clock.style.setProperty("--left", `${open && q.limit_ms ? Math.max(0, Math.min(1, left / q.limit_ms)) : 0}`);
    const n = q.answers || 0;
    this.answersN.textContent = num(n);
    this.answersWhat.textContent = t(n === 1 ? "answersWord_one" : "answersWord_other");
  }
  close() { this.stream.close(); clearInterval(this.timer); removeEventListener("resize", this.onResize); }
}

// QuizOverlayView is the quiz's lower third: the question, the countdown
// and, after the reveal, the answer; transparent, no interaction.
export class QuizOverlayView {
  constructor(root, id) {
    const q = new URLSearchParams(location.search);
    document.body.classList.add("overlay", q.get("theme") === "light" ? "light" : "dark");
    this.root = root;
    root.replaceChildren(this.plate = el("div", { class: "lower-third" },
      this.question = el("p", { class: "question", dir: "auto" }), this.line = el("p", { class: "summary", dir: "auto" })));
    this.plate.hidden = true;
    this.stream = client.quiz(id, f => { this.f = f; this.render(); });
    this.timer = setInterval(() => this.render(), 250);
  }
  render() {
    const q = asked(this.f);
    this.plate.hidden = !q || this.f.status === "ended";
    if (this.plate.hidden) return;
    this.question.textContent = q.text;
    const answer = (q.correct || []).map(c => q.options.find(o => o.id === c)?.label || c).join(t("and"));
    this.line.textContent = q.status === "open" ? t("secondsLeft", { s: Math.ceil(this.stream.remainingMs() / 1000) })
      : q.revealed && answer ? t("answerWas", { answer }) : t("timeUp");
    fit(this.root, this.plate, innerHeight / 3);
  }
  close() { this.stream.close(); clearInterval(this.timer); }
}

// The quiz on air: the studio screen (/present/quiz/{quiz}) and its lower
// third (/overlay/quiz/{quiz}). Both are driven by the quiz's stream alone
// (no interaction, no admin token): the lobby with the QR code to join,
// each question with its tiles and a countdown by the server's clock, the
// close, the reveal with the split and the correct tiles marked, the top
// five with who moved up, and the final podium.
import { t, num } from "/i18n.js";
import { el, client } from "/live.js";
import { fit, shares, voteBase, loopback } from "/poll.js";
import { codeLine } from "/join.js";

// Each option's tile: a colour and a shape, so colour is never the only
// cue; the same on the phones and the studio screen. White text on each
// colour meets WCAG AA (≥ 4.5:1).
export const TILES = [["#b91c1c", "▲"], ["#1d4ed8", "◆"], ["#8a5a00", "●"], ["#15803d", "■"],
  ["#7e22ce", "★"], ["#0f766e", "⬟"], ["#c2410c", "✚"], ["#be185d", "⬢"]];

// tile draws option i of a question: its shape and label on its colour,
// then anything more (the split after the reveal).
export function tile(i, label, tag = "div", attrs = {}, ...more) {
  const [colour, shape] = TILES[i % TILES.length];
  return el(tag, { ...attrs, class: "tile " + (attrs.class || ""), style: `--tile: ${colour}` },
    el("span", { class: "shape", "aria-hidden": "true" }, shape), el("span", { class: "label", dir: "auto" }, label), ...more);
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
  up(s) { const r = this.before.get(s.participant); return r && r > s.rank ? r - s.rank : 0; }
}

export class QuizStudioView {
  constructor(root, id) {
    document.body.classList.add("present", "studio");
    this.root = root; this.id = id; this.moves = new Moves(); this.f = null;
    const { base, guessed } = voteBase();
    this.join = base + "/#/quiz/" + encodeURIComponent(id);
    const host = new URL(base).host;
    // As on the poll's presenter: say when the code holds a guessed or unreachable address.
    this.warn = guessed ? el("p", { class: "warn", role: "note" }, loopback(host) ? t("localAddress", { host }) : t("guessedAddress")) : "";
    root.replaceChildren(this.stage = el("div", { class: "stage" }, t("connecting")));
    this.stream = client.quiz(id, f => { this.f = f; this.moves.see(f); this.render(); });
    this.timer = setInterval(() => this.tick(), 250);
    this.onResize = () => fit(this.root, this.stage);
    addEventListener("resize", this.onResize);
  }
  qr(size) {
    return el("figure", { class: "qr" }, el("img", { src: `/v1/quizzes/${encodeURIComponent(this.id)}/qr.png?size=512`, alt: `${t("scanToJoin")}: ${this.join}`, width: size, height: size }),
      el("figcaption", {}, el("strong", { class: "scan" }, t("scanToJoin")), el("span", { class: "url" }, this.join),
        codeLine("quiz", this.id, new URL(this.join).host), this.warn));
  }
  // phase names what the screen shows: lobby, question, closed, reveal, podium.
  phase() {
    const f = this.f, q = asked(f);
    if (f.status === "ended") return "podium";
    if (!q) return "lobby";
    if (q.status === "open") return "question";
    return q.revealed ? "reveal" : "closed";
  }
  render() {
    const f = this.f, q = asked(f), p = this.phase();
    const key = [p, q?.poll, q?.revealed, f.leaderboard_digest, p === "question" ? "" : q?.answers].join("|");
    if (key === this.key) return this.tick(); // the answers and joined counts alone: tick() keeps them
    this.key = key;
    this.clock = this.answers = this.joined = null;
    document.body.dataset.phase = p;
    const head = el("p", { class: "status" }, el("span", { class: "badge " + (p === "question" ? "live" : "closed") },
      p === "lobby" ? t("quizLobby") : p === "podium" ? t("quizEnded") : t("questionOf", { n: q.index + 1, total: f.total })), " ", f.title || "");
    let body;
    if (p === "lobby") {
      this.joined = el("p", { class: "joined", role: "status" });
      body = [el("h1", { dir: "auto" }, f.title || t("quiz")), el("div", { class: "lobby" }, this.qr("420"),
        el("div", {}, el("p", { class: "join" }, t("joinNow")), this.joined))];
    } else if (p === "podium") {
      const top = f.leaderboard || [];
      body = [el("h1", {}, t("finalStandings")), el("ol", { class: "podium-steps" }, ...top.slice(0, 3).map((s, i) =>
        el("li", { class: "step step-" + (i + 1) }, el("span", { class: "place" }, String(s.rank)), el("span", { class: "who", dir: "auto" }, s.name || t("anonymous")),
          el("span", { class: "pts" }, t("points", { n: num(s.score) }))))),
      top.length > 3 ? this.standings(top.slice(3, 5), false) : "", top.length ? "" : el("p", {}, t("noAnswers"))];
    } else {
      const revealed = p === "reveal" && q.totals;
      const counts = q.options.map(o => (revealed ? q.totals[o.id] || 0 : 0));
      const sum = counts.reduce((a, b) => a + b, 0), pct = shares(counts, sum);
      this.answers = el("span", { class: "answers" });
      this.clock = el("span", { class: "clock", role: "timer" });
      body = [el("h1", { dir: "auto" }, q.text),
        el("ul", { class: "tiles" }, ...q.options.map((o, i) => {
          const right = revealed && q.correct?.includes(o.id);
          return el("li", {}, tile(i, o.label, "div", { class: (revealed ? (right ? "right" : "wrong") : ""), "data-option": o.id },
            revealed ? el("span", { class: "split" }, el("span", { class: "bar", style: `width:${pct[i]}%` }), `${right ? "✓ " : ""}${pct[i]}% · ${num(counts[i])}`) : ""));
        })),
        el("p", { class: "summary" }, this.clock, " ", this.answers, p === "closed" ? " · " + t("timeUp") : "")];
      if (p === "reveal" && f.leaderboard?.length) body.push(this.standings(f.leaderboard.slice(0, 5), true));
    }
    this.stage.replaceChildren(head, ...body);
    this.tick();
    fit(this.root, this.stage);
  }
  standings(list, moves) {
    return el("section", { class: "standings", "aria-label": t("leaderboard") }, el("h2", {}, t("leaderboard")),
      el("ol", {}, ...list.map(s => {
        const up = moves ? this.moves.up(s) : 0;
        return el("li", {}, el("span", { class: "place" }, String(s.rank)), " ", el("span", { class: "who", dir: "auto" }, s.name || t("anonymous")), " ",
          el("span", { class: "pts" }, t("points", { n: num(s.score) })), up ? el("span", { class: "up" }, " ▲" + up) : "");
      })));
  }
  tick() {
    if (this.joined) this.joined.textContent = t("joined", { n: num(this.f.joined || 0) });
    const q = asked(this.f);
    if (!q || !this.clock) return;
    this.clock.textContent = q.status === "open" ? t("secondsLeft", { s: Math.ceil(this.stream.remainingMs() / 1000) }) : "";
    this.answers.textContent = t("answersIn", { n: num(q.answers || 0) });
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

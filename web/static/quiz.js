// Quiz mode on the page: a participant's view (#/quiz/{id}) and the host's
// controls (#/host/quiz/{id}). The participant follows the quiz with the
// client's quiz stream (GET /v1/quizzes/{id}/live, one socket for the
// whole quiz; the client reads the quiz over HTTP every second when no
// socket holds): each question as the host starts it, the reveal, the top
// of the leaderboard and their own rank and score. Answers go on the same
// socket, because the node times an answer from the moment it put the
// question on that socket (docs/quiz.md); the countdown runs on the
// server's clock as the client keeps it.
import { t } from "/i18n.js";
import { el, api, client, me, session } from "/live.js";
import { hostToken } from "/host.js";
import { tile, asked } from "/studio.js";

const answers = JSON.parse(localStorage.getItem("tally.answers") || "{}"); // question poll → {option, elapsed_ms}
const saveAnswers = () => localStorage.setItem("tally.answers", JSON.stringify(answers));

export class QuizView {
  constructor(root, id) {
    this.root = root; this.id = id; this.poll = null; this.f = null;
    this.title = el("h1", {}, t("quiz"));
    this.status = el("p", { id: "quiz-status", role: "status" });
    this.text = el("h2", { id: "q-text" });
    this.list = el("ul", { class: "options", id: "q-options" });
    this.clock = el("p", { id: "q-countdown", class: "countdown" });
    this.result = el("p", { id: "q-result", role: "status" });
    this.board = el("section", { id: "board", "aria-label": t("leaderboard") });
    this.name = el("input", { id: "quiz-name", maxlength: "32", autocomplete: "nickname", value: localStorage.getItem("tally.name") || "",
      onchange: () => localStorage.setItem("tally.name", this.name.value.trim()) });
    root.replaceChildren(this.title, el("p", { class: "name" }, el("label", { for: "quiz-name" }, t("yourName")), " ", this.name),
      this.status, this.text, this.list, this.clock, this.result, this.board);
    this.stream = client.quiz(id, f => {
      this.f = f;
      this.top = { standings: f.leaderboard || [], participants: f.participants || 0, final: !!f.leaderboard_final };
      this.render();
    }, { voter: me(), onStanding: you => { this.you = you; this.showBoard(); } });
    this.ticker = setInterval(() => this.countdown(), 250);
  }
  render() {
    const v = this.f, q = asked(v);
    if (v.title) this.title.textContent = v.title;
    this.status.textContent = v.status === "ready" ? t("quizWaiting")
      : v.status === "ended" ? t("quizEnded")
      : q ? t("questionOf", { n: q.index + 1, total: v.total }) : "";
    if (q && q.poll !== this.poll) this.show(q);
    if (!q) return;
    const mine = answers[q.poll], open = q.status === "open" && !mine;
    for (const b of this.list.querySelectorAll("button")) {
      b.disabled = !open;
      b.setAttribute("aria-pressed", mine && mine.option === b.dataset.option ? "true" : "false");
      b.classList.toggle("correct", !!q.correct && q.correct.includes(b.dataset.option));
    }
    if (mine && q.correct) {
      const right = q.correct.includes(mine.option);
      this.result.textContent = right ? t("correct", { n: score(q, mine.elapsed_ms) }) : t("incorrect", { answer: q.correct.map(c => label(q, c)).join(t("and")) });
    } else if (mine) {
      this.result.textContent = t("answered", { option: label(q, mine.option), s: (mine.elapsed_ms / 1000).toFixed(1) });
    } else if (q.status !== "open") {
      this.result.textContent = q.correct ? t("answerWas", { answer: q.correct.map(c => label(q, c)).join(t("and")) }) : t("timeUp");
    }
    if (q.status !== "open" || v.status === "ended") this.showBoard();
  }
  show(q) {
    this.poll = q.poll;
    this.text.textContent = q.text;
    this.result.textContent = "";
    // Big tiles, one colour and one shape each (as on the studio screen).
    this.list.replaceChildren(...q.options.map((o, i) => el("li", {},
      tile(i, o.label, "button", { type: "button", "data-option": o.id, onclick: () => this.answer(q, o.id) }))));
  }
  // answer sends the tap on the quiz's socket (over HTTP with the same
  // idempotency key when the socket is down or does not reply).
  async answer(q, option) {
    // The tap locks at once: every tile off, this one pressed.
    for (const b of this.list.querySelectorAll("button")) {
      b.disabled = true;
      b.setAttribute("aria-pressed", b.dataset.option === option ? "true" : "false");
    }
    await session();
    const name = this.name.value.trim();
    if (name) localStorage.setItem("tally.name", name);
    try {
      const r = await this.stream.answer({ option, voter: me(), name: name || undefined });
      answers[q.poll] = { option, elapsed_ms: r.elapsed_ms || 0 };
      saveAnswers();
    } catch (err) {
      this.result.textContent = t("notCounted", { reason: err.message });
    }
    this.render();
  }
  countdown() {
    const q = asked(this.f);
    this.clock.textContent = q && q.status === "open" ? t("secondsLeft", { s: Math.ceil(this.stream.remainingMs() / 1000) }) : "";
  }
  showBoard() {
    const lb = this.top, q = asked(this.f);
    if (!lb || !q || q.status === "open" && this.f.status !== "ended") return;
    const you = this.you ? t("yourScore", { score: this.you.score, rank: this.you.rank, n: lb.participants }) : "";
    const podium = el("ol", { class: "podium" }, ...lb.standings.slice(0, 3).map(s => el("li", {}, `${s.name || t("anonymous")} · ${t("points", { n: s.score })}`)));
    this.board.replaceChildren(el("h2", {}, lb.final ? t("finalStandings") : t("leaderboard")), el("p", { id: "you" }, you), podium);
  }
  close() { this.stream.close(); clearInterval(this.ticker); }
}

// score is quiz.Score for a correct answer timed elapsed ms: the node's
// formula in the same integers (docs/quiz.md), so the page shows the
// points the leaderboard will count.
function score(q, elapsed) {
  const limit = q.limit_ms, e = Math.min(Math.max(elapsed, 0), limit);
  return Math.floor((q.points * (2 * limit - e) + limit) / (2 * limit));
}

function label(q, id) { return (q.options.find(o => o.id === id) || { label: id }).label; }

// QuizHostView: the host runs the quiz: start the next question, close it,
// reveal it, end the quiz; sees every question, the counts and the
// leaderboard.
export class QuizHostView {
  constructor(root, id) {
    this.root = root; this.id = id;
    const act = path => async ev => {
      const b = ev.currentTarget; b.disabled = true;
      try { this.v = await api("POST", `/v1/quizzes/${encodeURIComponent(id)}/${path}`, undefined, hostToken()); this.msg.textContent = ""; this.render(); }
      catch (err) { this.msg.textContent = err.message; } finally { b.disabled = false; }
    };
    this.state = el("p", { id: "quiz-host-state", role: "status" });
    this.msg = el("p", { class: "error", role: "alert" });
    this.buttons = el("p", { class: "controls" },
      el("button", { class: "action", type: "button", id: "quiz-start", onclick: act("start") }, t("startNext")),
      el("button", { class: "action secondary", type: "button", id: "quiz-close", onclick: act("close") }, t("closeQuestion")),
      el("button", { class: "action secondary", type: "button", id: "quiz-reveal", onclick: act("reveal") }, t("revealAnswer")),
      el("button", { class: "action danger", type: "button", id: "quiz-end", onclick: act("end") }, t("endQuiz")));
    this.list = el("ol", { id: "quiz-questions" });
    this.board = el("ol", { id: "quiz-board" });
    root.replaceChildren(el("h1", {}, t("host") + " · " + id), this.state, this.buttons, this.msg,
      el("h2", {}, t("questions")), this.list, el("h2", {}, t("leaderboard")), this.board,
      el("p", {}, el("a", { href: `#/quiz/${encodeURIComponent(id)}` }, t("participantPage"))));
    this.refresh();
    this.timer = setInterval(() => this.refresh(), 1000);
  }
  async refresh() {
    try {
      this.v = await api("GET", `/v1/quizzes/${encodeURIComponent(this.id)}`, undefined, hostToken());
      this.lb = await api("GET", `/v1/quizzes/${encodeURIComponent(this.id)}/leaderboard?top=10`);
    } catch (err) { this.msg.textContent = err.message; return; }
    this.render();
  }
  render() {
    const v = this.v;
    this.state.textContent = t("quizState_" + v.status, { n: v.started, total: v.total });
    this.list.replaceChildren(...v.questions.map(q => el("li", {},
      `${q.text} — ${q.status}${q.started ? "" : " (" + t("notStarted") + ")"}`,
      q.totals ? " · " + q.options.map(o => `${o.label}${q.correct.includes(o.id) ? " ✓" : ""}: ${q.totals[o.id] || 0}`).join(", ") : "")));
    if (this.lb) this.board.replaceChildren(...this.lb.standings.map(s => el("li", {}, `${s.name || s.participant.slice(0, 8)} · ${t("points", { n: s.score })}`)));
  }
  close() { clearInterval(this.timer); }
}

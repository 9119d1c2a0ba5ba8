// Quiz mode on the page: a participant's view (#/quiz/{id}) and the host's
// controls (#/host/quiz/{id}). The participant follows the quiz with the
// client's quiz stream (GET /v1/quizzes/{id}/live, one socket for the
// whole quiz; the client reads the quiz over HTTP every second when no
// socket holds): each question as the host starts it, the reveal, the top
// of the leaderboard and their own rank and score. Answers go on the same
// socket, because the node times an answer from the moment it put the
// question on that socket (docs/quiz.md); the countdown runs on the
// server's clock as the client keeps it.
import { t, num } from "/i18n.js";
import { el, api, client, me, session, why } from "/live.js";
import { hostToken, tokenField, refused } from "/host.js";
import { tile, asked, finalShown } from "/studio.js";

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
    // The countdown bar: the time left of the question's limit, by the
    // server's clock (decorative: the text says the same).
    this.bar = el("div", { class: "countbar", "aria-hidden": "true" }, el("span"));
    this.result = el("p", { id: "q-result", role: "status" });
    this.board = el("section", { id: "board", "aria-label": t("leaderboard") });
    // While the question is open and the answer is in: the answer, locked.
    this.lock = el("div", { class: "locked", hidden: true, role: "status" });
    // After the reveal: the whole screen green or red, the points and the rank.
    this.verdict = el("div", { class: "verdict", hidden: true, role: "alert" });
    // The node checks the name (1–40 characters, something visible) and
    // says why it refuses one, here, before an answer carries it.
    this.nameMsg = el("span", { class: "error", id: "quiz-name-msg", role: "alert" });
    this.name = el("input", { id: "quiz-name", maxlength: "80", autocomplete: "nickname", "aria-describedby": "quiz-name-msg",
      value: localStorage.getItem("tally.name") || "", onchange: () => this.rename() });
    root.replaceChildren(this.title, el("p", { class: "name" }, el("label", { for: "quiz-name" }, t("yourName")), " ", this.name, " ", this.nameMsg),
      this.status, this.text, this.bar, this.list, this.lock, this.clock, this.result, this.board, this.verdict);
    this.stream = client.quiz(id, f => {
      this.f = f;
      this.top = { standings: f.leaderboard || [], participants: f.participants || 0, final: !!f.leaderboard_final };
      this.render();
    }, { voter: me(), onStanding: you => {
      if (you && this.you && you.rank !== this.you.rank) this.rankWas = this.you.rank;
      this.you = you; this.showBoard();
      if (this.f) this.render();
    } });
    this.ticker = setInterval(() => this.countdown(), 250);
    // Once the voter token is there, join with it: the studio counts this
    // phone among the joined only then (on a node that requires tokens).
    session().then(() => { if (!this.closed) this.joinAs(this.name.value.trim()); });
  }
  // joinAs joins (again) under name. A name the node refuses is said
  // here, and the participant joins without one (they still count).
  async joinAs(name) {
    const ack = await this.stream.join(me(), name || undefined);
    const refusedName = ack?.type === "error" && ack.error?.code === "invalid_request" && !!name;
    this.nameMsg.textContent = refusedName ? t("nameRefused", { why: ack.error.message }) : "";
    if (refusedName) await this.stream.join(me(), undefined);
  }
  rename() {
    const name = this.name.value.trim();
    localStorage.setItem("tally.name", name);
    if (this.stream.joinedAt != null || this.nameMsg.textContent) this.joinAs(name); // the lobby shows the new name
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
    } else if (this.failed && !q.correct) {
      // the refusal's message stays up until the reveal
    } else if (q.status !== "open") {
      this.result.textContent = q.correct ? t("answerWas", { answer: q.correct.map(c => label(q, c)).join(t("and")) }) : t("timeUp");
    }
    if (q.status !== "open" || v.status === "ended") this.showBoard();
    this.showLock(q, mine);
    this.showVerdict(q, mine);
  }
  // showLock: an answer in while the question is open locks the screen on
  // it (the other tiles go away), so no one wonders whether it counted.
  showLock(q, mine) {
    const locked = !!mine && q.status === "open";
    const was = !this.lock.hidden;
    this.lock.hidden = !locked;
    this.list.hidden = locked;
    document.body.classList.toggle("answer-locked", locked);
    if (!locked || this.lockKey === q.poll + "\u0000" + mine.option) return; // unchanged: not said again
    this.lockKey = q.poll + "\u0000" + mine.option;
    const i = q.options.findIndex(o => o.id === mine.option);
    this.lock.replaceChildren(el("p", { class: "locked-title" }, t("answerLocked")),
      tile(Math.max(i, 0), label(q, mine.option), "div", { class: "locked-tile" }), el("p", { class: "locked-wait" }, t("lockedWait")));
    if (!was) this.lock.scrollIntoView({ block: "nearest" }); // where the tiles were, in view
  }
  // showVerdict: after the reveal, the participant who answered sees the
  // whole screen green or red, the points earned and the rank, large,
  // until the next question — the last question's until the final
  // standings are counted, which then show.
  showVerdict(q, mine) {
    if (this.f.status === "ended" && q.revealed && this.f.leaderboard_final) this.finalSince ??= Date.now();
    const on = !!mine && !!q.correct && !finalShown(this.f, this.finalSince);
    this.verdict.hidden = !on;
    document.body.dataset.verdict = on ? (q.correct.includes(mine.option) ? "right" : "wrong") : "";
    if (!on) return;
    const right = q.correct.includes(mine.option);
    const rank = this.you && this.top?.participants ? t("rankNow", { rank: num(this.you.rank), n: num(this.top.participants) }) : "";
    const key = [q.poll, right, rank].join("\u0000");
    if (key === this.verdictKey) return; // unchanged: a screen reader is not told it again
    this.verdictKey = key;
    this.verdict.replaceChildren(el("p", { class: "verdict-mark", "aria-hidden": "true" }, right ? "✓" : "✗"),
      el("p", { class: "verdict-title" }, right ? t("verdictRight") : t("verdictWrong")),
      el("p", { class: "points" }, t("pointsEarned", { n: num(right ? score(q, mine.elapsed_ms) : 0) })),
      rank ? el("p", { class: "rank" }, rank) : "",
      right ? "" : el("p", { class: "answer" }, t("answerWas", { answer: q.correct.map(c => label(q, c)).join(t("and")) })));
  }
  show(q) {
    this.poll = q.poll; this.failed = false;
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
      // Not a name the node refused (the field says so): the answer would
      // be refused with it. The answer goes without a name instead.
      const r = await this.stream.answer({ option, voter: me(), name: name && !this.nameMsg.textContent ? name : undefined });
      answers[q.poll] = { option, elapsed_ms: r.elapsed_ms || 0 };
      saveAnswers();
    } catch (err) {
      this.result.textContent = err.code === "too_late" ? t("tooLate") : why(err);
      this.failed = true; // render() keeps the message
    }
    this.render();
  }
  countdown() {
    if (this.finalSince != null && !this.verdict.hidden && finalShown(this.f, this.finalSince)) this.render(); // the hold is over
    const q = asked(this.f), open = q && q.status === "open";
    const left = open ? this.stream.remainingMs() : 0;
    this.clock.textContent = open ? t("secondsLeft", { s: Math.ceil(left / 1000) }) : "";
    this.bar.hidden = !open;
    if (open) this.bar.firstChild.style.width = `${Math.max(0, Math.min(100, 100 * left / q.limit_ms))}%`;
  }
  showBoard() {
    const lb = this.top, q = asked(this.f);
    if (!lb || !q || q.status === "open" && this.f.status !== "ended") return;
    let you = this.you ? t("yourScore", { score: this.you.score, rank: this.you.rank, n: lb.participants }) : "";
    // The rank's change since the last standing that moved it.
    if (this.you && this.rankWas && this.rankWas !== this.you.rank) {
      you += " " + (this.you.rank < this.rankWas ? t("rankUp", { n: this.rankWas - this.you.rank }) : t("rankDown", { n: this.you.rank - this.rankWas }));
    }
    const podium = el("ol", { class: "podium" }, ...lb.standings.slice(0, 3).map(s => el("li", {}, `${s.name || t("anonymous")} · ${t("points", { n: s.score })}`)));
    this.board.replaceChildren(el("h2", {}, lb.final ? t("finalStandings") : t("leaderboard")), el("p", { id: "you" }, you), podium);
  }
  close() { this.closed = true; this.stream.close(); clearInterval(this.ticker); }
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
// reveal it, end the quiz; sees every question, the counts, the
// leaderboard and a live preview of the studio screen. One person runs
// the show from the keyboard: S (or N) start the next question, C close
// it, R reveal it, E end the quiz (pressed twice: it cannot be undone).
// Each button is on only when its step can be taken. Opened without the
// admin token (or with one the node refuses), it asks for it as the poll
// host page does (tokenField: kept in this tab), then loads the quiz.
const KEYS = { s: "start", n: "start", c: "close", r: "reveal", e: "end" };

export class QuizHostView {
  constructor(root, id) {
    this.root = root; this.id = id;
    document.body.classList.add("wide"); // room for the preview
    this.state = el("p", { id: "quiz-host-state", role: "status" });
    this.msg = el("p", { class: "error", role: "alert" });
    const button = (step, key, cls, text) => el("button", { class: "action " + cls, type: "button", id: "quiz-" + step,
      "aria-keyshortcuts": key, onclick: () => this.step(step) }, text, " ", el("kbd", { "aria-hidden": "true" }, key));
    this.btn = {
      start: button("start", "S", "", t("startNext")), close: button("close", "C", "secondary", t("closeQuestion")),
      reveal: button("reveal", "R", "secondary", t("revealAnswer")), end: button("end", "E", "danger", t("endQuiz")),
    };
    for (const b of Object.values(this.btn)) b.disabled = true; // until the quiz's state is known
    this.token = tokenField();
    this.auth = el("form", { class: "token-form", hidden: true, onsubmit: ev => {
      ev.preventDefault();
      this.token.keep();
      this.auth.hidden = true; this.msg.textContent = "";
      this.root.focus(); // the keys work again at once
      this.refresh();
    } }, el("p", {}, t("tokenNeeded")), this.token.label, this.token.input, el("button", { class: "action", type: "submit" }, t("useToken")));
    this.list = el("ol", { id: "quiz-questions" });
    this.board = el("ol", { id: "quiz-board" });
    const studio = `/present/quiz/${encodeURIComponent(id)}`;
    this.preview = el("div", { class: "studio-preview" }, el("iframe", { src: studio, title: t("studioPreview"), tabindex: "-1" }));
    root.replaceChildren(el("h1", {}, t("host") + " · " + id), this.state, this.auth,
      el("p", { class: "controls" }, ...Object.values(this.btn)), el("p", { class: "hint" }, t("hostKeys")), this.msg,
      el("div", { class: "host-quiz" },
        el("section", {}, el("h2", {}, t("questions")), this.list, el("h2", {}, t("leaderboard")), this.board),
        el("section", {}, el("h2", {}, t("studioPreview")), this.preview,
          el("p", {}, el("a", { href: studio, target: "_blank" }, t("studioScreen")), " · ",
            el("a", { href: `/overlay/quiz/${encodeURIComponent(id)}`, target: "_blank" }, t("overlay")), " · ",
            el("a", { href: `#/quiz/${encodeURIComponent(id)}` }, t("participantPage"))))));
    // The preview draws the studio screen at 1920x1080, scaled to its box.
    this.sizer = new ResizeObserver(() => this.preview.style.setProperty("--s", this.preview.clientWidth / 1920));
    this.sizer.observe(this.preview);
    this.onKey = ev => this.key(ev);
    addEventListener("keydown", this.onKey);
    this.refresh();
    this.timer = setInterval(() => this.refresh(), 1000);
  }
  // ask shows the token's form (when the node wanted a token it did not get).
  ask(err) {
    if (!this.auth.hidden) return;
    this.auth.hidden = false;
    this.msg.textContent = err ? err.message : "";
    setTimeout(() => this.token.input.focus()); // after the page's own focus on a new view
  }
  // key runs a step from the keyboard, unless the host is typing.
  key(ev) {
    if (ev.ctrlKey || ev.metaKey || ev.altKey || ev.repeat || ev.target.closest?.("input, textarea, select, [contenteditable]")) return;
    const step = KEYS[ev.key.toLowerCase()];
    if (!step) return;
    ev.preventDefault();
    if (step === "end" && !(this.armed > Date.now())) { // the end needs a second press within 3 s
      if (this.btn.end.disabled) return;
      this.armed = Date.now() + 3000;
      this.msg.textContent = t("pressAgainToEnd");
      return;
    }
    this.armed = 0;
    this.step(step);
  }
  async step(step) {
    const b = this.btn[step];
    if (b.disabled || this.busy) return;
    this.busy = true;
    for (const x of Object.values(this.btn)) x.disabled = true;
    try {
      this.v = await api("POST", `/v1/quizzes/${encodeURIComponent(this.id)}/${step}`, undefined, hostToken());
      this.msg.textContent = "";
    } catch (err) { if (refused(err)) this.ask(err); else this.msg.textContent = err.message; }
    this.busy = false;
    this.render();
  }
  async refresh() {
    if (!hostToken()) { this.ask(); return; }
    if (!this.auth.hidden) return; // waiting for the host to give it
    try {
      this.v = await api("GET", `/v1/quizzes/${encodeURIComponent(this.id)}`, undefined, hostToken());
      this.lb = await api("GET", `/v1/quizzes/${encodeURIComponent(this.id)}/leaderboard?top=10`);
    } catch (err) { if (refused(err)) this.ask(err); else this.msg.textContent = err.message; return; }
    this.render();
  }
  render() {
    const v = this.v;
    if (!v) return;
    this.state.textContent = t("quizState_" + v.status, { n: v.started, total: v.total });
    this.list.replaceChildren(...v.questions.map(q => el("li", {}, el("bdi", {}, q.text),
      ` — ${q.skipped ? t("skipped") : q.status}${q.started ? "" : " (" + t("notStarted") + ")"}${q.started && !q.skipped && !q.revealed ? " (" + t("hiddenShort") + ")" : ""}`,
      q.totals && !q.skipped ? " · " + q.options.map(o => `${o.label}${q.correct.includes(o.id) ? " ✓" : ""}: ${q.totals[o.id] || 0}`).join(", ") : "")));
    if (this.lb) this.board.replaceChildren(...this.lb.standings.map(s => el("li", {}, `${s.name || s.participant.slice(0, 8)} · ${t("points", { n: s.score })}`)));
    if (this.busy) return;
    // What can be done now: start while none is open and some remain;
    // close while one is open; reveal a closed question still hidden; end
    // until the quiz is over.
    const open = v.status === "question";
    const hidden = v.questions.some(q => q.started && !q.skipped && !q.revealed && q.status !== "open");
    this.btn.start.disabled = open || v.status === "ended" || v.started >= v.total;
    this.btn.close.disabled = !open;
    this.btn.reveal.disabled = !hidden;
    this.btn.end.disabled = v.status === "ended";
  }
  close() { clearInterval(this.timer); removeEventListener("keydown", this.onKey); this.sizer.disconnect(); document.body.classList.remove("wide"); }
}

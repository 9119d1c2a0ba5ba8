"use strict";
// Quiz mode on the page: a participant's view (#/quiz/{id}) and the host's
// controls (#/host/quiz/{id}). The participant follows the quiz on its
// stream (GET /v1/quizzes/{id}/live, one socket for the whole quiz): each
// question as the host starts it, the reveal, the top of the leaderboard
// and, once they said who they are, their own rank and score. Answers go
// on the same socket, because the node times an answer from the moment it
// put the question on that socket (docs/quiz.md). Without a socket the
// page reads GET /v1/quizzes/{id} every second and answers over HTTP.

const answers = JSON.parse(localStorage.getItem("tally.answers") || "{}"); // question poll → {option, elapsed_ms}
const saveAnswers = () => localStorage.setItem("tally.answers", JSON.stringify(answers));

class QuizView {
  constructor(root, id) {
    this.root = root; this.id = id; this.poll = null; this.ws = null; this.offset = 0; this.v = null;
    this.failures = 0; this.closed = false; this.pending = {}; // ref → {q, option}
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
    this.connect();
    this.ticker = setInterval(() => this.countdown(), 250);
  }
  me() { return JSON.parse(localStorage.getItem("tally.session") || "null")?.voter || voter; }
  connect() {
    if (this.closed) return;
    if (!window.WebSocket || this.failures >= 3) { // read the quiz instead
      this.refresh();
      this.timer = this.timer || setInterval(() => this.refresh(), 900 + Math.random() * 200);
      return;
    }
    const proto = location.protocol === "https:" ? "wss:" : "ws:";
    const ws = new WebSocket(`${proto}//${location.host}/v1/quizzes/${encodeURIComponent(this.id)}/live`);
    this.ws = ws;
    ws.onopen = () => { this.failures = 0; this.offset = null; this.joinedAt = null; this.join(this.me()); };
    ws.onmessage = ev => this.handle(JSON.parse(ev.data));
    ws.onclose = () => {
      if (this.ws === ws) this.ws = null;
      // Answers the socket took but did not answer go again over HTTP,
      // with the same idempotency keys: one it delivered answers duplicate.
      const unanswered = Object.values(this.pending);
      this.pending = {};
      for (const p of unanswered) this.overHTTP(p.q, p.option, p.body, p.token);
      if (this.closed) return;
      this.failures++;
      setTimeout(() => this.connect(), Math.min(10000, 500 * 2 ** this.failures) * (0.5 + Math.random()));
    };
  }
  // join tells the stream who this participant is, for their standing.
  join(voter) {
    if (this.ws && this.ws.readyState === WebSocket.OPEN) { this.ws.send(JSON.stringify({ type: "join", voter })); this.joined = voter; }
  }
  handle(m) {
    switch (m.type) {
    case "quiz": {
      // The stream carries the current question; the view keeps the shape
      // of GET /v1/quizzes/{id}, which the fallback reads.
      this.v = { ...m, server_time: m.as_of_ms, questions: m.question ? [m.question] : [] };
      this.clockFrom(m.as_of_ms);
      this.top = { standings: m.leaderboard || [], participants: m.participants || 0, final: !!m.leaderboard_final };
      this.render();
      break;
    }
    case "heartbeat": this.clockFrom(m.as_of_ms); break;
    case "standing": this.you = m.you; this.showBoard(); break;
    case "ack": case "error": {
      if (m.result && m.result.server_time) {
        this.clockFrom(m.result.server_time);
        if (m.result.voter) { this.joinedAt = m.result.server_time; this.synced = true; } // the join's answer
      }
      const p = this.pending[m.ref];
      delete this.pending[m.ref];
      if (p) this.replied(p.q, p.option, m);
      // The answer may have made the voter token that names them: say so.
      if (p && m.type === "ack" && p.voter !== this.joined) this.join(p.voter);
      break;
    }
    }
  }
  // clockFrom sets the page's clock from a time the server just sent.
  // The first frame after joining is the hub's last, which may be older
  // than the join: a frame stamped before the join's answer is not used.
  clockFrom(serverMs) {
    if (this.joinedAt != null && serverMs < this.joinedAt) return;
    this.offset = serverMs - Date.now();
  }
  async refresh() {
    try {
      this.v = await api("GET", `/v1/quizzes/${encodeURIComponent(this.id)}`);
    } catch (err) { this.status.textContent = err.message; return; }
    this.offset = this.v.server_time - Date.now();
    this.render();
    const q = this.current();
    if (q && q.status !== "open" || this.v.status === "ended") this.leaderboard();
  }
  current() {
    const qs = this.v.questions;
    return this.v.current != null ? qs.find(q => q.index === this.v.current) : qs[qs.length - 1];
  }
  render() {
    const v = this.v, q = this.current();
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
    this.list.replaceChildren(...q.options.map(o => el("li", {},
      el("button", { class: "option", type: "button", "data-option": o.id, onclick: () => this.answer(q, o.id) },
        el("span", { class: "label" }, o.label)))));
  }
  async answer(q, option) {
    for (const b of this.list.querySelectorAll("button")) b.disabled = true;
    let sess = null;
    try { sess = await session(); } catch (err) { /* a node without voter tokens */ }
    const body = { option, voter: sess ? sess.voter : voter, idem: uuid() };
    const name = this.name.value.trim();
    if (name) { body.name = name; localStorage.setItem("tally.name", name); }
    const ws = this.ws;
    if (ws && ws.readyState === WebSocket.OPEN) {
      const ref = uuid();
      const token = sess ? sess.token : undefined;
      this.pending[ref] = { q, option, voter: body.voter, body, token };
      ws.send(JSON.stringify({ type: "vote", ref, poll: q.poll, token, body }));
      return;
    }
    this.overHTTP(q, option, body, sess ? sess.token : undefined);
  }
  // overHTTP sends an answer without the socket: timed from the question's
  // opening at the node.
  async overHTTP(q, option, body, token) {
    try {
      const headers = token ? { "Tally-Session": token } : {};
      const res = await api("POST", `/v1/polls/${encodeURIComponent(q.poll)}/votes`, body, undefined, headers);
      this.replied(q, option, { type: "ack", result: res });
    } catch (err) { this.replied(q, option, { type: "error", error: { message: err.message } }); }
  }
  replied(q, option, m) {
    if (m.type === "ack") {
      const r = m.result.results[0];
      answers[q.poll] = { option, elapsed_ms: r.elapsed_ms || 0 }; saveAnswers();
    } else {
      this.result.textContent = t("notCounted", { reason: m.error.message });
    }
    this.render();
  }
  countdown() {
    const q = this.v && this.current();
    if (!q || q.status !== "open") { this.clock.textContent = ""; return; }
    const left = Math.max(0, q.closes_at - (Date.now() + (this.offset || 0)));
    this.clock.textContent = t("secondsLeft", { s: Math.ceil(left / 1000) });
  }
  // leaderboard reads the standings over HTTP (the fallback without a socket).
  async leaderboard() {
    try {
      const lb = await api("GET", `/v1/quizzes/${encodeURIComponent(this.id)}/leaderboard?top=3&participant=${encodeURIComponent(this.me())}`);
      this.top = lb; this.you = lb.you; this.showBoard();
    } catch (err) { /* shown again at the next refresh */ }
  }
  showBoard() {
    const lb = this.top, q = this.v && this.current();
    if (!lb || !q || q.status === "open" && this.v.status !== "ended") return;
    const you = this.you ? t("yourScore", { score: this.you.score, rank: this.you.rank, n: lb.participants }) : "";
    const podium = el("ol", { class: "podium" }, ...lb.standings.slice(0, 3).map(s => el("li", {}, `${s.name || t("anonymous")} · ${t("points", { n: s.score })}`)));
    this.board.replaceChildren(el("h2", {}, lb.final ? t("finalStandings") : t("leaderboard")), el("p", { id: "you" }, you), podium);
  }
  close() { this.closed = true; clearInterval(this.timer); clearInterval(this.ticker); if (this.ws) this.ws.close(); }
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
class QuizHostView {
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

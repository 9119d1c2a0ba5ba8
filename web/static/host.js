// The host's page: create a poll, run it (close with a confirmation,
// extend, reveal), export it. The admin token stays in this tab
// (sessionStorage).
import { t, plural } from "/i18n.js";
import { el, api } from "/live.js";
import { phase } from "/poll.js";

export function hostToken() { return sessionStorage.getItem("tally.token") || ""; }

// tokenField is the admin token's label and input, filled from this tab's
// store; keep() stores what was typed there. The host's page's form, one
// poll's host page and the quiz host page all ask with it.
export function tokenField() {
  const input = el("input", { id: "token", type: "password", autocomplete: "off", value: hostToken() });
  return { label: el("label", { for: "token" }, t("adminToken")), input, keep: () => sessionStorage.setItem("tally.token", input.value.trim()) };
}

// refused: the node did not take the admin token (none, or a wrong one).
export const refused = err => err?.status === 401 || err?.code === "unauthorized";

function download(name, type, text) {
  const a = el("a", { href: URL.createObjectURL(new Blob([text], { type })), download: name });
  document.body.append(a); a.click(); a.remove();
}

// csvCell quotes a cell and defuses a spreadsheet formula: a label starting
// with = + - @ or a tab or carriage return is prefixed with a quote mark,
// so a spreadsheet shows it as text instead of running it.
function csvCell(v) {
  let s = String(v);
  if (/^[=+\-@\t\r]/.test(s)) s = "'" + s;
  return `"${s.replace(/"/g, '""')}"`;
}
export function toCSV(s, totals, total) {
  const rows = [["option", "label", "votes"], ...s.options.map(o => [o.id, o.label, totals[o.id] || 0]), ["total", "", total]];
  return rows.map(r => r.map(csvCell).join(",")).join("\r\n") + "\r\n";
}

// hostControls fills the host's panel under the poll view; built once,
// then patched like the rest of the view. Opened without the admin token
// (or with one the node refuses), it asks for it as the quiz host page
// does (tokenField: kept in this tab), then checks it again.
export function hostControls(poll) {
  const panel = {};
  // ask shows the token's form (when the node wanted a token it did not get).
  const ask = err => {
    if (!panel.auth.hidden) return;
    panel.auth.hidden = false;
    panel.msg.textContent = err ? err.message : "";
    setTimeout(() => panel.token.input.focus()); // after the page's own focus on a new view
  };
  const failed = err => { if (refused(err)) ask(err); else panel.msg.textContent = err.message; };
  const act = async (btn, fn) => {
    btn.disabled = true;
    try { await fn(); panel.msg.textContent = ""; } catch (err) { failed(err); } finally { btn.disabled = false; }
  };
  // check reads the poll with this tab's token: the node refuses a wrong
  // one, and a hidden poll's counts come with the right one.
  const check = () => {
    if (!hostToken()) { ask(); return; }
    if (!panel.auth.hidden) return; // waiting for the host to give it
    const view = panel.view;
    api("GET", `/v1/polls/${encodeURIComponent(poll)}`, undefined, hostToken()).then(v => {
      if (view.hostTimer) { view.hostTotals = v.totals || null; view.render(view.stream.state); }
    }).catch(failed);
  };
  return (root, s, totals, total, view) => {
    panel.view = view;
    if (!panel.built) {
      panel.built = true;
      panel.token = tokenField();
      panel.auth = el("form", { class: "token-form", hidden: true, onsubmit: ev => {
        ev.preventDefault();
        panel.token.keep();
        panel.auth.hidden = true; panel.msg.textContent = "";
        (panel.close.hidden ? panel.view.root : panel.close).focus();
        check();
      } }, el("p", {}, t("tokenNeededPoll")), panel.token.label, panel.token.input, el("button", { class: "action", type: "submit" }, t("useToken")));
      panel.state = el("p", { id: "host-state" });
      panel.close = el("button", { class: "action", type: "button", id: "close", onclick: () => { panel.confirm.hidden = false; panel.yes.focus(); } }, t("closeNow"));
      panel.yes = el("button", { class: "action danger", type: "button", id: "confirm-close", onclick: () => act(panel.yes, async () => {
        await api("POST", `/v1/polls/${encodeURIComponent(poll)}/close`, undefined, hostToken()); panel.confirm.hidden = true; }) }, t("yesClose"));
      panel.confirm = el("div", { class: "confirm", role: "group", "aria-label": t("closeNow"), hidden: true },
        el("p", {}, t("reallyClose")), panel.yes,
        el("button", { class: "action secondary", type: "button", onclick: () => { panel.confirm.hidden = true; panel.close.focus(); } }, t("cancel")));
      panel.extend = [30, 60, 300].map(sec => el("button", { class: "action secondary", type: "button", "data-extend": sec,
        onclick: ev => act(ev.currentTarget, () => api("POST", `/v1/polls/${encodeURIComponent(poll)}/extend`, { by_s: sec }, hostToken())) },
        t("extend", { s: sec })));
      panel.reveal = el("button", { class: "action", type: "button", id: "reveal", onclick: () => act(panel.reveal,
        () => api("POST", `/v1/polls/${encodeURIComponent(poll)}/reveal`, undefined, hostToken())) }, t("reveal"));
      panel.msg = el("p", { class: "error", role: "alert" });
      panel.next = el("p", { class: "next" });
      const links = el("p", { class: "links" },
        el("a", { href: `/present/${encodeURIComponent(poll)}`, target: "_blank" }, t("presenter")), " · ",
        el("a", { href: `/overlay/${encodeURIComponent(poll)}`, target: "_blank" }, t("overlay")), " · ",
        el("a", { href: `/embed/${encodeURIComponent(poll)}`, target: "_blank" }, t("embed")));
      panel.exports = el("p", {},
        el("button", { class: "action secondary", type: "button", onclick: () => download(`${poll}.csv`, "text/csv", toCSV(view.stream.state, panel.totals, panel.total)) }, t("exportCSV")),
        el("button", { class: "action secondary", type: "button", onclick: () => {
          const st = view.stream.state;
          download(`${poll}.json`, "application/json", JSON.stringify({ poll, question: st.question, status: st.status, as_of_ms: st.as_of_ms,
            totals: panel.totals, total: panel.total, digest: st.digest || undefined }, null, 2));
        } }, t("exportJSON")));
      root.replaceChildren(el("h2", {}, t("host")), panel.auth, panel.state, el("p", { class: "controls" }, panel.close, ...panel.extend, panel.reveal),
        panel.confirm, panel.msg, panel.exports, links, panel.next);
      check();
      if (s.event) nextQuestion(poll, s.event).then(n => { if (n) panel.next.replaceChildren(el("a", { href: `#/host/${encodeURIComponent(n.id)}` }, t("nextQuestion", { q: n.question }))); });
    }
    panel.totals = totals; panel.total = total;
    const open = s.status === "open";
    panel.close.hidden = !open; panel.extend.forEach(b => { b.hidden = !open; });
    if (!open) panel.confirm.hidden = true;
    panel.reveal.hidden = !s.hidden;
    panel.state.textContent = [s.hidden ? t("hiddenHost") : "", s.final ? t("finalCertified") : s.status === "closed" ? t("closedFinal") : ""].filter(Boolean).join(" ");
    // A hidden poll's counts reach the host from the API, with the token.
    if (s.hidden && !view.hostTimer) {
      view.hostTimer = setInterval(check, 1000); // the first check runs as the panel is built
    } else if (!s.hidden && view.hostTimer) {
      clearInterval(view.hostTimer); view.hostTimer = null; view.hostTotals = null;
    }
  };
}

// nextQuestion finds the poll of the event that opens after this one.
async function nextQuestion(poll, event) {
  const { polls } = await api("GET", `/v1/polls?event=${encodeURIComponent(event)}&limit=200`);
  const ordered = polls.sort((a, b) => a.opens_at - b.opens_at || a.id.localeCompare(b.id));
  const i = ordered.findIndex(p => p.id === poll);
  return i >= 0 ? ordered[i + 1] : null;
}

export function hostPage(root) {
  const token = tokenField();
  const question = el("input", { id: "question", required: true });
  const options = el("textarea", { id: "options", rows: "4", required: true });
  const duration = el("input", { id: "duration", type: "number", min: "1", value: "60" });
  const opensAt = el("input", { id: "opens-at", type: "datetime-local" });
  const event = el("input", { id: "event", pattern: "[A-Za-z0-9._\\-]+" });
  const hidden = el("input", { id: "hidden", type: "checkbox" });
  const out = el("p", { class: "error", role: "alert" });
  const form = el("form", { onsubmit: async ev => {
    ev.preventDefault();
    token.keep();
    const opts = options.value.split("\n").map(s => s.trim()).filter(Boolean).map((l, i) => ({ id: "o" + (i + 1), label: l }));
    const spec = { question: question.value, options: opts, duration_s: Number(duration.value), hidden: hidden.checked };
    if (opensAt.value) spec.opens_at = new Date(opensAt.value).getTime();
    if (event.value) spec.event = event.value;
    try {
      const p = await api("POST", "/v1/polls", spec, hostToken());
      location.hash = `#/host/${encodeURIComponent(p.id)}`;
    } catch (err) { out.textContent = err.message; }
  } },
    token.label, token.input,
    el("label", { for: "question" }, t("question")), question,
    el("label", { for: "options" }, t("optionsPerLine")), options,
    el("label", { for: "duration" }, t("openFor")), duration,
    el("label", { for: "opens-at" }, t("opensAtLabel")), opensAt,
    el("label", { for: "event" }, t("eventLabel")), event,
    el("p", { class: "check" }, hidden, " ", el("label", { for: "hidden" }, t("hideLabel"))),
    el("button", { class: "action", type: "submit" }, t("create")), out);
  root.replaceChildren(el("h1", {}, t("host")), form, el("h2", {}, t("polls")), pollList(id => `#/host/${encodeURIComponent(id)}`, true));
}

// pollList lists the polls, those of one event together.
export function pollList(href, host = false) {
  const list = el("div", { class: "polls" }, t("loading"));
  api("GET", "/v1/polls", undefined, host ? hostToken() || undefined : undefined).then(({ polls }) => {
    if (!polls.length) { list.replaceChildren(t("noPolls")); return; }
    const groups = new Map();
    for (const p of polls) { const k = p.event || ""; if (!groups.has(k)) groups.set(k, []); groups.get(k).push(p); }
    const link = p => el("li", {}, el("a", { href: href(p.id) }, el("strong", {}, p.question), " ",
      el("span", { class: "badge " + phase({ status: p.status, final: p.status === "reconciled" }) }, t(phase({ status: p.status, final: p.status === "reconciled" }))),
      p.total === undefined ? "" : " " + plural("votes", p.total)));
    list.replaceChildren(...[...groups].map(([ev, ps]) => el("section", {},
      ev ? el("h3", {}, t("eventPolls", { e: ev })) : "",
      el("ul", {}, (ev ? ps.slice().sort((a, b) => a.opens_at - b.opens_at) : ps).map(link)))));
  }).catch(err => list.replaceChildren(err.message));
  return list;
}

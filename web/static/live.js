// What every view shares: the DOM helpers, the client of this node
// (/client.js, the JavaScript client that ships as @tally/client), the
// voter's session and the optimistic taps. The protocol itself — the live
// stream, resyncs, reconnects, SSE, batched votes with HTTP fallback, the
// puzzle in a Worker — is the client's, not this page's.
import { Tally, uuid } from "/client.js";
import { t } from "/i18n.js";

export const $ = (sel, root = document) => root.querySelector(sel);
// el makes an element: attributes, listeners (on…: functions) and style,
// an object of properties ({ width: "40%", "--tile": "#b91c1c" }) set
// through the CSSOM — the page's Content-Security-Policy refuses a style
// attribute written as text (docs/page.md, "Content-Security-Policy").
export const el = (tag, attrs = {}, ...kids) => {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (k === "class") e.className = v;
    else if (k === "style") for (const [p, pv] of Object.entries(v || {})) e.style.setProperty(p, pv);
    else if (k.startsWith("on")) e.addEventListener(k.slice(2), v);
    else if (v !== undefined && v !== null && v !== false) e.setAttribute(k, v === true ? "" : v);
  }
  for (const k of kids.flat()) if (k !== null && k !== undefined && k !== "") e.append(k instanceof Node ? k : document.createTextNode(String(k)));
  return e;
};

// The node this page came from; the voter session is kept in this browser.
export const client = new Tally({ url: location.origin, storage: localStorage });

// The voter id before a session names one (a node without voter tokens),
// and the choices, live in this browser only.
export const voter = localStorage.getItem("tally.voter") || (() => {
  const v = uuid();
  localStorage.setItem("tally.voter", v);
  return v;
})();
export const choices = JSON.parse(localStorage.getItem("tally.choices") || "{}");
const saveChoices = () => localStorage.setItem("tally.choices", JSON.stringify(choices));

// me is who votes: the session's voter, or this browser's id without one.
export const me = () => client.token?.voter || voter;

// api calls the node's HTTP API, with the host's admin token when given.
export function api(method, path, body, token) {
  return client.request(method, path, body, token ? { Authorization: "Bearer " + token } : {});
}

// session earns the voter token (the client solves the node's puzzle in a
// Worker); a node without voter tokens answers 404 and the votes go without.
// A token the node later refuses (the phone moved to another network), or
// one that expired, is replaced by the client itself with one for the same
// voter (it sends the old token as "previous"; kept in localStorage until
// then, so a reload in between loses nothing), and the vote sent again: a
// change of mind after the move replaces the vote rather than adding one.
let sessionError = null; // why the last earning failed, for why()
export const session = () => client.session().then(s => { sessionError = null; return s; }, err => { sessionError = err; return null; });

// why says in plain words why a vote was not counted, or may not have been.
export function why(err) {
  switch (err?.code) {
    case "outcome_unknown": return t("outcomeUnknown");
    case "session_mismatch": case "session_invalid": case "session_expired": return t("tokenRefused");
    case "puzzle_failed": return t("puzzleFailed");
    case "stamp_ahead": return t("stampAhead");
    case "session_required": if (sessionError?.code === "puzzle_failed") return t("puzzleFailed");
  }
  return t("notCounted", { reason: err?.message || String(err) });
}

// subscribe follows a poll for a view; onConn hears how, in words.
export function subscribe(poll, onChange, onConn = () => {}) {
  return client.subscribe(poll, onChange, {
    onConn: (how, delay) => onConn(how === "websocket" ? "WebSocket" : how === "sse" ? "Server-Sent Events"
      : t("reconnecting", { s: (delay / 1000).toFixed(1) })),
  });
}

// unsettled holds, per poll, the vote whose outcome stayed unknown: a tap
// on the same option sends it again under the same key (it counts once
// whether or not the first reached the ledger).
const unsettled = {};

// tap votes for option: shown at once, sent in the client's next batch (on
// the view's socket, over HTTP when it is down), and reverted with the
// reason if the node refuses it. A vote whose outcome stayed unknown (the
// client sent it again for 30 s) keeps the choice and says so.
export async function tap(poll, option, view) {
  const previous = choices[poll];
  choices[poll] = option;
  saveChoices();
  view.optimistic(previous, option);
  await session();
  const idem = unsettled[poll]?.option === option ? unsettled[poll].idem : uuid();
  delete unsettled[poll];
  try {
    const r = await view.stream.vote({ option, voter: me(), idem });
    view.settled(r.status === "late" ? t("late") : "");
  } catch (err) {
    if (err.code === "outcome_unknown") {
      unsettled[poll] = { option, idem };
      return view.settled(why(err));
    }
    if (choices[poll] === option) { choices[poll] = previous; saveChoices(); }
    view.reverted(previous, why(err));
  }
}

// What every view shares: the DOM helpers, the client of this node
// (/client.js, the JavaScript client that ships as @tally/client), the
// voter's session and the optimistic taps. The protocol itself — the live
// stream, resyncs, reconnects, SSE, batched votes with HTTP fallback, the
// puzzle in a Worker — is the client's, not this page's.
import { Tally } from "/client.js";
import { t } from "/i18n.js";

export const $ = (sel, root = document) => root.querySelector(sel);
export const el = (tag, attrs = {}, ...kids) => {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (k === "class") e.className = v;
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
  const v = crypto.randomUUID();
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
export const session = () => client.session().catch(() => null);

// subscribe follows a poll for a view; onConn hears how, in words.
export function subscribe(poll, onChange, onConn = () => {}) {
  return client.subscribe(poll, onChange, {
    onConn: (how, delay) => onConn(how === "websocket" ? "WebSocket" : how === "sse" ? "Server-Sent Events"
      : t("reconnecting", { s: (delay / 1000).toFixed(1) })),
  });
}

// tap votes for option: shown at once, sent in the client's next batch (on
// the view's socket, over HTTP when it is down), and reverted with the
// reason if the node refuses it.
export async function tap(poll, option, view) {
  const previous = choices[poll];
  choices[poll] = option;
  saveChoices();
  view.optimistic(previous, option);
  await session();
  try {
    const r = await view.stream.vote({ option, voter: me() });
    view.settled(r.status === "late" ? t("late") : "");
  } catch (err) {
    if (choices[poll] === option) { choices[poll] = previous; saveChoices(); }
    view.reverted(previous, t("notCounted", { reason: err.message }));
  }
}

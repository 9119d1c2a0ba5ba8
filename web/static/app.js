// Tally's page: picks its view from the address. /present/{poll},
// /overlay/{poll} and /embed/{poll} are the broadcaster's views; on / the
// hash chooses the poll list, a poll (#/poll/{id}), a quiz (#/quiz/{id})
// or the host's pages (#/host, #/host/{id}, #/host/quiz/{id}). ES modules
// with no build step, on the JavaScript client the node serves at
// /client.js (clients/js).
import { t } from "/i18n.js";
import { $, el, client, session } from "/live.js";
import { PollView, PresentView, OverlayView, EventView } from "/poll.js";
import { hostControls, hostPage, pollList, toCSV } from "/host.js";
import { QuizView, QuizHostView } from "/quiz.js";
import { QuizStudioView, QuizOverlayView } from "/studio.js";
import { joinForm } from "/join.js";

// theme takes the broadcaster's colours and font from the address:
// ?accent=, ?fg=, ?bg= (hex, no #), ?font= (a family name) and ?logo= (an
// image). Anything else is ignored.
function theme() {
  const q = new URLSearchParams(location.search), css = document.documentElement.style;
  const hex = v => /^([0-9a-f]{3}|[0-9a-f]{6})$/i.test(v || "") ? "#" + v : null;
  for (const [param, vars] of [["accent", ["--bar", "--mine", "--accent"]], ["fg", ["--fg"]], ["bg", ["--bg"]]]) {
    const c = hex(q.get(param));
    if (c) for (const v of vars) css.setProperty(v, c);
  }
  const font = q.get("font");
  if (font && /^[\p{L}\p{N} -]{1,60}$/u.test(font)) css.setProperty("--font", `"${font}", system-ui, sans-serif`);
  if (q.get("theme") === "light" || q.get("theme") === "dark") document.body.classList.add("theme-" + q.get("theme"));
  // ?logo=: the broadcaster's logo in the top corner, inside the
  // title-safe area; a path on this site, or an https address on a host
  // the node lists in --logo-hosts (its <meta name="tally-logo-hosts">),
  // nothing else: no javascript:, data:, plain http or third party, which
  // a posted link would make every viewer's browser call. The node's
  // Content-Security-Policy (img-src) refuses the same, should this miss.
  const logo = q.get("logo");
  const hosts = (document.querySelector('meta[name="tally-logo-hosts"]')?.content || "").split(" ").filter(Boolean);
  let url = null;
  try { url = logo && new URL(logo, location.origin); } catch { /* not an address */ }
  if (url && (url.origin === location.origin || url.protocol === "https:" && !url.port && hosts.includes(url.hostname))) {
    document.querySelector("img.logo")?.remove();
    document.body.append(el("img", { class: "logo", src: url.href, alt: "", referrerpolicy: "no-referrer" }));
  }
}

// tellHeight lets the page around an embed size its iframe: a message
// {type: "tally:resize", height} to the parent whenever the poll's height
// changes (docs/api.md, "Embedding").
function tellHeight() {
  if (parent === window) return;
  let last = 0;
  new ResizeObserver(() => {
    const height = Math.ceil(document.documentElement.getBoundingClientRect().height);
    if (height !== last) { last = height; parent.postMessage({ type: "tally:resize", height }, "*"); }
  }).observe(document.documentElement);
}

// Start earning the voter's session early (by the first tap the token is
// usually there), but only where someone votes: the presenter, overlay
// and studio screens never do, and each session they took would spend
// the address's budget that the phones in the same venue share.
if (!/^\/(present|overlay)\//.test(location.pathname) && !location.hash.startsWith("#/host")) session();

let current = null;
function route() {
  if (current) { current.close(); current = null; }
  const root = $("#main");
  const [, view, id, event] = location.pathname.split("/").map(decodeURIComponent);
  if (["present", "overlay", "embed"].includes(view) && id) { $("header.site")?.remove(); theme(); } // the view is the whole page
  if (id === "quiz" && event && view === "present") { current = new QuizStudioView(root, event); return; }
  if (id === "quiz" && event && view === "overlay") { current = new QuizOverlayView(root, event); return; }
  if (id === "event" && event && (view === "present" || view === "overlay")) {
    current = new EventView(root, event, view === "present" ? PresentView : OverlayView);
    return;
  }
  if (view === "present" && id) { current = new PresentView(root, id); return; }
  if (view === "overlay" && id) { current = new OverlayView(root, id); return; }
  if (view === "embed" && id) { document.body.classList.add("embed"); current = new PollView(root, id); tellHeight(); return; }
  const parts = location.hash.replace(/^#\/?/, "").split("/").filter(Boolean).map(decodeURIComponent);
  if (parts[0] === "poll" && parts[1]) current = new PollView(root, parts[1]);
  else if (parts[0] === "quiz" && parts[1]) current = new QuizView(root, parts[1]);
  else if (parts[0] === "host" && parts[1] === "quiz" && parts[2]) current = new QuizHostView(root, parts[2]);
  else if (parts[0] === "host" && parts[1]) current = new PollView(root, parts[1], { host: hostControls(parts[1]) });
  else if (parts[0] === "host") hostPage(root);
  else if (parts[0] === "join") root.replaceChildren(joinForm(parts[1] || ""));
  else root.replaceChildren(joinForm(), el("h1", {}, t("polls")), pollList(pid => `#/poll/${encodeURIComponent(pid)}`));
  root.focus();
}
window.addEventListener("hashchange", route);
// A page left for another keeps no stream open (it would count as a
// viewer while it sits in the browser's back/forward cache), and comes
// back live when restored from it.
window.addEventListener("pagehide", () => { if (current) { current.close(); current = null; } });
window.addEventListener("pageshow", ev => { if (ev.persisted) route(); });
route();

// For the console (and the browser tests): the view on screen, the client.
window.tallyPage = { get view() { return current; }, client, toCSV };

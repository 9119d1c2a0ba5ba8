// Tally's page: picks its view from the address. /present/{poll},
// /overlay/{poll} and /embed/{poll} are the broadcaster's views; on / the
// hash chooses the poll list, a poll (#/poll/{id}), a quiz (#/quiz/{id})
// or the host's pages (#/host, #/host/{id}, #/host/quiz/{id}). ES modules
// with no build step, on the JavaScript client the node serves at
// /client.js (clients/js).
import { t } from "/i18n.js";
import { $, el, client, session } from "/live.js";
import { PollView, PresentView, OverlayView } from "/poll.js";
import { hostControls, hostPage, pollList, toCSV } from "/host.js";
import { QuizView, QuizHostView } from "/quiz.js";

session(); // start early: by the first tap the token is usually there

let current = null;
function route() {
  if (current) { current.close(); current = null; }
  const root = $("#main");
  const [, view, id] = location.pathname.split("/").map(decodeURIComponent);
  if (["present", "overlay", "embed"].includes(view) && id) $("header.site")?.remove(); // the view is the whole page
  if (view === "present" && id) { current = new PresentView(root, id); return; }
  if (view === "overlay" && id) { current = new OverlayView(root, id); return; }
  if (view === "embed" && id) { document.body.classList.add("embed"); current = new PollView(root, id); return; }
  const parts = location.hash.replace(/^#\/?/, "").split("/").filter(Boolean).map(decodeURIComponent);
  if (parts[0] === "poll" && parts[1]) current = new PollView(root, parts[1]);
  else if (parts[0] === "quiz" && parts[1]) current = new QuizView(root, parts[1]);
  else if (parts[0] === "host" && parts[1] === "quiz" && parts[2]) current = new QuizHostView(root, parts[2]);
  else if (parts[0] === "host" && parts[1]) current = new PollView(root, parts[1], { host: hostControls(parts[1]) });
  else if (parts[0] === "host") hostPage(root);
  else root.replaceChildren(el("h1", {}, t("polls")), pollList(pid => `#/poll/${encodeURIComponent(pid)}`));
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

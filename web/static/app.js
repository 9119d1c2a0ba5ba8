"use strict";
// Tally's page: picks its view from the address. /present/{poll},
// /overlay/{poll} and /embed/{poll} are the broadcaster's views; on / the
// hash chooses the poll list, a poll (#/poll/{id}), a quiz (#/quiz/{id})
// or the host's pages (#/host, #/host/{id}, #/host/quiz/{id}). Plain
// JavaScript, no build step: i18n.js, live.js, poll.js, host.js and
// quiz.js are loaded before this file.

session().catch(() => {}); // start early: by the first tap the token is usually there

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
route();

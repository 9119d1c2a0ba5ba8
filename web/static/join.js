// Join codes: the six characters a screen prints next to its QR code, for
// those who type rather than scan (GET /v1/join/{code}; /j/{code} is the
// address a screen prints). joinCode is the client's, so a screen computes
// the code the node resolves.
import { t } from "/i18n.js";
import { el, api } from "/live.js";
import { joinCode } from "/client.js";

export { joinCode };

// codeLine is what a screen prints under its QR code: where to type and
// the code itself.
export function codeLine(kind, id, host) {
  return el("p", { class: "code" }, t("enterCodeAt", { host }), " ", el("strong", { class: "join-code", translate: "no" }, joinCode(kind, id)));
}

// joinForm asks for a code and opens what it names; given a code (the
// page /#/join/{code} that /j/{code} sends an unknown one to), it tries it
// at once.
export function joinForm(code = "") {
  const input = el("input", { id: "join-code", name: "code", value: code, autocomplete: "off", autocapitalize: "characters",
    spellcheck: "false", maxlength: "16", inputmode: "text", "aria-describedby": "join-msg" });
  const msg = el("p", { id: "join-msg", class: "error", role: "alert" });
  const go = async () => {
    const typed = input.value.trim();
    if (!typed) return;
    try {
      const v = await api("GET", `/v1/join/${encodeURIComponent(typed)}`);
      location.assign(v.path);
    } catch (err) {
      msg.textContent = err.code === "join_code_not_found" ? t("noSuchCode", { code: typed.toUpperCase() })
        : err.code === "invalid_request" ? t("badCode") : err.message;
    }
  };
  const form = el("form", { class: "join-form", onsubmit: ev => { ev.preventDefault(); go(); } },
    el("label", { for: "join-code" }, t("haveCode")), " ", input, " ", el("button", { class: "action", type: "submit" }, t("joinButton")), msg);
  if (code) go();
  return form;
}

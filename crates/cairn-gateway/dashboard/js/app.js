// The dashboard: sign-in, navigation between views, live events.

import { del, get, post, setCsrf } from "./api.js";
import { chat } from "./chat.js";
import { costs } from "./costs.js";
import { clearToast, fill, h, toast } from "./dom.js";
import { home } from "./home.js";
import { inbox } from "./inbox.js";
import { connect, disconnect, on, soon } from "./live.js";
import { memory } from "./memory.js";
import { routines } from "./routines.js";
import { status } from "./status.js";
import { tasks } from "./tasks.js";

const views = {
  "": [home, "Home"],
  chat: [chat, "Chat"],
  routines: [routines, "Routines"],
  tasks: [tasks, "Watchers and tasks"],
  inbox: [inbox, "Inbox"],
  memory: [memory, "Memory"],
  costs: [costs, "Costs"],
  status: [status, "Status"],
};
const main = document.getElementById("main");
const nav = document.getElementById("nav");
const signOut = document.getElementById("sign-out");
const menu = document.getElementById("menu");
const header = document.querySelector(".top");

/** The phone's menu (the links are a list behind a button on a narrow screen). */
function openMenu(open) {
  header.classList.toggle("open", open);
  menu.setAttribute("aria-expanded", String(open));
}
menu.addEventListener("click", () => openMenu(!header.classList.contains("open")));
let cleanup = null;
let signedIn = false;

function showSignIn(message) {
  signedIn = false;
  cleanup?.();
  cleanup = null;
  disconnect();
  nav.hidden = true;
  menu.hidden = true;
  signOut.hidden = true;
  openMenu(false);
  document.title = "Sign in · cairn";
  const error = h("p", { id: "pair-error", class: "field-error", role: "alert" }, message || "");
  const input = h("input", {
    id: "pair-code",
    testid: "pair-code",
    name: "code",
    autocomplete: "one-time-code",
    autocapitalize: "characters",
    spellcheck: "false",
    required: true,
    "aria-describedby": "pair-help pair-error",
    placeholder: "ABCDE-FGHJK",
  });
  const form = h(
    "form",
    {
      class: "card signin",
      onsubmit: async (e) => {
        e.preventDefault();
        try {
          const session = await post("/ui/session", { code: input.value });
          setCsrf(session.csrf);
          start();
        } catch (err) {
          error.textContent = err.message;
          input.focus();
        }
      },
    },
    h("h1", {}, "Sign in to cairn"),
    h(
      "p",
      { id: "pair-help", class: "muted" },
      "Run ",
      h("code", {}, "cairn pair"),
      " on the machine and type the code it prints.",
    ),
    h("label", { for: "pair-code" }, "Pairing code"),
    input,
    error,
    h("p", {}, h("button", { type: "submit", testid: "pair-submit" }, "Sign in")),
  );
  fill(main, form);
  input.focus();
}

function route() {
  if (!signedIn) return;
  const [name, ...rest] = location.hash.replace(/^#\/?/, "").split("/");
  const [view, title] = views[name] || views[""];
  for (const a of nav.querySelectorAll("a")) {
    const target = a.getAttribute("href").replace(/^#\/?/, "");
    if (target === (views[name] ? name : "")) a.setAttribute("aria-current", "page");
    else a.removeAttribute("aria-current");
  }
  cleanup?.();
  openMenu(false);
  // A message about the page left behind does not follow to the next.
  clearToast();
  document.title = `${title} · cairn`;
  fill(main);
  cleanup = view(main, rest.map(decodeURIComponent)) || null;
  main.focus({ preventScroll: true });
}

const inboxLink = nav.querySelector('[data-testid="nav-inbox"]');
async function unread() {
  try {
    const n = (await get("/api/notifications/inbox")).length;
    inboxLink.textContent = n ? `Inbox (${n} unread)` : "Inbox";
  } catch {
    /* signed out meanwhile */
  }
}

function start() {
  signedIn = true;
  nav.hidden = false;
  menu.hidden = false;
  signOut.hidden = false;
  connect();
  on("notification", soon(unread));
  unread();
  route();
}

signOut.addEventListener("click", async () => {
  try {
    await del("/ui/session");
  } catch (err) {
    toast(err.message);
  }
  setCsrf("");
  showSignIn("Signed out.");
});
window.addEventListener("hashchange", route);
window.addEventListener("cairn:inbox-changed", () => {
  if (signedIn) unread();
});
window.addEventListener("cairn:signed-out", () => {
  if (signedIn) showSignIn("Your session ended: sign in again.");
});

get("/ui/session")
  .then((session) => {
    setCsrf(session.csrf);
    start();
  })
  .catch(() => showSignIn());

// Chat over the WebSocket (the session cookie authenticates it): streamed
// answers, tool calls and results as they happen, approvals, stop, threads.

import { get } from "./api.js";
import { fill, h, toast } from "./dom.js";

const KEY = "cairn.conversation";

export function chat(main) {
  const log = h("div", { class: "chat-log", role: "log", "aria-live": "polite", "aria-label": "Conversation" });
  const input = h("textarea", {
    id: "chat-input",
    testid: "chat-input",
    rows: 3,
    "aria-label": "Message",
    placeholder: "Message cairn (Ctrl+Enter sends)",
  });
  const send = h("button", { type: "submit", testid: "chat-send" }, "Send");
  const stop = h(
    "button",
    { type: "button", class: "danger", testid: "chat-stop", disabled: true, onclick: () => frame({ type: "stop" }) },
    "Stop",
  );
  const state = h("p", { class: "muted", id: "chat-state" }, "Connecting…");
  const command = (text) => () => submit(text);
  const threads = h("select", { id: "chat-thread", testid: "chat-thread" });
  const switcher = h(
    "div",
    { class: "row", hidden: true },
    h("label", { for: "chat-thread" }, "Thread"),
    threads,
    h(
      "button",
      {
        type: "button",
        class: "quiet",
        id: "chat-switch",
        onclick: () => threads.value && submit(`/thread ${threads.value}`),
      },
      "Switch",
    ),
  );
  const form = h(
    "form",
    {
      onsubmit: (e) => {
        e.preventDefault();
        submit(input.value);
      },
    },
    h("label", { for: "chat-input" }, "Message"),
    input,
    h(
      "div",
      { class: "actions" },
      send,
      stop,
      h("button", { type: "button", class: "quiet", id: "chat-new", onclick: command("/new") }, "New thread"),
      h("button", { type: "button", class: "quiet", onclick: command("/undo") }, "Undo"),
    ),
  );
  fill(main, h("h1", {}, "Chat"), state, switcher, log, form);
  input.addEventListener("keydown", (e) => {
    if (e.key === "Enter" && (e.ctrlKey || e.metaKey)) form.requestSubmit();
  });

  let answer = null;
  let current = "";
  let closed = false;
  const tools = new Map();
  const scheme = location.protocol === "https:" ? "wss:" : "ws:";
  const conversation = sessionStorage.getItem(KEY);
  const socket = new WebSocket(
    `${scheme}//${location.host}/ws/chat${conversation ? `?conversation=${encodeURIComponent(conversation)}` : ""}`,
  );
  const frame = (f) => socket.readyState === WebSocket.OPEN && socket.send(JSON.stringify(f));
  const add = (role, text) => {
    const m = h("div", { class: "msg", testid: "chat-message", "data-role": role }, text);
    log.append(m);
    m.scrollIntoView({ block: "nearest" });
    return m;
  };
  const busy = (on) => {
    stop.disabled = !on;
    log.dataset.busy = String(on);
  };

  /** The threads of this conversation's session, the active one selected. */
  async function listThreads(conversation) {
    const sessions = await get("/api/sessions").catch(() => []);
    const mine = sessions.find((x) => x.channel === `ws:${conversation}`);
    fill(
      threads,
      (mine?.threads || []).map((t) =>
        h(
          "option",
          { value: t.id, selected: t.id === mine.active_thread_id },
          `${t.title || "(untitled)"} · ${new Date(t.updated_at).toLocaleString()}`,
        ),
      ),
    );
    switcher.hidden = !mine || mine.threads.length < 2;
  }

  function submit(text) {
    text = text.trim();
    if (!text || socket.readyState !== WebSocket.OPEN) return;
    add("user", text);
    frame({ type: "message", content: text });
    input.value = "";
    answer = null;
    busy(true);
  }

  function approval(f) {
    const box = h(
      "div",
      { class: "approval", role: "group", "aria-label": `Approve ${f.tool}?` },
      h("p", {}, h("strong", {}, f.tool), ` wants to run (${f.risk}). `, f.summary || ""),
      h("pre", {}, JSON.stringify(f.arguments, null, 2)),
    );
    const answer = (decision) => () => {
      frame({ type: "approval", id: f.id, decision });
      fill(box, h("p", {}, `${f.tool}: ${decision}`));
    };
    box.append(
      h(
        "div",
        { class: "actions" },
        h("button", { type: "button", testid: "approval-approve", onclick: answer("approve") }, "Approve"),
        h("button", { type: "button", class: "danger", testid: "approval-deny", onclick: answer("deny") }, "Deny"),
        h("button", { type: "button", class: "quiet", testid: "approval-always", onclick: answer("always") }, "Always"),
      ),
    );
    log.append(box);
    box.querySelector("button").focus();
  }

  socket.onopen = () => {
    state.textContent = "Connected.";
  };
  socket.onclose = () => {
    if (!closed) state.textContent = "Disconnected: reload the page to reconnect.";
    busy(false);
  };
  socket.onmessage = (message) => {
    const f = JSON.parse(message.data);
    switch (f.type) {
      case "ready":
        sessionStorage.setItem(KEY, f.conversation);
        state.textContent = `Conversation ${f.conversation}`;
        current = f.conversation;
        listThreads(current);
        break;
      case "chunk":
        answer ||= add("assistant", "");
        answer.textContent += f.content;
        break;
      case "tool_call":
        tools.set(f.call_id, add("tool", `⚙ ${f.tool}…`));
        answer = null;
        break;
      case "tool_result":
        (tools.get(f.call_id) || add("tool", "")).textContent = `⚙ ${f.tool}: ${f.status}`;
        break;
      case "approval_request":
        approval(f);
        break;
      case "notification":
        add("notification", `🔔 ${f.title || ""} ${f.body || ""}`);
        break;
      case "done":
        if (!answer && f.response) add("assistant", f.response);
        answer = null;
        busy(false);
        listThreads(current);
        break;
      case "error":
        add("error", f.message);
        answer = null;
        busy(false);
        break;
      default:
        break;
    }
  };
  socket.onerror = () => toast("The chat connection failed.");
  return () => {
    closed = true;
    socket.close();
  };
}

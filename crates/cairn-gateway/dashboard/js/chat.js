// Chat over the WebSocket (the session cookie authenticates it): streamed
// answers, tool calls and results as they happen, approvals, stop, threads.
// With several agents, a switcher picks the one to talk to; the choice is
// remembered, and each agent has its own conversation.

import { get } from "./api.js";
import { fill, h, toast } from "./dom.js";

const KEY = "cairn.conversation";
const AGENT = "cairn.agent";
const MAIN = "main";

/** The conversation remembered for `agent` (main's key is the one from before agents). */
const conversationKey = (agent) => (agent === MAIN ? KEY : `${KEY}.${agent}`);

/** The agents: main, then each `cairn:<id>` GET /v1/models lists. */
async function agents() {
  const models = await get("/v1/models").catch(() => null);
  const ids = (models?.data || []).map((m) => m.id).filter((id) => id.startsWith("cairn:"));
  return [MAIN, ...ids.map((id) => id.slice("cairn:".length))];
}

export function chat(main) {
  let close = null;
  let gone = false;
  fill(main, h("h1", {}, "Chat"), h("p", { class: "muted", id: "chat-state" }, "Connecting…"));
  const open = async () => {
    const list = await agents();
    if (gone) return;
    const stored = localStorage.getItem(AGENT);
    const agent = list.includes(stored) ? stored : MAIN;
    close?.();
    close = conversation(main, list, agent, (chosen) => {
      localStorage.setItem(AGENT, chosen);
      open();
    });
  };
  open();
  return () => {
    gone = true;
    close?.();
  };
}

/** The chat with `agent`; `choose` switches to another of `list`. */
function conversation(main, list, agent, choose) {
  const picker = h(
    "select",
    { id: "chat-agent", testid: "chat-agent", onchange: (e) => choose(e.target.value) },
    list.map((id) => h("option", { value: id, selected: id === agent }, id)),
  );
  // Only worth showing when there is a choice.
  const agentRow = h(
    "div",
    { class: "row", hidden: list.length < 2 },
    h("label", { for: "chat-agent" }, "Agent"),
    picker,
  );
  const log = h("div", { class: "chat-log", role: "log", "aria-live": "polite", "aria-label": "Conversation" });
  const input = h("textarea", {
    id: "chat-input",
    testid: "chat-input",
    rows: 3,
    "aria-label": "Message",
    placeholder: `Message ${agent === MAIN ? "cairn" : agent} (Ctrl+Enter sends)`,
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
  fill(main, h("h1", {}, "Chat"), agentRow, state, switcher, log, form);
  input.addEventListener("keydown", (e) => {
    if (e.key === "Enter" && (e.ctrlKey || e.metaKey)) form.requestSubmit();
  });

  let answer = null;
  let current = "";
  let closed = false;
  const tools = new Map();
  const scheme = location.protocol === "https:" ? "wss:" : "ws:";
  const query = new URLSearchParams();
  const remembered = sessionStorage.getItem(conversationKey(agent));
  if (remembered) query.set("conversation", remembered);
  if (agent !== MAIN) query.set("agent", agent);
  const socket = new WebSocket(`${scheme}//${location.host}/ws/chat${query.size ? `?${query}` : ""}`);
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

  /** The threads of this conversation's session (its channel), the active one selected. */
  async function listThreads(channel) {
    const sessions = await get("/api/sessions").catch(() => []);
    const mine = sessions.find((x) => x.channel === channel);
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
        sessionStorage.setItem(conversationKey(agent), f.conversation);
        state.textContent =
          list.length < 2 ? `Conversation ${f.conversation}` : `Conversation ${f.conversation} with ${agent}`;
        current = f.channel;
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

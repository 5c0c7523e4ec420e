// Chat over the WebSocket (the session cookie authenticates it): streamed
// answers, tool calls and results as they happen, approvals, stop. The
// thread's history comes from the store (on open, reload, switch; older
// turns a page at a time); New thread, Undo and switching are actions of
// their own (/ui/api/chat/thread), never messages. Answers are Markdown,
// rendered by the server into nodes (markdown.js). With several agents, a
// switcher picks the one to talk to; the choice is remembered, and each
// agent has its own conversation.

import { get, post } from "./api.js";
import { fill, h, toast, when } from "./dom.js";
import { markdown } from "./markdown.js";

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

/** A thread's name: its first message, and the date it last changed. */
const threadName = (t) => `${t.title || "New thread"} · ${when(t.updated_at)}`;

/** The approval card's colour: by the tool's risk. */
/** How often a streaming answer is drawn again as Markdown. */
const PROGRESS_MS = 1000;

const RISK_CLASS = { read: "risk-read", write: "risk-write", dangerous: "risk-dangerous" };

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
  const earlier = h(
    "button",
    { type: "button", class: "quiet", testid: "chat-earlier", hidden: true, onclick: () => loadEarlier() },
    "Show earlier messages",
  );
  const input = h("textarea", {
    id: "chat-input",
    testid: "chat-input",
    rows: 2,
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
  const threads = h("select", { id: "chat-thread", testid: "chat-thread" });
  const switcher = h(
    "span",
    { class: "row", hidden: true },
    h("label", { for: "chat-thread" }, "Thread"),
    threads,
    h(
      "button",
      {
        type: "button",
        class: "quiet",
        id: "chat-switch",
        testid: "chat-switch",
        onclick: () => threads.value && control("switch", threads.value),
      },
      "Switch",
    ),
  );
  const newThread = h(
    "button",
    { type: "button", class: "quiet", id: "chat-new", testid: "chat-new-thread", onclick: () => control("new") },
    "New thread",
  );
  const undo = h(
    "button",
    { type: "button", class: "quiet", testid: "chat-undo", onclick: () => control("undo") },
    "Undo",
  );
  const form = h(
    "form",
    {
      class: "composer",
      onsubmit: (e) => {
        e.preventDefault();
        submit(input.value);
      },
    },
    input,
    h("div", { class: "actions" }, send, stop),
  );
  fill(
    main,
    h("h1", {}, "Chat"),
    agentRow,
    state,
    h("div", { class: "row thread-bar" }, switcher, newThread, undo),
    earlier,
    log,
    form,
  );
  input.addEventListener("keydown", (e) => {
    if (e.key === "Enter" && (e.ctrlKey || e.metaKey)) form.requestSubmit();
  });

  let answer = null;
  let thinking = null;
  let conversationId = "";
  let oldest = null;
  let closed = false;
  const tools = new Map();
  const scheme = location.protocol === "https:" ? "wss:" : "ws:";
  const query = new URLSearchParams();
  const remembered = sessionStorage.getItem(conversationKey(agent));
  if (remembered) query.set("conversation", remembered);
  if (agent !== MAIN) query.set("agent", agent);
  const socket = new WebSocket(`${scheme}//${location.host}/ws/chat${query.size ? `?${query}` : ""}`);
  const frame = (f) => socket.readyState === WebSocket.OPEN && socket.send(JSON.stringify(f));
  const bubble = (role, ...content) => h("div", { class: "msg", testid: "chat-message", "data-role": role }, content);
  const add = (role, ...content) => {
    const m = bubble(role, ...content);
    log.append(m);
    m.scrollIntoView({ block: "nearest" });
    return m;
  };
  const errorBubble = (reason) => bubble("error", h("strong", {}, "Error: "), reason);
  const busy = (on) => {
    stop.disabled = !on;
    newThread.disabled = on;
    undo.disabled = on;
    log.dataset.busy = String(on);
  };
  const conversationQuery = (extra = {}) => {
    const q = new URLSearchParams({ conversation: conversationId, ...extra });
    if (agent !== MAIN) q.set("agent", agent);
    return q;
  };
  /** Thinking from the message sent until the first sign of an answer. */
  const think = (on) => {
    thinking?.remove();
    thinking = on ? h("p", { class: "thinking muted", testid: "chat-thinking", role: "status" }, "Thinking…") : null;
    if (thinking) {
      log.append(thinking);
      thinking.scrollIntoView({ block: "nearest" });
    }
  };

  /** One stored turn as bubbles: the message, its tools, the answer or why there is none. */
  function turnBubbles(t) {
    if (t.kind === "summary") return [bubble("notice", "Earlier messages were summarized to fit the model's context.")];
    const out = [bubble("user", t.user_input)];
    for (const c of t.tool_calls || []) out.push(bubble("tool", `⚙ ${c.tool}: ${c.status}`));
    if (t.nodes) out.push(bubble("assistant", markdown(t.nodes)));
    else if (t.state === "failed") out.push(errorBubble(t.error || "the turn failed"));
    else if (t.state === "interrupted") out.push(bubble("notice", "Interrupted."));
    return out;
  }

  function drawThreads(x) {
    fill(
      threads,
      (x.threads || []).map((t) => h("option", { value: t.id, selected: t.active }, threadName(t))),
    );
    switcher.hidden = (x.threads || []).length < 2;
  }

  /** The active thread's last turns, from the store. */
  async function loadHistory() {
    const x = await get(`/ui/api/chat/history?${conversationQuery()}`);
    if (closed) return;
    drawThreads(x);
    tools.clear();
    answer = null;
    fill(log, x.turns.flatMap(turnBubbles));
    oldest = x.turns[0]?.number ?? null;
    earlier.hidden = !x.more;
    log.lastElementChild?.scrollIntoView({ block: "end" });
  }

  async function loadEarlier() {
    if (oldest === null) return;
    const x = await get(`/ui/api/chat/history?${conversationQuery({ before: String(oldest) })}`);
    if (closed) return;
    log.prepend(...x.turns.flatMap(turnBubbles));
    oldest = x.turns[0]?.number ?? oldest;
    earlier.hidden = !x.more;
  }

  /** The thread list again (titles change with the first message). */
  async function refreshThreads() {
    const x = await get(`/ui/api/chat/history?${conversationQuery({ limit: "1" })}`).catch(() => null);
    if (x && !closed) drawThreads(x);
  }

  /** New thread, Undo or switch: done by the gateway, then the history drawn again. */
  async function control(action, thread) {
    if (!conversationId) return;
    try {
      const body = { conversation: conversationId, action, thread };
      if (agent !== MAIN) body.agent = agent;
      const x = await post("/ui/api/chat/thread", body);
      await loadHistory();
      const title = threads.selectedOptions[0]?.textContent;
      state.textContent =
        action === "new"
          ? "Started a new thread."
          : action === "switch"
            ? `Switched to ${title || "the thread"}.`
            : /^Nothing/.test(x.notice)
              ? "Nothing to undo."
              : "Undid the last exchange.";
    } catch (err) {
      toast(err.message);
    }
  }

  function submit(text) {
    text = text.trim();
    if (!text || socket.readyState !== WebSocket.OPEN) return;
    add("user", text);
    frame({ type: "message", content: text });
    input.value = "";
    answer = null;
    busy(true);
    think(true);
  }

  /** The streamed answer, drawn again as Markdown once complete. */
  /**
   * While it streams, the answer so far is drawn as Markdown about once a
   * second (one request at a time), what arrived since following as text.
   */
  function progress(bubbleEl) {
    if (bubbleEl.pending || bubbleEl.final) return;
    bubbleEl.pending = true;
    setTimeout(async () => {
      const upto = bubbleEl.raw.length;
      try {
        const x = await post("/ui/api/markdown", { text: bubbleEl.raw.slice(0, upto) });
        if (closed || bubbleEl.final) return;
        bubbleEl.tail = document.createTextNode(bubbleEl.raw.slice(upto));
        fill(bubbleEl, markdown(x.nodes), bubbleEl.tail);
      } catch {
        /* the plain text stays */
      } finally {
        bubbleEl.pending = false;
      }
    }, PROGRESS_MS);
  }

  /** The complete answer, drawn as Markdown (the last word over any progress drawing). */
  async function finish(bubbleEl, text) {
    bubbleEl.final = true;
    try {
      const x = await post("/ui/api/markdown", { text });
      if (!closed) fill(bubbleEl, markdown(x.nodes));
    } catch {
      /* the plain text stays */
    }
  }

  function approval(f) {
    const box = h(
      "div",
      {
        class: `approval ${RISK_CLASS[f.risk] || "risk-write"}`,
        testid: "approval-card",
        "data-risk": f.risk,
        role: "group",
        "aria-label": `Approve ${f.tool}?`,
      },
      h("p", {}, h("strong", {}, f.tool), " wants to run ", h("span", { class: "badge" }, f.risk), " with:"),
      h("pre", {}, JSON.stringify(f.arguments, null, 2)),
    );
    const words = { approve: "Approved", deny: "Denied", always: "Always allowed" };
    const answerWith = (decision) => () => {
      frame({ type: "approval", id: f.id, decision });
      box.dataset.decision = decision;
      box.classList.add(decision === "deny" ? "decided-no" : "decided-yes");
      fill(box, h("p", {}, h("strong", {}, `${words[decision]}: `), f.tool));
    };
    box.append(
      h(
        "div",
        { class: "actions" },
        h("button", { type: "button", testid: "approval-approve", onclick: answerWith("approve") }, "Approve"),
        h("button", { type: "button", class: "danger", testid: "approval-deny", onclick: answerWith("deny") }, "Deny"),
        h(
          "button",
          { type: "button", class: "quiet", testid: "approval-always", onclick: answerWith("always") },
          "Always",
        ),
      ),
    );
    log.append(box);
    box.scrollIntoView({ block: "nearest" });
    box.querySelector("button").focus();
  }

  socket.onopen = () => {
    state.textContent = "Connected.";
  };
  socket.onclose = () => {
    if (!closed) state.textContent = "Disconnected: reload the page to reconnect.";
    think(false);
    busy(false);
  };
  socket.onmessage = (message) => {
    const f = JSON.parse(message.data);
    if (["chunk", "tool_call", "approval_request", "done", "error"].includes(f.type)) think(false);
    switch (f.type) {
      case "ready":
        conversationId = f.conversation;
        sessionStorage.setItem(conversationKey(agent), f.conversation);
        state.textContent =
          list.length < 2 ? `Conversation ${f.conversation}` : `Conversation ${f.conversation} with ${agent}`;
        busy(false);
        loadHistory().catch((err) => toast(`The history could not be read: ${err.message}`));
        break;
      case "chunk":
        if (!answer) {
          answer = add("assistant", "");
          answer.raw = "";
          answer.tail = document.createTextNode("");
          answer.append(answer.tail);
        }
        answer.raw += f.content;
        answer.tail.data += f.content;
        progress(answer);
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
      case "done": {
        if (f.notice) add("notice", f.response || "");
        else if (answer || f.response) finish(answer || add("assistant", f.response), f.response || answer.raw);
        answer = null;
        busy(false);
        refreshThreads();
        break;
      }
      case "error":
        add("error", h("strong", {}, "Error: "), f.message);
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

// Inbox and notifications: delivery status and attempts, mark read, retry now.

import { get, post } from "./api.js";
import { fill, h, status, toast, when } from "./dom.js";
import { on, soon } from "./live.js";

/** Where a notification came from, a link to it when the dashboard shows it. */
function source(text) {
  const [kind, id] = String(text || "").split(/:(.*)/s);
  if (kind === "routine" && id)
    return h("a", { href: `#/routines/${encodeURIComponent(id)}`, title: text }, `routine ${id.slice(0, 8)}`);
  if (["watcher", "job", "task"].includes(kind) && id) return h("a", { href: "#/tasks" }, text);
  return text;
}

export function inbox(main) {
  const body = h("div");
  fill(
    main,
    h("h1", {}, "Inbox and notifications"),
    h(
      "p",
      {},
      h(
        "button",
        {
          type: "button",
          class: "quiet",
          onclick: async () => {
            const m = await post("/api/notifications/read");
            toast(`${m.marked} marked read.`);
            load();
          },
        },
        "Mark all read",
      ),
    ),
    body,
  );
  async function load() {
    // Reading is not an event on the stream: tell the navigation's count.
    window.dispatchEvent(new CustomEvent("cairn:inbox-changed"));
    const list = await get("/api/notifications?limit=100");
    fill(
      body,
      list.length
        ? h(
            "ul",
            { class: "rows", "aria-label": "Notifications, newest first" },
            list.map((n) => {
              const unread = n.in_inbox && !n.read_at;
              return h(
                "li",
                { testid: "notification-row", "data-id": n.id, "data-status": n.status, "data-unread": String(unread) },
                h(
                  "div",
                  { class: "grow" },
                  h("strong", {}, n.title || "(no title)"),
                  unread ? h("span", { class: "badge warn" }, " unread") : null,
                  h("div", {}, n.body),
                  h(
                    "div",
                    { class: "muted" },
                    `${when(n.created_at)} · `,
                    source(n.source),
                    ` · ${n.channel}`,
                    n.last_error ? ` · ${n.last_error}` : "",
                  ),
                ),
                // Attempts only when a channel was tried (an inbox-only notification has none).
                h(
                  "span",
                  {},
                  status(n.status),
                  n.attempts ? ` ${n.attempts} attempt${n.attempts === 1 ? "" : "s"}` : "",
                ),
                h(
                  "div",
                  { class: "actions" },
                  unread
                    ? h(
                        "button",
                        {
                          type: "button",
                          class: "quiet",
                          testid: "mark-read",
                          "aria-label": `Mark read: ${n.title || "notification"}`,
                          onclick: async () => {
                            await post(`/api/notifications/${n.id}/read`);
                            load();
                          },
                        },
                        "Mark read",
                      )
                    : null,
                  n.status === "pending"
                    ? h(
                        "button",
                        {
                          type: "button",
                          class: "quiet",
                          "aria-label": `Retry now: ${n.title || "notification"}`,
                          onclick: async () => {
                            try {
                              const r = await post(`/ui/api/notifications/${n.id}/retry`);
                              toast(`Attempt: ${r.status}.`);
                            } catch (err) {
                              toast(err.message);
                            }
                            load();
                          },
                        },
                        "Retry now",
                      )
                    : null,
                ),
              );
            }),
          )
        : h("p", { class: "muted" }, "Nothing yet."),
    );
  }
  load();
  return on("notification", soon(load));
}

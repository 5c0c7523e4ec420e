// Watchers (pause/resume, cancel, recent checks), jobs with their
// sub-agents (cancel) and background tasks (cancel).

import { del, get, post } from "./api.js";
import { dollars, fill, h, status, table, toast, when } from "./dom.js";
import { on, soon } from "./live.js";

/** Whether a job is a sub-agent: its origin names the turn that started it. */
function subAgent(job) {
  return (job.origin || "").startsWith("delegate:");
}

/** The first line of a result, cut short for a table cell. */
function short(text) {
  const first = text.split("\n")[0];
  return first.length > 120 ? `${first.slice(0, 120)}…` : first;
}

export function tasks(main) {
  const watchers = h("section", { "aria-labelledby": "h-watchers" });
  const jobs = h("section", { "aria-labelledby": "h-jobs" });
  const background = h("section", { "aria-labelledby": "h-background" });
  const checks = h("section", { "aria-live": "polite", "aria-label": "Recent checks" });
  fill(main, h("h1", {}, "Watchers, jobs and background tasks"), watchers, checks, jobs, background);
  const act = (fn, done) => async () => {
    try {
      await fn();
      toast(done);
      load();
    } catch (err) {
      toast(err.message);
    }
  };

  async function history(w) {
    const d = await get(`/api/watchers/${encodeURIComponent(w.watcher_id)}`);
    fill(
      checks,
      h("h2", {}, `Recent checks of ${w.label || w.watcher_id}`),
      d.history.length
        ? table(
            "Checks, newest first",
            ["#", "At", "Status", "Notified", "Result"],
            d.history.map((c) =>
              h(
                "tr",
                {},
                h("td", {}, String(c.check)),
                h("td", {}, when(c.at)),
                h("td", {}, status(c.status)),
                h("td", {}, c.notified ? "yes" : "no"),
                h("td", {}, c.result),
              ),
            ),
          )
        : h("p", { class: "muted" }, "No checks yet."),
    );
  }

  async function load() {
    const [ws, bg, jb] = await Promise.all([
      get("/api/watchers"),
      get("/api/background").catch(() => []),
      get("/api/jobs?limit=50").catch(() => []),
    ]);
    fill(
      watchers,
      h("h2", { id: "h-watchers" }, "Watchers"),
      ws.length
        ? table(
            "Watchers: what they check, how often, their state",
            ["Watcher", "Tool", "Every", "Status", "Checks", "Next check", "Actions"],
            ws.map((w) =>
              h(
                "tr",
                { testid: "watcher-row", "data-id": w.watcher_id },
                h("td", {}, w.label || w.watcher_id),
                h("td", {}, w.tool_name),
                h("td", {}, `${w.interval} s`),
                h("td", {}, status(w.status)),
                h("td", {}, String(w.check_count)),
                h("td", {}, when(w.next_check_at)),
                h(
                  "td",
                  {},
                  h(
                    "div",
                    { class: "actions" },
                    w.status === "paused"
                      ? h(
                          "button",
                          {
                            type: "button",
                            class: "quiet",
                            onclick: act(() => post(`/api/watchers/${w.watcher_id}/resume`), "Resumed."),
                          },
                          "Resume",
                        )
                      : h(
                          "button",
                          {
                            type: "button",
                            class: "quiet",
                            onclick: act(() => post(`/api/watchers/${w.watcher_id}/pause`), "Paused."),
                          },
                          "Pause",
                        ),
                    h("button", { type: "button", class: "quiet", onclick: () => history(w) }, "Checks"),
                    h(
                      "button",
                      {
                        type: "button",
                        class: "danger",
                        onclick: act(() => del(`/api/watchers/${w.watcher_id}`), "Cancelled."),
                      },
                      "Cancel",
                    ),
                  ),
                ),
              ),
            ),
          )
        : h("p", { class: "muted" }, "No watchers. Ask cairn in the chat to watch something."),
    );
    fill(
      jobs,
      h("h2", { id: "h-jobs" }, "Jobs and sub-agents"),
      jb.length
        ? table(
            "Jobs, newest first; a sub-agent (agent_delegate, job_subtasks) is marked ↳",
            ["Job", "State", "Started", "Model calls", "Cost", "Result", ""],
            jb.map((j) =>
              h(
                "tr",
                { testid: "job-row", "data-id": j.id },
                h("td", {}, subAgent(j) ? `↳ ${j.title}` : j.title),
                h("td", {}, status(j.state)),
                h("td", {}, when(j.started_at || j.created_at)),
                h("td", {}, String(j.iterations)),
                h("td", {}, dollars(j.cost_micros)),
                h("td", {}, short(j.error || j.result || "")),
                h(
                  "td",
                  {},
                  ["pending", "in_progress", "stuck"].includes(j.state)
                    ? h(
                        "button",
                        {
                          type: "button",
                          class: "danger",
                          onclick: act(() => post(`/api/jobs/${j.id}/cancel`), "Cancel requested."),
                        },
                        "Cancel",
                      )
                    : null,
                ),
              ),
            ),
          )
        : h("p", { class: "muted" }, "No jobs. Start one with /job in the chat; sub-agents show here too."),
    );
    fill(
      background,
      h("h2", { id: "h-background" }, "Background tasks"),
      bg.length
        ? table(
            "Background tasks, newest first",
            ["Tool", "Status", "Started", "Finished", "Error", ""],
            bg.map((t) =>
              h(
                "tr",
                { testid: "task-row" },
                h("td", {}, t.tool_name),
                h("td", {}, status(t.status)),
                h("td", {}, when(t.started_at)),
                h("td", {}, when(t.finished_at)),
                h("td", {}, t.error || ""),
                h(
                  "td",
                  {},
                  t.status === "running"
                    ? h(
                        "button",
                        {
                          type: "button",
                          class: "danger",
                          onclick: act(() => post(`/api/background/${t.task_id}/cancel`), "Cancelled."),
                        },
                        "Cancel",
                      )
                    : null,
                ),
              ),
            ),
          )
        : h("p", { class: "muted" }, "No background tasks."),
    );
  }
  load();
  const again = soon(load);
  const offs = [on("job", again), on("tool", again)];
  return () =>
    offs.forEach((off) => {
      off();
    });
}

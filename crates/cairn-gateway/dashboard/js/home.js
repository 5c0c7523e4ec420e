// Home: component health, the next fires, today's spend, unread inbox, latest runs.

import { get } from "./api.js";
import { dollars, fill, h, relative, status, table, when } from "./dom.js";
import { on, soon } from "./live.js";

export function home(main) {
  const health = h("section", { class: "card", "aria-labelledby": "h-health" });
  const next = h("section", { class: "card", "aria-labelledby": "h-next" });
  const spend = h("section", { class: "card", "aria-labelledby": "h-spend" });
  const unread = h("section", { class: "card", "aria-labelledby": "h-unread" });
  const runs = h("section", { "aria-labelledby": "h-runs" });
  fill(main, h("h1", {}, "Home"), h("div", { class: "grid" }, health, next, spend, unread), runs);

  async function load() {
    const [st, list, cost, inbox] = await Promise.all([
      get("/api/status"),
      get("/api/routines"),
      get("/ui/api/costs"),
      get("/api/notifications/inbox"),
    ]);
    const comps = Object.entries(st.components);
    const bad = comps.filter(([, c]) => !["running", "disabled"].includes(c.state));
    fill(
      health,
      h("h2", { id: "h-health" }, "Components"),
      h("p", { class: "big" }, bad.length ? `${bad.length} need attention` : "All healthy"),
      h(
        "ul",
        { class: "rows" },
        comps.map(([name, c]) =>
          h("li", { testid: "component-row", "data-name": name }, h("span", { class: "grow" }, name), status(c.state)),
        ),
      ),
    );
    const upcoming = list
      .filter((r) => r.next_fire_at)
      .sort((a, b) => a.next_fire_at.localeCompare(b.next_fire_at))
      .slice(0, 5);
    fill(
      next,
      h("h2", { id: "h-next" }, "Next fires"),
      upcoming.length
        ? h(
            "ul",
            { class: "rows" },
            upcoming.map((r) =>
              h(
                "li",
                {},
                h("a", { class: "grow", href: `#/routines/${encodeURIComponent(r.name)}` }, r.name),
                h("span", {}, when(r.next_fire_at)),
                h("span", { class: "muted" }, relative(r.next_fire_at)),
              ),
            ),
          )
        : h("p", { class: "muted" }, "Nothing scheduled."),
    );
    const limit = cost.limits?.daily_budget_cents;
    fill(
      spend,
      h("h2", { id: "h-spend" }, "Spent today"),
      h("p", { class: "big" }, dollars(cost.today.spent_micros)),
      h("p", { class: "muted" }, limit == null ? "No daily budget." : `of ${dollars(limit * 10000)} daily budget`),
    );
    fill(
      unread,
      h("h2", { id: "h-unread" }, "Inbox"),
      h("p", { class: "big" }, `${inbox.length} unread`),
      h("a", { href: "#/inbox" }, "Open the inbox"),
    );
    const recent = list
      .filter((r) => r.last_run_at)
      .sort((a, b) => b.last_run_at.localeCompare(a.last_run_at))
      .slice(0, 5);
    const rows = (
      await Promise.all(
        recent.map(async (r) =>
          (await get(`/api/routines/${r.id}/runs?limit=5`)).map((run) => ({ ...run, routine: r.name })),
        ),
      )
    )
      .flat()
      .sort((a, b) => b.started_at.localeCompare(a.started_at))
      .slice(0, 10);
    fill(
      runs,
      h("h2", { id: "h-runs" }, "Latest runs"),
      rows.length
        ? table(
            "The latest runs of every routine",
            ["Routine", "Started", "Status", "Summary"],
            rows.map((run) =>
              h(
                "tr",
                { testid: "run-row" },
                h("td", {}, run.routine),
                h("td", {}, when(run.started_at)),
                h("td", {}, status(run.status)),
                h("td", {}, run.result_summary || run.skip_reason || ""),
              ),
            ),
          )
        : h("p", { class: "muted" }, "No runs yet."),
    );
  }
  load();
  const again = soon(load);
  const offs = [on("routine", again), on("notification", again), on("component", again)];
  return () =>
    offs.forEach((off) => {
      off();
    });
}

// Home: on a first run, what to do next; then health (the components that
// need attention, if any), the next fires, today's spend, unread inbox,
// latest runs.

import { get } from "./api.js";
import { dollars, fill, h, relative, status, table, when } from "./dom.js";
import { on, soon } from "./live.js";

export function home(main) {
  const health = h("section", { class: "card", "aria-labelledby": "h-health" });
  const next = h("section", { class: "card", "aria-labelledby": "h-next" });
  const spend = h("section", { class: "card", "aria-labelledby": "h-spend" });
  const unread = h("section", { class: "card", "aria-labelledby": "h-unread" });
  const runs = h("section", { "aria-labelledby": "h-runs" });
  const start = h("section", {
    class: "card first-run",
    "aria-labelledby": "h-start",
    testid: "first-run",
    hidden: true,
  });
  fill(main, h("h1", {}, "Home"), start, h("div", { class: "grid" }, health, next, spend, unread), runs);

  async function load() {
    const [st, list, cost, inbox, setup] = await Promise.all([
      get("/api/status"),
      get("/api/routines"),
      get("/ui/api/costs"),
      get("/api/notifications/inbox"),
      get("/ui/api/setup").catch(() => null),
    ]);
    drawStart(start, setup);
    const comps = Object.entries(st.components);
    const bad = comps.filter(([, c]) => !["running", "disabled"].includes(c.state));
    fill(
      health,
      h("h2", { id: "h-health" }, "Health"),
      h("p", { class: "big", testid: "health" }, bad.length ? `${bad.length} need attention` : "All running"),
      bad.length
        ? h(
            "ul",
            { class: "rows" },
            bad.map(([name, c]) =>
              h(
                "li",
                { testid: "component-row", "data-name": name },
                h("span", { class: "grow" }, name, c.last_error ? h("div", { class: "muted" }, c.last_error) : null),
                status(c.state),
              ),
            ),
          )
        : null,
      h("a", { href: "#/status" }, "Status and checks"),
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
                h("span", {}, when(r.next_fire_at, r.timezone)),
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

/** A first run's next steps, each done or not; hidden once all are done. */
function drawStart(section, setup) {
  if (!setup) return;
  const steps = [
    [
      setup.llm,
      "Set up the LLM",
      [
        "Add an ",
        h("code", {}, "[llm]"),
        " section to config.toml (",
        h("code", {}, "cairn init"),
        " writes one), then restart the daemon: the chat, routines' checks and jobs need it.",
      ],
    ],
    [
      setup.paired_devices > 0,
      "Pair a phone",
      ["Run ", h("code", {}, "cairn pair"), " on this machine and type its code on the phone, or send it to the bot."],
    ],
    [
      setup.routines > 0,
      "Make a first routine",
      [h("a", { href: "#/routines/new" }, "New routine"), ": a reminder, a daily check, a webhook."],
    ],
  ];
  section.hidden = steps.every(([done]) => done);
  fill(
    section,
    h("h2", { id: "h-start" }, "Getting started"),
    h(
      "ol",
      { class: "steps" },
      steps.map(([done, title, how]) =>
        h(
          "li",
          { "data-done": String(done), testid: "first-run-step" },
          h("strong", {}, done ? `✓ ${title}` : title),
          done ? h("span", { class: "muted" }, " (done)") : h("div", {}, how),
        ),
      ),
    ),
  );
}

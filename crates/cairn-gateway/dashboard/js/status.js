// Status: every component's state, restarts and last error; version, database, counts.

import { get } from "./api.js";
import { status as badge, fill, h, table, when } from "./dom.js";
import { on, soon } from "./live.js";

export function status(main) {
  const body = h("div");
  fill(main, h("h1", {}, "Status"), body);
  async function load() {
    const st = await get("/api/status");
    const comps = Object.entries(st.components);
    fill(
      body,
      h(
        "div",
        { class: "grid" },
        h(
          "section",
          { class: "card", "aria-label": "Daemon" },
          h("h2", {}, "Daemon"),
          h(
            "dl",
            {},
            h("dt", {}, "Version"),
            h("dd", {}, st.version),
            h("dt", {}, "Started"),
            h("dd", {}, when(st.started_at)),
            h("dt", {}, "Database"),
            h("dd", {}, st.database),
            h("dt", {}, "Model"),
            h("dd", {}, st.model || "no LLM configured"),
          ),
        ),
        h(
          "section",
          { class: "card", "aria-label": "Counts" },
          h("h2", {}, "Counts"),
          h(
            "dl",
            {},
            h("dt", {}, "Routines"),
            h(
              "dd",
              {},
              `${st.counts.routines} (${st.counts.enabled_routines} enabled, ${st.counts.paused_routines} paused)`,
            ),
            h("dt", {}, "Notifications waiting"),
            h("dd", {}, String(st.counts.pending_notifications)),
          ),
        ),
      ),
      h("h2", {}, "Components"),
      comps.length
        ? table(
            "Each component of the daemon",
            ["Component", "State", "Since", "Restarts", "Last error"],
            comps.map(([name, c]) =>
              h(
                "tr",
                { testid: "component-row", "data-name": name },
                h("td", {}, name),
                h("td", {}, badge(c.state)),
                h("td", {}, when(c.since)),
                h("td", {}, String(c.restarts)),
                h("td", {}, c.last_error || "—"),
              ),
            ),
          )
        : h("p", { class: "muted" }, "No components reported (the gateway runs outside a daemon)."),
      h("h2", {}, "Checks (cairn doctor)"),
      checks,
    );
  }
  const checks = h("div", { "aria-live": "polite" }, h("p", { class: "muted" }, "Running the checks…"));
  get("/ui/api/doctor")
    .then((d) =>
      fill(
        checks,
        table(
          d.ok ? "Every check passed or warned" : "Some checks failed",
          ["Check", "Result", "Detail"],
          d.checks.map((c) =>
            h(
              "tr",
              { testid: "doctor-check", "data-name": c.name },
              h("td", {}, c.name),
              h("td", {}, badge(c.status)),
              h("td", {}, h("span", { class: "pre-line" }, c.message)),
            ),
          ),
        ),
      ),
    )
    .catch((err) => fill(checks, h("p", { class: "muted" }, err.message)));
  load();
  const off = on("component", soon(load));
  return off;
}

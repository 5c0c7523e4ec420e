// Status: every component's state, restarts and last error; version, database, counts.

import { get } from "./api.js";
import { status as badge, fill, h, when } from "./dom.js";
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
            { class: "facts" },
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
            { class: "facts" },
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
      // One line each (compact on a phone); restarts and errors only when there are some.
      comps.length
        ? h(
            "ul",
            { class: "rows compact", "aria-label": "Each component of the daemon" },
            comps.map(([name, c]) =>
              h(
                "li",
                { testid: "component-row", "data-name": name },
                h(
                  "span",
                  { class: "grow" },
                  h("strong", {}, name),
                  h("span", { class: "muted small" }, ` since ${when(c.since)}`),
                  c.restarts ? h("span", { class: "muted small" }, ` · ${c.restarts} restarts`) : null,
                  // A disabled component's note says why, not what went wrong.
                  c.last_error
                    ? h("div", { class: c.state === "disabled" ? "muted small" : "bad" }, c.last_error)
                    : null,
                ),
                badge(c.state),
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
    .then((d) => {
      const warned = d.checks.filter((c) => c.status === "warn").length;
      const failed = d.checks.filter((c) => c.status === "fail").length;
      fill(
        checks,
        h(
          "p",
          { testid: "doctor-summary" },
          failed
            ? `${failed} of ${d.checks.length} checks failed.`
            : warned
              ? `Every check passed, ${warned === 1 ? "one with a warning" : `${warned} with warnings`}.`
              : `All ${d.checks.length} checks passed.`,
        ),
        h(
          "ul",
          { class: "rows compact", "aria-label": "The checks of cairn doctor" },
          d.checks.map((c) =>
            h(
              "li",
              { testid: "doctor-check", "data-name": c.name },
              badge(c.status),
              h(
                "span",
                { class: "grow" },
                h("strong", {}, c.name),
                h("div", { class: "pre-line muted small" }, c.message),
              ),
            ),
          ),
        ),
      );
    })
    .catch((err) => fill(checks, h("p", { class: "muted" }, err.message)));
  load();
  const off = on("component", soon(load));
  return off;
}

// Costs: 30 days per day and per model as inline SVG, today's limits, and
// each agent's line (today against its share, and its 30 days).

import { get } from "./api.js";
import { dollars, fill, h, table } from "./dom.js";

/** Money spent, or "price unknown" for calls that cost nothing (a model without a price). */
function spent(micros, calls) {
  return calls > 0 && !micros ? "price unknown" : dollars(micros);
}

function bars(label, points, testid, tick = (p) => p.label.slice(5), every = 7) {
  // Drawn about as wide as the screen shows it, so its labels stay legible on a phone.
  const narrow = matchMedia("(max-width: 40rem)").matches;
  const w = narrow ? 360 : 600,
    hgt = 160,
    pad = 20,
    max = Math.max(1, ...points.map((p) => p.value));
  const step = (w - pad) / Math.max(1, points.length);
  return h(
    "svg:svg",
    { class: "chart", viewBox: `0 0 ${w} ${hgt + 20}`, role: "img", "aria-label": label, testid },
    h("svg:title", {}, label),
    h("svg:line", { class: "axis", x1: pad, y1: hgt, x2: w, y2: hgt }),
    points.map((p, i) => {
      const bh = Math.round((p.value / max) * (hgt - 10));
      return h(
        "svg:rect",
        { class: "bar", x: pad + i * step + 1, y: hgt - bh, width: Math.max(1, step - 2), height: bh },
        h("svg:title", {}, `${p.label}: ${dollars(p.value)}`),
      );
    }),
    points.map((p, i) => (i % every === 0 ? h("svg:text", { x: pad + i * step, y: hgt + 14 }, tick(p)) : null)),
    h("svg:text", { x: 0, y: 10 }, dollars(max)),
  );
}

/** How far today's spending is into the daily budget, as a suffix. */
function budgetState(l) {
  if (l.exceeded) return " — reached: LLM calls are refused until 00:00 UTC";
  return l.warning ? " — 80% spent" : "";
}

/** Each agent's row: today's spend and share (the guard's lines, when the
 * daemon has one) beside its 30 days (the recorded rows). */
function agentRows(c) {
  const today = c.today.day;
  const rows = new Map();
  const row = (id) => {
    if (!rows.has(id)) rows.set(id, { id, today: 0, calls: 0, month: 0, share: null, exceeded: false });
    return rows.get(id);
  };
  for (const a of c.limits?.agents || []) {
    Object.assign(row(a.id), { share: a.daily_budget_cents, exceeded: a.exceeded });
  }
  for (const a of c.agents || []) {
    const r = row(a.agent);
    r.month += a.spent_micros;
    if (a.day === today) {
      r.today += a.spent_micros;
      r.calls += a.calls;
    }
  }
  return [...rows.values()];
}

function share(r) {
  if (r.share == null) return "Global budget only";
  const budget = r.share * 10000;
  if (r.exceeded) return `${dollars(budget)} — reached: its calls are refused until 00:00 UTC`;
  return `${dollars(budget)} (${Math.floor((r.today * 100) / budget)}% used)`;
}

function perAgent(c) {
  const rows = agentRows(c);
  if (!rows.length) return h("p", { class: "muted" }, "No calls recorded per agent yet.");
  return table(
    "Each agent's spend: today (UTC) against its share, and over the last 30 days",
    ["Agent", "Today", "Calls today", "Share", "Last 30 days"],
    rows.map((r) =>
      h(
        "tr",
        { testid: "agent-cost", "data-agent": r.id },
        h("td", {}, r.id),
        h("td", {}, spent(r.today, r.calls)),
        h("td", {}, String(r.calls)),
        h("td", {}, share(r)),
        h("td", {}, dollars(r.month)),
      ),
    ),
  );
}

export function costs(main) {
  const body = h("div");
  fill(main, h("h1", {}, "Costs"), body);
  get("/ui/api/costs").then((c) => {
    const l = c.limits;
    const total = c.days.reduce((s, d) => s + d.spent_micros, 0);
    const models = {};
    for (const m of c.models) {
      models[m.model] ||= { spent: 0, calls: 0 };
      models[m.model].spent += m.spent_micros;
      models[m.model].calls += m.calls;
    }
    fill(
      body,
      h(
        "div",
        { class: "grid" },
        h(
          "section",
          { class: "card", "aria-label": "Today" },
          h("h2", {}, "Today (UTC)"),
          h("p", { class: "big" }, dollars(c.today.spent_micros)),
          h(
            "p",
            {},
            l?.daily_budget_cents == null
              ? "No daily budget."
              : `Daily budget ${dollars(l.daily_budget_cents * 10000)}${budgetState(l)}`,
          ),
          h(
            "p",
            {},
            `${c.today.hourly_calls} calls in the last hour`,
            l?.hourly_limit == null ? " (no hourly limit)" : ` of ${l.hourly_limit} allowed`,
          ),
        ),
        h(
          "section",
          { class: "card", "aria-label": "30 days" },
          h("h2", {}, "Last 30 days"),
          h("p", { class: "big" }, dollars(total)),
        ),
      ),
      h("h2", {}, "Per day"),
      bars(
        "Spend per day over the last 30 days",
        c.days.map((d) => ({ label: d.day, value: d.spent_micros })),
        "cost-chart",
      ),
      h("h2", {}, "Per model"),
      Object.keys(models).length
        ? h(
            "div",
            {},
            bars(
              "Spend per model over the last 30 days",
              Object.entries(models).map(([m, v]) => ({ label: m, value: v.spent })),
              undefined,
              (p) => p.label.slice(0, 14),
              // A label under every bar only while they fit.
              Object.keys(models).length > 4 ? Math.ceil(Object.keys(models).length / 4) : 1,
            ),
            h(
              "ul",
              { class: "rows" },
              Object.entries(models).map(([m, v]) =>
                h(
                  "li",
                  {},
                  h("span", { class: "legend-swatch" }),
                  h("span", { class: "grow" }, m),
                  `${spent(v.spent, v.calls)} · ${v.calls} calls`,
                ),
              ),
            ),
          )
        : h("p", { class: "muted" }, "No calls recorded per model yet."),
      h("h2", {}, "Per agent"),
      perAgent(c),
    );
  });
}

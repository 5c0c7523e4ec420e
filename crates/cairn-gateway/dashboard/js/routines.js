// Routines: the list, one routine's page (runs, YAML, actions), the form.

import { del, get, post, put } from "./api.js";
import { fill, h, relative, status, table, toast, when } from "./dom.js";
import { on, soon } from "./live.js";
import { routineForm, webhookUrl } from "./routine_form.js";

const path = (r) => `/api/routines/${encodeURIComponent(r.id)}`;

export function routines(main, [name, mode]) {
  if (name === "new") return routineForm(main, null);
  if (name && mode === "edit") return routineForm(main, name);
  if (name) return detail(main, name);
  return list(main);
}

/** Enable/disable by writing the spec back with `enabled` flipped. */
async function toggle(r) {
  const full = await get(path(r));
  await put(path(r), { ...full.spec, enabled: !full.enabled });
  toast(`${r.name} ${full.enabled ? "disabled" : "enabled"}.`);
}

async function fire(r) {
  try {
    const fired = await post(`${path(r)}/fire`);
    toast(`${r.name} fired (run ${fired.run_id || ""}).`);
  } catch (err) {
    toast(`${r.name}: ${err.message}`);
  }
}

function actions(r, reload) {
  return h(
    "div",
    { class: "actions" },
    h(
      "button",
      { type: "button", testid: "routine-fire", onclick: () => fire(r), "aria-label": `Fire now: ${r.name}` },
      "Fire now",
    ),
    h(
      "button",
      {
        type: "button",
        class: "quiet",
        testid: "routine-toggle",
        "aria-pressed": String(r.enabled),
        "aria-label": `${r.enabled ? "Disable" : "Enable"}: ${r.name}`,
        onclick: async () => {
          await toggle(r);
          reload();
        },
      },
      r.enabled ? "Disable" : "Enable",
    ),
    h(
      "a",
      { class: "button quiet", href: `#/routines/${encodeURIComponent(r.name)}/edit`, "aria-label": `Edit: ${r.name}` },
      "Edit",
    ),
    h(
      "button",
      {
        type: "button",
        class: "danger",
        "aria-label": `Delete: ${r.name}`,
        onclick: async () => {
          if (!confirm(`Delete ${r.name} and its runs?`)) return;
          await del(path(r));
          toast(`${r.name} deleted.`, true);
          location.hash = "#/routines";
        },
      },
      "Delete",
    ),
  );
}

function list(main) {
  const body = h("div");
  fill(
    main,
    h("h1", {}, "Routines"),
    h("p", {}, h("a", { class: "button", href: "#/routines/new", testid: "routine-new" }, "New routine")),
    body,
  );
  async function load() {
    const all = await get("/api/routines");
    fill(
      body,
      all.length
        ? table(
            "Every routine: trigger, next fire, last status",
            ["Name", "Trigger", "Next fire", "Last status", "Enabled", "Actions"],
            all.map((r) =>
              h(
                "tr",
                { testid: "routine-row", "data-name": r.name },
                h(
                  "td",
                  {},
                  h("a", { href: `#/routines/${encodeURIComponent(r.name)}` }, r.name),
                  r.description ? h("div", { class: "muted" }, r.description) : null,
                ),
                h(
                  "td",
                  {},
                  r.schedule_description || r.trigger,
                  r.paused ? h("div", { class: "warn" }, "paused") : null,
                ),
                h("td", {}, when(r.next_fire_at, r.timezone), h("div", { class: "muted" }, relative(r.next_fire_at))),
                h("td", {}, status(r.last_status || "never run")),
                h("td", {}, r.enabled ? "yes" : "no"),
                h("td", {}, actions(r, load)),
              ),
            ),
          )
        : h("p", { class: "muted" }, "No routines yet."),
    );
  }
  load();
  return on("routine", soon(load));
}

function seconds(a, b) {
  if (!a || !b) return "—";
  const s = (new Date(b) - new Date(a)) / 1000;
  return s < 60 ? `${s.toFixed(1)} s` : `${Math.round(s / 60)} min`;
}

/** A webhook routine's address and a `curl` that calls it, signed when it has a secret. */
function webhook(r) {
  const t = r.spec?.trigger || {};
  const url = webhookUrl(t.path || r.name);
  const env = /^\$\{?([A-Za-z_][A-Za-z0-9_]*)\}?$/.exec(t.secret || "")?.[1];
  const curl = t.secret
    ? [
        `SECRET="$${env || "ROUTINE_SECRET"}"   # the routine's webhook secret${env ? "" : " (the one written in its file)"}`,
        `BODY='{"hello": "world"}'`,
        "TS=$(date +%s)",
        `SIG=$(printf '%s.%s' "$TS" "$BODY" | openssl dgst -sha256 -hmac "$SECRET" | sed 's/^.* //')`,
        `curl -X POST '${url}' -H 'Content-Type: application/json' \\`,
        `  -H "X-Cairn-Timestamp: $TS" -H "X-Signature-256: sha256=$SIG" -d "$BODY"`,
      ].join("\n")
    : [
        "# No secret: any API token of this daemon (cairn token create NAME) authenticates the call.",
        `curl -X POST '${url}' -H "Authorization: Bearer $CAIRN_TOKEN" \\`,
        `  -H 'Content-Type: application/json' -d '{"hello": "world"}'`,
      ].join("\n");
  const recipe = h(
    "pre",
    { tabindex: "0", testid: "routine-webhook-curl", "aria-label": "A curl command that calls it" },
    curl,
  );
  const copy = async () => {
    try {
      await navigator.clipboard.writeText(curl);
      toast("Copied.");
    } catch {
      // No clipboard (plain HTTP on another host): select it for Ctrl+C.
      getSelection().selectAllChildren(recipe);
      toast("Selected: press Ctrl+C to copy.");
    }
  };
  return h(
    "section",
    { "aria-labelledby": "h-hook" },
    h("h2", { id: "h-hook" }, "Webhook"),
    h("p", {}, "POST to ", h("code", { testid: "routine-webhook-url" }, url), " (the routine's name or id works too)."),
    h(
      "p",
      { class: "muted" },
      t.secret
        ? "Sign the body with the routine's secret: X-Signature-256 is sha256= and the hex HMAC-SHA256 of the timestamp, a dot and the body; X-Cairn-Timestamp is that Unix time (within 5 minutes, used once)."
        : "Without a secret, a call needs a bearer token.",
    ),
    recipe,
    h("p", {}, h("button", { type: "button", class: "quiet", onclick: copy }, "Copy the command")),
  );
}

function detail(main, name) {
  const head = h("div"),
    next = h("section", { "aria-labelledby": "h-next" }),
    hook = h("div"),
    runs = h("section", { "aria-labelledby": "h-runs" }),
    yaml = h("section", { "aria-labelledby": "h-yaml" });
  fill(main, h("p", {}, h("a", { href: "#/routines" }, "← Routines")), head, hook, next, runs, yaml);
  let routine = null;
  async function load() {
    try {
      routine = await get(`/api/routines/${encodeURIComponent(name)}`);
    } catch (err) {
      fill(head, h("h1", {}, name), h("p", { class: "bad" }, err.message));
      return;
    }
    const r = routine;
    fill(
      head,
      h("h1", {}, r.name),
      r.description ? h("p", {}, r.description) : null,
      h(
        "p",
        {},
        `${r.schedule_description || r.trigger} · ${r.action} · ${r.timezone} · `,
        r.enabled ? "enabled" : "disabled",
        r.paused ? h("span", { class: "warn" }, ` · paused by ${r.paused.by}`) : null,
      ),
      h("div", { testid: "routine-row", "data-name": r.name }, actions(r, load)),
    );
    fill(hook, r.trigger_type === "webhook" ? webhook(r) : null);
    const [history, fires, text] = await Promise.all([
      get(`${path(r)}/runs?limit=50`),
      ["cron", "once"].includes(r.trigger_type) ? get(`${path(r)}/next?count=5`).catch(() => null) : null,
      get(`/ui/api/routines/${encodeURIComponent(r.id)}/yaml`),
    ]);
    const times = fires || [];
    fill(
      next,
      h("h2", { id: "h-next" }, "Next fires"),
      times.length
        ? h(
            "ol",
            { class: "preview" },
            times.map((t) => h("li", {}, when(t.fires_at, r.timezone))),
          )
        : h("p", { class: "muted" }, r.next_fire_at ? when(r.next_fire_at, r.timezone) : "Not scheduled."),
    );
    fill(
      runs,
      h("h2", { id: "h-runs" }, "Runs"),
      history.length
        ? table(
            `The runs of ${r.name}, newest first`,
            ["Started", "Trigger", "Status", "Late", "Took", "Tokens", "Summary"],
            history.map((run) =>
              h(
                "tr",
                { testid: "run-row", "data-status": run.status },
                h("td", {}, when(run.started_at)),
                h("td", {}, run.trigger_type),
                h("td", {}, status(run.status)),
                h("td", {}, run.scheduled_for ? seconds(run.scheduled_for, run.started_at) : "—"),
                h("td", {}, seconds(run.started_at, run.completed_at)),
                h("td", {}, run.tokens_used ?? "—"),
                h("td", {}, run.result_summary || run.skip_reason || ""),
              ),
            ),
          )
        : h("p", { class: "muted" }, "No runs yet."),
    );
    fill(
      yaml,
      h("h2", { id: "h-yaml" }, "As YAML"),
      h("pre", { tabindex: "0", "aria-label": `${r.name} as a routine file` }, text),
    );
  }
  load();
  return on("routine", soon(load));
}

// Create or edit a routine: the schedule field previews its next five fires
// as you type (the same parser as `cairn schedule explain`); the action's
// fields follow its type; with several agents, a choice of the one that runs
// it; problems show next to their fields and in a summary a refused Save
// scrolls to. Built-in routines (the heartbeat's `system` action, a
// watcher's `watch`) open read-only but for what may change: enabled, notify.

import { get, post, put } from "./api.js";
import { fill, h, toast, when } from "./dom.js";

// The names docs/routines.md uses, each with what it does.
const ACTIONS = [
  ["notification", "notification: send a message"],
  ["lightweight", "lightweight: one call on the cheap model"],
  ["full_job", "full_job: an unattended turn of the agent"],
  ["tool_call", "tool_call: run one tool"],
];
const TRIGGERS = [
  ["cron", "cron: on a schedule"],
  ["once", "once: at one time"],
  ["event", "event: a chat message matching"],
  ["webhook", "webhook: a signed HTTP call"],
  ["manual", "manual: by hand only"],
];
/** Actions the form does not write: their routines are built in. */
const BUILT_IN = ["system", "watch"];
const HINTS = {
  cron: "A cron expression or words: every weekday at 9am, every 15 minutes, 0 9 * * 1-5.",
  once: "A date and time (2026-03-09 09:00) or a delay (in 2 hours).",
};

/** The agents to choose from: main first, then the others; one the routine names that is gone stays listed. */
function agentOptions(agents, named) {
  const options = agents.map((x) => [x.id, x.name && x.name !== x.id ? `${x.id} (${x.name})` : x.id]);
  if (!options.some(([id]) => id === "main")) options.unshift(["main", "main"]);
  if (named && !options.some(([id]) => id === named)) options.push([named, `${named} (not configured)`]);
  return options;
}

let uid = 0;
function field(label, input, path, help) {
  if (!input.id) input.id = `f${++uid}`;
  const id = input.id;
  const error = h("p", { class: "field-error", id: `${id}-error`, "data-path": path, "aria-live": "polite" });
  input.setAttribute("aria-describedby", [help ? `${id}-help` : null, `${id}-error`].filter(Boolean).join(" "));
  return h(
    "div",
    { class: "field", "data-field": path },
    h("label", { for: id }, label),
    input,
    help ? h("p", { class: "muted", id: `${id}-help` }, help) : null,
    error,
  );
}
const input = (attrs) => h("input", { type: "text", ...attrs });
const select = (attrs, options, value) =>
  h(
    "select",
    attrs,
    options.map(([v, t]) => h("option", { value: v, selected: v === value }, t)),
  );

export function routineForm(main, name) {
  const body = h("div");
  fill(
    main,
    h("p", {}, h("a", { href: "#/routines" }, "← Routines")),
    h("h1", {}, name ? `Edit ${name}` : "New routine"),
    body,
  );
  let cancelled = false;
  Promise.all([
    name ? get(`/api/routines/${encodeURIComponent(name)}`) : Promise.resolve(null),
    get("/ui/api/routines/agents").then(
      (x) => x.agents,
      () => [],
    ),
  ]).then(([r, agents]) => {
    if (!cancelled) draw(body, r, agents);
  });
  return () => {
    cancelled = true;
  };
}

/** Where a webhook routine is called: its path, or its name. */
export function webhookUrl(path) {
  const encoded = String(path)
    .replace(/^\/+|\/+$/g, "")
    .split("/")
    .map(encodeURIComponent)
    .join("/");
  return `${location.origin}/hooks/routine/${encoded}`;
}

/** Where a refused Save lists its problems (focused when shown). */
function errorSummary() {
  return h("div", {
    class: "error-summary",
    testid: "routine-error",
    tabindex: "-1",
    role: "alert",
    "aria-labelledby": "routine-error-title",
    hidden: true,
  });
}

/** A built-in routine: what it is, read-only, and the two things that may change. */
function drawBuiltIn(body, existing) {
  const spec = existing.spec;
  const n = spec.notify || {};
  const f = {
    enabled: h("input", {
      type: "checkbox",
      name: "enabled",
      testid: "routine-enabled",
      checked: spec.enabled ?? true,
    }),
    channel: input({ name: "channel", value: n.channel || "", placeholder: "the default channel" }),
    onSuccess: h("input", { type: "checkbox", name: "on_success", checked: n.on_success }),
    onFailure: h("input", { type: "checkbox", name: "on_failure", checked: n.on_failure ?? true }),
  };
  const box = (label, el) => h("label", { class: "check" }, el, label);
  const summary = errorSummary();
  const what = spec.action.type === "system" ? `cairn's own ${spec.action.task} task` : "a watcher's check";
  fill(
    body,
    h(
      "form",
      {
        novalidate: true,
        onsubmit: async (e) => {
          e.preventDefault();
          const notify = { ...n, on_success: f.onSuccess.checked, on_failure: f.onFailure.checked };
          if (f.channel.value.trim()) notify.channel = f.channel.value.trim();
          else delete notify.channel;
          try {
            const saved = await put(`/api/routines/${encodeURIComponent(existing.id)}`, {
              ...spec,
              enabled: f.enabled.checked,
              notify,
            });
            toast(`${saved.name} saved.`, true);
            location.hash = `#/routines/${encodeURIComponent(saved.name)}`;
          } catch (err) {
            fill(summary, h("h2", { id: "routine-error-title" }, "Not saved"), h("p", {}, err.message));
            summary.hidden = false;
            summary.scrollIntoView({ block: "start" });
            summary.focus({ preventScroll: true });
          }
        },
      },
      summary,
      h(
        "p",
        { class: "card", testid: "routine-builtin" },
        `${spec.name} is built in: it runs ${what}, and its trigger and action are not edited here. `,
        "You can turn it on or off and choose how it tells you about its runs, until the daemon's next start: ",
        "it writes its settings in config.toml (such as heartbeat.enabled) over the stored routine then.",
      ),
      h(
        "dl",
        { class: "facts" },
        h("dt", {}, "Trigger"),
        h("dd", {}, existing.schedule_description || existing.trigger),
        h("dt", {}, "Action"),
        h("dd", {}, spec.action.type),
      ),
      h(
        "fieldset",
        {},
        h("legend", {}, "What you can change"),
        box(" Enabled", f.enabled),
        field("Notify channel", f.channel, "notify.channel"),
        box(" Notify on success", f.onSuccess),
        box(" Notify on failure", f.onFailure),
      ),
      h("p", {}, h("button", { type: "submit", testid: "routine-save" }, "Save")),
    ),
  );
}

function draw(body, existing, agents) {
  if (existing && BUILT_IN.includes(existing.spec?.action?.type)) {
    drawBuiltIn(body, existing);
    return;
  }
  const spec = existing?.spec || { trigger: { type: "cron" }, action: { type: "notification" } };
  const t = spec.trigger || {},
    a = spec.action || {},
    g = spec.guardrails || {},
    n = spec.notify || {};
  const f = {
    name: input({ testid: "routine-name", name: "name", required: true, value: spec.name || "", autocomplete: "off" }),
    description: input({ name: "description", value: spec.description || "" }),
    trigger: select({ name: "trigger" }, TRIGGERS, t.type || "cron"),
    schedule: input({
      testid: "routine-schedule",
      name: "schedule",
      value: t.schedule || t.at || "",
      placeholder: "every day at 9am, or 0 9 * * *",
      autocomplete: "off",
    }),
    pattern: input({ name: "pattern", value: t.pattern || "" }),
    timezone: input({ name: "timezone", value: spec.timezone || "", placeholder: "the daemon's zone" }),
    action: select({ testid: "routine-action-type", name: "action" }, ACTIONS, a.type || "notification"),
    agent: select({ testid: "routine-agent", name: "agent" }, agentOptions(agents, spec.agent), spec.agent || "main"),
    message: h("textarea", { testid: "routine-message", name: "message" }, a.message || ""),
    title: input({ name: "title", value: a.title || "" }),
    prompt: h("textarea", { testid: "routine-prompt", name: "prompt" }, a.prompt || ""),
    jobTitle: input({ name: "job-title", value: a.type === "full_job" ? a.title : "" }),
    jobDescription: h("textarea", { name: "job-description" }, a.description || ""),
    tool: input({ name: "tool", value: a.tool || "" }),
    params: h("textarea", { name: "params" }, a.params ? JSON.stringify(a.params, null, 2) : "{}"),
    cooldown: input({ name: "cooldown", value: g.cooldown ?? "", placeholder: "e.g. 5m" }),
    maxConcurrent: h("input", { type: "number", min: 1, name: "max_concurrent", value: g.max_concurrent ?? "" }),
    channel: input({ name: "channel", value: n.channel || "", placeholder: "the default channel" }),
    onSuccess: h("input", { type: "checkbox", name: "on_success", checked: n.on_success }),
    onFailure: h("input", { type: "checkbox", name: "on_failure", checked: n.on_failure ?? true }),
    enabled: h("input", { type: "checkbox", name: "enabled", checked: spec.enabled ?? true }),
  };
  const preview = h("div", { testid: "routine-schedule-preview", "aria-live": "polite", id: "schedule-preview" });
  // A refused Save's problems, each linked to its field; focused when shown.
  const summary = errorSummary();
  const box = (label, el) => h("label", { class: "check" }, el, label);

  const whenField = field("Schedule", f.schedule, "trigger.schedule", HINTS.cron);
  const hook = h("div", { class: "muted", testid: "routine-webhook-url" });
  const pattern = field("Message pattern (regular expression)", f.pattern, "trigger.pattern");
  const byAction = {
    notification: h("div", {}, field("Message", f.message, "action.message"), field("Title", f.title, "action.title")),
    lightweight: field(
      "Prompt",
      f.prompt,
      "action.prompt",
      "A short question for the cheap model; it notifies when the answer needs attention.",
    ),
    full_job: h(
      "div",
      {},
      field("Job title", f.jobTitle, "action.title"),
      field("What to do", f.jobDescription, "action.description"),
    ),
    tool_call: h(
      "div",
      {},
      field("Tool", f.tool, "action.tool"),
      field("Parameters (JSON)", f.params, "action.params"),
    ),
  };
  const actionFields = h("div");

  function drawHook() {
    hook.hidden = f.trigger.value !== "webhook";
    const hookName = (t.type === "webhook" && t.path) || f.name.value.trim() || "NAME";
    fill(hook, "Called at ", h("code", {}, webhookUrl(hookName)), "; once saved, its page shows how to sign a call.");
  }

  function sync() {
    const tt = f.trigger.value;
    whenField.hidden = !["cron", "once"].includes(tt);
    whenField.querySelector("label").textContent = tt === "once" ? "When" : "Schedule";
    const help = whenField.querySelector(".muted");
    if (help) help.textContent = HINTS[tt] || "";
    pattern.hidden = tt !== "event";
    drawHook();
    preview.hidden = whenField.hidden;
    fill(actionFields, byAction[f.action.value]);
  }

  let timer = null,
    asked = 0;
  function explain() {
    clearTimeout(timer);
    timer = setTimeout(async () => {
      const expr = f.schedule.value.trim();
      const mine = ++asked;
      if (!expr) {
        fill(preview);
        return;
      }
      const q = new URLSearchParams({ expr, count: "5" });
      if (f.timezone.value.trim()) q.set("tz", f.timezone.value.trim());
      try {
        const x = await get(`/ui/api/schedule?${q}`);
        if (mine !== asked) return;
        fill(
          preview,
          h("p", {}, x.description.includes(x.timezone) ? x.description : `${x.description} (${x.timezone})`),
          h(
            "ol",
            { class: "preview", "aria-label": "Next five fires" },
            x.next.map((t) => h("li", {}, when(t.at, x.timezone))),
          ),
        );
      } catch (err) {
        if (mine === asked) fill(preview, h("p", { class: "field-error" }, err.message));
      }
    }, 200);
  }

  function specOf() {
    const out = { ...spec, name: f.name.value.trim(), enabled: f.enabled.checked };
    if (f.agent.value && f.agent.value !== "main") out.agent = f.agent.value;
    else delete out.agent;
    if (f.description.value.trim()) out.description = f.description.value.trim();
    else delete out.description;
    if (f.timezone.value.trim()) out.timezone = f.timezone.value.trim();
    else delete out.timezone;
    const tt = f.trigger.value;
    out.trigger =
      tt === "cron"
        ? { type: tt, schedule: f.schedule.value.trim() }
        : tt === "once"
          ? { type: tt, at: f.schedule.value.trim() }
          : tt === "event"
            ? { ...(t.type === "event" ? t : {}), type: tt, pattern: f.pattern.value }
            : tt === "webhook"
              ? { ...(t.type === "webhook" ? t : {}), type: tt }
              : { type: tt };
    const at = f.action.value;
    const keep = a.type === at ? a : {};
    if (at === "notification")
      out.action = {
        type: at,
        message: f.message.value,
        ...(f.title.value.trim() ? { title: f.title.value.trim() } : {}),
      };
    if (at === "lightweight") out.action = { ...keep, type: at, prompt: f.prompt.value };
    if (at === "full_job")
      out.action = { ...keep, type: at, title: f.jobTitle.value, description: f.jobDescription.value };
    if (at === "tool_call") {
      let params;
      try {
        params = JSON.parse(f.params.value || "{}");
      } catch (e) {
        throw Object.assign(new Error(`not JSON: ${e.message}`), { path: "action.params" });
      }
      out.action = { ...keep, type: at, tool: f.tool.value.trim(), params };
    }
    const guard = { ...(spec.guardrails || {}) };
    if (f.cooldown.value.trim()) guard.cooldown = f.cooldown.value.trim();
    else delete guard.cooldown;
    if (f.maxConcurrent.value) guard.max_concurrent = Number(f.maxConcurrent.value);
    else delete guard.max_concurrent;
    out.guardrails = guard;
    const notify = { ...(spec.notify || {}), on_success: f.onSuccess.checked, on_failure: f.onFailure.checked };
    if (f.channel.value.trim()) notify.channel = f.channel.value.trim();
    else delete notify.channel;
    out.notify = notify;
    return out;
  }

  /** Each problem beside its field, and all in the summary, which is scrolled to and focused. */
  function showProblems(problems) {
    for (const el of body.querySelectorAll(".field-error[data-path]")) el.textContent = "";
    const items = [];
    for (const p of problems) {
      const path = p.path || "";
      const el = [...body.querySelectorAll(".field-error[data-path]")].find(
        (e) =>
          !e.closest("[hidden]") &&
          (path === e.dataset.path || path.startsWith(`${e.dataset.path}.`) || path.startsWith(`${e.dataset.path}[`)),
      );
      const control = el && document.getElementById(el.id.replace(/-error$/, ""));
      if (el) el.textContent = p.message;
      // The preview said the same of the schedule: once is enough.
      if (path.startsWith("trigger.")) fill(preview);
      const label = el?.closest(".field")?.querySelector("label")?.textContent;
      items.push(
        h(
          "li",
          {},
          control
            ? h(
                "a",
                {
                  href: `#${control.id}`,
                  onclick: (e) => {
                    // Not a route: the hash stays the page's.
                    e.preventDefault();
                    control.focus();
                  },
                },
                `${label}: ${p.message}`,
              )
            : path
              ? `${path}: ${p.message}`
              : p.message,
        ),
      );
    }
    fill(
      summary,
      h(
        "h2",
        { id: "routine-error-title" },
        `Not saved: ${items.length === 1 ? "one problem" : `${items.length} problems`}`,
      ),
      h("ul", {}, items),
    );
    summary.hidden = false;
    summary.scrollIntoView({ block: "start" });
    summary.focus({ preventScroll: true });
  }

  async function save(e) {
    e.preventDefault();
    let out;
    try {
      out = specOf();
    } catch (err) {
      showProblems([{ path: err.path, message: err.message }]);
      return;
    }
    try {
      const saved = existing
        ? await put(`/api/routines/${encodeURIComponent(existing.id)}`, out)
        : await post("/api/routines", out);
      toast(`${saved.name} saved.`, true);
      location.hash = `#/routines/${encodeURIComponent(saved.name)}`;
    } catch (err) {
      showProblems(err.details?.problems || [{ path: "", message: err.message }]);
    }
  }

  f.trigger.addEventListener("change", () => {
    sync();
    explain();
  });
  f.action.addEventListener("change", sync);
  f.name.addEventListener("input", drawHook);
  f.schedule.addEventListener("input", explain);
  f.timezone.addEventListener("input", explain);
  // A problem shown after a save is about the value then: editing the field clears it.
  const clearOwn = (e) => {
    const own = e.target.id && document.getElementById(`${e.target.id}-error`);
    if (own) own.textContent = "";
  };
  body.addEventListener("input", clearOwn);
  body.addEventListener("change", clearOwn);
  fill(
    body,
    h(
      "form",
      { onsubmit: save, novalidate: true },
      summary,
      field("Name", f.name, "name"),
      field("Description", f.description, "description"),
      h(
        "fieldset",
        {},
        h("legend", {}, "When"),
        field("Trigger", f.trigger, "trigger.type"),
        whenField,
        preview,
        hook,
        pattern,
        field("Time zone", f.timezone, "timezone"),
      ),
      h(
        "fieldset",
        {},
        h("legend", {}, "What"),
        // Only a choice when there is one to make (or the routine names another agent).
        f.agent.options.length > 1
          ? field("Agent", f.agent, "agent", "The agent that runs it: its model, tools, workspace and memory.")
          : null,
        field("Action", f.action, "action.type"),
        actionFields,
      ),
      h(
        "fieldset",
        {},
        h("legend", {}, "Guardrails and notifications"),
        field("Cooldown", f.cooldown, "guardrails.cooldown"),
        field("At most this many runs at once", f.maxConcurrent, "guardrails.max_concurrent"),
        field("Notify channel", f.channel, "notify.channel"),
        box(" Notify on success", f.onSuccess),
        box(" Notify on failure", f.onFailure),
        box(" Enabled", f.enabled),
      ),
      h("p", {}, h("button", { type: "submit", testid: "routine-save" }, "Save")),
    ),
  );
  sync();
  explain();
}

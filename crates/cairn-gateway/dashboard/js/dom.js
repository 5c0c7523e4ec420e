// Building elements without innerHTML (text is always text), and formatting.

/** h("tag", {attrs}, ...children): an element; `on*` attributes are listeners. */
export function h(tag, attrs = {}, ...children) {
  const svg = tag.startsWith("svg:");
  const el = svg ? document.createElementNS("http://www.w3.org/2000/svg", tag.slice(4)) : document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (value === undefined || value === null || value === false) continue;
    if (key.startsWith("on") && typeof value === "function") el.addEventListener(key.slice(2), value);
    else if (key === "testid") el.setAttribute("data-testid", value);
    else if (key === "text") el.textContent = value;
    else el.setAttribute(key, value === true ? "" : String(value));
  }
  append(el, children);
  return el;
}

function append(el, children) {
  for (const child of children.flat(Infinity)) {
    if (child === undefined || child === null || child === false) continue;
    el.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
}

/** Replaces the children of `el`. */
export function fill(el, ...children) {
  el.replaceChildren();
  append(el, children);
  return el;
}

/** A wrapped table: headers and rows of cells (each row may be a <tr>). */
export function table(caption, headers, rows) {
  // Each cell names its column, for the stacked layout on narrow screens.
  for (const row of rows)
    [...row.children].forEach((td, i) => {
      if (headers[i]) td.setAttribute("data-label", headers[i]);
    });
  return h(
    "div",
    { class: "table-wrap" },
    h(
      "table",
      {},
      h("caption", { class: "muted" }, caption),
      h(
        "thead",
        {},
        h(
          "tr",
          {},
          headers.map((t) => h("th", { scope: "col" }, t)),
        ),
      ),
      h("tbody", {}, rows),
    ),
  );
}

/** The browser's zone. */
export const zone = Intl.DateTimeFormat().resolvedOptions().timeZone;

/**
 * An instant in one format on every page (`Mon, Mar 9, 2026, 09:00`): in
 * the browser's zone, or in `tz` (a routine's) followed by its name when
 * that differs from the browser's.
 */
export function when(iso, tz) {
  if (!iso) return "—";
  const other = tz && tz !== zone;
  let text;
  try {
    text = new Date(iso).toLocaleString(undefined, {
      weekday: "short",
      year: "numeric",
      month: "short",
      day: "numeric",
      hour: "2-digit",
      minute: "2-digit",
      hourCycle: "h23",
      timeZone: other ? tz : zone,
    });
  } catch {
    // A zone the browser does not know: the browser's own, said so.
    return `${when(iso)} (${zone})`;
  }
  return other ? `${text} (${tz})` : text;
}

/** "in 3 h", "5 min ago". */
export function relative(iso) {
  if (!iso) return "";
  const secs = Math.round((new Date(iso) - Date.now()) / 1000);
  const abs = Math.abs(secs);
  const [n, unit] =
    abs < 90
      ? [abs, "s"]
      : abs < 5400
        ? [Math.round(abs / 60), "min"]
        : abs < 129600
          ? [Math.round(abs / 3600), "h"]
          : [Math.round(abs / 86400), "d"];
  return secs >= 0 ? `in ${n} ${unit}` : `${n} ${unit} ago`;
}

/** Micro-dollars as dollars. */
export function dollars(micros) {
  const d = (micros || 0) / 1e6;
  return `$${d >= 1 ? d.toFixed(2) : d.toFixed(4)}`;
}

/** A status word with its colour class. */
export function status(word) {
  const cls = /^(ok|succeeded|success|delivered|running|healthy|ready|completed|read)$/.test(word)
    ? "ok"
    : /^(failed|fail|error|interrupted|stuck|gave_up|given_up|crashed|down)$/.test(word)
      ? "bad"
      : "warn";
  return h("span", { class: `badge ${cls}` }, word || "—");
}

/** Shows a short message in the live region; `keep`: it survives the next page change (a save that opens its result). */
export function toast(message, keep = false) {
  toast.keep = keep;
  const el = document.getElementById("toast");
  el.textContent = message;
  clearTimeout(toast.timer);
  toast.timer = setTimeout(() => {
    el.textContent = "";
  }, 5000);
}

/** Clears the live region (a page change: its messages were about the page left). */
export function clearToast() {
  if (toast.keep) {
    toast.keep = false;
    return;
  }
  clearTimeout(toast.timer);
  document.getElementById("toast").textContent = "";
}

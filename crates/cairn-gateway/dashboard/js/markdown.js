// An answer's Markdown, rendered by the server into a node tree (a string is
// text; {t, c, href?, start?, lang?, align?} an element), turned into
// elements here: only the tags below, text always as text, links only to
// http, https and mailto, opening without the page as their opener.

const TAGS = new Set([
  "p",
  "h2",
  "h3",
  "h4",
  "h5",
  "h6",
  "strong",
  "em",
  "del",
  "code",
  "pre",
  "blockquote",
  "ul",
  "ol",
  "li",
  "a",
  "span",
  "br",
  "hr",
  "table",
  "thead",
  "tbody",
  "tr",
  "th",
  "td",
]);
const SCHEMES = new Set(["http:", "https:", "mailto:"]);

function link(href) {
  try {
    return SCHEMES.has(new URL(href).protocol) ? href : null;
  } catch {
    return null;
  }
}

function node(n) {
  if (typeof n === "string") return document.createTextNode(n);
  const tag = TAGS.has(n?.t) ? n.t : "span";
  const href = tag === "a" ? link(n.href) : null;
  const el = document.createElement(tag === "a" && !href ? "span" : tag);
  if (href) {
    el.setAttribute("href", href);
    el.setAttribute("rel", "noopener noreferrer");
    el.setAttribute("target", "_blank");
  }
  if (tag === "ol" && Number.isInteger(n.start)) el.setAttribute("start", String(n.start));
  if (tag === "code" && typeof n.lang === "string") el.dataset.lang = n.lang;
  if ((tag === "th" || tag === "td") && ["left", "center", "right"].includes(n.align)) el.style.textAlign = n.align;
  for (const child of Array.isArray(n.c) ? n.c : []) el.append(node(child));
  return el;
}

/** The nodes as a fragment of elements. */
export function markdown(nodes) {
  const out = document.createDocumentFragment();
  for (const n of Array.isArray(nodes) ? nodes : []) out.append(node(n));
  return out;
}

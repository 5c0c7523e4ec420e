// Memory: search (keyword, vector or both, with scores), add, forget.

import { del, get, post } from "./api.js";
import { fill, h, toast } from "./dom.js";

export function memory(main) {
  const query = h("input", {
    id: "memory-q",
    type: "search",
    testid: "memory-search",
    name: "q",
    placeholder: "Search memories",
  });
  const results = h("div", { "aria-live": "polite" });
  const text = h("textarea", { id: "memory-text", name: "text", required: true });
  const category = h(
    "select",
    { id: "memory-category", name: "category" },
    ["core", "daily", "conversation", "custom"].map((c) => h("option", { value: c }, c)),
  );
  const key = h("input", { id: "memory-key", name: "key", type: "text" });
  fill(
    main,
    h("h1", {}, "Memory"),
    h(
      "form",
      {
        role: "search",
        onsubmit: (e) => {
          e.preventDefault();
          search();
        },
      },
      h("label", { for: "memory-q" }, "Search"),
      h("div", { class: "row" }, query, h("button", { type: "submit" }, "Search")),
    ),
    results,
    h("h2", {}, "Remember something"),
    h(
      "form",
      {
        onsubmit: async (e) => {
          e.preventDefault();
          try {
            await post("/ui/api/memory", { text: text.value, category: category.value, key: key.value });
            text.value = "";
            key.value = "";
            toast("Remembered.");
            search();
          } catch (err) {
            toast(err.message);
          }
        },
      },
      h("label", { for: "memory-text" }, "Text"),
      text,
      h("label", { for: "memory-category" }, "Category"),
      category,
      h("label", { for: "memory-key" }, "Key (optional: the same key replaces the text)"),
      key,
      h("p", {}, h("button", { type: "submit", id: "memory-add" }, "Add")),
    ),
  );

  async function search() {
    const q = query.value.trim();
    const found = await get(`/ui/api/memory${q ? `?q=${encodeURIComponent(q)}` : ""}`);
    const score = (x) => (x == null ? "—" : x.toFixed(2));
    fill(
      results,
      h(
        "p",
        { class: "muted" },
        q
          ? `Mode: ${found.mode}${found.note ? ` (${found.note})` : ""} · ${found.hits.length} found`
          : "Latest memories",
      ),
      found.hits.length
        ? null
        : h(
            "p",
            { testid: "memory-empty" },
            q
              ? `Nothing remembered matches “${q}”.`
              : "No memories yet. Add one above, or tell the agent in the chat to remember something.",
          ),
      h(
        "ul",
        { class: "rows" },
        found.hits.map((m) =>
          h(
            "li",
            { testid: "memory-result", "data-matched-by": m.matched_by || "" },
            h(
              "div",
              { class: "grow" },
              m.key ? h("strong", {}, `${m.key}: `) : null,
              m.content,
              h("div", { class: "muted" }, `${m.category} · ${m.source}`),
            ),
            m.matched_by
              ? h(
                  "span",
                  {},
                  h("span", { class: "badge" }, m.matched_by),
                  ` score ${score(m.score)} (keyword ${score(m.keyword_score)}, vector ${score(m.vector_score)})`,
                )
              : null,
            h(
              "button",
              {
                type: "button",
                class: "danger",
                "aria-label": `Forget: ${m.key || m.content.slice(0, 40)}`,
                onclick: async () => {
                  await del(`/ui/api/memory/${m.id}`);
                  toast("Forgotten.");
                  search();
                },
              },
              "Forget",
            ),
          ),
        ),
      ),
    );
  }
  search();
}

//! An answer's Markdown as a small JSON node tree the dashboard turns into
//! elements with `textContent` (never `innerHTML`): a node is a string
//! (text) or `{"t": TAG, "c": [children]}` with, for some tags, one
//! attribute (`href` of `a`, `start` of `ol`, `lang` of a fenced `code`,
//! `align` of `th`/`td`).
//!
//! Safe by construction: the tags are a fixed list (headings, emphasis,
//! lists, links, code, tables, block quotes, rules, breaks); raw HTML in
//! the text stays text; a link keeps its target only when it is `http`,
//! `https` or `mailto` (otherwise its text is a `span`); an image is a
//! link to its address with its alt text (the page loads nothing).
//! Headings start at `h2`, under the page's own `h1`.

use pulldown_cmark::{Alignment, CodeBlockKind, Event, HeadingLevel, Options, Parser, Tag};
use serde_json::{Map, Value, json};

/// Nesting deeper than this is flattened into its parent (a wall of `>`
/// draws no deeper than this).
const MAX_DEPTH: usize = 32;

/// Whether `href` may be a link's target.
pub fn safe_href(href: &str) -> bool {
    let lower = href.trim_start().to_ascii_lowercase();
    ["http://", "https://", "mailto:"]
        .iter()
        .any(|scheme| lower.starts_with(scheme))
}

/// One open element.
struct Open {
    tag: &'static str,
    attrs: Map<String, Value>,
    children: Vec<Value>,
}

impl Open {
    fn new(tag: &'static str) -> Self {
        Open {
            tag,
            attrs: Map::new(),
            children: Vec::new(),
        }
    }

    fn with(mut self, key: &str, value: Value) -> Self {
        self.attrs.insert(key.to_string(), value);
        self
    }

    fn into_value(self) -> Value {
        let mut node = self.attrs;
        node.insert("t".into(), self.tag.into());
        node.insert("c".into(), Value::Array(self.children));
        Value::Object(node)
    }

    /// Appends text, joined to the text before it.
    fn text(&mut self, text: &str) {
        if let Some(Value::String(last)) = self.children.last_mut() {
            last.push_str(text);
        } else {
            self.children.push(Value::String(text.to_string()));
        }
    }
}

/// The builder: the open elements (the root first), whether each `Start`
/// opened one, and the table's column alignments.
struct Tree {
    open: Vec<Open>,
    pushed: Vec<bool>,
    aligns: Vec<Alignment>,
    cell: usize,
    in_head: bool,
}

impl Tree {
    fn top(&mut self) -> &mut Open {
        // The root is never popped.
        let last = self.open.len() - 1;
        &mut self.open[last]
    }

    fn push(&mut self, element: Open) {
        let room = self.open.len() <= MAX_DEPTH;
        if room {
            self.open.push(element);
        }
        self.pushed.push(room);
    }

    fn pop(&mut self) {
        if self.pushed.pop() == Some(true) && self.open.len() > 1 {
            let done = self.open.pop().map(Open::into_value);
            if let Some(done) = done {
                self.top().children.push(done);
            }
        }
    }

    /// An element with no children (`br`, `hr`).
    fn leaf(&mut self, tag: &'static str) {
        let leaf = Open::new(tag).into_value();
        self.top().children.push(leaf);
    }

    fn start(&mut self, tag: Tag<'_>) {
        let element = match tag {
            Tag::Paragraph | Tag::HtmlBlock => Open::new("p"),
            Tag::Heading { level, .. } => Open::new(match level {
                HeadingLevel::H1 => "h2",
                HeadingLevel::H2 => "h3",
                HeadingLevel::H3 => "h4",
                HeadingLevel::H4 => "h5",
                _ => "h6",
            }),
            Tag::BlockQuote(_) => Open::new("blockquote"),
            Tag::CodeBlock(kind) => {
                // `pre` holds one `code`: opened here, closed by the block's end.
                self.push(Open::new("pre"));
                let code = Open::new("code");
                match kind {
                    CodeBlockKind::Fenced(info) => {
                        match info.split_whitespace().next().filter(|l| !l.is_empty()) {
                            Some(lang) => code.with("lang", lang.into()),
                            None => code,
                        }
                    }
                    CodeBlockKind::Indented => code,
                }
            }
            Tag::List(Some(start)) if start != 1 => Open::new("ol").with("start", start.into()),
            Tag::List(Some(_)) => Open::new("ol"),
            Tag::List(None) => Open::new("ul"),
            Tag::Item => Open::new("li"),
            Tag::Table(aligns) => {
                self.aligns = aligns;
                Open::new("table")
            }
            Tag::TableHead => {
                self.in_head = true;
                self.cell = 0;
                self.push(Open::new("thead"));
                Open::new("tr")
            }
            Tag::TableRow => {
                self.cell = 0;
                Open::new("tr")
            }
            Tag::TableCell => {
                let cell = Open::new(if self.in_head { "th" } else { "td" });
                let align = match self.aligns.get(self.cell) {
                    Some(Alignment::Left) => Some("left"),
                    Some(Alignment::Center) => Some("center"),
                    Some(Alignment::Right) => Some("right"),
                    _ => None,
                };
                self.cell += 1;
                match align {
                    Some(a) => cell.with("align", a.into()),
                    None => cell,
                }
            }
            Tag::Emphasis => Open::new("em"),
            Tag::Strong => Open::new("strong"),
            Tag::Strikethrough => Open::new("del"),
            Tag::Link { dest_url, .. } | Tag::Image { dest_url, .. } => {
                if safe_href(&dest_url) {
                    Open::new("a").with("href", dest_url.trim().into())
                } else {
                    Open::new("span")
                }
            }
            // Not enabled by the options, but harmless: their content as text.
            _ => Open::new("span"),
        };
        self.push(element);
    }

    fn end(&mut self, was: &pulldown_cmark::TagEnd) {
        use pulldown_cmark::TagEnd;
        match was {
            TagEnd::CodeBlock => {
                self.pop();
                self.pop();
            }
            TagEnd::TableHead => {
                self.pop();
                self.pop();
                self.in_head = false;
                self.push(Open::new("tbody"));
            }
            TagEnd::Table => {
                // The body opened after the head.
                self.pop();
                self.pop();
            }
            _ => self.pop(),
        }
    }
}

/// `text`'s Markdown as a list of nodes (see the module documentation).
pub fn render(text: &str) -> Vec<Value> {
    let options =
        Options::ENABLE_TABLES | Options::ENABLE_STRIKETHROUGH | Options::ENABLE_TASKLISTS;
    let mut tree = Tree {
        open: vec![Open::new("root")],
        pushed: Vec::new(),
        aligns: Vec::new(),
        cell: 0,
        in_head: false,
    };
    for event in Parser::new_ext(text, options) {
        match event {
            Event::Start(tag) => tree.start(tag),
            Event::End(tag) => tree.end(&tag),
            // Raw HTML is text, shown as written.
            Event::Text(t) | Event::Html(t) | Event::InlineHtml(t) => tree.top().text(&t),
            Event::Code(code) => {
                let mut element = Open::new("code");
                element.text(&code);
                let node = element.into_value();
                tree.top().children.push(node);
            }
            Event::InlineMath(t) | Event::DisplayMath(t) | Event::FootnoteReference(t) => {
                tree.top().text(&t);
            }
            Event::SoftBreak | Event::HardBreak => tree.leaf("br"),
            Event::Rule => tree.leaf("hr"),
            Event::TaskListMarker(done) => tree.top().text(if done { "☑ " } else { "☐ " }),
        }
    }
    while tree.open.len() > 1 {
        tree.pushed.push(true);
        tree.pop();
    }
    tree.open
        .pop()
        .map(|root| root.children)
        .unwrap_or_default()
}

/// [`render`] as a JSON array.
pub fn nodes(text: &str) -> Value {
    json!(render(text))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn emphasis_code_lists_and_links_become_nodes() {
        let nodes = render("Say **hi** to `x`\n\n- one\n- [two](https://example.org)");
        assert_eq!(
            json!(nodes),
            json!([
                {"t": "p", "c": ["Say ", {"t": "strong", "c": ["hi"]}, " to ", {"t": "code", "c": ["x"]}]},
                {"t": "ul", "c": [
                    {"t": "li", "c": ["one"]},
                    {"t": "li", "c": [{"t": "a", "href": "https://example.org", "c": ["two"]}]},
                ]},
            ])
        );
    }

    #[test]
    fn raw_html_is_text_and_unsafe_links_are_not_links() {
        let nodes =
            render("<img src=x onerror=\"alert(1)\"> and [bad](javascript:alert(1)) ![i](data:x)");
        let text = json!(nodes).to_string();
        assert!(
            text.contains(r#"<img src=x onerror=\"alert(1)\">"#),
            "{text}"
        );
        assert!(!text.contains("href"), "{text}");
        assert!(!text.contains("\"t\":\"img\""), "{text}");
        assert!(safe_href("mailto:a@b.c") && safe_href(" HTTPS://x") && !safe_href("/ui"));
    }

    #[test]
    fn tables_have_a_head_and_a_body_and_fences_their_language() {
        let nodes =
            render("| a | b |\n|---|--:|\n| 1 | 2 |\n\n```rust\nfn x() {}\n```\n# Title\n> quoted");
        assert_eq!(
            json!(nodes),
            json!([
                {"t": "table", "c": [
                    {"t": "thead", "c": [{"t": "tr", "c": [
                        {"t": "th", "c": ["a"]}, {"t": "th", "align": "right", "c": ["b"]}]}]},
                    {"t": "tbody", "c": [{"t": "tr", "c": [
                        {"t": "td", "c": ["1"]}, {"t": "td", "align": "right", "c": ["2"]}]}]},
                ]},
                {"t": "pre", "c": [{"t": "code", "lang": "rust", "c": ["fn x() {}\n"]}]},
                {"t": "h2", "c": ["Title"]},
                {"t": "blockquote", "c": [{"t": "p", "c": ["quoted"]}]},
            ])
        );
    }

    #[test]
    fn deep_nesting_is_flattened_not_unbounded() {
        let deep = format!("{}x", "> ".repeat(500));
        let text = json!(render(&deep)).to_string();
        assert!(
            text.matches("blockquote").count() <= MAX_DEPTH,
            "{}",
            text.len()
        );
        assert!(text.contains('x'));
    }
}

//! A web page as readable Markdown for the model: the title, then the
//! page's content — headings, paragraphs, lists, links, tables — without
//! scripts, styles, navigation, forms and page chrome.
//!
//! htmd (turndown.js's rules over html5ever) does the conversion; this
//! module decides what is content. The `<main>` element (else the only
//! `<article>`, else `<body>`) is converted; scripts, styles, navigation,
//! sidebars, forms, frames and images never are, nor is anything marked
//! `hidden`, `aria-hidden` or with a navigation/banner/footer role; a
//! page-level `<header>` and `<footer>` (outside `<main>`/`<article>`) are
//! site chrome and dropped too. Links are made absolute against the page's
//! URL so the model can follow them.

use std::rc::Rc;

use htmd::element_handler::Handlers;
use htmd::{Element, HtmlToMarkdown, Node};
use markup5ever_rcdom::NodeData;
use reqwest::Url;

/// What a page reads as.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Readable {
    /// The `<title>`, whitespace collapsed.
    pub title: Option<String>,
    /// The content as Markdown.
    pub markdown: String,
}

/// Tags that are never content.
const NEVER: &[&str] = &[
    "script", "style", "noscript", "template", "nav", "aside", "form", "iframe", "frame", "svg",
    "canvas", "button", "select", "input", "textarea", "dialog", "img", "picture", "video",
    "audio", "object", "embed", "head",
];

/// ARIA roles of page furniture.
const CHROME_ROLES: &[&str] = &[
    "navigation",
    "banner",
    "contentinfo",
    "complementary",
    "search",
    "menu",
    "menubar",
    "dialog",
    "alert",
];

/// Containers that may carry a furniture role or a `hidden` mark.
const CONTAINERS: &[&str] = &[
    "div", "section", "ul", "ol", "li", "p", "span", "table", "header", "footer", "article",
    "main", "a",
];

/// Converts an HTML page; `base` resolves relative links.
pub fn to_markdown(html: &str, base: Option<&Url>) -> Readable {
    let parser = HtmlToMarkdown::new();
    let Ok(document) = parser.html_to_tree(html) else {
        return Readable {
            title: None,
            markdown: String::new(),
        };
    };
    let title = find(&document, &|n| tag_of(n) == Some("title"))
        .map(|t| collapse(&text_of(&t)))
        .filter(|t| !t.is_empty());
    if let Some(base) = base {
        absolutize(&document, base);
    }
    let main = find(&document, &|n| tag_of(n) == Some("main"));
    let root = main.or_else(|| only(&document, "article"));
    let page_level = root.is_none();
    // The document stays alive until the end: dropping rcdom's root empties
    // every descendant's children, even those still referenced here.
    let root = root
        .or_else(|| find(&document, &|n| tag_of(n) == Some("body")))
        .unwrap_or_else(|| Rc::clone(&document));
    let mut skipped: Vec<&str> = NEVER.to_vec();
    if page_level {
        skipped.extend(["header", "footer"]);
    }
    let converter = HtmlToMarkdown::builder()
        .skip_tags(skipped)
        .add_handler(
            CONTAINERS.to_vec(),
            |handlers: &dyn Handlers, element: Element| {
                if is_chrome(element.attrs.iter().map(|a| (&*a.name.local, &*a.value))) {
                    None
                } else {
                    handlers.fallback(element)
                }
            },
        )
        .build();
    let markdown = tidy(&converter.tree_to_markdown(&root));
    drop(root);
    drop(document);
    Readable { title, markdown }
}

/// The element's tag name, for elements.
fn tag_of(node: &Node) -> Option<&str> {
    match &node.data {
        NodeData::Element { name, .. } => Some(&name.local),
        _ => None,
    }
}

/// Whether attributes (name, value) mark an element as hidden or as page furniture.
fn is_chrome<'a>(mut attrs: impl Iterator<Item = (&'a str, &'a str)>) -> bool {
    attrs.any(|(name, value)| {
        let value = value.trim().to_ascii_lowercase();
        match name {
            "hidden" => true,
            "aria-hidden" => value == "true",
            "role" => value.split_whitespace().any(|r| CHROME_ROLES.contains(&r)),
            _ => false,
        }
    })
}

/// The first node, depth first, that `wanted` accepts.
fn find(node: &Rc<Node>, wanted: &dyn Fn(&Node) -> bool) -> Option<Rc<Node>> {
    if wanted(node) {
        return Some(Rc::clone(node));
    }
    node.children
        .borrow()
        .iter()
        .find_map(|child| find(child, wanted))
}

/// The element with this tag when there is exactly one.
fn only(node: &Rc<Node>, tag: &str) -> Option<Rc<Node>> {
    let mut found = Vec::new();
    collect(node, tag, &mut found);
    (found.len() == 1).then(|| found.remove(0))
}

fn collect(node: &Rc<Node>, tag: &str, out: &mut Vec<Rc<Node>>) {
    if tag_of(node) == Some(tag) {
        out.push(Rc::clone(node));
        return;
    }
    for child in node.children.borrow().iter() {
        collect(child, tag, out);
    }
}

/// All text under a node.
fn text_of(node: &Node) -> String {
    let mut out = String::new();
    if let NodeData::Text { contents } = &node.data {
        out.push_str(&contents.borrow());
    }
    for child in node.children.borrow().iter() {
        out.push_str(&text_of(child));
    }
    out
}

/// Rewrites relative `href`s to absolute URLs against `base`.
fn absolutize(node: &Rc<Node>, base: &Url) {
    if let NodeData::Element { name, attrs, .. } = &node.data
        && &*name.local == "a"
    {
        for attr in attrs.borrow_mut().iter_mut() {
            if &*attr.name.local == "href"
                && let Ok(url) = base.join(attr.value.trim())
            {
                attr.value = url.as_str().into();
            }
        }
    }
    for child in node.children.borrow().iter() {
        absolutize(child, base);
    }
}

/// Whitespace runs as one space.
fn collapse(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// At most one blank line in a row, no trailing spaces.
fn tidy(markdown: &str) -> String {
    let mut out = String::with_capacity(markdown.len());
    let mut blank = 0;
    for line in markdown.lines() {
        let line = line.trim_end();
        if line.is_empty() {
            blank += 1;
            if blank > 1 {
                continue;
            }
        } else {
            blank = 0;
        }
        out.push_str(line);
        out.push('\n');
    }
    out.trim().to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    const PAGE: &str = r#"<!doctype html><html><head><title> The   Page </title>
        <style>body { color: red }</style><script>var tracking = 1;</script></head>
        <body>
          <header><a href="/">Site name</a></header>
          <nav><ul><li><a href="/a">Home</a></li><li><a href="/b">About</a></li></ul></nav>
          <div role="navigation">breadcrumbs here</div>
          <h1>Main heading</h1>
          <p>First paragraph with a <a href="docs/x.html">relative link</a>.</p>
          <ul><li>one</li><li>two</li></ul>
          <table><tr><th>k</th><th>v</th></tr><tr><td>a</td><td>1</td></tr></table>
          <div hidden>secret hidden text</div>
          <aside>related articles</aside>
          <form><input name="q"><button>Search</button></form>
          <footer>copyright notice</footer>
          <script>document.write("injected")</script>
        </body></html>"#;

    #[test]
    fn pages_read_as_markdown_without_chrome() {
        let base = Url::parse("https://example.com/blog/post").unwrap();
        let r = to_markdown(PAGE, Some(&base));
        assert_eq!(r.title.as_deref(), Some("The Page"));
        let md = &r.markdown;
        assert!(md.contains("# Main heading"), "{md}");
        assert!(
            md.contains(
                "First paragraph with a [relative link](https://example.com/blog/docs/x.html)."
            ),
            "{md}"
        );
        assert!(md.contains("one") && md.contains("two"), "{md}");
        assert!(md.contains("| k | v |"), "{md}");
        for gone in [
            "color: red",
            "tracking",
            "injected",
            "Home",
            "breadcrumbs",
            "secret hidden",
            "related articles",
            "Search",
            "copyright",
            "Site name",
        ] {
            assert!(!md.contains(gone), "{gone} in {md}");
        }
    }

    #[test]
    fn main_and_article_are_preferred_and_keep_their_headers() {
        let html = "<body><div>top banner junk</div><article><header><h1>Title</h1></header>\
                    <p>Body text.</p><footer>by me</footer></article><p>after</p></body>";
        let md = to_markdown(html, None).markdown;
        assert!(md.starts_with("# Title"), "{md}");
        assert!(md.contains("Body text.") && md.contains("by me"), "{md}");
        assert!(!md.contains("banner junk") && !md.contains("after"), "{md}");
        let two = "<body><article><p>one</p></article><article><p>two</p></article></body>";
        let md = to_markdown(two, None).markdown;
        assert!(md.contains("one") && md.contains("two"), "{md}");
    }

    #[test]
    fn fragments_and_garbage_do_not_fail() {
        assert_eq!(to_markdown("plain words", None).markdown, "plain words");
        assert_eq!(to_markdown("", None).title, None);
        let cut = "<html><body><p>cut in the mid";
        assert_eq!(to_markdown(cut, None).markdown, "cut in the mid");
    }
}

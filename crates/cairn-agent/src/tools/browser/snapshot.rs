//! A page as compact text, from its accessibility tree
//! (`Accessibility.getFullAXTree`): headings, text, images with a text
//! alternative, and each element the model can act on (links, buttons,
//! inputs, selects, …) on a line of its own with a short ref (`e12`) that
//! `browser_click`, `browser_type` and `browser_select` take, mapped to the
//! element's DOM node. Bounded by `tools.browser.max_chars`.

use std::collections::HashMap;

use serde_json::Value;

/// Roles the model can act on, each given a ref.
const INTERACTIVE: &[&str] = &[
    "link",
    "button",
    "textbox",
    "searchbox",
    "combobox",
    "listbox",
    "checkbox",
    "radio",
    "switch",
    "slider",
    "spinbutton",
    "menuitem",
    "menuitemcheckbox",
    "menuitemradio",
    "tab",
    "treeitem",
    "option",
];

/// Roles whose text starts and ends a block of text of its own.
const BLOCKS: &[&str] = &[
    "paragraph",
    "listitem",
    "row",
    "cell",
    "gridcell",
    "columnheader",
    "rowheader",
    "blockquote",
    "caption",
    "term",
    "definition",
    "figure",
    "LineBreak",
    "separator",
];

/// Options listed after a select, at most.
const MAX_OPTIONS: usize = 20;

/// A page read into text, and what its refs point at.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Snapshot {
    /// The text for the model.
    pub text: String,
    /// `e12` → the backend DOM node id of its element.
    pub refs: HashMap<String, i64>,
    /// True when the page had more than `max_chars` allowed.
    pub cut: bool,
}

/// One node of the tree, as the walk needs it.
struct Node<'a> {
    raw: &'a Value,
}

impl<'a> Node<'a> {
    fn role(&self) -> &'a str {
        self.raw["role"]["value"].as_str().unwrap_or_default()
    }

    fn name(&self) -> String {
        squash(self.raw["name"]["value"].as_str().unwrap_or_default())
    }

    fn value(&self) -> String {
        match &self.raw["value"]["value"] {
            Value::String(s) => squash(s),
            Value::Number(n) => n.to_string(),
            _ => String::new(),
        }
    }

    fn ignored(&self) -> bool {
        self.raw["ignored"].as_bool().unwrap_or(false)
    }

    fn property(&self, name: &str) -> Option<&'a Value> {
        self.raw["properties"]
            .as_array()?
            .iter()
            .find(|p| p["name"] == name)
            .map(|p| &p["value"]["value"])
    }

    fn children(&self) -> impl Iterator<Item = &'a str> {
        self.raw["childIds"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
    }

    fn dom_node(&self) -> Option<i64> {
        self.raw["backendDOMNodeId"].as_i64()
    }
}

/// Collapses runs of whitespace to one space.
fn squash(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// The walk's state: lines written, text gathered for the current block.
struct Writer<'a> {
    nodes: HashMap<&'a str, Node<'a>>,
    out: String,
    pending: Vec<String>,
    refs: HashMap<String, i64>,
    max_chars: usize,
    cut: bool,
}

impl<'a> Writer<'a> {
    /// Writes a line, unless the bound is reached; true when written.
    fn line(&mut self, line: &str) -> bool {
        if self.cut || line.is_empty() {
            return false;
        }
        if self.out.len() + line.len() + 1 > self.max_chars {
            self.cut = true;
            return false;
        }
        self.out.push_str(line);
        self.out.push('\n');
        true
    }

    fn flush(&mut self) {
        let text = squash(&self.pending.join(" "));
        self.pending.clear();
        self.line(&text);
    }

    fn walk(&mut self, id: &str, depth: usize) {
        // A tree deeper than this is a page built to hurt; what is above is kept.
        if self.cut || depth > 500 {
            return;
        }
        let Some(node) = self.nodes.get(id).map(|n| Node { raw: n.raw }) else {
            return;
        };
        let role = node.role();
        if node.ignored() || role == "none" || role == "presentation" {
            self.children(&node, depth);
            return;
        }
        match role {
            "StaticText" => {
                let name = node.name();
                if !name.is_empty() {
                    self.pending.push(name);
                }
            }
            "InlineTextBox" => {}
            "heading" => {
                self.flush();
                let level = node.property("level").and_then(Value::as_u64).unwrap_or(2);
                let name = node.name();
                if !name.is_empty() {
                    let hashes = "#".repeat(usize::try_from(level.clamp(1, 6)).unwrap_or(2));
                    self.line(&format!("{hashes} {name}"));
                }
            }
            "image" | "img" => {
                let name = node.name();
                if !name.is_empty() {
                    self.flush();
                    self.line(&format!("image \"{name}\""));
                }
            }
            _ if INTERACTIVE.contains(&role) => {
                self.flush();
                let (line, dom) = self.element(&node, role);
                // A ref only for an element the model was shown.
                if self.line(&line)
                    && let Some(dom) = dom
                {
                    self.refs.insert(format!("e{}", self.refs.len() + 1), dom);
                }
            }
            _ if BLOCKS.contains(&role) => {
                self.flush();
                self.children(&node, depth);
                self.flush();
            }
            _ => self.children(&node, depth),
        }
    }

    fn children(&mut self, node: &Node<'a>, depth: usize) {
        for child in node.children() {
            self.walk(child, depth + 1);
        }
    }

    /// An element's line (role, name, the ref it gets, state and value)
    /// and its DOM node.
    fn element(&self, node: &Node<'a>, role: &str) -> (String, Option<i64>) {
        let mut line = format!("{role} \"{}\"", node.name());
        let dom = node.dom_node();
        if dom.is_some() {
            line.push_str(&format!(" [e{}]", self.refs.len() + 1));
        }
        for (property, shown) in [
            ("checked", "checked"),
            ("pressed", "pressed"),
            ("selected", "selected"),
            ("expanded", "expanded"),
        ] {
            if node
                .property(property)
                .is_some_and(|v| v == "true" || v == true)
            {
                line.push_str(&format!(" ({shown})"));
            }
        }
        if node.property("disabled").is_some_and(|v| v == true) {
            line.push_str(" (disabled)");
        }
        let value = node.value();
        if !value.is_empty() && value != node.name() {
            line.push_str(&format!(" = \"{value}\""));
        }
        if matches!(role, "combobox" | "listbox") {
            let options = self.options(node);
            if !options.is_empty() {
                line.push_str(&format!(" options: {}", options.join(" | ")));
            }
        }
        (line, dom)
    }

    /// The names of the options below a select.
    fn options(&self, node: &Node<'a>) -> Vec<String> {
        let mut found = Vec::new();
        let mut stack: Vec<&str> = node.children().collect();
        stack.reverse();
        while let Some(id) = stack.pop() {
            let Some(child) = self.nodes.get(id) else {
                continue;
            };
            if child.role() == "option" {
                found.push(child.name());
                if found.len() == MAX_OPTIONS {
                    found.push("…".into());
                    break;
                }
                continue;
            }
            let mut below: Vec<&str> = child.children().collect();
            below.reverse();
            stack.extend(below);
        }
        found
    }
}

/// The text of the tree `nodes` (`getFullAXTree`'s), at most `max_chars`.
pub fn render(nodes: &[Value], max_chars: usize) -> Snapshot {
    let map: HashMap<&str, Node<'_>> = nodes
        .iter()
        .filter_map(|raw| Some((raw["nodeId"].as_str()?, Node { raw })))
        .collect();
    let root = nodes
        .iter()
        .find(|n| n.get("parentId").is_none_or(Value::is_null))
        .and_then(|n| n["nodeId"].as_str())
        .map(str::to_string);
    let mut writer = Writer {
        nodes: map,
        out: String::new(),
        pending: Vec::new(),
        refs: HashMap::new(),
        max_chars,
        cut: false,
    };
    if let Some(root) = root {
        writer.walk(&root, 0);
        writer.flush();
    }
    let mut text = writer.out.trim_end().to_string();
    if writer.cut {
        text.push_str(&format!(
            "\n[… cut at {max_chars} characters (tools.browser.max_chars): the page has more]"
        ));
    }
    if text.is_empty() {
        text = "(the page shows no text)".into();
    }
    Snapshot {
        text,
        refs: writer.refs,
        cut: writer.cut,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// A node: id, role, name, children, DOM node and extra fields.
    fn node(id: &str, role: &str, name: &str, children: &[&str], dom: Option<i64>) -> Value {
        let mut n = json!({
            "nodeId": id,
            "ignored": false,
            "role": {"type": "role", "value": role},
            "name": {"type": "computedString", "value": name},
            "childIds": children,
        });
        if let Some(dom) = dom {
            n["backendDOMNodeId"] = json!(dom);
        }
        if id != "1" {
            n["parentId"] = json!("x");
        }
        n
    }

    fn login_page() -> Vec<Value> {
        let mut heading = node("2", "heading", "Sign in", &["20"], Some(102));
        heading["properties"] =
            json!([{"name": "level", "value": {"type": "integer", "value": 1}}]);
        let mut user = node("5", "textbox", "User", &[], Some(105));
        user["value"] = json!({"type": "string", "value": "ada"});
        let mut select = node("7", "combobox", "Colour", &["70"], Some(107));
        select["value"] = json!({"type": "string", "value": "Red"});
        let mut remember = node("8", "checkbox", "Remember me", &[], Some(108));
        remember["properties"] =
            json!([{"name": "checked", "value": {"type": "tristate", "value": "true"}}]);
        let mut hidden = node("9", "generic", "", &["90"], None);
        hidden["ignored"] = json!(true);
        vec![
            node(
                "1",
                "RootWebArea",
                "Login",
                &["2", "3", "4", "5", "6", "7", "8", "9"],
                Some(1),
            ),
            heading,
            node("20", "StaticText", "Sign in", &[], None),
            node("3", "paragraph", "", &["30", "31", "32"], Some(103)),
            node("30", "StaticText", "Welcome   back,", &[], None),
            node("31", "link", "read the docs", &["310"], Some(131)),
            node("310", "StaticText", "read the docs", &[], None),
            node("32", "StaticText", "first.", &[], None),
            node("4", "image", "A cairn of stones", &[], Some(104)),
            user,
            node("6", "button", "Go", &[], Some(106)),
            select,
            node("70", "MenuListPopup", "", &["71", "72"], None),
            node("71", "option", "Red", &[], Some(171)),
            node("72", "option", "Green", &[], Some(172)),
            remember,
            hidden,
            node("90", "StaticText", "inside an ignored node", &[], None),
        ]
    }

    #[test]
    fn a_page_reads_as_headings_text_and_elements_with_refs() {
        let snapshot = render(&login_page(), 20_000);
        assert_eq!(
            snapshot.text,
            "# Sign in\n\
             Welcome back,\n\
             link \"read the docs\" [e1]\n\
             first.\n\
             image \"A cairn of stones\"\n\
             textbox \"User\" [e2] = \"ada\"\n\
             button \"Go\" [e3]\n\
             combobox \"Colour\" [e4] = \"Red\" options: Red | Green\n\
             checkbox \"Remember me\" [e5] (checked)\n\
             inside an ignored node"
        );
        assert_eq!(snapshot.refs["e1"], 131);
        assert_eq!(snapshot.refs["e2"], 105);
        assert_eq!(snapshot.refs["e4"], 107);
        assert_eq!(snapshot.refs.len(), 5);
        assert!(!snapshot.cut);
    }

    #[test]
    fn a_long_page_is_cut_at_max_chars_and_says_so() {
        let snapshot = render(&login_page(), 40);
        assert!(snapshot.cut);
        let (kept, note) = snapshot.text.split_once("\n[…").unwrap();
        assert!(kept.len() <= 40, "{kept}");
        assert_eq!(kept, "# Sign in\nWelcome back,");
        assert!(note.contains("cut at 40 characters"), "{note}");
        assert!(
            !snapshot.refs.contains_key("e3"),
            "no ref for what was not shown"
        );
    }

    #[test]
    fn an_empty_or_unrooted_tree_says_the_page_shows_nothing() {
        assert_eq!(render(&[], 100).text, "(the page shows no text)");
        let only_root = [node("1", "RootWebArea", "", &["404"], Some(1))];
        assert_eq!(render(&only_root, 100).text, "(the page shows no text)");
    }
}

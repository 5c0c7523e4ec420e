//! What the marker-based formats share: finding their spans in linear time,
//! checking a written tool name, and typing parameter values written as text.
//!
//! Linear time on hostile text: a span's body never contains its own opening
//! marker (a span whose body would is left as text), so bodies are disjoint
//! and each byte is searched and parsed a bounded number of times.

use cairn_core::chat::{ToolCall, ToolDefinition};
use serde_json::Value;

use super::new_call_id;

/// The tools a request offered, as the parsers need them.
pub(super) struct Offered<'a> {
    tools: &'a [ToolDefinition],
    names: Vec<&'a str>,
}

impl<'a> Offered<'a> {
    /// The offered `tools`.
    pub fn new(tools: &'a [ToolDefinition]) -> Self {
        Self {
            tools,
            names: tools.iter().map(|t| t.name.as_str()).collect(),
        }
    }

    /// The offered names.
    pub fn names(&self) -> &[&'a str] {
        &self.names
    }

    /// Whether `name` is an offered tool.
    pub fn knows(&self, name: &str) -> bool {
        self.names.contains(&name)
    }

    /// A parameter value written as text (`<parameter …>`, `<arg_value>`):
    /// one leading and one trailing line break are layout, not value; the
    /// text as is where the tool's schema declares a string, otherwise its
    /// JSON reading when it has one (numbers, booleans, objects), else the text.
    pub fn typed_value(&self, tool: &str, key: &str, raw: &str) -> Value {
        let raw = raw.strip_prefix('\n').unwrap_or(raw);
        let raw = raw.strip_suffix('\n').unwrap_or(raw);
        let declared = self
            .tools
            .iter()
            .find(|t| t.name == tool)
            .and_then(|t| t.parameters.get("properties")?.get(key)?.get("type"));
        let is_string = match declared {
            Some(Value::String(kind)) => kind == "string",
            Some(Value::Array(kinds)) => {
                kinds.iter().any(|k| k == "string")
                    && kinds.iter().all(|k| k == "string" || k == "null")
            }
            _ => false,
        };
        if is_string {
            return Value::String(raw.to_owned());
        }
        serde_json::from_str(raw.trim()).unwrap_or_else(|_| Value::String(raw.to_owned()))
    }
}

/// Longest tool name accepted where a format writes the name as bare text.
const MAX_NAME_LEN: usize = 128;

/// Whether `c` may appear in a tool name written as bare text.
pub(super) fn is_name_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.' | ':')
}

/// Whether `name` looks like a tool name (so prose is never taken for one).
pub(super) fn is_tool_name(name: &str) -> bool {
    !name.is_empty() && name.len() <= MAX_NAME_LEN && name.chars().all(is_name_char)
}

/// A call with a fresh id.
pub(super) fn call(name: &str, arguments: Value) -> ToolCall {
    ToolCall {
        id: new_call_id(),
        name: name.to_owned(),
        arguments,
    }
}

/// Replaces each `open … close` span whose body `parse` reads as calls with
/// nothing, collecting the calls; every other span stays text. With
/// `unclosed_tail`, a last span without `close` runs to the end of the text
/// (servers often stop generating at the closing marker).
pub(super) fn replace_delimited(
    text: &str,
    (open, close): (&str, &str),
    unclosed_tail: bool,
    calls: &mut Vec<ToolCall>,
    mut parse: impl FnMut(&str) -> Option<Vec<ToolCall>>,
) -> String {
    let Some(first) = text.find(open) else {
        return text.to_owned();
    };
    let mut out = String::with_capacity(text.len());
    let mut copied = 0;
    let mut next_open = Some(first);
    // The first `close` at or after the current body (`None` inside: none left).
    let mut known_close: Option<Option<usize>> = None;
    while let Some(start) = next_open {
        let body_start = start + open.len();
        let following = find_from(text, open, body_start);
        let close_at = match known_close {
            Some(Some(at)) if at >= body_start => Some(at),
            Some(None) => None,
            _ => {
                let found = find_from(text, close, body_start);
                known_close = Some(found);
                found
            }
        };
        let span = match (close_at, following) {
            (Some(at), Some(next)) if next < at => None,
            (Some(at), _) => Some((at, at + close.len())),
            (None, None) if unclosed_tail => Some((text.len(), text.len())),
            (None, _) => None,
        };
        next_open = following;
        if let Some((body_end, after)) = span
            && let Some(found) = parse(&text[body_start..body_end]).filter(|f| !f.is_empty())
        {
            out.push_str(&text[copied..start]);
            calls.extend(found);
            copied = after;
            if next_open.is_some_and(|next| next < after) {
                next_open = find_from(text, open, after);
            }
        }
    }
    out.push_str(&text[copied..]);
    out
}

/// Replaces each `marker` and the calls `parse` reads right after it with
/// nothing. `parse` gets the text up to the next `marker` (or the end) and
/// answers the calls and how many bytes of it they took; the rest stays text.
pub(super) fn replace_introduced(
    text: &str,
    marker: &str,
    calls: &mut Vec<ToolCall>,
    mut parse: impl FnMut(&str) -> Option<(Vec<ToolCall>, usize)>,
) -> String {
    let Some(first) = text.find(marker) else {
        return text.to_owned();
    };
    let mut out = String::with_capacity(text.len());
    let mut copied = 0;
    let mut next = Some(first);
    while let Some(start) = next {
        let body_start = start + marker.len();
        next = find_from(text, marker, body_start);
        let body = &text[body_start..next.unwrap_or(text.len())];
        if let Some((found, used)) = parse(body).filter(|(f, _)| !f.is_empty()) {
            out.push_str(&text[copied..start]);
            calls.extend(found);
            copied = body_start + used.min(body.len());
        }
    }
    out.push_str(&text[copied..]);
    out
}

/// The first `needle` at or after byte `from` of `text`.
pub(super) fn find_from(text: &str, needle: &str, from: usize) -> Option<usize> {
    text.get(from..)?.find(needle).map(|at| from + at)
}

/// `text` after `prefix` and any whitespace before it.
pub(super) fn after_prefix<'t>(text: &'t str, prefix: &str) -> Option<&'t str> {
    text.trim_start().strip_prefix(prefix)
}

/// The value of attribute `name` in an XML start tag's attribute text
/// (`name="x"` or `name='x'`).
pub(super) fn attribute<'t>(attrs: &'t str, name: &str) -> Option<&'t str> {
    let mut from = 0;
    loop {
        let at = find_from(attrs, name, from)?;
        from = at + name.len();
        let standalone = attrs[..at]
            .chars()
            .next_back()
            .is_none_or(char::is_whitespace);
        let Some(value) = attrs[from..].trim_start().strip_prefix('=') else {
            continue;
        };
        if !standalone {
            continue;
        }
        let value = value.trim_start();
        let quote = value.chars().next().filter(|q| matches!(q, '"' | '\''))?;
        let inner = &value[1..];
        return inner.find(quote).map(|end| &inner[..end]);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn attributes_with_either_quote_and_not_inside_other_names() {
        assert_eq!(attribute(r#" name="shell""#, "name"), Some("shell"));
        assert_eq!(attribute(" name = 'x y' ", "name"), Some("x y"));
        assert_eq!(attribute(r#" tool_name="a" name="b""#, "name"), Some("b"));
        assert_eq!(attribute(r#" name=shell"#, "name"), None);
        assert_eq!(attribute(r#"namename="x""#, "name"), None);
        assert_eq!(attribute(r#" name="open"#, "name"), None);
    }

    #[test]
    fn tool_names_are_short_words() {
        for ok in ["shell", "read_file", "mcp.github:search", "a-b"] {
            assert!(is_tool_name(ok), "{ok}");
        }
        for bad in ["", "two words", "café", &"x".repeat(129), "a{"] {
            assert!(!is_tool_name(bad), "{bad}");
        }
    }

    #[test]
    fn values_follow_the_schema_type() {
        let tools = [ToolDefinition {
            name: "t".into(),
            description: String::new(),
            parameters: json!({"properties": {
                "s": {"type": "string"}, "n": {"type": "integer"}, "o": {"type": ["string", "null"]}
            }}),
        }];
        let offered = Offered::new(&tools);
        assert_eq!(offered.typed_value("t", "s", "\n42\n"), json!("42"));
        assert_eq!(offered.typed_value("t", "o", "true"), json!("true"));
        assert_eq!(offered.typed_value("t", "n", " 42 "), json!(42));
        assert_eq!(offered.typed_value("t", "n", "many"), json!("many"));
        assert_eq!(offered.typed_value("t", "x", "[1, 2]"), json!([1, 2]));
        assert_eq!(
            offered.typed_value("u", "x", "two\nlines\n"),
            json!("two\nlines")
        );
    }

    #[test]
    fn spans_with_their_own_opening_inside_stay_text() {
        let mut calls = Vec::new();
        let text = "<a>1<a>2</a> <a>3";
        let mut bodies = Vec::new();
        let out = replace_delimited(text, ("<a>", "</a>"), true, &mut calls, |body| {
            bodies.push(body.to_owned());
            (body == "2").then(|| vec![call("two", json!({}))])
        });
        assert_eq!(bodies, ["2", "3"]);
        assert_eq!(out, "<a>1 <a>3");
        assert_eq!(calls.len(), 1);
    }
}

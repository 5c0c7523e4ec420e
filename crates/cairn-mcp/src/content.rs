//! MCP results as text for the model, read from the protocol's JSON: text
//! blocks as they are, binary blocks described (never their bytes), and
//! `structuredContent` when the server sent nothing else.

use serde_json::Value;

/// The text of a `tools/call` result.
pub fn result_text(result: &Value) -> String {
    let parts: Vec<String> = result["content"]
        .as_array()
        .into_iter()
        .flatten()
        .map(block_text)
        .filter(|t| !t.is_empty())
        .collect();
    if parts.is_empty() {
        return match result.get("structuredContent") {
            Some(Value::Null) | None => String::new(),
            Some(structured) => structured.to_string(),
        };
    }
    parts.join("\n")
}

/// One content block as text.
fn block_text(block: &Value) -> String {
    let mime = block["mimeType"].as_str().unwrap_or("unknown type");
    match block["type"].as_str() {
        Some("text") => block["text"].as_str().unwrap_or_default().to_string(),
        Some("image") => format!("[image ({mime}) not shown]"),
        Some("audio") => format!("[audio ({mime}) not shown]"),
        Some("resource") => contents_text(&block["resource"]),
        Some("resource_link") => format!(
            "[resource {}{}]",
            block["uri"].as_str().unwrap_or_default(),
            block["name"]
                .as_str()
                .map(|n| format!(" \"{n}\""))
                .unwrap_or_default()
        ),
        Some(other) => format!("[{other} content not shown]"),
        None => String::new(),
    }
}

/// One resource's contents: its text, or a line saying what it holds.
fn contents_text(contents: &Value) -> String {
    match contents["text"].as_str() {
        Some(text) => text.to_string(),
        None => format!(
            "[{} ({}) not shown]",
            contents["uri"].as_str().unwrap_or("resource"),
            contents["mimeType"].as_str().unwrap_or("binary")
        ),
    }
}

/// The text of a `resources/read` result.
pub fn resource_text(read: &Value) -> String {
    read["contents"]
        .as_array()
        .into_iter()
        .flatten()
        .map(contents_text)
        .collect::<Vec<_>>()
        .join("\n")
}

/// The text of a `prompts/get` result: one `role: text` paragraph per message.
pub fn prompt_text(got: &Value) -> String {
    let mut out = Vec::new();
    if let Some(description) = got["description"].as_str() {
        out.push(format!("({description})"));
    }
    for message in got["messages"].as_array().into_iter().flatten() {
        let role = message["role"].as_str().unwrap_or("user");
        out.push(format!("{role}: {}", block_text(&message["content"])));
    }
    out.join("\n\n")
}

/// `text` cut to `max` characters with a note saying how much there was.
pub fn bounded(text: String, max: usize) -> String {
    let total = text.chars().count();
    if total <= max {
        return text;
    }
    let kept: String = text.chars().take(max).collect();
    format!("{kept}\n[output cut: {max} of {total} characters]")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn blocks_become_text_and_binary_is_described() {
        let result = json!({"content": [
            {"type": "text", "text": "first"},
            {"type": "image", "data": "AAAA", "mimeType": "image/png"},
            {"type": "resource", "resource": {"uri": "memo://a", "text": "inline"}},
            {"type": "resource", "resource": {"uri": "file:///b.bin", "blob": "AA", "mimeType": "application/zip"}},
            {"type": "resource_link", "uri": "memo://c", "name": "c"},
        ]});
        assert_eq!(
            result_text(&result),
            "first\n[image (image/png) not shown]\ninline\n[file:///b.bin (application/zip) not shown]\n[resource memo://c \"c\"]"
        );
        assert!(!result_text(&result).contains("AAAA"));
        assert_eq!(
            result_text(&json!({"content": [], "structuredContent": {"n": 1}})),
            "{\"n\":1}"
        );
    }

    #[test]
    fn prompts_and_resources_read_as_text() {
        let got = json!({"description": "d", "messages": [
            {"role": "user", "content": {"type": "text", "text": "Summarize x."}}]});
        assert_eq!(prompt_text(&got), "(d)\n\nuser: Summarize x.");
        let read = json!({"contents": [{"uri": "memo://g", "text": "hello"}]});
        assert_eq!(resource_text(&read), "hello");
    }

    #[test]
    fn long_output_is_cut_with_a_note() {
        assert_eq!(bounded("abc".into(), 5), "abc");
        assert_eq!(
            bounded("abcdef".into(), 4),
            "abcd\n[output cut: 4 of 6 characters]"
        );
    }
}

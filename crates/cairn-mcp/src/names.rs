//! cairn's names for MCP tools: `mcp__<server>__<tool>`, the convention
//! Claude Code users know, fitted to the registry's rule (1-64 characters of
//! `a-z`, `0-9`, `_`).

use std::hash::{Hash, Hasher};

/// What every MCP tool's name starts with.
pub const PREFIX: &str = "mcp__";

/// The separator between the server and the tool.
pub const SEPARATOR: &str = "__";

/// The longest server name: leaves a tool at least 33 characters.
pub const MAX_SERVER_NAME: usize = 24;

/// The longest tool name the registry accepts.
const MAX_NAME: usize = 64;

/// `text` lower-cased with every character outside `a-z`, `0-9`, `_` (and
/// the wildcards `*`, `?` when `wildcards`) made `_`.
fn fold(text: &str, wildcards: bool) -> String {
    text.trim()
        .chars()
        .map(|c| match c.to_ascii_lowercase() {
            c @ ('a'..='z' | '0'..='9' | '_') => c,
            c @ ('*' | '?') if wildcards => c,
            _ => '_',
        })
        .collect()
}

/// A server's configured name, normalized, or why it cannot be one.
pub fn server_name(name: &str) -> Result<String, String> {
    let folded = fold(name, false);
    if folded.is_empty() {
        return Err("is empty; name the server (it prefixes its tools' names)".into());
    }
    if folded.len() > MAX_SERVER_NAME {
        return Err(format!(
            "\"{name}\" is longer than {MAX_SERVER_NAME} characters"
        ));
    }
    if folded.contains(SEPARATOR) || folded.starts_with('_') || folded.ends_with('_') {
        return Err(format!(
            "\"{name}\" must not contain `__` nor start or end with `_` (tools are mcp__SERVER__TOOL)"
        ));
    }
    if folded != name.trim()
        && !name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_".contains(c))
    {
        return Err(format!("\"{name}\": use letters, digits, `-` and `_`"));
    }
    Ok(folded)
}

/// The tool part of a tool's exposed name, before any length fitting.
pub fn tool_part(tool: &str) -> String {
    fold(tool, false)
}

/// A configured tool pattern (`get-*`) over exposed tool parts.
pub fn pattern(pattern: &str) -> String {
    fold(pattern, true)
}

/// `mcp__<server>__<tool>` as written, for rules and patterns (no fitting).
pub fn exposed(server: &str, tool: &str) -> String {
    format!("{PREFIX}{server}{SEPARATOR}{tool}")
}

/// The name cairn gives `tool` of `server`: `mcp__server__tool`, folded; a
/// name over 64 characters keeps its start and ends with a short hash of the
/// whole, so two long names stay apart.
pub fn tool_name(server: &str, tool: &str) -> String {
    let name = exposed(server, &tool_part(tool));
    if name.len() <= MAX_NAME {
        return name;
    }
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    tool.hash(&mut hasher);
    let tag = format!("_{:06x}", hasher.finish() & 0xff_ffff);
    let keep = MAX_NAME - tag.len();
    format!("{}{tag}", &name[..keep])
}

/// The server a cairn tool name belongs to, and the rest of it.
pub fn split(name: &str) -> Option<(&str, &str)> {
    name.strip_prefix(PREFIX)?.split_once(SEPARATOR)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tool_names_follow_the_convention_and_fit() {
        assert_eq!(
            tool_name("github", "create-issue"),
            "mcp__github__create_issue"
        );
        assert_eq!(tool_name("fs", "Read.File"), "mcp__fs__read_file");
        let long = "x".repeat(80);
        let a = tool_name("server", &long);
        let b = tool_name("server", &format!("{long}y"));
        assert_eq!(a.len(), 64);
        assert_ne!(a, b);
        assert!(a.starts_with("mcp__server__xxx"));
        assert_eq!(
            split("mcp__github__create_issue"),
            Some(("github", "create_issue"))
        );
        assert_eq!(split("shell"), None);
    }

    #[test]
    fn server_names_are_checked() {
        assert_eq!(server_name("My-Server").unwrap(), "my_server");
        assert!(server_name("").is_err());
        assert!(server_name("a__b").is_err());
        assert!(server_name("_a").is_err());
        assert!(server_name("has space").is_err());
        assert!(server_name(&"a".repeat(25)).is_err());
        assert_eq!(pattern("get-*"), "get_*");
    }
}

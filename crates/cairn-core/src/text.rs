//! Small text helpers: suggestions of what was meant, errors on one line,
//! and `${VAR}` references to the environment (or `${secret:NAME}` to the vault).

use std::collections::{BTreeMap, BTreeSet};

/// Levenshtein distance over chars, for "did you mean" hints on short names
/// (config keys, commands, tool names); O(n·m), which is nothing at that size.
pub fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut cur = vec![i + 1; b.len() + 1];
        for (j, cb) in b.iter().enumerate() {
            let cost = usize::from(ca != *cb);
            cur[j + 1] = (prev[j] + cost).min(prev[j + 1] + 1).min(cur[j] + 1);
        }
        prev = cur;
    }
    prev[b.len()]
}

/// The candidate closest to `name`, if close enough to be what was meant
/// (at most a third of its length, or 2, edits away).
pub fn closest<'a>(name: &str, candidates: impl IntoIterator<Item = &'a str>) -> Option<&'a str> {
    candidates
        .into_iter()
        .map(|c| (edit_distance(name, c), c))
        .filter(|(d, c)| *d <= (c.len() / 3).max(2))
        .min_by_key(|(d, _)| *d)
        .map(|(_, c)| c)
}

/// An error and its causes on one line, each cause once: a library's own
/// message alone ("error sending request") rarely says what went wrong.
pub fn error_chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        let cause_text = cause.to_string();
        if !text.contains(&cause_text) {
            text.push_str(": ");
            text.push_str(&cause_text);
        }
        source = cause.source();
    }
    text
}

/// The names `text` refers to as `${NAME}`, in order, as [`expand_vars`]
/// reads them (an unclosed `${` ends the scan).
pub fn var_names(text: &str) -> Vec<&str> {
    let mut names = Vec::new();
    let mut rest = text;
    while let Some(start) = rest.find("${") {
        let Some(len) = rest[start + 2..].find('}') else {
            break;
        };
        names.push(&rest[start + 2..start + 2 + len]);
        rest = &rest[start + 3 + len..];
    }
    names
}

/// The prefix of a reference to the vault: `${secret:NAME}`.
pub const SECRET_PREFIX: &str = "secret:";

/// What `${NAME}` references are read from: the environment, and (for
/// [`Environment`](crate::config::Environment)) the vault's values as
/// `${secret:NAME}`.
pub trait Vars {
    /// The value `${name}` stands for, if any.
    fn var(&self, name: &str) -> Option<&str>;
}

impl Vars for BTreeMap<String, String> {
    fn var(&self, name: &str) -> Option<&str> {
        self.get(name).map(String::as_str)
    }
}

/// Why `${name}` has no value, in words: an unset variable, or a secret
/// the vault does not hold (and how to add it).
pub fn missing_reference(name: &str) -> String {
    match name.strip_prefix(SECRET_PREFIX) {
        Some(secret) => {
            format!("secret {secret} is not in the vault (add it with `cairn secret set {secret}`)")
        }
        None => format!("environment variable {name} is not set"),
    }
}

/// `text` with each `${NAME}` replaced; `Err(NAME)` for the first unset one
/// (`secret:NAME` for a secret the vault does not hold).
pub fn expand_vars(text: &str, env: &(impl Vars + ?Sized)) -> Result<String, String> {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(start) = rest.find("${") {
        let Some(len) = rest[start + 2..].find('}') else {
            break;
        };
        let name = &rest[start + 2..start + 2 + len];
        out.push_str(&rest[..start]);
        match env.var(name) {
            Some(v) => out.push_str(v),
            None => return Err(name.to_string()),
        }
        rest = &rest[start + 3 + len..];
    }
    out.push_str(rest);
    Ok(out)
}

/// The names of the secrets `text` refers to as `${secret:NAME}`.
pub fn secret_references(text: &str) -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    let mut rest = text;
    while let Some(start) = rest.find("${secret:") {
        let after = &rest[start + 2 + SECRET_PREFIX.len()..];
        let Some(len) = after.find('}') else { break };
        names.insert(after[..len].to_string());
        rest = &after[len..];
    }
    names
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn distances() {
        assert_eq!(edit_distance("shell", "shell"), 0);
        assert_eq!(edit_distance("shel", "shell"), 1);
        assert_eq!(edit_distance("", "abc"), 3);
        assert_eq!(edit_distance("file_raed", "file_read"), 2);
        assert_eq!(edit_distance("é", "e"), 1);
        assert_eq!(closest("sumary", ["summary", "disk"]), Some("summary"));
        assert_eq!(closest("zzzzzz", ["summary", "disk"]), None);
    }

    #[test]
    fn the_names_referred_to_are_those_expansion_reads() {
        assert_eq!(var_names("a ${X}${Y_2} $Z ${"), ["X", "Y_2"]);
        assert!(var_names("no vars").is_empty());
    }

    #[test]
    fn expansion_leaves_other_text_alone() {
        let e: std::collections::BTreeMap<String, String> =
            [("A".to_string(), "1".to_string())].into();
        assert_eq!(expand_vars("x${A}y${A}", &e).unwrap(), "x1y1");
        assert_eq!(
            expand_vars("no vars, $A, ${", &e).unwrap(),
            "no vars, $A, ${"
        );
        assert_eq!(expand_vars("${B}", &e).unwrap_err(), "B");
        assert_eq!(expand_vars("${secret:B}", &e).unwrap_err(), "secret:B");
    }

    #[test]
    fn secret_references_are_found_and_missing_ones_explained() {
        let names = secret_references(
            "a = \"${secret:LLM}\"\nb = \"Bearer ${secret:GH}x${VAR}${secret:LLM}\"",
        );
        assert_eq!(names.into_iter().collect::<Vec<_>>(), ["GH", "LLM"]);
        assert!(secret_references("${secret:OPEN").is_empty());
        assert_eq!(missing_reference("K"), "environment variable K is not set");
        assert_eq!(
            missing_reference("secret:GH"),
            "secret GH is not in the vault (add it with `cairn secret set GH`)"
        );
    }
}

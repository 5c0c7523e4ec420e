//! The front matter of a skill's `SKILL.md` (the open SKILL.md format): a
//! YAML block between `---` lines holding at least `name` and `description`.
//! Other keys (`license`, `allowed-tools`, `metadata`, …) are accepted and
//! ignored. Reading the folders is the agent's business; this only parses text.

use serde::Deserialize;

/// Longest name the format allows.
pub const MAX_NAME_CHARS: usize = 64;
/// Longest description the format allows.
pub const MAX_DESCRIPTION_CHARS: usize = 1024;

/// What a skill says about itself.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SkillHeader {
    /// Lowercase letters, digits and hyphens.
    pub name: String,
    /// What it does and when to use it (one paragraph).
    pub description: String,
    /// 1-based line where the body (after the closing `---`) starts.
    pub body_line: usize,
}

/// Why a `SKILL.md` was refused, at a 1-based line of the file.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("line {line}: {message}")]
pub struct SkillError {
    /// The line at fault.
    pub line: usize,
    /// What is wrong.
    pub message: String,
}

#[derive(Deserialize)]
struct Raw {
    name: Option<serde_norway::Value>,
    description: Option<serde_norway::Value>,
}

fn fail(line: usize, message: impl Into<String>) -> SkillError {
    SkillError {
        line,
        message: message.into(),
    }
}

/// Parses the front matter of a `SKILL.md`.
pub fn parse_header(text: &str) -> Result<SkillHeader, SkillError> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let mut lines = text.lines();
    if lines.next().map(str::trim_end) != Some("---") {
        return Err(fail(
            1,
            "SKILL.md must start with a `---` line opening its YAML front matter",
        ));
    }
    let mut yaml = String::new();
    let mut closing = None;
    for (index, line) in lines.enumerate() {
        if line.trim_end() == "---" {
            closing = Some(index + 2);
            break;
        }
        yaml.push_str(line);
        yaml.push('\n');
    }
    let Some(closing) = closing else {
        return Err(fail(1, "the front matter is not closed by a `---` line"));
    };
    let raw: Raw = serde_norway::from_str(&yaml).map_err(|e| {
        // The YAML starts on the file's second line.
        let line = e.location().map_or(1, |l| l.line() + 1);
        let message = e.to_string();
        let message = message
            .find(" at line ")
            .map_or(message.as_str(), |i| &message[..i]);
        fail(line, format!("invalid YAML: {message}"))
    })?;
    let line_of = |key: &str| {
        yaml.lines()
            .position(|l| l.starts_with(&format!("{key}:")))
            .map_or(1, |i| i + 2)
    };
    let name = text_field(raw.name, "name", line_of("name"))?;
    let description = text_field(raw.description, "description", line_of("description"))?;
    if name.chars().count() > MAX_NAME_CHARS
        || !name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
        || name.starts_with('-')
        || name.ends_with('-')
    {
        return Err(fail(
            line_of("name"),
            format!(
                "name `{name}`: use at most {MAX_NAME_CHARS} lowercase letters, digits and \
                 hyphens (not first or last)"
            ),
        ));
    }
    if description.chars().count() > MAX_DESCRIPTION_CHARS {
        return Err(fail(
            line_of("description"),
            format!("description: at most {MAX_DESCRIPTION_CHARS} characters"),
        ));
    }
    Ok(SkillHeader {
        name,
        description,
        body_line: closing + 1,
    })
}

fn text_field(
    value: Option<serde_norway::Value>,
    key: &str,
    line: usize,
) -> Result<String, SkillError> {
    match value {
        None | Some(serde_norway::Value::Null) => {
            Err(fail(line, format!("the front matter has no `{key}`")))
        }
        Some(serde_norway::Value::String(s)) if !s.trim().is_empty() => {
            Ok(s.split_whitespace().collect::<Vec<_>>().join(" "))
        }
        Some(serde_norway::Value::String(_)) => Err(fail(line, format!("`{key}` is empty"))),
        Some(_) => Err(fail(line, format!("`{key}` must be a string"))),
    }
}

#[cfg(test)]
mod tests {

    use super::*;

    #[test]
    fn reads_name_and_description() {
        let text = "---\nname: pdf-tools\ndescription: >\n  Fill PDF forms.\n  Use for PDFs.\nlicense: MIT\n---\n# Body\n";
        let header = parse_header(text).unwrap();
        assert_eq!(header.name, "pdf-tools");
        assert_eq!(header.description, "Fill PDF forms. Use for PDFs.");
        assert_eq!(header.body_line, 8);
    }

    #[test]
    fn errors_name_the_line() {
        let missing = parse_header("---\nname: x\n---\nbody").unwrap_err();
        assert_eq!(missing.line, 1);
        assert!(missing.message.contains("description"), "{missing}");

        let bad_yaml = parse_header("---\nname: x\ndescription: [unclosed\n---\n").unwrap_err();
        assert!(bad_yaml.line >= 3, "{bad_yaml}");

        let bad_name = parse_header("---\ndescription: d\nname: Has Spaces\n---\n").unwrap_err();
        assert_eq!(bad_name.line, 3, "{bad_name}");

        let not_text = parse_header("---\nname: x\ndescription: 42\n---\n").unwrap_err();
        assert_eq!(not_text.line, 3, "{not_text}");

        assert_eq!(parse_header("# no front matter").unwrap_err().line, 1);
        assert_eq!(parse_header("---\nname: x\n").unwrap_err().line, 1);
    }
}

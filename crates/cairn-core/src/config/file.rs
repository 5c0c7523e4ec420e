//! Reading config.toml text: every key is checked against the registry and
//! every problem is reported with the file, line and dotted key at fault.

use std::collections::BTreeMap;
use std::path::Path;

use toml::Spanned;
use toml::de::{DeTable, DeValue};

use super::redact::{redact_json, redact_value};
use super::registry::{self, Kind};
use super::{ConfigError, Value};

/// A scalar value read from the file, with the line it is on.
#[derive(Debug, Clone, PartialEq)]
pub struct FileValue {
    /// The value.
    pub value: Value,
    /// 1-based line of the key.
    pub line: usize,
}

/// A free-form table read from the file, kept whole for the crate that owns its shape.
/// Its `Debug` output hides secret-looking fields (a fallback's `api_key`).
#[derive(Clone, PartialEq)]
pub struct Section {
    /// The table (or array) as JSON.
    pub value: serde_json::Value,
    /// 1-based line where it starts.
    pub line: usize,
}

/// Everything config.toml set. Its `Debug` output hides secrets.
#[derive(Clone, Default, PartialEq)]
pub struct FileSettings {
    /// Scalar settings by dotted key.
    pub values: BTreeMap<&'static str, FileValue>,
    /// Free-form sections by dotted key.
    pub sections: BTreeMap<&'static str, Section>,
}

impl std::fmt::Debug for Section {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Section")
            .field("value", &redact_json(&self.value))
            .field("line", &self.line)
            .finish()
    }
}

impl std::fmt::Debug for FileSettings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let values: BTreeMap<_, _> = self
            .values
            .iter()
            .map(|(key, fv)| (*key, (redact_value(key, &fv.value), fv.line)))
            .collect();
        f.debug_struct("FileSettings")
            .field("values", &values)
            .field("sections", &self.sections)
            .finish()
    }
}

/// Parses config.toml text; `path` is only used in messages.
pub fn parse(path: &Path, text: &str) -> Result<FileSettings, Vec<ConfigError>> {
    let file = path.display().to_string();
    let root = DeTable::parse(text).map_err(|err| {
        let (line, column) = err
            .span()
            .map(|s| line_col(text, s.start))
            .unwrap_or((1, 1));
        vec![ConfigError::Syntax {
            file: file.clone(),
            line,
            column,
            message: err.message().trim().to_string(),
        }]
    })?;
    let mut walker = Walker {
        file,
        text,
        out: FileSettings::default(),
        errors: Vec::new(),
    };
    walker.table("", root.get_ref());
    if walker.errors.is_empty() {
        Ok(walker.out)
    } else {
        Err(walker.errors)
    }
}

struct Walker<'a> {
    file: String,
    text: &'a str,
    out: FileSettings,
    errors: Vec<ConfigError>,
}

impl Walker<'_> {
    fn table(&mut self, prefix: &str, table: &DeTable<'_>) {
        for (key, value) in table {
            let path = if prefix.is_empty() {
                key.get_ref().to_string()
            } else {
                format!("{prefix}.{}", key.get_ref())
            };
            let line = self.line(key.span().start);
            if let Some(section) = registry::SECTIONS.iter().find(|s| **s == path) {
                self.out.sections.insert(
                    section,
                    Section {
                        value: to_json(value),
                        line,
                    },
                );
                continue;
            }
            match value.get_ref() {
                DeValue::Table(inner) if is_known_prefix(&path) => self.table(&path, inner),
                _ => self.leaf(&path, line, value),
            }
        }
    }

    fn leaf(&mut self, path: &str, line: usize, value: &Spanned<DeValue<'_>>) {
        if let Some((_, advice)) = registry::REMOVED.iter().find(|(key, _)| *key == path) {
            self.errors.push(ConfigError::Removed {
                file: self.file.clone(),
                line,
                key: path.to_string(),
                advice,
            });
            return;
        }
        let Some(def) = registry::find(path) else {
            self.errors.push(ConfigError::UnknownKey {
                file: self.file.clone(),
                line,
                key: path.to_string(),
                suggestion: registry::closest(path).map(str::to_string),
            });
            return;
        };
        let line = self.line(value.span().start);
        match convert(def.kind, value.get_ref()) {
            Some(v) => {
                self.out
                    .values
                    .insert(def.key, FileValue { value: v, line });
            }
            None => self.errors.push(ConfigError::WrongType {
                file: self.file.clone(),
                line,
                key: path.to_string(),
                expected: def.kind.expected(),
                found: describe(value.get_ref()),
            }),
        }
    }

    fn line(&self, offset: usize) -> usize {
        line_col(self.text, offset).0
    }
}

fn is_known_prefix(path: &str) -> bool {
    let dotted = format!("{path}.");
    registry::SETTINGS
        .iter()
        .any(|d| d.key.starts_with(&dotted))
        || registry::SECTIONS.iter().any(|s| s.starts_with(&dotted))
}

fn convert(kind: Kind, value: &DeValue<'_>) -> Option<Value> {
    match (kind, value) {
        (Kind::Bool, DeValue::Boolean(b)) => Some(Value::Bool(*b)),
        (Kind::UInt, DeValue::Integer(i)) => u64::from_str_radix(i.as_str(), i.radix())
            .ok()
            .map(Value::UInt),
        (Kind::Text | Kind::Zone, DeValue::String(s)) => Some(Value::Text(s.to_string())),
        (Kind::List, DeValue::Array(items)) => items
            .iter()
            .map(|item| item.get_ref().as_str().map(str::to_string))
            .collect::<Option<Vec<_>>>()
            .map(Value::List),
        _ => None,
    }
}

fn describe(value: &DeValue<'_>) -> String {
    match value {
        DeValue::String(s) => format!("string \"{s}\""),
        DeValue::Integer(i) => format!("integer {i}"),
        DeValue::Float(f) => format!("float {f}"),
        DeValue::Boolean(b) => format!("boolean {b}"),
        DeValue::Datetime(d) => format!("datetime {d}"),
        DeValue::Array(_) => "an array".to_string(),
        DeValue::Table(_) => "a table".to_string(),
    }
}

fn to_json(value: &Spanned<DeValue<'_>>) -> serde_json::Value {
    use serde_json::Value as J;
    match value.get_ref() {
        DeValue::String(s) => J::String(s.to_string()),
        DeValue::Integer(i) => i64::from_str_radix(i.as_str(), i.radix())
            .map(J::from)
            .unwrap_or_else(|_| J::String(i.to_string())),
        DeValue::Float(f) => f
            .as_str()
            .parse::<f64>()
            .ok()
            .and_then(serde_json::Number::from_f64)
            .map_or_else(|| J::String(f.to_string()), J::Number),
        DeValue::Boolean(b) => J::Bool(*b),
        DeValue::Datetime(d) => J::String(d.to_string()),
        DeValue::Array(items) => J::Array(items.iter().map(to_json).collect()),
        DeValue::Table(t) => J::Object(
            t.iter()
                .map(|(k, v)| (k.get_ref().to_string(), to_json(v)))
                .collect(),
        ),
    }
}

/// 1-based line and column of a byte offset.
pub fn line_col(text: &str, offset: usize) -> (usize, usize) {
    let before = &text[..offset.min(text.len())];
    let line = before.matches('\n').count() + 1;
    let column = before.len() - before.rfind('\n').map_or(0, |i| i + 1) + 1;
    (line, column)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse_ok(text: &str) -> FileSettings {
        parse(Path::new("config.toml"), text).unwrap()
    }

    fn parse_err(text: &str) -> Vec<String> {
        parse(Path::new("config.toml"), text)
            .unwrap_err()
            .iter()
            .map(ToString::to_string)
            .collect()
    }

    #[test]
    fn reads_known_keys_with_lines() {
        let s = parse_ok(
            "[heartbeat]\nenabled = false\ninterval_secs = 60\n\n[agent]\nname = \"pebble\"\n",
        );
        assert_eq!(
            s.values["heartbeat.enabled"],
            FileValue {
                value: Value::Bool(false),
                line: 2
            }
        );
        assert_eq!(s.values["heartbeat.interval_secs"].value, Value::UInt(60));
        assert_eq!(s.values["heartbeat.interval_secs"].line, 3);
        assert_eq!(s.values["agent.name"].value, Value::Text("pebble".into()));
    }

    #[test]
    fn dotted_keys_and_inline_tables_work() {
        let s = parse_ok("heartbeat.interval_secs = 5\nllm = { model = \"m\" }\n");
        assert_eq!(s.values["heartbeat.interval_secs"].value, Value::UInt(5));
        assert_eq!(s.values["llm.model"].value, Value::Text("m".into()));
    }

    #[test]
    fn syntax_error_names_file_and_line() {
        let errs = parse_err("[heartbeat]\ninterval_secs = = 3\n");
        assert_eq!(errs.len(), 1);
        assert!(errs[0].starts_with("config.toml:2:"), "{}", errs[0]);
    }

    #[test]
    fn wrong_type_names_file_line_and_key() {
        let errs = parse_err("[heartbeat]\n\ninterval_secs = \"soon\"\n");
        assert_eq!(errs.len(), 1);
        let e = &errs[0];
        assert!(e.starts_with("config.toml:3:"), "{e}");
        assert!(e.contains("heartbeat.interval_secs"), "{e}");
        assert!(
            e.contains("non-negative integer") && e.contains("\"soon\""),
            "{e}"
        );
    }

    #[test]
    fn negative_integer_is_a_type_error() {
        let errs = parse_err("heartbeat.interval_secs = -5\n");
        assert!(errs[0].contains("integer -5"), "{}", errs[0]);
    }

    #[test]
    fn unknown_keys_are_errors_with_suggestions_and_all_are_reported() {
        let errs = parse_err("[heartbeat]\nintervall_secs = 3\n[nothing]\nx = 1\n");
        assert_eq!(errs.len(), 2, "{errs:?}");
        assert!(
            errs[0].contains("config.toml:2:")
                && errs[0].contains("did you mean `heartbeat.interval_secs`"),
            "{}",
            errs[0]
        );
        assert!(
            errs[1].contains("config.toml:3:") && errs[1].contains("`nothing`"),
            "{}",
            errs[1]
        );
    }

    #[test]
    fn a_removed_key_is_refused_with_what_to_do_instead() {
        let errs = parse_err("[routines]\nmax_concurrent = 2\nevent_cache_refresh_secs = 60\n");
        assert_eq!(errs.len(), 1, "{errs:?}");
        assert_eq!(
            errs[0],
            "config.toml:3: `routines.event_cache_refresh_secs` was removed: routine changes \
             reach the engine at once through the store's change signal; delete the line"
        );
    }

    #[test]
    fn sections_pass_through_whole() {
        let s = parse_ok("[llm.prices.\"gpt-4o\"]\ninput = 2500000\noutput = 10000000\n");
        let p = &s.sections["llm.prices"];
        assert_eq!(p.line, 1);
        assert_eq!(p.value["gpt-4o"]["input"], 2_500_000);
    }

    #[test]
    fn line_col_counts_from_one() {
        assert_eq!(line_col("ab\ncd", 0), (1, 1));
        assert_eq!(line_col("ab\ncd", 4), (2, 2));
    }
}

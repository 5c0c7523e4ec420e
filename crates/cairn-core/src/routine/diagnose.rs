//! Every shape problem of a routine file, each at its line. serde stops at
//! its first problem, and inside `trigger:` and `action:` (internally
//! tagged enums, read from a buffer) it has no position at all, so a typo
//! on line 5 came out as one problem "at line 1". Here the text is read as
//! a plain tree, deserialized with the path of each problem tracked, and
//! the field at fault is taken out before trying again: every unknown
//! field, wrong type and unknown variant is found, each located by its
//! path ([`line_of`]).

use serde_json::Value;

use super::{RoutineFileError, RoutineSpec, SpecFormat, line_of};

/// Most problems reported for one file (each takes one more try).
const MAX_PROBLEMS: usize = 50;

/// What is wrong with a spec's shape: every problem found, and the spec
/// that is left once the fields at fault are taken out (when one is), so
/// its other checks can run too.
#[derive(Debug, Clone)]
pub struct SpecProblems {
    /// Every problem, in the order found, each with its line when known.
    pub problems: Vec<RoutineFileError>,
    /// The spec without the fields at fault, if that much is a spec.
    pub rest: Option<Box<RoutineSpec>>,
    /// The parts of `rest` that stand in for a `trigger` or `action` taken
    /// out (a daily cron, a notification): what its checks find under
    /// them is not the file's.
    pub stand_ins: Vec<String>,
}

/// What stands in for a required table taken out, so the rest can be read.
fn stand_in(field: &str) -> Option<Value> {
    match field {
        "trigger" => Some(serde_json::json!({"type": "cron", "schedule": "0 0 * * *"})),
        "action" => Some(serde_json::json!({"type": "notification", "message": "-"})),
        _ => None,
    }
}

impl RoutineSpec {
    /// [`RoutineSpec::parse`], reporting every shape problem, each at its
    /// line and named by its path (`trigger.shedule: unknown field …`).
    pub fn parse_all(text: &str, format: SpecFormat) -> Result<RoutineSpec, SpecProblems> {
        let first = match Self::parse(text, format) {
            Ok(spec) => return Ok(spec),
            Err(e) => e,
        };
        let tree: Result<Value, String> = match format {
            SpecFormat::Yaml => serde_norway::from_str(text).map_err(|e| e.to_string()),
            SpecFormat::Json => serde_json::from_str(text).map_err(|e| e.to_string()),
        };
        // Not even a tree (a syntax error): the parser's own report has its position.
        let Ok(mut tree) = tree else {
            return Err(SpecProblems {
                problems: vec![first],
                rest: None,
                stand_ins: Vec::new(),
            });
        };
        let mut problems = Vec::new();
        // Fields taken out, and the tables where an unknown field was found:
        // what goes missing because of them was said already.
        let mut removed: Vec<String> = Vec::new();
        let mut misspelt_in: Vec<String> = Vec::new();
        let mut stand_ins: Vec<String> = Vec::new();
        let rest = loop {
            if problems.len() >= MAX_PROBLEMS {
                break None;
            }
            let error = match serde_path_to_error::deserialize::<_, RoutineSpec>(&tree) {
                Ok(rest) => break Some(Box::new(rest)),
                Err(e) => e,
            };
            let path = match error.path().to_string() {
                root if root == "." => String::new(),
                path => path,
            };
            let message = error.into_inner().to_string();
            let cut = if let Some(field) = quoted_after(&message, "missing field `") {
                let said = removed.contains(&join(&path, field)) || misspelt_in.contains(&path);
                if let (true, true, Some(value), Value::Object(top)) =
                    (said, path.is_empty(), stand_in(field), &mut tree)
                    && !stand_ins.iter().any(|s| s == field)
                {
                    top.insert(field.to_string(), value);
                    stand_ins.push(field.to_string());
                    continue;
                }
                if !said {
                    problems.push(problem(text, format, &path, &message));
                }
                path
            } else {
                let (shown, cut) = match quoted_after(&message, "unknown field `") {
                    Some(field) => {
                        let at = if path.ends_with(field) {
                            path
                        } else {
                            join(&path, field)
                        };
                        misspelt_in.push(parent_of(&at).to_string());
                        (at.clone(), at)
                    }
                    // An unknown `type:` makes the whole table unreadable.
                    None if message.starts_with("unknown variant") && path.ends_with("type") => {
                        (path.clone(), parent_of(&path).to_string())
                    }
                    None => (path.clone(), path),
                };
                problems.push(problem(text, format, &shown, &message));
                cut
            };
            if cut.is_empty() || !remove(&mut tree, &cut) {
                break None;
            }
            removed.push(cut);
        };
        if problems.is_empty() {
            // The tree reads where the text did not: keep the parser's report.
            problems.push(first);
        }
        problems.sort_by_key(|p| p.line.unwrap_or(0));
        Err(SpecProblems {
            problems,
            rest,
            stand_ins,
        })
    }
}

/// `a.b` of `a.b.c`; empty at the top.
fn parent_of(path: &str) -> &str {
    path.rfind(['.', '[']).map_or("", |i| &path[..i])
}

/// One problem at `path`'s line (the message names the path).
fn problem(text: &str, format: SpecFormat, path: &str, message: &str) -> RoutineFileError {
    let message = super::file::strip_location(message);
    RoutineFileError {
        line: line_of(text, format, path),
        column: None,
        message: if path.is_empty() {
            message
        } else {
            format!("{path}: {message}")
        },
    }
}

/// The text between `start` and the next backquote.
fn quoted_after<'a>(message: &'a str, start: &str) -> Option<&'a str> {
    let rest = &message[message.find(start)? + start.len()..];
    Some(&rest[..rest.find('`')?])
}

fn join(path: &str, field: &str) -> String {
    if path.is_empty() {
        field.to_string()
    } else {
        format!("{path}.{field}")
    }
}

/// The segments of a path: `a.b[2].c` → `a`, `b`, `[2]`, `c`.
fn segments(path: &str) -> Vec<&str> {
    let mut out = Vec::new();
    for part in path.split('.') {
        match part.find('[') {
            Some(i) => {
                if i > 0 {
                    out.push(&part[..i]);
                }
                out.extend(part[i..].split_inclusive(']'));
            }
            None => out.push(part),
        }
    }
    out
}

/// The value at `path` in `tree`.
fn at_mut<'a>(tree: &'a mut Value, path: &[&str]) -> Option<&'a mut Value> {
    path.iter().try_fold(tree, |node, segment| {
        match segment.strip_prefix('[').and_then(|s| s.strip_suffix(']')) {
            Some(index) => node.get_mut(index.parse::<usize>().ok()?),
            None => node.get_mut(*segment),
        }
    })
}

/// Takes the field (or list item) at `path` out of `tree`; false when there
/// is none to take.
fn remove(tree: &mut Value, path: &str) -> bool {
    let segments = segments(path);
    let Some((last, parent)) = segments.split_last() else {
        return false;
    };
    match (at_mut(tree, parent), last.strip_prefix('[')) {
        (Some(Value::Object(map)), None) => map.remove(*last).is_some(),
        (Some(Value::Array(items)), Some(index)) => {
            match index.trim_end_matches(']').parse::<usize>() {
                Ok(i) if i < items.len() => {
                    items.remove(i);
                    true
                }
                _ => false,
            }
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn problems(text: &str) -> Vec<String> {
        let found = RoutineSpec::parse_all(text, SpecFormat::Yaml).unwrap_err();
        found
            .problems
            .iter()
            .map(|p| format!("{}: {}", p.line.unwrap_or(0), p.message))
            .collect()
    }

    #[test]
    fn every_unknown_field_is_reported_at_its_line() {
        let found = problems(
            "name: morning\ndescription: hi\ntrigger:\n  type: cron\n  shedule: \"0 9 * * *\"\n\
             action:\n  type: lightweight\n  promt: Summarise\n",
        );
        // In the file's order; what the typos left out is not said again as missing.
        assert_eq!(found.len(), 2, "{found:?}");
        assert!(
            found[0]
                .starts_with("5: trigger.shedule: unknown field `shedule`, expected `schedule`"),
            "{found:?}"
        );
        assert!(
            found[1].starts_with("8: action.promt: unknown field `promt`"),
            "{found:?}"
        );
    }

    #[test]
    fn a_wrong_type_and_an_unknown_variant_are_each_at_their_line() {
        let found = problems(
            "name: n\ntrigger:\n  type: cron\n  schedule: \"0 9 * * *\"\naction:\n  type: lightweigt\n  prompt: p\n\
             guardrails:\n  max_concurrent: many\n",
        );
        assert_eq!(found.len(), 2, "{found:?}");
        assert!(
            found[0].starts_with("6: action.type: unknown variant `lightweigt`"),
            "{found:?}"
        );
        assert!(
            found[1].starts_with("9: guardrails.max_concurrent: invalid type"),
            "{found:?}"
        );
    }

    #[test]
    fn a_syntax_error_keeps_the_parsers_position() {
        let found = RoutineSpec::parse_all("name: [unclosed\n", SpecFormat::Yaml).unwrap_err();
        assert_eq!(found.problems.len(), 1);
        assert!(found.problems[0].line.is_some(), "{:?}", found.problems);
        assert!(found.rest.is_none());
    }

    #[test]
    fn what_is_left_of_a_spec_is_kept_for_its_other_checks() {
        let found = RoutineSpec::parse_all(
            "name: n\ncolour: red\ntrigger:\n  type: cron\n  schedule: \"0 9 * * *\"\naction:\n  type: lightweight\n  prompt: p\n",
            SpecFormat::Yaml,
        )
        .unwrap_err();
        assert_eq!(found.problems.len(), 1, "{:?}", found.problems);
        assert_eq!(found.problems[0].line, Some(2));
        assert_eq!(found.rest.map(|s| s.name).as_deref(), Some("n"));
    }

    #[test]
    fn paths_split_into_keys_and_indices() {
        assert_eq!(segments("a.b[2].c"), ["a", "b", "[2]", "c"]);
        let mut tree = serde_json::json!({"a": {"b": [1, 2, 3]}});
        assert!(remove(&mut tree, "a.b[1]"));
        assert_eq!(tree, serde_json::json!({"a": {"b": [1, 3]}}));
        assert!(!remove(&mut tree, "a.x"));
    }
}

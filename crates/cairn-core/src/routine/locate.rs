//! Finding the line a field path (`guardrails.max_concurrent`, `action.context_paths[1]`)
//! is written on, so `validate()` problems can point into the file.
//!
//! Neither parser keeps positions once a value is deserialized, so this is a plain
//! scan of the text: YAML by indentation, JSON by quoted keys. It understands the
//! block style people write by hand; for anything it cannot follow it returns the
//! line of the deepest part of the path it did find (or `None`).

use super::SpecFormat;

/// The 1-based line `path` is written on in `text`, as far as a simple scan can tell.
pub fn line_of(text: &str, format: SpecFormat, path: &str) -> Option<usize> {
    let segments: Vec<(&str, Option<usize>)> = path.split('.').map(split_index).collect();
    match format {
        SpecFormat::Yaml => yaml_line(text, &segments),
        SpecFormat::Json => json_line(text, &segments),
    }
}

/// `context_paths[1]` → (`context_paths`, Some(1)).
fn split_index(segment: &str) -> (&str, Option<usize>) {
    match segment.strip_suffix(']').and_then(|s| s.split_once('[')) {
        Some((key, index)) => (key, index.parse().ok()),
        None => (segment, None),
    }
}

fn indent_of(line: &str) -> usize {
    line.len() - line.trim_start().len()
}

fn is_content(line: &str) -> bool {
    let t = line.trim_start();
    !t.is_empty() && !t.starts_with('#') && t != "---"
}

fn yaml_line(text: &str, segments: &[(&str, Option<usize>)]) -> Option<usize> {
    let lines: Vec<&str> = text.lines().collect();
    // The block being searched: lines[start..end], children of a line with `parent` indent.
    let (mut start, mut end, mut parent) = (0, lines.len(), None::<usize>);
    let mut found = None;
    for (key, index) in segments {
        let child = lines[start..end]
            .iter()
            .find(|l| is_content(l))
            .map(|l| indent_of(l))?;
        if parent.is_some_and(|p| child <= p) {
            return found;
        }
        let prefix = format!("{key}:");
        let at = (start..end)
            .find(|&i| indent_of(lines[i]) == child && lines[i].trim_start().starts_with(&prefix));
        let Some(at) = at else { return found };
        found = Some(at + 1);
        let block_end = (at + 1..end)
            .find(|&i| is_content(lines[i]) && indent_of(lines[i]) <= child)
            .unwrap_or(end);
        (start, end, parent) = (at + 1, block_end, Some(child));
        if let Some(index) = index {
            let items: Vec<usize> = (start..end)
                .filter(|&i| is_content(lines[i]) && lines[i].trim_start().starts_with('-'))
                .collect();
            let item_indent = items.first().map(|&i| indent_of(lines[i]));
            let item = items
                .into_iter()
                .filter(|&i| Some(indent_of(lines[i])) == item_indent)
                .nth(*index);
            let Some(item) = item else { return found };
            found = Some(item + 1);
            start = item + 1;
        }
    }
    found
}

fn json_line(text: &str, segments: &[(&str, Option<usize>)]) -> Option<usize> {
    let line_at = |pos: usize| text[..pos].matches('\n').count() + 1;
    let mut pos = 0;
    let mut found = None;
    for (key, index) in segments {
        let needle = format!("\"{key}\"");
        let Some(rel) = text[pos..].find(&needle) else {
            return found;
        };
        pos += rel + needle.len();
        found = Some(line_at(pos));
        if let Some(index) = index {
            let Some(open) = text[pos..].find('[') else {
                return found;
            };
            match nth_element(&text[pos + open + 1..], *index) {
                Some(offset) => {
                    pos += open + 1 + offset;
                    found = Some(line_at(pos));
                }
                None => return found,
            }
        }
    }
    found
}

/// Byte offset of the `n`th element of a JSON array whose `[` is just before `body`.
fn nth_element(body: &str, n: usize) -> Option<usize> {
    let (mut depth, mut in_string, mut escaped, mut count) = (0usize, false, false, 0usize);
    let mut element_start = None;
    for (i, ch) in body.char_indices() {
        if element_start.is_none() && !ch.is_whitespace() {
            if ch == ']' && depth == 0 {
                return None;
            }
            element_start = Some(i);
            if count == n {
                return Some(i);
            }
        }
        if in_string {
            match (escaped, ch) {
                (true, _) => escaped = false,
                (false, '\\') => escaped = true,
                (false, '"') => in_string = false,
                _ => {}
            }
            continue;
        }
        match ch {
            '"' => in_string = true,
            '[' | '{' => depth += 1,
            ']' | '}' if depth == 0 => return None,
            ']' | '}' => depth -= 1,
            ',' if depth == 0 => {
                count += 1;
                element_start = None;
            }
            _ => {}
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    const YAML: &str = "# a routine\nname: x\ntrigger:\n  type: cron\n  schedule: \"nope\"\naction:\n  type: lightweight\n  prompt: hi\n  context_paths:\n    - a.md\n    - /etc/passwd\nguardrails:\n  max_concurrent: 0\n";

    #[test]
    fn yaml_paths_map_to_their_lines() {
        let at = |p| line_of(YAML, SpecFormat::Yaml, p);
        assert_eq!(at("name"), Some(2));
        assert_eq!(at("trigger.schedule"), Some(5));
        assert_eq!(at("action.context_paths[1]"), Some(11));
        assert_eq!(at("guardrails.max_concurrent"), Some(13));
        // Not written: the nearest part that is.
        assert_eq!(at("guardrails.timeout"), Some(12));
        assert_eq!(at("timezone"), None);
    }

    #[test]
    fn a_key_nested_elsewhere_is_not_taken_for_a_top_level_one() {
        let yaml = "trigger:\n  type: event\n  pattern: \"(\"\nname: n\n";
        assert_eq!(line_of(yaml, SpecFormat::Yaml, "name"), Some(4));
        assert_eq!(line_of(yaml, SpecFormat::Yaml, "trigger.pattern"), Some(3));
    }

    #[test]
    fn json_paths_map_to_their_lines() {
        let json = "{\n  \"name\": \"x\",\n  \"action\": {\n    \"type\": \"lightweight\",\n    \"context_paths\": [\n      \"a,b\",\n      \"/etc\"\n    ]\n  },\n  \"guardrails\": { \"max_concurrent\": 0 }\n}";
        let at = |p| line_of(json, SpecFormat::Json, p);
        assert_eq!(at("name"), Some(2));
        assert_eq!(at("action.context_paths[1]"), Some(7));
        assert_eq!(at("guardrails.max_concurrent"), Some(10));
    }
}

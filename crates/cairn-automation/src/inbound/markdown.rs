//! The Markdown answers are written in, read the same way for every app
//! (each then renders it in its own markup): fenced code blocks apart
//! from prose, `# headings`, and paired markers such as `**` or `` ` ``.

/// A stretch of an answer.
#[derive(Debug, PartialEq, Eq)]
pub enum Block<'a> {
    /// Text outside fenced blocks.
    Prose(&'a str),
    /// A fenced block: as written, fences included, and its code (the
    /// language tag and the trailing newlines left out).
    Fenced {
        /// The block as written.
        written: &'a str,
        /// The code inside.
        code: &'a str,
    },
}

/// `text` cut into prose and fenced blocks, in order; a fence without
/// its closing one is prose.
pub fn blocks(text: &str) -> Vec<Block<'_>> {
    let mut out = Vec::new();
    let mut rest = text;
    while let Some(open) = rest.find("```") {
        let after = &rest[open + 3..];
        let Some(close) = after.find("```") else {
            break;
        };
        if open > 0 {
            out.push(Block::Prose(&rest[..open]));
        }
        let block = &after[..close];
        // The language tag on the fence's line is not code.
        let code = match block.split_once('\n') {
            Some((lang, body)) if !lang.contains(' ') => body,
            _ => block,
        };
        out.push(Block::Fenced {
            written: &rest[open..open + 3 + close + 3],
            code: code.trim_end_matches('\n'),
        });
        rest = &after[close + 3..];
    }
    if !rest.is_empty() || out.is_empty() {
        out.push(Block::Prose(rest));
    }
    out
}

/// The title of a `# heading` line (one to six `#`, a space, some text);
/// `None` for any other line.
pub fn heading(line: &str) -> Option<&str> {
    let trimmed = line.trim_start();
    let title = trimmed.trim_start_matches('#');
    let level = trimmed.len() - title.len();
    let title = title.strip_prefix(' ')?.trim();
    ((1..=6).contains(&level) && !title.is_empty()).then_some(title)
}

/// `text` cut at paired `marker`s (`true` for what they enclose). A pair
/// encloses text on one line that neither starts nor ends with a space
/// (so `2 * 3 * 4` and a list's `* ` stay); an unpaired marker stays plain.
pub fn pairs<'a>(text: &'a str, marker: &str) -> Vec<(bool, &'a str)> {
    let mut out = Vec::new();
    let mut rest = text;
    while let Some(open) = rest.find(marker) {
        let after = &rest[open + marker.len()..];
        let close = after.find(marker).filter(|&close| {
            let inner = &after[..close];
            close > 0
                && !inner.contains('\n')
                && !inner.starts_with(char::is_whitespace)
                && !inner.ends_with(char::is_whitespace)
        });
        match close {
            Some(close) => {
                out.push((false, &rest[..open]));
                out.push((true, &after[..close]));
                rest = &after[close + marker.len()..];
            }
            None => {
                out.push((false, &rest[..open + marker.len()]));
                rest = after;
            }
        }
    }
    out.push((false, rest));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fenced_blocks_are_apart_from_prose_and_lose_their_language_tag() {
        assert_eq!(
            blocks("see:\n```rust\nfn a() {}\n```\ndone"),
            [
                Block::Prose("see:\n"),
                Block::Fenced {
                    written: "```rust\nfn a() {}\n```",
                    code: "fn a() {}"
                },
                Block::Prose("\ndone"),
            ]
        );
        assert_eq!(blocks("```open"), [Block::Prose("```open")]);
        assert_eq!(blocks(""), [Block::Prose("")]);
        assert_eq!(
            blocks("```one line```"),
            [Block::Fenced {
                written: "```one line```",
                code: "one line"
            }]
        );
    }

    #[test]
    fn headings_have_one_to_six_marks_a_space_and_a_title() {
        assert_eq!(heading("# Title "), Some("Title"));
        assert_eq!(heading("  ### Deep"), Some("Deep"));
        assert_eq!(heading("####### seven"), None);
        assert_eq!(heading("#hashtag"), None);
        assert_eq!(heading("# "), None);
        assert_eq!(heading("plain"), None);
    }

    #[test]
    fn only_tight_pairs_on_one_line_are_marked() {
        assert_eq!(
            pairs("a **b** c", "**"),
            [(false, "a "), (true, "b"), (false, " c")]
        );
        assert_eq!(
            pairs("2 * 3 * 4", "*"),
            [(false, "2 *"), (false, " 3 *"), (false, " 4")]
        );
        assert_eq!(
            pairs("**a\nb**", "**"),
            [(false, "**"), (false, "a\nb**"), (false, "")]
        );
    }
}

//! Answers as WhatsApp shows them. WhatsApp has its own markers:
//! `*bold*`, `_italic_`, `~strike~`, ```` ``` ```` monospace and
//! `` `code` ``; the Markdown the model writes becomes them (`**bold**`
//! and `__bold__` to `*bold*`, `*italic*` to `_italic_`, `~~x~~` to `~x~`,
//! a `# heading` to a bold line). Code is left as written. Markers without
//! their pair stay as they are. Every change shortens the text or keeps
//! its length, so a part split at the limit stays within it.

use crate::inbound::markdown::{Block, blocks, heading, pairs};

/// WhatsApp's limit on a text message's body.
pub const MESSAGE_LIMIT: usize = 4_096;

/// One part in WhatsApp's markup.
pub fn whatsapp(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for block in blocks(text) {
        match block {
            Block::Prose(text) => out.push_str(&lines(text)),
            // Nothing inside a fenced block is formatted.
            Block::Fenced { code, .. } => {
                out.push_str("```");
                out.push_str(code);
                out.push_str("```");
            }
        }
    }
    out
}

/// Headings, then the inline markers, line by line.
fn lines(text: &str) -> String {
    let lines: Vec<String> = text
        .split('\n')
        .map(|line| match heading(line) {
            Some(title) => format!("*{}*", title.replace("**", "")),
            None => inline(line),
        })
        .collect();
    lines.join("\n")
}

/// Inline code kept; elsewhere the Markdown markers become WhatsApp's.
fn inline(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for (code, piece) in pairs(text, "`") {
        if code {
            out.push('`');
            out.push_str(piece);
            out.push('`');
            continue;
        }
        // `__bold__` is `**bold**`, at the same length.
        let piece = pairs_to(piece, "__", "**");
        for (bold, piece) in pairs(&piece, "**") {
            if bold {
                out.push('*');
                out.push_str(&italics(piece));
                out.push('*');
            } else {
                out.push_str(&italics(piece));
            }
        }
    }
    out
}

/// `*italic*` to `_italic_`, `~~x~~` to `~x~`.
fn italics(text: &str) -> String {
    let text = pairs_to(text, "~~", "~");
    pairs_to(&text, "*", "_")
}

/// `text` with each paired `marker` replaced by `with`.
fn pairs_to(text: &str, marker: &str, with: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for (marked, piece) in pairs(text, marker) {
        if marked {
            out.push_str(with);
            out.push_str(piece);
            out.push_str(with);
        } else {
            out.push_str(piece);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markdown_becomes_whatsapps_markers_and_code_is_left_alone() {
        assert_eq!(whatsapp("say **hi** now"), "say *hi* now");
        assert_eq!(
            whatsapp("__bold__ and *it* and _it_"),
            "*bold* and _it_ and _it_"
        );
        assert_eq!(whatsapp("~~gone~~"), "~gone~");
        assert_eq!(whatsapp("**bold _and it_**"), "*bold _and it_*");
        assert_eq!(whatsapp("## Plan\nstep"), "*Plan*\nstep");
        assert_eq!(whatsapp("#hashtag"), "#hashtag");
        assert_eq!(
            whatsapp("run `a **b**` then:\n```sh\nls **x**\n```"),
            "run `a **b**` then:\n```ls **x**```"
        );
        // Unpaired or spaced markers are shown as typed.
        assert_eq!(whatsapp("2 * 3 * 4 and 2 ** 3"), "2 * 3 * 4 and 2 ** 3");
        assert_eq!(whatsapp("* one\n* two"), "* one\n* two");
        assert_eq!(whatsapp("```open"), "```open");
        for text in ["**a** __b__ ~~c~~ # d", "# **x**", "```rust\ncode\n```"] {
            assert!(
                whatsapp(text).chars().count() <= text.chars().count(),
                "{text}"
            );
        }
    }
}

//! Answers as Telegram shows them: split into messages of at most 4,096
//! characters (UTF-16 units, as Telegram counts) by [`crate::inbound::split`];
//! each part rendered as Telegram HTML, where `<`,
//! `>` and `&` are escaped and the Markdown the model writes most
//! (```` ``` ```` blocks, `` `code` ``, `**bold**`) becomes tags. Markers
//! without their pair stay as they are. Telegram counts the text after
//! its tags are parsed, so rendering never takes a part past the limit.

use crate::inbound::markdown::{Block, blocks, pairs};

/// Telegram's limit on a message's text.
pub const MESSAGE_LIMIT: usize = 4_096;

fn escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

/// One part as Telegram HTML.
pub fn html(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 16);
    for block in blocks(text) {
        match block {
            Block::Prose(prose) => out.push_str(&inline(prose)),
            Block::Fenced { code, .. } => {
                out.push_str("<pre>");
                out.push_str(&escape(code));
                out.push_str("</pre>");
            }
        }
    }
    out
}

/// `` `code` `` and `**bold**` within one stretch of text.
fn inline(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for (code, piece) in pairs(text, "`") {
        if code {
            out.push_str("<code>");
            out.push_str(&escape(piece));
            out.push_str("</code>");
            continue;
        }
        for (bold, piece) in pairs(piece, "**") {
            if bold {
                out.push_str("<b>");
                out.push_str(&escape(piece));
                out.push_str("</b>");
            } else {
                out.push_str(&escape(piece));
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn html_escapes_and_formats_what_is_paired() {
        assert_eq!(html("a < b && c > d"), "a &lt; b &amp;&amp; c &gt; d");
        assert_eq!(
            html("run `ls <dir>` **now**"),
            "run <code>ls &lt;dir&gt;</code> <b>now</b>"
        );
        assert_eq!(
            html("see:\n```rust\nfn a() -> u8 { 1 }\n```\ndone"),
            "see:\n<pre>fn a() -&gt; u8 { 1 }</pre>\ndone"
        );
        // Unpaired markers are shown as typed.
        assert_eq!(html("2 ** 3 and a ` tick"), "2 ** 3 and a ` tick");
        assert_eq!(html("```open"), "```open");
        assert_eq!(html("**bold `code`**"), "**bold <code>code</code>**");
    }
}

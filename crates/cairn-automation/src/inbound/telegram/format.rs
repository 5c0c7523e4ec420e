//! Answers as Telegram shows them: split into messages of at most 4,096
//! characters (UTF-16 units, as Telegram counts) by [`crate::inbound::split`];
//! each part rendered as Telegram HTML, where `<`,
//! `>` and `&` are escaped and the Markdown the model writes most
//! (```` ``` ```` blocks, `` `code` ``, `**bold**`) becomes tags. Markers
//! without their pair stay as they are. Telegram counts the text after
//! its tags are parsed, so rendering never takes a part past the limit.

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
    let mut rest = text;
    // Fenced blocks first: nothing inside them is formatted.
    while let Some(open) = rest.find("```") {
        let after = &rest[open + 3..];
        let Some(close) = after.find("```") else {
            break;
        };
        out.push_str(&inline(&rest[..open]));
        let block = &after[..close];
        // The language tag on the fence's line is not code.
        let body = match block.split_once('\n') {
            Some((lang, body)) if !lang.contains(' ') => body,
            _ => block,
        };
        out.push_str("<pre>");
        out.push_str(&escape(body.trim_end_matches('\n')));
        out.push_str("</pre>");
        rest = &after[close + 3..];
    }
    out.push_str(&inline(rest));
    out
}

/// `` `code` `` and `**bold**` within one stretch of text.
fn inline(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for piece in pairs(text, "`") {
        match piece {
            Piece::Marked(code) => {
                out.push_str("<code>");
                out.push_str(&escape(code));
                out.push_str("</code>");
            }
            Piece::Plain(plain) => {
                for piece in pairs(plain, "**") {
                    match piece {
                        Piece::Marked(bold) => {
                            out.push_str("<b>");
                            out.push_str(&escape(bold));
                            out.push_str("</b>");
                        }
                        Piece::Plain(p) => out.push_str(&escape(p)),
                    }
                }
            }
        }
    }
    out
}

enum Piece<'a> {
    Plain(&'a str),
    Marked(&'a str),
}

/// `text` cut at paired `marker`s; an unpaired one stays plain.
fn pairs<'a>(text: &'a str, marker: &str) -> Vec<Piece<'a>> {
    let mut out = Vec::new();
    let mut rest = text;
    while let Some(open) = rest.find(marker) {
        let after = &rest[open + marker.len()..];
        match after.find(marker) {
            Some(close) if close > 0 && !after[..close].contains('\n') => {
                out.push(Piece::Plain(&rest[..open]));
                out.push(Piece::Marked(&after[..close]));
                rest = &after[close + marker.len()..];
            }
            _ => {
                out.push(Piece::Plain(&rest[..open + marker.len()]));
                rest = after;
            }
        }
    }
    out.push(Piece::Plain(rest));
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

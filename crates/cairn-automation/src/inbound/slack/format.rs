//! Text between Markdown and Slack's mrkdwn. Answers are split into
//! messages of at most [`MESSAGE_LIMIT`] characters (Slack advises 4,000
//! and truncates far later) by [`crate::inbound::split`], then each part
//! rendered: `&`, `<` and `>` escaped everywhere, as Slack asks (it reads
//! them as markup); `**bold**` becomes `*bold*`, `[text](url)` becomes
//! `<url|text>`, `# heading` a bold line; code spans and blocks keep
//! their backticks, which mrkdwn reads alike, and nothing inside them is
//! changed but the escapes. What people write arrives in the other
//! direction: escaped, with `<@U…>` mentions and `<url|text>` links,
//! which [`plain`] turns back into text.

use crate::inbound::markdown::{Block, blocks, heading};

/// The characters one message holds.
pub const MESSAGE_LIMIT: usize = 4_000;

fn escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

/// One part of an answer as mrkdwn.
pub fn mrkdwn(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 16);
    for block in blocks(text) {
        match block {
            Block::Prose(text) => out.push_str(&prose(text)),
            // Nothing inside a fenced block is formatted.
            Block::Fenced { code, .. } => {
                out.push_str("```");
                out.push_str(&escape(code));
                out.push_str("```");
            }
        }
    }
    out
}

/// Text outside fenced blocks, line by line (headings), span by span.
fn prose(text: &str) -> String {
    let lines: Vec<String> = text
        .split('\n')
        .map(|line| match heading(line) {
            Some(title) => format!("*{}*", inline(title).replace('*', "")),
            None => inline(line),
        })
        .collect();
    lines.join("\n")
}

/// `` `code` `` kept, `**bold**` and links converted, the rest escaped.
fn inline(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for (n, piece) in text.split('`').enumerate() {
        if n > 0 {
            out.push('`');
        }
        // Odd pieces are inside a code span (an unpaired tick stays a tick).
        if n % 2 == 1 {
            out.push_str(&escape(piece));
        } else {
            out.push_str(&links(&bold(&escape(piece))));
        }
    }
    out
}

/// Paired `**` become `*`; an unpaired one stays as typed.
fn bold(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(open) = rest.find("**") {
        let after = &rest[open + 2..];
        match after.find("**") {
            Some(close) if close > 0 => {
                out.push_str(&rest[..open]);
                out.push('*');
                out.push_str(&after[..close]);
                out.push('*');
                rest = &after[close + 2..];
            }
            _ => {
                out.push_str(&rest[..open + 2]);
                rest = after;
            }
        }
    }
    out.push_str(rest);
    out
}

/// `[text](url)` → `<url|text>` for http(s) and mailto URLs.
fn links(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(open) = rest.find('[') {
        let after = &rest[open + 1..];
        let parsed = after.find("](").and_then(|mid| {
            let label = &after[..mid];
            let tail = &after[mid + 2..];
            let close = tail.find(')')?;
            let url = &tail[..close];
            let fits = !label.is_empty()
                && !label.contains(['[', ']', '|'])
                && !url.contains([' ', '|'])
                && ["http://", "https://", "mailto:"]
                    .iter()
                    .any(|s| url.starts_with(s));
            fits.then(|| (label, url, mid + 2 + close + 1))
        });
        match parsed {
            Some((label, url, used)) => {
                out.push_str(&rest[..open]);
                out.push_str(&format!("<{url}|{label}>"));
                rest = &after[used..];
            }
            None => {
                out.push_str(&rest[..=open]);
                rest = after;
            }
        }
    }
    out.push_str(rest);
    out
}

/// A person's message as plain text for the agent: the bot's own
/// mention (`<@bot>`) removed, links as `text (url)` or the URL, other
/// mentions and names as Slack wrote them, the escapes undone.
pub fn plain(text: &str, bot_user: &str) -> String {
    let mention = format!("<@{bot_user}>");
    let text = text.replace(&mention, "");
    let mut out = String::with_capacity(text.len());
    let mut rest = text.as_str();
    while let Some(open) = rest.find('<') {
        let after = &rest[open + 1..];
        let Some(close) = after.find('>') else {
            break;
        };
        out.push_str(&rest[..open]);
        let inner = &after[..close];
        let (target, label) = match inner.split_once('|') {
            Some((t, l)) => (t, Some(l)),
            None => (inner, None),
        };
        if target.starts_with(['@', '#', '!']) {
            // A mention or a channel: its label when Slack gave one.
            match label {
                Some(l) if target.starts_with('#') => out.push_str(&format!("#{l}")),
                Some(l) => out.push_str(&format!("@{l}")),
                None => out.push_str(&format!("<{inner}>")),
            }
        } else {
            let url = target.strip_prefix("mailto:").unwrap_or(target);
            match label {
                Some(l) if l != url => out.push_str(&format!("{l} ({url})")),
                _ => out.push_str(url),
            }
        }
        rest = &after[close + 1..];
    }
    out.push_str(rest);
    out.replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&amp;", "&")
        .trim()
        .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markdown_becomes_mrkdwn_escaped() {
        assert_eq!(mrkdwn("a < b && c > d"), "a &lt; b &amp;&amp; c &gt; d");
        assert_eq!(mrkdwn("this is **bold** now"), "this is *bold* now");
        assert_eq!(
            mrkdwn("see [the docs](https://x.org/a?b=1&c=2) here"),
            "see <https://x.org/a?b=1&amp;c=2|the docs> here"
        );
        assert_eq!(mrkdwn("run `ls **x** <d>`"), "run `ls **x** &lt;d&gt;`");
        assert_eq!(
            mrkdwn("code:\n```rust\nfn a() -> u8 { 1 }\n```\ndone"),
            "code:\n```fn a() -&gt; u8 { 1 }```\ndone"
        );
        assert_eq!(mrkdwn("## Plan\nstep"), "*Plan*\nstep");
        // What is not a pair or not a link stays as typed.
        assert_eq!(mrkdwn("2 ** 3, [x] and [a](b)"), "2 ** 3, [x] and [a](b)");
        assert_eq!(mrkdwn("#hashtag"), "#hashtag");
    }

    #[test]
    fn a_persons_message_becomes_plain_text() {
        assert_eq!(
            plain("<@UBOT> what is 1 &lt; 2 &amp;&amp; 3?", "UBOT"),
            "what is 1 < 2 && 3?"
        );
        assert_eq!(
            plain("read <https://x.org|the page> and <https://y.org>", "UBOT"),
            "read the page (https://x.org) and https://y.org"
        );
        assert_eq!(
            plain("ask <@U1|ann> in <#C1|general>", "UBOT"),
            "ask @ann in #general"
        );
        assert_eq!(plain("hi <@U2>", "UBOT"), "hi <@U2>");
        assert_eq!(plain("mail <mailto:a@b.c|a@b.c>", "UBOT"), "mail a@b.c");
    }
}

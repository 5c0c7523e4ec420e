//! Text between Markdown and Discord's. Discord reads Markdown much as
//! CommonMark does (bold, italics, code spans and fenced blocks, links,
//! quotes, lists), so an answer mostly goes as written: headings become
//! bold lines (Discord shows only three levels, and large), a line
//! starting `-# ` (Discord's small print) is escaped, and `@everyone` /
//! `@here` are broken with a zero-width space so an answer never pings a
//! server (messages also go with no mentions allowed). Fenced blocks and
//! code spans are left exactly as written. Answers are split by
//! [`crate::inbound::split`] into parts of [`PART_LIMIT`], which leaves
//! room for the little this adds under Discord's [`MESSAGE_LIMIT`].

use crate::inbound::markdown::{Block, blocks, heading};

/// The characters Discord accepts in one message's `content`.
pub const MESSAGE_LIMIT: usize = 2_000;

/// The characters of answer text in one message, before rendering.
pub const PART_LIMIT: usize = 1_900;

/// One part of an answer as Discord Markdown, never over [`MESSAGE_LIMIT`]
/// (a part that would grow past it goes as written).
pub fn markdown(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 16);
    for block in blocks(text) {
        match block {
            Block::Prose(text) => out.push_str(&prose(text)),
            // Nothing inside a fenced block changes.
            Block::Fenced { written, .. } => out.push_str(written),
        }
    }
    if out.chars().count() > MESSAGE_LIMIT {
        text.to_string()
    } else {
        out
    }
}

/// Text outside fenced blocks, line by line.
fn prose(text: &str) -> String {
    let lines: Vec<String> = text
        .split('\n')
        .map(|line| {
            let trimmed = line.trim_start();
            match heading(line) {
                Some(title) => format!("**{}**", inline(title).replace("**", "")),
                None if trimmed.starts_with("-# ") => format!("\\{}", inline(trimmed)),
                None => inline(line),
            }
        })
        .collect();
    lines.join("\n")
}

/// Mass mentions broken outside code spans.
fn inline(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for (n, piece) in text.split('`').enumerate() {
        if n > 0 {
            out.push('`');
        }
        // Odd pieces are inside a code span (an unpaired tick stays a tick).
        if n % 2 == 1 {
            out.push_str(piece);
        } else {
            out.push_str(
                &piece
                    .replace("@everyone", "@\u{200b}everyone")
                    .replace("@here", "@\u{200b}here"),
            );
        }
    }
    out
}

/// A person's message as plain text for the agent: the bot's own
/// mention (`<@id>`, or `<@!id>` as older clients write it) removed.
pub fn plain(text: &str, bot: &str) -> String {
    text.replace(&format!("<@{bot}>"), "")
        .replace(&format!("<@!{bot}>"), "")
        .trim()
        .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markdown_goes_as_written_but_headings_small_print_and_mass_mentions() {
        assert_eq!(
            markdown("this is **bold**, _it_ and [docs](https://x.org)"),
            "this is **bold**, _it_ and [docs](https://x.org)"
        );
        assert_eq!(markdown("## Plan\nstep"), "**Plan**\nstep");
        assert_eq!(markdown("#### **Deep** one"), "**Deep one**");
        assert_eq!(markdown("#hashtag"), "#hashtag");
        assert_eq!(markdown("-# tiny"), "\\-# tiny");
        assert_eq!(markdown("hey @everyone"), "hey @\u{200b}everyone");
        // Code is untouched, inline or fenced (its language tag too).
        assert_eq!(markdown("run `ping @here`"), "run `ping @here`");
        let block = "code:\n```rust\n# not a heading\n@everyone\n```\n# Done";
        assert_eq!(
            markdown(block),
            "code:\n```rust\n# not a heading\n@everyone\n```\n**Done**"
        );
        // An unclosed fence leaves the rest as prose.
        assert_eq!(markdown("```\n# x"), "```\n**x**");
    }

    #[test]
    fn a_part_never_grows_past_the_limit() {
        let part = "@here ".repeat(PART_LIMIT / 6);
        assert!(part.chars().count() <= PART_LIMIT);
        let shown = markdown(&part);
        assert!(shown.chars().count() <= MESSAGE_LIMIT);
        let headings = "# a\n".repeat(PART_LIMIT / 4);
        assert!(markdown(&headings).chars().count() <= MESSAGE_LIMIT);
    }

    #[test]
    fn the_bots_mention_is_removed_from_a_persons_message() {
        assert_eq!(plain("<@42> what time?", "42"), "what time?");
        assert_eq!(plain("hey <@!42>", "42"), "hey");
        assert_eq!(plain("ask <@7>", "42"), "ask <@7>");
    }
}

//! An answer in messages an app accepts: cut at the app's limit on
//! paragraph, then line, then word boundaries. Lengths are counted in
//! UTF-16 units, as Telegram counts; that is never less than the
//! characters Slack, Discord or WhatsApp count, so a part fits them all.

/// The length of `text` in UTF-16 units.
pub fn units(text: &str) -> usize {
    text.encode_utf16().count()
}

/// `text` in parts of at most `limit` UTF-16 units, cut at the last
/// paragraph break, else line break, else space that fits, else between
/// characters. The parts, joined, give back the text but for the
/// whitespace at the cuts.
pub fn split(text: &str, limit: usize) -> Vec<String> {
    let mut parts = Vec::new();
    let mut rest = text.trim();
    while units(rest) > limit {
        // The longest prefix within the limit, in bytes.
        let mut used = 0;
        let mut end = 0;
        for (at, c) in rest.char_indices() {
            if used + c.len_utf16() > limit {
                break;
            }
            used += c.len_utf16();
            end = at + c.len_utf8();
        }
        let head = &rest[..end];
        let cut = ["\n\n", "\n", " "]
            .iter()
            .find_map(|sep| head.rfind(sep).filter(|&at| at > 0))
            .unwrap_or(end);
        parts.push(rest[..cut].trim_end().to_string());
        rest = rest[cut..].trim_start();
    }
    if !rest.is_empty() || parts.is_empty() {
        parts.push(rest.to_string());
    }
    parts
}

/// The first `limit` characters (UTF-16 units) of `text`, cut between characters.
pub fn head(text: &str, limit: usize) -> &str {
    let mut used = 0;
    for (at, c) in text.char_indices() {
        if used + c.len_utf16() > limit {
            return &text[..at];
        }
        used += c.len_utf16();
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    const LIMIT: usize = 4_096;

    #[test]
    fn long_text_splits_on_paragraphs_then_words_within_the_limit() {
        let para = "word ".repeat(700); // 3,500 characters
        let text = format!("{}\n\n{}", para.trim(), para.trim());
        let parts = split(&text, LIMIT);
        assert_eq!(parts.len(), 2);
        assert_eq!(parts[0], para.trim());
        let one = "x".repeat(5) + " ";
        let long = one.repeat(1_500); // 9,000 characters, no paragraphs
        let parts = split(&long, LIMIT);
        assert_eq!(parts.len(), 3);
        for p in &parts {
            assert!(units(p) <= LIMIT);
            assert!(p.ends_with("xxxxx"), "cut inside a word");
        }
        assert_eq!(parts.join(" "), long.trim());
        // Without spaces: between characters, never inside one.
        let emoji = "😀".repeat(3_000);
        let parts = split(&emoji, LIMIT);
        assert!(parts.iter().all(|p| units(p) <= LIMIT));
        assert_eq!(parts.concat(), emoji);
        assert_eq!(split("", LIMIT), vec![String::new()]);
    }
}

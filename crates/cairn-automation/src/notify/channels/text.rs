//! Text shaping shared by the channels: length limits that never split a
//! character, and short excerpts of what a receiver answered.

/// What replaces the end of a message that was cut.
pub(crate) const ELLIPSIS: char = '…';

/// How much of a receiver's answer goes into an error.
const EXCERPT_CHARS: usize = 200;

/// `text` cut to at most `limit` UTF-16 code units, ending with an
/// ellipsis when cut. Services count "characters" as UTF-16 units
/// (Telegram says so; Discord's clients do), and a character is never
/// fewer units than one, so this also keeps within `limit` characters.
/// Cuts only between characters, so the result is valid UTF-8.
pub(crate) fn fit(text: &str, limit: usize) -> String {
    if text.encode_utf16().count() <= limit {
        return text.to_string();
    }
    let budget = limit.saturating_sub(ELLIPSIS.len_utf16());
    let mut used = 0;
    let mut end = 0;
    for (at, c) in text.char_indices() {
        if used + c.len_utf16() > budget {
            break;
        }
        used += c.len_utf16();
        end = at + c.len_utf8();
    }
    let mut out = String::with_capacity(end + ELLIPSIS.len_utf8());
    out.push_str(&text[..end]);
    out.push(ELLIPSIS);
    out
}

/// `text` cut to at most `limit` bytes of UTF-8, ending with an ellipsis
/// when cut, and only between characters (for services that count bytes).
pub(crate) fn fit_bytes(text: &str, limit: usize) -> String {
    if text.len() <= limit {
        return text.to_string();
    }
    let budget = limit.saturating_sub(ELLIPSIS.len_utf8());
    let end = text
        .char_indices()
        .map(|(at, c)| at + c.len_utf8())
        .take_while(|&end| end <= budget)
        .last()
        .unwrap_or(0);
    let mut out = String::with_capacity(end + ELLIPSIS.len_utf8());
    out.push_str(&text[..end]);
    out.push(ELLIPSIS);
    out
}

/// A one-line excerpt of a receiver's answer: whitespace collapsed, at most
/// 200 characters (an ellipsis marks a cut).
pub(crate) fn excerpt(body: &str) -> String {
    let line = body.split_whitespace().collect::<Vec<_>>().join(" ");
    if line.chars().count() <= EXCERPT_CHARS {
        return line;
    }
    let mut out: String = line.chars().take(EXCERPT_CHARS - 1).collect();
    out.push(ELLIPSIS);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fit_keeps_short_text_and_cuts_long_text_between_characters() {
        assert_eq!(fit("héllo", 5), "héllo");
        assert_eq!(fit("héllo", 4), "hél…");
        // A crab is two UTF-16 units: it does not fit in the last unit.
        assert_eq!(fit("ab🦀cd", 4), "ab…");
        assert_eq!(fit("ab🦀cd", 5), "ab🦀…");
        assert_eq!(fit("abc", 0), "…");
    }

    #[test]
    fn excerpt_is_one_short_line() {
        assert_eq!(excerpt(" a\n\n b\tc "), "a b c");
        let long = "é".repeat(500);
        let cut = excerpt(&long);
        assert_eq!(cut.chars().count(), 200);
        assert!(cut.ends_with(ELLIPSIS));
    }

    #[test]
    fn byte_limits_cut_between_characters() {
        assert_eq!(fit_bytes("abc", 3), "abc");
        assert_eq!(fit_bytes("abcd", 3), "…");
        assert_eq!(fit_bytes("abcdef", 5), "ab…");
        // "é" is 2 bytes and "…" 3: 7 bytes leave room for two "é".
        assert_eq!(fit_bytes("éééé", 7), "éé…");
        assert_eq!(fit_bytes("éééé", 6), "é…");
    }
}

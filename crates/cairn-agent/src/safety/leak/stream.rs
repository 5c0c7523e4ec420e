//! A reply checked as it streams: a delta leaves only once what follows it
//! cannot complete a secret, so no channel (the gateway's WS and SSE, a
//! Telegram message being edited, the REPL) is shown any part of one.
//!
//! [`StreamCheck`] holds back the last [`StreamCheck::held`] bytes, one
//! less than the longest thing it looks for (a watched value or an
//! encoding of it, or the shortest text a key shape matches); once a
//! secret appears the stream stops with the withheld-reply notice and
//! nothing more of it is shown. The whole answer is checked (and the leak
//! recorded) again when it ends, as an unstreamed one is.

use std::sync::Arc;

use super::scanner::LeakScanner;
use super::{LeakGuard, shapes, withheld_text};

/// Bytes before the held tail scanned again with it, so a key shape's
/// word boundary is judged on its real neighbours.
const MARGIN: usize = 256;

/// One streamed reply's check.
#[derive(Debug)]
pub struct StreamCheck {
    scanner: Arc<LeakScanner>,
    held: usize,
    text: String,
    /// Bytes of `text` already shown.
    shown: usize,
    stopped: bool,
}

impl StreamCheck {
    /// A check against what `guard` watches now.
    pub fn new(guard: &LeakGuard) -> Self {
        let scanner = guard.scanner();
        let longest = scanner
            .longest_pattern()
            .max(shapes::LONGEST_SHORTEST_MATCH);
        Self {
            scanner,
            held: longest.saturating_sub(1),
            text: String::new(),
            shown: 0,
            stopped: false,
        }
    }

    /// How many bytes are held back at most.
    pub fn held(&self) -> usize {
        self.held
    }

    /// What may be shown now that `delta` came: the text no secret can
    /// reach into, or, once one appeared, the withheld-reply notice (once),
    /// then nothing.
    pub fn push(&mut self, delta: &str) -> Option<String> {
        if self.stopped {
            return None;
        }
        self.text.push_str(delta);
        let from = floor(&self.text, self.shown.saturating_sub(self.held + MARGIN));
        let names = self.scanner.names_in(&self.text[from..]);
        if !names.is_empty() {
            self.stopped = true;
            let gap = if self.shown > 0 { "\n\n" } else { "" };
            return Some(format!("{gap}{}", withheld_text(&names)));
        }
        let until = floor(&self.text, self.text.len().saturating_sub(self.held));
        self.take(until)
    }

    /// At the end of the stream: the held tail (already checked), or
    /// nothing after a stop.
    pub fn finish(&mut self) -> Option<String> {
        if self.stopped {
            return None;
        }
        self.take(self.text.len())
    }

    /// Whether a secret stopped the stream.
    pub fn stopped(&self) -> bool {
        self.stopped
    }

    fn take(&mut self, until: usize) -> Option<String> {
        if until <= self.shown {
            return None;
        }
        let out = self.text[self.shown..until].to_string();
        self.shown = until;
        Some(out)
    }
}

/// The char boundary at or before `at`.
fn floor(text: &str, mut at: usize) -> usize {
    at = at.min(text.len());
    while !text.is_char_boundary(at) {
        at -= 1;
    }
    at
}

#[cfg(test)]
mod tests {
    use secrecy::SecretString;

    use super::*;
    use crate::safety::leak::WatchedSecret;

    fn check() -> StreamCheck {
        let guard = LeakGuard::new(&[WatchedSecret::new("GH", SecretString::from("s3cr3t-7781"))]);
        StreamCheck::new(&guard)
    }

    /// Everything a client is shown of `deltas`.
    fn shown(deltas: &[&str]) -> (String, bool) {
        let mut check = check();
        let mut out = String::new();
        for delta in deltas {
            out.extend(check.push(delta));
        }
        out.extend(check.finish());
        (out, check.stopped())
    }

    #[test]
    fn a_clean_reply_is_shown_whole_and_in_order() {
        let text = "a long answer ".repeat(20);
        let deltas: Vec<&str> = text
            .as_bytes()
            .chunks(7)
            .map(|c| std::str::from_utf8(c).unwrap())
            .collect();
        assert_eq!(shown(&deltas), (text.clone(), false));
    }

    #[test]
    fn a_value_split_across_deltas_is_never_shown_in_part() {
        let intro = "here is what you asked for, at length: ".repeat(3);
        let (out, stopped) = shown(&[&intro, "the key is s3cr3t", "-7781 and more"]);
        assert!(stopped);
        assert!(!out.contains("s3cr3t"), "{out}");
        assert!(out.starts_with("here is what you asked for"), "{out}");
        assert!(out.contains("withheld") && out.contains("GH"), "{out}");
    }

    #[test]
    fn a_key_shape_is_never_shown_in_part() {
        let (out, stopped) = shown(&["token: ghp_abcdefghij", "klmnopqrstuvwxyz0123456789 ok"]);
        assert!(stopped);
        assert!(!out.contains("ghp_"), "{out}");
    }

    #[test]
    fn what_is_held_is_as_long_as_the_longest_pattern_less_one() {
        let check = check();
        assert!(check.held() + 1 >= shapes::LONGEST_SHORTEST_MATCH);
        assert!(check.held() + 1 >= "s3cr3t-7781".len());
        let mut check = check;
        let text = "x".repeat(check.held() + 10);
        assert_eq!(check.push(&text).as_deref(), Some("x".repeat(10).as_str()));
        assert_eq!(check.finish(), Some("x".repeat(check.held())));
    }
}

//! [`LeakScanner`]: finds watched secret values, in clear or in a common
//! encoding, and well-known key shapes in text.
//!
//! One Aho-Corasick automaton (leftmost-longest) holds every watched value
//! and its encodings: URL-encoded (upper- and lower-case hex, and with `+`
//! for spaces) and base64 (standard and URL-safe alphabets, each at the
//! three alignments a value can take inside a longer encoded text). The key
//! shapes are regexes ([`super::shapes`]). A value shorter than
//! [`MIN_SECRET_CHARS`] is not watched: short values ("admin", a port, a
//! PIN) occur in ordinary text and would block it for nothing.

use std::borrow::Cow;

use aho_corasick::{AhoCorasick, MatchKind};
use base64::Engine as _;
use base64::engine::general_purpose::{STANDARD_NO_PAD, URL_SAFE_NO_PAD};
use secrecy::{ExposeSecret, SecretString};

use super::shapes;

/// Fewest characters a watched value must have; shorter ones are skipped.
pub const MIN_SECRET_CHARS: usize = 8;

/// A secret to look for: its name (what hits and redactions show) and value.
#[derive(Clone)]
pub struct WatchedSecret {
    /// Shown in `[secret:NAME]`, records and messages.
    pub name: String,
    /// Never shown.
    pub value: SecretString,
}

impl WatchedSecret {
    /// A watched secret.
    pub fn new(name: impl Into<String>, value: SecretString) -> Self {
        Self {
            name: name.into(),
            value,
        }
    }
}

impl std::fmt::Debug for WatchedSecret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WatchedSecret")
            .field("name", &self.name)
            .finish_non_exhaustive()
    }
}

/// One secret found in a text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeakHit {
    /// The secret's name, or `shape:KIND` for a key recognised by its shape.
    pub name: String,
    /// Byte range of the match in the scanned text.
    pub start: usize,
    /// End of that range (exclusive).
    pub end: usize,
}

/// What `[secret:NAME]` a hit is replaced with.
pub fn placeholder(name: &str) -> String {
    format!("[secret:{name}]")
}

/// The automaton over the watched values and their encodings.
#[derive(Clone)]
pub struct LeakScanner {
    automaton: Option<AhoCorasick>,
    /// For each pattern of the automaton, the index of its secret's name.
    owner: Vec<usize>,
    names: Vec<String>,
    /// Bytes of the longest pattern.
    longest: usize,
}

impl std::fmt::Debug for LeakScanner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LeakScanner")
            .field("names", &self.names)
            .field("patterns", &self.owner.len())
            .finish()
    }
}

impl Default for LeakScanner {
    fn default() -> Self {
        Self::new(&[])
    }
}

impl LeakScanner {
    /// A scanner watching `secrets` (values shorter than
    /// [`MIN_SECRET_CHARS`] are skipped; a value given twice is named by its
    /// first entry) and the key shapes.
    pub fn new(secrets: &[WatchedSecret]) -> Self {
        let mut names = Vec::new();
        let mut patterns: Vec<String> = Vec::new();
        let mut owner = Vec::new();
        for secret in secrets {
            let value = secret.value.expose_secret();
            if value.chars().count() < MIN_SECRET_CHARS {
                continue;
            }
            let index = names.len();
            names.push(secret.name.clone());
            for form in forms(value) {
                if !patterns.contains(&form) {
                    patterns.push(form);
                    owner.push(index);
                }
            }
        }
        let automaton = (!patterns.is_empty())
            .then(|| {
                AhoCorasick::builder()
                    .match_kind(MatchKind::LeftmostLongest)
                    .build(&patterns)
            })
            .and_then(|built| match built {
                Ok(automaton) => Some(automaton),
                Err(error) => {
                    // Only a pattern set beyond the automaton's size limits
                    // fails; the shapes still guard.
                    tracing::error!(%error, "cannot build the leak scanner's automaton");
                    None
                }
            });
        let longest = patterns.iter().map(String::len).max().unwrap_or(0);
        Self {
            automaton,
            owner,
            names,
            longest,
        }
    }

    /// Bytes of the longest value or encoding watched (0 when none).
    pub fn longest_pattern(&self) -> usize {
        self.longest
    }

    /// Bytes the automaton holds.
    pub fn memory_usage(&self) -> usize {
        self.automaton.as_ref().map_or(0, AhoCorasick::memory_usage)
    }

    /// The names of the watched secrets (not the shapes).
    pub fn names(&self) -> &[String] {
        &self.names
    }

    /// Every secret in `text`, in order, without overlaps: a watched value
    /// (or an encoding of it) first, then any key shape outside those.
    pub fn scan(&self, text: &str) -> Vec<LeakHit> {
        let mut hits: Vec<LeakHit> = match &self.automaton {
            Some(automaton) => automaton
                .find_iter(text)
                .filter_map(|m| {
                    let index = *self.owner.get(m.pattern().as_usize())?;
                    Some(LeakHit {
                        name: self.names.get(index)?.clone(),
                        start: m.start(),
                        end: m.end(),
                    })
                })
                .collect(),
            None => Vec::new(),
        };
        for shape in shapes::find(text) {
            if !hits
                .iter()
                .any(|h| h.start < shape.end && shape.start < h.end)
            {
                hits.push(shape);
            }
        }
        hits.sort_by_key(|h| h.start);
        hits
    }

    /// `text` with each hit replaced by `[secret:NAME]`; borrowed when clean.
    pub fn redact<'a>(&self, text: &'a str) -> Cow<'a, str> {
        let hits = self.scan(text);
        if hits.is_empty() {
            return Cow::Borrowed(text);
        }
        Cow::Owned(replace(text, &hits))
    }

    /// The names of the secrets in `text`, each once, in order of first hit.
    pub fn names_in(&self, text: &str) -> Vec<String> {
        let mut names: Vec<String> = Vec::new();
        for hit in self.scan(text) {
            if !names.contains(&hit.name) {
                names.push(hit.name);
            }
        }
        names
    }
}

/// `text` with each (sorted, disjoint) hit replaced by its placeholder.
pub fn replace(text: &str, hits: &[LeakHit]) -> String {
    let mut out = String::with_capacity(text.len());
    let mut at = 0;
    for hit in hits {
        if hit.start < at {
            continue;
        }
        out.push_str(text.get(at..hit.start).unwrap_or_default());
        out.push_str(&placeholder(&hit.name));
        at = hit.end;
    }
    out.push_str(text.get(at..).unwrap_or_default());
    out
}

/// The value and the encodings of it a request could carry.
fn forms(value: &str) -> Vec<String> {
    let bytes = value.as_bytes();
    let mut forms = vec![value.to_string()];
    let upper = percent_encode(bytes, false);
    forms.push(upper.replace("%20", "+"));
    forms.push(percent_encode(bytes, true));
    forms.push(upper);
    for alignment in 0..3 {
        let mut shifted = vec![0u8; alignment];
        shifted.extend_from_slice(bytes);
        for engine in [&STANDARD_NO_PAD, &URL_SAFE_NO_PAD] {
            let encoded = engine.encode(&shifted);
            // Characters holding only the value's bits: after those touched
            // by the leading filler, before the one the next byte completes.
            let first = (alignment * 8).div_ceil(6);
            let last = shifted.len() * 8 / 6;
            if let Some(part) = encoded.get(first..last)
                && part.len() >= MIN_SECRET_CHARS
            {
                forms.push(part.to_string());
            }
        }
    }
    forms.dedup();
    forms
}

/// Percent-encodes every byte but RFC 3986's unreserved ones.
fn percent_encode(bytes: &[u8], lower: bool) -> String {
    let mut out = String::with_capacity(bytes.len() * 3);
    for &b in bytes {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~') {
            out.push(char::from(b));
        } else if lower {
            out.push_str(&format!("%{b:02x}"));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use base64::engine::general_purpose::STANDARD;

    fn scanner(pairs: &[(&str, &str)]) -> LeakScanner {
        let secrets: Vec<WatchedSecret> = pairs
            .iter()
            .map(|(n, v)| WatchedSecret::new(*n, SecretString::from(v.to_string())))
            .collect();
        LeakScanner::new(&secrets)
    }

    #[test]
    fn finds_a_value_in_clear_and_redacts_it_by_name() {
        let s = scanner(&[("GH", "s3cr3t-7781")]);
        let text = "curl https://x.test/?k=s3cr3t-7781&z=1";
        assert_eq!(s.names_in(text), ["GH"]);
        assert_eq!(s.redact(text), "curl https://x.test/?k=[secret:GH]&z=1");
        assert!(matches!(s.redact("nothing here"), Cow::Borrowed(_)));
    }

    #[test]
    fn finds_url_encoded_forms() {
        let s = scanner(&[("PW", "p@ss word/42!")]);
        for text in [
            "q=p%40ss%20word%2F42%21",
            "q=p%40ss+word%2F42%21",
            "q=p%40ss%20word%2f42%21",
        ] {
            assert_eq!(s.names_in(text), ["PW"], "{text}");
        }
    }

    #[test]
    fn finds_base64_at_every_alignment_in_both_alphabets() {
        let value = "s3cr3t-7781?>>";
        let s = scanner(&[("GH", value)]);
        for prefix in ["", "a", "ab", "abc", "user:"] {
            let encoded = STANDARD.encode(format!("{prefix}{value}-and-more"));
            assert_eq!(s.names_in(&encoded), ["GH"], "{prefix:?} {encoded}");
            let url_safe = URL_SAFE_NO_PAD.encode(format!("{prefix}{value}"));
            assert_eq!(s.names_in(&url_safe), ["GH"], "{prefix:?} {url_safe}");
        }
        // Basic auth, the usual way a secret travels base64-encoded.
        let basic = format!("Basic {}", STANDARD.encode(format!("me:{value}")));
        assert_eq!(s.names_in(&basic), ["GH"]);
    }

    #[test]
    fn short_values_are_not_watched() {
        let s = scanner(&[("PIN", "1234"), ("SHORT", "abcdefg")]);
        assert!(s.names().is_empty());
        assert!(s.scan("pin 1234 abcdefg").is_empty());
    }

    #[test]
    fn the_longest_value_wins_and_names_are_kept_apart() {
        let s = scanner(&[
            ("A", "token-aaaa"),
            ("B", "token-aaaa-bbbb"),
            ("C", "ccccdddd"),
        ]);
        assert_eq!(
            s.redact("x token-aaaa-bbbb y token-aaaa z ccccdddd"),
            "x [secret:B] y [secret:A] z [secret:C]"
        );
    }

    #[test]
    fn shapes_are_found_beside_watched_values() {
        let s = scanner(&[("GH", "s3cr3t-7781")]);
        let key = "ghp_abcdefghijklmnopqrstuvwxyz0123456789";
        let text = format!("a s3cr3t-7781 b {key}");
        assert_eq!(s.names_in(&text), ["GH", "shape:github"]);
        assert_eq!(s.redact(&text), "a [secret:GH] b [secret:shape:github]");
    }

    #[test]
    fn debug_never_shows_a_value() {
        let s = scanner(&[("GH", "s3cr3t-7781")]);
        let shown = format!("{s:?} {:?}", WatchedSecret::new("GH", "s3cr3t-7781".into()));
        assert!(!shown.contains("s3cr3t"), "{shown}");
    }
}

//! Well-known key shapes, found whoever's key it is: OpenAI (`sk-…`,
//! `sk-proj-…`), Anthropic (`sk-ant-…`), Slack bot and app tokens
//! (`xoxb-…`, `xapp-…`), GitHub (`ghp_…` and its kin, `github_pat_…`), AWS
//! access key ids (`AKIA…`) and PEM private key blocks.
//!
//! Narrower than [`crate::safety::scrub`]'s patterns, because a hit here
//! blocks a call: an `sk-` key must be long and hold a digit, an upper-
//! and a lower-case letter (so `sk-learn-model-selection-guide` passes).

use std::sync::LazyLock;

use regex::Regex;

use super::scanner::LeakHit;

/// (kind, regex, whether the match must look random).
const SHAPES: &[(&str, &str, bool)] = &[
    ("anthropic", r"\bsk-ant-[A-Za-z0-9_\-]{20,}", true),
    (
        "openai",
        r"\bsk-(?:proj-|svcacct-|admin-)?[A-Za-z0-9_\-]{20,}",
        true,
    ),
    ("slack", r"\bxox[bp]-[0-9]{6,}-[A-Za-z0-9\-]{8,}", false),
    ("slack", r"\bxapp-[0-9]-[A-Za-z0-9\-]{10,}", false),
    ("github", r"\bgh[pousr]_[A-Za-z0-9]{36,}\b", false),
    ("github", r"\bgithub_pat_[A-Za-z0-9_]{40,}", false),
    ("aws", r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b", false),
    (
        "private-key",
        r"-----BEGIN[A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----[\s\S]*?(?:-----END[A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----|\z)",
        false,
    ),
];

/// Bytes of the longest of the shortest texts each shape matches
/// (`github_pat_` and 40 more): a streamed reply holds back one less, so
/// no part of a key leaves before its shape can be seen.
pub const LONGEST_SHORTEST_MATCH: usize = 51;

static COMPILED: LazyLock<Vec<(&'static str, Regex, bool)>> = LazyLock::new(|| {
    SHAPES
        .iter()
        .filter_map(|(kind, source, random)| Regex::new(source).ok().map(|r| (*kind, r, *random)))
        .collect()
});

/// Every key shape in `text`, named `shape:KIND`, earliest first, without overlaps.
pub fn find(text: &str) -> Vec<LeakHit> {
    let mut hits: Vec<LeakHit> = Vec::new();
    for (kind, regex, random) in COMPILED.iter() {
        for m in regex.find_iter(text) {
            if *random && !looks_random(m.as_str()) {
                continue;
            }
            if hits.iter().any(|h| h.start < m.end() && m.start() < h.end) {
                continue;
            }
            hits.push(LeakHit {
                name: format!("shape:{kind}"),
                start: m.start(),
                end: m.end(),
            });
        }
    }
    hits.sort_by_key(|h| h.start);
    hits
}

/// A generated key mixes digits with upper- and lower-case letters.
fn looks_random(text: &str) -> bool {
    text.bytes().any(|b| b.is_ascii_digit())
        && text.bytes().any(|b| b.is_ascii_uppercase())
        && text.bytes().any(|b| b.is_ascii_lowercase())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kinds(text: &str) -> Vec<String> {
        find(text).into_iter().map(|h| h.name).collect()
    }

    #[test]
    fn every_shape_compiles() {
        assert_eq!(COMPILED.len(), SHAPES.len());
    }

    #[test]
    fn finds_each_shape() {
        for (text, kind) in [
            ("k=sk-ant-api03-Abcdefghij0123456789xyz", "shape:anthropic"),
            ("sk-proj-Abcdefghij0123456789KLMNOP", "shape:openai"),
            ("sk-Abcdefghij0123456789KLMNOP", "shape:openai"),
            (
                "xoxb-123456789012-1234567890123-AbCdEfGhIjKl",
                "shape:slack",
            ),
            ("xapp-1-A0123456789-1234567890-abcdef", "shape:slack"),
            ("ghp_abcdefghijklmnopqrstuvwxyz0123456789", "shape:github"),
            (
                "github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyz0123456789",
                "shape:github",
            ),
            ("AKIAIOSFODNN7EXAMPLE", "shape:aws"),
            (
                "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaA==\n-----END OPENSSH PRIVATE KEY-----",
                "shape:private-key",
            ),
        ] {
            assert_eq!(kinds(text), [kind], "{text}");
        }
    }

    #[test]
    fn every_shape_is_seen_within_the_longest_shortest_match() {
        for (kind, example) in [
            ("anthropic", "sk-ant-api03-Abcdefghij0123456789xyz"),
            ("openai", "sk-Abcdefghij0123456789KLMNOP"),
            ("slack", "xoxb-123456789012-AbCdEfGh"),
            ("slack", "xapp-1-A0123456789"),
            ("github", "ghp_abcdefghijklmnopqrstuvwxyz0123456789"),
            (
                "github",
                "github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyz0123456789",
            ),
            ("aws", "AKIAIOSFODNN7EXAMPLE"),
            ("private-key", "-----BEGIN OPENSSH PRIVATE KEY-----"),
        ] {
            let seen = (1..=example.len())
                .find(|n| !find(&example[..*n]).is_empty())
                .unwrap_or(usize::MAX);
            assert!(seen <= LONGEST_SHORTEST_MATCH, "{kind}: {seen}");
        }
    }

    #[test]
    fn ordinary_text_is_not_a_key() {
        for text in [
            "pip install sk-learn-model-selection-guide",
            "the task-management-application-roadmap",
            "xoxb is how Slack names bot tokens",
            "AKIA is a prefix",
            "ghp_short",
            "-----BEGIN PUBLIC KEY-----",
            "https://example.com/desk-organizer-recommendations",
        ] {
            assert!(find(text).is_empty(), "{text}");
        }
    }
}

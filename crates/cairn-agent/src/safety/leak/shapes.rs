//! Well-known key shapes, found whoever's key it is: OpenAI (`sk-…`,
//! `sk-proj-…`), Anthropic (`sk-ant-…`), Slack bot and app tokens
//! (`xoxb-…`, `xapp-…`), GitHub (`ghp_…` and its kin, `github_pat_…`), AWS
//! access key ids (`AKIA…`) and PEM private key blocks.
//!
//! Narrower than [`crate::safety::scrub`]'s patterns, because a hit here
//! blocks a call: an `sk-` key must be long and hold a digit, an upper-
//! and a lower-case letter (so `sk-learn-model-selection-guide` passes).

use std::sync::LazyLock;

use aho_corasick::AhoCorasick;
use regex::Regex;

use super::scanner::LeakHit;

/// (kind, regex, whether the match must look random, the literals every
/// match begins with).
const SHAPES: &[(&str, &str, bool, &[&str])] = &[
    (
        "anthropic",
        r"\bsk-ant-[A-Za-z0-9_\-]{20,}",
        true,
        &["sk-ant-"],
    ),
    (
        "openai",
        r"\bsk-(?:proj-|svcacct-|admin-)?[A-Za-z0-9_\-]{20,}",
        true,
        &["sk-"],
    ),
    (
        "slack",
        r"\bxox[bp]-[0-9]{6,}-[A-Za-z0-9\-]{8,}",
        false,
        &["xoxb-", "xoxp-"],
    ),
    (
        "slack",
        r"\bxapp-[0-9]-[A-Za-z0-9\-]{10,}",
        false,
        &["xapp-"],
    ),
    (
        "github",
        r"\bgh[pousr]_[A-Za-z0-9]{36,}\b",
        false,
        &["ghp_", "gho_", "ghu_", "ghs_", "ghr_"],
    ),
    (
        "github",
        r"\bgithub_pat_[A-Za-z0-9_]{40,}",
        false,
        &["github_pat_"],
    ),
    (
        "aws",
        r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b",
        false,
        &["AKIA", "ASIA"],
    ),
    (
        "private-key",
        r"-----BEGIN[A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----[\s\S]*?(?:-----END[A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----|\z)",
        false,
        &["-----BEGIN"],
    ),
];

/// Bytes of the longest of the shortest texts each shape matches
/// (`github_pat_` and 40 more): a streamed reply holds back one less, so
/// no part of a key leaves before its shape can be seen.
pub const LONGEST_SHORTEST_MATCH: usize = 51;

static COMPILED: LazyLock<Vec<(&'static str, Regex, bool)>> = LazyLock::new(|| {
    SHAPES
        .iter()
        .filter_map(|(kind, source, random, _)| {
            Regex::new(source).ok().map(|r| (*kind, r, *random))
        })
        .collect()
});

/// Every shape's first literals in one automaton: a text holding none of
/// them (nearly every text: a notification, a tool's output) is passed in
/// one scan instead of a search per shape. `None` only if it cannot be
/// built; then every shape is searched.
static STARTS: LazyLock<Option<AhoCorasick>> =
    LazyLock::new(|| AhoCorasick::new(SHAPES.iter().flat_map(|(.., starts)| starts.iter())).ok());

/// Every key shape in `text`, named `shape:KIND`, earliest first, without overlaps.
pub fn find(text: &str) -> Vec<LeakHit> {
    if STARTS.as_ref().is_some_and(|starts| !starts.is_match(text)) {
        return Vec::new();
    }
    search(text)
}

/// [`find`] by every shape's regex.
fn search(text: &str) -> Vec<LeakHit> {
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
        assert!(STARTS.is_some());
    }

    #[test]
    fn the_literals_pass_every_way_a_shape_begins() {
        // A key for each branch of each shape's beginning: the automaton
        // must let every one through to the regexes.
        let tail = "Ab1Cd2Ef3Gh4Ij5Kl6Mn7Op8Qr9St0Uv1Wx2Yz3Ab4";
        let mut texts = vec![
            format!("sk-ant-{tail}"),
            format!("sk-{tail}"),
            format!("sk-proj-{tail}"),
            format!("sk-svcacct-{tail}"),
            format!("sk-admin-{tail}"),
            format!("xoxb-123456789-{tail}"),
            format!("xoxp-123456789-{tail}"),
            format!("xapp-1-{tail}"),
            format!("github_pat_{tail}"),
            "AKIAIOSFODNN7EXAMPLE".to_string(),
            "ASIAIOSFODNN7EXAMPLE".to_string(),
        ];
        texts.extend("pousr".chars().map(|c| format!("gh{c}_{tail}")));
        // Last: a block without its end runs to the end of the text.
        texts.push("-----BEGIN RSA PRIVATE KEY-----\nAAAA".to_string());
        for text in &texts {
            assert_eq!(find(text).len(), 1, "{text}");
            assert_eq!(find(text), search(text), "{text}");
        }
        let all = texts.join(" and then ");
        assert_eq!(find(&all).len(), texts.len());
        assert_eq!(find(&all), search(&all));
        assert_eq!(
            texts.len(),
            SHAPES
                .iter()
                .map(|(.., starts)| starts.len())
                .sum::<usize>()
                + 3,
            "a literal added to SHAPES needs its key here"
        );
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

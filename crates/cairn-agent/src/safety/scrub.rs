//! Credential scrubbing: replaces secrets in text with `[REDACTED]`.
//!
//! Used on every tool output before the model or a log sees it, and reusable for
//! log lines and error messages. Patterns aim at forms that are unambiguously
//! credentials (well-known key prefixes, `key=value` with a secret-sounding key,
//! auth headers, PEM private keys) so ordinary prose passes through unchanged.

use std::borrow::Cow;
use std::sync::LazyLock;

use regex::{Captures, Regex};

/// The text that replaces a secret.
pub const REDACTED: &str = "[REDACTED]";

/// How a pattern's match is rewritten.
enum Rewrite {
    /// The whole match is the secret.
    Whole,
    /// Group 1 is a label to keep; group 2 is the secret (quotes preserved);
    /// an optional group 3 is a suffix to keep.
    KeepLabel,
}

struct Pattern {
    regex: Regex,
    rewrite: Rewrite,
}

/// Compiled once; each source is a literal, so failure would be a programming
/// error caught by the unit tests. A pattern that failed to compile is skipped
/// rather than panicking, and `patterns_compile` asserts none are skipped.
static PATTERNS: LazyLock<Vec<Pattern>> = LazyLock::new(|| {
    SOURCES
        .iter()
        .filter_map(|(source, rewrite)| {
            Regex::new(source).ok().map(|regex| Pattern {
                regex,
                rewrite: match rewrite {
                    0 => Rewrite::Whole,
                    _ => Rewrite::KeepLabel,
                },
            })
        })
        .collect()
});

/// (regex, 0 = whole match / 1 = keep label group).
const SOURCES: &[(&str, u8)] = &[
    // PEM private keys, including a block cut off by truncation.
    (
        r"-----BEGIN[A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----[\s\S]*?(?:-----END[A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----|\z)",
        0,
    ),
    // Anthropic / OpenAI style keys (sk-ant-..., sk-proj-..., sk-...).
    (r"\bsk-(?:ant-)?[A-Za-z0-9_\-]{16,}", 0),
    // Stripe live/test secret and restricted keys.
    (r"\b[rs]k_(?:live|test)_[A-Za-z0-9]{16,}", 0),
    // AWS access key ids.
    (r"\b(?:AKIA|ASIA|AGPA|AIDA|AROA|ANPA)[0-9A-Z]{16}\b", 0),
    // GitHub tokens.
    (r"\bgh[pousr]_[A-Za-z0-9]{30,}\b", 0),
    (r"\bgithub_pat_[A-Za-z0-9_]{20,}", 0),
    // GitLab personal access tokens.
    (r"\bglpat-[A-Za-z0-9_\-]{20,}", 0),
    // Slack tokens.
    (r"\bxox[abposr]-[A-Za-z0-9\-]{10,}", 0),
    // Google API keys.
    (r"\bAIza[0-9A-Za-z_\-]{35}", 0),
    // JSON Web Tokens.
    (
        r"\beyJ[A-Za-z0-9_\-]{8,}\.eyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}",
        0,
    ),
    // Authorization headers: keep the scheme, drop the credential.
    (
        r#"(?i)(\b(?:proxy-)?authorization["']?[ \t]*[:=][ \t]*["']?(?:bearer|basic|token|bot|digest)?[ \t]*)([^\s"',;]+)"#,
        1,
    ),
    // Bare bearer tokens.
    (r"(?i)(\bbearer[ \t]+)([A-Za-z0-9\-._~+/]{8,}=*)", 1),
    // Credentials in URLs: scheme://user:secret@host.
    (r"(?i)(\b[a-z][a-z0-9+.\-]*://[^:/\s@]+:)([^@\s/]+)(@)", 1),
    // key=value / key: value / "key": "value" with a secret-sounding key name.
    (
        r#"(?i)([a-z0-9_\-.]*(?:api[_\-]?key|apikey|access[_\-]?key|secret[_\-]?key|private[_\-]?key|client[_\-]?secret|access[_\-]?token|auth[_\-]?token|refresh[_\-]?token|session[_\-]?token|token|secret|password|passwd|passphrase|credentials?)["']?[ \t]*(?:=|:)[ \t]*)("[^"\n]*"|'[^'\n]*'|[^\s"'`,;&<>]+)"#,
        1,
    ),
];

/// Replaces every credential in `text` with `[REDACTED]`; borrows when nothing matched.
pub fn scrub(text: &str) -> Cow<'_, str> {
    let mut out = Cow::Borrowed(text);
    for pattern in PATTERNS.iter() {
        if !pattern.regex.is_match(&out) {
            continue;
        }
        let replaced = match pattern.rewrite {
            Rewrite::Whole => pattern.regex.replace_all(&out, REDACTED).into_owned(),
            Rewrite::KeepLabel => pattern
                .regex
                .replace_all(&out, |caps: &Captures<'_>| keep_label(caps))
                .into_owned(),
        };
        out = Cow::Owned(replaced);
    }
    out
}

fn keep_label(caps: &Captures<'_>) -> String {
    let label = caps.get(1).map_or("", |m| m.as_str());
    let secret = caps.get(2).map_or("", |m| m.as_str());
    let suffix = caps.get(3).map_or("", |m| m.as_str());
    if secret == REDACTED || secret.is_empty() {
        return format!("{label}{secret}{suffix}");
    }
    let quote = secret.chars().next().filter(|c| *c == '"' || *c == '\'');
    match quote {
        Some(q) => format!("{label}{q}{REDACTED}{q}{suffix}"),
        None => format!("{label}{REDACTED}{suffix}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn patterns_compile() {
        assert_eq!(PATTERNS.len(), SOURCES.len());
    }

    #[test]
    fn leaves_ordinary_text_alone() {
        for text in [
            "hello world",
            "the token is valid and the password policy is strict",
            "max_tokens: 1024",
            "author: Jane; skills: sk-lls",
            "see https://example.com/path?q=1",
            "ask-the-user and desk-top",
            "AKIA is a prefix",
            "Authorization required",
            "",
        ] {
            assert_eq!(scrub(text), text, "{text:?}");
            assert!(matches!(scrub(text), Cow::Borrowed(_)));
        }
    }

    #[test]
    fn is_idempotent() {
        let once = scrub("api_key=abc123 Authorization: Bearer xyz12345678").into_owned();
        assert_eq!(scrub(&once), once);
    }
}

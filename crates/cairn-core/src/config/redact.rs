//! Hiding secrets in values that are shown to people: passwords in URLs and
//! secret-looking fields of free-form tables.

use super::Value;
use super::registry;

/// What replaces a hidden password or query value.
const HIDDEN: &str = "****";

/// What replaces a hidden setting or table field, whole.
const HIDDEN_VALUE: &str = "********";

/// A query parameter whose name (lowercased, percent-decoded) contains one of
/// these holds a secret: `password`, `sslpassword`, `pass`, `pwd`, `token`,
/// `access_token`, `secret`, `key`, `api_key`, `apikey`, …
const SECRET_PARAM_WORDS: [&str; 5] = ["pass", "pwd", "token", "secret", "key"];

/// Hides the secrets of a URL: the password of `scheme://user:password@host`
/// and the values of secret-looking query parameters (`?password=…`).
///
/// People type passwords raw, with `/`, `@`, `:`, `?` or `#` in them, so the
/// userinfo ends at the last `@` followed by something shaped like a host.
/// When in doubt this hides too much (an `@` in a query value may swallow the
/// host), never too little.
pub fn redact_url(url: &str) -> String {
    let (prefix, mut rest) = match url.find("://") {
        Some(i) => url.split_at(i + 3),
        // `sqlite:cairn.db?key=…` has no authority but may have a query.
        None => ("", url),
    };
    let mut out = String::with_capacity(url.len());
    out.push_str(prefix);
    if !prefix.is_empty()
        && let Some((user, host_start)) = userinfo_with_password(rest)
    {
        out.push_str(user);
        out.push(':');
        out.push_str(HIDDEN);
        out.push('@');
        rest = &rest[host_start..];
    }
    match rest.split_once('?') {
        Some((before, query)) => {
            out.push_str(before);
            out.push('?');
            out.push_str(&redact_query(query));
        }
        None => out.push_str(rest),
    }
    out
}

/// When `rest` (what follows `://`) starts with `user:password@`, the user and
/// the offset where the host starts.
fn userinfo_with_password(rest: &str) -> Option<(&str, usize)> {
    let user_end = rest.find([':', '@', '/', '?', '#'])?;
    if !rest[user_end..].starts_with(':') {
        return None;
    }
    rest.rmatch_indices('@')
        .map(|(at, _)| at)
        .take_while(|&at| at > user_end)
        .find(|&at| is_host(&rest[at + 1..]))
        .map(|at| (&rest[..user_end], at + 1))
}

/// Whether `rest` starts with a host (possibly empty, bracketed IPv6, with a
/// port) that runs up to the path, query, fragment or end.
fn is_host(rest: &str) -> bool {
    let end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    rest[..end]
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || ".-_%[]:".contains(c))
}

/// A query string (after `?`) with the values of secret parameters hidden.
/// A value is everything up to the next `&name=`: a raw `#` or `&` in a
/// password must not leak the rest of it.
fn redact_query(query: &str) -> String {
    let mut parts: Vec<String> = Vec::new();
    let mut in_secret = false;
    for part in query.split('&') {
        match part.split_once('=') {
            Some((name, _)) if is_secret_param(name) => {
                parts.push(format!("{name}={HIDDEN}"));
                in_secret = true;
            }
            Some(_) => {
                parts.push(part.to_string());
                in_secret = false;
            }
            None if in_secret => {}
            None => parts.push(part.to_string()),
        }
    }
    parts.join("&")
}

/// Whether a query parameter's name marks a secret, ignoring case and percent-encoding.
fn is_secret_param(name: &str) -> bool {
    let decoded = percent_decode(name).to_ascii_lowercase();
    SECRET_PARAM_WORDS.iter().any(|w| decoded.contains(w))
}

/// `%XX` sequences decoded; anything malformed is kept as it is.
fn percent_decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = bytes
            .get(i + 1..i + 3)
            .filter(|h| h.iter().all(u8::is_ascii_hexdigit))
            .and_then(|h| std::str::from_utf8(h).ok())
            .and_then(|h| u8::from_str_radix(h, 16).ok());
        match (bytes[i], hex) {
            (b'%', Some(b)) => {
                out.push(b);
                i += 3;
            }
            (b, _) => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// A setting's value as it may be shown: secrets hidden whole, passwords and
/// secret query parameters of URL settings (`database.url`, `llm.base_url`) hidden.
pub(crate) fn redact_value(key: &str, value: &Value) -> Value {
    if registry::find(key).is_some_and(|def| def.secret) {
        return Value::Text(HIDDEN_VALUE.to_string());
    }
    match value {
        Value::Text(text) if key.ends_with("url") => Value::Text(redact_url(text)),
        other => other.clone(),
    }
}

/// A copy of a free-form table with every secret-looking field (`*key*`,
/// `*secret*`, `*token*`, `*password*`, an ntfy `topic`, which anyone who
/// knows it can read and post to) and every value of a `headers` table (extra
/// request headers are mostly credentials) replaced by `********`.
pub fn redact_json(value: &serde_json::Value) -> serde_json::Value {
    use serde_json::Value as J;
    match value {
        J::Object(map) => J::Object(
            map.iter()
                .map(|(k, v)| {
                    let lower = k.to_ascii_lowercase();
                    // A Slack or Discord webhook URL is itself the credential.
                    let secret = [
                        "key",
                        "secret",
                        "token",
                        "password",
                        "authorization",
                        "webhook_url",
                    ]
                    .iter()
                    .any(|w| lower.contains(w))
                        || lower == "topic";
                    let shown = match v {
                        J::Object(headers) if lower == "headers" => J::Object(
                            headers
                                .keys()
                                .map(|name| (name.clone(), J::String(HIDDEN_VALUE.into())))
                                .collect(),
                        ),
                        J::Object(_) | J::Null => redact_json(v),
                        _ if secret => J::String(HIDDEN_VALUE.into()),
                        // Credentials inside other URLs (user:password@, ?token=).
                        J::String(text) if text.contains("://") => J::String(redact_url(text)),
                        _ => redact_json(v),
                    };
                    (k.clone(), shown)
                })
                .collect(),
        ),
        J::Array(items) => J::Array(items.iter().map(redact_json).collect()),
        other => other.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn channel_credentials_are_hidden() {
        let v = serde_json::json!({
            "team": {"type": "slack", "webhook_url": "https://hooks.example.org/T0/B0/S3CR"},
            "ops": {"type": "webhook", "url": "https://u:S3CR@example.org/h?token=S3CR",
                    "headers": {"Authorization": "Bearer S3CR", "X-Team": "S3CR-ops"}},
            "push": {"type": "ntfy", "topic": "S3CR-alerts"},
        });
        let shown = redact_json(&v).to_string();
        assert!(!shown.contains("S3CR"), "{shown}");
        assert!(
            shown.contains("X-Team") && shown.contains("example.org"),
            "{shown}"
        );
    }

    #[test]
    fn redacts_secret_fields_in_tables() {
        let v =
            serde_json::json!([{"model": "m", "api_key": "sk-1", "nested": {"auth_token": "t"}}]);
        assert_eq!(
            redact_json(&v),
            serde_json::json!([{"model": "m", "api_key": "********", "nested": {"auth_token": "********"}}])
        );
    }

    /// (input, expected display); the secret in each is spelt with `S3CR`.
    const URLS: &[(&str, &str)] = &[
        (
            "postgres://cairn:S3CRet@db:5432/cairn",
            "postgres://cairn:****@db:5432/cairn",
        ),
        ("postgres://cairn@db/cairn", "postgres://cairn@db/cairn"),
        ("postgres://db:5432/cairn", "postgres://db:5432/cairn"),
        ("sqlite:///home/a/cairn.db", "sqlite:///home/a/cairn.db"),
        ("sqlite:///home/a@b/c:d.db", "sqlite:///home/a@b/c:d.db"),
        ("sqlite://cairn.db?mode=rwc", "sqlite://cairn.db?mode=rwc"),
        ("sqlite:cairn.db", "sqlite:cairn.db"),
        ("not a url", "not a url"),
        // Passwords holding characters userinfo should encode but people type raw.
        ("postgres://u:S3CR/et@h/db", "postgres://u:****@h/db"),
        ("postgres://u:S3CR@et@h/db", "postgres://u:****@h/db"),
        (
            "postgres://u:S3CR:et@h:5432/db",
            "postgres://u:****@h:5432/db",
        ),
        ("postgres://u:S3CR?et@h/db", "postgres://u:****@h/db"),
        ("postgres://u:S3CR#et@h/db", "postgres://u:****@h/db"),
        ("postgres://u:S3CR/?#@:et@h/db", "postgres://u:****@h/db"),
        ("postgres://u:S3CR%2Fet%40@h/db", "postgres://u:****@h/db"),
        ("postgres://:S3CRet@h/db", "postgres://:****@h/db"),
        (
            "postgres://u:S3CRet@/db?host=/run/pg",
            "postgres://u:****@/db?host=/run/pg",
        ),
        (
            "postgres://u:S3CRet@[::1]:5432/db",
            "postgres://u:****@[::1]:5432/db",
        ),
        ("postgres://[::1]:5432/db", "postgres://[::1]:5432/db"),
        // Secrets in the query, any case, percent-encoded names, several of them.
        (
            "postgres://h/db?sslmode=require&password=S3CR",
            "postgres://h/db?sslmode=require&password=****",
        ),
        (
            "postgres://u@h/db?PASSWORD=S3CR&sslmode=require",
            "postgres://u@h/db?PASSWORD=****&sslmode=require",
        ),
        ("postgres://h/db?pass=S3CR", "postgres://h/db?pass=****"),
        ("postgres://h/db?pwd=S3CR", "postgres://h/db?pwd=****"),
        ("postgres://h/db?Token=S3CR", "postgres://h/db?Token=****"),
        (
            "postgres://h/db?api_key=S3CR",
            "postgres://h/db?api_key=****",
        ),
        ("postgres://h/db?apiKey=S3CR", "postgres://h/db?apiKey=****"),
        ("postgres://h/db?secret=S3CR", "postgres://h/db?secret=****"),
        ("postgres://h/db?key=S3CR", "postgres://h/db?key=****"),
        (
            "postgres://h/db?access_token=S3CR",
            "postgres://h/db?access_token=****",
        ),
        (
            "postgres://h/db?sslpassword=S3CR",
            "postgres://h/db?sslpassword=****",
        ),
        (
            "postgres://h/db?pass%77ord=S3CR",
            "postgres://h/db?pass%77ord=****",
        ),
        (
            "postgres://h/db?password=S3CR#x&y",
            "postgres://h/db?password=****",
        ),
        (
            "postgres://h/db?password=S3CR&S3CR&sslmode=disable",
            "postgres://h/db?password=****&sslmode=disable",
        ),
        (
            "postgres://u:S3CR@h/db?password=S3CR",
            "postgres://u:****@h/db?password=****",
        ),
        ("sqlite:cairn.db?key=S3CR", "sqlite:cairn.db?key=****"),
        (
            "postgres://h/db?sslmode=require",
            "postgres://h/db?sslmode=require",
        ),
    ];

    #[test]
    fn redacts_url_secrets_in_userinfo_and_query() {
        let mut wrong = Vec::new();
        for (url, want) in URLS {
            let got = redact_url(url);
            if got != *want || got.contains("S3CR") {
                wrong.push(format!("{url} -> {got} (want {want})"));
            }
        }
        assert!(
            wrong.is_empty(),
            "{} wrong:\n{}",
            wrong.len(),
            wrong.join("\n")
        );
    }
}

//! Hiding secrets in what leaves the process: `cairn config show`, `cairn
//! doctor`, the daemon's log, the dashboard. The one place that decides
//! what a secret looks like:
//!
//! - a URL ([`redact_url`]): its user info and every query value (a
//!   database URL keeps its user name and connection options such as
//!   `sslmode`), a fragment, a Telegram bot token in the path;
//! - free text ([`redact_text`]): every URL in it, the value after a
//!   secret-looking long flag (`--token X`, `--api-key=X`) and after `Bearer`;
//! - a command line ([`redact_command`], [`redact_args`]): the same, plus
//!   short flags that take passwords (`-p`, `-u`, `-a`, `-H`) and
//!   `NAME=value` with a secret-looking name;
//! - a free-form table ([`redact_json`]): secret-looking fields whole, every
//!   value of `headers` and `env`, `args` and `command` as command lines.
//!
//! When in doubt each hides too much (a port after `-p`), never too little.

use super::Value;
use super::registry;

/// What replaces a hidden password or query value.
const HIDDEN: &str = "****";

/// What replaces a hidden setting, table field or argument, whole.
const HIDDEN_VALUE: &str = "********";

/// URL schemes of databases: their user is a role name, worth showing, and
/// their query holds connection options ([`SHOWN_DATABASE_PARAMS`]).
const DATABASE_SCHEMES: [&str; 9] = [
    "postgres",
    "postgresql",
    "mysql",
    "mariadb",
    "sqlite",
    "redis",
    "rediss",
    "mongodb",
    "mongodb+srv",
];

/// Query parameters of a database URL shown as written; every other query
/// value of every URL is hidden.
const SHOWN_DATABASE_PARAMS: [&str; 8] = [
    "sslmode",
    "mode",
    "cache",
    "host",
    "port",
    "application_name",
    "connect_timeout",
    "target_session_attrs",
];

/// A flag, field or variable whose name (lowercased) contains one of these
/// holds a secret: `password`, `passphrase`, `pwd`, `token`, `api-key`,
/// `apikey`, `secret`, `authorization`, `credentials`, …
const SECRET_WORDS: [&str; 8] = [
    "pass",
    "pwd",
    "token",
    "secret",
    "key",
    "auth",
    "credential",
    "cookie",
];

/// Short flags of command lines whose value is often a password or a
/// credential header (`mysql -p`, `curl -u user:pw`, `redis-cli -a`, `curl -H`).
const SECRET_SHORT_FLAGS: [&str; 4] = ["-p", "-u", "-a", "-H"];

/// Hides the secrets of a URL: its user info (`https://****@host`; a
/// database URL keeps its user, `postgres://cairn:****@db`), every query
/// value (a database URL's connection options excepted: `?sslmode=require`),
/// a fragment, and a Telegram bot token in the path (`/bot****/`).
///
/// People type passwords raw, with `/`, `@`, `:`, `?` or `#` in them, so the
/// user info ends at the last `@` followed by something shaped like a host.
/// When in doubt this hides too much (an `@` in a query value may swallow the
/// host), never too little.
pub fn redact_url(url: &str) -> String {
    let database = scheme_of(url).is_some_and(|s| DATABASE_SCHEMES.contains(&s.as_str()));
    let (prefix, mut rest) = match url.find("://") {
        Some(i) => url.split_at(i + 3),
        // `sqlite:cairn.db?key=…` has no authority but may have a query.
        None => ("", url),
    };
    let mut out = String::with_capacity(url.len());
    out.push_str(prefix);
    if !prefix.is_empty()
        && let Some(info) = userinfo(rest)
    {
        match (database, info.password) {
            (true, false) => out.push_str(info.user),
            (true, true) => {
                out.push_str(info.user);
                out.push(':');
                out.push_str(HIDDEN);
            }
            (false, _) => out.push_str(HIDDEN),
        }
        out.push('@');
        rest = &rest[info.host_start..];
    }
    let path_end = rest.find(['?', '#']).unwrap_or(rest.len());
    out.push_str(&redact_path(&rest[..path_end], !prefix.is_empty()));
    let tail = &rest[path_end..];
    if let Some(query) = tail.strip_prefix('?') {
        out.push('?');
        out.push_str(&redact_query(query, database));
    } else if let Some(fragment) = tail.strip_prefix('#') {
        out.push('#');
        if !fragment.is_empty() {
            out.push_str(HIDDEN);
        }
    }
    out
}

/// The scheme of `url` (`https`, `sqlite`), lowercased, if it starts with one.
fn scheme_of(url: &str) -> Option<String> {
    let (scheme, _) = url.split_once(':')?;
    let valid = scheme.starts_with(|c: char| c.is_ascii_alphabetic())
        && scheme
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "+.-".contains(c));
    valid.then(|| scheme.to_ascii_lowercase())
}

/// The user info that starts what follows `://`.
struct UserInfo<'a> {
    /// The user (empty in `:password@`).
    user: &'a str,
    /// Whether a password followed the user.
    password: bool,
    /// The offset where the host starts.
    host_start: usize,
}

/// When `rest` (what follows `://`) starts with `user@` or
/// `user:password@`: the user, whether a password came, where the host starts.
fn userinfo(rest: &str) -> Option<UserInfo<'_>> {
    let user_end = rest.find([':', '@', '/', '?', '#'])?;
    let user = &rest[..user_end];
    if rest[user_end..].starts_with('@') {
        return is_host(&rest[user_end + 1..]).then_some(UserInfo {
            user,
            password: false,
            host_start: user_end + 1,
        });
    }
    if !rest[user_end..].starts_with(':') {
        return None;
    }
    rest.rmatch_indices('@')
        .map(|(at, _)| at)
        .take_while(|&at| at > user_end)
        .find(|&at| is_host(&rest[at + 1..]))
        .map(|at| UserInfo {
            user,
            password: true,
            host_start: at + 1,
        })
}

/// Whether `rest` starts with a host (possibly empty, bracketed IPv6, with a
/// port) that runs up to the path, query, fragment or end.
fn is_host(rest: &str) -> bool {
    let end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    rest[..end]
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || ".-_%[]:".contains(c))
}

/// A host and path with a Telegram bot token (`bot<id>:<token>`) hidden
/// from the path (not from the host, the first segment after `://`).
fn redact_path(path: &str, has_host: bool) -> String {
    path.split('/')
        .enumerate()
        .map(|(i, segment)| {
            let bot_token = (i > 0 || !has_host)
                && segment.strip_prefix("bot").is_some_and(|rest| {
                    rest.split_once(':').is_some_and(|(id, _)| {
                        !id.is_empty() && id.bytes().all(|b| b.is_ascii_digit())
                    })
                });
            if bot_token {
                format!("bot{HIDDEN}")
            } else {
                segment.to_string()
            }
        })
        .collect::<Vec<_>>()
        .join("/")
}

/// A query string (after `?`) with its values hidden (but a database URL's
/// connection options). A value is everything up to the next `&name=`: a
/// raw `#` or `&` in a password must not leak the rest of it.
fn redact_query(query: &str, database: bool) -> String {
    let mut parts: Vec<String> = Vec::new();
    let mut in_hidden = false;
    for part in query.split('&') {
        match part.split_once('=') {
            Some((_, "")) => {
                parts.push(part.to_string());
                in_hidden = false;
            }
            Some((name, _))
                if database
                    && SHOWN_DATABASE_PARAMS
                        .contains(&percent_decode(name).to_ascii_lowercase().as_str()) =>
            {
                parts.push(part.to_string());
                in_hidden = false;
            }
            Some((name, _)) => {
                parts.push(format!("{name}={HIDDEN}"));
                in_hidden = true;
            }
            None if in_hidden => {}
            None => parts.push(part.to_string()),
        }
    }
    parts.join("&")
}

/// Whether a name (a flag without its dashes, a field, a variable) marks a
/// secret, ignoring case and percent-encoding.
pub fn is_secret_name(name: &str) -> bool {
    let decoded = percent_decode(name).to_ascii_lowercase();
    SECRET_WORDS.iter().any(|w| decoded.contains(w))
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

/// Free text (a log line, an error message, a check's report) with the
/// secrets of every URL in it hidden, and the value after a secret-looking
/// long flag (`--token X`, `--password=X`) or `Bearer`.
pub fn redact_text(text: &str) -> String {
    redact_words(&redact_urls_in(text), Mode::Prose)
}

/// A command line (a hook's `command`) as [`redact_text`] shows it, and
/// also the value after `-p`, `-u`, `-a` or `-H`, and `NAME=value` with a
/// secret-looking name (`API_TOKEN=…`).
pub fn redact_command(command: &str) -> String {
    redact_words(&redact_urls_in(command), Mode::Command)
}

/// Arguments (an MCP server's `args`) as [`redact_command`] shows a command
/// line: the argument after a secret flag is hidden whole, spaces and all.
pub fn redact_args<S: AsRef<str>>(args: &[S]) -> Vec<String> {
    let mut hide_next = false;
    args.iter()
        .enumerate()
        .map(|(i, arg)| {
            let arg = arg.as_ref();
            if std::mem::take(&mut hide_next) {
                return HIDDEN_VALUE.to_string();
            }
            hide_next = match classify(arg, Mode::Command) {
                Word::FlagBeforeValue => true,
                Word::Bearer => args.get(i + 1).is_some_and(|next| !is_prose(next.as_ref())),
                _ => false,
            };
            redact_command(arg)
        })
        .collect()
}

/// Every `scheme://…` in `text` through [`redact_url`]. A URL runs to the
/// next space, control character (a terminal colour), quote, angle bracket
/// or backslash (a JSON log line escapes its quotes), less the prose
/// punctuation that ends it.
fn redact_urls_in(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut done = 0;
    let mut from = 0;
    while let Some(found) = text[from..].find("://") {
        let at = from + found;
        let start = text[..at]
            .rfind(|c: char| !(c.is_ascii_alphanumeric() || "+.-".contains(c)))
            .map_or(0, |i| i + 1);
        let end = text[at + 3..]
            .find(|c: char| c.is_whitespace() || c.is_control() || "\"'<>\\`".contains(c))
            .map_or(text.len(), |i| at + 3 + i);
        // Prose punctuation after it (`(url), …`) is not the URL's; at worst
        // a value's own trailing punctuation shows.
        let end = start
            + text[start..end]
                .trim_end_matches([',', ';', '.', ')'])
                .len();
        if start < at {
            out.push_str(&text[done..start]);
            out.push_str(&redact_url(&text[start..end]));
            done = end;
        }
        from = end.max(at + 3);
    }
    out.push_str(&text[done..]);
    out
}

/// Where the words are from: prose (a log line) or a command line.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Mode {
    Prose,
    Command,
}

/// What a word says about itself and the next one.
enum Word {
    /// An ordinary word.
    Plain,
    /// A flag whose value is the next word (`--token`).
    FlagBeforeValue,
    /// `Bearer`: the next word is a token, unless it is prose ("bearer token").
    Bearer,
    /// A flag or assignment with its value after `=`, at this offset.
    ValueAfter(usize),
}

/// Classifies `word` (surrounding quotes ignored).
fn classify(word: &str, mode: Mode) -> Word {
    let lead = word.len() - word.trim_start_matches(['"', '\'']).len();
    let bare = &word[lead..];
    if bare.eq_ignore_ascii_case("bearer") {
        return Word::Bearer;
    }
    let name_end = bare.find('=');
    let name = &bare[..name_end.unwrap_or(bare.len())];
    let flag = name.starts_with("--")
        || (mode == Mode::Command && name.starts_with('-') && name.len() > 2);
    let assignment = mode == Mode::Command
        && name_end.is_some()
        && name.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_')
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
    match name_end {
        Some(eq) if (flag || assignment) && is_secret_name(name.trim_start_matches('-')) => {
            Word::ValueAfter(lead + eq + 1)
        }
        None if flag && is_secret_name(name.trim_start_matches('-')) => Word::FlagBeforeValue,
        None if mode == Mode::Command && SECRET_SHORT_FLAGS.contains(&name) => {
            Word::FlagBeforeValue
        }
        _ => Word::Plain,
    }
}

/// `text` with the values of secret flags and assignments hidden; a quoted
/// value (`--token "a b"`) is hidden up to its closing quote.
fn redact_words(text: &str, mode: Mode) -> String {
    let mut out = String::with_capacity(text.len());
    let mut hide_next = false;
    let mut after_bearer = false;
    // Inside a hidden quoted value: the quote that ends it.
    let mut open_quote: Option<char> = None;
    for piece in text.split_inclusive(char::is_whitespace) {
        let word = piece.trim_end_matches(char::is_whitespace);
        let gap = &piece[word.len()..];
        if let Some(quote) = open_quote {
            if word.ends_with(quote) {
                open_quote = None;
                out.push_str(gap);
            }
            continue;
        }
        if word.is_empty() {
            out.push_str(gap);
            continue;
        }
        if std::mem::take(&mut after_bearer) && !is_prose(word) {
            hide_next = true;
        }
        if std::mem::take(&mut hide_next) {
            open_quote = hidden_value(word, &mut out);
            if open_quote.is_none() {
                out.push_str(gap);
            }
            continue;
        }
        match classify(word, mode) {
            Word::Plain => out.push_str(word),
            Word::FlagBeforeValue => {
                out.push_str(word);
                hide_next = true;
            }
            Word::Bearer => {
                out.push_str(word);
                after_bearer = true;
            }
            Word::ValueAfter(at) => {
                out.push_str(&word[..at]);
                open_quote = hidden_value(&word[at..], &mut out);
            }
        }
        if open_quote.is_none() {
            out.push_str(gap);
        }
    }
    out
}

/// Whether a word after `Bearer` reads as prose rather than a token: a
/// short lowercase word ("bearer token.") or a placeholder (`<token>`).
fn is_prose(word: &str) -> bool {
    let bare = word.trim_end_matches([',', '.', ';', ':', ')']);
    bare.starts_with('<')
        || (!bare.is_empty() && bare.len() <= 12 && bare.bytes().all(|b| b.is_ascii_lowercase()))
}

/// Writes the stand-in for `value`; when it opens a quote it does not
/// close, the quote that will.
fn hidden_value(value: &str, out: &mut String) -> Option<char> {
    out.push_str(HIDDEN_VALUE);
    let quote = value.chars().next().filter(|c| *c == '"' || *c == '\'')?;
    let closed = value.len() > 1 && value.ends_with(quote);
    (!closed).then_some(quote)
}

/// A setting's value as it may be shown: secrets hidden whole, URL settings
/// (`database.url`, `llm.base_url`) as [`redact_url`] shows them.
pub(crate) fn redact_value(key: &str, value: &Value) -> Value {
    if registry::find(key).is_some_and(|def| def.secret) {
        return Value::Text(HIDDEN_VALUE.to_string());
    }
    match value {
        Value::Text(text) if key.ends_with("url") => Value::Text(redact_url(text)),
        Value::Text(text) => Value::Text(redact_text(text)),
        Value::List(items) => Value::List(items.iter().map(|i| redact_text(i)).collect()),
        other => other.clone(),
    }
}

/// A copy of a free-form table with every secret-looking field (`*key*`,
/// `*secret*`, `*token*`, `*password*`, an ntfy `topic`, which anyone who
/// knows it can read and post to) and every value of a `headers` or `env`
/// table (extra request headers and an MCP server's variables are mostly
/// credentials) replaced by `********`; `args` and `command` shown as
/// [`redact_args`] and [`redact_command`] do, other text as [`redact_text`].
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
                        J::Object(headers) if lower == "headers" || lower == "env" => J::Object(
                            headers
                                .keys()
                                .map(|name| (name.clone(), J::String(HIDDEN_VALUE.into())))
                                .collect(),
                        ),
                        J::Object(_) | J::Null => redact_json(v),
                        _ if secret => J::String(HIDDEN_VALUE.into()),
                        J::Array(items) if lower == "args" && items.iter().all(J::is_string) => {
                            let args: Vec<&str> = items.iter().filter_map(J::as_str).collect();
                            J::Array(redact_args(&args).into_iter().map(J::String).collect())
                        }
                        J::String(text) if lower == "command" => J::String(redact_command(text)),
                        _ => redact_json(v),
                    };
                    (k.clone(), shown)
                })
                .collect(),
        ),
        J::Array(items) => J::Array(items.iter().map(redact_json).collect()),
        J::String(text) => J::String(redact_text(text)),
        other => other.clone(),
    }
}

#[cfg(test)]
#[path = "redact_tests.rs"]
mod tests;

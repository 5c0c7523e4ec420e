//! `[[tools.http.credentials]]`: a credential cairn adds itself to the
//! requests the agent makes to one host, so the model never holds it.
//!
//! ```toml
//! [[tools.http.credentials]]
//! host = "api.github.com"            # a name, or name:port
//! header = "Authorization"
//! value = "Bearer ${GITHUB_TOKEN}"
//!
//! [[tools.http.credentials]]
//! host = "127.0.0.1:8080"
//! query = "api_key"                  # ?api_key=VALUE instead of a header
//! value = "${SEARCH_KEY}"
//! ```
//!
//! `value` is expanded by the caller (the one expansion of `${…}`); the
//! model is told only that a credential exists for the host.

use secrecy::{ExposeSecret, SecretString};
use serde::{Deserialize, Serialize, Serializer};

/// One credential bound to a host.
#[derive(Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HostCredential {
    /// The host it is sent to: a name or an address, optionally `:port`
    /// (without a port, any port of that host).
    pub host: String,
    /// The request header that carries it.
    #[serde(default)]
    pub header: Option<String>,
    /// Or the query parameter that carries it.
    #[serde(default)]
    pub query: Option<String>,
    /// The value (`${VAR}` expanded before use); never shown.
    pub value: SecretString,
}

impl std::fmt::Debug for HostCredential {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HostCredential")
            .field("host", &self.host)
            .field("header", &self.header)
            .field("query", &self.query)
            .finish_non_exhaustive()
    }
}

impl PartialEq for HostCredential {
    fn eq(&self, other: &Self) -> bool {
        self.host == other.host
            && self.header == other.header
            && self.query == other.query
            && self.value.expose_secret() == other.value.expose_secret()
    }
}

impl Eq for HostCredential {}

/// Shown (`config show`, a reload's diff) without its value.
impl Serialize for HostCredential {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeStruct;
        let mut s = serializer.serialize_struct("HostCredential", 4)?;
        s.serialize_field("host", &self.host)?;
        s.serialize_field("header", &self.header)?;
        s.serialize_field("query", &self.query)?;
        s.serialize_field("value", "[REDACTED]")?;
        s.end()
    }
}

impl HostCredential {
    /// The problems of this entry, each as `(field, why)`.
    pub fn problems(&self) -> Vec<(&'static str, String)> {
        let mut problems = Vec::new();
        if let Err(why) = parse_host(&self.host) {
            problems.push(("host", why));
        }
        match (&self.header, &self.query) {
            (Some(_), Some(_)) => {
                problems.push(("query", "give `header` or `query`, not both".to_string()))
            }
            (None, None) => problems.push((
                "header",
                "give `header` (a request header) or `query` (a query parameter)".to_string(),
            )),
            (Some(header), None) if !is_token(header) => {
                problems.push(("header", format!("`{header}` is not a header name")))
            }
            (None, Some(query)) if query.trim().is_empty() => {
                problems.push(("query", "the parameter name is empty".to_string()));
            }
            _ => {}
        }
        if self.value.expose_secret().is_empty() {
            problems.push(("value", "the value is empty".to_string()));
        }
        problems
    }

    /// Whether a request to `host` (as a URL names it) on `port` gets it.
    pub fn matches(&self, host: &str, port: Option<u16>) -> bool {
        let Ok((name, bound_port)) = parse_host(&self.host) else {
            return false;
        };
        normalize(host) == name && bound_port.is_none_or(|p| Some(p) == port)
    }
}

/// Every problem of `credentials`, as `tools.http.credentials[i].field: why`.
pub fn credential_problems(credentials: &[HostCredential]) -> Vec<String> {
    credentials
        .iter()
        .enumerate()
        .flat_map(|(i, c)| {
            c.problems()
                .into_iter()
                .map(move |(field, why)| format!("tools.http.credentials[{i}].{field}: {why}"))
        })
        .collect()
}

/// A host lower-cased, without a trailing dot or IPv6 brackets.
fn normalize(host: &str) -> String {
    host.trim()
        .trim_end_matches('.')
        .trim_start_matches('[')
        .trim_end_matches(']')
        .to_ascii_lowercase()
}

/// `name` or `name:port` (`[v6]:port` for an IPv6 address).
fn parse_host(text: &str) -> Result<(String, Option<u16>), String> {
    let text = text.trim();
    if text.is_empty() {
        return Err("the host is empty".to_string());
    }
    if text.contains("://") || text.contains('/') {
        return Err(format!(
            "`{text}` is not a host: give a name or name:port, without scheme or path"
        ));
    }
    let (name, port) = match text.rsplit_once(':') {
        // A bare IPv6 address has colons but no port.
        Some((name, port)) if !name.contains(':') || name.ends_with(']') => {
            let port = port
                .parse::<u16>()
                .map_err(|_| format!("`{port}` in `{text}` is not a port"))?;
            (name, Some(port))
        }
        _ => (text, None),
    };
    let name = normalize(name);
    if name.is_empty() || name.contains(char::is_whitespace) {
        return Err(format!("`{text}` is not a host name"));
    }
    Ok((name, port))
}

/// An HTTP token (RFC 9110), as header names are.
fn is_token(text: &str) -> bool {
    !text.is_empty()
        && text
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn credential(host: &str, header: Option<&str>, query: Option<&str>) -> HostCredential {
        HostCredential {
            host: host.into(),
            header: header.map(Into::into),
            query: query.map(Into::into),
            value: SecretString::from("v-123456789"),
        }
    }

    #[test]
    fn hosts_match_by_name_and_port() {
        let any_port = credential("API.github.com.", Some("Authorization"), None);
        assert!(any_port.matches("api.github.com", Some(443)));
        assert!(any_port.matches("api.github.com", Some(8443)));
        assert!(!any_port.matches("evil.github.com", Some(443)));
        assert!(!any_port.matches("api.github.com.evil", Some(443)));
        let one_port = credential("127.0.0.1:8080", None, Some("k"));
        assert!(one_port.matches("127.0.0.1", Some(8080)));
        assert!(!one_port.matches("127.0.0.1", Some(8081)));
        let v6 = credential("[::1]:9", Some("X-Key"), None);
        assert!(v6.matches("[::1]", Some(9)));
        assert!(credential("::1", Some("X"), None).matches("[::1]", Some(1)));
    }

    #[test]
    fn every_problem_names_its_field() {
        let bad = vec![
            credential("https://x.test/", Some("Authorization"), None),
            credential("x.test:http", Some("bad header"), None),
            credential("x.test", Some("A"), Some("b")),
            credential("x.test", None, None),
            HostCredential {
                value: SecretString::from(""),
                ..credential("x.test", None, Some("k"))
            },
        ];
        assert_eq!(
            credential_problems(&bad),
            [
                "tools.http.credentials[0].host: `https://x.test/` is not a host: give a name or name:port, without scheme or path",
                "tools.http.credentials[1].host: `http` in `x.test:http` is not a port",
                "tools.http.credentials[1].header: `bad header` is not a header name",
                "tools.http.credentials[2].query: give `header` or `query`, not both",
                "tools.http.credentials[3].header: give `header` (a request header) or `query` (a query parameter)",
                "tools.http.credentials[4].value: the value is empty",
            ]
        );
        assert!(credential_problems(&[credential("x.test:1", None, Some("k"))]).is_empty());
    }

    #[test]
    fn neither_debug_nor_serialization_shows_the_value() {
        let c = credential("x.test", Some("A"), None);
        let shown = format!("{c:?} {}", serde_json::to_string(&c).unwrap());
        assert!(!shown.contains("v-123456789"), "{shown}");
    }
}

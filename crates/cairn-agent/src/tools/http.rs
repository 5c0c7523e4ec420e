//! The `http_request` tool: one HTTP(S) request with size and time limits.
//!
//! By default it refuses loopback, private, link-local and other internal
//! addresses — checked on every DNS answer and redirect hop, not just the first
//! URL — so the model cannot reach the daemon itself, cloud metadata services or
//! the home network. System proxy settings are ignored for the same reason.

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use futures::StreamExt;
use reqwest::dns::{Addrs, Name, Resolve, Resolving};
use reqwest::header::{HeaderMap, HeaderName, HeaderValue};
use reqwest::{Method, Url};
use serde::{Deserialize, Serialize};
use serde_json::json;

use super::{RiskLevel, Tool, ToolContext, ToolError, ToolOutput, json_type, opt_str, req_str};
use crate::runner::Authorized;

/// Configuration of the `http_request` tool.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct HttpConfig {
    /// Limit of the whole request, body included.
    #[serde(with = "cairn_core::duration::serde_compact")]
    pub timeout: Duration,
    /// Most response-body bytes read; the rest is not downloaded.
    pub max_response_bytes: usize,
    /// Most request-body bytes accepted.
    pub max_request_bytes: usize,
    /// Refuse loopback, private, link-local and other non-public addresses.
    pub block_private_networks: bool,
    /// If non-empty, only these hosts (or their subdomains) may be requested.
    pub allowed_hosts: Vec<String>,
    /// Most redirects followed.
    pub max_redirects: usize,
    /// The User-Agent header sent unless the call sets one.
    pub user_agent: String,
}

impl Default for HttpConfig {
    fn default() -> Self {
        Self {
            timeout: Duration::from_secs(30),
            max_response_bytes: 1024 * 1024,
            max_request_bytes: 1024 * 1024,
            block_private_networks: true,
            allowed_hosts: Vec::new(),
            max_redirects: 5,
            user_agent: concat!("cairn/", env!("CARGO_PKG_VERSION")).to_string(),
        }
    }
}

/// `http_request`: sends one HTTP request and returns status, key headers and body.
#[derive(Debug, Clone)]
pub struct HttpRequestTool {
    config: Arc<HttpConfig>,
    client: reqwest::Client,
}

impl HttpRequestTool {
    /// Builds the tool and its HTTP client.
    pub fn new(config: HttpConfig) -> Result<Self, ToolError> {
        let config = Arc::new(config);
        let policy_config = Arc::clone(&config);
        let redirect = reqwest::redirect::Policy::custom(move |attempt| {
            if attempt.previous().len() >= policy_config.max_redirects {
                return attempt.error(format!(
                    "more than {} redirects",
                    policy_config.max_redirects
                ));
            }
            match check_url(attempt.url(), &policy_config) {
                Ok(()) => attempt.follow(),
                Err(reason) => attempt.error(Blocked(reason)),
            }
        });
        let mut builder = reqwest::Client::builder()
            .redirect(redirect)
            .no_proxy()
            .timeout(config.timeout)
            .user_agent(config.user_agent.clone());
        if config.block_private_networks {
            builder = builder.dns_resolver(Arc::new(PublicOnlyResolver));
        }
        let client = builder
            .build()
            .map_err(|e| ToolError::Http(format!("cannot build the HTTP client: {e}")))?;
        Ok(Self { config, client })
    }

    async fn send(&self, args: &serde_json::Value) -> Result<ToolOutput, ToolError> {
        let raw_url = req_str(args, "url")?;
        let url = Url::parse(raw_url.trim())
            .map_err(|e| ToolError::InvalidArguments(format!("bad url `{raw_url}`: {e}")))?;
        check_url(&url, &self.config).map_err(ToolError::NotPermitted)?;
        let method = opt_str(args, "method")?
            .unwrap_or("GET")
            .trim()
            .to_ascii_uppercase();
        let method = match method.as_str() {
            "GET" | "HEAD" | "POST" | "PUT" | "PATCH" | "DELETE" | "OPTIONS" => {
                Method::from_bytes(method.as_bytes())
                    .map_err(|_| ToolError::InvalidArguments(format!("bad method `{method}`")))?
            }
            other => {
                return Err(ToolError::InvalidArguments(format!(
                    "unsupported method `{other}`; use GET, HEAD, POST, PUT, PATCH, DELETE or OPTIONS"
                )));
            }
        };
        let mut headers = parse_headers(args.get("headers"))?;
        let body = match args.get("body") {
            None | Some(serde_json::Value::Null) => None,
            Some(serde_json::Value::String(s)) => Some(s.clone().into_bytes()),
            Some(value) => {
                if !headers.contains_key(reqwest::header::CONTENT_TYPE) {
                    headers.insert(
                        reqwest::header::CONTENT_TYPE,
                        HeaderValue::from_static("application/json"),
                    );
                }
                Some(value.to_string().into_bytes())
            }
        };
        if body
            .as_ref()
            .is_some_and(|b| b.len() > self.config.max_request_bytes)
        {
            return Err(ToolError::InvalidArguments(format!(
                "request body exceeds {} bytes",
                self.config.max_request_bytes
            )));
        }
        let mut request = self.client.request(method, url).headers(headers);
        if let Some(body) = body {
            request = request.body(body);
        }
        let response = request.send().await.map_err(|e| self.map_err(&e))?;

        let status = response.status();
        let mut text = format!("HTTP {status}\n");
        for name in ["content-type", "content-length", "location", "retry-after"] {
            if let Some(value) = response.headers().get(name) {
                text.push_str(&format!(
                    "{name}: {}\n",
                    String::from_utf8_lossy(value.as_bytes())
                ));
            }
        }
        let content_type = response
            .headers()
            .get(reqwest::header::CONTENT_TYPE)
            .map(|v| String::from_utf8_lossy(v.as_bytes()).to_ascii_lowercase())
            .unwrap_or_default();
        let max = self.config.max_response_bytes;
        let mut body = Vec::new();
        let mut cut = false;
        let mut stream = response.bytes_stream();
        while let Some(chunk) = stream.next().await {
            let chunk = chunk.map_err(|e| self.map_err(&e))?;
            let room = max.saturating_sub(body.len());
            if chunk.len() > room {
                body.extend_from_slice(&chunk[..room]);
                cut = true;
                break;
            }
            body.extend_from_slice(&chunk);
        }
        text.push('\n');
        if is_binary(&content_type, &body) {
            text.push_str(&format!("[binary body of {} bytes not shown]", body.len()));
        } else {
            text.push_str(&String::from_utf8_lossy(&body));
        }
        if cut {
            text.push_str(&format!("\n[http_request: body cut at {max} bytes]"));
        }
        Ok(if status.is_success() || status.is_redirection() {
            ToolOutput::ok(text)
        } else {
            ToolOutput::failed(text)
        })
    }

    fn map_err(&self, e: &reqwest::Error) -> ToolError {
        if let Some(blocked) = blocked_in(e) {
            return ToolError::NotPermitted(blocked.0.clone());
        }
        if e.is_timeout() {
            ToolError::Timeout(self.config.timeout)
        } else {
            ToolError::Http(cairn_core::text::error_chain(e))
        }
    }
}

#[async_trait]
impl Tool for HttpRequestTool {
    fn name(&self) -> &str {
        "http_request"
    }

    fn description(&self) -> &str {
        "Send an HTTP(S) request and return the status, key headers and (size-limited) body. Internal and private addresses are refused."
    }

    fn parameters(&self) -> serde_json::Value {
        json!({
            "type": "object",
            "properties": {
                "url": {"type": "string", "description": "http:// or https:// URL"},
                "method": {"type": "string", "enum": ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"], "default": "GET"},
                "headers": {"type": "object", "additionalProperties": {"type": "string"}},
                "body": {"description": "request body: a string, or JSON sent as application/json"}
            },
            "required": ["url"],
            "additionalProperties": false
        })
    }

    fn risk(&self) -> RiskLevel {
        RiskLevel::Dangerous
    }

    async fn execute(
        &self,
        args: serde_json::Value,
        ctx: &ToolContext,
        _: &Authorized,
    ) -> Result<ToolOutput, ToolError> {
        tokio::select! {
            biased;
            () = ctx.cancel.cancelled() => Err(ToolError::Cancelled),
            r = self.send(&args) => r,
        }
    }
}

fn parse_headers(value: Option<&serde_json::Value>) -> Result<HeaderMap, ToolError> {
    let mut headers = HeaderMap::new();
    let map = match value {
        None | Some(serde_json::Value::Null) => return Ok(headers),
        Some(serde_json::Value::Object(map)) => map,
        Some(other) => {
            return Err(ToolError::InvalidArguments(format!(
                "`headers` must be an object, got {}",
                json_type(other)
            )));
        }
    };
    for (name, value) in map {
        let header = HeaderName::from_bytes(name.as_bytes())
            .map_err(|_| ToolError::InvalidArguments(format!("bad header name `{name}`")))?;
        let text = match value {
            serde_json::Value::String(s) => s.clone(),
            serde_json::Value::Number(n) => n.to_string(),
            serde_json::Value::Bool(b) => b.to_string(),
            other => {
                return Err(ToolError::InvalidArguments(format!(
                    "header `{name}` must be a string, got {}",
                    json_type(other)
                )));
            }
        };
        let value = HeaderValue::from_str(&text)
            .map_err(|_| ToolError::InvalidArguments(format!("bad value for header `{name}`")))?;
        headers.append(header, value);
    }
    Ok(headers)
}

/// Checks scheme, host allow-list and (for IP literals) the address class.
fn check_url(url: &Url, config: &HttpConfig) -> Result<(), String> {
    if !matches!(url.scheme(), "http" | "https") {
        return Err(format!(
            "scheme `{}` is not allowed; use http or https",
            url.scheme()
        ));
    }
    let Some(host) = url.host_str() else {
        return Err("the URL has no host".into());
    };
    let host_text = host.trim_end_matches('.').to_ascii_lowercase();
    if !config.allowed_hosts.is_empty()
        && !config.allowed_hosts.iter().any(|allowed| {
            let allowed = allowed.trim().trim_end_matches('.').to_ascii_lowercase();
            host_text == allowed || host_text.ends_with(&format!(".{allowed}"))
        })
    {
        return Err(format!("host `{host_text}` is not in the allowed hosts"));
    }
    if config.block_private_networks {
        if host_text == "localhost" || host_text.ends_with(".localhost") {
            return Err(format!(
                "host `{host_text}` is local; private and local addresses are refused"
            ));
        }
        // IPv6 literals come bracketed in URLs.
        let bare = host_text.trim_start_matches('[').trim_end_matches(']');
        if let Some(ip) = bare.parse::<IpAddr>().ok().filter(|ip| !is_public(*ip)) {
            return Err(format!(
                "address {ip} is private or local; such addresses are refused"
            ));
        }
    }
    Ok(())
}

/// True for globally routable unicast addresses.
pub fn is_public(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => {
            let [a, b, ..] = v4.octets();
            !(v4.is_loopback()
                || v4.is_private()
                || v4.is_link_local()
                || v4.is_unspecified()
                || v4.is_broadcast()
                || v4.is_multicast()
                || v4.is_documentation()
                || a == 0
                || (a == 100 && (64..128).contains(&b)) // carrier-grade NAT
                || (a == 198 && (b == 18 || b == 19)) // benchmarking
                || a >= 240)
        }
        IpAddr::V6(v6) => {
            if let Some(v4) = v6.to_ipv4_mapped() {
                return is_public(IpAddr::V4(v4));
            }
            let s = v6.segments();
            let first = s[0];
            !(v6.is_loopback()
                || v6.is_unspecified()
                || v6.is_multicast()
                // IPv4-compatible (`::a.b.c.d`, deprecated): some stacks still reach a.b.c.d.
                || s[..6] == [0; 6]
                // NAT64 (RFC 6052 `64:ff9b::/96`, local-use RFC 8215 `64:ff9b:1::/48`):
                // a translator reaches the embedded IPv4 address, loopback and private included.
                || s[..6] == [0x64, 0xff9b, 0, 0, 0, 0]
                || s[..3] == [0x64, 0xff9b, 1]
                || (first & 0xfe00) == 0xfc00 // unique local
                || (first & 0xffc0) == 0xfe80 // link local
                || (first & 0xffc0) == 0xfec0 // site local (deprecated, private in practice)
                || first == 0x2001 && s[1] == 0x0db8) // documentation
        }
    }
}

/// A destination refused by policy after the first URL check (a redirect, a
/// DNS answer): carried through reqwest's error chain so the call ends as a
/// refusal, like the first check, and not as a failure of the tool.
#[derive(Debug)]
struct Blocked(String);

impl std::fmt::Display for Blocked {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Blocked {}

/// The [`Blocked`] refusal somewhere in `error`'s chain of causes.
fn blocked_in(error: &reqwest::Error) -> Option<&Blocked> {
    let mut cause: Option<&(dyn std::error::Error + 'static)> = Some(error);
    while let Some(e) = cause {
        if let Some(blocked) = e.downcast_ref::<Blocked>() {
            return Some(blocked);
        }
        cause = e.source();
    }
    None
}

/// Resolves with the system resolver and drops every non-public address, so a
/// public name that points inside (or rebinds to) the network is refused.
struct PublicOnlyResolver;

impl Resolve for PublicOnlyResolver {
    fn resolve(&self, name: Name) -> Resolving {
        let host = name.as_str().to_string();
        Box::pin(async move {
            let addrs: Vec<SocketAddr> = tokio::net::lookup_host((host.as_str(), 0))
                .await?
                .filter(|addr| is_public(addr.ip()))
                .collect();
            if addrs.is_empty() {
                return Err(Box::new(Blocked(format!(
                    "`{host}` resolves only to private or local addresses, which are refused"
                )))
                    as Box<dyn std::error::Error + Send + Sync>);
            }
            Ok(Box::new(addrs.into_iter()) as Addrs)
        })
    }
}

fn is_binary(content_type: &str, body: &[u8]) -> bool {
    let texty = content_type.is_empty()
        || content_type.starts_with("text/")
        || [
            "json",
            "xml",
            "javascript",
            "yaml",
            "csv",
            "x-www-form-urlencoded",
        ]
        .iter()
        .any(|t| content_type.contains(t));
    !texty || body.iter().take(8192).any(|&b| b == 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classifies_addresses() {
        for ip in [
            "127.0.0.1",
            "10.1.2.3",
            "172.16.0.1",
            "192.168.1.1",
            "169.254.169.254",
            "100.64.0.1",
            "0.0.0.0",
            "::1",
            "fd00::1",
            "fe80::1",
            "::ffff:127.0.0.1",
            // IPv4-compatible IPv6 (deprecated, still routed to the IPv4 address by some stacks).
            "::127.0.0.1",
            "::10.0.0.1",
            "::169.254.169.254",
            // NAT64: the embedded IPv4 address is what gets reached.
            "64:ff9b::127.0.0.1",
            "64:ff9b::a00:1",
            "64:ff9b::8.8.8.8",
            // Local-use NAT64 prefix.
            "64:ff9b:1::1",
            // Site-local (deprecated, still private in practice).
            "fec0::1",
            "feff:ffff::1",
        ] {
            assert!(!is_public(ip.parse().unwrap()), "{ip}");
        }
        for ip in [
            "1.1.1.1",
            "93.184.216.34",
            "2606:4700::1111",
            "2001:4860::8888",
            "64:ff9a::1",
        ] {
            assert!(is_public(ip.parse().unwrap()), "{ip}");
        }
    }

    #[test]
    fn checks_urls() {
        let config = HttpConfig::default();
        let check = |u: &str| check_url(&Url::parse(u).unwrap(), &config);
        assert!(check("https://example.com/x").is_ok());
        assert!(check("file:///etc/passwd").unwrap_err().contains("scheme"));
        assert!(
            check("http://127.0.0.1:8080/")
                .unwrap_err()
                .contains("private or local")
        );
        assert!(check("http://[::1]/").is_err());
        for url in [
            "http://[::127.0.0.1]:8080/",
            "http://[64:ff9b::7f00:1]/",
            "http://[fec0::1]/",
        ] {
            assert!(
                check(url).unwrap_err().contains("private or local"),
                "{url}"
            );
        }
        assert!(check("http://localhost/").is_err());
        assert!(check("http://169.254.169.254/latest/meta-data").is_err());
        let only = HttpConfig {
            allowed_hosts: vec!["example.com".into()],
            ..HttpConfig::default()
        };
        assert!(check_url(&Url::parse("https://api.example.com/").unwrap(), &only).is_ok());
        assert!(check_url(&Url::parse("https://evil-example.com/").unwrap(), &only).is_err());
    }

    #[test]
    fn header_parsing_errors_are_typed() {
        assert!(parse_headers(Some(&json!({"X-A": "1", "X-N": 2}))).is_ok());
        assert!(matches!(
            parse_headers(Some(&json!("x"))),
            Err(ToolError::InvalidArguments(_))
        ));
        assert!(matches!(
            parse_headers(Some(&json!({"bad name": "x"}))),
            Err(ToolError::InvalidArguments(_))
        ));
        assert!(matches!(
            parse_headers(Some(&json!({"X": "a\nb"}))),
            Err(ToolError::InvalidArguments(_))
        ));
    }
}

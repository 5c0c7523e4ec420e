//! The `http_request` tool: one HTTP(S) request with size and time limits.
//!
//! It goes through the network rules of [`super::net`]: by default it refuses
//! loopback, private, link-local and other internal addresses — checked on
//! every DNS answer and redirect hop, not just the first URL — so the model
//! cannot reach the daemon itself, cloud metadata services or the home
//! network.

use std::sync::Arc;
use std::sync::LazyLock;
use std::time::Duration;

use async_trait::async_trait;
use reqwest::Method;
use reqwest::header::{HeaderMap, HeaderName, HeaderValue};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::args::{json_type, opt_str, req_str};
use super::net::NetClient;
use super::{CallOutcome, RiskLevel, Tool, ToolContext, ToolError, ToolOutput, ToolSpec, schema};
use crate::runner::Authorized;
pub use cairn_core::config::credentials::HostCredential;

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
    /// Private or local networks (`192.168.1.0/24`, `127.0.0.1`) reachable
    /// even though `block_private_networks` refuses the others.
    pub allowed_private_networks: Vec<String>,
    /// Most redirects followed.
    pub max_redirects: usize,
    /// The User-Agent header sent unless the call sets one.
    pub user_agent: String,
    /// Credentials cairn adds to the requests to their host (`[[tools.http.credentials]]`).
    pub credentials: Vec<HostCredential>,
}

impl Default for HttpConfig {
    fn default() -> Self {
        Self {
            timeout: Duration::from_secs(30),
            max_response_bytes: 1024 * 1024,
            max_request_bytes: 1024 * 1024,
            block_private_networks: true,
            allowed_hosts: Vec::new(),
            allowed_private_networks: Vec::new(),
            max_redirects: 5,
            user_agent: concat!("cairn/", env!("CARGO_PKG_VERSION")).to_string(),
            credentials: Vec::new(),
        }
    }
}

/// `http_request`: sends one HTTP request and returns status, key headers and body.
#[derive(Debug, Clone)]
pub struct HttpRequestTool {
    net: Arc<NetClient>,
    /// The shared spec, or one naming the hosts with a credential.
    spec: ToolSpec,
}

impl HttpRequestTool {
    /// Builds the tool and its HTTP client.
    pub fn new(config: HttpConfig) -> Result<Self, ToolError> {
        Ok(Self::over(Arc::new(NetClient::new(config)?)))
    }

    /// The tool over a client shared with other tools.
    pub fn over(net: Arc<NetClient>) -> Self {
        let spec = with_credential_hosts(&HTTP_REQUEST, &net);
        Self { net, spec }
    }

    async fn send(&self, args: &serde_json::Value) -> CallOutcome {
        let url = self.net.parse_url(req_str(args, "url")?)?;
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
            .is_some_and(|b| b.len() > self.net.config().max_request_bytes)
        {
            return Err(ToolError::InvalidArguments(format!(
                "request body exceeds {} bytes",
                self.net.config().max_request_bytes
            )));
        }
        let response = self.net.exchange(method, url, headers, body).await?;

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
        let content_type = super::net::content_type(&response);
        let max = self.net.config().max_response_bytes;
        let super::net::Body { bytes: body, cut } = self.net.read_body(response, max).await?;
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
}

static HTTP_REQUEST: LazyLock<ToolSpec> = LazyLock::new(|| {
    ToolSpec::new(
        "http_request",
        RiskLevel::Dangerous,
        "Send an HTTP(S) request and return the status, key headers and (size-limited) body. Internal and private addresses are refused.",
    )
    .params(schema::closed(
        json!({
            "url": {"type": "string", "description": "http:// or https:// URL"},
            "method": {"type": "string", "enum": ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"], "default": "GET"},
            "headers": {"type": "object", "additionalProperties": {"type": "string"}},
            "body": {"description": "request body: a string, or JSON sent as application/json"}
        }),
        &["url"],
    ))
});

#[async_trait]
impl Tool for HttpRequestTool {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    async fn execute(&self, args: Value, ctx: &ToolContext, _: &Authorized) -> CallOutcome {
        ctx.until_cancelled(self.send(&args)).await
    }
}

/// `spec` telling the model which hosts cairn adds a credential for (their
/// values stay cairn's: the model must not, and cannot, send them itself).
pub(crate) fn with_credential_hosts(spec: &ToolSpec, net: &NetClient) -> ToolSpec {
    let hosts = net.credential_hosts();
    if hosts.is_empty() {
        return spec.clone();
    }
    let shown: Vec<String> = hosts.iter().map(|h| format!("`{h}`")).collect();
    let description = format!(
        "{} cairn adds a stored credential itself to requests to {} (never write one in the request; you do not know its value).",
        spec.description(),
        shown.join(", ")
    );
    spec.clone().with_description(description)
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

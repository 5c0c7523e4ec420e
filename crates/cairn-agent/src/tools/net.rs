//! The network rules of `[tools.http]`, for every request the agent makes
//! on the model's behalf (`http_request`, `web_fetch`, images fetched for
//! `/v1`): http(s) only, the allowed hosts, loopback, private, link-local
//! and other internal addresses refused unless a configured network allows
//! them — checked on the URL, on every DNS answer and on every redirect
//! hop — system proxies ignored, and bounded time and body size.
//!
//! One [`NetClient`] holds the rules and its HTTP client; the tools share
//! it rather than each keeping a copy of the rules.

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;

use cairn_core::ip_range::IpRange;
use futures::StreamExt;
use reqwest::dns::{Addrs, Name, Resolve, Resolving};
use reqwest::{Method, Url};

use super::ToolError;
use super::http::HttpConfig;

mod credentials;

/// The rules and the HTTP client that obeys them.
#[derive(Debug, Clone)]
pub struct NetClient {
    rules: Arc<Rules>,
    client: reqwest::Client,
    /// With credentials bound to hosts: a client following no redirect, so
    /// [`NetClient::exchange`] decides each hop's credentials itself.
    manual: Option<reqwest::Client>,
}

/// What `check` and the resolver consult.
#[derive(Debug)]
struct Rules {
    config: HttpConfig,
    /// Parsed `allowed_private_networks`.
    allowed: Vec<IpRange>,
}

/// A body read up to a bound.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Body {
    /// The bytes read.
    pub bytes: Vec<u8>,
    /// True when the response was longer and the rest was not downloaded.
    pub cut: bool,
}

/// The outcome of [`NetClient::get`].
#[derive(Debug, Clone)]
pub struct Fetched {
    /// The URL that answered, after redirects.
    pub final_url: Url,
    /// The HTTP status.
    pub status: reqwest::StatusCode,
    /// The `Content-Type` header, lower-cased (empty when absent).
    pub content_type: String,
    /// The body, up to the bound.
    pub body: Body,
}

impl NetClient {
    /// The client for `config`; an unparsable `allowed_private_networks`
    /// entry is an error naming it.
    pub fn new(config: HttpConfig) -> Result<Self, ToolError> {
        let allowed = config
            .allowed_private_networks
            .iter()
            .map(|text| parse_network(text))
            .collect::<Result<Vec<_>, _>>()?;
        let rules = Arc::new(Rules { config, allowed });
        let policy_rules = Arc::clone(&rules);
        let redirect = reqwest::redirect::Policy::custom(move |attempt| {
            let max = policy_rules.config.max_redirects;
            if attempt.previous().len() >= max {
                return attempt.error(format!("more than {max} redirects"));
            }
            match policy_rules.check(attempt.url()) {
                Ok(()) => attempt.follow(),
                Err(reason) => attempt.error(Blocked(reason)),
            }
        });
        let build = |redirect: reqwest::redirect::Policy| {
            let mut builder = cairn_llm::tls::client_builder()
                .redirect(redirect)
                .no_proxy()
                .timeout(rules.config.timeout)
                .user_agent(rules.config.user_agent.clone());
            if rules.config.block_private_networks {
                builder = builder.dns_resolver(Arc::new(PermittedOnlyResolver(Arc::clone(&rules))));
            }
            builder
                .build()
                .map_err(|e| ToolError::Http(format!("cannot build the HTTP client: {e}")))
        };
        let client = build(redirect)?;
        let manual = match rules.config.credentials.is_empty() {
            true => None,
            false => Some(build(reqwest::redirect::Policy::none())?),
        };
        Ok(Self {
            rules,
            client,
            manual,
        })
    }

    /// The configuration the rules come from.
    pub fn config(&self) -> &HttpConfig {
        &self.rules.config
    }

    /// Parses a URL the model gave and checks it against the rules.
    pub fn parse_url(&self, raw: &str) -> Result<Url, ToolError> {
        let url = Url::parse(raw.trim())
            .map_err(|e| ToolError::InvalidArguments(format!("bad url `{raw}`: {e}")))?;
        self.rules.check(&url).map_err(ToolError::NotPermitted)?;
        Ok(url)
    }

    /// Checks a URL some other client will request (the browser's pages):
    /// the scheme, the allowed hosts and, for addresses written in it, their
    /// class. A name is checked when it resolves ([`Self::permitted_addrs`]).
    pub fn check_url(&self, url: &Url) -> Result<(), String> {
        self.rules.check(url)
    }

    /// The addresses of `host` a connection may reach under the rules
    /// (every one, when private networks are not blocked); refused, saying
    /// why, when none may: the check a DNS answer gets in [`Self::send`].
    pub async fn permitted_addrs(&self, host: &str, port: u16) -> Result<Vec<SocketAddr>, String> {
        let bare = host.trim_start_matches('[').trim_end_matches(']');
        let found: Vec<SocketAddr> = match bare.parse::<IpAddr>() {
            Ok(ip) => vec![SocketAddr::new(ip, port)],
            Err(_) => tokio::net::lookup_host((bare, port))
                .await
                .map_err(|e| format!("cannot resolve `{bare}`: {e}"))?
                .collect(),
        };
        let permitted: Vec<SocketAddr> = found
            .iter()
            .copied()
            .filter(|addr| self.rules.permits(addr.ip()))
            .collect();
        match (found.first(), permitted.is_empty()) {
            (None, _) => Err(format!("`{bare}` has no address")),
            (Some(addr), true) if bare.parse::<IpAddr>().is_ok() => Err(format!(
                "address {} is private or local; such addresses are refused \
                 (tools.http.allowed_private_networks lets chosen ones through)",
                addr.ip()
            )),
            (Some(_), true) => Err(format!(
                "`{bare}` resolves only to private or local addresses, which are refused"
            )),
            (Some(_), false) => Ok(permitted),
        }
    }

    /// A request through the rules' client (check the URL first with [`Self::parse_url`]).
    pub fn request(&self, method: Method, url: Url) -> reqwest::RequestBuilder {
        self.client.request(method, url)
    }

    /// Sends a request; a refusal met after DNS or on a redirect is
    /// [`ToolError::NotPermitted`], like the first check.
    pub async fn send(
        &self,
        request: reqwest::RequestBuilder,
    ) -> Result<reqwest::Response, ToolError> {
        request.send().await.map_err(|e| self.map_err(&e))
    }

    /// Reads at most `max` bytes of the body; the rest is not downloaded.
    pub async fn read_body(
        &self,
        response: reqwest::Response,
        max: usize,
    ) -> Result<Body, ToolError> {
        let mut bytes = Vec::new();
        let mut stream = response.bytes_stream();
        while let Some(chunk) = stream.next().await {
            let chunk = chunk.map_err(|e| self.map_err(&e))?;
            let room = max.saturating_sub(bytes.len());
            if chunk.len() > room {
                bytes.extend_from_slice(&chunk[..room]);
                return Ok(Body { bytes, cut: true });
            }
            bytes.extend_from_slice(&chunk);
        }
        Ok(Body { bytes, cut: false })
    }

    /// A GET of `url` (already checked) with these `Accept` types, its body
    /// read up to `tools.http.max_response_bytes`.
    pub async fn get(&self, url: Url, accept: &str) -> Result<Fetched, ToolError> {
        let mut headers = reqwest::header::HeaderMap::new();
        if let Ok(accept) = reqwest::header::HeaderValue::from_str(accept) {
            headers.insert(reqwest::header::ACCEPT, accept);
        }
        let response = self.exchange(Method::GET, url, headers, None).await?;
        let final_url = response.url().clone();
        let status = response.status();
        let content_type = content_type(&response);
        let body = self
            .read_body(response, self.rules.config.max_response_bytes)
            .await?;
        Ok(Fetched {
            final_url,
            status,
            content_type,
            body,
        })
    }

    /// The tool error for a failed request.
    pub fn map_err(&self, e: &reqwest::Error) -> ToolError {
        if let Some(blocked) = blocked_in(e) {
            return ToolError::NotPermitted(blocked.0.clone());
        }
        if e.is_timeout() {
            ToolError::Timeout(self.rules.config.timeout)
        } else {
            ToolError::Http(cairn_core::text::error_chain(e))
        }
    }
}

/// A response's `Content-Type`, lower-cased; empty when absent.
pub fn content_type(response: &reqwest::Response) -> String {
    response
        .headers()
        .get(reqwest::header::CONTENT_TYPE)
        .map(|v| String::from_utf8_lossy(v.as_bytes()).to_ascii_lowercase())
        .unwrap_or_default()
}

/// `10.0.0.0/8`, or a bare address (`127.0.0.1`: that address alone),
/// read like `gateway.trusted_proxies`.
fn parse_network(text: &str) -> Result<IpRange, ToolError> {
    text.parse::<IpRange>().map_err(|e| {
        ToolError::InvalidArguments(format!("tools.http.allowed_private_networks: {e}"))
    })
}

impl Rules {
    /// Whether a connection to `ip` is allowed.
    fn permits(&self, ip: IpAddr) -> bool {
        let ip = match ip {
            IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
            v4 => v4,
        };
        !self.config.block_private_networks
            || is_public(ip)
            || self.allowed.iter().any(|net| net.contains(ip))
    }

    /// Checks scheme, host allow-list and (for IP literals and `localhost`)
    /// the address class; names resolve through the same rule later.
    fn check(&self, url: &Url) -> Result<(), String> {
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
        let allowed_hosts = &self.config.allowed_hosts;
        if !allowed_hosts.is_empty()
            && !allowed_hosts.iter().any(|allowed| {
                let allowed = allowed.trim().trim_end_matches('.').to_ascii_lowercase();
                host_text == allowed || host_text.ends_with(&format!(".{allowed}"))
            })
        {
            return Err(format!("host `{host_text}` is not in the allowed hosts"));
        }
        if (host_text == "localhost" || host_text.ends_with(".localhost"))
            && !self.permits(IpAddr::from([127, 0, 0, 1]))
        {
            return Err(format!(
                "host `{host_text}` is local; private and local addresses are refused"
            ));
        }
        // IPv6 literals come bracketed in URLs.
        let bare = host_text.trim_start_matches('[').trim_end_matches(']');
        if let Some(ip) = bare.parse::<IpAddr>().ok().filter(|ip| !self.permits(*ip)) {
            return Err(format!(
                "address {ip} is private or local; such addresses are refused \
                 (tools.http.allowed_private_networks lets chosen ones through)"
            ));
        }
        Ok(())
    }
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

/// Resolves with the system resolver and drops every address the rules
/// refuse, so a public name that points inside (or rebinds to) the network
/// is refused.
#[derive(Debug)]
struct PermittedOnlyResolver(Arc<Rules>);

impl Resolve for PermittedOnlyResolver {
    fn resolve(&self, name: Name) -> Resolving {
        let host = name.as_str().to_string();
        let rules = Arc::clone(&self.0);
        Box::pin(async move {
            let addrs: Vec<SocketAddr> = tokio::net::lookup_host((host.as_str(), 0))
                .await?
                .filter(|addr| rules.permits(addr.ip()))
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

#[cfg(test)]
mod tests {
    use super::*;

    fn rules(config: HttpConfig) -> Rules {
        let allowed = config
            .allowed_private_networks
            .iter()
            .map(|n| parse_network(n).unwrap())
            .collect();
        Rules { config, allowed }
    }

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
        let r = rules(HttpConfig::default());
        let check = |u: &str| r.check(&Url::parse(u).unwrap());
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
        let only = rules(HttpConfig {
            allowed_hosts: vec!["example.com".into()],
            ..HttpConfig::default()
        });
        assert!(
            only.check(&Url::parse("https://api.example.com/").unwrap())
                .is_ok()
        );
        assert!(
            only.check(&Url::parse("https://evil-example.com/").unwrap())
                .is_err()
        );
    }

    #[test]
    fn allowed_private_networks_let_only_themselves_through() {
        let r = rules(HttpConfig {
            allowed_private_networks: vec!["127.0.0.1".into(), "192.168.1.0/24".into()],
            ..HttpConfig::default()
        });
        let check = |u: &str| r.check(&Url::parse(u).unwrap());
        assert!(check("http://127.0.0.1:8080/").is_ok());
        assert!(check("http://[::ffff:127.0.0.1]/").is_ok());
        assert!(check("http://localhost:8080/").is_ok());
        assert!(check("http://192.168.1.20/").is_ok());
        assert!(check("http://127.0.0.2/").is_err());
        assert!(check("http://192.168.2.1/").is_err());
        assert!(check("http://10.0.0.1/").is_err());
        assert!(check("http://169.254.169.254/").is_err());
        assert!(matches!(
            parse_network("not-a-net"),
            Err(ToolError::InvalidArguments(m)) if m.contains("allowed_private_networks")
        ));
    }
}
